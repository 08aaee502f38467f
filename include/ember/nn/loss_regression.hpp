#pragma once
// Pointwise losses of ember::nn::loss (Burn's names, PyTorch's semantics): KLDivLoss, LpLoss,
// PoissonNllLoss, SmoothL1Loss and GaussianNllLoss. Each is composed of tensor ops, so it runs on
// every backend and stack and differentiates through the ops' own backward rules. forward()
// reduces as asked ([1], or every element flattened for Reduction::None); forward_no_reduction()
// keeps the input's shape.
#include <cmath>
#include <limits>
#include <numbers>

#include "loss.hpp"

namespace ember::nn::loss {

// ---- KLDivLoss ------------------------------------------------------------------------------

/// Kullback-Leibler divergence of `targets` from the distribution whose log-probabilities are
/// `predictions` (torch.nn.KLDivLoss): t·(log t - x), or e^t·(t - x) with log_target. Zero
/// target probabilities add nothing (0·log 0 = 0). Reduction::Auto is BatchMean (the sum over
/// the batch size, the divergence's definition); Mean divides by every element, as PyTorch.
struct KLDivLoss {
    bool log_target = false;  ///< targets are log-probabilities (else probabilities)
    EMBER_MODULE(KLDivLoss, log_target)

    /// The reduced loss ([1]; every element, flattened, for Reduction::None).
    template <Backend B, std::size_t D>
    Tensor<B, 1> forward(const Tensor<B, D>& predictions, const Tensor<B, D>& targets,
                         Reduction reduction = Reduction::Auto) const {
        if (reduction == Reduction::Auto) reduction = Reduction::BatchMean;
        return detail::reduce(forward_no_reduction(predictions, targets), reduction);
    }
    /// The elementwise loss, shaped as the inputs.
    template <Backend B, std::size_t D>
    Tensor<B, D> forward_no_reduction(const Tensor<B, D>& predictions,
                                      const Tensor<B, D>& targets) const {
        detail::check_same_shape(predictions, targets, "KLDivLoss", "targets");
        if (log_target) return targets.exp() * (targets - predictions);
        // log of the clamped target: a zero target multiplies a finite log, giving 0.
        auto log_t = targets.clamp_min(std::numeric_limits<float>::min()).log();
        return targets * (log_t - predictions);
    }
    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const { c.add("log_target", log_target); }
};

/// Configuration of KLDivLoss.
struct KLDivLossConfig {
    bool log_target = false;  ///< targets are log-probabilities (else probabilities)
    EMBER_CONFIG(KLDivLossConfig, log_target)

    /// Builds the loss.
    KLDivLoss init() const { return KLDivLoss{log_target}; }
};

// ---- LpLoss ---------------------------------------------------------------------------------

/// |prediction - target|^p elementwise (Burn's LpLoss: the p-th power of the error, not the
/// p-norm); p = 1 with the mean is the mean absolute error, p = 2 the mean squared error.
struct LpLoss {
    double p = 2.0;  ///< the exponent (positive)
    EMBER_MODULE(LpLoss, p)

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
        detail::check_same_shape(predictions, targets, "LpLoss", "targets");
        auto error = predictions - targets;
        // The two common exponents without pow: exact, and a cheaper backward.
        if (p == 1.0) return error.abs();
        if (p == 2.0) return error * error;
        return error.abs().powf_scalar(p);
    }
    /// The elementwise loss, the mean over `dims` (kept as size-1 dims): per-sample or
    /// per-channel losses, e.g. dims {1, 2, 3} of an image batch [N, C, H, W].
    template <Backend B, std::size_t D>
    Tensor<B, D> forward_reduce_dims(const Tensor<B, D>& predictions, const Tensor<B, D>& targets,
                                     const std::vector<std::size_t>& dims) const {
        auto loss = forward_no_reduction(predictions, targets);
        for (std::size_t d : dims) {
            EMBER_CHECK(d < D, Dim, "LpLoss::forward_reduce_dims: dim ", d, " of a ", D,
                        "-d tensor");
            loss = loss.mean_dim(d);
        }
        return loss;
    }
    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const { c.add("p", p); }
};

/// Configuration of LpLoss.
struct LpLossConfig {
    double p = 2.0;  ///< the exponent (positive)
    EMBER_CONFIG(LpLossConfig, p)

    /// Builds the loss; throws ArgumentError unless p > 0.
    LpLoss init() const {
        EMBER_CHECK(p > 0.0 && std::isfinite(p), Argument,
                    "LpLossConfig::init: p must be positive and finite, got ", p);
        return LpLoss{p};
    }
    /// The L1 loss (p = 1).
    static LpLoss l1() { return LpLoss{1.0}; }
    /// The L2 loss (p = 2).
    static LpLoss l2() { return LpLoss{2.0}; }
};

// ---- PoissonNllLoss -------------------------------------------------------------------------

/// Negative log-likelihood of targets under a Poisson distribution (torch.nn.PoissonNLLLoss):
/// e^x - t·x with log_input (x = log λ), else x - t·log(x + eps). With full, Stirling's
/// approximation of log(t!), t·log t - t + ½·log(2πt), is added where t > 1.
struct PoissonNllLoss {
    bool log_input = true;  ///< predictions are log-rates (else rates)
    bool full = false;      ///< add the Stirling term
    double eps = 1e-8;      ///< added to rates before the log (log_input = false)
    EMBER_MODULE(PoissonNllLoss, log_input, full, eps)

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
        detail::check_same_shape(predictions, targets, "PoissonNllLoss", "targets");
        auto loss = log_input ? predictions.exp() - targets * predictions
                              : predictions - targets * (predictions + eps).log();
        if (full) {
            // Evaluated at max(t, 1) so that t <= 1, where the term is dropped, stays finite
            // (and passes no gradient).
            auto t = targets.clamp_min(1.0);
            auto stirling = t * t.log() - t + (t * (2.0 * std::numbers::pi)).log() * 0.5;
            loss = loss + stirling.mask_fill(targets.lower_equal_elem(1.0), 0.0);
        }
        return loss;
    }
    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const {
        c.add("log_input", log_input).add("full", full).add("eps", eps);
    }
};

/// Configuration of PoissonNllLoss.
struct PoissonNllLossConfig {
    bool log_input = true;  ///< predictions are log-rates (else rates)
    bool full = false;      ///< add the Stirling term
    double eps = 1e-8;      ///< added to rates before the log (positive)
    EMBER_CONFIG(PoissonNllLossConfig, log_input, full, eps)

    /// Builds the loss; throws ArgumentError unless eps > 0.
    PoissonNllLoss init() const {
        EMBER_CHECK(eps > 0.0, Argument, "PoissonNllLossConfig::init: eps must be positive, got ",
                    eps);
        return PoissonNllLoss{log_input, full, eps};
    }
};

// ---- SmoothL1Loss ---------------------------------------------------------------------------

/// Smooth L1 loss (torch.nn.SmoothL1Loss): ½r²/beta where |r| < beta, |r| - ½beta beyond, for
/// residuals r = prediction - target; beta = 0 is the L1 loss. HuberLoss with delta = beta is
/// beta times this.
struct SmoothL1Loss {
    double beta = 1.0;  ///< where the loss turns from quadratic to linear
    EMBER_MODULE(SmoothL1Loss, beta)

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
        detail::check_same_shape(predictions, targets, "SmoothL1Loss", "targets");
        auto r = predictions - targets;
        auto abs = r.abs();
        if (beta == 0.0) return abs;
        auto quadratic = r * r * (0.5 / beta);
        return quadratic.mask_where(abs.greater_equal_elem(beta), abs - 0.5 * beta);
    }
    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const { c.add("beta", beta); }
};

/// Configuration of SmoothL1Loss.
struct SmoothL1LossConfig {
    double beta = 1.0;  ///< where the loss turns from quadratic to linear (>= 0)
    EMBER_CONFIG(SmoothL1LossConfig, beta)

    /// Builds the loss; throws ArgumentError unless beta >= 0.
    SmoothL1Loss init() const {
        EMBER_CHECK(beta >= 0.0 && std::isfinite(beta), Argument,
                    "SmoothL1LossConfig::init: beta must be non-negative, got ", beta);
        return SmoothL1Loss{beta};
    }
};

// ---- GaussianNllLoss ------------------------------------------------------------------------

/// Negative log-likelihood of targets under Gaussians of mean `predictions` and variance `var`
/// (torch.nn.GaussianNLLLoss): ½·(log v + (x - t)²/v), plus ½·log 2π with full. `var` has the
/// predictions' shape, or that shape with a last dim of 1 (one variance per sample), or one dim
/// fewer (the same, unsqueezed). Variances below eps count as eps, but the gradient passes
/// through the clamp, as in PyTorch; negative variances are clamped too (PyTorch rejects them
/// after reading them back, which ember leaves to the caller).
struct GaussianNllLoss {
    bool full = false;  ///< add the constant ½·log 2π
    double eps = 1e-6;  ///< the smallest variance used
    EMBER_MODULE(GaussianNllLoss, full, eps)

    /// The reduced loss ([1]; every element, flattened, for Reduction::None).
    template <Backend B, std::size_t D, std::size_t DV>
    requires(DV == D || DV + 1 == D) Tensor<B, 1> forward(const Tensor<B, D>& predictions,
                                                          const Tensor<B, D>& targets,
                                                          const Tensor<B, DV>& var,
                                                          Reduction reduction = Reduction::Mean)
    const { return detail::reduce(forward_no_reduction(predictions, targets, var), reduction); }
    /// The elementwise loss, shaped as the predictions.
    template <Backend B, std::size_t D, std::size_t DV>
    requires(DV == D || DV + 1 == D) Tensor<B, D> forward_no_reduction(
        const Tensor<B, D>& predictions, const Tensor<B, D>& targets, const Tensor<B, DV>& var)
    const {
        detail::check_same_shape(predictions, targets, "GaussianNllLoss", "targets");
        const Shape& s = predictions.shape();
        Tensor<B, D> v = [&] {
            if constexpr (DV + 1 == D) {
                Shape want = s;
                want[D - 1] = 1;
                bool ok = true;
                for (std::size_t i = 0; i + 1 < D; ++i) ok = ok && var.dims()[i] == s[i];
                EMBER_CHECK(ok, Shape, "GaussianNllLoss: var of shape ", var.shape().to_string(),
                            " for predictions of shape ", s.to_string());
                return var.template reshape<D>(want);
            } else {
                bool ok = var.shape() == s;
                if (!ok && var.dims()[D - 1] == 1) {
                    ok = true;
                    for (std::size_t i = 0; i + 1 < D; ++i) ok = ok && var.dims()[i] == s[i];
                }
                EMBER_CHECK(ok, Shape, "GaussianNllLoss: var of shape ", var.shape().to_string(),
                            " for predictions of shape ", s.to_string());
                return var;
            }
        }();
        // max(v, eps) as a value, v's own gradient: v + (max(v, eps) - v) with the
        // correction detached.
        v = v + (v.clamp_min(eps) - v).detach();
        auto r = predictions - targets;
        auto loss = (v.log() + r * r / v) * 0.5;
        if (full) loss = loss + 0.5 * std::log(2.0 * std::numbers::pi);
        return loss;
    }
    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const { c.add("full", full).add("eps", eps); }
};

/// Configuration of GaussianNllLoss.
struct GaussianNllLossConfig {
    bool full = false;  ///< add the constant ½·log 2π
    double eps = 1e-6;  ///< the smallest variance used (positive)
    EMBER_CONFIG(GaussianNllLossConfig, full, eps)

    /// Builds the loss; throws ArgumentError unless eps > 0.
    GaussianNllLoss init() const {
        EMBER_CHECK(eps > 0.0, Argument, "GaussianNllLossConfig::init: eps must be positive, got ",
                    eps);
        return GaussianNllLoss{full, eps};
    }
};

}  // namespace ember::nn::loss
