// Fusion<Cpu>: elementwise chains run as one kernel, with values from closed-form math; what
// breaks a chain; outputs kept only for values still held; the program cache; errors as eager.
// (The shared op suites also run on Fusion<Cpu> and Autodiff<Fusion<Cpu>>: harness.hpp.)
#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>
#include <numbers>
#include <vector>

#include <ember/nn.hpp>
#include <ember/optim.hpp>

#include "fusion_common.hpp"
#include "harness.hpp"

namespace {

using ember::Bool;
using ember::Int;
using ember::Tensor;
using ember::TensorData;
using B = ember::Fusion<ember::Cpu>;
namespace fusion = ember::fusion;
using ember::test::check_values;
using ember::test::gelu_custom;
using ember::test::ramp;

}  // namespace

TEST_CASE("fusion: gelu_custom runs as one kernel and matches the math", "[fusion]") {
    const std::size_t n = 10007;  // not a multiple of the tile
    const auto v = ramp(n, -6.f, 6.f);
    auto x = Tensor<B, 1>::from_data(TensorData(v, {n}));
    fusion::reset_stats();
    auto y = gelu_custom(x);
    CHECK(fusion::stats().kernels_launched == 0);  // recorded, not run
    const auto got = y.into_data().to_vec<float>();
    const auto s = fusion::stats();
    CHECK(s.kernels_launched == 1);
    CHECK(s.fused_launches == 1);
    CHECK(s.ops_fused == 5);
    std::vector<double> want(n);
    for (std::size_t i = 0; i < n; ++i) {
        const double xi = v[i];
        want[i] = xi * (std::erf(xi / std::numbers::sqrt2) + 1) / 2;
    }
    check_values(got, want, 1e-6);

    SECTION("the same values as the unfused chain") {
        auto xc = Tensor<ember::Cpu, 1>::from_data(TensorData(v, {n}));
        const auto ref = gelu_custom(xc).into_data().to_vec<float>();
        for (std::size_t i = 0; i < n; ++i)
            CHECK(std::abs(got[i] - ref[i]) <= 1e-6f * std::max(1.f, std::abs(ref[i])));
    }
}

TEST_CASE("fusion: what a chain may hold", "[fusion]") {
    SECTION("broadcasting and scalars: one kernel over the broadcast shape") {
        auto a = Tensor<B, 2>::from_data(TensorData({1.f, 2.f, 3.f}, {3, 1}));
        auto b = Tensor<B, 2>::from_data(TensorData({10.f, 20.f, 30.f, 40.f}, {1, 4}));
        fusion::reset_stats();
        auto c = ((a + b) * 2 - 1).into_data().to_vec<float>();
        CHECK(fusion::stats().fused_launches == 1);
        std::vector<double> want;
        for (double ai : {1., 2., 3.})
            for (double bi : {10., 20., 30., 40.}) want.push_back((ai + bi) * 2 - 1);
        check_values(c, want, 0);
    }
    SECTION("comparisons, where, mask_fill and clamp") {
        auto x = Tensor<B, 1>::from_data(TensorData({-2.f, -0.5f, 0.f, 0.5f, 3.f}, {5}));
        auto y = Tensor<B, 1>::from_data(TensorData({9.f, 9.f, 9.f, 9.f, 9.f}, {5}));
        fusion::reset_stats();
        auto pos = x.greater_elem(0.0);
        auto r = x.mask_where(pos, y).mask_fill(x.lower_elem(-1.0), 7.0).clamp(-1.0, 8.0);
        const auto got = r.into_data().to_vec<float>();
        CHECK(fusion::stats().fused_launches == 1);
        check_values(got, {7, -0.5, 0, 8, 8}, 0);
    }
    SECTION("a strided (transposed) input") {
        auto x = Tensor<B, 2>::from_data(TensorData({1.f, 2.f, 3.f, 4.f, 5.f, 6.f}, {2, 3}));
        auto t = x.transpose();  // [3, 2], not contiguous
        fusion::reset_stats();
        const auto got = (t.exp() + t).into_data().to_vec<float>();
        CHECK(fusion::stats().fused_launches == 1);
        std::vector<double> want;
        for (double e : {1., 4., 2., 5., 3., 6.}) want.push_back(std::exp(e) + e);
        check_values(got, want, 1e-6);
    }
    SECTION("casts and int and bool chains") {
        auto i =
            Tensor<B, 1, Int>::from_data(TensorData(std::vector<std::int64_t>{-3, 0, 2, 5}, {4}));
        fusion::reset_stats();
        auto m = (i * 2 + 1).greater_elem(2).bool_and(i.lower_elem(5));
        auto f = m.float_() * 0.5 + i.float_();
        const auto got = f.into_data().to_vec<float>();
        CHECK(fusion::stats().fused_launches == 1);
        check_values(got, {-3, 0, 2.5, 5}, 0);
        const auto mi = m.int_().into_data().to_vec<std::int64_t>();
        CHECK(mi == std::vector<std::int64_t>{0, 0, 1, 0});
    }
}

TEST_CASE("fusion: outputs and materialisation", "[fusion]") {
    SECTION("intermediates still held are written out by the same kernel") {
        auto x = Tensor<B, 1>::from_data(TensorData({0.f, 1.f, 2.f}, {3}));
        fusion::reset_stats();
        auto t = x.exp();
        auto u = t + 1;
        auto w = t * 2;
        const auto tu = u.into_data().to_vec<float>();
        CHECK(fusion::stats().fused_launches == 1);
        const auto tw = w.into_data().to_vec<float>();
        const auto tt = t.into_data().to_vec<float>();
        CHECK(fusion::stats().kernels_launched == 1);  // all three came from that kernel
        for (std::size_t k = 0; k < 3; ++k) {
            const double e = std::exp(static_cast<double>(k));
            CHECK(std::abs(tu[k] - (e + 1)) < 1e-5);
            CHECK(std::abs(tw[k] - 2 * e) < 1e-5);
            CHECK(std::abs(tt[k] - e) < 1e-5);
        }
    }
    SECTION("a dropped intermediate is never allocated") {
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
    SECTION("a non-fusable op flushes the chain first") {
        auto x = Tensor<B, 2>::from_data(TensorData({1.f, 2.f, 3.f, 4.f}, {2, 2}));
        fusion::reset_stats();
        auto s = (x * x + 1).sum();
        CHECK(fusion::stats().fused_launches == 1);
        CHECK(s.into_scalar() == 34.f);
    }
}

TEST_CASE("fusion: reductions along the last dim end the chain's kernel", "[fusion]") {
    ember::test::check_fused_reductions<B>();
}

TEST_CASE("fusion: compiled programs are cached by structure", "[fusion]") {
    SECTION("scalars are not part of the key") {
        auto x = Tensor<B, 1>::from_data(TensorData({1.f, 2.f}, {2}));
        fusion::reset_stats();
        auto a = ((x * 2 + 1) * x).into_data().to_vec<float>();
        auto b = ((x * 3 + 5) * x).into_data().to_vec<float>();
        const auto s = fusion::stats();
        CHECK(s.programs_compiled + s.cache_hits == 2);
        CHECK(s.cache_hits >= 1);
        CHECK(a == std::vector<float>{3, 10});
        CHECK(b == std::vector<float>{8, 22});
    }
    SECTION("a training loop compiles only in its first iteration") {
        using AB = ember::Autodiff<B>;
        ember::Device<AB> device{};
        auto model = ember::nn::LinearConfig{8, 4}.init<AB>(device);
        auto optim = ember::optim::AdamConfig{}.init<decltype(model)>();
        auto x = Tensor<AB, 2>::random({16, 8}, ember::Distribution::Default, device);
        auto target = Tensor<AB, 2>::random({16, 4}, ember::Distribution::Default, device);
        std::uint64_t compiled_after_first = 0;
        float first_loss = 0, last_loss = 0;
        for (int it = 0; it < 5; ++it) {
            auto out = ember::activation::gelu(model.forward(x));
            auto loss = ((out - target) * (out - target)).mean();
            const float lv = loss.clone().into_scalar();
            auto grads = ember::optim::GradientsParams::from_grads(loss.backward(), model);
            model = optim.step(1e-2, std::move(model), std::move(grads));
            B::sync({});
            if (it == 0) {
                first_loss = lv;
                compiled_after_first = fusion::stats().programs_compiled;
                fusion::reset_stats();
            }
            last_loss = lv;
        }
        CHECK(fusion::stats().programs_compiled == 0);
        CHECK(fusion::stats().cache_hits > 0);
        CHECK(compiled_after_first > 0);
        CHECK(last_loss < first_loss);
    }
}

TEST_CASE("fusion: errors come at the op, as without fusion", "[fusion][errors]") {
    auto a = Tensor<B, 2>::from_data(TensorData({1.f, 2.f, 3.f, 4.f, 5.f, 6.f}, {2, 3}));
    auto b = Tensor<B, 2>::from_data(TensorData({1.f, 2.f}, {1, 2}));
    CHECK_THROWS_AS(a + b, ember::ShapeError);
    CHECK_THROWS_AS(a.clamp(2.0, 1.0), ember::ArgumentError);
    auto i = Tensor<B, 1, Int>::from_data(TensorData(std::vector<std::int64_t>{1, 2}, {2}));
    auto z = Tensor<B, 1, Int>::from_data(TensorData(std::vector<std::int64_t>{1, 0}, {2}));
    CHECK_THROWS_AS(i / z, ember::ArgumentError);
    SECTION("a bad fused program is refused by the CPU") {
        fusion::Program p;
        p.inputs.push_back({ember::DType::F16, true});
        p.instrs.push_back({});
        p.outputs.push_back(1);
        CHECK_THROWS_AS(ember::Cpu::fused_compile(p), ember::DTypeError);
        p.inputs[0].dtype = ember::DType::F32;
        p.instrs[0].a = 1;  // reads its own result
        CHECK_THROWS_AS(ember::Cpu::fused_compile(p), ember::ArgumentError);
    }
}

#include "../examples/custom-kernel/fused_matmul_add_relu.hpp"

TEST_CASE("fusion: the custom-kernel example against the math", "[fusion][custom-kernel]") {
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

TEST_CASE("fusion: the CPU's AVX-512 loops give the bits of the build's own", "[fusion]") {
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

TEST_CASE("fusion: a matmul's bias add and relu run inside it (epilogues)", "[fusion][epilogue]") {
    ember::test::check_matmul_epilogues<B>();
}

TEST_CASE("fusion: the CPU's epilogue has the unfused ops' bits, gradients too", "[fusion][epilogue]") {
    ember::test::RestoreEpilogues restore;
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
