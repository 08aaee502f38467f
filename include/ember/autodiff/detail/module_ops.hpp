#pragma once
// Backward rules of the module ops. A convolution's input gradient is the transposed
// convolution of the output gradient (and the other way round), its weight gradient comes from
// the inner backend's *_weight_backward kernel, its bias gradient is a sum. Max pooling routes
// the gradient through its argmax indices; average and adaptive pooling, interpolation and
// deformable convolution call the inner backend's backward kernels.

namespace ember {

namespace detail::ad {
/// Sums an [N, C, ...] gradient down to the bias shape [C]: viewed as [N, C, spatial], the
/// spatial positions (contiguous rows) first, then the batch: two reductions whatever the rank,
/// the larger one along the innermost dim.
template <typename B>
typename B::FloatTensorPrimitive bias_grad(typename B::FloatTensorPrimitive g) {
    const Shape s = B::float_shape(g);
    std::size_t spatial = 1;
    for (std::size_t d = 2; d < s.rank(); ++d) spatial *= s[d];
    if (s.rank() > 2) {
        g = B::float_reshape(std::move(g), Shape{s[0], s[1], spatial});
        g = B::float_reduce_dim(ReduceOp::Sum, std::move(g), 2);
    }
    g = B::float_reduce_dim(ReduceOp::Sum, std::move(g), 0);
    return B::float_reshape(std::move(g), Shape{s[1]});
}

template <std::size_t N>
struct ConvFns;
#define EMBER_AD_CONV_FNS(N)                                                                  \
    template <>                                                                               \
    struct ConvFns<N> {                                                                       \
        template <typename B, typename... A>                                                  \
        static auto conv(A&&... a) { return B::conv##N##d(std::forward<A>(a)...); }           \
        template <typename B, typename... A>                                                  \
        static auto transpose(A&&... a) {                                                     \
            return B::conv_transpose##N##d(std::forward<A>(a)...);                            \
        }                                                                                     \
        template <typename B, typename... A>                                                  \
        static auto weight_backward(A&&... a) {                                               \
            return B::conv##N##d_weight_backward(std::forward<A>(a)...);                      \
        }                                                                                     \
    };
EMBER_AD_CONV_FNS(1)
EMBER_AD_CONV_FNS(2)
EMBER_AD_CONV_FNS(3)
#undef EMBER_AD_CONV_FNS

/// Records conv{N}d(x, w, bias) on Autodiff<B, C>.
template <typename AD, std::size_t N>
typename AD::FT conv(typename AD::FT x, typename AD::FT w, std::optional<typename AD::FT> bias,
                     const ConvOptions<N>& o) {
    using B = typename AD::InnerBackend;
    using IFT = typename B::FloatTensorPrimitive;
    using F = ConvFns<N>;
    std::optional<IFT> ib;
    if (bias) ib = bias->primitive;
    auto r = AD::record(F::template conv<B>(x.primitive, w.primitive, ib, o),
                        {&x, &w, bias ? &*bias : nullptr});
    if (!r.node) return r.untracked();
    const Shape xs = AD::float_shape(x), ws = AD::float_shape(w);
    typename AD::Saved sx = r.node->parents[1] ? typename AD::Saved{x.primitive} : typename AD::Saved{};
    typename AD::Saved sw = r.node->parents[0] ? typename AD::Saved{w.primitive} : typename AD::Saved{};
    return r.finish([=](typename AD::Ctx& ctx, IFT g) {
        if (ctx.needs(0)) {
            // The transposed convolution maps the output back onto the input; output_padding
            // restores the rows a strided forward dropped.
            const Shape gs = B::float_shape(g);
            ConvTransposeOptions<N> t;
            t.stride = o.stride;
            t.padding = o.padding;
            t.dilation = o.dilation;
            t.groups = o.groups;
            for (std::size_t i = 0; i < N; ++i) {
                const std::size_t full = (gs[i + 2] - 1) * o.stride[i] + o.dilation[i] * (ws[i + 2] - 1) + 1;
                t.padding_out[i] = xs[i + 2] + 2 * o.padding[i] - full;
            }
            ctx.add(0, F::template transpose<B>(g, ctx.get(sw), std::nullopt, t));
        }
        if (ctx.needs(1)) ctx.add(1, F::template weight_backward<B>(ctx.get(sx), g, ws, o));
        if (ctx.needs(2)) ctx.add(2, bias_grad<B>(std::move(g)));
    });
}

/// Records conv_transpose{N}d(x, w, bias) on Autodiff<B, C>.
template <typename AD, std::size_t N>
typename AD::FT conv_transpose(typename AD::FT x, typename AD::FT w,
                               std::optional<typename AD::FT> bias,
                               const ConvTransposeOptions<N>& o) {
    using B = typename AD::InnerBackend;
    using IFT = typename B::FloatTensorPrimitive;
    using F = ConvFns<N>;
    std::optional<IFT> ib;
    if (bias) ib = bias->primitive;
    auto r = AD::record(F::template transpose<B>(x.primitive, w.primitive, ib, o),
                        {&x, &w, bias ? &*bias : nullptr});
    if (!r.node) return r.untracked();
    const Shape ws = AD::float_shape(w);
    ConvOptions<N> c;  // the forward convolution this one transposes
    c.stride = o.stride;
    c.padding = o.padding;
    c.dilation = o.dilation;
    c.groups = o.groups;
    typename AD::Saved sx = r.node->parents[1] ? typename AD::Saved{x.primitive} : typename AD::Saved{};
    typename AD::Saved sw = r.node->parents[0] ? typename AD::Saved{w.primitive} : typename AD::Saved{};
    const Shape xs = AD::float_shape(x);
    return r.finish([=](typename AD::Ctx& ctx, IFT g) {
        if (ctx.needs(2)) ctx.add(2, bias_grad<B>(g));
        if (!ctx.needs(0) && !ctx.needs(1)) return;
        // With output padding >= the stride (allowed below the dilation), the convolution of g
        // has floor(padding_out / stride) more positions than x: they meet only zeros of x.
        const Shape gs = B::float_shape(g);
        Shape cs = xs;
        std::array<Slice, N + 2> fit{};
        bool extra = false;
        for (std::size_t i = 0; i < N; ++i) {
            cs[i + 2] = (gs[i + 2] + 2 * o.padding[i] - o.dilation[i] * (ws[i + 2] - 1) - 1) /
                            o.stride[i] + 1;
            fit[i + 2] = Slice{0, static_cast<long>(xs[i + 2])};
            extra = extra || cs[i + 2] != xs[i + 2];
        }
        const std::span<const Slice> fit_span(fit.data(), N + 2);
        if (ctx.needs(0)) {
            auto gx = F::template conv<B>(g, ctx.get(sw), std::nullopt, c);
            ctx.add(0, extra ? B::float_slice(std::move(gx), fit_span) : std::move(gx));
        }
        // As a convolution from the output space (g) to the input space (x), the weight layout
        // [C_in, C_out / groups, k...] is exactly that convolution's weight.
        if (ctx.needs(1)) {
            IFT xv = ctx.get(sx);
            if (extra) {
                cs[0] = xs[0];
                cs[1] = xs[1];
                xv = B::float_slice_assign(Math<B>::zeros(cs, B::float_dtype(xv), B::float_device(xv)),
                                           fit_span, std::move(xv));
            }
            ctx.add(1, F::template weight_backward<B>(std::move(g), std::move(xv), ws, c));
        }
    });
}

/// Max pooling with indices, recorded: the gradient goes to each window's argmax.
template <typename AD, std::size_t N, typename Fwd>
std::pair<typename AD::FT, typename AD::IT> max_pool(typename AD::FT x, Fwd forward) {
    using B = typename AD::InnerBackend;
    using IFT = typename B::FloatTensorPrimitive;
    auto [v, i] = forward(x.primitive);
    auto r = AD::record(std::move(v), {&x});
    if (!r.node) return {r.untracked(), std::move(i)};
    const Shape xs = AD::float_shape(x);
    const auto dev = AD::float_device(x);
    // The index tensor by name: some compilers (Clang < 16) cannot capture a structured binding.
    return {r.finish([=, i = i](typename AD::Ctx& ctx, IFT g) {
                // Indices are flat within each [N, C] plane: scatter over the flattened plane.
                const Shape gs = B::float_shape(g);
                std::size_t plane = 1, out_plane = 1;
                for (std::size_t d = 2; d < xs.rank(); ++d) plane *= xs[d];
                for (std::size_t d = 2; d < gs.rank(); ++d) out_plane *= gs[d];
                auto gf = B::float_reshape(std::move(g), Shape{gs[0], gs[1], out_plane});
                auto idx = B::int_reshape(i, Shape{gs[0], gs[1], out_plane});
                auto z = Math<B>::zeros(Shape{xs[0], xs[1], plane}, B::float_dtype(gf), dev);
                auto dx = B::float_scatter(2, std::move(z), std::move(idx), std::move(gf));
                ctx.add(0, B::float_reshape(std::move(dx), xs));
            }),
            i};
}

/// A single-input op whose gradient kernel takes (x, g): pooling, interpolation.
template <typename AD, typename Fwd, typename Bwd>
typename AD::FT with_kernel(typename AD::FT x, Fwd forward, Bwd backward) {
    using IFT = typename AD::InnerBackend::FloatTensorPrimitive;
    auto r = AD::record(forward(x.primitive), {&x});
    if (!r.node) return r.untracked();
    IFT xv = x.primitive;
    return r.finish([xv, backward](typename AD::Ctx& ctx, IFT g) { ctx.add(0, backward(xv, std::move(g))); });
}
}  // namespace detail::ad

#define EMBER_AD_CONV(N)                                                                      \
    EMBER_AD auto Autodiff<B, C>::conv##N##d(FT x, FT w, std::optional<FT> bias,              \
                                             const ConvOptions<N>& o) -> FT {                 \
        return detail::ad::conv<Autodiff, N>(std::move(x), std::move(w), std::move(bias), o); \
    }                                                                                         \
    EMBER_AD auto Autodiff<B, C>::conv_transpose##N##d(FT x, FT w, std::optional<FT> bias,    \
                                                       const ConvTransposeOptions<N>& o) -> FT { \
        return detail::ad::conv_transpose<Autodiff, N>(std::move(x), std::move(w),          \
                                                        std::move(bias), o);                  \
    }
EMBER_AD_CONV(1)
EMBER_AD_CONV(2)
EMBER_AD_CONV(3)
#undef EMBER_AD_CONV

EMBER_AD auto Autodiff<B, C>::deform_conv2d(FT x, FT offset, FT w, std::optional<FT> mask,
                                            std::optional<FT> bias, const DeformConvOptions& o)
    -> FT {
    std::optional<IFT> im, ib;
    if (mask) im = mask->primitive;
    if (bias) ib = bias->primitive;
    auto r = record(B::deform_conv2d(x.primitive, offset.primitive, w.primitive, im, ib, o),
                    {&x, &offset, &w, mask ? &*mask : nullptr, bias ? &*bias : nullptr});
    if (!r.node) return r.untracked();
    IFT xv = x.primitive, ov = offset.primitive, wv = w.primitive;
    return r.finish([=](Ctx& ctx, IFT g) {
        auto d = B::deform_conv2d_backward(xv, ov, wv, im, ib, std::move(g), o);
        ctx.add(0, std::move(d.x));
        ctx.add(1, std::move(d.offset));
        ctx.add(2, std::move(d.weight));
        if (d.mask) ctx.add(3, std::move(*d.mask));
        if (d.bias) ctx.add(4, std::move(*d.bias));
    });
}

#define EMBER_AD_POOL(N)                                                                       \
    EMBER_AD auto Autodiff<B, C>::avg_pool##N##d(FT x, const PoolOptions<N>& o) -> FT {        \
        return detail::ad::with_kernel<Autodiff>(                                              \
            std::move(x), [&](const IFT& v) { return B::avg_pool##N##d(v, o); },               \
            [o](IFT v, IFT g) { return B::avg_pool##N##d_backward(std::move(v), std::move(g), o); }); \
    }                                                                                          \
    EMBER_AD auto Autodiff<B, C>::max_pool##N##d_with_indices(FT x, const PoolOptions<N>& o)   \
        -> std::pair<FT, IT> {                                                                 \
        return detail::ad::max_pool<Autodiff, N>(                                              \
            std::move(x), [&](const IFT& v) { return B::max_pool##N##d_with_indices(v, o); }); \
    }                                                                                          \
    EMBER_AD auto Autodiff<B, C>::max_pool##N##d(FT x, const PoolOptions<N>& o) -> FT {        \
        if (!x.node) return from_inner(B::max_pool##N##d(std::move(x.primitive), o));          \
        return max_pool##N##d_with_indices(std::move(x), o).first;                             \
    }
EMBER_AD_POOL(1)
EMBER_AD_POOL(2)
#undef EMBER_AD_POOL

EMBER_AD auto Autodiff<B, C>::adaptive_avg_pool1d(FT x, std::size_t output_size) -> FT {
    return detail::ad::with_kernel<Autodiff>(
        std::move(x), [&](const IFT& v) { return B::adaptive_avg_pool1d(v, output_size); },
        [](IFT v, IFT g) { return B::adaptive_avg_pool1d_backward(std::move(v), std::move(g)); });
}

EMBER_AD auto Autodiff<B, C>::adaptive_avg_pool2d(FT x, std::array<std::size_t, 2> output_size)
    -> FT {
    return detail::ad::with_kernel<Autodiff>(
        std::move(x), [&](const IFT& v) { return B::adaptive_avg_pool2d(v, output_size); },
        [](IFT v, IFT g) { return B::adaptive_avg_pool2d_backward(std::move(v), std::move(g)); });
}

EMBER_AD auto Autodiff<B, C>::interpolate(FT x, std::array<std::size_t, 2> output_size,
                                          const InterpolateOptions& o) -> FT {
    return detail::ad::with_kernel<Autodiff>(
        std::move(x), [&](const IFT& v) { return B::interpolate(v, output_size, o); },
        [output_size, o](IFT v, IFT g) {
            return B::interpolate_backward(std::move(v), std::move(g), output_size, o);
        });
}

#undef EMBER_AD

}  // namespace ember
