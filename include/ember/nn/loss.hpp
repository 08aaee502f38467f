#pragma once
// Losses (ember::nn::loss, as Burn's burn::nn::loss): cross-entropy, binary cross-entropy, mean
// squared error and Huber. Each is a module whose forward returns the loss as a [1] tensor, so
// `loss.backward()` trains through it. The pointwise losses (KLDiv, Lp, PoissonNll, SmoothL1,
// GaussianNll) are in loss_regression.hpp, the margin and embedding losses in loss_margin.hpp,
// CtcLoss in loss_ctc.hpp, RnntLoss in loss_rnnt.hpp.
#include <optional>
#include <string_view>
#include <vector>

#include "../module/config.hpp"
#include "../module/module.hpp"
#include "../tensor/activation.hpp"

namespace ember::nn::loss {

/// How a loss reduces its elementwise values. Auto is the loss's natural reduction: Mean, except
/// for KLDivLoss (BatchMean); None keeps every element (flattened by forward(), shaped as the
/// input by forward_no_reduction()).
enum class Reduction : int {
    Mean,      ///< the mean of the elements
    Sum,       ///< the sum of the elements
    Auto,      ///< the loss's natural reduction
    None,      ///< no reduction
    BatchMean  ///< the sum divided by the size of the first dim (the batch)
};

namespace detail {
template <Backend B, std::size_t D>
Tensor<B, 1> reduce(const Tensor<B, D>& loss, Reduction reduction) {
    switch (reduction) {
        case Reduction::Sum:
            return loss.sum();
        case Reduction::None:
            return loss.template reshape<1>({-1});
        case Reduction::BatchMean:
            return loss.sum() / double(loss.dims()[0]);
        default:
            return loss.mean();
    }
}
template <Backend B, std::size_t D, typename K1, typename K2>
void check_same_shape(const Tensor<B, D, K1>& a, const Tensor<B, D, K2>& b, const char* loss,
                      const char* what) {
    EMBER_CHECK(a.shape() == b.shape(), Shape, loss, ": predictions of shape ",
                a.shape().to_string(), " and ", what, " of shape ", b.shape().to_string(),
                " differ");
}
inline void check_weights(const std::optional<std::vector<double>>& weights, const char* config) {
    if (!weights) return;
    EMBER_CHECK(!weights->empty(), Argument, config, "::init: weights must not be empty");
    for (double w : *weights)
        EMBER_CHECK(w > 0.0, Argument, config, "::init: weights must be positive, got ", w);
}
inline void check_smoothing(const std::optional<double>& smoothing, const char* config) {
    if (smoothing)
        EMBER_CHECK(*smoothing >= 0.0 && *smoothing <= 1.0, Argument, config,
                    "::init: smoothing must be in [0, 1], got ", *smoothing);
}
template <Backend B>
std::optional<Tensor<B, 1>> weight_tensor(const std::optional<std::vector<double>>& weights,
                                          const Device<B>& device) {
    if (!weights) return std::nullopt;
    std::vector<float> w(weights->begin(), weights->end());
    return Tensor<B, 1>::from_data(TensorData(std::move(w), Shape{weights->size()}), device)
        .cast(dtype_of<typename B::FloatElem>());
}
}  // namespace detail

// ---- CrossEntropyLoss -----------------------------------------------------------------------

/// Cross-entropy between class scores [N, C] and integer targets [N] (torch.nn.CrossEntropyLoss
/// with reduction "mean"): a weighted mean over the samples whose target is not a pad token,
/// Σᵢ wᵢ·lossᵢ / Σᵢ wᵢ with wᵢ = weights[targetᵢ] (1 without class weights). With label
/// smoothing α the target distribution is (1-α)·one_hot + α/C. Unlike Burn, which divides by
/// every sample, pad tokens leave the denominator as they do in PyTorch.
template <Backend B>
struct CrossEntropyLoss {
    std::optional<std::vector<std::size_t>> pad_tokens;  ///< target ids that add no loss
    std::optional<Tensor<B, 1>> weights;                 ///< per-class weights [C]
    std::optional<double> smoothing;                     ///< label smoothing α
    bool logits = true;  ///< inputs are logits (else probabilities, of which the log is taken)
    EMBER_MODULE(CrossEntropyLoss, pad_tokens, weights, smoothing, logits)

    /// The loss ([1]) of `predictions` [N, C] (logits or probabilities) for `targets` [N] in
    /// [0, C) (pad tokens may be any id).
    Tensor<B, 1> forward(const Tensor<B, 2>& predictions, const Tensor<B, 1, Int>& targets) const;
    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const {
        c.add("pad_tokens", pad_tokens)
            .add("weights", weights ? "Some" : "None")
            .add("smoothing", smoothing)
            .add("logits", logits);
    }
};

/// Configuration of CrossEntropyLoss.
struct CrossEntropyLossConfig {
    std::optional<std::vector<std::size_t>> pad_tokens;  ///< target ids that add no loss
    std::optional<std::vector<double>> weights;          ///< per-class weights (positive)
    std::optional<double> smoothing;                     ///< label smoothing α in [0, 1]
    bool logits = true;  ///< inputs are logits (false: probabilities)
    EMBER_CONFIG(CrossEntropyLossConfig, pad_tokens, weights, smoothing, logits)

    /// Builds the loss on `device` (where the class weights live).
    template <Backend B>
    CrossEntropyLoss<B> init(const Device<B>& device = {}) const;
};

// ---- BinaryCrossEntropyLoss -----------------------------------------------------------------

/// Binary cross-entropy between predictions and 0/1 integer targets of the same shape, averaged
/// over every element (torch.nn.functional.binary_cross_entropy[_with_logits]). Class weights:
/// for 1-d inputs two weights, picked by each target (weights[target]); for [..., C] inputs
/// (multi-label) one weight per class of the last dim. With smoothing α the targets become
/// t·(1-α) + α/C (C = 2 for 1-d inputs). log(p) and log(1-p) are clamped at -100 as in PyTorch.
template <Backend B>
struct BinaryCrossEntropyLoss {
    std::optional<Tensor<B, 1>> weights;  ///< class weights
    std::optional<double> smoothing;      ///< label smoothing α
    bool logits = false;                  ///< inputs are logits (else probabilities in [0, 1])
    EMBER_MODULE(BinaryCrossEntropyLoss, weights, smoothing, logits)

    /// The mean loss ([1]) of `predictions` for `targets` (0 or 1).
    template <std::size_t D>
    Tensor<B, 1> forward(const Tensor<B, D>& predictions, const Tensor<B, D, Int>& targets) const {
        if (::ember::detail::autocast::widens(predictions)) [[unlikely]]  // autocast: in f32
            return forward(predictions.cast(DType::F32), targets);
        detail::check_same_shape(predictions, targets, "BinaryCrossEntropyLoss", "targets");
        const Shape shape = predictions.shape();
        const std::size_t classes = D > 1 ? shape[D - 1] : 2;
        auto t = targets.float_();
        if (smoothing) t = t * (1.0 - *smoothing) + *smoothing / double(classes);
        Tensor<B, D> loss = logits
                                // (1-t)·x - log σ(x) = (1-t)·x + log(1 + e^-x), without overflow.
                                ? (1.0 - t) * predictions - activation::log_sigmoid(predictions)
                                : (t - 1.0) * (-predictions).log1p().clamp_min(-100.0) -
                                      t * predictions.log().clamp_min(-100.0);
        if (weights) {
            const std::size_t n = weights->dims()[0];
            EMBER_CHECK(n == classes, Shape, "BinaryCrossEntropyLoss: ", n, " weights for ",
                        "predictions of shape ", shape.to_string(), " (want ", classes, ")");
            if constexpr (D == 1) {
                loss = loss * weights->gather(0, targets);
            } else {
                Shape s = Shape::filled(D, 1);
                s[D - 1] = n;
                loss = loss * weights->template reshape<D>(s);
            }
        }
        return loss.mean();
    }
    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const {
        c.add("weights", weights ? "Some" : "None")
            .add("smoothing", smoothing)
            .add("logits", logits);
    }
};

/// Configuration of BinaryCrossEntropyLoss.
struct BinaryCrossEntropyLossConfig {
    std::optional<std::vector<double>> weights;  ///< class weights (positive)
    std::optional<double> smoothing;             ///< label smoothing α in [0, 1]
    bool logits = false;                         ///< inputs are logits (false: probabilities)
    EMBER_CONFIG(BinaryCrossEntropyLossConfig, weights, smoothing, logits)

    /// Builds the loss on `device` (where the class weights live).
    template <Backend B>
    BinaryCrossEntropyLoss<B> init(const Device<B>& device = {}) const;
};

// ---- MseLoss and HuberLoss ------------------------------------------------------------------

/// Mean squared error, (prediction - target)², reduced as asked.
struct MseLoss {
    EMBER_MODULE(MseLoss)

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
        detail::check_same_shape(predictions, targets, "MseLoss", "targets");
        namespace ac = ::ember::detail::autocast;  // autocast: both in f32
        if (ac::widens(predictions) || ac::widens(targets)) [[unlikely]]
            return forward_no_reduction(ac::widen(predictions), ac::widen(targets));
        auto r = predictions - targets;
        return r * r;
    }
};

/// Huber loss: ½r² where |r| <= delta, delta·(|r| - ½delta) beyond (torch's huber_loss).
struct HuberLoss {
    double delta = 1.0;  ///< where the loss turns from quadratic to linear
    EMBER_MODULE(HuberLoss, delta)

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
        detail::check_same_shape(predictions, targets, "HuberLoss", "targets");
        namespace ac = ::ember::detail::autocast;  // autocast: both in f32
        if (ac::widens(predictions) || ac::widens(targets)) [[unlikely]]
            return forward_no_reduction(ac::widen(predictions), ac::widen(targets));
        return forward_residuals(predictions - targets);
    }
    /// The elementwise loss of residuals r = prediction - target.
    template <Backend B, std::size_t D>
    Tensor<B, D> forward_residuals(const Tensor<B, D>& residuals) const {
        auto abs = residuals.abs();
        auto quadratic = residuals * residuals * 0.5;
        auto linear = (abs - 0.5 * delta) * delta;
        return quadratic.mask_where(abs.greater_elem(delta), linear);
    }
    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const { c.add("delta", delta); }
};

/// Configuration of HuberLoss.
struct HuberLossConfig {
    double delta = 1.0;  ///< where the loss turns from quadratic to linear (positive)
    EMBER_CONFIG(HuberLossConfig, delta)

    /// Builds the loss; throws ArgumentError unless delta > 0.
    HuberLoss init() const {
        EMBER_CHECK(delta > 0.0, Argument, "HuberLossConfig::init: delta must be positive, got ",
                    delta);
        return HuberLoss{delta};
    }
};

// Defined out of their classes, so not inline: where an `extern template` declaration names an
// instance (include/ember/dispatch/nn.hpp for Dispatch), a file that calls it compiles the call
// only, not the body (compilers instantiate an inline function to consider inlining it, even
// one declared extern).

template <Backend B>
Tensor<B, 1> CrossEntropyLoss<B>::forward(const Tensor<B, 2>& predictions,
                                          const Tensor<B, 1, Int>& targets) const {
    if (::ember::detail::autocast::widens(predictions)) [[unlikely]]  // autocast: in f32
        return forward(predictions.cast(DType::F32), targets);
    // Plain variables, not a structured binding: the lambda below uses them, and Clang
    // before 16 rejects a lambda's reference to a binding.
    const std::size_t n = predictions.dims()[0], c = predictions.dims()[1];
    EMBER_CHECK(targets.dims()[0] == n, Shape, "CrossEntropyLoss: predictions of shape ",
                predictions.shape().to_string(), " and targets of shape ",
                targets.shape().to_string(), " have different batch sizes");
    if (weights)
        EMBER_CHECK(weights->dims()[0] == c, Shape, "CrossEntropyLoss: ", weights->dims()[0],
                    " class weights for predictions of shape ", predictions.shape().to_string());
    auto log_p = logits ? activation::log_softmax(predictions, 1) : predictions.log();

    // Pad rows are masked out; their targets become 0 so that gathering stays in range.
    std::optional<Tensor<B, 1, Bool>> pad;
    if (pad_tokens)
        for (std::size_t t : *pad_tokens) {
            auto m = targets.equal_elem(static_cast<std::int64_t>(t));
            pad = pad ? pad->bool_or(m) : m;
        }
    auto safe = pad ? targets.mask_fill(*pad, 0) : targets;
    auto keep = pad ? pad->not_().float_() : Tensor<B, 1>::ones(Shape{n}, predictions.device());
    auto row_weight = weights ? weights->gather(0, safe) * keep : keep;

    Tensor<B, 1> per_row = [&] {
        if (smoothing) {
            const double a = *smoothing;
            auto target = safe.one_hot(c).float_() * (1.0 - a) + a / double(c);
            auto terms = log_p * target;
            if (weights) terms = terms * weights->template reshape<2>({1, long(c)});
            return terms.sum_dim(1).template reshape<1>({long(n)}) * keep;
        }
        auto picked = log_p.gather(1, safe.template reshape<2>({long(n), 1}));
        return picked.template reshape<1>({long(n)}) * row_weight;
    }();
    return -per_row.sum() / row_weight.sum();
}

template <Backend B>
CrossEntropyLoss<B> CrossEntropyLossConfig::init(const Device<B>& device) const {
    detail::check_weights(weights, "CrossEntropyLossConfig");
    detail::check_smoothing(smoothing, "CrossEntropyLossConfig");
    return {pad_tokens, detail::weight_tensor<B>(weights, device), smoothing, logits};
}

template <Backend B>
BinaryCrossEntropyLoss<B> BinaryCrossEntropyLossConfig::init(const Device<B>& device) const {
    detail::check_weights(weights, "BinaryCrossEntropyLossConfig");
    detail::check_smoothing(smoothing, "BinaryCrossEntropyLossConfig");
    return {detail::weight_tensor<B>(weights, device), smoothing, logits};
}

}  // namespace ember::nn::loss
