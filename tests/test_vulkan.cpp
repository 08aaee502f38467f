// Vulkan-specific behaviour: the memory pool, in-place reuse, device selection errors, limits,
// asynchronous execution, and the on-disk caches. The backend-agnostic suites (TestBackends,
// AutodiffBackends) cover the ops themselves against PyTorch fixtures.
#ifdef EMBER_VULKAN
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <span>

#include "../backends/vulkan/shader_registry.hpp"
#include "../backends/vulkan/spirv_coop.hpp"
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
/// a [m, k] and b [k, n] of small integers and their product c, computed on the host: exact in
/// f32 (and f16), whatever order a kernel sums in.
std::array<std::vector<float>, 3> exact_product(std::size_t m, std::size_t k, std::size_t n) {
    std::vector<float> a(m * k), b(k * n), c(m * n, 0.0f);
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = float(int(i % 7) - 3);
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = float(int(i % 5) - 2);
    for (std::size_t i = 0; i < m; ++i)
        for (std::size_t l = 0; l < k; ++l)
            for (std::size_t j = 0; j < n; ++j) c[i * n + j] += a[i * k + l] * b[l * n + j];
    return {a, b, c};
}

/// a·b on the device equals the host's product, with row-major operands and with transposed
/// (strided) ones.
void check_exact_product(std::size_t m, std::size_t k, std::size_t n) {
    const auto [a, b, c] = exact_product(m, k, n);
    auto ta = Tensor<V, 2>::from_data(TensorData(a, {m, k}));
    auto tb = Tensor<V, 2>::from_data(TensorData(b, {k, n}));
    REQUIRE(ta.matmul(tb).into_data().to_vec<float>() == c);
    auto tt = tb.transpose().matmul(ta.transpose()).transpose();
    REQUIRE(tt.into_data().to_vec<float>() == c);
}

/// Whether the on-disk cache directory holds a file whose name contains `what`.
bool cache_has(const std::string& what) {
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
        found = found || e.path().filename().string().find(what) != std::string::npos;
    return found;
}
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

TEST_CASE("vulkan: the profiler times every dispatch, by kernel", "[vulkan]") {
    VK_REQUIRE_DEVICE();
    auto count = [](const std::vector<ember::vulkan::KernelTime>& t) {
        std::size_t n = 0;
        for (const auto& k : t) n += k.dispatches;
        return n;
    };
    V::sync({});  // the next command buffer is the first timed
    ember::vulkan::kernel_times({}, true);  // empty (EMBER_VULKAN_PROFILE=1 may have timed some)
    ember::vulkan::set_profiling(true);
    CHECK(ember::vulkan::kernel_times().empty());  // nothing recorded since the sync
    // 2 × 100 dependent dispatches: several command buffers of 64.
    const auto s0 = ember::vulkan::execution_stats();
    auto x = Tensor<V, 1>::zeros({4096});
    for (int k = 0; k < 100; ++k) x = (std::move(x) * 0.5f).sin();
    const auto times = ember::vulkan::kernel_times();
    const auto s1 = ember::vulkan::execution_stats();
    REQUIRE(!times.empty());
    CHECK(count(times) == s1.dispatches - s0.dispatches);  // each dispatch timed once
    double total = 0;
    for (std::size_t i = 0; i < times.size(); ++i) {
        INFO(times[i].kernel);
        CHECK(!times[i].kernel.empty());
        CHECK(times[i].microseconds >= 0);
        if (i > 0) CHECK(times[i - 1].microseconds >= times[i].microseconds);  // most first
        total += times[i].microseconds;
    }
    CHECK(total > 0);
    // Stopped: later work is not timed; reset empties the table.
    ember::vulkan::set_profiling(false);
    V::sync({});
    x = x.cos();
    CHECK(count(ember::vulkan::kernel_times({}, true)) == count(times));
    CHECK(ember::vulkan::kernel_times().empty());
    CHECK(x.into_data().to_vec<float>().size() == 4096);
}

TEST_CASE("vulkan: the pipeline cache is written to disk", "[vulkan]") {
    VK_REQUIRE_DEVICE();
    auto x = Tensor<V, 1>::ones({16}).sin().cos();
    V::sync({});  // a host wait persists new pipelines
    REQUIRE(cache_has("pipelines.bin"));
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
                           {100, 36, 68}})
        check_exact_product(m, k, n);  // transposed (strided) operands take the same kernels
}

TEST_CASE("vulkan: products with K split over slices agree", "[vulkan]") {
    VK_REQUIRE_DEVICE();
    // EMBER_VULKAN_MATMUL_SPLIT forces the split where K allows it (4 and 8 are the tuner's
    // candidates; any count can be forced); K = 100 is not divisible by 8 or 16 and runs
    // unsplit. Exact: small integers.
    for (const char* split : {"4", "8", "16"}) {
        const ScopedEnv forced("EMBER_VULKAN_MATMUL_SPLIT", split);
        for (auto [m, k, n] :
             {std::array<std::size_t, 3>{64, 784, 512}, {33, 256, 65}, {5, 128, 7}, {20, 100, 9}}) {
            INFO("split " << split << ", " << m << " x " << k << " x " << n);
            // Strided operands too: the slices' offsets follow each operand's K stride.
            check_exact_product(m, k, n);
        }
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
            auto [a, b, c] = exact_product(m, k, n);
            auto ta = Tensor<V, 2>::from_data(TensorData(a, {m, k}));
            auto tb = Tensor<V, 2>::from_data(TensorData(b, {k, n}));
            REQUIRE(ta.matmul(tb).into_data().to_vec<float>() == c);
        }
        // Batched, with B broadcast over the batch (batch stride 0).
        INFO("kernel " << kernel << ", [3, 70, 20] @ [20, 136]");
        auto [a, b, c] = exact_product(3 * 70, 20, 136);
        auto ta = Tensor<V, 3>::from_data(TensorData(a, {3, 70, 20}));
        auto tb = Tensor<V, 2>::from_data(TensorData(b, {20, 136})).unsqueeze();
        REQUIRE(ta.matmul(tb).into_data().to_vec<float>() == c);
    }
    // A configuration the shader cannot take is an error, not a silent fallback.
    {
        const ScopedEnv forced("EMBER_VULKAN_MATMUL_KERNEL", "128:128:8:8:8:3:0");
        auto [a, b, c] = exact_product(64, 32, 64);
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
          "256:128:16:4:2:1:1", "128:256:32:2:4:0:0", "128:128:32:2:4:1:1", "128:128:48:2:2:0:1"}) {
        const ScopedEnv config("EMBER_VULKAN_COOP_CONFIG", coop);
        for (auto [m, k, n] : shapes) {
            INFO("f16, coop config '" << coop << "', " << m << "x" << k << " @ " << k << "x" << n);
            auto [a, b, c] = exact_product(m, k, n);
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
TEST_CASE("vulkan: casts to f16 and bf16 round to nearest even", "[vulkan]") {
    VK_REQUIRE_DEVICE();
    // Values around every binade of f16, ties of both parities, overflow and subnormals; the
    // expected words are those of IEEE round-to-nearest-even (f16: 10 fraction bits, from 2^-14
    // down to 2^-24 a step, 65520 and up to infinity; bf16: 7 fraction bits).
    const std::vector<float> x = {0.1f,     -0.1f,         1.0f / 3,    2049.0f,     2051.0f,
                                  65504.0f, 65519.0f,      65520.0f,    -70000.0f,   1e-5f,
                                  3e-8f,    2.9802322e-8f, 6.1e-5f,     1.00048828f, 1.00146484f,
                                  257.0f,   259.0f,        -3.14159265f};
    auto f16 = [](float v) {  // reference RNE through the bits
        const auto u = std::bit_cast<std::uint32_t>(v);
        const std::uint32_t a = u & 0x7fffffffu, sign = u & 0x80000000u;
        if (a >= 0x477ff000u) return std::bit_cast<float>(sign | 0x7f800000u);
        if (a < 0x38800000u) return std::nearbyint(v * 16777216.0f) / 16777216.0f;
        return std::bit_cast<float>((u + 0xfffu + ((u >> 13) & 1u)) & 0xffffe000u);
    };
    auto bf16 = [](float v) {
        const auto u = std::bit_cast<std::uint32_t>(v);
        return std::bit_cast<float>((u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u);
    };
    auto t = Tensor<V, 1>::from_data(TensorData(x, {x.size()}));
    const auto h =
        t.clone().cast(ember::DType::F16).cast(ember::DType::F32).into_data().to_vec<float>();
    const auto b = t.cast(ember::DType::BF16).cast(ember::DType::F32).into_data().to_vec<float>();
    for (std::size_t i = 0; i < x.size(); ++i) {
        INFO("x = " << x[i]);
        REQUIRE(std::bit_cast<std::uint32_t>(h[i]) == std::bit_cast<std::uint32_t>(f16(x[i])));
        REQUIRE(std::bit_cast<std::uint32_t>(b[i]) == std::bit_cast<std::uint32_t>(bf16(x[i])));
    }
}
TEST_CASE("vulkan: bf16 matmuls and 16-column fragments", "[vulkan]") {
    VK_REQUIRE_DEVICE();
    const auto info = ember::vulkan::cooperative_matrix_info();
    INFO("cooperative matrices: '" << info.extension << "', f16 " << info.f16 << ", bf16 "
                                   << info.bf16 << ", f16 16x16x16 " << info.f16_16x16
                                   << ", workgroup scope " << info.workgroup_scope);
    // Products of integers in [-2, 2] and [-1, 1] over k <= 128: |c| <= 256, which bf16 (8
    // significant bits) holds exactly, so every path must give exactly the f32 product.
    auto product = [](std::size_t batch, std::size_t m, std::size_t k, std::size_t n) {
        std::vector<float> a(batch * m * k), b(k * n), c(batch * m * n, 0.0f);
        for (std::size_t i = 0; i < a.size(); ++i) a[i] = float(int(i % 5) - 2);
        for (std::size_t i = 0; i < b.size(); ++i) b[i] = float(int(i % 3) - 1);
        for (std::size_t q = 0; q < batch; ++q)
            for (std::size_t i = 0; i < m; ++i)
                for (std::size_t l = 0; l < k; ++l)
                    for (std::size_t j = 0; j < n; ++j)
                        c[(q * m + i) * n + j] += a[(q * m + i) * k + l] * b[l * n + j];
        return std::tuple{a, b, c};
    };
    using Shape4 = std::array<std::size_t, 4>;  // batch, m, k, n
    const std::vector<Shape4> odd_shapes = {{1, 1, 1, 1},      {1, 17, 33, 9},
                                            {1, 70, 20, 136},  {1, 128, 128, 128},
                                            {1, 200, 64, 130}, {3, 70, 20, 136}};
    auto check = [&](ember::DType dt, const std::vector<Shape4>& shapes) {
        for (auto [batch, m, k, n] : shapes) {
            INFO(ember::dtype_name(dt)
                 << " [" << batch << ", " << m << ", " << k << "] @ [" << k << ", " << n << "]");
            auto [a, b, c] = product(batch, m, k, n);
            auto ta = Tensor<V, 3>::from_data(TensorData(a, {batch, m, k})).cast(dt);
            auto tb = Tensor<V, 2>::from_data(TensorData(b, {k, n})).cast(dt).unsqueeze();
            auto r = ta.clone().matmul(tb.clone());
            REQUIRE(r.dtype() == dt);
            REQUIRE(r.cast(ember::DType::F32).into_data().to_vec<float>() == c);
            // Transposed (strided) operands are packed the same way.
            auto tt = tb.transpose().matmul(ta.transpose()).transpose();
            REQUIRE(tt.cast(ember::DType::F32).into_data().to_vec<float>() == c);
        }
    };
    // Each forced configuration ("bm:bn:bk:sgm:sgn:db:pack:fn") on every shape.
    auto check_configs = [&](ember::DType dt, std::initializer_list<const char*> configs) {
        for (const char* coop : configs) {
            INFO("coop config " << coop);
            const ScopedEnv config("EMBER_VULKAN_COOP_CONFIG", coop);
            check(dt, odd_shapes);
        }
    };
    SECTION("bf16: tensor cores where the device has them, else the f32 tiles") {
        check(ember::DType::BF16, odd_shapes);
        if (info.bf16) {
            check_configs(ember::DType::BF16, {"128:128:48:2:2:0:1:16", "128:128:64:2:4:0:1:16",
                                               "128:256:32:2:4:0:1:16", "64:64:64:2:2:0:1:16",
                                               "128:128:32:2:2:1:1:16"});
            // bf16 has only 16 x 16 x 16 fragments of packed operands.
            for (const char* bad : {"128:128:64:2:4:0:1:8", "128:128:64:2:4:0:0:16"}) {
                const ScopedEnv config("EMBER_VULKAN_COOP_CONFIG", bad);
                auto x = Tensor<V, 2>::ones({32, 32}).cast(ember::DType::BF16);
                REQUIRE_THROWS_AS(x.clone().matmul(x), ember::ArgumentError);
            }
        }
    }
    SECTION("f16 in 16 x 16 x 16 fragments") {
        if (info.f16_16x16)
            check_configs(ember::DType::F16,
                          {"128:128:48:2:2:0:1:16", "128:128:64:2:4:0:1:16", "64:64:64:2:2:0:1:16",
                           "128:128:32:2:4:0:0:16", "128:256:32:2:4:0:1:16"});
        check(ember::DType::F16, odd_shapes);  // tuned (128 x 128 x 128) and heuristic picks
    }
    SECTION("workgroup-scope matrices (VK_NV_cooperative_matrix2) where the device has them") {
        if (info.workgroup_scope) {
            // Shapes every tile below divides (the kernel has no edge tiles), batched too, and
            // odd ones, which the coop kernel takes instead.
            const std::vector<Shape4> whole = {
                {1, 256, 64, 256}, {2, 256, 128, 512}, {1, 512, 128, 256}};
            for (const char* cm2 :
                 {"128:256:32", "256:128:32", "128:128:64", "64:256:64", "256:64:64",
                  "128:128:32:4", "128:256:32:0:2", "128:128:64:0:2"}) {
                INFO("workgroup-scope config " << cm2);
                const ScopedEnv config("EMBER_VULKAN_CM2_CONFIG", cm2);
                for (auto dt : {ember::DType::F16, ember::DType::BF16}) {
                    if (dt == ember::DType::BF16 && !info.bf16) continue;
                    check(dt, whole);
                    check(dt, {{1, 70, 20, 136}, {1, 256, 48, 256}});
                }
            }
            // Loops of 8 steps need K a multiple of 256: f16 only, whose 11 significant bits
            // hold these products exactly (|c| <= 1024).
            for (const char* cm2 : {"128:256:32:0:8", "128:256:32:16:8", "256:128:32:0:4"}) {
                INFO("workgroup-scope config " << cm2);
                const ScopedEnv config("EMBER_VULKAN_CM2_CONFIG", cm2);
                check(ember::DType::F16, {{1, 256, 256, 256}, {2, 256, 512, 256}});
            }
        }
        // A tile no workgroup-scope shape fits (or no such matrices at all): an ArgumentError,
        // where 16-bit matmuls run on tensor cores.
        if (info.f16) {
            const ScopedEnv config("EMBER_VULKAN_CM2_CONFIG", "100:128:32");
            auto x = Tensor<V, 2>::ones({256, 256}).cast(ember::DType::F16);
            REQUIRE_THROWS_AS(x.clone().matmul(x), ember::ArgumentError);
        }
    }
    SECTION("non-integer products come out rounded to the dtype, within half an ulp") {
        // Whether v is an f16 (11 significant bits, exponents from -14, subnormals below) or a
        // bf16 (the low 16 bits of the f32 word zero) value, and its ulp there.
        auto ulp16 = [](float v, ember::DType dt) {
            int e = 0;
            std::frexp(v, &e);  // |v| = m * 2^e, m in [0.5, 1)
            return dt == ember::DType::BF16 ? std::ldexp(1.0f, e - 8)
                                            : std::ldexp(1.0f, std::max(e, -13) - 11);
        };
        auto representable = [&](float v, ember::DType dt) {
            if (v == 0.0f) return true;
            if (dt == ember::DType::BF16) return (std::bit_cast<std::uint32_t>(v) & 0xffffu) == 0;
            return std::fabs(v) <= 65504.0f && std::fmod(v, ulp16(v, dt)) == 0.0f;
        };
        for (auto dt : {ember::DType::F16, ember::DType::BF16})
            for (auto [m, k, n] : {std::array<std::size_t, 3>{256, 256, 256}, {200, 72, 130}}) {
                INFO(ember::dtype_name(dt) << " " << m << " x " << k << " x " << n);
                auto a = Tensor<V, 2>::random({m, k}, ember::Distribution::Uniform(-1, 1)).cast(dt);
                auto b = Tensor<V, 2>::random({k, n}, ember::Distribution::Uniform(-1, 1)).cast(dt);
                const auto ref = a.clone()
                                     .cast(ember::DType::F32)
                                     .matmul(b.clone().cast(ember::DType::F32))
                                     .into_data()
                                     .to_vec<float>();
                const auto got = a.matmul(b).cast(ember::DType::F32).into_data().to_vec<float>();
                std::size_t unrounded = 0, far = 0;
                for (std::size_t i = 0; i < got.size(); ++i) {
                    unrounded += !representable(got[i], dt);
                    // Half an ulp of rounding, as much again, and 1e-4 for f32 sums of k terms
                    // of at most 1 in another order (which matters where they cancel).
                    far += std::fabs(got[i] - ref[i]) > ulp16(ref[i], dt) + 1e-4f;
                }
                REQUIRE(unrounded == 0);
                REQUIRE(far == 0);
            }
    }
    SECTION("the tuned configuration is remembered on disk") {
        // 128^3 multiply-adds: tuned. Every candidate ran on these operands above or runs now.
        auto [a, b, c] = product(1, 128, 128, 128);
        for (auto dt : {ember::DType::F16, ember::DType::BF16}) {
            auto ta = Tensor<V, 2>::from_data(TensorData(a, {128, 128})).cast(dt);
            auto tb = Tensor<V, 2>::from_data(TensorData(b, {128, 128})).cast(dt);
            REQUIRE(ta.matmul(tb).cast(ember::DType::F32).into_data().to_vec<float>() == c);
        }
        if (info.f16) REQUIRE(cache_has("matmul-coop-f16-autotune.txt"));
        if (info.bf16) REQUIRE(cache_has("matmul-coop-bf16-autotune.txt"));
    }
}
TEST_CASE("vulkan: the cooperative-matrix SPIR-V moves from NV to KHR", "[vulkan]") {
    using ember::detail::vk::coop_nv_to_khr;
    using ember::detail::vk::CoopElement;
    using u32 = std::uint32_t;
    // An embedded shader's SPIR-V.
    auto embedded = [](const std::string& name) {
        for (std::size_t i = 0; i < ember::detail::vk::kNumShaders; ++i)
            if (ember::detail::vk::kShaders[i].name == name)
                return std::span<const u32>(ember::detail::vk::kShaders[i].words,
                                            ember::detail::vk::kShaders[i].count);
        FAIL("no embedded shader " << name);
        return std::span<const u32>();
    };
    const std::span<const u32> nv = embedded("matmul_coop");
    // Instructions (opcode, words) of a module, checking that their word counts tile it.
    auto walk = [](std::span<const u32> w) {
        std::vector<std::pair<u32, std::span<const u32>>> r;
        std::size_t at = 5;
        while (at < w.size()) {
            const u32 n = w[at] >> 16;
            REQUIRE(n > 0);
            REQUIRE(at + n <= w.size());
            r.push_back({w[at] & 0xffff, w.subspan(at, n)});
            at += n;
        }
        REQUIRE(at == w.size());
        return r;
    };
    auto count = [](const auto& insts, u32 op) {
        return std::count_if(insts.begin(), insts.end(), [&](auto& i) { return i.first == op; });
    };
    const auto before = walk(nv);
    // OpCooperativeMatrix{Load,Store,MulAdd}NV = 5359-5361.
    REQUIRE(count(before, 5359) >= 2);
    REQUIRE(count(before, 5361) >= 1);
    for (CoopElement elem : {CoopElement::F16, CoopElement::BF16}) {
        const bool bf16 = elem == CoopElement::BF16;
        INFO((bf16 ? "bf16" : "f16"));
        const std::vector<u32> khr = coop_nv_to_khr(nv, elem);
        const auto after = walk(khr);
        REQUIRE(khr[0] == 0x07230203u);
        const u32 bound = khr[3];
        REQUIRE(bound == nv[3] + 3);  // three integer constants: 0, 1, 2
        // No NV instruction or capability is left; each has its KHR twin (4456-4460).
        for (u32 op = 5358; op <= 5362; ++op) REQUIRE(count(after, op) == 0);
        REQUIRE(count(after, 4457) == count(before, 5359));
        REQUIRE(count(after, 4458) == count(before, 5360));
        REQUIRE(count(after, 4459) == count(before, 5361));
        REQUIRE(count(after, 4456) == count(before, 5358));
        std::map<u32, u32> constants;  // id → value of 32-bit integer OpConstants
        std::set<u32> caps;
        std::vector<std::string> exts;
        u32 half_words = 0;
        for (const auto& [op, w] : after) {
            if (op == 43 && w.size() == 4) constants[w[2]] = w[3];
            if (op == 17) caps.insert(w[1]);
            if (op == 10) exts.emplace_back(reinterpret_cast<const char*>(w.data() + 1));
            if (op == 22 && w[2] == 16) half_words = static_cast<u32>(w.size());
        }
        REQUIRE(caps.count(6022));  // CooperativeMatrixKHR
        REQUIRE_FALSE(caps.count(5357));
        REQUIRE(std::count(exts.begin(), exts.end(), "SPV_KHR_cooperative_matrix") == 1);
        REQUIRE(std::count(exts.begin(), exts.end(), "SPV_NV_cooperative_matrix") == 0);
        REQUIRE((std::count(exts.begin(), exts.end(), "SPV_KHR_bfloat16") == 1) == bf16);
        REQUIRE((caps.count(5116) && caps.count(5118)) == bf16);  // BFloat16 type, coop
        REQUIRE(half_words == (bf16 ? 4u : 3u));                  // OpTypeFloat 16 [BFloat16KHR]
        // One matrix type per use: A (0) and B (1) of 16-bit floats, the accumulator (2).
        std::multiset<u32> uses;
        for (const auto& [op, w] : after)
            if (op == 4456) {
                REQUIRE(w.size() == 7);
                REQUIRE(constants.count(w[6]));
                uses.insert(constants[w[6]]);
            }
        REQUIRE(uses == std::multiset<u32>{0, 1, 2});
        // Loads and stores: a layout constant (row-major here), then the stride.
        for (const auto& [op, w] : after) {
            if (op == 4457) REQUIRE(constants.at(w[4]) == 0);
            if (op == 4458) REQUIRE(constants.at(w[3]) == 0);
        }
        // Every instruction the rewrite did not touch is the same, in the same order.
        std::size_t same = 0;
        for (const auto& instr : after)  // not a structured binding: Clang < 16 cannot capture one
            same += std::any_of(before.begin(), before.end(), [&](auto& b) {
                return b.first == instr.first &&
                       std::equal(instr.second.begin(), instr.second.end(), b.second.begin(),
                                  b.second.end());
            });
        // Changed: the NV instructions (5358-5362), the capability, the extension, and for bf16
        // the 16-bit float type.
        std::size_t changed = 2 + (bf16 ? 1 : 0);
        for (u32 op = 5358; op <= 5362; ++op) changed += count(before, op);
        REQUIRE(same + changed >= before.size());
    }
    SECTION("workgroup-scope loads become tensor loads (VK_NV_cooperative_matrix2)") {
        const std::span<const u32> src = embedded("matmul_cm2");
        const auto orig = walk(src);
        for (CoopElement elem : {CoopElement::F16, CoopElement::BF16}) {
            const std::vector<u32> out = coop_nv_to_khr(src, elem, true);
            const auto after = walk(out);
            REQUIRE(out[1] == 0x00010600u);  // SPIR-V 1.6, which tensor addressing needs
            std::map<u32, u32> constants;
            std::map<u32, std::span<const u32>> types;  // matrix type id → its words
            std::set<u32> caps;
            std::vector<std::string> exts;
            for (const auto& [op, w] : after) {
                if (op == 43 && w.size() == 4) constants[w[2]] = w[3];
                if (op == 4456) types[w[1]] = w;
                if (op == 17) caps.insert(w[1]);
                if (op == 10) exts.emplace_back(reinterpret_cast<const char*>(w.data() + 1));
            }
            REQUIRE(caps.count(6022));
            REQUIRE(caps.count(5433));  // CooperativeMatrixTensorAddressingNV
            REQUIRE(caps.count(5439));  // TensorAddressingNV
            for (const char* e : {"SPV_KHR_cooperative_matrix", "SPV_NV_cooperative_matrix2",
                                  "SPV_NV_tensor_addressing"})
                REQUIRE(std::count(exts.begin(), exts.end(), e) == 1);
            // Workgroup scope (2) on every matrix type.
            for (const auto& [id, w] : types) REQUIRE(constants.at(w[3]) == 2);
            // One 2-d layout type, clamp mode Constant (1).
            REQUIRE(count(after, 5370) == 1);
            u32 layout_type = 0;
            for (const auto& [op, w] : after)
                if (op == 5370) {
                    layout_type = w[1];
                    REQUIRE(constants.at(w[2]) == 2);
                    REQUIRE(constants.at(w[3]) == 1);
                }
            // Each NV load became a tensor load (5367), none a plain KHR load (4457); its
            // layout is the matrix's rows x columns with the load's row stride.
            std::vector<u32> strides;
            for (const auto& [op, w] : orig)
                if (op == 5359) strides.push_back(w[4]);
            REQUIRE(count(after, 4457) == 0);
            REQUIRE(count(after, 5367) == static_cast<std::ptrdiff_t>(strides.size()));
            std::size_t seen = 0;
            for (std::size_t i = 4; i < after.size(); ++i) {
                if (after[i].first != 5367) continue;
                const auto& load = after[i].second;
                const auto& undef = after[i - 4].second;
                const auto& create = after[i - 3].second;
                const auto& dim = after[i - 2].second;
                const auto& stride = after[i - 1].second;
                REQUIRE(load.size() == 8);
                REQUIRE(after[i - 4].first == 1);
                REQUIRE(undef[1] == load[1]);  // OpUndef of the matrix type: the object
                REQUIRE(load[4] == undef[2]);
                REQUIRE(after[i - 3].first == 5372);
                REQUIRE(create[1] == layout_type);
                REQUIRE(after[i - 2].first == 5373);
                REQUIRE(dim[3] == create[2]);
                const auto& type = types.at(load[1]);
                REQUIRE((dim[4] == type[4] && dim[5] == type[5]));  // rows, columns
                REQUIRE(after[i - 1].first == 5374);
                REQUIRE(stride[3] == dim[2]);
                REQUIRE(stride[4] == strides[seen]);
                REQUIRE(constants.at(stride[5]) == 1);
                REQUIRE(load[5] == stride[2]);
                REQUIRE((load[6] == 0 && load[7] == 0));  // no memory or tensor operands
                ++seen;
            }
            REQUIRE(seen == strides.size());
        }
    }
    SECTION("malformed modules and misuse are FormatErrors") {
        REQUIRE_THROWS_AS(coop_nv_to_khr(nv.first(4), CoopElement::F16), ember::FormatError);
        std::vector<u32> bad(nv.begin(), nv.end());
        bad[0] = 0x12345678u;
        REQUIRE_THROWS_AS(coop_nv_to_khr(bad, CoopElement::F16), ember::FormatError);
        bad = std::vector<u32>(nv.begin(), nv.end());
        bad[5] = (1000u << 16) | (bad[5] & 0xffffu);  // an instruction past the end
        REQUIRE_THROWS_AS(coop_nv_to_khr(bad, CoopElement::F16), ember::FormatError);
        // A hand-made module: one 16 x 16 half matrix type read as both A and B of a
        // multiply-add (KHR types carry one use), and a half constant (arithmetic bf16 lacks).
        const u32 magic[] = {0x07230203u, 0x00010500u, 0u, 20u, 0u};
        auto inst = [](std::vector<u32>& m, u32 op, std::initializer_list<u32> ops) {
            m.push_back(static_cast<u32>(ops.size() + 1) << 16 | op);
            m.insert(m.end(), ops);
        };
        std::vector<u32> m(std::begin(magic), std::end(magic));
        inst(m, 21, {1, 32, 0});         // %1 = OpTypeInt 32 0
        inst(m, 22, {2, 16});            // %2 = OpTypeFloat 16
        inst(m, 22, {3, 32});            // %3 = OpTypeFloat 32
        inst(m, 43, {1, 4, 3});          // %4 = OpConstant %1 3 (subgroup scope)
        inst(m, 43, {1, 5, 16});         // %5 = OpConstant %1 16
        inst(m, 5358, {6, 2, 4, 5, 5});  // %6 = 16 x 16 half matrix
        inst(m, 5358, {7, 3, 4, 5, 5});  // %7 = 16 x 16 f32 matrix
        inst(m, 1, {6, 8});              // %8 = OpUndef %6
        inst(m, 1, {7, 9});              // %9 = OpUndef %7
        std::vector<u32> both = m;
        inst(both, 5361, {7, 10, 8, 8, 9});  // %10 = %8 x %8 + %9
        REQUIRE_THROWS_AS(coop_nv_to_khr(both, CoopElement::F16), ember::FormatError);
        std::vector<u32> arith = m;
        inst(arith, 43, {2, 11, 0x3c00});  // %11 = OpConstant %2 1.0
        REQUIRE_NOTHROW(coop_nv_to_khr(arith, CoopElement::F16));
        REQUIRE_THROWS_AS(coop_nv_to_khr(arith, CoopElement::BF16), ember::FormatError);
        // A column-major load: fine for KHR, which has the layout, but not as a tensor load.
        std::vector<u32> column = m;
        inst(column, 20, {12});                 // %12 = OpTypeBool
        inst(column, 41, {12, 13});             // %13 = OpConstantTrue
        inst(column, 5359, {6, 14, 8, 5, 13});  // %14 = column-major load (pointer %8)
        REQUIRE_NOTHROW(coop_nv_to_khr(column, CoopElement::F16));
        REQUIRE_THROWS_AS(coop_nv_to_khr(column, CoopElement::F16, true), ember::FormatError);
        // Tensor layouts take unsigned constants: a module with a signed 32-bit integer only.
        std::vector<u32> sign = m;
        sign[5 + 1 + 2] = 1;  // %1 = OpTypeInt 32 1
        REQUIRE_NOTHROW(coop_nv_to_khr(sign, CoopElement::F16));
        REQUIRE_THROWS_AS(coop_nv_to_khr(sign, CoopElement::F16, true), ember::FormatError);
    }
}
#endif

namespace test_vulkan {

#undef VK_REQUIRE_DEVICE

}  // namespace test_vulkan
