#pragma once
// Stochastic gradient descent with optional momentum and weight decay (Burn's Sgd; the update
// is torch.optim.SGD's): g ← grad + wd·p; with momentum, v ← g on the first step and
// v ← μ·v + (1 − dampening)·g after, g ← v (or g + μ·v with Nesterov); p ← p − lr·g.
#include <cmath>
#include <optional>
#include <string_view>

#include "../module/config.hpp"
#include "../tensor/sgd_step.hpp"
#include "decay.hpp"
#include "optimizer.hpp"

namespace ember::optim {

/// Momentum settings (Burn's defaults: torch's SGD has no default momentum).
struct MomentumConfig {
    double momentum = 0.9;   ///< μ, the velocity's decay
    double dampening = 0.1;  ///< how much of the new gradient is left out of the velocity
    bool nesterov = false;   ///< Nesterov's look-ahead form
    EMBER_CONFIG(MomentumConfig, momentum, dampening, nesterov)

    /// Throws ArgumentError for a negative or non-finite momentum or a dampening outside [0, 1].
    void check(std::string_view who) const {
        EMBER_CHECK(momentum >= 0 && std::isfinite(momentum), Argument, who,
                    ": momentum must be non-negative and finite, got ", momentum);
        EMBER_CHECK(dampening >= 0 && dampening <= 1, Argument, who,
                    ": dampening must be in [0, 1], got ", dampening);
    }
};

/// The SGD update (the simple optimizer SgdConfig::init wraps).
struct Sgd {
    std::optional<WeightDecayConfig> weight_decay;  ///< L2 penalty added to the gradient
    std::optional<MomentumConfig> momentum;         ///< momentum, when set
    /// Recorded with the state; load_record checks it.
    static constexpr std::string_view name = "Sgd";

    /// Per-parameter state: the velocity (only with momentum).
    template <Backend B, std::size_t D>
    struct State {
        Tensor<B, D> velocity;  ///< the momentum buffer
        EMBER_DETAIL_FIELDS(State, velocity)
    };

    /// One update of one tensor. With momentum and a velocity from an earlier step, a backend
    /// with `float_sgd_step` (CUDA, Fusion<Cuda>, Dispatch) runs the update in one pass with the
    /// composed ops' values; inside a captured CUDA step that pass writes the parameter and
    /// velocity in place, so the step can be replayed (ember::cuda::capture).
    template <Backend B, std::size_t D>
    std::pair<Tensor<B, D>, std::optional<State<B, D>>> step(
        double lr, Tensor<B, D> param, Tensor<B, D> grad, std::optional<State<B, D>> state) const;

    /// The scalars of a multi-tensor step (float_sgd_steps, CUDA) at rate `lr`; nothing
    /// without momentum (no state: OptimizerAdaptor then steps tensor by tensor).
    std::optional<SgdStepScalars> sgd_steps_scalars(double lr) const {
        if (!momentum) return std::nullopt;
        return SgdStepScalars{lr, momentum->momentum, momentum->dampening,
                              weight_decay ? weight_decay->penalty : 0.0, momentum->nesterov};
    }
};

/// Configuration of SGD (Burn's SgdConfig): `SgdConfig{}.with_momentum(MomentumConfig{})`.
struct SgdConfig {
    std::optional<WeightDecayConfig> weight_decay;  ///< L2 penalty (torch's weight_decay)
    std::optional<MomentumConfig> momentum;         ///< momentum, when set
    std::optional<GradientClipping> grad_clipping;  ///< clipping of each gradient
    EMBER_CONFIG(SgdConfig, weight_decay, momentum, grad_clipping)

    /// The optimizer for modules of type M. Throws ArgumentError for out-of-range settings.
    template <module::Module M>
    OptimizerAdaptor<Sgd, M> init() const {
        if (weight_decay) weight_decay->check("SgdConfig::init");
        if (momentum) momentum->check("SgdConfig::init");
        if (grad_clipping) grad_clipping->check("SgdConfig::init");
        return OptimizerAdaptor<Sgd, M>(Sgd{weight_decay, momentum}, grad_clipping);
    }
};

// Defined out of their classes, so not inline: where an `extern template` declaration names an
// instance (include/ember/dispatch/nn.hpp for Dispatch), a file that calls it compiles the call
// only, not the body (compilers instantiate an inline function to consider inlining it, even
// one declared extern).

template <Backend B, std::size_t D>
std::pair<Tensor<B, D>, std::optional<Sgd::State<B, D>>> Sgd::step(
    double lr, Tensor<B, D> param, Tensor<B, D> grad, std::optional<State<B, D>> state) const {
    if constexpr (requires(typename B::FloatTensorPrimitive t, const SgdStepScalars& s) {
                      B::float_sgd_step(t, t, t, s);
                  }) {
        if (momentum && state) {
            const SgdStepScalars s{lr, momentum->momentum, momentum->dampening,
                                   weight_decay ? weight_decay->penalty : 0.0, momentum->nesterov};
            auto [p, v] = B::float_sgd_step(std::move(param).into_primitive(),
                                            std::move(grad).into_primitive(),
                                            std::move(state->velocity).into_primitive(), s);
            return {Tensor<B, D>::from_primitive(std::move(p)),
                    State<B, D>{Tensor<B, D>::from_primitive(std::move(v))}};
        }
    }
    if (weight_decay) grad = weight_decay->transform(std::move(grad), param);
    std::optional<State<B, D>> next;
    if (momentum) {
        Tensor<B, D> v = state ? std::move(state->velocity)
                                     .mul_scalar(momentum->momentum)
                                     .add(grad.mul_scalar(1.0 - momentum->dampening))
                               : grad;
        grad = momentum->nesterov ? std::move(grad).add(v.mul_scalar(momentum->momentum)) : v;
        next = State<B, D>{std::move(v)};
    }
    return {std::move(param).sub(std::move(grad).mul_scalar(lr)), std::move(next)};
}

}  // namespace ember::optim
