// Initializers: the distributions torch.nn.init defines, checked by their statistics (bounds,
// mean and variance within a few standard errors), and PyTorch's default per layer.
#include <cmath>

#include <ember/nn.hpp>

#include "harness.hpp"

namespace test_initializer {

namespace {

using ember::nn::Initializer;
using B = ember::Cpu;

struct Stats {
    double min, max, mean, var;
    std::size_t n;
};

Stats stats_of(const ember::TensorData& d) {
    const auto v = d.to_vec<double>();
    Stats s{v[0], v[0], 0, 0, v.size()};
    for (double x : v) {
        s.min = std::min(s.min, x);
        s.max = std::max(s.max, x);
        s.mean += x;
    }
    s.mean /= double(v.size());
    for (double x : v) s.var += (x - s.mean) * (x - s.mean);
    s.var /= double(v.size() - 1);
    return s;
}

// Checks samples of a distribution with the given variance: mean within 5 standard errors of
// `mean`, variance within 5% (the sample variance of 10^5 draws is within ~1% of the truth).
void check_moments(const Stats& s, double mean, double var) {
    INFO("mean " << s.mean << " var " << s.var << " expected var " << var);
    CHECK(std::abs(s.mean - mean) <= 5 * std::sqrt(var / double(s.n)));
    CHECK(std::abs(s.var - var) <= 0.05 * var);
}

Stats draw(const Initializer& init, std::size_t fan_in = 256, std::size_t fan_out = 512) {
    auto p = init.init<B, 2>(ember::Shape{fan_in, fan_out}, {}, fan_in, fan_out);
    return stats_of(p.val().to_data());
}

}  // namespace

TEST_CASE("initializers follow torch.nn.init's formulas", "[nn][init]") {
    ember::Cpu::seed(7);
    const double fan_in = 256, fan_out = 512;

    SECTION("constants") {
        auto s = draw(Initializer::Constant(0.5));
        CHECK((s.min == 0.5 && s.max == 0.5));
        s = draw(Initializer::Ones());
        CHECK((s.min == 1.0 && s.max == 1.0));
        s = draw(Initializer::Zeros());
        CHECK((s.min == 0.0 && s.max == 0.0));
    }
    SECTION("uniform and normal") {
        auto s = draw(Initializer::Uniform(-0.5, 1.5));
        CHECK(s.min >= -0.5);
        CHECK(s.max < 1.5);
        check_moments(s, 0.5, 4.0 / 12.0);
        check_moments(draw(Initializer::Normal(2.0, 0.5)), 2.0, 0.25);
    }
    SECTION("Kaiming uniform: bound gain·√(3/fan_in)") {
        const double gain = std::sqrt(2.0);
        const double bound = gain * std::sqrt(3.0 / fan_in);
        auto s = draw(Initializer::KaimingUniform(gain));
        CHECK(s.min >= -bound);
        CHECK(s.max <= bound);
        CHECK(s.max > 0.99 * bound);  // the whole range is used
        check_moments(s, 0.0, bound * bound / 3.0);
        const double bound_out = gain * std::sqrt(3.0 / fan_out);
        auto o = draw(Initializer::KaimingUniform(gain, true));
        CHECK(o.max <= bound_out);
        check_moments(o, 0.0, bound_out * bound_out / 3.0);
    }
    SECTION("Kaiming normal: std gain/√fan") {
        check_moments(draw(Initializer::KaimingNormal(2.0)), 0.0, 4.0 / fan_in);
        check_moments(draw(Initializer::KaimingNormal(2.0, true)), 0.0, 4.0 / fan_out);
    }
    SECTION("Xavier: bound gain·√(6/(fan_in+fan_out)), std gain·√(2/(fan_in+fan_out))") {
        const double bound = 1.5 * std::sqrt(6.0 / (fan_in + fan_out));
        auto s = draw(Initializer::XavierUniform(1.5));
        CHECK(s.max <= bound);
        check_moments(s, 0.0, bound * bound / 3.0);
        check_moments(draw(Initializer::XavierNormal(1.5)), 0.0, 1.5 * 1.5 * 2.0 / (fan_in + fan_out));
    }
    SECTION("parameters are drawn on first use only") {
        auto p = Initializer::Normal(0, 1).init<B, 1>(ember::Shape{4}, {});
        CHECK_FALSE(p.is_initialized());
        CHECK(p.shape() == ember::Shape{4});
        auto copy = p;
        CHECK(copy.val().to_data() == p.val().to_data());  // copies share one draw
        CHECK(p.is_initialized());
    }
    SECTION("errors") {
        auto kaiming = [] { return Initializer::KaimingUniform(1.0).init<B, 2>(ember::Shape{2, 2}, {}); };
        auto xavier = [] { return Initializer::XavierNormal(1.0).init<B, 2>(ember::Shape{2, 2}, {}, 2); };
        auto rank = [] { return Initializer::Zeros().init<B, 2>(ember::Shape{2}, {}); };
        REQUIRE_THROWS_AS(kaiming(), ember::ArgumentError);
        REQUIRE_THROWS_WITH(xavier(), Catch::Contains("XavierNormal") && Catch::Contains("fan_out"));
        REQUIRE_THROWS_AS(rank(), ember::ShapeError);
    }
}

TEST_CASE("layers use PyTorch's default initialisation", "[nn][init]") {
    ember::Cpu::seed(11);
    SECTION("Linear: weight and bias uniform ±1/√d_input") {
        auto linear = ember::nn::LinearConfig{400, 300}.init<B>();
        const double bound = 1.0 / std::sqrt(400.0);
        auto w = stats_of(linear.weight.val().to_data());
        CHECK(w.max <= bound);
        CHECK(w.min >= -bound);
        check_moments(w, 0.0, bound * bound / 3.0);
        auto b = stats_of(linear.bias->val().to_data());
        CHECK(b.max <= bound);
        CHECK(b.min >= -bound);
    }
    SECTION("Embedding: normal(0, 1)") {
        auto e = ember::nn::EmbeddingConfig{500, 200}.init<B>();
        check_moments(stats_of(e.weight.val().to_data()), 0.0, 1.0);
    }
    SECTION("LayerNorm: gamma 1, beta 0") {
        auto n = ember::nn::LayerNormConfig{8}.init<B>();
        CHECK(n.gamma.val().to_data() == ember::Tensor<B, 1>::ones({8}).to_data());
        CHECK(n.beta.val().to_data() == ember::Tensor<B, 1>::zeros({8}).to_data());
    }
}

}  // namespace test_initializer
