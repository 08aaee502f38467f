#pragma once
// Fusion over a backend with a fused attention kernel (AttentionKernel<B>,
// include/ember/tensor/attention.hpp): the pending chains that produce q, k, v and the mask are
// computed, then B's kernel runs (attention is a sync point of the op stream, as a matmul).
#include <array>
#include <concepts>
#include <cstddef>
#include <optional>

#include "../tensor/attention.hpp"
#include "fusion.hpp"

namespace ember {

/// The fused attention of `Fusion<B>`, where `B` has one (and one primitive type for all kinds).
template <FusionBackend B>
requires FusedAttention<B> &&
    std::same_as<typename B::FloatTensorPrimitive, typename B::BoolTensorPrimitive>
struct AttentionKernel<Fusion<B>> {
    using FT = typename Fusion<B>::FloatTensorPrimitive;  ///< Fusion's (pending or computed)
    using P = typename B::FloatTensorPrimitive;            ///< B's

    /// B's answer, on the computed operands.
    static bool supports(const FT& q, const FT& k, const FT& v, const std::optional<FT>& keep,
                         const std::optional<FT>& bias) {
        return AttentionKernel<B>::supports(take(q), take(k), take(v), take(keep), take(bias));
    }
    /// B's {output, log-sum-exp}.
    static std::array<FT, 2> forward(const FT& q, const FT& k, const FT& v,
                                     const std::optional<FT>& keep, const std::optional<FT>& bias,
                                     bool causal, double scale) {
        auto r = AttentionKernel<B>::forward(take(q), take(k), take(v), take(keep), take(bias),
                                             causal, scale);
        return {detail::fusion::make<B>(std::move(r[0])), detail::fusion::make<B>(std::move(r[1]))};
    }
    /// B's {dq, dk, dv}.
    static std::array<FT, 3> backward(const FT& q, const FT& k, const FT& v, const FT& out,
                                      const FT& lse, const FT& dout, const std::optional<FT>& keep,
                                      const std::optional<FT>& bias, bool causal,
                                      double scale) requires FusedAttentionBackward<B> {
        auto r = AttentionKernel<B>::backward(take(q), take(k), take(v), take(out), take(lse),
                                              take(dout), take(keep), take(bias), causal, scale);
        return {detail::fusion::make<B>(std::move(r[0])), detail::fusion::make<B>(std::move(r[1])),
                detail::fusion::make<B>(std::move(r[2]))};
    }

    /// B's answer for a packed qkv.
    static bool supports_packed(const FT& like, std::size_t heads,
                                std::size_t head_dim) requires FusedPackedAttention<B> {
        return AttentionKernel<B>::supports_packed(take(like), heads, head_dim);
    }
    /// B's {output [B, L, H·E], log-sum-exp} from qkv [B, L, 3·H·E].
    static std::array<FT, 2> forward_packed(const FT& qkv, std::size_t heads, bool causal,
                                            double scale) requires FusedPackedAttention<B> {
        auto r = AttentionKernel<B>::forward_packed(take(qkv), heads, causal, scale);
        return {detail::fusion::make<B>(std::move(r[0])), detail::fusion::make<B>(std::move(r[1]))};
    }
    /// B's gradient of qkv.
    static FT backward_packed(const FT& qkv, const FT& out, const FT& lse, const FT& dout,
                              std::size_t heads, bool causal,
                              double scale) requires FusedPackedAttentionBackward<B> {
        return detail::fusion::make<B>(AttentionKernel<B>::backward_packed(
            take(qkv), take(out), take(lse), take(dout), heads, causal, scale));
    }

  private:
    static P take(const FT& t) { return detail::fusion::take<B>(t); }
    static std::optional<P> take(const std::optional<FT>& t) {
        if (!t) return std::nullopt;
        return detail::fusion::take<B>(*t);
    }
};

}  // namespace ember
