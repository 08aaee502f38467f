#pragma once
// What bench_scale's two source files share: the options, the timing loop and the JSON line.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <ctime>
#include <optional>
#include <string>
#include <vector>

namespace bench_scale {

struct Options {
    std::string command;  // train | infer
    std::string model = "mlp";
    std::size_t batch = 64;
    std::size_t seq = 256;  // the GPT's tokens per sequence (train; infer uses the ONNX graph's)
    std::vector<std::size_t> threads{1};
    std::string init_from, batch_from;
    std::size_t loss_steps = 0;
    double min_time = 1.0;  // seconds of timed steps per thread count
    std::size_t max_reps = 50;
    std::size_t warmup = 1;
    std::size_t seed = 42;
};

struct Timing {
    double median = 0, mean = 0;  // seconds per step
    double best = 0;              // the fastest step's seconds
    double cpu = 0;               // the process's CPU seconds a step (median): all threads' work,
                                  // spinning included; on a shared machine steadier than wall time
    std::size_t reps = 0;
};

/// The process's CPU time so far (all threads), seconds.
inline double process_cpu_seconds() {
    timespec t{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

/// "1,2,4" as numbers.
std::vector<std::size_t> parse_list(const std::string& s);

/// Runs `f` --warmup times, then until --min-time seconds have passed (at least twice, at most
/// --max-reps times): the median and mean of those runs.
template <typename F>
Timing time_it(const Options& o, F&& f) {
    using Clock = std::chrono::steady_clock;
    for (std::size_t i = 0; i < o.warmup; ++i) f();
    std::vector<double> s, c;
    const auto start = Clock::now();
    while (s.size() < 2 ||
           (s.size() < o.max_reps &&
            std::chrono::duration<double>(Clock::now() - start).count() < o.min_time)) {
        const double c0 = process_cpu_seconds();
        const auto t0 = Clock::now();
        f();
        s.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
        c.push_back(process_cpu_seconds() - c0);
    }
    auto median = [](std::vector<double>& v) {
        std::sort(v.begin(), v.end());
        return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
    };
    Timing t;
    t.reps = s.size();
    for (const double x : s) t.mean += x / double(s.size());
    t.median = median(s);
    t.best = s.front();
    t.cpu = median(c);
    return t;
}

/// One JSON line of a timed thread count.
void print_timing(const Options& o, const char* kind, std::size_t threads, const Timing& t,
                  std::optional<double> loss = std::nullopt);

/// `bench_scale infer`: forward passes of the ONNX-imported models (bench_scale_infer.cpp).
void infer(const Options& o);

}  // namespace bench_scale
