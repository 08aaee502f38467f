#pragma once
// Strided views, shared by every backend: reshape (when the layout allows), permute, transpose,
// slice with steps, expand, narrow and flip only rewrite a primitive's shape, strides and
// offset. Any primitive with `shape`, `strides` (elements, one per dim) and `offset` (elements)
// works; the CPU, Vulkan and CUDA tensors all have them. The checks and messages are those of
// include/ember/tensor/check.hpp.
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>

#include "ember/tensor/check.hpp"
#include "ember/tensor/shape.hpp"
#include "ember/tensor/strided.hpp"

namespace ember::detail::view {

/// `t` as `shape`: a view when `t` is contiguous, else a contiguous copy (the backend's own
/// `contiguous`, found by argument-dependent lookup) viewed so. Throws when the element counts
/// differ.
template <typename T>
T reshape(T t, const Shape& shape) {
    check::reshape(t.shape, shape);
    if (!detail::is_contiguous(t.shape, t.strides)) t = contiguous(std::move(t));
    t.shape = shape;
    t.strides = detail::contiguous_strides(shape);
    return t;
}

/// Dims reordered: dim i of the result is dim axes[i] of `t`.
template <typename T>
T permute(T t, std::span<const std::size_t> axes) {
    check::permute(t.shape, axes);
    const Shape s = t.shape;
    const auto st = t.strides;
    for (std::size_t i = 0; i < axes.size(); ++i) {
        t.shape[i] = s[axes[i]];
        t.strides[i] = st[axes[i]];
    }
    return t;
}

/// Dims a and b swapped.
template <typename T>
T transpose(T t, std::size_t a, std::size_t b) {
    check::dim("transpose", a, t.shape);
    check::dim("transpose", b, t.shape);
    std::swap(t.shape[a], t.shape[b]);
    std::swap(t.strides[a], t.strides[b]);
    return t;
}

/// Broadcast to `shape`: new leading dims and dims of size 1 get stride 0.
template <typename T>
T expand(T t, const Shape& shape) {
    check::expand(t.shape, shape);
    const std::size_t off = shape.rank() - t.shape.rank();
    decltype(t.strides) st{};
    for (std::size_t i = off; i < shape.rank(); ++i)
        st[i] = t.shape[i - off] == shape[i] ? t.strides[i - off] : 0;
    t.shape = shape;
    t.strides = st;
    return t;
}

/// The elements [start, start + len) along `dim` (bounds already checked by the caller).
template <typename T>
T narrow(T t, std::size_t dim, std::size_t start, std::size_t len) {
    t.offset += static_cast<std::int64_t>(start) * t.strides[dim];
    t.shape[dim] = len;
    return t;
}

/// cat's pieces: calls `copy(dst, src)` for each of `tensors` with dst its slot, along `dim`, of
/// `out` (whose shape check::cat gave).
template <typename T, typename Copy>
void cat_into(const T& out, std::span<const T> tensors, std::size_t dim, Copy&& copy) {
    std::size_t start = 0;
    for (const T& t : tensors) {
        copy(narrow(out, dim, start, t.shape[dim]), t);
        start += t.shape[dim];
    }
}

/// The region `r` of `t`, stepping by each range's step (r from check::slice or slice_assign).
template <typename T>
T region(T t, std::span<const Slice> ranges, const check::Region& r) {
    for (std::size_t d = 0; d < ranges.size(); ++d) {
        t.offset += static_cast<std::int64_t>(r.start[d]) * t.strides[d];
        t.strides[d] *= ranges[d].step;
    }
    t.shape = r.shape;
    return t;
}

/// Ranges over the leading dims (PyTorch's rules: negative bounds from the end, clamped).
template <typename T>
T slice(T t, std::span<const Slice> ranges) {
    const check::Region r = check::slice("slice", t.shape, ranges);
    return region(std::move(t), ranges, r);
}

/// The dims in `flipped` read backwards, through negative strides.
template <typename T>
T flip(T t, const std::array<bool, kMaxRank>& flipped) {
    for (std::size_t d = 0; d < t.shape.rank(); ++d) {
        if (!flipped[d] || t.shape[d] == 0) continue;
        t.offset += static_cast<std::int64_t>(t.shape[d] - 1) * t.strides[d];
        t.strides[d] = -t.strides[d];
    }
    return t;
}

/// `dim` (of size 1) repeated `times` times with stride 0.
template <typename T>
T broadcast_dim(T t, std::size_t dim, std::size_t times) {
    t.shape[dim] = times;
    t.strides[dim] = 0;
    return t;
}

}  // namespace ember::detail::view
