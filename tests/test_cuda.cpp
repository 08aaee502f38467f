// CUDA-specific behaviour: the caching pool, the TF32 switch, device errors, f16/bf16 and the
// cuBLAS paths (transposed views, broadcast batches) against the CPU backend. Skipped without
// a GPU; compiled only when the build has the CUDA backend.
#if defined(EMBER_CUDA)
#include <ember/backend/cuda.hpp>

#include <cmath>

#include "cuda_harness.hpp"
#include "harness.hpp"

namespace test_cuda {

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
    // A shared b under contiguous batches of a runs as one taller product (the batches as
    // rows): b as a broadcast batch, and as a transposed view.
    auto c = Tensor<Cpu, 3>::random({3, 5, 17}, ember::Distribution::Default);
    auto gc = Tensor<Cuda, 3>::from_data(c.to_data(), {});
    ember::test::check_close(gc.matmul(gb).to_data(), c.matmul(b).to_data(), {1e-5, 1e-5});
    auto d = Tensor<Cpu, 3>::random({3, 4, 5}, ember::Distribution::Default);
    auto gd = Tensor<Cuda, 3>::from_data(d.to_data(), {});
    ember::test::check_close(gd.matmul(gb.swap_dims(1, 2)).to_data(),
                             d.matmul(b.swap_dims(1, 2)).to_data(), {1e-5, 1e-5});
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

TEST_CASE("cuda: a Bernoulli(p) draw is the uniform draw of the same seed below p", "[cuda]") {
    // A dropout mask and a uniform draw come from the same counter-based stream: element i of
    // Bernoulli(p) is 1 exactly where element i of the uniform draw is below p.
    REQUIRE_GPU();
    const ember::Shape shape{1 << 16};
    for (const double p : {0.3, 0.5, 0.0, 1.0}) {
        CAPTURE(p);
        Cuda::seed(21);
        const auto u = Tensor<Cuda, 1>::random(shape, ember::Distribution::Default).to_data();
        Cuda::seed(21);
        const auto m = Tensor<Cuda, 1>::random(shape, ember::Distribution::Bernoulli(p)).to_data();
        const auto uv = u.to_vec<float>(), mv = m.to_vec<float>();
        std::size_t differ = 0, ones = 0;
        for (std::size_t i = 0; i < uv.size(); ++i) {
            differ += mv[i] != (static_cast<double>(uv[i]) < p ? 1.f : 0.f);
            ones += mv[i] == 1.f;
        }
        CHECK(differ == 0);
        CHECK(static_cast<double>(ones) / static_cast<double>(uv.size()) == Approx(p).margin(0.01));
    }
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
        same(xh - bh, xf - bf);  // a bias row broadcast (the vectorised path)
        same(bh / yh, bf / yf);  // the same with the row first
        same(xh.swap_dims(0, 1).matmul(yh).cast(ember::DType::F32).cast(dt),
             xf.swap_dims(0, 1).matmul(yf));  // the cast path itself
        same(yh.swap_dims(0, 1) * xh.swap_dims(0, 1),
             yf.swap_dims(0, 1) * xf.swap_dims(0, 1));  // strided views
        same(xh * 0.1, xf * 0.1);
        same(xh.swap_dims(0, 1) + 3.0, xf.swap_dims(0, 1) + 3.0);
        same(xh.powf_scalar(2.0), xf.powf_scalar(2.0));
        // An f32 operand with a half one: f32 out, the half read as it is (one kernel), the
        // bits of the half cast to f32 first; either order, and a length that is not a
        // multiple of four (the one-a-thread form).
        const auto flat = [](const Tensor<Cuda, 2>& t) {
            return t.reshape<1>(std::array<std::size_t, 1>{384}).narrow(0, 0, 381);
        };
        for (const auto& [got, want] :
             {std::pair{flat(x + yh), flat(x + yf)}, std::pair{flat(yh / x), flat(yf / x)},
              std::pair{flat(x) * flat(yh), flat(x) * flat(yf)}}) {
            CHECK(got.dtype() == ember::DType::F32);
            CHECK(got.to_data().to_vec<float>() == want.to_data().to_vec<float>());
        }
    }
}

TEST_CASE("cuda: reductions over a strided dim split it across threads and read halves directly",
          "[cuda]") {
    REQUIRE_GPU();
    // A bias gradient is [rows, cols] summed over the rows: few outputs, a long strided dim.
    // Those take the kernel that splits the rows over threads and slices (6000 rows: several
    // slices folded in a second pass; 300 rows: one). Small integers keep every sum exact, so
    // the expected values (here, in double) must match exactly in f32, f64 and i64; f16/bf16
    // inputs are read as they are and their sums rounded once to the input's dtype.
    const auto value = [](std::size_t r, std::size_t c) {
        return static_cast<double>(static_cast<int>((r * 7 + c * 3) % 9) - 4);
    };
    // 40 and 1000 columns: rows of 16-byte multiples in every float dtype, which take the
    // vectorised column kernel; 44: f16/bf16 rows of 88 bytes, which do not.
    for (std::size_t cols : {std::size_t{40}, std::size_t{44}, std::size_t{1000}})
        for (std::size_t rows :
             {std::size_t{6000}, std::size_t{300}, std::size_t{9}, std::size_t{5}}) {
            INFO("rows " << rows << ", cols " << cols);
            std::vector<float> xs(rows * cols);
            std::vector<double> sum(cols, 0.0), mx(cols, -1e9), mn(cols, 1e9);
            for (std::size_t r = 0; r < rows; ++r)
                for (std::size_t c = 0; c < cols; ++c) {
                    const double v = value(r, c);
                    xs[r * cols + c] = static_cast<float>(v);
                    sum[c] += v;
                    mx[c] = std::max(mx[c], v);
                    mn[c] = std::min(mn[c], v);
                }
            const auto as_f32 = [](const std::vector<double>& v) {
                return std::vector<float>(v.begin(), v.end());
            };
            std::vector<double> mean(cols);
            for (std::size_t c = 0; c < cols; ++c) mean[c] = sum[c] / static_cast<double>(rows);
            const auto x = Tensor<Cuda, 2>::from_data(TensorData(xs, {rows, cols}), {});
            CHECK(x.sum_dim(0).to_data().to_vec<float>() == as_f32(sum));
            CHECK(x.max_dim(0).to_data().to_vec<float>() == as_f32(mx));
            CHECK(x.min_dim(0).to_data().to_vec<float>() == as_f32(mn));
            ember::test::check_close(x.mean_dim(0).to_data(), TensorData(as_f32(mean), {1, cols}),
                                     {1e-6, 1e-6});
            CHECK(x.cast(ember::DType::F64).sum_dim(0).to_data().to_vec<double>() == sum);
            auto xi = Tensor<Cuda, 2, ember::Int>::from_data(
                TensorData(std::vector<std::int64_t>(xs.begin(), xs.end()), {rows, cols}), {});
            CHECK(xi.sum_dim(0).to_data().to_vec<std::int64_t>() ==
                  std::vector<std::int64_t>(sum.begin(), sum.end()));
            // Halves: the exact sum rounded once to the dtype (the CPU backend's cast rounds it).
            for (auto dt : {ember::DType::F16, ember::DType::BF16}) {
                INFO(std::string(ember::dtype_name(dt)));
                const auto got = x.cast(dt).sum_dim(0);
                CHECK(got.dtype() == dt);
                const auto want = Tensor<Cpu, 2>::from_data(TensorData(as_f32(sum), {1, cols}), {})
                                      .cast(dt)
                                      .cast(ember::DType::F32);
                CHECK(got.cast(ember::DType::F32).to_data().to_vec<float>() ==
                      want.to_data().to_vec<float>());
            }
        }
    // The middle dim of [5, 300, 7]: 35 outputs whose inputs lie 7 apart, in two strided dims.
    std::vector<float> ys(5 * 300 * 7);
    std::vector<float> want(5 * 7, 0.f);
    for (std::size_t a = 0; a < 5; ++a)
        for (std::size_t r = 0; r < 300; ++r)
            for (std::size_t c = 0; c < 7; ++c) {
                const float v = static_cast<float>(value(r + a, c));
                ys[(a * 300 + r) * 7 + c] = v;
                want[a * 7 + c] += v;
            }
    const auto y = Tensor<Cuda, 3>::from_data(TensorData(ys, {5, 300, 7}), {});
    CHECK(y.sum_dim(1).to_data().to_vec<float>() == want);
    const auto rounded = Tensor<Cpu, 3>::from_data(TensorData(want, {5, 1, 7}), {})
                             .cast(ember::DType::BF16)
                             .cast(ember::DType::F32);
    CHECK(y.cast(ember::DType::BF16).sum_dim(1).cast(ember::DType::F32).to_data().to_vec<float>() ==
          rounded.to_data().to_vec<float>());
}

TEST_CASE("cuda: float_unary_backward fuses the backward of gelu, erf, tanh, sigmoid and relu",
          "[cuda]") {
    REQUIRE_GPU();
    using ember::UnaryOp;
    // g · f'(v) against the derivatives written out in double; v is what Autodiff keeps: the
    // input x for gelu and erf, the output y for the others. (The autodiff suites check
    // the same backward through Autodiff<Cuda> against PyTorch.)
    constexpr double pi = 3.14159265358979323846;
    const auto derivative = [&](UnaryOp op, double v) {
        switch (op) {
            case UnaryOp::Gelu:
                return 0.5 * (1 + std::erf(v / std::sqrt(2.0))) +
                       v * std::exp(-0.5 * v * v) / std::sqrt(2 * pi);
            case UnaryOp::Erf:
                return 2 / std::sqrt(pi) * std::exp(-v * v);
            case UnaryOp::Tanh:
                return 1 - v * v;
            case UnaryOp::Relu:
                return v > 0 ? 1.0 : 0.0;
            default:
                return v * (1 - v);
        }
    };
    constexpr std::size_t n = 1000;  // 125 vectors of eight halves
    std::vector<float> gs(n), vs(n);
    for (std::size_t i = 0; i < n; ++i) {
        gs[i] = 0.5f + static_cast<float>(i % 7) / 4.f;
        vs[i] = -3.f + 6.f * static_cast<float>(i) / static_cast<float>(n);
    }
    const auto g = Tensor<Cuda, 1>::from_data(TensorData(gs, {n}), {});
    const auto v = Tensor<Cuda, 1>::from_data(TensorData(vs, {n}), {});
    for (UnaryOp op :
         {UnaryOp::Gelu, UnaryOp::Erf, UnaryOp::Tanh, UnaryOp::Sigmoid, UnaryOp::Relu}) {
        INFO("op " << static_cast<int>(op));
        std::vector<float> want(n);
        for (std::size_t i = 0; i < n; ++i)
            want[i] = static_cast<float>(gs[i] * derivative(op, vs[i]));
        auto got = Cuda::float_unary_backward(op, g.primitive(), v.primitive());
        REQUIRE(got.has_value());
        ember::test::check_close(Tensor<Cuda, 1>(*got).to_data(), TensorData(want, {n}),
                                 {1e-5, 1e-5});
        for (auto dt : {ember::DType::F16, ember::DType::BF16}) {
            INFO(std::string(ember::dtype_name(dt)));
            auto half =
                Cuda::float_unary_backward(op, g.cast(dt).primitive(), v.cast(dt).primitive());
            REQUIRE(half.has_value());
            const Tensor<Cuda, 1> h(*half);
            CHECK(h.dtype() == dt);
            // The inputs rounded to the dtype, the math in f32: within the dtype's rounding.
            const auto gh = g.cast(dt).cast(ember::DType::F32).to_data().to_vec<float>();
            const auto vh = v.cast(dt).cast(ember::DType::F32).to_data().to_vec<float>();
            std::vector<float> want_h(n);
            for (std::size_t i = 0; i < n; ++i)
                want_h[i] = static_cast<float>(gh[i] * derivative(op, vh[i]));
            ember::test::check_close(h.cast(ember::DType::F32).to_data(), TensorData(want_h, {n}),
                                     {1e-3, dt == ember::DType::BF16 ? 8e-3 : 1e-3});
        }
    }
    // Not dense, or not alike, or an op without a fused form: nullopt (Autodiff composes).
    const auto m = Tensor<Cuda, 2>::from_data(
        TensorData(std::vector<float>(vs.begin(), vs.begin() + 900), {30, 30}), {});
    CHECK_FALSE(
        Cuda::float_unary_backward(UnaryOp::Gelu, m.primitive(), m.swap_dims(0, 1).primitive()));
    CHECK_FALSE(Cuda::float_unary_backward(UnaryOp::Gelu, g.primitive(),
                                           v.cast(ember::DType::F64).primitive()));
    CHECK_FALSE(Cuda::float_unary_backward(UnaryOp::Exp, g.primitive(), v.primitive()));
}

TEST_CASE("cuda: float_layer_norm_backward gives dx, dgamma and dbeta", "[cuda]") {
    REQUIRE_GPU();
    // f32 rows of 4·k ≤ 1024 floats take the one-pass kernel (a warp a row, 1 and 6 float4s a
    // lane here; 2500 and 9000 rows: several rows a warp, the grid capped at the blocks resident
    // at once); the others the two-kernel path, whose
    // parameter gradients' rows split into slices folded in a second pass. The expected values
    // are the formulas in double: x̂ = (x − μ)·rstd, g' = g·γ,
    // dx = rstd·(g' − mean(g') − x̂·mean(g'·x̂)), dγ = Σ g·x̂, dβ = Σ g.
    constexpr double eps = 1e-5;
    for (const auto [rows, cols] : {std::pair<std::size_t, std::size_t>{600, 40},
                                    {2500, 768},
                                    {9000, 768},
                                    {300, 42},
                                    {50, 1100}}) {
        INFO("rows " << rows << ", cols " << cols);
        std::vector<float> xs(rows * cols), gs(rows * cols), gam(cols);
        for (std::size_t i = 0; i < xs.size(); ++i) {
            xs[i] = static_cast<float>((i * 37) % 101) / 17.f - 3.f;
            gs[i] = static_cast<float>((i * 53) % 89) / 29.f - 1.5f;
        }
        for (std::size_t c = 0; c < cols; ++c) gam[c] = 0.5f + static_cast<float>(c % 40) / 20.f;
        std::vector<float> dx(rows * cols), dgamma(cols, 0.f), dbeta(cols, 0.f);
        std::vector<double> dg(cols, 0.0), db(cols, 0.0);
        for (std::size_t r = 0; r < rows; ++r) {
            double mu = 0, var = 0;
            for (std::size_t c = 0; c < cols; ++c) mu += xs[r * cols + c];
            mu /= double(cols);
            for (std::size_t c = 0; c < cols; ++c)
                var += (xs[r * cols + c] - mu) * (xs[r * cols + c] - mu);
            const double rstd = 1 / std::sqrt(var / double(cols) + eps);
            double m1 = 0, m2 = 0;
            for (std::size_t c = 0; c < cols; ++c) {
                const double xh = (xs[r * cols + c] - mu) * rstd, gg = gs[r * cols + c] * gam[c];
                m1 += gg / double(cols);
                m2 += gg * xh / double(cols);
                dg[c] += gs[r * cols + c] * xh;
                db[c] += gs[r * cols + c];
            }
            for (std::size_t c = 0; c < cols; ++c) {
                const double xh = (xs[r * cols + c] - mu) * rstd, gg = gs[r * cols + c] * gam[c];
                dx[r * cols + c] = static_cast<float>(rstd * (gg - m1 - xh * m2));
            }
        }
        for (std::size_t c = 0; c < cols; ++c) {
            dgamma[c] = static_cast<float>(dg[c]);
            dbeta[c] = static_cast<float>(db[c]);
        }
        const auto x = Tensor<Cuda, 2>::from_data(TensorData(xs, {rows, cols}), {});
        const auto g = Tensor<Cuda, 2>::from_data(TensorData(gs, {rows, cols}), {});
        const auto gamma = Tensor<Cuda, 1>::from_data(TensorData(gam, {cols}), {});
        auto fwd = Cuda::float_layer_norm(x.primitive(), gamma.primitive(), std::nullopt, eps);
        auto got = Cuda::float_layer_norm_backward(x.primitive(), g.primitive(), gamma.primitive(),
                                                   fwd[1], fwd[2]);
        REQUIRE(got.has_value());
        ember::test::check_close(Tensor<Cuda, 2>((*got)[0]).to_data(), TensorData(dx, {rows, cols}),
                                 {1e-4, 1e-4});
        ember::test::check_close(Tensor<Cuda, 1>((*got)[1]).to_data(), TensorData(dgamma, {cols}),
                                 {1e-3, 1e-3});
        ember::test::check_close(Tensor<Cuda, 1>((*got)[2]).to_data(), TensorData(dbeta, {cols}),
                                 {1e-3, 1e-3});
        // Without gamma: g' = g, and no parameter gradients.
        auto plain = Cuda::float_layer_norm(x.primitive(), std::nullopt, std::nullopt, eps);
        auto no_affine = Cuda::float_layer_norm_backward(x.primitive(), g.primitive(), std::nullopt,
                                                         plain[1], plain[2]);
        REQUIRE(no_affine.has_value());
        CHECK((*no_affine)[1].num_elements() == 0);
        std::vector<float> dx_plain(rows * cols);
        for (std::size_t r = 0; r < rows; ++r) {
            double mu = 0, var = 0, m1 = 0, m2 = 0;
            for (std::size_t c = 0; c < cols; ++c) mu += xs[r * cols + c];
            mu /= double(cols);
            for (std::size_t c = 0; c < cols; ++c)
                var += (xs[r * cols + c] - mu) * (xs[r * cols + c] - mu);
            const double rstd = 1 / std::sqrt(var / double(cols) + eps);
            for (std::size_t c = 0; c < cols; ++c) {
                m1 += gs[r * cols + c] / double(cols);
                m2 += gs[r * cols + c] * (xs[r * cols + c] - mu) * rstd / double(cols);
            }
            for (std::size_t c = 0; c < cols; ++c)
                dx_plain[r * cols + c] = static_cast<float>(
                    rstd * (gs[r * cols + c] - m1 - (xs[r * cols + c] - mu) * rstd * m2));
        }
        ember::test::check_close(Tensor<Cuda, 2>((*no_affine)[0]).to_data(),
                                 TensorData(dx_plain, {rows, cols}), {1e-4, 1e-4});
        // Half operands are not taken (Autodiff composes their backward).
        CHECK_FALSE(Cuda::float_layer_norm_backward(x.cast(ember::DType::BF16).primitive(),
                                                    g.cast(ember::DType::BF16).primitive(),
                                                    std::nullopt, plain[1], plain[2]));
        // A bf16 gradient of f32 rows (add_layer_norm's 16-bit output) is read as it is where
        // the one-pass kernel takes the rows, and cast first elsewhere: the same values as the
        // f32 gradient those bf16 values make, bit for bit.
        const auto g16 = g.cast(ember::DType::BF16);
        auto from16 = Cuda::float_layer_norm_backward(x.primitive(), g16.primitive(),
                                                      gamma.primitive(), fwd[1], fwd[2]);
        auto from32 =
            Cuda::float_layer_norm_backward(x.primitive(), g16.cast(ember::DType::F32).primitive(),
                                            gamma.primitive(), fwd[1], fwd[2]);
        REQUIRE(from16.has_value());
        REQUIRE(from32.has_value());
        const auto flat = [](const Cuda::FloatTensorPrimitive& t) {
            return Tensor<Cuda, 1>(Cuda::float_reshape(t, ember::Shape{t.num_elements()}))
                .to_data()
                .template to_vec<float>();
        };
        for (std::size_t i = 0; i < 3; ++i) CHECK(flat((*from16)[i]) == flat((*from32)[i]));
        // A gradient x had already collected (acc) comes back added into dx: in the one-pass
        // kernel's pass where it runs, by an addition elsewhere; both the same f32 sums as
        // adding it to dx afterwards, bit for bit; dgamma and dbeta unchanged.
        const auto acc = Tensor<Cuda, 2>::random({rows, cols}, ember::Distribution::Default);
        auto with = Cuda::float_layer_norm_backward(x.primitive(), g.primitive(), gamma.primitive(),
                                                    fwd[1], fwd[2], acc.primitive());
        REQUIRE(with.has_value());
        CHECK(flat((*with)[0]) ==
              flat(Cuda::float_binary(ember::BinaryOp::Add, (*got)[0], acc.primitive())));
        CHECK(flat((*with)[1]) == flat((*got)[1]));
        CHECK(flat((*with)[2]) == flat((*got)[2]));
    }
}

TEST_CASE("cuda: add_layer_norm runs one kernel, with the composed ops' values", "[cuda]") {
    REQUIRE_GPU();
    using ember::DType;
    // Rows of 768 (the GPT's) and 516 (129 float4s): the kernel takes both, with an f32 or bf16
    // residual and an f32 or bf16 normed output. Its sum and norm are the ones the composed ops
    // (x + residual, layer_norm's own row kernel, a cast) compute, bit for bit; the reference
    // values against PyTorch are the shared suite's (test_module_ops.cpp).
    for (const std::size_t cols : {std::size_t{768}, std::size_t{516}}) {
        const std::size_t rows = 37;
        std::vector<float> xs(rows * cols), rs(rows * cols), gs(cols), bs(cols);
        for (std::size_t i = 0; i < xs.size(); ++i) {
            xs[i] = static_cast<float>((i * 37) % 101) / 17.f - 3.f;
            rs[i] = static_cast<float>((i * 53) % 89) / 29.f - 1.5f;
        }
        for (std::size_t c = 0; c < cols; ++c) {
            gs[c] = 0.5f + static_cast<float>(c % 40) / 20.f;
            bs[c] = static_cast<float>(c % 7) / 7.f - 0.5f;
        }
        const auto x = Tensor<Cuda, 2>::from_data(TensorData(xs, {rows, cols}), {});
        const auto gamma = Tensor<Cuda, 1>::from_data(TensorData(gs, {cols}), {});
        const auto beta = Tensor<Cuda, 1>::from_data(TensorData(bs, {cols}), {});
        for (const DType rd : {DType::F32, DType::BF16})
            for (const std::optional<DType> out :
                 {std::optional<DType>{}, std::optional(DType::BF16)}) {
                INFO("cols " << cols << ", residual " << ember::dtype_name(rd) << ", out "
                             << (out ? ember::dtype_name(*out) : "f32"));
                const auto r =
                    Tensor<Cuda, 2>::from_data(TensorData(rs, {rows, cols}), {}).cast(rd);
                auto fused = Cuda::float_add_layer_norm(
                    x.primitive(), r.primitive(), gamma.primitive(), beta.primitive(), 1e-5, out);
                REQUIRE(fused.has_value());
                const auto sum = x + r;
                auto normed = ember::module::layer_norm(sum, gamma, beta, 1e-5);
                if (out) normed = normed.cast(*out);
                CHECK((*fused)[0].dtype == DType::F32);
                CHECK((*fused)[1].dtype == (out ? *out : DType::F32));
                CHECK(Tensor<Cuda, 2>((*fused)[0]).to_data().template to_vec<float>() ==
                      sum.to_data().template to_vec<float>());
                CHECK(Tensor<Cuda, 2>((*fused)[1])
                          .cast(DType::F32)
                          .to_data()
                          .template to_vec<float>() ==
                      normed.cast(DType::F32).to_data().template to_vec<float>());
            }
        // What it does not take, it declines (the caller composes): a bf16 x, rows of 6.
        CHECK_FALSE(Cuda::float_add_layer_norm(x.cast(DType::BF16).primitive(),
                                               x.cast(DType::BF16).primitive(), std::nullopt,
                                               std::nullopt, 1e-5, std::nullopt));
    }
    const auto narrow = Tensor<Cuda, 2>::ones({3, 6}, {});
    CHECK_FALSE(Cuda::float_add_layer_norm(narrow.primitive(), narrow.primitive(), std::nullopt,
                                           std::nullopt, 1e-5, std::nullopt));
}

TEST_CASE("cuda: permuted copies with contiguous rows are exact in every dtype", "[cuda]") {
    REQUIRE_GPU();
    // [2, 6, 3, E] with heads (dim 2) swapped to dim 1 and made dense: the copy of an attention
    // layer's head merge. E = 16 takes the 16-byte path for 2- and 4-byte dtypes, E = 6 (rows
    // of 12 or 24 bytes) the element path. The expected order is the permutation written out.
    for (std::size_t e : {std::size_t{16}, std::size_t{6}}) {
        const std::size_t n = 2 * 6 * 3 * e;
        std::vector<float> xs(n);
        for (std::size_t i = 0; i < n; ++i) xs[i] = static_cast<float>(i % 251);
        std::vector<float> want;
        for (std::size_t a = 0; a < 2; ++a)
            for (std::size_t h = 0; h < 3; ++h)
                for (std::size_t l = 0; l < 6; ++l)
                    for (std::size_t c = 0; c < e; ++c)
                        want.push_back(xs[((a * 6 + l) * 3 + h) * e + c]);
        const auto x = Tensor<Cuda, 4>::from_data(TensorData(xs, {2, 6, 3, e}), {});
        for (auto dt :
             {ember::DType::F32, ember::DType::BF16, ember::DType::F16, ember::DType::F64}) {
            INFO("e " << e << " " << ember::dtype_name(dt));
            const auto y = x.cast(dt).swap_dims(1, 2).reshape<2>(std::array<std::size_t, 2>{36, e});
            CHECK(y.dtype() == dt);
            CHECK(y.cast(ember::DType::F32).to_data().to_vec<float>() == want);
        }
    }
}

TEST_CASE("cuda: casts of column slices between f32 and f16/bf16 are exact", "[cuda]") {
    REQUIRE_GPU();
    // Columns [16, 40) of a [5, 64] matrix (row stride 64): the vectorised row path (24 columns,
    // 16-byte aligned rows); columns [3, 11) of it: the element path (unaligned start). Values
    // are small integers, exact in every dtype.
    std::vector<float> xs(5 * 64);
    for (std::size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<float>(int(i % 97) - 48);
    const auto x = Tensor<Cuda, 2>::from_data(TensorData(xs, {5, 64}), {});
    for (auto [c0, len] : {std::pair<std::size_t, std::size_t>{16, 24}, {3, 8}}) {
        std::vector<float> want;
        for (std::size_t r = 0; r < 5; ++r)
            for (std::size_t c = c0; c < c0 + len; ++c) want.push_back(xs[r * 64 + c]);
        for (auto dt : {ember::DType::BF16, ember::DType::F16}) {
            INFO("columns from " << c0 << ", " << ember::dtype_name(dt));
            // f32 view → half, and a half view → f32 (a weight's gradient sliced, widened).
            const auto narrowed = x.narrow(1, c0, len).cast(dt);
            CHECK(narrowed.to_data().convert(ember::DType::F32).to_vec<float>() == want);
            const auto widened = x.cast(dt).narrow(1, c0, len).cast(ember::DType::F32);
            CHECK(widened.to_data().to_vec<float>() == want);
        }
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

TEST_CASE("cuda: a Linear's bias is added inside the GEMM in f32, f16 and bf16, with gradients",
          "[cuda][autodiff]") {
    REQUIRE_GPU();
    // module::linear on Autodiff<Cuda> takes cuBLASLt's bias epilogue (one kernel, one rounding
    // of product + bias); the composed matmul and add round twice in f16/bf16. Values and the
    // three gradients (g·wᵀ, xᵀ·g, Σ_rows g) against the composed path.
    using AD = ember::Autodiff<Cuda>;
    ember::cuda::set_allow_tf32(false);
    const auto dist = ember::Distribution::Uniform(-1, 1);
    const auto x0 = Tensor<Cpu, 3>::random({4, 5, 24}, dist).to_data();
    const auto w0 = Tensor<Cpu, 2>::random({24, 40}, dist).to_data();
    const auto b0 = Tensor<Cpu, 1>::random({40}, dist).to_data();
    const auto c0 = Tensor<Cpu, 3>::random({4, 5, 40}, dist).to_data();
    for (auto dt : {ember::DType::F32, ember::DType::F16, ember::DType::BF16}) {
        INFO(std::string(ember::dtype_name(dt)));
        const double tol = dt == ember::DType::F32 ? 1e-5 : dt == ember::DType::F16 ? 4e-3 : 3e-2;
        auto make = [&](const TensorData& d, auto rank) {
            constexpr std::size_t R = decltype(rank)::value;
            return Tensor<AD, R>::from_data(d, {}).cast(dt).detach().require_grad();
        };
        const auto c = Tensor<AD, 3>::from_data(c0, {});
        struct Run {
            TensorData y, gx, gw, gb;
        };
        auto run = [&](bool fused) {
            const auto x = make(x0, std::integral_constant<std::size_t, 3>{});
            const auto w = make(w0, std::integral_constant<std::size_t, 2>{});
            const auto b = make(b0, std::integral_constant<std::size_t, 1>{});
            const auto y = fused ? ember::module::linear(x, w, b)
                                 : ember::module::detail::linear_composed(
                                       x, w, std::optional<Tensor<AD, 1>>(b));
            CHECK(y.dtype() == dt);
            const auto grads = (y.cast(ember::DType::F32) * c).sum().backward();
            return Run{y.to_data(), x.grad(grads)->to_data(), w.grad(grads)->to_data(),
                       b.grad(grads)->to_data()};
        };
        const Run f = run(true), p = run(false);
        ember::test::check_close(f.y, p.y, {tol, tol});
        ember::test::check_close(f.gx, p.gx, {tol, tol});
        ember::test::check_close(f.gw, p.gw, {tol, tol});
        ember::test::check_close(f.gb, p.gb, {tol, tol});
        // The weight's and the bias's gradients come from one cuBLASLt call (its bias-gradient
        // epilogue) on these operands: xᵀ·g and Σ_rows g against the formulas on the host.
        const auto xs = x0.convert(ember::DType::F32).to_vec<float>();
        const auto gs = c0.convert(ember::DType::F32).to_vec<float>();
        const std::size_t rows = 20, in = 24, out = 40;
        std::vector<float> want_w(in * out, 0.f), want_b(out, 0.f);
        for (std::size_t r = 0; r < rows; ++r)
            for (std::size_t o = 0; o < out; ++o) {
                want_b[o] += gs[r * out + o];
                for (std::size_t i = 0; i < in; ++i)
                    want_w[i * out + o] += xs[r * in + i] * gs[r * out + o];
            }
        const auto xt = Tensor<Cuda, 2>::from_data(TensorData(xs, {rows, in}), {}).cast(dt);
        const auto gt = Tensor<Cuda, 2>::from_data(TensorData(gs, {rows, out}), {}).cast(dt);
        auto wb = Cuda::fused_matmul_bias_grad(xt.swap_dims(0, 1).primitive(), gt.primitive());
        REQUIRE(wb.has_value());
        const double wt = dt == ember::DType::F32 ? 1e-4 : dt == ember::DType::F16 ? 1e-2 : 8e-2;
        ember::test::check_close(Tensor<Cuda, 2>((*wb)[0]).cast(ember::DType::F32).to_data(),
                                 TensorData(want_w, {in, out}), {wt, wt});
        ember::test::check_close(Tensor<Cuda, 1>((*wb)[1]).cast(ember::DType::F32).to_data(),
                                 TensorData(want_b, {out}), {wt, wt});
    }
}

}  // namespace test_cuda

#endif
