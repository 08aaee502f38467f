// The activations of issue 33 (elu ... rrelu, gelu_tanh, glu) as functions and as modules, on
// every backend: values against PyTorch (tests/fixtures/gen_activations.py, torch 1.13) including
// extremes, kinks and NaN; gradients against PyTorch and float64 finite differences on every
// autodiff stack; argument errors; the Activation enum module built from ActivationConfig.
#include <algorithm>
#include <cmath>
#include <string>

#include "ember/nn.hpp"
#include "grad_check.hpp"

namespace test_activation_ext {

namespace {

using ember::test::Fixture;
namespace act = ember::activation;
namespace nn = ember::nn;

constexpr const char* kFile = "activations";

/// Runs the function a fixture case names (its "op" param) with the case's parameters. One
/// runtime dispatch keeps the gradient checker to a single instantiation per backend.
template <typename B>
ember::Tensor<B, 2> apply(const Fixture& f, ember::Tensor<B, 2> x) {
    const std::string& op = f.str("op");
    auto p = [&](const char* k) { return f.param(k); };
    if (op == "sigmoid") return act::sigmoid(x);
    if (op == "tanh") return act::tanh(x);
    if (op == "silu") return act::swish(x);
    if (op == "elu") return act::elu(x, p("alpha"));
    if (op == "celu") return act::celu(x, p("alpha"));
    if (op == "selu") return act::selu(x);
    if (op == "softplus") return act::softplus(x, p("beta"), p("threshold"));
    if (op == "softsign") return act::softsign(x);
    if (op == "mish") return act::mish(x);
    if (op == "hard_swish") return act::hard_swish(x);
    if (op == "hard_sigmoid") return act::hard_sigmoid(x);
    if (op == "hard_tanh") return act::hard_tanh(x, p("min"), p("max"));
    if (op == "relu6") return act::relu6(x);
    if (op == "log_sigmoid") return act::log_sigmoid(x);
    if (op == "gelu_tanh") return act::gelu_tanh(x);
    if (op == "hard_shrink") return act::hard_shrink(x, p("lambda"));
    if (op == "soft_shrink") return act::soft_shrink(x, p("lambda"));
    if (op == "shrink") return act::shrink(x, p("lambda"), p("bias"));
    if (op == "thresholded_relu") return act::thresholded_relu(x, p("alpha"));
    if (op == "threshold") return act::threshold(x, p("threshold"), p("value"));
    if (op == "tanhshrink") return act::tanhshrink(x);
    if (op == "rrelu") return act::rrelu(x, p("lower"), p("upper"), false);
    if (op == "glu") return act::glu(x, static_cast<long>(p("dim")));
    FAIL("no ember function for fixture op " << op);
    return x;
}

/// The fixture cases whose names start with `prefix`.
std::vector<std::string> cases_with(const std::string& prefix) {
    std::vector<std::string> out;
    for (const auto& n : ember::test::fixture_cases(kFile))
        if (n.rfind(prefix, 0) == 0) out.push_back(n);
    return out;
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("activation ext: values match torch (extremes, kinks, NaN)", "[activation]",
                        ember::test::TestBackends) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    const auto names = cases_with("val_");
    REQUIRE(names.size() == 34);
    for (const auto& name : names) {
        DYNAMIC_SECTION(name) {
            Fixture f(kFile, name);
            ember::test::check_close(apply<B>(f, f.tensor<B, 2>(0)).to_data(), f.output(0),
                                     ember::test::default_tolerance<B>());
        }
    }
}

TEMPLATE_LIST_TEST_CASE("activation ext: gradients match torch and finite differences",
                        "[activation][autodiff]", ember::test::AutodiffBackends) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    auto names = cases_with("grad_");
    const auto big = cases_with("big_");
    names.insert(names.end(), big.begin(), big.end());
    REQUIRE(names.size() == 34 + 12);
    for (const auto& name : names) {
        DYNAMIC_SECTION(name) {
            const Fixture f(kFile, name);
            ember::test::check_gradients<B, ember::test::In<2>>(
                kFile, name, [&f](auto x) { return apply(f, std::move(x)); });
        }
    }
}

TEMPLATE_LIST_TEST_CASE("activation ext: rrelu draws slopes in training", "[activation]",
                        ember::test::AutodiffBackends) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    std::vector<float> v(512);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = (i % 2 ? 1.f : -1.f) * (1.f + i % 7);
    auto x = ember::Tensor<B, 1>::from_data(ember::TensorData(v, {v.size()})).require_grad();
    auto y = act::rrelu(x, 0.1, 0.3, true);
    auto gx = x.grad(y.sum().backward());
    REQUIRE(gx.has_value());
    const auto out = y.to_data().template to_vec<double>();
    const auto g = gx->to_data().template to_vec<double>();
    double lo = 1.0, hi = 0.0;
    for (std::size_t i = 0; i < v.size(); ++i) {
        if (v[i] > 0) {
            CHECK(out[i] == v[i]);
            CHECK(g[i] == 1.0);
        } else {
            const double slope = out[i] / v[i];
            CHECK(slope >= 0.1 - 1e-6);
            CHECK(slope <= 0.3 + 1e-6);
            CHECK(g[i] == Approx(slope).margin(1e-6));  // the gradient is the drawn slope
            lo = std::min(lo, slope);
            hi = std::max(hi, slope);
        }
    }
    CHECK(hi - lo > 0.1);  // 256 uniform draws cover most of [0.1, 0.3]

    SECTION("the Rrelu module draws on autodiff backends and uses the mean slope otherwise") {
        nn::Rrelu m = nn::RreluConfig{0.1, 0.3}.init();
        auto t = ember::Tensor<B, 1>::from_floats({-2.f, -2.f, -2.f, -2.f, -2.f, -2.f});
        auto trained = m.forward(t).to_data().template to_vec<double>();
        CHECK(std::any_of(trained.begin(), trained.end(),
                          [&](double s) { return std::abs(s - trained[0]) > 1e-7; }));
        auto inner = ember::Tensor<ember::InnerBackend<B>, 1>::from_floats({-2.f, 4.f});
        ember::test::check_close(m.forward(inner).to_data(), ember::TensorData({-0.4f, 4.f}, {2}));
    }
}

TEMPLATE_LIST_TEST_CASE("activation ext: modules and ActivationConfig", "[activation][nn]",
                        ember::test::TestBackends) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    const auto tol = ember::test::default_tolerance<B>();
    auto check = [&](const char* name, auto module) {
        INFO("module for case " << name);
        Fixture f(kFile, name);
        ember::test::check_close(module.forward(f.tensor<B, 2>(0)).to_data(), f.output(0), tol);
    };
    check("val_sigmoid", nn::Sigmoid{});
    check("val_tanh", nn::Tanh{});
    check("val_silu", nn::Swish{});
    check("val_selu", nn::Selu{});
    check("val_softsign", nn::Softsign{});
    check("val_mish", nn::Mish{});
    check("val_hard_swish", nn::HardSwish{});
    check("val_relu6", nn::Relu6{});
    check("val_log_sigmoid", nn::LogSigmoid{});
    check("val_tanhshrink", nn::Tanhshrink{});
    check("val_gelu_tanh", nn::GeluTanh{});
    check("val_elu_a05", nn::EluConfig{0.5}.init());
    check("val_celu_a2", nn::CeluConfig{2.0}.init());
    check("val_softplus_b2_t5", nn::SoftplusConfig{2.0, 5.0}.init());
    check("val_hard_tanh_m2_3", nn::HardTanhConfig{-2.0, 3.0}.init());
    check("val_glu_d0", nn::GluConfig{0}.init());
    check("val_hard_shrink_1", nn::HardShrinkConfig{1.0}.init());
    check("val_soft_shrink_1", nn::SoftShrinkConfig{1.0}.init());
    check("val_shrink_1_05", nn::ShrinkConfig{1.0, 0.5}.init());
    check("val_thresholded_relu_05", nn::ThresholdedReluConfig{0.5}.init());
    check("val_threshold", nn::ThresholdConfig{0.5, -2.0}.init());
    check("val_rrelu_eval", nn::RreluConfig{}.init());

    SECTION("ActivationConfig builds the Activation enum module") {
        check("val_elu_a05", nn::ActivationConfig{nn::EluConfig{0.5}}.init<B>());
        check("val_glu_dm1", nn::ActivationConfig{nn::GluConfig{}}.init<B>());
        check("val_mish", nn::ActivationConfig{nn::Mish{}}.init<B>());
        check("val_softplus", nn::ActivationConfig{nn::SoftplusConfig{}}.init<B>());
        auto relu = nn::ActivationConfig{}.init<B>();  // Burn's default: Relu
        CHECK(std::holds_alternative<nn::Relu>(relu.inner));
        auto prelu = nn::ActivationConfig{nn::PReluConfig{3, 0.1}}.init<B>();
        REQUIRE(std::holds_alternative<nn::PRelu<B>>(prelu.inner));
        CHECK(std::get<nn::PRelu<B>>(prelu.inner).alpha.shape()[0] == 3);
        REQUIRE_THROWS_AS(nn::ActivationConfig{nn::CeluConfig{0.0}}.init<B>(),
                          ember::ArgumentError);
    }
}

TEMPLATE_LIST_TEST_CASE("activation ext: bad arguments are typed errors naming the op",
                        "[activation][errors]", ember::test::TestBackends) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    auto x =
        ember::Tensor<B, 2>::from_data(ember::TensorData({1.f, 2.f, 3.f, 4.f, 5.f, 6.f}, {2, 3}));
    auto message = [](auto&& fn) {
        try {
            fn();
        } catch (const ember::Error& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    REQUIRE_THROWS_AS(act::glu(x, 1), ember::ShapeError);
    CHECK_THAT(message([&] { act::glu(x, -1); }), Catch::Contains("glu") && Catch::Contains("3"));
    CHECK_NOTHROW(act::glu(x, 0));
    REQUIRE_THROWS_AS(act::glu(x, 2), ember::DimError);
    REQUIRE_THROWS_AS(act::celu(x, 0.0), ember::ArgumentError);
    CHECK_THAT(message([&] { act::celu(x, 0.0); }), Catch::Contains("celu"));
    REQUIRE_THROWS_AS(act::soft_shrink(x, -0.5), ember::ArgumentError);
    CHECK_THAT(message([&] { act::soft_shrink(x, -0.5); }), Catch::Contains("soft_shrink"));
    REQUIRE_THROWS_AS(act::rrelu(x, 0.5, 0.1), ember::ArgumentError);
    CHECK_THAT(message([&] { act::rrelu(x, 0.5, 0.1); }), Catch::Contains("rrelu"));
    REQUIRE_THROWS_AS(act::hard_tanh(x, 1.0, -1.0), ember::ArgumentError);
    REQUIRE_THROWS_AS(nn::SoftShrinkConfig{-1.0}.init(), ember::ArgumentError);
    REQUIRE_THROWS_AS((nn::HardTanhConfig{2.0, 1.0}.init()), ember::ArgumentError);
    REQUIRE_THROWS_AS((nn::RreluConfig{0.5, 0.1}.init()), ember::ArgumentError);
    REQUIRE_THROWS_AS(nn::SoftplusConfig{0.0}.init(), ember::ArgumentError);
    // PyTorch accepts a negative ELU alpha; so does ember (the val_elu_am05 case).
    CHECK_NOTHROW(act::elu(x, -0.5));
}

TEST_CASE("activation ext: the Activation module's records, params and valid()",
          "[activation][nn]") {
    using AD = ember::Autodiff<ember::Cpu>;
    auto m = nn::ActivationConfig{nn::PReluConfig{3, 0.1}}.init<AD>();
    CHECK(ember::module::num_params(m) == 3);
    // valid() keeps the active alternative, on the inner backend.
    auto v = ember::module::valid(m);
    REQUIRE(std::holds_alternative<nn::PRelu<ember::Cpu>>(v.inner));
    auto x = ember::Tensor<ember::Cpu, 3>::from_data(
        ember::TensorData({-1.f, 2.f, -3.f, 4.f, -5.f, 6.f}, {1, 3, 2}));
    ember::test::check_close(v.forward(x).to_data(),
                             ember::TensorData({-0.1f, 2.f, -0.3f, 4.f, -0.5f, 6.f}, {1, 3, 2}));
    // A record of the active alternative loads into a module built with the same choice.
    auto other = nn::ActivationConfig{nn::PReluConfig{3, 0.7}}.init<AD>();
    auto loaded = ember::module::load_record(other, ember::module::into_record(m));
    ember::test::check_close(std::get<nn::PRelu<AD>>(loaded.inner).alpha.val().to_data(),
                             ember::TensorData({0.1f, 0.1f, 0.1f}, {3}));
    // Parameter-free alternatives have nothing to record or train.
    CHECK(ember::module::num_params(nn::ActivationConfig{nn::Selu{}}.init<AD>()) == 0);
}

}  // namespace test_activation_ext
