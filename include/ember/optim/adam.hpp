#pragma once
// Adam and AdamW (Burn's Adam/AdamW; the updates are torch.optim.Adam's and AdamW's):
//   m ← β₁·m + (1 − β₁)·g,  v ← β₂·v + (1 − β₂)·g²,  t ← t + 1
//   p ← p − lr · (m / (1 − β₁ᵗ)) / (√(v / (1 − β₂ᵗ)) + ε)
// computed as torch does: p ← p − (lr / (1 − β₁ᵗ)) · m / (√v / √(1 − β₂ᵗ) + ε).
// Adam adds an L2 penalty to g (torch's Adam weight_decay); AdamW decays the parameter itself
// first, p ← p − lr·λ·p (decoupled, torch's AdamW). ε defaults to Burn's 1e-5 (torch: 1e-8).
#include <cmath>
#include <cstdint>
#include <optional>
#include <string_view>

#include "../module/config.hpp"
#include "decay.hpp"
#include "optimizer.hpp"

namespace ember::optim {

namespace detail {

inline void check_adam(std::string_view who, double beta_1, double beta_2, double epsilon) {
    EMBER_CHECK(beta_1 >= 0 && beta_1 < 1, Argument, who, ": beta_1 must be in [0, 1), got ",
                beta_1);
    EMBER_CHECK(beta_2 >= 0 && beta_2 < 1, Argument, who, ": beta_2 must be in [0, 1), got ",
                beta_2);
    EMBER_CHECK(epsilon >= 0 && std::isfinite(epsilon), Argument, who,
                ": epsilon must be non-negative and finite, got ", epsilon);
}

/// The state shared by Adam and AdamW: both moments and the step count.
template <Backend B, std::size_t D>
struct AdaptiveMomentumState {
    Tensor<B, D> moment_1;  ///< running mean of the gradient
    Tensor<B, D> moment_2;  ///< running mean of the squared gradient
    std::int64_t time = 0;  ///< steps taken (for the bias corrections)
    EMBER_DETAIL_FIELDS(AdaptiveMomentumState, moment_1, moment_2, time)
};

/// The fused update's scalars at step count `time` (the corrections 1 − βᵗ).
inline AdamStepScalars adam_scalars(double beta_1, double beta_2, double epsilon, double lr,
                                    std::int64_t time) {
    const double t = double(time);
    return {beta_1, beta_2, epsilon, lr, 1 - std::pow(beta_1, t), 1 - std::pow(beta_2, t)};
}

/// The Adam step as tensor ops, for backends without a fused update.
template <Backend B, std::size_t D>
std::pair<Tensor<B, D>, std::optional<AdaptiveMomentumState<B, D>>> composed_adam_step(
    double beta_1, double beta_2, double epsilon, double lr, Tensor<B, D> param, Tensor<B, D> grad,
    std::optional<AdaptiveMomentumState<B, D>> state) {
    Tensor<B, D> g2 = grad.mul(grad);
    // No state yet is zero moments (0·β + x is x exactly): the first step then has the same
    // ops as every later one, so Fusion compiles its elementwise chain once, not twice.
    AdaptiveMomentumState<B, D> prev =
        state ? std::move(*state)
              : AdaptiveMomentumState<B, D>{grad.zeros_like(), grad.zeros_like(), 0};
    AdaptiveMomentumState<B, D> s{
        std::move(prev.moment_1).mul_scalar(beta_1).add(grad.mul_scalar(1 - beta_1)),
        std::move(prev.moment_2).mul_scalar(beta_2).add(std::move(g2).mul_scalar(1 - beta_2)),
        prev.time + 1};
    const double t = double(s.time);
    const double c1 = 1 - std::pow(beta_1, t);
    const double c2 = 1 - std::pow(beta_2, t);
    // torch's arrangement: one division per element, the corrections folded into scalars.
    Tensor<B, D> denom = s.moment_2.sqrt().mul_scalar(1 / std::sqrt(c2)).add_scalar(epsilon);
    Tensor<B, D> update = s.moment_1.div(std::move(denom));
    return {std::move(param).sub(std::move(update).mul_scalar(lr / c1)), std::move(s)};
}

/// The Adam step shared by Adam and AdamW: `param` moved by lr times the bias-corrected step
/// direction, and the moments updated with `grad`.
template <Backend B, std::size_t D>
std::pair<Tensor<B, D>, std::optional<AdaptiveMomentumState<B, D>>> adaptive_momentum_step(
    double beta_1, double beta_2, double epsilon, double lr, Tensor<B, D> param, Tensor<B, D> grad,
    std::optional<AdaptiveMomentumState<B, D>> state) {
    if constexpr (requires(typename B::FloatTensorPrimitive t, AdamStepScalars s) {
                      B::float_adam_step(t, t, t, t, s);
                  }) {
        // The backend fuses the update into one pass (the CPU backend does).
        const std::int64_t time = state ? state->time + 1 : 1;
        const AdamStepScalars scalars = adam_scalars(beta_1, beta_2, epsilon, lr, time);
        Tensor<B, D> m = state ? std::move(state->moment_1) : grad.zeros_like();
        Tensor<B, D> v = state ? std::move(state->moment_2) : grad.zeros_like();
        auto [p, m_next, v_next] = B::float_adam_step(
            std::move(param).into_primitive(), std::move(grad).into_primitive(),
            std::move(m).into_primitive(), std::move(v).into_primitive(), scalars);
        return {Tensor<B, D>::from_primitive(std::move(p)),
                AdaptiveMomentumState<B, D>{Tensor<B, D>::from_primitive(std::move(m_next)),
                                            Tensor<B, D>::from_primitive(std::move(v_next)), time}};
    } else {
        return composed_adam_step(beta_1, beta_2, epsilon, lr, std::move(param), std::move(grad),
                                  std::move(state));
    }
}

}  // namespace detail

/// The Adam update (the simple optimizer AdamConfig::init wraps).
struct Adam {
    double beta_1;                                  ///< decay of the first moment
    double beta_2;                                  ///< decay of the second moment
    double epsilon;                                 ///< added to the denominator
    std::optional<WeightDecayConfig> weight_decay;  ///< L2 penalty added to the gradient
    /// Recorded with the state; load_record checks it.
    static constexpr std::string_view name = "Adam";
    /// Per-parameter state.
    template <Backend B, std::size_t D>
    using State = detail::AdaptiveMomentumState<B, D>;

    /// The scalars of a multi-tensor step (float_adam_steps) at step count `time`: the update
    /// of `step`, the L2 penalty folded in.
    AdamStepsScalars adam_steps_scalars(double lr, std::int64_t time) const {
        return {detail::adam_scalars(beta_1, beta_2, epsilon, lr, time),
                weight_decay ? weight_decay->penalty : 0.0, 0.0};
    }
    /// One update of one tensor.
    template <Backend B, std::size_t D>
    std::pair<Tensor<B, D>, std::optional<State<B, D>>> step(
        double lr, Tensor<B, D> param, Tensor<B, D> grad, std::optional<State<B, D>> state) const;
};

/// Configuration of Adam (Burn's AdamConfig).
struct AdamConfig {
    double beta_1 = 0.9;                            ///< decay of the first moment
    double beta_2 = 0.999;                          ///< decay of the second moment
    double epsilon = 1e-5;                          ///< added to the denominator (torch: 1e-8)
    std::optional<WeightDecayConfig> weight_decay;  ///< L2 penalty (torch Adam's weight_decay)
    std::optional<GradientClipping> grad_clipping;  ///< clipping of each gradient
    EMBER_CONFIG(AdamConfig, beta_1, beta_2, epsilon, weight_decay, grad_clipping)

    /// The optimizer for modules of type M. Throws ArgumentError for out-of-range settings.
    template <module::Module M>
    OptimizerAdaptor<Adam, M> init() const {
        detail::check_adam("AdamConfig::init", beta_1, beta_2, epsilon);
        if (weight_decay) weight_decay->check("AdamConfig::init");
        if (grad_clipping) grad_clipping->check("AdamConfig::init");
        return OptimizerAdaptor<Adam, M>(Adam{beta_1, beta_2, epsilon, weight_decay},
                                         grad_clipping);
    }
};

/// The AdamW update (the simple optimizer AdamWConfig::init wraps).
struct AdamW {
    double beta_1;        ///< decay of the first moment
    double beta_2;        ///< decay of the second moment
    double epsilon;       ///< added to the denominator
    double weight_decay;  ///< decoupled decay λ: p ← p − lr·λ·p before the Adam step
    /// Recorded with the state; load_record checks it.
    static constexpr std::string_view name = "AdamW";
    /// Per-parameter state.
    template <Backend B, std::size_t D>
    using State = detail::AdaptiveMomentumState<B, D>;

    /// The scalars of a multi-tensor step (float_adam_steps) at step count `time`: the update
    /// of `step`, the decoupled decay folded in.
    AdamStepsScalars adam_steps_scalars(double lr, std::int64_t time) const {
        return {detail::adam_scalars(beta_1, beta_2, epsilon, lr, time), 0.0, weight_decay};
    }
    /// One update of one tensor.
    template <Backend B, std::size_t D>
    std::pair<Tensor<B, D>, std::optional<State<B, D>>> step(
        double lr, Tensor<B, D> param, Tensor<B, D> grad, std::optional<State<B, D>> state) const;
};

/// Configuration of AdamW (Burn's AdamWConfig).
struct AdamWConfig {
    double beta_1 = 0.9;                            ///< decay of the first moment
    double beta_2 = 0.999;                          ///< decay of the second moment
    double epsilon = 1e-5;                          ///< added to the denominator (torch: 1e-8)
    double weight_decay = 1e-4;                     ///< decoupled decay (torch's default: 1e-2)
    std::optional<GradientClipping> grad_clipping;  ///< clipping of each gradient
    EMBER_CONFIG(AdamWConfig, beta_1, beta_2, epsilon, weight_decay, grad_clipping)

    /// The optimizer for modules of type M. Throws ArgumentError for out-of-range settings.
    template <module::Module M>
    OptimizerAdaptor<AdamW, M> init() const {
        detail::check_adam("AdamWConfig::init", beta_1, beta_2, epsilon);
        EMBER_CHECK(weight_decay >= 0 && std::isfinite(weight_decay), Argument,
                    "AdamWConfig::init: weight_decay must be non-negative and finite, got ",
                    weight_decay);
        if (grad_clipping) grad_clipping->check("AdamWConfig::init");
        return OptimizerAdaptor<AdamW, M>(AdamW{beta_1, beta_2, epsilon, weight_decay},
                                          grad_clipping);
    }
};

// Defined out of their classes, so not inline: where an `extern template` declaration names an
// instance (include/ember/dispatch/nn.hpp for Dispatch), a file that calls it compiles the call
// only, not the body (compilers instantiate an inline function to consider inlining it, even
// one declared extern).

template <Backend B, std::size_t D>
std::pair<Tensor<B, D>, std::optional<Adam::State<B, D>>> Adam::step(
    double lr, Tensor<B, D> param, Tensor<B, D> grad, std::optional<State<B, D>> state) const {
    if (weight_decay) grad = weight_decay->transform(std::move(grad), param);
    return detail::adaptive_momentum_step(beta_1, beta_2, epsilon, lr, std::move(param),
                                          std::move(grad), std::move(state));
}

template <Backend B, std::size_t D>
std::pair<Tensor<B, D>, std::optional<AdamW::State<B, D>>> AdamW::step(
    double lr, Tensor<B, D> param, Tensor<B, D> grad, std::optional<State<B, D>> state) const {
    Tensor<B, D> decayed = std::move(param).mul_scalar(1 - lr * weight_decay);
    return detail::adaptive_momentum_step(beta_1, beta_2, epsilon, lr, std::move(decayed),
                                          std::move(grad), std::move(state));
}

}  // namespace ember::optim
