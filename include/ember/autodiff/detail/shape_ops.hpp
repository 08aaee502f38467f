#pragma once
// Backward rules of views, joins, indexing, sorting and matmul. Each routes the output gradient
// back to where the input's elements went: the inverse view, a zero tensor with the gradient
// scattered (or slice-assigned) in, or a sum over repeats and broadcasts.

namespace ember {

EMBER_AD auto Autodiff<B, C>::float_reshape(FT t, const Shape& shape) -> FT {
    const Shape from = float_shape(t);
    auto r = record(B::float_reshape(t.primitive, shape), {&t});
    if (!r.node) return r.untracked();
    r.checkpoint({&t},
                 [shape](std::vector<IFT>& v) { return B::float_reshape(std::move(v[0]), shape); });
    return r.finish([from](Ctx& ctx, IFT g) { ctx.add(0, B::float_reshape(std::move(g), from)); });
}

EMBER_AD auto Autodiff<B, C>::float_permute(FT t, std::span<const std::size_t> axes) -> FT {
    auto r = record(B::float_permute(t.primitive, axes), {&t});
    if (!r.node) return r.untracked();
    std::array<std::size_t, kMaxRank> fwd{}, inv{};
    const std::size_t n = axes.size();
    for (std::size_t i = 0; i < n; ++i) {
        fwd[i] = axes[i];
        inv[axes[i]] = i;
    }
    r.checkpoint({&t}, [fwd, n](std::vector<IFT>& v) {
        return B::float_permute(std::move(v[0]), std::span<const std::size_t>(fwd.data(), n));
    });
    return r.finish([inv, n](Ctx& ctx, IFT g) {
        ctx.add(0, B::float_permute(std::move(g), std::span<const std::size_t>(inv.data(), n)));
    });
}

EMBER_AD auto Autodiff<B, C>::float_expand(FT t, const Shape& shape) -> FT {
    const Shape from = float_shape(t);
    auto r = record(B::float_expand(t.primitive, shape), {&t});
    if (!r.node) return r.untracked();
    r.checkpoint({&t},
                 [shape](std::vector<IFT>& v) { return B::float_expand(std::move(v[0]), shape); });
    return r.finish([from](Ctx& ctx, IFT g) {
        ctx.add(0, detail::ad::Math<B>::reduce_to(std::move(g), from));
    });
}

EMBER_AD auto Autodiff<B, C>::float_slice(FT t, std::span<const Slice> ranges) -> FT {
    const Shape from = float_shape(t);
    const DType dt = float_dtype(t);
    const Device dev = float_device(t);
    auto r = record(B::float_slice(t.primitive, ranges), {&t});
    if (!r.node) return r.untracked();
    std::vector<Slice> rs(ranges.begin(), ranges.end());
    r.checkpoint({&t}, [rs](std::vector<IFT>& v) { return B::float_slice(std::move(v[0]), rs); });
    return r.finish([=](Ctx& ctx, IFT g) {
        ctx.add(0,
                B::float_slice_assign(detail::ad::Math<B>::zeros(from, dt, dev), rs, std::move(g)));
    });
}

EMBER_AD auto Autodiff<B, C>::float_slice_assign(FT t, std::span<const Slice> ranges, FT values)
    -> FT {
    const Shape vs = float_shape(values);
    auto r = record(B::float_slice_assign(t.primitive, ranges, values.primitive), {&t, &values});
    if (!r.node) return r.untracked();
    std::vector<Slice> rs(ranges.begin(), ranges.end());
    return r.finish([=](Ctx& ctx, IFT g) {
        if (ctx.needs(1)) ctx.add(1, B::float_slice(g, rs));
        if (ctx.needs(0)) {
            auto z = detail::ad::Math<B>::zeros(vs, B::float_dtype(g), B::float_device(g));
            ctx.add(0, B::float_slice_assign(std::move(g), rs, std::move(z)));
        }
    });
}

EMBER_AD auto Autodiff<B, C>::float_flip(FT t, std::span<const std::size_t> axes) -> FT {
    auto r = record(B::float_flip(t.primitive, axes), {&t});
    if (!r.node) return r.untracked();
    std::vector<std::size_t> ax(axes.begin(), axes.end());
    r.checkpoint({&t}, [ax](std::vector<IFT>& v) { return B::float_flip(std::move(v[0]), ax); });
    return r.finish([ax](Ctx& ctx, IFT g) { ctx.add(0, B::float_flip(std::move(g), ax)); });
}

EMBER_AD auto Autodiff<B, C>::float_cat(std::vector<FT> tensors, std::size_t dim) -> FT {
    std::vector<IFT> inner;
    std::vector<const FT*> inputs;
    std::vector<std::size_t> sizes;
    inner.reserve(tensors.size());
    for (const FT& t : tensors) {
        inner.push_back(t.primitive);
        inputs.push_back(&t);
        sizes.push_back(float_shape(t)[dim]);
    }
    auto r = record(B::float_cat(std::move(inner), dim), inputs);
    if (!r.node) return r.untracked();
    return r.finish([sizes, dim](Ctx& ctx, IFT g) {
        std::vector<Slice> rs(dim + 1, Slice{});
        long start = 0;
        for (std::size_t i = 0; i < sizes.size(); ++i) {
            const long end = start + static_cast<long>(sizes[i]);
            if (ctx.needs(i)) {
                rs[dim] = Slice{start, end};
                ctx.add(i, B::float_slice(g, rs));
            }
            start = end;
        }
    });
}

EMBER_AD auto Autodiff<B, C>::float_repeat_dim(FT t, std::size_t dim, std::size_t times) -> FT {
    const Shape from = float_shape(t);
    auto r = record(B::float_repeat_dim(t.primitive, dim, times), {&t});
    if (!r.node) return r.untracked();
    return r.finish([from, dim, times](Ctx& ctx, IFT g) {
        // [.., times * n, ..] → [.., times, n, ..], summed over the repeats.
        Shape split;
        for (std::size_t d = 0; d < from.rank(); ++d) {
            if (d == dim) split.push_back(times);
            split.push_back(from[d]);
        }
        auto s = B::float_reduce_dim(ReduceOp::Sum, B::float_reshape(std::move(g), split), dim);
        ctx.add(0, B::float_reshape(std::move(s), from));
    });
}

EMBER_AD auto Autodiff<B, C>::float_gather(std::size_t dim, FT t, IT indices) -> FT {
    const Shape from = float_shape(t);
    const Device dev = float_device(t);
    auto r = record(B::float_gather(dim, t.primitive, indices), {&t});
    if (!r.node) return r.untracked();
    return r.finish([=](Ctx& ctx, IFT g) {
        ctx.add(0, detail::ad::picked_grad<B>(dim, std::move(g), indices, from, dev));
    });
}

EMBER_AD auto Autodiff<B, C>::float_scatter(std::size_t dim, FT t, IT indices, FT values) -> FT {
    auto r = record(B::float_scatter(dim, t.primitive, indices, values.primitive), {&t, &values});
    if (!r.node) return r.untracked();
    return r.finish([=](Ctx& ctx, IFT g) {  // scatter adds: values' gradient is gathered
        if (ctx.needs(1)) ctx.add(1, B::float_gather(dim, g, indices));
        ctx.add(0, std::move(g));
    });
}

EMBER_AD auto Autodiff<B, C>::float_select(FT t, std::size_t dim, IT indices) -> FT {
    const Shape from = float_shape(t);
    const Device dev = float_device(t);
    auto r = record(B::float_select(t.primitive, dim, indices), {&t});
    if (!r.node) return r.untracked();
    return r.finish([=](Ctx& ctx, IFT g) {
        auto z = detail::ad::Math<B>::zeros(from, B::float_dtype(g), dev);
        ctx.add(0, B::float_select_assign(std::move(z), dim, indices, std::move(g)));
    });
}

EMBER_AD auto Autodiff<B, C>::float_select_assign(FT t, std::size_t dim, IT indices, FT values)
    -> FT {
    auto r =
        record(B::float_select_assign(t.primitive, dim, indices, values.primitive), {&t, &values});
    if (!r.node) return r.untracked();
    return r.finish([=](Ctx& ctx, IFT g) {  // select_assign adds
        if (ctx.needs(1)) ctx.add(1, B::float_select(g, dim, indices));
        ctx.add(0, std::move(g));
    });
}

EMBER_AD auto Autodiff<B, C>::float_sort_with_indices(FT t, std::size_t dim, bool descending)
    -> std::pair<FT, IT> {
    return detail::ad::record_picked<Autodiff>(
        t, dim, B::float_sort_with_indices(t.primitive, dim, descending));
}

EMBER_AD auto Autodiff<B, C>::float_topk(FT t, std::size_t k, std::size_t dim, bool largest)
    -> std::pair<FT, IT> {
    return detail::ad::record_picked<Autodiff>(t, dim, B::float_topk(t.primitive, k, dim, largest));
}

EMBER_AD auto Autodiff<B, C>::float_matmul(FT a, FT b) -> FT {
    using M = detail::ad::Math<B>;
    const Shape as = float_shape(a), bs = float_shape(b);
    if (as.rank() == 1 || bs.rank() == 1) {
        // torch.matmul's vector cases, through tracked reshapes: [k] → [1, k] and [k] → [k, 1].
        Shape a2 = as, b2 = bs;
        if (as.rank() == 1) a2 = Shape{1, as[0]};
        if (bs.rank() == 1) b2 = Shape{bs[0], 1};
        auto y = float_matmul(float_reshape(std::move(a), a2), float_reshape(std::move(b), b2));
        Shape ys = float_shape(y), keep;
        for (std::size_t d = 0; d < ys.rank(); ++d) {
            const bool drop =
                (as.rank() == 1 && d + 2 == ys.rank()) || (bs.rank() == 1 && d + 1 == ys.rank());
            if (!drop) keep.push_back(ys[d]);
        }
        if (keep.rank() == 0) keep.push_back(1);
        return float_reshape(std::move(y), keep);
    }
    auto r = record(B::float_matmul(a.primitive, b.primitive), {&a, &b});
    if (!r.node) return r.untracked();
    // Compute-bound: keep the operands (never recomputed).
    Saved sa = r.node->parents[1] ? Saved{a.primitive, nullptr, nullptr} : Saved{};
    Saved sb = r.node->parents[0] ? Saved{b.primitive, nullptr, nullptr} : Saved{};
    return r.finish([=](Ctx& ctx, IFT g) {
        const std::size_t ra = as.rank(), rb = bs.rank();
        if (ctx.needs(0)) {  // g @ bᵀ
            auto bt = B::float_swap_dims(ctx.get(sb), rb - 2, rb - 1);
            ctx.add(0, M::reduce_to(B::float_matmul(g, std::move(bt)), as));
        }
        if (ctx.needs(1)) {  // aᵀ @ g
            // b shared by every batch of a (a Linear's weight under [N, T, C] input): the sum
            // over the batches of a_iᵀ·g_i is one product of the batches stacked as rows,
            // Aᵀ·G. One GEMM instead of a batched one, a batch-sized partial result and its
            // reduction, and the sum accumulated in the GEMM's precision (f32 for f16/bf16).
            std::size_t rows = as[ra - 2];
            bool b_shared = ra > 2;
            for (std::size_t d = 0; d + 2 < ra; ++d) rows *= as[d];
            for (std::size_t d = 0; d + 2 < rb; ++d) b_shared = b_shared && bs[d] == 1;
            if (b_shared && rows > as[ra - 2]) {
                const Shape gs = B::float_shape(g);
                auto a2 = B::float_reshape(ctx.get(sa), Shape{rows, as[ra - 1]});
                auto g2 = B::float_reshape(std::move(g), Shape{rows, gs[gs.rank() - 1]});
                auto w = B::float_matmul(B::float_swap_dims(std::move(a2), 0, 1), std::move(g2));
                ctx.add(1, B::float_reshape(std::move(w), bs));
                return;
            }
            auto at = B::float_swap_dims(ctx.get(sa), ra - 2, ra - 1);
            ctx.add(1, M::reduce_to(B::float_matmul(std::move(at), std::move(g)), bs));
        }
    });
}

EMBER_AD auto Autodiff<B, C>::fused_matmul_epilogue(const FT& a, const FT& b,
                                                    std::optional<FT> bias,
                                                    fusion::MatmulEpilogue epilogue)
    -> std::optional<FT> {
    if constexpr (!fusion::MatmulEpilogueBackend<B>) {
        return std::nullopt;  // B has no epilogue: module::linear composes
    } else {
        if (epilogue.relu || !bias) return std::nullopt;
        std::optional<IFT> y =
            B::fused_matmul_epilogue(a.primitive, b.primitive, bias->primitive, {});
        if (!y) return std::nullopt;
        auto r = record(std::move(*y), {&a, &b, &*bias});
        if (!r.node) return r.untracked();
        // As float_matmul's: the operands kept, each only where the other one's gradient needs
        // it.
        Saved sa = r.node->parents[1] ? Saved{a.primitive, nullptr, nullptr} : Saved{};
        Saved sb = r.node->parents[0] ? Saved{b.primitive, nullptr, nullptr} : Saved{};
        const Shape bias_shape = float_shape(*bias);
        return r.finish([=](Ctx& ctx, IFT g) {
            if (ctx.needs(0)) ctx.add(0, B::float_matmul(g, B::float_swap_dims(ctx.get(sb), 0, 1)));
            // The weight's and the bias's gradients from one product where B sums the bias's
            // in the product's epilogue (CUDA: cuBLASLt's), not in a reduction pass over g.
            if constexpr (requires(const IFT& t) { B::fused_matmul_bias_grad(t, t); }) {
                if (ctx.needs(1) && ctx.needs(2)) {
                    if (auto wb =
                            B::fused_matmul_bias_grad(B::float_swap_dims(ctx.get(sa), 0, 1), g)) {
                        ctx.add(2, B::float_reshape(std::move((*wb)[1]), bias_shape));
                        ctx.add(1, std::move((*wb)[0]));
                        return;
                    }
                }
            }
            if (ctx.needs(2))
                ctx.add(2, B::float_reshape(B::float_reduce_dim(ReduceOp::Sum, g, 0), bias_shape));
            if (ctx.needs(1))
                ctx.add(1, B::float_matmul(B::float_swap_dims(ctx.get(sa), 0, 1), std::move(g)));
        });
    }
}

EMBER_AD auto Autodiff<B, C>::embedding(FT weights, IT indices) -> FT {
    const Shape ws = float_shape(weights);
    const Device dev = float_device(weights);
    auto r = record(B::embedding(weights.primitive, indices), {&weights});
    if (!r.node) return r.untracked();
    return r.finish([=](Ctx& ctx, IFT g) {  // rows add back into a zero table
        const Shape is = B::int_shape(indices);
        auto flat = B::int_reshape(indices, Shape{is.num_elements()});
        auto rows = B::float_reshape(std::move(g), Shape{is.num_elements(), ws[1]});
        auto z = detail::ad::Math<B>::zeros(ws, B::float_dtype(rows), dev);
        ctx.add(0, B::float_select_assign(std::move(z), 0, std::move(flat), std::move(rows)));
    });
}

}  // namespace ember
