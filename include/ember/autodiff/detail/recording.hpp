#pragma once
// Recording ops into the graph, the backward driver's entry points, and the inner-backend
// arithmetic that backward rules are written in.
#include <cmath>
#include <numbers>
#include <vector>

namespace ember {
namespace detail::ad {

/// Inner-backend arithmetic for backward rules (B's primitives, no graph).
template <typename B>
struct Math {
    using P = typename B::FloatTensorPrimitive;
    static P add(P a, P b) { return B::float_binary(BinaryOp::Add, std::move(a), std::move(b)); }
    static P sub(P a, P b) { return B::float_binary(BinaryOp::Sub, std::move(a), std::move(b)); }
    static P mul(P a, P b) { return B::float_binary(BinaryOp::Mul, std::move(a), std::move(b)); }
    static P div(P a, P b) { return B::float_binary(BinaryOp::Div, std::move(a), std::move(b)); }
    static P scale(P a, double s) {
        return B::float_binary_scalar(BinaryOp::Mul, std::move(a), Scalar(s));
    }
    static P add_scalar(P a, double s) {
        return B::float_binary_scalar(BinaryOp::Add, std::move(a), Scalar(s));
    }
    static P neg(P a) { return B::float_unary(UnaryOp::Neg, std::move(a)); }
    static P unary(UnaryOp op, P a) { return B::float_unary(op, std::move(a)); }
    static P zeros(const Shape& s, DType dt, const typename B::Device& d) {
        P z = B::float_full(s, Scalar(0.0), d);
        return B::float_dtype(z) == dt ? z : B::float_cast(std::move(z), dt);
    }
    static P zeros_like(const P& x) {
        return zeros(B::float_shape(x), B::float_dtype(x), B::float_device(x));
    }
    /// 0 where `mask`, g elsewhere.
    static P zero_where(P g, typename B::BoolTensorPrimitive mask) {
        return B::float_mask_fill(std::move(g), std::move(mask), Scalar(0.0));
    }
    /// Sums `g` down to `target` (undoes broadcasting).
    static P reduce_to(P g, const Shape& target) {
        const Shape gs = B::float_shape(g);
        if (gs == target) return g;
        const std::size_t lead = gs.rank() - target.rank();
        // A dense gradient has its runs of adjacent summed dims, and of adjacent kept ones,
        // merged into one dim each (dims of 1 dropped) by a free reshape: a bias's gradient,
        // [N, T, C] summed to [C], is one pass over [N·T, C] rather than one per dim. Strided
        // gradients (an expanded one) are summed dim by dim: a reshape would copy them.
        bool dense = false;
        if constexpr (requires(const P& p) { p.is_contiguous(); }) dense = g.is_contiguous();
        if (dense) {
            Shape merged;
            std::vector<bool> summed;
            for (std::size_t d = 0; d < gs.rank(); ++d) {
                if (gs[d] == 1) continue;
                const bool sum = d < lead || target[d - lead] == 1;
                if (!summed.empty() && summed.back() == sum) {
                    merged[merged.rank() - 1] *= gs[d];
                } else {
                    merged.push_back(gs[d]);
                    summed.push_back(sum);
                }
            }
            if (merged.rank() == 0) {  // a single element
                merged.push_back(1);
                summed.push_back(false);
            }
            g = B::float_reshape(std::move(g), merged);
            for (std::size_t d = 0; d < merged.rank(); ++d)
                if (summed[d]) g = B::float_reduce_dim(ReduceOp::Sum, std::move(g), d);
            return B::float_reshape(std::move(g), target);
        }
        for (std::size_t d = 0; d < gs.rank(); ++d) {
            const bool reduce = d < lead || (target[d - lead] == 1 && gs[d] != 1);
            if (reduce) g = B::float_reduce_dim(ReduceOp::Sum, std::move(g), d);
        }
        return B::float_reshape(std::move(g), target);
    }
    /// `g` (shaped like x with `dim` kept at 1, or [1] for a full reduction) spread over `to`.
    static P spread(P g, const Shape& to) {
        Shape ones = Shape::filled(to.rank(), 1);
        if (B::float_shape(g).rank() != to.rank()) {
            g = B::float_reshape(std::move(g), ones);
        }
        return B::float_expand(std::move(g), to);
    }
    /// A bool mask as 0/1 floats of dtype `dt`.
    static P as_float(typename B::BoolTensorPrimitive m, DType dt) {
        P f = B::bool_into_float(std::move(m));
        return B::float_dtype(f) == dt ? f : B::float_cast(std::move(f), dt);
    }
};

}  // namespace detail::ad

#define EMBER_AD template <Backend B, CheckpointStrategy C>

EMBER_AD auto Autodiff<B, C>::record(IFT out, std::initializer_list<const FT*> inputs) -> Record {
    return record(std::move(out), std::vector<const FT*>(inputs));
}

EMBER_AD auto Autodiff<B, C>::record(IFT out, const std::vector<const FT*>& inputs) -> Record {
    Record r{std::move(out), nullptr};
    bool tracked = false;
    for (const FT* in : inputs) tracked = tracked || (in && in->node);
    if (!tracked) return r;
    r.node = std::make_shared<Node>();
    r.node->dtype = B::float_dtype(r.out);
    r.node->parents.reserve(inputs.size());
    for (const FT* in : inputs) {
        r.node->parents.push_back(in ? in->node : nullptr);
        if (in && in->node) r.node->order = std::max(r.node->order, in->node->order + 1);
    }
    return r;
}

EMBER_AD auto Autodiff<B, C>::Record::input(const FT& x) const -> Saved {
    if constexpr (C::balanced) {
        if (x.node && x.node->recompute) return Saved{std::nullopt, x.node.get(), x.node};
    }
    return Saved{x.primitive, nullptr, nullptr};
}

EMBER_AD auto Autodiff<B, C>::Record::output() const -> Saved {
    // The step belongs to this node, so a lazy handle to it must not own it (no cycle).
    if constexpr (C::balanced) {
        if (node && node->recompute) return Saved{std::nullopt, node.get(), nullptr};
    }
    return Saved{out, nullptr, nullptr};
}

EMBER_AD template <typename F>
void Autodiff<B, C>::Record::checkpoint(std::initializer_list<const FT*> inputs, F forward) {
    if constexpr (C::balanced) {
        if (!node) return;
        std::vector<Saved> saved;
        for (const FT* in : inputs) saved.push_back(input(*in));
        node->recompute = [saved = std::move(saved), forward = std::move(forward)](Ctx& ctx) {
            std::vector<IFT> values;
            values.reserve(saved.size());
            for (std::size_t i = 0; i < saved.size(); ++i) {
                // x * x: one rebuild serves both operands.
                if (i > 0 && saved[i].lazy && saved[i].lazy == saved[0].lazy) {
                    values.push_back(values[0]);
                    continue;
                }
                values.push_back(ctx.get(saved[i]));
            }
            return forward(values);
        };
    }
}

EMBER_AD template <typename S>
auto Autodiff<B, C>::Record::finish(S step) -> FT {
    node->step = std::move(step);
    return FT{std::move(out), std::move(node)};
}

EMBER_AD auto Autodiff<B, C>::backward(FT root) -> Gradients {
    IFT seed =
        B::float_full(B::float_shape(root.primitive), Scalar(1.0), B::float_device(root.primitive));
    if (B::float_dtype(seed) != B::float_dtype(root.primitive))
        seed = B::float_cast(std::move(seed), B::float_dtype(root.primitive));
    return detail::ad::run_backward<B>(root.node, std::move(seed));
}

EMBER_AD auto Autodiff<B, C>::grad(const FT& t, const Gradients& grads) -> std::optional<IFT> {
    if (!t.node) return std::nullopt;
    return grads.template get<IFT>(t.node->id);
}

EMBER_AD auto Autodiff<B, C>::grad_remove(const FT& t, Gradients& grads) -> std::optional<IFT> {
    if (!t.node) return std::nullopt;
    return grads.template remove<IFT>(t.node->id);
}

EMBER_AD void Autodiff<B, C>::grad_replace(const FT& t, Gradients& grads, IFT g) {
    EMBER_CHECK(t.node != nullptr, Argument,
                "grad_replace: the tensor is not tracked (call require_grad() first)");
    grads.insert(t.node->id, std::move(g));
}

EMBER_AD auto Autodiff<B, C>::float_set_require_grad(FT t, bool require) -> FT {
    if (!require) return from_inner(std::move(t.primitive));
    if (t.node && t.node->leaf) return t;
    // A fresh leaf: gradients stop here, as PyTorch's requires_grad_ on a non-leaf would not.
    auto node = std::make_shared<Node>();
    node->leaf = true;
    node->dtype = B::float_dtype(t.primitive);
    return FT{std::move(t.primitive), std::move(node)};
}

EMBER_AD auto Autodiff<B, C>::float_to_device(FT t, const Device& d) -> FT {
    const Device from = B::float_device(t.primitive);
    auto r = record(B::float_to_device(t.primitive, d), {&t});
    if (!r.node) return r.untracked();
    return r.finish(
        [from](Ctx& ctx, IFT g) { ctx.add(0, B::float_to_device(std::move(g), from)); });
}

}  // namespace ember
