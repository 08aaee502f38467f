// Convolutions: 1-, 2- and 3-d convolution and its weight gradient by im2col (shaders/conv.comp)
// + the backend's matmul where the weight is large, and by direct kernels specialised to the
// geometry (shaders/conv_direct.comp) where it is small: a layer of 8 or 16 output channels makes
// the product's M 8 or 16, which wastes the matmul's tiles and costs an im2col copy, a product
// and, for the weight gradient, a sum over the batch. The transposed convolution (also the
// input gradient) is always direct. torchvision's deformable convolution (deform.cpp) is
// bilinear im2col + matmul. Every spatial rank is handled in 3-d form with leading unit dims.
#include <algorithm>
#include <cstdlib>
#include <string>

#include "kernels.hpp"

namespace ember::detail::vk {

namespace {
constexpr std::uint32_t kLocal = 256;

/// Spatial geometry in 3-d form (from the shared conv checks).
using Geo = check::ConvGeo;

/// Threads a workgroup of conv_direct.comp's weight-gradient mode, and the taps its threads
/// keep in registers (the shader's WG2 and KT_MAX).
constexpr std::uint32_t kWgradLocal = 128;
constexpr i64 kWgradMaxTaps = 32;
/// Weights up to which the direct kernels replace im2col + matmul: 16 output channels of 8
/// inputs and 3x3 taps are 1152; a 64-to-64 3x3 layer (36,864) goes to the tiled product,
/// whose data reuse the direct kernels (a thread an output, a workgroup a weight for the
/// gradient) do not have.
constexpr i64 kDirectMaxWeights = 16384;

/// Whether the direct kernels take a convolution with `weights` weight elements over operands
/// of at most `elements` elements. EMBER_VULKAN_CONV=im2col forbids them (for comparisons).
bool use_direct(i64 weights, const Geo& g, std::size_t elements) {
    if (const char* e = std::getenv("EMBER_VULKAN_CONV"); e && std::string(e) == "im2col")
        return false;
    return weights <= kDirectMaxWeights && g.k_size() <= kWgradMaxTaps &&
           elements < (std::size_t{1} << 31);
}

/// conv_direct.comp's specialization constants: mode, channels, groups, geometry, bias, output
/// channels a thread, input and output sizes.
std::array<std::int32_t, 24> direct_spec(int mode, std::size_t c, std::size_t co,
                                         std::size_t groups, const Geo& g, bool bias,
                                         std::size_t cob = 1) {
    std::array<std::int32_t, 24> s{mode, static_cast<std::int32_t>(c),
                                   static_cast<std::int32_t>(co),
                                   static_cast<std::int32_t>(groups)};
    for (int i = 0; i < 3; ++i) {
        s[4 + i] = static_cast<std::int32_t>(g.k[i]);
        s[7 + i] = static_cast<std::int32_t>(g.stride[i]);
        s[10 + i] = static_cast<std::int32_t>(g.pad[i]);
        s[13 + i] = static_cast<std::int32_t>(g.dil[i]);
        s[18 + i] = static_cast<std::int32_t>(g.in[i]);
        s[21 + i] = static_cast<std::int32_t>(g.out[i]);
    }
    s[16] = bias ? 1 : 0;
    s[17] = static_cast<std::int32_t>(cob);
    return s;
}

/// conv_direct.comp's parameters: total, N, in[3], out[3], x and w offsets, `last`.
Params direct_params(std::size_t total, std::size_t n, const Geo& g, std::size_t x_offset,
                     std::size_t w_offset, i64 last) {
    Params p;
    p.push(static_cast<i64>(total));
    p.push(static_cast<i64>(n));
    for (auto* a : {&g.in, &g.out})
        for (int i = 0; i < 3; ++i) p.push((*a)[i]);
    p.push(static_cast<i64>(x_offset));
    p.push(static_cast<i64>(w_offset));
    p.push(last);
    return p;
}

/// Convolution (mode 0) or transposed convolution (mode 1) of f32 x by f32 w, directly: a
/// thread computes 4, 2 or 1 output channels at one position (the most that divide a group's).
VT direct(int mode, VT x, VT w, const std::optional<VT>& bias, const Geo& g, std::size_t groups,
          const Shape& out_shape) {
    x = contiguous(std::move(x));
    w = contiguous(std::move(w));
    std::optional<VT> b;
    if (bias) b = contiguous(*bias);
    VT out = empty(out_shape, DType::F32, x.device);
    const std::size_t cog = out_shape[1] / groups;
    const std::size_t cob = cog % 4 == 0 ? 4 : (cog % 2 == 0 ? 2 : 1);
    const std::size_t total = out.num_elements() / cob;
    const auto spec = direct_spec(mode, x.shape[1], out_shape[1], groups, g, b.has_value(), cob);
    Params p = direct_params(total, x.shape[0], g, x.offset, w.offset,
                             b ? static_cast<i64>(b->offset) : 0);
    Context& cx = ctx(x);
    const Pipeline& pipe = cx.pipeline("conv_direct", spec, 4, kLocal);
    const Binding bs[] = {bind(out, true), bind(x, false), bind(w, false),
                          b ? bind(*b, false) : bind(w, false)};
    cx.dispatch(pipe, bs, p.w, (total + kLocal - 1) / kLocal);
    return out;
}

/// The weight gradient [C_out, C / G, taps] of f32 x by f32 grad, directly: a workgroup a weight
/// element's (output, input) channel pair and slice of the batch's positions, the slices'
/// partial sums then added. Slices make at least ~2048 workgroups (occupancy hides the loads'
/// latency) where there is work enough for 4 positions a thread.
VT direct_weight_grad(VT x, VT grad, const Geo& g, std::size_t groups, const Shape& weight_shape) {
    x = contiguous(std::move(x));
    grad = contiguous(std::move(grad));
    const std::size_t N = x.shape[0], C = x.shape[1], CO = weight_shape[0];
    const i64 pairs = static_cast<i64>(CO * (C / groups));
    const i64 positions = static_cast<i64>(N) * g.out_size();
    const i64 most = std::max<i64>(1, positions / (kWgradLocal * 4));
    const i64 want = std::clamp<i64>((2048 + pairs - 1) / pairs, 1, most);
    const i64 chunk = (positions + want - 1) / want;
    const i64 slices = (positions + chunk - 1) / chunk;
    VT part = empty(Shape{static_cast<std::size_t>(slices), CO, C / groups,
                          static_cast<std::size_t>(g.k_size())},
                    DType::F32, x.device);
    const auto workgroups = static_cast<std::size_t>(slices * pairs);
    const auto spec = direct_spec(2, C, CO, groups, g, false);
    Params p = direct_params(workgroups, N, g, x.offset, grad.offset, chunk);
    Context& cx = ctx(x);
    const Pipeline& pipe = cx.pipeline("conv_direct", spec, 4, kWgradLocal);
    const Binding o = bind(part, true);
    const Binding bs[] = {o, bind(x, false), bind(grad, false), o};
    cx.dispatch(pipe, bs, p.w, workgroups);
    if (slices > 1) part = reduce_dim(ReduceOp::Sum, std::move(part), 0);
    return reshape(std::move(part), weight_shape);
}

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
    std::optional<VT> b32;
    if (bias) b32 = cast(*bias, DType::F32);
    if (use_direct(static_cast<i64>(w.num_elements()), g,
                   std::max(x.num_elements(), out_shape.num_elements())))
        return cast(direct(0, cast(std::move(x), DType::F32), cast(std::move(w), DType::F32), b32,
                           g, p.groups, out_shape),
                    dt);
    VT out =
        conv_from_cols(im2col(x, g, p.n), cast(std::move(w), DType::F32), b32, p.groups, out_shape);
    return cast(std::move(out), dt);
}

VT conv_transpose(VT x, VT w, std::optional<VT> bias, const ConvParams& p) {
    const check::Conv c = check::conv_transpose(x, w, check::operand(bias), p);
    const Shape& out_shape = c.out;
    const DType dt = x.dtype;
    if (out_shape.num_elements() == 0) return empty(out_shape, dt, x.device);
    std::optional<VT> b32;
    if (bias) b32 = cast(*bias, DType::F32);
    return cast(direct(1, cast(std::move(x), DType::F32), cast(std::move(w), DType::F32), b32, c.g,
                       p.groups, out_shape),
                dt);
}

VT conv_weight_backward(VT x, VT grad, const Shape& weight_shape, const ConvParams& p) {
    const check::Conv c = check::conv_weight_backward(x, grad, weight_shape, p);
    const Geo& g = c.g;
    const Shape& out_shape = c.out;
    const std::size_t cout = weight_shape[0];
    const DType dt = x.dtype;
    const std::size_t N = x.shape[0], G = p.groups;
    if (N == 0 || out_shape.num_elements() == 0) return full(weight_shape, Scalar(0), dt, x.device);
    if (use_direct(static_cast<i64>(weight_shape.num_elements()), g,
                   std::max(x.num_elements(), grad.num_elements())))
        return cast(direct_weight_grad(cast(std::move(x), DType::F32),
                                       cast(std::move(grad), DType::F32), g, G, weight_shape),
                    dt);
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
