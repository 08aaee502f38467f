#pragma once
// AdaGrad (Burn's AdaGrad; the update is torch.optim.Adagrad's with initial_accumulator_value 0):
//   g ← grad + wd·p;  t ← t + 1;  clr ← lr / (1 + (t − 1)·lr_decay)
//   s ← s + g²;  p ← p − clr · g / (√s + ε)
#include <cmath>
#include <cstdint>
#include <optional>
#include <string_view>

#include "../module/config.hpp"
#include "decay.hpp"
#include "optimizer.hpp"

namespace ember::optim {

/// The AdaGrad update (the simple optimizer AdaGradConfig::init wraps).
struct AdaGrad {
    double lr_decay;                                ///< decay of the learning rate with steps
    double epsilon;                                 ///< added to the denominator
    std::optional<WeightDecayConfig> weight_decay;  ///< L2 penalty added to the gradient
    /// Recorded with the state; load_record checks it.
    static constexpr std::string_view name = "AdaGrad";

    /// Per-parameter state.
    template <Backend B, std::size_t D>
    struct State {
        Tensor<B, D> sum;       ///< the sum of g²
        std::int64_t time = 0;  ///< steps taken (for lr_decay)
        EMBER_DETAIL_FIELDS(State, sum, time)
    };

    /// One update of one tensor.
    template <Backend B, std::size_t D>
    std::pair<Tensor<B, D>, std::optional<State<B, D>>> step(
        double lr, Tensor<B, D> param, Tensor<B, D> grad, std::optional<State<B, D>> state) const {
        if (weight_decay) grad = weight_decay->transform(std::move(grad), param);
        Tensor<B, D> g2 = grad.mul(grad);
        State<B, D> s = state
                            ? State<B, D>{std::move(state->sum).add(std::move(g2)), state->time + 1}
                            : State<B, D>{std::move(g2), 1};
        const double clr = lr / (1 + double(s.time - 1) * lr_decay);
        Tensor<B, D> update = std::move(grad).div(s.sum.sqrt().add_scalar(epsilon));
        return {std::move(param).sub(std::move(update).mul_scalar(clr)), std::move(s)};
    }
};

/// Configuration of AdaGrad (Burn's AdaGradConfig).
struct AdaGradConfig {
    double lr_decay = 0.0;                          ///< learning-rate decay per step
    double epsilon = 1e-5;                          ///< added to the denominator (torch: 1e-10)
    std::optional<WeightDecayConfig> weight_decay;  ///< L2 penalty (torch's weight_decay)
    std::optional<GradientClipping> grad_clipping;  ///< clipping of each gradient
    EMBER_CONFIG(AdaGradConfig, lr_decay, epsilon, weight_decay, grad_clipping)

    /// The optimizer for modules of type M. Throws ArgumentError for out-of-range settings.
    template <module::Module M>
    OptimizerAdaptor<AdaGrad, M> init() const {
        EMBER_CHECK(lr_decay >= 0 && std::isfinite(lr_decay), Argument,
                    "AdaGradConfig::init: lr_decay must be non-negative and finite, got ",
                    lr_decay);
        EMBER_CHECK(epsilon >= 0 && std::isfinite(epsilon), Argument,
                    "AdaGradConfig::init: epsilon must be non-negative and finite, got ", epsilon);
        if (weight_decay) weight_decay->check("AdaGradConfig::init");
        if (grad_clipping) grad_clipping->check("AdaGradConfig::init");
        return OptimizerAdaptor<AdaGrad, M>(AdaGrad{lr_decay, epsilon, weight_decay},
                                            grad_clipping);
    }
};

}  // namespace ember::optim
