#pragma once
// Functional module ops (ember::module), as Burn's burn::tensor::module: convolutions, pooling,
// interpolation, embedding and linear. Forward only here; Autodiff adds their backward.
#include <optional>
#include <type_traits>

#include "fusion_program.hpp"
#include "tensor.hpp"

namespace ember::module {

/// An optional tensor argument (bias, mask). Its backend is not deduced from it (only from the
/// other arguments), so that callers may pass a tensor or `std::nullopt` directly.
template <Backend B, std::size_t D>
using OptionalTensor = std::optional<std::type_identity_t<Tensor<B, D>>>;

namespace detail {
/// linear as a matmul and a broadcast add (`weight` already in the autocast dtype).
template <Backend B, std::size_t D>
Tensor<B, D> linear_composed(const Tensor<B, D>& x, const Tensor<B, 2>& weight,
                             const std::optional<Tensor<B, 1>>& bias) {
    const Shape ws = weight.shape();
    Shape s = Shape::filled(D, 1);
    s[D - 2] = ws[0];
    s[D - 1] = ws[1];
    auto y = x.matmul(weight.template reshape<D>(s));
    if (bias) {
        Shape b = Shape::filled(D, 1);
        b[D - 1] = ws[1];
        y = std::move(y) + ::ember::detail::autocast::lower(*bias).template reshape<D>(b);
    }
    return y;
}
/// Whether B may run a matmul with `t` as an operand with an epilogue, where B answers per
/// tensor (`B::has_matmul_epilogue`: Dispatch, for the stack `t` lives on); true elsewhere (the
/// compile-time may_fuse_matmul_epilogue said so). linear asks before it prepares the operands
/// for a call the stack would decline.
template <Backend B, std::size_t D>
bool matmul_epilogue_on(const Tensor<B, D>& t) {
    if constexpr (requires {
                      { B::has_matmul_epilogue(t.primitive()) } -> std::same_as<bool>;
                  })
        return B::has_matmul_epilogue(t.primitive());
    else
        return true;
}
}  // namespace detail

/// x @ wᵀ... as Burn: x [.., in] @ weight [in, out] + bias [out]. Under an ember::Autocast guard
/// all three are cast to its dtype (the product through Tensor::matmul), and so is the output.
/// Where the backend adds a bias row inside its GEMM (fusion::may_fuse_matmul_epilogue: the
/// CPU, CUDA, Dispatch on their stacks and Autodiff over them), x's leading dims become the
/// product's rows and the bias add runs in the product's kernel; otherwise, or where it declines
/// the operands, a matmul and an add.
template <Backend B, std::size_t D>
Tensor<B, D> linear(const Tensor<B, D>& x, const Tensor<B, 2>& weight_in,
                    const OptionalTensor<B, 1>& bias = std::nullopt) {
    // The parameter itself is cast (not its reshaped view, a new node): autocast's cache
    // recognises the parameter and reuses its cast. The product then casts x only.
    const Tensor<B, 2> weight = ::ember::detail::autocast::lower(weight_in);
    if constexpr (fusion::may_fuse_matmul_epilogue<B> && D >= 2) {
        if (bias && detail::matmul_epilogue_on(weight)) {
            // Cast here as Tensor::matmul and the add would (once: the fallback below reuses
            // the casts, which are then no-ops).
            const Tensor<B, D> xl = ::ember::detail::autocast::lower(x);
            const Tensor<B, 1> bl = ::ember::detail::autocast::lower(*bias);
            const Shape xs = xl.shape(), ws = weight.shape();
            if (xs[D - 1] == ws[0] && bl.shape()[0] == ws[1]) {  // else the matmul's error
                std::size_t rows = 1;
                for (std::size_t d = 0; d + 1 < D; ++d) rows *= xs[d];
                const auto x2 = xl.template reshape<2>(std::array<std::size_t, 2>{rows, ws[0]});
                if (auto y = B::fused_matmul_epilogue(x2.primitive(), weight.primitive(),
                                                      bl.primitive(), fusion::MatmulEpilogue{})) {
                    Shape ys = xs;
                    ys[D - 1] = ws[1];
                    return Tensor<B, 2>(std::move(*y)).template reshape<D>(ys);
                }
            }
            return detail::linear_composed(xl, weight, std::optional<Tensor<B, 1>>(bl));
        }
    }
    return detail::linear_composed(x, weight, bias);
}

/// Layer normalisation over the last dim (torch.nn.functional.layer_norm with a 1-d
/// normalized_shape): (x - mean) / sqrt(var + eps) · gamma + beta, with the biased variance;
/// gamma and beta [last dim] are optional. One kernel where the backend has one. Under an
/// ember::Autocast guard f16/bf16 operands are cast to f32 (so is the output).
template <Backend B, std::size_t D>
Tensor<B, D> layer_norm(const Tensor<B, D>& x_in,
                        const OptionalTensor<B, 1>& gamma_in = std::nullopt,
                        const OptionalTensor<B, 1>& beta_in = std::nullopt, double eps = 1e-5) {
    namespace ac = ::ember::detail::autocast;  // copies of the handles without a guard
    const auto x = ac::widen(x_in);
    const auto gamma = ac::widen(gamma_in), beta = ac::widen(beta_in);
    static_assert(D >= 1, "layer_norm: the input needs a last dim");
    const std::size_t c = x.shape()[D - 1];
    for (const auto* p : {&gamma, &beta})
        if (*p)
            EMBER_CHECK((*p)->shape()[0] == c, Shape, "layer_norm: ",
                        p == &gamma ? "gamma" : "beta", " of shape ", (*p)->shape().to_string(),
                        " does not match the last dim of the input of shape ",
                        x.shape().to_string());
    EMBER_CHECK(eps >= 0.0, Argument, "layer_norm: eps must be non-negative, got ", eps);
    std::optional<typename B::FloatTensorPrimitive> g, b;
    if (gamma) g = gamma->primitive();
    if (beta) b = beta->primitive();
    auto r = B::float_layer_norm(x.primitive(), std::move(g), std::move(b), eps);
    return Tensor<B, D>(std::move(r[0]));
}

/// What module::add_layer_norm returns.
template <Backend B, std::size_t D>
struct AddLayerNormOutput {
    Tensor<B, D> sum;     ///< x + residual
    Tensor<B, D> normed;  ///< layer_norm(sum), in the dtype asked for
};

/// A residual addition and the layer norm of its result, as a pre-norm transformer runs them
/// between its blocks: sum = x + residual (dtypes promoting as for `+`) and normed =
/// layer_norm(sum, gamma, beta, eps), cast to `out` when given — the dtype the next block's
/// products read: under an ember::Autocast guard its dtype, which gives the values the products'
/// own casts would (layer norm itself computes in f32, as layer_norm does under the guard).
/// x and residual must have one shape. One kernel where the backend has one (CUDA: x and the
/// residual read once, the sum and the normed rows written once, the latter in 16 bits when
/// `out` asks for them); an addition, layer_norm and a cast elsewhere.
template <Backend B, std::size_t D>
AddLayerNormOutput<B, D> add_layer_norm(const Tensor<B, D>& x, const Tensor<B, D>& residual,
                                        const OptionalTensor<B, 1>& gamma = std::nullopt,
                                        const OptionalTensor<B, 1>& beta = std::nullopt,
                                        double eps = 1e-5,
                                        std::optional<DType> out = std::nullopt) {
    namespace ac = ::ember::detail::autocast;
    namespace check = ::ember::detail::check;
    using check::Operand;
    std::optional<Operand> g, b;
    if (gamma) g = Operand(gamma->shape(), gamma->dtype());
    if (beta) b = Operand(beta->shape(), beta->dtype());
    check::add_layer_norm(Operand(x.shape(), x.dtype()),
                          Operand(residual.shape(), residual.dtype()), g, b, eps, out);
    if constexpr (AddLayerNormForwardBackend<B>) {
        // The kernel takes the sum in x's dtype and f32 affine parameters; what it declines
        // composes below.
        const auto gw = ac::widen(gamma), bw = ac::widen(beta);
        std::optional<typename B::FloatTensorPrimitive> gp, bp;
        if (gw) gp = gw->primitive();
        if (bw) bp = bw->primitive();
        if (auto r = B::float_add_layer_norm(x.primitive(), residual.primitive(), std::move(gp),
                                             std::move(bp), eps, out))
            return {Tensor<B, D>(std::move((*r)[0])), Tensor<B, D>(std::move((*r)[1]))};
    }
    auto sum = x + residual;
    auto normed = layer_norm(sum, gamma, beta, eps);
    if (out && normed.dtype() != *out) normed = normed.cast(*out);
    return {std::move(sum), std::move(normed)};
}

// Under an ember::Autocast guard the input, weight and bias are cast to its dtype first.
#define EMBER_CONV(name, N, Opt)                                                          \
    template <Backend B>                                                                  \
    Tensor<B, N + 2> name(const Tensor<B, N + 2>& x, const Tensor<B, N + 2>& weight,      \
                          const OptionalTensor<B, 1>& bias = std::nullopt,                \
                          const Opt<N>& options = {}) {                                   \
        namespace ac = ::ember::detail::autocast;                                         \
        if (ac::current()) [[unlikely]] {                                                 \
            const auto xl = ac::lower(x), wl = ac::lower(weight);                         \
            std::optional<typename B::FloatTensorPrimitive> b;                            \
            if (bias) b = ac::lower(*bias).primitive();                                   \
            return Tensor<B, N + 2>(B::name(xl.primitive(), wl.primitive(), b, options)); \
        }                                                                                 \
        std::optional<typename B::FloatTensorPrimitive> b;                                \
        if (bias) b = bias->primitive();                                                  \
        return Tensor<B, N + 2>(B::name(x.primitive(), weight.primitive(), b, options));  \
    }
/// 1-d convolution: x [N, C_in, L], weight [C_out, C_in / groups, K].
EMBER_CONV(conv1d, 1, ConvOptions)
/// 2-d convolution: x [N, C_in, H, W], weight [C_out, C_in / groups, KH, KW].
EMBER_CONV(conv2d, 2, ConvOptions)
/// 3-d convolution.
EMBER_CONV(conv3d, 3, ConvOptions)
/// 1-d transposed convolution: weight [C_in, C_out / groups, K].
EMBER_CONV(conv_transpose1d, 1, ConvTransposeOptions)
/// 2-d transposed convolution.
EMBER_CONV(conv_transpose2d, 2, ConvTransposeOptions)
/// 3-d transposed convolution.
EMBER_CONV(conv_transpose3d, 3, ConvTransposeOptions)
#undef EMBER_CONV

/// Deformable 2-d convolution (torchvision.ops.deform_conv2d).
template <Backend B>
Tensor<B, 4> deform_conv2d(const Tensor<B, 4>& x, const Tensor<B, 4>& offset,
                           const Tensor<B, 4>& weight,
                           const OptionalTensor<B, 4>& mask = std::nullopt,
                           const OptionalTensor<B, 1>& bias = std::nullopt,
                           const DeformConvOptions& options = {}) {
    std::optional<typename B::FloatTensorPrimitive> m, b;
    if (mask) m = mask->primitive();
    if (bias) b = bias->primitive();
    return Tensor<B, 4>(B::deform_conv2d(x.primitive(), offset.primitive(), weight.primitive(), m,
                                         b, options));
}

/// 1-d average pooling over [N, C, L].
template <Backend B>
Tensor<B, 3> avg_pool1d(const Tensor<B, 3>& x, std::size_t kernel_size, std::size_t stride,
                        std::size_t padding = 0, bool count_include_pad = true,
                        bool ceil_mode = false) {
    PoolOptions<1> o{{kernel_size}, {stride}, {padding}, {1}, ceil_mode, count_include_pad};
    return Tensor<B, 3>(B::avg_pool1d(x.primitive(), o));
}
/// 2-d average pooling over [N, C, H, W].
template <Backend B>
Tensor<B, 4> avg_pool2d(const Tensor<B, 4>& x, std::array<std::size_t, 2> kernel_size,
                        std::array<std::size_t, 2> stride, std::array<std::size_t, 2> padding = {0, 0},
                        bool count_include_pad = true, bool ceil_mode = false) {
    PoolOptions<2> o{kernel_size, stride, padding, {1, 1}, ceil_mode, count_include_pad};
    return Tensor<B, 4>(B::avg_pool2d(x.primitive(), o));
}
/// 1-d max pooling.
template <Backend B>
Tensor<B, 3> max_pool1d(const Tensor<B, 3>& x, std::size_t kernel_size, std::size_t stride,
                        std::size_t padding = 0, std::size_t dilation = 1, bool ceil_mode = false) {
    PoolOptions<1> o{{kernel_size}, {stride}, {padding}, {dilation}, ceil_mode, true};
    return Tensor<B, 3>(B::max_pool1d(x.primitive(), o));
}
/// 1-d max pooling with the argmax positions.
template <Backend B>
std::pair<Tensor<B, 3>, Tensor<B, 3, Int>> max_pool1d_with_indices(
    const Tensor<B, 3>& x, std::size_t kernel_size, std::size_t stride, std::size_t padding = 0,
    std::size_t dilation = 1, bool ceil_mode = false) {
    PoolOptions<1> o{{kernel_size}, {stride}, {padding}, {dilation}, ceil_mode, true};
    auto [v, i] = B::max_pool1d_with_indices(x.primitive(), o);
    return {Tensor<B, 3>(std::move(v)), Tensor<B, 3, Int>(std::move(i))};
}
/// 2-d max pooling.
template <Backend B>
Tensor<B, 4> max_pool2d(const Tensor<B, 4>& x, std::array<std::size_t, 2> kernel_size,
                        std::array<std::size_t, 2> stride, std::array<std::size_t, 2> padding = {0, 0},
                        std::array<std::size_t, 2> dilation = {1, 1}, bool ceil_mode = false) {
    PoolOptions<2> o{kernel_size, stride, padding, dilation, ceil_mode, true};
    return Tensor<B, 4>(B::max_pool2d(x.primitive(), o));
}
/// 2-d max pooling with the argmax positions (flat within each plane, as PyTorch).
template <Backend B>
std::pair<Tensor<B, 4>, Tensor<B, 4, Int>> max_pool2d_with_indices(
    const Tensor<B, 4>& x, std::array<std::size_t, 2> kernel_size, std::array<std::size_t, 2> stride,
    std::array<std::size_t, 2> padding = {0, 0}, std::array<std::size_t, 2> dilation = {1, 1},
    bool ceil_mode = false) {
    PoolOptions<2> o{kernel_size, stride, padding, dilation, ceil_mode, true};
    auto [v, i] = B::max_pool2d_with_indices(x.primitive(), o);
    return {Tensor<B, 4>(std::move(v)), Tensor<B, 4, Int>(std::move(i))};
}
/// Adaptive average pooling to `output_size` over [N, C, L].
template <Backend B>
Tensor<B, 3> adaptive_avg_pool1d(const Tensor<B, 3>& x, std::size_t output_size) {
    return Tensor<B, 3>(B::adaptive_avg_pool1d(x.primitive(), output_size));
}
/// Adaptive average pooling to `output_size` over [N, C, H, W].
template <Backend B>
Tensor<B, 4> adaptive_avg_pool2d(const Tensor<B, 4>& x, std::array<std::size_t, 2> output_size) {
    return Tensor<B, 4>(B::adaptive_avg_pool2d(x.primitive(), output_size));
}
/// Resizes [N, C, H, W] to `output_size`.
template <Backend B>
Tensor<B, 4> interpolate(const Tensor<B, 4>& x, std::array<std::size_t, 2> output_size,
                         const InterpolateOptions& options = {}) {
    return Tensor<B, 4>(B::interpolate(x.primitive(), output_size, options));
}
/// Rows of `weights` [n, d] picked by `indices` [b, s] → [b, s, d].
template <Backend B>
Tensor<B, 3> embedding(const Tensor<B, 2>& weights, const Tensor<B, 2, Int>& indices) {
    return Tensor<B, 3>(B::embedding(weights.primitive(), indices.primitive()));
}

}  // namespace ember::module
