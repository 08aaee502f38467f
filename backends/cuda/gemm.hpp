#pragma once
// The row-major GEMM behind matmul and the convolutions.
#include <cstdint>

#include "ember/tensor/dtype.hpp"

namespace ember::detail::cuda {

/// C[i] = op(A[i])·op(B[i]) (+ beta·C[i]) for `batch` row-major matrices on `device`:
/// op(A) is [m, k] (A stored [k, m] when ta), op(B) is [k, n] (stored [n, k] when tb);
/// lda/ldb/ldc are row strides and sa/sb/sc batch strides (0 broadcasts one matrix).
void gemm(int device, DType dt, bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k,
          const void* a, std::int64_t lda, std::int64_t sa, const void* b, std::int64_t ldb,
          std::int64_t sb, void* c, std::int64_t ldc, std::int64_t sc, std::int64_t batch,
          double beta);

}  // namespace ember::detail::cuda
