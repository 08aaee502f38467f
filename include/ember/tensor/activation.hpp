#pragma once
// Activation functions (ember::activation), as Burn's burn::tensor::activation. Most are
// composed from tensor ops; relu, gelu, sigmoid and (log_)softmax go to backend functions that
// backends implement as single kernels.
#include "tensor.hpp"

namespace ember::activation {

/// max(x, 0).
template <Backend B, std::size_t D>
Tensor<B, D> relu(Tensor<B, D> x) {
    return Tensor<B, D>(B::float_unary(UnaryOp::Relu, std::move(x).into_primitive()));
}
/// x · Φ(x) with the exact erf form (PyTorch's default gelu).
template <Backend B, std::size_t D>
Tensor<B, D> gelu(Tensor<B, D> x) {
    return Tensor<B, D>(B::float_unary(UnaryOp::Gelu, std::move(x).into_primitive()));
}
/// 1 / (1 + e^-x).
template <Backend B, std::size_t D>
Tensor<B, D> sigmoid(Tensor<B, D> x) {
    return Tensor<B, D>(B::float_unary(UnaryOp::Sigmoid, std::move(x).into_primitive()));
}
/// tanh(x).
template <Backend B, std::size_t D>
Tensor<B, D> tanh(Tensor<B, D> x) {
    return std::move(x).tanh();
}
/// x · sigmoid(x).
template <Backend B, std::size_t D>
Tensor<B, D> silu(Tensor<B, D> x) {
    return x * sigmoid(x);
}
/// clamp(alpha · x + beta, 0, 1); PyTorch's hardsigmoid is alpha = 1/6, beta = 0.5.
template <Backend B, std::size_t D>
Tensor<B, D> hard_sigmoid(Tensor<B, D> x, double alpha = 1.0 / 6.0, double beta = 0.5) {
    return (std::move(x) * alpha + beta).clamp(0.0, 1.0);
}
/// x for x >= 0, slope · x otherwise.
template <Backend B, std::size_t D>
Tensor<B, D> leaky_relu(Tensor<B, D> x, double negative_slope = 0.01) {
    return x.mask_where(x.lower_elem(0.0), x * negative_slope);
}
/// log(1 + e^(beta·x)) / beta, computed without overflow.
template <Backend B, std::size_t D>
Tensor<B, D> softplus(Tensor<B, D> x, double beta = 1.0) {
    auto bx = std::move(x) * beta;
    auto pos = bx.clamp_min(0.0);
    return (pos + (-bx.abs()).exp().log1p()) / beta;
}
/// log(sigmoid(x)) = -softplus(-x).
template <Backend B, std::size_t D>
Tensor<B, D> log_sigmoid(Tensor<B, D> x) {
    return -softplus(-std::move(x));
}
/// x · tanh(softplus(x)).
template <Backend B, std::size_t D>
Tensor<B, D> mish(Tensor<B, D> x) {
    return x * softplus(x).tanh();
}
/// x for x >= 0, alpha · x otherwise; alpha has one value or one per channel (dim 1).
template <Backend B, std::size_t D>
Tensor<B, D> prelu(Tensor<B, D> x, const Tensor<B, 1>& alpha) {
    const std::size_t n = alpha.dims()[0];
    Shape s = Shape::filled(D, 1);
    if (n != 1) {
        EMBER_CHECK(D >= 2 && x.dims()[1] == n, Shape, "prelu: ", n,
                    " weights do not match the channels of ", x.shape().to_string());
        s[1] = n;
    }
    auto a = alpha.template reshape<D>(s);
    return x.mask_where(x.lower_elem(0.0), x * a);
}
/// Softmax along `dim`.
template <Backend B, std::size_t D>
Tensor<B, D> softmax(Tensor<B, D> x, long dim) {
    const std::size_t d = normalize_dim(dim, D, "softmax");
    return Tensor<B, D>(B::float_softmax(std::move(x).into_primitive(), d));
}
/// Log-softmax along `dim`.
template <Backend B, std::size_t D>
Tensor<B, D> log_softmax(Tensor<B, D> x, long dim) {
    const std::size_t d = normalize_dim(dim, D, "log_softmax");
    return Tensor<B, D>(B::float_log_softmax(std::move(x).into_primitive(), d));
}
/// softmax(-x).
template <Backend B, std::size_t D>
Tensor<B, D> softmin(Tensor<B, D> x, long dim) {
    return softmax(-std::move(x), dim);
}
/// Softmax with an extra zero logit: e^x_i / (1 + Σ e^x_j), so all-small rows give ~0.
template <Backend B, std::size_t D>
Tensor<B, D> quiet_softmax(Tensor<B, D> x, long dim) {
    // The result does not depend on the shift m, so no gradient flows through it (and none
    // can turn into 0 · ∞ when exp(-m) overflows).
    auto m = x.max_dim(dim).detach();
    auto e = (std::move(x) - m).exp();
    auto denom = e.sum_dim(dim) + (-m).exp();
    return e / denom;
}

}  // namespace ember::activation
