// Convolutions as im2col + one grouped, strided-batched cuBLAS GEMM (the group is the batch),
// transposed convolutions as GEMM + col2im, their weight gradients as GEMM against im2col, the
// deformable convolution through torchvision's sampling; pooling and interpolation with
// PyTorch's geometry. f16/bf16 inputs run in f32 and are rounded once at the end.
#include <string>

#include "gemm.hpp"
#include "ops.hpp"

namespace ember::detail::cuda {

namespace {
using i64 = std::int64_t;

DType float_compute(DType d) {
    return d == DType::F64 ? DType::F64 : DType::F32;
}

void check_conv_inputs(const char* op, const CudaTensor& x, const CudaTensor& w,
                       const std::optional<CudaTensor>& bias, std::size_t n) {
    EMBER_CHECK(n >= 1 && n <= 3, Argument, op, ": 1, 2 or 3 spatial dims are supported, got ", n);
    EMBER_CHECK(x.shape.rank() == n + 2, Shape, op, ": input must have rank ", n + 2,
                " [N, C, spatial...], got ", x.shape);
    EMBER_CHECK(w.shape.rank() == n + 2, Shape, op, ": weight must have rank ", n + 2, ", got ",
                w.shape);
    EMBER_CHECK(is_float(x.dtype), DType, op, ": needs a float input, got ", dtype_name(x.dtype));
    EMBER_CHECK(w.dtype == x.dtype, DType, op, ": weight dtype ", dtype_name(w.dtype),
                " differs from the input's ", dtype_name(x.dtype));
    check_same_device(op, x, w);
    if (bias) {
        EMBER_CHECK(bias->dtype == x.dtype, DType, op, ": bias dtype ", dtype_name(bias->dtype),
                    " differs from the input's ", dtype_name(x.dtype));
        check_same_device(op, x, *bias);
    }
}

std::string conv_name(const char* base, std::size_t n) {
    return std::string(base) + std::to_string(n) + "d";
}

/// [N, C, L...] (contiguous) → [C, N, L...] (contiguous).
CudaTensor channels_first(const CudaTensor& t) {
    const std::size_t r = t.shape.rank();
    std::array<std::size_t, kMaxRank> ax{};
    for (std::size_t i = 0; i < r; ++i) ax[i] = i;
    ax[0] = 1;
    ax[1] = 0;
    return contiguous(permute(t, std::span<const std::size_t>(ax.data(), r)));
}

/// out [N, C, spatial] from [C, N, spatial] with the bias added.
CudaTensor finish(CudaTensor cn, const Shape& out_shape, const std::optional<CudaTensor>& bias,
                  DType result) {
    const std::size_t r = out_shape.rank();
    Shape cs = out_shape;
    cs[0] = out_shape[1];
    cs[1] = out_shape[0];
    cn = reshape(std::move(cn), cs);
    CudaTensor out = channels_first(cn);  // [C, N, ...] → [N, C, ...]
    if (bias) {
        Shape bs = Shape::filled(r, 1);
        bs[1] = out_shape[1];
        out = binary(BinaryOp::Add, std::move(out), reshape(cast(*bias, out.dtype), bs));
    }
    return cast(std::move(out), result);
}

ConvGeom geometry(const Shape& x, const Shape& w, const Shape& out, std::size_t n,
                  const ConvParams& p, i64 channels) {
    ConvGeom g;
    g.batch = static_cast<i64>(x[0]);
    g.channels = channels;
    for (std::size_t d = 0; d < n; ++d) {
        const std::size_t s = 3 - n + d;
        g.in[s] = static_cast<i64>(x[2 + d]);
        g.out[s] = static_cast<i64>(out[2 + d]);
        g.k[s] = static_cast<i64>(w[2 + d]);
        g.stride[s] = static_cast<i64>(p.stride[d]);
        g.pad[s] = static_cast<i64>(p.padding[d]);
        g.dil[s] = static_cast<i64>(p.dilation[d]);
    }
    return g;
}

i64 taps(const Shape& w, std::size_t n) {
    i64 k = 1;
    for (std::size_t d = 0; d < n; ++d) k *= static_cast<i64>(w[2 + d]);
    return k;
}
}  // namespace

CudaTensor conv(CudaTensor x, CudaTensor w, std::optional<CudaTensor> bias, const ConvParams& p) {
    const std::size_t n = p.n;
    const std::string op = conv_name("conv", n);
    check_conv_inputs(op.c_str(), x, w, bias, n);
    const std::size_t cin = x.shape[1], cout = w.shape[0], g = p.groups;
    EMBER_CHECK(g >= 1 && cin % g == 0 && cout % g == 0, Shape, op, ": in channels (", cin,
                ") and out channels (", cout, ") must be divisible by groups (", g, "): input ",
                x.shape, ", weight ", w.shape);
    EMBER_CHECK(w.shape[1] == cin / g, Shape, op, ": weight ", w.shape, " expects ", w.shape[1] * g,
                " input channels, input ", x.shape, " has ", cin);
    if (bias)
        EMBER_CHECK(bias->shape.rank() == 1 && bias->shape[0] == cout, Shape, op, ": bias ",
                    bias->shape, " must be [", cout, "]");
    Shape out_shape{x.shape[0], cout};
    for (std::size_t d = 0; d < n; ++d) {
        EMBER_CHECK(p.stride[d] >= 1 && p.dilation[d] >= 1, Argument, op,
                    ": stride and dilation must be >= 1 (input ", x.shape, ")");
        const auto span = static_cast<i64>(x.shape[2 + d] + 2 * p.padding[d]) -
                          static_cast<i64>(p.dilation[d] * (w.shape[2 + d] - 1) + 1);
        EMBER_CHECK(span >= 0, Shape, op, ": kernel ", w.shape, " (dilation ", p.dilation[d],
                    ") is larger than the padded input ", x.shape);
        out_shape.push_back(static_cast<std::size_t>(span) / p.stride[d] + 1);
    }
    const DType result = x.dtype, cd = float_compute(x.dtype);
    x = contiguous(cast(std::move(x), cd));
    w = contiguous(cast(std::move(w), cd));
    const int dev = x.device();
    const ConvGeom geo = geometry(x.shape, w.shape, out_shape, n, p, static_cast<i64>(cin));
    const i64 K = taps(w.shape, n), L = geo.out[0] * geo.out[1] * geo.out[2], N = geo.batch;
    const i64 cg = static_cast<i64>(cin / g), og = static_cast<i64>(cout / g);
    CudaTensor col =
        empty(Shape{static_cast<std::size_t>(static_cast<i64>(cin) * K * N * L)}, cd, dev);
    launch_im2col(cd, geo, x.ptr(), col.ptr(), stream(dev));
    CudaTensor cn = empty(Shape{cout, static_cast<std::size_t>(N * L)}, cd, dev);
    // Per group: [og, cg·K] · [cg·K, N·L] → [og, N·L].
    gemm(dev, cd, false, false, og, N * L, cg * K, w.ptr(), cg * K, og * cg * K, col.ptr(), N * L,
         cg * K * N * L, cn.ptr(), N * L, og * N * L, static_cast<i64>(g), 0.0);
    return finish(std::move(cn), out_shape, bias, result);
}

CudaTensor conv_transpose(CudaTensor x, CudaTensor w, std::optional<CudaTensor> bias,
                          const ConvParams& p) {
    const std::size_t n = p.n;
    const std::string op = conv_name("conv_transpose", n);
    check_conv_inputs(op.c_str(), x, w, bias, n);
    const std::size_t cin = x.shape[1], g = p.groups;
    EMBER_CHECK(g >= 1 && cin % g == 0, Shape, op, ": in channels (", cin,
                ") must be divisible by groups (", g, "): input ", x.shape, ", weight ", w.shape);
    EMBER_CHECK(w.shape[0] == cin, Shape, op, ": weight ", w.shape, " must have ", cin,
                " input channels (input ", x.shape, ")");
    const std::size_t cout = w.shape[1] * g;
    if (bias)
        EMBER_CHECK(bias->shape.rank() == 1 && bias->shape[0] == cout, Shape, op, ": bias ",
                    bias->shape, " must be [", cout, "]");
    Shape out_shape{x.shape[0], cout};
    for (std::size_t d = 0; d < n; ++d) {
        EMBER_CHECK(p.stride[d] >= 1 && p.dilation[d] >= 1, Argument, op,
                    ": stride and dilation must be >= 1 (input ", x.shape, ")");
        EMBER_CHECK(p.padding_out[d] < p.stride[d] || p.padding_out[d] < p.dilation[d], Argument,
                    op, ": output padding ", p.padding_out[d],
                    " must be smaller than the stride or the dilation");
        const i64 o = (static_cast<i64>(x.shape[2 + d]) - 1) * static_cast<i64>(p.stride[d]) -
                      2 * static_cast<i64>(p.padding[d]) +
                      static_cast<i64>(p.dilation[d] * (w.shape[2 + d] - 1)) +
                      static_cast<i64>(p.padding_out[d]) + 1;
        EMBER_CHECK(o >= 1, Shape, op, ": output size ", o, " in spatial dim ", d,
                    " is not positive (input ", x.shape, ", weight ", w.shape, ")");
        out_shape.push_back(static_cast<std::size_t>(o));
    }
    const DType result = x.dtype, cd = float_compute(x.dtype);
    x = contiguous(cast(std::move(x), cd));
    w = contiguous(cast(std::move(w), cd));
    const int dev = x.device();
    // The col2im geometry sees the output as the "image" and the input positions as columns.
    ConvGeom geo = geometry(out_shape, w.shape, x.shape, n, p, static_cast<i64>(cout));
    const i64 K = taps(w.shape, n), N = geo.batch, Lin = geo.out[0] * geo.out[1] * geo.out[2];
    const i64 cg = static_cast<i64>(cin / g), og = static_cast<i64>(cout / g);
    CudaTensor xc = channels_first(x);  // [cin, N·Lin]
    CudaTensor col =
        empty(Shape{static_cast<std::size_t>(static_cast<i64>(cout) * K * N * Lin)}, cd, dev);
    // Per group: Wᵀ [og·K, cg] · x [cg, N·Lin] → col [og·K, N·Lin].
    gemm(dev, cd, true, false, og * K, N * Lin, cg, w.ptr(), og * K, cg * og * K, xc.ptr(), N * Lin,
         cg * N * Lin, col.ptr(), N * Lin, og * K * N * Lin, static_cast<i64>(g), 0.0);
    CudaTensor out = empty(out_shape, cd, dev);
    launch_col2im(cd, geo, col.ptr(), out.ptr(), stream(dev));
    if (bias) {
        Shape bs = Shape::filled(out_shape.rank(), 1);
        bs[1] = cout;
        out = binary(BinaryOp::Add, std::move(out), reshape(cast(*bias, cd), bs));
    }
    return cast(std::move(out), result);
}

CudaTensor conv_weight_backward(CudaTensor x, CudaTensor grad, const Shape& ws,
                                const ConvParams& p) {
    const std::size_t n = p.n, g = p.groups;
    const std::string op = conv_name("conv", n) + "_weight_backward";
    EMBER_CHECK(x.shape.rank() == n + 2 && grad.shape.rank() == n + 2 && ws.rank() == n + 2, Shape,
                op, ": input ", x.shape, ", grad ", grad.shape, " and weight shape ", ws,
                " must have rank ", n + 2);
    EMBER_CHECK(is_float(x.dtype) && grad.dtype == x.dtype, DType, op,
                ": needs float input and grad of one dtype");
    const std::size_t cin = x.shape[1], cout = ws[0];
    EMBER_CHECK(grad.shape[1] == cout && grad.shape[0] == x.shape[0] && g >= 1 && cin % g == 0 &&
                    cout % g == 0 && ws[1] == cin / g,
                Shape, op, ": input ", x.shape, ", grad ", grad.shape, " and weight shape ", ws,
                " do not fit (groups ", g, ")");
    const DType result = x.dtype, cd = float_compute(x.dtype);
    x = contiguous(cast(std::move(x), cd));
    grad = contiguous(cast(std::move(grad), cd));
    const int dev = x.device();
    const ConvGeom geo = geometry(x.shape, ws, grad.shape, n, p, static_cast<i64>(cin));
    const i64 K = taps(ws, n), L = geo.out[0] * geo.out[1] * geo.out[2], N = geo.batch;
    const i64 cg = static_cast<i64>(cin / g), og = static_cast<i64>(cout / g);
    CudaTensor col =
        empty(Shape{static_cast<std::size_t>(static_cast<i64>(cin) * K * N * L)}, cd, dev);
    launch_im2col(cd, geo, x.ptr(), col.ptr(), stream(dev));
    CudaTensor gc = channels_first(grad);  // [cout, N·L]
    CudaTensor dw = empty(ws, cd, dev);
    // Per group: grad [og, N·L] · colᵀ [N·L, cg·K] → [og, cg·K].
    gemm(dev, cd, false, true, og, cg * K, N * L, gc.ptr(), N * L, og * N * L, col.ptr(), N * L,
         cg * K * N * L, dw.ptr(), cg * K, og * cg * K, static_cast<i64>(g), 0.0);
    return cast(std::move(dw), result);
}

// ---- deformable convolution ----------------------------------------------------------------
namespace {
struct DeformSetup {
    DeformGeom g;
    Shape out_shape;
};

DeformSetup deform_setup(const CudaTensor& x, const CudaTensor& offset, const CudaTensor& w,
                         const std::optional<CudaTensor>& mask, const DeformConvOptions& o) {
    const char* op = "deform_conv2d";
    EMBER_CHECK(x.shape.rank() == 4 && w.shape.rank() == 4 && offset.shape.rank() == 4, Shape, op,
                ": input ", x.shape, ", offset ", offset.shape, " and weight ", w.shape,
                " must be 4-d");
    EMBER_CHECK(is_float(x.dtype) && w.dtype == x.dtype && offset.dtype == x.dtype &&
                    (!mask || mask->dtype == x.dtype),
                DType, op, ": input, offset, weight and mask need one float dtype");
    const std::size_t cin = x.shape[1], cout = w.shape[0];
    EMBER_CHECK(o.weight_groups >= 1 && o.offset_groups >= 1, Argument, op,
                ": groups must be >= 1");
    EMBER_CHECK(cin % o.weight_groups == 0 && cout % o.weight_groups == 0 &&
                    w.shape[1] == cin / o.weight_groups && cin % o.offset_groups == 0,
                Shape, op, ": input ", x.shape, " and weight ", w.shape,
                " do not fit the groups (weight ", o.weight_groups, ", offset ", o.offset_groups,
                ")");
    DeformSetup s;
    DeformGeom& g = s.g;
    g.batch = static_cast<i64>(x.shape[0]);
    g.channels = static_cast<i64>(cin);
    g.h = static_cast<i64>(x.shape[2]);
    g.w = static_cast<i64>(x.shape[3]);
    g.kh = static_cast<i64>(w.shape[2]);
    g.kw = static_cast<i64>(w.shape[3]);
    g.sh = static_cast<i64>(o.stride[0]);
    g.sw = static_cast<i64>(o.stride[1]);
    g.ph = static_cast<i64>(o.padding[0]);
    g.pw = static_cast<i64>(o.padding[1]);
    g.dh = static_cast<i64>(o.dilation[0]);
    g.dw = static_cast<i64>(o.dilation[1]);
    g.offset_groups = static_cast<i64>(o.offset_groups);
    EMBER_CHECK(g.sh >= 1 && g.sw >= 1 && g.dh >= 1 && g.dw >= 1, Argument, op,
                ": stride and dilation must be >= 1");
    const i64 sh = g.h + 2 * g.ph - (g.dh * (g.kh - 1) + 1),
              sw = g.w + 2 * g.pw - (g.dw * (g.kw - 1) + 1);
    EMBER_CHECK(sh >= 0 && sw >= 0, Shape, op, ": kernel ", w.shape,
                " is larger than the padded input ", x.shape);
    g.oh = sh / g.sh + 1;
    g.ow = sw / g.sw + 1;
    const auto oh = static_cast<std::size_t>(g.oh), ow = static_cast<std::size_t>(g.ow);
    const Shape off_shape{x.shape[0], 2 * o.offset_groups * w.shape[2] * w.shape[3], oh, ow};
    EMBER_CHECK(offset.shape == off_shape, Shape, op, ": offset must be ", off_shape, ", got ",
                offset.shape);
    if (mask) {
        const Shape mask_shape{x.shape[0], o.offset_groups * w.shape[2] * w.shape[3], oh, ow};
        EMBER_CHECK(mask->shape == mask_shape, Shape, op, ": mask must be ", mask_shape, ", got ",
                    mask->shape);
    }
    s.out_shape = Shape{x.shape[0], cout, oh, ow};
    return s;
}
}  // namespace

CudaTensor deform_conv2d(CudaTensor x, CudaTensor offset, CudaTensor w,
                         std::optional<CudaTensor> mask, std::optional<CudaTensor> bias,
                         const DeformConvOptions& o) {
    const DeformSetup st = deform_setup(x, offset, w, mask, o);
    const DType result = x.dtype, cd = float_compute(x.dtype);
    auto prep = [cd](CudaTensor t) { return contiguous(cast(std::move(t), cd)); };
    x = prep(std::move(x));
    offset = prep(std::move(offset));
    w = prep(std::move(w));
    if (mask) mask = prep(std::move(*mask));
    const int dev = x.device();
    const DeformGeom& g = st.g;
    const i64 K = g.kh * g.kw, L = g.oh * g.ow, N = g.batch, cin = g.channels;
    const i64 G = static_cast<i64>(o.weight_groups), cg = cin / G,
              og = static_cast<i64>(w.shape[0]) / G;
    CudaTensor col = empty(Shape{static_cast<std::size_t>(cin * K * N * L)}, cd, dev);
    launch_deform_im2col(cd, g, x.ptr(), offset.ptr(), mask ? mask->ptr() : nullptr, col.ptr(),
                         stream(dev));
    CudaTensor cn = empty(Shape{w.shape[0], static_cast<std::size_t>(N * L)}, cd, dev);
    gemm(dev, cd, false, false, og, N * L, cg * K, w.ptr(), cg * K, og * cg * K, col.ptr(), N * L,
         cg * K * N * L, cn.ptr(), N * L, og * N * L, G, 0.0);
    return finish(std::move(cn), st.out_shape, bias, result);
}

DeformGrads deform_conv2d_backward(CudaTensor x, CudaTensor offset, CudaTensor w,
                                   std::optional<CudaTensor> mask, std::optional<CudaTensor> bias,
                                   CudaTensor grad, const DeformConvOptions& o) {
    const DeformSetup st = deform_setup(x, offset, w, mask, o);
    EMBER_CHECK(grad.shape == st.out_shape, Shape, "deform_conv2d_backward: grad ", grad.shape,
                " must be ", st.out_shape);
    const DType result = x.dtype, cd = float_compute(x.dtype);
    auto prep = [cd](CudaTensor t) { return contiguous(cast(std::move(t), cd)); };
    x = prep(std::move(x));
    offset = prep(std::move(offset));
    w = prep(std::move(w));
    grad = prep(std::move(grad));
    if (mask) mask = prep(std::move(*mask));
    const int dev = x.device();
    const DeformGeom& g = st.g;
    const i64 K = g.kh * g.kw, L = g.oh * g.ow, N = g.batch, cin = g.channels;
    const i64 G = static_cast<i64>(o.weight_groups), cg = cin / G,
              og = static_cast<i64>(w.shape[0]) / G;
    CudaTensor col = empty(Shape{static_cast<std::size_t>(cin * K * N * L)}, cd, dev);
    launch_deform_im2col(cd, g, x.ptr(), offset.ptr(), mask ? mask->ptr() : nullptr, col.ptr(),
                         stream(dev));
    CudaTensor gc = channels_first(grad);  // [cout, N·L]
    DeformGrads out;
    out.weight = empty(w.shape, cd, dev);
    gemm(dev, cd, false, true, og, cg * K, N * L, gc.ptr(), N * L, og * N * L, col.ptr(), N * L,
         cg * K * N * L, out.weight.ptr(), cg * K, og * cg * K, G, 0.0);
    CudaTensor dcol = empty(Shape{static_cast<std::size_t>(cin * K * N * L)}, cd, dev);
    // Per group: Wᵀ [cg·K, og] · grad [og, N·L] → dcol [cg·K, N·L].
    gemm(dev, cd, true, false, cg * K, N * L, og, w.ptr(), cg * K, og * cg * K, gc.ptr(), N * L,
         og * N * L, dcol.ptr(), N * L, cg * K * N * L, G, 0.0);
    out.x = empty(x.shape, cd, dev);
    out.offset = empty(offset.shape, cd, dev);
    if (mask) out.mask = empty(mask->shape, cd, dev);
    launch_deform_col2im(cd, g, x.ptr(), offset.ptr(), mask ? mask->ptr() : nullptr, dcol.ptr(),
                         out.x.ptr(), out.offset.ptr(), mask ? out.mask->ptr() : nullptr,
                         stream(dev));
    if (bias) {
        CudaTensor b =
            reduce_dim(ReduceOp::Sum, reshape(gc, Shape{w.shape[0], std::size_t(N * L)}), 1);
        out.bias = cast(reshape(std::move(b), Shape{w.shape[0]}), result);
    }
    out.x = cast(std::move(out.x), result);
    out.offset = cast(std::move(out.offset), result);
    out.weight = cast(std::move(out.weight), result);
    if (out.mask) out.mask = cast(std::move(*out.mask), result);
    return out;
}

}  // namespace ember::detail::cuda
