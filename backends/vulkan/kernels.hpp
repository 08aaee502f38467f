#pragma once
// The Vulkan backend's kernels behind VulkanBackend's op functions, grouped by source file.
// Tensors are taken by value: a moved-in tensor whose buffer is unique (`is_unique()`) may be
// reused for the result, as on the CPU.
#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "../common/pool_geometry.hpp"
#include "../common/view.hpp"
#include "context.hpp"
#include "ember/backend/detail/vulkan_tensor.hpp"
#include "ember/tensor/check.hpp"
#include "ember/tensor/data.hpp"
#include "ember/tensor/distribution.hpp"
#include "ember/tensor/error.hpp"
#include "ember/tensor/ops.hpp"

namespace ember::detail::vk {

using VT = VulkanTensor;
using i64 = std::int64_t;

/// How elements of a dtype are stored on the device (shaders/common.glsl: CLASS_*).
enum Class : std::int32_t { kF32 = 0, kI64 = 1, kBool = 2 };
inline Class class_of(DType d) {
    return is_float(d) ? kF32 : (is_int(d) ? kI64 : kBool);
}
/// Bytes per element on the device.
inline std::size_t device_size(DType d) {
    return class_of(d) == kI64 ? 8 : 4;
}

/// The context holding `t`.
inline Context& ctx(const VT& t) {
    return Context::get(t.device);
}
/// A binding of the whole allocation under `t`.
Binding bind(const VT& t, bool write);

/// Parameter words for a kernel (binding 0).
struct Params {
    std::vector<std::int32_t> w;
    void push(i64 v);
    void push_f(float v);
    void push_i64(i64 v);  ///< two words, little-endian
    /// rank-`kMaxRank` strides of `t` broadcast to `shape` (0 where t's dim is 1 or absent),
    /// then its offset.
    void push_layout(const VT& t, const Shape& shape);
};

// ---- elementwise.cpp -------------------------------------------------------------------------
/// A new contiguous tensor on `device`.
VT empty(const Shape& shape, DType dtype, std::uint32_t device);
VT full(const Shape& shape, Scalar value, DType dtype, std::uint32_t device);
VT arange(i64 start, i64 end, i64 step, std::uint32_t device);
VT random(const Shape& shape, const Distribution& dist, DType dtype, std::uint32_t device);
void seed(std::uint64_t s);
VT unary(UnaryOp op, VT t);
VT binary(BinaryOp op, VT a, VT b);
VT binary_scalar(BinaryOp op, VT a, Scalar s);
VT compare(CompareOp op, VT a, VT b);
VT compare_scalar(CompareOp op, VT a, Scalar s);
/// mask ? value : t, broadcast together (the CPU kernel's argument order).
VT where(VT mask, VT value, VT t);
VT mask_fill(VT t, VT mask, Scalar value);
VT clamp(VT t, Scalar lo, Scalar hi);
/// Converts elements (float → int truncates toward zero; values rounded to f16/bf16, wrapped
/// to narrower ints).
VT cast(VT t, DType dtype);
/// Copies src (broadcast to dst's shape) into the strided view dst.
void copy_into(const VT& src, const VT& dst);
/// A contiguous tensor with the same values (the same handle when already contiguous).
VT contiguous(VT t);

// ---- transfer.cpp ----------------------------------------------------------------------------
VT from_data(const TensorData& data, DType dtype, std::uint32_t device);
TensorData to_data(const VT& t);
VT to_device(VT t, std::uint32_t device);
/// Whether any element of a bool tensor is true (waits: for checks of data).
bool any_true(const VT& t);
/// Reads a small tensor's values as int64 (waits): for checks that need data on the host.
std::vector<i64> read_ints(const VT& t);

// ---- shape_ops.cpp ---------------------------------------------------------------------------
using view::expand;  // the views: backends/common/view.hpp
using view::permute;
using view::reshape;
using view::slice;
VT slice_assign(VT t, std::span<const Slice> ranges, VT values);
VT flip(VT t, std::span<const std::size_t> axes);
VT cat(std::span<const VT> tensors, std::size_t dim);
VT repeat_dim(VT t, std::size_t dim, std::size_t times);

// ---- reduce.cpp ------------------------------------------------------------------------------
VT reduce_all(ReduceOp op, VT t);
VT reduce_dim(ReduceOp op, VT t, std::size_t dim);
VT arg_reduce(ArgReduceOp op, VT t, std::size_t dim);
/// Softmax (or log-softmax) along `dim` in one kernel: max, sum of exponentials and the
/// result per row.
VT softmax(VT t, std::size_t dim, bool log);
/// Layer norm over the last dim in one kernel (shaders/norm.comp): {y, mean, rstd}.
std::array<VT, 3> layer_norm(VT x, std::optional<VT> gamma, std::optional<VT> beta, double eps);

// ---- index.cpp -------------------------------------------------------------------------------
VT gather(std::size_t dim, VT t, VT indices);
VT scatter_add(std::size_t dim, VT t, VT indices, VT values);
VT select(VT t, std::size_t dim, VT indices);
VT select_assign(VT t, std::size_t dim, VT indices, VT values);
VT argwhere(VT t);
std::pair<VT, VT> sort_with_indices(VT t, std::size_t dim, bool descending);
/// The k largest (or smallest) along `dim`, sorted, with int64 indices.
std::pair<VT, VT> topk(VT t, std::size_t k, std::size_t dim, bool largest);

// ---- optim.cpp -------------------------------------------------------------------------------
/// {param, m, v} after one Adam update (shaders/adam.comp); float operands of one shape.
std::array<VT, 3> adam_step(VT param, VT grad, VT m, VT v, const AdamStepScalars& s);

// ---- matmul.cpp ------------------------------------------------------------------------------
VT matmul(VT a, VT b);

}  // namespace ember::detail::vk

namespace ember::detail::vk {

// ---- conv.cpp: im2col + matmul, a direct transposed convolution; N = 1, 2 or 3 -------------
/// Dynamic-rank conv parameters (include/ember/tensor/check.hpp).
using check::conv_params;  // ConvOptions<N> or ConvTransposeOptions<N> → ConvParams
using check::ConvParams;
VT conv(VT x, VT w, std::optional<VT> bias, const ConvParams& p);
VT conv_transpose(VT x, VT w, std::optional<VT> bias, const ConvParams& p);
VT conv_weight_backward(VT x, VT grad, const Shape& weight_shape, const ConvParams& p);
VT deform_conv2d(VT x, VT offset, VT w, std::optional<VT> mask, std::optional<VT> bias,
                 const DeformConvOptions& o);
/// Gradients of deform_conv2d: x, offset, weight, then mask and bias when given.
struct DeformGrads {
    VT x, offset, weight;
    std::optional<VT> mask, bias;
};
DeformGrads deform_conv2d_backward(VT x, VT offset, VT w, std::optional<VT> mask,
                                   std::optional<VT> bias, VT grad, const DeformConvOptions& o);

// ---- pool.cpp: pooling and interpolation (PyTorch's geometry), forward and backward --------
using PoolParams = pool::PoolParams;  // backends/common/pool_geometry.hpp
using pool::pool_params;
VT avg_pool(VT x, const PoolParams& p);
std::pair<VT, VT> max_pool_with_indices(VT x, const PoolParams& p);
VT adaptive_avg_pool(VT x, std::span<const std::size_t> output_size);
VT interpolate(VT x, std::span<const std::size_t> output_size, const InterpolateOptions& o);
VT avg_pool_backward(VT x, VT grad, const PoolParams& p);
VT adaptive_avg_pool_backward(VT x, VT grad, std::size_t n);
VT interpolate_backward(VT x, VT grad, std::span<const std::size_t> output_size,
                        const InterpolateOptions& o);

}  // namespace ember::detail::vk
