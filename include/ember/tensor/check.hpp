#pragma once
// The shared op checks (Burn's check.rs): each op's argument checks and output shape, written
// once and called by every backend before it touches data, so that the same misuse gives the
// same ember::Error, with the same message, on the CPU, on Vulkan and on CUDA. The checks read
// only shapes and dtypes (an `Operand`), never a backend's memory; what needs the data (an index
// value out of range) is found by the backend and reported through `index_out_of_range`.
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "../export.hpp"
#include "distribution.hpp"
#include "dtype.hpp"
#include "error.hpp"
#include "ops.hpp"
#include "shape.hpp"

namespace ember::detail::check {

using i64 = std::int64_t;

/// What a check reads of a tensor: its shape and dtype (any backend's primitive converts).
struct Operand {
    Shape shape;               ///< dims
    DType dtype = DType::F32;  ///< element type
    Operand(Shape s, DType d) : shape(s), dtype(d) {}
    /// From a backend primitive (CpuTensor, VulkanTensor, CudaTensor...).
    template <typename T>
    requires requires(const T& t) {
        { t.shape } -> std::convertible_to<Shape>;
        { t.dtype } -> std::convertible_to<DType>;
    }
    Operand(const T& t) : shape(t.shape), dtype(t.dtype) {}  // NOLINT: implicit on purpose
};
/// An optional primitive as an optional Operand.
template <typename T>
std::optional<Operand> operand(const std::optional<T>& t) {
    return t ? std::optional<Operand>(Operand(*t)) : std::nullopt;
}
/// Primitives as Operands (cat, stack).
template <typename T>
std::vector<Operand> operands(std::span<const T> ts) {
    return std::vector<Operand>(ts.begin(), ts.end());
}

// ---- dims ----------------------------------------------------------------------------------
/// `dim` must be a dim of `shape` ("op: dim D is out of range for shape S").
EMBER_API void dim(const char* op, std::size_t dim, const Shape& shape);
/// As `dim`, and the dim must not be empty (max, min, argmax... have no identity).
EMBER_API void nonempty_dim(const char* op, std::size_t dim, const Shape& shape);
/// A reduction of every element: one without an identity (max, min) needs an element.
EMBER_API void reduce_all(const char* op, bool has_identity, const Shape& shape);
/// A reduction along `dim`: the dim must exist, and be non-empty without an identity.
EMBER_API void reduce_dim(const char* op, bool has_identity, std::size_t dim, const Shape& shape);

// ---- names and creation --------------------------------------------------------------------
/// The op name a binary op's errors use ("add", "max_pair", ...).
EMBER_API const char* binary_op_name(BinaryOp op);
/// The op name on operands of dtype `d`: as above, but and/or/xor on int tensors are
/// bitwise_and/bitwise_or/bitwise_xor (Burn's names), so shape errors name the op called.
EMBER_API const char* binary_op_name(BinaryOp op, DType d);
/// The dtype rule of an elementwise binary op, for its operands' dtype `d` (checked by every
/// backend's binary and binary-scalar kernels): And/Or/Xor take bool or int tensors (logical
/// or bitwise), Shl/Shr int tensors only, the arithmetic ops anything but the bitwise-only
/// ones on bool (Add/Mul/Max/Min act as or/and there).
EMBER_API void binary_dtype(BinaryOp op, DType d);
/// The dtype rule of an elementwise unary op: Not takes bool (logical) or int (bitwise)
/// tensors; on a bool tensor only Not is defined.
EMBER_API void unary_dtype(UnaryOp op, DType d);
/// The op name a comparison's errors use ("equal", "lower_equal", ...).
EMBER_API const char* compare_op_name(CompareOp op);
/// random(shape, dist): the distribution's parameters must describe one.
EMBER_API void random(const Distribution& dist);
/// topk(t, k, dim): returns the output shape (dim of length k).
EMBER_API Shape topk(std::size_t k, std::size_t dim, const Shape& shape);

// ---- matmul --------------------------------------------------------------------------------
/// torch.matmul's geometry: rank >= 1 each, vectors promoted, batch dims broadcast.
struct Matmul {
    std::size_t m = 1, n = 1, k = 0;  ///< the product per batch entry: [m, k] · [k, n]
    std::size_t ba = 0, bb = 0;       ///< batch dims of a and of b (rank - 2, or 0 for a vector)
    Shape batch;                      ///< the broadcast batch dims
    Shape out;                        ///< the output shape ([1] for vector · vector)
};
/// Checks matmul's operands and returns its geometry.
EMBER_API Matmul matmul(const Operand& a, const Operand& b);

// ---- convolution ---------------------------------------------------------------------------
/// Dynamic-rank conv parameters (arrays hold `n` used entries).
struct ConvParams {
    std::size_t n = 2;  ///< spatial dims: 1, 2 or 3
    std::array<std::size_t, 3> stride{1, 1, 1}, padding{0, 0, 0}, dilation{1, 1, 1},
        padding_out{0, 0, 0};
    std::size_t groups = 1;  ///< channel groups
};
/// ConvOptions<N> or ConvTransposeOptions<N> → ConvParams.
template <std::size_t N, typename O>
ConvParams conv_params(const O& o) {
    ConvParams p;
    p.n = N;
    for (std::size_t i = 0; i < N; ++i) {
        p.stride[i] = o.stride[i];
        p.padding[i] = o.padding[i];
        p.dilation[i] = o.dilation[i];
        if constexpr (requires { o.padding_out; }) p.padding_out[i] = o.padding_out[i];
    }
    p.groups = o.groups;
    return p;
}
/// Spatial geometry in 3-d form (a 2-d problem has in[0] = k[0] = out[0] = 1).
struct ConvGeo {
    std::array<i64, 3> in{1, 1, 1}, k{1, 1, 1}, out{1, 1, 1}, stride{1, 1, 1}, pad{0, 0, 0},
        dil{1, 1, 1};
    /// Input elements per channel.
    i64 in_size() const { return in[0] * in[1] * in[2]; }
    /// Kernel taps per channel.
    i64 k_size() const { return k[0] * k[1] * k[2]; }
    /// Output elements per channel.
    i64 out_size() const { return out[0] * out[1] * out[2]; }
};
/// A checked convolution: its geometry and output shape.
struct Conv {
    ConvGeo g;  ///< spatial geometry
    Shape out;  ///< [N, C_out, spatial...]
};
/// conv{1,2,3}d(x, w, bias): checks and output geometry.
EMBER_API Conv conv(const Operand& x, const Operand& w, const std::optional<Operand>& bias,
                    const ConvParams& p);
/// conv_transpose{1,2,3}d(x, w, bias): checks and output geometry.
EMBER_API Conv conv_transpose(const Operand& x, const Operand& w,
                              const std::optional<Operand>& bias, const ConvParams& p);
/// conv{n}d_weight_backward(x, grad, weight_shape): checks and the forward's geometry.
EMBER_API Conv conv_weight_backward(const Operand& x, const Operand& grad,
                                    const Shape& weight_shape, const ConvParams& p);
/// The output of a deformable convolution.
struct Deform {
    Shape out;           ///< [N, C_out, H_out, W_out]
    i64 oh = 0, ow = 0;  ///< the output's spatial sizes
};
/// deform_conv2d's operands (errors name `op`: the forward or its backward).
EMBER_API Deform deform_conv2d(const char* op, const Operand& x, const Operand& offset,
                               const Operand& w, const std::optional<Operand>& mask,
                               const std::optional<Operand>& bias, const DeformConvOptions& o);
/// A backward's operands: x a float tensor, the output gradient of x's dtype and, when given,
/// of the forward's output shape `expected`.
EMBER_API void grad(const std::string& op, const Operand& x, const Operand& grad,
                    const std::optional<Shape>& expected = std::nullopt);

/// module::add_layer_norm's operands: x and residual of one shape (rank >= 1) and float dtypes,
/// gamma and beta of the last dim's size, eps >= 0, and `out` (the normed result's dtype) a
/// float dtype.
EMBER_API void add_layer_norm(const Operand& x, const Operand& residual,
                              const std::optional<Operand>& gamma,
                              const std::optional<Operand>& beta, double eps,
                              std::optional<DType> out);

// ---- pooling and interpolation (the window geometry: backends/common/pool_geometry.hpp) ------
/// adaptive_avg_pool{n}d(x, output_size): checks; returns the output shape.
EMBER_API Shape adaptive_avg_pool(const Operand& x, std::span<const std::size_t> output_size);
/// interpolate(x, output_size, o): checks (the dtype rule of o.mode included); returns the output
/// shape.
EMBER_API Shape interpolate(const Operand& x, std::span<const std::size_t> output_size,
                            const InterpolateOptions& o);
/// adaptive_avg_pool{n}d_backward(x, grad): the output size is grad's spatial dims.
EMBER_API void adaptive_avg_pool_backward(const Operand& x, const Operand& grad, std::size_t n);
/// interpolate_backward(x, grad, output_size): returns the forward's output shape (grad's).
EMBER_API Shape interpolate_backward(const Operand& x, const Operand& grad,
                                     std::span<const std::size_t> output_size);

// ---- index ops -----------------------------------------------------------------------------
/// Index tensors must hold integers.
EMBER_API void index_dtype(const char* op, DType indices);
/// An index value outside [0, size) of `dim`, found by the backend while reading the indices.
[[noreturn]] EMBER_API void index_out_of_range(const char* op, i64 index, std::size_t dim,
                                               std::size_t size);
/// gather(dim, t, indices): returns the output shape (the indices').
EMBER_API Shape gather(std::size_t dim, const Operand& t, const Operand& indices);
/// scatter_add(dim, t, indices, values).
EMBER_API void scatter_add(std::size_t dim, const Operand& t, const Operand& indices,
                           const Operand& values);
/// select(t, dim, indices) (index_select): returns the output shape.
EMBER_API Shape select(const Operand& t, std::size_t dim, const Operand& indices);
/// select_assign(t, dim, indices, values).
EMBER_API void select_assign(const Operand& t, std::size_t dim, const Operand& indices,
                             const Operand& values);

// ---- shape ops -----------------------------------------------------------------------------
/// cat(tensors, dim): returns the output shape.
EMBER_API Shape cat(std::span<const Operand> tensors, std::size_t dim);
/// The start and length of each sliced dim, for ranges over the leading dims (PyTorch's rules:
/// negative bounds count from the end, ranges past the end are clamped).
struct Region {
    std::array<std::size_t, kMaxRank> start{};  ///< first index per dim
    Shape shape;                                ///< the region's shape (untouched dims whole)
};
/// slice(t, ranges): the region taken.
EMBER_API Region slice(const char* op, const Shape& t, std::span<const Slice> ranges);
/// slice_assign(t, ranges, values): the region written (values must have its shape).
EMBER_API Region slice_assign(const Operand& t, std::span<const Slice> ranges,
                              const Operand& values);
/// reshape: the element counts must agree.
EMBER_API void reshape(const Shape& from, const Shape& to);
/// permute: `axes` must be a permutation of the dims.
EMBER_API void permute(const Shape& t, std::span<const std::size_t> axes);
/// expand: every dim of `from` must equal the target's or be 1.
EMBER_API void expand(const Shape& from, const Shape& to);
/// flip: returns which dims are flipped (each at most once, each in range).
EMBER_API std::array<bool, kMaxRank> flip(const Shape& t, std::span<const std::size_t> axes);
/// repeat_dim: returns the output shape.
EMBER_API Shape repeat_dim(const Shape& t, std::size_t dim, std::size_t times);

// ---- masks ---------------------------------------------------------------------------------
/// mask_where(t, mask, value): returns the broadcast output shape.
EMBER_API Shape mask_where(const Operand& t, const Operand& mask, const Operand& value);
/// mask_fill(t, mask, value): the mask broadcasts to t's shape.
EMBER_API void mask_fill(const Operand& t, const Operand& mask);

}  // namespace ember::detail::check
