#pragma once
// Launchers of conv_small.cu's f32 kernels for 2-d convolutions with few channels (a network's
// first layers on grey or RGB images: the guide CNN's 1 → 8 and 8 → 16 layers), where cuDNN's
// exact-f32 kernels (no TF32) keep most of the GPU idle: at batch 4096 on an H200 its weight
// gradients took 0.34 and 0.72 ms and the first layer's forward 0.20 ms, against memory-bound
// times near 0.03-0.1 ms.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels.hpp"

namespace ember::detail::cuda {

/// The fewest output positions (batch · Ho · Wo) conv_small.cu's kernels take: below, cuDNN's
/// kernels have work enough for the GPU (the guide CNN at batch 64: 43 264 and 36 864).
constexpr std::int64_t kSmallMinPositions = std::int64_t{1} << 17;
/// Whether conv_small.cu's forward takes a convolution of `g` (2-d, one group, NCHW f32):
/// at most kSmallFwdTaps input values an output (cin · kh · kw), kSmallFwdCout channels and
/// at least kSmallMinPositions output positions.
constexpr std::int64_t kSmallFwdTaps = 32, kSmallFwdCout = 64;
bool small_forward_fits(const ConvGeom& g, std::int64_t cout);
/// y [N, cout, Ho, Wo] (contiguous f32) = conv(x [N, C, H, W], w [cout, C, kh, kw]) + bias
/// (null: none), all contiguous f32.
void launch_conv_small_forward(const ConvGeom& g, std::int64_t cout, const float* x, const float* w,
                               const float* bias, float* y, cudaStream_t s);

/// Whether conv_small.cu's weight gradient takes a convolution of `g` (2-d, one group, NCHW
/// f32, 3 × 3 kernel, cout · cin ≤ 256, one image's input and output gradient in shared
/// memory, at least kSmallMinPositions output positions).
bool small_wgrad_fits(const ConvGeom& g, std::int64_t cout);
/// f32 scratch elements launch_conv_small_wgrad needs on a device of `sms` multiprocessors.
std::int64_t small_wgrad_partials(const ConvGeom& g, std::int64_t cout, int sms);
/// dw [cout, C, 3, 3] (contiguous f32) from x [N, C, H, W] and dy [N, cout, Ho, Wo]
/// (contiguous f32): each block sums its images' products in shared memory, the blocks' sums
/// are added in a fixed order (deterministic).
void launch_conv_small_wgrad(const ConvGeom& g, std::int64_t cout, int sms, const float* x,
                             const float* dy, float* part, float* dw, cudaStream_t s);

}  // namespace ember::detail::cuda
