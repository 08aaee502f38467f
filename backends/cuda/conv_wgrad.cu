// The weight gradient of a convolution whose output channels each see few input values per
// position (cin/groups · taps ≤ kWgradTaps: a network's first layer on RGB images, 3 · 3 · 3 =
// 27). dw[co, ci, k] = Σ over samples b and output positions o of
// dy[b, co, o] · x[b, g·cg + ci, o·s − p + k·d]: a product whose inner dimension is every
// position of the batch (N·H·W, 262 144 for CIFAR at batch 256) and whose output is tiny
// (64 × 27). cuDNN runs it as one legacy kernel of a few dozen blocks (~0.9 ms on an H200 at
// batch 256, a fifth of the ResNet-18 step); here every SM takes a share of the positions.
//
// Pass 1: block (chunk, output-channel tile) walks tiles of kTile positions, stride gridDim.x;
// each tile's dy [kTile × kCo] and input patches [kTile × kWgradTaps] are staged in shared
// memory as f32 (zeros outside the input, past the last position and past the last channel),
// and thread (co, kg) accumulates its kPer taps in f32 registers. The block's sums go to
// part[chunk] in full. Pass 2 sums the chunks for each weight in a fixed order (deterministic:
// a replayed step gives the same bits as the eager one) and writes dw in its own strides and
// dtype. Any strides are read (NCHW, channels-last, views): the tiles are loaded with the
// operand's unit-stride dim fastest across the warp.
#include <array>
#include <climits>
#include <cstdint>

#include "conv_wgrad.hpp"
#include "device.cuh"

namespace ember::detail::cuda {
namespace {

using i64 = std::int64_t;

constexpr int kTile = 32;         // positions per tile
constexpr int kCo = 64;           // output channels per block
constexpr int kGroupsOfTaps = 4;  // threads per output channel, each kPer taps
constexpr int kPer = kWgradTaps / kGroupsOfTaps;
constexpr int kWgThreads = kCo * kGroupsOfTaps;
static_assert(kPer % 4 == 0, "taps are read as float4");

/// Position p's sample and 3-d output coordinates (32-bit division where p fits: 64-bit
/// division costs several times as much, and a tile waits for these).
__device__ __forceinline__ void decode(const WgradGeom& g, i64 p, i64& b, i64* o) {
    if (p < INT32_MAX && g.conv.batch * g.conv.out[0] * g.conv.out[1] * g.conv.out[2] < INT32_MAX) {
        unsigned q = static_cast<unsigned>(p);
        const unsigned o2 = static_cast<unsigned>(g.conv.out[2]),
                       o1 = static_cast<unsigned>(g.conv.out[1]),
                       o0 = static_cast<unsigned>(g.conv.out[0]);
        o[2] = q % o2;
        q /= o2;
        o[1] = q % o1;
        q /= o1;
        o[0] = q % o0;
        b = q / o0;
        return;
    }
    o[2] = p % g.conv.out[2];
    p /= g.conv.out[2];
    o[1] = p % g.conv.out[1];
    p /= g.conv.out[1];
    o[0] = p % g.conv.out[0];
    b = p / g.conv.out[0];
}

template <typename T>
__global__ void __launch_bounds__(kWgThreads)
    wgrad_partials_kernel(WgradGeom g, const T* __restrict__ x, const T* __restrict__ dy,
                          float* __restrict__ part) {
    __shared__ float ys[kTile][kCo + 1];  // +1: column writes (NCHW dy) hit distinct banks
    __shared__ __align__(16) float xs[kTile][kWgradTaps];
    __shared__ i64 y_base[kTile], x_base[kTile];
    __shared__ int x_at[kTile][3];  // the patch's first input coordinate, per dim
    __shared__ i64 tap_off[kWgradTaps];
    __shared__ int tap_at[kWgradTaps][3];

    const int tid = static_cast<int>(threadIdx.x);
    const i64 og = g.cout / g.groups, cg = g.conv.channels / g.groups;
    const i64 co_tiles = (og + kCo - 1) / kCo;
    const i64 grp = blockIdx.y / co_tiles, co0 = (blockIdx.y % co_tiles) * kCo;
    const int taps = static_cast<int>(g.conv.k[0] * g.conv.k[1] * g.conv.k[2]);
    const int K = static_cast<int>(cg) * taps;
    const i64 P = g.conv.batch * g.conv.out[0] * g.conv.out[1] * g.conv.out[2];

    // Each tap's offset within a patch and its displacement per dim, once per block.
    if (tid < kWgradTaps) {
        i64 off = 0;
        int at[3] = {0, 0, 0};
        if (tid < K) {
            int t = tid % taps;
            const i64 ci = grp * cg + tid / taps;
            at[2] = static_cast<int>(t % g.conv.k[2] * g.conv.dil[2]);
            t /= static_cast<int>(g.conv.k[2]);
            at[1] = static_cast<int>(t % g.conv.k[1] * g.conv.dil[1]);
            at[0] = static_cast<int>(t / g.conv.k[1] * g.conv.dil[0]);
            off = ci * g.xs[1] + at[0] * g.xs[2] + at[1] * g.xs[3] + at[2] * g.xs[4];
        }
        tap_off[tid] = off;
        for (int d = 0; d < 3; ++d) tap_at[tid][d] = at[d];
    }

    const int co_l = tid % kCo, kg = tid / kCo;
    float acc[kPer];
#pragma unroll
    for (int j = 0; j < kPer; ++j) acc[j] = 0.f;

    for (i64 p0 = static_cast<i64>(blockIdx.x) * kTile; p0 < P;
         p0 += static_cast<i64>(gridDim.x) * kTile) {
        if (tid < kTile) {
            const i64 p = p0 + tid;
            i64 b = 0, o[3] = {0, 0, 0};
            if (p < P) decode(g, p, b, o);
            y_base[tid] = b * g.ys[0] + (grp * og) * g.ys[1] + o[0] * g.ys[2] + o[1] * g.ys[3] +
                          o[2] * g.ys[4];
            x_base[tid] = b * g.xs[0];
            for (int d = 0; d < 3; ++d)
                x_at[tid][d] = static_cast<int>(o[d] * g.conv.stride[d] - g.conv.pad[d]);
        }
        __syncthreads();
        // dy tile: the unit-stride dim fastest across the warp.
        for (int e = tid; e < kTile * kCo; e += kWgThreads) {
            const int pl = g.dy_channels_fast ? e / kCo : e % kTile;
            const int cl = g.dy_channels_fast ? e % kCo : e / kTile;
            float v = 0.f;
            if (p0 + pl < P && co0 + cl < og)
                v = static_cast<float>(dy[y_base[pl] + (co0 + cl) * g.ys[1]]);
            ys[pl][cl] = v;
        }
        // Input patches, zero outside the input.
        for (int e = tid; e < kTile * kWgradTaps; e += kWgThreads) {
            const int pl = e / kWgradTaps, t = e % kWgradTaps;
            float v = 0.f;
            if (t < K && p0 + pl < P) {
                const int i0 = x_at[pl][0] + tap_at[t][0], i1 = x_at[pl][1] + tap_at[t][1],
                          i2 = x_at[pl][2] + tap_at[t][2];
                if (i0 >= 0 && i0 < g.conv.in[0] && i1 >= 0 && i1 < g.conv.in[1] && i2 >= 0 &&
                    i2 < g.conv.in[2])
                    v = static_cast<float>(x[x_base[pl] + tap_off[t] + (x_at[pl][0]) * g.xs[2] +
                                             (x_at[pl][1]) * g.xs[3] + (x_at[pl][2]) * g.xs[4]]);
            }
            xs[pl][t] = v;
        }
        __syncthreads();
#pragma unroll 8
        for (int pl = 0; pl < kTile; ++pl) {
            const float a = ys[pl][co_l];
            const float4* row = reinterpret_cast<const float4*>(&xs[pl][kg * kPer]);
#pragma unroll
            for (int q = 0; q < kPer / 4; ++q) {
                const float4 u = row[q];
                acc[4 * q] += a * u.x;
                acc[4 * q + 1] += a * u.y;
                acc[4 * q + 2] += a * u.z;
                acc[4 * q + 3] += a * u.w;
            }
        }
        __syncthreads();
    }
    float* out = part + (static_cast<i64>(blockIdx.x) * gridDim.y + blockIdx.y) * kCo * kWgradTaps +
                 co_l * kWgradTaps + kg * kPer;
#pragma unroll
    for (int j = 0; j < kPer; ++j) out[j] = acc[j];
}

constexpr int kSumRows = 8;  // chunk slices a block of the final sum reads at once

/// dw from the chunks' partial sums: block of 32 × kSumRows threads for 32 consecutive partial
/// entries (one output channel's taps), row r summing chunks r, r + kSumRows, ..., then the rows
/// in order: a fixed order (deterministic), coalesced reads, and enough blocks to read the
/// chunks in parallel.
template <typename T>
__global__ void wgrad_sum_kernel(WgradGeom g, int chunks, const float* __restrict__ part,
                                 T* __restrict__ dw) {
    __shared__ float rows[kSumRows][kWgradTaps];
    const int tx = static_cast<int>(threadIdx.x) % kWgradTaps,
              ty = static_cast<int>(threadIdx.x) / kWgradTaps;
    const i64 og = g.cout / g.groups, cg = g.conv.channels / g.groups;
    const i64 co_tiles = (og + kCo - 1) / kCo, tiles = co_tiles * g.groups;
    const i64 stride = tiles * kCo * kWgradTaps;  // one chunk's entries
    const i64 row = blockIdx.x;                   // (tile, channel in the tile)
    float s = 0.f;
    for (int c = ty; c < chunks; c += kSumRows) s += part[c * stride + row * kWgradTaps + tx];
    rows[ty][tx] = s;
    __syncthreads();
    if (ty != 0) return;
    for (int r = 1; r < kSumRows; ++r) s += rows[r][tx];
    const i64 y = row / kCo, col = (y % co_tiles) * kCo + row % kCo, grp = y / co_tiles;
    const int taps = static_cast<int>(g.conv.k[0] * g.conv.k[1] * g.conv.k[2]);
    if (col >= og || tx >= cg * taps) return;
    const i64 co = grp * og + col, ci = tx / taps;
    int r = tx % taps;
    const i64 k2 = r % g.conv.k[2];
    r /= static_cast<int>(g.conv.k[2]);
    const i64 k1 = r % g.conv.k[1], k0 = r / g.conv.k[1];
    dw[co * g.ws[0] + ci * g.ws[1] + k0 * g.ws[2] + k1 * g.ws[3] + k2 * g.ws[4]] = T(s);
}

template <typename F>
void visit_wgrad(DType t, F&& f) {
    switch (t) {
        case DType::F16:
            return f(__half{});
        case DType::BF16:
            return f(__nv_bfloat16{});
        default:
            return f(float{});
    }
}

std::array<unsigned, 2> wgrad_grid(const WgradGeom& g, int sms) {
    const i64 og = g.cout / g.groups;
    const i64 tiles = (og + kCo - 1) / kCo * g.groups;
    const i64 P = g.conv.batch * g.conv.out[0] * g.conv.out[1] * g.conv.out[2];
    // About four blocks an SM in all, each with at least a few tiles of positions.
    i64 chunks = (4 * static_cast<i64>(sms) + tiles - 1) / tiles;
    const i64 most = (P + 4 * kTile - 1) / (4 * kTile);
    if (chunks > most) chunks = most;
    if (chunks < 1) chunks = 1;
    return {static_cast<unsigned>(chunks), static_cast<unsigned>(tiles)};
}

}  // namespace

std::int64_t wgrad_partials(const WgradGeom& g, int sms) {
    const auto grid = wgrad_grid(g, sms);
    return static_cast<i64>(grid[0]) * grid[1] * kCo * kWgradTaps;
}

void launch_wgrad_direct(DType t, const WgradGeom& g, int sms, const void* x, const void* dy,
                         float* part, void* dw, cudaStream_t s) {
    const auto grid = wgrad_grid(g, sms);
    visit_wgrad(t, [&]<typename T>(T) {
        wgrad_partials_kernel<T><<<dim3(grid[0], grid[1]), kWgThreads, 0, s>>>(
            g, static_cast<const T*>(x), static_cast<const T*>(dy), part);
        check_launch("wgrad_partials");
        wgrad_sum_kernel<T><<<grid[1] * kCo, kWgradTaps * kSumRows, 0, s>>>(
            g, static_cast<int>(grid[0]), part, static_cast<T*>(dw));
        check_launch("wgrad_sum");
    });
}

}  // namespace ember::detail::cuda
