// CUDA-specific behaviour: the caching pool, the TF32 switch, device errors, f16/bf16 and the
// cuBLAS paths (transposed views, broadcast batches) against the CPU backend. Skipped without
// a GPU; compiled only when the build has the CUDA backend.
#if defined(EMBER_CUDA)
#include <ember/backend/cuda.hpp>

#include "cuda_harness.hpp"
#include "harness.hpp"

namespace {
using ember::Cpu;
using ember::Cuda;
using ember::Tensor;
using ember::TensorData;

template <std::size_t D>
Tensor<Cpu, D> on_cpu(const Tensor<Cuda, D>& t) {
    return Tensor<Cpu, D>::from_data(t.to_data(), {});
}
}  // namespace

TEST_CASE("cuda: without a device, ops throw DeviceError", "[cuda]") {
    if (ember::cuda::is_available()) {
        CHECK_THROWS_AS((Tensor<Cuda, 1>::zeros({4}, ember::CudaDevice{1000})), ember::DeviceError);
        return;
    }
    CHECK(ember::cuda::device_count() == 0);
    CHECK_THROWS_AS((Tensor<Cuda, 1>::zeros({4})), ember::DeviceError);
}

TEST_CASE("cuda: the pool reuses freed blocks", "[cuda]") {
    REQUIRE_GPU();
    ember::cuda::empty_cache();
    const auto before = ember::cuda::memory_stats();
    {
        auto a = Tensor<Cuda, 1>::zeros({1 << 20});
        CHECK(ember::cuda::memory_stats().bytes_in_use >= before.bytes_in_use + (4u << 20));
    }
    const auto mid = ember::cuda::memory_stats();
    CHECK(mid.bytes_in_use == before.bytes_in_use);
    CHECK(mid.bytes_reserved >= before.bytes_reserved + (4u << 20));
    {
        auto b = Tensor<Cuda, 1>::ones({1 << 20});  // same size class: no new cudaMalloc
        CHECK(ember::cuda::memory_stats().num_driver_allocs == mid.num_driver_allocs);
        CHECK(b.sum().into_scalar() == Approx(1 << 20));
    }
    ember::cuda::empty_cache();
    CHECK(ember::cuda::memory_stats().bytes_reserved < mid.bytes_reserved);
}

TEST_CASE("cuda: running out of device memory is a DeviceError with the size, and recoverable",
          "[cuda][errors]") {
    REQUIRE_GPU();
    const auto before = ember::cuda::memory_stats();
    // 2^40 floats = 4 TiB: more than any GPU has, so cudaMalloc fails even after the cache is
    // given back; the error names the bytes asked for and the driver's reason.
    try {
        auto huge = Tensor<Cuda, 1>::zeros({std::size_t{1} << 40});
        FAIL("a 4 TiB tensor was allocated");
    } catch (const ember::DeviceError& e) {
        CHECK_THAT(e.what(), Catch::Contains("cudaMalloc of 4398046511104 bytes") &&
                                 Catch::Contains("cudaErrorMemoryAllocation"));
    }
    // Nothing leaked into the books, and the device still works.
    CHECK(ember::cuda::memory_stats().bytes_in_use == before.bytes_in_use);
    auto ok = Tensor<Cuda, 1>::ones({1024});
    CHECK(ok.sum().into_scalar() == Approx(1024));
}

TEST_CASE("cuda: in-place reuse of a moved unique tensor", "[cuda]") {
    REQUIRE_GPU();
    auto a = Tensor<Cuda, 1>::ones({1 << 16});
    const void* p = a.primitive().storage->data;
    auto b = std::move(a) * 3.0;
    CHECK(b.primitive().storage->data == p);
    CHECK(b.sum().into_scalar() == Approx(3.0 * (1 << 16)));
}

TEST_CASE("cuda: matmul of views and broadcast batches equals the CPU's", "[cuda]") {
    REQUIRE_GPU();
    ember::Cpu::seed(7);
    auto a = Tensor<Cpu, 3>::random({3, 17, 9}, ember::Distribution::Default);
    auto b = Tensor<Cpu, 3>::random({1, 17, 5}, ember::Distribution::Default);
    auto ga = Tensor<Cuda, 3>::from_data(a.to_data(), {});
    auto gb = Tensor<Cuda, 3>::from_data(b.to_data(), {});
    // aᵀ·b with a transposed view and a broadcast batch of b.
    auto want = a.swap_dims(1, 2).matmul(b);
    auto got = ga.swap_dims(1, 2).matmul(gb);
    ember::test::check_close(got.to_data(), want.to_data(), {1e-5, 1e-5});
}

TEST_CASE("cuda: per-channel and bias broadcasts (the vectorised paths) compute each element",
          "[cuda]") {
    REQUIRE_GPU();
    // x [N, C, H, W] against a per-channel [1, C, 1, 1] (four elements share a channel), and
    // [N, C] against a bias [C] (four neighbours take four channels), either operand first; a
    // strided channel view and odd sizes take the generic kernel. Expected values from loops.
    const auto values = [](std::size_t n, float scale) {
        std::vector<float> v(n);
        for (std::size_t i = 0; i < n; ++i) v[i] = scale * (float(i % 23) - 11.f) + 0.5f;
        return v;
    };
    const auto op = [](char o, float a, float b) {
        return o == '+' ? a + b : o == '-' ? a - b : o == '*' ? a * b : a / b;
    };
    const auto apply = [&](char o, const auto& x, const auto& y) {
        return o == '+' ? x + y : o == '-' ? x - y : o == '*' ? x * y : x / y;
    };
    for (char o : {'+', '-', '*', '/'}) {
        INFO("op " << o);
        for (std::size_t hw : {std::size_t{16}, std::size_t{9}}) {  // 9: not a multiple of four
            const std::size_t n = 3, c = 8, len = n * c * hw;
            const auto xv = values(len, 0.25f);
            const auto cv = values(2 * c, 0.5f);  // every other value: a strided view
            auto x = Tensor<Cuda, 4>::from_data(TensorData(xv, {n, c, hw, 1}), {});
            // [1, 2C, 1, 1] seen through a step-2 slice: a channel operand of stride 2.
            auto all = Tensor<Cuda, 4>::from_data(TensorData(cv, {1, 2 * c, 1, 1}), {});
            for (bool strided : {false, true}) {
                INFO("hw " << hw << (strided ? ", strided channel" : ""));
                std::vector<float> ch(c);
                for (std::size_t k = 0; k < c; ++k) ch[k] = strided ? cv[2 * k] : cv[k];
                auto cg = strided ? all.slice({ember::Slice{}, ember::Slice{0, long(2 * c), 2}})
                                  : Tensor<Cuda, 4>::from_data(TensorData(ch, {1, c, 1, 1}), {});
                std::vector<float> want(len), want_first(len);
                for (std::size_t i = 0; i < len; ++i) {
                    want[i] = op(o, xv[i], ch[(i / hw) % c]);
                    want_first[i] = op(o, ch[(i / hw) % c], xv[i]);
                }
                ember::test::check_close(apply(o, x, cg).to_data(), TensorData(want, {n, c, hw, 1}),
                                         {1e-6, 1e-6});
                ember::test::check_close(apply(o, cg, x).to_data(),
                                         TensorData(want_first, {n, c, hw, 1}), {1e-6, 1e-6});
            }
        }
        for (std::size_t c : {std::size_t{12}, std::size_t{7}}) {  // 7: not a multiple of four
            INFO("bias of " << c);
            const std::size_t rows = 5;
            const auto xv = values(rows * c, 0.3f), bv = values(c, 0.7f);
            auto x = Tensor<Cuda, 2>::from_data(TensorData(xv, {rows, c}), {});
            auto bias = Tensor<Cuda, 1>::from_data(TensorData(bv, {c}), {});
            std::vector<float> want(rows * c), want_first(rows * c);
            for (std::size_t i = 0; i < rows * c; ++i) {
                want[i] = op(o, xv[i], bv[i % c]);
                want_first[i] = op(o, bv[i % c], xv[i]);
            }
            ember::test::check_close(apply(o, x, bias.unsqueeze()).to_data(),
                                     TensorData(want, {rows, c}), {1e-6, 1e-6});
            ember::test::check_close(apply(o, bias.unsqueeze(), x).to_data(),
                                     TensorData(want_first, {rows, c}), {1e-6, 1e-6});
        }
    }
}

TEST_CASE("cuda: a long-k product with a small output (split k) is exact on integers", "[cuda]") {
    REQUIRE_GPU();
    // [12, 9000] · [9000, 7] and its transposed spelling aᵀ with a stored [9000, 12]: k long
    // enough for the split-K path. Small integers keep every partial sum exact in f32, so the
    // expected product (computed here in double) must match exactly.
    constexpr std::size_t m = 12, k = 9000, n = 7;
    std::vector<float> a(m * k), b(k * n);
    for (std::size_t i = 0; i < m; ++i)
        for (std::size_t j = 0; j < k; ++j) a[i * k + j] = float((i + 3 * j) % 5) - 2.f;
    for (std::size_t i = 0; i < k; ++i)
        for (std::size_t j = 0; j < n; ++j) b[i * n + j] = float((2 * i + j) % 3) - 1.f;
    std::vector<float> want(m * n);
    for (std::size_t i = 0; i < m; ++i)
        for (std::size_t j = 0; j < n; ++j) {
            double acc = 0;
            for (std::size_t p = 0; p < k; ++p) acc += double(a[i * k + p]) * b[p * n + j];
            want[i * n + j] = float(acc);
        }
    auto ga = Tensor<Cuda, 2>::from_data(TensorData(a, {m, k}), {});
    auto gb = Tensor<Cuda, 2>::from_data(TensorData(b, {k, n}), {});
    CHECK(ga.matmul(gb).to_data().to_vec<float>() == want);
    // The same values stored transposed, seen through transpose() views (cuBLAS's op flags).
    auto stored_transposed = [](const std::vector<float>& v, std::size_t r, std::size_t c) {
        std::vector<float> t(v.size());
        for (std::size_t i = 0; i < r; ++i)
            for (std::size_t j = 0; j < c; ++j) t[j * r + i] = v[i * c + j];
        return Tensor<Cuda, 2>::from_data(TensorData(t, {c, r}), {}).transpose();
    };
    CHECK(stored_transposed(a, m, k).matmul(gb).to_data().to_vec<float>() == want);
    CHECK(ga.matmul(stored_transposed(b, k, n)).to_data().to_vec<float>() == want);
}

TEST_CASE("cuda: TF32 is off by default and switchable", "[cuda]") {
    REQUIRE_GPU();
    CHECK_FALSE(ember::cuda::allow_tf32());
    auto a = Tensor<Cuda, 2>::random({256, 256}, ember::Distribution::Default);
    auto exact = on_cpu(a).matmul(on_cpu(a));
    ember::test::check_close(a.matmul(a).to_data(), exact.to_data(), {1e-5, 1e-5});
    ember::cuda::set_allow_tf32(true);
    CHECK(ember::cuda::allow_tf32());
    // TF32 keeps 10 mantissa bits: close, not exact.
    ember::test::check_close(a.matmul(a).to_data(), exact.to_data(), {1e-2, 1e-2});
    ember::cuda::set_allow_tf32(false);
}

TEST_CASE("cuda: f16 and bf16 tensors", "[cuda]") {
    REQUIRE_GPU();
    auto x = Tensor<Cuda, 2>::from_data(TensorData({1.f, -2.f, 3.5f, 0.25f}, {2, 2}), {});
    for (auto dt : {ember::DType::F16, ember::DType::BF16}) {
        auto h = x.cast(dt);
        CHECK(h.dtype() == dt);
        auto y = (h * 2.0 + h).matmul(h).cast(ember::DType::F32).exp();
        auto want = (x * 3.0).matmul(x).exp();
        ember::test::check_close(y.to_data(), want.to_data(), {5e-2, 5e-2});
    }
}

TEST_CASE("cuda: f16/bf16 elementwise ops compute in f32 and round once", "[cuda]") {
    REQUIRE_GPU();
    // The half kernels (16-bit loads, f32 arithmetic, one rounding on the store) must give the
    // bits of the definition: the operands cast to f32, the op in f32, the result cast back.
    // Dense operands, a broadcast bias and a transposed view (the strided kernels) each.
    std::vector<float> xs(24 * 16), ys(24 * 16), bs(16);
    for (std::size_t i = 0; i < xs.size(); ++i) {
        xs[i] = static_cast<float>(static_cast<int>((i * 37) % 101) - 50) / 7.f;
        ys[i] = static_cast<float>(static_cast<int>((i * 53) % 89) + 1) / 13.f;
    }
    for (std::size_t i = 0; i < bs.size(); ++i) bs[i] = 0.5f + static_cast<float>(i) / 3.f;
    const auto x = Tensor<Cuda, 2>::from_data(TensorData(xs, {24, 16}), {});
    const auto y = Tensor<Cuda, 2>::from_data(TensorData(ys, {24, 16}), {});
    const auto b = Tensor<Cuda, 2>::from_data(TensorData(bs, {1, 16}), {});
    for (auto dt : {ember::DType::F16, ember::DType::BF16}) {
        INFO(std::string(ember::dtype_name(dt)));
        const auto xh = x.cast(dt), yh = y.cast(dt), bh = b.cast(dt);
        const auto xf = xh.cast(ember::DType::F32), yf = yh.cast(ember::DType::F32),
                   bf = bh.cast(ember::DType::F32);
        const auto same = [&](const Tensor<Cuda, 2>& got, const Tensor<Cuda, 2>& f32) {
            CHECK(got.dtype() == dt);
            CHECK(got.cast(ember::DType::F32).to_data().to_vec<float>() ==
                  f32.cast(dt).cast(ember::DType::F32).to_data().to_vec<float>());
        };
        same(xh.exp(), xf.exp());
        same(xh.tanh(), xf.tanh());
        same(yh.sqrt(), yf.sqrt());
        same(-xh, -xf);
        same(xh + yh, xf + yf);
        same(xh * yh, xf * yf);
        same(xh / yh, xf / yf);
        same(xh - bh, xf - bf);  // broadcast
        same(xh.swap_dims(0, 1).matmul(yh).cast(ember::DType::F32).cast(dt),
             xf.swap_dims(0, 1).matmul(yf));  // the cast path itself
        same(yh.swap_dims(0, 1) * xh.swap_dims(0, 1),
             yf.swap_dims(0, 1) * xf.swap_dims(0, 1));  // strided views
        same(xh * 0.1, xf * 0.1);
        same(xh.swap_dims(0, 1) + 3.0, xf.swap_dims(0, 1) + 3.0);
        same(xh.powf_scalar(2.0), xf.powf_scalar(2.0));
    }
}

TEST_CASE("cuda: bad indices throw before anything is written", "[cuda]") {
    REQUIRE_GPU();
    auto t = Tensor<Cuda, 2>::zeros({2, 3});
    auto bad = Tensor<Cuda, 1, ember::Int>::from_data(TensorData({0L, 5L}, {2}), {});
    CHECK_THROWS_AS(t.select(1, bad), ember::IndexError);
    auto i = Tensor<Cuda, 1, ember::Int>::from_data(TensorData({4L, 0L}, {2}), {});
    CHECK_THROWS_AS((i / Tensor<Cuda, 1, ember::Int>::zeros({2})), ember::ArgumentError);
}

TEST_CASE("cuda: sync waits and results stay correct across many queued ops", "[cuda]") {
    REQUIRE_GPU();
    auto x = Tensor<Cuda, 1>::zeros({1000});
    for (int k = 0; k < 200; ++k) x = std::move(x) + 1.0;
    Cuda::sync({});
    CHECK(x.sum().into_scalar() == Approx(200000.0));
}
#endif
