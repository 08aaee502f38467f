#pragma once
// The int8 Linear of the CUDA backend: kernel launchers (qlinear.cu) used by qlinear.cpp.
#include <cuda_runtime.h>

#include <cstdint>

namespace ember::detail::cuda {

/// Writes the bits of -min(0, min x) and max(0, max x) (NaN skipped) to range[0], range[1].
void launch_q_range(const float* x, std::int64_t n, unsigned* range, cudaStream_t s);
/// Quantizes rows [0, m) of x [m, k] to int8 (rows m..m_padded are zeros) with row sums; the
/// parameters come from `range` (dynamic, MinMaxObserver's) or are `scale`, `zero` (static
/// when range is null); params[0], params[1] receive the scale and zero point used.
void launch_q_rows(const float* x, std::int64_t m, std::int64_t m_padded, std::int64_t k,
                   const unsigned* range, float scale, int zero, std::int8_t* q, int* row_sum,
                   float* params, cudaStream_t s);
/// wt [n, k] = transpose of w [k, n] (cuBLASLt's "TN" operand) and col_sum[c] = Σ_j w[j][c].
void launch_q_prepare_weights(const std::int8_t* w, std::int64_t k, std::int64_t n, std::int8_t* wt,
                              int* col_sum, cudaStream_t s);

/// What the epilogue turns into f32 outputs.
struct QEpilogue {
    const int* acc = nullptr;              ///< int32 sums [m, n] (row-major)
    std::int64_t m = 0, n = 0, k = 0;      ///< the GEMM's dims
    const int* row_sum = nullptr;          ///< Σ_k q[r][k] per row
    const int* col_sum = nullptr;          ///< Σ_k w[k][c] per column
    const float* w_scale = nullptr;        ///< weight scales (1 or n)
    std::int64_t scale_count = 1;          ///< 1 or n
    const std::int64_t* w_zero = nullptr;  ///< weight zero points (1 or n), null when symmetric
    std::int64_t zero_count = 1;           ///< 1 or n
    const float* params = nullptr;         ///< the activation scale and zero point (device)
    const float* bias = nullptr;           ///< [n] or null
    float* y = nullptr;                    ///< [m, n] output
};
/// y = (acc − zero corrections) · scales + bias.
void launch_q_epilogue(const QEpilogue& e, cudaStream_t s);

}  // namespace ember::detail::cuda
