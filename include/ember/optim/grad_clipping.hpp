#pragma once
// Gradient clipping, applied by every optimizer to each parameter's gradient before its update
// (Burn's GradientClippingConfig). Clipping is per parameter tensor, as in Burn: Norm rescales
// each tensor's gradient to an L2 norm of at most max_norm on its own. PyTorch's
// clip_grad_norm_(model.parameters(), max_norm) instead uses the norm of all gradients
// together; calling it on each parameter separately gives ember's behaviour.
#include <cmath>
#include <string_view>

#include "../detail/fields.hpp"
#include "../tensor/tensor.hpp"

namespace ember::optim {

/// How to clip gradients.
struct GradientClipping {
    /// The method.
    enum class Kind : int {
        Value,  ///< clamp every element to [-threshold, threshold] (clip_grad_value_)
        Norm    ///< rescale the tensor to L2 norm <= threshold (clip_grad_norm_, per tensor)
    };
    Kind kind = Kind::Norm;  ///< which method
    double threshold = 1.0;  ///< the clamp bound (Value) or the maximum norm (Norm)
    EMBER_DETAIL_FIELDS(GradientClipping, kind, threshold)

    /// Clamp each gradient element to [-threshold, threshold].
    static constexpr GradientClipping Value(double threshold) { return {Kind::Value, threshold}; }
    /// Rescale each parameter's gradient to an L2 norm of at most max_norm.
    static constexpr GradientClipping Norm(double max_norm) { return {Kind::Norm, max_norm}; }

    /// Equal settings.
    friend bool operator==(const GradientClipping&, const GradientClipping&) = default;

    /// Throws ArgumentError unless the threshold is positive and finite (`who` names the caller).
    void check(std::string_view who) const {
        EMBER_CHECK(kind == Kind::Value || kind == Kind::Norm, Argument, who,
                    ": unknown gradient clipping kind ", int(kind));
        EMBER_CHECK(threshold > 0 && std::isfinite(threshold), Argument, who,
                    ": the gradient clipping threshold must be positive and finite, got ",
                    threshold);
    }

    /// The clipped gradient. Norm uses PyTorch's coefficient max_norm / (norm + 1e-6), capped
    /// at 1, so gradients below the bound pass unchanged.
    template <Backend B, std::size_t D>
    Tensor<B, D> clip(Tensor<B, D> grad) const {
        if (kind == Kind::Value) return std::move(grad).clamp(-threshold, threshold);
        const double norm = std::sqrt(double(grad.mul(grad).sum().into_scalar()));
        const double coef = threshold / (norm + 1e-6);
        if (coef >= 1.0) return grad;
        return std::move(grad).mul_scalar(coef);
    }
};

/// Burn's name for the clipping setting of an optimizer config.
using GradientClippingConfig = GradientClipping;

}  // namespace ember::optim
