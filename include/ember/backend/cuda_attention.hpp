#pragma once
// The CUDA backend's fused scaled-dot-product attention (backends/cuda/attention.cu): a
// flash-style kernel, forward and backward, on tensor cores (TF32 for f32 tensors, bf16/f16
// natively), for head dims 32, 64 and 128. Including this header makes module::attention on
// Cuda use it (AttentionKernel<Cuda>); other shapes and dtypes take the composed path.
#include <array>
#include <cstddef>
#include <optional>

#include "../tensor/attention.hpp"
#include "cuda.hpp"

namespace ember {

namespace cuda {
// Fully qualified: a translation unit that also sees an ember::cuda::detail (graph capture
// declares one) would otherwise look detail::cuda up there.
/// Whether the fused kernel handles these operands: q, k, v of one float dtype (f32, bf16,
/// f16) on one device, q and k's head dim equal to v's and one of 32, 64, 128, and at most
/// 65535 batch × heads.
EMBER_API bool attention_supported(const ::ember::detail::cuda::CudaTensor& q,
                                   const ::ember::detail::cuda::CudaTensor& k,
                                   const ::ember::detail::cuda::CudaTensor& v,
                                   const std::optional<::ember::detail::cuda::CudaTensor>& mask);
/// Fused forward: {softmax(q kᵀ · scale + mask) v [B, H, Lq, E] in q's dtype, the log-sum-exp
/// of each row's scaled logits [B, H, Lq] (f32; -inf for a row that attends to nothing, whose
/// output is 0)}. `mask` is boolean (true = attend) or additive, broadcastable to
/// [B, H, Lq, Lk]. Nothing of size [Lq x Lk] is allocated.
EMBER_API std::array<::ember::detail::cuda::CudaTensor, 2> attention_forward(
    const ::ember::detail::cuda::CudaTensor& q, const ::ember::detail::cuda::CudaTensor& k,
    const ::ember::detail::cuda::CudaTensor& v, const std::optional<::ember::detail::cuda::CudaTensor>& mask,
    bool causal, double scale);
/// Fused backward: {dq, dk, dv} from the forward's output and log-sum-exp and the output's
/// gradient, recomputing the probabilities tile by tile.
EMBER_API std::array<::ember::detail::cuda::CudaTensor, 3> attention_backward(
    const ::ember::detail::cuda::CudaTensor& q, const ::ember::detail::cuda::CudaTensor& k,
    const ::ember::detail::cuda::CudaTensor& v, const ::ember::detail::cuda::CudaTensor& out,
    const ::ember::detail::cuda::CudaTensor& lse, const ::ember::detail::cuda::CudaTensor& dout,
    const std::optional<::ember::detail::cuda::CudaTensor>& mask, bool causal, double scale);
/// Whether the fused kernel handles a packed qkv of `like`'s dtype with these heads (head dim
/// 32, 64 or 128; f32, bf16 or f16).
EMBER_API bool attention_packed_supported(const ::ember::detail::cuda::CudaTensor& like,
                                          std::size_t heads, std::size_t head_dim);
/// Fused forward over packed projections: qkv [B, L, 3·H·E] → {output [B, L, H·E] in qkv's
/// dtype, log-sum-exp [B, H, L] f32}; the heads are read in place.
EMBER_API std::array<::ember::detail::cuda::CudaTensor, 2> attention_forward_packed(
    const ::ember::detail::cuda::CudaTensor& qkv, std::size_t heads, bool causal, double scale);
/// Fused backward over packed projections: the gradient of qkv [B, L, 3·H·E], dq, dk and dv
/// written side by side into one buffer.
EMBER_API ::ember::detail::cuda::CudaTensor attention_backward_packed(
    const ::ember::detail::cuda::CudaTensor& qkv, const ::ember::detail::cuda::CudaTensor& out,
    const ::ember::detail::cuda::CudaTensor& lse, const ::ember::detail::cuda::CudaTensor& dout,
    std::size_t heads, bool causal, double scale);
}  // namespace cuda

/// Cuda's fused attention (see AttentionKernel).
template <>
struct AttentionKernel<CudaBackend> {
    using FT = detail::cuda::CudaTensor;  ///< every kind's primitive
    /// Whether the kernel handles these operands (else module::attention composes).
    static bool supports(const FT& q, const FT& k, const FT& v, const std::optional<FT>& keep,
                         const std::optional<FT>& bias) {
        return cuda::attention_supported(q, k, v, keep ? keep : bias);
    }
    /// {output, log-sum-exp}.
    static std::array<FT, 2> forward(const FT& q, const FT& k, const FT& v,
                                     const std::optional<FT>& keep, const std::optional<FT>& bias,
                                     bool causal, double scale) {
        return cuda::attention_forward(q, k, v, keep ? keep : bias, causal, scale);
    }
    /// {dq, dk, dv}.
    static std::array<FT, 3> backward(const FT& q, const FT& k, const FT& v, const FT& out,
                                      const FT& lse, const FT& dout, const std::optional<FT>& keep,
                                      const std::optional<FT>& bias, bool causal, double scale) {
        return cuda::attention_backward(q, k, v, out, lse, dout, keep ? keep : bias, causal, scale);
    }
    /// Whether a packed qkv like `like` runs fused (see FusedPackedAttention).
    static bool supports_packed(const FT& like, std::size_t heads, std::size_t head_dim) {
        return cuda::attention_packed_supported(like, heads, head_dim);
    }
    /// {output [B, L, H·E], log-sum-exp} from qkv [B, L, 3·H·E].
    static std::array<FT, 2> forward_packed(const FT& qkv, std::size_t heads, bool causal,
                                            double scale) {
        return cuda::attention_forward_packed(qkv, heads, causal, scale);
    }
    /// The gradient of qkv.
    static FT backward_packed(const FT& qkv, const FT& out, const FT& lse, const FT& dout,
                              std::size_t heads, bool causal, double scale) {
        return cuda::attention_backward_packed(qkv, out, lse, dout, heads, causal, scale);
    }
};

}  // namespace ember
