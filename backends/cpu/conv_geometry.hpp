#pragma once
// Convolution geometry shared by conv.cpp (the forward kernels) and backward.cpp (their
// gradients): the 3-d problem form, scratch buffers and im2col.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>

#include "kernels.hpp"

namespace ember::detail::cpu {

using i64 = std::int64_t;

/// Spatial geometry in 3-d form (check::ConvGeo, from the shared conv checks).
struct Geo : check::ConvGeo {
    /// A kernel that reads exactly the input: im2col would be a copy.
    bool pointwise() const {
        for (int d = 0; d < 3; ++d)
            if (k[d] != 1 || stride[d] != 1 || pad[d] != 0) return false;
        return true;
    }
};

/// A scratch buffer from the caching allocator.
template <typename T>
struct Scratch {
    std::shared_ptr<Storage> s;
    explicit Scratch(std::size_t n) : s(allocate(std::max<std::size_t>(n, 1) * sizeof(T))) {}
    T* get() const { return static_cast<T*>(s->data); }
};

/// The outputs o in [lo, hi) of a row of n whose source o*s + off lies inside [0, len).
struct RowRange {
    i64 lo, hi;
};
inline RowRange valid_range(i64 len, i64 n, i64 s, i64 off) {
    const i64 lo = std::min(off >= 0 ? 0 : (-off + s - 1) / s, n);
    const i64 hi = std::clamp(len - off <= 0 ? i64{0} : (len - off + s - 1) / s, lo, n);
    return {lo, hi};
}

/// dst[o] = src[o*s + off] for o in r, 0 elsewhere in [0, n). Rows are short (an output row),
/// so the copy goes in fixed 32-byte pieces that compile to vector moves: a memcpy call per
/// row would cost as much as the copy.
template <typename T>
inline void gather_row(const T* src, i64 n, i64 s, i64 off, RowRange r, T* dst) {
    for (i64 o = 0; o < r.lo; ++o) dst[o] = T(0);
    if (s == 1) {
        constexpr i64 kChunk = 32 / sizeof(T);
        const T* from = src + off;
        i64 o = r.lo;
        for (; o + kChunk <= r.hi; o += kChunk) std::memcpy(dst + o, from + o, 32);
        for (; o < r.hi; ++o) dst[o] = from[o];
    } else {
        for (i64 o = r.lo; o < r.hi; ++o) dst[o] = src[o * s + off];
    }
    for (i64 o = r.hi; o < n; ++o) dst[o] = T(0);
}

/// col[(c, kd, kh, kw), (od, oh, ow)] for `channels` input planes starting at x.
template <typename T>
void im2col(const T* x, i64 channels, const Geo& g, T* col) {
    const i64 P = g.out_size(), plane = g.out[1] * g.out[2];
    T* dst = col;
    for (i64 c = 0; c < channels; ++c) {
        const T* xc = x + c * g.in_size();
        for (i64 kd = 0; kd < g.k[0]; ++kd)
            for (i64 kh = 0; kh < g.k[1]; ++kh)
                for (i64 kw = 0; kw < g.k[2]; ++kw) {
                    const i64 off = kw * g.dil[2] - g.pad[2];
                    const RowRange cols = valid_range(g.in[2], g.out[2], g.stride[2], off);
                    T* row = dst;
                    for (i64 od = 0; od < g.out[0]; ++od) {
                        const i64 id = od * g.stride[0] - g.pad[0] + kd * g.dil[0];
                        if (id < 0 || id >= g.in[0]) {
                            std::fill(row, row + plane, T(0));
                            row += plane;
                            continue;
                        }
                        for (i64 oh = 0; oh < g.out[1]; ++oh, row += g.out[2]) {
                            const i64 ih = oh * g.stride[1] - g.pad[1] + kh * g.dil[1];
                            if (ih < 0 || ih >= g.in[1])
                                std::fill(row, row + g.out[2], T(0));
                            else
                                gather_row(xc + (id * g.in[1] + ih) * g.in[2], g.out[2],
                                           g.stride[2], off, cols, row);
                        }
                    }
                    dst += P;
                }
    }
}

/// `t` cast to `dt`, when present.
inline std::optional<CpuTensor> cast_opt(std::optional<CpuTensor> t, DType dt) {
    if (!t) return t;
    return cast(std::move(*t), dt);
}

}  // namespace ember::detail::cpu
