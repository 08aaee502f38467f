#pragma once
// ember::Autodiff<B>: the decorator that makes any backend differentiable (Burn's
// burn-autodiff). Float primitives carry a graph node; every float op runs on B and, when an
// input is tracked, records a backward step. Int and bool tensors are B's, untouched.
//
//     using B = ember::Autodiff<ember::Cpu>;
//     auto w = ember::Tensor<B, 2>::random({3, 3}, ember::Distribution::Default).require_grad();
//     auto grads = (w * w).sum().backward();
//     auto gw = w.grad(grads);   // std::optional<Tensor<ember::Cpu, 2>>
//
// The member functions are defined in detail/*_ops.hpp; the common stacks are instantiated once
// in the library (extern templates below), so including this header stays cheap.
#include <array>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "../export.hpp"
#include "../tensor/backend.hpp"
#include "../tensor/fusion_program.hpp"
#include "detail/graph.hpp"
#include "gradients.hpp"

namespace ember {

/// Keep every value a backward step needs (the default): the fastest backward.
struct EMBER_API NoCheckpointing {
    static constexpr bool balanced = false;  ///< false: nothing is recomputed
};
/// Gradient checkpointing: memory-bound ops (elementwise, casts, views) keep nothing and are
/// recomputed from their inputs during backward; compute-bound ops (matmul, conv, reductions,
/// softmax) keep what they need. Lower peak memory for a little more backward compute.
struct EMBER_API BalancedCheckpointing {
    static constexpr bool balanced = true;  ///< true: memory-bound ops are recomputed
};
/// A checkpointing strategy (NoCheckpointing or BalancedCheckpointing).
template <typename C>
concept CheckpointStrategy = requires {
    { C::balanced } -> std::convertible_to<bool>;
};

/// The float primitive of Autodiff<B>: B's primitive plus its graph node (null when untracked,
/// i.e. when no gradient can flow through it).
template <typename B>
struct AutodiffTensor {
    typename B::FloatTensorPrimitive primitive;  ///< the value, on the inner backend
    detail::ad::NodeRef<B> node;                 ///< the op (or leaf) that produced it
};

/// The autodiff decorator over backend `B`, with checkpointing strategy `C`.
template <Backend B, CheckpointStrategy C = NoCheckpointing>
struct EMBER_API Autodiff : BackendBase<Autodiff<B, C>> {
    using InnerBackend = B;                           ///< the wrapped backend
    using Gradients = ember::Gradients;               ///< what backward() returns
    using Device = typename B::Device;                ///< B's device
    using FloatTensorPrimitive = AutodiffTensor<B>;   ///< tracked float primitive
    using IntTensorPrimitive = typename B::IntTensorPrimitive;    ///< B's
    using BoolTensorPrimitive = typename B::BoolTensorPrimitive;  ///< B's
    using FloatElem = typename B::FloatElem;          ///< B's
    using IntElem = typename B::IntElem;              ///< B's
    using FT = FloatTensorPrimitive;
    using IFT = typename B::FloatTensorPrimitive;
    using IT = IntTensorPrimitive;
    using BT = BoolTensorPrimitive;

    /// "autodiff<inner>".
    static std::string name() { return "autodiff<" + B::name() + ">"; }
    /// Seeds B's generator.
    static void seed(std::uint64_t s) { B::seed(s); }
    /// Waits for B.
    static void sync(const Device& d) { B::sync(d); }

    // ---- autodiff ----
    /// Backpropagates from `root` (seeded with ones); returns the leaves' gradients.
    static Gradients backward(FT root);
    /// The gradient of `t` in `grads`.
    static std::optional<IFT> grad(const FT& t, const Gradients& grads);
    /// Removes and returns the gradient of `t`.
    static std::optional<IFT> grad_remove(const FT& t, Gradients& grads);
    /// Sets the gradient of `t`.
    static void grad_replace(const FT& t, Gradients& grads, IFT grad);
    /// The value on B.
    static IFT inner(FT t) { return std::move(t.primitive); }
    /// An untracked tensor from B's value.
    static FT from_inner(IFT t) { return FT{std::move(t), nullptr}; }
    /// Makes `t` a leaf that keeps its gradient (or untracks it).
    static FT float_set_require_grad(FT t, bool require);
    /// Whether `t` is a leaf that keeps its gradient.
    static bool float_is_require_grad(const FT& t) { return t.node && t.node->leaf; }
    /// The value, untracked.
    static FT float_detach(FT t) { return from_inner(std::move(t.primitive)); }
    /// The node id of `t` when it is a leaf that keeps its gradient, else 0: what autocast's
    /// cast cache keys a parameter's cast on (ids are never reused).
    static std::uint64_t float_leaf_id(const FT& t) {
        return t.node && t.node->leaf ? t.node->id : 0;
    }
    /// `t`, its node made reusable by several backward passes (autocast's cached casts).
    static FT float_keep_graph(FT t) {
        if (t.node) t.node->reusable = true;
        return t;
    }

    // ---- float: creation and transfer (untracked results) ----
    static FT float_from_data(const TensorData& d, const Device& dev) {
        return from_inner(B::float_from_data(d, dev));
    }
    static TensorData float_into_data(FT t) { return B::float_into_data(std::move(t.primitive)); }
    /// Reads a Transaction's tensors through B's tr_execute (float values untracked).
    static TransactionData tr_execute(TransactionPrimitive<FT, IT, BT> p) {
        TransactionPrimitive<IFT, IT, BT> q{{}, std::move(p.ints), std::move(p.bools)};
        q.floats.reserve(p.floats.size());
        for (auto& t : p.floats) q.floats.push_back(std::move(t.primitive));
        return B::tr_execute(std::move(q));
    }
    static Device float_device(const FT& t) { return B::float_device(t.primitive); }
    static FT float_to_device(FT t, const Device& d);
    static Shape float_shape(const FT& t) { return B::float_shape(t.primitive); }
    static DType float_dtype(const FT& t) { return B::float_dtype(t.primitive); }
    static FT float_empty(const Shape& s, const Device& d) { return from_inner(B::float_empty(s, d)); }
    static FT float_full(const Shape& s, Scalar v, const Device& d) {
        return from_inner(B::float_full(s, v, d));
    }
    static FT float_random(const Shape& s, const Distribution& dist, const Device& d) {
        return from_inner(B::float_random(s, dist, d));
    }

    // ---- float: elementwise ----
    static FT float_unary(UnaryOp op, FT x);
    static FT float_binary(BinaryOp op, FT a, FT b);
    static FT float_binary_scalar(BinaryOp op, FT a, Scalar s);
    static BT float_compare(CompareOp op, FT a, FT b) {
        return B::float_compare(op, std::move(a.primitive), std::move(b.primitive));
    }
    static BT float_compare_scalar(CompareOp op, FT a, Scalar s) {
        return B::float_compare_scalar(op, std::move(a.primitive), s);
    }
    static FT float_mask_where(FT t, BT mask, FT value);
    static FT float_mask_fill(FT t, BT mask, Scalar value);
    static FT float_clamp(FT t, Scalar lo, Scalar hi);
    static FT float_cast(FT t, DType dtype);
    static IT float_into_int(FT t) { return B::float_into_int(std::move(t.primitive)); }

    // ---- float: reductions ----
    static FT float_reduce(ReduceOp op, FT t);
    static FT float_reduce_dim(ReduceOp op, FT t, std::size_t dim);
    static IT float_arg_reduce(ArgReduceOp op, FT t, std::size_t dim) {
        return B::float_arg_reduce(op, std::move(t.primitive), dim);
    }
    static std::pair<FT, IT> float_max_dim_with_indices(FT t, std::size_t dim);
    static std::pair<FT, IT> float_min_dim_with_indices(FT t, std::size_t dim);
    static FT float_softmax(FT t, std::size_t dim);
    static FT float_log_softmax(FT t, std::size_t dim);
    static std::array<FT, 3> float_layer_norm(FT x, std::optional<FT> gamma, std::optional<FT> beta,
                                              double eps);
    /// module::add_layer_norm on B's kernel where B has one: a node for the sum (x and the
    /// residual) and one for the norm of the sum (with gamma and beta), as the composed ops
    /// record; the norm's backward reads the gradient of the 16-bit output where B's
    /// float_layer_norm_backward takes it, else casts it to the sum's dtype first.
    template <typename I = B>
    requires AddLayerNormForwardBackend<I>
    static std::optional<std::array<FT, 4>> float_add_layer_norm(FT x, FT residual,
                                                                 std::optional<FT> gamma,
                                                                 std::optional<FT> beta, double eps,
                                                                 std::optional<DType> out);
    // The batch-norm ops are member templates (I is B) rather than constrained members: an
    // explicit instantiation of Autodiff<X> then leaves them out where X has no kernels (Clang
    // before 16 instantiated constrained members whose constraints fail).
    /// Training-mode batch norm on B's kernels where B has them: one node for x, gamma and
    /// beta, whose backward is B's float_batch_norm_backward; the statistics are untracked.
    template <typename I = B>
    requires BatchNormBackend<I>
    static std::optional<std::array<FT, 5>> float_batch_norm(FT x, FT gamma, FT beta,
                                                             FT running_mean, FT running_var,
                                                             const BatchNormScalars& s);
    /// float_batch_norm with the ReLU (and an optional residual) fused, on B's kernels: one
    /// node for x, gamma, beta and the residual, whose backward is B's
    /// float_batch_norm_relu_backward (masked by the saved output's sign).
    template <typename I = B>
    requires BatchNormReluBackend<I>
    static std::optional<std::array<FT, 5>> float_batch_norm_relu(FT x, FT gamma, FT beta,
                                                                  FT running_mean, FT running_var,
                                                                  std::optional<FT> residual,
                                                                  const BatchNormScalars& s);
    /// Eval-mode batch norm on B's kernel when no operand is tracked; nothing otherwise (the
    /// caller composes tensor ops, which record their gradients).
    template <typename I = B>
    requires BatchNormBackend<I>
    static std::optional<FT> float_batch_norm_eval(FT x, FT gamma, FT beta, FT mean, FT var,
                                                   double eps);

    // ---- float: shape and indexing ----
    static FT float_reshape(FT t, const Shape& shape);
    static FT float_permute(FT t, std::span<const std::size_t> axes);
    static FT float_expand(FT t, const Shape& shape);
    static FT float_slice(FT t, std::span<const Slice> ranges);
    static FT float_slice_assign(FT t, std::span<const Slice> ranges, FT values);
    static FT float_flip(FT t, std::span<const std::size_t> axes);
    static FT float_cat(std::vector<FT> tensors, std::size_t dim);
    static FT float_repeat_dim(FT t, std::size_t dim, std::size_t times);
    static FT float_gather(std::size_t dim, FT t, IT indices);
    static FT float_scatter(std::size_t dim, FT t, IT indices, FT values);
    static FT float_select(FT t, std::size_t dim, IT indices);
    static FT float_select_assign(FT t, std::size_t dim, IT indices, FT values);
    static std::pair<FT, IT> float_sort_with_indices(FT t, std::size_t dim, bool descending);
    static std::pair<FT, IT> float_topk(FT t, std::size_t k, std::size_t dim, bool largest);
    static FT float_matmul(FT a, FT b);
    /// a · b (2-D) + bias row in B's GEMM (B's matmul epilogue, where B has one), recorded with
    /// its backward: g·bᵀ, aᵀ·g and the bias's Σ_rows g. Nothing for relu, without a bias,
    /// where B has no epilogue or where it declines the operands (module::linear then runs the
    /// matmul and the add). Declared for every B, not constrained: Clang 14 instantiates a
    /// constrained member's out-of-line body in an explicit instantiation even where the
    /// constraint fails.
    static std::optional<FT> fused_matmul_epilogue(const FT& a, const FT& b,
                                                   std::optional<FT> bias,
                                                   fusion::MatmulEpilogue epilogue);
    /// Whether fused_matmul_epilogue can return a result (B has an epilogue).
    static constexpr bool kMatmulEpilogue = fusion::may_fuse_matmul_epilogue<B>;

    // ---- module ops ----
    static FT conv1d(FT x, FT w, std::optional<FT> bias, const ConvOptions<1>& o);
    static FT conv2d(FT x, FT w, std::optional<FT> bias, const ConvOptions<2>& o);
    static FT conv3d(FT x, FT w, std::optional<FT> bias, const ConvOptions<3>& o);
    static FT conv_transpose1d(FT x, FT w, std::optional<FT> bias, const ConvTransposeOptions<1>& o);
    static FT conv_transpose2d(FT x, FT w, std::optional<FT> bias, const ConvTransposeOptions<2>& o);
    static FT conv_transpose3d(FT x, FT w, std::optional<FT> bias, const ConvTransposeOptions<3>& o);
    static FT deform_conv2d(FT x, FT offset, FT w, std::optional<FT> mask, std::optional<FT> bias,
                            const DeformConvOptions& o);
    static FT avg_pool1d(FT x, const PoolOptions<1>& o);
    static FT avg_pool2d(FT x, const PoolOptions<2>& o);
    static FT max_pool1d(FT x, const PoolOptions<1>& o);
    static FT max_pool2d(FT x, const PoolOptions<2>& o);
    static std::pair<FT, IT> max_pool1d_with_indices(FT x, const PoolOptions<1>& o);
    static std::pair<FT, IT> max_pool2d_with_indices(FT x, const PoolOptions<2>& o);
    static FT adaptive_avg_pool1d(FT x, std::size_t output_size);
    static FT adaptive_avg_pool2d(FT x, std::array<std::size_t, 2> output_size);
    static FT interpolate(FT x, std::array<std::size_t, 2> output_size, const InterpolateOptions& o);
    static FT embedding(FT weights, IT indices);

    // ---- int and bool: B's, forwarded ----
#define EMBER_AD_FORWARD(name)                                    \
    template <typename... A>                                      \
    static auto name(A&&... a) -> decltype(B::name(std::forward<A>(a)...)) { \
        return B::name(std::forward<A>(a)...);                    \
    }
    EMBER_AD_FORWARD(int_from_data)
    EMBER_AD_FORWARD(int_into_data)
    EMBER_AD_FORWARD(int_device)
    EMBER_AD_FORWARD(int_to_device)
    EMBER_AD_FORWARD(int_shape)
    EMBER_AD_FORWARD(int_dtype)
    EMBER_AD_FORWARD(int_empty)
    EMBER_AD_FORWARD(int_full)
    EMBER_AD_FORWARD(int_random)
    EMBER_AD_FORWARD(int_arange)
    EMBER_AD_FORWARD(int_unary)
    EMBER_AD_FORWARD(int_binary)
    EMBER_AD_FORWARD(int_binary_scalar)
    EMBER_AD_FORWARD(int_compare)
    EMBER_AD_FORWARD(int_compare_scalar)
    EMBER_AD_FORWARD(int_mask_where)
    EMBER_AD_FORWARD(int_mask_fill)
    EMBER_AD_FORWARD(int_clamp)
    EMBER_AD_FORWARD(int_reduce)
    EMBER_AD_FORWARD(int_reduce_dim)
    EMBER_AD_FORWARD(int_arg_reduce)
    EMBER_AD_FORWARD(int_reshape)
    EMBER_AD_FORWARD(int_permute)
    EMBER_AD_FORWARD(int_expand)
    EMBER_AD_FORWARD(int_slice)
    EMBER_AD_FORWARD(int_slice_assign)
    EMBER_AD_FORWARD(int_flip)
    EMBER_AD_FORWARD(int_cat)
    EMBER_AD_FORWARD(int_repeat_dim)
    EMBER_AD_FORWARD(int_gather)
    EMBER_AD_FORWARD(int_scatter)
    EMBER_AD_FORWARD(int_select)
    EMBER_AD_FORWARD(int_select_assign)
    EMBER_AD_FORWARD(int_sort_with_indices)
    EMBER_AD_FORWARD(int_topk)
    EMBER_AD_FORWARD(int_matmul)
    EMBER_AD_FORWARD(int_cast)
    EMBER_AD_FORWARD(bool_from_data)
    EMBER_AD_FORWARD(bool_into_data)
    EMBER_AD_FORWARD(bool_device)
    EMBER_AD_FORWARD(bool_to_device)
    EMBER_AD_FORWARD(bool_shape)
    EMBER_AD_FORWARD(bool_dtype)
    EMBER_AD_FORWARD(bool_empty)
    EMBER_AD_FORWARD(bool_full)
    EMBER_AD_FORWARD(bool_not)
    EMBER_AD_FORWARD(bool_binary)
    EMBER_AD_FORWARD(bool_compare)
    EMBER_AD_FORWARD(bool_mask_where)
    EMBER_AD_FORWARD(bool_reduce)
    EMBER_AD_FORWARD(bool_reduce_dim)
    EMBER_AD_FORWARD(bool_reshape)
    EMBER_AD_FORWARD(bool_permute)
    EMBER_AD_FORWARD(bool_expand)
    EMBER_AD_FORWARD(bool_slice)
    EMBER_AD_FORWARD(bool_slice_assign)
    EMBER_AD_FORWARD(bool_flip)
    EMBER_AD_FORWARD(bool_cat)
    EMBER_AD_FORWARD(bool_repeat_dim)
    EMBER_AD_FORWARD(bool_gather)
    EMBER_AD_FORWARD(bool_select)
    EMBER_AD_FORWARD(bool_into_int)
    EMBER_AD_FORWARD(bool_argwhere)
#undef EMBER_AD_FORWARD
    static FT int_into_float(IT t) { return from_inner(B::int_into_float(std::move(t))); }
    static FT bool_into_float(BT t) { return from_inner(B::bool_into_float(std::move(t))); }

    // ---- recording (used by the rules in detail/) ----
    using Node = detail::ad::Node<B>;
    using Ctx = detail::ad::BackwardCtx<B>;
    using Saved = detail::ad::Saved<B>;
    /// One op being recorded: its output and, when an input is tracked, its new node.
    struct Record {
        IFT out;                    ///< the op's value
        detail::ad::NodeRef<B> node;  ///< null: no input is tracked, nothing to record

        /// What backward needs of input `x` (kept, or rebuilt when checkpointed).
        Saved input(const FT& x) const;
        /// What backward needs of this op's output.
        Saved output() const;
        /// Under BalancedCheckpointing, lets backward rebuild this (memory-bound) op's output
        /// from `inputs` with `forward`. Call before output().
        template <typename F>
        void checkpoint(std::initializer_list<const FT*> inputs, F forward);
        /// Installs the backward step and returns the tracked output.
        template <typename S>
        FT finish(S step);
        /// The untracked output.
        FT untracked() { return FT{std::move(out), nullptr}; }
    };
    /// The node of a layer norm whose value `y` (with the statistics `mean` and `rstd`) the
    /// caller computed from x, gamma and beta: float_layer_norm's and float_add_layer_norm's.
    static FT layer_norm_node(IFT y, const FT& x, const std::optional<FT>& gamma,
                              const std::optional<FT>& beta, IFT mean, IFT rstd);
    /// Starts recording an op with value `out` over `inputs` (tracked ones become parents).
    static Record record(IFT out, std::initializer_list<const FT*> inputs);
    /// As record(), for a variable number of inputs.
    static Record record(IFT out, const std::vector<const FT*>& inputs);
};

}  // namespace ember

#include "detail/recording.hpp"
#include "detail/elementwise_ops.hpp"
#include "detail/reduce_ops.hpp"
#include "detail/shape_ops.hpp"
#include "detail/module_ops.hpp"
