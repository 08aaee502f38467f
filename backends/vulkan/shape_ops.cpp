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

// ---- VulkanBackend's ops on the kernels above ----
namespace ember {
namespace k = detail::vk;

auto VulkanBackend::float_reshape(FT t, const Shape& s) -> FT {
    return k::reshape(std::move(t), s);
}
auto VulkanBackend::int_reshape(IT t, const Shape& s) -> IT {
    return k::reshape(std::move(t), s);
}
auto VulkanBackend::bool_reshape(BT t, const Shape& s) -> BT {
    return k::reshape(std::move(t), s);
}
auto VulkanBackend::float_permute(FT t, std::span<const std::size_t> axes) -> FT {
    return k::permute(std::move(t), axes);
}
auto VulkanBackend::int_permute(IT t, std::span<const std::size_t> axes) -> IT {
    return k::permute(std::move(t), axes);
}
auto VulkanBackend::bool_permute(BT t, std::span<const std::size_t> axes) -> BT {
    return k::permute(std::move(t), axes);
}
auto VulkanBackend::float_expand(FT t, const Shape& s) -> FT {
    return k::expand(std::move(t), s);
}
auto VulkanBackend::int_expand(IT t, const Shape& s) -> IT {
    return k::expand(std::move(t), s);
}
auto VulkanBackend::bool_expand(BT t, const Shape& s) -> BT {
    return k::expand(std::move(t), s);
}
auto VulkanBackend::float_slice(FT t, std::span<const Slice> r) -> FT {
    return k::slice(std::move(t), r);
}
auto VulkanBackend::int_slice(IT t, std::span<const Slice> r) -> IT {
    return k::slice(std::move(t), r);
}
auto VulkanBackend::bool_slice(BT t, std::span<const Slice> r) -> BT {
    return k::slice(std::move(t), r);
}
auto VulkanBackend::float_slice_assign(FT t, std::span<const Slice> r, FT v) -> FT {
    return k::slice_assign(std::move(t), r, std::move(v));
}
auto VulkanBackend::int_slice_assign(IT t, std::span<const Slice> r, IT v) -> IT {
    return k::slice_assign(std::move(t), r, std::move(v));
}
auto VulkanBackend::bool_slice_assign(BT t, std::span<const Slice> r, BT v) -> BT {
    return k::slice_assign(std::move(t), r, std::move(v));
}
auto VulkanBackend::float_flip(FT t, std::span<const std::size_t> axes) -> FT {
    return k::flip(std::move(t), axes);
}
auto VulkanBackend::int_flip(IT t, std::span<const std::size_t> axes) -> IT {
    return k::flip(std::move(t), axes);
}
auto VulkanBackend::bool_flip(BT t, std::span<const std::size_t> axes) -> BT {
    return k::flip(std::move(t), axes);
}
auto VulkanBackend::float_cat(std::vector<FT> ts, std::size_t dim) -> FT {
    return k::cat(ts, dim);
}
auto VulkanBackend::int_cat(std::vector<IT> ts, std::size_t dim) -> IT {
    return k::cat(ts, dim);
}
auto VulkanBackend::bool_cat(std::vector<BT> ts, std::size_t dim) -> BT {
    return k::cat(ts, dim);
}
auto VulkanBackend::float_repeat_dim(FT t, std::size_t dim, std::size_t times) -> FT {
    return k::repeat_dim(std::move(t), dim, times);
}
auto VulkanBackend::int_repeat_dim(IT t, std::size_t dim, std::size_t times) -> IT {
    return k::repeat_dim(std::move(t), dim, times);
}
auto VulkanBackend::bool_repeat_dim(BT t, std::size_t dim, std::size_t times) -> BT {
    return k::repeat_dim(std::move(t), dim, times);
}

}  // namespace ember
