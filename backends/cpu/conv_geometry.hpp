#pragma once
// Convolution geometry shared by conv.cpp (the forward kernels) and backward.cpp (their
// gradients): the 3-d problem form, scratch buffers and im2col.
#include <algorithm>
#include <array>
#include <climits>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include "kernels.hpp"
#include "parallel.hpp"

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

/// col[(c, kd, kh, kw), (od, oh, ow)] for `channels` input planes starting at x; row r of col
/// starts at col + r·ld (ld >= the P output positions: several samples side by side, see
/// samples_per_gemm).
template <typename T>
void im2col(const T* x, i64 channels, const Geo& g, T* col, i64 ld = 0) {
    const i64 P = g.out_size(), plane = g.out[1] * g.out[2];
    if (ld == 0) ld = P;
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
                    dst += ld;
                }
    }
}

/// Short rows (a late ResNet stage's 4×4 or 8×8 planes) make im2col's row copies and zero fills
/// a handful of elements each, where the bookkeeping of a row costs more than its copy. There a
/// table says, per kernel tap and position, which element of the plane to read (or a zero slot
/// just past its end): one indexed load a value, no branches, no library calls.
struct TapTable {
    std::vector<std::int32_t> idx;  ///< [tap][position]: flat index in the plane, or `plane`
    i64 positions = 0, plane = 0, taps = 0;
    bool empty() const { return idx.empty(); }
};

/// The table for positions `pos` reading a plane of dims `bound` through g's kernel taps
/// (position o reads o·stride − pad + k·dil in each dim): g.out and g.in for im2col, g.in and
/// g.out for col2im's transposed geometry. Empty where rows are long enough for row copies.
inline TapTable tap_table(const Geo& g, const std::array<i64, 3>& pos,
                          const std::array<i64, 3>& bound) {
    constexpr i64 kShortRow = 8;
    TapTable t;
    const i64 P = pos[0] * pos[1] * pos[2], I = bound[0] * bound[1] * bound[2];
    if (pos[2] > kShortRow || double(P) * double(g.k_size()) > double(1 << 22) || I >= INT32_MAX)
        return t;
    t.positions = P;
    t.plane = I;
    t.taps = g.k_size();
    t.idx.resize(static_cast<std::size_t>(P * t.taps));
    std::int32_t* out = t.idx.data();
    for (i64 kd = 0; kd < g.k[0]; ++kd)
        for (i64 kh = 0; kh < g.k[1]; ++kh)
            for (i64 kw = 0; kw < g.k[2]; ++kw)
                for (i64 o0 = 0; o0 < pos[0]; ++o0) {
                    const i64 i0 = o0 * g.stride[0] - g.pad[0] + kd * g.dil[0];
                    for (i64 o1 = 0; o1 < pos[1]; ++o1) {
                        const i64 i1 = o1 * g.stride[1] - g.pad[1] + kh * g.dil[1];
                        for (i64 o2 = 0; o2 < pos[2]; ++o2) {
                            const i64 i2 = o2 * g.stride[2] - g.pad[2] + kw * g.dil[2];
                            const bool in = i0 >= 0 && i0 < bound[0] && i1 >= 0 && i1 < bound[1] &&
                                            i2 >= 0 && i2 < bound[2];
                            *out++ = static_cast<std::int32_t>(
                                in ? (i0 * bound[1] + i1) * bound[2] + i2 : I);
                        }
                    }
                }
    return t;
}

/// im2col (rows ld apart) through a non-empty tap table; `buf` holds plane + 1 values.
template <typename T>
void im2col_table(const T* x, i64 channels, const TapTable& t, T* col, i64 ld, T* buf) {
    const i64 P = t.positions, I = t.plane;
    buf[I] = T(0);
    for (i64 c = 0; c < channels; ++c) {
        std::memcpy(buf, x + c * I, static_cast<std::size_t>(I) * sizeof(T));
        for (i64 k = 0; k < t.taps; ++k) {
            const std::int32_t* ix = t.idx.data() + k * P;
            T* dst = col + (c * t.taps + k) * ld;
            for (i64 p = 0; p < P; ++p) dst[p] = buf[ix[p]];
        }
    }
}

/// out[c] += the columns of col through a non-empty tap table (col2im, rows ld apart); `buf`
/// holds plane + 1 values (the last one collects what falls outside the plane).
template <typename T>
void col2im_table(const T* col, i64 channels, const TapTable& t, T* out, i64 ld, T* buf) {
    const i64 P = t.positions, I = t.plane;
    for (i64 c = 0; c < channels; ++c) {
        T* oc = out + c * I;
        std::memcpy(buf, oc, static_cast<std::size_t>(I) * sizeof(T));
        for (i64 k = 0; k < t.taps; ++k) {
            const std::int32_t* ix = t.idx.data() + k * P;
            const T* src = col + (c * t.taps + k) * ld;
            for (i64 p = 0; p < P; ++p) buf[ix[p]] += src[p];
        }
        std::memcpy(oc, buf, static_cast<std::size_t>(I) * sizeof(T));
    }
}

/// im2col through the table where it has one, else the row copies.
template <typename T>
void unfold(const T* x, i64 channels, const Geo& g, const TapTable& t, T* col, i64 ld, T* buf) {
    if (t.empty())
        im2col(x, channels, g, col, ld);
    else
        im2col_table(x, channels, t, col, ld ? ld : t.positions, buf);
}

/// Samples whose im2col matrices sit side by side in one GEMM (one wider product, columns
/// [s·P, (s+1)·P) for sample s). A late ResNet stage has P = 16 output positions a sample: as
/// the B side of a GEMM that is a 16-column matrix, where BLAS kernels run at half their speed
/// and stream the whole weight once per sample. Below kMinCols positions, samples are batched to
/// about kTargetCols columns (measured on the ResNet-18 layers: from 64 positions up, one sample
/// is as fast, and the copies batching adds make it slower). The im2col matrix stays below
/// kMaxColBytes.
inline std::size_t samples_per_gemm(std::size_t batch, i64 rows, i64 P, std::size_t elem) {
    constexpr i64 kMinCols = 64, kTargetCols = 512;
    constexpr double kMaxColBytes = double(16 << 20);
    if (P >= kMinCols || batch <= 1) return 1;
    i64 nb = (kTargetCols + P - 1) / P;
    const double per_sample = double(std::max<i64>(rows, 1)) * double(P) * double(elem);
    nb = std::min<i64>(nb, std::max<i64>(1, static_cast<i64>(kMaxColBytes / per_sample)));
    return std::min<std::size_t>(batch, static_cast<std::size_t>(nb));
}

/// Runs f(q, buf) for the samples q in [0, count), split across the pool when `parallel`: the
/// unfolding around a threaded GEMM would otherwise stay serial and cap its speed-up. `buf` is
/// a scratch of `buf_size` values, one per task.
template <typename T, typename F>
void per_sample(std::size_t count, bool parallel, std::size_t buf_size, F&& f) {
    auto run = [&](std::size_t q0, std::size_t q1) {
        Scratch<T> buf(buf_size);
        for (std::size_t q = q0; q < q1; ++q) f(q, buf.get());
    };
    if (parallel)
        parallel_for(count, 1, run);
    else
        run(0, count);
}

/// dst[r, s·P + p] = src[s·stride + r·P + p] for `count` samples of `rows` planes of P values
/// each (sample s at src + s·stride), dst rows ld apart: the planes of several samples side by
/// side as one matrix.
template <typename T>
void gather_planes(const T* src, i64 stride, i64 rows, i64 P, i64 count, T* dst, i64 ld) {
    for (i64 r = 0; r < rows; ++r)
        for (i64 q = 0; q < count; ++q)
            std::memcpy(dst + r * ld + q * P, src + q * stride + r * P,
                        static_cast<std::size_t>(P) * sizeof(T));
}

/// The inverse of gather_planes, adding bias[r] (when given) to row r.
template <typename T>
void scatter_planes(const T* src, i64 ld, i64 rows, i64 P, i64 count, const T* bias, T* dst,
                    i64 stride) {
    for (i64 q = 0; q < count; ++q)
        for (i64 r = 0; r < rows; ++r) {
            const T* from = src + r * ld + q * P;
            T* to = dst + q * stride + r * P;
            if (bias) {
                const T b = bias[r];
                for (i64 p = 0; p < P; ++p) to[p] = from[p] + b;
            } else {
                std::memcpy(to, from, static_cast<std::size_t>(P) * sizeof(T));
            }
        }
}

/// `t` cast to `dt`, when present.
inline std::optional<CpuTensor> cast_opt(std::optional<CpuTensor> t, DType dt) {
    if (!t) return t;
    return cast(std::move(*t), dt);
}

}  // namespace ember::detail::cpu
