// Precision, recall, F-beta, Hamming score and perplexity, checked against values worked out by
// hand from the confusion counts written beside each batch.
#include <catch2/catch.hpp>
#include <cmath>
#include <ember/ember.hpp>
#include <ember/train/classification_metrics.hpp>

namespace test_metrics_classification {

namespace {

using ember::Bool;
using ember::Cpu;
using ember::Int;
using ember::Tensor;
using ember::TensorData;
namespace train = ember::train;
using R = train::ClassReduction;

Tensor<Cpu, 2> scores(std::vector<float> v, std::size_t n, std::size_t c) {
    return Tensor<Cpu, 2>::from_data(TensorData(v, {n, c}), {});
}
Tensor<Cpu, 2, Bool> truth(std::vector<std::int64_t> v, std::size_t n, std::size_t c) {
    return Tensor<Cpu, 2, Int>::from_data(TensorData(v, {n, c}), {}).equal_elem(1);
}

// 5 items, 3 classes. Best class per row: 0, 1, 2, 0, 1; targets 0, 2, 2, 1, 1.
// Top-1 per class: predicted 2, 2, 1; true 1, 2, 2; true positives 1, 1, 1.
// Top-2 sets: {0,1}, {1,2}, {2,1}, {0,1}, {1,0}: predicted 3, 5, 2; true positives 1, 2, 2.
train::ConfusionStatsInput<Cpu> multiclass() {
    return {scores({0.7f, 0.2f, 0.1f,    //
                    0.2f, 0.5f, 0.3f,    //
                    0.1f, 0.3f, 0.6f,    //
                    0.4f, 0.35f, 0.25f,  //
                    0.3f, 0.6f, 0.1f},
                   5, 3),
            truth({1, 0, 0,  //
                   0, 0, 1,  //
                   0, 0, 1,  //
                   0, 1, 0,  //
                   0, 1, 0},
                  5, 3)};
}

// 4 items, 3 labels; predicted (score >= 0.5): [1,0,1], [0,1,0], [1,1,0], [0,0,0].
// Per label: predicted 2, 2, 1; true 2, 2, 1; true positives 2, 1, 0.
train::ConfusionStatsInput<Cpu> multilabel() {
    return {scores({0.9f, 0.2f, 0.6f,  //
                    0.1f, 0.7f, 0.4f,  //
                    0.8f, 0.5f, 0.3f,  //
                    0.3f, 0.1f, 0.2f},
                   4, 3),
            truth({1, 0, 0,  //
                   0, 1, 1,  //
                   1, 0, 0,  //
                   0, 1, 0},
                  4, 3)};
}

double value_of(auto metric, const train::ConfusionStatsInput<Cpu>& in) {
    return *metric.update(in, train::MetricMetadata{}).numeric;
}

}  // namespace

TEST_CASE("PrecisionMetric: micro, macro and weighted, multiclass and multilabel", "[metrics]") {
    static_assert(train::Numeric<train::PrecisionMetric<Cpu>>);
    using P = train::PrecisionMetric<Cpu>;
    const auto mc = multiclass();
    // Per class 1/2, 1/2, 1/1.
    CHECK(value_of(P::multiclass(), mc) == Approx(100.0 * 2.0 / 3.0));  // Macro is the default
    CHECK(value_of(P::multiclass().with_class_reduction(R::Micro), mc) == Approx(60.0));
    CHECK(value_of(P::multiclass().with_class_reduction(R::Weighted), mc) ==
          Approx(100.0 * (1 * 0.5 + 2 * 0.5 + 2 * 1.0) / 5));
    // Top-2: 5 true positives of 10 predictions; per class 1/3, 2/5, 2/2.
    CHECK(value_of(P::multiclass(2).with_class_reduction(R::Micro), mc) == Approx(50.0));
    CHECK(value_of(P::multiclass(2), mc) == Approx(100.0 * (1.0 / 3 + 0.4 + 1.0) / 3));
    const auto ml = multilabel();
    // Per label 2/2, 1/2, 0/1.
    CHECK(value_of(P::multilabel(), ml) == Approx(50.0));
    CHECK(value_of(P::multilabel().with_class_reduction(R::Micro), ml) == Approx(60.0));
    CHECK(value_of(P::multilabel().with_class_reduction(R::Weighted), ml) ==
          Approx(100.0 * (2 * 1.0 + 2 * 0.5) / 5));
    SECTION("display entry, and classes never predicted leave the macro mean") {
        auto p = P::multiclass();
        auto e = p.update(mc, {});
        CHECK(e.name == "Precision");
        CHECK(e.formatted == "66.67 %");
        // Binary: no item reaches 0.9, so precision is 0/0 for the only class: 0.
        auto b = P::binary(0.9);
        CHECK(value_of(b, {scores({0.2f, 0.8f}, 2, 1), truth({0, 1}, 2, 1)}) == 0.0);
        // Multilabel at 0.65: label 1 is predicted once (right), labels 0 and 2 as before minus
        // row 0's label 2 (0.6 < 0.65): label 0 2/2, label 1 1/1, label 2 never predicted.
        CHECK(value_of(P::multilabel(0.65), ml) == Approx(100.0));
    }
}

TEST_CASE("RecallMetric and FBetaScoreMetric", "[metrics]") {
    using Rc = train::RecallMetric<Cpu>;
    using F = train::FBetaScoreMetric<Cpu>;
    const auto mc = multiclass();
    // Recall per class 1/1, 1/2, 1/2.
    CHECK(value_of(Rc::multiclass(), mc) == Approx(100.0 * 2.0 / 3.0));
    CHECK(value_of(Rc::multiclass().with_class_reduction(R::Micro), mc) == Approx(60.0));
    CHECK(value_of(Rc::multiclass().with_class_reduction(R::Weighted), mc) == Approx(60.0));
    CHECK(value_of(Rc::multiclass(2).with_class_reduction(R::Micro), mc) == Approx(100.0));
    // F1 per class (2TP / (2TP + FN + FP)): 2/3, 2/4, 2/3; micro 6 / (6 + 2 + 2).
    CHECK(value_of(F::multiclass(1.0), mc) == Approx(100.0 * 11.0 / 18.0));
    CHECK(value_of(F::multiclass(1.0).with_class_reduction(R::Micro), mc) == Approx(60.0));
    // F2 per class (5TP / (5TP + 4FN + FP)): 5/6, 5/10, 5/9.
    CHECK(value_of(F::multiclass(2.0), mc) == Approx(100.0 * 17.0 / 27.0));
    // F1 per label: 4/4, 2/4, 0/2; weighted by 2, 2, 1.
    CHECK(value_of(F::multilabel(1.0).with_class_reduction(R::Weighted), multilabel()) ==
          Approx(100.0 * (2 * 1.0 + 2 * 0.5) / 5));
    CHECK(F::multilabel(1.0).name() == "FBetaScore");
    CHECK(Rc::binary().name() == "Recall");
}

TEST_CASE("confusion metrics reject bad options and shapes", "[metrics]") {
    using P = train::PrecisionMetric<Cpu>;
    SECTION("ArgumentError") {
        CHECK_THROWS_AS(P::multiclass(0), ember::ArgumentError);
        CHECK_THROWS_AS(P::binary(1.5), ember::ArgumentError);
        CHECK_THROWS_AS(train::FBetaScoreMetric<Cpu>::binary(0.0), ember::ArgumentError);
        auto top4 = train::RecallMetric<Cpu>::multiclass(4);
        CHECK_THROWS_WITH(top4.update(multiclass(), {}),
                          Catch::Contains("RecallMetric") && Catch::Contains("top_k = 4"));
    }
    SECTION("ShapeError") {
        auto p = P::multiclass();
        CHECK_THROWS_WITH(p.update({scores(std::vector<float>(6, 0.f), 2, 3),
                                    truth(std::vector<std::int64_t>(6, 0), 3, 2)},
                                   {}),
                          Catch::Contains("PrecisionMetric") && Catch::Contains("[2, 3]") &&
                              Catch::Contains("[3, 2]"));
    }
}

TEST_CASE("HammingScore: labels right at a threshold", "[metrics]") {
    static_assert(train::Numeric<train::HammingScore<Cpu>>);
    auto ml = multilabel();
    auto targets = ml.targets.int_();
    // Strictly above 0.5: [1,0,1], [0,1,0], [1,0,0], [0,0,0] against the targets: 2 + 2 + 3 + 2
    // of 12 labels right.
    train::HammingScore<Cpu> h;
    auto e = h.update({ml.predictions, targets}, {});
    CHECK(e.name == "Hamming Score @ Threshold(0.5)");
    CHECK(*e.numeric == Approx(75.0));
    // Logits through a sigmoid: logit(0.9) etc. give the same decisions.
    auto logits = (ml.predictions / (1.0 - ml.predictions)).log();
    auto hs = train::HammingScore<Cpu>{}.with_sigmoid(true);
    CHECK(*hs.update({logits, targets}, {}).numeric == Approx(75.0));
    // Above 0.15: [1,1,1], [0,1,1], [1,1,1], [1,0,1]; wrong at [0,1], [0,2], [2,1], [2,2] and
    // all of row 3: 5 of 12 right.
    auto low = train::HammingScore<Cpu>{}.with_threshold(0.15);
    CHECK(*low.update({ml.predictions, targets}, {}).numeric == Approx(500.0 / 12.0));
    CHECK_THROWS_AS(h.update({ml.predictions, Tensor<Cpu, 2, Int>::zeros({3, 4})}, {}),
                    ember::ShapeError);
}

TEST_CASE("PerplexityMetric: exp of the mean negative log-likelihood", "[metrics]") {
    static_assert(train::Numeric<train::PerplexityMetric<Cpu>>);
    // Row 0 uniform over 3 tokens: -log p = log 3. Row 1: p(token 0) = 3 / (3 + 1 + 1), so
    // -log p = log(5/3). Mean log(5) / 2: perplexity √5. Row 2 (token 2) is the pad token.
    const float l3 = std::log(3.0f);
    auto logits = scores({0, 0, 0, l3, 0, 0, 5, -1, 2}, 3, 3);
    auto tokens =
        Tensor<Cpu, 1, Int>::from_data(TensorData(std::vector<std::int64_t>{0, 0, 2}, {3}));
    auto ppl = train::PerplexityMetric<Cpu>{}.with_pad_token(2);
    auto e = ppl.update({logits, tokens}, {});
    CHECK(e.name == "Perplexity");
    CHECK(*e.numeric == Approx(std::sqrt(5.0)));
    // Without the pad token, row 2's -log p = log(e^5 + e^-1 + e^2) - 2 joins the mean.
    const double row2 = std::log(std::exp(5.0) + std::exp(-1.0) + std::exp(2.0)) - 2.0;
    train::PerplexityMetric<Cpu> all;
    CHECK(*all.update({logits, tokens}, {}).numeric ==
          Approx(std::exp((std::log(5.0) + row2) / 3.0)));
    auto bad = Tensor<Cpu, 1, Int>::from_data(TensorData(std::vector<std::int64_t>{0, 3, 1}, {3}));
    CHECK_THROWS_AS(all.update({logits, bad}, {}), ember::IndexError);
    CHECK_THROWS_AS(all.update({logits, Tensor<Cpu, 1, Int>::zeros({2})}, {}), ember::ShapeError);
}

TEST_CASE("ClassificationOutput adapts to the confusion and perplexity inputs", "[metrics]") {
    using Out = train::ClassificationOutput<Cpu>;
    static_assert(train::AdaptsTo<Out, train::ConfusionStatsInput<Cpu>>);
    static_assert(train::AdaptsTo<Out, train::PerplexityInput<Cpu>>);
    Out o{Tensor<Cpu, 1>::zeros({1}), scores({2, 0, 0, 0, 0, 3}, 2, 3),
          Tensor<Cpu, 1, Int>::from_data(TensorData(std::vector<std::int64_t>{0, 1}, {2}))};
    auto in = train::Adaptor<Out, train::ConfusionStatsInput<Cpu>>::adapt(o);
    // Softmax rows sum to 1; the one-hot targets mark classes 0 and 1.
    auto sums = in.predictions.sum_dim(1).to_data().to_vec<double>();
    CHECK(sums[0] == Approx(1.0));
    CHECK(sums[1] == Approx(1.0));
    CHECK(in.targets.int_().to_data().to_vec<std::int64_t>() ==
          std::vector<std::int64_t>{1, 0, 0, 0, 1, 0});
    // Row 0 right, row 1 wrong (predicts 2): micro precision 1/2.
    auto p = train::PrecisionMetric<Cpu>::multiclass().with_class_reduction(R::Micro);
    CHECK(*p.update(in, {}).numeric == Approx(50.0));
}

}  // namespace test_metrics_classification
