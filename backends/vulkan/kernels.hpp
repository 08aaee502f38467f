#pragma once
// The Vulkan backend's kernels that more than one source file calls, grouped by the file that
// defines them. VulkanBackend's op functions are defined next to their kernels, in those files;
// a kernel only its own file calls is not declared here. Tensors are taken by value: a moved-in
// tensor whose buffer is unique (`is_unique()`) may be reused for the result, as on the CPU.
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
/// The host data of each tensor, with one wait per device (Transaction::execute).
std::vector<TensorData> to_data_many(std::vector<VT> tensors);
/// Whether any element of a bool tensor is true (waits: for checks of data).
bool any_true(const VT& t);
/// Reads a small tensor's values as int64 (waits): for checks that need data on the host.
std::vector<i64> read_ints(const VT& t);

// ---- shape_ops.cpp ---------------------------------------------------------------------------
using view::expand;  // the views: backends/common/view.hpp
using view::permute;
using view::reshape;
using view::slice;

// ---- reduce.cpp ------------------------------------------------------------------------------
VT reduce_all(ReduceOp op, VT t);
VT reduce_dim(ReduceOp op, VT t, std::size_t dim);

// ---- matmul.cpp ------------------------------------------------------------------------------
VT matmul(VT a, VT b);

// ---- conv.cpp, deform.cpp, pool.cpp: their parameters -----------------------------------
/// Dynamic-rank conv parameters (include/ember/tensor/check.hpp).
using check::conv_params;  // ConvOptions<N> or ConvTransposeOptions<N> → ConvParams
using check::ConvParams;
using PoolParams = pool::PoolParams;  // backends/common/pool_geometry.hpp
using pool::pool_params;

}  // namespace ember::detail::vk
