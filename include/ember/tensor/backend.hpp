#pragma once
// The Backend concept and its defaults layer.
//
// A backend is a type with associated types (Device, the float/int/bool primitives, FloatElem,
// IntElem) and static op functions named after Burn's. It implements a required core — mostly
// op-code families (`float_unary(UnaryOp::Exp, x)`, `float_binary(BinaryOp::Add, a, b)`,
// `float_reduce_dim(ReduceOp::Sum, x, dim)`) so that decorators such as Fusion can record ops
// as data — and inherits everything else from `BackendBase<Self>`, which composes the rest
// (float_exp, float_add, float_sum_dim, float_softmax, conv1d, ...) from the core through
// `Self`, so decorators get them for free and a backend overrides what it can do faster simply
// by declaring a static function of the same name.
#include <array>
#include <concepts>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "data.hpp"
#include "distribution.hpp"
#include "ops.hpp"
#include "quant_primitive.hpp"
#include "shape.hpp"

namespace ember {

/// What every backend provides: types and the required core ops (checked at compile time by
/// `static_assert(ember::Backend<B>)`).
template <typename B>
concept Backend = requires {
    typename B::Device;
    typename B::FloatTensorPrimitive;
    typename B::IntTensorPrimitive;
    typename B::BoolTensorPrimitive;
    typename B::FloatElem;
    typename B::IntElem;
} && std::default_initializable<typename B::Device> &&
    std::equality_comparable<typename B::Device> &&
    requires(typename B::FloatTensorPrimitive f, typename B::IntTensorPrimitive i,
             typename B::BoolTensorPrimitive b, const typename B::Device& dev,
             const TensorData& data, const Shape& shape, std::span<const std::size_t> axes,
             std::span<const Slice> ranges, Scalar s, std::uint64_t seed) {
        { B::name() } -> std::convertible_to<std::string>;
        B::seed(seed);
        B::sync(dev);
        // float core
        { B::float_from_data(data, dev) } -> std::same_as<typename B::FloatTensorPrimitive>;
        { B::float_into_data(f) } -> std::same_as<TensorData>;
        { B::float_device(f) } -> std::same_as<typename B::Device>;
        { B::float_to_device(f, dev) } -> std::same_as<typename B::FloatTensorPrimitive>;
        { B::float_shape(f) } -> std::same_as<Shape>;
        { B::float_dtype(f) } -> std::same_as<DType>;
        { B::float_empty(shape, dev) } -> std::same_as<typename B::FloatTensorPrimitive>;
        { B::float_full(shape, s, dev) } -> std::same_as<typename B::FloatTensorPrimitive>;
        { B::float_random(shape, Distribution{}, dev) };
        { B::float_unary(UnaryOp::Exp, f) } -> std::same_as<typename B::FloatTensorPrimitive>;
        { B::float_binary(BinaryOp::Add, f, f) } -> std::same_as<typename B::FloatTensorPrimitive>;
        { B::float_binary_scalar(BinaryOp::Add, f, s) };
        { B::float_compare(CompareOp::Eq, f, f) } -> std::same_as<typename B::BoolTensorPrimitive>;
        { B::float_compare_scalar(CompareOp::Eq, f, s) };
        { B::float_mask_where(f, b, f) } -> std::same_as<typename B::FloatTensorPrimitive>;
        { B::float_mask_fill(f, b, s) };
        { B::float_clamp(f, s, s) };
        { B::float_reduce(ReduceOp::Sum, f) };
        { B::float_reduce_dim(ReduceOp::Sum, f, std::size_t{0}) };
        { B::float_arg_reduce(ArgReduceOp::ArgMax, f, std::size_t{0}) } ->
            std::same_as<typename B::IntTensorPrimitive>;
        { B::float_reshape(f, shape) };
        { B::float_permute(f, axes) };
        { B::float_expand(f, shape) };
        { B::float_slice(f, ranges) };
        { B::float_slice_assign(f, ranges, f) };
        { B::float_flip(f, axes) };
        { B::float_cat(std::vector<typename B::FloatTensorPrimitive>{}, std::size_t{0}) };
        { B::float_repeat_dim(f, std::size_t{0}, std::size_t{1}) };
        { B::float_gather(std::size_t{0}, f, i) };
        { B::float_scatter(std::size_t{0}, f, i, f) };
        { B::float_select(f, std::size_t{0}, i) };
        { B::float_select_assign(f, std::size_t{0}, i, f) };
        { B::float_sort_with_indices(f, std::size_t{0}, true) };
        { B::float_matmul(f, f) } -> std::same_as<typename B::FloatTensorPrimitive>;
        { B::float_into_int(f) } -> std::same_as<typename B::IntTensorPrimitive>;
        { B::float_cast(f, DType::F32) } -> std::same_as<typename B::FloatTensorPrimitive>;
        // int core
        { B::int_from_data(data, dev) } -> std::same_as<typename B::IntTensorPrimitive>;
        { B::int_into_data(i) } -> std::same_as<TensorData>;
        { B::int_binary(BinaryOp::Add, i, i) } -> std::same_as<typename B::IntTensorPrimitive>;
        { B::int_compare(CompareOp::Eq, i, i) } -> std::same_as<typename B::BoolTensorPrimitive>;
        { B::int_reduce_dim(ReduceOp::Sum, i, std::size_t{0}) };
        { B::int_into_float(i) } -> std::same_as<typename B::FloatTensorPrimitive>;
        { B::int_arange(std::int64_t{0}, std::int64_t{1}, std::int64_t{1}, dev) };
        // bool core
        { B::bool_from_data(data, dev) } -> std::same_as<typename B::BoolTensorPrimitive>;
        { B::bool_into_data(b) } -> std::same_as<TensorData>;
        { B::bool_not(b) } -> std::same_as<typename B::BoolTensorPrimitive>;
        { B::bool_into_int(b) } -> std::same_as<typename B::IntTensorPrimitive>;
        { B::bool_into_float(b) } -> std::same_as<typename B::FloatTensorPrimitive>;
        { B::bool_argwhere(b) } -> std::same_as<typename B::IntTensorPrimitive>;
        // module core
        { B::conv2d(f, f, std::optional<typename B::FloatTensorPrimitive>{}, ConvOptions<2>{}) };
        { B::max_pool2d_with_indices(f, PoolOptions<2>{}) };
        { B::interpolate(f, std::array<std::size_t, 2>{}, InterpolateOptions{}) };
    };

/// The gradients of deform_conv2d with respect to each input (mask and bias when given).
template <typename T>
struct DeformConv2dGrads {
    T x;                      ///< dL/dx
    T offset;                 ///< dL/doffset
    T weight;                 ///< dL/dweight
    std::optional<T> mask;    ///< dL/dmask, when a mask was given
    std::optional<T> bias;    ///< dL/dbias, when a bias was given
};

/// The device type of a backend: `ember::Device<ember::Cpu> device{};`.
template <Backend B>
using Device = typename B::Device;

/// A backend that records a graph and backpropagates (Burn's AutodiffBackend): it names the
/// backend it wraps, its gradients container, and the functions behind `Tensor::backward`,
/// `grad`, `grad_remove`, `grad_replace`, `inner` and `from_inner`. Int and bool primitives
/// are the inner backend's.
template <typename B>
concept AutodiffBackend =
    Backend<B> && Backend<typename B::InnerBackend> &&
    std::same_as<typename B::IntTensorPrimitive, typename B::InnerBackend::IntTensorPrimitive> &&
    std::same_as<typename B::BoolTensorPrimitive,
                 typename B::InnerBackend::BoolTensorPrimitive> &&
    requires(typename B::FloatTensorPrimitive f,
             typename B::InnerBackend::FloatTensorPrimitive inner, typename B::Gradients& grads,
             const typename B::Gradients& cgrads) {
        { B::backward(f) } -> std::same_as<typename B::Gradients>;
        { B::grad(f, cgrads) } ->
            std::same_as<std::optional<typename B::InnerBackend::FloatTensorPrimitive>>;
        { B::grad_remove(f, grads) } ->
            std::same_as<std::optional<typename B::InnerBackend::FloatTensorPrimitive>>;
        B::grad_replace(f, grads, inner);
        { B::inner(f) } -> std::same_as<typename B::InnerBackend::FloatTensorPrimitive>;
        { B::from_inner(inner) } -> std::same_as<typename B::FloatTensorPrimitive>;
    };

namespace detail {
template <typename B>
struct InnerBackendOf {
    using type = B;
};
template <AutodiffBackend B>
struct InnerBackendOf<B> {
    using type = typename B::InnerBackend;
};
}  // namespace detail

/// Whether ops on `device` record a graph for backward(): an autodiff backend's always do, a
/// plain backend's never; a backend that decides at run time (ember::Dispatch, whose device
/// names its stack) says so with `static bool ad_enabled(const Device&)`. Training-only layers
/// (dropout, batch statistics) ask this.
template <typename B>
bool ad_enabled(const typename B::Device& device) {
    if constexpr (requires { { B::ad_enabled(device) } -> std::convertible_to<bool>; })
        return B::ad_enabled(device);
    else
        return AutodiffBackend<B>;
}

/// The backend under an autodiff backend; a backend without autodiff is its own inner backend.
template <Backend B>
using InnerBackend = typename detail::InnerBackendOf<B>::type;

/// Where a backend's tensors live, as libraries that reach memory directly see it.
enum class MemorySpace : std::uint8_t {
    Host,  ///< process memory (read through into_data / from_data)
    Cuda,  ///< a CUDA device's memory (NCCL may read and write it in place)
};
/// A primitive's elements lent in place (Backend hook `lend_memory`): contiguous, row-major and
/// the lending handle's alone, valid while that handle lives.
struct LentMemory {
    void* data = nullptr;                   ///< the first element
    MemorySpace space = MemorySpace::Host;  ///< where it lives
    int device = 0;                         ///< the device ordinal
};

/// The tensors one Transaction reads, by kind, as a backend's primitives (Burn's
/// TransactionPrimitive); the backend hook `tr_execute` reads them all.
template <typename F, typename I, typename Bo>
struct TransactionPrimitive {
    std::vector<F> floats;  ///< float tensors, in registration order
    std::vector<I> ints;    ///< int tensors
    std::vector<Bo> bools;  ///< bool tensors
};
/// What `tr_execute` read: the data of each tensor of a TransactionPrimitive, in its order.
struct TransactionData {
    std::vector<TensorData> floats;  ///< of the float tensors
    std::vector<TensorData> ints;    ///< of the int tensors
    std::vector<TensorData> bools;   ///< of the bool tensors
};

/// Default implementations, composed from the core ops of `Self` (CRTP). Backends and
/// decorators derive from it and override any function by declaring one of the same name.
/// The quantized ops (quantize, dequantize, q_matmul, q_linear, ...) come from
/// quant::QuantizedOps, so every backend holds quantized tensors without writing anything.
template <typename Self>
struct BackendBase : quant::QuantizedOps<Self> {
    /// Lends `t`'s elements in place to a library that reaches the backend's memory itself (the
    /// collectives: NCCL on CUDA buffers). A backend that lends makes `t` contiguous and its
    /// handle's alone first; the default lends nothing, and callers go through into_data.
    template <typename P>
    static std::optional<LentMemory> lend_memory(P&) {
        return std::nullopt;
    }
    /// Reads every tensor of a Transaction. The default reads them one by one (into_data each);
    /// asynchronous backends override it to queue every copy and wait once.
    template <typename F, typename I, typename Bo>
    static TransactionData tr_execute(TransactionPrimitive<F, I, Bo> p) {
        TransactionData out;
        for (auto& t : p.floats) out.floats.push_back(Self::float_into_data(std::move(t)));
        for (auto& t : p.ints) out.ints.push_back(Self::int_into_data(std::move(t)));
        for (auto& t : p.bools) out.bools.push_back(Self::bool_into_data(std::move(t)));
        return out;
    }
#define EMBER_DEFAULT_UNARY(prefix, name, OP)                                  \
    template <typename T>                                                      \
    static T prefix##_##name(T t) {                                            \
        return Self::prefix##_unary(UnaryOp::OP, std::move(t));                \
    }
#define EMBER_DEFAULT_BINARY(prefix, name, OP)                                 \
    template <typename T>                                                      \
    static T prefix##_##name(T a, T b) {                                       \
        return Self::prefix##_binary(BinaryOp::OP, std::move(a), std::move(b)); \
    }                                                                          \
    template <typename T>                                                      \
    static T prefix##_##name##_scalar(T a, Scalar s) {                         \
        return Self::prefix##_binary_scalar(BinaryOp::OP, std::move(a), s);    \
    }
    EMBER_DEFAULT_UNARY(float, neg, Neg)
    EMBER_DEFAULT_UNARY(float, abs, Abs)
    EMBER_DEFAULT_UNARY(float, exp, Exp)
    EMBER_DEFAULT_UNARY(float, log, Log)
    EMBER_DEFAULT_UNARY(float, log1p, Log1p)
    EMBER_DEFAULT_UNARY(float, sqrt, Sqrt)
    EMBER_DEFAULT_UNARY(float, sin, Sin)
    EMBER_DEFAULT_UNARY(float, cos, Cos)
    EMBER_DEFAULT_UNARY(float, tanh, Tanh)
    EMBER_DEFAULT_UNARY(float, erf, Erf)
    EMBER_DEFAULT_UNARY(float, recip, Recip)
    EMBER_DEFAULT_UNARY(float, floor, Floor)
    EMBER_DEFAULT_UNARY(float, ceil, Ceil)
    EMBER_DEFAULT_UNARY(float, round, Round)
    EMBER_DEFAULT_UNARY(float, sign, Sign)
    EMBER_DEFAULT_UNARY(float, sigmoid, Sigmoid)
    EMBER_DEFAULT_UNARY(float, relu, Relu)
    EMBER_DEFAULT_UNARY(float, gelu, Gelu)
    EMBER_DEFAULT_UNARY(int, neg, Neg)
    EMBER_DEFAULT_UNARY(int, abs, Abs)
    EMBER_DEFAULT_UNARY(int, sign, Sign)
    // Burn's bitwise int ops (int_bitwise_and, int_bitwise_and_scalar, ...): the logical op
    // codes act bitwise on int tensors, and Shl/Shr shift (see BinaryOp for out-of-range shifts).
    EMBER_DEFAULT_UNARY(int, bitwise_not, Not)
    EMBER_DEFAULT_BINARY(float, add, Add)
    EMBER_DEFAULT_BINARY(float, sub, Sub)
    EMBER_DEFAULT_BINARY(float, mul, Mul)
    EMBER_DEFAULT_BINARY(float, div, Div)
    EMBER_DEFAULT_BINARY(float, remainder, Rem)
    EMBER_DEFAULT_BINARY(float, powf, Pow)
    EMBER_DEFAULT_BINARY(float, max_pair, Max)
    EMBER_DEFAULT_BINARY(float, min_pair, Min)
    EMBER_DEFAULT_BINARY(int, add, Add)
    EMBER_DEFAULT_BINARY(int, sub, Sub)
    EMBER_DEFAULT_BINARY(int, mul, Mul)
    EMBER_DEFAULT_BINARY(int, div, Div)
    EMBER_DEFAULT_BINARY(int, remainder, Rem)
    EMBER_DEFAULT_BINARY(int, powi, Pow)
    EMBER_DEFAULT_BINARY(int, max_pair, Max)
    EMBER_DEFAULT_BINARY(int, min_pair, Min)
    EMBER_DEFAULT_BINARY(int, bitwise_and, And)
    EMBER_DEFAULT_BINARY(int, bitwise_or, Or)
    EMBER_DEFAULT_BINARY(int, bitwise_xor, Xor)
    EMBER_DEFAULT_BINARY(int, bitwise_left_shift, Shl)
    EMBER_DEFAULT_BINARY(int, bitwise_right_shift, Shr)
#undef EMBER_DEFAULT_UNARY
#undef EMBER_DEFAULT_BINARY

    /// Marks a float tensor as a leaf whose gradient backward() keeps. A no-op without autodiff.
    template <typename T>
    static T float_set_require_grad(T t, bool) { return t; }
    /// Whether the tensor is a leaf that keeps its gradient: always false without autodiff.
    template <typename T>
    static bool float_is_require_grad(const T&) { return false; }
    /// The same values cut from the graph. A no-op without autodiff.
    template <typename T>
    static T float_detach(T t) { return t; }
    /// Zeros of the backend's float dtype.
    template <typename Dev>
    static auto float_zeros(const Shape& shape, const Dev& d) {
        return Self::float_full(shape, Scalar(0.0), d);
    }
    /// Ones of the backend's float dtype.
    template <typename Dev>
    static auto float_ones(const Shape& shape, const Dev& d) {
        return Self::float_full(shape, Scalar(1.0), d);
    }
    /// x^p with a float exponent.
    template <typename T>
    static T float_powf_scalar_f(T t, double p) {
        return Self::float_binary_scalar(BinaryOp::Pow, std::move(t), Scalar(p));
    }
    /// Sum of all elements, shape [1].
    template <typename T>
    static T float_sum(T t) { return Self::float_reduce(ReduceOp::Sum, std::move(t)); }
    /// Sum along `dim`, kept with size 1.
    template <typename T>
    static T float_sum_dim(T t, std::size_t dim) {
        return Self::float_reduce_dim(ReduceOp::Sum, std::move(t), dim);
    }
    /// Mean along `dim`, kept with size 1.
    template <typename T>
    static T float_mean_dim(T t, std::size_t dim) {
        return Self::float_reduce_dim(ReduceOp::Mean, std::move(t), dim);
    }
    /// Swaps two dims (a view where the backend allows).
    template <typename T>
    static T float_swap_dims(T t, std::size_t a, std::size_t b) {
        std::array<std::size_t, kMaxRank> axes{};
        const std::size_t r = Self::float_shape(t).rank();
        for (std::size_t i = 0; i < r; ++i) axes[i] = i;
        std::swap(axes[a], axes[b]);
        return Self::float_permute(std::move(t), std::span<const std::size_t>(axes.data(), r));
    }
    /// Max along `dim` and where it is: (values, int indices), both keeping `dim`.
    template <typename T>
    static auto float_max_dim_with_indices(T t, std::size_t dim) {
        auto idx = Self::float_arg_reduce(ArgReduceOp::ArgMax, t, dim);
        auto values = Self::float_gather(dim, std::move(t), idx);
        return std::pair{std::move(values), std::move(idx)};
    }
    /// Min along `dim` and where it is.
    template <typename T>
    static auto float_min_dim_with_indices(T t, std::size_t dim) {
        auto idx = Self::float_arg_reduce(ArgReduceOp::ArgMin, t, dim);
        auto values = Self::float_gather(dim, std::move(t), idx);
        return std::pair{std::move(values), std::move(idx)};
    }
    /// Softmax along `dim`, composed (numerically stable: subtracts the max).
    template <typename T>
    static T float_softmax(T t, std::size_t dim) {
        auto m = Self::float_reduce_dim(ReduceOp::Max, t, dim);
        auto e = Self::float_unary(UnaryOp::Exp, Self::float_binary(BinaryOp::Sub, std::move(t), m));
        auto s = Self::float_reduce_dim(ReduceOp::Sum, e, dim);
        return Self::float_binary(BinaryOp::Div, std::move(e), std::move(s));
    }
    /// Log-softmax along `dim`, composed.
    template <typename T>
    static T float_log_softmax(T t, std::size_t dim) {
        auto m = Self::float_reduce_dim(ReduceOp::Max, t, dim);
        auto shifted = Self::float_binary(BinaryOp::Sub, std::move(t), m);
        auto lse = Self::float_unary(
            UnaryOp::Log,
            Self::float_reduce_dim(ReduceOp::Sum, Self::float_unary(UnaryOp::Exp, shifted), dim));
        return Self::float_binary(BinaryOp::Sub, std::move(shifted), std::move(lse));
    }
    /// Layer normalisation over the last dim, composed: {y, mean, rstd} with
    /// y = (x - mean) · rstd · gamma + beta, rstd = 1 / sqrt(biased variance + eps), and mean and
    /// rstd shaped like x with the last dim 1 (kept for the backward pass). gamma and beta are
    /// 1-d over the last dim (either may be absent). Backends with a kernel of their own say so
    /// with `static constexpr bool native_layer_norm = true`.
    template <typename T>
    static std::array<T, 3> float_layer_norm(T x, std::optional<T> gamma, std::optional<T> beta,
                                             double eps) {
        const Shape s = Self::float_shape(x);
        const std::size_t d = s.rank() - 1;
        auto mean = Self::float_reduce_dim(ReduceOp::Mean, x, d);
        // The centered values are recomputed below rather than kept, so that under Fusion the
        // variance is one kernel and the normalisation another, with nothing written between.
        auto c = Self::float_binary(BinaryOp::Sub, x, mean);
        auto sq = Self::float_binary(BinaryOp::Mul, c, c);
        auto var = Self::float_reduce_dim(ReduceOp::Mean, std::move(sq), d);
        auto std_dev = Self::float_unary(
            UnaryOp::Sqrt, Self::float_binary_scalar(BinaryOp::Add, std::move(var), Scalar(eps)));
        auto rstd = Self::float_unary(UnaryOp::Recip, std::move(std_dev));
        auto y = Self::float_binary(BinaryOp::Mul,
                                    Self::float_binary(BinaryOp::Sub, std::move(x), mean), rstd);
        Shape row = Shape::filled(s.rank(), 1);
        row[d] = s[d];
        if (gamma)
            y = Self::float_binary(BinaryOp::Mul, std::move(y), Self::float_reshape(*gamma, row));
        if (beta)
            y = Self::float_binary(BinaryOp::Add, std::move(y), Self::float_reshape(*beta, row));
        return {std::move(y), std::move(mean), std::move(rstd)};
    }
    /// Top-k along `dim` through a full sort; backends override with a selection.
    template <typename T>
    static auto float_topk(T t, std::size_t k, std::size_t dim, bool largest) {
        auto [v, i] = Self::float_sort_with_indices(std::move(t), dim, largest);
        std::array<Slice, kMaxRank> r{};
        r[dim] = Slice{0, static_cast<long>(k)};
        std::span<const Slice> rs(r.data(), dim + 1);
        return std::pair{Self::float_slice(std::move(v), rs), Self::int_slice(std::move(i), rs)};
    }
    /// Embedding lookup: weights [n, d] gathered by indices [b, s] → [b, s, d].
    template <typename T, typename I>
    static T embedding(T weights, I indices) {
        const Shape is = Self::int_shape(indices);
        const Shape ws = Self::float_shape(weights);
        auto flat = Self::int_reshape(std::move(indices), Shape{is.num_elements()});
        auto rows = Self::float_select(std::move(weights), 0, std::move(flat));
        Shape out = is;
        out.push_back(ws[1]);
        return Self::float_reshape(std::move(rows), out);
    }
};

}  // namespace ember
