#pragma once
// The CPU backend's GEMM, shared by matmul and the convolutions: BLAS-style (row-major,
// transposes, alpha/beta, leading dims). With EMBER_CPU_BLAS it forwards to OpenBLAS, unless
// OpenBLAS runs generic kernels on this CPU (see gemm_uses_blas); otherwise, and always for
// `gemm_portable`, a cache-blocked GEMM in plain C++ runs (with an AVX-512 variant picked at
// run time on x86-64, and a NEON micro-kernel on AArch64: neon.hpp).
#include <cstddef>
#include <memory>

namespace ember::detail::cpu {

/// C = alpha * op(A) * op(B) + beta * C, all row-major; op(A) is m×k, op(B) is k×n, C is m×n.
/// A is m×k with row stride `lda` (k×m when `trans_a`), likewise B. When beta == 0, C is not
/// read (it may hold NaN). `parallel` lets the call use the thread pool (and BLAS threads):
/// pass false when calling from inside `parallel_for`, whose regions must not nest.
void gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, float alpha,
          const float* a, std::size_t lda, const float* b, std::size_t ldb, float beta, float* c,
          std::size_t ldc, bool parallel = true);
void gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, double alpha,
          const double* a, std::size_t lda, const double* b, std::size_t ldb, double beta,
          double* c, std::size_t ldc, bool parallel = true);

/// The plain C++ GEMM, whatever the build links (same contract as `gemm`).
void gemm_portable(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k,
                   float alpha, const float* a, std::size_t lda, const float* b, std::size_t ldb,
                   float beta, float* c, std::size_t ldc, bool parallel = true);
void gemm_portable(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k,
                   double alpha, const double* a, std::size_t lda, const double* b, std::size_t ldb,
                   double beta, double* c, std::size_t ldc, bool parallel = true);

/// C[m×n] = A[m×k] · B[k×n] (+ bias[i] on row i when `bias`), with A and B row-major and B
/// read in place (no packing). Meant for small depths, the shape of a convolution with few
/// input channels (C_out × k·k weights times an im2col matrix), where packing would cost as
/// much as the multiply and BLAS libraries run far below peak; any k is correct, and it stays
/// fast while k·n elements fit in L2. Never threads.
void gemm_small_k(std::size_t m, std::size_t n, std::size_t k, const float* a, std::size_t lda,
                  const float* b, std::size_t ldb, const float* bias, float* c, std::size_t ldc);
void gemm_small_k(std::size_t m, std::size_t n, std::size_t k, const double* a, std::size_t lda,
                  const double* b, std::size_t ldb, const double* bias, double* c, std::size_t ldc);

/// One block of B for a PanelPacker: depth rows [p0, p0 + kc) and the NR-column panels
/// [q0, q1) of the columns [j0, j0 + nc).
struct PanelBlock {
    std::size_t p0, kc, j0, nc, q0, q1, nr;
};

/// B of `gemm_packed_b`, produced as the GEMM packs it: `fn(ctx, blk, out)` writes, for each
/// panel q in [blk.q0, blk.q1), B(blk.p0 + p, blk.j0 + q·nr + j) to out[q·nr·kc + p·nr + j]
/// (p < kc, j < nr), zero for the columns past blk.nc. A convolution's im2col goes straight
/// into the layout the micro-kernel reads: no im2col matrix in memory, no second copy into
/// panels (together a third of a convolution's time through BLAS, measured on ResNet-18).
template <typename T>
struct PanelPacker {
    const void* ctx;
    void (*fn)(const void* ctx, const PanelBlock& blk, T* out);
};

/// C[m×n] = A[m×k] · B[k×n] (+ bias[i] on row i when `bias`), A row-major (row stride lda),
/// B from `b`, with the portable blocked GEMM's kernels (whatever BLAS is linked). `parallel`
/// as for `gemm`. With `a_packed` (gemm_pack_a's packing of this A), `a` is not read.
void gemm_packed_b(std::size_t m, std::size_t n, std::size_t k, const float* a, std::size_t lda,
                   const PanelPacker<float>& b, const float* bias, float* c, std::size_t ldc,
                   bool parallel = true, const float* a_packed = nullptr);
void gemm_packed_b(std::size_t m, std::size_t n, std::size_t k, const double* a, std::size_t lda,
                   const PanelPacker<double>& b, const double* bias, double* c, std::size_t ldc,
                   bool parallel = true, const double* a_packed = nullptr);

/// A (m × k, row stride lda) packed once for several gemm_packed_b products (a convolution's
/// weights, one product per sample), into `out`: at most gemm_packed_a_size(m, k) values.
/// `parallel`: split across the pool.
void gemm_pack_a(std::size_t m, std::size_t k, const float* a, std::size_t lda, float* out,
                 bool parallel = true);
void gemm_pack_a(std::size_t m, std::size_t k, const double* a, std::size_t lda, double* out,
                 bool parallel = true);
/// Room for gemm_pack_a's packing: rows rounded up to the kernels' tile (at most 8 rows).
inline std::size_t gemm_packed_a_size(std::size_t m, std::size_t k) {
    return (m + 7) * k;
}

struct Storage;

/// op(B) (k × n) packed whole for the portable GEMM's kernels on this CPU (`gemm_prepack_b`),
/// so that products with it as B (a model's weight, at every inference) skip packing it.
struct PackedB {
    std::shared_ptr<Storage> buf;
    std::size_t k = 0, n = 0;
    std::size_t width = 0;  ///< the kernels' vector width it was packed for
};

/// Whether a product of these shapes, op(A) m × k times op(B) k × n, runs faster from a
/// prepacked B than through `gemm`: one that `gemm` gives the portable blocked kernels (which
/// pack B at every call), or, where OpenBLAS runs the products, on one thread with 256 rows or
/// fewer.
bool gemm_prepack_pays(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k);

/// op(B) packed whole (k × n; B row-major with row stride ldb, k × n, or n × k when trans_b).
PackedB gemm_prepack_b(bool trans_b, std::size_t k, std::size_t n, const float* b, std::size_t ldb);
PackedB gemm_prepack_b(bool trans_b, std::size_t k, std::size_t n, const double* b,
                       std::size_t ldb);

/// C = alpha * op(A) * B + beta * C as `gemm`, with B from `gemm_prepack_b` (same k, n and
/// element type); the portable GEMM's kernels, whatever BLAS is linked.
void gemm_prepacked(bool trans_a, std::size_t m, std::size_t n, std::size_t k, float alpha,
                    const float* a, std::size_t lda, const PackedB& b, float beta, float* c,
                    std::size_t ldc, bool parallel = true);
void gemm_prepacked(bool trans_a, std::size_t m, std::size_t n, std::size_t k, double alpha,
                    const double* a, std::size_t lda, const PackedB& b, double beta, double* c,
                    std::size_t ldc, bool parallel = true);

/// gemm_prepack_b's packing without its PackedB, for callers that keep several in one buffer
/// (winograd.cpp: one per transformed point): the floats op(B) (k × n) takes, the packing into
/// `out`, and C[m × n] = op(A) · B from it (the kernels' width must be the one it was packed
/// for: this process's).
std::size_t gemm_prepacked_b_size(std::size_t k, std::size_t n);
void gemm_prepack_b_into(bool trans_b, std::size_t k, std::size_t n, const float* b,
                         std::size_t ldb, float* out);
void gemm_prepacked_raw(bool trans_a, std::size_t m, std::size_t n, std::size_t k, const float* a,
                        std::size_t lda, const float* packed, float* c, std::size_t ldc,
                        bool parallel = true);

struct CpuTensor;

/// op(B) (k × n at `b`, inside tensor t's buffer, row stride ld, stored n × k when trans_b) of
/// a product with m rows of op(A), packed whole and kept while t's buffer lives (matmul.cpp,
/// packed weights: a model's weights at inference). nullptr the first time a matrix is asked
/// for (or after its values changed), where `gemm_prepack_pays` says no, and when the cache is
/// off or full. While kept, t's buffer is never written in place.
std::shared_ptr<const PackedB> kept_packed_b(const CpuTensor& t, const float* b, bool trans_b,
                                             std::size_t ldb, bool trans_a, std::size_t m,
                                             std::size_t k, std::size_t n);
std::shared_ptr<const PackedB> kept_packed_b(const CpuTensor& t, const double* b, bool trans_b,
                                             std::size_t ldb, bool trans_a, std::size_t m,
                                             std::size_t k, std::size_t n);

/// A (groups blocks of m × k, row-major, one after another at `a`, inside tensor t's buffer:
/// a convolution's weights) packed by gemm_pack_a block after block, gemm_packed_a_size(m, k)
/// values each, and kept as kept_packed_b keeps B (PackedB's k and n are k and m).
std::shared_ptr<const PackedB> kept_packed_a(const CpuTensor& t, const float* a, std::size_t groups,
                                             std::size_t m, std::size_t k);
std::shared_ptr<const PackedB> kept_packed_a(const CpuTensor& t, const double* a,
                                             std::size_t groups, std::size_t m, std::size_t k);

/// Values derived once from a weight (`groups` blocks of m × k at `a`, inside tensor t's
/// buffer: what is sampled to see a change) and kept as kept_packed_a keeps its packing, keyed
/// by t's buffer, `a`, the sizes and `kind` (a number of the caller's, 2 and up, that names
/// what is derived): `make(ctx, out)` writes the `bytes` bytes at out. Winograd's transformed
/// convolution weights (winograd.cpp). nullptr when kept_packed_a would give nullptr.
std::shared_ptr<const PackedB> kept_derived(const CpuTensor& t, const float* a, int kind,
                                            std::size_t groups, std::size_t m, std::size_t k,
                                            std::size_t bytes, void (*make)(const void*, void*),
                                            const void* ctx);

/// Whether `gemm` hands products to BLAS: built with EMBER_CPU_BLAS, and OpenBLAS has
/// kernels for this CPU at least as wide as the portable GEMM's (OpenBLAS falls back to SSE3
/// kernels on CPUs newer than its tables). EMBER_CPU_GEMM=blas or =portable forces the choice.
bool gemm_uses_blas();

/// Whether the convolutions pack im2col straight into the portable GEMM's panels
/// (`gemm_packed_b`) instead of writing the im2col matrix for `gemm`: where `gemm` does not
/// hand products to BLAS, and with the AVX-512 kernels. EMBER_CPU_CONV=packed or =im2col
/// forces the choice (read at each call).
bool conv_packs_im2col();

/// Depths up to this always go to `gemm_small_k` in the convolutions (deeper ones too when
/// BLAS is not used and the im2col matrix fits in L2).
inline constexpr std::size_t kSmallK = 32;

}  // namespace ember::detail::cpu
