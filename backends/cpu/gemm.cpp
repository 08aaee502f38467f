// GEMM for the CPU backend: OpenBLAS when EMBER_CPU_BLAS, and a portable cache-blocked GEMM
// (BLIS-style packing + a register-tiled micro-kernel written so that GCC vectorises it) for
// freestanding builds, tiny products and depth-small convolutions.
#include "gemm.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>

#include "ember/backend/detail/cpu_tensor.hpp"
#include "parallel.hpp"

#if EMBER_CPU_BLAS
#include <cblas.h>
#endif

namespace ember::detail::cpu {
namespace {

// The register file decides the micro-tile: MR×NR accumulators plus a few operands must fit
// in it, and NR must be a whole number of vectors. The kernels use GCC's vector extension
// (portable across targets, no intrinsics) because GCC's SLP vectoriser spills a plain
// accumulator array to the stack.
#if !defined(__GNUC__)
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

#if EMBER_GEMM_VEC_BYTES
template <typename T>
struct VecType {
    typedef T type __attribute__((vector_size(EMBER_GEMM_VEC_BYTES)));
};
template <typename T>
using Vec = typename VecType<T>::type;
#else
template <typename T>
using Vec = T;
#endif

template <typename T>
struct Tile {
    static constexpr std::size_t kVecBytes = EMBER_GEMM_VEC_BYTES;
    static constexpr std::size_t kLanes = kVecBytes ? kVecBytes / sizeof(T) : 1;
    static constexpr std::size_t NR = kVecBytes ? 2 * kLanes : 4;
    static constexpr std::size_t NV = NR / kLanes;  ///< vectors per row of the tile
    static constexpr std::size_t MR = kVecBytes == 64 ? 8 : (kVecBytes ? 6 : 4);
    // KC×NR of B stays in L1, MC×KC of A in L2, KC×NC of B in L3.
    static constexpr std::size_t KC = sizeof(T) == 4 ? 384 : 256;
    static constexpr std::size_t MC = MR * (sizeof(T) == 4 ? 32 : 20);
    static constexpr std::size_t NC = sizeof(T) == 4 ? 4096 : 2048;
};

template <typename V, typename T>
inline V load(const T* p) {
    V v;
    std::memcpy(&v, p, sizeof(V));
    return v;
}
template <typename V, typename T>
inline void store(T* p, const V& v) {
    std::memcpy(p, &v, sizeof(V));
}

/// A scratch buffer from the caching allocator, so that repeated GEMMs do not page-fault.
template <typename T>
struct Scratch {
    std::shared_ptr<Storage> s;
    explicit Scratch(std::size_t n) : s(allocate(std::max<std::size_t>(n, 1) * sizeof(T))) {}
    T* get() const { return static_cast<T*>(s->data); }
};

/// Packs rows [0, mc) × depth [0, kc) of op(A) (origin already applied) into MR-row panels,
/// k-major inside a panel, zero-padding the last panel.
template <typename T>
void pack_a(std::size_t mc, std::size_t kc, const T* a, std::size_t lda, bool trans, T* out) {
    constexpr std::size_t MR = Tile<T>::MR;
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
            for (std::size_t i = 0; i < mr; ++i) {
                const T* src = a + (ir + i) * lda;
                for (std::size_t p = 0; p < kc; ++p) dst[p * MR + i] = src[p];
            }
            for (std::size_t i = mr; i < MR; ++i)
                for (std::size_t p = 0; p < kc; ++p) dst[p * MR + i] = T(0);
        }
    }
}

/// Packs NR-column panels [jr0, jr1) (in units of panels) of op(B) depth [0, kc) × [0, nc).
template <typename T>
void pack_b(std::size_t kc, std::size_t nc, std::size_t jr0, std::size_t jr1, const T* b,
            std::size_t ldb, bool trans, T* out) {
    constexpr std::size_t NR = Tile<T>::NR;
    for (std::size_t jp = jr0; jp < jr1; ++jp) {
        const std::size_t j0 = jp * NR, nr = std::min(NR, nc - j0);
        T* dst = out + j0 * kc;
        if (!trans) {
            for (std::size_t p = 0; p < kc; ++p) {
                const T* src = b + p * ldb + j0;
                for (std::size_t j = 0; j < nr; ++j) dst[p * NR + j] = src[j];
                for (std::size_t j = nr; j < NR; ++j) dst[p * NR + j] = T(0);
            }
        } else {  // op(B)(p, j) = b[j*ldb + p]
            for (std::size_t j = 0; j < nr; ++j) {
                const T* src = b + (j0 + j) * ldb;
                for (std::size_t p = 0; p < kc; ++p) dst[p * NR + j] = src[p];
            }
            for (std::size_t j = nr; j < NR; ++j)
                for (std::size_t p = 0; p < kc; ++p) dst[p * NR + j] = T(0);
        }
    }
}

/// out[MR×NR] = packed A panel · packed B panel over depth kc. When `pf` is set, the kernel
/// also pulls that next B panel towards L2: the packed B block lives in L3, and without the
/// hint the first sweep over each panel stalls on it.
template <typename T>
inline void micro_kernel(std::size_t kc, const T* __restrict ap, const T* __restrict bp,
                         T* __restrict out, const T* pf) {
    using V = Vec<T>;
    constexpr std::size_t MR = Tile<T>::MR, NR = Tile<T>::NR, NV = Tile<T>::NV,
                          L = Tile<T>::kLanes;
    V acc[MR][NV];
#pragma GCC unroll 16
    for (std::size_t i = 0; i < MR; ++i)
#pragma GCC unroll 16
        for (std::size_t v = 0; v < NV; ++v) acc[i][v] = V{} + T(0);
    for (std::size_t p = 0; p < kc; ++p) {
        V b[NV];
#pragma GCC unroll 16
        for (std::size_t v = 0; v < NV; ++v) b[v] = load<V>(bp + p * NR + v * L);
        if (pf) __builtin_prefetch(pf + p * NR, 0, 2);
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

/// C tile (mr×nr valid) = alpha * t + (first ? beta * C : C); beta == 0 never reads C.
template <typename T>
inline void update_c(const T* t, std::size_t mr, std::size_t nr, T alpha, T beta, bool first,
                     T* c, std::size_t ldc) {
    constexpr std::size_t NR = Tile<T>::NR;
    for (std::size_t i = 0; i < mr; ++i) {
        T* ci = c + i * ldc;
        const T* ti = t + i * NR;
        if (!first) {
            for (std::size_t j = 0; j < nr; ++j) ci[j] += alpha * ti[j];
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

/// Products up to this many multiply-adds take `gemm_tiny`.
constexpr std::size_t kTinyWork = 4096;

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
    using Tl = Tile<T>;
    constexpr std::size_t MR = Tl::MR, NR = Tl::NR;
    const std::size_t kc_max = std::min(Tl::KC, k);
    const std::size_t nc_max = std::min(Tl::NC, (n + NR - 1) / NR * NR);
    const std::size_t mc_max = std::min(Tl::MC, (m + MR - 1) / MR * MR);
    Scratch<T> bbuf(kc_max * nc_max), abuf(kc_max * mc_max);
    T* bpack = bbuf.get();
    T* apack = abuf.get();
    // Each parallel chunk should carry enough multiply-adds to repay waking the pool.
    const std::size_t par_grain_flops = std::size_t{1} << 18;

    for (std::size_t jc = 0; jc < n; jc += Tl::NC) {
        const std::size_t nc = std::min(Tl::NC, n - jc);
        const std::size_t panels = (nc + NR - 1) / NR;
        for (std::size_t pc = 0; pc < k; pc += Tl::KC) {
            const std::size_t kc = std::min(Tl::KC, k - pc);
            const bool first = pc == 0;
            const T* bsrc = tb ? b + jc * ldb + pc : b + pc * ldb + jc;
            auto pack = [&](std::size_t p0, std::size_t p1) {
                pack_b(kc, nc, p0, p1, bsrc, ldb, tb, bpack);
            };
            if (parallel)
                parallel_for(panels, std::max<std::size_t>(1, 16384 / (kc * NR)),
                             [&](std::size_t p0, std::size_t p1) { pack(p0, p1); });
            else
                pack(0, panels);
            for (std::size_t ic = 0; ic < m; ic += Tl::MC) {
                const std::size_t mc = std::min(Tl::MC, m - ic);
                const T* asrc = ta ? a + pc * lda + ic : a + ic * lda + pc;
                pack_a(mc, kc, asrc, lda, ta, apack);
                // BLIS's jr loop: each thread takes whole NR-column panels and sweeps the
                // shared packed A block over them, its B panel staying in L1.
                auto body = [&](std::size_t p0, std::size_t p1) {
                    alignas(64) T tile[MR * NR];
                    for (std::size_t jp = p0; jp < p1; ++jp) {
                        const std::size_t j0 = jp * NR, nr = std::min(NR, nc - j0);
                        const T* bp = bpack + j0 * kc;
                        for (std::size_t ir = 0; ir < mc; ir += MR) {
                            const std::size_t mr = std::min(MR, mc - ir);
                            micro_kernel<T>(kc, apack + ir * kc, bp, tile,
                                            ir == 0 && jp + 1 < panels ? bp + NR * kc
                                                                       : nullptr);
                            update_c(tile, mr, nr, alpha, beta, first,
                                     c + (ic + ir) * ldc + jc + j0, ldc);
                        }
                    }
                };
                const std::size_t grain =
                    std::max<std::size_t>(1, par_grain_flops / (mc * kc * NR));
                if (parallel)
                    parallel_for(panels, grain,
                                 [&](std::size_t p0, std::size_t p1) { body(p0, p1); });
                else
                    body(0, panels);
            }
        }
    }
}

template <typename T>
void small_k_impl(std::size_t m, std::size_t n, std::size_t k, const T* a, std::size_t lda,
                  const T* b, std::size_t ldb, const T* bias, T* c, std::size_t ldc) {
    if (m == 0 || n == 0) return;
    if (k == 0 || k > kSmallK) {  // outside this kernel's register budget: the general path
        if (k == 0) {
            scale_c(m, n, T(0), c, ldc);
        } else {
            gemm_blocked(false, false, m, n, k, T(1), a, lda, b, ldb, T(0), c, ldc, false);
        }
        if (bias)
            for (std::size_t i = 0; i < m; ++i)
                for (std::size_t j = 0; j < n; ++j) c[i * ldc + j] += bias[i];
        return;
    }
    using V = Vec<T>;
    constexpr std::size_t MR = Tile<T>::MR, NR = Tile<T>::NR, NV = Tile<T>::NV,
                          L = Tile<T>::kLanes;
    // A is tiny (m × k): pad it to whole MR-row panels so that the kernel has no row tail.
    const std::size_t mp = (m + MR - 1) / MR * MR;
    Scratch<T> abuf(mp * k + mp);
    T* ap = abuf.get();
    T* bp = ap + mp * k;
    pack_a(m, k, a, lda, false, ap);
    for (std::size_t i = 0; i < mp; ++i) bp[i] = (bias && i < m) ? bias[i] : T(0);

    alignas(64) T btail[kSmallK * NR];
    alignas(64) T tile[MR * NR];
    for (std::size_t j0 = 0; j0 < n; j0 += NR) {
        const std::size_t nr = std::min(NR, n - j0);
        // B is read in place (row stride ldb); only the ragged last column block is copied.
        const T* bj = b + j0;
        std::size_t bstride = ldb;
        if (nr < NR) {
            for (std::size_t p = 0; p < k; ++p) {
                for (std::size_t j = 0; j < nr; ++j) btail[p * NR + j] = b[p * ldb + j0 + j];
                for (std::size_t j = nr; j < NR; ++j) btail[p * NR + j] = T(0);
            }
            bj = btail;
            bstride = NR;
        }
        for (std::size_t ir = 0; ir < m; ir += MR) {
            const T* apanel = ap + ir * k;
            V acc[MR][NV];
#pragma GCC unroll 16
            for (std::size_t i = 0; i < MR; ++i)
#pragma GCC unroll 16
                for (std::size_t v = 0; v < NV; ++v) acc[i][v] = V{} + bp[ir + i];
            for (std::size_t p = 0; p < k; ++p) {
                V bv[NV];
#pragma GCC unroll 16
                for (std::size_t v = 0; v < NV; ++v) bv[v] = load<V>(bj + p * bstride + v * L);
#pragma GCC unroll 16
                for (std::size_t i = 0; i < MR; ++i) {
                    const T ai = apanel[p * MR + i];
#pragma GCC unroll 16
                    for (std::size_t v = 0; v < NV; ++v) acc[i][v] += bv[v] * ai;
                }
            }
            const std::size_t mr = std::min(MR, m - ir);
            if (nr == NR && mr == MR) {
#pragma GCC unroll 16
                for (std::size_t i = 0; i < MR; ++i)
#pragma GCC unroll 16
                    for (std::size_t v = 0; v < NV; ++v)
                        store(c + (ir + i) * ldc + j0 + v * L, acc[i][v]);
            } else {
#pragma GCC unroll 16
                for (std::size_t i = 0; i < MR; ++i)
#pragma GCC unroll 16
                    for (std::size_t v = 0; v < NV; ++v) store(tile + i * NR + v * L, acc[i][v]);
                for (std::size_t i = 0; i < mr; ++i)
                    for (std::size_t j = 0; j < nr; ++j)
                        c[(ir + i) * ldc + j0 + j] = tile[i * NR + j];
            }
        }
    }
}

#if EMBER_CPU_BLAS
// cblas takes int dims.
bool fits_blas(std::size_t m, std::size_t n, std::size_t k, std::size_t lda, std::size_t ldb,
               std::size_t ldc) {
    constexpr std::size_t lim = INT_MAX;
    return m <= lim && n <= lim && k <= lim && lda <= lim && ldb <= lim && ldc <= lim;
}
#endif

}  // namespace

void gemm_portable(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k, float alpha,
                   const float* a, std::size_t lda, const float* b, std::size_t ldb, float beta,
                   float* c, std::size_t ldc, bool parallel) {
    gemm_blocked(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, parallel);
}

void gemm_portable(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k, double alpha,
                   const double* a, std::size_t lda, const double* b, std::size_t ldb,
                   double beta, double* c, std::size_t ldc, bool parallel) {
    gemm_blocked(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, parallel);
}

void gemm(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k, float alpha,
          const float* a, std::size_t lda, const float* b, std::size_t ldb, float beta, float* c,
          std::size_t ldc, bool parallel) {
#if EMBER_CPU_BLAS
    if (m != 0 && n != 0 && k != 0 && m * n * k > kTinyWork && fits_blas(m, n, k, lda, ldb, ldc)) {
        // cblas rejects leading dims below the row length even where they are never used.
        lda = std::max<std::size_t>(lda, std::max<std::size_t>(1, ta ? m : k));
        ldb = std::max<std::size_t>(ldb, std::max<std::size_t>(1, tb ? k : n));
        ldc = std::max<std::size_t>(ldc, std::max<std::size_t>(1, n));
        cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                    static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha, a,
                    static_cast<int>(lda), b, static_cast<int>(ldb), beta, c,
                    static_cast<int>(ldc));
        return;
    }
#endif
    gemm_blocked(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, parallel);
}

void gemm(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k, double alpha,
          const double* a, std::size_t lda, const double* b, std::size_t ldb, double beta,
          double* c, std::size_t ldc, bool parallel) {
#if EMBER_CPU_BLAS
    if (m != 0 && n != 0 && k != 0 && m * n * k > kTinyWork && fits_blas(m, n, k, lda, ldb, ldc)) {
        lda = std::max<std::size_t>(lda, std::max<std::size_t>(1, ta ? m : k));
        ldb = std::max<std::size_t>(ldb, std::max<std::size_t>(1, tb ? k : n));
        ldc = std::max<std::size_t>(ldc, std::max<std::size_t>(1, n));
        cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                    static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha, a,
                    static_cast<int>(lda), b, static_cast<int>(ldb), beta, c,
                    static_cast<int>(ldc));
        return;
    }
#endif
    gemm_blocked(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, parallel);
}

void gemm_small_k(std::size_t m, std::size_t n, std::size_t k, const float* a, std::size_t lda,
                  const float* b, std::size_t ldb, const float* bias, float* c, std::size_t ldc) {
    small_k_impl(m, n, k, a, lda, b, ldb, bias, c, ldc);
}

void gemm_small_k(std::size_t m, std::size_t n, std::size_t k, const double* a,
                  std::size_t lda, const double* b, std::size_t ldb, const double* bias,
                  double* c, std::size_t ldc) {
    small_k_impl(m, n, k, a, lda, b, ldb, bias, c, ldc);
}

}  // namespace ember::detail::cpu
