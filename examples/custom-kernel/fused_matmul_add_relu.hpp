#pragma once
// A backend extension, as in Burn's custom-kernel example: one new op, relu(lhs @ rhs + bias),
// that every backend gets through a reference implementation written with tensor ops, and that
// a backend may replace with its own kernel by specialising the trait.
#include <algorithm>
#include <cstdint>

#include <ember/ember.hpp>

namespace custom {

/// The trait: the reference implementation, for any backend (and differentiable on Autodiff
/// stacks, since it is made of tensor ops). Under Fusion<B>, the add and the relu after the
/// matmul fuse into one kernel by themselves.
template <ember::Backend B>
struct FusedMatmulAddRelu {
    /// relu(lhs @ rhs + bias): lhs [b, m, k], rhs [b, k, n], bias [b, m, n] (or broadcastable).
    static ember::Tensor<B, 3> forward(ember::Tensor<B, 3> lhs, ember::Tensor<B, 3> rhs,
                                       ember::Tensor<B, 3> bias) {
        return ember::activation::relu(lhs.matmul(rhs) + bias);
    }
};

/// The CPU's own kernel: the backend's GEMM, then the bias and the relu in one pass over the
/// product, written in place (the product is a fresh buffer nobody else holds).
template <>
struct FusedMatmulAddRelu<ember::Cpu> {
    static ember::Tensor<ember::Cpu, 3> forward(ember::Tensor<ember::Cpu, 3> lhs,
                                                ember::Tensor<ember::Cpu, 3> rhs,
                                                ember::Tensor<ember::Cpu, 3> bias) {
        auto out = lhs.matmul(rhs).into_primitive();
        // The bias as a dense [b, m, n] block: expand is a view, contiguous() copies only when
        // the bias is broadcast.
        const auto dims = out.shape;
        auto b = bias.expand<3>({dims[0], dims[1], dims[2]}).into_primitive();
        const std::size_t n = dims.num_elements();
        float* y = out.data<float>();
        if (b.is_contiguous()) {
            const float* bb = b.data<float>();
            for (std::size_t i = 0; i < n; ++i) y[i] = std::max(y[i] + bb[i], 0.0f);
        } else {
            // A broadcast bias: walk it by its strides (0 along broadcast dims).
            std::size_t i = 0;
            for (std::size_t p = 0; p < dims[0]; ++p)
                for (std::size_t q = 0; q < dims[1]; ++q)
                    for (std::size_t r = 0; r < dims[2]; ++r, ++i) {
                        const auto at = static_cast<std::int64_t>(p) * b.strides[0] +
                                        static_cast<std::int64_t>(q) * b.strides[1] +
                                        static_cast<std::int64_t>(r) * b.strides[2];
                        const float v = b.data<float>()[at];
                        y[i] = std::max(y[i] + v, 0.0f);
                    }
        }
        return ember::Tensor<ember::Cpu, 3>(std::move(out));
    }
};

/// The op users call: the backend's kernel where it has one, the reference elsewhere.
template <ember::Backend B>
ember::Tensor<B, 3> fused_matmul_add_relu(ember::Tensor<B, 3> lhs, ember::Tensor<B, 3> rhs,
                                          ember::Tensor<B, 3> bias) {
    return FusedMatmulAddRelu<B>::forward(std::move(lhs), std::move(rhs), std::move(bias));
}

}  // namespace custom
