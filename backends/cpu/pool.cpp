// Pooling and interpolation on [N, C, spatial...] tensors, following PyTorch's CPU kernels
// (output sizes, window clipping, divisors, NaN handling and index conventions), so that
// results match it value for value. Every spatial rank is handled as 3-d with leading unit
// dims; the work is split over the N·C planes.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "isa.hpp"  // EMBER_CPU_ISA_BEGIN/END: one copy per instruction set (EMBER_CPU_ARCH)
#include "iter.hpp"
#include "kernels.hpp"
#include "parallel.hpp"
#include "pool_geometry.hpp"

namespace ember::detail::cpu {
EMBER_CPU_ISA_BEGIN
namespace {

/// Max pooling windows along one axis: PyTorch moves the start into the input by whole
/// dilation steps, so lo is the first in-bounds tap.
AxisWindows max_windows(i64 in, i64 out, i64 k, i64 s, i64 pad, i64 dil) {
    AxisWindows w;
    for (i64 o = 0; o < out; ++o) {
        i64 lo = o * s - pad;
        const i64 hi = std::min(lo + (k - 1) * dil + 1, in);
        while (lo < 0) lo += dil;
        w.lo.push_back(lo);
        w.hi.push_back(hi);
        w.count.push_back(0);
    }
    return w;
}

/// Average pooling of one plane (out of line for the same reason as max_pool_plane).
template <typename T>
[[gnu::noinline]] void avg_pool_plane(const T* __restrict in, T* __restrict o, const Dims3& g,
                                      const std::array<AxisWindows, 3>& ax) {
    const i64 ih = g.in[1], iw = g.in[2];
    for (i64 od = 0; od < g.out[0]; ++od)
        for (i64 oh = 0; oh < g.out[1]; ++oh) {
            const std::size_t ud = std::size_t(od), uh = std::size_t(oh);
            const i64 d0 = ax[0].lo[ud], d1 = ax[0].hi[ud], h0 = ax[1].lo[uh], h1 = ax[1].hi[uh];
            const i64 dh_count = ax[0].count[ud] * ax[1].count[uh];
            T* orow = o + (od * g.out[1] + oh) * g.out[2];
            for (i64 ow = 0; ow < g.out[2]; ++ow) {
                const std::size_t uw = std::size_t(ow);
                const i64 w0 = ax[2].lo[uw], w1 = ax[2].hi[uw];
                // A window entirely in the padding (possible with ceil_mode) gives 0, as
                // PyTorch.
                if (d0 >= d1 || h0 >= h1 || w0 >= w1) {
                    orow[ow] = T(0);
                    continue;
                }
                T sum = T(0);
                for (i64 d = d0; d < d1; ++d)
                    for (i64 h = h0; h < h1; ++h) {
                        const T* row = in + (d * ih + h) * iw;
                        for (i64 c = w0; c < w1; ++c) sum += row[c];
                    }
                orow[ow] = sum / T(dh_count * ax[2].count[uw]);
            }
        }
}

template <typename T>
void avg_pool_impl(const CpuTensor& x, const Dims3& g, const Window3& w, bool count_include_pad,
                   CpuTensor& out) {
    std::array<AxisWindows, 3> ax;
    for (int d = 0; d < 3; ++d)
        ax[d] = avg_windows(g.in[d], g.out[d], w.k[d], w.s[d], w.pad[d], count_include_pad);
    const T* X = x.data<T>();
    T* O = out.data<T>();
    const std::size_t planes = x.shape[0] * x.shape[1];
    parallel_for(planes, plane_grain(g.out_size() * w.k[0] * w.k[1] * w.k[2]),
                 [&](std::size_t p0, std::size_t p1) {
                     for (std::size_t pl = p0; pl < p1; ++pl) {
                         const i64 q = static_cast<i64>(pl);
                         avg_pool_plane(X + q * g.in_size(), O + q * g.out_size(), g, ax);
                     }
                 });
}

/// Max pooling of one plane. PyTorch starts each window from its first in-bounds position and
/// lets NaN win (the last NaN seen). Kept out of line with plain arguments so that the inner
/// loop gets registers of its own.
template <typename T>
[[gnu::noinline]] void max_pool_plane(const T* __restrict in, T* __restrict o, i64* __restrict oi,
                                      const Dims3& g, const std::array<AxisWindows, 3>& ax,
                                      const Window3& w) {
    const i64 ih = g.in[1], iw = g.in[2], dd = w.dil[0], dh = w.dil[1], dw = w.dil[2];
    const i64* wlo = ax[2].lo.data();
    const i64* whi = ax[2].hi.data();
    for (i64 od = 0; od < g.out[0]; ++od)
        for (i64 oh = 0; oh < g.out[1]; ++oh) {
            const i64 d0 = ax[0].lo[std::size_t(od)], d1 = ax[0].hi[std::size_t(od)];
            const i64 h0 = ax[1].lo[std::size_t(oh)], h1 = ax[1].hi[std::size_t(oh)];
            const i64 q0 = (od * g.out[1] + oh) * g.out[2];
            for (i64 ow = 0; ow < g.out[2]; ++ow) {
                const i64 w0 = wlo[ow], w1 = whi[ow];
                i64 best_i = (d0 * ih + h0) * iw + w0;
                T best = -std::numeric_limits<T>::infinity();
                for (i64 d = d0; d < d1; d += dd)
                    for (i64 h = h0; h < h1; h += dh) {
                        const i64 base = (d * ih + h) * iw;
                        for (i64 c = w0; c < w1; c += dw) {
                            const T v = in[base + c];
                            // Bitwise, not short-circuit: "is this larger" is a coin toss on
                            // real data, which a branch would lose half the time.
                            const bool take = (v > best) | (v != v);
                            best = take ? v : best;
                            best_i = take ? base + c : best_i;
                        }
                    }
                o[q0 + ow] = best;
                oi[q0 + ow] = best_i;
            }
        }
}

template <typename T>
void max_pool_impl(const CpuTensor& x, const Dims3& g, const Window3& w, CpuTensor& out,
                   CpuTensor& indices) {
    std::array<AxisWindows, 3> ax;
    for (int d = 0; d < 3; ++d)
        ax[d] = max_windows(g.in[d], g.out[d], w.k[d], w.s[d], w.pad[d], w.dil[d]);
    const T* X = x.data<T>();
    T* O = out.data<T>();
    i64* I = indices.data<i64>();
    const std::size_t planes = x.shape[0] * x.shape[1];
    parallel_for(planes, plane_grain(g.out_size() * w.k[0] * w.k[1] * w.k[2]),
                 [&](std::size_t p0, std::size_t p1) {
                     for (std::size_t pl = p0; pl < p1; ++pl) {
                         const i64 q = static_cast<i64>(pl);
                         max_pool_plane(X + q * g.in_size(), O + q * g.out_size(),
                                        I + q * g.out_size(), g, ax, w);
                     }
                 });
}

template <typename T>
void adaptive_avg_impl(const CpuTensor& x, const Dims3& g, CpuTensor& out) {
    // Adaptive windows are average windows whose bounds follow PyTorch's start/end formulas;
    // they never reach into padding, so the divisor is the window's extent.
    std::array<AxisWindows, 3> ax;
    for (int d = 0; d < 3; ++d) {
        for (i64 o = 0; o < g.out[d]; ++o) {
            const i64 lo = adaptive_start(o, g.out[d], g.in[d]);
            const i64 hi = adaptive_end(o, g.out[d], g.in[d]);
            ax[d].lo.push_back(lo);
            ax[d].hi.push_back(hi);
            ax[d].count.push_back(hi - lo);
        }
    }
    const T* X = x.data<T>();
    T* O = out.data<T>();
    const std::size_t planes = x.shape[0] * x.shape[1];
    parallel_for(planes, plane_grain(g.in_size() + g.out_size()),
                 [&](std::size_t p0, std::size_t p1) {
                     for (std::size_t pl = p0; pl < p1; ++pl) {
                         const i64 q = static_cast<i64>(pl);
                         avg_pool_plane(X + q * g.in_size(), O + q * g.out_size(), g, ax);
                     }
                 });
}

// ---- interpolation -------------------------------------------------------------------------

/// out[oh, ow] = Σ wy·wx·in[iy, ix] over the separable taps of each axis.
template <typename T, int Taps>
void separable_impl(const CpuTensor& x, i64 ih, i64 iw, i64 oh, i64 ow,
                    const AxisWeights<T, Taps>& ay, const AxisWeights<T, Taps>& ax,
                    CpuTensor& out) {
    const T* X = x.data<T>();
    T* O = out.data<T>();
    const std::size_t planes = x.shape[0] * x.shape[1];
    parallel_for(planes, plane_grain(oh * ow * Taps * Taps), [&](std::size_t p0, std::size_t p1) {
        for (std::size_t pl = p0; pl < p1; ++pl) {
            const T* in = X + static_cast<i64>(pl) * ih * iw;
            T* o = O + static_cast<i64>(pl) * oh * ow;
            for (i64 y = 0; y < oh; ++y) {
                const i64* yi = &ay.idx[std::size_t(y * Taps)];
                const T* yw = &ay.wt[std::size_t(y * Taps)];
                for (i64 xo = 0; xo < ow; ++xo) {
                    const i64* xi = &ax.idx[std::size_t(xo * Taps)];
                    const T* xw = &ax.wt[std::size_t(xo * Taps)];
                    T acc = T(0);
                    for (int r = 0; r < Taps; ++r) {
                        const T* row = in + yi[r] * iw;
                        T s = T(0);
                        for (int c = 0; c < Taps; ++c) s += xw[c] * row[xi[c]];
                        acc += yw[r] * s;
                    }
                    o[y * ow + xo] = acc;
                }
            }
        }
    });
}

template <typename T>
void nearest_impl(const CpuTensor& x, i64 ih, i64 iw, i64 oh, i64 ow, CpuTensor& out) {
    const T* X = x.data<T>();
    T* O = out.data<T>();
    std::vector<i64> xi(static_cast<std::size_t>(ow));
    for (i64 i = 0; i < ow; ++i) xi[std::size_t(i)] = nearest_index(i, iw, ow);
    const std::size_t planes = x.shape[0] * x.shape[1];
    parallel_for(planes, plane_grain(oh * ow), [&](std::size_t p0, std::size_t p1) {
        for (std::size_t pl = p0; pl < p1; ++pl) {
            const T* in = X + static_cast<i64>(pl) * ih * iw;
            T* o = O + static_cast<i64>(pl) * oh * ow;
            for (i64 y = 0; y < oh; ++y) {
                const T* row = in + nearest_index(y, ih, oh) * iw;
                for (i64 xo = 0; xo < ow; ++xo) o[y * ow + xo] = row[xi[std::size_t(xo)]];
            }
        }
    });
}

}  // namespace

CpuTensor avg_pool(CpuTensor x, const PoolParams& p) {
    Shape out_shape;
    const Dims3 g = pool_geometry("avg_pool", x, p, false, out_shape);
    const DType dt = x.dtype;
    if (dt == DType::F16 || dt == DType::BF16)
        return cast(EMBER_CPU_ISA_NS::avg_pool(cast(std::move(x), DType::F32), p), dt);
    CpuTensor out = empty(out_shape, dt);
    if (out_shape.num_elements() == 0) return out;
    x = contiguous(std::move(x));
    by_float_type(dt, [&]<typename T>(TypeTag<T>) {
        avg_pool_impl<T>(x, g, window3(p), p.count_include_pad, out);
    });
    return out;
}

std::pair<CpuTensor, CpuTensor> max_pool_with_indices(CpuTensor x, const PoolParams& p) {
    Shape out_shape;
    const Dims3 g = pool_geometry("max_pool", x, p, true, out_shape);
    const DType dt = x.dtype;
    if (dt == DType::F16 || dt == DType::BF16) {
        auto [v, i] = EMBER_CPU_ISA_NS::max_pool_with_indices(cast(std::move(x), DType::F32), p);
        return {cast(std::move(v), dt), std::move(i)};
    }
    CpuTensor out = empty(out_shape, dt);
    CpuTensor idx = empty(out_shape, DType::I64);
    if (out_shape.num_elements() == 0) return {out, idx};
    x = contiguous(std::move(x));
    by_float_type(dt,
                  [&]<typename T>(TypeTag<T>) { max_pool_impl<T>(x, g, window3(p), out, idx); });
    return {out, idx};
}

CpuTensor adaptive_avg_pool(CpuTensor x, std::span<const std::size_t> output_size) {
    const Shape out_shape = check::adaptive_avg_pool(x, output_size);
    const std::size_t n = output_size.size();
    Dims3 g;
    for (std::size_t d = 0; d < n; ++d) {
        g.in[3 - n + d] = static_cast<i64>(x.shape[2 + d]);
        g.out[3 - n + d] = static_cast<i64>(output_size[d]);
    }
    const DType dt = x.dtype;
    if (dt == DType::F16 || dt == DType::BF16)
        return cast(
            EMBER_CPU_ISA_NS::adaptive_avg_pool(cast(std::move(x), DType::F32), output_size), dt);
    CpuTensor out = empty(out_shape, dt);
    if (out_shape.num_elements() == 0) return out;
    x = contiguous(std::move(x));
    by_float_type(dt, [&]<typename T>(TypeTag<T>) { adaptive_avg_impl<T>(x, g, out); });
    return out;
}

CpuTensor interpolate(CpuTensor x, std::span<const std::size_t> output_size,
                      const InterpolateOptions& o) {
    const Shape out_shape = check::interpolate(x, output_size, o);
    const std::size_t n = output_size.size();
    const i64 ih = n == 2 ? static_cast<i64>(x.shape[2]) : 1;
    const i64 iw = static_cast<i64>(x.shape[n + 1]);
    const i64 oh = n == 2 ? static_cast<i64>(output_size[0]) : 1;
    const i64 ow = static_cast<i64>(output_size[n - 1]);
    const DType dt = x.dtype;

    if (o.mode == InterpolateMode::Nearest) {
        CpuTensor out = empty(out_shape, dt);
        if (out_shape.num_elements() == 0) return out;
        x = contiguous(std::move(x));
        visit_dtype(dt, [&]<typename T>(TypeTag<T>) { nearest_impl<T>(x, ih, iw, oh, ow, out); });
        return out;
    }
    if (dt == DType::F16 || dt == DType::BF16)
        return cast(EMBER_CPU_ISA_NS::interpolate(cast(std::move(x), DType::F32), output_size, o),
                    dt);
    CpuTensor out = empty(out_shape, dt);
    if (out_shape.num_elements() == 0) return out;
    x = contiguous(std::move(x));
    by_float_type(dt, [&]<typename T>(TypeTag<T>) {
        if (o.mode == InterpolateMode::Bilinear) {
            separable_impl<T, 2>(x, ih, iw, oh, ow, linear_weights<T>(ih, oh, o.align_corners),
                                 linear_weights<T>(iw, ow, o.align_corners), out);
        } else {
            separable_impl<T, 4>(x, ih, iw, oh, ow, cubic_weights<T>(ih, oh, o.align_corners),
                                 cubic_weights<T>(iw, ow, o.align_corners), out);
        }
    });
    return out;
}

EMBER_CPU_ISA_END
}  // namespace ember::detail::cpu
