#pragma once
// Autodiff over a backend with a fused attention kernel (AttentionKernel<B> with a backward,
// include/ember/tensor/attention.hpp): module::attention records one node whose backward runs
// B's fused backward from the saved q, k, v, output and log-sum-exp. Over other backends the
// composed form is differentiated op by op.
#include <array>
#include <cstddef>
#include <optional>

#include "../tensor/attention.hpp"
#include "autodiff.hpp"

namespace ember {

/// The fused attention of `Autodiff<B>`, where `B` has one with a backward.
template <Backend B, CheckpointStrategy C>
requires FusedAttentionBackward<B>
struct AttentionKernel<Autodiff<B, C>> {
    using AD = Autodiff<B, C>;                      ///< the stack
    using FT = typename AD::FloatTensorPrimitive;   ///< tracked float primitive
    using IFT = typename B::FloatTensorPrimitive;   ///< B's float primitive
    using BT = typename B::BoolTensorPrimitive;     ///< B's bool primitive (masks)

    /// B's answer; false for an additive mask that needs a gradient (the fused backward gives
    /// none to the mask), which then takes the composed path.
    static bool supports(const FT& q, const FT& k, const FT& v, const std::optional<BT>& keep,
                         const std::optional<FT>& bias) {
        if (bias && bias->node) return false;
        return AttentionKernel<B>::supports(q.primitive, k.primitive, v.primitive, keep,
                                            inner(bias));
    }
    /// {output (tracked), log-sum-exp (not differentiable)}.
    static std::array<FT, 2> forward(const FT& q, const FT& k, const FT& v,
                                     const std::optional<BT>& keep, const std::optional<FT>& bias,
                                     bool causal, double scale) {
        std::optional<IFT> ib = inner(bias);
        auto r = AttentionKernel<B>::forward(q.primitive, k.primitive, v.primitive, keep, ib,
                                             causal, scale);
        IFT lse = r[1];
        FT lse_out = AD::from_inner(std::move(r[1]));
        auto rec = AD::record(std::move(r[0]), {&q, &k, &v});
        if (!rec.node) return {rec.untracked(), std::move(lse_out)};
        auto sq = rec.input(q), sk = rec.input(k), sv = rec.input(v), so = rec.output();
        return {rec.finish([=](typename AD::Ctx& ctx, IFT g) {
                    auto d =
                        AttentionKernel<B>::backward(ctx.get(sq), ctx.get(sk), ctx.get(sv),
                                                     ctx.get(so), lse, g, keep, ib, causal, scale);
                    for (std::size_t i = 0; i < 3; ++i) ctx.add(i, std::move(d[i]));
                }),
                std::move(lse_out)};
    }

    /// B's answer for a packed qkv (FusedPackedAttention).
    static bool supports_packed(const FT& like, std::size_t heads,
                                std::size_t head_dim) requires FusedPackedAttentionBackward<B> {
        return AttentionKernel<B>::supports_packed(like.primitive, heads, head_dim);
    }
    /// {output [B, L, H·E] (tracked), log-sum-exp}: one node over qkv, whose backward writes
    /// qkv's gradient as one buffer (no slices of it summed).
    static std::array<FT, 2> forward_packed(const FT& qkv, std::size_t heads, bool causal,
                                            double scale) requires FusedPackedAttentionBackward<B> {
        auto r = AttentionKernel<B>::forward_packed(qkv.primitive, heads, causal, scale);
        IFT lse = r[1];
        FT lse_out = AD::from_inner(std::move(r[1]));
        auto rec = AD::record(std::move(r[0]), {&qkv});
        if (!rec.node) return {rec.untracked(), std::move(lse_out)};
        auto sx = rec.input(qkv), so = rec.output();
        return {rec.finish([=](typename AD::Ctx& ctx, IFT g) {
                    ctx.add(0, AttentionKernel<B>::backward_packed(ctx.get(sx), ctx.get(so), lse, g,
                                                                   heads, causal, scale));
                }),
                std::move(lse_out)};
    }

  private:
    static std::optional<IFT> inner(const std::optional<FT>& t) {
        if (!t) return std::nullopt;
        return t->primitive;
    }
};

}  // namespace ember
