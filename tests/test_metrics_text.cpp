// CerMetric, WerMetric, BleuMetric and RougeLMetric: small cases worked out by hand, and the
// references of tests/fixtures/gen_metrics.py (torchmetrics' definitions in plain Python).
#include <catch2/catch.hpp>
#include <cmath>
#include <ember/ember.hpp>
#include <ember/train/text_metrics.hpp>
#include <sstream>

#include "harness.hpp"

namespace test_metrics_text {

namespace {

namespace train = ember::train;

std::vector<std::string> lines(const std::string& text) {
    std::vector<std::string> out;
    std::istringstream is(text);
    for (std::string l; std::getline(is, l);) out.push_back(l);
    return out;
}

double value_of(auto metric, const train::TextInput& in) {
    return *metric.update(in, train::MetricMetadata{}).numeric;
}

}  // namespace

TEST_CASE("CerMetric and WerMetric: edit distances over the references' length", "[metrics]") {
    static_assert(train::Numeric<train::CerMetric>);
    static_assert(train::Numeric<train::WerMetric>);
    // "kitten" → "sitting": 3 edits over 7 characters; "abc" → "abc": none over 3.
    const train::TextInput in{{"kitten", "abc"}, {"sitting", "abc"}};
    train::CerMetric cer;
    auto e = cer.update(in, {});
    CHECK(e.name == "CER");
    CHECK(*e.numeric == Approx(100.0 * 3 / 10));
    CHECK(e.formatted == "30.00 %");
    // Words: "the cat sat" → "the cat sat down" is one insertion; "a b" → "b c" one deletion and
    // one insertion (or two substitutions): 3 edits over 6 words.
    CHECK(value_of(train::WerMetric{}, {{"the cat sat", "a b"}, {"the cat sat down", "b c"}}) ==
          Approx(100.0 * 3 / 6));
    // Whitespace runs separate words; an empty prediction deletes every word.
    CHECK(value_of(train::WerMetric{}, {{"  x \t y "}, {"x y"}}) == Approx(0.0));
    CHECK(value_of(train::WerMetric{}, {{""}, {"one two"}}) == Approx(100.0));
    // Longer predictions than references: over 100 %.
    CHECK(value_of(train::CerMetric{}, {{"abcd"}, {"a"}}) == Approx(300.0));
}

TEST_CASE("BleuMetric and RougeLMetric: n-gram precisions and the longest common subsequence",
          "[metrics]") {
    static_assert(train::Numeric<train::BleuMetric>);
    static_assert(train::Numeric<train::RougeLMetric>);
    // A prediction equal to its reference: 100.
    const train::TextInput same{{"a b c d e"}, {"a b c d e"}};
    CHECK(value_of(train::BleuMetric{}, same) == Approx(100.0));
    CHECK(value_of(train::RougeLMetric{}, same) == Approx(100.0));
    // "a b c d" against "a b c d e f": every n-gram matches (p = 1), brevity penalty
    // exp(1 − 6/4).
    CHECK(value_of(train::BleuMetric{}, {{"a b c d"}, {"a b c d e f"}}) ==
          Approx(100.0 * std::exp(1.0 - 6.0 / 4.0)));
    // BLEU-2 of "a a b" against "a b": unigrams 2 of 3 (the second "a" clipped), bigrams 1 of
    // 2; the prediction is longer, so no penalty: sqrt(2/3 · 1/2).
    train::BleuMetric bleu2(2);
    CHECK(bleu2.name() == "BLEU-2");
    CHECK(value_of(bleu2, {{"a a b"}, {"a b"}}) == Approx(100.0 * std::sqrt(1.0 / 3.0)));
    // No 4-gram in common: 0 without smoothing.
    CHECK(value_of(train::BleuMetric{}, {{"a b c x d"}, {"a b c d"}}) == 0.0);
    // ROUGE-L: tokens lower-cased, punctuation separates. "The cat, sat!" → the cat sat; against
    // "the big cat sat": LCS 3, P = 1, R = 3/4, F = 6/7.
    CHECK(value_of(train::RougeLMetric{}, {{"The cat, sat!"}, {"the big cat sat"}}) ==
          Approx(100.0 * 6.0 / 7.0));
    // Averaged over items; an item with nothing in common (or no token) scores 0.
    CHECK(value_of(train::RougeLMetric{}, {{"a b", "x", "!!"}, {"a b", "y", "z"}}) ==
          Approx(100.0 / 3.0));
}

TEST_CASE("text metrics: references of gen_metrics.py", "[metrics]") {
    for (const char* name : {"sentences", "short"}) {
        INFO(name);
        ember::test::Fixture fx("metrics", name);
        const train::TextInput in{lines(fx.str("predictions")), lines(fx.str("references"))};
        CHECK(value_of(train::CerMetric{}, in) == Approx(fx.param("cer")).epsilon(1e-9));
        CHECK(value_of(train::WerMetric{}, in) == Approx(fx.param("wer")).epsilon(1e-9));
        CHECK(value_of(train::BleuMetric{}, in) ==
              Approx(fx.param("bleu")).epsilon(1e-9).margin(1e-9));
        CHECK(value_of(train::BleuMetric(2), in) == Approx(fx.param("bleu2")).epsilon(1e-9));
        CHECK(value_of(train::RougeLMetric{}, in) == Approx(fx.param("rougeL")).epsilon(1e-9));
    }
}

TEST_CASE("text metrics: errors name the metric", "[metrics]") {
    const train::TextInput uneven{{"a", "b"}, {"a"}};
    CHECK_THROWS_WITH(train::CerMetric{}.update(uneven, {}),
                      Catch::Contains("CerMetric") && Catch::Contains("2 predictions"));
    CHECK_THROWS_AS(train::WerMetric{}.update(uneven, {}), ember::ShapeError);
    CHECK_THROWS_AS(train::BleuMetric{}.update(uneven, {}), ember::ShapeError);
    CHECK_THROWS_WITH(train::RougeLMetric{}.update({}, {}),
                      Catch::Contains("RougeLMetric") && Catch::Contains("empty"));
    // Every reference empty: the rate is undefined.
    CHECK_THROWS_WITH(train::CerMetric{}.update({{"abc"}, {""}}, {}),
                      Catch::Contains("CerMetric") && Catch::Contains("empty"));
    CHECK_THROWS_AS(train::WerMetric{}.update({{"abc"}, {"   "}}, {}), ember::ArgumentError);
    CHECK_THROWS_AS(train::BleuMetric(0), ember::ArgumentError);
}

}  // namespace test_metrics_text
