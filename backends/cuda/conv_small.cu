// f32 2-d convolutions with few channels, NCHW, one group: a network's first layers on grey or
// RGB images. cuDNN's exact-f32 algorithms (TF32 off, ember's default) treat these as skinny
// GEMMs and leave most of an H200 idle; here the work is spread over every SM and stays
// memory-bound.
//
// Forward (cin · kh · kw ≤ 32 values an output): a thread an output position, computing every
// output channel, 8 at a time, from one read of its input values; the weights and the bias in
// shared memory, the input through the cache (neighbouring threads read neighbouring pixels),
// and consecutive threads write consecutive positions of each channel. 3 × 3 layers with stride
// 1 and no padding take a kernel of their own (an image a block row, no bounds checks). 32-bit
// index arithmetic: the launcher takes only tensors whose element counts fit.
//
// Weight gradient (3 × 3 kernels): dw[o, c, kh, kw] = Σ over images n and output positions p of
// dy[n, o, p] · x[n, c, p·s − pad + k·d]. A block takes rounds of up to 8 images (as many as
// 96 KiB of shared memory holds: more loads in flight between two barriers), every gridDim.x-th
// round, stages their inputs (zero-padded) and output gradients in shared memory, and thread
// (tile, pg) accumulates the 8 × 9 (or OB × 9) products of its tile — OB output channels and one
// input channel — over the positions pg, pg + PG, ... in registers: each position costs OB + 9
// shared loads for OB · 9 FMAs, its row and column advanced by increments, not divisions. The
// block's sums are added over PG in a fixed order (by shuffles first where a warp's lanes share
// a tile) and written to part[block]; a second kernel adds the blocks' sums in block order.
// Deterministic: a replayed step gives the eager step's bits.
#include <algorithm>
#include <array>
#include <atomic>
#include <climits>
#include <cstdint>

#include "conv_small.hpp"
#include "device.cuh"

namespace ember::detail::cuda {
namespace {

using i64 = std::int64_t;

constexpr int kSmallThreads = 256;
constexpr int kTaps = 9;                             // 3 × 3
constexpr std::size_t kSmallWgradSmem = 160 * 1024;  // the most shared memory a block takes

/// Output channels a forward thread computes at once (its accumulators).
constexpr int kFwdChunk = 8;

/// Copies w [cout, taps] and the bias [cout] (null: zeros) into shared memory at `sw`, both
/// padded with zeros to whole chunks of kFwdChunk channels, and waits for the block; returns
/// where the bias starts.
__device__ const float* stage_weights(float* sw, const float* __restrict__ w,
                                      const float* __restrict__ bias, int cout, int taps) {
    const int padded = (cout + kFwdChunk - 1) / kFwdChunk * kFwdChunk;
    float* sb = sw + padded * taps;
    for (int i = threadIdx.x; i < padded * taps; i += blockDim.x)
        sw[i] = i < cout * taps ? w[i] : 0.f;
    for (int i = threadIdx.x; i < padded; i += blockDim.x)
        sb[i] = bias != nullptr && i < cout ? bias[i] : 0.f;
    __syncthreads();
    return sb;
}

__global__ void conv_small_forward_kernel(ConvGeom g, int cout, const float* __restrict__ x,
                                          const float* __restrict__ w,
                                          const float* __restrict__ bias, float* __restrict__ y) {
    // w [cout, C·kh·kw] then the bias [cout], both padded with zeros to whole chunks.
    extern __shared__ float sw[];
    const int C = static_cast<int>(g.channels), KH = static_cast<int>(g.k[1]),
              KW = static_cast<int>(g.k[2]), taps = C * KH * KW;
    const float* sb = stage_weights(sw, w, bias, cout, taps);
    const int H = static_cast<int>(g.in[1]), W = static_cast<int>(g.in[2]),
              Ho = static_cast<int>(g.out[1]), Wo = static_cast<int>(g.out[2]);
    const int sh = static_cast<int>(g.stride[1]), sv = static_cast<int>(g.stride[2]),
              ph = static_cast<int>(g.pad[1]), pv = static_cast<int>(g.pad[2]),
              dh = static_cast<int>(g.dil[1]), dv = static_cast<int>(g.dil[2]);
    const unsigned P = static_cast<unsigned>(Ho) * Wo, total = static_cast<unsigned>(g.batch) * P;
    // A thread a position: it reads each input value once for all the output channels, and
    // consecutive threads write consecutive positions of each channel.
    for (unsigned idx = blockIdx.x * blockDim.x + threadIdx.x; idx < total;
         idx += gridDim.x * blockDim.x) {
        const unsigned n = idx / P, p = idx % P;
        const int oh = static_cast<int>(p / Wo), ow = static_cast<int>(p % Wo);
        const float* xn = x + n * C * H * W;
        float* yp = y + n * cout * P + p;
        for (int o0 = 0; o0 < cout; o0 += kFwdChunk) {
            float acc[kFwdChunk];
#pragma unroll
            for (int j = 0; j < kFwdChunk; ++j) acc[j] = sb[o0 + j];
            for (int c = 0; c < C; ++c)
                for (int kh = 0; kh < KH; ++kh) {
                    const int ih = oh * sh - ph + kh * dh;
                    if (ih < 0 || ih >= H) continue;
                    for (int kw = 0; kw < KW; ++kw) {
                        const int iw = ow * sv - pv + kw * dv;
                        if (iw < 0 || iw >= W) continue;
                        const float xv = __ldg(xn + (c * H + ih) * W + iw);
                        const float* wt = sw + o0 * taps + (c * KH + kh) * KW + kw;
#pragma unroll
                        for (int j = 0; j < kFwdChunk; ++j) acc[j] = fmaf(wt[j * taps], xv, acc[j]);
                    }
                }
#pragma unroll
            for (int j = 0; j < kFwdChunk; ++j)
                if (o0 + j < cout) yp[(o0 + j) * P] = acc[j];
        }
    }
}

/// conv_small_forward_kernel for the common first layer: 3 × 3, stride 1, no padding or
/// dilation. Block row y is the image, so a thread finds its position with one division, and
/// the nine taps of each input channel are read without bounds checks.
__global__ void conv_small_forward_3x3_kernel(ConvGeom g, int cout, const float* __restrict__ x,
                                              const float* __restrict__ w,
                                              const float* __restrict__ bias,
                                              float* __restrict__ y) {
    extern __shared__ float sw[];  // as conv_small_forward_kernel's
    const int C = static_cast<int>(g.channels), taps = C * kTaps;
    const float* sb = stage_weights(sw, w, bias, cout, taps);
    const int H = static_cast<int>(g.in[1]), W = static_cast<int>(g.in[2]),
              Wo = static_cast<int>(g.out[2]), P = static_cast<int>(g.out[1]) * Wo;
    const int p = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    if (p >= P) return;
    const unsigned n = blockIdx.y;
    const int oh = p / Wo, ow = p - oh * Wo;
    const float* xb = x + (n * C * H + oh) * W + ow;
    float* yp = y + n * cout * P + p;
    for (int o0 = 0; o0 < cout; o0 += kFwdChunk) {
        float acc[kFwdChunk];
#pragma unroll
        for (int j = 0; j < kFwdChunk; ++j) acc[j] = sb[o0 + j];
        for (int c = 0; c < C; ++c) {
            const float* xc = xb + c * H * W;
            float xv[kTaps];
#pragma unroll
            for (int kh = 0; kh < 3; ++kh)
#pragma unroll
                for (int kw = 0; kw < 3; ++kw) xv[kh * 3 + kw] = __ldg(xc + kh * W + kw);
            const float* wc = sw + o0 * taps + c * kTaps;
#pragma unroll
            for (int t = 0; t < kTaps; ++t)
#pragma unroll
                for (int j = 0; j < kFwdChunk; ++j) acc[j] = fmaf(wc[j * taps + t], xv[t], acc[j]);
        }
#pragma unroll
        for (int j = 0; j < kFwdChunk; ++j)
            if (o0 + j < cout) yp[(o0 + j) * P] = acc[j];
    }
}

/// The largest of 8, 4, 2, 1 dividing cout: output channels a thread tile.
int tile_channels(i64 cout) {
    for (int ob : {8, 4, 2}) {
        if (cout % ob == 0) return ob;
    }
    return 1;
}

/// Shared memory a weight-gradient block stages a round of images in, at most: 96 KiB with one
/// buffer, 56 KiB a buffer with two (two blocks an SM fit, unless one image needs more).
constexpr std::size_t kStageBytes = 96 * 1024, kBufferBytes = 56 * 1024;

/// The weight gradient's geometry, worked out on the host and passed to the kernel by value:
/// the planes (Hp, Wp: the input padded), thread tiles of `ob` output channels × one input
/// channel, `pg` threads a tile.
struct WgradShape {
    int C, H, W, Ho, Wo, Hp, Wp, cout, ob, tiles, pg;
    int images;      ///< images a block stages at once (more loads in flight per round)
    int buffers;     ///< 2: the next round's images load (cp.async) while this round's are summed
    bool warp_sums;  ///< pg a multiple of 32: a warp's lanes share a tile, sums fold by shuffles
    std::size_t x_floats, y_floats, reduce_floats;  ///< an image's, and the block's sums
};

WgradShape wgrad_shape(const ConvGeom& g, i64 cout) {
    WgradShape s{};
    s.C = static_cast<int>(g.channels);
    s.H = static_cast<int>(g.in[1]);
    s.W = static_cast<int>(g.in[2]);
    s.Ho = static_cast<int>(g.out[1]);
    s.Wo = static_cast<int>(g.out[2]);
    s.Hp = s.H + 2 * static_cast<int>(g.pad[1]);
    s.Wp = s.W + 2 * static_cast<int>(g.pad[2]);
    s.cout = static_cast<int>(cout);
    s.ob = tile_channels(cout);
    s.tiles = static_cast<int>(cout / s.ob) * s.C;
    s.pg = s.tiles > 0 ? kSmallThreads / s.tiles : 0;
    s.warp_sums = s.pg > 0 && s.pg % 32 == 0;
    s.x_floats = static_cast<std::size_t>(s.C) * s.Hp * s.Wp;
    s.y_floats = static_cast<std::size_t>(s.cout) * s.Ho * s.Wo;
    const std::size_t image = sizeof(float) * (s.x_floats + s.y_floats);
    // Two buffers where the images copy as they lie, 16 bytes at a time (no zero borders).
    const bool flat = g.pad[1] == 0 && g.pad[2] == 0 && s.x_floats % 4 == 0 && s.y_floats % 4 == 0;
    s.buffers = flat && 2 * image <= kSmallWgradSmem ? 2 : 1;
    s.images = static_cast<int>(std::clamp<std::size_t>(
        (s.buffers == 2 ? kBufferBytes : kStageBytes) / std::max<std::size_t>(image, 1), 1, 8));
    s.images = static_cast<int>(std::min<i64>(s.images, std::max<i64>(g.batch, 1)));
    s.reduce_floats =
        static_cast<std::size_t>(s.tiles) * (s.warp_sums ? s.pg / 32 : s.pg) * s.ob * kTaps;
    return s;
}

std::size_t wgrad_smem_bytes(const WgradShape& s) {
    return sizeof(float) *
           std::max(static_cast<std::size_t>(s.buffers) * s.images * (s.x_floats + s.y_floats),
                    s.reduce_floats);
}

/// `count` floats from global `src` to shared `dst`, 16 bytes at a time where both allow.
__device__ __forceinline__ void stage(float* dst, const float* __restrict__ src, int count) {
    if ((reinterpret_cast<std::uintptr_t>(src) | reinterpret_cast<std::uintptr_t>(dst)) % 16 == 0 &&
        count % 4 == 0) {
        const float4* s4 = reinterpret_cast<const float4*>(src);
        float4* d4 = reinterpret_cast<float4*>(dst);
        for (int i = threadIdx.x; i < count / 4; i += blockDim.x) d4[i] = __ldg(s4 + i);
        return;
    }
    for (int i = threadIdx.x; i < count; i += blockDim.x) dst[i] = __ldg(src + i);
}

template <int OB>
__global__ void __launch_bounds__(kSmallThreads)
    conv_small_wgrad_kernel(ConvGeom g, WgradShape s, const float* __restrict__ x,
                            const float* __restrict__ dy, float* __restrict__ part) {
    extern __shared__ __align__(16) float sm[];
    // Round layout: the images' inputs [images][C][Hp][Wp] (zero borders), then their output
    // gradients [images][cout][Ho·Wo].
    float* sx = sm;
    float* sy = sm + static_cast<std::size_t>(s.images) * s.x_floats;
    const int P = s.Ho * s.Wo, ph = static_cast<int>(g.pad[1]), pv = static_cast<int>(g.pad[2]);
    const int sh = static_cast<int>(g.stride[1]), sv = static_cast<int>(g.stride[2]),
              dh = static_cast<int>(g.dil[1]), dv = static_cast<int>(g.dil[2]);
    const bool padded = ph != 0 || pv != 0;
    // Consecutive threads take consecutive positions of one tile: their shared reads are
    // consecutive words.
    const int tile = threadIdx.x / s.pg, pg = threadIdx.x % s.pg;
    const bool active = tile < s.tiles;
    const int ob = active ? tile / s.C : 0, c = active ? tile % s.C : 0;
    // The thread's first position and the step to the next, as (row, column) increments.
    const int oh0 = pg / s.Wo, ow0 = pg % s.Wo, dq = s.pg / s.Wo, dr = s.pg % s.Wo;
    float acc[OB][kTaps];
#pragma unroll
    for (int j = 0; j < OB; ++j)
#pragma unroll
        for (int t = 0; t < kTaps; ++t) acc[j][t] = 0.f;
    if (padded)  // the borders stay zero: each image writes the interior only
        for (std::size_t i = threadIdx.x; i < s.images * s.x_floats; i += blockDim.x) sx[i] = 0.f;
    const int plane = s.H * s.W, warps = blockDim.x / 32, lane = threadIdx.x % 32;
    const i64 step = static_cast<i64>(gridDim.x) * s.images;
    const auto images_at = [&](i64 n0) {
        return static_cast<int>(min(static_cast<i64>(s.images), g.batch - n0));
    };
    // Round buffer b: its images' inputs, then their output gradients.
    const std::size_t round_floats = static_cast<std::size_t>(s.images) * (s.x_floats + s.y_floats);
    const auto buffer = [&](int b) { return sm + b * round_floats; };
    // Two buffers need 16-byte aligned operands too (every image starts on 16 bytes then).
    const bool async =
        s.buffers == 2 &&
        (reinterpret_cast<std::uintptr_t>(x) | reinterpret_cast<std::uintptr_t>(dy)) % 16 == 0;
    const auto issue = [&](i64 n0, float* buf) {  // the round's copies, by cp.async
        const int rn = images_at(n0), xn = rn * s.C * plane / 4, yn = rn * s.cout * P / 4;
        const float* xsrc = x + n0 * s.C * plane;
        const float* ysrc = dy + n0 * s.cout * P;
        float* ydst = buf + s.images * s.x_floats;
        for (int i = threadIdx.x; i < xn; i += blockDim.x)
            cp_async16(buf + 4 * i, xsrc + 4 * i, true);
        for (int i = threadIdx.x; i < yn; i += blockDim.x)
            cp_async16(ydst + 4 * i, ysrc + 4 * i, true);
        cp_async_commit();
    };
    int cur = 0;
    i64 n0 = static_cast<i64>(blockIdx.x) * s.images;
    if (async && n0 < g.batch) issue(n0, buffer(0));
    for (; n0 < g.batch; n0 += step) {
        const int rn = images_at(n0);
        if (async) {
            if (n0 + step < g.batch) {
                issue(n0 + step, buffer(cur ^ 1));
                cp_async_wait<1>();
            } else {
                cp_async_wait<0>();
            }
        } else if (!padded) {
            stage(sx, x + n0 * s.C * plane, rn * s.C * plane);
            stage(sy, dy + n0 * s.cout * P, rn * s.cout * P);
        } else {  // row by row into the padded planes: a warp a row
            for (int r = threadIdx.x / 32; r < rn * s.C * s.H; r += warps) {
                const int plane_idx = r / s.H, h = r - plane_idx * s.H;
                float* dst = sx + (plane_idx * s.Hp + h + ph) * s.Wp + pv;
                const float* src = x + (n0 * s.C * s.H + r) * s.W;
                for (int w = lane; w < s.W; w += 32) dst[w] = __ldg(src + w);
            }
            stage(sy, dy + n0 * s.cout * P, rn * s.cout * P);
        }
        __syncthreads();  // the round's images are in shared memory
        const float* bx = async ? buffer(cur) : sx;
        const float* by = bx + s.images * s.x_floats;
        for (int r = 0; r < (active ? rn : 0); ++r) {
            const float* ys = by + (r * s.cout + ob * OB) * P;
            const float* xs = bx + r * s.x_floats + c * s.Hp * s.Wp;
            int oh = oh0, ow = ow0;
            for (int p = pg; p < P; p += s.pg) {
                float yv[OB];
#pragma unroll
                for (int j = 0; j < OB; ++j) yv[j] = ys[j * P + p];
                const float* xb = xs + oh * sh * s.Wp + ow * sv;
                float xv[kTaps];
#pragma unroll
                for (int kh = 0; kh < 3; ++kh)
#pragma unroll
                    for (int kw = 0; kw < 3; ++kw) xv[kh * 3 + kw] = xb[kh * dh * s.Wp + kw * dv];
#pragma unroll
                for (int j = 0; j < OB; ++j)
#pragma unroll
                    for (int t = 0; t < kTaps; ++t) acc[j][t] = fmaf(yv[j], xv[t], acc[j][t]);
                ow += dr;
                oh += dq;
                if (ow >= s.Wo) {
                    ow -= s.Wo;
                    ++oh;
                }
            }
        }
        __syncthreads();  // every thread is done with the round's buffer before it is refilled
        cur ^= async ? 1 : 0;
    }
    // The block's sums over pg, in a fixed order: lanes by shuffles where a warp shares a tile,
    // then slots in shared memory (the staging space, free now) summed in slot order.
    const int slots = s.warp_sums ? s.pg / 32 : s.pg, slot = s.warp_sums ? pg / 32 : pg;
    if (s.warp_sums) {
#pragma unroll
        for (int j = 0; j < OB; ++j)
#pragma unroll
            for (int t = 0; t < kTaps; ++t)
#pragma unroll
                for (int d = 16; d > 0; d /= 2)
                    acc[j][t] += __shfl_xor_sync(0xffffffffu, acc[j][t], d);
    }
    __syncthreads();
    if (active && (!s.warp_sums || lane == 0)) {
#pragma unroll
        for (int j = 0; j < OB; ++j)
#pragma unroll
            for (int t = 0; t < kTaps; ++t)
                sm[((tile * OB + j) * kTaps + t) * slots + slot] = acc[j][t];
    }
    __syncthreads();
    // Output (o, c, t) of this block.
    const int outs = s.cout * s.C * kTaps;
    float* mine = part + static_cast<i64>(blockIdx.x) * outs;
    for (int i = threadIdx.x; i < outs; i += blockDim.x) {
        const int t = i % kTaps, oc = i / kTaps, ci = oc % s.C, o = oc / s.C;
        const int tl = (o / OB) * s.C + ci, j = o % OB;
        const float* src = sm + ((tl * OB + j) * kTaps + t) * slots;
        float sum = 0.f;
        for (int q = 0; q < slots; ++q) sum += src[q];
        mine[i] = sum;
    }
}

__global__ void conv_small_fold_kernel(const float* __restrict__ part, int blocks, int outs,
                                       float* __restrict__ dw) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= outs) return;
    float sum = 0.f;
    for (int b = 0; b < blocks; ++b) sum += part[static_cast<i64>(b) * outs + i];
    dw[i] = sum;
}

/// Blocks of the weight gradient: two an SM (their registers allow two), at most one a round of
/// images.
int wgrad_blocks(const ConvGeom& g, i64 cout, int sms) {
    const i64 images = wgrad_shape(g, cout).images;
    const i64 rounds = (g.batch + images - 1) / images;
    return static_cast<int>(std::min<i64>(rounds, 2 * static_cast<i64>(std::max(sms, 1))));
}

template <int OB>
void run_wgrad(const ConvGeom& g, const WgradShape& sh, int blocks, std::size_t bytes,
               const float* x, const float* dy, float* part, cudaStream_t s) {
    // Once per instantiation and device, for the most small_wgrad_fits allows.
    static std::array<std::atomic<bool>, 64> done{};
    allow_shared_memory(conv_small_wgrad_kernel<OB>, kSmallWgradSmem, done);
    conv_small_wgrad_kernel<OB><<<blocks, kSmallThreads, bytes, s>>>(g, sh, x, dy, part);
}

/// A 2-d convolution with work enough for these kernels.
bool two_d_and_large(const ConvGeom& g) {
    return g.in[0] == 1 && g.out[0] == 1 && g.k[0] == 1 &&
           g.batch * g.out[1] * g.out[2] >= kSmallMinPositions;
}

}  // namespace

bool small_forward_fits(const ConvGeom& g, std::int64_t cout) {
    const i64 taps = g.channels * g.k[1] * g.k[2];
    return two_d_and_large(g) && taps <= kSmallFwdTaps && cout >= 1 && cout <= kSmallFwdCout &&
           g.batch * cout * g.out[1] * g.out[2] < INT32_MAX &&
           g.batch * g.channels * g.in[1] * g.in[2] < INT32_MAX;
}

void launch_conv_small_forward(const ConvGeom& g, std::int64_t cout, const float* x, const float* w,
                               const float* bias, float* y, cudaStream_t s) {
    if (g.batch * cout * g.out[1] * g.out[2] == 0) return;
    const i64 padded = (cout + kFwdChunk - 1) / kFwdChunk * kFwdChunk;
    const std::size_t bytes = sizeof(float) * padded * (g.channels * g.k[1] * g.k[2] + 1);
    const i64 positions = g.batch * g.out[1] * g.out[2];
    const unsigned blocks = static_cast<unsigned>(
        std::min<i64>((positions + kSmallThreads - 1) / kSmallThreads, i64{1} << 16));
    const bool plain = g.k[1] == 3 && g.k[2] == 3 && g.stride[1] == 1 && g.stride[2] == 1 &&
                       g.pad[1] == 0 && g.pad[2] == 0 && g.dil[1] == 1 && g.dil[2] == 1 &&
                       g.batch <= 65535;
    if (plain) {
        const dim3 grid(
            static_cast<unsigned>((g.out[1] * g.out[2] + kSmallThreads - 1) / kSmallThreads),
            static_cast<unsigned>(g.batch));
        conv_small_forward_3x3_kernel<<<grid, kSmallThreads, bytes, s>>>(g, static_cast<int>(cout),
                                                                         x, w, bias, y);
    } else {
        conv_small_forward_kernel<<<blocks, kSmallThreads, bytes, s>>>(g, static_cast<int>(cout), x,
                                                                       w, bias, y);
    }
    EMBER_CUDA_CHECK(cudaGetLastError());
}

bool small_wgrad_fits(const ConvGeom& g, std::int64_t cout) {
    if (!two_d_and_large(g) || g.k[1] != 3 || g.k[2] != 3 || cout < 1 || g.channels < 1 ||
        g.out[1] * g.out[2] == 0 || cout * g.channels > 256)
        return false;
    const WgradShape s = wgrad_shape(g, cout);
    return s.tiles <= kSmallThreads && wgrad_smem_bytes(s) <= kSmallWgradSmem &&
           g.batch * g.channels * g.in[1] * g.in[2] < INT32_MAX &&
           g.batch * cout * g.out[1] * g.out[2] < INT32_MAX;
}

std::int64_t small_wgrad_partials(const ConvGeom& g, std::int64_t cout, int sms) {
    return static_cast<i64>(wgrad_blocks(g, cout, sms)) * cout * g.channels * kTaps;
}

void launch_conv_small_wgrad(const ConvGeom& g, std::int64_t cout, int sms, const float* x,
                             const float* dy, float* part, float* dw, cudaStream_t s) {
    const WgradShape sh = wgrad_shape(g, cout);
    const int blocks = wgrad_blocks(g, cout, sms),
              outs = static_cast<int>(cout * g.channels * kTaps);
    if (blocks == 0) {  // an empty batch: a zero gradient
        EMBER_CUDA_CHECK(cudaMemsetAsync(dw, 0, sizeof(float) * outs, s));
        return;
    }
    const std::size_t bytes = wgrad_smem_bytes(sh);
    switch (sh.ob) {
        case 8:
            run_wgrad<8>(g, sh, blocks, bytes, x, dy, part, s);
            break;
        case 4:
            run_wgrad<4>(g, sh, blocks, bytes, x, dy, part, s);
            break;
        case 2:
            run_wgrad<2>(g, sh, blocks, bytes, x, dy, part, s);
            break;
        default:
            run_wgrad<1>(g, sh, blocks, bytes, x, dy, part, s);
            break;
    }
    EMBER_CUDA_CHECK(cudaGetLastError());
    conv_small_fold_kernel<<<(outs + kSmallThreads - 1) / kSmallThreads, kSmallThreads, 0, s>>>(
        part, blocks, outs, dw);
    EMBER_CUDA_CHECK(cudaGetLastError());
}

}  // namespace ember::detail::cuda
