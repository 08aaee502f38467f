#pragma once
// RNN-transducer loss (ember::nn::loss::RnntLoss; Burn's RNNTLoss, torchaudio's rnnt_loss).
// The alpha recursion over the (time, label) lattice runs as tensor ops one anti-diagonal at a
// time (T + U steps, every cell of a diagonal at once), so every backend and stack runs it and
// autodiff derives the backward pass: no kernel of its own.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

#include "loss.hpp"

namespace ember::nn::loss {

/// RNN-T loss (Graves 2012): -log of the summed probability of every path through the lattice
/// of encoder frames t and emitted labels u, where a blank moves to the next frame and a label
/// to the next label, ending with a blank from the last cell. Inputs follow torchaudio:
/// `logits` [N, T, U+1, V] (the joiner's output; log-probabilities when logits = false),
/// `targets` [N, U] padded label ids (never the blank), `logit_lengths` [N] in [1, T],
/// `target_lengths` [N] in [0, U]. Reduction::Mean (and Auto) is the batch mean.
struct RnntLoss {
    std::size_t blank = 0;  ///< the blank class
    bool logits = true;     ///< apply a log_softmax over V first (false: log-probabilities)
    EMBER_MODULE(RnntLoss, blank, logits)

    /// The reduced loss ([1]; the [N] per-sequence losses for Reduction::None).
    template <Backend B>
    Tensor<B, 1> forward(const Tensor<B, 4>& logits_in, const Tensor<B, 2, Int>& targets,
                         const Tensor<B, 1, Int>& logit_lengths,
                         const Tensor<B, 1, Int>& target_lengths,
                         Reduction reduction = Reduction::Mean) const {
        return detail::reduce(
            forward_no_reduction(logits_in, targets, logit_lengths, target_lengths), reduction);
    }

    /// The loss of each sequence, [N].
    template <Backend B>
    Tensor<B, 1> forward_no_reduction(const Tensor<B, 4>& logits_in,
                                      const Tensor<B, 2, Int>& targets,
                                      const Tensor<B, 1, Int>& logit_lengths,
                                      const Tensor<B, 1, Int>& target_lengths) const {
        const auto dims = logits_in.dims();
        const std::size_t n = dims[0], t_max = dims[1], u1 = dims[2], v = dims[3];
        EMBER_CHECK(u1 >= 1 && targets.dims()[0] == n && targets.dims()[1] + 1 == u1 &&
                        logit_lengths.dims()[0] == n && target_lengths.dims()[0] == n,
                    Shape, "RnntLoss: logits of shape ", logits_in.shape().to_string(),
                    ", targets of shape ", targets.shape().to_string(), ", logit_lengths of shape ",
                    logit_lengths.shape().to_string(), " and target_lengths of shape ",
                    target_lengths.shape().to_string(),
                    " disagree (want [N, T, U+1, V], [N, U], [N], [N])");
        EMBER_CHECK(blank < v, Argument, "RnntLoss: blank ", blank, " is not one of the ", v,
                    " classes of logits of shape ", logits_in.shape().to_string());
        const std::size_t u = u1 - 1;
        const long N = long(n), T = long(t_max), U1 = long(u1), U = long(u);
        // The lengths pick each sequence's last cell: a few integers read back.
        const auto t_len = logit_lengths.to_data().template to_vec<std::int64_t>();
        const auto u_len = target_lengths.to_data().template to_vec<std::int64_t>();
        for (std::size_t i = 0; i < n; ++i) {
            EMBER_CHECK(t_len[i] >= 1 && t_len[i] <= T, Argument, "RnntLoss: logit length ",
                        t_len[i], " of sequence ", i, " is not in [1, ", t_max, "]");
            EMBER_CHECK(u_len[i] >= 0 && u_len[i] <= U, Argument, "RnntLoss: target length ",
                        u_len[i], " of sequence ", i, " is not in [0, ", u, "]");
        }
        const Device<B> device = logits_in.device();
        const Tensor<B, 4> lp = logits ? activation::log_softmax(logits_in, 3) : logits_in;

        // Blank and next-label log-probabilities of every cell, flattened per sequence:
        // blank_lp [N, T·(U+1)], label_lp [N, T·U].
        auto blank_lp = lp.narrow(3, blank, 1).template reshape<2>({N, T * U1});
        std::optional<Tensor<B, 2>> label_lp;
        if (u > 0) {
            auto index =
                targets.template reshape<4>({N, 1, U, 1}).template expand<4>(Shape{n, t_max, u, 1});
            label_lp = lp.narrow(2, 0, u).gather(3, index).template reshape<2>({N, T * U});
        }

        // kNeg stands for log 0 (as in CtcLoss: -inf would make NaN gradients).
        constexpr double kNeg = -1e30;
        auto row = [&](const std::vector<std::int64_t>& v) {
            return Tensor<B, 2, Int>::from_data(TensorData(v, Shape{1, u1}), device)
                .template expand<2>(Shape{n, u1});
        };
        auto lse = [](const Tensor<B, 2>& a, const Tensor<B, 2>& b) {
            auto m = a.max_pair(b).detach();
            return m + ((a - m).exp() + (b - m).exp()).log();
        };
        // Diagonal d holds alpha(d - u, u) at column u.
        std::vector<std::int64_t> origin(u1, 0);
        origin[0] = 1;
        std::vector<Tensor<B, 2>> diagonals{
            Tensor<B, 2>::zeros(Shape{n, u1}, device).mask_fill(row(origin).equal_elem(0), kNeg)};
        for (long d = 1; d < T + U; ++d) {
            std::vector<std::int64_t> b_at(u1), b_ok(u1), l_at(u1), l_ok(u1), cell_ok(u1);
            for (long c = 0; c < U1; ++c) {
                const long t = d - c;
                cell_ok[c] = t >= 0 && t < T;
                b_ok[c] = cell_ok[c] && t >= 1;  // from (t-1, c) by a blank
                b_at[c] = b_ok[c] ? (t - 1) * U1 + c : 0;
                l_ok[c] = cell_ok[c] && c >= 1;  // from (t, c-1) by label c-1
                l_at[c] = l_ok[c] ? t * U + (c - 1) : 0;
            }
            const auto& prev = diagonals.back();
            auto from_blank =
                (prev + blank_lp.gather(1, row(b_at))).mask_fill(row(b_ok).equal_elem(0), kNeg);
            auto next = from_blank;
            if (label_lp) {
                auto shifted = Tensor<B, 2>::cat(
                    {Tensor<B, 2>::full(Shape{n, 1}, kNeg, device), prev.slice({{0, N}, {0, U}})},
                    1);
                auto from_label = (shifted + label_lp->gather(1, row(l_at)))
                                      .mask_fill(row(l_ok).equal_elem(0), kNeg);
                next = lse(from_blank, from_label);
            }
            diagonals.push_back(next.mask_fill(row(cell_ok).equal_elem(0), kNeg));
        }

        // Each sequence ends in cell (T_n - 1, U_n), on diagonal T_n - 1 + U_n, with a blank.
        std::vector<Tensor<B, 2>> stacked;
        for (const auto& dgl : diagonals) stacked.push_back(dgl);
        auto all = Tensor<B, 2>::cat(stacked, 1);  // [N, (T+U)·(U+1)]
        std::vector<std::int64_t> end_alpha(n), end_blank(n);
        for (std::size_t i = 0; i < n; ++i) {
            end_alpha[i] = (t_len[i] - 1 + u_len[i]) * U1 + u_len[i];
            end_blank[i] = (t_len[i] - 1) * U1 + u_len[i];
        }
        auto pick = [&](const Tensor<B, 2>& from, std::vector<std::int64_t> at) {
            return from.gather(
                1, Tensor<B, 2, Int>::from_data(TensorData(std::move(at), Shape{n, 1}), device));
        };
        return -(pick(all, end_alpha) + pick(blank_lp, end_blank)).template reshape<1>({N});
    }
    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const {
        c.add("blank", blank).add("logits", logits);
    }
};

/// Configuration of RnntLoss.
struct RnntLossConfig {
    std::size_t blank = 0;  ///< the blank class
    bool logits = true;     ///< apply a log_softmax over V first (false: log-probabilities)
    EMBER_CONFIG(RnntLossConfig, blank, logits)

    /// Builds the loss (the blank is checked against the classes in forward).
    RnntLoss init() const { return RnntLoss{blank, logits}; }
};

/// Burn's spelling.
using RNNTLoss = RnntLoss;
/// Burn's spelling.
using RNNTLossConfig = RnntLossConfig;

}  // namespace ember::nn::loss
