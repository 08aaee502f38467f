// Fused scaled-dot-product attention, flash-style: a block takes 64 query rows of one (batch,
// head) and walks the keys 64 at a time with an online softmax, so no [Lq x Lk] matrix ever
// reaches global memory. The products run on tensor cores through WMMA: bf16/f16 natively, f32
// as three TF32 products (about f32's accuracy) or, where TF32 is allowed, one. The tiles sit in
// shared memory, where the softmax reads the logits row by row (WMMA's register layout is
// opaque, so rows are rescaled there). The backward recomputes the probabilities from the saved
// log-sum-exp (FlashAttention-2): a block owns 64 keys, keeps their dK/dV in accumulator
// fragments over all query tiles and adds its share of dQ atomically. bf16/f16 have kernels of
// their own on mma.sync, which keep the logits, probabilities and accumulators in registers
// (below; the backward for head dims up to 64, where its accumulators fit the register file).
#include <mma.h>

#include <array>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "attention_kernels.hpp"
#include "device.cuh"
#include "runtime.hpp"

namespace ember::detail::cuda {
namespace {

namespace wmma = nvcuda::wmma;

constexpr int kBM = 64;  // query rows a tile (4 warps of 16)
constexpr int kBN = 64;  // key rows a tile
constexpr int kWarps = 4;
constexpr int kAttnThreads = kWarps * 32;

/// The WMMA flavour of a storage type: TF32 (k = 8) for f32, the type itself (k = 16) otherwise.
template <typename T>
struct Mma;
template <>
struct Mma<float> {
    using Prec = wmma::precision::tf32;
    static constexpr int K = 8;
    __device__ static float from_f32(float x) { return x; }
    __device__ static float to_f32(float x) { return x; }
    template <typename F>
    __device__ static void round(F& f) {
        for (int i = 0; i < f.num_elements; ++i) f.x[i] = wmma::__float_to_tf32(f.x[i]);
    }
};
template <>
struct Mma<__nv_bfloat16> {
    using Prec = __nv_bfloat16;
    static constexpr int K = 16;
    __device__ static __nv_bfloat16 from_f32(float x) { return __float2bfloat16(x); }
    __device__ static float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }
    template <typename F>
    __device__ static void round(F&) {}
};
template <>
struct Mma<__half> {
    using Prec = __half;
    static constexpr int K = 16;
    __device__ static __half from_f32(float x) { return __float2half(x); }
    __device__ static float to_f32(__half x) { return __half2float(x); }
    template <typename F>
    __device__ static void round(F&) {}
};

template <typename T>
using FragA =
    wmma::fragment<wmma::matrix_a, 16, 16, Mma<T>::K, typename Mma<T>::Prec, wmma::row_major>;
template <typename T>
using FragAt =
    wmma::fragment<wmma::matrix_a, 16, 16, Mma<T>::K, typename Mma<T>::Prec, wmma::col_major>;
template <typename T>
using FragB =
    wmma::fragment<wmma::matrix_b, 16, 16, Mma<T>::K, typename Mma<T>::Prec, wmma::row_major>;
template <typename T>
using FragBt =
    wmma::fragment<wmma::matrix_b, 16, 16, Mma<T>::K, typename Mma<T>::Prec, wmma::col_major>;
template <typename T>
using FragC = wmma::fragment<wmma::accumulator, 16, 16, Mma<T>::K, float>;

/// Shared-memory layout of one kernel instantiation (leading dims padded against bank
/// conflicts; every fragment pointer stays 32-byte aligned).
template <typename T, int D>
struct Layout {
    static constexpr bool f32 = sizeof(T) == 4;
    static constexpr int LD = D + 8;               // T tiles [64 x D]
    static constexpr int LS = kBN + 4;             // f32 logits [64 x 64]
    static constexpr int LP = f32 ? LS : kBN + 8;  // probabilities in T (aliases S for f32)
    static constexpr int LO = D + 4;               // f32 [64 x D] accumulators
    static constexpr std::size_t tile = sizeof(T) * kBM * LD;
    static constexpr std::size_t logits = sizeof(float) * kBM * LS;
    static constexpr std::size_t probs = f32 ? 0 : sizeof(T) * kBM * LP;
    static constexpr std::size_t acc = sizeof(float) * kBM * LO;
    // forward: Q, K, V, S, P, O
    static constexpr std::size_t fwd = 3 * tile + logits + probs + acc;
    // backward: K, V, Q, dO, S, dP, P, dS, dQ, lse and delta of the query tile
    static constexpr std::size_t bwd =
        4 * tile + 2 * logits + 2 * probs + acc + 2 * sizeof(float) * kBM;
};

/// Copies rows [r0, r0 + 64) of a [len, D] matrix (row stride `rs`) into a tile, zeros past
/// `len`: 16 bytes at a time where the rows allow (they do for contiguous and head-strided
/// operands), else element by element.
template <typename T, int D, int LD>
__device__ __forceinline__ void load_tile(T* tile, const T* src, std::int64_t rs, int r0, int len) {
    constexpr int V = 16 / static_cast<int>(sizeof(T));  // elements a 16-byte chunk
    constexpr int C = D / V;                             // chunks a row
    if (reinterpret_cast<std::uintptr_t>(src) % 16 == 0 && (rs * sizeof(T)) % 16 == 0) {
        for (int idx = threadIdx.x; idx < kBM * C; idx += kAttnThreads) {
            const int r = idx / C, c = (idx % C) * V;
            uint4 chunk = make_uint4(0u, 0u, 0u, 0u);  // all-zero bits: 0 in f32, bf16 and f16
            if (r0 + r < len)
                chunk = *reinterpret_cast<const uint4*>(src +
                                                        static_cast<std::int64_t>(r0 + r) * rs + c);
            *reinterpret_cast<uint4*>(tile + r * LD + c) = chunk;
        }
        return;
    }
    for (int idx = threadIdx.x; idx < kBM * D; idx += kAttnThreads) {
        const int r = idx / D, c = idx % D;
        tile[r * LD + c] =
            r0 + r < len ? src[static_cast<std::int64_t>(r0 + r) * rs + c] : Mma<T>::from_f32(0.f);
    }
}

/// The scaled, masked logit of (row i, key j), or -inf where the position does not attend.
__device__ __forceinline__ float masked_logit(const AttnParams& p, int b, int h, int i, int j,
                                              float s) {
    if (i >= p.lq || j >= p.lk || (p.causal && j > i)) return -INFINITY;
    float x = s * p.scale;
    if (p.mask) {
        const std::int64_t off = b * p.ms[0] + h * p.ms[1] + i * p.ms[2] + j * p.ms[3];
        if (p.mask_is_bool) {
            if (static_cast<const std::uint8_t*>(p.mask)[off] == 0) return -INFINITY;
        } else {
            x += static_cast<const float*>(p.mask)[off];
        }
    }
    return x;
}

__device__ __forceinline__ float warp_max(float v) {
    for (int d = 16; d > 0; d /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, d));
    return v;
}
__device__ __forceinline__ float warp_sum(float v) {
    for (int d = 16; d > 0; d /= 2) v += __shfl_xor_sync(0xffffffffu, v, d);
    return v;
}

/// acc[16 x 16] (+)= A[16 x kdim] · B[kdim x 16] for this warp, A and B in shared memory.
/// `Precise` (f32 only): each operand split into a TF32 high part and a TF32 remainder, three
/// products summed (hi·hi + hi·lo + lo·hi), which gives about f32's accuracy on tensor cores;
/// otherwise one TF32 product (about 10 mantissa bits) or the bf16/f16 product.
template <typename T, bool Precise, typename FA, typename FB>
__device__ __forceinline__ void mma_loop(FragC<T>& acc, const T* a, int lda, int a_step, const T* b,
                                         int ldb, int b_step, int kdim) {
    constexpr int K = Mma<T>::K;
    for (int kk = 0; kk < kdim; kk += K) {
        FA fa;
        FB fb;
        wmma::load_matrix_sync(fa, a + kk * a_step, lda);
        wmma::load_matrix_sync(fb, b + kk * b_step, ldb);
        if constexpr (Precise) {
            FA fa_lo;
            FB fb_lo;
            for (int i = 0; i < fa.num_elements; ++i) {
                const float x = fa.x[i], hi = wmma::__float_to_tf32(x);
                fa.x[i] = hi;
                fa_lo.x[i] = wmma::__float_to_tf32(x - hi);
            }
            for (int i = 0; i < fb.num_elements; ++i) {
                const float x = fb.x[i], hi = wmma::__float_to_tf32(x);
                fb.x[i] = hi;
                fb_lo.x[i] = wmma::__float_to_tf32(x - hi);
            }
            wmma::mma_sync(acc, fa_lo, fb, acc);
            wmma::mma_sync(acc, fa, fb_lo, acc);
        } else {
            Mma<T>::round(fa);
            Mma<T>::round(fb);
        }
        wmma::mma_sync(acc, fa, fb, acc);
    }
}

template <typename T, int D, bool Precise>
__global__ void __launch_bounds__(kAttnThreads)
    attention_forward_kernel(AttnParams p, T* o, float* lse) {
    using L = Layout<T, D>;
    extern __shared__ __align__(128) unsigned char smem[];
    T* sQ = reinterpret_cast<T*>(smem);
    T* sK = sQ + kBM * L::LD;
    T* sV = sK + kBN * L::LD;
    float* sS = reinterpret_cast<float*>(sV + kBN * L::LD);
    T* sP = L::f32 ? reinterpret_cast<T*>(sS) : reinterpret_cast<T*>(sS + kBM * L::LS);
    float* sO =
        reinterpret_cast<float*>(reinterpret_cast<unsigned char*>(sS) + L::logits + L::probs);

    const int b = blockIdx.y / p.heads, h = blockIdx.y % p.heads;
    const int q0 = blockIdx.x * kBM;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const T* q = static_cast<const T*>(p.q) + b * p.qs[0] + h * p.qs[1];
    const T* k = static_cast<const T*>(p.k) + b * p.ks[0] + h * p.ks[1];
    const T* v = static_cast<const T*>(p.v) + b * p.vs[0] + h * p.vs[1];

    load_tile<T, D, L::LD>(sQ, q, p.qs[2], q0, p.lq);
    for (int idx = threadIdx.x; idx < kBM * L::LO; idx += kAttnThreads) sO[idx] = 0.f;

    float m[16], l[16];
#pragma unroll
    for (int r = 0; r < 16; ++r) {
        m[r] = -INFINITY;
        l[r] = 0.f;
    }
    // With a causal mask, keys past the tile's last row are never attended to.
    const int n_end = p.causal ? min(p.lk, q0 + kBM) : p.lk;
    const int row0 = warp * 16;
    for (int j0 = 0; j0 < n_end; j0 += kBN) {
        __syncthreads();  // every warp is done with the previous K and V
        load_tile<T, D, L::LD>(sK, k, p.ks[2], j0, p.lk);
        load_tile<T, D, L::LD>(sV, v, p.vs[2], j0, p.lk);
        __syncthreads();
        // S = Q Kᵀ for this warp's 16 rows.
#pragma unroll
        for (int nt = 0; nt < kBN / 16; ++nt) {
            FragC<T> acc;
            wmma::fill_fragment(acc, 0.f);
            mma_loop<T, Precise, FragA<T>, FragBt<T>>(acc, sQ + row0 * L::LD, L::LD, 1,
                                                      sK + nt * 16 * L::LD, L::LD, 1, D);
            wmma::store_matrix_sync(sS + row0 * L::LS + nt * 16, acc, L::LS, wmma::mem_row_major);
        }
        __syncwarp();
        // Online softmax over the warp's rows: lane c holds keys c and c + 32.
#pragma unroll
        for (int r = 0; r < 16; ++r) {
            const int row = row0 + r, i = q0 + row;
            const float x0 = masked_logit(p, b, h, i, j0 + lane, sS[row * L::LS + lane]);
            const float x1 = masked_logit(p, b, h, i, j0 + lane + 32, sS[row * L::LS + lane + 32]);
            const float m_new = fmaxf(m[r], warp_max(fmaxf(x0, x1)));
            float alpha = 1.f, p0 = 0.f, p1 = 0.f;
            if (m_new != -INFINITY) {
                alpha = __expf(m[r] - m_new);  // 0 while the row had nothing yet
                p0 = __expf(x0 - m_new);
                p1 = __expf(x1 - m_new);
            }
            l[r] = l[r] * alpha + warp_sum(p0 + p1);
            m[r] = m_new;
            sP[row * L::LP + lane] = Mma<T>::from_f32(p0);
            sP[row * L::LP + lane + 32] = Mma<T>::from_f32(p1);
            for (int c = lane; c < D; c += 32) sO[row * L::LO + c] *= alpha;
        }
        __syncwarp();
        // O += P V for the warp's rows.
#pragma unroll
        for (int dt = 0; dt < D / 16; ++dt) {
            FragC<T> acc;
            wmma::load_matrix_sync(acc, sO + row0 * L::LO + dt * 16, L::LO, wmma::mem_row_major);
            mma_loop<T, Precise, FragA<T>, FragB<T>>(acc, sP + row0 * L::LP, L::LP, 1, sV + dt * 16,
                                                     L::LD, L::LD, kBN);
            wmma::store_matrix_sync(sO + row0 * L::LO + dt * 16, acc, L::LO, wmma::mem_row_major);
        }
        __syncwarp();
    }
    __syncwarp();
    const std::int64_t bh = static_cast<std::int64_t>(blockIdx.y);
#pragma unroll
    for (int r = 0; r < 16; ++r) {
        const int row = row0 + r, i = q0 + row;
        if (i >= p.lq) continue;
        const float inv = l[r] > 0.f ? 1.f / l[r] : 0.f;  // a row with nothing to attend to: 0
        T* out = o + b * p.os[0] + h * p.os[1] + i * p.os[2];
        for (int c = lane; c < D; c += 32) out[c] = Mma<T>::from_f32(sO[row * L::LO + c] * inv);
        if (lane == 0) lse[bh * p.lq + i] = l[r] > 0.f ? m[r] + logf(l[r]) : -INFINITY;
    }
}

// ---- bf16/f16 forward on mma.sync (FlashAttention-2's register layout) -------------------
// WMMA's fragments are opaque, so the kernel above goes through shared memory for the softmax
// and for every rescale of O. With PTX's m16n8k16 the layout is documented: a warp's 16 × 64
// logits stay in registers (thread (g, t) = (lane / 4, lane % 4) holds rows g and g + 8, columns
// 2t, 2t + 1 of each 8-column tile), the probabilities are repacked in registers as the A
// operand of P·V (two logit tiles make one 16-column A tile), and O lives in registers from
// the first key tile to the store. K and V tiles arrive by cp.async into two stages, so the
// next tile's loads overlap this tile's products.

/// c += a·b on tensor cores: a 16 × 16 (row-major), b 16 × 8 (column-major), f32 c.
template <typename T>
__device__ __forceinline__ void mma16816(float (&c)[4], const std::uint32_t (&a)[4],
                                         std::uint32_t b0, std::uint32_t b1) {
    if constexpr (std::is_same_v<T, __nv_bfloat16>)
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
            "{%8,%9}, {%0,%1,%2,%3};\n"
            : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    else
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
            "{%8,%9}, {%0,%1,%2,%3};\n"
            : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/// Two f32 values as the 16-bit pair T×2 (lo in the low half), rounded to nearest even.
template <typename T>
__device__ __forceinline__ std::uint32_t pack2(float lo, float hi) {
    if constexpr (std::is_same_v<T, __nv_bfloat16>) {
        const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
        return *reinterpret_cast<const std::uint32_t*>(&v);
    } else {
        const __half2 v = __floats2half2_rn(lo, hi);
        return *reinterpret_cast<const std::uint32_t*>(&v);
    }
}

/// Four 8 × 8 16-bit matrices from shared memory, transposed: lane l names row l % 8 of matrix
/// l / 8; register j gets the B fragment (rows 2t, 2t + 1, column g) of matrix j.
__device__ __forceinline__ void ldmatrix_x4_trans(std::uint32_t (&r)[4], const void* row) {
    const auto a = static_cast<unsigned>(__cvta_generic_to_shared(row));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}

/// Four 8 × 8 16-bit matrices from shared memory as they are: register j gets the fragment
/// (row g, columns 2t, 2t + 1) of matrix j.
__device__ __forceinline__ void ldmatrix_x4(std::uint32_t (&r)[4], const void* row) {
    const auto a = static_cast<unsigned>(__cvta_generic_to_shared(row));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}

/// B fragments (k 16 × n 8) of two neighbouring 8-column tiles of Bᵀ stored row by row — B's
/// columns are rows at `rows` (leading dim ld), k along them: K's rows in Q·Kᵀ. Registers 0, 1
/// are tile 0's b0, b1; 2, 3 tile 1's. One ldmatrix instead of four 32-bit loads.
template <typename T>
__device__ __forceinline__ void load_bt_pair(std::uint32_t (&b)[4], const T* rows, int ld) {
    const int lane = threadIdx.x % 32;
    ldmatrix_x4(b, rows + (lane % 8 + 8 * (lane / 16)) * ld + 8 * ((lane / 8) % 2));
}

/// log2(e) and ln(2): the mma kernels keep logits in base 2, so that each exponential is one
/// FFMA and one ex2 (the scale and log2(e) folded into one factor).
constexpr float kLog2e = 1.44269504088896340736f;
constexpr float kLn2 = 0.69314718055994530942f;
/// 2^x (ex2.approx: 2^-inf = 0).
__device__ __forceinline__ float fast_exp2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

/// Whether any position of the 64 × 64 tile (query rows from i0, keys from j0) needs
/// masked_logit's checks: a mask, a causal diagonal, or the ends of the sequences.
__device__ __forceinline__ bool tile_needs_mask(const AttnParams& p, int i0, int j0) {
    return p.mask || j0 + kBN > p.lk || i0 + kBM > p.lq || (p.causal && j0 + kBN - 1 > i0);
}

/// Rows [r0, r0 + 64) of a [len, D] matrix (row stride rs, 16-byte aligned rows) into a tile
/// of leading dim LD, by cp.async (zeros past len).
template <typename T, int D, int LD>
__device__ __forceinline__ void issue_tile(T* tile, const T* src, std::int64_t rs, int r0,
                                           int len) {
    constexpr int C = D / 8;  // 16-byte chunks a row
    for (int idx = threadIdx.x; idx < kBM * C; idx += kAttnThreads) {
        const int r = idx / C, c = (idx % C) * 8;
        const bool in = r0 + r < len;
        cp_async16(tile + r * LD + c, src + (in ? static_cast<std::int64_t>(r0 + r) * rs : 0) + c,
                   in);
    }
}

/// Shared memory of attention_forward_mma_kernel: the Q tile and two stages of K and V.
template <typename T, int D>
constexpr std::size_t mma_forward_bytes = sizeof(T) * (kBM + 4 * kBN) * (D + 8);

// As many blocks a multiprocessor as their shared memory allows (four up to head dim 64: 128
// registers a thread; two for 128).
template <typename T, int D>
__global__ void __launch_bounds__(kAttnThreads, D <= 64 ? 4 : 2)
    attention_forward_mma_kernel(AttnParams p, T* o, float* lse) {
    constexpr int LD = D + 8;  // 16-byte rows, conflict-free for 32-bit loads and ldmatrix
    extern __shared__ __align__(128) unsigned char smem[];
    T* sQ = reinterpret_cast<T*>(smem);
    const auto stage_k = [&](int s) { return sQ + kBM * LD + s * 2 * kBN * LD; };

    const int b = blockIdx.y / p.heads, h = blockIdx.y % p.heads;
    // Causal rows late in the sequence see the most keys: start those first.
    const int q0 = (p.causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x) * kBM;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const T* q = static_cast<const T*>(p.q) + b * p.qs[0] + h * p.qs[1];
    const T* k = static_cast<const T*>(p.k) + b * p.ks[0] + h * p.ks[1];
    const T* v = static_cast<const T*>(p.v) + b * p.vs[0] + h * p.vs[1];
    const int n_end = p.causal ? min(p.lk, q0 + kBM) : p.lk;
    const int tiles = (n_end + kBN - 1) / kBN;

    issue_tile<T, D, LD>(sQ, q, p.qs[2], q0, p.lq);
    if (tiles > 0) {
        issue_tile<T, D, LD>(stage_k(0), k, p.ks[2], 0, p.lk);
        issue_tile<T, D, LD>(stage_k(0) + kBN * LD, v, p.vs[2], 0, p.lk);
    }
    cp_async_commit();

    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};  // the row max in base 2
    const float scale2 = p.scale * kLog2e;
    float acc[D / 8][4];
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) acc[dt][0] = acc[dt][1] = acc[dt][2] = acc[dt][3] = 0.f;
    std::uint32_t qf[D / 16][4];
    const int i_top = q0 + warp * 16 + g;  // this thread's rows: i_top and i_top + 8

    for (int tile = 0; tile < tiles; ++tile) {
        if (tile + 1 < tiles) {
            T* nk = stage_k((tile + 1) & 1);
            issue_tile<T, D, LD>(nk, k, p.ks[2], (tile + 1) * kBN, p.lk);
            issue_tile<T, D, LD>(nk + kBN * LD, v, p.vs[2], (tile + 1) * kBN, p.lk);
            cp_async_commit();
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();
        if (tile == 0) {
#pragma unroll
            for (int kk = 0; kk < D / 16; ++kk) {
                const T* r = sQ + (warp * 16 + g) * LD + kk * 16 + 2 * t;
                qf[kk][0] = *reinterpret_cast<const std::uint32_t*>(r);
                qf[kk][1] = *reinterpret_cast<const std::uint32_t*>(r + 8 * LD);
                qf[kk][2] = *reinterpret_cast<const std::uint32_t*>(r + 8);
                qf[kk][3] = *reinterpret_cast<const std::uint32_t*>(r + 8 * LD + 8);
            }
        }
        const T* sk = stage_k(tile & 1);
        const T* sv = sk + kBN * LD;
        // S = Q Kᵀ: K's rows are the B operand's columns (ldmatrix, two tiles a load).
        float sc[kBN / 8][4];
#pragma unroll
        for (int nt = 0; nt < kBN / 8; ++nt) sc[nt][0] = sc[nt][1] = sc[nt][2] = sc[nt][3] = 0.f;
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk)
#pragma unroll
            for (int np = 0; np < kBN / 16; ++np) {
                std::uint32_t bk[4];
                load_bt_pair(bk, sk + np * 16 * LD + kk * 16, LD);
                mma16816<T>(sc[2 * np], qf[kk], bk[0], bk[1]);
                mma16816<T>(sc[2 * np + 1], qf[kk], bk[2], bk[3]);
            }
        // Online softmax: the row's max over the quad (the 4 lanes sharing g), then rescale.
        const int j0 = tile * kBN;
        const bool masked = tile_needs_mask(p, q0, j0);
        float mx[2] = {m[0], m[1]};
#pragma unroll
        for (int nt = 0; nt < kBN / 8; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const float x = masked ? masked_logit(p, b, h, i_top + 8 * (e / 2),
                                                      j0 + nt * 8 + 2 * t + (e & 1), sc[nt][e]) *
                                             kLog2e
                                       : sc[nt][e] * scale2;
                sc[nt][e] = x;
                mx[e / 2] = fmaxf(mx[e / 2], x);
            }
        float alpha[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
            alpha[r] = mx[r] == -INFINITY ? 1.f : fast_exp2(m[r] - mx[r]);  // 0 while m was -inf
            m[r] = mx[r];
        }
        std::uint32_t pf[kBN / 16][4];
        float ls[2] = {0.f, 0.f};
#pragma unroll
        for (int nt = 0; nt < kBN / 8; ++nt) {
            float pr[4];
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                pr[e] = m[e / 2] == -INFINITY ? 0.f : fast_exp2(sc[nt][e] - m[e / 2]);
                ls[e / 2] += pr[e];
            }
            pf[nt / 2][(nt % 2) * 2] = pack2<T>(pr[0], pr[1]);
            pf[nt / 2][(nt % 2) * 2 + 1] = pack2<T>(pr[2], pr[3]);
        }
#pragma unroll
        for (int r = 0; r < 2; ++r) l[r] = l[r] * alpha[r] + ls[r];  // this thread's columns
#pragma unroll
        for (int dt = 0; dt < D / 8; ++dt) {
            acc[dt][0] *= alpha[0];
            acc[dt][1] *= alpha[0];
            acc[dt][2] *= alpha[1];
            acc[dt][3] *= alpha[1];
        }
        // O += P V: V's rows are keys, so its B fragments come transposed by ldmatrix.
#pragma unroll
        for (int kk = 0; kk < kBN / 16; ++kk)
#pragma unroll
            for (int dp = 0; dp < D / 16; ++dp) {
                std::uint32_t bv[4];
                ldmatrix_x4_trans(bv, sv + (kk * 16 + lane % 8 + 8 * ((lane / 8) % 2)) * LD +
                                          dp * 16 + 8 * (lane / 16));
                mma16816<T>(acc[2 * dp], pf[kk], bv[0], bv[1]);
                mma16816<T>(acc[2 * dp + 1], pf[kk], bv[2], bv[3]);
            }
        __syncthreads();  // every warp is done with this stage before it is refilled
    }
    cp_async_wait<0>();  // no key tile at all: the Q loads are still in flight
    const std::int64_t bh = static_cast<std::int64_t>(blockIdx.y);
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
        const int i = i_top + 8 * r;
        if (i >= p.lq) continue;
        const float inv = l[r] > 0.f ? 1.f / l[r] : 0.f;  // a row with nothing to attend to: 0
        T* out = o + b * p.os[0] + h * p.os[1] + i * p.os[2];
#pragma unroll
        for (int dt = 0; dt < D / 8; ++dt)
            *reinterpret_cast<std::uint32_t*>(out + dt * 8 + 2 * t) =
                pack2<T>(acc[dt][2 * r] * inv, acc[dt][2 * r + 1] * inv);
        // m is in base 2: lse = ln(2^m · l).
        if (t == 0) lse[bh * p.lq + i] = l[r] > 0.f ? (m[r] + log2f(l[r])) * kLn2 : -INFINITY;
    }
}

// ---- bf16/f16 backward on mma.sync (head dims up to 64) ----------------------------------
// A block owns 64 keys; each warp 16 of them. Per query tile the warp computes Sᵀ = K Qᵀ and
// dPᵀ = V dOᵀ in registers (keys are the rows, so Pᵀ and dSᵀ repack in registers as the A
// operands of dV += Pᵀ dO and dK += dSᵀ Q), then writes dSᵀ to shared memory, where every warp
// reads it transposed (ldmatrix) for its 16 query rows of dQ = dS K, added to the f32 dQ
// atomically. Q, dO and their lse/delta arrive by cp.async into two stages.

/// The i-th 32-bit word of 16-bit pairs at `p`.
template <typename T>
__device__ __forceinline__ std::uint32_t ld32(const T* p) {
    return *reinterpret_cast<const std::uint32_t*>(p);
}

/// A fragment (16 rows × 16 columns, row-major) at `tile` (leading dim ld).
template <typename T>
__device__ __forceinline__ void load_a(std::uint32_t (&a)[4], const T* tile, int ld) {
    const int g = (threadIdx.x % 32) / 4, t = threadIdx.x % 4;
    const T* r = tile + g * ld + 2 * t;
    a[0] = ld32(r);
    a[1] = ld32(r + 8 * ld);
    a[2] = ld32(r + 8);
    a[3] = ld32(r + 8 * ld + 8);
}

/// B fragments of two 8-column tiles (columns n0 .. n0 + 15) of a 16-row B stored row by row
/// (rows are the k index) at `rows` (leading dim ld), transposed by ldmatrix.
template <typename T>
__device__ __forceinline__ void load_b_rows(std::uint32_t (&b)[4], const T* rows, int ld) {
    const int lane = threadIdx.x % 32;
    ldmatrix_x4_trans(b, rows + (lane % 8 + 8 * ((lane / 8) % 2)) * ld + 8 * (lane / 16));
}

template <typename T, int D>
constexpr std::size_t mma_backward_bytes = sizeof(T) *
                                               ((2 * kBN + 4 * kBM) * (D + 8) + kBN * (kBM + 8)) +
                                           sizeof(float) * 4 * kBM;

// Three blocks a multiprocessor (their shared memory allows no more): 168 registers a thread.
template <typename T, int D>
__global__ void __launch_bounds__(kAttnThreads, 3)
    attention_backward_mma_kernel(AttnParams p, const T* dout, const float* lse, const float* delta,
                                  float* dq, T* dk, T* dv) {
    constexpr int LD = D + 8, LP = kBM + 8;
    extern __shared__ __align__(128) unsigned char smem[];
    T* sK = reinterpret_cast<T*>(smem);
    T* sV = sK + kBN * LD;
    T* sStage = sV + kBN * LD;  // stage s: Q at sStage + 2s·kBM·LD, dO right after it
    T* sdS = sStage + 4 * kBM * LD;
    float* sStat = reinterpret_cast<float*>(sdS + kBN * LP);  // stage s: lse, then delta

    const int b = blockIdx.y / p.heads, h = blockIdx.y % p.heads;
    const int j0 = blockIdx.x * kBN;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const std::int64_t bh = static_cast<std::int64_t>(blockIdx.y);
    const T* q = static_cast<const T*>(p.q) + b * p.qs[0] + h * p.qs[1];
    const T* k = static_cast<const T*>(p.k) + b * p.ks[0] + h * p.ks[1];
    const T* v = static_cast<const T*>(p.v) + b * p.vs[0] + h * p.vs[1];
    const T* go = dout + b * p.gs[0] + h * p.gs[1];

    issue_tile<T, D, LD>(sK, k, p.ks[2], j0, p.lk);
    issue_tile<T, D, LD>(sV, v, p.vs[2], j0, p.lk);
    // With a causal mask, query rows before this key tile never attend to it.
    const int i_begin = p.causal ? (j0 / kBM) * kBM : 0;
    const int n_tiles = i_begin < p.lq ? (p.lq - i_begin + kBM - 1) / kBM : 0;
    const auto issue_q = [&](int it, int st) {
        const int i0 = i_begin + it * kBM;
        T* sq = sStage + st * 2 * kBM * LD;
        issue_tile<T, D, LD>(sq, q, p.qs[2], i0, p.lq);
        issue_tile<T, D, LD>(sq + kBM * LD, go, p.gs[2], i0, p.lq);
        float* sl = sStat + st * 2 * kBM;
        for (int r = threadIdx.x; r < kBM; r += kAttnThreads) {
            const bool in = i0 + r < p.lq;
            sl[r] = in ? lse[bh * p.lq + i0 + r] * kLog2e : -INFINITY;  // base 2
            sl[kBM + r] = in ? delta[bh * p.lq + i0 + r] : 0.f;
        }
    };
    if (n_tiles > 0) issue_q(0, 0);
    cp_async_commit();

    const float scale2 = p.scale * kLog2e;  // logits in base 2
    float dKa[D / 8][4], dVa[D / 8][4];
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt)
#pragma unroll
        for (int e = 0; e < 4; ++e) dKa[dt][e] = dVa[dt][e] = 0.f;
    const int key_row = warp * 16;  // the warp's keys: j0 + key_row + g and + g + 8

    for (int it = 0; it < n_tiles; ++it) {
        const int st = it & 1, i0 = i_begin + it * kBM;
        if (it + 1 < n_tiles) {
            issue_q(it + 1, st ^ 1);
            cp_async_commit();
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();
        const T* sq = sStage + st * 2 * kBM * LD;
        const T* sdo = sq + kBM * LD;
        const float* sl = sStat + st * 2 * kBM;
        // Sᵀ = K Qᵀ and dPᵀ = V dOᵀ: 16 keys × 64 queries.
        float sc[kBM / 8][4], dp[kBM / 8][4];
#pragma unroll
        for (int nt = 0; nt < kBM / 8; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) sc[nt][e] = dp[nt][e] = 0.f;
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
            std::uint32_t ka[4], va[4];
            load_a(ka, sK + key_row * LD + kk * 16, LD);
            load_a(va, sV + key_row * LD + kk * 16, LD);
#pragma unroll
            for (int np = 0; np < kBM / 16; ++np) {
                std::uint32_t bq[4], bo[4];
                load_bt_pair(bq, sq + np * 16 * LD + kk * 16, LD);
                load_bt_pair(bo, sdo + np * 16 * LD + kk * 16, LD);
                mma16816<T>(sc[2 * np], ka, bq[0], bq[1]);
                mma16816<T>(sc[2 * np + 1], ka, bq[2], bq[3]);
                mma16816<T>(dp[2 * np], va, bo[0], bo[1]);
                mma16816<T>(dp[2 * np + 1], va, bo[2], bo[3]);
            }
        }
        const bool masked = tile_needs_mask(p, i0, j0);
        // Pᵀ = exp(logit − lse) and dSᵀ = Pᵀ ∘ (dPᵀ − delta); dSᵀ also to shared memory.
        std::uint32_t pa[kBM / 16][4], da[kBM / 16][4];
#pragma unroll
        for (int nt = 0; nt < kBM / 8; ++nt) {
            float pr[4], ds[4];
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int col = nt * 8 + 2 * t + (e & 1);
                const float x = masked ? masked_logit(p, b, h, i0 + col,
                                                      j0 + key_row + g + 8 * (e / 2), sc[nt][e]) *
                                             kLog2e
                                       : sc[nt][e] * scale2;
                const float lrow = sl[col];
                pr[e] = x == -INFINITY || lrow == -INFINITY ? 0.f : fast_exp2(x - lrow);
                ds[e] = pr[e] * (dp[nt][e] - sl[kBM + col]);
            }
            pa[nt / 2][(nt % 2) * 2] = pack2<T>(pr[0], pr[1]);
            pa[nt / 2][(nt % 2) * 2 + 1] = pack2<T>(pr[2], pr[3]);
            da[nt / 2][(nt % 2) * 2] = pack2<T>(ds[0], ds[1]);
            da[nt / 2][(nt % 2) * 2 + 1] = pack2<T>(ds[2], ds[3]);
            T* row = sdS + (key_row + g) * LP + nt * 8 + 2 * t;
            *reinterpret_cast<std::uint32_t*>(row) = da[nt / 2][(nt % 2) * 2];
            *reinterpret_cast<std::uint32_t*>(row + 8 * LP) = da[nt / 2][(nt % 2) * 2 + 1];
        }
        // dV += Pᵀ dO and dK += dSᵀ Q (the k index is the query).
#pragma unroll
        for (int kk = 0; kk < kBM / 16; ++kk)
#pragma unroll
            for (int dq2 = 0; dq2 < D / 16; ++dq2) {
                std::uint32_t bo[4], bq[4];
                load_b_rows(bo, sdo + kk * 16 * LD + dq2 * 16, LD);
                load_b_rows(bq, sq + kk * 16 * LD + dq2 * 16, LD);
                mma16816<T>(dVa[2 * dq2], pa[kk], bo[0], bo[1]);
                mma16816<T>(dVa[2 * dq2 + 1], pa[kk], bo[2], bo[3]);
                mma16816<T>(dKa[2 * dq2], da[kk], bq[0], bq[1]);
                mma16816<T>(dKa[2 * dq2 + 1], da[kk], bq[2], bq[3]);
            }
        __syncthreads();  // dSᵀ of all 64 keys is in shared memory
        // dQ of the warp's 16 query rows = dS[rows, 64 keys] · K, scaled, added atomically.
        float dqa[D / 8][4];
#pragma unroll
        for (int dt = 0; dt < D / 8; ++dt) dqa[dt][0] = dqa[dt][1] = dqa[dt][2] = dqa[dt][3] = 0.f;
        const int qrow = warp * 16;
#pragma unroll
        for (int kk = 0; kk < kBN / 16; ++kk) {
            std::uint32_t a[4];  // dS's rows are dSᵀ's columns: ldmatrix transposes them
            ldmatrix_x4_trans(
                a, sdS + (kk * 16 + lane % 8 + 8 * (lane / 16)) * LP + qrow + 8 * ((lane / 8) % 2));
#pragma unroll
            for (int dq2 = 0; dq2 < D / 16; ++dq2) {
                std::uint32_t bk[4];
                load_b_rows(bk, sK + kk * 16 * LD + dq2 * 16, LD);
                mma16816<T>(dqa[2 * dq2], a, bk[0], bk[1]);
                mma16816<T>(dqa[2 * dq2 + 1], a, bk[2], bk[3]);
            }
        }
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const int i = i0 + qrow + g + 8 * r;
            if (i >= p.lq) continue;
            float* dst = dq + b * p.dqs[0] + h * p.dqs[1] + i * p.dqs[2] + 2 * t;
#pragma unroll
            for (int dt = 0; dt < D / 8; ++dt) {
#if __CUDA_ARCH__ >= 900
                // One 8-byte atomic for the two neighbours (Hopper's vector atomics).
                atomicAdd(reinterpret_cast<float2*>(dst + dt * 8),
                          make_float2(dqa[dt][2 * r] * p.scale, dqa[dt][2 * r + 1] * p.scale));
#else
                atomicAdd(dst + dt * 8, dqa[dt][2 * r] * p.scale);
                atomicAdd(dst + dt * 8 + 1, dqa[dt][2 * r + 1] * p.scale);
#endif
            }
        }
    }
    cp_async_wait<0>();  // no query tile at all: the K and V loads are still in flight
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const int j = j0 + key_row + g + 8 * r;
        if (j >= p.lk) continue;
        T* ok = dk + b * p.dks[0] + h * p.dks[1] + j * p.dks[2] + 2 * t;
        T* ov = dv + b * p.dvs[0] + h * p.dvs[1] + j * p.dvs[2] + 2 * t;
#pragma unroll
        for (int dt = 0; dt < D / 8; ++dt) {
            *reinterpret_cast<std::uint32_t*>(ok + dt * 8) =
                pack2<T>(dKa[dt][2 * r] * p.scale, dKa[dt][2 * r + 1] * p.scale);
            *reinterpret_cast<std::uint32_t*>(ov + dt * 8) =
                pack2<T>(dVa[dt][2 * r], dVa[dt][2 * r + 1]);
        }
    }
}

/// delta[row] = Σ_c dout[row, c] · o[row, c]: one warp a row (row = (b·H + h)·Lq + i; o and
/// dout at their strides).
template <typename T, int D>
__global__ void attention_delta_kernel(AttnParams p, std::int64_t rows, const T* o, const T* dout,
                                       float* delta) {
    const std::int64_t row =
        (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    if (row >= rows) return;
    const std::int64_t bh = row / p.lq, i = row % p.lq, b = bh / p.heads, h = bh % p.heads;
    const T* orow = o + b * p.os[0] + h * p.os[1] + i * p.os[2];
    const T* grow = dout + b * p.gs[0] + h * p.gs[1] + i * p.gs[2];
    float s = 0.f;
    for (int c = lane; c < D; c += 32) s += Mma<T>::to_f32(orow[c]) * Mma<T>::to_f32(grow[c]);
    s = warp_sum(s);
    if (lane == 0) delta[row] = s;
}

/// attention_delta_kernel with 16-byte loads: D / V threads a row (V elements of 16 bytes
/// each), rows of one (batch, head) along x and the (batch, head) along y, so no thread divides
/// 64-bit indices. For rows whose starts are 16-byte aligned (delta_vec_fits).
template <typename T, int D>
__global__ void attention_delta_vec_kernel(AttnParams p, const T* o, const T* dout, float* delta) {
    constexpr int V = 16 / sizeof(T), G = D / V;
    static_assert(D % V == 0 && 32 % G == 0, "a row's threads share a warp");
    const int bh = static_cast<int>(blockIdx.y), b = bh / p.heads, h = bh % p.heads;
    const int t = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    const int i = t / G, part = t % G;
    float s = 0.f;
    if (i < p.lq) {
        const uint4 a = __ldg(
            reinterpret_cast<const uint4*>(o + b * p.os[0] + h * p.os[1] + i * p.os[2] + part * V));
        const uint4 g = __ldg(reinterpret_cast<const uint4*>(dout + b * p.gs[0] + h * p.gs[1] +
                                                             i * p.gs[2] + part * V));
        const T* ea = reinterpret_cast<const T*>(&a);
        const T* eg = reinterpret_cast<const T*>(&g);
        for (int c = 0; c < V; ++c) s += Mma<T>::to_f32(ea[c]) * Mma<T>::to_f32(eg[c]);
    }
    // Every lane takes part in the shuffles (those past the last row with 0).
    for (int d = G / 2; d > 0; d /= 2) s += __shfl_down_sync(0xffffffffu, s, d, G);
    if (i < p.lq && part == 0) delta[static_cast<std::int64_t>(bh) * p.lq + i] = s;
}

/// Whether o's and dout's rows start on 16-byte boundaries (attention_delta_vec_kernel).
template <typename T>
bool delta_vec_fits(const AttnParams& p, const void* o, const void* dout) {
    constexpr std::int64_t V = 16 / sizeof(T);
    bool ok = reinterpret_cast<std::uintptr_t>(o) % 16 == 0 &&
              reinterpret_cast<std::uintptr_t>(dout) % 16 == 0;
    for (int d = 0; d < 3; ++d) ok = ok && p.os[d] % V == 0 && p.gs[d] % V == 0;
    return ok;
}

template <typename T, int D, bool Precise>
__global__ void __launch_bounds__(kAttnThreads)
    attention_backward_kernel(AttnParams p, const T* dout, const float* lse, const float* delta,
                              float* dq, T* dk, T* dv) {
    using L = Layout<T, D>;
    extern __shared__ __align__(128) unsigned char smem[];
    T* sK = reinterpret_cast<T*>(smem);
    T* sV = sK + kBN * L::LD;
    T* sQ = sV + kBN * L::LD;
    T* sdO = sQ + kBM * L::LD;
    float* sS = reinterpret_cast<float*>(sdO + kBM * L::LD);
    float* sdP = sS + kBM * L::LS;
    T* sP = L::f32 ? reinterpret_cast<T*>(sS) : reinterpret_cast<T*>(sdP + kBM * L::LS);
    T* sdS = L::f32 ? reinterpret_cast<T*>(sdP) : sP + kBM * L::LP;
    float* sdQ = reinterpret_cast<float*>(reinterpret_cast<unsigned char*>(sS) + 2 * L::logits +
                                          2 * L::probs);
    float* sL = sdQ + kBM * L::LO;
    float* sD = sL + kBM;

    const int b = blockIdx.y / p.heads, h = blockIdx.y % p.heads;
    const int j0 = blockIdx.x * kBN;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int row0 = warp * 16;
    const std::int64_t bh = static_cast<std::int64_t>(blockIdx.y);
    const T* q = static_cast<const T*>(p.q) + b * p.qs[0] + h * p.qs[1];
    const T* k = static_cast<const T*>(p.k) + b * p.ks[0] + h * p.ks[1];
    const T* v = static_cast<const T*>(p.v) + b * p.vs[0] + h * p.vs[1];
    const T* go = dout + b * p.gs[0] + h * p.gs[1];

    load_tile<T, D, L::LD>(sK, k, p.ks[2], j0, p.lk);
    load_tile<T, D, L::LD>(sV, v, p.vs[2], j0, p.lk);

    FragC<T> dKf[D / 16], dVf[D / 16];
#pragma unroll
    for (int dt = 0; dt < D / 16; ++dt) {
        wmma::fill_fragment(dKf[dt], 0.f);
        wmma::fill_fragment(dVf[dt], 0.f);
    }
    // With a causal mask, query rows before this key tile never attend to it.
    const int i_begin = p.causal ? (j0 / kBM) * kBM : 0;
    for (int i0 = i_begin; i0 < p.lq; i0 += kBM) {
        __syncthreads();  // every warp is done with the previous query tile
        load_tile<T, D, L::LD>(sQ, q, p.qs[2], i0, p.lq);
        load_tile<T, D, L::LD>(sdO, go, p.gs[2], i0, p.lq);
        for (int r = threadIdx.x; r < kBM; r += kAttnThreads) {
            const bool in = i0 + r < p.lq;
            sL[r] = in ? lse[bh * p.lq + i0 + r] : -INFINITY;
            sD[r] = in ? delta[bh * p.lq + i0 + r] : 0.f;
        }
        __syncthreads();
        // S = Q Kᵀ and dP = dO Vᵀ for this warp's 16 query rows.
#pragma unroll
        for (int nt = 0; nt < kBN / 16; ++nt) {
            FragC<T> acc;
            wmma::fill_fragment(acc, 0.f);
            mma_loop<T, Precise, FragA<T>, FragBt<T>>(acc, sQ + row0 * L::LD, L::LD, 1,
                                                      sK + nt * 16 * L::LD, L::LD, 1, D);
            wmma::store_matrix_sync(sS + row0 * L::LS + nt * 16, acc, L::LS, wmma::mem_row_major);
            wmma::fill_fragment(acc, 0.f);
            mma_loop<T, Precise, FragA<T>, FragBt<T>>(acc, sdO + row0 * L::LD, L::LD, 1,
                                                      sV + nt * 16 * L::LD, L::LD, 1, D);
            wmma::store_matrix_sync(sdP + row0 * L::LS + nt * 16, acc, L::LS, wmma::mem_row_major);
        }
        __syncwarp();
        // P = exp(logit - lse), dS = P ∘ (dP - delta), in place.
        for (int r = 0; r < 16; ++r) {
            const int row = row0 + r, i = i0 + row;
            const float lrow = sL[row], drow = sD[row];
            for (int c = lane; c < kBN; c += 32) {
                const float x = masked_logit(p, b, h, i, j0 + c, sS[row * L::LS + c]);
                const float pr = x == -INFINITY || lrow == -INFINITY ? 0.f : __expf(x - lrow);
                const float ds = pr * (sdP[row * L::LS + c] - drow);
                sP[row * L::LP + c] = Mma<T>::from_f32(pr);
                sdS[row * L::LP + c] = Mma<T>::from_f32(ds);
            }
        }
        __syncthreads();  // dK and dV read every query row of P and dS
        // dV += Pᵀ dO, dK += dSᵀ Q for the warp's 16 keys (scaled once at the end).
#pragma unroll
        for (int dt = 0; dt < D / 16; ++dt) {
            mma_loop<T, Precise, FragAt<T>, FragB<T>>(dVf[dt], sP + row0, L::LP, L::LP,
                                                      sdO + dt * 16, L::LD, L::LD, kBM);
            mma_loop<T, Precise, FragAt<T>, FragB<T>>(dKf[dt], sdS + row0, L::LP, L::LP,
                                                      sQ + dt * 16, L::LD, L::LD, kBM);
        }
        // dQ = dS K for the warp's 16 query rows, added to the global f32 buffer.
#pragma unroll
        for (int dt = 0; dt < D / 16; ++dt) {
            FragC<T> acc;
            wmma::fill_fragment(acc, 0.f);
            mma_loop<T, Precise, FragA<T>, FragB<T>>(acc, sdS + row0 * L::LP, L::LP, 1,
                                                     sK + dt * 16, L::LD, L::LD, kBN);
            wmma::store_matrix_sync(sdQ + row0 * L::LO + dt * 16, acc, L::LO, wmma::mem_row_major);
        }
        __syncwarp();
        for (int r = 0; r < 16; ++r) {
            const int row = row0 + r, i = i0 + row;
            if (i >= p.lq) continue;
            float* dst = dq + b * p.dqs[0] + h * p.dqs[1] + i * p.dqs[2];
            for (int c = lane; c < D; c += 32) atomicAdd(dst + c, sdQ[row * L::LO + c] * p.scale);
        }
    }
    // dK and dV of the warp's 16 keys, through shared memory (the fragment layout is opaque).
    __syncthreads();
    for (int pass = 0; pass < 2; ++pass) {
        T* dst = pass == 0 ? dk : dv;
        const std::int64_t* ds = pass == 0 ? p.dks : p.dvs;
#pragma unroll
        for (int dt = 0; dt < D / 16; ++dt) {
            FragC<T>& f = pass == 0 ? dKf[dt] : dVf[dt];
            if (pass == 0)
                for (int e = 0; e < f.num_elements; ++e) f.x[e] *= p.scale;
            wmma::store_matrix_sync(sdQ + row0 * L::LO + dt * 16, f, L::LO, wmma::mem_row_major);
        }
        __syncwarp();
        for (int r = 0; r < 16; ++r) {
            const int j = j0 + row0 + r;
            if (j >= p.lk) continue;
            T* out = dst + b * ds[0] + h * ds[1] + j * ds[2];
            for (int c = lane; c < D; c += 32)
                out[c] = Mma<T>::from_f32(sdQ[(row0 + r) * L::LO + c]);
        }
        __syncwarp();
    }
}

/// Whether the mma.sync kernels take p: 16-byte aligned rows of q, k and v (cp.async).
template <typename T>
bool mma_fits(const AttnParams& p) {
    const auto al = [](const void* x) { return reinterpret_cast<std::uintptr_t>(x) % 16 == 0; };
    const auto rows = [](const std::int64_t(&st)[3]) {
        for (const std::int64_t x : st)
            if ((x * static_cast<std::int64_t>(sizeof(T))) % 16 != 0) return false;
        return true;
    };
    return al(p.q) && al(p.k) && al(p.v) && rows(p.qs) && rows(p.ks) && rows(p.vs) &&
           (p.dout == nullptr || (al(p.dout) && rows(p.gs)));
}

template <typename T, int D, bool Precise>
void forward_as(const AttnParams& p, void* o, float* lse, cudaStream_t s) {
    const dim3 grid(static_cast<unsigned>((p.lq + kBM - 1) / kBM),
                    static_cast<unsigned>(p.batch * p.heads));
    if constexpr (!std::is_same_v<T, float>) {
        if (mma_fits<T>(p)) {
            constexpr std::size_t bytes = mma_forward_bytes<T, D>;
            auto* kernel = attention_forward_mma_kernel<T, D>;
            static std::array<std::atomic<bool>, 64> done{};
            allow_shared_memory(kernel, bytes, done);
            kernel<<<grid, kAttnThreads, bytes, s>>>(p, static_cast<T*>(o), lse);
            EMBER_CUDA_CHECK(cudaGetLastError());
            return;
        }
    }
    constexpr std::size_t bytes = Layout<T, D>::fwd;
    auto* kernel = attention_forward_kernel<T, D, Precise>;
    static std::array<std::atomic<bool>, 64> done{};
    allow_shared_memory(kernel, bytes, done);
    kernel<<<grid, kAttnThreads, bytes, s>>>(p, static_cast<T*>(o), lse);
    EMBER_CUDA_CHECK(cudaGetLastError());
}

template <typename T, int D, bool Precise>
void backward_as(const AttnParams& p, const void* o, const void* dout, const float* lse,
                 float* delta, float* dq, void* dk, void* dv, cudaStream_t s) {
    const std::int64_t rows = static_cast<std::int64_t>(p.batch) * p.heads * p.lq;
    if (rows > 0 && delta_vec_fits<T>(p, o, dout)) {
        constexpr int G = D / (16 / static_cast<int>(sizeof(T)));
        const dim3 grid(
            static_cast<unsigned>((static_cast<std::int64_t>(p.lq) * G + kThreads - 1) / kThreads),
            static_cast<unsigned>(p.batch * p.heads));
        attention_delta_vec_kernel<T, D><<<grid, kThreads, 0, s>>>(
            p, static_cast<const T*>(o), static_cast<const T*>(dout), delta);
        EMBER_CUDA_CHECK(cudaGetLastError());
    } else if (rows > 0) {
        const auto blocks = static_cast<unsigned>((rows * 32 + kThreads - 1) / kThreads);
        attention_delta_kernel<T, D><<<blocks, kThreads, 0, s>>>(
            p, rows, static_cast<const T*>(o), static_cast<const T*>(dout), delta);
        EMBER_CUDA_CHECK(cudaGetLastError());
    }
    const dim3 grid(static_cast<unsigned>((p.lk + kBN - 1) / kBN),
                    static_cast<unsigned>(p.batch * p.heads));
    if constexpr (!std::is_same_v<T, float> && D <= 64) {
        if (mma_fits<T>(p)) {
            constexpr std::size_t bytes = mma_backward_bytes<T, D>;
            auto* kernel = attention_backward_mma_kernel<T, D>;
            static std::array<std::atomic<bool>, 64> done{};
            allow_shared_memory(kernel, bytes, done);
            kernel<<<grid, kAttnThreads, bytes, s>>>(p, static_cast<const T*>(dout), lse, delta, dq,
                                                     static_cast<T*>(dk), static_cast<T*>(dv));
            EMBER_CUDA_CHECK(cudaGetLastError());
            return;
        }
    }
    constexpr std::size_t bytes = Layout<T, D>::bwd;
    auto* kernel = attention_backward_kernel<T, D, Precise>;
    static std::array<std::atomic<bool>, 64> done{};
    allow_shared_memory(kernel, bytes, done);
    kernel<<<grid, kAttnThreads, bytes, s>>>(p, static_cast<const T*>(dout), lse, delta, dq,
                                             static_cast<T*>(dk), static_cast<T*>(dv));
    EMBER_CUDA_CHECK(cudaGetLastError());
}

/// Calls f(T{}, integral_constant<D>, bool_constant<Precise>) for the storage type and head dim
/// of `p`; f32 is precise (3xTF32) unless TF32 is allowed (ember::cuda::set_allow_tf32).
template <typename F>
void visit_attention(DType dtype, int head_dim, F&& f) {
    auto dims = [&]<typename T, bool Precise>(T, std::bool_constant<Precise> pr) {
        switch (head_dim) {
            case 32:
                return f(T{}, std::integral_constant<int, 32>{}, pr);
            case 64:
                return f(T{}, std::integral_constant<int, 64>{}, pr);
            default:
                return f(T{}, std::integral_constant<int, 128>{}, pr);
        }
    };
    switch (dtype) {
        case DType::BF16:
            return dims(__nv_bfloat16{}, std::false_type{});
        case DType::F16:
            return dims(__half{}, std::false_type{});
        default:
            if (tf32_allowed()) return dims(float{}, std::false_type{});
            return dims(float{}, std::true_type{});
    }
}

}  // namespace

void launch_attention_forward(const AttnParams& p, DType dtype, void* o, float* lse,
                              cudaStream_t s) {
    if (p.lq == 0 || p.batch == 0 || p.heads == 0) return;
    visit_attention(
        dtype, p.head_dim,
        [&]<typename T, int D, bool Pr>(T, std::integral_constant<int, D>, std::bool_constant<Pr>) {
            forward_as<T, D, Pr>(p, o, lse, s);
        });
}

void launch_attention_backward(const AttnParams& p, DType dtype, const void* o, const void* dout,
                               const float* lse, float* delta, float* dq, void* dk, void* dv,
                               cudaStream_t s) {
    const std::int64_t bh = static_cast<std::int64_t>(p.batch) * p.heads;
    if (bh == 0) return;
    if (p.lq > 0)
        EMBER_CUDA_CHECK(cudaMemsetAsync(dq, 0, sizeof(float) * bh * p.lq * p.head_dim, s));
    if (p.lk == 0) return;
    visit_attention(
        dtype, p.head_dim,
        [&]<typename T, int D, bool Pr>(T, std::integral_constant<int, D>, std::bool_constant<Pr>) {
            backward_as<T, D, Pr>(p, o, dout, lse, delta, dq, dk, dv, s);
        });
}

}  // namespace ember::detail::cuda
