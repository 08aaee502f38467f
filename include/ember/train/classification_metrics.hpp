#pragma once
// Classification metrics (Burn's train::metric): precision, recall and F-beta score from one
// confusion count (binary, multiclass by top-k, multilabel by threshold; micro, macro or weighted
// over the classes), the Hamming score of multilabel outputs, and perplexity. As the other
// bundled metrics, each reads its batch back to the host and counts there: a few numbers per item.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "../tensor/activation.hpp"
#include "output.hpp"

namespace ember::train {

/// How a per-class score becomes one number (Burn's ClassReduction, plus sklearn's "weighted").
enum class ClassReduction {
    Micro,    ///< the counts of every class summed first, then one score
    Macro,    ///< the mean of the per-class scores (classes whose score is 0/0 are left out)
    Weighted  ///< the per-class scores weighted by each class's number of true items
};

/// Input of PrecisionMetric, RecallMetric and FBetaScoreMetric: scores [N, C] (probabilities
/// for thresholds; any scores for top-k) and the true labels [N, C] (one-hot for multiclass,
/// multi-hot for multilabel, [N, 1] for binary).
template <Backend B>
struct ConfusionStatsInput {
    Tensor<B, 2> predictions;    ///< scores per class
    Tensor<B, 2, Bool> targets;  ///< true labels per class
};
/// Input of PrecisionMetric (Burn's name).
template <Backend B>
using PrecisionInput = ConfusionStatsInput<B>;
/// Input of RecallMetric (Burn's name).
template <Backend B>
using RecallInput = ConfusionStatsInput<B>;
/// Input of FBetaScoreMetric (Burn's name).
template <Backend B>
using FBetaScoreInput = ConfusionStatsInput<B>;

namespace detail {

/// Per-class counts of one batch.
struct ConfusionCounts {
    std::vector<double> true_positive;  ///< predicted and true
    std::vector<double> predicted;      ///< predicted positive
    std::vector<double> actual;         ///< true (the support)
};

/// Counts the batch: an item predicts a class when its score is at least `threshold`, or, with
/// `top_k`, when the class is among its k best scores (ties go to the lower class index).
/// ShapeError when the shapes differ; ArgumentError when k exceeds the classes.
inline ConfusionCounts confusion_counts(const TensorData& predictions, const TensorData& targets,
                                        std::optional<double> threshold,
                                        std::optional<std::size_t> top_k, const char* metric) {
    EMBER_CHECK(predictions.shape() == targets.shape(), Shape, metric, ": predictions of shape ",
                predictions.shape().to_string(), " and targets of shape ",
                targets.shape().to_string(), " differ");
    const std::size_t n = predictions.shape()[0], c = predictions.shape()[1];
    if (top_k)
        EMBER_CHECK(*top_k >= 1 && *top_k <= c, Argument, metric, ": top_k = ", *top_k, " for ", c,
                    " classes");
    const auto p = predictions.to_vec<double>();
    const auto t = targets.to_vec<double>();
    ConfusionCounts out{std::vector<double>(c), std::vector<double>(c), std::vector<double>(c)};
    std::vector<std::size_t> order(c);
    std::vector<char> chosen(c);
    for (std::size_t i = 0; i < n; ++i) {
        const double* row = p.data() + i * c;
        if (top_k) {
            std::iota(order.begin(), order.end(), std::size_t{0});
            std::stable_sort(order.begin(), order.end(),
                             [&](std::size_t a, std::size_t b) { return row[a] > row[b]; });
            std::fill(chosen.begin(), chosen.end(), 0);
            for (std::size_t k = 0; k < *top_k; ++k) chosen[order[k]] = 1;
        } else {
            for (std::size_t j = 0; j < c; ++j) chosen[j] = row[j] >= *threshold;
        }
        for (std::size_t j = 0; j < c; ++j) {
            const bool truth = t[i * c + j] != 0;
            out.predicted[j] += chosen[j];
            out.actual[j] += truth;
            out.true_positive[j] += chosen[j] && truth;
        }
    }
    return out;
}

/// score(class counts) reduced over the classes; 0 where nothing is defined.
template <typename Score>
double class_average(const ConfusionCounts& k, ClassReduction reduction, Score score) {
    const std::size_t c = k.actual.size();
    if (reduction == ClassReduction::Micro) {
        auto sum = [](const std::vector<double>& v) {
            return std::accumulate(v.begin(), v.end(), 0.0);
        };
        const double s = score(sum(k.true_positive), sum(k.predicted), sum(k.actual));
        return std::isnan(s) ? 0.0 : s;
    }
    double total = 0, weight = 0;
    for (std::size_t j = 0; j < c; ++j) {
        const double s = score(k.true_positive[j], k.predicted[j], k.actual[j]);
        if (reduction == ClassReduction::Macro) {
            if (std::isnan(s)) continue;
            total += s;
            weight += 1;
        } else {
            total += std::isnan(s) ? 0.0 : s * k.actual[j];
            weight += k.actual[j];
        }
    }
    return weight == 0 ? 0.0 : total / weight;
}

/// The shared part of the three confusion metrics: the decision rule and the class reduction.
template <Backend B>
class ConfusionMetricBase {
  public:
    /// The input.
    using Input = ConfusionStatsInput<B>;
    /// Forgets the epoch.
    void clear() { state_.reset(); }
    /// The last batch's value in percent.
    double value() const { return state_.value(); }

  protected:
    std::optional<double> threshold_ = 0.5;
    std::optional<std::size_t> top_k_;
    ClassReduction reduction_ = ClassReduction::Macro;
    NumericMetricState state_;

    void set_threshold(double threshold, const char* metric) {
        EMBER_CHECK(threshold >= 0.0 && threshold <= 1.0, Argument, metric,
                    ": threshold must be in [0, 1], got ", threshold);
        threshold_ = threshold;
        top_k_.reset();
    }
    void set_top_k(std::size_t k, const char* metric) {
        EMBER_CHECK(k >= 1, Argument, metric, ": top_k must be at least 1, got ", k);
        top_k_ = k;
        threshold_.reset();
    }
    template <typename Score>
    MetricEntry record(const std::string& name, const Input& in, const char* metric, Score score) {
        const auto counts = confusion_counts(in.predictions.to_data(), in.targets.to_data(),
                                             threshold_, top_k_, metric);
        const double v = 100.0 * class_average(counts, reduction_, score);
        return state_.update(name, v, in.predictions.dims()[0], 2, " %");
    }
};

}  // namespace detail

/// Precision, true positives over predicted positives, in percent (Burn's PrecisionMetric).
template <Backend B>
class PrecisionMetric : public detail::ConfusionMetricBase<B> {
  public:
    /// Binary classification: predictions [N, 1] are positive from `threshold` up.
    static PrecisionMetric binary(double threshold = 0.5) {
        PrecisionMetric m;
        m.set_threshold(threshold, "PrecisionMetric");
        return m;
    }
    /// Multiclass: the `top_k` best classes of each item are its predictions.
    static PrecisionMetric multiclass(std::size_t top_k = 1) {
        PrecisionMetric m;
        m.set_top_k(top_k, "PrecisionMetric");
        return m;
    }
    /// Multilabel: every class whose score is at least `threshold` is predicted.
    static PrecisionMetric multilabel(double threshold = 0.5) { return binary(threshold); }
    /// A copy reducing over classes as given (Macro by default).
    PrecisionMetric with_class_reduction(ClassReduction reduction) const {
        PrecisionMetric m = *this;
        m.reduction_ = reduction;
        return m;
    }
    /// Updates with one batch.
    MetricEntry update(const typename PrecisionMetric::Input& in, const MetricMetadata&) {
        return this->record(name(), in, "PrecisionMetric",
                            [](double tp, double pred, double) { return tp / pred; });
    }
    /// "Precision".
    std::string name() const { return "Precision"; }
};

/// Recall, true positives over true items, in percent (Burn's RecallMetric).
template <Backend B>
class RecallMetric : public detail::ConfusionMetricBase<B> {
  public:
    /// Binary classification: predictions [N, 1] are positive from `threshold` up.
    static RecallMetric binary(double threshold = 0.5) {
        RecallMetric m;
        m.set_threshold(threshold, "RecallMetric");
        return m;
    }
    /// Multiclass: the `top_k` best classes of each item are its predictions.
    static RecallMetric multiclass(std::size_t top_k = 1) {
        RecallMetric m;
        m.set_top_k(top_k, "RecallMetric");
        return m;
    }
    /// Multilabel: every class whose score is at least `threshold` is predicted.
    static RecallMetric multilabel(double threshold = 0.5) { return binary(threshold); }
    /// A copy reducing over classes as given (Macro by default).
    RecallMetric with_class_reduction(ClassReduction reduction) const {
        RecallMetric m = *this;
        m.reduction_ = reduction;
        return m;
    }
    /// Updates with one batch.
    MetricEntry update(const typename RecallMetric::Input& in, const MetricMetadata&) {
        return this->record(name(), in, "RecallMetric",
                            [](double tp, double, double actual) { return tp / actual; });
    }
    /// "Recall".
    std::string name() const { return "Recall"; }
};

/// The F-beta score, (1+β²)·TP / ((1+β²)·TP + β²·FN + FP), in percent (Burn's
/// FBetaScoreMetric); β = 1 is the F1 score, β > 1 weighs recall more.
template <Backend B>
class FBetaScoreMetric : public detail::ConfusionMetricBase<B> {
  public:
    /// Binary classification: predictions [N, 1] are positive from `threshold` up.
    static FBetaScoreMetric binary(double beta, double threshold = 0.5) {
        FBetaScoreMetric m(beta);
        m.set_threshold(threshold, "FBetaScoreMetric");
        return m;
    }
    /// Multiclass: the `top_k` best classes of each item are its predictions.
    static FBetaScoreMetric multiclass(double beta, std::size_t top_k = 1) {
        FBetaScoreMetric m(beta);
        m.set_top_k(top_k, "FBetaScoreMetric");
        return m;
    }
    /// Multilabel: every class whose score is at least `threshold` is predicted.
    static FBetaScoreMetric multilabel(double beta, double threshold = 0.5) {
        return binary(beta, threshold);
    }
    /// A copy reducing over classes as given (Macro by default).
    FBetaScoreMetric with_class_reduction(ClassReduction reduction) const {
        FBetaScoreMetric m = *this;
        m.reduction_ = reduction;
        return m;
    }
    /// Updates with one batch.
    MetricEntry update(const typename FBetaScoreMetric::Input& in, const MetricMetadata&) {
        const double b2 = beta_ * beta_;
        return this->record(name(), in, "FBetaScoreMetric",
                            [b2](double tp, double pred, double actual) {
                                const double fp = pred - tp, fn = actual - tp;
                                return (1 + b2) * tp / ((1 + b2) * tp + b2 * fn + fp);
                            });
    }
    /// "FBetaScore".
    std::string name() const { return "FBetaScore"; }

  private:
    explicit FBetaScoreMetric(double beta) : beta_(beta) {
        EMBER_CHECK(beta > 0.0 && std::isfinite(beta), Argument,
                    "FBetaScoreMetric: beta must be positive, got ", beta);
    }
    double beta_;
};

// ---- HammingScore ---------------------------------------------------------------------------

/// Input of HammingScore: multilabel scores [N, C] and 0/1 labels [N, C].
template <Backend B>
struct HammingScoreInput {
    Tensor<B, 2> outputs;       ///< scores per label
    Tensor<B, 2, Int> targets;  ///< 0 or 1 per label
};

/// The share of labels predicted right, in percent (Burn's HammingScore, 1 - the Hamming loss):
/// a label is predicted where its score (after a sigmoid, when asked) exceeds the threshold.
template <Backend B>
class HammingScore {
  public:
    /// The input.
    using Input = HammingScoreInput<B>;
    /// A copy with `threshold` (0.5 by default).
    HammingScore with_threshold(double threshold) const {
        HammingScore m = *this;
        m.threshold_ = threshold;
        return m;
    }
    /// A copy that applies a sigmoid to the scores first (logits as outputs).
    HammingScore with_sigmoid(bool sigmoid) const {
        HammingScore m = *this;
        m.sigmoid_ = sigmoid;
        return m;
    }
    /// Updates with one batch; ShapeError when the shapes differ.
    MetricEntry update(const Input& in, const MetricMetadata&) {
        EMBER_CHECK(in.outputs.shape() == in.targets.shape(), Shape,
                    "HammingScore: outputs of shape ", in.outputs.shape().to_string(),
                    " and targets of shape ", in.targets.shape().to_string(), " differ");
        const auto p = in.outputs.to_data().template to_vec<double>();
        const auto t = in.targets.to_data().template to_vec<double>();
        std::size_t right = 0;
        for (std::size_t i = 0; i < p.size(); ++i) {
            const double s = sigmoid_ ? 1.0 / (1.0 + std::exp(-p[i])) : p[i];
            right += (s > threshold_) == (t[i] != 0);
        }
        const double v = p.empty() ? 0.0 : 100.0 * double(right) / double(p.size());
        return state_.update(name(), v, in.outputs.dims()[0], 2, " %");
    }
    /// Forgets the epoch.
    void clear() { state_.reset(); }
    /// "Hamming Score @ Threshold(<t>)".
    std::string name() const {
        std::ostringstream os;
        os << "Hamming Score @ Threshold(" << threshold_ << ")";
        return os.str();
    }
    /// The last batch's score in percent.
    double value() const { return state_.value(); }

  private:
    double threshold_ = 0.5;
    bool sigmoid_ = false;
    NumericMetricState state_;
};

// ---- PerplexityMetric -----------------------------------------------------------------------

/// Input of PerplexityMetric: logits [N, V] (tokens × vocabulary) and target tokens [N].
template <Backend B>
struct PerplexityInput {
    Tensor<B, 2> outputs;       ///< logits per token
    Tensor<B, 1, Int> targets;  ///< the true tokens
};

/// Perplexity, exp of the mean negative log-likelihood of the target tokens under the
/// softmax of the logits (Burn's PerplexityMetric); pad tokens are not counted. A batch of only
/// pad tokens has perplexity +∞ and weight 0 in the epoch mean; the epoch value is the mean of
/// the batches' perplexities weighted by their tokens, as Burn's.
template <Backend B>
class PerplexityMetric {
  public:
    /// The input.
    using Input = PerplexityInput<B>;
    /// A copy that ignores targets equal to `pad_token`.
    PerplexityMetric with_pad_token(std::size_t pad_token) const {
        PerplexityMetric m = *this;
        m.pad_ = pad_token;
        return m;
    }
    /// Updates with one batch; ShapeError when the sizes differ, IndexError for a token
    /// outside the vocabulary.
    MetricEntry update(const Input& in, const MetricMetadata&) {
        const std::size_t n = in.outputs.dims()[0], v = in.outputs.dims()[1];
        EMBER_CHECK(in.targets.dims()[0] == n, Shape, "PerplexityMetric: outputs of shape ",
                    in.outputs.shape().to_string(), " and targets of shape ",
                    in.targets.shape().to_string(), " have different sizes");
        const auto x = in.outputs.to_data().template to_vec<double>();
        const auto t = in.targets.to_data().template to_vec<std::int64_t>();
        double nll = 0;
        std::size_t tokens = 0;
        for (std::size_t i = 0; i < n; ++i) {
            if (pad_ && t[i] == std::int64_t(*pad_)) continue;
            EMBER_CHECK(t[i] >= 0 && std::size_t(t[i]) < v, Index, "PerplexityMetric: token ", t[i],
                        " outside a vocabulary of ", v);
            const double* row = x.data() + i * v;
            const double m = *std::max_element(row, row + v);
            double z = 0;
            for (std::size_t j = 0; j < v; ++j) z += std::exp(row[j] - m);
            nll += m + std::log(z) - row[t[i]];
            ++tokens;
        }
        const double ppl =
            tokens == 0 ? std::numeric_limits<double>::infinity() : std::exp(nll / double(tokens));
        return state_.update(name(), ppl, tokens, 2);
    }
    /// Forgets the epoch.
    void clear() { state_.reset(); }
    /// "Perplexity".
    std::string name() const { return "Perplexity"; }
    /// The last batch's perplexity.
    double value() const { return state_.value(); }

  private:
    std::optional<std::size_t> pad_;
    NumericMetricState state_;
};

/// ClassificationOutput → PrecisionMetric, RecallMetric, FBetaScoreMetric: the softmax of the
/// scores (so that thresholds read probabilities) and the one-hot targets.
template <Backend B>
struct Adaptor<ClassificationOutput<B>, ConfusionStatsInput<B>> {
    /// Probabilities and one-hot labels.
    static ConfusionStatsInput<B> adapt(const ClassificationOutput<B>& o) {
        const std::size_t c = o.output.dims()[1];
        return {activation::softmax(o.output, 1), o.targets.one_hot(c).equal_elem(1)};
    }
};
/// ClassificationOutput → PerplexityMetric: the scores as logits.
template <Backend B>
struct Adaptor<ClassificationOutput<B>, PerplexityInput<B>> {
    /// Logits and targets.
    static PerplexityInput<B> adapt(const ClassificationOutput<B>& o) {
        return {o.output, o.targets};
    }
};

}  // namespace ember::train
