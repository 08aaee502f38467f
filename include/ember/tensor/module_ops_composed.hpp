#pragma once
// Module ops composed from other tensor ops (ember::module): pixel_shuffle / pixel_unshuffle,
// unfold4d / fold4d (PyTorch's F.unfold / F.fold), avg_pool3d, max_pool3d (with indices) and
// adaptive_avg_pool3d. Each checks its arguments once, in PyTorch's terms and under its own
// name, and then runs ops every backend has (reshape, permute, grouped convolutions, 1-d and
// 2-d pooling), so that Cpu, Vulkan, Cuda, Fusion and Autodiff (backward included) get them
// with no kernel of their own.
//
// Why the compositions are exact:
// - unfold4d pads the input once and takes, for each kernel tap (i, j), the strided slice of the
//   positions that tap reads in every block; stacking the kh·kw slices after the channel dim
//   gives PyTorch's row order c·kh·kw + i·kw + j. fold4d adds each tap's columns back onto the
//   same strided slice of a zero (padded) image and crops the padding. Memory is that of the
//   output; no kh·kw × kh·kw weight is built.
// - A 3-d box (average, max or adaptive average) is the product of per-axis windows, and so are
//   its divisors (count_include_pad either way, ceil_mode's clipped windows): pooling H and W
//   with the 2-d op and then D with the 1-d op gives the 3-d op. For max_pool3d's indices, the
//   2-d pass keeps each (d, h, w) row's first maximum and the 1-d pass the first d among those:
//   the first maximum in (d, h, w) order, as PyTorch's kernel scans.
#include <array>
#include <cstddef>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "module_ops.hpp"
#include "tensor.hpp"

namespace ember {

/// Options of unfold4d and fold4d (Burn's UnfoldOptions; PyTorch's F.unfold / F.fold keywords).
struct UnfoldOptions {
    std::array<std::size_t, 2> stride{1, 1};    ///< step of the sliding blocks
    std::array<std::size_t, 2> padding{0, 0};   ///< implicit zero padding on both sides
    std::array<std::size_t, 2> dilation{1, 1};  ///< spacing of a block's taps
};

namespace detail::composed {

inline std::string pair_str(const std::array<std::size_t, 2>& a) {
    return "(" + std::to_string(a[0]) + ", " + std::to_string(a[1]) + ")";
}
inline std::string triple_str(const std::array<std::size_t, 3>& a) {
    return "(" + std::to_string(a[0]) + ", " + std::to_string(a[1]) + ", " + std::to_string(a[2]) +
           ")";
}

// The number of sliding blocks along each spatial dim of [h, w] (PyTorch's unfold/fold
// geometry), checked to be at least one.
inline std::array<std::size_t, 2> blocks(const char* op, std::array<std::size_t, 2> spatial,
                                         const std::array<std::size_t, 2>& kernel,
                                         const UnfoldOptions& o) {
    for (std::size_t d = 0; d < 2; ++d)
        EMBER_CHECK(kernel[d] >= 1 && o.stride[d] >= 1 && o.dilation[d] >= 1, Argument, op,
                    ": kernel_size ", pair_str(kernel), ", stride ", pair_str(o.stride),
                    " and dilation ", pair_str(o.dilation), " must be >= 1");
    for (std::size_t d = 0; d < 2; ++d)
        EMBER_CHECK(kernel[d] <= kMaxElements && o.stride[d] <= kMaxElements &&
                        o.dilation[d] <= kMaxElements && o.padding[d] <= kMaxElements,
                    Argument, op, ": kernel_size ", pair_str(kernel), ", stride ",
                    pair_str(o.stride), ", padding ", pair_str(o.padding), " and dilation ",
                    pair_str(o.dilation), " must each be at most ", kMaxElements);
    std::array<std::size_t, 2> n{};
    for (std::size_t d = 0; d < 2; ++d) {
        const std::size_t padded = spatial[d] + 2 * o.padding[d];  // < 2^62: no overflow
        const std::size_t extent = checked_add(
            checked_mul(o.dilation[d], kernel[d] - 1, op, "dilation * (kernel_size - 1)"), 1, op,
            "block extent");
        EMBER_CHECK(padded >= extent, Shape, op, ": spatial size ", pair_str(spatial),
                    " with padding ", pair_str(o.padding), " is smaller than the kernel ",
                    pair_str(kernel), " with dilation ", pair_str(o.dilation),
                    ": no sliding block fits");
        n[d] = (padded - extent) / o.stride[d] + 1;
    }
    return n;
}

// The strided slice of a padded [N, C, H', W'] image that tap (i, j) reads in every one of the
// n[0] × n[1] blocks.
inline std::array<Slice, 4> tap_slice(std::size_t i, std::size_t j,
                                      const std::array<std::size_t, 2>& n, const UnfoldOptions& o) {
    auto axis = [&](std::size_t tap, std::size_t d) {
        const std::size_t start = tap * o.dilation[d];
        return Slice{long(start), long(start + (n[d] - 1) * o.stride[d] + 1), long(o.stride[d])};
    };
    return {Slice{}, Slice{}, axis(i, 0), axis(j, 1)};
}

// Checks 3-d pooling arguments against the input [N, C, D, H, W] as PyTorch does (`dilated`:
// max pooling's windows are dilated); returns the output's spatial sizes.
inline std::array<std::size_t, 3> pool3d_geometry(const char* op, const Shape& in,
                                                  const std::array<std::size_t, 3>& kernel,
                                                  const std::array<std::size_t, 3>& stride,
                                                  const std::array<std::size_t, 3>& padding,
                                                  const std::array<std::size_t, 3>& dilation,
                                                  bool ceil_mode) {
    EMBER_CHECK(in[1] >= 1, Shape, op, ": the input ", in.to_string(), " has no channels");
    std::array<std::size_t, 3> out{};
    for (std::size_t d = 0; d < 3; ++d) {
        EMBER_CHECK(kernel[d] >= 1 && stride[d] >= 1 && dilation[d] >= 1, Argument, op,
                    ": kernel_size ", triple_str(kernel), ", stride ", triple_str(stride),
                    " and dilation ", triple_str(dilation), " must be >= 1 (input ", in.to_string(),
                    ")");
        EMBER_CHECK(kernel[d] <= kMaxElements && stride[d] <= kMaxElements &&
                        padding[d] <= kMaxElements && dilation[d] <= kMaxElements,
                    Argument, op, ": kernel_size ", triple_str(kernel), ", stride ",
                    triple_str(stride), ", padding ", triple_str(padding), " and dilation ",
                    triple_str(dilation), " must each be at most ", kMaxElements);
        const std::size_t extent =
            checked_add(checked_mul(dilation[d], kernel[d] - 1, op, "dilation * (kernel_size - 1)"),
                        1, op, "window extent");
        EMBER_CHECK(2 * padding[d] <= extent, Argument, op, ": padding ", triple_str(padding),
                    " must be at most half of the kernel size ", triple_str(kernel), " (input ",
                    in.to_string(), ")");
        const std::size_t size = in[2 + d], padded = size + 2 * padding[d];
        EMBER_CHECK(padded >= extent, Shape, op, ": kernel_size ", triple_str(kernel), " (padding ",
                    triple_str(padding), ", dilation ", triple_str(dilation),
                    ") is larger than the input ", in.to_string(), " in spatial dim ", d);
        std::size_t n = (padded - extent + (ceil_mode ? stride[d] - 1 : 0)) / stride[d] + 1;
        // As PyTorch: with ceil_mode the last window must start inside the input or the left
        // padding.
        if (ceil_mode && (n - 1) * stride[d] >= size + padding[d]) --n;
        out[d] = n;
    }
    return out;
}

// [N, C, D, H, W] → [N, C·D, H, W]: the 2-d pass's input.
template <Backend B, typename K>
Tensor<B, 4, K> planes(const Tensor<B, 5, K>& x) {
    const Shape s = x.shape();
    return x.template reshape<4>({long(s[0]), long(s[1] * s[2]), long(s[3]), long(s[4])});
}
// The 2-d pass's output [N, C·D, OH, OW] → [N, C·OH·OW, D]: the 1-d pass's input.
template <Backend B, typename K>
Tensor<B, 3, K> depth_last(const Tensor<B, 4, K>& y, std::size_t channels) {
    const Shape s = y.shape();
    const long n = long(s[0]), c = long(channels), d = long(s[1] / channels);
    return y.template reshape<5>({n, c, d, long(s[2]), long(s[3])})
        .permute({0, 1, 3, 4, 2})
        .template reshape<3>({n, c * long(s[2] * s[3]), d});
}
// The 1-d pass's output [N, C·OH·OW, OD] → [N, C, OD, OH, OW].
template <Backend B, typename K>
Tensor<B, 5, K> from_depth_last(const Tensor<B, 3, K>& z, std::size_t channels, std::size_t oh,
                                std::size_t ow) {
    const Shape s = z.shape();
    return z.template reshape<5>({long(s[0]), long(channels), long(oh), long(ow), long(s[2])})
        .permute({0, 1, 4, 2, 3});
}

}  // namespace detail::composed

}  // namespace ember

namespace ember::module {

/// Rearranges [..., C·r², H, W] into [..., C, H·r, W·r] (torch.nn.functional.pixel_shuffle):
/// output (c, h·r + i, w·r + j) is input (c·r² + i·r + j, h, w). Rank 3 or more.
template <Backend B, std::size_t D>
Tensor<B, D> pixel_shuffle(const Tensor<B, D>& x, std::size_t upscale_factor) {
    static_assert(D >= 3, "pixel_shuffle: the input needs [..., C, H, W]");
    const Shape s = x.shape();
    const std::size_t r = upscale_factor, c = s[D - 3], h = s[D - 2], w = s[D - 1];
    EMBER_CHECK(r >= 1 && r <= kMaxElements, Argument,
                "pixel_shuffle: upscale_factor must be >= 1, got ", r, " (input ", s.to_string(),
                ")");
    // c % r² without forming r² (which could wrap for a huge factor).
    EMBER_CHECK(c % r == 0 && (c / r) % r == 0, Shape, "pixel_shuffle: channels ", c,
                " of the input ", s.to_string(), " are not divisible by upscale_factor² (", r,
                "²)");
    std::size_t batch = 1;
    for (std::size_t i = 0; i + 3 < D; ++i) batch *= s[i];
    const long oc = long(c / r / r), lr = long(r);
    auto y = x.template reshape<6>({long(batch), oc, lr, lr, long(h), long(w)})
                 .permute({0, 1, 4, 2, 5, 3});
    Shape out = s;
    out[D - 3] = c / r / r;
    out[D - 2] = ::ember::detail::checked_mul(h, r, "pixel_shuffle", "height * upscale_factor");
    out[D - 1] = ::ember::detail::checked_mul(w, r, "pixel_shuffle", "width * upscale_factor");
    return y.template reshape<D>(out);
}

/// The inverse of pixel_shuffle (torch.nn.functional.pixel_unshuffle): [..., C, H·r, W·r] →
/// [..., C·r², H, W]. Rank 3 or more.
template <Backend B, std::size_t D>
Tensor<B, D> pixel_unshuffle(const Tensor<B, D>& x, std::size_t downscale_factor) {
    static_assert(D >= 3, "pixel_unshuffle: the input needs [..., C, H, W]");
    const Shape s = x.shape();
    const std::size_t r = downscale_factor, c = s[D - 3], h = s[D - 2], w = s[D - 1];
    EMBER_CHECK(r >= 1 && r <= kMaxElements, Argument,
                "pixel_unshuffle: downscale_factor must be >= 1, got ", r, " (input ",
                s.to_string(), ")");
    EMBER_CHECK(h % r == 0 && w % r == 0, Shape, "pixel_unshuffle: height ", h, " and width ", w,
                " of the input ", s.to_string(), " are not divisible by downscale_factor ", r);
    std::size_t batch = 1;
    for (std::size_t i = 0; i + 3 < D; ++i) batch *= s[i];
    const long lr = long(r);
    auto y = x.template reshape<6>({long(batch), long(c), long(h / r), lr, long(w / r), lr})
                 .permute({0, 1, 3, 5, 2, 4});
    Shape out = s;
    out[D - 3] = ::ember::detail::checked_mul(
        ::ember::detail::checked_mul(c, r, "pixel_unshuffle", "channels * downscale_factor"), r,
        "pixel_unshuffle", "channels * downscale_factor²");
    out[D - 2] = h / r;
    out[D - 1] = w / r;
    return y.template reshape<D>(out);
}

/// Extracts sliding blocks (torch.nn.functional.unfold; Burn's unfold4d): [N, C, H, W] →
/// [N, C·kh·kw, L], L = the number of blocks; row c·kh·kw + i·kw + j holds tap (i, j) of
/// channel c, column l block l in row-major order.
template <Backend B>
Tensor<B, 3> unfold4d(const Tensor<B, 4>& x, std::array<std::size_t, 2> kernel_size,
                      const UnfoldOptions& options = {}) {
    namespace c = ::ember::detail::composed;
    const Shape s = x.shape();
    const auto n = c::blocks("unfold4d", {s[2], s[3]}, kernel_size, options);
    const std::size_t taps =
        ::ember::detail::checked_mul(kernel_size[0], kernel_size[1], "unfold4d", "kernel taps");
    const std::size_t rows =
        ::ember::detail::checked_mul(s[1], taps, "unfold4d", "channels * kernel taps");
    (void)Shape{s[0], rows, ::ember::detail::checked_mul(n[0], n[1], "unfold4d", "blocks")}
        .num_elements("unfold4d");
    const auto& p = options.padding;
    auto padded = p[0] || p[1] ? x.pad({p[1], p[1], p[0], p[0]}, 0.0) : x;
    std::vector<Tensor<B, 4>> parts;  // [N, C, n0, n1] per tap, in row-major tap order
    parts.reserve(taps);
    for (std::size_t i = 0; i < kernel_size[0]; ++i)
        for (std::size_t j = 0; j < kernel_size[1]; ++j)
            parts.push_back(padded.slice(std::span<const Slice>(c::tap_slice(i, j, n, options))));
    return Tensor<B, 4>::template stack<5>(parts, 2).template reshape<3>(
        {long(s[0]), long(rows), long(n[0] * n[1])});
}

/// Sums sliding blocks back into an image (torch.nn.functional.fold; the adjoint of unfold4d):
/// [N, C·kh·kw, L] → [N, C, H, W] with [H, W] = `output_size`; overlapping taps add up.
template <Backend B>
Tensor<B, 4> fold4d(const Tensor<B, 3>& x, std::array<std::size_t, 2> output_size,
                    std::array<std::size_t, 2> kernel_size, const UnfoldOptions& options = {}) {
    namespace c = ::ember::detail::composed;
    const Shape s = x.shape();
    const auto n = c::blocks("fold4d", output_size, kernel_size, options);
    const std::size_t taps =
        ::ember::detail::checked_mul(kernel_size[0], kernel_size[1], "fold4d", "kernel taps");
    EMBER_CHECK(s[1] % taps == 0 && s[1] >= 1, Shape, "fold4d: dim 1 of the input ", s.to_string(),
                " must be a positive multiple of kernel_size ", c::pair_str(kernel_size), "'s ",
                taps, " taps");
    const std::size_t blocks = ::ember::detail::checked_mul(n[0], n[1], "fold4d", "blocks");
    EMBER_CHECK(s[2] == blocks, Shape, "fold4d: the input ", s.to_string(), " has ", s[2],
                " blocks but output_size ", c::pair_str(output_size), " with kernel_size ",
                c::pair_str(kernel_size), ", stride ", c::pair_str(options.stride), ", padding ",
                c::pair_str(options.padding), " and dilation ", c::pair_str(options.dilation),
                " needs ", n[0], " x ", n[1], " = ", blocks);
    const std::size_t channels = s[1] / taps;
    const auto& p = options.padding;
    const std::size_t hp = output_size[0] + 2 * p[0], wp = output_size[1] + 2 * p[1];
    (void)Shape{s[0], channels, hp, wp}.num_elements("fold4d");
    auto cols =
        x.template reshape<5>({long(s[0]), long(channels), long(taps), long(n[0]), long(n[1])});
    auto out = Tensor<B, 4>::zeros(Shape{s[0], channels, hp, wp}, x.device());
    // Within one tap the blocks' positions are distinct, so each tap is one slice update.
    for (std::size_t i = 0; i < kernel_size[0]; ++i)
        for (std::size_t j = 0; j < kernel_size[1]; ++j) {
            const auto r = c::tap_slice(i, j, n, options);
            const std::span<const Slice> rs(r);
            auto part = cols.narrow(2, i * kernel_size[1] + j, 1).template squeeze<4>(2);
            out = out.slice_assign(rs, out.slice(rs) + part);
        }
    if (!p[0] && !p[1]) return out;
    const std::array<Slice, 4> crop{Slice{}, Slice{},
                                    Slice{long(p[0]), long(p[0] + output_size[0])},
                                    Slice{long(p[1]), long(p[1] + output_size[1])}};
    return out.slice(std::span<const Slice>(crop));
}

/// 3-d average pooling over [N, C, D, H, W] (torch.nn.functional.avg_pool3d without
/// divisor_override).
template <Backend B>
Tensor<B, 5> avg_pool3d(const Tensor<B, 5>& x, std::array<std::size_t, 3> kernel_size,
                        std::array<std::size_t, 3> stride,
                        std::array<std::size_t, 3> padding = {0, 0, 0},
                        bool count_include_pad = true, bool ceil_mode = false) {
    namespace c = ::ember::detail::composed;
    const Shape s = x.shape();
    const auto o =
        c::pool3d_geometry("avg_pool3d", s, kernel_size, stride, padding, {1, 1, 1}, ceil_mode);
    auto y = avg_pool2d(c::planes(x), {kernel_size[1], kernel_size[2]}, {stride[1], stride[2]},
                        {padding[1], padding[2]}, count_include_pad, ceil_mode);
    auto z = avg_pool1d(c::depth_last(y, s[1]), kernel_size[0], stride[0], padding[0],
                        count_include_pad, ceil_mode);
    return c::from_depth_last(z, s[1], o[1], o[2]);
}

/// 3-d max pooling with the argmax positions, flat within each [D, H, W] volume as PyTorch's
/// max_pool3d(return_indices=True) gives them.
template <Backend B>
std::pair<Tensor<B, 5>, Tensor<B, 5, Int>> max_pool3d_with_indices(
    const Tensor<B, 5>& x, std::array<std::size_t, 3> kernel_size,
    std::array<std::size_t, 3> stride, std::array<std::size_t, 3> padding = {0, 0, 0},
    std::array<std::size_t, 3> dilation = {1, 1, 1}, bool ceil_mode = false) {
    namespace c = ::ember::detail::composed;
    const Shape s = x.shape();
    const auto o =
        c::pool3d_geometry("max_pool3d", s, kernel_size, stride, padding, dilation, ceil_mode);
    auto [y, i_hw] = max_pool2d_with_indices(c::planes(x), {kernel_size[1], kernel_size[2]},
                                             {stride[1], stride[2]}, {padding[1], padding[2]},
                                             {dilation[1], dilation[2]}, ceil_mode);
    auto [z, i_d] = max_pool1d_with_indices(c::depth_last(y, s[1]), kernel_size[0], stride[0],
                                            padding[0], dilation[0], ceil_mode);
    // The plane index of the winning depth, made flat over the volume.
    auto hw = c::depth_last(i_hw, s[1]).gather(2, i_d);
    auto flat = i_d * static_cast<std::int64_t>(s[3] * s[4]) + hw;
    return {c::from_depth_last(z, s[1], o[1], o[2]), c::from_depth_last(flat, s[1], o[1], o[2])};
}

/// 3-d max pooling over [N, C, D, H, W] (torch.nn.functional.max_pool3d).
template <Backend B>
Tensor<B, 5> max_pool3d(const Tensor<B, 5>& x, std::array<std::size_t, 3> kernel_size,
                        std::array<std::size_t, 3> stride,
                        std::array<std::size_t, 3> padding = {0, 0, 0},
                        std::array<std::size_t, 3> dilation = {1, 1, 1}, bool ceil_mode = false) {
    namespace c = ::ember::detail::composed;
    const Shape s = x.shape();
    const auto o =
        c::pool3d_geometry("max_pool3d", s, kernel_size, stride, padding, dilation, ceil_mode);
    auto y = max_pool2d(c::planes(x), {kernel_size[1], kernel_size[2]}, {stride[1], stride[2]},
                        {padding[1], padding[2]}, {dilation[1], dilation[2]}, ceil_mode);
    auto z = max_pool1d(c::depth_last(y, s[1]), kernel_size[0], stride[0], padding[0], dilation[0],
                        ceil_mode);
    return c::from_depth_last(z, s[1], o[1], o[2]);
}

/// Adaptive average pooling of [N, C, D, H, W] to `output_size` [OD, OH, OW]
/// (torch.nn.functional.adaptive_avg_pool3d): bin i of an axis averages input
/// [⌊i·in/out⌋, ⌈(i+1)·in/out⌉).
template <Backend B>
Tensor<B, 5> adaptive_avg_pool3d(const Tensor<B, 5>& x, std::array<std::size_t, 3> output_size) {
    namespace c = ::ember::detail::composed;
    const Shape s = x.shape();
    EMBER_CHECK(s[1] >= 1, Shape, "adaptive_avg_pool3d: the input ", s.to_string(),
                " has no channels");
    for (std::size_t d = 0; d < 3; ++d) {
        EMBER_CHECK(output_size[d] >= 1 && output_size[d] <= kMaxElements, Argument,
                    "adaptive_avg_pool3d: output_size ", c::triple_str(output_size),
                    " must be positive (input ", s.to_string(), ")");
        EMBER_CHECK(s[2 + d] >= 1, Shape, "adaptive_avg_pool3d: the input ", s.to_string(),
                    " has an empty spatial dim ", d);
    }
    auto y = adaptive_avg_pool2d(c::planes(x), {output_size[1], output_size[2]});
    auto z = adaptive_avg_pool1d(c::depth_last(y, s[1]), output_size[0]);
    return c::from_depth_last(z, s[1], output_size[1], output_size[2]);
}

}  // namespace ember::module
