#pragma once
// Device-side helpers shared by the .cu files: strided offsets from an Iter, launch sizes, the
// NaN-aware min/max PyTorch uses, and dtype dispatch over the compute types.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "kernels.hpp"
#include "runtime.hpp"

namespace ember::detail::cuda {

constexpr int kThreads = 256;

/// Blocks for n elements at kThreads each, capped (kernels loop grid-stride past the cap).
inline unsigned blocks_for(std::int64_t n) {
    const std::int64_t b = (n + kThreads - 1) / kThreads;
    return static_cast<unsigned>(b < 1 ? 1 : (b > 65535 * 8 ? 65535 * 8 : b));
}

/// Calls f.template operator()<T, A>() for float data of dtype t: T the type it is stored in,
/// A the type it is accumulated in (f64 for f64 data, f32 otherwise) — the kernels that keep
/// f16/bf16 data in its own type with f32 statistics (batch norm, global pooling).
template <typename F>
void visit_float_storage(DType t, F&& f) {
    switch (t) {
        case DType::F64:
            return f.template operator()<double, double>();
        case DType::F16:
            return f.template operator()<__half, float>();
        case DType::BF16:
            return f.template operator()<__nv_bfloat16, float>();
        default:
            return f.template operator()<float, float>();
    }
}

/// Slices to split `rows` into for `cols` outputs computed 32 a block by `thread_rows` rows of
/// threads (column sums: the strided reductions, LayerNorm's parameter gradients): enough blocks
/// to fill the GPU (about 1024), each slice at least 32 rows a row of threads, at most 256.
inline int row_slices(std::int64_t cols, std::int64_t rows, int thread_rows) {
    const std::int64_t blocks = (cols + 31) / 32;
    std::int64_t parts = (1024 + blocks - 1) / blocks;
    const std::int64_t most = rows / (thread_rows * 32);
    if (parts > most) parts = most;
    if (parts > 256) parts = 256;
    return parts < 1 ? 1 : static_cast<int>(parts);
}

/// Element offsets of linear index i for each of the K operands.
template <int K>
__device__ __forceinline__ void offsets(const Iter<K>& it, std::int64_t i, std::int64_t* off) {
    for (int k = 0; k < K; ++k) off[k] = 0;
    if (it.rank == 1) {  // the merged contiguous (or single strided) case: no division
        for (int k = 0; k < K; ++k) off[k] = i * it.strides[k][0];
        return;
    }
    for (int d = it.rank - 1; d >= 0; --d) {
        const std::int64_t size = it.shape[d];
        const std::int64_t c = i % size;
        i /= size;
        for (int k = 0; k < K; ++k) off[k] += c * it.strides[k][d];
    }
}

#define EMBER_GRID_LOOP(i, n)                                                               \
    for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; \
         i < (n); i += static_cast<std::int64_t>(blockDim.x) * gridDim.x)

template <typename T>
__device__ __forceinline__ bool is_nan(T x) {
    return x != x;
}
/// max with NaN propagation (PyTorch's maximum).
template <typename T>
__device__ __forceinline__ T nan_max(T a, T b) {
    if (is_nan(a) || is_nan(b)) return is_nan(a) ? a : b;
    return a > b ? a : b;
}
template <typename T>
__device__ __forceinline__ T nan_min(T a, T b) {
    if (is_nan(a) || is_nan(b)) return is_nan(a) ? a : b;
    return a < b ? a : b;
}

/// Calls f(T{}) for a compute dtype (F32, F64, I64; Bool as uint8).
template <typename F>
void visit_compute(DType d, F&& f) {
    switch (d) {
        case DType::F32:
            return f(float{});
        case DType::F64:
            return f(double{});
        case DType::I64:
            return f(std::int64_t{});
        default:
            return f(std::uint8_t{});
    }
}

/// Checks the launch that was just queued (configuration errors surface here).
void check_launch(const char* kernel);
/// Throws ember::DeviceError naming `call` when `e` is not cudaSuccess (runtime.cpp).
void check(cudaError_t e, const char* call);

/// 16 bytes global -> shared, asynchronously (cp.async, sm_80 on); zeros instead where `in` is
/// false. Each thread's copies since its last commit form a group; wait<N> waits until at most N
/// of its groups are in flight.
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool in) {
    const auto a = static_cast<unsigned>(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(a), "l"(src),
                 "r"(in ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() {
    asm volatile("cp.async.commit_group;\n" ::);
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

/// Lets `kernel` use `bytes` of dynamic shared memory (above the default 48 KiB) on the current
/// device, once per device: `done` is the flags of one kernel instantiation (a static array
/// beside the launch).
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

}  // namespace ember::detail::cuda
