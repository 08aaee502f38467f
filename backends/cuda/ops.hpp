#pragma once
// The CUDA backend's ops on CudaTensor, dtype-generic, with the same names and meaning as the
// CPU backend's (backends/cpu/kernels.hpp), so that both backends answer every op alike.
// CudaBackend's members (backend.cpp) forward to these.
#include <optional>
#include <span>
#include <utility>

#include "../common/pool_geometry.hpp"
#include "../common/view.hpp"
#include "ember/tensor/check.hpp"
#include "ember/tensor/data.hpp"
#include "ember/tensor/distribution.hpp"
#include "ember/tensor/ops.hpp"
#include "runtime.hpp"

namespace ember::detail::cuda {

// ---- creation and transfer (tensor_ops.cpp) ------------------------------------------------
CudaTensor full(const Shape& shape, Scalar value, DType dtype, int device);
CudaTensor from_data(const TensorData& data, DType dtype, int device);
TensorData to_data(const CudaTensor& t);
CudaTensor random(const Shape& shape, const Distribution& dist, DType dtype, int device);
void seed(std::uint64_t seed);
CudaTensor arange(std::int64_t start, std::int64_t end, std::int64_t step, int device);
/// `t` on `device` (a device-to-device copy when it is elsewhere).
CudaTensor to_device(CudaTensor t, int device);

// ---- views and data movement (tensor_ops.cpp) ----------------------------------------------
using view::expand;  // the views: backends/common/view.hpp
using view::permute;
using view::reshape;
using view::slice;
CudaTensor slice_assign(CudaTensor t, std::span<const Slice> ranges, CudaTensor values);
CudaTensor flip(CudaTensor t, std::span<const std::size_t> axes);
CudaTensor cat(std::span<const CudaTensor> tensors, std::size_t dim);
CudaTensor repeat_dim(CudaTensor t, std::size_t dim, std::size_t times);
/// `t` converted to `dtype`, named for the cast ops.
inline CudaTensor cast_to(CudaTensor t, DType dtype) {
    return cast(std::move(t), dtype);
}

// ---- elementwise (tensor_ops.cpp) ----------------------------------------------------------
CudaTensor unary(UnaryOp op, CudaTensor t);
CudaTensor binary(BinaryOp op, CudaTensor a, CudaTensor b);
CudaTensor binary_scalar(BinaryOp op, CudaTensor a, Scalar s);
CudaTensor compare(CompareOp op, CudaTensor a, CudaTensor b);
CudaTensor compare_scalar(CompareOp op, CudaTensor a, Scalar s);
/// mask ? a : b with broadcasting.
CudaTensor where(CudaTensor mask, CudaTensor a, CudaTensor b);
CudaTensor mask_fill(CudaTensor t, CudaTensor mask, Scalar value);
CudaTensor clamp(CudaTensor t, Scalar lo, Scalar hi);
std::array<CudaTensor, 3> adam_step(CudaTensor param, CudaTensor grad, CudaTensor m, CudaTensor v,
                                    const AdamStepScalars& s);

// ---- reductions and indexing (reduce_ops.cpp) ----------------------------------------------
CudaTensor reduce_all(ReduceOp op, CudaTensor t);
CudaTensor reduce_dim(ReduceOp op, CudaTensor t, std::size_t dim);
CudaTensor arg_reduce(ArgReduceOp op, CudaTensor t, std::size_t dim);
CudaTensor softmax(CudaTensor t, std::size_t dim, bool log);
/// Layer norm over the last dim: {y, mean, rstd} (see BackendBase::float_layer_norm).
std::array<CudaTensor, 3> layer_norm(CudaTensor x, std::optional<CudaTensor> gamma,
                                     std::optional<CudaTensor> beta, double eps);
CudaTensor gather(std::size_t dim, CudaTensor t, CudaTensor indices);
CudaTensor scatter_add(std::size_t dim, CudaTensor t, CudaTensor indices, CudaTensor values);
CudaTensor select(CudaTensor t, std::size_t dim, CudaTensor indices);
CudaTensor select_assign(CudaTensor t, std::size_t dim, CudaTensor indices, CudaTensor values);
CudaTensor argwhere(CudaTensor t);
std::pair<CudaTensor, CudaTensor> sort_with_indices(CudaTensor t, std::size_t dim, bool descending);
std::pair<CudaTensor, CudaTensor> topk(CudaTensor t, std::size_t k, std::size_t dim, bool largest);

// ---- matmul.cpp ----------------------------------------------------------------------------
CudaTensor matmul(CudaTensor a, CudaTensor b);
/// a · b (2-D, f32) with the bias row added and/or relu applied by cuBLASLt's epilogue;
/// nothing for other operands or where cuBLASLt has no algorithm.
std::optional<CudaTensor> matmul_epilogue(const CudaTensor& a, const CudaTensor& b,
                                          const std::optional<CudaTensor>& bias, bool relu);

// ---- conv.cpp ------------------------------------------------------------------------------
/// Dynamic-rank conv parameters (include/ember/tensor/check.hpp).
using check::ConvParams;
/// Dynamic-rank pooling parameters.
using PoolParams = pool::PoolParams;  // backends/common/pool_geometry.hpp
CudaTensor conv(CudaTensor x, CudaTensor w, std::optional<CudaTensor> bias, const ConvParams& p);
CudaTensor conv_transpose(CudaTensor x, CudaTensor w, std::optional<CudaTensor> bias,
                          const ConvParams& p);
CudaTensor conv_weight_backward(CudaTensor x, CudaTensor grad, const Shape& weight_shape,
                                const ConvParams& p);
CudaTensor deform_conv2d(CudaTensor x, CudaTensor offset, CudaTensor w,
                         std::optional<CudaTensor> mask, std::optional<CudaTensor> bias,
                         const DeformConvOptions& o);
struct DeformGrads {
    CudaTensor x, offset, weight;
    std::optional<CudaTensor> mask, bias;
};
DeformGrads deform_conv2d_backward(CudaTensor x, CudaTensor offset, CudaTensor w,
                                   std::optional<CudaTensor> mask, std::optional<CudaTensor> bias,
                                   CudaTensor grad, const DeformConvOptions& o);
CudaTensor avg_pool(CudaTensor x, const PoolParams& p);
std::pair<CudaTensor, CudaTensor> max_pool_with_indices(CudaTensor x, const PoolParams& p,
                                                        bool want_indices);
CudaTensor adaptive_avg_pool(CudaTensor x, std::span<const std::size_t> output_size);
CudaTensor interpolate(CudaTensor x, std::span<const std::size_t> output_size,
                       const InterpolateOptions& o);
CudaTensor avg_pool_backward(CudaTensor x, CudaTensor grad, const PoolParams& p);
CudaTensor adaptive_avg_pool_backward(CudaTensor x, CudaTensor grad, std::size_t n);
CudaTensor interpolate_backward(CudaTensor x, CudaTensor grad,
                                std::span<const std::size_t> output_size,
                                const InterpolateOptions& o);

using check::conv_params;  // ConvOptions<N> or ConvTransposeOptions<N> → ConvParams
using pool::pool_params;

}  // namespace ember::detail::cuda
