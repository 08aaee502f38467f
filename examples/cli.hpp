#pragma once
// The examples' command lines, through CLI11 (Debian: libcli11-dev): typed, validated options,
// subcommands, generated --help and --version. One rule for every example and for ember-onnx:
// a bad command line prints one line naming the problem (and a hint to --help) on stderr and
// exits with status 2, as POSIX utilities do; --help and --version print to stdout and exit 0.
#include <CLI/CLI.hpp>

#include <cstdlib>
#include <iostream>
#include <string>

#ifndef EMBER_VERSION_STRING
#define EMBER_VERSION_STRING "unknown"
#endif

namespace ember_examples {

/// A number for which `ok` holds; a failure says "must be `want`" (e.g. "in [0, 1)").
inline CLI::Validator number_where(const char* name, bool (*ok)(double), const char* want) {
    return CLI::Validator(
        [ok, want](std::string& text) -> std::string {
            double v = 0;
            if (!CLI::detail::lexical_cast(text, v)) return "'" + text + "' is not a number";
            return ok(v) ? std::string() : "must be " + std::string(want) + ", got " + text;
        },
        name);
}

/// A number above zero (CLI11's PositiveNumber prints the whole range of double on failure).
inline const CLI::Validator positive = number_where(
    "POSITIVE", [](double v) { return v > 0; }, "positive");
/// A number at or above zero.
inline const CLI::Validator non_negative = number_where(
    "NONNEGATIVE", [](double v) { return v >= 0; }, "zero or more");

/// Gives `app` (made as `CLI::App app{description, name}`) a --version flag and defaults shown
/// in --help.
inline void setup(CLI::App& app) {
    app.set_version_flag("--version", app.get_name() + " (ember " EMBER_VERSION_STRING ")");
    app.option_defaults()->always_capture_default();
}

/// Parses the command line into `app`'s bound variables. Returns normally only when the program
/// should go on; --help and --version exit 0, any error exits 2 after one line on stderr.
inline void parse_or_exit(CLI::App& app, int argc, char** argv) {
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        std::exit(app.exit(e));
    } catch (const CLI::CallForAllHelp& e) {
        std::exit(app.exit(e));
    } catch (const CLI::CallForVersion& e) {
        std::exit(app.exit(e));
    } catch (const CLI::ParseError& e) {
        std::string what = e.what();
        for (char& c : what)
            if (c == '\n') c = ' ';
        std::cerr << app.get_name() << ": " << what << " (see " << app.get_name()
                  << " --help)\n";
        std::exit(2);
    }
}

}  // namespace ember_examples
