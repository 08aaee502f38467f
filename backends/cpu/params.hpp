#pragma once
// The public option structs of module ops, turned into the kernels' dynamic-rank parameters.
// Shared by backend.cpp (forwards) and backward.cpp (gradients).
#include "ember/tensor/ops.hpp"
#include "kernels.hpp"

namespace ember::detail::cpu {

using check::conv_params;  // ConvOptions<N> or ConvTransposeOptions<N> → ConvParams

using pool::pool_params;

}  // namespace ember::detail::cpu
