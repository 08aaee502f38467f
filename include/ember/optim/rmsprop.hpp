#pragma once
// RMSProp (Burn's RmsProp; the update is torch.optim.RMSprop's):
//   g ← grad + wd·p;  s ← α·s + (1 − α)·g²   (s starts at 0)
//   centered: ḡ ← α·ḡ + (1 − α)·g,  a ← √(s − ḡ²) + ε;  otherwise a ← √s + ε
//   momentum μ > 0: b ← μ·b + g/a, p ← p − lr·b;  otherwise p ← p − lr·g/a
#include <cmath>
#include <optional>
#include <string_view>

#include "../module/config.hpp"
#include "decay.hpp"
#include "optimizer.hpp"

namespace ember::optim {

/// The RMSProp update (the simple optimizer RmsPropConfig::init wraps).
struct RmsProp {
    double alpha;                                   ///< decay of the squared-gradient average
    double epsilon;                                 ///< added to the denominator
    bool centered;                                  ///< subtract the squared mean gradient
    double momentum;                                ///< momentum of the update (0: none)
    std::optional<WeightDecayConfig> weight_decay;  ///< L2 penalty added to the gradient
    /// Recorded with the state; load_record checks it.
    static constexpr std::string_view name = "RmsProp";

    /// Per-parameter state.
    template <Backend B, std::size_t D>
    struct State {
        Tensor<B, D> square_avg;                      ///< running mean of g²
        std::optional<Tensor<B, D>> grad_avg;         ///< running mean of g (centered only)
        std::optional<Tensor<B, D>> momentum_buffer;  ///< b (momentum > 0 only)
        EMBER_DETAIL_FIELDS(State, square_avg, grad_avg, momentum_buffer)
    };

    /// One update of one tensor.
    template <Backend B, std::size_t D>
    std::pair<Tensor<B, D>, std::optional<State<B, D>>> step(
        double lr, Tensor<B, D> param, Tensor<B, D> grad, std::optional<State<B, D>> state) const {
        if (weight_decay) grad = weight_decay->transform(std::move(grad), param);
        Tensor<B, D> g2 = grad.mul(grad).mul_scalar(1 - alpha);
        State<B, D> s{state ? std::move(state->square_avg).mul_scalar(alpha).add(std::move(g2))
                            : std::move(g2),
                      std::nullopt, std::nullopt};
        Tensor<B, D> avg = s.square_avg;
        if (centered) {
            Tensor<B, D> ga = grad.mul_scalar(1 - alpha);
            if (state && state->grad_avg)
                ga = std::move(*state->grad_avg).mul_scalar(alpha).add(ga);
            avg = std::move(avg).sub(ga.mul(ga));
            s.grad_avg = std::move(ga);
        }
        avg = std::move(avg).sqrt().add_scalar(epsilon);
        Tensor<B, D> update = std::move(grad).div(avg);
        if (momentum > 0) {
            if (state && state->momentum_buffer)
                update = std::move(*state->momentum_buffer).mul_scalar(momentum).add(update);
            s.momentum_buffer = update;
        }
        return {std::move(param).sub(std::move(update).mul_scalar(lr)), std::move(s)};
    }
};

/// Configuration of RMSProp (Burn's RmsPropConfig).
struct RmsPropConfig {
    double alpha = 0.99;                            ///< smoothing constant
    double epsilon = 1e-5;                          ///< added to the denominator (torch: 1e-8)
    bool centered = false;                          ///< normalise by the estimated variance
    double momentum = 0.0;                          ///< momentum of the update (0: none)
    std::optional<WeightDecayConfig> weight_decay;  ///< L2 penalty (torch's weight_decay)
    std::optional<GradientClipping> grad_clipping;  ///< clipping of each gradient
    EMBER_CONFIG(RmsPropConfig, alpha, epsilon, centered, momentum, weight_decay, grad_clipping)

    /// The optimizer for modules of type M. Throws ArgumentError for out-of-range settings.
    template <module::Module M>
    OptimizerAdaptor<RmsProp, M> init() const {
        EMBER_CHECK(alpha >= 0 && alpha <= 1, Argument,
                    "RmsPropConfig::init: alpha must be in [0, 1], got ", alpha);
        EMBER_CHECK(epsilon >= 0 && std::isfinite(epsilon), Argument,
                    "RmsPropConfig::init: epsilon must be non-negative and finite, got ", epsilon);
        EMBER_CHECK(momentum >= 0 && std::isfinite(momentum), Argument,
                    "RmsPropConfig::init: momentum must be non-negative and finite, got ",
                    momentum);
        if (weight_decay) weight_decay->check("RmsPropConfig::init");
        if (grad_clipping) grad_clipping->check("RmsPropConfig::init");
        return OptimizerAdaptor<RmsProp, M>(
            RmsProp{alpha, epsilon, centered, momentum, weight_decay}, grad_clipping);
    }
};

}  // namespace ember::optim
