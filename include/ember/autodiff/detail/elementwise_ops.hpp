#pragma once
// Backward rules of the elementwise ops: unary functions, binary ops (with broadcast gradients
// summed back to each input's shape), scalar forms, masks, clamp and casts. Every op here is
// memory-bound, so under BalancedCheckpointing it keeps nothing and is recomputed. Untracked
// inputs are moved straight into B, so that B may reuse their buffers in place, as it would
// without Autodiff.

namespace ember {

namespace detail::ad {
/// Whether the unary op's backward reads its output (otherwise its input, or nothing).
constexpr bool unary_uses_output(UnaryOp op) {
    switch (op) {
        case UnaryOp::Exp: case UnaryOp::Sqrt: case UnaryOp::Tanh: case UnaryOp::Recip:
        case UnaryOp::Sigmoid: case UnaryOp::Relu: return true;
        default: return false;
    }
}
/// Whether the unary op has a zero gradient everywhere (PyTorch returns zeros for these).
constexpr bool unary_is_flat(UnaryOp op) {
    switch (op) {
        case UnaryOp::Floor: case UnaryOp::Ceil: case UnaryOp::Round: case UnaryOp::Sign:
        case UnaryOp::IsNan: case UnaryOp::Not: return true;
        default: return false;
    }
}
/// The R-forms take their operands the other way round.
constexpr bool is_reversed(BinaryOp op) {
    return op == BinaryOp::RSub || op == BinaryOp::RDiv || op == BinaryOp::RPow ||
           op == BinaryOp::RRem;
}
constexpr BinaryOp unreversed(BinaryOp op) {
    switch (op) {
        case BinaryOp::RSub: return BinaryOp::Sub;
        case BinaryOp::RDiv: return BinaryOp::Div;
        case BinaryOp::RPow: return BinaryOp::Pow;
        case BinaryOp::RRem: return BinaryOp::Rem;
        default: return op;
    }
}

/// dL/dx of the unary `op` at x (or its output y), given dL/dy = g.
template <typename B>
typename B::FloatTensorPrimitive unary_grad(UnaryOp op, typename B::FloatTensorPrimitive g,
                                            typename B::FloatTensorPrimitive v) {
    using M = Math<B>;
    // One kernel where B has it (an optional capability): the composed forms below are chains
    // of up to eleven memory-bound passes (Gelu's).
    if constexpr (requires { B::float_unary_backward(op, g, v); })
        if (auto fused = B::float_unary_backward(op, g, v)) return std::move(*fused);
    switch (op) {
        case UnaryOp::Neg: return M::neg(std::move(g));
        case UnaryOp::Abs: return M::mul(std::move(g), M::unary(UnaryOp::Sign, std::move(v)));
        case UnaryOp::Exp: return M::mul(std::move(g), std::move(v));
        case UnaryOp::Log: return M::div(std::move(g), std::move(v));
        case UnaryOp::Log1p: return M::div(std::move(g), M::add_scalar(std::move(v), 1.0));
        case UnaryOp::Sqrt: return M::div(M::scale(std::move(g), 0.5), std::move(v));
        case UnaryOp::Sin: return M::mul(std::move(g), M::unary(UnaryOp::Cos, std::move(v)));
        case UnaryOp::Cos:
            return M::neg(M::mul(std::move(g), M::unary(UnaryOp::Sin, std::move(v))));
        case UnaryOp::Tanh: {  // 1 - y²
            auto d = B::float_binary_scalar(BinaryOp::RSub, M::mul(v, v), Scalar(1.0));
            return M::mul(std::move(g), std::move(d));
        }
        case UnaryOp::Erf: {  // 2/√π · exp(-x²)
            auto e = M::unary(UnaryOp::Exp, M::neg(M::mul(v, v)));
            return M::mul(std::move(g), M::scale(std::move(e), 2.0 / std::sqrt(std::numbers::pi)));
        }
        case UnaryOp::Recip: return M::neg(M::mul(std::move(g), M::mul(v, v)));
        case UnaryOp::Sigmoid: {  // y (1 - y)
            auto one_minus = B::float_binary_scalar(BinaryOp::RSub, v, Scalar(1.0));
            return M::mul(std::move(g), M::mul(std::move(v), std::move(one_minus)));
        }
        case UnaryOp::Relu:
            return M::zero_where(std::move(g),
                                 B::float_compare_scalar(CompareOp::Le, std::move(v), Scalar(0.0)));
        case UnaryOp::Gelu: {  // Φ(x) + x φ(x), exact (erf) form
            auto cdf = M::scale(
                M::add_scalar(M::unary(UnaryOp::Erf, M::scale(v, std::numbers::sqrt2 / 2)), 1.0),
                0.5);
            auto pdf = M::scale(M::unary(UnaryOp::Exp, M::scale(M::mul(v, v), -0.5)),
                                1.0 / std::sqrt(2.0 * std::numbers::pi));
            return M::mul(std::move(g), M::add(std::move(cdf), M::mul(std::move(v), std::move(pdf))));
        }
        default: return M::zeros_like(g);
    }
}
}  // namespace detail::ad

EMBER_AD auto Autodiff<B, C>::float_unary(UnaryOp op, FT x) -> FT {
    if (!x.node) return from_inner(B::float_unary(op, std::move(x.primitive)));
    auto r = record(B::float_unary(op, x.primitive), {&x});
    if (!r.node) return r.untracked();
    r.checkpoint({&x}, [op](std::vector<IFT>& v) { return B::float_unary(op, std::move(v[0])); });
    if (detail::ad::unary_is_flat(op)) {
        return r.finish([](Ctx& ctx, IFT g) { ctx.add(0, detail::ad::Math<B>::zeros_like(g)); });
    }
    Saved v = detail::ad::unary_uses_output(op) ? r.output() : r.input(x);
    return r.finish([op, v = std::move(v)](Ctx& ctx, IFT g) {
        ctx.add(0, detail::ad::unary_grad<B>(op, std::move(g), ctx.get(v)));
    });
}

EMBER_AD auto Autodiff<B, C>::float_binary(BinaryOp op, FT a, FT b) -> FT {
    if (!a.node && !b.node)
        return from_inner(B::float_binary(op, std::move(a.primitive), std::move(b.primitive)));
    using M = detail::ad::Math<B>;
    auto r = record(B::float_binary(op, a.primitive, b.primitive), {&a, &b});
    if (!r.node) return r.untracked();
    r.checkpoint({&a, &b}, [op](std::vector<IFT>& v) {
        return B::float_binary(op, std::move(v[0]), std::move(v[1]));
    });
    // Reversed forms are the plain ones with swapped operands (and swapped gradients).
    const bool rev = detail::ad::is_reversed(op);
    const BinaryOp base = detail::ad::unreversed(op);
    const std::size_t ia = rev ? 1 : 0, ib = rev ? 0 : 1;
    const FT& x = rev ? b : a;
    const FT& y = rev ? a : b;
    const Shape xs = float_shape(x), ys = float_shape(y);
    const bool need_vals = base != BinaryOp::Add && base != BinaryOp::Sub;
    Saved sx = need_vals ? r.input(x) : Saved{};
    Saved sy = need_vals ? r.input(y) : Saved{};
    Saved so = base == BinaryOp::Pow || base == BinaryOp::Div ? r.output() : Saved{};
    return r.finish([=](Ctx& ctx, IFT g) {
        const bool nx = ctx.needs(ia), ny = ctx.needs(ib);
        switch (base) {
            case BinaryOp::Add:
                if (nx) ctx.add(ia, M::reduce_to(g, xs));
                if (ny) ctx.add(ib, M::reduce_to(std::move(g), ys));
                return;
            case BinaryOp::Sub:
                if (nx) ctx.add(ia, M::reduce_to(g, xs));
                if (ny) ctx.add(ib, M::reduce_to(M::neg(std::move(g)), ys));
                return;
            case BinaryOp::Mul:
                if (nx) ctx.add(ia, M::reduce_to(M::mul(g, ctx.get(sy)), xs));
                if (ny) ctx.add(ib, M::reduce_to(M::mul(std::move(g), ctx.get(sx)), ys));
                return;
            case BinaryOp::Div: {
                IFT vy = ctx.get(sy);
                if (nx) ctx.add(ia, M::reduce_to(M::div(g, vy), xs));
                if (ny)
                    ctx.add(ib, M::reduce_to(M::neg(M::div(M::mul(std::move(g), ctx.get(so)), vy)), ys));
                return;
            }
            case BinaryOp::Pow: {
                IFT vx = ctx.get(sx), vy = ctx.get(sy);
                if (nx) {  // y · x^(y-1)
                    auto p = B::float_binary(BinaryOp::Pow, vx, M::add_scalar(vy, -1.0));
                    ctx.add(ia, M::reduce_to(M::mul(M::mul(g, vy), std::move(p)), xs));
                }
                if (ny) {  // x^y · ln x, zero where x = 0 and y >= 0 (as PyTorch)
                    auto d = M::mul(ctx.get(so), M::unary(UnaryOp::Log, vx));
                    auto x0 = B::float_compare_scalar(CompareOp::Eq, vx, Scalar(0.0));
                    auto yp = B::float_compare_scalar(CompareOp::Ge, vy, Scalar(0.0));
                    auto both = B::bool_binary(BinaryOp::And, std::move(x0), std::move(yp));
                    d = M::zero_where(std::move(d), std::move(both));
                    ctx.add(ib, M::reduce_to(M::mul(std::move(g), std::move(d)), ys));
                }
                return;
            }
            case BinaryOp::Rem: {  // x - floor(x / y) · y
                if (nx) ctx.add(ia, M::reduce_to(g, xs));
                if (ny) {
                    auto q = M::unary(UnaryOp::Floor, M::div(ctx.get(sx), ctx.get(sy)));
                    ctx.add(ib, M::reduce_to(M::neg(M::mul(std::move(g), std::move(q))), ys));
                }
                return;
            }
            case BinaryOp::Max:
            case BinaryOp::Min: {  // the larger (smaller) operand takes g; ties split it
                IFT vx = ctx.get(sx), vy = ctx.get(sy);
                const DType dt = B::float_dtype(g);
                const CompareOp wins = base == BinaryOp::Max ? CompareOp::Gt : CompareOp::Lt;
                auto wx = M::add(M::as_float(B::float_compare(wins, vx, vy), dt),
                                 M::scale(M::as_float(B::float_compare(CompareOp::Eq, vx, vy), dt), 0.5));
                if (ny) {
                    auto wy = B::float_binary_scalar(BinaryOp::RSub, wx, Scalar(1.0));
                    ctx.add(ib, M::reduce_to(M::mul(g, std::move(wy)), ys));
                }
                if (nx) ctx.add(ia, M::reduce_to(M::mul(std::move(g), std::move(wx)), xs));
                return;
            }
            default:
                EMBER_FAIL(Argument, "backward: binary op ", static_cast<int>(op),
                           " is not differentiable on float tensors");
        }
    });
}

EMBER_AD auto Autodiff<B, C>::float_binary_scalar(BinaryOp op, FT a, Scalar s) -> FT {
    if (!a.node) return from_inner(B::float_binary_scalar(op, std::move(a.primitive), s));
    using M = detail::ad::Math<B>;
    auto r = record(B::float_binary_scalar(op, a.primitive, s), {&a});
    if (!r.node) return r.untracked();
    r.checkpoint({&a}, [op, s](std::vector<IFT>& v) {
        return B::float_binary_scalar(op, std::move(v[0]), s);
    });
    const bool need_x = op == BinaryOp::Pow || op == BinaryOp::Max || op == BinaryOp::Min ||
                        op == BinaryOp::RRem || op == BinaryOp::RDiv;
    Saved sx = need_x ? r.input(a) : Saved{};
    Saved so = op == BinaryOp::RDiv || op == BinaryOp::RPow ? r.output() : Saved{};
    const double c = s.f;
    return r.finish([=](Ctx& ctx, IFT g) {
        switch (op) {
            case BinaryOp::Add: case BinaryOp::Sub: case BinaryOp::Rem:
                return ctx.add(0, std::move(g));
            case BinaryOp::Mul: return ctx.add(0, M::scale(std::move(g), c));
            case BinaryOp::Div: return ctx.add(0, M::scale(std::move(g), 1.0 / c));
            case BinaryOp::RSub: return ctx.add(0, M::neg(std::move(g)));
            case BinaryOp::Pow: {
                if (c == 0.0) return ctx.add(0, M::zeros_like(g));
                auto p = B::float_binary_scalar(BinaryOp::Pow, ctx.get(sx), Scalar(c - 1.0));
                return ctx.add(0, M::mul(M::scale(std::move(g), c), std::move(p)));
            }
            case BinaryOp::Max:  // clamp_min: the gradient passes where x >= s
                return ctx.add(0, M::zero_where(std::move(g), B::float_compare_scalar(
                                                                  CompareOp::Lt, ctx.get(sx), s)));
            case BinaryOp::Min:  // clamp_max: where x <= s
                return ctx.add(0, M::zero_where(std::move(g), B::float_compare_scalar(
                                                                  CompareOp::Gt, ctx.get(sx), s)));
            case BinaryOp::RDiv:  // c / x → -c / x² = -y / x
                return ctx.add(0, M::neg(M::div(M::mul(std::move(g), ctx.get(so)), ctx.get(sx))));
            case BinaryOp::RPow:  // c^x → c^x ln c
                return ctx.add(0, M::scale(M::mul(std::move(g), ctx.get(so)), std::log(c)));
            case BinaryOp::RRem: {  // c - floor(c / x) x → -floor(c / x)
                auto q = M::unary(UnaryOp::Floor,
                                  B::float_binary_scalar(BinaryOp::RDiv, ctx.get(sx), Scalar(c)));
                return ctx.add(0, M::neg(M::mul(std::move(g), std::move(q))));
            }
            default:
                EMBER_FAIL(Argument, "backward: binary op ", static_cast<int>(op),
                           " is not differentiable on float tensors");
        }
    });
}

EMBER_AD auto Autodiff<B, C>::float_mask_where(FT t, BT mask, FT value) -> FT {
    using M = detail::ad::Math<B>;
    auto r = record(B::float_mask_where(t.primitive, mask, value.primitive), {&t, &value});
    if (!r.node) return r.untracked();
    r.checkpoint({&t, &value}, [mask](std::vector<IFT>& v) {
        return B::float_mask_where(std::move(v[0]), mask, std::move(v[1]));
    });
    const Shape ts = float_shape(t), vs = float_shape(value);
    return r.finish([=](Ctx& ctx, IFT g) {
        if (ctx.needs(1))
            ctx.add(1, M::reduce_to(M::zero_where(g, B::bool_not(mask)), vs));
        if (ctx.needs(0)) ctx.add(0, M::reduce_to(M::zero_where(std::move(g), mask), ts));
    });
}

EMBER_AD auto Autodiff<B, C>::float_mask_fill(FT t, BT mask, Scalar value) -> FT {
    if (!t.node) return from_inner(B::float_mask_fill(std::move(t.primitive), std::move(mask), value));
    using M = detail::ad::Math<B>;
    auto r = record(B::float_mask_fill(t.primitive, mask, value), {&t});
    if (!r.node) return r.untracked();
    r.checkpoint({&t}, [mask, value](std::vector<IFT>& v) {
        return B::float_mask_fill(std::move(v[0]), mask, value);
    });
    const Shape ts = float_shape(t);
    return r.finish([=](Ctx& ctx, IFT g) {
        ctx.add(0, M::reduce_to(M::zero_where(std::move(g), mask), ts));
    });
}

EMBER_AD auto Autodiff<B, C>::float_clamp(FT t, Scalar lo, Scalar hi) -> FT {
    if (!t.node) return from_inner(B::float_clamp(std::move(t.primitive), lo, hi));
    using M = detail::ad::Math<B>;
    auto r = record(B::float_clamp(t.primitive, lo, hi), {&t});
    if (!r.node) return r.untracked();
    r.checkpoint({&t}, [lo, hi](std::vector<IFT>& v) {
        return B::float_clamp(std::move(v[0]), lo, hi);
    });
    Saved sx = r.input(t);
    return r.finish([=](Ctx& ctx, IFT g) {
        // The gradient passes where lo <= x <= hi, as PyTorch.
        IFT x = ctx.get(sx);
        auto out = B::bool_binary(BinaryOp::Or, B::float_compare_scalar(CompareOp::Lt, x, lo),
                                  B::float_compare_scalar(CompareOp::Gt, x, hi));
        ctx.add(0, M::zero_where(std::move(g), std::move(out)));
    });
}

EMBER_AD auto Autodiff<B, C>::float_cast(FT t, DType dtype) -> FT {
    const DType from = float_dtype(t);
    auto r = record(B::float_cast(t.primitive, dtype), {&t});
    if (!r.node) return r.untracked();
    r.checkpoint({&t}, [dtype](std::vector<IFT>& v) { return B::float_cast(std::move(v[0]), dtype); });
    return r.finish([from](Ctx& ctx, IFT g) { ctx.add(0, B::float_cast(std::move(g), from)); });
}

}  // namespace ember
