#pragma once
// The public option structs of module ops, turned into the kernels' dynamic-rank parameters.
// Shared by backend.cpp (forwards) and backward.cpp (gradients).
#include "ember/tensor/ops.hpp"
#include "kernels.hpp"

namespace ember::detail::cpu {

/// ConvOptions<N> or ConvTransposeOptions<N> → ConvParams.
template <std::size_t N, typename O>
ConvParams conv_params(const O& o) {
    ConvParams p;
    p.n = N;
    for (std::size_t i = 0; i < N; ++i) {
        p.stride[i] = o.stride[i];
        p.padding[i] = o.padding[i];
        p.dilation[i] = o.dilation[i];
        if constexpr (requires { o.padding_out; }) p.padding_out[i] = o.padding_out[i];
    }
    p.groups = o.groups;
    return p;
}

using pool::pool_params;

}  // namespace ember::detail::cpu
