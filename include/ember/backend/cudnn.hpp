#pragma once
// cuDNN on the CUDA backend: whether convolutions go through cuDNN 9 (loaded at run time from
// libcudnn.so.9) or through ember's own im2col + GEMM kernels, and how many cuDNN has run.
// docs/cuda.md, "Convolutions and cuDNN".
#include <cstdint>
#include <string>

#include "ember/export.hpp"

namespace ember::cuda {

/// Whether cuDNN 9 could be loaded in this process (libcudnn.so.9, or the file that
/// EMBER_CUDNN_LIBRARY names) and no device has failed to make a cuDNN handle so far. Loads it
/// on the first call; needs no GPU.
EMBER_API bool cudnn_available();
/// Why cuDNN is not available ("" when it is): the loader's message, the version found, or
/// cudnnCreate's error on a device.
EMBER_API std::string cudnn_unavailable_reason();
/// The loaded cuDNN's version as cudnnGetVersion() gives it (91400 for 9.14.0); 0 when absent.
EMBER_API std::size_t cudnn_version();
/// Lets convolutions use cuDNN (true, the default unless the environment has EMBER_CUDNN=0) or
/// keeps them on ember's im2col + GEMM kernels (false). Takes effect at the next convolution.
EMBER_API void set_use_cudnn(bool use);
/// Whether convolutions may use cuDNN now (the setting, whether or not cuDNN is available).
EMBER_API bool use_cudnn();
/// Convolutions (forward, input gradients and weight gradients, transposed ones included) that
/// cuDNN has run in this process so far; the rest ran on the im2col kernels.
EMBER_API std::uint64_t cudnn_convolutions();

}  // namespace ember::cuda
