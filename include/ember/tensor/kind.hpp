#pragma once
// Tensor kinds and the table that maps each kind's generic op names onto the backend's
// float_/int_/bool_ functions (Burn's BasicOps/Numeric traits).
#include <utility>
#include <vector>

#include "backend.hpp"
#include "detail/operand.hpp"

namespace ember {

/// Floating-point tensors (the default kind).
struct Float {
    static constexpr const char* name = "Float";
};
/// Integer tensors.
struct Int {
    static constexpr const char* name = "Int";
};
/// Boolean tensors.
struct Bool {
    static constexpr const char* name = "Bool";
};
/// One of Float, Int, Bool.
template <typename K>
concept TensorKind = std::same_as<K, Float> || std::same_as<K, Int> || std::same_as<K, Bool>;
/// Float or Int.
template <typename K>
concept NumericKind = std::same_as<K, Float> || std::same_as<K, Int>;

namespace detail {

template <typename B, typename K>
struct KindOps;

// The shape family, identical for every kind but the prefix.
#define EMBER_KIND_BASIC(prefix)                                                                 \
    static P from_data(const TensorData& d, const Device<B>& dev) {                             \
        return B::prefix##_from_data(d, dev);                                                    \
    }                                                                                            \
    static TensorData into_data(A p) { return B::prefix##_into_data(std::move(p)); }           \
    static Shape shape(const P& p) { return B::prefix##_shape(p); }                             \
    static DType dtype(const P& p) { return B::prefix##_dtype(p); }                             \
    static Device<B> device(const P& p) { return B::prefix##_device(p); }                       \
    static P to_device(A p, const Device<B>& d) { return B::prefix##_to_device(std::move(p), d); } \
    static P empty(const Shape& s, const Device<B>& d) { return B::prefix##_empty(s, d); }     \
    static P full(const Shape& s, Scalar v, const Device<B>& d) { return B::prefix##_full(s, v, d); } \
    static P reshape(A p, const Shape& s) { return B::prefix##_reshape(std::move(p), s); }      \
    static P permute(A p, std::span<const std::size_t> a) {                                     \
        return B::prefix##_permute(std::move(p), a);                                             \
    }                                                                                            \
    static P expand(A p, const Shape& s) { return B::prefix##_expand(std::move(p), s); }        \
    static P slice(A p, std::span<const Slice> r) { return B::prefix##_slice(std::move(p), r); } \
    static P slice_assign(A p, std::span<const Slice> r, A v) {                                 \
        return B::prefix##_slice_assign(std::move(p), r, std::move(v));                          \
    }                                                                                            \
    static P flip(A p, std::span<const std::size_t> a) { return B::prefix##_flip(std::move(p), a); } \
    static P cat(std::vector<P> v, std::size_t dim) { return B::prefix##_cat(std::move(v), dim); } \
    static P repeat_dim(A p, std::size_t dim, std::size_t n) {                                  \
        return B::prefix##_repeat_dim(std::move(p), dim, n);                                     \
    }                                                                                            \
    static BoolP compare(CompareOp op, A a, A b) {                                              \
        return B::prefix##_compare(op, std::move(a), std::move(b));                              \
    }                                                                                            \
    static P gather(std::size_t dim, A p, IntA i) {                                             \
        return B::prefix##_gather(dim, std::move(p), std::move(i));                              \
    }                                                                                            \
    static P select(A p, std::size_t dim, IntA i) {                                             \
        return B::prefix##_select(std::move(p), dim, std::move(i));                              \
    }                                                                                            \
    static P mask_where(A p, BoolA m, A v) {                                                    \
        return B::prefix##_mask_where(std::move(p), std::move(m), std::move(v));                 \
    }

// The numeric family (Float and Int).
#define EMBER_KIND_NUMERIC(prefix)                                                               \
    static P unary(UnaryOp op, A p) { return B::prefix##_unary(op, std::move(p)); }             \
    static P binary(BinaryOp op, A a, A b) {                                                    \
        return B::prefix##_binary(op, std::move(a), std::move(b));                               \
    }                                                                                            \
    static P binary_scalar(BinaryOp op, A a, Scalar s) {                                        \
        return B::prefix##_binary_scalar(op, std::move(a), s);                                   \
    }                                                                                            \
    static BoolP compare_scalar(CompareOp op, A a, Scalar s) {                                  \
        return B::prefix##_compare_scalar(op, std::move(a), s);                                  \
    }                                                                                            \
    static P mask_fill(A p, BoolA m, Scalar v) {                                                \
        return B::prefix##_mask_fill(std::move(p), std::move(m), v);                             \
    }                                                                                            \
    static P clamp(A p, Scalar lo, Scalar hi) { return B::prefix##_clamp(std::move(p), lo, hi); } \
    static P reduce(ReduceOp op, A p) { return B::prefix##_reduce(op, std::move(p)); }          \
    static P reduce_dim(ReduceOp op, A p, std::size_t d) {                                      \
        return B::prefix##_reduce_dim(op, std::move(p), d);                                      \
    }                                                                                            \
    static IntP arg_reduce(ArgReduceOp op, A p, std::size_t d) {                                \
        return B::prefix##_arg_reduce(op, std::move(p), d);                                      \
    }                                                                                            \
    static P scatter(std::size_t dim, A p, IntA i, A v) {                                       \
        return B::prefix##_scatter(dim, std::move(p), std::move(i), std::move(v));               \
    }                                                                                            \
    static P select_assign(A p, std::size_t dim, IntA i, A v) {                                 \
        return B::prefix##_select_assign(std::move(p), dim, std::move(i), std::move(v));         \
    }                                                                                            \
    static std::pair<P, IntP> sort_with_indices(A p, std::size_t dim, bool desc) {              \
        return B::prefix##_sort_with_indices(std::move(p), dim, desc);                           \
    }                                                                                            \
    static std::pair<P, IntP> topk(A p, std::size_t k, std::size_t dim, bool largest) {         \
        return B::prefix##_topk(std::move(p), k, dim, largest);                                  \
    }                                                                                            \
    static P random(const Shape& s, const Distribution& d, const Device<B>& dev) {              \
        return B::prefix##_random(s, d, dev);                                                    \
    }                                                                                            \
    static BoolP to_bool(A p) { return compare_scalar(CompareOp::Ne, std::move(p), Scalar(0)); }

template <typename B>
struct KindOps<B, Float> {
    using P = typename B::FloatTensorPrimitive;
    using IntP = typename B::IntTensorPrimitive;
    using BoolP = typename B::BoolTensorPrimitive;
    using A = typename OperandOf<P>::type;         // an operand (OperandOf)
    using IntA = typename OperandOf<IntP>::type;   // an int operand
    using BoolA = typename OperandOf<BoolP>::type; // a bool operand
    using Elem = typename B::FloatElem;
    EMBER_KIND_BASIC(float)
    EMBER_KIND_NUMERIC(float)
    static P from_bool(BoolP b) { return B::bool_into_float(std::move(b)); }
};

template <typename B>
struct KindOps<B, Int> {
    using P = typename B::IntTensorPrimitive;
    using IntP = typename B::IntTensorPrimitive;
    using BoolP = typename B::BoolTensorPrimitive;
    using A = typename OperandOf<P>::type;         // an operand (OperandOf)
    using IntA = typename OperandOf<IntP>::type;   // an int operand
    using BoolA = typename OperandOf<BoolP>::type; // a bool operand
    using Elem = typename B::IntElem;
    EMBER_KIND_BASIC(int)
    EMBER_KIND_NUMERIC(int)
    static P from_bool(BoolP b) { return B::bool_into_int(std::move(b)); }
};

template <typename B>
struct KindOps<B, Bool> {
    using P = typename B::BoolTensorPrimitive;
    using IntP = typename B::IntTensorPrimitive;
    using BoolP = typename B::BoolTensorPrimitive;
    using A = typename OperandOf<P>::type;         // an operand (OperandOf)
    using IntA = typename OperandOf<IntP>::type;   // an int operand
    using BoolA = typename OperandOf<BoolP>::type; // a bool operand
    using Elem = bool;
    EMBER_KIND_BASIC(bool)
    static BoolP to_bool(P p) { return p; }
};

#undef EMBER_KIND_BASIC
#undef EMBER_KIND_NUMERIC

}  // namespace detail
}  // namespace ember
