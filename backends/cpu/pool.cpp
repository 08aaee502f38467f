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

#include "kernels.hpp"
#include "parallel.hpp"

namespace ember::detail::cpu {
namespace {

using i64 = std::int64_t;

/// Spatial sizes in 3-d form (leading unit dims for 1-d and 2-d problems).
struct Dims3 {
    std::array<i64, 3> in{1, 1, 1}, out{1, 1, 1};
    i64 in_size() const { return in[0] * in[1] * in[2]; }
    i64 out_size() const { return out[0] * out[1] * out[2]; }
};

/// Grain (in planes) that gives each task about 64K elements of output.
std::size_t plane_grain(i64 plane_work) {
    return std::max<std::size_t>(1, std::size_t(65536 / std::max<i64>(plane_work, 1)));
}

/// Calls f(TypeTag<T>) for f32 or f64 after the caller has widened f16/bf16.
template <typename F>
void by_float_type(DType dt, F&& f) {
    if (dt == DType::F64)
        f(TypeTag<double>{});
    else
        f(TypeTag<float>{});
}

/// PyTorch's div_rtn: division rounding toward negative infinity.
i64 div_floor(i64 a, i64 b) {
    i64 q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
    return q;
}

/// PyTorch's pooling_output_shape.
i64 pool_out_size(i64 in, i64 k, i64 pad, i64 stride, i64 dil, bool ceil_mode) {
    i64 out =
        div_floor(in + 2 * pad - dil * (k - 1) - 1 + (ceil_mode ? stride - 1 : 0), stride) + 1;
    // The last window must start inside the input or the left padding.
    if (ceil_mode && (out - 1) * stride >= in + pad) --out;
    return out;
}

/// Validates a pooling problem and returns its sizes and output shape.
Dims3 pool_geometry(const char* base, const CpuTensor& x, const PoolParams& p, bool max_pool,
                    Shape& out_shape) {
    EMBER_CHECK(p.n >= 1 && p.n <= 3, Argument, base,
                ": 1, 2 or 3 spatial dims are supported, got ", p.n, " (input ", x.shape, ")");
    const std::string op = std::string(base) + std::to_string(p.n) + "d";
    EMBER_CHECK(x.shape.rank() == p.n + 2, Shape, op, ": input must have rank ", p.n + 2,
                " [N, C, spatial...], got ", x.shape);
    EMBER_CHECK(is_float(x.dtype), DType, op, ": needs a float input, got ", dtype_name(x.dtype),
                " ", x.shape);
    Dims3 g;
    out_shape = Shape{x.shape[0], x.shape[1]};
    for (std::size_t d = 0; d < p.n; ++d) {
        const std::size_t s = 3 - p.n + d;
        EMBER_CHECK(p.kernel[d] >= 1 && p.stride[d] >= 1 && p.dilation[d] >= 1, Argument, op,
                    ": kernel, stride and dilation must be >= 1 (input ", x.shape, ")");
        const i64 eff = static_cast<i64>((p.kernel[d] - 1) * (max_pool ? p.dilation[d] : 1) + 1);
        EMBER_CHECK(static_cast<i64>(p.padding[d]) * 2 <= eff, Argument, op, ": padding ",
                    p.padding[d], " must be at most half of the kernel size ", p.kernel[d],
                    " (input ", x.shape, ")");
        g.in[s] = static_cast<i64>(x.shape[2 + d]);
        g.out[s] = pool_out_size(g.in[s], static_cast<i64>(p.kernel[d]),
                                 static_cast<i64>(p.padding[d]), static_cast<i64>(p.stride[d]),
                                 max_pool ? static_cast<i64>(p.dilation[d]) : 1, p.ceil_mode);
        EMBER_CHECK(g.out[s] >= 1, Shape, op, ": kernel ", p.kernel[d], " (padding ", p.padding[d],
                    ") is larger than the input ", x.shape, " in spatial dim ", d);
        out_shape.push_back(static_cast<std::size_t>(g.out[s]));
    }
    return g;
}

/// The pooling parameters in 3-d form.
struct Window3 {
    std::array<i64, 3> k{1, 1, 1}, s{1, 1, 1}, pad{0, 0, 0}, dil{1, 1, 1};
};
Window3 window3(const PoolParams& p) {
    Window3 w;
    for (std::size_t d = 0; d < p.n; ++d) {
        const std::size_t s = 3 - p.n + d;
        w.k[s] = static_cast<i64>(p.kernel[d]);
        w.s[s] = static_cast<i64>(p.stride[d]);
        w.pad[s] = static_cast<i64>(p.padding[d]);
        w.dil[s] = static_cast<i64>(p.dilation[d]);
    }
    return w;
}

/// The windows of one axis, per output index: the clipped input range [lo, hi) and the
/// divisor factor (the window's extent over input and padding, or over input only).
struct AxisWindows {
    std::vector<i64> lo, hi, count;
};

/// Average pooling windows along one axis, as PyTorch's avg_pool kernels clip them.
AxisWindows avg_windows(i64 in, i64 out, i64 k, i64 s, i64 pad, bool count_include_pad) {
    AxisWindows w;
    for (i64 o = 0; o < out; ++o) {
        const i64 start = o * s - pad;
        const i64 end = std::min(start + k, in + pad);
        const i64 lo = std::max<i64>(start, 0), hi = std::min(end, in);
        w.lo.push_back(lo);
        w.hi.push_back(hi);
        w.count.push_back(count_include_pad ? end - start : hi - lo);
    }
    return w;
}

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

/// PyTorch's adaptive pooling window [start, end) of output cell i.
inline i64 adaptive_start(i64 i, i64 out, i64 in) {
    return (i / out) * in + ((i % out) * in) / out;
}
inline i64 adaptive_end(i64 i, i64 out, i64 in) {
    return 1 + ((i + 1) * in - 1) / out;
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

/// PyTorch's nearest_idx (legacy 'nearest'), computed in float as PyTorch does.
i64 nearest_index(i64 dst, i64 in, i64 out) {
    if (out == in) return dst;
    if (out == 2 * in) return dst >> 1;
    const float scale = static_cast<float>(in) / static_cast<float>(out);
    return std::min(static_cast<i64>(std::floor(static_cast<float>(dst) * scale)), in - 1);
}

/// PyTorch's area_pixel_compute_scale.
template <typename T>
T pixel_scale(i64 in, i64 out, bool align_corners) {
    if (align_corners) return out > 1 ? T(in - 1) / T(out - 1) : T(0);
    return T(in) / T(out);
}

/// PyTorch's area_pixel_compute_source_index.
template <typename T>
T source_index(T scale, i64 dst, bool align_corners, bool cubic) {
    if (align_corners) return scale * T(dst);
    const T src = scale * (T(dst) + T(0.5)) - T(0.5);
    return (!cubic && src < T(0)) ? T(0) : src;
}

/// Per output position along one axis, `Taps` source indices and their weights.
template <typename T, int Taps>
struct AxisWeights {
    std::vector<i64> idx;  ///< [output position * Taps + tap]
    std::vector<T> wt;     ///< same layout as idx
};

template <typename T>
AxisWeights<T, 2> linear_weights(i64 in, i64 out, bool align_corners) {
    AxisWeights<T, 2> a;
    a.idx.resize(std::size_t(2 * out));
    a.wt.resize(std::size_t(2 * out));
    const T scale = pixel_scale<T>(in, out, align_corners);
    for (i64 o = 0; o < out; ++o) {
        i64 i0 = o, i1 = o;
        T l1 = T(0);
        if (in != out) {
            const T real = source_index<T>(scale, o, align_corners, false);
            i0 = static_cast<i64>(real);
            i1 = i0 + (i0 < in - 1 ? 1 : 0);
            l1 = std::clamp(real - T(i0), T(0), T(1));
        }
        a.idx[std::size_t(2 * o)] = i0;
        a.idx[std::size_t(2 * o + 1)] = i1;
        a.wt[std::size_t(2 * o)] = T(1) - l1;
        a.wt[std::size_t(2 * o + 1)] = l1;
    }
    return a;
}

template <typename T>
AxisWeights<T, 4> cubic_weights(i64 in, i64 out, bool align_corners) {
    AxisWeights<T, 4> a;
    a.idx.resize(std::size_t(4 * out));
    a.wt.resize(std::size_t(4 * out));
    const T scale = pixel_scale<T>(in, out, align_corners);
    constexpr T A = T(-0.75);
    auto conv1 = [](T x) { return ((A + 2) * x - (A + 3)) * x * x + 1; };
    auto conv2 = [](T x) { return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A; };
    for (i64 o = 0; o < out; ++o) {
        const T real = source_index<T>(scale, o, align_corners, true);
        const i64 i = std::min(static_cast<i64>(std::floor(real)), in - 1);
        const T t = std::clamp(real - T(i), T(0), T(1));
        const T w[4] = {conv2(t + 1), conv1(t), conv1(1 - t), conv2(2 - t)};
        for (int j = 0; j < 4; ++j) {
            // Taps past the border read the border sample.
            a.idx[std::size_t(4 * o + j)] = std::clamp<i64>(i - 1 + j, 0, in - 1);
            a.wt[std::size_t(4 * o + j)] = w[j];
        }
    }
    return a;
}

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
        return cast(avg_pool(cast(std::move(x), DType::F32), p), dt);
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
        auto [v, i] = max_pool_with_indices(cast(std::move(x), DType::F32), p);
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
    const std::size_t n = output_size.size();
    EMBER_CHECK(n >= 1 && n <= 3, Argument,
                "adaptive_avg_pool: 1, 2 or 3 output dims are supported, got ", n, " (input ",
                x.shape, ")");
    const std::string op = "adaptive_avg_pool" + std::to_string(n) + "d";
    const Shape os(output_size);
    EMBER_CHECK(x.shape.rank() == n + 2, Shape, op, ": input must have rank ", n + 2,
                " [N, C, spatial...], got ", x.shape, " for output size ", os);
    EMBER_CHECK(is_float(x.dtype), DType, op, ": needs a float input, got ", dtype_name(x.dtype),
                " ", x.shape);
    Dims3 g;
    Shape out_shape{x.shape[0], x.shape[1]};
    for (std::size_t d = 0; d < n; ++d) {
        const std::size_t s = 3 - n + d;
        EMBER_CHECK(x.shape[2 + d] >= 1 || output_size[d] == 0, Shape, op,
                    ": input spatial dims must be non-empty, got ", x.shape);
        g.in[s] = static_cast<i64>(x.shape[2 + d]);
        g.out[s] = static_cast<i64>(output_size[d]);
        out_shape.push_back(output_size[d]);
    }
    const DType dt = x.dtype;
    if (dt == DType::F16 || dt == DType::BF16)
        return cast(adaptive_avg_pool(cast(std::move(x), DType::F32), output_size), dt);
    CpuTensor out = empty(out_shape, dt);
    if (out_shape.num_elements() == 0) return out;
    x = contiguous(std::move(x));
    by_float_type(dt, [&]<typename T>(TypeTag<T>) { adaptive_avg_impl<T>(x, g, out); });
    return out;
}

CpuTensor interpolate(CpuTensor x, std::span<const std::size_t> output_size,
                      const InterpolateOptions& o) {
    const std::size_t n = output_size.size();
    const Shape os(output_size);
    EMBER_CHECK(n == 1 || n == 2, Argument,
                "interpolate: output size must have 1 ([N, C, L] input) or 2 ([N, C, H, W]) dims, "
                "got ",
                os, " for input ", x.shape);
    EMBER_CHECK(x.shape.rank() == n + 2, Shape, "interpolate: input must have rank ", n + 2,
                " for output size ", os, ", got ", x.shape);
    const i64 ih = n == 2 ? static_cast<i64>(x.shape[2]) : 1;
    const i64 iw = static_cast<i64>(x.shape[n + 1]);
    const i64 oh = n == 2 ? static_cast<i64>(output_size[0]) : 1;
    const i64 ow = static_cast<i64>(output_size[n - 1]);
    EMBER_CHECK(oh >= 1 && ow >= 1, Argument, "interpolate: output size must be positive, got ", os,
                " for input ", x.shape);
    EMBER_CHECK(ih >= 1 && iw >= 1, Shape,
                "interpolate: input spatial dims must be non-empty, got ", x.shape);
    Shape out_shape{x.shape[0], x.shape[1]};
    for (std::size_t d = 0; d < n; ++d) out_shape.push_back(output_size[d]);
    const DType dt = x.dtype;

    if (o.mode == InterpolateMode::Nearest) {
        EMBER_CHECK(dt != DType::Bool, DType, "interpolate: bool input ", x.shape,
                    " is not supported");
        CpuTensor out = empty(out_shape, dt);
        if (out_shape.num_elements() == 0) return out;
        x = contiguous(std::move(x));
        visit_dtype(dt, [&]<typename T>(TypeTag<T>) { nearest_impl<T>(x, ih, iw, oh, ow, out); });
        return out;
    }
    EMBER_CHECK(is_float(dt), DType,
                "interpolate: ", o.mode == InterpolateMode::Bilinear ? "bilinear" : "bicubic",
                " mode needs a float input, got ", dtype_name(dt), " ", x.shape);
    if (dt == DType::F16 || dt == DType::BF16)
        return cast(interpolate(cast(std::move(x), DType::F32), output_size, o), dt);
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

}  // namespace ember::detail::cpu
