// Kernels of the int8 Linear (qlinear.cpp): the activation range, activations quantized to int8
// with their row sums, the weights transposed once for cuBLASLt with their column sums, and the
// epilogue that turns int32 sums into f32 outputs. The arithmetic is the CPU's (qgemm.cpp,
// quant.cpp) operation for operation, so that both backends give the same floats.
#include <cstdint>

#include "device.cuh"
#include "qlinear.hpp"

namespace ember::detail::cuda {
namespace {

constexpr float kScaleEps = 1.1920928955078125e-07f;

__device__ __forceinline__ int warp_sum(int v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_down_sync(0xffffffffu, v, o));
    return v;
}

// range[0] holds the bits of -min(0, min x), range[1] those of max(0, max x): non-negative
// floats order as their bit patterns, so integer atomicMax keeps both.
__global__ void range_kernel(const float* x, std::int64_t n, unsigned* range) {
    float neg_lo = 0.0f, hi = 0.0f;
    EMBER_GRID_LOOP(i, n) {
        const float v = x[i];
        if (v != v) continue;  // NaN is skipped, as the CPU's min_max
        neg_lo = fmaxf(neg_lo, -v);
        hi = fmaxf(hi, v);
    }
    // + 0 turns a -0 (whose bit pattern would win atomicMax) into +0.
    neg_lo = warp_max(neg_lo) + 0.0f;
    hi = warp_max(hi) + 0.0f;
    if ((threadIdx.x & 31) == 0) {
        atomicMax(&range[0], __float_as_uint(neg_lo));
        atomicMax(&range[1], __float_as_uint(hi));
    }
}

// One block a row: q[r][k] = clamp(rint(x · (1/scale)) + zero, -128, 127), and Σ_k q[r][k].
// Rows from m up to the padded count are zeros.
__global__ void quantize_rows_kernel(const float* x, std::int64_t m, std::int64_t k,
                                     const unsigned* range, float static_scale, int static_zero,
                                     std::int8_t* q, int* row_sum, float* params) {
    __shared__ int partial[32];
    const std::int64_t r = blockIdx.x;
    float scale = static_scale, zero = static_cast<float>(static_zero);
    if (range != nullptr) {  // MinMaxObserver's parameters, as quant.cpp's dynamic_params
        const float lo = -__uint_as_float(range[0]), hi = __uint_as_float(range[1]);
        scale = fmaxf(__fdiv_rn(__fsub_rn(hi, lo), 255.0f), kScaleEps);
        zero = fminf(fmaxf(__fsub_rn(-128.0f, rintf(__fdiv_rn(lo, scale))), -128.0f), 127.0f);
    }
    const float inv = __fdiv_rn(1.0f, scale);
    if (r == 0 && threadIdx.x == 0) {
        params[0] = scale;
        params[1] = zero;
    }
    int sum = 0;
    for (std::int64_t j = threadIdx.x; j < k; j += blockDim.x) {
        int v = 0;
        if (r < m) {
            const float t =
                fminf(fmaxf(rintf(__fmul_rn(x[r * k + j], inv)) + zero, -128.0f), 127.0f);
            v = static_cast<int>(t);
        }
        q[r * k + j] = static_cast<std::int8_t>(v);
        sum += v;
    }
    sum = warp_sum(sum);
    if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = sum;
    __syncthreads();
    if (threadIdx.x < 32) {
        int s = threadIdx.x < (blockDim.x >> 5) ? partial[threadIdx.x] : 0;
        s = warp_sum(s);
        if (threadIdx.x == 0) row_sum[r] = s;
    }
}

// wt[c][j] = w[j][c] and col_sum[c] = Σ_j w[j][c], a thread per column.
__global__ void prepare_weights_kernel(const std::int8_t* w, std::int64_t k, std::int64_t n,
                                       std::int8_t* wt, int* col_sum) {
    EMBER_GRID_LOOP(c, n) {
        int s = 0;
        for (std::int64_t j = 0; j < k; ++j) {
            const std::int8_t v = w[j * n + c];
            wt[c * k + j] = v;
            s += v;
        }
        col_sum[c] = s;
    }
}

// y[r][c] = (acc − za·Σw[c] + k·za·zw[c] − zw[c]·Σq[r]) · (sa·sw[c]) + bias[c].
__global__ void epilogue_kernel(const int* acc, std::int64_t m, std::int64_t n, std::int64_t k,
                                const int* row_sum, const int* col_sum, const float* w_scale,
                                std::int64_t scale_count, const std::int64_t* w_zero,
                                std::int64_t zero_count, const float* params, const float* bias,
                                float* y) {
    const float a_scale = params[0];
    const int a_zero = static_cast<int>(params[1]);
    EMBER_GRID_LOOP(i, m * n) {
        const std::int64_t r = i / n, c = i % n;
        const int zw = w_zero ? static_cast<int>(w_zero[zero_count == 1 ? 0 : c]) : 0;
        const float sw = w_scale[scale_count == 1 ? 0 : c];
        const int corr = a_zero * col_sum[c] - static_cast<int>(k) * a_zero * zw;
        const int v = acc[i] - corr - zw * row_sum[r];
        const float out = __fmul_rn(static_cast<float>(v), __fmul_rn(a_scale, sw));
        y[i] = __fadd_rn(out, bias ? bias[c] : 0.0f);
    }
}

}  // namespace

void launch_q_range(const float* x, std::int64_t n, unsigned* range, cudaStream_t s) {
    check(cudaMemsetAsync(range, 0, 2 * sizeof(unsigned), s), "cudaMemsetAsync");
    if (n == 0) return;
    const unsigned blocks = blocks_for(n) < 1024 ? blocks_for(n) : 1024;
    range_kernel<<<blocks, kThreads, 0, s>>>(x, n, range);
    check_launch("q_linear range");
}

void launch_q_rows(const float* x, std::int64_t m, std::int64_t m_padded, std::int64_t k,
                   const unsigned* range, float scale, int zero, std::int8_t* q, int* row_sum,
                   float* params, cudaStream_t s) {
    quantize_rows_kernel<<<static_cast<unsigned>(m_padded), kThreads, 0, s>>>(
        x, m, k, range, scale, zero, q, row_sum, params);
    check_launch("q_linear quantize");
}

void launch_q_prepare_weights(const std::int8_t* w, std::int64_t k, std::int64_t n, std::int8_t* wt,
                              int* col_sum, cudaStream_t s) {
    prepare_weights_kernel<<<blocks_for(n), kThreads, 0, s>>>(w, k, n, wt, col_sum);
    check_launch("q_linear weights");
}

void launch_q_epilogue(const QEpilogue& e, cudaStream_t s) {
    const std::int64_t total = e.m * e.n;
    if (total == 0) return;
    epilogue_kernel<<<blocks_for(total), kThreads, 0, s>>>(
        e.acc, e.m, e.n, e.k, e.row_sum, e.col_sum, e.w_scale, e.scale_count, e.w_zero,
        e.zero_count, e.params, e.bias, e.y);
    check_launch("q_linear epilogue");
}

}  // namespace ember::detail::cuda
