#pragma once
// ember::Fusion<B>: the decorator that fuses chains of elementwise ops into one kernel (Burn's
// burn-fusion). Elementwise ops — unary, binary, scalar operands, comparisons, where/mask_fill,
// clamp, casts, with broadcasting and strided inputs — are recorded, not run; the first op that
// cannot join the chain (a matmul, a reduction, a read of the data, `sync`) flushes it: the
// live ops become one fused program that B compiles once (cached by structure) and launches.
// Everything else runs on B unchanged. It composes: Autodiff<Fusion<Cpu>> is a stack.
//
//     using B = ember::Fusion<ember::Cpu>;
//     auto y = x * ((x / std::numbers::sqrt2_v<float>).erf() + 1) / 2;   // recorded
//     auto v = y.into_data();                                             // one kernel
//
// The inner backend takes part through the FusionBackend concept below.
#include <array>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "../export.hpp"
#include "../tensor/backend.hpp"
#include "../tensor/fusion_program.hpp"
#include "../tensor/sgd_step.hpp"
#include "detail/stream.hpp"

namespace ember {

/// A backend that can compile and launch a fused elementwise program. Its float, int and bool
/// primitives are one type (the dtype travels with the tensor).
///  - `B::FusedKernel`: a compiled program, cheap to copy (cached by Fusion per program key).
///  - `B::fused_compile(program)`: compiles it.
///  - `B::fused_launch(kernel, program, inputs, scalars, shape)`: runs it over `shape`;
///    `inputs` are already expanded to `shape` (strided views); returns one tensor per output.
///  - `B::fused_input_dense(t)`: whether `t` is laid out densely (vector loads are possible).
template <typename B>
concept FusionBackend =
    Backend<B> && std::same_as<typename B::FloatTensorPrimitive, typename B::IntTensorPrimitive> &&
    std::same_as<typename B::FloatTensorPrimitive, typename B::BoolTensorPrimitive> &&
    requires(const fusion::Program& p, const typename B::FusedKernel& k,
             std::vector<typename B::FloatTensorPrimitive> in, std::span<const Scalar> s,
             const Shape& shape, const typename B::FloatTensorPrimitive& t) {
        { B::fused_compile(p) } -> std::same_as<typename B::FusedKernel>;
        { B::fused_launch(k, p, std::move(in), s, shape) } ->
            std::same_as<std::vector<typename B::FloatTensorPrimitive>>;
        { B::fused_input_dense(t) } -> std::convertible_to<bool>;
    };

/// The primitive of Fusion<B> (float, int and bool alike): a value that is either computed or
/// pending in the op stream.
template <typename B>
struct FusionTensor {
    std::shared_ptr<detail::fusion::Value<B>> value;  ///< shared by copies (Burn's clone)
};

namespace detail::fusion {

/// B's tensor of `t`, computed if pending. A handle that is the last one gives its buffer away,
/// so that B may reuse it in place.
template <typename B>
typename B::FloatTensorPrimitive take(FusionTensor<B> t) {
    const auto& p = Stream<B>::get().materialize(t.value);
    if (t.value.use_count() == 1) return std::move(*t.value->prim);
    return p;
}

/// A computed value wrapping B's tensor.
template <typename B>
FusionTensor<B> make(typename B::FloatTensorPrimitive p) {
    auto v = std::make_shared<Value<B>>();
    v->shape = B::float_shape(p);
    v->dtype = B::float_dtype(p);
    v->device = B::float_device(p);
    v->prim = std::move(p);
    return {std::move(v)};
}

/// `T`, as a type that depends on `A...`.
template <typename T, typename... A>
struct Dependent {
    using type = T;
};

/// What unwrap gives for an argument of type T: B's tensor for a Fusion tensor (also optional
/// or in vectors), the argument itself otherwise. Spelled out rather than deduced: the
/// forwarders below name unwrap in their return types, which every check of the Backend concept
/// on a Fusion stack substitutes (stacks.hpp's extern declarations do, in every file that
/// includes ember.hpp), and a deduced return type would instantiate unwrap's body there, and
/// through take() the whole fusion stream of B.
template <typename B, typename T, typename U = std::remove_cvref_t<T>,
          typename P = typename B::FloatTensorPrimitive>
using Unwrapped = std::conditional_t<
    std::is_same_v<U, FusionTensor<B>>, P,
    std::conditional_t<std::is_same_v<U, std::optional<FusionTensor<B>>>, std::optional<P>,
                       std::conditional_t<std::is_same_v<U, std::vector<FusionTensor<B>>>,
                                          std::vector<P>, T&&>>>;

/// Fusion's arguments as B's: tensors (also optional or in vectors) computed, the rest as is.
template <typename B, typename T>
Unwrapped<B, T> unwrap(T&& x) {
    using U = std::remove_cvref_t<T>;
    using P = typename B::FloatTensorPrimitive;
    if constexpr (std::is_same_v<U, FusionTensor<B>>) {
        return take<B>(std::forward<T>(x));
    } else if constexpr (std::is_same_v<U, std::optional<FusionTensor<B>>>) {
        std::optional<P> r;
        if (x) r = take<B>(*x);
        return r;
    } else if constexpr (std::is_same_v<U, std::vector<FusionTensor<B>>>) {
        std::vector<P> r;
        r.reserve(x.size());
        for (auto& t : x) r.push_back(take<B>(t));
        return r;
    } else {
        return std::forward<T>(x);
    }
}

/// What wrap gives for B's result of type R: Fusion's tensors for B's (also in pairs, triples
/// and deformable-convolution gradients), the value itself otherwise. Spelled out, not deduced,
/// for the reason Unwrapped is.
template <typename B, typename R, typename U = std::remove_cvref_t<R>,
          typename P = typename B::FloatTensorPrimitive>
using Wrapped = std::conditional_t<
    std::is_same_v<U, P>, FusionTensor<B>,
    std::conditional_t<
        std::is_same_v<U, std::pair<P, P>>, std::pair<FusionTensor<B>, FusionTensor<B>>,
        std::conditional_t<
            std::is_same_v<U, std::array<P, 3>>, std::array<FusionTensor<B>, 3>,
            std::conditional_t<std::is_same_v<U, DeformConv2dGrads<P>>,
                               DeformConv2dGrads<FusionTensor<B>>, U>>>>;

/// B's results as Fusion's.
template <typename B, typename R>
Wrapped<B, R> wrap(R&& r) {
    using U = std::remove_cvref_t<R>;
    using P = typename B::FloatTensorPrimitive;
    if constexpr (std::is_same_v<U, P>) {
        return make<B>(std::forward<R>(r));
    } else if constexpr (std::is_same_v<U, std::pair<P, P>>) {
        return std::pair{make<B>(std::move(r.first)), make<B>(std::move(r.second))};
    } else if constexpr (std::is_same_v<U, std::array<P, 3>>) {
        return std::array<FusionTensor<B>, 3>{make<B>(std::move(r[0])), make<B>(std::move(r[1])),
                                              make<B>(std::move(r[2]))};
    } else if constexpr (std::is_same_v<U, DeformConv2dGrads<P>>) {
        auto opt = [](std::optional<P>& o) {
            return o ? std::optional(make<B>(std::move(*o))) : std::nullopt;
        };
        return DeformConv2dGrads<FusionTensor<B>>{make<B>(std::move(r.x)),
                                                  make<B>(std::move(r.offset)),
                                                  make<B>(std::move(r.weight)), opt(r.mask),
                                                  opt(r.bias)};
    } else {
        return U(std::forward<R>(r));
    }
}

}  // namespace detail::fusion

/// The fusion decorator over backend `B`.
template <FusionBackend B>
struct EMBER_API Fusion : BackendBase<Fusion<B>> {
    using InnerBackend = B;                       ///< the wrapped backend
    using Device = typename B::Device;            ///< B's device
    using FloatTensorPrimitive = FusionTensor<B>;  ///< computed or pending
    using IntTensorPrimitive = FusionTensor<B>;    ///< computed or pending
    using BoolTensorPrimitive = FusionTensor<B>;   ///< computed or pending
    using FloatElem = typename B::FloatElem;      ///< B's
    using IntElem = typename B::IntElem;          ///< B's
    using FT = FusionTensor<B>;
    using P = typename B::FloatTensorPrimitive;
    using V = detail::fusion::Value<B>;
    using Stream = detail::fusion::Stream<B>;
    using OpKind = fusion::OpKind;

    /// "fusion<inner>".
    static std::string name() { return "fusion<" + B::name() + ">"; }
    /// Seeds B's generator.
    static void seed(std::uint64_t s) { B::seed(s); }
    /// Runs what is pending, then waits for B.
    static void sync(const Device& d) {
        Stream::get().flush();
        B::sync(d);
    }
    /// Runs what is pending (without waiting for B).
    static void flush() { Stream::get().flush(); }
    /// Lends B's memory of `t` (computed first, when pending) where B lends it.
    static std::optional<LentMemory> lend_memory(FT& t) {
        P p = detail::fusion::take<B>(std::move(t));
        std::optional<LentMemory> m = B::lend_memory(p);
        t = detail::fusion::make<B>(std::move(p));
        return m;
    }

    // ---- data and metadata: never force a pending value ----
    static FT float_from_data(const TensorData& d, const Device& dev) { return make(B::float_from_data(d, dev)); }
    static FT int_from_data(const TensorData& d, const Device& dev) { return make(B::int_from_data(d, dev)); }
    static FT bool_from_data(const TensorData& d, const Device& dev) { return make(B::bool_from_data(d, dev)); }
    static TensorData float_into_data(FT t) { return B::float_into_data(take(std::move(t))); }
    static TensorData int_into_data(FT t) { return B::int_into_data(take(std::move(t))); }
    static TensorData bool_into_data(FT t) { return B::bool_into_data(take(std::move(t))); }
    /// Runs what is pending, then reads a Transaction's tensors through B's tr_execute.
    static TransactionData tr_execute(TransactionPrimitive<FT, FT, FT> p) {
        TransactionPrimitive<P, P, P> q;
        const auto inner = [](std::vector<FT>& from, std::vector<P>& to) {
            to.reserve(from.size());
            for (auto& t : from) to.push_back(take(std::move(t)));
        };
        inner(p.floats, q.floats);
        inner(p.ints, q.ints);
        inner(p.bools, q.bools);
        return B::tr_execute(std::move(q));
    }
    static Shape float_shape(const FT& t) { return t.value->shape; }
    static Shape int_shape(const FT& t) { return t.value->shape; }
    static Shape bool_shape(const FT& t) { return t.value->shape; }
    static DType float_dtype(const FT& t) { return t.value->dtype; }
    static DType int_dtype(const FT& t) { return t.value->dtype; }
    static DType bool_dtype(const FT& t) { return t.value->dtype; }
    static Device float_device(const FT& t) { return t.value->device; }
    static Device int_device(const FT& t) { return t.value->device; }
    static Device bool_device(const FT& t) { return t.value->device; }

    // ---- fused: elementwise ops are recorded ----
    static FT float_unary(UnaryOp op, FT x) {
        if (float_ok(x) && op != UnaryOp::Not)
            return lazy(OpKind::Unary, op, op == UnaryOp::IsNan ? DType::Bool : dt(x), x, {x});
        return eager([&] { return B::float_unary(op, take(std::move(x))); });
    }
    static FT int_unary(UnaryOp op, FT x) {
        if (int_ok(x) &&
            (op == UnaryOp::Neg || op == UnaryOp::Abs || op == UnaryOp::Sign || op == UnaryOp::Not))
            return lazy(OpKind::Unary, op, dt(x), x, {x});
        return eager([&] { return B::int_unary(op, take(std::move(x))); });
    }
    static FT bool_not(FT x) {
        if (bool_ok(x)) return lazy(OpKind::Unary, UnaryOp::Not, DType::Bool, x, {x});
        return eager([&] { return B::bool_not(take(std::move(x))); });
    }
    static FT float_binary(BinaryOp op, FT a, FT b) {
        if (float_ok(a) && dt(a) == dt(b) && op <= BinaryOp::Min)
            if (auto s = shape_of(a, b)) return lazy(OpKind::Binary, op, dt(a), *s, {a, b});
        return eager([&] { return B::float_binary(op, take(std::move(a)), take(std::move(b))); });
    }
    static FT int_binary(BinaryOp op, FT a, FT b) {
        if (int_ok(a) && dt(b) == dt(a) && int_safe(op) && op != BinaryOp::RSub)
            if (auto s = shape_of(a, b)) return lazy(OpKind::Binary, op, dt(a), *s, {a, b});
        return eager([&] { return B::int_binary(op, take(std::move(a)), take(std::move(b))); });
    }
    static FT bool_binary(BinaryOp op, FT a, FT b) {
        if (bool_ok(a) && bool_ok(b) &&
            (op == BinaryOp::And || op == BinaryOp::Or || op == BinaryOp::Xor))
            if (auto s = shape_of(a, b)) return lazy(OpKind::Binary, op, DType::Bool, *s, {a, b});
        return eager([&] { return B::bool_binary(op, take(std::move(a)), take(std::move(b))); });
    }
    static FT float_binary_scalar(BinaryOp op, FT a, Scalar s) {
        if (float_ok(a) && float_safe(op))
            return lazy(OpKind::BinaryScalar, op, dt(a), a, {a}, {s});
        return eager([&] { return B::float_binary_scalar(op, take(std::move(a)), s); });
    }
    static FT int_binary_scalar(BinaryOp op, FT a, Scalar s) {
        if (int_ok(a) && int_safe(op)) return lazy(OpKind::BinaryScalar, op, dt(a), a, {a}, {s});
        return eager([&] { return B::int_binary_scalar(op, take(std::move(a)), s); });
    }
    static FT float_compare(CompareOp op, FT a, FT b) {
        const bool ok = float_ok(a);  // before `a` is moved: argument order is unspecified
        return compare(op, std::move(a), std::move(b), ok);
    }
    static FT int_compare(CompareOp op, FT a, FT b) {
        const bool ok = int_ok(a);  // before `a` is moved: argument order is unspecified
        return compare(op, std::move(a), std::move(b), ok);
    }
    static FT bool_compare(CompareOp op, FT a, FT b) {
        const bool ok = bool_ok(a);  // before `a` is moved: argument order is unspecified
        return compare(op, std::move(a), std::move(b), ok);
    }
    static FT float_compare_scalar(CompareOp op, FT a, Scalar s) {
        if (float_ok(a)) return lazy(OpKind::CompareScalar, op, DType::Bool, a, {a}, {s});
        return eager([&] { return B::float_compare_scalar(op, take(std::move(a)), s); });
    }
    static FT int_compare_scalar(CompareOp op, FT a, Scalar s) {
        if (int_ok(a)) return lazy(OpKind::CompareScalar, op, DType::Bool, a, {a}, {s});
        return eager([&] { return B::int_compare_scalar(op, take(std::move(a)), s); });
    }
    static FT float_mask_where(FT t, FT mask, FT value) {
        const bool ok = float_ok(t);  // before `t` is moved: argument order is unspecified
        return where(std::move(t), std::move(mask), std::move(value), ok);
    }
    static FT int_mask_where(FT t, FT mask, FT value) {
        const bool ok = int_ok(t);  // before `t` is moved: argument order is unspecified
        return where(std::move(t), std::move(mask), std::move(value), ok);
    }
    static FT bool_mask_where(FT t, FT mask, FT value) {
        const bool ok = bool_ok(t);  // before `t` is moved: argument order is unspecified
        return where(std::move(t), std::move(mask), std::move(value), ok);
    }
    static FT float_mask_fill(FT t, FT mask, Scalar s) {
        if (float_ok(t) && mask_fits(t, mask)) return lazy(OpKind::MaskFill, 0, dt(t), t, {t, mask}, {s});
        return eager([&] { return B::float_mask_fill(take(std::move(t)), take(std::move(mask)), s); });
    }
    static FT int_mask_fill(FT t, FT mask, Scalar s) {
        if (int_ok(t) && mask_fits(t, mask)) return lazy(OpKind::MaskFill, 0, dt(t), t, {t, mask}, {s});
        return eager([&] { return B::int_mask_fill(take(std::move(t)), take(std::move(mask)), s); });
    }
    static FT float_clamp(FT t, Scalar lo, Scalar hi) {
        if (float_ok(t) && lo.f <= hi.f) return lazy(OpKind::Clamp, 0, dt(t), t, {t}, {lo, hi});
        return eager([&] { return B::float_clamp(take(std::move(t)), lo, hi); });
    }
    static FT int_clamp(FT t, Scalar lo, Scalar hi) {
        if (int_ok(t) && lo.i <= hi.i) return lazy(OpKind::Clamp, 0, dt(t), t, {t}, {lo, hi});
        return eager([&] { return B::int_clamp(take(std::move(t)), lo, hi); });
    }
    static FT float_cast(FT t, DType d) {
        if (float_ok(t) && (d == DType::F32 || d == DType::F64)) {
            if (d == dt(t)) return t;
            return lazy(OpKind::Cast, 0, d, t, {t});
        }
        return eager([&] { return B::float_cast(take(std::move(t)), d); });
    }
    static FT float_into_int(FT t) {
        if (float_ok(t)) return lazy(OpKind::Cast, 0, DType::I64, t, {t});
        return eager([&] { return B::float_into_int(take(std::move(t))); });
    }
    static FT int_into_float(FT t) {
        if (int_ok(t)) return lazy(OpKind::Cast, 0, float_elem(), t, {t});
        return eager([&] { return B::int_into_float(take(std::move(t))); });
    }
    static FT bool_into_float(FT t) {
        if (bool_ok(t)) return lazy(OpKind::Cast, 0, float_elem(), t, {t});
        return eager([&] { return B::bool_into_float(take(std::move(t))); });
    }
    static FT bool_into_int(FT t) {
        if (bool_ok(t)) return lazy(OpKind::Cast, 0, DType::I64, t, {t});
        return eager([&] { return B::bool_into_int(take(std::move(t))); });
    }

    // ---- everything else runs on B, its operands computed first ----
    // B's function is named through a type that depends on the arguments, so that an op B
    // lacks (an optional capability such as float_adam_step) is simply absent here too.
#define EMBER_FUSION_FORWARD(name)                                                               \
    template <typename... A, typename Inner = typename detail::fusion::Dependent<B, A...>::type> \
    static auto name(A&&... a)                                                                   \
        -> decltype(detail::fusion::wrap<B>(Inner::name(detail::fusion::unwrap<B>(std::forward<A>(a))...))) { \
        fusion::detail::count_launch(false, 1);                                                  \
        return detail::fusion::wrap<B>(Inner::name(detail::fusion::unwrap<B>(std::forward<A>(a))...)); \
    }
    EMBER_FUSION_FORWARD(float_to_device)
    EMBER_FUSION_FORWARD(float_empty)
    EMBER_FUSION_FORWARD(float_full)
    EMBER_FUSION_FORWARD(float_random)
    EMBER_FUSION_FORWARD(float_reduce)
    /// A reduction along the last dim of a pending chain ends the chain's kernel, where B
    /// fuses reductions (`B::fused_reductions`): what is reduced is written out only when
    /// something else still holds it. Other reductions run on B.
    static FT float_reduce_dim(ReduceOp op, FT t, std::size_t dim) {
        if constexpr (requires { requires B::fused_reductions; }) {
            const V& v = *t.value;
            const bool fusable = op == ReduceOp::Sum || op == ReduceOp::Mean ||
                                 op == ReduceOp::Max || op == ReduceOp::Min;
            if (fusable && !v.prim && (v.dtype == DType::F32 || v.dtype == DType::F64) &&
                v.shape.rank() >= 1 && dim + 1 == v.shape.rank() && v.shape.num_elements() > 0)
                if (auto r = Stream::get().reduce_last_dim(t.value, op)) return make(std::move(*r));
        }
        fusion::detail::count_launch(false, 1);
        return make(B::float_reduce_dim(op, take(std::move(t)), dim));
    }
    EMBER_FUSION_FORWARD(float_arg_reduce)
    EMBER_FUSION_FORWARD(float_softmax)
    EMBER_FUSION_FORWARD(float_log_softmax)
    /// Layer norm: B's own kernel where it has one (`B::native_layer_norm`); otherwise composed
    /// from Fusion's ops, whose chains and reductions then fuse.
    static std::array<FT, 3> float_layer_norm(FT x, std::optional<FT> gamma,
                                              std::optional<FT> beta, double eps) {
        if constexpr (requires { requires B::native_layer_norm; }) {
            fusion::detail::count_launch(false, 1);
            auto r = B::float_layer_norm(take(std::move(x)), detail::fusion::unwrap<B>(gamma),
                                         detail::fusion::unwrap<B>(beta), eps);
            return detail::fusion::wrap<B>(std::move(r));
        } else {
            return BackendBase<Fusion<B>>::float_layer_norm(std::move(x), std::move(gamma),
                                                            std::move(beta), eps);
        }
    }
    EMBER_FUSION_FORWARD(float_adam_step)
    EMBER_FUSION_FORWARD(float_sgd_step)
    // The multi-tensor and batch-norm ops are member templates (I is B) so that an explicit
    // instantiation of Fusion<X> leaves them out where X has none (Clang before 16 instantiated
    // constrained members whose constraints fail).
    /// B's multi-tensor Adam step, on the computed tensors.
    template <typename I = B>
    requires requires(std::vector<std::array<typename I::FloatTensorPrimitive, 4>> t,
                      const std::vector<AdamStepsScalars>& a) {
        I::float_adam_steps(t, a);
    }
    static std::vector<std::array<FT, 3>> float_adam_steps(
        std::vector<std::array<FT, 4>> tensors, const std::vector<AdamStepsScalars>& scalars) {
        std::vector<std::array<typename I::FloatTensorPrimitive, 4>> in;
        in.reserve(tensors.size());
        for (auto& t : tensors)
            in.push_back({take(std::move(t[0])), take(std::move(t[1])), take(std::move(t[2])),
                          take(std::move(t[3]))});
        fusion::detail::count_launch(false, 1);
        auto r = I::float_adam_steps(std::move(in), scalars);
        std::vector<std::array<FT, 3>> out;
        out.reserve(r.size());
        for (auto& u : r) out.push_back(detail::fusion::wrap<I>(std::move(u)));
        return out;
    }
    /// B's multi-tensor SGD step, on the computed tensors.
    template <typename I = B>
    requires requires(std::vector<std::array<typename I::FloatTensorPrimitive, 3>> t,
                      const std::vector<SgdStepScalars>& a) {
        I::float_sgd_steps(t, a);
    }
    static std::vector<std::array<FT, 2>> float_sgd_steps(
        std::vector<std::array<FT, 3>> tensors, const std::vector<SgdStepScalars>& scalars) {
        std::vector<std::array<typename I::FloatTensorPrimitive, 3>> in;
        in.reserve(tensors.size());
        for (auto& t : tensors)
            in.push_back({take(std::move(t[0])), take(std::move(t[1])), take(std::move(t[2]))});
        fusion::detail::count_launch(false, 1);
        auto r = I::float_sgd_steps(std::move(in), scalars);
        std::vector<std::array<FT, 2>> out;
        out.reserve(r.size());
        for (auto& u : r)
            out.push_back({detail::fusion::make<I>(std::move(u[0])),
                           detail::fusion::make<I>(std::move(u[1]))});
        return out;
    }
    /// B's batch-norm kernels (where it has them), on the computed operands.
    template <typename I = B>
    requires BatchNormBackend<I>
    static std::optional<std::array<FT, 5>> float_batch_norm(FT x, FT gamma, FT beta,
                                                             FT running_mean, FT running_var,
                                                             const BatchNormScalars& s) {
        fusion::detail::count_launch(false, 1);
        auto r =
            I::float_batch_norm(take(std::move(x)), take(std::move(gamma)), take(std::move(beta)),
                                take(std::move(running_mean)), take(std::move(running_var)), s);
        if (!r) return std::nullopt;
        std::array<FT, 5> out;
        for (std::size_t i = 0; i < 5; ++i) out[i] = make(std::move((*r)[i]));
        return out;
    }
    /// B's batch-norm gradient kernels.
    template <typename I = B>
    requires BatchNormBackend<I>
    static std::array<FT, 3> float_batch_norm_backward(FT x, FT grad, FT gamma, FT mean, FT rstd) {
        fusion::detail::count_launch(false, 1);
        return detail::fusion::wrap<I>(I::float_batch_norm_backward(
            take(std::move(x)), take(std::move(grad)), take(std::move(gamma)),
            take(std::move(mean)), take(std::move(rstd))));
    }
    /// B's eval-mode batch-norm kernel.
    template <typename I = B>
    requires BatchNormBackend<I>
    static std::optional<FT> float_batch_norm_eval(FT x, FT gamma, FT beta, FT mean, FT var,
                                                   double eps) {
        fusion::detail::count_launch(false, 1);
        auto r = I::float_batch_norm_eval(take(std::move(x)), take(std::move(gamma)),
                                          take(std::move(beta)), take(std::move(mean)),
                                          take(std::move(var)), eps);
        if (!r) return std::nullopt;
        return make(std::move(*r));
    }
    EMBER_FUSION_FORWARD(float_reshape)
    EMBER_FUSION_FORWARD(float_permute)
    EMBER_FUSION_FORWARD(float_expand)
    EMBER_FUSION_FORWARD(float_slice)
    EMBER_FUSION_FORWARD(float_slice_assign)
    EMBER_FUSION_FORWARD(float_flip)
    EMBER_FUSION_FORWARD(float_cat)
    EMBER_FUSION_FORWARD(float_repeat_dim)
    EMBER_FUSION_FORWARD(float_gather)
    EMBER_FUSION_FORWARD(float_scatter)
    EMBER_FUSION_FORWARD(float_select)
    EMBER_FUSION_FORWARD(float_select_assign)
    EMBER_FUSION_FORWARD(float_sort_with_indices)
    EMBER_FUSION_FORWARD(float_topk)
    /// A 2-D f32 matmul is put off until its result is read, where B takes epilogues
    /// (`B::fused_matmul_epilogue`): a bias add and/or relu recorded on it then run inside it,
    /// and its result never exists on its own. Otherwise (and with epilogues turned off) B's.
    static FT float_matmul(FT a, FT b) {
        if constexpr (detail::fusion::MatmulEpilogueBackend<B>) {
            const V& va = *a.value;
            const V& vb = *b.value;
            if (fusion::matmul_epilogues() && va.dtype == DType::F32 && vb.dtype == DType::F32 &&
                va.shape.rank() == 2 && vb.shape.rank() == 2 && va.shape[1] == vb.shape[0] &&
                va.shape.num_elements() > 0 && vb.shape.num_elements() > 0 &&
                va.device == vb.device) {
                Stream& st = Stream::get();
                st.materialize(a.value);
                st.materialize(b.value);
                auto v = std::make_shared<V>();
                v->shape = Shape{va.shape[0], vb.shape[1]};
                v->dtype = DType::F32;
                v->device = va.device;
                v->args = {a.value, b.value, nullptr};
                v->deferred_matmul = true;
                return {std::move(v)};
            }
        }
        fusion::detail::count_launch(false, 1);
        return make(B::float_matmul(take(std::move(a)), take(std::move(b))));
    }
    EMBER_FUSION_FORWARD(int_to_device)
    EMBER_FUSION_FORWARD(int_empty)
    EMBER_FUSION_FORWARD(int_full)
    EMBER_FUSION_FORWARD(int_random)
    EMBER_FUSION_FORWARD(int_arange)
    EMBER_FUSION_FORWARD(int_reduce)
    EMBER_FUSION_FORWARD(int_reduce_dim)
    EMBER_FUSION_FORWARD(int_arg_reduce)
    EMBER_FUSION_FORWARD(int_reshape)
    EMBER_FUSION_FORWARD(int_permute)
    EMBER_FUSION_FORWARD(int_expand)
    EMBER_FUSION_FORWARD(int_slice)
    EMBER_FUSION_FORWARD(int_slice_assign)
    EMBER_FUSION_FORWARD(int_flip)
    EMBER_FUSION_FORWARD(int_cat)
    EMBER_FUSION_FORWARD(int_repeat_dim)
    EMBER_FUSION_FORWARD(int_gather)
    EMBER_FUSION_FORWARD(int_scatter)
    EMBER_FUSION_FORWARD(int_select)
    EMBER_FUSION_FORWARD(int_select_assign)
    EMBER_FUSION_FORWARD(int_sort_with_indices)
    EMBER_FUSION_FORWARD(int_topk)
    EMBER_FUSION_FORWARD(int_matmul)
    EMBER_FUSION_FORWARD(int_cast)
    EMBER_FUSION_FORWARD(bool_to_device)
    EMBER_FUSION_FORWARD(bool_empty)
    EMBER_FUSION_FORWARD(bool_full)
    EMBER_FUSION_FORWARD(bool_reduce)
    EMBER_FUSION_FORWARD(bool_reduce_dim)
    EMBER_FUSION_FORWARD(bool_reshape)
    EMBER_FUSION_FORWARD(bool_permute)
    EMBER_FUSION_FORWARD(bool_expand)
    EMBER_FUSION_FORWARD(bool_slice)
    EMBER_FUSION_FORWARD(bool_slice_assign)
    EMBER_FUSION_FORWARD(bool_flip)
    EMBER_FUSION_FORWARD(bool_cat)
    EMBER_FUSION_FORWARD(bool_repeat_dim)
    EMBER_FUSION_FORWARD(bool_gather)
    EMBER_FUSION_FORWARD(bool_select)
    EMBER_FUSION_FORWARD(bool_argwhere)
    EMBER_FUSION_FORWARD(conv1d)
    EMBER_FUSION_FORWARD(conv2d)
    EMBER_FUSION_FORWARD(conv3d)
    EMBER_FUSION_FORWARD(conv_transpose1d)
    EMBER_FUSION_FORWARD(conv_transpose2d)
    EMBER_FUSION_FORWARD(conv_transpose3d)
    EMBER_FUSION_FORWARD(deform_conv2d)
    EMBER_FUSION_FORWARD(avg_pool1d)
    EMBER_FUSION_FORWARD(avg_pool2d)
    EMBER_FUSION_FORWARD(max_pool1d)
    EMBER_FUSION_FORWARD(max_pool2d)
    EMBER_FUSION_FORWARD(max_pool1d_with_indices)
    EMBER_FUSION_FORWARD(max_pool2d_with_indices)
    EMBER_FUSION_FORWARD(adaptive_avg_pool1d)
    EMBER_FUSION_FORWARD(adaptive_avg_pool2d)
    EMBER_FUSION_FORWARD(interpolate)
    EMBER_FUSION_FORWARD(conv1d_weight_backward)
    EMBER_FUSION_FORWARD(conv2d_weight_backward)
    EMBER_FUSION_FORWARD(conv3d_weight_backward)
    EMBER_FUSION_FORWARD(avg_pool1d_backward)
    EMBER_FUSION_FORWARD(avg_pool2d_backward)
    EMBER_FUSION_FORWARD(adaptive_avg_pool1d_backward)
    EMBER_FUSION_FORWARD(adaptive_avg_pool2d_backward)
    EMBER_FUSION_FORWARD(interpolate_backward)
    EMBER_FUSION_FORWARD(deform_conv2d_backward)
#undef EMBER_FUSION_FORWARD

private:
    static P take(FT t) { return detail::fusion::take<B>(std::move(t)); }
    static FT make(P p) { return detail::fusion::make<B>(std::move(p)); }
    template <typename F>
    static FT eager(F&& f) {
        fusion::detail::count_launch(false, 1);
        return make(f());
    }
    static DType dt(const FT& t) { return t.value->dtype; }
    static bool nonempty(const FT& t) { return t.value->shape.num_elements() > 0; }
    // Kernels compute f32, f64, i64 and bool; other dtypes (f16, i32...) run on B.
    static bool float_ok(const FT& t) {
        return nonempty(t) && (dt(t) == DType::F32 || dt(t) == DType::F64);
    }
    static bool int_ok(const FT& t) { return nonempty(t) && dt(t) == DType::I64; }
    static bool bool_ok(const FT& t) { return nonempty(t) && dt(t) == DType::Bool; }
    // The int ops whose kernels check no operand values (integer division and powers do, which
    // B must see eagerly), the bitwise ones included.
    static bool int_safe(BinaryOp op) {
        return op == BinaryOp::Add || op == BinaryOp::Sub || op == BinaryOp::Mul ||
               op == BinaryOp::Max || op == BinaryOp::Min || op == BinaryOp::RSub ||
               op == BinaryOp::And || op == BinaryOp::Or || op == BinaryOp::Xor ||
               op == BinaryOp::Shl || op == BinaryOp::Shr;
    }
    // The float ops (not the bitwise ones, whose error the backend raises, eagerly).
    static bool float_safe(BinaryOp op) {
        return op <= BinaryOp::Min || (op >= BinaryOp::RSub && op <= BinaryOp::RRem);
    }
    static DType float_elem() {
        return sizeof(typename B::FloatElem) == 8 ? DType::F64 : DType::F32;
    }
    static std::optional<Shape> shape_of(const FT& a, const FT& b) {
        return detail::fusion::broadcast(a.value->shape, b.value->shape);
    }
    static bool mask_fits(const FT& t, const FT& mask) {
        auto s = shape_of(t, mask);
        return dt(mask) == DType::Bool && s && *s == t.value->shape;
    }
    template <typename Code>
    static FT lazy(OpKind k, Code code, DType d, const FT& shape_from, std::array<FT, 3> args,
                   std::array<Scalar, 2> s = {}) {
        return lazy(k, code, d, shape_from.value->shape, std::move(args), s);
    }
    template <typename Code>
    static FT lazy(OpKind k, Code code, DType d, const Shape& shape, std::array<FT, 3> args,
                   std::array<Scalar, 2> s = {}) {
        return FT{Stream::get().record(k, static_cast<std::uint8_t>(code), d, shape,
                                       {std::move(args[0].value), std::move(args[1].value),
                                        std::move(args[2].value)},
                                       s)};
    }
    static FT compare(CompareOp op, FT a, FT b, bool ok) {
        if (ok && dt(a) == dt(b))
            if (auto s = shape_of(a, b)) return lazy(OpKind::Compare, op, DType::Bool, *s, {a, b});
        const DType d = dt(a);
        P pa = take(std::move(a)), pb = take(std::move(b));
        if (is_float(d)) return eager([&] { return B::float_compare(op, std::move(pa), std::move(pb)); });
        if (d == DType::Bool) return eager([&] { return B::bool_compare(op, std::move(pa), std::move(pb)); });
        return eager([&] { return B::int_compare(op, std::move(pa), std::move(pb)); });
    }
    static FT where(FT t, FT mask, FT value, bool ok) {
        if (ok && dt(value) == dt(t) && dt(mask) == DType::Bool)
            if (auto s1 = shape_of(t, mask))
                if (auto s = detail::fusion::broadcast(*s1, value.value->shape))
                    return lazy(OpKind::Where, 0, dt(t), *s, {mask, value, t});
        const DType d = dt(t);
        P pt = take(std::move(t)), pm = take(std::move(mask)), pv = take(std::move(value));
        if (is_float(d)) return eager([&] { return B::float_mask_where(std::move(pt), std::move(pm), std::move(pv)); });
        if (d == DType::Bool) return eager([&] { return B::bool_mask_where(std::move(pt), std::move(pm), std::move(pv)); });
        return eager([&] { return B::int_mask_where(std::move(pt), std::move(pm), std::move(pv)); });
    }
};

}  // namespace ember
