#pragma once
// Adan, adaptive Nesterov momentum (Xie et al., "Adan: Adaptive Nesterov Momentum Algorithm for
// Faster Optimizing Deep Models", 2022), as the authors' PyTorch implementation computes it
// (sail-sg/Adan, with bias corrections; betas are decay factors, the paper's 1 − β):
//   d ← g − g_prev (0 on the first step),  u ← g + β₂·d
//   m ← β₁·m + (1 − β₁)·g,  v ← β₂·v + (1 − β₂)·d,  n ← β₃·n + (1 − β₃)·u²
//   s ← (m / (1 − β₁ᵗ) + β₂·v / (1 − β₂ᵗ)) / (√n / √(1 − β₃ᵗ) + ε)
//   p ← (p − lr·s) / (1 + lr·λ)         (the paper's proximal decay; `no_prox`:
//   p ← p·(1 − lr·λ) − lr·s              decoupled, as AdamW)
#include <cmath>
#include <cstdint>
#include <optional>
#include <string_view>

#include "../module/config.hpp"
#include "optimizer.hpp"

namespace ember::optim {

/// The Adan update (the simple optimizer AdanConfig::init wraps).
struct Adan {
    double beta_1;        ///< decay of the gradient's mean m
    double beta_2;        ///< decay of the gradient difference's mean v (and its weight in u)
    double beta_3;        ///< decay of the second moment n of u
    double epsilon;       ///< added to the denominator
    double weight_decay;  ///< λ
    bool no_prox;         ///< decoupled decay instead of the proximal division
    /// Recorded with the state; load_record checks it.
    static constexpr std::string_view name = "Adan";

    /// Per-parameter state.
    template <Backend B, std::size_t D>
    struct State {
        Tensor<B, D> moment;     ///< m, the running mean of the gradient
        Tensor<B, D> diff;       ///< v, the running mean of the gradient's change
        Tensor<B, D> moment_sq;  ///< n, the running mean of u²
        Tensor<B, D> prev_grad;  ///< the last step's gradient
        std::int64_t time = 0;   ///< steps taken (for the bias corrections)
        EMBER_DETAIL_FIELDS(State, moment, diff, moment_sq, prev_grad, time)
    };

    /// One update of one tensor.
    template <Backend B, std::size_t D>
    std::pair<Tensor<B, D>, std::optional<State<B, D>>> step(
        double lr, Tensor<B, D> param, Tensor<B, D> grad, std::optional<State<B, D>> state) const {
        // No state yet is zero moments and a previous gradient equal to this one (d = 0): the
        // first step has the same ops as later ones.
        State<B, D> s =
            state ? std::move(*state)
                  : State<B, D>{grad.zeros_like(), grad.zeros_like(), grad.zeros_like(), grad, 0};
        Tensor<B, D> d = grad.sub(s.prev_grad);
        Tensor<B, D> u = grad.add(d.mul_scalar(beta_2));
        s.moment = std::move(s.moment).mul_scalar(beta_1).add(grad.mul_scalar(1 - beta_1));
        s.diff = std::move(s.diff).mul_scalar(beta_2).add(std::move(d).mul_scalar(1 - beta_2));
        s.moment_sq =
            std::move(s.moment_sq).mul_scalar(beta_3).add(u.mul(u).mul_scalar(1 - beta_3));
        s.time += 1;
        const double t = double(s.time);
        const double c1 = 1 - std::pow(beta_1, t), c2 = 1 - std::pow(beta_2, t);
        const double c3 = std::sqrt(1 - std::pow(beta_3, t));
        Tensor<B, D> denom = s.moment_sq.sqrt().mul_scalar(1 / c3).add_scalar(epsilon);
        Tensor<B, D> update = s.moment.mul_scalar(1 / c1)
                                  .add(s.diff.mul_scalar(beta_2 / c2))
                                  .div(std::move(denom))
                                  .mul_scalar(lr);
        s.prev_grad = std::move(grad);
        if (no_prox)
            param = std::move(param).mul_scalar(1 - lr * weight_decay).sub(std::move(update));
        else
            param = std::move(param).sub(std::move(update)).mul_scalar(1 / (1 + lr * weight_decay));
        return {std::move(param), std::move(s)};
    }
};

/// Configuration of Adan (the authors' defaults).
struct AdanConfig {
    double beta_1 = 0.98;                           ///< decay of m (the paper's 1 − β₁ = 0.02)
    double beta_2 = 0.92;                           ///< decay of v (the paper's 1 − β₂ = 0.08)
    double beta_3 = 0.99;                           ///< decay of n (the paper's 1 − β₃ = 0.01)
    double epsilon = 1e-8;                          ///< added to the denominator
    double weight_decay = 0.0;                      ///< λ
    bool no_prox = false;                           ///< decoupled decay instead of proximal
    std::optional<GradientClipping> grad_clipping;  ///< clipping of each gradient
    EMBER_CONFIG(AdanConfig, beta_1, beta_2, beta_3, epsilon, weight_decay, no_prox, grad_clipping)

    /// The optimizer for modules of type M. Throws ArgumentError for betas outside [0, 1), a
    /// negative or non-finite epsilon or weight decay.
    template <module::Module M>
    OptimizerAdaptor<Adan, M> init() const {
        for (auto [n, b] : {std::pair{"beta_1", beta_1}, {"beta_2", beta_2}, {"beta_3", beta_3}})
            EMBER_CHECK(b >= 0 && b < 1, Argument, "AdanConfig::init: ", n,
                        " must be in [0, 1), got ", b);
        EMBER_CHECK(epsilon >= 0 && std::isfinite(epsilon), Argument,
                    "AdanConfig::init: epsilon must be non-negative and finite, got ", epsilon);
        EMBER_CHECK(weight_decay >= 0 && std::isfinite(weight_decay), Argument,
                    "AdanConfig::init: weight_decay must be non-negative and finite, got ",
                    weight_decay);
        if (grad_clipping) grad_clipping->check("AdanConfig::init");
        return OptimizerAdaptor<Adan, M>(
            Adan{beta_1, beta_2, beta_3, epsilon, weight_decay, no_prox}, grad_clipping);
    }
};

}  // namespace ember::optim
