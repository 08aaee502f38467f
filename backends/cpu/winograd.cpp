// Winograd's minimal filtering, F(m×m, 3×3) with m = 2 or 4, for the forward 3×3 convolution
// (stride 1, dilation 1, one group, float). An output tile of m×m positions is read from an
// (m+2)×(m+2) input tile d as Aᵀ [ (G g Gᵀ) ⊙ (Bᵀ d B) ] A: the elementwise products of the
// α² = (m+2)² transformed points are, over all channels, α² independent GEMMs
//     M[ξ] (C_out × tiles) = U[ξ] (C_out × C_in) · V[ξ] (C_in × tiles),
// 16 (m = 2) or 36 (m = 4) products doing 4 or 2.25 multiply-adds per output and input
// channel, where im2col + GEMM does 9. Invariants:
//  - U = G g Gᵀ is computed in double from the weights and rounded once; at inference it is
//    computed once and kept (packed for the GEMM's kernels: as A, or as Uᵀ packed as B for
//    calls of fewer than 32 tiles, whose products run transposed) as matmul.cpp keeps packed
//    weights, so a pass reads it and never the 3×3 weights; unkept (training), each call
//    transforms it for itself and small calls decline;
//  - the transforms of the inputs and outputs run over all the tiles of one channel of the
//    chunk at once (vectors of tiles, NCHW kept throughout), the products on the GEMM's own
//    kernels; the results differ from im2col's by the transforms' rounding only (measured
//    up to 4e-6 of the output's root mean square for m = 2, 6e-5 for m = 4: test_cpu_winograd);
//  - the batch runs in chunks of samples whose V and M fit 1 MB (or the size of U), each in
//    three parallel regions (input transform by channel, products by point, output transform
//    by channel), so no thread waits on another's tile and the result does not depend on the
//    thread count.
// Where it is used (tile_for) was decided by measurement: see docs/backend.md.
#include "winograd.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "ember/backend/detail/cpu_tensor.hpp"
#include "gemm.hpp"
#include "parallel.hpp"

#if defined(__GNUC__) && defined(__x86_64__) && !defined(__AVX512F__)
#define EMBER_WINO_AVX512 1
#define EMBER_WINO_AVX512_TARGET __attribute__((target("avx512f,avx512vl,avx512dq,avx512bw")))
#else
#define EMBER_WINO_AVX512 0
#endif
#if defined(__GNUC__)
#define EMBER_WINO_INLINE inline __attribute__((always_inline))
#else
#define EMBER_WINO_INLINE inline
#endif

namespace ember::detail::cpu {
namespace {

// ---- the 1-d transforms, over n tiles at once (each pointer a row of n values) --------------
// Every row is a __restrict parameter: from pointers held in arrays (or restrict locals) GCC
// could not prove the dozen rows apart and left the loops scalar.

EMBER_WINO_INLINE void in_f2(const float* __restrict d0, const float* __restrict d1,
                             const float* __restrict d2, const float* __restrict d3,
                             float* __restrict w0, float* __restrict w1, float* __restrict w2,
                             float* __restrict w3, i64 n) {
    for (i64 t = 0; t < n; ++t) {
        w0[t] = d0[t] - d2[t];
        w1[t] = d1[t] + d2[t];
        w2[t] = d2[t] - d1[t];
        w3[t] = d1[t] - d3[t];
    }
}

EMBER_WINO_INLINE void in_f4(const float* __restrict d0, const float* __restrict d1,
                             const float* __restrict d2, const float* __restrict d3,
                             const float* __restrict d4, const float* __restrict d5,
                             float* __restrict w0, float* __restrict w1, float* __restrict w2,
                             float* __restrict w3, float* __restrict w4, float* __restrict w5,
                             i64 n) {
    for (i64 t = 0; t < n; ++t) {
        const float a = d4[t] - 4.0f * d2[t], b = d3[t] - 4.0f * d1[t];
        const float c = d4[t] - d2[t], e = 2.0f * (d3[t] - d1[t]);
        w0[t] = 4.0f * d0[t] - 5.0f * d2[t] + d4[t];
        w1[t] = a + b;
        w2[t] = a - b;
        w3[t] = c + e;
        w4[t] = c - e;
        w5[t] = 4.0f * d1[t] - 5.0f * d3[t] + d5[t];
    }
}

EMBER_WINO_INLINE void out_f2(const float* __restrict z0, const float* __restrict z1,
                              const float* __restrict z2, const float* __restrict z3,
                              float* __restrict y0, float* __restrict y1, i64 n) {
    for (i64 t = 0; t < n; ++t) {
        y0[t] = z0[t] + z1[t] + z2[t];
        y1[t] = z1[t] - z2[t] - z3[t];
    }
}

EMBER_WINO_INLINE void out_f4(const float* __restrict z0, const float* __restrict z1,
                              const float* __restrict z2, const float* __restrict z3,
                              const float* __restrict z4, const float* __restrict z5,
                              float* __restrict y0, float* __restrict y1, float* __restrict y2,
                              float* __restrict y3, i64 n) {
    for (i64 t = 0; t < n; ++t) {
        const float s12 = z1[t] + z2[t], d12 = z1[t] - z2[t];
        const float s34 = z3[t] + z4[t], d34 = z3[t] - z4[t];
        y0[t] = z0[t] + s12 + s34;
        y1[t] = d12 + 2.0f * d34;
        y2[t] = s12 + 4.0f * s34;
        y3[t] = d12 + 8.0f * d34 + z5[t];
    }
}

/// w = Bᵀ d for the α = m + 2 inputs d[0..α) of each of n tiles.
template <int M>
EMBER_WINO_INLINE void in_1d(const float* const* d, float* const* w, i64 n) {
    if constexpr (M == 2)
        in_f2(d[0], d[1], d[2], d[3], w[0], w[1], w[2], w[3], n);
    else
        in_f4(d[0], d[1], d[2], d[3], d[4], d[5], w[0], w[1], w[2], w[3], w[4], w[5], n);
}

/// y = Aᵀ z for the α points z[0..α) of each of n tiles: m outputs.
template <int M>
EMBER_WINO_INLINE void out_1d(const float* const* z, float* const* y, i64 n) {
    if constexpr (M == 2)
        out_f2(z[0], z[1], z[2], z[3], y[0], y[1], n);
    else
        out_f4(z[0], z[1], z[2], z[3], z[4], z[5], y[0], y[1], y[2], y[3], n);
}

/// dst[0..n) = src[0..n) in fixed 32-byte pieces (vector moves): rows are short (34 floats
/// for a 32×32 plane), where a memcpy call per row was 8 % of a layer's time.
EMBER_WINO_INLINE void copy_row(float* __restrict dst, const float* __restrict src, i64 n) {
    i64 i = 0;
    for (; i + 8 <= n; i += 8) std::memcpy(dst + i, src + i, 32);
    for (; i < n; ++i) dst[i] = src[i];
}

// ---- one chunk of the batch ----------------------------------------------------------------

/// A chunk's problem: samples [n0, n0 + cnt) of x, their tiles' V and M rows ld = cnt·S apart.
struct Chunk {
    const float* x;  ///< the chunk's first sample
    float* out;      ///< likewise
    const float* bias;
    float* v;  ///< V: α² × C × ld
    float* m;  ///< M: α² × K × ld
    i64 C, K, H, W, OH, OW, ph, pw, TH, TW, ld;  ///< ld = samples · S
};

/// Scratch floats a thread's transform needs. Input: one plane zero-padded to the tiles' reach
/// ((TH·m + 2) × (TW·m + 2)) and two sets of α² rows of ld values (the tiles' inputs gathered,
/// then their vertical transform). Output: α·m + m·m rows of ld and one output row.
template <int M>
i64 scratch_floats(i64 TH, i64 TW, i64 ld) {
    constexpr i64 A = M + 2;
    return std::max((TH * M + 2) * (TW * M + 2) + 2 * A * A * ld, (A * M + M * M) * ld + M * TW);
}

/// V[ξ][c][all tiles of the chunk] for input channel c. The transforms run over the tiles of
/// every sample of the chunk at once, vectors of ld values: by tile row (8 tiles of a 32×32
/// plane) or by plane (4 tiles of an 8×8 one) they half-filled AVX-512's vectors and cost
/// twice the products.
template <int M>
EMBER_WINO_INLINE void input_channel_body(const Chunk& k, i64 c, float* buf) {
    constexpr int A = M + 2;
    const i64 TH = k.TH, TW = k.TW, S = TH * TW, ld = k.ld, hp = TH * M + 2, wp = TW * M + 2;
    float* pad = buf;           // hp × wp: a plane inside zeros
    float* d = pad + hp * wp;   // α² rows of ld: d[r·α + j][t] = tile t's input (r, j)
    float* u = d + A * A * ld;  // α² rows of ld: u[i·α + j] = (Bᵀ d)[i][j]
    const i64 x_lo = std::min(k.pw, wp), x_hi = std::clamp(k.pw + k.W, x_lo, wp);
    for (i64 s = 0; s < ld / S; ++s) {
        const float* plane = k.x + (s * k.C + c) * k.H * k.W;
        for (i64 y = 0; y < hp; ++y) {
            float* row = pad + y * wp;
            const i64 iy = y - k.ph;
            if (iy < 0 || iy >= k.H) {
                std::fill(row, row + wp, 0.0f);
                continue;
            }
            std::fill(row, row + x_lo, 0.0f);
            copy_row(row + x_lo, plane + iy * k.W + (x_lo - k.pw), x_hi - x_lo);
            std::fill(row + x_hi, row + wp, 0.0f);
        }
        for (i64 th = 0; th < TH; ++th)
            for (int r = 0; r < A; ++r) {
                const float* __restrict row = pad + (th * M + r) * wp;
                float* __restrict dr = d + r * A * ld + s * S + th * TW;
                for (i64 tw = 0; tw < TW; ++tw)
#pragma GCC unroll 6
                    for (int j = 0; j < A; ++j) dr[j * ld + tw] = row[M * tw + j];
            }
    }
    for (int j = 0; j < A; ++j) {  // vertical: u[i][j] = Σ_r Bᵀ[i][r] d[r][j]
        const float* src[A];
        float* dst[A];
        for (int r = 0; r < A; ++r) {
            src[r] = d + (r * A + j) * ld;
            dst[r] = u + (r * A + j) * ld;
        }
        in_1d<M>(src, dst, ld);
    }
    for (int i = 0; i < A; ++i) {  // horizontal, into V
        const float* src[A];
        float* dst[A];
        for (int j = 0; j < A; ++j) {
            src[j] = u + (i * A + j) * ld;
            dst[j] = k.v + ((i * A + j) * k.C + c) * ld;
        }
        in_1d<M>(src, dst, ld);
    }
}

/// Output channel o of every sample of the chunk from M[ξ][o][tiles], bias added; the
/// transforms over all the chunk's tiles at once, as the input's.
template <int M>
EMBER_WINO_INLINE void output_channel_body(const Chunk& k, i64 o, float* buf) {
    constexpr int A = M + 2;
    const i64 TH = k.TH, TW = k.TW, S = TH * TW, ld = k.ld;
    float* z = buf;               // α × M rows of ld: z[i·M + r] = (M_i· A)[r]
    float* y = z + A * M * ld;    // M × M rows of ld: y[q·M + r]
    float* row = y + M * M * ld;  // one output row of the tiles (M·TW)
    const float b = k.bias ? k.bias[o] : 0.0f;
    for (int i = 0; i < A; ++i) {
        const float* src[A];
        float* dst[M];
        for (int j = 0; j < A; ++j) src[j] = k.m + ((i * A + j) * k.K + o) * ld;
        for (int r = 0; r < M; ++r) dst[r] = z + (i * M + r) * ld;
        out_1d<M>(src, dst, ld);
    }
    for (int r = 0; r < M; ++r) {
        const float* src[A];
        float* dst[M];
        for (int i = 0; i < A; ++i) src[i] = z + (i * M + r) * ld;
        for (int q = 0; q < M; ++q) dst[q] = y + (q * M + r) * ld;
        out_1d<M>(src, dst, ld);
    }
    for (i64 s = 0; s < ld / S; ++s) {
        float* plane = k.out + (s * k.K + o) * k.OH * k.OW;
        for (i64 th = 0; th < TH; ++th)
            for (int q = 0; q < M; ++q) {
                const i64 oh = th * M + q;
                if (oh >= k.OH) break;
                const float* __restrict yq = y + q * M * ld + s * S + th * TW;
                float* __restrict rw = row;
                for (i64 tw = 0; tw < TW; ++tw)
#pragma GCC unroll 4
                    for (int r = 0; r < M; ++r) rw[M * tw + r] = yq[r * ld + tw] + b;
                copy_row(plane + oh * k.OW, row, k.OW);
            }
    }
}

template <int M>
void input_planes(const Chunk& k, i64 p0, i64 p1, float* buf) {
    for (i64 c = p0; c < p1; ++c) input_channel_body<M>(k, c, buf);
}
template <int M>
void output_planes(const Chunk& k, i64 p0, i64 p1, float* buf) {
    for (i64 o = p0; o < p1; ++o) output_channel_body<M>(k, o, buf);
}
#if EMBER_WINO_AVX512
// The same loops compiled for AVX-512 (the library's baseline is SSE2 or AVX2), picked at run
// time as the GEMM picks its kernels.
template <int M>
EMBER_WINO_AVX512_TARGET void input_planes_avx512(const Chunk& k, i64 p0, i64 p1, float* buf) {
    for (i64 c = p0; c < p1; ++c) input_channel_body<M>(k, c, buf);
}
template <int M>
EMBER_WINO_AVX512_TARGET void output_planes_avx512(const Chunk& k, i64 p0, i64 p1, float* buf) {
    for (i64 o = p0; o < p1; ++o) output_channel_body<M>(k, o, buf);
}
bool has_avx512() {
    static const bool yes = [] {
        if (const char* e = std::getenv("EMBER_CPU_ISA"); e && std::strcmp(e, "baseline") == 0)
            return false;
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw");
    }();
    return yes;
}
#endif

template <int M>
void run_input(const Chunk& k, i64 p0, i64 p1, float* buf) {
#if EMBER_WINO_AVX512
    if (has_avx512()) return input_planes_avx512<M>(k, p0, p1, buf);
#endif
    input_planes<M>(k, p0, p1, buf);
}
template <int M>
void run_output(const Chunk& k, i64 p0, i64 p1, float* buf) {
#if EMBER_WINO_AVX512
    if (has_avx512()) return output_planes_avx512<M>(k, p0, p1, buf);
#endif
    output_planes<M>(k, p0, p1, buf);
}

/// B of a product read from a row-major matrix (row stride ld) into the kernels' panels.
struct RowsB {
    const float* b;
    i64 ld;
    static void pack(const void* ctx, const PanelBlock& blk, float* out) {
        const auto& self = *static_cast<const RowsB*>(ctx);
        const i64 nr = i64(blk.nr), kc = i64(blk.kc);
        for (std::size_t q = blk.q0; q < blk.q1; ++q) {
            float* panel = out + i64(q) * nr * kc;
            const i64 c0 = i64(blk.j0 + q * blk.nr);
            const i64 cols = std::min<i64>(nr, i64(blk.nc) - i64(q) * nr);
            for (i64 p = 0; p < kc; ++p) {
                const float* __restrict src = self.b + (i64(blk.p0) + p) * self.ld + c0;
                float* __restrict dst = panel + p * nr;
                for (i64 j = 0; j < cols; ++j) dst[j] = src[j];
                for (i64 j = cols; j < nr; ++j) dst[j] = 0.0f;
            }
        }
    }
};

// ---- the weights ---------------------------------------------------------------------------

/// How U[ξ] = (G g Gᵀ)[i][j] (ξ = iα + j) is laid out, point after point, `stride` floats
/// apart: plain K × C matrices (the GEMM packs them as it goes), packed as gemm_packed_b's A
/// (gemm_pack_a), or Uᵀ (C × K) packed as a B of gemm_prepacked_raw (the transposed product of
/// calls with few tiles).
enum class ULayout { plain, packed_a, packed_bt };

struct WeightJob {
    const float* w;
    i64 K, C;
    int m;
    ULayout layout;
    std::size_t stride;
};

std::size_t u_stride(ULayout layout, i64 K, i64 C) {
    switch (layout) {
        case ULayout::packed_a:
            return gemm_packed_a_size(std::size_t(K), std::size_t(C));
        case ULayout::packed_bt:
            return gemm_prepacked_b_size(std::size_t(C), std::size_t(K));
        default:
            return std::size_t(K * C);
    }
}

/// G for the points 0, ±1 (m = 2); 0, ±1, ±2 (m = 4); and ∞.
constexpr double kG2[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
constexpr double kG4[6][3] = {{1.0 / 4, 0, 0},
                              {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                              {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                              {1.0 / 24, 1.0 / 12, 1.0 / 6},
                              {1.0 / 24, -1.0 / 12, 1.0 / 6},
                              {0, 0, 1}};

/// Rows [o0, o1) of every U[ξ] (row stride C, U[ξ] at u + ξ·K·C), in double over vectors of
/// the input channels: G g, then (G g) Gᵀ, zero coefficients skipped. scratch: (10 + 3α)·C.
template <int M>
EMBER_WINO_INLINE void weight_rows(const WeightJob& j, i64 o0, i64 o1, float* u, double* scratch) {
    constexpr int A = M + 2;
    const auto& G = [&]() -> const double(&)[A][3] {
        if constexpr (M == 2)
            return kG2;
        else
            return kG4;
    }();
    const i64 K = j.K, C = j.C;
    double* g = scratch;          // 9 rows of C: tap t of every input channel
    double* t = g + 9 * C;        // 3α rows of C: (G g)[i][s]
    double* acc = t + 3 * A * C;  // one row
    for (i64 o = o0; o < o1; ++o) {
        const float* wo = j.w + o * C * 9;
        for (i64 c = 0; c < C; ++c)
            for (int k = 0; k < 9; ++k) g[k * C + c] = wo[c * 9 + k];
        for (int i = 0; i < A; ++i)
            for (int sx = 0; sx < 3; ++sx) {
                double* __restrict ti = t + (i * 3 + sx) * C;
                std::fill(ti, ti + C, 0.0);
                for (int r = 0; r < 3; ++r) {
                    const double f = G[i][r];
                    if (f == 0) continue;
                    const double* __restrict gr = g + (r * 3 + sx) * C;
                    for (i64 c = 0; c < C; ++c) ti[c] += f * gr[c];
                }
            }
        for (int i = 0; i < A; ++i)
            for (int q = 0; q < A; ++q) {
                double* __restrict a = acc;
                std::fill(a, a + C, 0.0);
                for (int sx = 0; sx < 3; ++sx) {
                    const double f = G[q][sx];
                    if (f == 0) continue;
                    const double* __restrict ti = t + (i * 3 + sx) * C;
                    for (i64 c = 0; c < C; ++c) a[c] += f * ti[c];
                }
                float* __restrict dst = u + ((i * A + q) * K + o) * C;
                for (i64 c = 0; c < C; ++c) dst[c] = static_cast<float>(a[c]);
            }
    }
}

template <int M>
void weight_rows_any(const WeightJob& j, i64 o0, i64 o1, float* u, double* scratch) {
    weight_rows<M>(j, o0, o1, u, scratch);
}
#if EMBER_WINO_AVX512
template <int M>
EMBER_WINO_AVX512_TARGET void weight_rows_avx512(const WeightJob& j, i64 o0, i64 o1, float* u,
                                                 double* scratch) {
    weight_rows<M>(j, o0, o1, u, scratch);
}
#endif

/// The first version went one (o, c) pair at a time in scalar double. With the weights
/// transformed at each call, a 512-channel 4×4 layer's F(4×4) at batch 64 takes 34 ms this
/// way against 18 with them kept (a Zen 5 core): the rest is mostly writing the 38 MB of U.
template <int M>
void transform_weights(const WeightJob& j, float* out) {
    constexpr int A = M + 2;
    const i64 K = j.K, C = j.C;
    const bool pack = j.layout != ULayout::plain;
    Scratch<float> ubuf(pack ? std::size_t(A * A * K * C) : 0);
    float* u = pack ? ubuf.get() : out;
    parallel_for(std::size_t(K), 8, [&](std::size_t o0, std::size_t o1) {
        Scratch<double> scratch{std::size_t((10 + 3 * A) * C)};
#if EMBER_WINO_AVX512
        if (has_avx512()) return weight_rows_avx512<M>(j, i64(o0), i64(o1), u, scratch.get());
#endif
        weight_rows_any<M>(j, i64(o0), i64(o1), u, scratch.get());
    });
    if (!pack) return;
    parallel_for(std::size_t(A * A), 1, [&](std::size_t x0, std::size_t x1) {
        for (std::size_t x = x0; x < x1; ++x) {
            const float* ux = u + x * std::size_t(K * C);
            if (j.layout == ULayout::packed_a)
                gemm_pack_a(std::size_t(K), std::size_t(C), ux, std::size_t(C), out + x * j.stride,
                            false);
            else
                gemm_prepack_b_into(true, std::size_t(C), std::size_t(K), ux, std::size_t(C),
                                    out + x * j.stride);
        }
    });
}

void make_weights(const void* ctx, void* out) {
    const auto& j = *static_cast<const WeightJob*>(ctx);
    if (j.m == 2)
        transform_weights<2>(j, static_cast<float*>(out));
    else
        transform_weights<4>(j, static_cast<float*>(out));
}

// ---- when ----------------------------------------------------------------------------------

/// Whether EMBER_CPU_WINOGRAD names a tile (2 or 4).
bool forced_tile() {
    const char* e = std::getenv("EMBER_CPU_WINOGRAD");
    return e && (e[0] == '2' || e[0] == '4') && !e[1];
}

/// F(m×m, 3×3)'s m for this problem, 0 for none. EMBER_CPU_WINOGRAD=0 turns the path off, =2
/// or =4 forces that tile wherever the shape allows (tests, A/B runs); read at each call.
int tile_for(const CpuTensor& x, const CpuTensor& w, const Geo& g, std::size_t groups) {
    if (x.dtype != DType::F32 || groups != 1) return 0;
    if (g.k[0] != 1 || g.k[1] != 3 || g.k[2] != 3 || g.in[0] != 1 || g.out[0] != 1 || g.pad[0] != 0)
        return 0;
    for (int d = 1; d < 3; ++d)
        if (g.stride[d] != 1 || g.dil[d] != 1) return 0;
    if (const char* e = std::getenv("EMBER_CPU_WINOGRAD"); e && e[0] && !e[1]) {
        if (e[0] == '0') return 0;
        if (e[0] == '2' || e[0] == '4') return e[0] - '0';
    }
    const i64 C = i64(w.shape[1]), K = i64(w.shape[0]), N = i64(x.shape[0]);
    // Few channels: the transforms cost as much as the products save (and the im2col path's
    // small-depth kernel is fast there): ResNet-18's first layer, 3 -> 64, ran 4x slower.
    if (C < 16 || K < 16) return 0;
    // Each transformed weight serves one multiply-add per tile of the call: with few tiles
    // the products stream the weights (16/9 or 36/9 of the 3×3 weights' bytes) from memory
    // and lose. On a Zen 5 core (bench_scale_ops conv_fwd, weights kept, ms, im2col / F(2×2)
    // / F(4×4); calls of fewer than 32 tiles run transposed): batch 1, 64 channels at 32×32
    // 1.28 / 0.78 / 0.41, 128 at 16×16 0.95 / 0.44 / 0.36, 256 at 8×8 0.81 / 0.48 / 0.83,
    // 512 at 4×4 0.92 / 1.75 / 7.5; 512 at 4×4, batch 2 2.63 / 1.47 / 3.60, batch 4 4.31 /
    // 2.68 / 3.88, batch 64 65.9 / 34.1 / 18.7.
    auto tiles = [&](i64 m) { return N * ((g.out[1] + m - 1) / m) * ((g.out[2] + m - 1) / m); };
    if (tiles(4) >= 16) return 4;
    if (tiles(2) >= 8) return 2;
    return 0;
}

}  // namespace

bool conv_winograd(const CpuTensor& x, const CpuTensor& w, const float* bias, const Geo& g,
                   std::size_t groups, CpuTensor& out) {
    const int m = tile_for(x, w, g, groups);
    if (m == 0) return false;
    const int A = m + 2;
    const i64 N = i64(x.shape[0]), C = i64(x.shape[1]), K = i64(w.shape[0]);
    const i64 H = g.in[1], W = g.in[2], OH = g.out[1], OW = g.out[2];
    const i64 TH = (OH + m - 1) / m, TW = (OW + m - 1) / m, S = TH * TW;
    // Calls of fewer tiles than a kernel panel's 32 columns (a batch-1 8×8 layer: 16) run
    // each product transposed, Mᵀ[ξ] (tiles × K) = Vᵀ[ξ] · Uᵀ[ξ], the tiles filling the
    // kernels' 8-row tiles where as columns they half-filled the panels (as conv.cpp runs
    // its small layers from kept panels).
    bool transposed = N * S < 32;
    const ULayout layout = transposed ? ULayout::packed_bt : ULayout::packed_a;
    const std::size_t kept_stride = u_stride(layout, K, C);
    const std::size_t ubytes = std::size_t(A * A) * kept_stride * sizeof(float);

    // The transformed weights: kept across calls (inference), else made for this call.
    const float* W0 = w.data<float>();
    const WeightJob job{W0, K, C, m, layout, kept_stride};
    auto kept = kept_derived(w, W0, (transposed ? 10 : 2) + m, 1, std::size_t(K),
                             std::size_t(C * 9), ubytes, &make_weights, &job);
    // Not kept (training, the first calls of an inference loop, the cache off): transformed
    // for this call and not packed, the GEMM packing each block of it as it goes. That costs
    // about what the products of 64 tiles save (a batch-1 8×8 layer of 256 channels, 16
    // tiles: 2.1 ms against im2col's 0.8; batch 64 at 4×4, 64 tiles of 4×4: 34 ms against
    // 61), so fewer tiles go to im2col unless forced.
    if (!kept && N * S < 64 && !forced_tile()) return false;
    const WeightJob plain{W0, K, C, m, ULayout::plain, std::size_t(K * C)};
    Scratch<float> ubuf(kept ? 0 : std::size_t(A * A * K * C));
    if (!kept) make_weights(&plain, ubuf.get());
    transposed = transposed && kept;
    const float* U = kept ? static_cast<const float*>(kept->buf->data) : ubuf.get();
    const std::size_t ustride = kept ? kept_stride : std::size_t(K * C);

    // Samples a chunk: V and M of a chunk within 1 MB (an L2's worth), or within the
    // transformed weights' size where those are larger (each chunk reads them once). Measured
    // on a Zen 5 core, batch 64 of ResNet-18's 64-channel 32×32 layer, F(4×4): 43-45 ms with
    // chunks of 0.25-1 MB, 59 ms with 4 MB; the later layers gain nothing from larger chunks.
    const i64 sample_bytes = i64(A * A) * (C + K) * S * i64(sizeof(float));
    const i64 budget = std::max<i64>(i64(1) << 20, i64(ubytes));
    const i64 nb = std::clamp<i64>(budget / std::max<i64>(sample_bytes, 1), 1, N);
    Scratch<float> vbuf(std::size_t(A * A * C * nb * S));
    Scratch<float> mbuf(std::size_t(A * A * K * nb * S));
    Scratch<float> mtbuf(transposed ? std::size_t(A * A * K * nb * S) : 0);
    const i64 scratch =
        m == 2 ? scratch_floats<2>(TH, TW, nb * S) : scratch_floats<4>(TH, TW, nb * S);
    const std::size_t threads = num_threads();

    for (i64 n0 = 0; n0 < N; n0 += nb) {
        const i64 cnt = std::min(nb, N - n0), ld = cnt * S;
        const Chunk k{x.data<float>() + n0 * C * H * W,
                      out.data<float>() + n0 * K * OH * OW,
                      bias,
                      vbuf.get(),
                      mbuf.get(),
                      C,
                      K,
                      H,
                      W,
                      OH,
                      OW,
                      g.pad[1],
                      g.pad[2],
                      TH,
                      TW,
                      ld};
        // Channels split across the pool, in pieces of some 4K input values (a batch-1 32×32
        // layer's 64 channels in 16 pieces: at 16 threads, pieces of 32K kept 14 idle).
        const std::size_t grain_in =
            std::max<std::size_t>(1, std::size_t(4096 / std::max<i64>(cnt * H * W, 1)));
        parallel_for(std::size_t(C), grain_in, [&](std::size_t p0, std::size_t p1) {
            Scratch<float> buf{std::size_t(scratch)};
            if (m == 2)
                run_input<2>(k, i64(p0), i64(p1), buf.get());
            else
                run_input<4>(k, i64(p0), i64(p1), buf.get());
        });
        // The α² products, each split into column blocks when there are fewer products than
        // twice the threads.
        const i64 pts = A * A;
        i64 blocks = std::max<i64>(1, (2 * i64(threads) + pts - 1) / pts);
        blocks = std::clamp<i64>(std::min<i64>(blocks, (ld + 31) / 32), 1, ld);
        const i64 cols = ((ld + blocks - 1) / blocks + 15) / 16 * 16;
        blocks = (ld + cols - 1) / cols;
        if (transposed) {
            parallel_for(std::size_t(pts), 1, [&](std::size_t u0, std::size_t u1) {
                for (i64 xi = i64(u0); xi < i64(u1); ++xi) {
                    float* mt = mtbuf.get() + xi * ld * K;
                    gemm_prepacked_raw(true, std::size_t(ld), std::size_t(K), std::size_t(C),
                                       k.v + xi * C * ld, std::size_t(ld),
                                       U + std::size_t(xi) * ustride, mt, std::size_t(K), false);
                    float* mx = k.m + xi * K * ld;  // M[ξ] = Mᵀ[ξ]ᵀ, for the transform
                    for (i64 o = 0; o < K; ++o)
                        for (i64 t = 0; t < ld; ++t) mx[o * ld + t] = mt[t * K + o];
                }
            });
        } else {
            parallel_for(std::size_t(pts * blocks), 1, [&](std::size_t u0, std::size_t u1) {
                for (std::size_t u = u0; u < u1; ++u) {
                    const i64 xi = i64(u) / blocks, j0 = (i64(u) % blocks) * cols;
                    const i64 nc = std::min(cols, ld - j0);
                    const RowsB rb{k.v + xi * C * ld + j0, ld};
                    gemm_packed_b(std::size_t(K), std::size_t(nc), std::size_t(C),
                                  U + std::size_t(xi) * ustride, std::size_t(C),
                                  PanelPacker<float>{&rb, &RowsB::pack},
                                  static_cast<const float*>(nullptr), k.m + xi * K * ld + j0,
                                  std::size_t(ld), false,
                                  kept ? U + std::size_t(xi) * ustride : nullptr);
                }
            });
        }
        const std::size_t grain_out =
            std::max<std::size_t>(1, std::size_t(4096 / std::max<i64>(cnt * OH * OW, 1)));
        parallel_for(std::size_t(K), grain_out, [&](std::size_t p0, std::size_t p1) {
            Scratch<float> buf{std::size_t(scratch)};
            if (m == 2)
                run_output<2>(k, i64(p0), i64(p1), buf.get());
            else
                run_output<4>(k, i64(p0), i64(p1), buf.get());
        });
    }
    return true;
}

}  // namespace ember::detail::cpu
