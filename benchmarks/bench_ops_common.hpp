#pragma once
// What bench_scale_ops (ResNet-18's ops) and bench_scale_gpt_ops (the GPT's) share: their
// command line's common options, the process's CPU time and the timing loop of one op class.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <ctime>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace bench_ops {

/// The options both programs take (each sets its own defaults before parse).
struct Opts {
    std::size_t threads = 1, batch = 0, seq = 0;
    double min_time = 0.3;
    std::set<std::string> only;  // op classes to time (every class when empty)
    std::string shape;           // only rows whose shape contains this
};

/// Reads "--name value" pairs into `o`: --threads, --batch, --min-time, --shape, --only (a
/// comma-separated list of classes) and, where `with_seq`, --seq. False, after a message naming
/// `program`, on any other name.
inline bool parse(int argc, char** argv, const char* program, bool with_seq, Opts& o) {
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string a = argv[i], v = argv[i + 1];
        if (a == "--threads") {
            o.threads = std::stoul(v);
        } else if (a == "--batch") {
            o.batch = std::stoul(v);
        } else if (with_seq && a == "--seq") {
            o.seq = std::stoul(v);
        } else if (a == "--min-time") {
            o.min_time = std::stod(v);
        } else if (a == "--shape") {
            o.shape = v;
        } else if (a == "--only") {
            std::stringstream ss(v);
            for (std::string t; std::getline(ss, t, ',');) o.only.insert(t);
        } else {
            std::fprintf(stderr, "%s: unknown option %s\n", program, a.c_str());
            return false;
        }
    }
    return true;
}

/// CPU seconds of the whole process (all threads), in ms.
inline double cpu_ms() {
    timespec t{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return double(t.tv_sec) * 1e3 + double(t.tv_nsec) * 1e-6;
}

struct Time {
    double cpu = 0, wall = 0;  // median process CPU ms, fastest wall ms of one call
};

/// One class's time less another's (never below zero): a backward less its forward.
inline Time operator-(Time a, Time b) {
    return {std::max(a.cpu - b.cpu, 0.0), std::max(a.wall - b.wall, 0.0)};
}

/// The machine this runs on is shared: process CPU time (the median of the calls) moves little
/// with other load, wall time (the fastest call) is what threads buy. One untimed call first,
/// then calls until o.min_time has passed (at least 3, at most max_reps).
template <typename F>
Time timed(const Opts& o, F&& f, std::size_t max_reps = 50) {
    using Clock = std::chrono::steady_clock;
    f();
    std::vector<double> cpu, wall;
    const auto end = Clock::now() + std::chrono::duration<double>(o.min_time);
    while (cpu.size() < 3 || (Clock::now() < end && cpu.size() < max_reps)) {
        const double c0 = cpu_ms();
        const auto t0 = Clock::now();
        f();
        wall.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
        cpu.push_back(cpu_ms() - c0);
    }
    std::sort(cpu.begin(), cpu.end());
    return {cpu[cpu.size() / 2], *std::min_element(wall.begin(), wall.end())};
}

/// The JSON lines of a run: one a (class, shape) as it is timed, then the classes' totals
/// (Σ count·ms) in the order they first appeared.
struct Report {
    std::size_t threads = 1;
    std::map<std::string, double> totals, wall_totals;
    std::vector<std::string> order;

    /// One shape of class `op`, run `count` times a step, timed as `t`.
    void emit(const char* op, const std::string& shape, std::size_t count, Time t) {
        std::printf(
            "{\"framework\": \"ember\", \"op\": \"%s\", \"shape\": \"%s\", \"count\": %zu, "
            "\"cpu_ms\": %.4f, \"wall_ms\": %.4f, \"threads\": %zu}\n",
            op, shape.c_str(), count, t.cpu, t.wall, threads);
        std::fflush(stdout);
        if (!totals.count(op)) order.push_back(op);
        totals[op] += double(count) * t.cpu;
        wall_totals[op] += double(count) * t.wall;
    }

    /// The classes' totals, a line each; returns their sum.
    Time print_totals() {
        Time sum;
        for (const auto& op : order) {
            std::printf(
                "{\"framework\": \"ember\", \"op\": \"%s\", \"total_cpu_ms\": %.3f, "
                "\"total_wall_ms\": %.3f, \"threads\": %zu}\n",
                op.c_str(), totals[op], wall_totals[op], threads);
            sum.cpu += totals[op];
            sum.wall += wall_totals[op];
        }
        return sum;
    }
};

}  // namespace bench_ops
