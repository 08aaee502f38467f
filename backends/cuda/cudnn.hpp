#pragma once
// Convolutions through cuDNN 9's convolution API (cudnnConvolutionForward / BackwardData /
// BackwardFilter), for conv.cpp. Each function takes tensors of one float dtype on one device,
// all contiguous or, for 2-d convolutions, all channels-last (NHWC data, KRSC filters: cuDNN's
// tensor-core kernels' own layout), with `out` already allocated, and returns false where cuDNN
// is off, absent, or refuses the configuration: the caller then runs its im2col + GEMM kernels
// instead.
#include "ops.hpp"

namespace ember::detail::cuda::cudnn {

/// Whether a convolution should try cuDNN: it is switched on (EMBER_CUDNN, set_use_cudnn) and
/// the library loaded.
bool wanted();
/// The dtype a cuDNN convolution of x and w runs in: their own where both have one float dtype
/// (f16/bf16 on tensor cores, accumulating in f32), f32 otherwise (f64 where either is f64).
DType native_dtype(DType x, DType w);

/// y = conv(x, w) without bias: x [N, C, L...], w [O, C / groups, K...], y [N, O, L'...].
bool forward(const CudaTensor& x, const CudaTensor& w, const CudaTensor& y, const ConvParams& p);
/// dx = the input gradient of the convolution of an x of dx's shape with w, for output gradient
/// dy (a transposed convolution of dy): dy [N, O, L'...], w [O, C / groups, K...], dx [N, C, L...].
bool backward_data(const CudaTensor& dy, const CudaTensor& w, const CudaTensor& dx,
                   const ConvParams& p);
/// dw = the weight gradient of conv(x, w) for output gradient dy: dw [O, C / groups, K...].
bool backward_filter(const CudaTensor& x, const CudaTensor& dy, const CudaTensor& dw,
                     const ConvParams& p);

}  // namespace ember::detail::cuda::cudnn
