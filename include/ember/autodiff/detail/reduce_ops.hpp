#pragma once
// Backward rules of reductions and softmax. Max/min over a whole tensor or along a dim (amax,
// amin) split the gradient evenly among tied extremes, as PyTorch; the *_with_indices forms
// (max(dim) in PyTorch) send it to the index returned.

namespace ember {

namespace detail::ad {
/// dL/dx of max, min or prod (whole tensor when `dim` is null) given dL/dy = g, x and y.
template <typename B>
typename B::FloatTensorPrimitive reduce_grad(ReduceOp op, std::optional<std::size_t> dim,
                                             typename B::FloatTensorPrimitive g,
                                             typename B::FloatTensorPrimitive x,
                                             typename B::FloatTensorPrimitive y) {
    using M = Math<B>;
    const Shape xs = B::float_shape(x);
    const DType dt = B::float_dtype(x);
    auto keep = [&](typename B::FloatTensorPrimitive t) {  // reduce like the forward, kept
        return dim ? B::float_reduce_dim(ReduceOp::Sum, std::move(t), *dim)
                   : B::float_reduce(ReduceOp::Sum, std::move(t));
    };
    switch (op) {
        case ReduceOp::Max:
        case ReduceOp::Min: {
            auto hit = M::as_float(B::float_compare(CompareOp::Eq, x, M::spread(std::move(y), xs)), dt);
            auto count = keep(hit);
            return M::mul(hit, M::spread(M::div(std::move(g), std::move(count)), xs));
        }
        case ReduceOp::Prod: {
            // ∂/∂x_i = Π_{j≠i} x_j, safe with zeros: with none it is y / x_i; with exactly one
            // it is the product of the others at the zero and 0 elsewhere; with more, 0.
            auto is0 = B::float_compare_scalar(CompareOp::Eq, x, Scalar(0.0));
            auto x1 = B::float_mask_fill(x, is0, Scalar(1.0));
            auto p1 = dim ? B::float_reduce_dim(ReduceOp::Prod, x1, *dim)
                          : B::float_reduce(ReduceOp::Prod, x1);
            auto zeros = keep(M::as_float(is0, dt));
            auto none = M::as_float(B::float_compare_scalar(CompareOp::Eq, zeros, Scalar(0.0)), dt);
            auto one = M::as_float(B::float_compare_scalar(CompareOp::Eq, zeros, Scalar(1.0)), dt);
            auto p1s = M::spread(p1, xs);
            auto a = M::mul(M::div(p1s, x1), M::spread(std::move(none), xs));
            auto b = M::mul(M::mul(std::move(p1s), M::as_float(std::move(is0), dt)),
                            M::spread(std::move(one), xs));
            return M::mul(M::spread(std::move(g), xs), M::add(std::move(a), std::move(b)));
        }
        default:
            EMBER_FAIL(Argument, "backward: reduction ", static_cast<int>(op),
                       " is not differentiable");
    }
}
/// dL/dx of an op that picked x's elements at `indices` along `dim` (sort, topk, max(dim)).
template <typename B>
typename B::FloatTensorPrimitive picked_grad(std::size_t dim, typename B::FloatTensorPrimitive g,
                                             typename B::IntTensorPrimitive indices, const Shape& xs,
                                             typename B::Device dev) {
    auto z = Math<B>::zeros(xs, B::float_dtype(g), dev);
    return B::float_scatter(dim, std::move(z), std::move(indices), std::move(g));
}
/// Records a reduction of `t` (whole when `dim` is null) whose value is `out`. Sum and mean
/// need only the shape; max, min and prod keep the input and the output.
template <typename AD>
typename AD::FT record_reduce(ReduceOp op, std::optional<std::size_t> dim,
                              const typename AD::FT& t, typename AD::IFT out) {
    using B = typename AD::InnerBackend;
    using IFT = typename AD::IFT;
    using M = Math<B>;
    auto r = AD::record(std::move(out), {&t});
    if (!r.node) return r.untracked();
    const Shape xs = AD::float_shape(t);
    if (op == ReduceOp::Sum || op == ReduceOp::Mean) {
        const double n = static_cast<double>(dim ? xs[*dim] : xs.num_elements());
        return r.finish([=](typename AD::Ctx& ctx, IFT g) {
            if (op == ReduceOp::Mean) g = M::scale(std::move(g), 1.0 / n);
            ctx.add(0, M::spread(std::move(g), xs));
        });
    }
    auto sx = r.input(t);
    auto sy = r.output();
    return r.finish([=](typename AD::Ctx& ctx, IFT g) {
        ctx.add(0, reduce_grad<B>(op, dim, std::move(g), ctx.get(sx), ctx.get(sy)));
    });
}

/// Records an op that returns values picked from `t` along `dim` and their indices.
template <typename AD>
std::pair<typename AD::FT, typename AD::IT> record_picked(
    const typename AD::FT& t, std::size_t dim,
    std::pair<typename AD::IFT, typename AD::IT> picked) {
    using B = typename AD::InnerBackend;
    auto& [v, i] = picked;
    auto r = AD::record(std::move(v), {&t});
    if (!r.node) return {r.untracked(), std::move(i)};
    const Shape xs = AD::float_shape(t);
    const auto dev = AD::float_device(t);
    return {r.finish([=, i = i](typename AD::Ctx& ctx, typename AD::IFT g) {
                ctx.add(0, picked_grad<B>(dim, std::move(g), i, xs, dev));
            }),
            std::move(i)};
}
}  // namespace detail::ad

EMBER_AD auto Autodiff<B, C>::float_reduce(ReduceOp op, FT t) -> FT {
    auto out = B::float_reduce(op, t.primitive);
    return detail::ad::record_reduce<Autodiff>(op, std::nullopt, t, std::move(out));
}

EMBER_AD auto Autodiff<B, C>::float_reduce_dim(ReduceOp op, FT t, std::size_t dim) -> FT {
    auto out = B::float_reduce_dim(op, t.primitive, dim);
    return detail::ad::record_reduce<Autodiff>(op, dim, t, std::move(out));
}

EMBER_AD auto Autodiff<B, C>::float_max_dim_with_indices(FT t, std::size_t dim)
    -> std::pair<FT, IT> {
    return detail::ad::record_picked<Autodiff>(t, dim, B::float_max_dim_with_indices(t.primitive, dim));
}

EMBER_AD auto Autodiff<B, C>::float_min_dim_with_indices(FT t, std::size_t dim)
    -> std::pair<FT, IT> {
    return detail::ad::record_picked<Autodiff>(t, dim, B::float_min_dim_with_indices(t.primitive, dim));
}

EMBER_AD auto Autodiff<B, C>::float_softmax(FT t, std::size_t dim) -> FT {
    using M = detail::ad::Math<B>;
    auto r = record(B::float_softmax(t.primitive, dim), {&t});
    if (!r.node) return r.untracked();
    Saved sy = r.output();
    return r.finish([=](Ctx& ctx, IFT g) {  // y (g - Σ g y)
        IFT y = ctx.get(sy);
        auto s = B::float_reduce_dim(ReduceOp::Sum, M::mul(g, y), dim);
        ctx.add(0, M::mul(std::move(y), M::sub(std::move(g), std::move(s))));
    });
}

EMBER_AD auto Autodiff<B, C>::float_log_softmax(FT t, std::size_t dim) -> FT {
    using M = detail::ad::Math<B>;
    auto r = record(B::float_log_softmax(t.primitive, dim), {&t});
    if (!r.node) return r.untracked();
    Saved sy = r.output();
    return r.finish([=](Ctx& ctx, IFT g) {  // g - exp(y) Σ g
        auto s = B::float_reduce_dim(ReduceOp::Sum, g, dim);
        ctx.add(0, M::sub(std::move(g), M::mul(M::unary(UnaryOp::Exp, ctx.get(sy)), std::move(s))));
    });
}

EMBER_AD auto Autodiff<B, C>::float_layer_norm(FT x, std::optional<FT> gamma,
                                               std::optional<FT> beta, double eps)
    -> std::array<FT, 3> {
    std::optional<IFT> ig, ib;
    if (gamma) ig = gamma->primitive;
    if (beta) ib = beta->primitive;
    auto out = B::float_layer_norm(x.primitive, std::move(ig), std::move(ib), eps);
    // mean and rstd are statistics for the backward pass, not differentiable outputs.
    FT m = from_inner(out[1]), rs = from_inner(out[2]);
    return {
        layer_norm_node(std::move(out[0]), x, gamma, beta, std::move(out[1]), std::move(out[2])),
        std::move(m), std::move(rs)};
}

EMBER_AD auto Autodiff<B, C>::layer_norm_node(IFT y, const FT& x, const std::optional<FT>& gamma,
                                              const std::optional<FT>& beta, IFT mean, IFT rstd)
    -> FT {
    using M = detail::ad::Math<B>;
    auto r = record(std::move(y),
                    std::vector<const FT*>{&x, gamma ? &*gamma : nullptr, beta ? &*beta : nullptr});
    if (!r.node) return r.untracked();
    Saved sx = r.input(x);
    Saved sg = gamma ? r.input(*gamma) : Saved{};
    const Shape xs = float_shape(x);
    const DType xdt = float_dtype(x);
    const bool affine = gamma.has_value();
    // With x̂ = (x - mean) · rstd and g' = g · gamma: dgamma = Σ_rows g x̂, dbeta = Σ_rows g,
    // dx = rstd · (g' - mean(g') - x̂ · mean(g' x̂)), means over the last dim. The output may be
    // in another dtype than x (add_layer_norm's 16-bit one): B's kernel may read g as it is,
    // the composed rule reads it in x's dtype.
    return r.finish([=](Ctx& ctx, IFT g) {
        // B's own kernels where it has them (an optional capability; they give dbeta only with
        // gamma, as LayerNorm has both or neither).
        if constexpr (requires(const IFT& t, const std::optional<IFT>& o) {
                          B::float_layer_norm_backward(t, t, o, t, t);
                      }) {
            if (affine || !ctx.needs(2)) {
                const std::optional<IFT> gm =
                    affine ? std::optional<IFT>(ctx.get(sg)) : std::nullopt;
                // Where B adds x's gradient so far into dx (a pre-norm block's residual stream,
                // whose later part's gradient has arrived), it joins the kernel's pass rather
                // than a separate addition over the tensor.
                constexpr bool adds = requires(const IFT& t, const std::optional<IFT>& o) {
                    B::float_layer_norm_backward(t, t, o, t, t, o);
                };
                std::optional<IFT> acc;
                std::optional<std::array<IFT, 3>> f;
                if constexpr (adds) {
                    acc = ctx.take_partial(0);
                    if (acc && B::float_dtype(*acc) != xdt) {
                        ctx.add(0, std::move(*acc));  // put back: the kernel adds x's dtype only
                        acc.reset();
                    }
                    f = B::float_layer_norm_backward(ctx.get(sx), g, gm, mean, rstd, acc);
                } else {
                    f = B::float_layer_norm_backward(ctx.get(sx), g, gm, mean, rstd);
                }
                if (f) {
                    if (ctx.needs(2)) ctx.add(2, std::move((*f)[2]));
                    if (ctx.needs(1)) ctx.add(1, std::move((*f)[1]));
                    if (ctx.needs(0)) ctx.add(0, std::move((*f)[0]));
                    return;
                }
                if (acc) ctx.add(0, std::move(*acc));  // declined: the partial goes back
            }
        }
        if (B::float_dtype(g) != xdt) g = B::float_cast(std::move(g), xdt);
        const std::size_t d = xs.rank() - 1;
        Shape row = Shape::filled(xs.rank(), 1);
        row[d] = xs[d];
        const Shape vec{xs[d]};
        IFT xhat = M::mul(M::sub(ctx.get(sx), mean), rstd);
        if (ctx.needs(2)) ctx.add(2, B::float_reshape(M::reduce_to(g, row), vec));
        if (ctx.needs(1)) ctx.add(1, B::float_reshape(M::reduce_to(M::mul(g, xhat), row), vec));
        if (!ctx.needs(0)) return;
        IFT gg = affine ? M::mul(std::move(g), B::float_reshape(ctx.get(sg), row)) : std::move(g);
        IFT m1 = B::float_reduce_dim(ReduceOp::Mean, gg, d);
        IFT m2 = B::float_reduce_dim(ReduceOp::Mean, M::mul(gg, xhat), d);
        IFT inner =
            M::sub(M::sub(std::move(gg), std::move(m1)), M::mul(std::move(xhat), std::move(m2)));
        ctx.add(0, M::mul(std::move(inner), rstd));
    });
}

EMBER_AD template <typename I>
requires AddLayerNormForwardBackend<I>
auto Autodiff<B, C>::float_add_layer_norm(FT x, FT residual, std::optional<FT> gamma,
                                          std::optional<FT> beta, double eps,
                                          std::optional<DType> out)
    -> std::optional<std::array<FT, 4>> {
    std::optional<IFT> ig, ib;
    if (gamma) ig = gamma->primitive;
    if (beta) ib = beta->primitive;
    auto o = B::float_add_layer_norm(x.primitive, residual.primitive, std::move(ig), std::move(ib),
                                     eps, out);
    if (!o) return std::nullopt;
    auto& [sum, y, mean, rstd] = *o;
    std::array<FT, 4> res{FT{}, FT{}, from_inner(mean), from_inner(rstd)};
    // Two nodes, as the composed ops would record: the sum (its gradient passes to x and the
    // residual, each cast to its operand's dtype by the context), then the norm of the sum.
    auto rs = record(std::move(sum), {&x, &residual});
    res[0] = rs.node ? rs.finish([](Ctx& ctx, IFT g) {
        ctx.add(1, g);
        ctx.add(0, std::move(g));
    })
                     : rs.untracked();
    res[1] = layer_norm_node(std::move(y), res[0], gamma, beta, std::move(mean), std::move(rstd));
    return res;
}

EMBER_AD template <typename I>
requires BatchNormBackend<I>
auto Autodiff<B, C>::float_batch_norm(FT x, FT gamma, FT beta, FT running_mean, FT running_var,
                                      const BatchNormScalars& s)
    -> std::optional<std::array<FT, 5>> {
    auto out =
        B::float_batch_norm(x.primitive, gamma.primitive, beta.primitive,
                            std::move(running_mean.primitive), std::move(running_var.primitive), s);
    if (!out) return std::nullopt;
    auto& o = *out;
    IFT mean = o[1], rstd = o[2];
    // The statistics and the running state are values, not differentiable outputs.
    std::array<FT, 5> r{FT{}, from_inner(std::move(o[1])), from_inner(std::move(o[2])),
                        from_inner(std::move(o[3])), from_inner(std::move(o[4]))};
    auto rec = record(std::move(o[0]), {&x, &gamma, &beta});
    if (!rec.node) {
        r[0] = rec.untracked();
        return r;
    }
    Saved sx = rec.input(x);
    Saved sg = rec.input(gamma);
    r[0] = rec.finish([=](Ctx& ctx, IFT g) {
        auto d = B::float_batch_norm_backward(ctx.get(sx), std::move(g), ctx.get(sg), mean, rstd);
        for (std::size_t i = 0; i < 3; ++i)
            if (ctx.needs(i)) ctx.add(i, std::move(d[i]));
    });
    return r;
}

EMBER_AD template <typename I>
requires BatchNormReluBackend<I>
auto Autodiff<B, C>::float_batch_norm_relu(FT x, FT gamma, FT beta, FT running_mean, FT running_var,
                                           std::optional<FT> residual, const BatchNormScalars& s)
    -> std::optional<std::array<FT, 5>> {
    std::optional<IFT> r;
    if (residual) r = residual->primitive;
    auto out = B::float_batch_norm_relu(x.primitive, gamma.primitive, beta.primitive,
                                        std::move(running_mean.primitive),
                                        std::move(running_var.primitive), std::move(r), s);
    if (!out) return std::nullopt;
    auto& o = *out;
    IFT mean = o[1], rstd = o[2];
    std::array<FT, 5> res{FT{}, from_inner(std::move(o[1])), from_inner(std::move(o[2])),
                          from_inner(std::move(o[3])), from_inner(std::move(o[4]))};
    auto rec = record(std::move(o[0]), {&x, &gamma, &beta, residual ? &*residual : nullptr});
    if (!rec.node) {
        res[0] = rec.untracked();
        return res;
    }
    Saved sx = rec.input(x);
    Saved sg = rec.input(gamma);
    // The output, not the sum before the ReLU: its sign is the ReLU's gradient. Without a
    // residual, beta too: the backend may recompute that sign from x instead.
    Saved sy = rec.output();
    const bool with_residual = residual.has_value();
    std::optional<Saved> sb;
    if (!with_residual) sb = rec.input(beta);
    res[0] = rec.finish([=](Ctx& ctx, IFT g) {
        std::optional<IFT> b;
        if (sb) b = ctx.get(*sb);
        auto d = B::float_batch_norm_relu_backward(ctx.get(sx), ctx.get(sy), std::move(g),
                                                   ctx.get(sg), mean, rstd,
                                                   with_residual && ctx.needs(3), std::move(b));
        if (ctx.needs(0)) ctx.add(0, std::move(d.dx));
        if (ctx.needs(1)) ctx.add(1, std::move(d.dgamma));
        if (ctx.needs(2)) ctx.add(2, std::move(d.dbeta));
        if (d.dresidual) ctx.add(3, std::move(*d.dresidual));
    });
    return res;
}

EMBER_AD template <typename I>
requires BatchNormBackend<I>
auto Autodiff<B, C>::float_batch_norm_eval(FT x, FT gamma, FT beta, FT mean, FT var, double eps)
    -> std::optional<FT> {
    if (x.node || gamma.node || beta.node || mean.node || var.node) return std::nullopt;
    auto y = B::float_batch_norm_eval(std::move(x.primitive), std::move(gamma.primitive),
                                      std::move(beta.primitive), std::move(mean.primitive),
                                      std::move(var.primitive), eps);
    if (!y) return std::nullopt;
    return from_inner(std::move(*y));
}

}  // namespace ember
