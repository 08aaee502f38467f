// Fusion<B> over every fusion stack this build has: Fusion<Cpu>, Fusion<Vulkan> (lavapipe in CI)
// and Fusion<Cuda> (its cases skip without a GPU). The shared cases: elementwise chains run as
// one kernel with the values of closed-form math and of the unfused backend; what a chain may
// hold (broadcasting, scalars, strided and unaligned inputs, casts, int and bool chains, several
// outputs, many scalars and inputs); reductions that end a chain; matmul epilogues where the
// backend takes them; the program cache; errors at the op, as without fusion. Then what one
// backend alone has: the CPU's memory, tile loops, epilogue bits and custom-kernel example;
// the Vulkan and CUDA kernel caches on disk; CUDA's generated source compiled by NVRTC (no GPU
// needed). (The shared op suites also run on the fusion stacks and their Autodiff: harness.hpp.)
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <numbers>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include <ember/ember.hpp>
#include <ember/nn.hpp>
#include <ember/optim.hpp>
#include <ember/tensor/fusion_program.hpp>
#if defined(EMBER_CUDA)
#include <unistd.h>

#include <ember/backend/cuda.hpp>
#endif

#include "../examples/custom-kernel/fused_matmul_add_relu.hpp"
#include "harness.hpp"

namespace test_fusion {

namespace {

using ember::Int;
using ember::Tensor;
using ember::TensorData;
namespace fusion = ember::fusion;

/// The fusion stacks of this build.
using FusionStacks = decltype(std::tuple_cat(std::tuple<ember::Fusion<ember::Cpu>>{}
#if defined(EMBER_VULKAN)
                                             ,
                                             std::tuple<ember::Fusion<ember::Vulkan>>{}
#endif
#if defined(EMBER_CUDA)
                                             ,
                                             std::tuple<ember::Fusion<ember::Cuda>>{}
#endif
                                             ));

/// Whether Fusion stack FB fuses onto the CUDA backend.
template <typename FB>
constexpr bool on_cuda() {
#if defined(EMBER_CUDA)
    return std::is_same_v<typename FB::InnerBackend, ember::Cuda>;
#else
    return false;
#endif
}

/// Relative error allowed against closed-form math: the GPUs' transcendentals (erf, exp, tanh)
/// are a few ulp off where the CPU's are within one.
template <typename FB>
constexpr double math_rel() {
    return std::is_same_v<typename FB::InnerBackend, ember::Cpu> ? 1e-6 : 1e-5;
}

/// Kernels the backend under FB compiled or loaded of its own (SPIR-V and pipelines on Vulkan;
/// NVRTC compiles, disk hits and module loads on CUDA); the CPU runs fused plans directly.
template <typename FB>
std::vector<std::size_t> backend_compiles() {
#if defined(EMBER_VULKAN)
    if constexpr (ember::test::on_vulkan<FB>()) {
        const auto s = ember::vulkan::fusion_cache_stats();
        return {s.spirv_compiled, s.pipelines};
    }
#endif
#if defined(EMBER_CUDA)
    if constexpr (on_cuda<FB>()) {
        const auto s = ember::cuda::fusion_compile_stats();
        return {s.nvrtc_compiles, s.disk_hits, s.module_loads};
    }
#endif
    return {};
}

/// gelu written with tensor ops (five elementwise ops: one fused kernel under Fusion<B>).
template <ember::Backend BE, std::size_t D>
Tensor<BE, D> gelu_custom(Tensor<BE, D> x) {
    auto y = x * ((x / std::numbers::sqrt2_v<float>).erf() + 1);
    return y / 2;
}

/// n evenly spaced values from lo to hi (n >= 2).
std::vector<float> ramp(std::size_t n, float lo, float hi) {
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i)
        v[i] = lo + (hi - lo) * static_cast<float>(i) / static_cast<float>(n - 1);
    return v;
}

/// Every element within 1e-6 absolute plus `rel` of |want|.
void check_values(const std::vector<float>& got, const std::vector<double>& want, double rel) {
    REQUIRE(got.size() == want.size());
    std::size_t bad = 0;
    for (std::size_t i = 0; i < got.size(); ++i)
        if (!(std::abs(got[i] - want[i]) <= 1e-6 + rel * std::abs(want[i])) && bad++ < 5)
            FAIL_CHECK("element " << i << ": " << got[i] << " vs " << want[i]);
    CHECK(bad == 0);
}

/// Fused against unfused: within 1e-6 relative (of max(1, |unfused|)); NaN and ±inf where the
/// unfused kernel has them.
void check_same(const std::vector<float>& fused, const std::vector<float>& unfused) {
    REQUIRE(fused.size() == unfused.size());
    std::size_t bad = 0;
    for (std::size_t i = 0; i < fused.size(); ++i) {
        const float f = fused[i], u = unfused[i];
        const bool ok = std::isnan(u)   ? std::isnan(f)
                        : std::isinf(u) ? f == u
                                        : std::abs(f - u) <= 1e-6f * std::max(1.f, std::abs(u));
        if (!ok && bad++ < 5) FAIL_CHECK("element " << i << ": fused " << f << ", unfused " << u);
    }
    CHECK(bad == 0);
}

/// Runs `chain` (a function of one float tensor) over `v` on FB, as one fused launch, and on
/// the backend under it, with the same values.
template <typename FB, typename Chain>
void check_chain(const std::vector<float>& v, Chain chain) {
    using Inner = typename FB::InnerBackend;
    const std::size_t n = v.size();
    fusion::reset_stats();
    const auto fused =
        chain(Tensor<FB, 1>::from_data(TensorData(v, {n}))).into_data().template to_vec<float>();
    CHECK(fusion::stats().fused_launches == 1);
    const auto unfused =
        chain(Tensor<Inner, 1>::from_data(TensorData(v, {n}))).into_data().template to_vec<float>();
    check_same(fused, unfused);
}

/// x · w + bias and relu of it, in double (row-major x [m, k], w [k, n]).
std::vector<double> linear_reference(const std::vector<float>& x, const std::vector<float>& w,
                                     const std::vector<float>* bias, bool relu, std::size_t m,
                                     std::size_t k, std::size_t n) {
    std::vector<double> want(m * n);
    for (std::size_t i = 0; i < m; ++i)
        for (std::size_t j = 0; j < n; ++j) {
            double s = bias ? (*bias)[j] : 0.0;
            for (std::size_t q = 0; q < k; ++q) s += double(x[i * k + q]) * w[q * n + j];
            want[i * n + j] = relu ? std::max(s, 0.0) : s;
        }
    return want;
}

/// Turns matmul epilogues back on however a test ends.
struct RestoreEpilogues {
    ~RestoreEpilogues() { fusion::set_matmul_epilogues(true); }
};

}  // namespace

// ---- every fusion stack --------------------------------------------------------------------

TEMPLATE_LIST_TEST_CASE("fusion: gelu_custom is one kernel with the math's and the unfused values",
                        "[fusion]", FusionStacks) {
    using FB = TestType;
    using Inner = typename FB::InnerBackend;
    EMBER_SKIP_IF_UNAVAILABLE(FB);
    const std::size_t n = 10007;  // a multiple of no tile or vector width: the tails run too
    const auto v = ramp(n, -6.f, 6.f);
    auto x = Tensor<FB, 1>::from_data(TensorData(v, {n}));
    FB::sync({});
#if defined(EMBER_VULKAN)
    // Read on the Vulkan stack only: elsewhere a machine may have no Vulkan loader at all.
    std::size_t dispatched = 0;
    if constexpr (ember::test::on_vulkan<FB>())
        dispatched = ember::vulkan::execution_stats().dispatches;
#endif
    fusion::reset_stats();
    auto y = gelu_custom(x);
    CHECK(fusion::stats().kernels_launched == 0);  // recorded, not run
    const auto got = y.into_data().template to_vec<float>();
    const auto s = fusion::stats();
    CHECK(s.kernels_launched == 1);
    CHECK(s.fused_launches == 1);
    CHECK(s.ops_fused == 5);
#if defined(EMBER_VULKAN)
    if constexpr (ember::test::on_vulkan<FB>())
        CHECK(ember::vulkan::execution_stats().dispatches - dispatched == 1);
#endif
    std::vector<double> want(n);
    for (std::size_t i = 0; i < n; ++i)
        want[i] = v[i] * (std::erf(v[i] / std::numbers::sqrt2) + 1) / 2;
    check_values(got, want, math_rel<FB>());
    const auto unfused = gelu_custom(Tensor<Inner, 1>::from_data(TensorData(v, {n})));
    check_same(got, unfused.into_data().template to_vec<float>());
}

TEMPLATE_LIST_TEST_CASE("fusion: what a chain may hold", "[fusion]", FusionStacks) {
    using FB = TestType;
    using Inner = typename FB::InnerBackend;
    EMBER_SKIP_IF_UNAVAILABLE(FB);
    SECTION("broadcasting and scalars: one kernel over the broadcast shape") {
        auto a = Tensor<FB, 2>::from_data(TensorData({1.f, 2.f, 3.f}, {3, 1}));
        auto b = Tensor<FB, 2>::from_data(TensorData({10.f, 20.f, 30.f, 40.f}, {1, 4}));
        fusion::reset_stats();
        auto c = ((a + b) * 2 - 1).into_data().template to_vec<float>();
        CHECK(fusion::stats().fused_launches == 1);
        std::vector<double> want;
        for (double ai : {1., 2., 3.})
            for (double bi : {10., 20., 30., 40.}) want.push_back((ai + bi) * 2 - 1);
        check_values(c, want, 0);
    }
    SECTION("a strided (transposed) input") {
        const std::size_t r = 37, c = 53;  // odd sizes: no vector path fits them
        const auto v = ramp(r * c, -3.f, 3.f);
        auto t = Tensor<FB, 2>::from_data(TensorData(v, {r, c})).transpose();  // not contiguous
        fusion::reset_stats();
        const auto got = (t.exp() * t + 1).into_data().template to_vec<float>();
        CHECK(fusion::stats().fused_launches == 1);
        std::vector<double> want;
        for (std::size_t j = 0; j < c; ++j)
            for (std::size_t i = 0; i < r; ++i) {
                const double e = v[i * c + j];
                want.push_back(std::exp(e) * e + 1);
            }
        check_values(got, want, math_rel<FB>());
        auto tc = Tensor<Inner, 2>::from_data(TensorData(v, {r, c})).transpose();
        check_same(got, (tc.exp() * tc + 1).into_data().template to_vec<float>());
    }
    SECTION("a dense view at an unaligned offset") {
        const std::size_t n = 4099;
        const auto v = ramp(n + 1, -3.f, 3.f);
        auto s = Tensor<FB, 1>::from_data(TensorData(v, {n + 1})).narrow(0, 1, n);  // offset 1
        fusion::reset_stats();
        const auto got = (s.tanh() * s + 0.25).into_data().template to_vec<float>();
        CHECK(fusion::stats().fused_launches == 1);
        std::vector<double> want;
        for (std::size_t i = 1; i <= n; ++i) want.push_back(std::tanh(double(v[i])) * v[i] + 0.25);
        check_values(got, want, math_rel<FB>());
    }
    SECTION("comparisons, where, mask_fill and clamp") {
        auto x = Tensor<FB, 1>::from_data(TensorData({-2.f, -0.5f, 0.f, 0.5f, 3.f}, {5}));
        auto y = Tensor<FB, 1>::from_data(TensorData({9.f, 9.f, 9.f, 9.f, 9.f}, {5}));
        fusion::reset_stats();
        auto pos = x.greater_elem(0.0);
        auto r = x.mask_where(pos, y).mask_fill(x.lower_elem(-1.0), 7.0).clamp(-1.0, 8.0);
        const auto got = r.into_data().template to_vec<float>();
        CHECK(fusion::stats().fused_launches == 1);
        check_values(got, {7, -0.5, 0, 8, 8}, 0);
    }
    SECTION("casts, and int and bool chains") {
        const std::vector<std::int64_t> iv{-3, 0, 2, 5, -7, 11, 4, 1, -1, 6, 9};
        auto i = Tensor<FB, 1, Int>::from_data(TensorData(iv, {iv.size()}));
        fusion::reset_stats();
        auto m = (i * 2 + 1).greater_elem(2).bool_and(i.lower_elem(5));
        auto f = m.float_() * 0.5 + i.float_();
        auto c = (i * 3 - 2).clamp(-5, 20);
        const auto got = f.into_data().template to_vec<float>();
        CHECK(fusion::stats().fused_launches == 1);  // m, f and c: one kernel, three outputs
        const auto ci = c.into_data().template to_vec<std::int64_t>();
        const auto mi = m.int_().into_data().template to_vec<std::int64_t>();
        for (std::size_t k = 0; k < iv.size(); ++k) {
            const bool mk = iv[k] * 2 + 1 > 2 && iv[k] < 5;
            CHECK(got[k] == static_cast<float>((mk ? 0.5 : 0.0) + double(iv[k])));
            CHECK(ci[k] == std::clamp<std::int64_t>(iv[k] * 3 - 2, -5, 20));
            CHECK(mi[k] == (mk ? 1 : 0));
        }
    }
    SECTION("float to int truncates toward zero") {
        auto x =
            Tensor<FB, 1>::from_data(TensorData({-2.75f, -0.5f, 0.5f, 1.5f, 2.25f, 7.9f}, {6}));
        const auto got = (x * 2).int_().into_data().template to_vec<std::int64_t>();
        CHECK(got == std::vector<std::int64_t>{-5, -1, 1, 3, 4, 15});
    }
    SECTION("several outputs: intermediates still held are written by the same kernel") {
        auto x = Tensor<FB, 1>::from_data(TensorData({0.f, 1.f, 2.f, 3.f, 4.f}, {5}));
        fusion::reset_stats();
        auto t = x.exp();
        auto u = t + 1;
        auto w = t * 2;
        const auto tu = u.into_data().template to_vec<float>();
        CHECK(fusion::stats().fused_launches == 1);
        const auto tw = w.into_data().template to_vec<float>();
        const auto tt = t.into_data().template to_vec<float>();
        CHECK(fusion::stats().kernels_launched == 1);  // all three came from that kernel
        for (std::size_t k = 0; k < 5; ++k) {
            const double e = std::exp(static_cast<double>(k));
            CHECK(std::abs(tu[k] - (e + 1)) < 1e-5 * e + 1e-6);
            CHECK(std::abs(tw[k] - 2 * e) < 2e-5 * e);
            CHECK(std::abs(tt[k] - e) < 1e-5 * e);
        }
    }
    SECTION("a non-fusable op flushes the chain first") {
        auto x = Tensor<FB, 2>::from_data(TensorData({1.f, 2.f, 3.f, 4.f}, {2, 2}));
        fusion::reset_stats();
        auto s = (x * x + 1).sum();
        CHECK(fusion::stats().fused_launches == 1);
        CHECK(s.into_scalar() == 34.f);
    }
    SECTION("many scalars (more than Vulkan's push constants hold)") {
        auto x = Tensor<FB, 1>::from_data(TensorData({1.f, -2.f, 0.5f, 4.f, 3.f}, {5}));
        fusion::reset_stats();
        auto y = x * 1;
        for (int k = 1; k <= 40; ++k) y = (k % 2 ? y + k : y - k / 2);  // 41 scalars
        const auto got = y.into_data().template to_vec<float>();
        CHECK(fusion::stats().fused_launches == 1);
        double shift = 0;
        for (int k = 1; k <= 40; ++k) shift += k % 2 ? k : -(k / 2);
        check_values(got, {1 + shift, -2 + shift, 0.5 + shift, 4 + shift, 3 + shift}, 0);
    }
    SECTION("33 inputs (more buffers than Vulkan binds to one kernel), with the same values") {
        std::vector<Tensor<FB, 1>> xs;
        for (int k = 0; k < 33; ++k)
            xs.push_back(Tensor<FB, 1>::from_data(TensorData({float(k), 1.f}, {2})));
        fusion::reset_stats();
        auto sum = xs[0] * 1;
        for (int k = 1; k < 33; ++k) sum = sum + xs[k];
        const auto got = sum.into_data().template to_vec<float>();
        CHECK(fusion::stats().fused_launches == 1);
        check_values(got, {32 * 33 / 2, 33}, 0);
    }
}

TEMPLATE_LIST_TEST_CASE("fusion: every float op equals the unfused kernel", "[fusion]",
                        FusionStacks) {
    using FB = TestType;
    EMBER_SKIP_IF_UNAVAILABLE(FB);
    const auto v = ramp(263, -4.f, 4.f);  // crosses 0, integers, values past erf's and tanh's knees
    using ember::UnaryOp;
    for (int op = 0; op <= static_cast<int>(UnaryOp::Gelu); ++op) {
        INFO("unary op " << op);
        check_chain<FB>(v, [op]<typename BE>(Tensor<BE, 1> x) {
            return Tensor<BE, 1>(
                BE::float_unary(static_cast<UnaryOp>(op), (x * 1.5f).into_primitive()));
        });
    }
    using ember::BinaryOp;
    for (BinaryOp op : {BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div, BinaryOp::Rem,
                        BinaryOp::Pow, BinaryOp::Max, BinaryOp::Min, BinaryOp::RSub, BinaryOp::RDiv,
                        BinaryOp::RPow, BinaryOp::RRem}) {
        INFO("binary op " << static_cast<int>(op));
        check_chain<FB>(v, [op]<typename BE>(Tensor<BE, 1> x) {
            auto y = (x + 0.3f).into_primitive();
            auto s = BE::float_binary_scalar(op, y, ember::Scalar(1.75));
            if (op >= BinaryOp::RSub) return Tensor<BE, 1>(s);
            return Tensor<BE, 1>(BE::float_binary(op, s, y));
        });
    }
}

/// Reductions along the last dim end a pending chain where the backend fuses them
/// (`fused_reductions`): each is one kernel with the values of the math, and a reduced value
/// that is still held comes out of the same kernel. Reductions along another dim, and of values
/// already computed, run as before.
TEMPLATE_LIST_TEST_CASE("fusion: reductions along the last dim end the chain's kernel", "[fusion]",
                        FusionStacks) {
    using FB = TestType;
    EMBER_SKIP_IF_UNAVAILABLE(FB);
    const std::vector<float> v = ramp(15, -2.f, 2.f);  // x[i][j] = v[5 i + j]
    auto x = Tensor<FB, 2>::from_data(TensorData(v, {3, 5}));
    auto launches = [](auto&& run) {
        fusion::reset_stats();
        run();
        const fusion::Stats s = fusion::stats();
        return std::pair{s.fused_launches, s.kernels_launched};
    };
    auto rows = [&](auto f) {  // f over each row of x, from the math
        std::vector<double> out;
        for (std::size_t i = 0; i < 3; ++i) {
            std::vector<double> row(v.begin() + 5 * i, v.begin() + 5 * i + 5);
            out.push_back(f(row));
        }
        return out;
    };
    SECTION("sum, mean, max and min of a chain: one kernel each") {
        std::vector<float> got;
        auto n = launches(
            [&] { got = (x * 2.0).exp().sum_dim(1).into_data().template to_vec<float>(); });
        CHECK(n == std::pair<std::uint64_t, std::uint64_t>{1, 1});
        check_values(got, rows([](const std::vector<double>& r) {
                         double a = 0;
                         for (double e : r) a += std::exp(2 * e);
                         return a;
                     }),
                     1e-6);
        n = launches([&] { got = (x * x).mean_dim(1).into_data().template to_vec<float>(); });
        CHECK(n.first == 1);
        check_values(got, rows([](const std::vector<double>& r) {
                         double a = 0;
                         for (double e : r) a += e * e;
                         return a / 5;
                     }),
                     1e-6);
        n = launches(
            [&] { got = (x - 1.0).abs().max_dim(1).into_data().template to_vec<float>(); });
        CHECK(n.first == 1);
        check_values(got, rows([](const std::vector<double>& r) {
                         double a = 0;
                         for (double e : r) a = std::max(a, std::abs(e - 1));
                         return a;
                     }),
                     1e-6);
        n = launches([&] { got = x.sin().min_dim(1).into_data().template to_vec<float>(); });
        CHECK(n.first == 1);
        check_values(got, rows([](const std::vector<double>& r) {
                         double a = 2;
                         for (double e : r) a = std::min(a, std::sin(e));
                         return a;
                     }),
                     1e-6);
    }
    SECTION("a reduced value that is still held is written by the same kernel") {
        std::optional<Tensor<FB, 2>> e, s;
        auto n = launches([&] {
            e = x.exp();
            s = e->sum_dim(1);
            (void)s->to_data();
        });
        CHECK(n == std::pair<std::uint64_t, std::uint64_t>{1, 1});
        std::vector<double> ev;
        for (float f : v) ev.push_back(std::exp(double(f)));
        check_values(e->to_data().template to_vec<float>(), ev, 1e-6);
        check_values(s->to_data().template to_vec<float>(), rows([](const std::vector<double>& r) {
                         double a = 0;
                         for (double q : r) a += std::exp(q);
                         return a;
                     }),
                     1e-6);
    }
    SECTION("strided inputs, rank 3, NaN and other dims") {
        // x transposed: [5, 3], row j holds column j of x.
        auto t = (x.transpose() + 1.0).sum_dim(1).into_data().template to_vec<float>();
        std::vector<double> want;
        for (std::size_t j = 0; j < 5; ++j)
            want.push_back(3 + double(v[j]) + double(v[5 + j]) + double(v[10 + j]));
        check_values(t, want, 1e-6);
        auto x3 = Tensor<FB, 3>::from_data(TensorData(ramp(24, -1.f, 1.f), {2, 3, 4}));
        auto r3 = x3.clamp_min(0.0).sum_dim(2);
        CHECK(r3.shape() == ember::Shape{2, 3, 1});
        std::vector<double> w3;
        const auto v3 = ramp(24, -1.f, 1.f);
        for (std::size_t r = 0; r < 6; ++r) {
            double a = 0;
            for (std::size_t c = 0; c < 4; ++c) a += std::max(0.0, double(v3[4 * r + c]));
            w3.push_back(a);
        }
        check_values(r3.into_data().template to_vec<float>(), w3, 1e-6);
        // A NaN in row 1 is the row's max, as unfused.
        std::vector<float> with_nan = v;
        with_nan[6] = std::numeric_limits<float>::quiet_NaN();
        auto xn = Tensor<FB, 2>::from_data(TensorData(with_nan, {3, 5}));
        auto nan_max = (xn + 1.0).max_dim(1).into_data().template to_vec<float>();
        CHECK(std::isnan(nan_max[1]));
        CHECK(nan_max[0] == Approx(v[4] + 1));
        // Along dim 0: reduced unfused after the chain.
        auto n = launches([&] { (void)(x * 3.0).sum_dim(0).into_data(); });
        CHECK(n == std::pair<std::uint64_t, std::uint64_t>{0, 2});
    }
}

// module::linear prepares a product's 2-D view only for a stack whose epilogue can answer:
// Autodiff declares fused_matmul_epilogue over every backend, but over Fusion<Cpu> it always
// declines.
static_assert(ember::fusion::may_fuse_matmul_epilogue<ember::Cpu>);
static_assert(ember::fusion::may_fuse_matmul_epilogue<ember::Autodiff<ember::Cpu>>);
static_assert(ember::fusion::MatmulEpilogueBackend<ember::Autodiff<ember::Fusion<ember::Cpu>>>);
static_assert(!ember::fusion::may_fuse_matmul_epilogue<ember::Autodiff<ember::Fusion<ember::Cpu>>>);
static_assert(!ember::fusion::may_fuse_matmul_epilogue<ember::Fusion<ember::Cpu>>);

/// Matmul epilogues where the backend takes them (`fused_matmul_epilogue`: the CPU, cuBLASLt on
/// CUDA): a 2-D f32 product followed by a bias row add and/or relu is one launch with the
/// values of the math; a product or sum held elsewhere, other ops, full-size biases and batched
/// products run as before, as does everything with epilogues turned off. Elsewhere (Vulkan) the
/// product and the chain run apart, with the same values.
TEMPLATE_LIST_TEST_CASE("fusion: a matmul's bias add and relu run inside it (epilogues)",
                        "[fusion][epilogue]", FusionStacks) {
    using FB = TestType;
    EMBER_SKIP_IF_UNAVAILABLE(FB);
    RestoreEpilogues restore;
    const std::size_t m = 5, k = 7, n = 6;
    const auto xv = ramp(m * k, -2.f, 2.f), wv = ramp(k * n, 1.5f, -1.f), bv = ramp(n, -1.f, 1.f);
    auto x = Tensor<FB, 2>::from_data(TensorData(xv, {m, k}));
    auto w = Tensor<FB, 2>::from_data(TensorData(wv, {k, n}));
    auto b = Tensor<FB, 2>::from_data(TensorData(bv, {1, n}));
    auto b1 = Tensor<FB, 1>::from_data(TensorData(bv, {n}));
    const auto with_bias = linear_reference(xv, wv, &bv, true, m, k, n);
    const auto plain = linear_reference(xv, wv, nullptr, false, m, k, n);
    auto values = [](const auto& t) { return t.clone().into_data().template to_vec<float>(); };

    if constexpr (!ember::detail::fusion::MatmulEpilogueBackend<typename FB::InnerBackend>) {
        fusion::reset_stats();
        check_values(values(ember::activation::relu(x.matmul(w) + b)), with_bias, 1e-5);
        CHECK(fusion::stats().epilogues == 0);
        return;
    }
    SECTION("relu(x · w + b): one launch with the values of the math") {
        fusion::reset_stats();
        auto y = ember::activation::relu(x.matmul(w) + b);
        CHECK(fusion::stats().kernels_launched == 0);  // the matmul waits for its epilogue
        check_values(values(y), with_bias, 1e-5);
        CHECK(fusion::stats().epilogues == 1);
        CHECK(fusion::stats().kernels_launched == 1);
    }
    SECTION("the bias on either side, and without relu or without bias") {
        fusion::reset_stats();
        // (A statement of its own: a temporary product still alive when the sum is read would
        // be held elsewhere, and computed on its own.)
        auto left = ember::activation::relu(b1.unsqueeze() + x.matmul(w));
        check_values(values(left), with_bias, 1e-5);
        CHECK(fusion::stats().epilogues == 1);
        check_values(values(x.matmul(w) + b1.unsqueeze()),
                     linear_reference(xv, wv, &bv, false, m, k, n), 1e-5);
        CHECK(fusion::stats().epilogues == 2);
        check_values(values(ember::activation::relu(x.matmul(w))),
                     linear_reference(xv, wv, nullptr, true, m, k, n), 1e-5);
        CHECK(fusion::stats().epilogues == 3);
    }
    SECTION("a product or sum held elsewhere is computed on its own") {
        fusion::reset_stats();
        auto mm = x.matmul(w);
        auto y = ember::activation::relu(mm + b);
        check_values(values(y), with_bias, 1e-5);
        check_values(values(mm), plain, 1e-5);
        auto s = x.matmul(w) + b;
        auto z = ember::activation::relu(s);
        check_values(values(z), with_bias, 1e-5);
        check_values(values(s), linear_reference(xv, wv, &bv, false, m, k, n), 1e-5);
        CHECK(fusion::stats().epilogues == 0);
    }
    SECTION("what is not an epilogue: a full bias, other ops, reductions, batched products") {
        fusion::reset_stats();
        auto full = Tensor<FB, 2>::ones({m, n});
        std::vector<double> want(plain);
        for (auto& e : want) e += 1;
        check_values(values(x.matmul(w) + full), want, 1e-5);
        for (std::size_t i = 0; i < want.size(); ++i) want[i] = std::exp(plain[i] * 0.5);
        check_values(values((x.matmul(w) * 0.5).exp()), want, 1e-5);
        std::vector<double> sums(m, 0.0);
        for (std::size_t i = 0; i < m; ++i)
            for (std::size_t j = 0; j < n; ++j) sums[i] += plain[i * n + j];
        check_values(values(x.matmul(w).sum_dim(1)), sums, 1e-5);
        auto x3 = x.template unsqueeze_dim<3>(0);
        auto y3 =
            ember::activation::relu(x3.matmul(w.template unsqueeze_dim<3>(0)) + b.unsqueeze());
        check_values(values(y3), with_bias, 1e-5);
        CHECK(fusion::stats().epilogues == 0);
    }
    SECTION("turned off: the matmul and the chain run apart, with the same values") {
        fusion::set_matmul_epilogues(false);
        fusion::reset_stats();
        check_values(values(ember::activation::relu(x.matmul(w) + b)), with_bias, 1e-5);
        CHECK(fusion::stats().epilogues == 0);
        CHECK(fusion::stats().kernels_launched == 2);
    }
    SECTION("inner dims that differ are an error at the matmul, as without fusion") {
        auto bad = Tensor<FB, 2>::ones({k + 1, n});
        CHECK_THROWS_AS(x.matmul(bad), ember::ShapeError);
    }
}

TEMPLATE_LIST_TEST_CASE("fusion: compiled programs are cached by structure", "[fusion]",
                        FusionStacks) {
    using FB = TestType;
    EMBER_SKIP_IF_UNAVAILABLE(FB);
    SECTION("scalars are not part of the key: a new value compiles nothing") {
        auto x = Tensor<FB, 1>::from_data(TensorData({1.f, 2.f}, {2}));
        auto a = ((x * 2 + 1) * x).into_data().template to_vec<float>();
        const auto compiled = backend_compiles<FB>();
        fusion::reset_stats();
        auto b = ((x * 3 + 5) * x).into_data().template to_vec<float>();
        auto c = ((x * -1 + 0.5) * x).into_data().template to_vec<float>();
        CHECK(fusion::stats().programs_compiled == 0);
        CHECK(fusion::stats().cache_hits == 2);
        CHECK(backend_compiles<FB>() == compiled);
        CHECK(a == std::vector<float>{3, 10});
        CHECK(b == std::vector<float>{8, 22});
        CHECK(c == std::vector<float>{-0.5, -3});
    }
    SECTION("a training loop compiles only in its first iteration") {
        using AB = ember::Autodiff<FB>;
        ember::Device<AB> device{};
        auto model = ember::nn::LinearConfig{8, 4}.init<AB>(device);
        auto optim = ember::optim::AdamConfig{}.init<decltype(model)>();
        auto x = Tensor<AB, 2>::random({16, 8}, ember::Distribution::Default, device);
        auto target = Tensor<AB, 2>::random({16, 4}, ember::Distribution::Default, device);
        std::uint64_t compiled_after_first = 0;
        std::vector<std::size_t> backend_after_first;
        float first_loss = 0, last_loss = 0;
        fusion::reset_stats();
        for (int it = 0; it < 5; ++it) {
            auto out = ember::activation::gelu(model.forward(x));
            auto loss = ((out - target) * (out - target)).mean();
            const float lv = loss.clone().into_scalar();
            auto grads = ember::optim::GradientsParams::from_grads(loss.backward(), model);
            model = optim.step(1e-2, std::move(model), std::move(grads));
            FB::sync({});
            if (it == 0) {
                first_loss = lv;
                compiled_after_first = fusion::stats().programs_compiled;
                backend_after_first = backend_compiles<FB>();
                fusion::reset_stats();
            }
            last_loss = lv;
        }
        CHECK(compiled_after_first > 0);
        CHECK(fusion::stats().programs_compiled == 0);
        CHECK(fusion::stats().cache_hits > 0);
        CHECK(fusion::stats().cache_hits == fusion::stats().fused_launches);
        CHECK(backend_compiles<FB>() == backend_after_first);
        CHECK(last_loss < first_loss);
    }
}

TEMPLATE_LIST_TEST_CASE("fusion: errors come at the op, as without fusion", "[fusion][errors]",
                        FusionStacks) {
    using FB = TestType;
    using Inner = typename FB::InnerBackend;
    EMBER_SKIP_IF_UNAVAILABLE(FB);
    auto a = Tensor<FB, 2>::from_data(TensorData({1.f, 2.f, 3.f, 4.f, 5.f, 6.f}, {2, 3}));
    auto b = Tensor<FB, 2>::from_data(TensorData({1.f, 2.f}, {1, 2}));
    CHECK_THROWS_AS(a + b, ember::ShapeError);
    CHECK_THROWS_AS(a.clamp(2.0, 1.0), ember::ArgumentError);
    auto i = Tensor<FB, 1, Int>::from_data(TensorData(std::vector<std::int64_t>{1, 2}, {2}));
    auto z = Tensor<FB, 1, Int>::from_data(TensorData(std::vector<std::int64_t>{1, 0}, {2}));
    CHECK_THROWS_AS(i / z, ember::ArgumentError);
    SECTION("a bad fused program is refused by the backend") {
        fusion::Program p;
        p.inputs.push_back({ember::DType::F16, true});
        p.instrs.push_back({});
        p.outputs.push_back(1);
        CHECK_THROWS_AS(Inner::fused_compile(p), ember::DTypeError);
        p.inputs[0].dtype = ember::DType::F32;
        p.instrs[0].a = 1;  // reads its own result
        CHECK_THROWS_AS(Inner::fused_compile(p), ember::ArgumentError);
        p.instrs[0].a = 0;
        auto kernel = Inner::fused_compile(p);
        auto t = Tensor<Inner, 1>::from_data(TensorData({1.f, 2.f, 3.f}, {3}));
        CHECK_THROWS_AS(Inner::fused_launch(kernel, p, {t.into_primitive()}, {}, ember::Shape{4}),
                        ember::ShapeError);
    }
}

// ---- Fusion<Cpu> alone: its memory, tile loops, epilogue bits and the custom-kernel example --

namespace {
using B = ember::Fusion<ember::Cpu>;
}  // namespace

TEST_CASE("fusion cpu: a dropped intermediate is never allocated", "[fusion]") {
    const std::size_t n = 1 << 16;
    auto x = Tensor<B, 1>::from_data(TensorData(ramp(n, -1, 1), {n}));
    B::sync({});
    const auto before = ember::cpu::memory_stats().bytes_in_use;
    ember::cpu::reset_peak_memory();
    auto y = gelu_custom(x);
    B::sync({});
    const auto peak = ember::cpu::memory_stats().peak_bytes_in_use;
    CHECK(peak - before <= n * sizeof(float) + 4096);  // the output alone
    CHECK(y.dims()[0] == n);
}

TEST_CASE("fusion cpu: the custom-kernel example against the math", "[fusion][custom-kernel]") {
    // lhs [1, 2, 3], rhs [1, 3, 2]: small enough to spell the expected values out.
    const std::vector<float> l{1, -2, 3, 0.5f, 1, -1}, r{2, 1, -1, 0, 1, 3};
    auto product = [&](std::size_t i, std::size_t j) {
        double s = 0;
        for (std::size_t k = 0; k < 3; ++k) s += double(l[i * 3 + k]) * r[k * 2 + j];
        return s;
    };
    auto expect = [&](auto bias_at) {
        std::vector<double> want;
        for (std::size_t i = 0; i < 2; ++i)
            for (std::size_t j = 0; j < 2; ++j)
                want.push_back(std::max(0.0, product(i, j) + bias_at(i, j)));
        return want;
    };
    auto run = [&]<typename BE>(const TensorData& bias) {
        auto out = custom::fused_matmul_add_relu(Tensor<BE, 3>::from_data(TensorData(l, {1, 2, 3})),
                                                 Tensor<BE, 3>::from_data(TensorData(r, {1, 3, 2})),
                                                 Tensor<BE, 3>::from_data(bias));
        return out.into_data().template to_vec<float>();
    };
    SECTION("a full bias: the CPU's kernel and the reference (on Fusion<Cpu>)") {
        const std::vector<float> bias{1, -20, 0.5f, 2};
        const auto want =
            expect([&](std::size_t i, std::size_t j) { return double(bias[i * 2 + j]); });
        check_values(run.template operator()<ember::Cpu>(TensorData(bias, {1, 2, 2})), want, 1e-6);
        check_values(run.template operator()<B>(TensorData(bias, {1, 2, 2})), want, 1e-6);
    }
    SECTION("a broadcast bias row") {
        const std::vector<float> bias{-3, 1};
        const auto want = expect([&](std::size_t, std::size_t j) { return double(bias[j]); });
        check_values(run.template operator()<ember::Cpu>(TensorData(bias, {1, 1, 2})), want, 1e-6);
        check_values(run.template operator()<B>(TensorData(bias, {1, 1, 2})), want, 1e-6);
    }
    SECTION("differentiable through the reference on Autodiff<Cpu>") {
        using A = ember::Autodiff<ember::Cpu>;
        auto w = Tensor<A, 3>::from_data(TensorData(r, {1, 3, 2})).require_grad();
        auto lhs = Tensor<A, 3>::from_data(TensorData(l, {1, 2, 3}));
        auto bias = Tensor<A, 3>::from_data(TensorData({0.f, 0.f, 0.f, 0.f}, {1, 2, 2}));
        auto grads = custom::fused_matmul_add_relu(lhs, w, bias).sum().backward();
        // d/dw[k, j] = sum over rows i with a positive output of lhs[i, k].
        std::vector<double> want(6, 0.0);
        for (std::size_t i = 0; i < 2; ++i)
            for (std::size_t j = 0; j < 2; ++j)
                if (product(i, j) > 0)
                    for (std::size_t k = 0; k < 3; ++k) want[k * 2 + j] += l[i * 3 + k];
        check_values(w.grad(grads)->into_data().to_vec<float>(), want, 1e-6);
    }
}

namespace {

// Inputs for comparing the CPU's fused-loop kernels: a ramp over [-6, 6] with the element
// functions' edge cases (NaN, ±inf, ±0, erf's clamp at ±4, far tails) mixed in.
std::vector<float> probe_values(std::size_t n) {
    auto v = ramp(std::max<std::size_t>(n, 2), -6.f, 6.f);
    v.resize(n);
    const float special[] = {std::numeric_limits<float>::quiet_NaN(),
                             std::numeric_limits<float>::infinity(),
                             -std::numeric_limits<float>::infinity(),
                             0.f,
                             -0.f,
                             4.f,
                             -4.f,
                             3.99f,
                             -4.01f,
                             1e-30f,
                             100.f,
                             -100.f};
    for (std::size_t i = 0; i < n; i += 7) v[i] = special[(i / 7) % std::size(special)];
    return v;
}

// Bit for bit the same (any NaN matches any NaN).
template <typename T>
void check_same_bits(const std::vector<T>& got, const std::vector<T>& want) {
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
        if constexpr (std::is_floating_point_v<T>) {
            if (std::isnan(got[i]) && std::isnan(want[i])) continue;
        }
        INFO("element " << i << ": " << got[i] << " vs " << want[i]);
        CHECK(std::memcmp(&got[i], &want[i], sizeof(T)) == 0);
    }
}

// Several fused programs over x, covering every kind of tile loop: float unary (erf, exp,
// tanh, sigmoid, abs, sqrt), binary and scalar ops, comparisons, where, mask_fill, clamp,
// casts, int and bool chains.
struct KernelRun {
    std::vector<float> gelu, erf, transcend, select, links;
    std::vector<std::int64_t> ints;
};
KernelRun run_programs(const std::vector<float>& v) {
    const std::size_t n = v.size();
    auto x = Tensor<B, 1>::from_data(TensorData(v, {n}));
    KernelRun r;
    fusion::reset_stats();
    r.gelu = gelu_custom(x).into_data().to_vec<float>();
    r.erf = (x.erf() * 1).into_data().to_vec<float>();  // a lone op would not be fused
    r.transcend = (x.exp() * 0.25 + x.tanh() - ember::activation::sigmoid(x) + x.abs().sqrt())
                      .into_data()
                      .to_vec<float>();
    r.select = x.mask_where(x.greater_elem(0.5), x * 3)
                   .mask_fill(x.lower_elem(-1.0), 7.0)
                   .clamp(-2.0, 5.0)
                   .into_data()
                   .to_vec<float>();
    // Every kind of chain link (scalar and register operands, the chain's value on either side
    // of - and /, negation, erf), broken where an intermediate is also an output (`mid`).
    auto z = x.abs() + 0.5;
    auto mid = ((3.0 / ((x - 0.5) * 1.25 + 2.5)) - 0.75) / 1.5;
    auto links = -(z + (z / (z - ((2.0 - mid) * z - z) / z) + z).erf() * 0.5);
    r.links = links.into_data().to_vec<float>();
    const auto mid_values = mid.into_data().to_vec<float>();
    r.links.insert(r.links.end(), mid_values.begin(), mid_values.end());
    auto i = (x.clamp(-50.0, 50.0) * 10).int_();
    auto m = (i * 3 + 1).greater_elem(2).bool_and(i.lower_elem(40)).not_();
    r.ints = (m.int_() * 100 + i * i - i).into_data().to_vec<std::int64_t>();
    CHECK(fusion::stats().fused_launches == 6);
    return r;
}

// Puts the default fused-loop kernel back however the test ends.
struct RestoreKernel {
    ~RestoreKernel() { ember::cpu::set_fusion_kernel("auto"); }
};

}  // namespace

TEST_CASE("fusion cpu: the AVX-512 loops give the bits of the build's own", "[fusion]") {
    RestoreKernel restore;
    REQUIRE(ember::cpu::set_fusion_kernel("native"));
    CHECK(ember::cpu::fusion_kernel() == "native");
    CHECK_FALSE(ember::cpu::set_fusion_kernel("no-such-kernel"));
    CHECK(ember::cpu::fusion_kernel() == "native");
    // Lengths around the vector widths (8, 16) and the 512-element tile, for the tails.
    for (std::size_t n : {1, 7, 15, 16, 17, 33, 511, 513, 1025, 10007}) {
        INFO("n = " << n);
        const auto v = probe_values(n);
        REQUIRE(ember::cpu::set_fusion_kernel("native"));
        const KernelRun native = run_programs(v);
        if (!ember::cpu::set_fusion_kernel("avx512")) {
            WARN("this processor has no AVX-512: only the build's own loops ran");
            return;
        }
        CHECK(ember::cpu::fusion_kernel() == "avx512");
        const KernelRun wide = run_programs(v);
        check_same_bits(wide.gelu, native.gelu);
        check_same_bits(wide.erf, native.erf);
        check_same_bits(wide.transcend, native.transcend);
        check_same_bits(wide.select, native.select);
        check_same_bits(wide.links, native.links);
        check_same_bits(wide.ints, native.ints);
        // And the vector erf against the math (erf(±inf) = ±1, NaN stays NaN).
        for (std::size_t k = 0; k < n; ++k) {
            INFO("erf(" << v[k] << ") = " << wide.erf[k]);
            if (std::isnan(v[k]))
                CHECK(std::isnan(wide.erf[k]));
            else
                CHECK(std::abs(wide.erf[k] - std::erf(static_cast<double>(v[k]))) <= 1e-6);
        }
    }
}

TEST_CASE("fusion cpu: the epilogue has the unfused ops' bits, gradients too",
          "[fusion][epilogue]") {
    RestoreEpilogues restore;
    const std::size_t m = 5, k = 7, n = 6;
    const auto xv = ramp(m * k, -2.f, 2.f), wv = ramp(k * n, 1.5f, -1.f), bv = ramp(n, -1.f, 1.f);
    auto run = [&]<typename X>(ember::detail::TypeTag<X>) {
        auto x = Tensor<X, 2>::from_data(TensorData(xv, {m, k}));
        auto w = Tensor<X, 2>::from_data(TensorData(wv, {k, n}));
        auto b = Tensor<X, 2>::from_data(TensorData(bv, {1, n}));
        auto y = ember::activation::relu(x.matmul(w) + b);
        return y.into_data().template to_vec<float>();
    };
    fusion::reset_stats();
    check_same_bits(run(ember::detail::TypeTag<B>{}), run(ember::detail::TypeTag<ember::Cpu>{}));
    CHECK(fusion::stats().epilogues == 1);

    using A = ember::Autodiff<B>;
    using AC = ember::Autodiff<ember::Cpu>;
    auto grads_of = [&]<typename X>(ember::detail::TypeTag<X>) {
        auto xa = Tensor<X, 2>::from_data(TensorData(xv, {m, k})).require_grad();
        auto wa = Tensor<X, 2>::from_data(TensorData(wv, {k, n})).require_grad();
        auto ba = Tensor<X, 1>::from_data(TensorData(bv, {n})).require_grad();
        auto g = (ember::activation::relu(xa.matmul(wa) + ba.unsqueeze()) * 3).sum().backward();
        std::vector<std::vector<float>> out;
        out.push_back(xa.grad(g)->into_data().template to_vec<float>());
        out.push_back(wa.grad(g)->into_data().template to_vec<float>());
        out.push_back(ba.grad(g)->into_data().template to_vec<float>());
        return out;
    };
    const auto fused = grads_of(ember::detail::TypeTag<A>{});
    const auto ref = grads_of(ember::detail::TypeTag<AC>{});
    for (std::size_t i = 0; i < 3; ++i) check_same_bits(fused[i], ref[i]);
}

// ---- Fusion<Vulkan> alone: its SPIR-V cache on disk ----------------------------------------
#if defined(EMBER_VULKAN)
TEST_CASE("fusion vulkan: SPIR-V is reloaded from disk, a corrupt file is ignored and rewritten",
          "[fusion][vulkan]") {
    using F = ember::Fusion<ember::Vulkan>;
    EMBER_SKIP_IF_UNAVAILABLE(F);
    // Other test processes may share the cache directory (ctest -j): only this program's
    // file is looked at, by the path the cache reports.
    const auto v = ramp(64, -2.f, 2.f);
    auto x = Tensor<F, 1>::from_data(TensorData(v, {64}));
    auto run = [&] { return ((x.sin() * x.cos() + 0.125) * 0.75).into_data().to_vec<float>(); };
    std::vector<double> want;
    for (float e : v) want.push_back((std::sin(double(e)) * std::cos(double(e)) + 0.125) * 0.75);
    namespace fs = std::filesystem;
    ember::vulkan::clear_fusion_cache(true);  // no SPIR-V in memory nor on disk
    auto s0 = ember::vulkan::fusion_cache_stats();
    check_values(run(), want, 1e-5);
    auto s1 = ember::vulkan::fusion_cache_stats();
    CHECK(s1.spirv_compiled == s0.spirv_compiled + 1);
    CHECK(s1.disk_writes == s0.disk_writes + 1);
    const fs::path file = s1.last_file;
    REQUIRE(fs::exists(file));
    CHECK(file.parent_path() == fs::path(ember::vulkan::cache_directory()));
    CHECK(file.filename().string().find("-fused-") != std::string::npos);

    ember::vulkan::clear_fusion_cache();  // a fresh load: memory forgotten, disk kept
    check_values(run(), want, 1e-5);
    auto s2 = ember::vulkan::fusion_cache_stats();
    CHECK(s2.spirv_compiled == s1.spirv_compiled);
    CHECK(s2.disk_loads == s1.disk_loads + 1);

    {  // same size, garbage inside
        const auto size = fs::file_size(file);
        std::ofstream(file, std::ios::binary) << std::string(size, '\x5a');
    }
    ember::vulkan::clear_fusion_cache();
    check_values(run(), want, 1e-5);
    auto s3 = ember::vulkan::fusion_cache_stats();
    CHECK(s3.disk_rejected == s2.disk_rejected + 1);
    CHECK(s3.spirv_compiled == s2.spirv_compiled + 1);
    CHECK(s3.disk_writes == s2.disk_writes + 1);

    ember::vulkan::clear_fusion_cache();  // the rewritten file is whole again
    check_values(run(), want, 1e-5);
    auto s4 = ember::vulkan::fusion_cache_stats();
    CHECK(s4.disk_loads == s3.disk_loads + 1);
    CHECK(s4.spirv_compiled == s3.spirv_compiled);
}
#endif

// ---- Fusion<Cuda> alone: NVRTC (no GPU needed), cuBLASLt's epilogue operands, the disk cache --
#if defined(EMBER_CUDA)
namespace {
using ember::Cuda;
using ember::DType;
using F = ember::Fusion<ember::Cuda>;
using fusion::OpKind;

fusion::Instr instr(OpKind k, std::uint8_t code, DType d, std::uint16_t a, std::uint16_t b = 0,
                    std::uint16_t c = 0, std::uint16_t s0 = 0, std::uint16_t s1 = 0) {
    fusion::Instr in;
    in.kind = k;
    in.code = code;
    in.dtype = d;
    in.a = a;
    in.b = b;
    in.c = c;
    in.s0 = s0;
    in.s1 = s1;
    return in;
}

// gelu_custom as Fusion records it: x / √2, erf, + 1, x ·, / 2.
fusion::Program gelu_program(bool dense, std::size_t rank = 1) {
    fusion::Program p;
    p.rank = rank;
    p.inputs.push_back({DType::F32, dense});
    p.instrs = {instr(OpKind::BinaryScalar, 3, DType::F32, 0, 0, 0, 0),
                instr(OpKind::Unary, 9, DType::F32, 1),
                instr(OpKind::BinaryScalar, 0, DType::F32, 2, 0, 0, 1),
                instr(OpKind::Binary, 2, DType::F32, 0, 3),
                instr(OpKind::BinaryScalar, 3, DType::F32, 4, 0, 0, 2)};
    p.outputs = {5};
    return p;
}

// Every kind of instruction and register type: f32 and i64 inputs, a strided f64 input,
// comparisons, where, mask_fill, clamp, casts, bool logic, three outputs of three dtypes.
fusion::Program mixed_program(bool dense) {
    using U = std::uint8_t;
    fusion::Program p;
    p.rank = 3;
    p.inputs = {{DType::F32, true}, {DType::I64, dense}, {DType::F64, dense}};
    p.instrs = {
        instr(OpKind::Cast, 0, DType::F32, 1),                             // r3 = float(i)
        instr(OpKind::Binary, U(ember::BinaryOp::Rem), DType::F32, 0, 3),  // r4 = x % r3
        instr(OpKind::CompareScalar, U(ember::CompareOp::Gt), DType::Bool, 0, 0, 0, 0),  // r5
        instr(OpKind::Where, 0, DType::F32, 5, 4, 0),                                    // r6
        instr(OpKind::Clamp, 0, DType::F32, 6, 0, 0, 1, 2),                              // r7
        instr(OpKind::BinaryScalar, U(ember::BinaryOp::Mul), DType::I64, 1, 0, 0, 3),    // r8
        instr(OpKind::CompareScalar, U(ember::CompareOp::Le), DType::Bool, 8, 0, 0, 4),  // r9
        instr(OpKind::Binary, U(ember::BinaryOp::Xor), DType::Bool, 9, 5),               // r10
        instr(OpKind::MaskFill, 0, DType::I64, 8, 10, 0, 5),                             // r11
        instr(OpKind::Unary, U(ember::UnaryOp::Sigmoid), DType::F64, 2),                 // r12
        instr(OpKind::Cast, 0, DType::F64, 7),                                           // r13
        instr(OpKind::Binary, U(ember::BinaryOp::Pow), DType::F64, 12, 13),              // r14
        instr(OpKind::Unary, U(ember::UnaryOp::Not), DType::Bool, 10),                   // r15
    };
    p.outputs = {11, 14, 15};
    return p;
}

bool is_elf(const std::string& s) {
    return s.size() > 4 && s.compare(0, 4,
                                     "\x7f"
                                     "ELF") == 0;
}

}  // namespace

TEST_CASE("cuda fusion: generated kernels compile with NVRTC (no GPU needed)", "[cuda][fusion]") {
    SECTION("gelu_custom: vector, dense and strided kernels") {
        const std::string dense = ember::cuda::fused_source(gelu_program(true));
        CHECK(dense.find("_vec4(") != std::string::npos);
        CHECK(dense.find("float4") != std::string::npos);
        CHECK(dense.find("erff(") != std::string::npos);
        CHECK(is_elf(ember::cuda::nvrtc_compile(dense, 90, true)));
        const std::string ptx = ember::cuda::nvrtc_compile(dense, 90, false);
        CHECK(ptx.find(".entry ember_fused_") != std::string::npos);
        CHECK(ptx.find("ld.global.nc.v4.f32") != std::string::npos);  // the vector loads
        const std::string strided = ember::cuda::fused_source(gelu_program(false, 4));
        CHECK(strided.find("_strided(") != std::string::npos);
        CHECK(is_elf(ember::cuda::nvrtc_compile(strided, 90, true)));
    }
    SECTION("every instruction kind and register type") {
        for (bool dense : {true, false}) {
            const std::string src = ember::cuda::fused_source(mixed_program(dense));
            CHECK(is_elf(ember::cuda::nvrtc_compile(src, 90, true)));
            CHECK(!ember::cuda::nvrtc_compile(src, 80, false).empty());
        }
    }
    SECTION("a program that ends in a reduction: the rows kernel alone") {
        for (bool dense : {true, false}) {
            auto p = gelu_program(dense, dense ? 1 : 4);
            p.reduce = ember::fusion::RowReduce{ember::ReduceOp::Max, p.outputs[0]};
            p.outputs.clear();
            const std::string src = ember::cuda::fused_source(p);
            CHECK(src.find("_rows(") != std::string::npos);
            CHECK(src.find("_vec4(") == std::string::npos);
            CHECK(is_elf(ember::cuda::nvrtc_compile(src, 90, true)));
        }
        auto p = gelu_program(true);
        p.reduce = ember::fusion::RowReduce{ember::ReduceOp::Prod, p.outputs[0]};
        CHECK_THROWS_AS(ember::cuda::fused_source(p), ember::ArgumentError);
    }
    SECTION("scalars are parameters, not part of the source") {
        const std::string src = ember::cuda::fused_source(gelu_program(true));
        CHECK(src.find("double s0") != std::string::npos);
        CHECK(src.find("1.41421") == std::string::npos);
    }
    SECTION("bad programs and bad source are ember errors") {
        auto p = gelu_program(true);
        p.inputs[0].dtype = DType::F16;
        CHECK_THROWS_AS(ember::cuda::fused_source(p), ember::DTypeError);
        p = gelu_program(true);
        p.instrs[0].a = 1;  // reads its own result
        CHECK_THROWS_AS(ember::cuda::fused_source(p), ember::ArgumentError);
        p = gelu_program(true);
        p.instrs[1] = instr(OpKind::Unary, std::uint8_t(ember::UnaryOp::Exp), DType::I64, 0);
        p.inputs[0].dtype = DType::I64;
        p.instrs[0].dtype = DType::I64;
        CHECK_THROWS_AS(ember::cuda::fused_source(p), ember::DTypeError);
        try {
            (void)ember::cuda::nvrtc_compile("extern \"C\" __global__ void k() { undeclared(); }",
                                             90, false);
            FAIL("no error");
        } catch (const ember::DeviceError& e) {
            const std::string m = e.what();
            CHECK(m.find("nvrtcCompileProgram") != std::string::npos);
            CHECK(m.find("undeclared") != std::string::npos);  // NVRTC's log
        }
    }
}

TEST_CASE("cuda fusion: epilogues on transposed and offset operands, and a Linear layer",
          "[cuda][fusion][epilogue]") {
    EMBER_SKIP_IF_UNAVAILABLE(F);
    RestoreEpilogues restore;
    const std::size_t m = 33, k = 70, n = 45;  // odd sizes: the alignments cuBLASLt is told
    const auto xv = ramp(m * k, -1.f, 1.f), wv = ramp(n * k, 0.5f, -0.5f), bv = ramp(n, -1.f, 1.f);
    auto x = Tensor<F, 2>::from_data(TensorData(xv, {m, k}));
    auto wt = Tensor<F, 2>::from_data(TensorData(wv, {n, k}));  // used transposed
    auto b = Tensor<F, 2>::from_data(TensorData(bv, {1, n}));
    std::vector<float> w(k * n);
    for (std::size_t q = 0; q < k; ++q)
        for (std::size_t j = 0; j < n; ++j) w[q * n + j] = wv[j * k + q];
    fusion::reset_stats();
    auto y = ember::activation::relu(x.matmul(wt.transpose()) + b);
    check_values(y.into_data().to_vec<float>(), linear_reference(xv, w, &bv, true, m, k, n), 1e-5);
    // Rows 1.. of x: an operand that starts past its buffer's first element.
    auto rows = x.slice({{1, m}, {0, k}});
    auto z = rows.matmul(wt.transpose()) + b;
    const auto want = linear_reference(xv, w, &bv, false, m, k, n);
    check_values(z.into_data().to_vec<float>(), std::vector<double>(want.begin() + n, want.end()),
                 1e-5);
    CHECK(fusion::stats().epilogues == 2);
}

TEST_CASE("cuda fusion: the on-disk cache", "[cuda][fusion]") {
    EMBER_SKIP_IF_UNAVAILABLE(F);
    const auto dir =
        std::filesystem::temp_directory_path() / ("ember-cuf-test-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    ::setenv("EMBER_CACHE_DIR", dir.c_str(), 1);
    // A program no other case builds (a rank-2 gelu_custom over dense input).
    const auto prog = gelu_program(true, 2);
    const auto v = ramp(64, -1.f, 1.f);
    auto run = [&] {
        auto x = Cuda::float_from_data(TensorData(v, {8, 8}), {});
        const std::vector<ember::Scalar> sc{std::numbers::sqrt2, 1.0, 2.0};
        auto kern = Cuda::fused_compile(prog);
        auto outs = Cuda::fused_launch(kern, prog, {x}, sc, ember::Shape{8, 8});
        REQUIRE(outs.size() == 1);
        return Cuda::float_into_data(outs[0]).to_vec<float>();
    };
    auto want = gelu_custom(Tensor<Cuda, 2>::from_data(TensorData(v, {8, 8}), {}))
                    .into_data()
                    .to_vec<float>();
    const auto s0 = ember::cuda::fusion_compile_stats();
    check_same(run(), want);
    const auto s1 = ember::cuda::fusion_compile_stats();
    CHECK(s1.nvrtc_compiles == s0.nvrtc_compiles + 1);
    std::vector<std::filesystem::path> files;
    for (const auto& e : std::filesystem::recursive_directory_iterator(dir))
        if (e.is_regular_file()) files.push_back(e.path());
    REQUIRE(files.size() == 1);  // no temporary left behind
    check_same(run(), want);     // a new module: the image comes from the disk
    const auto s2 = ember::cuda::fusion_compile_stats();
    CHECK(s2.nvrtc_compiles == s1.nvrtc_compiles);
    CHECK(s2.disk_hits == s1.disk_hits + 1);
    {
        std::ofstream corrupt(files[0], std::ios::binary | std::ios::trunc);
        corrupt << "EMBCUFS1 not an image";
    }
    check_same(run(), want);  // ignored: compiled again, and rewritten
    const auto s3 = ember::cuda::fusion_compile_stats();
    CHECK(s3.nvrtc_compiles == s2.nvrtc_compiles + 1);
    CHECK(s3.disk_hits == s2.disk_hits);
    ::unsetenv("EMBER_CACHE_DIR");
    std::filesystem::remove_all(dir);
}
#endif

}  // namespace test_fusion
