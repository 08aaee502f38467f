#pragma once
// Winograd's minimal filtering for the CPU's 3×3 convolutions (winograd.cpp): the forward
// convolution of conv.cpp hands a 2-d float 3×3, stride-1, dilation-1, ungrouped problem here
// first, and runs its own im2col + GEMM where this declines.
#include "conv_geometry.hpp"

namespace ember::detail::cpu {

/// out = conv(x, w) + bias by Winograd's F(m×m, 3×3) (m = 2 or 4) where the shape and
/// EMBER_CPU_WINOGRAD allow it and measurement says it pays; false (nothing written) elsewhere.
/// x, w and out are contiguous NCHW float tensors of the checked geometry g.
bool conv_winograd(const CpuTensor& x, const CpuTensor& w, const float* bias, const Geo& g,
                   std::size_t groups, CpuTensor& out);

}  // namespace ember::detail::cpu
