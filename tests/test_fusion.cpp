// Fusion<Cpu>: elementwise chains run as one kernel, with values from closed-form math; what
// breaks a chain; outputs kept only for values still held; the program cache; errors as eager.
// (The shared op suites also run on Fusion<Cpu> and Autodiff<Fusion<Cpu>>: harness.hpp.)
#include <cmath>
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
        auto i = Tensor<B, 1, Int>::from_data(TensorData(std::vector<std::int64_t>{-3, 0, 2, 5}, {4}));
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
            for (std::size_t j = 0; j < 2; ++j) want.push_back(std::max(0.0, product(i, j) + bias_at(i, j)));
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
        const auto want = expect([&](std::size_t i, std::size_t j) { return double(bias[i * 2 + j]); });
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
