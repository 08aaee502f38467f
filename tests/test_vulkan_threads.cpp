// Several threads on one Vulkan device, none of them locking anything: each unit of the
// device's context (recorder, pipelines, pool) keeps its own lock (backends/vulkan/context.hpp),
// and a capture keeps the recorder from begin to end, so another thread's work waits for it
// and never lands in the captured step.
#ifdef EMBER_VULKAN
#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <ember/stacks/vulkan_graph.hpp>

#include "harness.hpp"

namespace test_vulkan_threads {

using ember::Tensor;
using V = ember::Vulkan;

namespace {

/// Runs `body(t)` on `n` threads at once; returns each thread's error (empty: none).
template <class F>
std::vector<std::string> on_threads(int n, F body) {
    std::vector<std::string> errors(static_cast<std::size_t>(n));
    std::vector<std::thread> threads;
    for (int t = 0; t < n; ++t)
        threads.emplace_back([&, t] {
            try {
                body(t);
            } catch (const std::exception& e) {
                errors[static_cast<std::size_t>(t)] = e.what();
            }
        });
    for (auto& th : threads) th.join();
    return errors;
}

/// x * 2 + 1 applied `n` times (two dispatches each): an exact integer result for small x.
Tensor<V, 1> chain(Tensor<V, 1> x, int n) {
    for (int i = 0; i < n; ++i) x = x * 2.0 + 1.0;
    return x;
}

}  // namespace

TEST_CASE("vulkan threads: ops from four threads share a device, nobody locking", "[vulkan]") {
    EMBER_SKIP_IF_UNAVAILABLE(V);
    // Each thread its own values and its own ops (so pipelines are created concurrently too);
    // every result is an integer exact in f32.
    const auto errors = on_threads(4, [](int t) {
        for (int i = 0; i < 40; ++i) {
            const float a0 = static_cast<float>(t * 100 + i);
            auto a = Tensor<V, 2>::full({8, 16}, a0);
            auto b = Tensor<V, 2>::ones({16, 4});
            Tensor<V, 2> c = a.matmul(b) + 1.0;  // 16·a0 + 1 everywhere
            if (t % 2 == 1) c = c.abs();
            if (t == 2) c = c.clamp(-1e9, 1e9);
            const double got = c.sum().into_scalar();
            const double want = 32.0 * (16.0 * a0 + 1.0);
            if (got != want)
                throw std::runtime_error("thread " + std::to_string(t) + " iteration " +
                                         std::to_string(i) + ": " + std::to_string(got) +
                                         " != " + std::to_string(want));
        }
    });
    for (const auto& e : errors) CHECK(e.empty());
}

TEST_CASE("vulkan threads: another thread's work waits for a capture and stays out of it",
          "[vulkan][graph]") {
    EMBER_SKIP_IF_UNAVAILABLE(V);
    const int n = 12;
    auto x = Tensor<V, 1>::from_data(ember::TensorData(std::vector<float>{0, 1, 2, 3}, {4}));
    // x_n = 2^n (x + 1) - 1
    std::vector<float> want;
    for (float v : {0.f, 1.f, 2.f, 3.f}) want.push_back((v + 1) * float(1 << n) - 1);
    (void)chain(x, n).into_data();  // pipelines made before either capture

    std::optional<Tensor<V, 1>> alone_out;
    const auto alone = ember::vulkan::capture([&] { alone_out.emplace(chain(x, n)); });
    REQUIRE(alone.num_nodes() == static_cast<std::size_t>(2 * n));  // a multiply and an add each

    std::atomic<bool> started{false};
    std::optional<Tensor<V, 1>> out;
    ember::vulkan::CapturedStep captured;
    double other = 0;
    const auto errors = on_threads(2, [&](int t) {
        if (t == 0) {
            captured = ember::vulkan::capture([&] {
                auto y = chain(x, n / 2);
                started = true;
                // Give the other thread time to try recording mid-step.
                std::this_thread::sleep_for(std::chrono::milliseconds(50));
                out.emplace(chain(y, n - n / 2));
            });
        } else {
            while (!started) std::this_thread::yield();
            auto w = Tensor<V, 1>::full({256}, 3.0f);
            other = (w * 2.0 + 1.0).sum().into_scalar();  // waits for the capture to end
        }
    });
    for (const auto& e : errors) REQUIRE(e.empty());
    CHECK(other == 256.0 * 7.0);
    CHECK(captured.num_nodes() == alone.num_nodes());  // the other thread's dispatches not in it
    CHECK(out->into_data().to_vec<float>() == want);
    captured.replay();
    CHECK(out->into_data().to_vec<float>() == want);
}

}  // namespace test_vulkan_threads

#endif
