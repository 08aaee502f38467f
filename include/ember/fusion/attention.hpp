#pragma once
// Fusion over a backend with a fused attention kernel (AttentionKernel<B>,
// include/ember/tensor/attention.hpp): the pending chains that produce q, k, v and the mask are
// computed, then B's kernel runs (attention is a sync point of the op stream, as a matmul).
#include <array>
#include <concepts>
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

  private:
    static P take(const FT& t) { return detail::fusion::take<B>(t); }
    static std::optional<P> take(const std::optional<FT>& t) {
        if (!t) return std::nullopt;
        return detail::fusion::take<B>(*t);
    }
};

}  // namespace ember
