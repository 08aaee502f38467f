// AurocMetric and AucPrMetric: small cases worked out by hand, and the torch references of
// tests/fixtures/gen_metrics.py (torchmetrics' definitions written in plain torch).
#include <catch2/catch.hpp>
#include <ember/ember.hpp>
#include <ember/train/ranking_metrics.hpp>

#include "harness.hpp"

namespace test_metrics_ranking {

namespace {

using ember::Cpu;
using ember::Int;
using ember::Tensor;
using ember::TensorData;
namespace train = ember::train;

train::RankingInput<Cpu> ranking(std::vector<float> p, std::size_t c, std::vector<std::int64_t> t) {
    const std::size_t n = t.size();
    return {Tensor<Cpu, 2>::from_data(TensorData(std::move(p), {n, c}), {}),
            Tensor<Cpu, 1, Int>::from_data(TensorData(std::move(t), {n}), {})};
}

}  // namespace

TEST_CASE("AurocMetric and AucPrMetric: binary cases by hand", "[metrics]") {
    static_assert(train::Numeric<train::AurocMetric<Cpu>>);
    static_assert(train::Numeric<train::AucPrMetric<Cpu>>);
    train::AurocMetric<Cpu> auroc;
    train::AucPrMetric<Cpu> aucpr;
    // Positives scored 0.9 and 0.4, negatives 0.6 and 0.1: 3 of the 4 pairs ordered right.
    // Thresholds 0.9, 0.6, 0.4, 0.1: precision 1, 1/2, 2/3, 2/4 at recall 1/2, 1/2, 1, 1, so
    // AP = 1/2·1 + 1/2·2/3.
    const auto in = ranking({0.9f, 0.6f, 0.4f, 0.1f}, 1, {1, 0, 1, 0});
    auto e = auroc.update(in, {});
    CHECK(e.name == "AUROC");
    CHECK(*e.numeric == Approx(75.0));
    CHECK(e.formatted == "75.00 %");
    CHECK(*aucpr.update(in, {}).numeric == Approx(100.0 * (0.5 + 1.0 / 3.0)));
    CHECK(aucpr.name() == "AUC-PR");
    // A tie between a positive and a negative counts half a pair: the curve goes diagonally.
    CHECK(*auroc.update(ranking({0.5f, 0.5f}, 1, {1, 0}), {}).numeric == Approx(50.0));
    // Perfectly ordered: 100 %.
    CHECK(*auroc.update(ranking({0.1f, 0.8f, 0.9f}, 1, {0, 1, 1}), {}).numeric == Approx(100.0));
    CHECK(*aucpr.update(ranking({0.1f, 0.8f, 0.9f}, 1, {0, 1, 1}), {}).numeric == Approx(100.0));
    // One class only: undefined, no numeric value; value() keeps the last defined one.
    auto u = auroc.update(ranking({0.2f, 0.7f}, 1, {1, 1}), {});
    CHECK(u.formatted == "undefined");
    CHECK_FALSE(u.numeric.has_value());
    CHECK(auroc.value() == Approx(100.0));
    CHECK_FALSE(aucpr.update(ranking({0.2f, 0.7f}, 1, {0, 0}), {}).numeric.has_value());
    // But AP is defined without negatives: every threshold has precision 1.
    CHECK(*aucpr.update(ranking({0.2f, 0.7f}, 1, {1, 1}), {}).numeric == Approx(100.0));
}

TEST_CASE("AurocMetric and AucPrMetric: one-vs-rest macro over classes by hand", "[metrics]") {
    // 3 classes. Class 0: positive item 0 scored 0.7 against 0.2, 0.1: AUROC 1, AP 1. Class 1:
    // positive item 1 scored 0.5 against 0.2 and 0.6: AUROC 1/2, AP 1/2. Class 2: positive item 2
    // scored 0.3 against 0.1 and 0.3 (a tie): AUROC 3/4, AP 1/2.
    const auto in = ranking({0.7f, 0.2f, 0.1f,  //
                             0.2f, 0.5f, 0.3f,  //
                             0.1f, 0.6f, 0.3f},
                            3, {0, 1, 2});
    CHECK(*train::AurocMetric<Cpu>{}.update(in, {}).numeric ==
          Approx(100.0 * (1.0 + 0.5 + 0.75) / 3));
    CHECK(*train::AucPrMetric<Cpu>{}.update(in, {}).numeric ==
          Approx(100.0 * (1.0 + 0.5 + 0.5) / 3));
}

TEST_CASE("AurocMetric and AucPrMetric: torch references", "[metrics]") {
    for (const char* name : {"binary_ties", "binary", "multiclass", "multiclass_absent"}) {
        INFO(name);
        ember::test::Fixture fx("metrics", name);
        train::RankingInput<Cpu> in{fx.named_tensor<Cpu, 2>("predictions"),
                                    fx.named_tensor<Cpu, 1, Int>("targets")};
        CHECK(*train::AurocMetric<Cpu>{}.update(in, {}).numeric ==
              Approx(fx.param("auroc")).epsilon(1e-9));
        CHECK(*train::AucPrMetric<Cpu>{}.update(in, {}).numeric ==
              Approx(fx.param("ap")).epsilon(1e-9));
    }
}

TEST_CASE("AurocMetric and AucPrMetric: errors name the metric", "[metrics]") {
    train::AurocMetric<Cpu> auroc;
    train::AucPrMetric<Cpu> aucpr;
    const auto bad_size =
        train::RankingInput<Cpu>{Tensor<Cpu, 2>::zeros({3, 2}), Tensor<Cpu, 1, Int>::zeros({2})};
    CHECK_THROWS_AS(auroc.update(bad_size, {}), ember::ShapeError);
    CHECK_THROWS_WITH(aucpr.update(bad_size, {}),
                      Catch::Contains("AucPrMetric") && Catch::Contains("[3, 2]"));
    // Binary targets are 0 or 1; multiclass ones in [0, C).
    CHECK_THROWS_WITH(auroc.update(ranking({0.1f, 0.2f}, 1, {0, 2}), {}),
                      Catch::Contains("AurocMetric") && Catch::Contains("target 2"));
    CHECK_THROWS_AS(aucpr.update(ranking({0.1f, 0.2f, 0.3f, 0.4f}, 2, {0, -1}), {}),
                    ember::ArgumentError);
    CHECK_THROWS_AS(auroc.update(ranking({std::nanf(""), 0.2f}, 1, {0, 1}), {}),
                    ember::ArgumentError);
    CHECK_THROWS_AS(
        auroc.update({Tensor<Cpu, 2>::zeros({0, 2}), Tensor<Cpu, 1, Int>::zeros({0})}, {}),
        ember::ShapeError);
}

}  // namespace test_metrics_ranking
