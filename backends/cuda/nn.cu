// Module kernels: im2col/col2im for convolutions (the GEMMs run in cuBLAS), pooling with
// PyTorch's window rules, adaptive pooling, interpolation (nearest, bilinear, bicubic) with
// their gradients, torchvision's deformable im2col and its gradients, and the int64 matmul.
// Every spatial problem is handled in 3-d form with leading unit dims.
#include <cmath>
#include <cstdint>

#include "device.cuh"

namespace ember::detail::cuda {
namespace {

using i64 = std::int64_t;

__device__ __forceinline__ void atomic_add(float* p, float v) {
    atomicAdd(p, v);
}
__device__ __forceinline__ void atomic_add(double* p, double v) {
    atomicAdd(p, v);
}

/// im2col, one thread per (channel, image, output position) writing its K taps: the index
/// arithmetic is done once per position, not once per tap, in the narrowest integer type `I`
/// that holds every index (64-bit division costs several times 32-bit's), and for each tap the
/// warp's writes and reads are consecutive in the output position.
template <typename T, typename I>
__global__ void im2col_kernel(ConvGeom g, const T* x, T* col) {
    const I out1 = I(g.out[1]), out2 = I(g.out[2]);
    const I L = I(g.out[0]) * out1 * out2, B = I(g.batch), C = I(g.channels);
    const I in0 = I(g.in[0]), in1 = I(g.in[1]), in2 = I(g.in[2]);
    const I k0n = I(g.k[0]), k1n = I(g.k[1]), k2n = I(g.k[2]);
    const I tap_stride = B * L;  // from one tap's rows of col to the next's
    const I n = C * B * L;
    for (I i = I(blockIdx.x) * I(blockDim.x) + I(threadIdx.x); i < n;
         i += I(blockDim.x) * I(gridDim.x)) {
        const I o = i % L, r = i / L;
        const I b = r % B, c = r / B;
        const I o2 = o % out2, o1 = (o / out2) % out1, o0 = o / (out2 * out1);
        const I base0 = o0 * I(g.stride[0]) - I(g.pad[0]);
        const I base1 = o1 * I(g.stride[1]) - I(g.pad[1]);
        const I base2 = o2 * I(g.stride[2]) - I(g.pad[2]);
        const T* xp = x + (b * C + c) * in0 * in1 * in2;
        T* cp = col + (c * k0n * k1n * k2n * B + b) * L + o;
        for (I k0 = 0; k0 < k0n; ++k0) {
            const I p0 = base0 + k0 * I(g.dil[0]);
            const bool ok0 = p0 >= 0 && p0 < in0;
            for (I k1 = 0; k1 < k1n; ++k1) {
                const I p1 = base1 + k1 * I(g.dil[1]);
                const bool ok1 = ok0 && p1 >= 0 && p1 < in1;
                for (I k2 = 0; k2 < k2n; ++k2) {
                    const I p2 = base2 + k2 * I(g.dil[2]);
                    *cp = ok1 && p2 >= 0 && p2 < in2 ? xp[(p0 * in1 + p1) * in2 + p2] : T(0);
                    cp += tap_stride;
                }
            }
        }
    }
}

/// Each input element sums the column entries whose tap lands on it (no atomics), in index
/// type `I` as im2col.
template <typename T, typename I>
__global__ void col2im_kernel(ConvGeom g, const T* col, T* x) {
    const I L = I(g.out[0]) * I(g.out[1]) * I(g.out[2]);
    const I in0 = I(g.in[0]), in1 = I(g.in[1]), in2 = I(g.in[2]);
    const I C = I(g.channels), B = I(g.batch);
    const I k0n = I(g.k[0]), k1n = I(g.k[1]), k2n = I(g.k[2]);
    const I s0 = I(g.stride[0]), s1 = I(g.stride[1]), s2 = I(g.stride[2]);
    const I n = B * C * in0 * in1 * in2;
    for (I i = I(blockIdx.x) * I(blockDim.x) + I(threadIdx.x); i < n;
         i += I(blockDim.x) * I(gridDim.x)) {
        I r = i;
        const I p2 = r % in2;
        r /= in2;
        const I p1 = r % in1;
        r /= in1;
        const I p0 = r % in0;
        r /= in0;
        const I c = r % C;
        const I b = r / C;
        const T* cb = col + (c * k0n * k1n * k2n * B + b) * L;
        T sum = T(0);
        for (I k0 = 0; k0 < k0n; ++k0) {
            const I q0 = p0 + I(g.pad[0]) - k0 * I(g.dil[0]);
            if (q0 < 0 || q0 % s0 != 0 || q0 / s0 >= I(g.out[0])) continue;
            for (I k1 = 0; k1 < k1n; ++k1) {
                const I q1 = p1 + I(g.pad[1]) - k1 * I(g.dil[1]);
                if (q1 < 0 || q1 % s1 != 0 || q1 / s1 >= I(g.out[1])) continue;
                for (I k2 = 0; k2 < k2n; ++k2) {
                    const I q2 = p2 + I(g.pad[2]) - k2 * I(g.dil[2]);
                    if (q2 < 0 || q2 % s2 != 0 || q2 / s2 >= I(g.out[2])) continue;
                    const I kk = (k0 * k1n + k1) * k2n + k2;
                    const I o = ((q0 / s0) * I(g.out[1]) + q1 / s1) * I(g.out[2]) + q2 / s2;
                    sum += cb[kk * B * L + o];
                }
            }
        }
        x[i] = sum;
    }
}

/// Splits an output index of a pooling problem into (plane, o0, o1, o2).
__device__ __forceinline__ void split_out(const PoolGeom& g, i64 i, i64& q, i64* o) {
    o[2] = i % g.out[2];
    i /= g.out[2];
    o[1] = i % g.out[1];
    i /= g.out[1];
    o[0] = i % g.out[0];
    q = i / g.out[0];
}

template <typename T>
__global__ void max_pool_kernel(PoolGeom g, const T* x, T* out, i64* idx) {
    const i64 n = g.planes * g.out[0] * g.out[1] * g.out[2];
    EMBER_GRID_LOOP(i, n) {
        i64 q, o[3];
        split_out(g, i, q, o);
        i64 lo[3], hi[3];
        for (int d = 0; d < 3; ++d) {
            i64 start = o[d] * g.stride[d] - g.pad[d];
            hi[d] = min(start + (g.k[d] - 1) * g.dil[d] + 1, g.in[d]);
            while (start < 0) start += g.dil[d];
            lo[d] = start;
        }
        const T* plane = x + q * g.in[0] * g.in[1] * g.in[2];
        T best = -INFINITY;
        i64 at = (lo[0] * g.in[1] + lo[1]) * g.in[2] + lo[2];
        for (i64 a = lo[0]; a < hi[0]; a += g.dil[0])
            for (i64 b = lo[1]; b < hi[1]; b += g.dil[1])
                for (i64 c = lo[2]; c < hi[2]; c += g.dil[2]) {
                    const i64 p = (a * g.in[1] + b) * g.in[2] + c;
                    const T v = plane[p];
                    if (v > best || v != v) {  // NaN wins and stays (PyTorch)
                        best = v;
                        at = p;
                        if (v != v) goto done;
                    }
                }
    done:
        out[i] = best;
        if (idx) idx[i] = at;
    }
}

/// Average pooling windows along one axis, clipped as PyTorch's avg_pool kernels do.
__device__ __forceinline__ void avg_window(const PoolGeom& g, int d, i64 o, i64& lo, i64& hi,
                                           i64& count) {
    const i64 start = o * g.stride[d] - g.pad[d];
    const i64 end = min(start + g.k[d], g.in[d] + g.pad[d]);
    lo = max(start, i64(0));
    hi = min(end, g.in[d]);
    count = g.count_include_pad ? end - start : hi - lo;
}

template <typename T>
__global__ void avg_pool_kernel(PoolGeom g, const T* x, T* out) {
    const i64 n = g.planes * g.out[0] * g.out[1] * g.out[2];
    EMBER_GRID_LOOP(i, n) {
        i64 q, o[3], lo[3], hi[3], cnt[3];
        split_out(g, i, q, o);
        for (int d = 0; d < 3; ++d) avg_window(g, d, o[d], lo[d], hi[d], cnt[d]);
        if (lo[0] >= hi[0] || lo[1] >= hi[1] || lo[2] >= hi[2]) {
            out[i] = T(0);  // a window entirely in the padding (ceil_mode), as PyTorch
            continue;
        }
        const T* plane = x + q * g.in[0] * g.in[1] * g.in[2];
        T sum = T(0);
        for (i64 a = lo[0]; a < hi[0]; ++a)
            for (i64 b = lo[1]; b < hi[1]; ++b)
                for (i64 c = lo[2]; c < hi[2]; ++c) sum += plane[(a * g.in[1] + b) * g.in[2] + c];
        out[i] = sum / T(cnt[0] * cnt[1] * cnt[2]);
    }
}

template <typename T>
__global__ void avg_pool_backward_kernel(PoolGeom g, const T* grad, T* dx) {
    const i64 n = g.planes * g.out[0] * g.out[1] * g.out[2];
    EMBER_GRID_LOOP(i, n) {
        i64 q, o[3], lo[3], hi[3], cnt[3];
        split_out(g, i, q, o);
        for (int d = 0; d < 3; ++d) avg_window(g, d, o[d], lo[d], hi[d], cnt[d]);
        T* plane = dx + q * g.in[0] * g.in[1] * g.in[2];
        const T v = grad[i] / T(cnt[0] * cnt[1] * cnt[2]);
        for (i64 a = lo[0]; a < hi[0]; ++a)
            for (i64 b = lo[1]; b < hi[1]; ++b)
                for (i64 c = lo[2]; c < hi[2]; ++c)
                    atomic_add(plane + (a * g.in[1] + b) * g.in[2] + c, v);
    }
}

__device__ __forceinline__ i64 adaptive_start(i64 i, i64 out, i64 in) {
    return (i / out) * in + ((i % out) * in) / out;
}
__device__ __forceinline__ i64 adaptive_end(i64 i, i64 out, i64 in) {
    return 1 + ((i + 1) * in - 1) / out;
}

template <typename T>
__global__ void adaptive_kernel(PoolGeom g, const T* in, T* out, bool backward) {
    const i64 n = g.planes * g.out[0] * g.out[1] * g.out[2];
    EMBER_GRID_LOOP(i, n) {
        i64 q, o[3], lo[3], hi[3];
        split_out(g, i, q, o);
        for (int d = 0; d < 3; ++d) {
            lo[d] = adaptive_start(o[d], g.out[d], g.in[d]);
            hi[d] = adaptive_end(o[d], g.out[d], g.in[d]);
        }
        const i64 count = (hi[0] - lo[0]) * (hi[1] - lo[1]) * (hi[2] - lo[2]);
        const i64 base = q * g.in[0] * g.in[1] * g.in[2];
        if (backward) {
            const T v = in[i] / T(count);
            for (i64 a = lo[0]; a < hi[0]; ++a)
                for (i64 b = lo[1]; b < hi[1]; ++b)
                    for (i64 c = lo[2]; c < hi[2]; ++c)
                        atomic_add(out + base + (a * g.in[1] + b) * g.in[2] + c, v);
        } else {
            T sum = T(0);
            for (i64 a = lo[0]; a < hi[0]; ++a)
                for (i64 b = lo[1]; b < hi[1]; ++b)
                    for (i64 c = lo[2]; c < hi[2]; ++c)
                        sum += in[base + (a * g.in[1] + b) * g.in[2] + c];
            out[i] = sum / T(count);
        }
    }
}

/// Source taps and weights of output position o along one axis (PyTorch's rules).
template <typename T>
__device__ int taps(InterpolateMode mode, bool align, i64 in, i64 out, i64 o, i64* idx, T* wt) {
    if (mode == InterpolateMode::Nearest) {
        i64 i;
        if (out == in)
            i = o;
        else if (out == 2 * in)
            i = o >> 1;
        else {
            const float scale = static_cast<float>(in) / static_cast<float>(out);
            i = min(static_cast<i64>(floorf(static_cast<float>(o) * scale)), in - 1);
        }
        idx[0] = i;
        wt[0] = T(1);
        return 1;
    }
    const bool cubic = mode == InterpolateMode::Bicubic;
    T scale = align ? (out > 1 ? T(in - 1) / T(out - 1) : T(0)) : T(in) / T(out);
    T real;
    if (align)
        real = scale * T(o);
    else {
        real = scale * (T(o) + T(0.5)) - T(0.5);
        if (!cubic && real < T(0)) real = T(0);
    }
    if (!cubic) {
        i64 i0 = o, i1 = o;
        T l1 = T(0);
        if (in != out) {
            i0 = static_cast<i64>(real);
            i1 = i0 + (i0 < in - 1 ? 1 : 0);
            l1 = min(max(real - T(i0), T(0)), T(1));
        }
        idx[0] = i0;
        idx[1] = i1;
        wt[0] = T(1) - l1;
        wt[1] = l1;
        return 2;
    }
    const T A = T(-0.75);
    const i64 i = min(static_cast<i64>(floor(real)), in - 1);
    const T t = min(max(real - T(i), T(0)), T(1));
    auto conv1 = [A](T x) { return ((A + 2) * x - (A + 3)) * x * x + 1; };
    auto conv2 = [A](T x) { return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A; };
    wt[0] = conv2(t + 1);
    wt[1] = conv1(t);
    wt[2] = conv1(1 - t);
    wt[3] = conv2(2 - t);
    for (int j = 0; j < 4; ++j) idx[j] = min(max(i - 1 + j, i64(0)), in - 1);
    return 4;
}

template <typename T>
__global__ void interpolate_kernel(InterpolateMode mode, bool align, i64 planes, i64 ih, i64 iw,
                                   i64 oh, i64 ow, const T* in, T* out, bool backward) {
    const i64 n = planes * oh * ow;
    EMBER_GRID_LOOP(i, n) {
        const i64 x = i % ow, y = (i / ow) % oh, q = i / (ow * oh);
        i64 iy[4], ix[4];
        T wy[4], wx[4];
        const int ny = taps<T>(mode, align, ih, oh, y, iy, wy);
        const int nx = taps<T>(mode, align, iw, ow, x, ix, wx);
        if (backward) {
            T* plane = out + q * ih * iw;
            const T g = in[i];
            for (int a = 0; a < ny; ++a)
                for (int b = 0; b < nx; ++b)
                    atomic_add(plane + iy[a] * iw + ix[b], g * wy[a] * wx[b]);
        } else {
            const T* plane = in + q * ih * iw;
            T sum = T(0);
            for (int a = 0; a < ny; ++a) {
                T row = T(0);
                for (int b = 0; b < nx; ++b) row += wx[b] * plane[iy[a] * iw + ix[b]];
                sum += wy[a] * row;
            }
            out[i] = sum;
        }
    }
}

// ---- deformable convolution (torchvision's kernels) ----------------------------------------
template <typename T>
__device__ T bilinear(const T* im, i64 h, i64 w, T y, T x) {
    if (y <= -1 || y >= h || x <= -1 || x >= w) return T(0);
    const i64 yl = static_cast<i64>(floor(y)), xl = static_cast<i64>(floor(x));
    const i64 yh = yl + 1, xh = xl + 1;
    const T ly = y - T(yl), lx = x - T(xl), hy = T(1) - ly, hx = T(1) - lx;
    const T v1 = (yl >= 0 && xl >= 0) ? im[yl * w + xl] : T(0);
    const T v2 = (yl >= 0 && xh <= w - 1) ? im[yl * w + xh] : T(0);
    const T v3 = (yh <= h - 1 && xl >= 0) ? im[yh * w + xl] : T(0);
    const T v4 = (yh <= h - 1 && xh <= w - 1) ? im[yh * w + xh] : T(0);
    return hy * hx * v1 + hy * lx * v2 + ly * hx * v3 + ly * lx * v4;
}

/// d bilinear / d y (is_y) or d x.
template <typename T>
__device__ T coord_weight(const T* im, i64 h, i64 w, T y, T x, bool is_y) {
    if (y <= -1 || y >= h || x <= -1 || x >= w) return T(0);
    const i64 yl = static_cast<i64>(floor(y)), xl = static_cast<i64>(floor(x));
    const i64 yh = yl + 1, xh = xl + 1;
    const T vll = (yl >= 0 && xl >= 0) ? im[yl * w + xl] : T(0);
    const T vlh = (yl >= 0 && xh <= w - 1) ? im[yl * w + xh] : T(0);
    const T vhl = (yh <= h - 1 && xl >= 0) ? im[yh * w + xl] : T(0);
    const T vhh = (yh <= h - 1 && xh <= w - 1) ? im[yh * w + xh] : T(0);
    if (is_y) {
        const T dx = x - T(xl);
        return dx * (vhh - vlh) + (T(1) - dx) * (vhl - vll);
    }
    const T dy = y - T(yl);
    return dy * (vhh - vhl) + (T(1) - dy) * (vlh - vll);
}

/// The sampling point of tap (i, j) at output (oy, ox) of image b, offset group og.
template <typename T>
__device__ void deform_point(const DeformGeom& g, const T* offset, const T* mask, i64 b, i64 og,
                             i64 i, i64 j, i64 oy, i64 ox, T& y, T& x, T& m) {
    const i64 K = g.kh * g.kw, plane = g.oh * g.ow, pos = oy * g.ow + ox;
    const T* off = offset + (b * g.offset_groups * 2 * K + og * 2 * K) * plane;
    const i64 t = i * g.kw + j;
    y = T(oy * g.sh - g.ph + i * g.dh) + off[(2 * t) * plane + pos];
    x = T(ox * g.sw - g.pw + j * g.dw) + off[(2 * t + 1) * plane + pos];
    m = mask ? mask[((b * g.offset_groups + og) * K + t) * plane + pos] : T(1);
}

template <typename T>
__global__ void deform_im2col_kernel(DeformGeom g, const T* x, const T* offset, const T* mask,
                                     T* col) {
    const i64 L = g.oh * g.ow, K = g.kh * g.kw;
    const i64 n = g.channels * K * g.batch * L;
    EMBER_GRID_LOOP(idx, n) {
        i64 r = idx;
        const i64 pos = r % L;
        r /= L;
        const i64 b = r % g.batch;
        r /= g.batch;
        const i64 t = r % K;
        const i64 c = r / K;
        const i64 og = c / (g.channels / g.offset_groups);
        T y, xx, m;
        deform_point(g, offset, mask, b, og, t / g.kw, t % g.kw, pos / g.ow, pos % g.ow, y, xx, m);
        col[idx] = m * bilinear(x + (b * g.channels + c) * g.h * g.w, g.h, g.w, y, xx);
    }
}

template <typename T>
__global__ void deform_dx_kernel(DeformGeom g, const T* offset, const T* mask, const T* dcol,
                                 T* dx) {
    const i64 L = g.oh * g.ow, K = g.kh * g.kw;
    const i64 n = g.channels * K * g.batch * L;
    EMBER_GRID_LOOP(idx, n) {
        i64 r = idx;
        const i64 pos = r % L;
        r /= L;
        const i64 b = r % g.batch;
        r /= g.batch;
        const i64 t = r % K;
        const i64 c = r / K;
        const i64 og = c / (g.channels / g.offset_groups);
        T y, x, m;
        deform_point(g, offset, mask, b, og, t / g.kw, t % g.kw, pos / g.ow, pos % g.ow, y, x, m);
        if (y <= -1 || y >= g.h || x <= -1 || x >= g.w) continue;
        const T v = dcol[idx] * m;
        const i64 yl = static_cast<i64>(floor(y)), xl = static_cast<i64>(floor(x));
        T* plane = dx + (b * g.channels + c) * g.h * g.w;
        for (i64 yy = yl; yy <= yl + 1; ++yy)
            for (i64 xx = xl; xx <= xl + 1; ++xx) {
                if (yy < 0 || yy >= g.h || xx < 0 || xx >= g.w) continue;
                const T wgt = (T(1) - fabs(y - T(yy))) * (T(1) - fabs(x - T(xx)));
                atomic_add(plane + yy * g.w + xx, v * wgt);
            }
    }
}

/// One thread per (b, offset group, tap, output position): sums over the group's channels.
template <typename T>
__global__ void deform_doffset_kernel(DeformGeom g, const T* x, const T* offset, const T* mask,
                                      const T* dcol, T* doffset, T* dmask) {
    const i64 L = g.oh * g.ow, K = g.kh * g.kw;
    const i64 n = g.batch * g.offset_groups * K * L;
    const i64 cpg = g.channels / g.offset_groups;
    EMBER_GRID_LOOP(idx, n) {
        i64 r = idx;
        const i64 pos = r % L;
        r /= L;
        const i64 t = r % K;
        r /= K;
        const i64 og = r % g.offset_groups;
        const i64 b = r / g.offset_groups;
        T y, xx, m;
        deform_point(g, offset, mask, b, og, t / g.kw, t % g.kw, pos / g.ow, pos % g.ow, y, xx, m);
        T gy = T(0), gx = T(0), gm = T(0);
        for (i64 c = og * cpg; c < (og + 1) * cpg; ++c) {
            const T d = dcol[((c * K + t) * g.batch + b) * L + pos];
            const T* im = x + (b * g.channels + c) * g.h * g.w;
            gy += d * m * coord_weight(im, g.h, g.w, y, xx, true);
            gx += d * m * coord_weight(im, g.h, g.w, y, xx, false);
            gm += d * bilinear(im, g.h, g.w, y, xx);
        }
        T* off = doffset + (b * g.offset_groups * 2 * K + og * 2 * K) * L;
        off[(2 * t) * L + pos] = gy;
        off[(2 * t + 1) * L + pos] = gx;
        if (dmask) dmask[((b * g.offset_groups + og) * K + t) * L + pos] = gm;
    }
}

__global__ void int_matmul_kernel(i64 batch, i64 m, i64 n, i64 k, const i64* a, i64 sa,
                                  const i64* b, i64 sb, i64* c) {
    EMBER_GRID_LOOP(i, batch * m * n) {
        const i64 j = i % n, r = (i / n) % m, q = i / (m * n);
        const i64* ar = a + q * sa + r * k;
        const i64* bc = b + q * sb + j;
        std::uint64_t acc = 0;  // wraps, as the CPU's integer matmul
        for (i64 t = 0; t < k; ++t)
            acc += static_cast<std::uint64_t>(ar[t]) * static_cast<std::uint64_t>(bc[t * n]);
        c[i] = static_cast<i64>(acc);
    }
}

template <typename F>
void visit_float(DType cd, F&& f) {
    if (cd == DType::F64)
        f(double{});
    else
        f(float{});
}

}  // namespace

/// Whether every index of a convolution's col and x fits int32 (the kernels' fast path).
static bool fits_int32(const ConvGeom& g) {
    const i64 col =
        g.channels * g.k[0] * g.k[1] * g.k[2] * g.batch * g.out[0] * g.out[1] * g.out[2];
    const i64 x = g.batch * g.channels * g.in[0] * g.in[1] * g.in[2];
    return col < INT32_MAX && x < INT32_MAX;
}

void launch_im2col(DType cd, const ConvGeom& g, const void* x, void* col, cudaStream_t s) {
    const i64 n = g.channels * g.batch * g.out[0] * g.out[1] * g.out[2];  // one thread a position
    if (n == 0 || g.k[0] * g.k[1] * g.k[2] == 0) return;
    visit_float(cd, [&]<typename T>(T) {
        if (fits_int32(g))
            im2col_kernel<T, int><<<blocks_for(n), kThreads, 0, s>>>(g, static_cast<const T*>(x),
                                                                     static_cast<T*>(col));
        else
            im2col_kernel<T, i64><<<blocks_for(n), kThreads, 0, s>>>(g, static_cast<const T*>(x),
                                                                     static_cast<T*>(col));
    });
    check_launch("im2col");
}

namespace {
template <typename T>
__global__ void sum_partials_kernel(const T* parts, i64 splits, i64 m, i64 n, T* c, i64 ldc,
                                    T beta) {
    const i64 mn = m * n;
    for (i64 j = blockIdx.x * i64(blockDim.x) + threadIdx.x; j < mn;
         j += i64(gridDim.x) * blockDim.x) {
        T acc = 0;
        for (i64 s = 0; s < splits; ++s) acc += parts[s * mn + j];
        T* out = c + (j / n) * ldc + j % n;
        *out = beta == T(0) ? acc : acc + beta * *out;
    }
}
}  // namespace

void launch_sum_partials(DType dt, const void* parts, std::int64_t splits, std::int64_t m,
                         std::int64_t n, void* c, std::int64_t ldc, double beta, cudaStream_t s) {
    const i64 mn = m * n;
    if (mn == 0) return;
    visit_float(dt, [&]<typename T>(T) {
        sum_partials_kernel<T><<<blocks_for(mn), kThreads, 0, s>>>(static_cast<const T*>(parts),
                                                                   splits, m, n, static_cast<T*>(c),
                                                                   ldc, static_cast<T>(beta));
    });
    check_launch("sum_partials");
}

void launch_col2im(DType cd, const ConvGeom& g, const void* col, void* x, cudaStream_t s) {
    const i64 n = g.batch * g.channels * g.in[0] * g.in[1] * g.in[2];
    if (n == 0) return;
    visit_float(cd, [&]<typename T>(T) {
        if (fits_int32(g))
            col2im_kernel<T, int><<<blocks_for(n), kThreads, 0, s>>>(g, static_cast<const T*>(col),
                                                                     static_cast<T*>(x));
        else
            col2im_kernel<T, i64><<<blocks_for(n), kThreads, 0, s>>>(g, static_cast<const T*>(col),
                                                                     static_cast<T*>(x));
    });
    check_launch("col2im");
}

void launch_max_pool(DType cd, const PoolGeom& g, const void* x, void* out, std::int64_t* idx,
                     cudaStream_t s) {
    const i64 n = g.planes * g.out[0] * g.out[1] * g.out[2];
    if (n == 0) return;
    visit_float(cd, [&]<typename T>(T) {
        max_pool_kernel<<<blocks_for(n), kThreads, 0, s>>>(g, static_cast<const T*>(x),
                                                           static_cast<T*>(out), idx);
    });
    check_launch("max_pool");
}

void launch_avg_pool(DType cd, const PoolGeom& g, const void* x, void* out, cudaStream_t s) {
    const i64 n = g.planes * g.out[0] * g.out[1] * g.out[2];
    if (n == 0) return;
    visit_float(cd, [&]<typename T>(T) {
        avg_pool_kernel<<<blocks_for(n), kThreads, 0, s>>>(g, static_cast<const T*>(x),
                                                           static_cast<T*>(out));
    });
    check_launch("avg_pool");
}

void launch_avg_pool_backward(DType cd, const PoolGeom& g, const void* grad, void* dx,
                              cudaStream_t s) {
    const i64 nin = g.planes * g.in[0] * g.in[1] * g.in[2];
    check(cudaMemsetAsync(dx, 0, static_cast<std::size_t>(nin) * (cd == DType::F64 ? 8 : 4), s),
          "cudaMemsetAsync");
    const i64 n = g.planes * g.out[0] * g.out[1] * g.out[2];
    if (n == 0) return;
    visit_float(cd, [&]<typename T>(T) {
        avg_pool_backward_kernel<<<blocks_for(n), kThreads, 0, s>>>(g, static_cast<const T*>(grad),
                                                                    static_cast<T*>(dx));
    });
    check_launch("avg_pool_backward");
}

void launch_adaptive_avg_pool(DType cd, const PoolGeom& g, const void* in, void* out, bool backward,
                              cudaStream_t s) {
    if (backward) {
        const i64 nin = g.planes * g.in[0] * g.in[1] * g.in[2];
        check(
            cudaMemsetAsync(out, 0, static_cast<std::size_t>(nin) * (cd == DType::F64 ? 8 : 4), s),
            "cudaMemsetAsync");
    }
    const i64 n = g.planes * g.out[0] * g.out[1] * g.out[2];
    if (n == 0) return;
    visit_float(cd, [&]<typename T>(T) {
        adaptive_kernel<<<blocks_for(n), kThreads, 0, s>>>(g, static_cast<const T*>(in),
                                                           static_cast<T*>(out), backward);
    });
    check_launch("adaptive_avg_pool");
}

void launch_interpolate(DType cd, InterpolateMode mode, bool align_corners, std::int64_t planes,
                        std::int64_t ih, std::int64_t iw, std::int64_t oh, std::int64_t ow,
                        const void* in, void* out, bool backward, cudaStream_t s) {
    if (backward)
        check(
            cudaMemsetAsync(
                out, 0, static_cast<std::size_t>(planes * ih * iw) * (cd == DType::F64 ? 8 : 4), s),
            "cudaMemsetAsync");
    const i64 n = planes * oh * ow;
    if (n == 0) return;
    visit_float(cd, [&]<typename T>(T) {
        interpolate_kernel<<<blocks_for(n), kThreads, 0, s>>>(mode, align_corners, planes, ih, iw,
                                                              oh, ow, static_cast<const T*>(in),
                                                              static_cast<T*>(out), backward);
    });
    check_launch("interpolate");
}

void launch_deform_im2col(DType cd, const DeformGeom& g, const void* x, const void* offset,
                          const void* mask, void* col, cudaStream_t s) {
    const i64 n = g.channels * g.kh * g.kw * g.batch * g.oh * g.ow;
    if (n == 0) return;
    visit_float(cd, [&]<typename T>(T) {
        deform_im2col_kernel<<<blocks_for(n), kThreads, 0, s>>>(
            g, static_cast<const T*>(x), static_cast<const T*>(offset), static_cast<const T*>(mask),
            static_cast<T*>(col));
    });
    check_launch("deform_im2col");
}

void launch_deform_col2im(DType cd, const DeformGeom& g, const void* x, const void* offset,
                          const void* mask, const void* dcol, void* dx, void* doffset, void* dmask,
                          cudaStream_t s) {
    const std::size_t es = cd == DType::F64 ? 8 : 4;
    check(
        cudaMemsetAsync(dx, 0, static_cast<std::size_t>(g.batch * g.channels * g.h * g.w) * es, s),
        "cudaMemsetAsync");
    const i64 n = g.channels * g.kh * g.kw * g.batch * g.oh * g.ow;
    const i64 n2 = g.batch * g.offset_groups * g.kh * g.kw * g.oh * g.ow;
    if (n == 0) return;
    visit_float(cd, [&]<typename T>(T) {
        deform_dx_kernel<<<blocks_for(n), kThreads, 0, s>>>(
            g, static_cast<const T*>(offset), static_cast<const T*>(mask),
            static_cast<const T*>(dcol), static_cast<T*>(dx));
        deform_doffset_kernel<<<blocks_for(n2), kThreads, 0, s>>>(
            g, static_cast<const T*>(x), static_cast<const T*>(offset), static_cast<const T*>(mask),
            static_cast<const T*>(dcol), static_cast<T*>(doffset), static_cast<T*>(dmask));
    });
    check_launch("deform_col2im");
}

void launch_int_matmul(std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k,
                       const std::int64_t* a, std::int64_t sa, const std::int64_t* b,
                       std::int64_t sb, std::int64_t* c, cudaStream_t s) {
    const i64 total = batch * m * n;
    if (total == 0) return;
    int_matmul_kernel<<<blocks_for(total), kThreads, 0, s>>>(batch, m, n, k, a, sa, b, sb, c);
    check_launch("int_matmul");
}

}  // namespace ember::detail::cuda
