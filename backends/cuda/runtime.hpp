#pragma once
// Host-side runtime of the CUDA backend: error checks that name the failing call, the one
// stream per device, cuBLAS handles, tensor allocation from the caching pool, and the small
// helpers every host file uses (views, iteration plans, dtype rules).
#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <span>

#include "blas.hpp"
#include "ember/backend/detail/cuda_tensor.hpp"
#include "ember/tensor/error.hpp"
#include "kernels.hpp"

namespace ember::detail::cuda {

// The EMBER_API functions here are ember::nccl's way into the CUDA backend (another library).

/// Throws ember::DeviceError naming `call` when `e` is not cudaSuccess.
EMBER_API void check(cudaError_t e, const char* call);
/// Throws ember::DeviceError naming `call` when `st` is not CUBLAS_STATUS_SUCCESS.
void check_cublas(cublasStatus_t st, const char* call);

#define EMBER_CUDA_CHECK(call) ::ember::detail::cuda::check((call), #call)
#define EMBER_CUBLAS_CHECK(call) ::ember::detail::cuda::check_cublas((call), #call)

/// Makes `device` current on this thread (validating it; throws DeviceError without a GPU).
EMBER_API void use_device(int device);
/// The device's stream (created on first use; every op of the device runs on it).
EMBER_API cudaStream_t stream(int device);
/// The device's cuBLAS handle, bound to its stream.
cublasHandle_t cublas(int device);
/// A cuBLASLt-sized workspace for the device (32 MiB, allocated once).
void* cublas_workspace(int device, std::size_t* bytes);
/// Whether TF32 is allowed for f32 matmuls.
bool tf32_allowed();
/// Waits for the device's stream.
EMBER_API void synchronize(int device);
/// Copies `bytes[i]` from device memory `src[i]` into host memory `dst[i]`, for every i, with
/// one wait for the device's stream (through pinned staging, so the copies stay asynchronous).
void read_many(int device, std::span<const void* const> src, std::span<const std::size_t> bytes,
               std::span<std::byte* const> dst);

/// A contiguous tensor of `shape` and `dtype` on `device`, uninitialised.
CudaTensor empty(const Shape& shape, DType dtype, int device);
/// `t`, about to be written in place: forgets what was known about its values.
inline CudaTensor reuse(CudaTensor t) {
    t.storage->lo = 1;
    t.storage->hi = 0;
    return t;
}
/// A contiguous copy of `t` (or `t` itself when already contiguous).
CudaTensor contiguous(CudaTensor t);
/// A new contiguous buffer with the values of `t` (never `t`'s own).
CudaTensor fresh_copy(const CudaTensor& t);
/// `t` converted to `dtype` (t itself when it already has it), in `t`'s layout where that is
/// dense in some order (channels-last data stays channels-last), else contiguous.
CudaTensor cast(CudaTensor t, DType dtype);
/// Whether `t`'s elements lie densely in some order of its dims: a permutation of a contiguous
/// layout (contiguous, or channels-last [N, C, H, W] data stored as [N, H, W, C]).
bool dense_layout(const CudaTensor& t);
/// A new tensor of `shape` and `dtype`, laid out as `like` where `like` has that shape and a
/// dense layout (elementwise results keep their operand's layout, as PyTorch's do), else
/// contiguous.
CudaTensor empty_like_layout(const CudaTensor& like, const Shape& shape, DType dtype);
/// Strides that store [N, C, spatial...] as [N, spatial..., C] (channels last).
Strides channels_last_strides(const Shape& s);
/// Whether `t` (rank 3 or more) is stored channels-last and is not also contiguous (C and the
/// spatial size above 1).
bool is_channels_last(const CudaTensor& t);
/// `t` stored channels-last: `t` itself where it is, else a copy.
CudaTensor to_channels_last(CudaTensor t);
/// `t` stored channels-last with `channels_last`, else contiguous (a copy only where it is not).
CudaTensor to_layout(CudaTensor t, bool channels_last);
/// `t` in `like`'s layout where `like` is channels-last, else contiguous: the operands of a
/// kernel that walks both alike.
CudaTensor to_layout_of(CudaTensor t, const CudaTensor& like);
/// dst = src for views of the same shape (src may broadcast; dtypes may differ).
void copy_into(const CudaTensor& dst, const CudaTensor& src);
/// Reads one int64 scalar computed on the device (waits for the stream); `op` names what needs
/// it (a captured step cannot wait: the error names it).
std::int64_t read_i64(const void* device_ptr, int device,
                      const char* op = "an op that reads a value back (an index or value check)");
/// Checks that every tensor is on `device` (ops take tensors of one device).
void check_same_device(const char* op, const CudaTensor& a, const CudaTensor& b);

/// Strides of `t` broadcast to `out` (0 for new or size-1 dims).
Strides broadcast_strides(const CudaTensor& t, const Shape& out);

/// Compute dtype of a dtype: f16/bf16 → f32, narrow ints → i64, the rest themselves.
DType compute_dtype(DType d);
/// The wider of two dtypes (bool < ints < bf16 < f16 < f32 < f64).
DType promote(DType a, DType b);

}  // namespace ember::detail::cuda
