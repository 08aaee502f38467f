// Activation functions (ember::activation) against PyTorch: every entry of Burn's activation table,
// including extreme inputs (±100, ±1000), -inf logits and NaN. Expected values come from
// tests/fixtures/gen_module_ops.py (torch 1.13) or from closed-form math.
#include <cmath>
#include <limits>

#include "harness.hpp"

namespace test_activation {

namespace {

using ember::test::Fixture;

constexpr const char* kFile = "module_ops";

template <typename B, std::size_t D>
void expect_close(const ember::Tensor<B, D>& actual, const ember::TensorData& expected) {
    ember::test::check_close(actual.to_data(), expected, ember::test::default_tolerance<B>());
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("activation: elementwise functions match torch", "[activation]",
                        ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    namespace act = ember::activation;
    using T2 = ember::Tensor<B, 2>;

    struct Entry {
        const char* name;
        T2 (*fn)(T2);
    };
    // Each fixture holds the same 5 × 6 input: ±100, ±20, 0, ordinary values and a NaN row.
    const Entry entries[] = {
        {"act_relu", [](T2 x) { return act::relu(std::move(x)); }},
        {"act_gelu", [](T2 x) { return act::gelu(std::move(x)); }},
        {"act_sigmoid", [](T2 x) { return act::sigmoid(std::move(x)); }},
        {"act_tanh", [](T2 x) { return act::tanh(std::move(x)); }},
        {"act_silu", [](T2 x) { return act::silu(std::move(x)); }},
        {"act_mish", [](T2 x) { return act::mish(std::move(x)); }},
        {"act_log_sigmoid", [](T2 x) { return act::log_sigmoid(std::move(x)); }},
        {"act_hard_sigmoid", [](T2 x) { return act::hard_sigmoid(std::move(x)); }},
        {"act_leaky_relu", [](T2 x) { return act::leaky_relu(std::move(x)); }},
    };
    for (const auto& e : entries) {
        DYNAMIC_SECTION(e.name) {
            Fixture f(kFile, e.name);
            expect_close(e.fn(f.tensor<B, 2>(0)), f.output(0));
        }
    }
}

TEMPLATE_LIST_TEST_CASE("activation: long odd-length input (vectorised kernels and tails)",
                        "[activation]", ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    namespace act = ember::activation;
    Fixture f(kFile, "act_long");
    auto x = f.tensor<B, 1>(0);
    SECTION("relu") { expect_close(act::relu(x), f.output(0)); }
    SECTION("gelu") { expect_close(act::gelu(x), f.output(1)); }
    SECTION("sigmoid") { expect_close(act::sigmoid(x), f.output(2)); }
    SECTION("tanh") { expect_close(act::tanh(x), f.output(3)); }
    SECTION("silu") { expect_close(act::silu(x), f.output(4)); }
    SECTION("mish") { expect_close(act::mish(x), f.output(5)); }
    SECTION("log_sigmoid") { expect_close(act::log_sigmoid(x), f.output(6)); }
    SECTION("hard_sigmoid") { expect_close(act::hard_sigmoid(x), f.output(7)); }
    SECTION("leaky_relu") { expect_close(act::leaky_relu(x, 0.01), f.output(8)); }
    SECTION("softplus beta 2") { expect_close(act::softplus(x, 2.0), f.output(9)); }
}

TEMPLATE_LIST_TEST_CASE("activation: parameterised functions match torch", "[activation]",
                        ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    namespace act = ember::activation;

    SECTION("hard_sigmoid with PyTorch's alpha = 1/6, beta = 0.5 given explicitly") {
        Fixture f(kFile, "act_hard_sigmoid");
        expect_close(act::hard_sigmoid(f.tensor<B, 2>(0), 1.0 / 6.0, 0.5), f.output(0));
    }
    SECTION("hard_sigmoid with other alpha and beta") {
        Fixture f(kFile, "act_hard_sigmoid_ab");
        expect_close(act::hard_sigmoid(f.tensor<B, 2>(0), f.param("alpha"), f.param("beta")),
                     f.output(0));
    }
    SECTION("leaky_relu with slope 0.01 given explicitly") {
        Fixture f(kFile, "act_leaky_relu");
        expect_close(act::leaky_relu(f.tensor<B, 2>(0), f.param("slope")), f.output(0));
    }
    SECTION("leaky_relu with slope 0.2") {
        Fixture f(kFile, "act_leaky_relu_02");
        expect_close(act::leaky_relu(f.tensor<B, 2>(0), f.param("slope")), f.output(0));
    }
    for (const char* name : {"act_softplus_b1", "act_softplus_b2", "act_softplus_b0.5"}) {
        DYNAMIC_SECTION("softplus " << name) {
            Fixture f(kFile, name);
            expect_close(act::softplus(f.tensor<B, 2>(0), f.param("beta")), f.output(0));
        }
    }
    SECTION("softplus default beta is 1") {
        Fixture f(kFile, "act_softplus_b1");
        expect_close(act::softplus(f.tensor<B, 2>(0)), f.output(0));
    }
}

TEMPLATE_LIST_TEST_CASE("activation: prelu", "[activation]",
                        ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    namespace act = ember::activation;

    SECTION("one weight shared by every channel") {
        Fixture f(kFile, "act_prelu_single");
        expect_close(act::prelu(f.tensor<B, 3>(0), f.tensor<B, 1>(1)), f.output(0));
    }
    SECTION("one weight per channel (dim 1) of a rank-3 input") {
        Fixture f(kFile, "act_prelu_channels");
        expect_close(act::prelu(f.tensor<B, 3>(0), f.tensor<B, 1>(1)), f.output(0));
    }
    SECTION("one weight per channel (dim 1) of a rank-2 input") {
        Fixture f(kFile, "act_prelu_channels_2d");
        expect_close(act::prelu(f.tensor<B, 2>(0), f.tensor<B, 1>(1)), f.output(0));
    }
    SECTION("closed form: x for x >= 0, weight · x otherwise") {
        auto x = ember::Tensor<B, 1>::from_floats({-2.f, -0.5f, 0.f, 3.f});
        auto w = ember::Tensor<B, 1>::from_floats({0.25f});
        expect_close(act::prelu(x, w), ember::TensorData({-0.5f, -0.125f, 0.f, 3.f}, {4}));
    }
    SECTION("a weight count that matches no channel count is a ShapeError") {
        Fixture f(kFile, "act_prelu_channels");
        auto w = ember::Tensor<B, 1>::from_floats({0.1f, 0.2f});
        REQUIRE_THROWS_AS(act::prelu(f.tensor<B, 3>(0), w), ember::ShapeError);
    }
}

TEMPLATE_LIST_TEST_CASE("activation: softmax family along each dim", "[activation]",
                        ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    namespace act = ember::activation;
    using T3 = ember::Tensor<B, 3>;

    struct Entry {
        const char* prefix;
        T3 (*fn)(T3, long);
    };
    const Entry entries[] = {
        {"act_softmax_d", [](T3 x, long d) { return act::softmax(std::move(x), d); }},
        {"act_log_softmax_d", [](T3 x, long d) { return act::log_softmax(std::move(x), d); }},
        {"act_softmin_d", [](T3 x, long d) { return act::softmin(std::move(x), d); }},
        {"act_quiet_softmax_d", [](T3 x, long d) { return act::quiet_softmax(std::move(x), d); }},
    };
    for (const auto& e : entries) {
        for (const char* dim : {"0", "1", "2", "m1"}) {
            const std::string name = std::string(e.prefix) + dim;
            DYNAMIC_SECTION(name) {
                Fixture f(kFile, name);
                const long d = static_cast<long>(f.param("dim"));
                expect_close(e.fn(f.tensor<B, 3>(0), d), f.output(0));
            }
        }
    }
}

TEMPLATE_LIST_TEST_CASE("activation: softmax family is stable for large values", "[activation]",
                        ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    namespace act = ember::activation;
    using T2 = ember::Tensor<B, 2>;

    // Rows of ±1000, ±100 mixed, a -inf logit, all-very-negative logits, a NaN, long rows.
    struct Entry {
        const char* name;
        T2 (*fn)(T2, long);
    };
    const Entry entries[] = {
        {"act_softmax_big", [](T2 x, long d) { return act::softmax(std::move(x), d); }},
        {"act_log_softmax_big", [](T2 x, long d) { return act::log_softmax(std::move(x), d); }},
        {"act_softmin_big", [](T2 x, long d) { return act::softmin(std::move(x), d); }},
        {"act_quiet_softmax_big", [](T2 x, long d) { return act::quiet_softmax(std::move(x), d); }},
        {"act_softmax_big_d0", [](T2 x, long d) { return act::softmax(std::move(x), d); }},
        {"act_softmax_nan", [](T2 x, long d) { return act::softmax(std::move(x), d); }},
        {"act_softmax_long", [](T2 x, long d) { return act::softmax(std::move(x), d); }},
        {"act_log_softmax_long", [](T2 x, long d) { return act::log_softmax(std::move(x), d); }},
        {"act_softmax_long_d0", [](T2 x, long d) { return act::softmax(std::move(x), d); }},
        {"act_log_softmax_long_d0", [](T2 x, long d) { return act::log_softmax(std::move(x), d); }},
    };
    for (const auto& e : entries) {
        DYNAMIC_SECTION(e.name) {
            Fixture f(kFile, e.name);
            const long d = static_cast<long>(f.param("dim"));
            expect_close(e.fn(f.tensor<B, 2>(0), d), f.output(0));
        }
    }
    SECTION("softmax rows sum to one") {
        Fixture f(kFile, "act_softmax_big");
        auto s = act::softmax(f.tensor<B, 2>(0), 1).sum_dim(1);
        expect_close(s, ember::TensorData({1.f, 1.f, 1.f, 1.f, 1.f}, {5, 1}));
    }
    SECTION("quiet_softmax of very negative logits is close to zero, not uniform") {
        auto x = T2::from_data(ember::TensorData({-80.f, -90.f, -85.f}, {1, 3}));
        auto y = act::quiet_softmax(x, 1).to_data().template to_vec<double>();
        for (double v : y) CHECK(v < 1e-30);
    }
    SECTION("negative dims count from the end") {
        Fixture f(kFile, "act_softmax_big");
        expect_close(act::softmax(f.tensor<B, 2>(0), -1), f.output(0));
    }
    SECTION("a dim out of range is a DimError") {
        Fixture f(kFile, "act_softmax_big");
        REQUIRE_THROWS_AS(act::softmax(f.tensor<B, 2>(0), 2), ember::DimError);
        REQUIRE_THROWS_AS(act::log_softmax(f.tensor<B, 2>(0), -3), ember::DimError);
    }
}

TEMPLATE_LIST_TEST_CASE("activation: closed-form values", "[activation]",
                        ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    namespace act = ember::activation;
    using T1 = ember::Tensor<B, 1>;
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const float inf = std::numeric_limits<float>::infinity();

    SECTION("relu, sigmoid and tanh at infinities") {
        auto x = T1::from_floats({-inf, inf});
        expect_close(act::relu(x), ember::TensorData({0.f, inf}, {2}));
        expect_close(act::sigmoid(x), ember::TensorData({0.f, 1.f}, {2}));
        expect_close(act::tanh(x), ember::TensorData({-1.f, 1.f}, {2}));
    }
    SECTION("NaN propagates through every elementwise activation") {
        auto x = T1::from_floats({nan});
        for (auto y : {act::relu(x), act::gelu(x), act::sigmoid(x), act::tanh(x), act::silu(x),
                       act::mish(x), act::log_sigmoid(x), act::hard_sigmoid(x),
                       act::leaky_relu(x), act::softplus(x, 2.0)}) {
            CHECK(std::isnan(y.into_scalar()));
        }
    }
    SECTION("softmax of a single element is one, log_softmax zero") {
        auto x = T1::from_floats({123.f});
        CHECK(act::softmax(x, 0).into_scalar() == 1.f);
        CHECK(act::log_softmax(x, 0).into_scalar() == 0.f);
        // quiet_softmax adds a zero logit: e^x / (1 + e^x) = sigmoid(x).
        auto q = T1::from_floats({0.f});
        CHECK(act::quiet_softmax(q, 0).into_scalar() == Approx(0.5));
    }
    SECTION("gelu uses the exact erf form") {
        auto x = T1::from_floats({1.f, -1.f});
        const double g1 = 0.5 * (1.0 + std::erf(1.0 / std::sqrt(2.0)));
        expect_close(act::gelu(x), ember::TensorData({g1, -(1.0 - g1)}, {2}));
    }
}

}  // namespace test_activation
