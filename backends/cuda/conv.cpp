// Convolutions, transposed convolutions and weight gradients through cuDNN where it is loaded
// and takes the configuration (cudnn.cpp: forward, backward-data and backward-filter, in the
// operands' own float dtype), otherwise as im2col + one grouped, strided-batched cuBLAS GEMM (the
// group is the batch), transposed convolutions as GEMM + col2im, their weight gradients as GEMM
// against im2col; the deformable convolution through torchvision's sampling. On the im2col path
// f16/bf16 inputs run in f32 and are rounded once at the end.
//
// Channels-last: a 2-d convolution whose input (the output gradient, for a transposed one) is
// stored channels-last runs on cuDNN in that layout (its tensor-core kernels' own): the filter
// is copied to KRSC, the other operand brought to the same layout, and the result is
// channels-last too, so a network fed channels-last data stays so from layer to layer; so is
// the weight gradient (KRSC: no copy where the weight is stored channels-last as well, as
// PyTorch's model.to(memory_format=torch.channels_last) stores it). Elsewhere the result is
// contiguous.
//
// Two shapes leave cuDNN's legacy API: a strided 1×1 convolution without padding over
// channels-last data (a ResNet's shortcut) is one cuBLAS GEMM over the strided positions copied
// out densely, and where cuDNN does not take a weight gradient whose output channels each see
// few values a position (cin/groups · taps ≤ 32: a first layer on RGB images), conv_wgrad.cu's
// kernels sum it over the whole GPU instead of im2col + GEMM.
#include <array>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "conv_small.hpp"
#include "conv_wgrad.hpp"
#include "cudnn.hpp"
#include "gemm.hpp"
#include "ops.hpp"

namespace ember::detail::cuda {

namespace {
using i64 = std::int64_t;

DType float_compute(DType d) {
    return d == DType::F64 ? DType::F64 : DType::F32;
}

/// Whether a 2-d convolution's data operand asks for the channels-last path.
bool cl_operands(const CudaTensor& x, const ConvParams& p) {
    return p.n == 2 && is_channels_last(x);
}

/// An uninitialised tensor stored channels-last.
CudaTensor empty_channels_last(const Shape& s, DType dt, int device) {
    CudaTensor t = empty(s, dt, device);
    t.strides = channels_last_strides(s);
    return t;
}

/// `t` in dtype `dt`, stored channels-last: one copy at most (cast and relaid at once).
CudaTensor channels_last_in(const CudaTensor& t, DType dt) {
    if (is_channels_last(t)) return cast(t, dt);
    CudaTensor out = empty_channels_last(t.shape, dt, t.device());
    copy_into(out, t);
    return out;
}

/// `out` in the layout of the operand `like` it was computed from: channels-last data stays
/// channels-last whichever path ran.
CudaTensor same_layout(CudaTensor out, const CudaTensor& like) {
    return is_channels_last(like) ? to_channels_last(std::move(out)) : out;
}

/// The operands of a convolution on one device (the shapes and dtypes: check::conv and friends).
void check_devices(const char* op, const CudaTensor& x, const CudaTensor& w,
                   const std::optional<CudaTensor>& bias) {
    check_same_device(op, x, w);
    if (bias) check_same_device(op, x, *bias);
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

/// `out` with the bias added (broadcast over [N, C, ...]) and converted to `result`.
CudaTensor with_bias(CudaTensor out, const std::optional<CudaTensor>& bias, DType result) {
    if (bias) {
        Shape bs = Shape::filled(out.shape.rank(), 1);
        bs[1] = out.shape[1];
        out = binary(BinaryOp::Add, std::move(out), reshape(cast(*bias, out.dtype), bs));
    }
    return cast(std::move(out), result);
}

i64 taps(const Shape& w, std::size_t n) {
    i64 k = 1;
    for (std::size_t d = 0; d < n; ++d) k *= static_cast<i64>(w[2 + d]);
    return k;
}

/// EMBER_CUDA_CONV_WGRAD=cudnn turns the direct weight-gradient kernels (conv_wgrad.cu's and
/// conv_small.cu's) off (to compare).
bool direct_wgrad_enabled() {
    static const bool on = [] {
        const char* v = std::getenv("EMBER_CUDA_CONV_WGRAD");
        return v == nullptr || std::string_view(v) != "cudnn";
    }();
    return on;
}

/// The weight gradient through conv_wgrad.cu's kernels where each output channel sees few
/// input values per position (a first layer on RGB images: 3·3·3 = 27) and there are enough
/// output channels per group to fill a block's lanes: a reduction over every position of the
/// batch into a tiny output, which cuDNN's kernels spread over too few blocks. Channels-last
/// data gives a channels-last (KRSC) gradient, as the cuDNN path.
std::optional<CudaTensor> direct_weight_backward(const CudaTensor& x, const CudaTensor& grad,
                                                 const Shape& ws, const ConvParams& p) {
    const DType t = x.dtype;
    const i64 g = static_cast<i64>(p.groups), cout = static_cast<i64>(ws[0]);
    const i64 cg = static_cast<i64>(x.shape[1]) / g;
    if (!direct_wgrad_enabled() || (t != DType::F32 && t != DType::F16 && t != DType::BF16) ||
        cg * taps(ws, p.n) > kWgradTaps || cout / g < 32 || x.shape.num_elements() == 0 ||
        grad.shape.num_elements() == 0)
        return std::nullopt;
    WgradGeom geo;
    geo.conv = geometry(x.shape, ws, grad.shape, p.n, p, static_cast<i64>(x.shape[1]));
    geo.groups = g;
    geo.cout = cout;
    const bool cl = cl_operands(x, p);
    CudaTensor dw = cl ? empty_channels_last(ws, t, x.device()) : empty(ws, t, x.device());
    for (std::size_t d = 0; d < 2; ++d) {
        geo.xs[d] = x.strides[d];
        geo.ys[d] = grad.strides[d];
        geo.ws[d] = dw.strides[d];
    }
    for (std::size_t d = 0; d < p.n; ++d) {
        const std::size_t s = 3 - p.n + d;  // 3-d form: leading unit dims
        geo.xs[2 + s] = x.strides[2 + d];
        geo.ys[2 + s] = grad.strides[2 + d];
        geo.ws[2 + s] = dw.strides[2 + d];
    }
    geo.dy_channels_fast = grad.strides[1] == 1;
    const int dev = x.device(), sms = multiprocessors(dev);
    CudaTensor part =
        empty(Shape{static_cast<std::size_t>(wgrad_partials(geo, sms))}, DType::F32, dev);
    launch_wgrad_direct(t, geo, sms, x.ptr(), grad.ptr(), static_cast<float*>(part.ptr()), dw.ptr(),
                        stream(dev));
    return dw;
}

/// EMBER_CUDA_CONV_FWD=cudnn turns the few-channel forward kernel off (to compare).
bool small_forward_enabled() {
    static const bool on = [] {
        const char* v = std::getenv("EMBER_CUDA_CONV_FWD");
        return v == nullptr || std::string_view(v) != "cudnn";
    }();
    return on;
}

/// Whether conv_small.cu may take these operands: f32, dense NCHW, a 2-d convolution of one group.
bool small_operands(const CudaTensor& x, const CudaTensor& other, const ConvParams& p) {
    return p.n == 2 && p.groups == 1 && x.dtype == DType::F32 && other.dtype == DType::F32 &&
           x.is_contiguous() && other.is_contiguous() && x.shape.num_elements() > 0;
}

/// A few-channel f32 convolution (cin · kh · kw ≤ 32: a first layer) through conv_small.cu:
/// cuDNN's exact-f32 forward took 0.20 ms for the guide CNN's 1 → 8 layer at batch 4096 on an
/// H200, this kernel about the time of writing its output.
std::optional<CudaTensor> small_forward(const CudaTensor& x, const CudaTensor& w,
                                        const std::optional<CudaTensor>& bias, const ConvParams& p,
                                        const Shape& out_shape) {
    if (!small_forward_enabled() || !small_operands(x, w, p) ||
        (bias && (bias->dtype != DType::F32 || !bias->is_contiguous())))
        return std::nullopt;
    const i64 cout = static_cast<i64>(w.shape[0]);
    const ConvGeom geo =
        geometry(x.shape, w.shape, out_shape, p.n, p, static_cast<i64>(x.shape[1]));
    if (!small_forward_fits(geo, cout)) return std::nullopt;
    const int dev = x.device();
    CudaTensor y = empty(out_shape, DType::F32, dev);
    launch_conv_small_forward(geo, cout, static_cast<const float*>(x.ptr()),
                              static_cast<const float*>(w.ptr()),
                              bias ? static_cast<const float*>(bias->ptr()) : nullptr,
                              static_cast<float*>(y.ptr()), stream(dev));
    return y;
}

/// A few-channel f32 weight gradient (3 × 3, cout · cin ≤ 256) through conv_small.cu: cuDNN's
/// exact-f32 algorithms took 0.34 and 0.72 ms for the guide CNN's two layers at batch 4096 on
/// an H200 (a reduction over 2.8 M positions into 72 or 1152 weights, on few blocks).
std::optional<CudaTensor> small_weight_backward(const CudaTensor& x, const CudaTensor& grad,
                                                const Shape& ws, const ConvParams& p) {
    if (!direct_wgrad_enabled() || !small_operands(x, grad, p) || grad.shape.num_elements() == 0)
        return std::nullopt;
    const i64 cout = static_cast<i64>(ws[0]);
    const ConvGeom geo = geometry(x.shape, ws, grad.shape, p.n, p, static_cast<i64>(x.shape[1]));
    if (!small_wgrad_fits(geo, cout)) return std::nullopt;
    const int dev = x.device(), sms = multiprocessors(dev);
    CudaTensor part = empty(Shape{static_cast<std::size_t>(small_wgrad_partials(geo, cout, sms))},
                            DType::F32, dev);
    CudaTensor dw = empty(ws, DType::F32, dev);
    launch_conv_small_wgrad(geo, cout, sms, static_cast<const float*>(x.ptr()),
                            static_cast<const float*>(grad.ptr()), static_cast<float*>(part.ptr()),
                            static_cast<float*>(dw.ptr()), stream(dev));
    return dw;
}

/// A 1×1 convolution with a stride above 1 and no padding over channels-last data, as one GEMM:
/// the strided input positions copied out densely ([N·Ho·Wo, C], channels-last), times the
/// weight ([K, C]) transposed, is the channels-last output. cuDNN's legacy API runs these (a
/// ResNet's downsampling shortcuts) on kernels without tensor cores, 60-85 µs each at batch 256
/// on an H200, against ~10 µs here.
std::optional<CudaTensor> strided_pointwise(const CudaTensor& x, const CudaTensor& w,
                                            const std::optional<CudaTensor>& bias,
                                            const ConvParams& p, const Shape& out_shape) {
    const DType t = x.dtype;
    if (!cl_operands(x, p) || p.groups != 1 || w.dtype != t || w.shape[2] != 1 || w.shape[3] != 1 ||
        p.padding[0] != 0 || p.padding[1] != 0 || (p.stride[0] == 1 && p.stride[1] == 1) ||
        (t != DType::F32 && t != DType::F16 && t != DType::BF16))
        return std::nullopt;
    const int dev = x.device();
    // The positions the kernel visits: a view with the strides multiplied.
    CudaTensor picked = x;
    picked.shape = out_shape;
    picked.shape[1] = x.shape[1];
    picked.strides[2] = x.strides[2] * static_cast<i64>(p.stride[0]);
    picked.strides[3] = x.strides[3] * static_cast<i64>(p.stride[1]);
    CudaTensor xs = empty_channels_last(picked.shape, t, dev);
    copy_into(xs, picked);
    // [K, C, 1, 1] is [K, C] row-major in either layout once dense.
    const CudaTensor wk = w.is_contiguous() || is_channels_last(w) ? w : contiguous(w);
    CudaTensor y = empty_channels_last(out_shape, t, dev);
    const i64 rows = static_cast<i64>(out_shape[0] * out_shape[2] * out_shape[3]),
              k = static_cast<i64>(w.shape[0]), c = static_cast<i64>(x.shape[1]);
    gemm(dev, t, false, true, rows, k, c, xs.ptr(), c, 0, wk.ptr(), c, 0, y.ptr(), k, 0, 1, 0.0);
    return with_bias(std::move(y), bias, t);
}
}  // namespace

CudaTensor conv(CudaTensor x, CudaTensor w, std::optional<CudaTensor> bias, const ConvParams& p) {
    const check::Conv c = check::conv(x, w, check::operand(bias), p);
    check_devices("conv", x, w, bias);
    const std::size_t n = p.n, cin = x.shape[1], cout = w.shape[0], g = p.groups;
    const Shape& out_shape = c.out;
    const DType result = x.dtype, cd = float_compute(x.dtype);
    if (auto y = strided_pointwise(x, w, bias, p, out_shape)) return std::move(*y);
    if (auto y = small_forward(x, w, bias, p, out_shape)) return std::move(*y);
    if (cudnn::wanted()) {
        const DType nd = cudnn::native_dtype(x.dtype, w.dtype);
        if (cl_operands(x, p)) {
            CudaTensor xn = channels_last_in(x, nd), wn = channels_last_in(w, nd);
            CudaTensor y = empty_channels_last(out_shape, nd, xn.device());
            if (cudnn::forward(xn, wn, y, p)) return with_bias(std::move(y), bias, result);
        }
        CudaTensor xn = contiguous(cast(x, nd)), wn = contiguous(cast(w, nd));
        CudaTensor y = empty(out_shape, nd, xn.device());
        if (cudnn::forward(xn, wn, y, p))
            return same_layout(with_bias(std::move(y), bias, result), x);
    }
    const bool cl = is_channels_last(x);
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
    CudaTensor out = finish(std::move(cn), out_shape, bias, result);
    return cl ? to_channels_last(std::move(out)) : out;
}

CudaTensor conv_transpose(CudaTensor x, CudaTensor w, std::optional<CudaTensor> bias,
                          const ConvParams& p) {
    const check::Conv c = check::conv_transpose(x, w, check::operand(bias), p);
    check_devices("conv_transpose", x, w, bias);
    const std::size_t n = p.n, cin = x.shape[1], g = p.groups, cout = c.out[1];
    const Shape& out_shape = c.out;
    const DType result = x.dtype, cd = float_compute(x.dtype);
    if (cudnn::wanted()) {
        // A transposed convolution is the input gradient of the convolution it transposes.
        const DType nd = cudnn::native_dtype(x.dtype, w.dtype);
        if (cl_operands(x, p)) {
            CudaTensor xn = channels_last_in(x, nd), wn = channels_last_in(w, nd);
            CudaTensor out = empty_channels_last(out_shape, nd, xn.device());
            if (cudnn::backward_data(xn, wn, out, p))
                return with_bias(std::move(out), bias, result);
        }
        CudaTensor xn = contiguous(cast(x, nd)), wn = contiguous(cast(w, nd));
        CudaTensor out = empty(out_shape, nd, xn.device());
        if (cudnn::backward_data(xn, wn, out, p))
            return same_layout(with_bias(std::move(out), bias, result), x);
    }
    const bool cl = is_channels_last(x);
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
    out = cast(std::move(out), result);
    return cl ? to_channels_last(std::move(out)) : out;
}

CudaTensor conv_weight_backward(CudaTensor x, CudaTensor grad, const Shape& ws,
                                const ConvParams& p) {
    check::conv_weight_backward(x, grad, ws, p);
    check_same_device("conv_weight_backward", x, grad);
    const std::size_t n = p.n, g = p.groups, cin = x.shape[1], cout = ws[0];
    const DType result = x.dtype, cd = float_compute(x.dtype);
    if (auto dw = small_weight_backward(x, grad, ws, p)) return std::move(*dw);
    if (cudnn::wanted()) {
        const DType nd = cudnn::native_dtype(x.dtype, grad.dtype);
        if (cl_operands(x, p)) {
            CudaTensor xn = channels_last_in(x, nd), gn = channels_last_in(grad, nd);
            CudaTensor dw = empty_channels_last(ws, nd, xn.device());
            // Channels-last (KRSC), as cuDNN makes it: the optimizer walks it in the weight's
            // own layout (no copy where the weight is stored channels-last too).
            if (cudnn::backward_filter(xn, gn, dw, p)) return cast(std::move(dw), result);
        }
        CudaTensor xn = contiguous(cast(x, nd)), gn = contiguous(cast(grad, nd));
        CudaTensor dw = empty(ws, nd, xn.device());
        if (cudnn::backward_filter(xn, gn, dw, p)) return cast(std::move(dw), result);
    }
    if (auto dw = direct_weight_backward(x, grad, ws, p)) return std::move(*dw);
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

DeformSetup deform_setup(const char* op, const CudaTensor& x, const CudaTensor& offset,
                         const CudaTensor& w, const std::optional<CudaTensor>& mask,
                         const std::optional<CudaTensor>& bias, const DeformConvOptions& o) {
    const check::Deform geo =
        check::deform_conv2d(op, x, offset, w, check::operand(mask), check::operand(bias), o);
    check_devices(op, x, w, bias);
    check_same_device(op, x, offset);
    if (mask) check_same_device(op, x, *mask);
    DeformSetup s;
    DeformGeom& g = s.g;
    g.batch = static_cast<i64>(x.shape[0]);
    g.channels = static_cast<i64>(x.shape[1]);
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
    g.oh = geo.oh;
    g.ow = geo.ow;
    s.out_shape = geo.out;
    return s;
}
}  // namespace

CudaTensor deform_conv2d(CudaTensor x, CudaTensor offset, CudaTensor w,
                         std::optional<CudaTensor> mask, std::optional<CudaTensor> bias,
                         const DeformConvOptions& o) {
    const DeformSetup st = deform_setup("deform_conv2d", x, offset, w, mask, bias, o);
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

/// Gradients of deform_conv2d: x, offset, weight, then mask and bias when given.
struct DeformGrads {
    CudaTensor x, offset, weight;
    std::optional<CudaTensor> mask, bias;
};

DeformGrads deform_conv2d_backward(CudaTensor x, CudaTensor offset, CudaTensor w,
                                   std::optional<CudaTensor> mask, std::optional<CudaTensor> bias,
                                   CudaTensor grad, const DeformConvOptions& o) {
    const char* op = "deform_conv2d_backward";
    const DeformSetup st = deform_setup(op, x, offset, w, mask, bias, o);
    check::grad(op, x, grad, st.out_shape);
    check_same_device(op, x, grad);
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

// ---- CudaBackend's ops on the functions above ----
namespace ember {
namespace k = detail::cuda;

auto CudaBackend::conv1d(FT x, FT w, std::optional<FT> b, const ConvOptions<1>& o) -> FT {
    return k::conv(std::move(x), std::move(w), std::move(b), k::conv_params<1>(o));
}
auto CudaBackend::conv2d(FT x, FT w, std::optional<FT> b, const ConvOptions<2>& o) -> FT {
    return k::conv(std::move(x), std::move(w), std::move(b), k::conv_params<2>(o));
}
auto CudaBackend::conv3d(FT x, FT w, std::optional<FT> b, const ConvOptions<3>& o) -> FT {
    return k::conv(std::move(x), std::move(w), std::move(b), k::conv_params<3>(o));
}
auto CudaBackend::conv_transpose1d(FT x, FT w, std::optional<FT> b,
                                   const ConvTransposeOptions<1>& o) -> FT {
    return k::conv_transpose(std::move(x), std::move(w), std::move(b), k::conv_params<1>(o));
}
auto CudaBackend::conv_transpose2d(FT x, FT w, std::optional<FT> b,
                                   const ConvTransposeOptions<2>& o) -> FT {
    return k::conv_transpose(std::move(x), std::move(w), std::move(b), k::conv_params<2>(o));
}
auto CudaBackend::conv_transpose3d(FT x, FT w, std::optional<FT> b,
                                   const ConvTransposeOptions<3>& o) -> FT {
    return k::conv_transpose(std::move(x), std::move(w), std::move(b), k::conv_params<3>(o));
}
auto CudaBackend::deform_conv2d(FT x, FT off, FT w, std::optional<FT> m, std::optional<FT> b,
                                const DeformConvOptions& o) -> FT {
    return k::deform_conv2d(std::move(x), std::move(off), std::move(w), std::move(m), std::move(b),
                            o);
}
auto CudaBackend::conv1d_weight_backward(FT x, FT grad, const Shape& ws, const ConvOptions<1>& o)
    -> FT {
    return k::conv_weight_backward(std::move(x), std::move(grad), ws, k::conv_params<1>(o));
}
auto CudaBackend::conv2d_weight_backward(FT x, FT grad, const Shape& ws, const ConvOptions<2>& o)
    -> FT {
    return k::conv_weight_backward(std::move(x), std::move(grad), ws, k::conv_params<2>(o));
}
auto CudaBackend::conv3d_weight_backward(FT x, FT grad, const Shape& ws, const ConvOptions<3>& o)
    -> FT {
    return k::conv_weight_backward(std::move(x), std::move(grad), ws, k::conv_params<3>(o));
}
auto CudaBackend::deform_conv2d_backward(FT x, FT off, FT w, std::optional<FT> m,
                                         std::optional<FT> b, FT grad, const DeformConvOptions& o)
    -> DeformConv2dGrads<FT> {
    k::DeformGrads g = k::deform_conv2d_backward(std::move(x), std::move(off), std::move(w),
                                                 std::move(m), std::move(b), std::move(grad), o);
    return {std::move(g.x), std::move(g.offset), std::move(g.weight), std::move(g.mask),
            std::move(g.bias)};
}

}  // namespace ember
