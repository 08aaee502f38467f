// Views (reshape, permute, expand, slice, flip: zero-copy, only the handle's shape, strides and
// offset change) and the shape ops that move data (cat, slice_assign, repeat_dim), which run
// the elementwise shader's strided copy once per piece.
#include "kernels.hpp"

namespace ember::detail::vk {

namespace {
/// A view of `t` restricted to [start, start + len) along `dim`.
VT narrow_view(const VT& t, std::size_t dim, std::size_t start, std::size_t len) {
    VT v = t;
    v.offset += static_cast<std::int64_t>(start) * t.strides[dim];
    v.shape[dim] = len;
    return v;
}
}  // namespace

VT reshape(VT t, const Shape& shape) {
    EMBER_CHECK(shape.num_elements() == t.num_elements(), Shape, "reshape: cannot reshape ",
                t.shape.to_string(), " (", t.num_elements(), " elements) into ", shape.to_string(),
                " (", shape.num_elements(), " elements)");
    if (!t.is_contiguous()) t = contiguous(std::move(t));
    t.shape = shape;
    t.strides = contiguous_strides(shape);
    return t;
}

VT permute(VT t, std::span<const std::size_t> axes) {
    EMBER_CHECK(axes.size() == t.shape.rank(), Dim, "permute: ", axes.size(),
                " axes given for a tensor of shape ", t.shape.to_string());
    bool seen[kMaxRank] = {};
    Shape s = t.shape;
    Strides st{};
    for (std::size_t i = 0; i < axes.size(); ++i) {
        EMBER_CHECK(axes[i] < axes.size() && !seen[axes[i]], Dim,
                    "permute: axes are not a permutation of 0..", axes.size() - 1, " for shape ",
                    t.shape.to_string());
        seen[axes[i]] = true;
        s[i] = t.shape[axes[i]];
        st[i] = t.strides[axes[i]];
    }
    t.shape = s;
    t.strides = st;
    return t;
}

VT expand(VT t, const Shape& shape) {
    EMBER_CHECK(shape.rank() >= t.shape.rank(), Shape, "expand: cannot expand ",
                t.shape.to_string(), " to the lower rank shape ", shape.to_string());
    const std::size_t off = shape.rank() - t.shape.rank();
    Strides st{};
    for (std::size_t i = 0; i < shape.rank(); ++i) {
        if (i < off) continue;  // new leading dims: stride 0
        const std::size_t d = t.shape[i - off];
        EMBER_CHECK(d == shape[i] || d == 1, Shape, "expand: cannot expand ", t.shape.to_string(),
                    " to ", shape.to_string(), " (dim ", i, ": ", d, " vs ", shape[i], ")");
        st[i] = d == shape[i] ? t.strides[i - off] : 0;
    }
    t.shape = shape;
    t.strides = st;
    return t;
}

VT slice(VT t, std::span<const Slice> ranges) {
    EMBER_CHECK(ranges.size() <= t.shape.rank(), Dim, "slice: ", ranges.size(),
                " ranges given for a tensor of shape ", t.shape.to_string());
    for (std::size_t i = 0; i < ranges.size(); ++i) {
        auto [start, len] = ranges[i].resolve(t.shape[i], "slice");
        t.offset += static_cast<std::int64_t>(start) * t.strides[i];
        t.shape[i] = len;
        t.strides[i] *= ranges[i].step;
    }
    return t;
}

VT cat(std::span<const VT> tensors, std::size_t dim) {
    EMBER_CHECK(!tensors.empty(), Argument, "cat: expected at least one tensor");
    const VT& first = tensors[0];
    const std::size_t rank = first.shape.rank();
    EMBER_CHECK(dim < rank, Dim, "cat: dim ", dim, " is out of range for rank ", rank);
    Shape out_shape = first.shape;
    out_shape[dim] = 0;
    for (std::size_t i = 0; i < tensors.size(); ++i) {
        const VT& t = tensors[i];
        EMBER_CHECK(t.dtype == first.dtype, DType, "cat: tensor ", i, " has dtype ",
                    dtype_name(t.dtype), " but tensor 0 has ", dtype_name(first.dtype));
        EMBER_CHECK(t.shape.rank() == rank, Shape, "cat: tensor ", i, " has shape ", t.shape,
                    " of rank ", t.shape.rank(), " but tensor 0 has shape ", first.shape);
        for (std::size_t d = 0; d < rank; ++d)
            EMBER_CHECK(d == dim || t.shape[d] == first.shape[d], Shape, "cat: tensor ", i,
                        " has shape ", t.shape, " but tensor 0 has shape ", first.shape,
                        "; they must match except in dim ", dim);
        out_shape[dim] += t.shape[dim];
    }
    VT out = empty(out_shape, first.dtype, first.device);
    std::size_t start = 0;
    for (const VT& t : tensors) {
        copy_into(t, narrow_view(out, dim, start, t.shape[dim]));
        start += t.shape[dim];
    }
    return out;
}

VT slice_assign(VT t, std::span<const Slice> ranges, VT values) {
    const std::size_t rank = t.shape.rank();
    EMBER_CHECK(ranges.size() <= rank, Index, "slice_assign: ", ranges.size(),
                " ranges given for a tensor of shape ", t.shape);
    EMBER_CHECK(values.dtype == t.dtype, DType, "slice_assign: values have dtype ",
                dtype_name(values.dtype), " but the tensor has ", dtype_name(t.dtype));
    // Resolve before copying so that a bad range throws without doing any work.
    std::array<std::pair<std::size_t, std::size_t>, kMaxRank> r{};
    Shape region = t.shape;
    for (std::size_t d = 0; d < ranges.size(); ++d) {
        r[d] = ranges[d].resolve(t.shape[d], "slice_assign");
        region[d] = r[d].second;
    }
    EMBER_CHECK(region == values.shape, Shape, "slice_assign: values of shape ", values.shape,
                " do not match the region of shape ", region, " in a tensor of shape ", t.shape);
    if (!t.is_unique()) {
        VT copy = empty(t.shape, t.dtype, t.device);
        copy_into(t, copy);
        t = std::move(copy);
    }
    VT view = t;
    view.shape = region;
    for (std::size_t d = 0; d < ranges.size(); ++d) {
        view.offset += static_cast<std::int64_t>(r[d].first) * t.strides[d];
        view.strides[d] = t.strides[d] * ranges[d].step;
    }
    copy_into(values, view);
    return t;
}

VT flip(VT t, std::span<const std::size_t> axes) {
    const std::size_t rank = t.shape.rank();
    std::array<bool, kMaxRank> flipped{};
    for (const std::size_t a : axes) {
        EMBER_CHECK(a < rank, Dim, "flip: axis ", a, " is out of range for shape ", t.shape);
        EMBER_CHECK(!flipped[a], Dim, "flip: axis ", a, " is given more than once");
        flipped[a] = true;
    }
    // A view: negative strides read the flipped order, so no data moves (kernels take any
    // strides).
    for (std::size_t d = 0; d < rank; ++d) {
        if (!flipped[d] || t.shape[d] == 0) continue;
        t.offset += static_cast<std::int64_t>(t.shape[d] - 1) * t.strides[d];
        t.strides[d] = -t.strides[d];
    }
    return t;
}

VT repeat_dim(VT t, std::size_t dim, std::size_t times) {
    EMBER_CHECK(dim < t.shape.rank(), Dim, "repeat_dim: dim ", dim, " is out of range for shape ",
                t.shape);
    Shape out_shape = t.shape;
    out_shape[dim] = t.shape[dim] * times;
    VT out = empty(out_shape, t.dtype, t.device);
    if (out.num_elements() == 0) return out;
    const std::size_t n = t.shape[dim];
    if (n == 1) {
        // One broadcast copy instead of `times` small ones.
        VT src = t;
        src.shape[dim] = times;
        src.strides[dim] = 0;
        copy_into(src, out);
        return out;
    }
    for (std::size_t k = 0; k < times; ++k) copy_into(t, narrow_view(out, dim, k * n, n));
    return out;
}

}  // namespace ember::detail::vk
