#pragma once
// Launchers of the direct weight-gradient kernels (conv_wgrad.cu), for convolutions whose output
// channels each see few input values per position.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels.hpp"

namespace ember::detail::cuda {

/// The most input values per output channel and position (cin/groups · taps) the direct
/// weight-gradient kernels take (conv_wgrad.cu).
constexpr int kWgradTaps = 32;
/// A convolution's weight gradient for the direct kernels, in 3-d form.
struct WgradGeom {
    ConvGeom conv;                      ///< `channels`: all the input's channels
    std::int64_t groups = 1, cout = 1;  ///< groups and output channels
    /// Element strides of x and dy as [N, C, D, H, W] and of dw as [Co, Cg, KD, KH, KW]
    /// (0 for the leading unit dims).
    std::int64_t xs[5] = {}, ys[5] = {}, ws[5] = {};
    bool dy_channels_fast = false;  ///< dy's channel stride is 1 (channels-last)
};
/// f32 scratch elements launch_wgrad_direct needs on a device of `sms` multiprocessors.
std::int64_t wgrad_partials(const WgradGeom& g, int sms);
/// dw (dtype t, as x and dy: F32, F16 or BF16) from x and dy; cin/groups · taps ≤ kWgradTaps.
void launch_wgrad_direct(DType t, const WgradGeom& g, int sms, const void* x, const void* dy,
                         float* part, void* dw, cudaStream_t s);

}  // namespace ember::detail::cuda
