#pragma once
// The examples' backend, chosen at run time: every example runs on ember::Dispatch, and its
// --backend option (default: the environment variable EMBER_BACKEND, else "cpu") is a device
// string of Dispatch's parser: cpu, vulkan[:i] or cuda[:i], optionally followed by +fusion.
// The examples add autodiff themselves where they train, so a device string need not say it.
// A string the parser refuses (malformed, or a backend this build lacks) is a command-line
// error: one line on stderr naming the problem, exit status 2 (cli.hpp's rule).
#include <ember/dispatch/dispatch.hpp>

#include <string>

#include "cli.hpp"

namespace ember_examples {

/// The environment variable that gives --backend its default.
inline constexpr const char* kBackendEnv = "EMBER_BACKEND";

/// Accepts what ember::DispatchDevice::parse accepts; the failure is the parser's message.
inline CLI::Validator backend_device() {
    return CLI::Validator(
        [](std::string& text) -> std::string {
            try {
                (void)ember::DispatchDevice::parse(text);
                return {};
            } catch (const ember::Error& e) {
                return e.what();
            }
        },
        "BACKEND");
}

/// Adds --backend to `cmd`, bound to `backend` ("cpu" unless EMBER_BACKEND says otherwise).
inline CLI::Option* add_backend_option(CLI::App* cmd, std::string& backend) {
    std::string help = "the device to run on: cpu, vulkan[:i] or cuda[:i], optionally +fusion "
                       "(this build has: ";
    const auto have = ember::Dispatch::backends();
    for (std::size_t i = 0; i < have.size(); ++i) help += (i ? ", " : "") + have[i];
    help += "; default: $" + std::string(kBackendEnv) + " or cpu)";
    return cmd->add_option("--backend", backend, help)
        ->envname(kBackendEnv)
        ->check(backend_device());
}

/// The device `backend` names (a string add_backend_option has already validated).
inline ember::DispatchDevice backend_device_of(const std::string& backend) {
    return ember::DispatchDevice::parse(backend);
}

}  // namespace ember_examples
