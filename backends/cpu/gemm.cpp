// GEMM for the CPU backend: OpenBLAS when EMBER_CPU_BLAS, and a portable cache-blocked GEMM
// (BLIS-style packing + a register-tiled micro-kernel written so that GCC vectorises it) for
// freestanding builds, tiny products and depth-small convolutions.
#include "gemm.hpp"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <type_traits>

#if defined(__AVX__)
#include <immintrin.h>
#endif

#include "ember/backend/detail/cpu_tensor.hpp"
#include "neon.hpp"
#include "parallel.hpp"

#if EMBER_CPU_BLAS
#include <cblas.h>
#endif

// The kernels use GCC's vector extension (portable across targets, no intrinsics) because
// GCC's SLP vectoriser spills a plain accumulator array to the stack. The width follows the
// compile target; on x86-64 a second, AVX-512 copy is compiled and picked at run time, since
// the build targets AVX2 while many of the machines it runs on have twice the FMA width.
#if defined(EMBER_GEMM_VEC_BYTES)  // set by tests to exercise other tile shapes
#elif !defined(__GNUC__)
#define EMBER_GEMM_VEC_BYTES 0
#elif defined(__AVX512F__)
#define EMBER_GEMM_VEC_BYTES 64
#elif defined(__AVX__)
#define EMBER_GEMM_VEC_BYTES 32
#elif defined(__SSE2__) || defined(__ARM_NEON) || defined(__ALTIVEC__) || defined(__VSX__)
#define EMBER_GEMM_VEC_BYTES 16
#else
#define EMBER_GEMM_VEC_BYTES 0  // scalar FPU: a small square tile of scalars
#endif

#if !defined(EMBER_GEMM_AVX512)  // tests set it to 0 to exercise the AVX2 kernels
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__AVX512F__) && \
    (EMBER_GEMM_VEC_BYTES == 32 || EMBER_GEMM_VEC_BYTES == 16)
#define EMBER_GEMM_AVX512 1
#else
#define EMBER_GEMM_AVX512 0
#endif
#endif
// On AArch64 the float micro-kernel is neon.hpp's 8×12 (intrinsics, FMA by lane), and the
// portable tiles (scalar C++) remain for EMBER_CPU_NEON=0, picked at run time (neon_enabled).
#if !defined(EMBER_GEMM_NEON)
#define EMBER_GEMM_NEON (EMBER_CPU_NEON && EMBER_GEMM_VEC_BYTES == 16)
#endif
#if EMBER_GEMM_AVX512
#define EMBER_AVX512_TARGET __attribute__((target("avx512f,avx512vl,avx512dq,avx512bw")))
#endif
// A portable x86-64 build (EMBER_CPU_ARCH=portable: SSE2, 16-byte vectors) also compiles an
// AVX2 + FMA copy, picked at run time below the AVX-512 one.
#if !defined(EMBER_GEMM_AVX2)
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__AVX2__) && EMBER_GEMM_VEC_BYTES == 16
#define EMBER_GEMM_AVX2 1
#else
#define EMBER_GEMM_AVX2 0
#endif
#endif
#if EMBER_GEMM_AVX2
#define EMBER_AVX2_TARGET __attribute__((target("avx2,fma")))
#endif

#if defined(__GNUC__)
#define EMBER_INLINE inline __attribute__((always_inline))
#else
#define EMBER_INLINE inline
#endif

namespace ember::detail::cpu {
namespace {

constexpr std::size_t kNativeVec = EMBER_GEMM_VEC_BYTES;

template <typename T, std::size_t VB>
struct VecType {
#if defined(__GNUC__)
    typedef T type __attribute__((vector_size(VB)));
#endif
};
template <typename T>
struct VecType<T, 0> {
    using type = T;
};
template <typename T, std::size_t VB>
using Vec = typename VecType<T, VB>::type;

/// The register file decides the micro-tile: MR×NR accumulators plus a few operands must fit
/// in it, and NR must be a whole number of vectors.
template <typename T, std::size_t VB>
struct Tile {
    static constexpr std::size_t kLanes = VB ? VB / sizeof(T) : 1;
    /// NEON's float tile: 32 vector registers hold 8×12 accumulators and the operands.
    static constexpr bool kNeon = EMBER_GEMM_NEON && VB == 16 && sizeof(T) == 4;
    static constexpr std::size_t NR = kNeon ? 12 : (VB ? 2 * kLanes : 4);
    static constexpr std::size_t NV = NR / kLanes;  ///< vectors per row of the tile
    static constexpr std::size_t MR = kNeon ? 8 : (VB == 64 ? 8 : (VB ? 6 : 4));
    // MC×KC of A stays in L2 and KC×NC of B in L3; a deeper KC means fewer passes over C
    // (measured best: 384 with 64-byte B rows per k step, 512 with 128-byte ones).
    static constexpr std::size_t KC = NR * sizeof(T) >= 128 ? 512 : 384;
    static constexpr std::size_t MC = MR * (sizeof(T) == 4 ? 24 : 15);
    static constexpr std::size_t NC = sizeof(T) == 4 ? 4096 : 2048;
};

// Out-parameter rather than a return value: returning a 64-byte vector from code compiled
// for AVX2 would have an ABI of its own (and GCC warns about it).
template <typename V, typename T>
EMBER_INLINE void load(V& v, const T* p) {
    std::memcpy(&v, p, sizeof(V));
}
template <typename V, typename T>
EMBER_INLINE void store(T* p, const V& v) {
    std::memcpy(p, &v, sizeof(V));
}

/// A scratch buffer from the caching allocator, so that repeated GEMMs do not page-fault.
template <typename T>
struct Scratch {
    std::shared_ptr<Storage> s;
    explicit Scratch(std::size_t n) : s(allocate(std::max<std::size_t>(n, 1) * sizeof(T))) {}
    T* get() const { return static_cast<T*>(s->data); }
};

#if defined(__AVX__)
/// out[j·8 + i] = a[i·lda + j] for i, j < 8.
inline void transpose_8x8(const float* a, std::size_t lda, float* out) {
    __m256 r[8], t[8];
    for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(a + i * lda);
    t[0] = _mm256_unpacklo_ps(r[0], r[1]);
    t[1] = _mm256_unpackhi_ps(r[0], r[1]);
    t[2] = _mm256_unpacklo_ps(r[2], r[3]);
    t[3] = _mm256_unpackhi_ps(r[2], r[3]);
    t[4] = _mm256_unpacklo_ps(r[4], r[5]);
    t[5] = _mm256_unpackhi_ps(r[4], r[5]);
    t[6] = _mm256_unpacklo_ps(r[6], r[7]);
    t[7] = _mm256_unpackhi_ps(r[6], r[7]);
    r[0] = _mm256_shuffle_ps(t[0], t[2], 0x44);
    r[1] = _mm256_shuffle_ps(t[0], t[2], 0xEE);
    r[2] = _mm256_shuffle_ps(t[1], t[3], 0x44);
    r[3] = _mm256_shuffle_ps(t[1], t[3], 0xEE);
    r[4] = _mm256_shuffle_ps(t[4], t[6], 0x44);
    r[5] = _mm256_shuffle_ps(t[4], t[6], 0xEE);
    r[6] = _mm256_shuffle_ps(t[5], t[7], 0x44);
    r[7] = _mm256_shuffle_ps(t[5], t[7], 0xEE);
    _mm256_storeu_ps(out + 0, _mm256_permute2f128_ps(r[0], r[4], 0x20));
    _mm256_storeu_ps(out + 8, _mm256_permute2f128_ps(r[1], r[5], 0x20));
    _mm256_storeu_ps(out + 16, _mm256_permute2f128_ps(r[2], r[6], 0x20));
    _mm256_storeu_ps(out + 24, _mm256_permute2f128_ps(r[3], r[7], 0x20));
    _mm256_storeu_ps(out + 32, _mm256_permute2f128_ps(r[0], r[4], 0x31));
    _mm256_storeu_ps(out + 40, _mm256_permute2f128_ps(r[1], r[5], 0x31));
    _mm256_storeu_ps(out + 48, _mm256_permute2f128_ps(r[2], r[6], 0x31));
    _mm256_storeu_ps(out + 56, _mm256_permute2f128_ps(r[3], r[7], 0x31));
}
#endif

/// Packs rows [0, mc) × depth [0, kc) of op(A) (origin already applied) into MR-row panels,
/// k-major inside a panel, zero-padding the last panel.
template <typename T, std::size_t MR>
void pack_a(std::size_t mc, std::size_t kc, const T* a, std::size_t lda, bool trans, T* out) {
    for (std::size_t ir = 0; ir < mc; ir += MR) {
        const std::size_t mr = std::min(MR, mc - ir);
        T* dst = out + ir * kc;
        if (trans) {  // op(A)(i, p) = a[p*lda + i]: rows of the panel are contiguous in memory
            for (std::size_t p = 0; p < kc; ++p) {
                const T* src = a + p * lda + ir;
                for (std::size_t i = 0; i < mr; ++i) dst[p * MR + i] = src[i];
                for (std::size_t i = mr; i < MR; ++i) dst[p * MR + i] = T(0);
            }
        } else {
            std::size_t p0 = 0;
#if defined(__AVX__)
            // Eight rows at a time, eight depths at once through an 8×8 transpose in
            // registers: the scalar loop below stores 4 bytes at a 32-byte stride, and was a
            // tenth of a convolution's time (its weights are A, packed for each product).
            if constexpr (std::is_same_v<T, float> && MR == 8) {
                if (mr == MR) {
                    for (; p0 + 8 <= kc; p0 += 8)
                        transpose_8x8(a + ir * lda + p0, lda, dst + p0 * MR);
                }
            }
#endif
            for (std::size_t i = 0; i < mr; ++i) {
                const T* src = a + (ir + i) * lda;
                for (std::size_t p = p0; p < kc; ++p) dst[p * MR + i] = src[p];
            }
            for (std::size_t i = mr; i < MR; ++i)
                for (std::size_t p = 0; p < kc; ++p) dst[p * MR + i] = T(0);
        }
    }
}

/// Packs NR-column panels [jp0, jp1) of op(B) depth [0, kc) × [0, nc).
template <typename T, std::size_t NR>
void pack_b(std::size_t kc, std::size_t nc, std::size_t jp0, std::size_t jp1, const T* b,
            std::size_t ldb, bool trans, T* out) {
    for (std::size_t jp = jp0; jp < jp1; ++jp) {
        const std::size_t j0 = jp * NR, nr = std::min(NR, nc - j0);
        T* dst = out + j0 * kc;
        if (!trans) {
            for (std::size_t p = 0; p < kc; ++p) {
                const T* src = b + p * ldb + j0;
                for (std::size_t j = 0; j < nr; ++j) dst[p * NR + j] = src[j];
                for (std::size_t j = nr; j < NR; ++j) dst[p * NR + j] = T(0);
            }
        } else {  // op(B)(p, j) = b[j*ldb + p]
            // A transpose, in strips of depth: walking all of kc per column would store to kc
            // cache lines in turn and evict them before the next column fills them further.
            constexpr std::size_t kStrip = 16;
            for (std::size_t p0 = 0; p0 < kc; p0 += kStrip) {
                const std::size_t p1 = std::min(kc, p0 + kStrip);
                for (std::size_t j = 0; j < nr; ++j) {
                    const T* src = b + (j0 + j) * ldb;
                    for (std::size_t p = p0; p < p1; ++p) dst[p * NR + j] = src[p];
                }
            }
            for (std::size_t j = nr; j < NR; ++j)
                for (std::size_t p = 0; p < kc; ++p) dst[p * NR + j] = T(0);
        }
    }
}

/// out[MR×NR] = packed A panel · packed B panel over depth kc. When `pf` is set, the kernel
/// also pulls that next B panel towards L2: the packed B block lives in L3, and without the
/// hint the first sweep over each panel stalls on it.
template <typename T, std::size_t VB>
EMBER_INLINE void micro_kernel(std::size_t kc, const T* __restrict ap, const T* __restrict bp,
                               T* __restrict out, const T* pf) {
#if EMBER_GEMM_NEON
    if constexpr (Tile<T, VB>::kNeon) {
        static_assert(Tile<T, VB>::MR == neon::kGemmMR && Tile<T, VB>::NR == neon::kGemmNR);
        return neon::gemm_8x12(kc, ap, bp, out, pf);
    }
#endif
    using V = Vec<T, VB>;
    using Tl = Tile<T, VB>;
    constexpr std::size_t MR = Tl::MR, NR = Tl::NR, NV = Tl::NV, L = Tl::kLanes;
    V acc[MR][NV];
#pragma GCC unroll 16
    for (std::size_t i = 0; i < MR; ++i)
#pragma GCC unroll 16
        for (std::size_t v = 0; v < NV; ++v) acc[i][v] = V{} + T(0);
    for (std::size_t p = 0; p < kc; ++p) {
        V b[NV];
#pragma GCC unroll 16
        for (std::size_t v = 0; v < NV; ++v) load(b[v], bp + p * NR + v * L);
#if defined(__GNUC__)
        if (pf) __builtin_prefetch(pf + p * NR, 0, 2);
#endif
#pragma GCC unroll 16
        for (std::size_t i = 0; i < MR; ++i) {
            const T ai = ap[p * MR + i];
#pragma GCC unroll 16
            for (std::size_t v = 0; v < NV; ++v) acc[i][v] += b[v] * ai;
        }
    }
#pragma GCC unroll 16
    for (std::size_t i = 0; i < MR; ++i)
#pragma GCC unroll 16
        for (std::size_t v = 0; v < NV; ++v) store(out + i * NR + v * L, acc[i][v]);
}

/// C tile (mr×nr valid) = alpha * t + (first ? beta * C : C); beta == 0 never reads C. With
/// `bias` (rows of the tile), the first depth block adds bias[i] to row i: a convolution's bias
/// rides along instead of costing a pass over its output.
template <typename T>
EMBER_INLINE void update_c(const T* t, std::size_t tile_stride, std::size_t mr, std::size_t nr,
                           T alpha, T beta, bool first, T* c, std::size_t ldc,
                           const T* bias = nullptr) {
    for (std::size_t i = 0; i < mr; ++i) {
        T* ci = c + i * ldc;
        const T* ti = t + i * tile_stride;
        if (!first) {
            for (std::size_t j = 0; j < nr; ++j) ci[j] += alpha * ti[j];
        } else if (bias) {
            const T b = bias[i];
            if (beta == T(0))
                for (std::size_t j = 0; j < nr; ++j) ci[j] = alpha * ti[j] + b;
            else
                for (std::size_t j = 0; j < nr; ++j) ci[j] = alpha * ti[j] + beta * ci[j] + b;
        } else if (beta == T(0)) {
            for (std::size_t j = 0; j < nr; ++j) ci[j] = alpha * ti[j];
        } else {
            for (std::size_t j = 0; j < nr; ++j) ci[j] = alpha * ti[j] + beta * ci[j];
        }
    }
}

/// C = beta * C (beta == 0 writes zeros, whatever C held).
template <typename T>
void scale_c(std::size_t m, std::size_t n, T beta, T* c, std::size_t ldc) {
    for (std::size_t i = 0; i < m; ++i) {
        T* ci = c + i * ldc;
        if (beta == T(0))
            std::fill(ci, ci + n, T(0));
        else if (beta != T(1))
            for (std::size_t j = 0; j < n; ++j) ci[j] *= beta;
    }
}

/// Straight loops for products too small to repay packing (or a BLAS call).
template <typename T>
void gemm_tiny(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k, T alpha, const T* a,
               std::size_t lda, const T* b, std::size_t ldb, T beta, T* c, std::size_t ldc) {
    const std::size_t a_rs = ta ? 1 : lda, a_cs = ta ? lda : 1;
    if (n < 8 || tb) {
        // Too narrow for a vector across j (or B's rows are strided): one dot product per
        // element, the least loop overhead.
        const std::size_t b_rs = tb ? 1 : ldb, b_cs = tb ? ldb : 1;
        for (std::size_t i = 0; i < m; ++i) {
            const T* ai = a + i * a_rs;
            T* ci = c + i * ldc;
            for (std::size_t j = 0; j < n; ++j) {
                const T* bj = b + j * b_cs;
                T s = T(0);
                for (std::size_t p = 0; p < k; ++p) s += ai[p * a_cs] * bj[p * b_rs];
                ci[j] = beta == T(0) ? alpha * s : alpha * s + beta * ci[j];
            }
        }
        return;
    }
    constexpr std::size_t kMaxN = 64;
    T row[kMaxN];
    for (std::size_t j0 = 0; j0 < n; j0 += kMaxN) {
        const std::size_t nb = std::min(kMaxN, n - j0);
        for (std::size_t i = 0; i < m; ++i) {
            for (std::size_t j = 0; j < nb; ++j) row[j] = T(0);
            for (std::size_t p = 0; p < k; ++p) {
                const T aip = a[i * a_rs + p * a_cs];
                const T* bp = b + p * ldb + j0;
                for (std::size_t j = 0; j < nb; ++j) row[j] += aip * bp[j];
            }
            T* ci = c + i * ldc + j0;
            if (beta == T(0))
                for (std::size_t j = 0; j < nb; ++j) ci[j] = alpha * row[j];
            else
                for (std::size_t j = 0; j < nb; ++j) ci[j] = alpha * row[j] + beta * ci[j];
        }
    }
}

/// Products up to this many multiply-adds take `gemm_tiny` in the portable GEMM.
constexpr std::size_t kTinyWork = 4096;
#if EMBER_CPU_BLAS
/// With BLAS, up to this many (measured: OpenBLAS's fixed cost beats the loops from about
/// 8×8×8 up).
constexpr std::size_t kTinyBlas = 256;
#endif

/// One packed A block against packed B panels: the unit of work handed to threads.
template <typename T>
struct BlockJob {
    const T* apack;
    const T* bpack;
    std::size_t mc, nc, kc;
    T alpha, beta;
    bool first;
    T* c;  ///< C at the block's origin
    std::size_t ldc;
    const T* bias = nullptr;  ///< per row of C, at the block's origin (gemm_packed_b)
};

/// BLIS's jr loop over B panels [p0, p1): the packed A block is swept over each panel, whose
/// B stays in L1.
template <typename T, std::size_t VB>
EMBER_INLINE void block_panels(const BlockJob<T>& j, std::size_t p0, std::size_t p1) {
    using Tl = Tile<T, VB>;
    constexpr std::size_t MR = Tl::MR, NR = Tl::NR;
    alignas(64) T tile[MR * NR];
    for (std::size_t jp = p0; jp < p1; ++jp) {
        const std::size_t j0 = jp * NR, nr = std::min(NR, j.nc - j0);
        const T* bp = j.bpack + j0 * j.kc;
        const T* next = jp + 1 < p1 ? bp + NR * j.kc : nullptr;
        for (std::size_t ir = 0; ir < j.mc; ir += MR) {
            micro_kernel<T, VB>(j.kc, j.apack + ir * j.kc, bp, tile, ir == 0 ? next : nullptr);
            update_c(tile, NR, std::min(MR, j.mc - ir), nr, j.alpha, j.beta, j.first,
                     j.c + ir * j.ldc + j0, j.ldc, j.bias ? j.bias + ir : nullptr);
        }
    }
}

// Out-of-line entry points, one per vector width. Threads reach the kernels through these:
// a lambda does not inherit its enclosing function's target attribute, so the AVX-512 code
// must sit in a function that carries it.
template <typename T>
void block_panels_native(const BlockJob<T>& j, std::size_t p0, std::size_t p1) {
    block_panels<T, kNativeVec>(j, p0, p1);
}
#if EMBER_GEMM_AVX512
template <typename T>
EMBER_AVX512_TARGET void block_panels_avx512(const BlockJob<T>& j, std::size_t p0, std::size_t p1) {
    block_panels<T, 64>(j, p0, p1);
}
#endif
#if EMBER_GEMM_NEON
template <typename T>
void block_panels_portable(const BlockJob<T>& j, std::size_t p0, std::size_t p1) {
    block_panels<T, 0>(j, p0, p1);
}
#endif
#if EMBER_GEMM_AVX2
template <typename T>
EMBER_AVX2_TARGET void block_panels_avx2(const BlockJob<T>& j, std::size_t p0, std::size_t p1) {
    block_panels<T, 32>(j, p0, p1);
}
#endif

/// The blocked GEMM proper (k > 0, alpha != 0, not tiny), for vector width VB. B reaches the
/// kernels only through `pack(kc, pc, nc, jc, p0, p1, out)`, which writes the NR-column panels
/// [p0, p1) of B's block at depth pc and column jc (kc × nc) as pack_b lays them out: from a
/// matrix in memory (gemm), or computed as it is packed (gemm_packed_b: a convolution's im2col).
template <typename T, std::size_t VB, typename PackB>
void blocked_driver(std::size_t m, std::size_t n, std::size_t k, T alpha, const T* a,
                    std::size_t lda, bool ta, const PackB& pack, T beta, T* c, std::size_t ldc,
                    const T* bias, bool parallel, const T* apre = nullptr,
                    const T* bpre = nullptr) {
    using Tl = Tile<T, VB>;
    constexpr std::size_t MR = Tl::MR, NR = Tl::NR;
    void (*panels_fn)(const BlockJob<T>&, std::size_t, std::size_t) = block_panels_native<T>;
#if EMBER_GEMM_AVX512
    if constexpr (VB == 64) panels_fn = block_panels_avx512<T>;
#endif
#if EMBER_GEMM_NEON
    if constexpr (VB == 0) panels_fn = block_panels_portable<T>;
#endif
#if EMBER_GEMM_AVX2
    if constexpr (VB == 32) panels_fn = block_panels_avx2<T>;
#endif
    const std::size_t kc_max = std::min(Tl::KC, k);
    const std::size_t nc_max = std::min(Tl::NC, (n + NR - 1) / NR * NR);
    const std::size_t mc_max = std::min(Tl::MC, (m + MR - 1) / MR * MR);
    Scratch<T> bbuf(bpre ? 0 : kc_max * nc_max), abuf(apre ? 0 : kc_max * mc_max);
    T* const bbuf_p = bbuf.get();
    T* apack = abuf.get();
    // Each parallel chunk should carry enough multiply-adds to repay waking the pool.
    constexpr std::size_t kGrainMadds = std::size_t{1} << 18;

    for (std::size_t jc = 0; jc < n; jc += Tl::NC) {
        const std::size_t nc = std::min(Tl::NC, n - jc);
        const std::size_t panels = (nc + NR - 1) / NR;
        for (std::size_t pc = 0; pc < k; pc += Tl::KC) {
            const std::size_t kc = std::min(Tl::KC, k - pc);
            const T* bpack = bbuf_p;
            if (bpre)  // prepacked_b_whole's block (jc, pc)
                bpack = bpre + jc / Tl::NC * k * ((Tl::NC + NR - 1) / NR * NR) + pc * panels * NR;
            else if (parallel)
                parallel_for(
                    panels, std::max<std::size_t>(1, 16384 / (kc * NR)),
                    [&](std::size_t p0, std::size_t p1) { pack(kc, pc, nc, jc, p0, p1, bbuf_p); });
            else
                pack(kc, pc, nc, jc, std::size_t{0}, panels, bbuf_p);
            for (std::size_t ic = 0; ic < m; ic += Tl::MC) {
                const std::size_t mc = std::min(Tl::MC, m - ic);
                const std::size_t tiles = (mc + MR - 1) / MR;  // MR-row panels of the block
                const T* ablock = apack;
                const T* asrc = ta ? a + pc * lda + ic : a + ic * lda + pc;
                if (apre) {  // packed_a_full's block (ic, pc)
                    ablock = apre + ic * k + pc * tiles * MR;
                } else if (parallel) {
                    // Packed by the pool too: a late ResNet layer's block is 400 KB of weights,
                    // which one thread would pack while the others wait.
                    parallel_for(tiles, std::max<std::size_t>(1, 4096 / (kc * MR)),
                                 [&](std::size_t t0, std::size_t t1) {
                                     const std::size_t r0 = t0 * MR;
                                     pack_a<T, MR>(std::min(mc, t1 * MR) - r0, kc,
                                                   asrc + (ta ? r0 : r0 * lda), lda, ta,
                                                   apack + r0 * kc);
                                 });
                } else {
                    pack_a<T, MR>(mc, kc, asrc, lda, ta, apack);
                }
                const BlockJob<T> job{ablock,
                                      bpack,
                                      mc,
                                      nc,
                                      kc,
                                      alpha,
                                      beta,
                                      pc == 0,
                                      c + ic * ldc + jc,
                                      ldc,
                                      bias ? bias + ic : nullptr};
                if (!parallel) {
                    panels_fn(job, 0, panels);
                    continue;
                }
                // Tasks of a panel × a strip of the block's rows: with few panels (a product of
                // 64 columns: two) the panels alone would leave most of the pool idle.
                const std::size_t want = 2 * num_threads();
                const std::size_t strips =
                    panels >= want ? 1 : std::min(tiles, (want + panels - 1) / panels);
                const std::size_t per = (tiles + strips - 1) / strips;  // row panels a strip
                const std::size_t tasks = panels * ((tiles + per - 1) / per);
                const std::size_t strip_n = (tiles + per - 1) / per;
                parallel_for(tasks, std::max<std::size_t>(1, kGrainMadds / (per * MR * kc * NR)),
                             [&](std::size_t t0, std::size_t t1) {
                                 for (std::size_t t = t0; t < t1; ++t) {
                                     const std::size_t q = t / strip_n,
                                                       r0 = (t % strip_n) * per * MR;
                                     BlockJob<T> sub = job;
                                     sub.apack = job.apack + r0 * kc;
                                     sub.mc = std::min(mc, r0 + per * MR) - r0;
                                     sub.c = job.c + r0 * ldc;
                                     if (sub.bias) sub.bias = job.bias + r0;
                                     panels_fn(sub, q, q + 1);
                                 }
                             });
            }
        }
    }
}

template <typename T, std::size_t VB>
void gemm_blocked_body(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k, T alpha,
                       const T* a, std::size_t lda, const T* b, std::size_t ldb, T beta, T* c,
                       std::size_t ldc, bool parallel) {
    constexpr std::size_t NR = Tile<T, VB>::NR;
    const auto pack = [&](std::size_t kc, std::size_t pc, std::size_t nc, std::size_t jc,
                          std::size_t p0, std::size_t p1, T* out) {
        const T* bsrc = tb ? b + jc * ldb + pc : b + pc * ldb + jc;
        pack_b<T, NR>(kc, nc, p0, p1, bsrc, ldb, tb, out);
    };
    blocked_driver<T, VB>(m, n, k, alpha, a, lda, ta, pack, beta, c, ldc, nullptr, parallel);
}

/// All of op(B) (k × n) packed as blocked_driver packs its blocks: block (jc, pc) at
/// out + (jc / NC)·k·round_up(NC, NR) + pc·round_up(nc, NR), nc the block's columns.
template <typename T, std::size_t VB>
std::size_t prepacked_b_size(std::size_t k, std::size_t n) {
    using Tl = Tile<T, VB>;
    constexpr std::size_t NR = Tl::NR, ncp = (Tl::NC + Tl::NR - 1) / Tl::NR * Tl::NR;
    const std::size_t full = n / Tl::NC, rest = n % Tl::NC;
    return k * (full * ncp + (rest + NR - 1) / NR * NR);
}

template <typename T, std::size_t VB>
void prepack_b_whole(bool tb, std::size_t k, std::size_t n, const T* b, std::size_t ldb, T* out) {
    using Tl = Tile<T, VB>;
    constexpr std::size_t NR = Tl::NR, ncp = (Tl::NC + Tl::NR - 1) / Tl::NR * Tl::NR;
    for (std::size_t jc = 0; jc < n; jc += Tl::NC) {
        const std::size_t nc = std::min(Tl::NC, n - jc);
        const std::size_t panels = (nc + NR - 1) / NR;
        for (std::size_t pc = 0; pc < k; pc += Tl::KC) {
            const std::size_t kc = std::min(Tl::KC, k - pc);
            const T* bsrc = tb ? b + jc * ldb + pc : b + pc * ldb + jc;
            pack_b<T, NR>(kc, nc, 0, panels, bsrc, ldb, tb,
                          out + jc / Tl::NC * k * ncp + pc * panels * NR);
        }
    }
}

template <typename T, std::size_t VB>
void prepacked_body(bool ta, std::size_t m, std::size_t n, std::size_t k, T alpha, const T* a,
                    std::size_t lda, const T* bpre, T beta, T* c, std::size_t ldc, bool parallel) {
    const auto no_pack = [](std::size_t, std::size_t, std::size_t, std::size_t, std::size_t,
                            std::size_t, T*) {};
    blocked_driver<T, VB>(m, n, k, alpha, a, lda, ta, no_pack, beta, c, ldc, nullptr, parallel,
                          nullptr, bpre);
}

/// All of A (m × k, row-major) packed as blocked_driver packs its blocks, block (ic, pc) at
/// out + ic·k + pc·(its rows rounded up to MR): round_up(m, MR)·k values.
template <typename T, std::size_t VB>
void packed_a_full(std::size_t m, std::size_t k, const T* a, std::size_t lda, T* out,
                   bool parallel) {
    using Tl = Tile<T, VB>;
    // One task a block (ic, pc): 27 for a late ResNet layer's 512 × 4608 weights.
    const std::size_t kb = (k + Tl::KC - 1) / Tl::KC, mb = (m + Tl::MC - 1) / Tl::MC;
    auto blocks = [&](std::size_t b0, std::size_t b1) {
        for (std::size_t bi = b0; bi < b1; ++bi) {
            const std::size_t ic = bi / kb * Tl::MC, pc = bi % kb * Tl::KC;
            const std::size_t mc = std::min(Tl::MC, m - ic);
            const std::size_t mcp = (mc + Tl::MR - 1) / Tl::MR * Tl::MR;
            pack_a<T, Tl::MR>(mc, std::min(Tl::KC, k - pc), a + ic * lda + pc, lda, false,
                              out + ic * k + pc * mcp);
        }
    };
    if (parallel)
        parallel_for(mb * kb, 1, blocks);
    else
        blocks(0, mb * kb);
}

/// gemm_packed_b's product for vector width VB: the packer's panels NR wide; A packed here, or
/// already by packed_a_full (`apre`).
template <typename T, std::size_t VB>
void packed_b_body(std::size_t m, std::size_t n, std::size_t k, const T* a, std::size_t lda,
                   const PanelPacker<T>& b, const T* bias, T* c, std::size_t ldc, bool parallel,
                   const T* apre) {
    constexpr std::size_t NR = Tile<T, VB>::NR;
    const auto pack = [&](std::size_t kc, std::size_t pc, std::size_t nc, std::size_t jc,
                          std::size_t p0, std::size_t p1, T* out) {
        b.fn(b.ctx, PanelBlock{pc, kc, jc, nc, p0, p1, NR}, out);
    };
    blocked_driver<T, VB>(m, n, k, T(1), a, lda, false, pack, T(0), c, ldc, bias, parallel, apre);
}

/// R rows (R <= MR) of the small-depth product for one NR-column block: rows of the packed A
/// panel `ap` (MR-strided), B rows `bj` with stride `bs`, bias (R values), C at `c`. Writes
/// only the first `nr` columns.
template <typename T, std::size_t VB, std::size_t R>
EMBER_INLINE void small_k_rows(std::size_t k, const T* __restrict ap, const T* __restrict bj,
                               std::size_t bs, const T* bias, T* __restrict c, std::size_t ldc,
                               std::size_t nr) {
    using V = Vec<T, VB>;
    using Tl = Tile<T, VB>;
    constexpr std::size_t MR = Tl::MR, NR = Tl::NR, NV = Tl::NV, L = Tl::kLanes;
    V acc[R][NV];
#pragma GCC unroll 16
    for (std::size_t i = 0; i < R; ++i)
#pragma GCC unroll 16
        for (std::size_t v = 0; v < NV; ++v) acc[i][v] = V{} + bias[i];
    for (std::size_t p = 0; p < k; ++p) {
        V bv[NV];
#pragma GCC unroll 16
        for (std::size_t v = 0; v < NV; ++v) load(bv[v], bj + p * bs + v * L);
#pragma GCC unroll 16
        for (std::size_t i = 0; i < R; ++i) {
            const T ai = ap[p * MR + i];
#pragma GCC unroll 16
            for (std::size_t v = 0; v < NV; ++v) acc[i][v] += bv[v] * ai;
        }
    }
    if (nr == NR) {
#pragma GCC unroll 16
        for (std::size_t i = 0; i < R; ++i)
#pragma GCC unroll 16
            for (std::size_t v = 0; v < NV; ++v) store(c + i * ldc + v * L, acc[i][v]);
    } else {
        alignas(64) T tile[R * NR];
#pragma GCC unroll 16
        for (std::size_t i = 0; i < R; ++i)
#pragma GCC unroll 16
            for (std::size_t v = 0; v < NV; ++v) store(tile + i * NR + v * L, acc[i][v]);
        for (std::size_t i = 0; i < R; ++i)
            for (std::size_t j = 0; j < nr; ++j) c[i * ldc + j] = tile[i * NR + j];
    }
}

/// Dispatches the last panel's row count, known only at run time, to small_k_rows<R>.
template <typename T, std::size_t VB, std::size_t R = Tile<T, VB>::MR - 1>
EMBER_INLINE void small_k_tail(std::size_t rows, std::size_t k, const T* ap, const T* bj,
                               std::size_t bs, const T* bias, T* c, std::size_t ldc,
                               std::size_t nr) {
    if constexpr (R > 0) {
        if (rows == R) return small_k_rows<T, VB, R>(k, ap, bj, bs, bias, c, ldc, nr);
        small_k_tail<T, VB, R - 1>(rows, k, ap, bj, bs, bias, c, ldc, nr);
    }
}

/// The small-depth product proper (k >= 1), for vector width VB.
template <typename T, std::size_t VB>
EMBER_INLINE void small_k_body(std::size_t m, std::size_t n, std::size_t k, const T* a,
                               std::size_t lda, const T* b, std::size_t ldb, const T* bias, T* c,
                               std::size_t ldc) {
    using Tl = Tile<T, VB>;
    constexpr std::size_t MR = Tl::MR, NR = Tl::NR;
    // A is small (m × k): packed into MR-row panels, with the bias beside it and room for
    // B's ragged last column block (B is otherwise read in place, row stride ldb).
    const std::size_t mp = (m + MR - 1) / MR * MR;
    const std::size_t n_full = n / NR * NR;
    Scratch<T> abuf(mp * k + mp + (n_full < n ? k * NR : 0));
    T* ap = abuf.get();
    T* bp = ap + mp * k;
    T* btail = bp + mp;
    pack_a<T, MR>(m, k, a, lda, false, ap);
    for (std::size_t i = 0; i < mp; ++i) bp[i] = (bias && i < m) ? bias[i] : T(0);

    if (n_full < n) {
        for (std::size_t p = 0; p < k; ++p) {
            for (std::size_t j = n_full; j < n; ++j) btail[p * NR + j - n_full] = b[p * ldb + j];
            for (std::size_t j = n - n_full; j < NR; ++j) btail[p * NR + j] = T(0);
        }
    }
    // Row panels outside, columns inside: B (k × n, small) stays in L1 across panels while
    // each C row is written front to back.
    for (std::size_t ir = 0; ir < m; ir += MR) {
        const std::size_t rows = std::min(MR, m - ir);
        const T* apanel = ap + ir * k;
        T* crow = c + ir * ldc;
        for (std::size_t j0 = 0; j0 < n; j0 += NR) {
            const bool tail = j0 >= n_full;
            const T* bj = tail ? btail : b + j0;
            const std::size_t bs = tail ? NR : ldb, nr = tail ? n - n_full : NR;
            if (rows == MR)
                small_k_rows<T, VB, MR>(k, apanel, bj, bs, bp + ir, crow + j0, ldc, nr);
            else
                small_k_tail<T, VB>(rows, k, apanel, bj, bs, bp + ir, crow + j0, ldc, nr);
        }
    }
}

/// EMBER_CPU_ISA=baseline: the build's own vector width only (tests of the portable build's
/// baseline kernels, comparisons).
[[maybe_unused]] bool baseline_forced() {
    const char* e = std::getenv("EMBER_CPU_ISA");
    return e && std::strcmp(e, "baseline") == 0;
}

#if EMBER_GEMM_AVX2
bool has_avx2() {
    static const bool yes = [] {
        if (baseline_forced()) return false;
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    }();
    return yes;
}

template <typename T>
EMBER_AVX2_TARGET void small_k_avx2(std::size_t m, std::size_t n, std::size_t k, const T* a,
                                    std::size_t lda, const T* b, std::size_t ldb, const T* bias,
                                    T* c, std::size_t ldc) {
    small_k_body<T, 32>(m, n, k, a, lda, b, ldb, bias, c, ldc);
}
#endif

#if EMBER_GEMM_AVX512
bool has_avx512() {
    static const bool yes = [] {
        if (baseline_forced()) return false;
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw");
    }();
    return yes;
}

template <typename T>
EMBER_AVX512_TARGET void small_k_avx512(std::size_t m, std::size_t n, std::size_t k, const T* a,
                                        std::size_t lda, const T* b, std::size_t ldb, const T* bias,
                                        T* c, std::size_t ldc) {
    small_k_body<T, 64>(m, n, k, a, lda, b, ldb, bias, c, ldc);
}
#endif

// ---- C = A·Bᵀ with few rows or columns: dot products of contiguous rows -------------------
// With A [m, k] and B [n, k] both row-major, every entry of C is a dot product of two
// contiguous rows. The blocked path would transpose B into panels first, and when m or n is
// small (a convolution's weight gradient: m = out channels, n = in channels × kernel size,
// k = output pixels) that transpose and the padding of thin panels cost more than the
// product. Here nothing is packed: an RI×RJ tile of rows is multiplied in registers.

/// The dot-product path's arguments (one struct, so that the AVX-512 copy has a plain ABI).
template <typename T>
struct DotJob {
    std::size_t m, n, k;
    T alpha, beta;
    const T* a;
    std::size_t lda;
    const T* b;
    std::size_t ldb;
    T* c;
    std::size_t ldc;
};

template <typename T, std::size_t VB>
struct DotTile {
    static constexpr std::size_t kLanes = VB ? VB / sizeof(T) : 1;
    static constexpr std::size_t RI = 4;
    static constexpr std::size_t RJ = VB == 64 ? 4 : 3;  // accumulators + operands in registers
};

template <typename T, std::size_t VB>
EMBER_INLINE void dot_tiles_body(const DotJob<T>& j, std::size_t t0, std::size_t t1) {
    using V = Vec<T, VB>;
    using Dt = DotTile<T, VB>;
    constexpr std::size_t L = Dt::kLanes, RI = Dt::RI, RJ = Dt::RJ;
    const std::size_t tiles_j = (j.n + RJ - 1) / RJ, kv = j.k - j.k % L;
    for (std::size_t t = t0; t < t1; ++t) {
        const std::size_t i0 = (t / tiles_j) * RI, j0 = (t % tiles_j) * RJ;
        // Edge tiles repeat the last row instead of branching in the loop; those sums are
        // dropped.
        const T* ar[RI];
        const T* br[RJ];
        for (std::size_t i = 0; i < RI; ++i) ar[i] = j.a + std::min(i0 + i, j.m - 1) * j.lda;
        for (std::size_t q = 0; q < RJ; ++q) br[q] = j.b + std::min(j0 + q, j.n - 1) * j.ldb;
        V acc[RI][RJ];
#pragma GCC unroll 16
        for (std::size_t i = 0; i < RI; ++i)
#pragma GCC unroll 16
            for (std::size_t q = 0; q < RJ; ++q) acc[i][q] = V{} + T(0);
        for (std::size_t p = 0; p < kv; p += L) {
            V bv[RJ];
#pragma GCC unroll 16
            for (std::size_t q = 0; q < RJ; ++q) load(bv[q], br[q] + p);
#pragma GCC unroll 16
            for (std::size_t i = 0; i < RI; ++i) {
                V av;
                load(av, ar[i] + p);
#pragma GCC unroll 16
                for (std::size_t q = 0; q < RJ; ++q) acc[i][q] += av * bv[q];
            }
        }
        for (std::size_t i = 0; i < RI && i0 + i < j.m; ++i)
            for (std::size_t q = 0; q < RJ && j0 + q < j.n; ++q) {
                T sum = T(0);
                if constexpr (VB == 0)
                    sum = acc[i][q];
                else
                    for (std::size_t l = 0; l < L; ++l) sum += acc[i][q][l];
                for (std::size_t p = kv; p < j.k; ++p) sum += ar[i][p] * br[q][p];
                T& out = j.c[(i0 + i) * j.ldc + j0 + q];
                out = j.beta == T(0) ? j.alpha * sum : j.alpha * sum + j.beta * out;
            }
    }
}

template <typename T>
void dot_tiles_native(const DotJob<T>& j, std::size_t t0, std::size_t t1) {
    dot_tiles_body<T, kNativeVec>(j, t0, t1);
}
#if EMBER_GEMM_NEON
template <typename T>
void dot_tiles_portable(const DotJob<T>& j, std::size_t t0, std::size_t t1) {
    dot_tiles_body<T, 0>(j, t0, t1);
}
#endif

#if EMBER_GEMM_AVX512
template <typename T>
EMBER_AVX512_TARGET void dot_tiles_avx512(const DotJob<T>& j, std::size_t t0, std::size_t t1) {
    dot_tiles_body<T, 64>(j, t0, t1);
}
#endif
#if EMBER_GEMM_AVX2
template <typename T>
EMBER_AVX2_TARGET void dot_tiles_avx2(const DotJob<T>& j, std::size_t t0, std::size_t t1) {
    dot_tiles_body<T, 32>(j, t0, t1);
}
#endif

/// Whether C = A·Bᵀ goes through dot products: one side thin enough that packing would
/// dominate, and rows long enough to fill vectors.
bool dot_preferred(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k) {
    return !ta && tb && std::min(m, n) <= 64 && k >= 64;
}

template <typename T>
void gemm_dot(std::size_t m, std::size_t n, std::size_t k, T alpha, const T* a, std::size_t lda,
              const T* b, std::size_t ldb, T beta, T* c, std::size_t ldc, bool parallel) {
    const DotJob<T> job{m, n, k, alpha, beta, a, lda, b, ldb, c, ldc};
    void (*tiles_fn)(const DotJob<T>&, std::size_t, std::size_t) = dot_tiles_native<T>;
    std::size_t ri = DotTile<T, kNativeVec>::RI, rj = DotTile<T, kNativeVec>::RJ;
#if EMBER_GEMM_AVX2
    if (has_avx2()) {
        tiles_fn = dot_tiles_avx2<T>;
        ri = DotTile<T, 32>::RI;
        rj = DotTile<T, 32>::RJ;
    }
#endif
#if EMBER_GEMM_AVX512
    if (has_avx512()) {
        tiles_fn = dot_tiles_avx512<T>;
        ri = DotTile<T, 64>::RI;
        rj = DotTile<T, 64>::RJ;
    }
#endif
#if EMBER_GEMM_NEON
    if (!neon_enabled()) {
        tiles_fn = dot_tiles_portable<T>;
        ri = DotTile<T, 0>::RI;
        rj = DotTile<T, 0>::RJ;
    }
#endif
    const std::size_t tiles = ((m + ri - 1) / ri) * ((n + rj - 1) / rj);
    if (!parallel) return tiles_fn(job, 0, tiles);
    constexpr std::size_t kGrainMadds = std::size_t{1} << 17;
    parallel_for(tiles, std::max<std::size_t>(1, kGrainMadds / (ri * rj * k)),
                 [&](std::size_t t0, std::size_t t1) { tiles_fn(job, t0, t1); });
}

/// C = alpha·op(A)·B + beta·C for a few rows of A and a row-major B: each row of C is a sum of
/// rows of B scaled by that row of A. A vector-matrix product (a single input through a linear
/// layer, as firmware runs it) would otherwise pack B whole, as much memory as B itself. Its
/// time is B's trip from memory, so in parallel the threads take strips of columns: each reads
/// its own part of every row of B (a batch-1 Linear of 784 × 512 is 1.6 MB of weights).
template <typename T>
void gemm_rows(bool ta, std::size_t m, std::size_t n, std::size_t k, T alpha, const T* a,
               std::size_t lda, const T* b, std::size_t ldb, T beta, T* c, std::size_t ldc,
               bool parallel) {
    const std::size_t a_rs = ta ? 1 : lda, a_cs = ta ? lda : 1;
    constexpr std::size_t kStrip = 128 / sizeof(T);
    // One row of C over columns [j0, j1): C's values start as beta·C (or zero) and gain
    // alpha·a[p]·B[p][j] for p in order, the same sums in the same order for any strip.
    auto row_span = [&](std::size_t i, std::size_t j0, std::size_t j1) {
        T* __restrict ci = c + i * ldc;
        if (beta == T(0))
            std::fill(ci + j0, ci + j1, T(0));
        else if (beta != T(1))
            for (std::size_t j = j0; j < j1; ++j) ci[j] *= beta;
        for (std::size_t p = 0; p < k; ++p) {
            const T s = alpha * a[i * a_rs + p * a_cs];
            const T* __restrict bp = b + p * ldb;
            for (std::size_t j = j0; j < j1; ++j) ci[j] += s * bp[j];
        }
    };
    // A whole strip of every row (m is 1 or 2 here): their sums stay in registers over all of k
    // (loops of fixed length the compiler keeps in vector registers), and each strip of B is
    // read once for both rows (row_span, for a last narrow strip, loads and stores C at each p,
    // a chain through memory at every step).
    auto rows_strip = [&](std::size_t j0) {
        T acc[2][kStrip];
        for (std::size_t i = 0; i < m; ++i) {
            const T* ci = c + i * ldc + j0;
            for (std::size_t j = 0; j < kStrip; ++j)
                acc[i][j] = beta == T(0) ? T(0) : (beta == T(1) ? ci[j] : ci[j] * beta);
        }
        if (m == 2) {
            for (std::size_t p = 0; p < k; ++p) {
                const T s0 = alpha * a[p * a_cs], s1 = alpha * a[a_rs + p * a_cs];
                const T* __restrict bp = b + p * ldb + j0;
                for (std::size_t j = 0; j < kStrip; ++j) {
                    acc[0][j] += s0 * bp[j];
                    acc[1][j] += s1 * bp[j];
                }
            }
        } else {
            for (std::size_t p = 0; p < k; ++p) {
                const T s0 = alpha * a[p * a_cs];
                const T* __restrict bp = b + p * ldb + j0;
                for (std::size_t j = 0; j < kStrip; ++j) acc[0][j] += s0 * bp[j];
            }
        }
        for (std::size_t i = 0; i < m; ++i) std::copy(acc[i], acc[i] + kStrip, c + i * ldc + j0);
    };
    auto columns = [&](std::size_t j0, std::size_t j1) {
        std::size_t j = j0;
        for (; j + kStrip <= j1; j += kStrip) rows_strip(j);
        if (j < j1)
            for (std::size_t i = 0; i < m; ++i) row_span(i, j, j1);
    };
    // Strips of two cache lines, and at least 2^16 multiply-adds a task: below that a thread's
    // wake-up costs more than its share saves. On the GPU machine's Xeon a 784 × 512 product
    // (16 strips) took 9 µs on 8 threads but 35 on 16, each then with one strip
    // (results/cpu-pool-lock-ab-2026-12-01-h200.jsonl, pool threads spinning).
    const std::size_t strips = (n + kStrip - 1) / kStrip;
    const std::size_t per_strip = m * k * kStrip;
    if (!parallel || strips < 2 || m * n * k < (std::size_t{1} << 17)) return columns(0, n);
    parallel_for(
        strips, std::max<std::size_t>(1, (std::size_t{1} << 16) / per_strip),
        [&](std::size_t s0, std::size_t s1) { columns(s0 * kStrip, std::min(n, s1 * kStrip)); });
}

template <typename T>
void gemm_blocked(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k, T alpha,
                  const T* a, std::size_t lda, const T* b, std::size_t ldb, T beta, T* c,
                  std::size_t ldc, bool parallel) {
    if (m == 0 || n == 0) return;
    if (k == 0 || alpha == T(0)) {
        scale_c(m, n, beta, c, ldc);
        return;
    }
    if (m * n * k <= kTinyWork) {
        gemm_tiny(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        return;
    }
    if (dot_preferred(ta, tb, m, n, k))
        return gemm_dot(m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, parallel);
    if (m <= 2 && !tb) return gemm_rows(ta, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, parallel);
#if EMBER_GEMM_AVX512
    if (has_avx512())
        return gemm_blocked_body<T, 64>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc,
                                        parallel);
#endif
#if EMBER_GEMM_NEON
    if (!neon_enabled())
        return gemm_blocked_body<T, 0>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc,
                                       parallel);
#endif
#if EMBER_GEMM_AVX2
    if (has_avx2())
        return gemm_blocked_body<T, 32>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc,
                                        parallel);
#endif
    gemm_blocked_body<T, kNativeVec>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc,
                                     parallel);
}

/// The vector width of the portable GEMM's kernels on this CPU.
std::size_t kernel_width() {
#if EMBER_GEMM_AVX512
    if (has_avx512()) return 64;
#endif
#if EMBER_GEMM_NEON
    if (!neon_enabled()) return 0;
#endif
#if EMBER_GEMM_AVX2
    if (has_avx2()) return 32;
#endif
    return kNativeVec;
}

/// Calls f(std::integral_constant<std::size_t, VB>) with the kernels' width on this CPU.
template <typename F>
void by_kernel_width(F&& f) {
    switch (kernel_width()) {
#if EMBER_GEMM_AVX512
        case 64:
            return f(std::integral_constant<std::size_t, 64>{});
#endif
#if EMBER_GEMM_NEON
        case 0:
            return f(std::integral_constant<std::size_t, 0>{});
#endif
#if EMBER_GEMM_AVX2
        case 32:
            return f(std::integral_constant<std::size_t, 32>{});
#endif
        default:
            return f(std::integral_constant<std::size_t, kNativeVec>{});
    }
}

template <typename T>
void packed_b_impl(std::size_t m, std::size_t n, std::size_t k, const T* a, std::size_t lda,
                   const PanelPacker<T>& b, const T* bias, T* c, std::size_t ldc, bool parallel,
                   const T* apre) {
    if (m == 0 || n == 0) return;
    if (k == 0) {
        for (std::size_t i = 0; i < m; ++i)
            std::fill(c + i * ldc, c + i * ldc + n, bias ? bias[i] : T(0));
        return;
    }
    by_kernel_width([&](auto vb) {
        packed_b_body<T, decltype(vb)::value>(m, n, k, a, lda, b, bias, c, ldc, parallel, apre);
    });
}

template <typename T>
void pack_a_impl(std::size_t m, std::size_t k, const T* a, std::size_t lda, T* out, bool parallel) {
    by_kernel_width(
        [&](auto vb) { packed_a_full<T, decltype(vb)::value>(m, k, a, lda, out, parallel); });
}

template <typename T>
PackedB prepack_b_impl(bool tb, std::size_t k, std::size_t n, const T* b, std::size_t ldb) {
    PackedB out;
    out.k = k;
    out.n = n;
    out.width = kernel_width();
    by_kernel_width([&](auto vb) {
        constexpr std::size_t VB = decltype(vb)::value;
        out.buf = allocate(prepacked_b_size<T, VB>(k, n) * sizeof(T));
        prepack_b_whole<T, VB>(tb, k, n, b, ldb, static_cast<T*>(out.buf->data));
    });
    return out;
}

template <typename T>
void prepacked_impl(bool ta, std::size_t m, std::size_t n, std::size_t k, T alpha, const T* a,
                    std::size_t lda, const PackedB& b, T beta, T* c, std::size_t ldc,
                    bool parallel) {
    EMBER_CHECK(b.k == k && b.n == n && b.width == kernel_width(), Generic,
                "CPU GEMM: prepacked B of ", b.k, " x ", b.n, " for a product of ", k, " x ", n);
    if (m == 0 || n == 0) return;
    if (k == 0 || alpha == T(0)) {
        scale_c(m, n, beta, c, ldc);
        return;
    }
    by_kernel_width([&](auto vb) {
        prepacked_body<T, decltype(vb)::value>(
            ta, m, n, k, alpha, a, lda, static_cast<const T*>(b.buf->data), beta, c, ldc, parallel);
    });
}

template <typename T>
void small_k_impl(std::size_t m, std::size_t n, std::size_t k, const T* a, std::size_t lda,
                  const T* b, std::size_t ldb, const T* bias, T* c, std::size_t ldc) {
    if (m == 0 || n == 0) return;
    if (k == 0) {
        for (std::size_t i = 0; i < m; ++i)
            std::fill(c + i * ldc, c + i * ldc + n, bias ? bias[i] : T(0));
        return;
    }
#if EMBER_GEMM_AVX512
    if (has_avx512()) return small_k_avx512(m, n, k, a, lda, b, ldb, bias, c, ldc);
#endif
#if EMBER_GEMM_NEON
    if (!neon_enabled()) return small_k_body<T, 0>(m, n, k, a, lda, b, ldb, bias, c, ldc);
#endif
#if EMBER_GEMM_AVX2
    if (has_avx2()) return small_k_avx2(m, n, k, a, lda, b, ldb, bias, c, ldc);
#endif
    small_k_body<T, kNativeVec>(m, n, k, a, lda, b, ldb, bias, c, ldc);
}

/// Case-insensitive equality (the values of EMBER_CPU_GEMM and EMBER_CPU_CONV).
bool same_name(const char* a, const char* b) {
    for (; *a && *b; ++a, ++b)
        if (std::tolower(static_cast<unsigned char>(*a)) !=
            std::tolower(static_cast<unsigned char>(*b)))
            return false;
    return *a == *b;
}

#if EMBER_CPU_BLAS
// cblas takes int dims.
bool fits_blas(std::size_t m, std::size_t n, std::size_t k, std::size_t lda, std::size_t ldb,
               std::size_t ldc) {
    constexpr std::size_t lim = INT_MAX;
    return m <= lim && n <= lim && k <= lim && lda <= lim && ldb <= lim && ldc <= lim;
}

/// Whether OpenBLAS is the faster GEMM here. OpenBLAS picks its kernels from a table of CPU
/// models; a CPU newer than the table gets a generic core (0.3.21 runs SSE3 "Prescott" kernels
/// on Emerald Rapids, at a third of what the AVX2 kernel here reaches, a sixth of its AVX-512
/// one). EMBER_CPU_GEMM=blas or =portable overrides the choice.
bool blas_preferred() {
    static const bool yes = [] {
        if (const char* e = std::getenv("EMBER_CPU_GEMM")) {
            if (same_name(e, "blas")) return true;
            if (same_name(e, "portable")) return false;
        }
#if defined(OPENBLAS_VERSION) && defined(__x86_64__) && \
    (EMBER_GEMM_VEC_BYTES >= 32 || EMBER_GEMM_AVX2)
#if EMBER_GEMM_AVX2
        if (!has_avx2()) return true;  // the portable build's own kernels are SSE2 here
#endif
        const char* core = openblas_get_corename();
        if (!core) return true;
        for (const char* c : {"SkylakeX", "Cooperlake", "SapphireRapids"})
            if (same_name(core, c)) return true;
        for (const char* c : {"Haswell", "Zen"}) {
            if (same_name(core, c)) {
#if EMBER_GEMM_AVX512
                return !has_avx512();
#else
                return EMBER_GEMM_VEC_BYTES < 64;
#endif
            }
        }
        return false;  // an older generic core: the AVX2 build's own kernels beat it
#else
        return true;
#endif
    }();
    return yes;
}

bool use_blas(std::size_t m, std::size_t n, std::size_t k, std::size_t lda, std::size_t ldb,
              std::size_t ldc) {
    return m != 0 && n != 0 && k != 0 && m * n * k > kTinyBlas &&
           fits_blas(m, n, k, lda, ldb, ldc) && blas_preferred();
}

/// cblas rejects leading dims below the row length even where they are never used (a single
/// row or column), which a view of a size-1 dim may carry.
void fix_lds(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k, std::size_t& lda,
             std::size_t& ldb, std::size_t& ldc) {
    lda = std::max<std::size_t>(lda, std::max<std::size_t>(1, ta ? m : k));
    ldb = std::max<std::size_t>(ldb, std::max<std::size_t>(1, tb ? k : n));
    ldc = std::max<std::size_t>(ldc, std::max<std::size_t>(1, n));
}
#endif

}  // namespace

bool gemm_uses_blas() {
#if EMBER_CPU_BLAS
    return blas_preferred();
#else
    return false;
#endif
}

bool conv_packs_im2col() {
    // Read at each call, not once: a convolution takes milliseconds, getenv well under a
    // microsecond, and tests and benchmarks switch between the two ways in one process.
    if (const char* e = std::getenv("EMBER_CPU_CONV")) {
        if (same_name(e, "packed")) return true;
        if (same_name(e, "im2col")) return false;
    }
    // Where OpenBLAS runs the products, im2col + OpenBLAS: on a Zen 5 core packing took the
    // ResNet-18 3×3 forward layers 5-24% less time than OpenBLAS 0.3.21's Cooperlake kernels,
    // but on the GPU machine's 16-CPU Xeon at 16 threads it lost (ResNet-18 training step at
    // batch 64: 499 and 494 ms packed against 375 and 457 im2col; batch-1 inference 11.3 and
    // 9.8 ms against 6.6 and 5.8; results/cpu-conv-ab-2026-11-30-h200.jsonl).
    return !gemm_uses_blas();
}

void gemm_portable(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k, float alpha,
                   const float* a, std::size_t lda, const float* b, std::size_t ldb, float beta,
                   float* c, std::size_t ldc, bool parallel) {
    gemm_blocked(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, parallel);
}

void gemm_portable(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k, double alpha,
                   const double* a, std::size_t lda, const double* b, std::size_t ldb, double beta,
                   double* c, std::size_t ldc, bool parallel) {
    gemm_blocked(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, parallel);
}

#if EMBER_CPU_BLAS
namespace {

/// Who threads a product OpenBLAS runs (EMBER_CPU_BLAS_THREADS): ember's pool by default, each
/// of its threads calling single-threaded OpenBLAS on a tile of C ("pool"), or OpenBLAS's own
/// pool, sized like ember's ("openblas"). OpenBLAS's threads spin (sched_yield) for a while after
/// each threaded call; with two pools they spun while ember's threads ran the next op on the
/// same cores (on 2 cores, a ResNet-18 step made 67 000 sched_yield calls a step that way).
bool blas_threads_own() {
    static const bool own = [] {
        const char* e = std::getenv("EMBER_CPU_BLAS_THREADS");
        return e && same_name(e, "openblas");
    }();
    return own;
}

/// Products whose three sides (m, n and k) are all at least this long go to OpenBLAS threaded
/// by its own pool (sized like ember's) even by default (EMBER_CPU_BLAS_THREADED_DIM, default
/// 1024; 0: none, every product in tiles on ember's pool). On the 16-CPU Xeon of the GPU
/// machines, tiles lost on large square products (1024³ at 487 GFLOP/s in 16 tiles against
/// 868 threaded by OpenBLAS, 4096³ at 868 against 1137: cpu-scale-2026-11-30-h200.jsonl), but
/// won on the training steps, whose products have a side under 1024 (the GPT's 768-wide
/// layers, ResNet's 512 channels): with every product of 2^29 multiply-adds or more threaded by
/// OpenBLAS the GPT step took 773 ms against 700 in tiles and ResNet-18's 324 against 279, while
/// the square products matched OpenBLAS (cpu-scale-2026-11-30b-h200.jsonl).
std::size_t blas_threaded_dim() {
    static const std::size_t dim = [] {
        const char* e = std::getenv("EMBER_CPU_BLAS_THREADED_DIM");
        return e ? static_cast<std::size_t>(std::strtoull(e, nullptr, 10)) : std::size_t{1024};
    }();
    return dim;
}

/// Sets OpenBLAS's thread count where it differs (read each time, not cached: a program may set
/// it itself, as bench_cpu does for its OpenBLAS rows).
void set_blas_threads(int want) {
    if (openblas_get_num_threads() != want) openblas_set_num_threads(want);
}

/// C's split into tiles for the pool: rows into `tm` bands, columns into `tn`, one tile a
/// chunk. Each tile's product packs its own rows of A and columns of B, so the grid is the
/// one that minimises a tile's multiply-adds plus packing (about 16 multiply-adds' time an
/// element packed), using at most `threads` tiles of 2^21 multiply-adds or more on average.
/// Not smaller: OpenBLAS runs products of up to 10^6 multiply-adds through other kernels on
/// AVX-512 cores (its small-matrix path), which sum in another order than the blocked ones, so
/// smaller tiles made results depend on the thread count (a convolution's weight gradient by
/// 5e-5 at 8 threads against 1, test_cpu_threads.cpp).
struct Tiles {
    std::size_t tm = 1, tn = 1;
};
Tiles blas_tiles(std::size_t m, std::size_t n, std::size_t k, std::size_t threads) {
    Tiles best;
    const double work = double(m) * double(n) * double(k);
    const std::size_t most =
        std::min<std::size_t>(threads, static_cast<std::size_t>(work / double(1 << 21)));
    if (most < 2) return best;
    double best_cost = work + 16.0 * double(k) * double(m + n);
    for (std::size_t tm = 1; tm <= most; ++tm) {
        const std::size_t tn = most / tm;
        if ((tm > 1 && m / tm < 16) || (tn > 1 && n / tn < 16)) continue;
        const double rows = double((m + tm - 1) / tm), cols = double((n + tn - 1) / tn);
        const double cost = rows * cols * double(k) + 16.0 * double(k) * (rows + cols);
        if (cost < best_cost) {
            best_cost = cost;
            best = {tm, tn};
        }
    }
    return best;
}

/// Tile boundary i of `parts` over `len`, rounded down to 16 (the kernels' tile) inside.
std::size_t tile_edge(std::size_t len, std::size_t parts, std::size_t i) {
    if (i >= parts) return len;
    return len * i / parts / 16 * 16;
}

/// The BLAS call for C = alpha·op(A)·op(B) + beta·C: on ember's pool in tiles when `parallel`
/// allows it (blas_tiles), else one call; OpenBLAS single-threaded either way; with
/// EMBER_CPU_BLAS_THREADS=openblas, or for a product whose sides are all blas_threaded_dim() or
/// more, one call threaded by OpenBLAS as the pool is sized.
/// `call(m, n, k, a, b, c)` runs one product (op(A) m × k at a, op(B) k × n at b, C at c) with
/// the caller's transposes, alpha, beta and leading dims.
template <typename T, typename Call>
void blas_product(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k, const T* a,
                  std::size_t lda, const T* b, std::size_t ldb, T* c, std::size_t ldc,
                  bool parallel, Call&& call) {
    const std::size_t side = blas_threaded_dim();
    if (blas_threads_own() || (parallel && side > 0 && std::min({m, n, k}) >= side)) {
        set_blas_threads(parallel ? static_cast<int>(num_threads()) : 1);
        call(m, n, k, a, b, c);
        return;
    }
    const Tiles t = parallel ? blas_tiles(m, n, k, num_threads()) : Tiles{};
    set_blas_threads(1);  // (a call from inside a region too: OPENBLAS_NUM_THREADS may be more)
    if (t.tm * t.tn == 1) {
        call(m, n, k, a, b, c);
        return;
    }
    parallel_for(t.tm * t.tn, 1, [&](std::size_t q0, std::size_t q1) {
        for (std::size_t q = q0; q < q1; ++q) {
            const std::size_t bi = q / t.tn, bj = q % t.tn;
            const std::size_t i0 = tile_edge(m, t.tm, bi), i1 = tile_edge(m, t.tm, bi + 1);
            const std::size_t j0 = tile_edge(n, t.tn, bj), j1 = tile_edge(n, t.tn, bj + 1);
            if (i1 <= i0 || j1 <= j0) continue;
            call(i1 - i0, j1 - j0, k, ta ? a + i0 : a + i0 * lda, tb ? b + j0 * ldb : b + j0,
                 c + i0 * ldc + j0);
        }
    });
}
/// Whether a product of one or two rows of A (a batch-1 Linear: a vector times a weight matrix)
/// goes to ember's own kernels (gemm_rows, gemm_dot) instead of OpenBLAS: where it is to be split
/// across the pool. Its time is the weights' trip from memory, which threads share by columns
/// (each reads its own strip of every weight row), but OpenBLAS's calls here are single-threaded
/// and a tile needs 2^21 multiply-adds, which no batch-1 layer of these sizes has: the batch-1
/// MLP's forward pass took 0.09 ms at 1, 4, 8 and 16 threads on the GPU machine's Xeon, and
/// 0.025-0.034 ms from 4 threads on split this way (ONNX Runtime: 0.026-0.030;
/// results/cpu-pool-claim-ab-2026-12-01-h200.jsonl). On one thread OpenBLAS keeps it. Either way
/// each output is one sum over k in order, so results do not depend on the split.
bool rows_go_own(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k, bool parallel) {
    if (m > 2 || !parallel || m * n * k < (std::size_t{1} << 17) || num_threads() < 2) return false;
    return !tb || dot_preferred(ta, tb, m, n, k);
}
}  // namespace
#endif

void gemm(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k, float alpha,
          const float* a, std::size_t lda, const float* b, std::size_t ldb, float beta, float* c,
          std::size_t ldc, bool parallel) {
#if EMBER_CPU_BLAS
    if (use_blas(m, n, k, lda, ldb, ldc) && !rows_go_own(ta, tb, m, n, k, parallel)) {
        fix_lds(ta, tb, m, n, k, lda, ldb, ldc);
        blas_product(ta, tb, m, n, k, a, lda, b, ldb, c, ldc, parallel,
                     [&](std::size_t tm, std::size_t tn, std::size_t tk, const float* ta_,
                         const float* tb_, float* tc) {
                         cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
                                     tb ? CblasTrans : CblasNoTrans, static_cast<int>(tm),
                                     static_cast<int>(tn), static_cast<int>(tk), alpha, ta_,
                                     static_cast<int>(lda), tb_, static_cast<int>(ldb), beta, tc,
                                     static_cast<int>(ldc));
                     });
        return;
    }
#endif
    gemm_blocked(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, parallel);
}

void gemm(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k, double alpha,
          const double* a, std::size_t lda, const double* b, std::size_t ldb, double beta,
          double* c, std::size_t ldc, bool parallel) {
#if EMBER_CPU_BLAS
    if (use_blas(m, n, k, lda, ldb, ldc) && !rows_go_own(ta, tb, m, n, k, parallel)) {
        fix_lds(ta, tb, m, n, k, lda, ldb, ldc);
        blas_product(ta, tb, m, n, k, a, lda, b, ldb, c, ldc, parallel,
                     [&](std::size_t tm, std::size_t tn, std::size_t tk, const double* ta_,
                         const double* tb_, double* tc) {
                         cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
                                     tb ? CblasTrans : CblasNoTrans, static_cast<int>(tm),
                                     static_cast<int>(tn), static_cast<int>(tk), alpha, ta_,
                                     static_cast<int>(lda), tb_, static_cast<int>(ldb), beta, tc,
                                     static_cast<int>(ldc));
                     });
        return;
    }
#endif
    gemm_blocked(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, parallel);
}

void gemm_packed_b(std::size_t m, std::size_t n, std::size_t k, const float* a, std::size_t lda,
                   const PanelPacker<float>& b, const float* bias, float* c, std::size_t ldc,
                   bool parallel, const float* a_packed) {
    packed_b_impl(m, n, k, a, lda, b, bias, c, ldc, parallel, a_packed);
}

void gemm_packed_b(std::size_t m, std::size_t n, std::size_t k, const double* a, std::size_t lda,
                   const PanelPacker<double>& b, const double* bias, double* c, std::size_t ldc,
                   bool parallel, const double* a_packed) {
    packed_b_impl(m, n, k, a, lda, b, bias, c, ldc, parallel, a_packed);
}

void gemm_pack_a(std::size_t m, std::size_t k, const float* a, std::size_t lda, float* out,
                 bool parallel) {
    pack_a_impl(m, k, a, lda, out, parallel);
}

void gemm_pack_a(std::size_t m, std::size_t k, const double* a, std::size_t lda, double* out,
                 bool parallel) {
    pack_a_impl(m, k, a, lda, out, parallel);
}

bool gemm_prepack_pays(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k) {
    // The products gemm hands to the blocked kernels, which pack B at every call.
    if (m * n * k <= kTinyWork || dot_preferred(ta, tb, m, n, k) || (m <= 2 && !tb)) return false;
#if EMBER_CPU_BLAS
    // Where OpenBLAS runs the products: on one thread, for products of up to 256 rows (for these
    // packing B is a quarter of the time or more at 64 rows); OpenBLAS keeps larger ones, and
    // every product at more threads, which it splits in tiles across the pool.
    if (blas_preferred() && (m > 256 || num_threads() > 1)) return false;
#endif
    return true;
}

std::size_t gemm_prepacked_b_size(std::size_t k, std::size_t n) {
    std::size_t size = 0;
    by_kernel_width([&](auto vb) { size = prepacked_b_size<float, decltype(vb)::value>(k, n); });
    return size;
}

void gemm_prepack_b_into(bool tb, std::size_t k, std::size_t n, const float* b, std::size_t ldb,
                         float* out) {
    by_kernel_width(
        [&](auto vb) { prepack_b_whole<float, decltype(vb)::value>(tb, k, n, b, ldb, out); });
}

void gemm_prepacked_raw(bool ta, std::size_t m, std::size_t n, std::size_t k, const float* a,
                        std::size_t lda, const float* packed, float* c, std::size_t ldc,
                        bool parallel) {
    if (m == 0 || n == 0) return;
    if (k == 0) {
        scale_c(m, n, 0.0f, c, ldc);
        return;
    }
    by_kernel_width([&](auto vb) {
        prepacked_body<float, decltype(vb)::value>(ta, m, n, k, 1.0f, a, lda, packed, 0.0f, c, ldc,
                                                   parallel);
    });
}

PackedB gemm_prepack_b(bool tb, std::size_t k, std::size_t n, const float* b, std::size_t ldb) {
    return prepack_b_impl(tb, k, n, b, ldb);
}

PackedB gemm_prepack_b(bool tb, std::size_t k, std::size_t n, const double* b, std::size_t ldb) {
    return prepack_b_impl(tb, k, n, b, ldb);
}

void gemm_prepacked(bool ta, std::size_t m, std::size_t n, std::size_t k, float alpha,
                    const float* a, std::size_t lda, const PackedB& b, float beta, float* c,
                    std::size_t ldc, bool parallel) {
    prepacked_impl(ta, m, n, k, alpha, a, lda, b, beta, c, ldc, parallel);
}

void gemm_prepacked(bool ta, std::size_t m, std::size_t n, std::size_t k, double alpha,
                    const double* a, std::size_t lda, const PackedB& b, double beta, double* c,
                    std::size_t ldc, bool parallel) {
    prepacked_impl(ta, m, n, k, alpha, a, lda, b, beta, c, ldc, parallel);
}

void gemm_small_k(std::size_t m, std::size_t n, std::size_t k, const float* a, std::size_t lda,
                  const float* b, std::size_t ldb, const float* bias, float* c, std::size_t ldc) {
    small_k_impl(m, n, k, a, lda, b, ldb, bias, c, ldc);
}

void gemm_small_k(std::size_t m, std::size_t n, std::size_t k, const double* a, std::size_t lda,
                  const double* b, std::size_t ldb, const double* bias, double* c,
                  std::size_t ldc) {
    small_k_impl(m, n, k, a, lda, b, ldb, bias, c, ldc);
}

}  // namespace ember::detail::cpu
