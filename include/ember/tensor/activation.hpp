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
/// log(1 + e^(beta·x)) / beta, computed without overflow; x itself where beta·x > threshold
/// (PyTorch's Softplus, whose defaults these are).
template <Backend B, std::size_t D>
Tensor<B, D> softplus(Tensor<B, D> x, double beta = 1.0, double threshold = 20.0) {
    auto bx = x * beta;
    auto pos = bx.clamp_min(0.0);
    auto soft = (pos + (-bx.abs()).exp().log1p()) / beta;
    return soft.mask_where(bx.greater_elem(threshold), x);
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
/// x · sigmoid(x) (Burn's and ONNX's name for silu).
template <Backend B, std::size_t D>
Tensor<B, D> swish(Tensor<B, D> x) {
    return silu(std::move(x));
}
/// The gelu of the tanh approximation: 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))) (PyTorch's
/// gelu(approximate="tanh")).
template <Backend B, std::size_t D>
Tensor<B, D> gelu_tanh(Tensor<B, D> x) {
    constexpr double k = 0.7978845608028654;  // √(2/π)
    auto inner = (x + x * x * x * 0.044715) * k;
    return x * 0.5 * (inner.tanh() + 1.0);
}
namespace detail {
/// e^min(x, 0) - 1: the negative branch of the exponential units. Clamping first keeps the
/// branch that mask_where discards finite, so its zero gradient never becomes ∞ · 0 = NaN.
template <Backend B, std::size_t D>
Tensor<B, D> exp_neg_m1(const Tensor<B, D>& x) {
    return x.clamp_max(0.0).exp() - 1.0;
}
}  // namespace detail
/// x for x > 0, alpha·(e^x - 1) otherwise (PyTorch's ELU; any alpha, as PyTorch).
template <Backend B, std::size_t D>
Tensor<B, D> elu(Tensor<B, D> x, double alpha = 1.0) {
    auto neg = detail::exp_neg_m1(x) * alpha;
    return neg.mask_where(x.greater_elem(0.0), x);
}
/// max(0, x) + min(0, alpha·(e^(x/alpha) - 1)) (PyTorch's CELU); ArgumentError for alpha 0.
template <Backend B, std::size_t D>
Tensor<B, D> celu(Tensor<B, D> x, double alpha = 1.0) {
    EMBER_CHECK(alpha != 0.0, Argument, "celu: alpha cannot be 0");
    auto neg = detail::exp_neg_m1(x / alpha) * alpha;
    return neg.mask_where(x.greater_elem(0.0), x);
}
/// scale·elu(x, alpha) with the self-normalising constants of Klambauer et al. (PyTorch's SELU).
template <Backend B, std::size_t D>
Tensor<B, D> selu(Tensor<B, D> x) {
    constexpr double alpha = 1.6732632423543772848170429916717;
    constexpr double scale = 1.0507009873554804934193349852946;
    return elu(std::move(x), alpha) * scale;
}
/// x / (1 + |x|).
template <Backend B, std::size_t D>
Tensor<B, D> softsign(Tensor<B, D> x) {
    auto denom = x.abs() + 1.0;
    return x / denom;
}
/// clamp(x, min, max) (PyTorch's Hardtanh, defaults -1 and 1); ArgumentError when min > max.
template <Backend B, std::size_t D>
Tensor<B, D> hard_tanh(Tensor<B, D> x, double min = -1.0, double max = 1.0) {
    EMBER_CHECK(min <= max, Argument, "hard_tanh: min ", min, " is greater than max ", max);
    return std::move(x).clamp(min, max);
}
/// clamp(x, 0, 6).
template <Backend B, std::size_t D>
Tensor<B, D> relu6(Tensor<B, D> x) {
    return std::move(x).clamp(0.0, 6.0);
}
/// x · relu6(x + 3) / 6 (PyTorch's Hardswish).
template <Backend B, std::size_t D>
Tensor<B, D> hard_swish(Tensor<B, D> x) {
    auto gate = (x + 3.0).clamp(0.0, 6.0) / 6.0;
    return x * gate;
}
/// The gated linear unit: a · sigmoid(b), where a and b are the two halves of x along `dim`;
/// ShapeError when that dim's size is odd.
template <Backend B, std::size_t D>
Tensor<B, D> glu(Tensor<B, D> x, long dim = -1) {
    const std::size_t d = normalize_dim(dim, D, "glu");
    const std::size_t n = x.dims()[d];
    EMBER_CHECK(n % 2 == 0, Shape, "glu: dim ", dim, " of input ", x.shape().to_string(),
                " has odd size ", n, "; it must split into two halves");
    auto a = x.narrow(static_cast<long>(d), 0, n / 2);
    auto b = x.narrow(static_cast<long>(d), n / 2, n / 2);
    return a * sigmoid(std::move(b));
}
/// x where |x| > lambda, else 0 (PyTorch's Hardshrink).
template <Backend B, std::size_t D>
Tensor<B, D> hard_shrink(Tensor<B, D> x, double lambda = 0.5) {
    return x.mask_fill(x.abs().lower_equal_elem(lambda), 0.0);
}
/// x - bias where x > lambda, x + bias where x < -lambda, else 0 (Burn's and ONNX's Shrink;
/// so NaN gives 0).
template <Backend B, std::size_t D>
Tensor<B, D> shrink(Tensor<B, D> x, double lambda = 0.5, double bias = 0.0) {
    auto zero = x.zeros_like();
    auto out = zero.mask_where(x.greater_elem(lambda), x - bias);
    return out.mask_where(x.lower_elem(-lambda), x + bias);
}
/// x - lambda where x > lambda, x + lambda where x < -lambda, else 0 (PyTorch's Softshrink, NaN
/// included); ArgumentError for a negative lambda, as PyTorch.
template <Backend B, std::size_t D>
Tensor<B, D> soft_shrink(Tensor<B, D> x, double lambda = 0.5) {
    EMBER_CHECK(lambda >= 0.0, Argument, "soft_shrink: lambda must be >= 0, got ", lambda);
    return shrink(std::move(x), lambda, lambda);
}
/// x where x > alpha, else 0 (Burn's and ONNX's ThresholdedRelu; so NaN gives 0).
template <Backend B, std::size_t D>
Tensor<B, D> thresholded_relu(Tensor<B, D> x, double alpha = 1.0) {
    return x.zeros_like().mask_where(x.greater_elem(alpha), x);
}
/// x where x > threshold, else value (PyTorch's Threshold).
template <Backend B, std::size_t D>
Tensor<B, D> threshold(Tensor<B, D> x, double threshold, double value) {
    return x.mask_fill(x.lower_equal_elem(threshold), value);
}
/// x - tanh(x).
template <Backend B, std::size_t D>
Tensor<B, D> tanhshrink(Tensor<B, D> x) {
    return x - x.tanh();
}
/// Randomised leaky relu (PyTorch's RReLU): in training each negative element gets its own slope
/// drawn uniformly from [lower, upper); otherwise the fixed slope (lower + upper) / 2.
/// ArgumentError when lower > upper.
template <Backend B, std::size_t D>
Tensor<B, D> rrelu(Tensor<B, D> x, double lower = 1.0 / 8.0, double upper = 1.0 / 3.0,
                   bool training = false) {
    EMBER_CHECK(lower <= upper, Argument, "rrelu: lower bound ", lower,
                " is greater than upper bound ", upper);
    if (!training || lower == upper) return leaky_relu(std::move(x), (lower + upper) / 2.0);
    auto slope = x.random_like(Distribution::Uniform(lower, upper));
    return x.mask_where(x.lower_elem(0.0), x * slope);
}
/// Softmax along `dim`. Under an ember::Autocast guard an f16/bf16 input is cast to f32 first.
template <Backend B, std::size_t D>
Tensor<B, D> softmax(Tensor<B, D> x, long dim) {
    const std::size_t d = normalize_dim(dim, D, "softmax");
    if (::ember::detail::autocast::current()) [[unlikely]]
        x = ::ember::detail::autocast::widen(x);
    return Tensor<B, D>(B::float_softmax(std::move(x).into_primitive(), d));
}
/// Log-softmax along `dim`. Under an ember::Autocast guard an f16/bf16 input is cast to f32
/// first.
template <Backend B, std::size_t D>
Tensor<B, D> log_softmax(Tensor<B, D> x, long dim) {
    const std::size_t d = normalize_dim(dim, D, "log_softmax");
    if (::ember::detail::autocast::current()) [[unlikely]]
        x = ::ember::detail::autocast::widen(x);
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
