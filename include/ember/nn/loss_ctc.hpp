#pragma once
// Connectionist temporal classification loss (ember::nn::loss::CtcLoss; Burn's CTCLoss,
// torch.nn.CTCLoss). The forward (alpha) recursion over time is written with tensor ops, one
// step per frame, so every backend and stack runs it and autodiff derives the backward
// (beta) pass from it: no kernel of its own.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "loss.hpp"

namespace ember::nn::loss {

/// CTC loss of label sequences under per-frame class log-probabilities: -log of the summed
/// probability of every alignment of the target to the frames (blanks between and around the
/// labels, repeats merged). Inputs follow PyTorch: `log_probs` [T, N, C] (log_softmax over C),
/// `targets` [N, S] padded class ids (never the blank), `input_lengths` [N] in [1, T] and
/// `target_lengths` [N] in [0, S]. An impossible alignment (too few frames) has loss +∞, or 0
/// with zero_infinity; either way it passes no gradient. Reduction::Mean (and Auto) divide each
/// loss by its target length (at least 1) and take the batch mean, as PyTorch does.
struct CtcLoss {
    std::size_t blank = 0;       ///< the blank class
    bool zero_infinity = false;  ///< report impossible alignments as 0 instead of +∞
    EMBER_MODULE(CtcLoss, blank, zero_infinity)

    /// The reduced loss ([1]; the [N] per-sequence losses for Reduction::None).
    template <Backend B>
    Tensor<B, 1> forward(const Tensor<B, 3>& log_probs, const Tensor<B, 2, Int>& targets,
                         const Tensor<B, 1, Int>& input_lengths,
                         const Tensor<B, 1, Int>& target_lengths,
                         Reduction reduction = Reduction::Mean) const {
        auto loss = forward_no_reduction(log_probs, targets, input_lengths, target_lengths);
        if (reduction == Reduction::Mean || reduction == Reduction::Auto)
            return (loss / target_lengths.float_().clamp_min(1.0)).mean();
        return detail::reduce(loss, reduction);
    }

    /// The loss of each sequence, [N].
    template <Backend B>
    Tensor<B, 1> forward_no_reduction(const Tensor<B, 3>& log_probs,
                                      const Tensor<B, 2, Int>& targets,
                                      const Tensor<B, 1, Int>& input_lengths,
                                      const Tensor<B, 1, Int>& target_lengths) const {
        const std::size_t t_max = log_probs.dims()[0], n = log_probs.dims()[1],
                          c = log_probs.dims()[2], s = targets.dims()[1], l = 2 * s + 1;
        const long N = long(n), L = long(l);
        EMBER_CHECK(
            targets.dims()[0] == n && input_lengths.dims()[0] == n && target_lengths.dims()[0] == n,
            Shape, "CtcLoss: log_probs of shape ", log_probs.shape().to_string(),
            ", targets of shape ", targets.shape().to_string(), ", input_lengths of shape ",
            input_lengths.shape().to_string(), " and target_lengths of shape ",
            target_lengths.shape().to_string(), " disagree on the batch size");
        EMBER_CHECK(blank < c, Argument, "CtcLoss: blank ", blank, " is not one of the ", c,
                    " classes of log_probs of shape ", log_probs.shape().to_string());
        // The lengths decide the loop and the final states: a few integers read back.
        const auto in_len = input_lengths.to_data().template to_vec<std::int64_t>();
        const auto tg_len = target_lengths.to_data().template to_vec<std::int64_t>();
        std::int64_t frames = 0;
        for (std::size_t i = 0; i < n; ++i) {
            EMBER_CHECK(in_len[i] >= 1 && std::size_t(in_len[i]) <= t_max, Argument,
                        "CtcLoss: input length ", in_len[i], " of sequence ", i, " is not in [1, ",
                        t_max, "]");
            EMBER_CHECK(tg_len[i] >= 0 && std::size_t(tg_len[i]) <= s, Argument,
                        "CtcLoss: target length ", tg_len[i], " of sequence ", i, " is not in [0, ",
                        s, "]");
            frames = std::max(frames, in_len[i]);
        }
        const Device<B> device = log_probs.device();
        const auto b = std::int64_t(blank);

        // The extended labels: blank, y1, blank, y2, ..., blank ([N, L]).
        auto ext = Tensor<B, 2, Int>::full(Shape{n, 1}, b, device);
        if (s > 0) {
            auto blanks = Tensor<B, 3, Int>::full(Shape{n, s, 1}, b, device);
            auto pairs = Tensor<B, 3, Int>::cat({blanks, targets.template unsqueeze_dim<3>(2)}, 2);
            ext = Tensor<B, 2, Int>::cat({pairs.template reshape<2>({N, L - 1}), ext}, 1);
        }
        // Each frame's log-probability of each extended label: [N, T, L].
        auto index = ext.template unsqueeze_dim<3>(1).template expand<3>(Shape{n, t_max, l});
        auto emit = log_probs.swap_dims(0, 1).gather(2, index);
        auto frame = [&](std::size_t t) {
            return emit.narrow(1, t, 1).template reshape<2>({N, L});
        };

        // A very negative number stands for log 0: -inf would give 0·inf = NaN gradients on
        // unreachable states, while exp(kNeg - m) is exactly 0 and its gradient too.
        constexpr double kNeg = -1e30;
        auto position = Tensor<B, 1, Int>::arange(0, L, device)
                            .template reshape<2>({1, L})
                            .template expand<2>(Shape{n, l});
        // Label s may follow s - 2 directly when it is not a blank and differs from it.
        auto skip = position.lower_elem(0);  // all false
        if (l > 2) {
            auto back2 = Tensor<B, 2, Int>::cat(
                {Tensor<B, 2, Int>::full(Shape{n, 2}, -1, device), ext.slice({{0, N}, {0, L - 2}})},
                1);
            skip = ext.not_equal_elem(b).bool_and(ext.not_equal(back2));
        }
        auto none = skip.not_();
        auto shifted = [&](const Tensor<B, 2>& a, long by) {
            if (L <= by) return Tensor<B, 2>::full(Shape{n, l}, kNeg, device);
            return Tensor<B, 2>::cat({Tensor<B, 2>::full(Shape{n, std::size_t(by)}, kNeg, device),
                                      a.slice({{0, N}, {0, L - by}})},
                                     1);
        };

        // alpha_0: the first blank or the first label.
        Tensor<B, 2> alpha = frame(0).mask_fill(position.greater_equal_elem(2), kNeg);
        for (std::int64_t t = 1; t < frames; ++t) {
            auto a1 = shifted(alpha, 1);
            auto a2 = shifted(alpha, 2).mask_fill(none, kNeg);
            auto m = alpha.max_pair(a1).max_pair(a2).detach();
            auto next = m + ((alpha - m).exp() + (a1 - m).exp() + (a2 - m).exp()).log() +
                        frame(std::size_t(t));
            // Sequences that have ended keep their last alpha.
            auto live =
                input_lengths.greater_elem(t).template reshape<2>({N, 1}).template expand<2>(
                    Shape{n, l});
            alpha = alpha.mask_where(live, next);
        }

        // End in the last blank (2·len) or the last label (2·len - 1, absent for len = 0).
        std::vector<std::int64_t> last(2 * n);
        std::vector<std::int64_t> empty(2 * n, 0);
        for (std::size_t i = 0; i < n; ++i) {
            last[2 * i] = 2 * tg_len[i];
            last[2 * i + 1] = std::max<std::int64_t>(2 * tg_len[i] - 1, 0);
            empty[2 * i + 1] = tg_len[i] == 0;
        }
        auto ends = alpha.gather(
            1, Tensor<B, 2, Int>::from_data(TensorData(std::move(last), Shape{n, 2}), device));
        ends = ends.mask_fill(
            Tensor<B, 2, Int>::from_data(TensorData(std::move(empty), Shape{n, 2}), device)
                .equal_elem(1),
            kNeg);
        auto m = ends.max_dim(1).detach();
        auto loss = -(m + (ends - m).exp().sum_dim(1).log()).template reshape<1>({N});
        // No alignment: the log-likelihood stayed near kNeg.
        auto impossible = loss.greater_elem(-kNeg / 2);
        return loss.mask_fill(impossible,
                              zero_infinity ? 0.0 : std::numeric_limits<double>::infinity());
    }
    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const {
        c.add("blank", blank).add("zero_infinity", zero_infinity);
    }
};

/// Configuration of CtcLoss.
struct CtcLossConfig {
    std::size_t blank = 0;       ///< the blank class
    bool zero_infinity = false;  ///< report impossible alignments as 0 instead of +∞
    EMBER_CONFIG(CtcLossConfig, blank, zero_infinity)

    /// Builds the loss (the blank is checked against the classes in forward).
    CtcLoss init() const { return CtcLoss{blank, zero_infinity}; }
};

/// Burn's spelling.
using CTCLoss = CtcLoss;
/// Burn's spelling.
using CTCLossConfig = CtcLossConfig;

}  // namespace ember::nn::loss

namespace ember::module {

/// CTC loss of each sequence, [N] (Burn's module op; torch.nn.functional.ctc_loss with
/// reduction='none'): CtcLoss{blank, zero_infinity}.forward_no_reduction, with its arguments and
/// errors. Differentiable in log_probs on autodiff backends.
template <Backend B>
Tensor<B, 1> ctc_loss(const Tensor<B, 3>& log_probs, const Tensor<B, 2, Int>& targets,
                      const Tensor<B, 1, Int>& input_lengths,
                      const Tensor<B, 1, Int>& target_lengths, std::size_t blank = 0,
                      bool zero_infinity = false) {
    return nn::loss::CtcLoss{blank, zero_infinity}.forward_no_reduction(
        log_probs, targets, input_lengths, target_lengths);
}

}  // namespace ember::module
