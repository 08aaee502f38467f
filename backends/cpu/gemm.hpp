#pragma once
// The CPU backend's GEMM, shared by matmul and the convolutions: BLAS-style (row-major,
// transposes, alpha/beta, leading dims). With EMBER_CPU_BLAS it forwards to OpenBLAS, unless
// OpenBLAS runs generic kernels on this CPU (see gemm_uses_blas); otherwise, and always for
// `gemm_portable`, a cache-blocked GEMM in plain C++ runs (with an AVX-512 variant picked at
// run time on x86-64, and a NEON micro-kernel on AArch64: neon.hpp).
#include <cstddef>

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

/// Whether `gemm` hands products to BLAS: built with EMBER_CPU_BLAS, and OpenBLAS has
/// kernels for this CPU at least as wide as the portable GEMM's (OpenBLAS falls back to SSE3
/// kernels on CPUs newer than its tables). EMBER_CPU_GEMM=blas or =portable forces the choice.
bool gemm_uses_blas();

/// Depths up to this always go to `gemm_small_k` in the convolutions (deeper ones too when
/// BLAS is not used and the im2col matrix fits in L2).
inline constexpr std::size_t kSmallK = 32;

}  // namespace ember::detail::cpu
