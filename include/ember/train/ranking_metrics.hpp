#pragma once
// Threshold-free classification metrics: the area under the ROC curve (AurocMetric) and the
// average precision, the area under the precision-recall curve as a step function
// (AucPrMetric). Both follow torchmetrics' definitions without thresholds (every distinct score
// is a threshold): binary for scores [N, 1], one-vs-rest macro averages for [N, C ≥ 2]. They sort
// each batch's scores on the host: N·log N per class, nothing next to a step.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "../tensor/activation.hpp"
#include "output.hpp"

namespace ember::train {

/// Input of AurocMetric and AucPrMetric: scores [N, C] and class ids [N]. With C = 1 the
/// scores are those of the positive class and the targets 0 or 1 (binary); with C ≥ 2 each
/// column scores its class against the rest and the targets are in [0, C).
template <Backend B>
struct RankingInput {
    Tensor<B, 2> predictions;   ///< scores (probabilities or logits) per class
    Tensor<B, 1, Int> targets;  ///< class ids
};
/// Input of AurocMetric (Burn's name).
template <Backend B>
using AurocInput = RankingInput<B>;
/// Input of AucPrMetric.
template <Backend B>
using AucPrInput = RankingInput<B>;

namespace detail {

/// The points of a binary curve: true and false positives counted at each distinct score,
/// from the highest score down (torchmetrics' _binary_clf_curve, sklearn's _binary_clf_curve).
struct BinaryCurve {
    std::vector<double> tps;  ///< true positives among the items scoring ≥ the k-th threshold
    std::vector<double> fps;  ///< false positives among them
};

inline BinaryCurve binary_curve(const std::vector<double>& score, const std::vector<char>& pos) {
    std::vector<std::size_t> order(score.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return score[a] > score[b]; });
    BinaryCurve c;
    double tp = 0, fp = 0;
    for (std::size_t k = 0; k < order.size(); ++k) {
        (pos[order[k]] ? tp : fp) += 1;
        // Items with equal scores share one threshold: a point only after the last of them.
        if (k + 1 == order.size() || score[order[k + 1]] != score[order[k]]) {
            c.tps.push_back(tp);
            c.fps.push_back(fp);
        }
    }
    return c;
}

/// The area under the ROC curve (trapezoids from (0, 0)); nullopt without a positive or a
/// negative item, where it is undefined.
inline std::optional<double> binary_auroc(const std::vector<double>& score,
                                          const std::vector<char>& pos) {
    const BinaryCurve c = binary_curve(score, pos);
    if (c.tps.empty() || c.tps.back() == 0 || c.fps.back() == 0) return std::nullopt;
    const double p = c.tps.back(), n = c.fps.back();
    double area = 0, x = 0, y = 0;
    for (std::size_t k = 0; k < c.tps.size(); ++k) {
        const double nx = c.fps[k] / n, ny = c.tps[k] / p;
        area += (nx - x) * (ny + y) / 2;
        x = nx;
        y = ny;
    }
    return area;
}

/// Average precision, Σ (Rₖ − Rₖ₋₁)·Pₖ over the thresholds from the highest score down;
/// nullopt without a positive item (recall is 0/0).
inline std::optional<double> binary_average_precision(const std::vector<double>& score,
                                                      const std::vector<char>& pos) {
    const BinaryCurve c = binary_curve(score, pos);
    if (c.tps.empty() || c.tps.back() == 0) return std::nullopt;
    const double p = c.tps.back();
    double ap = 0, recall = 0;
    for (std::size_t k = 0; k < c.tps.size(); ++k) {
        const double r = c.tps[k] / p;
        ap += (r - recall) * c.tps[k] / (c.tps[k] + c.fps[k]);
        recall = r;
    }
    return ap;
}

/// The binary score ([N, 1]) or the one-vs-rest macro mean ([N, C ≥ 2]) of `score_of`, leaving
/// out classes where it is undefined; nullopt when no class has one. ShapeError when N differs
/// or the batch is empty, ArgumentError for a target outside the classes.
template <typename Score>
std::optional<double> ranking_score(const TensorData& predictions, const TensorData& targets,
                                    const char* metric, Score score_of) {
    const Shape& s = predictions.shape();
    const std::size_t n = s[0], c = s[1];
    EMBER_CHECK(targets.num_elements() == n, Shape, metric, ": predictions of shape ",
                s.to_string(), " and targets of shape ", targets.shape().to_string(),
                " have different sizes");
    EMBER_CHECK(n > 0 && c > 0, Shape, metric, ": empty predictions of shape ", s.to_string());
    const auto p = predictions.to_vec<double>();
    const auto t = targets.to_vec<std::int64_t>();
    const std::int64_t classes = c == 1 ? 2 : std::int64_t(c);
    for (std::size_t i = 0; i < n; ++i)
        EMBER_CHECK(t[i] >= 0 && t[i] < classes, Argument, metric, ": target ", t[i], " of item ",
                    i, " outside [0, ", classes, ")");
    for (double v : p) EMBER_CHECK(!std::isnan(v), Argument, metric, ": a prediction is NaN");
    std::vector<double> col(n);
    std::vector<char> pos(n);
    double total = 0;
    std::size_t defined = 0;
    const std::size_t columns = c;
    for (std::size_t k = 0; k < columns; ++k) {
        const std::int64_t positive = c == 1 ? 1 : std::int64_t(k);
        for (std::size_t i = 0; i < n; ++i) {
            col[i] = p[i * c + k];
            pos[i] = t[i] == positive;
        }
        if (auto v = score_of(col, pos)) {
            total += *v;
            ++defined;
        }
    }
    if (defined == 0) return std::nullopt;
    return total / double(defined);
}

/// The shared part of AurocMetric and AucPrMetric: an entry with the value in percent, or
/// "undefined" (no numeric value, so the epoch mean leaves the batch out) where the batch lacks
/// the classes it needs.
template <Backend B>
class RankingMetricBase {
  public:
    /// The input.
    using Input = RankingInput<B>;
    /// Forgets the epoch.
    void clear() { state_.reset(); }
    /// The last defined batch value in percent (0 before any).
    double value() const { return state_.value(); }

  protected:
    NumericMetricState state_;

    template <typename Score>
    MetricEntry record(const std::string& name, const Input& in, const char* metric,
                       Score score_of) {
        const auto v =
            ranking_score(in.predictions.to_data(), in.targets.to_data(), metric, score_of);
        if (!v) return MetricEntry{name, "undefined", std::nullopt, std::nullopt};
        return state_.update(name, 100.0 * *v, in.predictions.dims()[0], 2, " %");
    }
};

}  // namespace detail

/// The area under the ROC curve in percent (Burn's AurocMetric; torchmetrics' BinaryAUROC for
/// scores [N, 1], MulticlassAUROC with average="macro" for [N, C ≥ 2]). Every distinct score is
/// a threshold and tied scores move the curve diagonally. A class without a positive or without
/// a negative item in the batch has no AUROC and is left out of the macro mean (torchmetrics
/// counts it as 0 with a warning); a batch where no class has one reports "undefined".
template <Backend B>
class AurocMetric : public detail::RankingMetricBase<B> {
  public:
    /// Updates with one batch; ShapeError when the sizes differ, ArgumentError for a target
    /// outside the classes or a NaN score.
    MetricEntry update(const typename AurocMetric::Input& in, const MetricMetadata&) {
        return this->record(name(), in, "AurocMetric", detail::binary_auroc);
    }
    /// "AUROC".
    std::string name() const { return "AUROC"; }
};

/// The average precision in percent, Σ (Rₖ − Rₖ₋₁)·Pₖ over the thresholds: the area under the
/// precision-recall curve as a step function, not by trapezoids (torchmetrics'
/// BinaryAveragePrecision for [N, 1], MulticlassAveragePrecision with average="macro" for
/// [N, C ≥ 2]; scikit-learn's average_precision_score). A class without a positive item in the
/// batch is left out of the macro mean; a batch where no class has one reports "undefined".
template <Backend B>
class AucPrMetric : public detail::RankingMetricBase<B> {
  public:
    /// Updates with one batch; ShapeError when the sizes differ, ArgumentError for a target
    /// outside the classes or a NaN score.
    MetricEntry update(const typename AucPrMetric::Input& in, const MetricMetadata&) {
        return this->record(name(), in, "AucPrMetric", detail::binary_average_precision);
    }
    /// "AUC-PR".
    std::string name() const { return "AUC-PR"; }
};

/// ClassificationOutput → AurocMetric, AucPrMetric: the softmax probabilities (one-vs-rest)
/// and the class ids.
template <Backend B>
struct Adaptor<ClassificationOutput<B>, RankingInput<B>> {
    /// Probabilities and targets.
    static RankingInput<B> adapt(const ClassificationOutput<B>& o) {
        return {activation::softmax(o.output, 1), o.targets};
    }
};

}  // namespace ember::train
