// Vulkan-specific behaviour: the memory pool, in-place reuse, device selection errors, limits,
// asynchronous execution, and the on-disk caches. The backend-agnostic suites (TestBackends,
// AutodiffBackends) cover the ops themselves against PyTorch fixtures.
#ifdef EMBER_VULKAN
#include <cstdlib>
#include <filesystem>

#include "harness.hpp"

using ember::Tensor;
using ember::TensorData;
using V = ember::Vulkan;

namespace {
#define VK_REQUIRE_DEVICE()                    \
    do {                                       \
        if (!ember::vulkan::is_available()) {  \
            WARN("skipped: no Vulkan device"); \
            return;                            \
        }                                      \
    } while (0)

/// Sets an environment variable for a scope, so that a failed REQUIRE (which leaves the scope)
/// does not carry it into later test cases.
struct ScopedEnv {
    const char* name;
    ScopedEnv(const char* n, const std::string& value) : name(n) { ::setenv(n, value.c_str(), 1); }
    ~ScopedEnv() { ::unsetenv(name); }
    ScopedEnv(const ScopedEnv&) = delete;
    ScopedEnv& operator=(const ScopedEnv&) = delete;
};
}  // namespace

TEST_CASE("vulkan: device and name", "[vulkan]") {
    VK_REQUIRE_DEVICE();
    REQUIRE(ember::vulkan::device_count() >= 1);
    REQUIRE_FALSE(ember::vulkan::device_name().empty());
    REQUIRE(V::name() == "vulkan");
    REQUIRE(ember::VulkanDevice{0} == ember::VulkanDevice{});
}

TEST_CASE("vulkan: a device index out of range is a clear error", "[vulkan]") {
    VK_REQUIRE_DEVICE();
    const auto n = static_cast<std::uint32_t>(ember::vulkan::device_count());
    ember::VulkanDevice bad{n + 3};
    auto make = [&] { return Tensor<V, 1>::zeros({4}, bad); };
    REQUIRE_THROWS_AS(make(), ember::DeviceError);
    REQUIRE_THROWS_WITH(
        make(), Catch::Contains("EMBER_VULKAN_DEVICE") && Catch::Contains(std::to_string(n + 3)));
    // The environment variable picks the default device, and must be a number.
    ::setenv("EMBER_VULKAN_DEVICE", "abc", 1);
    REQUIRE_THROWS_AS(ember::VulkanDevice{}.resolved(), ember::DeviceError);
    ::setenv("EMBER_VULKAN_DEVICE", std::to_string(n + 1).c_str(), 1);
    REQUIRE(ember::VulkanDevice{}.resolved() == n + 1);
    REQUIRE_THROWS_AS((Tensor<V, 1>::zeros({4}, ember::VulkanDevice{})), ember::DeviceError);
    ::unsetenv("EMBER_VULKAN_DEVICE");
    REQUIRE(ember::VulkanDevice{}.resolved() == 0);
}

TEST_CASE("vulkan: values round-trip for every kind", "[vulkan]") {
    VK_REQUIRE_DEVICE();
    auto f = Tensor<V, 2>::from_data(TensorData({1.5f, -2.f, 3.25f, 0.f, 7.f, -8.5f}, {2, 3}));
    REQUIRE(f.to_data().to_vec<float>() == std::vector<float>{1.5f, -2.f, 3.25f, 0.f, 7.f, -8.5f});
    const std::int64_t big = (std::int64_t{1} << 40) + 3;  // needs all 64 bits on the device
    auto i = Tensor<V, 1, ember::Int>::from_data(TensorData({big, std::int64_t{-5}}, {2}));
    REQUIRE(i.to_data().to_vec<std::int64_t>() == std::vector<std::int64_t>{big, -5});
    auto b = Tensor<V, 1, ember::Bool>::from_data(TensorData({true, false, true}, {3}));
    REQUIRE(b.to_data().to_vec<bool>() == std::vector<bool>{true, false, true});
    // Strided views read back in logical order.
    auto t = f.transpose();
    REQUIRE(t.to_data().to_vec<float>() == std::vector<float>{1.5f, 0.f, -2.f, 7.f, 3.25f, -8.5f});
}

TEST_CASE("vulkan: the pool reuses freed memory and reports it", "[vulkan]") {
    VK_REQUIRE_DEVICE();
    V::sync({});
    const auto before = ember::vulkan::memory_stats();
    {
        auto a = Tensor<V, 1>::ones({1000});  // 4000 bytes: the 4096-byte class
        const auto during = ember::vulkan::memory_stats();
        REQUIRE(during.bytes_in_use == before.bytes_in_use + 4096);
        REQUIRE(during.bytes_reserved >= during.bytes_in_use);
    }
    REQUIRE(ember::vulkan::memory_stats().bytes_in_use == before.bytes_in_use);
    const auto reused = ember::vulkan::memory_stats().num_reused;
    auto c = Tensor<V, 1>::zeros({1000});
    REQUIRE(ember::vulkan::memory_stats().num_reused == reused + 1);
    REQUIRE(c.sum().into_scalar() == 0.0f);
    // empty_cache gives back blocks that hold nothing live.
    ember::vulkan::empty_cache();
    REQUIRE(ember::vulkan::memory_stats().bytes_reserved >=
            ember::vulkan::memory_stats().bytes_in_use);
}

TEST_CASE("vulkan: a moved-in tensor is reused in place", "[vulkan]") {
    VK_REQUIRE_DEVICE();
    auto a = Tensor<V, 1>::from_data(TensorData({1.f, 2.f, 3.f}, {3}));
    const auto* buf = a.primitive().buffer.get();
    auto b = std::move(a).exp();
    REQUIRE(b.primitive().buffer.get() == buf);
    auto c = b.clone() + 1.0f;  // b is still alive: no reuse
    REQUIRE(c.primitive().buffer.get() != buf);
    ember::test::check_close(b.into_data(), TensorData({2.7182817f, 7.389056f, 20.085537f}, {3}));
}

TEST_CASE("vulkan: limits give clear errors", "[vulkan]") {
    VK_REQUIRE_DEVICE();
    // More than maxStorageBufferRange (at most 4 GiB) in one tensor.
    const std::size_t n = (std::size_t{1} << 31) + 1;  // 8 GiB of f32
    REQUIRE_THROWS_AS((Tensor<V, 1>::zeros({n})), ember::ArgumentError);
    REQUIRE_THROWS_WITH((Tensor<V, 1>::zeros({n})), Catch::Contains("maxStorageBufferRange"));
}

TEST_CASE("vulkan: a long chain of dependent ops without sync", "[vulkan]") {
    VK_REQUIRE_DEVICE();
    // 300 dependent dispatches (several command-buffer batches, buffers freed and reused in
    // stream order while earlier work may still be pending): x_{k+1} = x_k * 1 + 1.
    auto x = Tensor<V, 1>::zeros({4096});
    const auto s0 = ember::vulkan::execution_stats();
    for (int k = 0; k < 300; ++k) x = std::move(x) * 1.0f + 1.0f;
    const auto s1 = ember::vulkan::execution_stats();
    REQUIRE(s1.dispatches - s0.dispatches >= 600);
    REQUIRE(s1.submits > s0.submits);  // batches went out while recording
    const auto v = x.into_data().to_vec<float>();
    for (float e : v) REQUIRE(e == 300.0f);
    // Independent ops need no barrier between them.
    V::sync({});
    auto a = Tensor<V, 1>::ones({64});
    auto b = Tensor<V, 1>::ones({64});
    V::sync({});
    const auto s2 = ember::vulkan::execution_stats();
    auto c = a.clone().exp();
    auto d = b.clone().exp();
    auto e = a.clone().log();
    const auto s3 = ember::vulkan::execution_stats();
    REQUIRE(s3.dispatches - s2.dispatches == 3);
    REQUIRE(s3.barriers - s2.barriers <= 1);  // the batch's leading barrier at most
    REQUIRE((c + d + e).sum().into_scalar() == Approx(2 * 64 * 2.7182817));
}

TEST_CASE("vulkan: the pipeline cache is written to disk", "[vulkan]") {
    VK_REQUIRE_DEVICE();
    auto x = Tensor<V, 1>::ones({16}).sin().cos();
    V::sync({});  // a host wait persists new pipelines
    const char* dir = std::getenv("EMBER_CACHE_DIR");
    std::filesystem::path base;
    if (dir && *dir)
        base = dir;
    else if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
        base = std::filesystem::path(xdg) / "ember";
    else if (const char* home = std::getenv("HOME"); home && *home)
        base = std::filesystem::path(home) / ".cache/ember";
    else
        base = "/tmp/ember-cache";
    bool found = false;
    for (const auto& e : std::filesystem::directory_iterator(base))
        found = found || e.path().filename().string().find("pipelines.bin") != std::string::npos;
    REQUIRE(found);
}

TEST_CASE("vulkan: matmul kernels agree on odd shapes", "[vulkan]") {
    VK_REQUIRE_DEVICE();
    // Each shape hits another kernel (naive, 16/32/64/128 tiles) and ragged tile edges; the
    // expected product is exact: small integers in f32.
    for (auto [m, k, n] : {std::array<std::size_t, 3>{3, 5, 7},
                           {33, 17, 65},
                           {70, 40, 129},
                           {130, 64, 70},
                           {64, 32, 64},
                           {100, 36, 68}}) {
        std::vector<float> a(m * k), b(k * n), c(m * n, 0.0f);
        for (std::size_t i = 0; i < a.size(); ++i) a[i] = float(int(i % 7) - 3);
        for (std::size_t i = 0; i < b.size(); ++i) b[i] = float(int(i % 5) - 2);
        for (std::size_t i = 0; i < m; ++i)
            for (std::size_t j = 0; j < n; ++j)
                for (std::size_t l = 0; l < k; ++l) c[i * n + j] += a[i * k + l] * b[l * n + j];
        auto ta = Tensor<V, 2>::from_data(TensorData(a, {m, k}));
        auto tb = Tensor<V, 2>::from_data(TensorData(b, {k, n}));
        REQUIRE(ta.matmul(tb).into_data().to_vec<float>() == c);
        // Transposed (strided) operands take the same kernels.
        auto tt = tb.transpose().matmul(ta.transpose()).transpose();
        REQUIRE(tt.into_data().to_vec<float>() == c);
    }
}

TEST_CASE("vulkan: every matmul kernel and the f16 path agree on odd shapes", "[vulkan]") {
    VK_REQUIRE_DEVICE();
    // EMBER_VULKAN_MATMUL_KERNEL forces one candidate of the autotuner (an index into its
    // table; one that cannot run the problem is ignored). Shapes with K and N multiples of 4
    // also take the vec4 kernels. Small integers: every product is exact in f32 and in f16.
    const std::array<std::array<std::size_t, 3>, 7> shapes{{{33, 17, 65},
                                                            {130, 64, 132},
                                                            {129, 40, 200},
                                                            {64, 32, 64},
                                                            {257, 36, 68},
                                                            {140, 8, 132},
                                                            {96, 200, 72}}};
    auto product = [](std::size_t m, std::size_t k, std::size_t n) {
        std::vector<float> a(m * k), b(k * n), c(m * n, 0.0f);
        for (std::size_t i = 0; i < a.size(); ++i) a[i] = float(int(i % 7) - 3);
        for (std::size_t i = 0; i < b.size(); ++i) b[i] = float(int(i % 5) - 2);
        for (std::size_t i = 0; i < m; ++i)
            for (std::size_t l = 0; l < k; ++l)
                for (std::size_t j = 0; j < n; ++j) c[i * n + j] += a[i * k + l] * b[l * n + j];
        return std::array<std::vector<float>, 3>{a, b, c};
    };
    // Indices 0-13 of kVariants in backends/vulkan/matmul.cpp, then configurations of
    // matmul_large.comp ("bm:bn:bk:tm:tn:lr:gm") beyond the table's: other thread blocks, lane
    // grids, depths and tile orders, within lavapipe's 32 KiB of shared memory.
    std::vector<std::string> kernels;
    for (int i = 0; i < 14; ++i) kernels.push_back(std::to_string(i));
    for (const char* cfg :
         {"64:64:16:4:4:4:0", "128:64:8:8:8:4:2", "64:128:16:8:8:2:3", "128:256:8:8:16:4:0",
          "256:128:8:16:8:8:4", "32:64:32:4:8:8:1", "128:128:16:8:16:8:0", "64:256:8:8:16:2:0"})
        kernels.push_back(cfg);
    for (const auto& kernel : kernels) {
        const ScopedEnv forced("EMBER_VULKAN_MATMUL_KERNEL", kernel);
        for (auto [m, k, n] : shapes) {
            INFO("kernel " << kernel << ", " << m << "x" << k << " @ " << k << "x" << n);
            auto [a, b, c] = product(m, k, n);
            auto ta = Tensor<V, 2>::from_data(TensorData(a, {m, k}));
            auto tb = Tensor<V, 2>::from_data(TensorData(b, {k, n}));
            REQUIRE(ta.matmul(tb).into_data().to_vec<float>() == c);
        }
        // Batched, with B broadcast over the batch (batch stride 0).
        INFO("kernel " << kernel << ", [3, 70, 20] @ [20, 136]");
        auto [a, b, c] = product(3 * 70, 20, 136);
        auto ta = Tensor<V, 3>::from_data(TensorData(a, {3, 70, 20}));
        auto tb = Tensor<V, 2>::from_data(TensorData(b, {20, 136})).unsqueeze();
        REQUIRE(ta.matmul(tb).into_data().to_vec<float>() == c);
    }
    // A configuration the shader cannot take is an error, not a silent fallback.
    {
        const ScopedEnv forced("EMBER_VULKAN_MATMUL_KERNEL", "128:128:8:8:8:3:0");
        auto [a, b, c] = product(64, 32, 64);
        auto ta = Tensor<V, 2>::from_data(TensorData(a, {64, 32}));
        auto tb = Tensor<V, 2>::from_data(TensorData(b, {32, 64}));
        REQUIRE_THROWS_AS(ta.matmul(tb), ember::ArgumentError);
    }
    // f16 operands: tensor cores where the device has them (ragged tiles here), row-major
    // (16-byte loads where K and N allow) and transposed (scalar loads), or packed to f16
    // first, in the default configuration of matmul_coop.comp and others
    // ("bm:bn:bk:sgm:sgn:db:pack"; lavapipe has no cooperative matrices and ignores them).
    for (const char* coop :
         {"", "128:128:32:2:4:0:0", "128:128:64:2:4:0:1", "128:128:16:2:2:1:0", "64:128:32:2:4:1:1",
          "256:128:16:4:2:1:1", "128:256:32:2:4:0:0", "128:128:32:2:4:1:1"}) {
        const ScopedEnv config("EMBER_VULKAN_COOP_CONFIG", coop);
        for (auto [m, k, n] : shapes) {
            INFO("f16, coop config '" << coop << "', " << m << "x" << k << " @ " << k << "x" << n);
            auto [a, b, c] = product(m, k, n);
            auto ta = Tensor<V, 2>::from_data(TensorData(a, {m, k})).cast(ember::DType::F16);
            auto tb = Tensor<V, 2>::from_data(TensorData(b, {k, n})).cast(ember::DType::F16);
            // |c| <= 3 * 2 * 200: integers that f16 holds exactly, so the rounding changes
            // nothing.
            REQUIRE(ta.matmul(tb).cast(ember::DType::F32).into_data().to_vec<float>() == c);
            auto tt = tb.transpose().matmul(ta.transpose()).transpose();
            REQUIRE(tt.cast(ember::DType::F32).into_data().to_vec<float>() == c);
        }
    }
}

TEST_CASE("vulkan: matmul autotuning picks and remembers a kernel", "[vulkan]") {
    VK_REQUIRE_DEVICE();
    // 128^3 multiply-adds: above the tuning threshold. Every candidate runs on these operands;
    // the result must be the product whichever wins, and the winner is saved on disk.
    const std::size_t n = 128;
    std::vector<float> a(n * n), b(n * n), c(n * n, 0.0f);
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = float(int(i % 5) - 2);
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = float(int(i % 3) - 1);
    for (std::size_t i = 0; i < n; ++i)
        for (std::size_t l = 0; l < n; ++l)
            for (std::size_t j = 0; j < n; ++j) c[i * n + j] += a[i * n + l] * b[l * n + j];
    auto ta = Tensor<V, 2>::from_data(TensorData(a, {n, n}));
    auto tb = Tensor<V, 2>::from_data(TensorData(b, {n, n}));
    REQUIRE(ta.matmul(tb).into_data().to_vec<float>() == c);
    ::setenv("EMBER_AUTOTUNE", "0", 1);  // the heuristic's kernel gives the same product
    REQUIRE(ta.matmul(tb).into_data().to_vec<float>() == c);
    ::unsetenv("EMBER_AUTOTUNE");
    // f16 operands (tensor cores where the device has them) accumulate in f32: exact here.
    auto ha = ta.cast(ember::DType::F16), hb = tb.cast(ember::DType::F16);
    REQUIRE(ha.matmul(hb).into_data().to_vec<float>() == c);
}

TEST_CASE("vulkan: long reductions split over workgroups", "[vulkan]") {
    VK_REQUIRE_DEVICE();
    // 100000 elements: the two-pass path (partial sums per chunk, then their sum).
    const std::size_t n = 100000;
    auto t = Tensor<V, 1>::ones({n});
    REQUIRE(t.clone().sum().into_scalar() == float(n));
    REQUIRE(t.clone().mean().into_scalar() == 1.0f);
    auto r = Tensor<V, 1, ember::Int>::arange(0, static_cast<std::int64_t>(n));
    REQUIRE(r.clone().sum().into_scalar() == std::int64_t(n) * (std::int64_t(n) - 1) / 2);
    REQUIRE(r.clone().max().into_scalar() == std::int64_t(n) - 1);
    REQUIRE(r.argmax(0).into_scalar() == std::int64_t(n) - 1);
}
#endif
