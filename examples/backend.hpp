#pragma once
// The examples' backend, chosen at run time: every training example runs on ember::Dispatch, and
// its --backend option (default: the environment variable EMBER_BACKEND, else "cpu") is a device
// string of Dispatch's parser: cpu, vulkan[:i] or cuda[:i], optionally followed by +fusion.
// The examples add autodiff themselves where they train, so a device string need not say it.
// A string the parser refuses (malformed, or a backend this build lacks) is a command-line
// error: one line on stderr naming the problem, exit status 2 (cli.hpp's rule).
#include <ember/dispatch/dispatch.hpp>

#include <cstdlib>
#include <initializer_list>
#include <iostream>
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

/// Adds --backend to `cmd`, bound to `backend`; backend_from_env() then supplies the default.
inline CLI::Option* add_backend_option(CLI::App* cmd, std::string& backend) {
    std::string help =
        "the device to run on: cpu, vulkan[:i] or cuda[:i], optionally +fusion "
        "(this build has: ";
    const auto have = ember::Dispatch::backends();
    for (std::size_t i = 0; i < have.size(); ++i) help += (i ? ", " : "") + have[i];
    help += "; default: $" + std::string(kBackendEnv) + ", else cpu)";
    return cmd->add_option("--backend", backend, help)->check(backend_device());
}

/// After parse_or_exit: where none of `options` (the --backend options add_backend_option made)
/// was given, `backend` comes from EMBER_BACKEND when it is set. A value the parser refuses exits
/// with status 2 after one line on stderr, as a bad --backend does. (Read here rather than by
/// CLI11, whose environment values are checked before --help, so that --help always works.)
inline void backend_from_env(const CLI::App& app, std::initializer_list<const CLI::Option*> options,
                             std::string& backend) {
    for (const auto* o : options)
        if (o->count() > 0) return;
    const char* env = std::getenv(kBackendEnv);
    if (env == nullptr || *env == '\0') return;
    try {
        (void)ember::DispatchDevice::parse(env);
    } catch (const ember::Error& e) {
        std::cerr << app.get_name() << ": " << kBackendEnv << ": " << e.what() << " (see "
                  << app.get_name() << " --help)\n";
        std::exit(2);
    }
    backend = env;
}

/// The device `backend` names (a string add_backend_option has already validated).
inline ember::DispatchDevice backend_device_of(const std::string& backend) {
    return ember::DispatchDevice::parse(backend);
}

}  // namespace ember_examples
