// Fused scaled-dot-product attention, flash-style: a block takes 64 query rows of one (batch,
// head) and walks the keys 64 at a time with an online softmax, so no [Lq x Lk] matrix ever
// reaches global memory. The products run on tensor cores through WMMA: bf16/f16 natively, f32
// as three TF32 products (about f32's accuracy) or, where TF32 is allowed, one. The tiles sit in
// shared memory, where the softmax reads the logits row by row (WMMA's register layout is
// opaque, so rows are rescaled there). The backward recomputes the probabilities from the saved
// log-sum-exp (FlashAttention-2): a block owns 64 keys, keeps their dK/dV in accumulator
// fragments over all query tiles and adds its share of dQ atomically.
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
        T* out = o + (bh * p.lq + i) * D;
        for (int c = lane; c < D; c += 32) out[c] = Mma<T>::from_f32(sO[row * L::LO + c] * inv);
        if (lane == 0) lse[bh * p.lq + i] = l[r] > 0.f ? m[r] + logf(l[r]) : -INFINITY;
    }
}

/// delta[row] = Σ_c dout[row, c] · o[row, c]: one warp a row.
template <typename T, int D>
__global__ void attention_delta_kernel(std::int64_t rows, const T* o, const T* dout, float* delta) {
    const std::int64_t row =
        (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    if (row >= rows) return;
    float s = 0.f;
    for (int c = lane; c < D; c += 32)
        s += Mma<T>::to_f32(o[row * D + c]) * Mma<T>::to_f32(dout[row * D + c]);
    s = warp_sum(s);
    if (lane == 0) delta[row] = s;
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
    const T* go = dout + bh * p.lq * D;

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
        load_tile<T, D, L::LD>(sdO, go, D, i0, p.lq);
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
            float* dst = dq + (bh * p.lq + i) * D;
            for (int c = lane; c < D; c += 32) atomicAdd(dst + c, sdQ[row * L::LO + c] * p.scale);
        }
    }
    // dK and dV of the warp's 16 keys, through shared memory (the fragment layout is opaque).
    __syncthreads();
    for (int pass = 0; pass < 2; ++pass) {
        T* dst = pass == 0 ? dk : dv;
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
            T* out = dst + (bh * p.lk + j) * D;
            for (int c = lane; c < D; c += 32)
                out[c] = Mma<T>::from_f32(sdQ[(row0 + r) * L::LO + c]);
        }
        __syncwarp();
    }
}

/// Lets `kernel` use `bytes` of dynamic shared memory (above the default 48 KiB) on the current
/// device, once per device: `done` is the flags of one kernel instantiation.
template <typename K>
void allow_shared_memory(K* kernel, std::size_t bytes, std::array<std::atomic<bool>, 64>& done) {
    int dev = 0;
    EMBER_CUDA_CHECK(cudaGetDevice(&dev));
    const bool cached = dev >= 0 && dev < 64;
    if (cached && done[dev].load(std::memory_order_acquire)) return;
    EMBER_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(bytes)));
    if (cached) done[dev].store(true, std::memory_order_release);
}

template <typename T, int D, bool Precise>
void forward_as(const AttnParams& p, void* o, float* lse, cudaStream_t s) {
    constexpr std::size_t bytes = Layout<T, D>::fwd;
    auto* kernel = attention_forward_kernel<T, D, Precise>;
    static std::array<std::atomic<bool>, 64> done{};
    allow_shared_memory(kernel, bytes, done);
    const dim3 grid(static_cast<unsigned>((p.lq + kBM - 1) / kBM),
                    static_cast<unsigned>(p.batch * p.heads));
    kernel<<<grid, kAttnThreads, bytes, s>>>(p, static_cast<T*>(o), lse);
    EMBER_CUDA_CHECK(cudaGetLastError());
}

template <typename T, int D, bool Precise>
void backward_as(const AttnParams& p, const void* o, const void* dout, const float* lse,
                 float* delta, float* dq, void* dk, void* dv, cudaStream_t s) {
    const std::int64_t rows = static_cast<std::int64_t>(p.batch) * p.heads * p.lq;
    if (rows > 0) {
        const auto blocks = static_cast<unsigned>((rows * 32 + kThreads - 1) / kThreads);
        attention_delta_kernel<T, D><<<blocks, kThreads, 0, s>>>(
            rows, static_cast<const T*>(o), static_cast<const T*>(dout), delta);
        EMBER_CUDA_CHECK(cudaGetLastError());
    }
    constexpr std::size_t bytes = Layout<T, D>::bwd;
    auto* kernel = attention_backward_kernel<T, D, Precise>;
    static std::array<std::atomic<bool>, 64> done{};
    allow_shared_memory(kernel, bytes, done);
    const dim3 grid(static_cast<unsigned>((p.lk + kBN - 1) / kBN),
                    static_cast<unsigned>(p.batch * p.heads));
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
