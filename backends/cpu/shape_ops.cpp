// Shape-changing ops that move data: cat, slice_assign, flip, repeat_dim. Each builds strided
// views of the output (or input) and runs one dtype-agnostic strided copy per piece, so every
// layout (permuted, sliced, broadcast, reversed) goes through the same path.
#include <cstdint>
#include <cstring>
#include <span>

#include "iter.hpp"
#include "kernels.hpp"
#include "parallel.hpp"

namespace ember::detail::cpu {

namespace {

// Enough elements per task that a thread hand-off costs little next to the copy.
constexpr std::size_t kCopyGrain = std::size_t{1} << 15;

/// dst[...] = src[...] for views of the same shape and dtype (src may broadcast or run
/// backwards; dst must not overlap itself).
void copy_into(const CpuTensor& dst, const CpuTensor& src) {
    const std::size_t n = dst.num_elements();
    if (n == 0) return;
    const auto it = make_iter<2>(dst.shape, {&dst.strides, &src.strides});
    visit_bits(dtype_size(dst.dtype), [&]<typename U>(TypeTag<U>) {
        U* d = reinterpret_cast<U*>(dst.bytes());
        const U* s = reinterpret_cast<const U*>(src.bytes());
        parallel_for(n, kCopyGrain, [&](std::size_t b, std::size_t e) {
            for_each_span(it, b, e, [&](const auto& off, std::size_t len, const auto& st) {
                U* dp = d + off[0];
                const U* sp = s + off[1];
                if (st[0] == 1 && st[1] == 1) {
                    std::memcpy(dp, sp, len * sizeof(U));
                } else if (st[0] == 1 && st[1] == 0) {
                    const U v = *sp;
                    for (std::size_t i = 0; i < len; ++i) dp[i] = v;
                } else {
                    for (std::size_t i = 0; i < len; ++i)
                        dp[static_cast<std::int64_t>(i) * st[0]] =
                            sp[static_cast<std::int64_t>(i) * st[1]];
                }
            });
        });
    });
}

/// A view of `t` restricted to [start, start + len) along `dim`.
CpuTensor narrow_view(const CpuTensor& t, std::size_t dim, std::size_t start, std::size_t len) {
    CpuTensor v = t;
    v.offset += static_cast<std::int64_t>(start) * t.strides[dim];
    v.shape[dim] = len;
    return v;
}

}  // namespace

CpuTensor cat(std::span<const CpuTensor> tensors, std::size_t dim) {
    EMBER_CHECK(!tensors.empty(), Argument, "cat: expected at least one tensor");
    const CpuTensor& first = tensors[0];
    const std::size_t rank = first.shape.rank();
    EMBER_CHECK(dim < rank, Dim, "cat: dim ", dim, " is out of range for rank ", rank);
    Shape out_shape = first.shape;
    out_shape[dim] = 0;
    for (std::size_t i = 0; i < tensors.size(); ++i) {
        const CpuTensor& t = tensors[i];
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
    CpuTensor out = empty(out_shape, first.dtype);
    std::size_t start = 0;
    for (const CpuTensor& t : tensors) {
        copy_into(narrow_view(out, dim, start, t.shape[dim]), t);
        start += t.shape[dim];
    }
    return out;
}

CpuTensor slice_assign(CpuTensor t, std::span<const Slice> ranges, CpuTensor values) {
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
        CpuTensor copy = empty(t.shape, t.dtype);
        copy_into(copy, t);
        t = std::move(copy);
    }
    CpuTensor view = t;
    view.shape = region;
    for (std::size_t d = 0; d < ranges.size(); ++d) {
        view.offset += static_cast<std::int64_t>(r[d].first) * t.strides[d];
        view.strides[d] = t.strides[d] * ranges[d].step;
    }
    copy_into(view, values);
    return t;
}

CpuTensor flip(CpuTensor t, std::span<const std::size_t> axes) {
    const std::size_t rank = t.shape.rank();
    std::array<bool, kMaxRank> flipped{};
    for (const std::size_t a : axes) {
        EMBER_CHECK(a < rank, Dim, "flip: axis ", a, " is out of range for shape ", t.shape);
        EMBER_CHECK(!flipped[a], Dim, "flip: axis ", a, " is given more than once");
        flipped[a] = true;
    }
    CpuTensor out = empty(t.shape, t.dtype);
    if (out.num_elements() == 0) return out;
    // Reading through negative strides turns the flip into a plain strided copy.
    CpuTensor src = t;
    for (std::size_t d = 0; d < rank; ++d) {
        if (!flipped[d]) continue;
        src.offset += static_cast<std::int64_t>(t.shape[d] - 1) * t.strides[d];
        src.strides[d] = -t.strides[d];
    }
    copy_into(out, src);
    return out;
}

CpuTensor repeat_dim(CpuTensor t, std::size_t dim, std::size_t times) {
    EMBER_CHECK(dim < t.shape.rank(), Dim, "repeat_dim: dim ", dim, " is out of range for shape ",
                t.shape);
    Shape out_shape = t.shape;
    out_shape[dim] = t.shape[dim] * times;
    CpuTensor out = empty(out_shape, t.dtype);
    if (out.num_elements() == 0) return out;
    const std::size_t n = t.shape[dim];
    if (n == 1) {
        // One broadcast copy instead of `times` small ones.
        CpuTensor src = t;
        src.shape[dim] = times;
        src.strides[dim] = 0;
        copy_into(out, src);
        return out;
    }
    for (std::size_t k = 0; k < times; ++k) copy_into(narrow_view(out, dim, k * n, n), t);
    return out;
}

}  // namespace ember::detail::cpu
