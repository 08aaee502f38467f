#pragma once
// The CPU backend's kernels, dtype-generic at run time. Each group lives in its own source
// file (named beside each block). Tensors are taken by value: a moved-in tensor whose buffer
// is unique (`is_unique()`) may be reused for the result.
#include <array>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include <memory>
#include "../common/pool_geometry.hpp"
#include "../common/view.hpp"
#include "ember/backend/detail/cpu_tensor.hpp"
#include "ember/tensor/check.hpp"
#include "ember/tensor/data.hpp"
#include "ember/tensor/distribution.hpp"
#include "ember/tensor/fusion_program.hpp"
#include "ember/tensor/ops.hpp"

namespace ember::detail::cpu {

// ---- creation.cpp: creation, host transfer, casts -------------------------------------------
CpuTensor empty(const Shape& shape, DType dtype);
CpuTensor full(const Shape& shape, Scalar value, DType dtype);
CpuTensor from_data(const TensorData& data, DType dtype);
TensorData to_data(const CpuTensor& t);
CpuTensor random(const Shape& shape, const Distribution& dist, DType dtype);
void seed(std::uint64_t seed);
CpuTensor arange(std::int64_t start, std::int64_t end, std::int64_t step, DType dtype);
/// A contiguous tensor with the same values (the same handle when already contiguous).
CpuTensor contiguous(CpuTensor t);
/// Converts elements (float → int truncates toward zero, as PyTorch).
CpuTensor cast(CpuTensor t, DType dtype);

// ---- views: zero-copy where the strides allow (backends/common/view.hpp) ----------------------
using view::expand;
using view::permute;
using view::reshape;
using view::slice;  // one Slice per leading dim (fewer than the rank is allowed)

// ---- elementwise.cpp: broadcasting, strided inputs ------------------------------------------
CpuTensor unary(UnaryOp op, CpuTensor t);
CpuTensor binary(BinaryOp op, CpuTensor a, CpuTensor b);
CpuTensor binary_scalar(BinaryOp op, CpuTensor a, Scalar s);
/// Bool result.
CpuTensor compare(CompareOp op, CpuTensor a, CpuTensor b);
CpuTensor compare_scalar(CompareOp op, CpuTensor a, Scalar s);
/// mask ? a : b, all three broadcast together.
CpuTensor where(CpuTensor mask, CpuTensor a, CpuTensor b);
/// mask ? value : t.
CpuTensor mask_fill(CpuTensor t, CpuTensor mask, Scalar value);
CpuTensor clamp(CpuTensor t, Scalar lo, Scalar hi);
/// x^p for a float exponent on float tensors.
CpuTensor powf_scalar(CpuTensor t, double p);

// ---- fusion.cpp: fused elementwise programs (Fusion<Cpu>) ----------------------------------
struct FusedPlan;
/// Checks `program` and keeps it for launching.
std::shared_ptr<const FusedPlan> fused_compile(const fusion::Program& program);
/// Runs the program over `shape`; inputs have that shape (strided views).
std::vector<CpuTensor> fused_launch(const FusedPlan& plan, std::vector<CpuTensor> inputs,
                                    std::span<const Scalar> scalars, const Shape& shape);

// ---- optim.cpp: optimizer updates fused into one pass ------------------------------------------
/// {param, m, v} after one Adam update (AdamStepScalars); float operands of one shape.
std::array<CpuTensor, 3> adam_step(CpuTensor param, CpuTensor grad, CpuTensor m, CpuTensor v,
                                   const AdamStepScalars& s);

// ---- shape_ops.cpp ------------------------------------------------------------------------
CpuTensor cat(std::span<const CpuTensor> tensors, std::size_t dim);
/// Returns `t` with the region `ranges` replaced by `values` (shape of the region).
CpuTensor slice_assign(CpuTensor t, std::span<const Slice> ranges, CpuTensor values);
CpuTensor flip(CpuTensor t, std::span<const std::size_t> axes);
CpuTensor repeat_dim(CpuTensor t, std::size_t dim, std::size_t times);

// ---- reduce.cpp ---------------------------------------------------------------------------
/// Whole tensor → shape [1]. Sum/Prod of ints stay int64-like in the input dtype; Mean of
/// ints is an error (as PyTorch); Any/All give bool.
CpuTensor reduce_all(ReduceOp op, CpuTensor t);
/// Along `dim`, keeping it with size 1.
CpuTensor reduce_dim(ReduceOp op, CpuTensor t, std::size_t dim);
/// Along `dim`, keeping it with size 1; int64 indices of the first extreme (NaN wins, as
/// PyTorch).
CpuTensor arg_reduce(ArgReduceOp op, CpuTensor t, std::size_t dim);
/// Fused softmax / log-softmax along `dim` (float only).
CpuTensor softmax(CpuTensor t, std::size_t dim);
CpuTensor log_softmax(CpuTensor t, std::size_t dim);
/// Layer norm over the last dim: {y, mean, rstd} (see BackendBase::float_layer_norm).
std::array<CpuTensor, 3> layer_norm(CpuTensor x, std::optional<CpuTensor> gamma,
                                    std::optional<CpuTensor> beta, double eps);
/// {dx (+ acc), dgamma, dbeta} of layer_norm from dL/dy and its mean and rstd (dgamma and dbeta
/// empty without gamma); nothing unless every operand is f32 (Autodiff then composes).
std::optional<std::array<CpuTensor, 3>> layer_norm_backward(CpuTensor x, CpuTensor grad,
                                                            std::optional<CpuTensor> gamma,
                                                            CpuTensor mean, CpuTensor rstd,
                                                            std::optional<CpuTensor> acc);
/// {x + residual, its layer norm, mean, rstd} in one pass over the rows; nothing unless every
/// operand is f32 and the residual has x's shape.
std::optional<std::array<CpuTensor, 4>> add_layer_norm(CpuTensor x, CpuTensor residual,
                                                       std::optional<CpuTensor> gamma,
                                                       std::optional<CpuTensor> beta, double eps);

// ---- attention.cpp: fused attention, f32, no mask but the causal flag ----------------------
/// softmax(q kᵀ · scale) v of q [B, H, Lq, E], k [B, H, Lk, E], v [B, H, Lk, Ev] (any strides):
/// {output [B, H, Lq, Ev], log-sum-exp of each row's scaled scores [B, H, Lq]}.
std::array<CpuTensor, 2> attention_forward(CpuTensor q, CpuTensor k, CpuTensor v, bool causal,
                                           double scale);
/// {dq, dk, dv} of attention_forward from its output, log-sum-exp and dL/doutput.
std::array<CpuTensor, 3> attention_backward(CpuTensor q, CpuTensor k, CpuTensor v, CpuTensor out,
                                            const CpuTensor& lse, CpuTensor dout, bool causal,
                                            double scale);
/// The same over packed projections: qkv [B, L, 3·H·E] → {output [B, L, H·E], lse [B, H, L]}.
std::array<CpuTensor, 2> attention_forward_packed(CpuTensor qkv, std::size_t heads, bool causal,
                                                  double scale);
/// The gradient of qkv [B, L, 3·H·E] (dq, dk, dv side by side) of attention_forward_packed.
CpuTensor attention_backward_packed(CpuTensor qkv, CpuTensor out, const CpuTensor& lse,
                                    CpuTensor dout, std::size_t heads, bool causal, double scale);

// ---- batch_norm.cpp ------------------------------------------------------------------------
/// Training-mode batch norm of x [N, C, ...] (see CpuBackend::float_batch_norm); nothing when
/// EMBER_CPU_BATCH_NORM=0 or C is 0.
std::optional<std::array<CpuTensor, 5>> batch_norm(CpuTensor x, CpuTensor gamma, CpuTensor beta,
                                                   CpuTensor running_mean, CpuTensor running_var,
                                                   const BatchNormScalars& s);
/// {dx, dgamma, dbeta} of batch_norm given dL/dy, from its mean and rstd.
std::array<CpuTensor, 3> batch_norm_backward(CpuTensor x, CpuTensor dy, CpuTensor gamma,
                                             CpuTensor mean, CpuTensor rstd);
/// batch_norm with y = max(bn(x) + residual, 0) (see CpuBackend::float_batch_norm_relu); also
/// nothing when EMBER_CPU_BATCH_NORM_RELU=0, or for f16/bf16 data with a residual.
std::optional<std::array<CpuTensor, 5>> batch_norm_relu(CpuTensor x, CpuTensor gamma,
                                                        CpuTensor beta, CpuTensor running_mean,
                                                        CpuTensor running_var,
                                                        std::optional<CpuTensor> residual,
                                                        const BatchNormScalars& s);
/// {dx, dgamma, dbeta, dresidual when `residual`} of batch_norm_relu given its output y and dL/dy.
BatchNormReluGrads<CpuTensor> batch_norm_relu_backward(CpuTensor x, CpuTensor y, CpuTensor dy,
                                                       CpuTensor gamma, CpuTensor mean,
                                                       CpuTensor rstd, bool residual);
/// Eval-mode batch norm: (x − mean)/√(var + eps)·gamma + beta per channel.
std::optional<CpuTensor> batch_norm_eval(CpuTensor x, CpuTensor gamma, CpuTensor beta,
                                         CpuTensor mean, CpuTensor var, double eps);

// ---- index.cpp ----------------------------------------------------------------------------
/// torch.gather.
CpuTensor gather(std::size_t dim, CpuTensor t, CpuTensor indices);
/// torch.scatter_add (Burn's scatter adds).
CpuTensor scatter_add(std::size_t dim, CpuTensor t, CpuTensor indices, CpuTensor values);
/// torch.index_select with a 1-d index.
CpuTensor select(CpuTensor t, std::size_t dim, CpuTensor indices);
/// Adds `values` into the rows of `t` picked by the 1-d `indices` along `dim`.
CpuTensor select_assign(CpuTensor t, std::size_t dim, CpuTensor indices, CpuTensor values);
/// Indices of non-zero elements, shape [n, rank], int64 (torch.argwhere).
CpuTensor argwhere(CpuTensor t);

// ---- sort.cpp -----------------------------------------------------------------------------
/// Stable sort along `dim`; NaN sorts as the largest value (as PyTorch). Returns values and
/// int64 indices.
std::pair<CpuTensor, CpuTensor> sort_with_indices(CpuTensor t, std::size_t dim, bool descending);
/// The k largest (or smallest) along `dim`, sorted, with int64 indices.
std::pair<CpuTensor, CpuTensor> topk(CpuTensor t, std::size_t k, std::size_t dim, bool largest);

// ---- matmul.cpp: OpenBLAS when EMBER_CPU_BLAS, a portable blocked GEMM otherwise ----------
/// Batched matmul with broadcast batch dims; rank >= 1 each as torch.matmul.
CpuTensor matmul(CpuTensor a, CpuTensor b);
/// a · b (2-D, f32) with the bias row added and/or relu applied in place over the product;
/// nothing for other operands.
std::optional<CpuTensor> matmul_epilogue(const CpuTensor& a, const CpuTensor& b,
                                         const std::optional<CpuTensor>& bias, bool relu);
/// Frees the weights packed once (matmul.cpp) whose buffers no tensor holds any more: called
/// before memory_stats() reads its counters, so that they count no dropped weight.
void release_dropped_packed_weights();

// ---- conv.cpp: im2col + GEMM; N = 1, 2 or 3 spatial dims -------------------------------------
/// Dynamic-rank conv parameters (include/ember/tensor/check.hpp).
using check::ConvParams;
CpuTensor conv(CpuTensor x, CpuTensor w, std::optional<CpuTensor> bias, const ConvParams& p);
CpuTensor conv_transpose(CpuTensor x, CpuTensor w, std::optional<CpuTensor> bias,
                         const ConvParams& p);
CpuTensor deform_conv2d(CpuTensor x, CpuTensor offset, CpuTensor w, std::optional<CpuTensor> mask,
                        std::optional<CpuTensor> bias, const DeformConvOptions& o);

// ---- pool.cpp ------------------------------------------------------------------------------
using PoolParams = pool::PoolParams;  // backends/common/pool_geometry.hpp
CpuTensor avg_pool(CpuTensor x, const PoolParams& p);
/// Max pooling; indices are flat positions within each input plane (as PyTorch), int64.
std::pair<CpuTensor, CpuTensor> max_pool_with_indices(CpuTensor x, const PoolParams& p);
CpuTensor adaptive_avg_pool(CpuTensor x, std::span<const std::size_t> output_size);
/// [N, C, H, W] (or [N, C, L]) to the given spatial size.
CpuTensor interpolate(CpuTensor x, std::span<const std::size_t> output_size,
                      const InterpolateOptions& o);

// ---- backward.cpp: gradient kernels of the module ops (Autodiff's rules call them) ---------
/// dL/dweight of conv(x, w) for a weight of shape `weight_shape`, given dL/dout `grad`:
/// im2col + GEMM per sample and group, summed over the batch.
CpuTensor conv_weight_backward(CpuTensor x, CpuTensor grad, const Shape& weight_shape,
                               const ConvParams& p);
/// dL/dx of avg_pool(x, p) given dL/dout `grad` (same windows and divisors as the forward).
CpuTensor avg_pool_backward(CpuTensor x, CpuTensor grad, const PoolParams& p);
/// dL/dx of adaptive_avg_pool(x, s) over `n` spatial dims, where s is grad's spatial size.
CpuTensor adaptive_avg_pool_backward(CpuTensor x, CpuTensor grad, std::size_t n);
/// dL/dx of interpolate(x, output_size, o) given dL/dout `grad`: the transpose of the
/// forward's linear map (Nearest, Bilinear and Bicubic).
CpuTensor interpolate_backward(CpuTensor x, CpuTensor grad,
                               std::span<const std::size_t> output_size,
                               const InterpolateOptions& o);
/// The gradients of deform_conv2d with respect to each of its inputs.
struct DeformConv2dGradients {
    CpuTensor x, offset, weight;
    std::optional<CpuTensor> mask, bias;  ///< when a mask / bias was given
};
/// torchvision's deform_conv2d backward (bilinear sampling, zero outside the image).
DeformConv2dGradients deform_conv2d_backward(CpuTensor x, CpuTensor offset, CpuTensor w,
                                             std::optional<CpuTensor> mask,
                                             std::optional<CpuTensor> bias, CpuTensor grad,
                                             const DeformConvOptions& o);

}  // namespace ember::detail::cpu
