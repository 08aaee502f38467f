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
#include <type_traits>
#include <vector>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "gemm.hpp"
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
    } else if (s == 2) {
        // The stride as a constant: the compiler gathers the even elements with vector
        // shuffles (a strided layer's im2col was a fifth of its time as a scalar loop).
        const T* from = src + off;
        for (i64 o = r.lo; o < r.hi; ++o) dst[o] = from[2 * o];
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

/// unfold of `channels` planes into col (rows ld apart, 0: P), split across the pool by
/// channels when `parallel`: where one sample's product is threaded (batch 1, or a few large
/// images), a serial im2col before it was the part of the layer that did not scale.
template <typename T>
void unfold_split(const T* x, i64 channels, const Geo& g, const TapTable& t, T* col, i64 ld,
                  bool parallel) {
    const i64 rows = g.k_size(), I = g.in_size(), P = g.out_size();
    if (ld == 0) ld = P;
    auto run = [&](std::size_t c0, std::size_t c1) {
        Scratch<T> buf(t.empty() ? 0 : static_cast<std::size_t>(I + 1));
        unfold(x + static_cast<i64>(c0) * I, static_cast<i64>(c1 - c0), g, t,
               col + static_cast<i64>(c0) * rows * ld, ld, buf.get());
    };
    const std::size_t grain =
        static_cast<std::size_t>(std::max<i64>(1, 16384 / std::max<i64>(1, rows * P)));
    if (parallel)
        parallel_for(static_cast<std::size_t>(channels), grain, run);
    else
        run(0, static_cast<std::size_t>(channels));
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

#if defined(__AVX2__)
/// to[j] = from[2j] for j < 8, reading from[0..14] only (a stride-2 row of the packer).
inline void every_other_8(const float* from, float* to) {
    const __m256 a = _mm256_loadu_ps(from), b = _mm256_loadu_ps(from + 7);
    // [f0 f2 f8 f10 | f4 f6 f12 f14], then its 64-bit quarters in the order 0, 2, 1, 3.
    const __m256 m = _mm256_shuffle_ps(a, b, 0xD8);
    _mm256_storeu_ps(to, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(m), 0xD8)));
}
#endif

/// im2col as gemm_packed_b's B, written straight into the GEMM's panels: no K × P matrix in
/// memory and no second copy of it by the GEMM's packing (im2col and that copy were a third of
/// a ResNet-18 convolution's time on one core). Columns are the output positions of the samples
/// loaded (column s·P + p: position p of sample s), rows the (c, kd, kh, kw) taps of `channels`
/// input planes. Where the convolution pads, `load` first copies the samples into zero-padded
/// planes (a ninth of im2col's writes for a 3×3 kernel), so that packing never tests a bound:
/// a panel's column reads base[j] + tap offset + channel plane.
template <typename T>
class Im2colPacker {
  public:
    Im2colPacker(i64 channels, const Geo& g) : g_(&g), taps_(g.k_size()) {
        for (int d = 0; d < 3; ++d) {
            dims_[d] = g.in[d] + 2 * g.pad[d];
            padded_ = padded_ || g.pad[d] != 0;
        }
        plane_ = dims_[0] * dims_[1] * dims_[2];
        tap_off_.reserve(static_cast<std::size_t>(taps_));
        for (i64 kd = 0; kd < g.k[0]; ++kd)
            for (i64 kh = 0; kh < g.k[1]; ++kh)
                for (i64 kw = 0; kw < g.k[2]; ++kw)
                    tap_off_.push_back(((kd * g.dil[0]) * dims_[1] + kh * g.dil[1]) * dims_[2] +
                                       kw * g.dil[2]);
        rows_.reserve(static_cast<std::size_t>(channels * taps_));
        for (i64 c = 0; c < channels; ++c)
            for (i64 t = 0; t < taps_; ++t) rows_.push_back(c * plane_ + tap_off_[std::size_t(t)]);
        channels_ = channels;
    }

    /// The samples the next products read: `count` of them, sample s's planes at
    /// x + s·stride (plane c at + c·in_size).
    void load(const T* x, i64 stride, i64 count) {
        if (!padded_) {
            x_ = x;
            stride_ = stride;
            return;
        }
        const Geo& g = *g_;
        stride_ = channels_ * plane_;
        const std::size_t need = static_cast<std::size_t>(count * stride_);
        if (!buf_ || cap_ < need) {
            buf_ = allocate(need * sizeof(T));
            cap_ = need;
        }
        T* out = static_cast<T*>(buf_->data);
        // Split across the pool (inline when called from inside a parallel region): a late
        // ResNet layer's 32 samples a product are 2.4 MB to copy, which one thread would copy
        // while the others wait for the product.
        const i64 planes = count * channels_;
        parallel_for(std::size_t(planes), std::max<std::size_t>(1, std::size_t(16384 / plane_)),
                     [&](std::size_t p0, std::size_t p1) {
                         for (i64 pl = i64(p0); pl < i64(p1); ++pl) {
                             const i64 s = pl / channels_, c = pl % channels_;
                             pad_plane(x + s * stride + c * g.in_size(),
                                       out + s * stride_ + c * plane_);
                         }
                     });
        x_ = out;
    }

    PanelPacker<T> packer() const { return {this, &pack}; }

  private:
    /// One input plane into its zero-padded copy.
    void pad_plane(const T* src, T* dst) const {
        const Geo& g = *g_;
        for (i64 d = 0; d < dims_[0]; ++d) {
            const i64 id = d - g.pad[0];
            T* row = dst + d * dims_[1] * dims_[2];
            if (id < 0 || id >= g.in[0]) {
                std::fill(row, row + dims_[1] * dims_[2], T(0));
                continue;
            }
            for (i64 h = 0; h < dims_[1]; ++h, row += dims_[2]) {
                const i64 ih = h - g.pad[1];
                if (ih < 0 || ih >= g.in[1]) {
                    std::fill(row, row + dims_[2], T(0));
                    continue;
                }
                const T* in = src + (id * g.in[1] + ih) * g.in[2];
                std::fill(row, row + g.pad[2], T(0));
                std::memcpy(row + g.pad[2], in, static_cast<std::size_t>(g.in[2]) * sizeof(T));
                std::fill(row + g.pad[2] + g.in[2], row + dims_[2], T(0));
            }
        }
    }

    static void pack(const void* ctx, const PanelBlock& b, T* out) {
        const auto& self = *static_cast<const Im2colPacker*>(ctx);
        const Geo& g = *self.g_;
        const i64 NR = static_cast<i64>(b.nr), kc = static_cast<i64>(b.kc);
        const i64 P = g.out_size(), ohw = g.out[1] * g.out[2], ow_n = g.out[2];
        const i64 s2 = g.stride[2];
        // Column j of a panel reads base[j] (+ its row's channel plane and tap); runs of
        // columns along one output row read consecutive (stride-apart) inputs: a panel of a
        // wide layer is a run or two, copied as such, while short rows (a late stage's 4×4)
        // go through the offsets one by one.
        constexpr i64 kMaxNR = 64;
        std::int64_t base[kMaxNR];
        std::int32_t base32[kMaxNR];
        i64 run_start[kMaxNR + 1], runs = 0;
        for (std::size_t q = b.q0; q < b.q1; ++q) {
            T* panel = out + static_cast<i64>(q) * NR * kc;
            const i64 c0 = static_cast<i64>(b.j0 + q * b.nr);
            const i64 cols = std::min<i64>(NR, static_cast<i64>(b.nc) - static_cast<i64>(q) * NR);
            runs = 0;
            for (i64 j = 0; j < cols; ++j) {
                const i64 col = c0 + j, smp = col / P, pos = col % P;
                const i64 od = pos / ohw, oh = pos % ohw / ow_n, ow = pos % ow_n;
                base[j] = smp * self.stride_ +
                          ((od * g.stride[0]) * self.dims_[1] + oh * g.stride[1]) * self.dims_[2] +
                          ow * s2;
                if (j == 0 || ow == 0) run_start[runs++] = j;
            }
            run_start[runs] = cols;
            const bool by_runs = (s2 == 1 && runs * 8 <= cols) || base[cols - 1] > INT32_MAX;
            if (!by_runs)
                for (i64 j = 0; j < cols; ++j) base32[j] = static_cast<std::int32_t>(base[j]);
            for (i64 p = 0; p < kc; ++p) {
                const T* src = self.x_ + self.rows_[b.p0 + static_cast<std::size_t>(p)];
                T* __restrict dst = panel + p * NR;
                if (by_runs) {
                    for (i64 r = 0; r < runs; ++r) {
                        const i64 j0 = run_start[r], len = run_start[r + 1] - j0;
                        const T* __restrict from = src + base[j0];
                        T* __restrict to = dst + j0;
                        if (s2 == 1) {
                            // Fixed 8-value pieces (vector moves), as gather_row does.
                            i64 j = 0;
                            for (; j + 8 <= len; j += 8)
                                std::memcpy(to + j, from + j, 8 * sizeof(T));
                            for (; j < len; ++j) to[j] = from[j];
                        } else {
                            i64 j = 0;
#if defined(__AVX2__)
                            if constexpr (std::is_same_v<T, float>)
                                if (s2 == 2)
                                    for (; j + 8 <= len; j += 8)
                                        every_other_8(from + 2 * j, to + j);
#endif
                            for (; j < len; ++j) to[j] = from[j * s2];
                        }
                    }
                } else {
                    i64 j = 0;
#if defined(__AVX2__)
                    // A scalar loop here was most of a stride-2 layer's packing.
                    if constexpr (std::is_same_v<T, float>)
                        for (; j + 8 <= cols; j += 8)
                            _mm256_storeu_ps(dst + j,
                                             _mm256_i32gather_ps(
                                                 src,
                                                 _mm256_loadu_si256(
                                                     reinterpret_cast<const __m256i*>(base32 + j)),
                                                 4));
#endif
                    for (; j < cols; ++j) dst[j] = src[base32[j]];
                }
                for (i64 j = cols; j < NR; ++j) dst[j] = T(0);
            }
        }
    }

    const Geo* g_;
    i64 taps_, channels_ = 0, plane_ = 0, stride_ = 0;
    std::array<i64, 3> dims_{};
    bool padded_ = false;
    std::vector<i64> tap_off_, rows_;
    std::shared_ptr<Storage> buf_;
    std::size_t cap_ = 0;
    const T* x_ = nullptr;
};

/// `t` cast to `dt`, when present.
inline std::optional<CpuTensor> cast_opt(std::optional<CpuTensor> t, DType dt) {
    if (!t) return t;
    return cast(std::move(*t), dt);
}

}  // namespace ember::detail::cpu
