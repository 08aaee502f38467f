#pragma once
// Muon, momentum orthogonalised by Newton–Schulz (Keller Jordan, "Muon: an optimizer for hidden
// layers in neural networks", 2024), as PyTorch 2.9's torch.optim.Muon and Burn's Muon compute
// it, for 2-D parameters only (biases, norms and embeddings belong to another optimizer):
//   b ← μ·b + (1 − μ)·g;  u ← (1 − μ)·g + μ·b with Nesterov, else u ← b
//   X ← u / max(‖u‖_F, ε), transposed when it has more rows than columns; 5 times:
//   A ← X·Xᵀ,  X ← a·X + (b·A + c·A·A)·X      ((a, b, c) = (3.4445, −4.7750, 2.0315))
//   p ← p·(1 − lr·λ) − lr'·X (transposed back),  lr' = lr·√max(1, rows/cols) ("original") or
//   lr·0.2·√max(rows, cols) ("match RMS AdamW", Moonshot's)
// rows and cols are the parameter's dims as ember stores it (a Linear weight is [in, out], as
// Burn's; torch's [out, in] gives the inverse ratio). torch runs the iteration in bfloat16;
// ember in the parameter's own precision.
#include <cmath>
#include <optional>
#include <string_view>

#include "../module/config.hpp"
#include "optimizer.hpp"

namespace ember::optim {

/// How Muon scales the learning rate by the parameter's shape (Burn's AdjustLrFn).
enum class MuonAdjustLr : int {
    Original,      ///< lr·√max(1, rows/cols), Keller Jordan's
    MatchRmsAdamW  ///< lr·0.2·√max(rows, cols), Moonshot's: AdamW's learning rates carry over
};

/// The Muon update (the simple optimizer MuonConfig::init wraps).
struct Muon {
    double momentum;          ///< μ
    bool nesterov;            ///< Nesterov's look-ahead form
    double weight_decay;      ///< decoupled decay λ: p ← p·(1 − lr·λ)
    double ns_a;              ///< Newton–Schulz coefficient a
    double ns_b;              ///< Newton–Schulz coefficient b
    double ns_c;              ///< Newton–Schulz coefficient c
    std::size_t ns_steps;     ///< Newton–Schulz iterations
    double epsilon;           ///< the smallest norm divided by
    MuonAdjustLr adjust_lr;   ///< the shape's learning-rate scale
    /// Recorded with the state; load_record checks it.
    static constexpr std::string_view name = "Muon";

    /// Per-parameter state: the momentum buffer.
    template <Backend B, std::size_t D>
    struct State {
        Tensor<B, D> momentum;  ///< b
        EMBER_DETAIL_FIELDS(State, momentum)
    };

    /// The Newton–Schulz orthogonalisation of a 2-D tensor: close to U·Vᵀ of its SVD U·S·Vᵀ.
    template <Backend B>
    Tensor<B, 2> orthogonalize(Tensor<B, 2> g) const {
        const bool tall = g.dims()[0] > g.dims()[1];
        Tensor<B, 2> x = tall ? g.transpose() : std::move(g);
        const double norm = std::sqrt(double(x.mul(x).sum().into_scalar()));
        x = std::move(x).mul_scalar(1 / std::max(norm, epsilon));
        for (std::size_t i = 0; i < ns_steps; ++i) {
            Tensor<B, 2> a = x.matmul(x.transpose());
            Tensor<B, 2> poly = a.mul_scalar(ns_b).add(a.matmul(a).mul_scalar(ns_c));
            x = x.mul_scalar(ns_a).add(std::move(poly).matmul(x));
        }
        return tall ? x.transpose() : x;
    }

    /// One update of one tensor; ArgumentError for a parameter that is not 2-D.
    template <Backend B, std::size_t D>
    std::pair<Tensor<B, D>, std::optional<State<B, D>>> step(
        double lr, Tensor<B, D> param, Tensor<B, D> grad, std::optional<State<B, D>> state) const {
        if constexpr (D != 2) {
            EMBER_FAIL(Argument, "Muon step: a parameter of shape ", param.shape().to_string(),
                       "; Muon updates 2-D parameters only (give biases, norms and embeddings "
                       "to another optimizer, e.g. AdamW)");
        } else {
            Tensor<B, 2> b = state ? std::move(state->momentum)
                                         .mul_scalar(momentum)
                                         .add(grad.mul_scalar(1 - momentum))
                                   : grad.mul_scalar(1 - momentum);
            Tensor<B, 2> u =
                nesterov ? std::move(grad).mul_scalar(1 - momentum).add(b.mul_scalar(momentum)) : b;
            const double rows = double(param.dims()[0]), cols = double(param.dims()[1]);
            const double scale = adjust_lr == MuonAdjustLr::Original
                                     ? std::sqrt(std::max(1.0, rows / cols))
                                     : 0.2 * std::sqrt(std::max(rows, cols));
            Tensor<B, 2> x = orthogonalize(std::move(u));
            param = std::move(param)
                        .mul_scalar(1 - lr * weight_decay)
                        .sub(std::move(x).mul_scalar(lr * scale));
            return {std::move(param), State<B, 2>{std::move(b)}};
        }
    }
};

/// Configuration of Muon (Burn's MuonConfig; torch.optim.Muon's defaults except weight decay,
/// which is 0 here as Burn's and 0.1 in torch).
struct MuonConfig {
    double momentum = 0.95;                           ///< μ
    bool nesterov = true;                             ///< Nesterov's look-ahead form
    double weight_decay = 0;                          ///< decoupled decay λ
    double ns_a = 3.4445;                             ///< Newton–Schulz coefficient a
    double ns_b = -4.7750;                            ///< Newton–Schulz coefficient b
    double ns_c = 2.0315;                             ///< Newton–Schulz coefficient c
    std::size_t ns_steps = 5;                         ///< Newton–Schulz iterations
    double epsilon = 1e-7;                            ///< the smallest norm divided by
    MuonAdjustLr adjust_lr = MuonAdjustLr::Original;  ///< the shape's learning-rate scale
    std::optional<GradientClipping> grad_clipping;    ///< clipping of each gradient
    EMBER_CONFIG(MuonConfig, momentum, nesterov, weight_decay, ns_a, ns_b, ns_c, ns_steps, epsilon,
                 adjust_lr, grad_clipping)

    /// The optimizer for modules of type M (every trainable float parameter it steps must be
    /// 2-D). Throws ArgumentError for a momentum outside [0, 1), a negative weight decay, a
    /// non-positive epsilon or no Newton–Schulz step.
    template <module::Module M>
    OptimizerAdaptor<Muon, M> init() const {
        EMBER_CHECK(momentum >= 0 && momentum < 1, Argument,
                    "MuonConfig::init: momentum must be in [0, 1), got ", momentum);
        EMBER_CHECK(weight_decay >= 0 && std::isfinite(weight_decay), Argument,
                    "MuonConfig::init: weight_decay must be non-negative and finite, got ",
                    weight_decay);
        EMBER_CHECK(epsilon > 0 && std::isfinite(epsilon), Argument,
                    "MuonConfig::init: epsilon must be positive, got ", epsilon);
        EMBER_CHECK(ns_steps >= 1, Argument, "MuonConfig::init: ns_steps must be at least 1");
        if (grad_clipping) grad_clipping->check("MuonConfig::init");
        return OptimizerAdaptor<Muon, M>(
            Muon{momentum, nesterov, weight_decay, ns_a, ns_b, ns_c, ns_steps, epsilon, adjust_lr},
            grad_clipping);
    }
};

}  // namespace ember::optim
