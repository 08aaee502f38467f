#pragma once
// grid_sample_2d (torch.nn.functional.grid_sample, Burn's Tensor::grid_sample_2d), composed from
// Tensor ops: the grid's normalised coordinates become pixel coordinates, the padding mode
// clamps or reflects them, and each output pixel gathers its (up to four) input pixels from the
// input seen as [N, C, H·W]. Every backend, Fusion and Autodiff have it; the gradient reaches
// both the input (through gather) and the grid (through the interpolation weights).
#include <cmath>

#include "composed.hpp"

namespace ember {

/// How grid_sample_2d interpolates between pixels.
enum class GridSampleMode {
    Bilinear,  ///< the four neighbours, weighted by distance
    Nearest    ///< the nearest pixel (ties to even, as PyTorch)
};
/// What grid_sample_2d reads outside the input.
enum class GridSamplePadding {
    Zeros,      ///< zero
    Border,     ///< the nearest edge pixel
    Reflection  ///< the input mirrored at its edges
};
/// Options of grid_sample_2d (PyTorch's defaults).
struct GridSampleOptions {
    GridSampleMode mode = GridSampleMode::Bilinear;        ///< interpolation
    GridSamplePadding padding = GridSamplePadding::Zeros;  ///< outside the input
    bool align_corners = false;  ///< -1 and 1 are corner pixels' centres (else their outer edges)
};

namespace detail::sampling {
/// Pixel coordinate of normalised coordinate `c` along a dim of `size` pixels, with the padding
/// mode applied (PyTorch's grid_sampler_compute_source_index).
template <Backend B, std::size_t D>
Tensor<B, D> source_index(const Tensor<B, D>& c, std::size_t size, const GridSampleOptions& o) {
    const double n = static_cast<double>(size);
    auto x = o.align_corners ? (c + 1.0) * (0.5 * (n - 1.0)) : ((c + 1.0) * n - 1.0) * 0.5;
    if (o.padding == GridSamplePadding::Border) return x.clamp(0.0, n - 1.0);
    if (o.padding == GridSamplePadding::Reflection) {
        // Reflect into [lo, hi] = [0, n - 1] (align_corners) or [-0.5, n - 0.5], then clamp.
        const double lo = o.align_corners ? 0.0 : -0.5;
        const double span = o.align_corners ? n - 1.0 : n;
        if (span <= 0.0) return x.zeros_like();
        auto d = (x - lo).abs();
        auto flips = (d / span).floor();
        auto extra = d - flips * span;
        auto odd = fmod_scalar(flips, 2.0).equal_elem(1.0);
        auto r = (extra + lo).mask_where(odd, (span - extra) + lo);
        return r.clamp(0.0, n - 1.0);
    }
    return x;
}
}  // namespace detail::sampling

/// Samples `input` [N, C, H, W] at the points of `grid` [N, H_out, W_out, 2] (x, y in [-1, 1];
/// x indexes the width) → [N, C, H_out, W_out] (torch.nn.functional.grid_sample).
template <Backend B>
Tensor<B, 4> grid_sample_2d(const Tensor<B, 4>& input, const Tensor<B, 4>& grid,
                            const GridSampleOptions& o = {}) {
    const Shape si = input.shape(), sg = grid.shape();
    EMBER_CHECK(sg[0] == si[0] && sg[3] == 2, Shape, "grid_sample_2d: grid ", sg.to_string(),
                " for input ", si.to_string(), " (expected [", si[0], ", H_out, W_out, 2])");
    const std::size_t n = si[0], c = si[1], h = si[2], w = si[3], ho = sg[1], wo = sg[2];
    EMBER_CHECK(h > 0 && w > 0, Shape, "grid_sample_2d: the input ", si.to_string(),
                " has no pixels to sample");
    const std::size_t m = ho * wo;
    auto g = grid.template reshape<3>(Shape{n, m, 2});
    auto ix = detail::sampling::source_index(g.narrow(2, 0, 1), w, o);  // [N, M, 1]
    auto iy = detail::sampling::source_index(g.narrow(2, 1, 1), h, o);
    auto flat = input.template reshape<3>(Shape{n, c, h * w});
    const auto hi_x = static_cast<double>(w) - 1.0, hi_y = static_cast<double>(h) - 1.0;
    // The input at integer pixel (px, py) ([N, M, 1] floats), times 0 where it lies outside.
    auto at = [&](const Tensor<B, 3>& px, const Tensor<B, 3>& py) {
        auto inside = px.greater_equal_elem(0.0)
                          .bool_and(px.lower_equal_elem(hi_x))
                          .bool_and(py.greater_equal_elem(0.0))
                          .bool_and(py.lower_equal_elem(hi_y));
        auto lin = (py.clamp(0.0, std::max(hi_y, 0.0)) * static_cast<double>(w) +
                    px.clamp(0.0, std::max(hi_x, 0.0)))
                       .int_()
                       .swap_dims(1, 2)  // [N, 1, M]
                       .template expand<3>(Shape{n, c, m});
        auto v = flat.gather(2, lin);  // [N, C, M]
        return v.mask_fill(inside.not_().swap_dims(1, 2), 0.0);
    };
    Tensor<B, 3> out = [&] {
        if (o.mode == GridSampleMode::Nearest) return at(ix.round(), iy.round());
        auto x0 = ix.floor(), y0 = iy.floor();
        auto wx1 = (ix - x0).swap_dims(1, 2), wy1 = (iy - y0).swap_dims(1, 2);  // [N, 1, M]
        auto wx0 = 1.0 - wx1, wy0 = 1.0 - wy1;
        auto x1 = x0 + 1.0, y1 = y0 + 1.0;
        return at(x0, y0) * (wx0 * wy0) + at(x1, y0) * (wx1 * wy0) + at(x0, y1) * (wx0 * wy1) +
               at(x1, y1) * (wx1 * wy1);
    }();
    return out.template reshape<4>(Shape{n, c, ho, wo});
}

}  // namespace ember
