// Views (reshape, permute, expand, slice, flip: zero-copy, only the handle's shape, strides and
// offset change; backends/common/view.hpp) and the shape ops that move data (cat, slice_assign,
// repeat_dim), which run the elementwise shader's strided copy once per piece.
#include "kernels.hpp"

namespace ember::detail::vk {

VT cat(std::span<const VT> tensors, std::size_t dim) {
    const Shape out_shape = check::cat(check::operands(tensors), dim);
    const VT& first = tensors[0];
    VT out = empty(out_shape, first.dtype, first.device);
    view::cat_into(out, tensors, dim, [](const VT& dst, const VT& src) { copy_into(src, dst); });
    return out;
}

VT slice_assign(VT t, std::span<const Slice> ranges, VT values) {
    // Checked and resolved before copying, so that a bad range throws without doing any work.
    const check::Region r = check::slice_assign(t, ranges, values);
    if (!t.is_unique()) {
        VT copy = empty(t.shape, t.dtype, t.device);
        copy_into(t, copy);
        t = std::move(copy);
    }
    copy_into(values, view::region(t, ranges, r));
    return t;
}

VT flip(VT t, std::span<const std::size_t> axes) {
    const auto flipped = check::flip(t.shape, axes);
    // A view: negative strides read the flipped order, so no data moves (kernels take any
    // strides).
    return view::flip(std::move(t), flipped);
}

VT repeat_dim(VT t, std::size_t dim, std::size_t times) {
    const Shape out_shape = check::repeat_dim(t.shape, dim, times);
    VT out = empty(out_shape, t.dtype, t.device);
    if (out.num_elements() == 0) return out;
    const std::size_t n = t.shape[dim];
    if (n == 1) {
        // One broadcast copy instead of `times` small ones.
        copy_into(view::broadcast_dim(t, dim, times), out);
        return out;
    }
    for (std::size_t k = 0; k < times; ++k) copy_into(t, view::narrow(out, dim, k * n, n));
    return out;
}

}  // namespace ember::detail::vk
