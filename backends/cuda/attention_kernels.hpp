#pragma once
// The fused attention kernels' parameters and launchers (attention.cu), called by the host code
// in attention.cpp. Every launcher queues its work on `stream` and returns at once.
#include <cuda_runtime.h>

#include <cstdint>

#include "ember/tensor/dtype.hpp"

namespace ember::detail::cuda {

/// One attention problem: q [B, H, Lq, D], k and v [B, H, Lk, D] with element strides per
/// (batch, head, position) and a contiguous last dim; an optional mask read at
/// b·m[0] + h·m[1] + i·m[2] + j·m[3] (0 strides broadcast).
struct AttnParams {
    const void* q = nullptr;
    const void* k = nullptr;
    const void* v = nullptr;
    std::int64_t qs[3] = {}, ks[3] = {}, vs[3] = {};
    /// Strides per (batch, head, position) of the output o (forward; read back by backward),
    /// of dout, and of the gradients dq (f32), dk and dv, each with a contiguous last dim: the
    /// host lays them out as the inputs are (a [B, L, H, D] buffer seen as [B, H, L, D], as the
    /// heads of a Linear's output are), so that merging the heads back costs no copy.
    std::int64_t os[3] = {}, gs[3] = {}, dqs[3] = {}, dks[3] = {}, dvs[3] = {};
    const void* dout = nullptr;  ///< backward: dout (the mma kernel copies its rows by 16 bytes)
    const void* mask = nullptr;  ///< null, uint8 (true = attend) or f32 (added to the logits)
    bool mask_is_bool = false;
    std::int64_t ms[4] = {};
    int batch = 0, heads = 0, lq = 0, lk = 0, head_dim = 0;
    float scale = 1.f;
    bool causal = false;
};

/// The head dims the kernels are compiled for.
inline bool attention_head_dim_supported(int d) {
    return d == 32 || d == 64 || d == 128;
}

/// Forward: o [B, H, Lq, D] at p.os in q's dtype, lse [B, H, Lq] f32 contiguous (the log of each
/// row's softmax denominator, in the scaled-logit space; -inf for a row that attends to nothing).
void launch_attention_forward(const AttnParams& p, DType dtype, void* o, float* lse,
                              cudaStream_t s);

/// Backward: from o and dout ([B, H, Lq, D] at p.os and p.gs, q's dtype) and lse, writes dq (f32
/// at p.dqs, accumulated atomically: its B·H·Lq·D dense floats are zeroed here first), dk and dv
/// (at p.dks and p.dvs, q's dtype).
/// `delta` is scratch for [B, H, Lq] f32.
void launch_attention_backward(const AttnParams& p, DType dtype, const void* o, const void* dout,
                               const float* lse, float* delta, float* dq, void* dk, void* dv,
                               cudaStream_t s);

}  // namespace ember::detail::cuda
