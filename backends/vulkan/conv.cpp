// Convolutions (shaders/conv.comp): im2col + the backend's matmul for 1-, 2- and 3-d
// convolution and its weight gradient, a direct kernel for the transposed convolution, and
// torchvision's deformable convolution (bilinear im2col + matmul). Every spatial rank is
// handled in 3-d form with leading unit dims.
#include <string>

#include "kernels.hpp"

namespace ember::detail::vk {

namespace {
constexpr std::uint32_t kLocal = 256;

/// Spatial geometry in 3-d form (from the shared conv checks).
using Geo = check::ConvGeo;

/// Parameter words shared by conv.comp's modes.
Params conv_params_words(i64 total, const VT& x, const Geo& g, std::size_t n_spatial) {
    Params p;
    p.push(total);
    p.push(static_cast<i64>(x.shape[0]));
    p.push(static_cast<i64>(x.shape[1]));
    for (auto* a : {&g.in, &g.k, &g.out, &g.stride, &g.pad, &g.dil})
        for (int i = 0; i < 3; ++i) p.push((*a)[i]);
    p.push(x.strides[0]);
    p.push(x.strides[1]);
    for (std::size_t s = 0; s < 3; ++s) {
        const std::size_t first = 3 - n_spatial;
        p.push(s < first ? 0 : x.strides[2 + s - first]);
    }
    p.push(x.offset);
    return p;
}

/// cols [N, C * K, P] of x for geometry g.
VT im2col(const VT& x, const Geo& g, std::size_t n_spatial) {
    const std::size_t N = x.shape[0], C = x.shape[1];
    const auto K = static_cast<std::size_t>(g.k_size()), P = static_cast<std::size_t>(g.out_size());
    VT cols = empty(Shape{N, C * K, P}, DType::F32, x.device);
    const std::size_t total = cols.num_elements();
    if (total == 0) return cols;
    Params p = conv_params_words(static_cast<i64>(total), x, g, n_spatial);
    for (int i = 0; i < 6; ++i) p.push(0);
    Context& cx = ctx(x);
    const std::int32_t spec[] = {0};
    const Pipeline& pipe = cx.pipeline("conv", spec, 4, kLocal);
    const Binding o = bind(cols, true);
    const Binding bs[] = {o, bind(x, false), o, o};
    cx.dispatch(pipe, bs, p.w, (total + kLocal - 1) / kLocal);
    return cols;
}

/// out [N, C_out, P] = w [G, C_out/G, Cg*K] @ cols [N, G, Cg*K, P] (+ bias), reshaped.
VT conv_from_cols(VT cols, VT w, const std::optional<VT>& bias, std::size_t groups,
                  const Shape& out_shape) {
    const std::size_t N = cols.shape[0], CK = cols.shape[1], P = cols.shape[2];
    const std::size_t cout = w.shape[0];
    cols = reshape(std::move(cols), Shape{N, groups, CK / groups, P});
    w = reshape(contiguous(std::move(w)), Shape{groups, cout / groups, CK / groups});
    VT out = reshape(matmul(std::move(w), std::move(cols)), out_shape);
    if (bias) {
        Shape bs = Shape::filled(out_shape.rank(), 1);
        bs[1] = cout;
        out = binary(BinaryOp::Add, std::move(out), reshape(*bias, bs));
    }
    return out;
}
}  // namespace

VT conv(VT x, VT w, std::optional<VT> bias, const ConvParams& p) {
    const check::Conv c = check::conv(x, w, check::operand(bias), p);
    const Geo& g = c.g;
    const Shape& out_shape = c.out;
    if (out_shape.num_elements() == 0) return empty(out_shape, x.dtype, x.device);
    const DType dt = x.dtype;
    VT out = conv_from_cols(im2col(x, g, p.n), cast(std::move(w), DType::F32),
                            bias ? std::optional<VT>(cast(*bias, DType::F32)) : std::nullopt,
                            p.groups, out_shape);
    return cast(std::move(out), dt);
}

VT conv_transpose(VT x, VT w, std::optional<VT> bias, const ConvParams& p) {
    const check::Conv c = check::conv_transpose(x, w, check::operand(bias), p);
    const Geo& g = c.g;
    const Shape& out_shape = c.out;
    const std::size_t cout = out_shape[1];
    const DType dt = x.dtype;
    VT out = empty(out_shape, DType::F32, x.device);
    const std::size_t total = out.num_elements();
    if (total == 0) return cast(std::move(out), dt);
    x = cast(std::move(x), DType::F32);
    w = contiguous(cast(std::move(w), DType::F32));
    std::optional<VT> b;
    if (bias) b = contiguous(cast(*bias, DType::F32));  // read at offset + co
    Params pw = conv_params_words(static_cast<i64>(total), x, g, p.n);
    pw.push(static_cast<i64>(cout));
    pw.push(static_cast<i64>(p.groups));
    pw.push(b ? 1 : 0);
    pw.push(w.offset);
    pw.push(b ? b->offset : 0);
    pw.push(1);
    Context& cx = ctx(x);
    const std::int32_t spec[] = {1};
    const Pipeline& pipe = cx.pipeline("conv", spec, 4, kLocal);
    const Binding bs[] = {bind(out, true), bind(x, false), bind(w, false),
                          b ? bind(*b, false) : bind(w, false)};
    cx.dispatch(pipe, bs, pw.w, (total + kLocal - 1) / kLocal);
    return cast(std::move(out), dt);
}

VT conv_weight_backward(VT x, VT grad, const Shape& weight_shape, const ConvParams& p) {
    const check::Conv c = check::conv_weight_backward(x, grad, weight_shape, p);
    const Geo& g = c.g;
    const Shape& out_shape = c.out;
    const std::size_t cout = weight_shape[0];
    const DType dt = x.dtype;
    const std::size_t N = x.shape[0], G = p.groups;
    if (N == 0 || out_shape.num_elements() == 0) return full(weight_shape, Scalar(0), dt, x.device);
    VT cols = im2col(cast(std::move(x), DType::F32), g, p.n);
    const std::size_t CK = cols.shape[1], P = cols.shape[2];
    cols = reshape(std::move(cols), Shape{N, G, CK / G, P});
    VT gr = reshape(contiguous(cast(std::move(grad), DType::F32)), Shape{N, G, cout / G, P});
    // dW[g] = Σ_n grad[n, g] @ cols[n, g]ᵀ.
    const std::size_t perm[] = {0, 1, 3, 2};
    VT gw = matmul(std::move(gr), permute(std::move(cols), perm));
    gw = reduce_dim(ReduceOp::Sum, std::move(gw), 0);
    return cast(reshape(std::move(gw), weight_shape), dt);
}

}  // namespace ember::detail::vk

// ---- VulkanBackend's ops on the kernels above ----
namespace ember {
namespace k = detail::vk;

auto VulkanBackend::conv1d(FT x, FT w, std::optional<FT> b, const ConvOptions<1>& o) -> FT {
    return k::conv(std::move(x), std::move(w), std::move(b), k::conv_params<1>(o));
}
auto VulkanBackend::conv2d(FT x, FT w, std::optional<FT> b, const ConvOptions<2>& o) -> FT {
    return k::conv(std::move(x), std::move(w), std::move(b), k::conv_params<2>(o));
}
auto VulkanBackend::conv3d(FT x, FT w, std::optional<FT> b, const ConvOptions<3>& o) -> FT {
    return k::conv(std::move(x), std::move(w), std::move(b), k::conv_params<3>(o));
}
auto VulkanBackend::conv_transpose1d(FT x, FT w, std::optional<FT> b,
                                     const ConvTransposeOptions<1>& o) -> FT {
    return k::conv_transpose(std::move(x), std::move(w), std::move(b), k::conv_params<1>(o));
}
auto VulkanBackend::conv_transpose2d(FT x, FT w, std::optional<FT> b,
                                     const ConvTransposeOptions<2>& o) -> FT {
    return k::conv_transpose(std::move(x), std::move(w), std::move(b), k::conv_params<2>(o));
}
auto VulkanBackend::conv_transpose3d(FT x, FT w, std::optional<FT> b,
                                     const ConvTransposeOptions<3>& o) -> FT {
    return k::conv_transpose(std::move(x), std::move(w), std::move(b), k::conv_params<3>(o));
}
auto VulkanBackend::conv1d_weight_backward(FT x, FT g, const Shape& ws, const ConvOptions<1>& o)
    -> FT {
    return k::conv_weight_backward(std::move(x), std::move(g), ws, k::conv_params<1>(o));
}
auto VulkanBackend::conv2d_weight_backward(FT x, FT g, const Shape& ws, const ConvOptions<2>& o)
    -> FT {
    return k::conv_weight_backward(std::move(x), std::move(g), ws, k::conv_params<2>(o));
}
auto VulkanBackend::conv3d_weight_backward(FT x, FT g, const Shape& ws, const ConvOptions<3>& o)
    -> FT {
    return k::conv_weight_backward(std::move(x), std::move(g), ws, k::conv_params<3>(o));
}

}  // namespace ember
