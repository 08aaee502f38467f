#pragma once
// Margin and embedding losses of ember::nn::loss (Burn's names, PyTorch's semantics):
// CosineEmbeddingLoss, HingeEmbeddingLoss, MarginRankingLoss, MultiMarginLoss, SoftMarginLoss
// and TripletMarginLoss. Each is composed of tensor ops, so it runs on every backend and stack.
// forward() reduces as asked ([1], or the per-element/per-sample losses for Reduction::None);
// forward_no_reduction() returns them unreduced. Labels of ±1 follow PyTorch: a label that is
// neither adds nothing to the branch that asks for it.
#include <cmath>

#include "loss.hpp"

namespace ember::nn::loss {

namespace detail {
/// The p-norm of each row of `x` [N, D], as [N].
template <Backend B>
Tensor<B, 1> row_norm(const Tensor<B, 2>& x, double p) {
    const long n = long(x.dims()[0]);
    Tensor<B, 2> norm = p == 2.0   ? (x * x).sum_dim(1).sqrt()
                        : p == 1.0 ? x.abs().sum_dim(1)
                                   : x.abs().powf_scalar(p).sum_dim(1).powf_scalar(1.0 / p);
    return norm.template reshape<1>({n});
}
template <Backend B, std::size_t D>
void check_pair(const Tensor<B, D>& a, const Tensor<B, D>& b, const char* loss, const char* an,
                const char* bn) {
    EMBER_CHECK(a.shape() == b.shape(), Shape, loss, ": ", an, " of shape ", a.shape().to_string(),
                " and ", bn, " of shape ", b.shape().to_string(), " differ");
}
}  // namespace detail

// ---- CosineEmbeddingLoss --------------------------------------------------------------------

/// Whether pairs of embeddings are alike (torch.nn.CosineEmbeddingLoss): for the cosine
/// similarity c of rows x1 and x2, 1 - c where the label is 1 and max(0, c - margin) where it
/// is -1. The norms get 1e-12 added to their squares, as PyTorch does.
struct CosineEmbeddingLoss {
    double margin = 0.0;  ///< the similarity below which dissimilar pairs add nothing
    EMBER_MODULE(CosineEmbeddingLoss, margin)

    /// The reduced loss ([1]; the [N] per-pair losses for Reduction::None).
    template <Backend B>
    Tensor<B, 1> forward(const Tensor<B, 2>& input1, const Tensor<B, 2>& input2,
                         const Tensor<B, 1, Int>& targets,
                         Reduction reduction = Reduction::Mean) const {
        return detail::reduce(forward_no_reduction(input1, input2, targets), reduction);
    }
    /// The loss of each pair: rows of `input1` and `input2` [N, D], labels `targets` [N] (±1).
    template <Backend B>
    Tensor<B, 1> forward_no_reduction(const Tensor<B, 2>& input1, const Tensor<B, 2>& input2,
                                      const Tensor<B, 1, Int>& targets) const {
        detail::check_pair(input1, input2, "CosineEmbeddingLoss", "input1", "input2");
        const long n = long(input1.dims()[0]);
        EMBER_CHECK(targets.dims()[0] == input1.dims()[0], Shape,
                    "CosineEmbeddingLoss: inputs of shape ", input1.shape().to_string(),
                    " and targets of shape ", targets.shape().to_string(),
                    " have different batch sizes");
        auto dot = (input1 * input2).sum_dim(1);
        auto sq1 = (input1 * input1).sum_dim(1) + 1e-12;
        auto sq2 = (input2 * input2).sum_dim(1) + 1e-12;
        auto cos = (dot / (sq1 * sq2).sqrt()).template reshape<1>({n});
        auto similar = (1.0 - cos).mask_fill(targets.not_equal_elem(1), 0.0);
        auto dissimilar = (cos - margin).clamp_min(0.0).mask_fill(targets.not_equal_elem(-1), 0.0);
        return similar + dissimilar;
    }
    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const { c.add("margin", margin); }
};

/// Configuration of CosineEmbeddingLoss.
struct CosineEmbeddingLossConfig {
    double margin = 0.0;  ///< in [-1, 1]
    EMBER_CONFIG(CosineEmbeddingLossConfig, margin)

    /// Builds the loss; throws ArgumentError unless margin is in [-1, 1].
    CosineEmbeddingLoss init() const {
        EMBER_CHECK(margin >= -1.0 && margin <= 1.0, Argument,
                    "CosineEmbeddingLossConfig::init: margin must be in [-1, 1], got ", margin);
        return CosineEmbeddingLoss{margin};
    }
};

// ---- HingeEmbeddingLoss ---------------------------------------------------------------------

/// Hinge loss of distances (torch.nn.HingeEmbeddingLoss): x where the label is 1,
/// max(0, margin - x) where it is -1; `predictions` are typically distances between pairs.
struct HingeEmbeddingLoss {
    double margin = 1.0;  ///< the distance beyond which dissimilar pairs add nothing
    EMBER_MODULE(HingeEmbeddingLoss, margin)

    /// The reduced loss ([1]; every element, flattened, for Reduction::None).
    template <Backend B, std::size_t D>
    Tensor<B, 1> forward(const Tensor<B, D>& predictions, const Tensor<B, D>& targets,
                         Reduction reduction = Reduction::Mean) const {
        return detail::reduce(forward_no_reduction(predictions, targets), reduction);
    }
    /// The elementwise loss for labels `targets` (±1), shaped as the inputs.
    template <Backend B, std::size_t D>
    Tensor<B, D> forward_no_reduction(const Tensor<B, D>& predictions,
                                      const Tensor<B, D>& targets) const {
        detail::check_same_shape(predictions, targets, "HingeEmbeddingLoss", "targets");
        auto hinge = (margin - predictions).clamp_min(0.0).mask_fill(targets.equal_elem(1.0), 0.0);
        return hinge + predictions.mask_fill(targets.equal_elem(-1.0), 0.0);
    }
    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const { c.add("margin", margin); }
};

/// Configuration of HingeEmbeddingLoss.
struct HingeEmbeddingLossConfig {
    double margin = 1.0;  ///< the distance beyond which dissimilar pairs add nothing
    EMBER_CONFIG(HingeEmbeddingLossConfig, margin)

    /// Builds the loss; throws ArgumentError for a margin that is not finite.
    HingeEmbeddingLoss init() const {
        EMBER_CHECK(std::isfinite(margin), Argument,
                    "HingeEmbeddingLossConfig::init: margin must be finite, got ", margin);
        return HingeEmbeddingLoss{margin};
    }
};

// ---- MarginRankingLoss ----------------------------------------------------------------------

/// Ranking loss of pairs (torch.nn.MarginRankingLoss): max(0, -y·(x1 - x2) + margin), where a
/// label y of 1 means x1 should rank above x2 and -1 the reverse.
struct MarginRankingLoss {
    double margin = 0.0;  ///< by how much the right order must win
    EMBER_MODULE(MarginRankingLoss, margin)

    /// The reduced loss ([1]; every element, flattened, for Reduction::None).
    template <Backend B, std::size_t D>
    Tensor<B, 1> forward(const Tensor<B, D>& input1, const Tensor<B, D>& input2,
                         const Tensor<B, D>& targets, Reduction reduction = Reduction::Mean) const {
        return detail::reduce(forward_no_reduction(input1, input2, targets), reduction);
    }
    /// The elementwise loss, shaped as the inputs.
    template <Backend B, std::size_t D>
    Tensor<B, D> forward_no_reduction(const Tensor<B, D>& input1, const Tensor<B, D>& input2,
                                      const Tensor<B, D>& targets) const {
        detail::check_pair(input1, input2, "MarginRankingLoss", "input1", "input2");
        detail::check_pair(input1, targets, "MarginRankingLoss", "input1", "targets");
        return (margin - targets * (input1 - input2)).clamp_min(0.0);
    }
    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const { c.add("margin", margin); }
};

/// Configuration of MarginRankingLoss.
struct MarginRankingLossConfig {
    double margin = 0.0;  ///< by how much the right order must win (>= 0)
    EMBER_CONFIG(MarginRankingLossConfig, margin)

    /// Builds the loss; throws ArgumentError for a negative margin.
    MarginRankingLoss init() const {
        EMBER_CHECK(margin >= 0.0 && std::isfinite(margin), Argument,
                    "MarginRankingLossConfig::init: margin must be non-negative, got ", margin);
        return MarginRankingLoss{margin};
    }
};

// ---- MultiMarginLoss ------------------------------------------------------------------------

/// Multi-class hinge loss (torch.nn.MultiMarginLoss): for scores x [N, C] and class y of each
/// row, Σ_{i≠y} w[y]·max(0, margin - x[y] + x[i])^p / C, with class weights w (1 without).
template <Backend B>
struct MultiMarginLoss {
    int p = 1;                            ///< 1 (hinge) or 2 (squared hinge)
    double margin = 1.0;                  ///< by how much the right class must win
    std::optional<Tensor<B, 1>> weights;  ///< per-class weights [C]
    EMBER_MODULE(MultiMarginLoss, p, margin, weights)

    /// The reduced loss ([1]; the [N] per-row losses for Reduction::None).
    Tensor<B, 1> forward(const Tensor<B, 2>& predictions, const Tensor<B, 1, Int>& targets,
                         Reduction reduction = Reduction::Mean) const {
        return detail::reduce(forward_no_reduction(predictions, targets), reduction);
    }
    /// The loss of each row of `predictions` [N, C] for classes `targets` [N] in [0, C).
    Tensor<B, 1> forward_no_reduction(const Tensor<B, 2>& predictions,
                                      const Tensor<B, 1, Int>& targets) const {
        const std::size_t n = predictions.dims()[0], c = predictions.dims()[1];
        EMBER_CHECK(targets.dims()[0] == n, Shape, "MultiMarginLoss: predictions of shape ",
                    predictions.shape().to_string(), " and targets of shape ",
                    targets.shape().to_string(), " have different batch sizes");
        if (weights)
            EMBER_CHECK(weights->dims()[0] == c, Shape, "MultiMarginLoss: ", weights->dims()[0],
                        " class weights for predictions of shape ",
                        predictions.shape().to_string());
        auto right = predictions.gather(1, targets.template reshape<2>({long(n), 1}));
        auto hinge = (predictions - right + margin).clamp_min(0.0);
        if (p == 2) hinge = hinge * hinge;
        // The target's own column is not a competitor.
        hinge = hinge.mask_fill(targets.one_hot(c).equal_elem(1), 0.0);
        auto loss = hinge.sum_dim(1).template reshape<1>({long(n)}) / double(c);
        return weights ? loss * weights->gather(0, targets) : loss;
    }
    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const {
        c.add("p", p).add("margin", margin).add("weights", weights ? "Some" : "None");
    }
};

/// Configuration of MultiMarginLoss.
struct MultiMarginLossConfig {
    int p = 1;                                   ///< 1 (hinge) or 2 (squared hinge)
    double margin = 1.0;                         ///< by how much the right class must win
    std::optional<std::vector<double>> weights;  ///< per-class weights (positive)
    EMBER_CONFIG(MultiMarginLossConfig, p, margin, weights)

    /// Builds the loss on `device` (where the class weights live); throws ArgumentError unless
    /// p is 1 or 2, the margin is finite and every weight is positive.
    template <Backend B>
    MultiMarginLoss<B> init(const Device<B>& device = {}) const {
        EMBER_CHECK(p == 1 || p == 2, Argument,
                    "MultiMarginLossConfig::init: p must be 1 or 2, got ", p);
        EMBER_CHECK(std::isfinite(margin), Argument,
                    "MultiMarginLossConfig::init: margin must be finite, got ", margin);
        detail::check_weights(weights, "MultiMarginLossConfig");
        return {p, margin, detail::weight_tensor<B>(weights, device)};
    }
};

// ---- SoftMarginLoss -------------------------------------------------------------------------

/// Two-class logistic loss (torch.nn.SoftMarginLoss): log(1 + e^(-y·x)) for labels y (±1).
struct SoftMarginLoss {
    EMBER_MODULE(SoftMarginLoss)

    /// The reduced loss ([1]; every element, flattened, for Reduction::None).
    template <Backend B, std::size_t D>
    Tensor<B, 1> forward(const Tensor<B, D>& predictions, const Tensor<B, D>& targets,
                         Reduction reduction = Reduction::Mean) const {
        return detail::reduce(forward_no_reduction(predictions, targets), reduction);
    }
    /// The elementwise loss, shaped as the inputs.
    template <Backend B, std::size_t D>
    Tensor<B, D> forward_no_reduction(const Tensor<B, D>& predictions,
                                      const Tensor<B, D>& targets) const {
        detail::check_same_shape(predictions, targets, "SoftMarginLoss", "targets");
        return activation::softplus(-(targets * predictions));
    }
};

/// Configuration of SoftMarginLoss (it has no options).
struct SoftMarginLossConfig {
    EMBER_CONFIG(SoftMarginLossConfig)

    /// Builds the loss.
    SoftMarginLoss init() const { return {}; }
};

// ---- TripletMarginLoss ----------------------------------------------------------------------

/// Triplet loss (torch.nn.TripletMarginLoss): max(0, d(a, p) - d(a, n) + margin) for rows of
/// anchors, positives and negatives, with d(x, y) = ‖x - y + eps‖_p (PyTorch's
/// pairwise_distance). With swap, d(a, n) is replaced by d(p, n) where that is smaller.
struct TripletMarginLoss {
    double margin = 1.0;  ///< by how much negatives must be farther than positives
    double p = 2.0;       ///< the norm's degree
    double eps = 1e-6;    ///< added to differences (keeps the norm differentiable)
    bool swap = false;    ///< use the positive-negative distance where it is smaller
    EMBER_MODULE(TripletMarginLoss, margin, p, eps, swap)

    /// The reduced loss ([1]; the [N] per-triplet losses for Reduction::None).
    template <Backend B>
    Tensor<B, 1> forward(const Tensor<B, 2>& anchor, const Tensor<B, 2>& positive,
                         const Tensor<B, 2>& negative,
                         Reduction reduction = Reduction::Mean) const {
        return detail::reduce(forward_no_reduction(anchor, positive, negative), reduction);
    }
    /// The loss of each triplet of rows of `anchor`, `positive` and `negative` [N, D].
    template <Backend B>
    Tensor<B, 1> forward_no_reduction(const Tensor<B, 2>& anchor, const Tensor<B, 2>& positive,
                                      const Tensor<B, 2>& negative) const {
        detail::check_pair(anchor, positive, "TripletMarginLoss", "anchor", "positive");
        detail::check_pair(anchor, negative, "TripletMarginLoss", "anchor", "negative");
        auto d_ap = detail::row_norm(anchor - positive + eps, p);
        auto d_an = detail::row_norm(anchor - negative + eps, p);
        if (swap) d_an = d_an.min_pair(detail::row_norm(positive - negative + eps, p));
        return (d_ap - d_an + margin).clamp_min(0.0);
    }
    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const {
        c.add("margin", margin).add("p", p).add("eps", eps).add("swap", swap);
    }
};

/// Configuration of TripletMarginLoss.
struct TripletMarginLossConfig {
    double margin = 1.0;  ///< by how much negatives must be farther than positives (>= 0)
    double p = 2.0;       ///< the norm's degree (> 0)
    double eps = 1e-6;    ///< added to differences (>= 0)
    bool swap = false;    ///< use the positive-negative distance where it is smaller
    EMBER_CONFIG(TripletMarginLossConfig, margin, p, eps, swap)

    /// Builds the loss; throws ArgumentError unless margin >= 0, p > 0 and eps >= 0.
    TripletMarginLoss init() const {
        EMBER_CHECK(margin >= 0.0 && std::isfinite(margin), Argument,
                    "TripletMarginLossConfig::init: margin must be non-negative, got ", margin);
        EMBER_CHECK(p > 0.0 && std::isfinite(p), Argument,
                    "TripletMarginLossConfig::init: p must be positive, got ", p);
        EMBER_CHECK(eps >= 0.0, Argument,
                    "TripletMarginLossConfig::init: eps must be non-negative, got ", eps);
        return TripletMarginLoss{margin, p, eps, swap};
    }
};

}  // namespace ember::nn::loss
