// The Normalization enum module built from NormalizationConfig (Burn's normalization wrapper):
// each kind's forward against closed-form values, training (autodiff: batch statistics) and
// inference, num_features / with_num_features, its parameters as a module, and the errors.
#include <cmath>
#include <string>
#include <variant>
#include <vector>

#include "ember/nn.hpp"
#include "grad_check.hpp"

namespace test_normalization_config {

namespace {
namespace nn = ember::nn;
using ember::TensorData;

// (x - mean) / sqrt(var + eps) of a list, with the biased variance: the normalisation every
// kind applies to its group of values.
std::vector<float> normalised(const std::vector<double>& x, double eps = 1e-5) {
    double mean = 0, var = 0;
    for (double v : x) mean += v / double(x.size());
    for (double v : x) var += (v - mean) * (v - mean) / double(x.size());
    std::vector<float> out;
    for (double v : x) out.push_back(static_cast<float>((v - mean) / std::sqrt(var + eps)));
    return out;
}
std::vector<float> cat(std::vector<float> a, const std::vector<float>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}
}  // namespace

TEMPLATE_LIST_TEST_CASE("NormalizationConfig builds each normalisation",
                        "[nn][norm][normalization]", ember::test::TestBackends) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    const auto tol = ember::test::default_tolerance<B>();
    // x: [N = 1, C = 2, 2] = [[[1, 2], [3, 7]]]
    const auto x = ember::Tensor<B, 3>::from_floats({{{1, 2}, {3, 7}}});
    SECTION("LayerNorm: each row of the last dim") {
        auto norm = nn::NormalizationConfig{nn::LayerNormConfig{2}}.init<B>();
        CHECK(std::holds_alternative<nn::LayerNorm<B>>(norm.inner));
        ember::test::check_close(norm.forward(x).to_data(),
                                 TensorData(cat(normalised({1, 2}), normalised({3, 7})), {1, 2, 2}),
                                 tol);
    }
    SECTION("RmsNorm: x / sqrt(mean(x²) + eps)") {
        auto norm = nn::NormalizationConfig{nn::RmsNormConfig{2}}.init<B>();
        const double r1 = std::sqrt((1.0 + 4.0) / 2 + 1e-5),
                     r2 = std::sqrt((9.0 + 49.0) / 2 + 1e-5);
        ember::test::check_close(
            norm.forward(x).to_data(),
            TensorData({float(1 / r1), float(2 / r1), float(3 / r2), float(7 / r2)}, {1, 2, 2}),
            tol);
    }
    SECTION("GroupNorm with one group: every value of the sample") {
        auto norm = nn::NormalizationConfig{nn::GroupNormConfig{1, 2}}.init<B>();
        ember::test::check_close(norm.forward(x).to_data(),
                                 TensorData(normalised({1, 2, 3, 7}), {1, 2, 2}), tol);
    }
    SECTION("InstanceNorm: each channel of each sample") {
        auto norm = nn::NormalizationConfig{nn::InstanceNormConfig{2}}.init<B>();
        ember::test::check_close(norm.forward(x).to_data(),
                                 TensorData(cat(normalised({1, 2}), normalised({3, 7})), {1, 2, 2}),
                                 tol);
    }
    SECTION("BatchNorm: running statistics (mean 0, variance 1) outside training") {
        auto norm = nn::NormalizationConfig{nn::BatchNormConfig{2}}.init<B>();
        const float s = float(1 / std::sqrt(1 + 1e-5));
        ember::test::check_close(norm.forward(x).to_data(),
                                 TensorData({1 * s, 2 * s, 3 * s, 7 * s}, {1, 2, 2}), tol);
    }
    SECTION("a rank the active layer cannot take is a DimError naming it") {
        auto norm = nn::NormalizationConfig{nn::InstanceNormConfig{2}}.init<B>();
        const auto x2 = ember::Tensor<B, 2>::from_floats({{1, 2}, {3, 4}});
        CHECK_THROWS_AS(norm.forward(x2), ember::DimError);
        CHECK_THROWS_WITH(norm.forward(x2), Catch::Matchers::Contains("InstanceNorm") &&
                                                Catch::Matchers::Contains("rank 3"));
        // LayerNorm takes any rank.
        auto ln = nn::NormalizationConfig{nn::LayerNormConfig{2}}.init<B>();
        ember::test::check_close(ln.forward(x2).to_data(),
                                 TensorData(cat(normalised({1, 2}), normalised({3, 4})), {2, 2}),
                                 tol);
    }
    SECTION("a wrong feature count is the layer's own error") {
        auto norm = nn::NormalizationConfig{nn::LayerNormConfig{3}}.init<B>();
        CHECK_THROWS_AS(norm.forward(x), ember::ShapeError);
        CHECK_THROWS_AS((nn::NormalizationConfig{nn::GroupNormConfig{3, 2}}.init<B>()),
                        ember::ArgumentError);
    }
}

TEMPLATE_LIST_TEST_CASE("Normalization trains BatchNorm with batch statistics",
                        "[nn][norm][normalization]", ember::test::AutodiffBackends) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    // [N = 2, C = 1, 2]: the channel's four values 1, 2, 3, 7 are normalised together.
    const auto x = ember::Tensor<B, 3>::from_floats({{{1, 2}}, {{3, 7}}});
    auto norm = nn::NormalizationConfig{nn::BatchNormConfig{1}}.init<B>();
    ember::test::check_close(norm.forward(x).to_data(),
                             TensorData(normalised({1, 2, 3, 7}), {2, 1, 2}),
                             ember::test::default_tolerance<B>());
    // The running mean moved by momentum 0.1 toward the batch mean 3.25.
    const auto& bn = std::get<nn::BatchNorm<B>>(norm.inner);
    ember::test::check_close(bn.running_mean.value().to_data(), TensorData({0.325f}, {1}),
                             ember::test::default_tolerance<B>());
}

TEST_CASE("NormalizationConfig: num_features, with_num_features, parameters",
          "[nn][norm][normalization]") {
    using B = ember::Cpu;
    const nn::NormalizationConfig configs[] = {{nn::BatchNormConfig{4}},
                                               {nn::GroupNormConfig{2, 4}},
                                               {nn::InstanceNormConfig{4}},
                                               {nn::LayerNormConfig{4}},
                                               {nn::RmsNormConfig{4}}};
    // gamma and beta of 4 each, but RmsNorm's gamma alone.
    const std::size_t params[] = {8, 8, 8, 8, 4};
    const char* names[] = {"BatchNorm", "GroupNorm", "InstanceNorm", "LayerNorm", "RmsNorm"};
    for (std::size_t k = 0; k < 5; ++k) {
        INFO(names[k]);
        CHECK(configs[k].num_features() == 4);
        const auto wider = configs[k].with_num_features(6);
        CHECK(wider.num_features() == 6);
        CHECK(configs[k].num_features() == 4);  // the original is unchanged
        CHECK(wider.kind.index() == k);
        auto norm = configs[k].init<B>();
        CHECK(norm.num_features() == 4);
        CHECK(std::string(norm.layer_name()) == names[k]);
        CHECK(norm.num_params() == params[k]);
        CHECK(wider.init<B>().num_features() == 6);
    }
    // GroupNorm keeps its groups: 2 groups of 6 channels builds, 2 groups of 5 does not.
    CHECK(std::get<nn::GroupNormConfig>(configs[1].with_num_features(6).kind).num_groups == 2);
    CHECK_THROWS_AS(configs[1].with_num_features(5).init<B>(), ember::ArgumentError);
}

}  // namespace test_normalization_config
