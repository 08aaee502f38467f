// Zero-copy views: reshape (when the strides allow), permute, expand and slice only rewrite the
// shape, strides and offset of the handle.
#include "kernels.hpp"

namespace ember::detail::cpu {

CpuTensor reshape(CpuTensor t, const Shape& shape) {
    EMBER_CHECK(shape.num_elements() == t.num_elements(), Shape, "reshape: cannot reshape ",
                t.shape.to_string(), " (", t.num_elements(), " elements) into ",
                shape.to_string(), " (", shape.num_elements(), " elements)");
    if (!t.is_contiguous()) t = contiguous(std::move(t));
    t.shape = shape;
    t.strides = contiguous_strides(shape);
    return t;
}

CpuTensor permute(CpuTensor t, std::span<const std::size_t> axes) {
    EMBER_CHECK(axes.size() == t.shape.rank(), Dim, "permute: ", axes.size(),
                " axes given for a tensor of shape ", t.shape.to_string());
    bool seen[kMaxRank] = {};
    Shape s = t.shape;
    Strides st{};
    for (std::size_t i = 0; i < axes.size(); ++i) {
        EMBER_CHECK(axes[i] < axes.size() && !seen[axes[i]], Dim,
                    "permute: axes are not a permutation of 0..", axes.size() - 1,
                    " for shape ", t.shape.to_string());
        seen[axes[i]] = true;
        s[i] = t.shape[axes[i]];
        st[i] = t.strides[axes[i]];
    }
    t.shape = s;
    t.strides = st;
    return t;
}

CpuTensor expand(CpuTensor t, const Shape& shape) {
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

CpuTensor slice(CpuTensor t, std::span<const Slice> ranges) {
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

}  // namespace ember::detail::cpu
