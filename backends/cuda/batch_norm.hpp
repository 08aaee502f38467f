#pragma once
// Launchers of the batch-norm kernels (batch_norm.cu) and the multi-tensor Adam and SGD steps
// (adam_multi.cu). Batch norm works on dense NCHW data seen as [N, C, HW], stored contiguous
// or channels-last ([N, HW, C]); the tensor's dtype T is F32, F64, F16 or BF16 and the
// per-channel vectors are in its accumulation dtype A (F64 for F64, F32 otherwise).
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "ember/tensor/dtype.hpp"
#include "ember/tensor/ops.hpp"
#include "ember/tensor/sgd_step.hpp"

namespace ember::detail::cuda {

/// The geometry of one batch-norm launch: x is [n, c, hw], contiguous or channels-last.
struct BatchNormShape {
    std::int64_t n = 0;   ///< samples
    std::int64_t c = 0;   ///< channels
    std::int64_t hw = 0;  ///< positions per sample and channel
    int splits = 1;       ///< blocks per channel of the reduction kernels (along n)
    bool vec4 = false;    ///< hw % 4 == 0 and the data 4-element aligned: vector loads
    /// The data is stored channels-last, as [n·hw, c] row-major (cuDNN's NHWC); `splits` then
    /// divides the n·hw rows.
    bool channels_last = false;
    /// The ReLU epilogue (float_batch_norm_relu): forward, y = max(bn(x) + residual, 0);
    /// backward, dy is read as dy·[out > 0] (the ReLU's gradient, out the forward's y) and that
    /// masked gradient is also written to `dresidual` where non-null (the residual's gradient).
    /// The pointers are of x's dtype and layout.
    bool relu = false;
    const void* residual = nullptr;  ///< forward: added before the ReLU, or null
    const void* out = nullptr;       ///< backward: the forward's y (relu only)
    void* dresidual = nullptr;       ///< backward: receives the masked dy, or null
    /// Backward of a ReLU epilogue without a residual: β (type A), from which the 16-byte
    /// channels-last kernels recompute the mask as the forward computed its output
    /// (x·k + b > 0 with k = rstd·γ, b = β − mean·k) instead of reading `out`; null: `out`.
    const void* beta = nullptr;
};

/// Blocks per channel for the reductions over [n, hw]: enough blocks for the whole GPU, at
/// least a few thousand values each, and never more than n (channels-last: at least 64 rows
/// each, never more than 512; with the element size `elem_bytes` of data the 16-byte kernels
/// can sum, at least eight rows a thread of theirs).
int batch_norm_splits(std::int64_t n, std::int64_t c, std::int64_t hw, bool channels_last = false,
                      std::size_t elem_bytes = 0);

/// Training forward: per-channel mean and 1/√(var + eps) (biased variance) into mean/rstd, the
/// running statistics updated into rm_out/rv_out (unbiased variance, as PyTorch), and y.
/// `part` holds 2·c·splits accumulators of type A.
void launch_batch_norm_forward(DType t, const BatchNormShape& g, const void* x, const void* gamma,
                               const void* beta, const void* rm, const void* rv, double eps,
                               double momentum, void* part, void* mean, void* rstd, void* rm_out,
                               void* rv_out, void* y, cudaStream_t s);
/// Eval forward: y = (x − mean)·gamma/√(var + eps) + beta, one kernel.
void launch_batch_norm_eval(DType t, const BatchNormShape& g, const void* x, const void* gamma,
                            const void* beta, const void* mean, const void* var, double eps,
                            void* y, cudaStream_t s);
/// Backward: dgamma, dbeta and dx from x, dL/dy, gamma and the forward's mean and rstd.
/// `part` holds 2·c·splits accumulators and `coef` 3·c, both of type A.
void launch_batch_norm_backward(DType t, const BatchNormShape& g, const void* x, const void* dy,
                                const void* gamma, const void* mean, const void* rstd, void* part,
                                void* coef, void* dgamma, void* dbeta, void* dx, cudaStream_t s);

/// One tensor of a multi-tensor Adam launch (f32 or f64, contiguous, n elements).
struct AdamMultiTensor {
    void* p_out = nullptr;
    void* m_out = nullptr;
    void* v_out = nullptr;
    const void* p = nullptr;
    const void* g = nullptr;
    const void* m = nullptr;
    const void* v = nullptr;
    std::int64_t n = 0;
    const double* replayed = nullptr;  ///< a captured step's lr and corrections, or null
    AdamStepsScalars s;
};
/// The update of every tensor in `ts` (of dtype cd, all with ts[0]'s beta_1, beta_2, epsilon
/// and l2) in as few launches as the kernel parameters allow (each carries a table of up to
/// 28 tensors).
void launch_adam_multi(DType cd, const AdamMultiTensor* ts, std::size_t count, cudaStream_t s);

/// One tensor of a multi-tensor SGD launch (f32 or f64, flat in the parameter's layout).
struct SgdMultiTensor {
    void* p_out = nullptr;
    void* v_out = nullptr;
    const void* p = nullptr;
    const void* g = nullptr;
    const void* v = nullptr;
    std::int64_t n = 0;
    const double* replayed = nullptr;  ///< a captured step's learning rate, or null
    double lr = 0;                     ///< the rate of an eager step
};
/// The SGD-with-momentum update of every tensor in `ts` (of dtype cd) with `s`'s momentum,
/// dampening, decay and Nesterov flag (each tensor's own rate), rounded as sgd_kernel rounds
/// it, in as few launches as the kernel parameters allow.
void launch_sgd_multi(DType cd, const SgdMultiTensor* ts, std::size_t count,
                      const SgdStepScalars& s, cudaStream_t stream);

}  // namespace ember::detail::cuda
