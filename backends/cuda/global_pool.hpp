#pragma once
// Launchers of global average pooling (every output size 1: a ResNet's head), global_pool.cu.
#include <cuda_runtime.h>

#include <cstdint>

#include "ember/tensor/dtype.hpp"

namespace ember::detail::cuda {

/// One global average pooling: x seen as [n, c, s] (s the spatial positions, one dense run) with
/// element strides (sn, sc, ss); t is x's dtype (F32, F64, F16 or BF16), summed in F32 (F64 for
/// F64).
struct GlobalPool {
    std::int64_t n = 0, c = 0, s = 0;
    std::int64_t sn = 0, sc = 0, ss = 0;
};
/// out [n, c] (contiguous, dtype t) = the mean of each (sample, channel) over the positions.
void launch_global_avg_pool(DType t, const GlobalPool& g, const void* x, void* out, cudaStream_t s);
/// dx (dtype t, stored with x's strides: dense, channels-last or contiguous) = grad[b, ch] / s
/// at every position; grad is [n, c] contiguous.
void launch_global_avg_pool_backward(DType t, const GlobalPool& g, const void* grad, void* dx,
                                     cudaStream_t s);

}  // namespace ember::detail::cuda
