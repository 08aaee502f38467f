// Deformable convolution (torchvision's deform_conv2d): bilinear im2col (shaders/conv.comp,
// MODE 2) + matmul forward; the backward computes the column gradient by matmul and spreads
// it with shaders/deform_backward.comp.
#include <string>

#include "kernels.hpp"

namespace ember::detail::vk {

namespace {
constexpr std::uint32_t kLocal = 256;

using DeformGeometry = check::Deform;  // the shared deform_conv2d checks

/// Parameter words of conv.comp / deform_backward.comp for a deformable problem.
Params deform_words(i64 total, const VT& x, const DeformGeometry& geo, const Shape& ws,
                    const DeformConvOptions& o, bool has_mask, i64 off_offset, i64 mask_offset) {
    Params p;
    p.push(total);
    p.push(static_cast<i64>(x.shape[0]));
    p.push(static_cast<i64>(x.shape[1]));
    const i64 in[3] = {1, i64(x.shape[2]), i64(x.shape[3])};
    const i64 k[3] = {1, i64(ws[2]), i64(ws[3])};
    const i64 out[3] = {1, geo.oh, geo.ow};
    const i64 st[3] = {1, i64(o.stride[0]), i64(o.stride[1])};
    const i64 pad[3] = {0, i64(o.padding[0]), i64(o.padding[1])};
    const i64 dil[3] = {1, i64(o.dilation[0]), i64(o.dilation[1])};
    for (const i64* a : {in, k, out, st, pad, dil})
        for (int i = 0; i < 3; ++i) p.push(a[i]);
    p.push(x.strides[0]);
    p.push(x.strides[1]);
    p.push(0);
    p.push(x.strides[2]);
    p.push(x.strides[3]);
    p.push(x.offset);
    p.push(0);
    p.push(0);
    p.push(has_mask ? 1 : 0);
    p.push(off_offset);
    p.push(mask_offset);
    p.push(static_cast<i64>(o.offset_groups));
    return p;
}

/// The deformable columns [N, C * K, P] (times the mask).
VT deform_cols(const VT& x, const VT& off, const std::optional<VT>& mask, const DeformGeometry& geo,
               const Shape& ws, const DeformConvOptions& o) {
    const std::size_t N = x.shape[0], C = x.shape[1], K = ws[2] * ws[3];
    const auto P = static_cast<std::size_t>(geo.oh * geo.ow);
    VT cols = empty(Shape{N, C * K, P}, DType::F32, x.device);
    const std::size_t total = cols.num_elements();
    if (total == 0) return cols;
    Params p = deform_words(static_cast<i64>(total), x, geo, ws, o, mask.has_value(), off.offset,
                            mask ? mask->offset : 0);
    Context& cx = ctx(x);
    const std::int32_t spec[] = {2};
    const Pipeline& pipe = cx.pipeline("conv", spec, 4, kLocal);
    const Binding bs[] = {bind(cols, true), bind(x, false), bind(off, false),
                          mask ? bind(*mask, false) : bind(off, false)};
    cx.dispatch(pipe, bs, p.w, (total + kLocal - 1) / kLocal);
    return cols;
}

struct Prepared {
    VT x, off, w;
    std::optional<VT> mask;
};
Prepared prepare(VT x, VT off, VT w, std::optional<VT> mask) {
    Prepared r{cast(std::move(x), DType::F32), contiguous(cast(std::move(off), DType::F32)),
               contiguous(cast(std::move(w), DType::F32)), std::nullopt};
    if (mask) r.mask = contiguous(cast(std::move(*mask), DType::F32));
    return r;
}
}  // namespace

VT deform_conv2d(VT x, VT offset, VT w, std::optional<VT> mask, std::optional<VT> bias,
                 const DeformConvOptions& o) {
    const DeformGeometry geo = check::deform_conv2d("deform_conv2d", x, offset, w,
                                                    check::operand(mask), check::operand(bias), o);
    const DType dt = x.dtype;
    if (geo.out.num_elements() == 0) return empty(geo.out, dt, x.device);
    const Shape ws = w.shape;
    Prepared pr = prepare(std::move(x), std::move(offset), std::move(w), std::move(mask));
    const std::size_t N = pr.x.shape[0], G = o.weight_groups, cout = ws[0];
    VT cols = deform_cols(pr.x, pr.off, pr.mask, geo, ws, o);
    const std::size_t CK = cols.shape[1], P = cols.shape[2];
    cols = reshape(std::move(cols), Shape{N, G, CK / G, P});
    VT wm = reshape(pr.w, Shape{G, cout / G, CK / G});
    VT out = reshape(matmul(std::move(wm), std::move(cols)), geo.out);
    if (bias)
        out = binary(BinaryOp::Add, std::move(out),
                     reshape(cast(*bias, DType::F32), Shape{1, cout, 1, 1}));
    return cast(std::move(out), dt);
}

/// Gradients of deform_conv2d: x, offset, weight, then mask and bias when given.
struct DeformGrads {
    VT x, offset, weight;
    std::optional<VT> mask, bias;
};

DeformGrads deform_conv2d_backward(VT x, VT offset, VT w, std::optional<VT> mask,
                                   std::optional<VT> bias, VT grad, const DeformConvOptions& o) {
    const char* op = "deform_conv2d_backward";
    const DeformGeometry geo =
        check::deform_conv2d(op, x, offset, w, check::operand(mask), check::operand(bias), o);
    check::grad(op, x, grad, geo.out);
    const DType dt = x.dtype;
    const Shape xs = x.shape, ws = w.shape, os = offset.shape;
    const bool has_mask = mask.has_value();
    const Shape ms = has_mask ? mask->shape : Shape{};
    Prepared pr = prepare(std::move(x), std::move(offset), std::move(w), std::move(mask));
    const std::size_t N = xs[0], C = xs[1], G = o.weight_groups, cout = ws[0];
    const std::size_t K = ws[2] * ws[3];
    const auto P = static_cast<std::size_t>(geo.oh * geo.ow);
    VT g = reshape(contiguous(cast(std::move(grad), DType::F32)), Shape{N, G, cout / G, P});
    DeformGrads r;
    if (bias) {
        VT gb = reduce_dim(ReduceOp::Sum, reduce_dim(ReduceOp::Sum, g, 3), 0);
        r.bias = cast(reshape(std::move(gb), Shape{cout}), dt);
    }
    // Weight: Σ_n g[n] @ cols[n]ᵀ, as for a convolution.
    VT cols = reshape(deform_cols(pr.x, pr.off, pr.mask, geo, ws, o), Shape{N, G, C * K / G, P});
    const std::size_t perm[] = {0, 1, 3, 2};
    VT gw = reduce_dim(ReduceOp::Sum, matmul(g, permute(std::move(cols), perm)), 0);
    r.weight = cast(reshape(std::move(gw), ws), dt);
    // Columns: wᵀ @ g, then spread into x, offset and mask.
    const std::size_t wperm[] = {0, 2, 1};
    VT wm = reshape(pr.w, Shape{G, cout / G, C * K / G});
    VT gcol = contiguous(matmul(permute(std::move(wm), wperm), std::move(g)));  // [N, G, CgK, P]
    VT gx = full(xs, Scalar(0.0), DType::F32, pr.x.device);
    VT goff = empty(os, DType::F32, pr.x.device);
    VT gmask = has_mask ? empty(ms, DType::F32, pr.x.device) : goff;
    Context& cx = ctx(gx);
    auto run = [&](std::int32_t mode, const VT& out, const VT& out2, std::size_t total) {
        if (total == 0) return;
        Params p = deform_words(static_cast<i64>(total), pr.x, geo, ws, o, has_mask, pr.off.offset,
                                has_mask ? pr.mask->offset : 0);
        const std::int32_t spec[] = {mode};
        const Pipeline& pipe = cx.pipeline("deform_backward", spec, 6, kLocal);
        const Binding bs[] = {bind(out, true),
                              bind(out2, true),
                              bind(pr.x, false),
                              bind(pr.off, false),
                              has_mask ? bind(*pr.mask, false) : bind(pr.off, false),
                              bind(gcol, false)};
        cx.dispatch(pipe, bs, p.w, (total + kLocal - 1) / kLocal);
    };
    run(0, gx, gx, N * C * K * P);
    run(1, goff, gmask, N * o.offset_groups * K * P);
    r.x = cast(std::move(gx), dt);
    r.offset = cast(std::move(goff), dt);
    if (has_mask) r.mask = cast(std::move(gmask), dt);
    return r;
}

}  // namespace ember::detail::vk

// ---- VulkanBackend's ops on the kernels above ----
namespace ember {
namespace k = detail::vk;

auto VulkanBackend::deform_conv2d(FT x, FT off, FT w, std::optional<FT> m, std::optional<FT> b,
                                  const DeformConvOptions& o) -> FT {
    return k::deform_conv2d(std::move(x), std::move(off), std::move(w), std::move(m), std::move(b),
                            o);
}
auto VulkanBackend::deform_conv2d_backward(FT x, FT off, FT w, std::optional<FT> m,
                                           std::optional<FT> b, FT g, const DeformConvOptions& o)
    -> DeformConv2dGrads<FT> {
    auto r = k::deform_conv2d_backward(std::move(x), std::move(off), std::move(w), std::move(m),
                                       std::move(b), std::move(g), o);
    return {std::move(r.x), std::move(r.offset), std::move(r.weight), std::move(r.mask),
            std::move(r.bias)};
}

}  // namespace ember
