#pragma once
// The op vocabulary shared by every backend: op codes for the elementwise and reduction
// families (so that Fusion can record them as data) and the option structs of module ops.
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <type_traits>

#include "dtype.hpp"

namespace ember {

/// A scalar operand, held both as double (float tensors) and as int64 (int tensors) so that
/// int ops keep full 64-bit precision.
struct Scalar {
    double f = 0.0;     ///< value used by float tensors
    std::int64_t i = 0;  ///< value used by int and bool tensors
    constexpr Scalar() = default;
    constexpr Scalar(double v) : f(v), i(static_cast<std::int64_t>(v)) {}  // NOLINT
    constexpr Scalar(float v) : Scalar(static_cast<double>(v)) {}          // NOLINT
    /// Any integer type (one template: which of long and long long is int64_t varies).
    template <typename T>
        requires(std::is_integral_v<T> && !std::is_same_v<T, bool>)
    constexpr Scalar(T v) : f(static_cast<double>(v)), i(static_cast<std::int64_t>(v)) {}  // NOLINT
    constexpr Scalar(bool v) : f(v ? 1.0 : 0.0), i(v ? 1 : 0) {}           // NOLINT
};

/// Elementwise functions of one tensor. Not is logical on bool tensors and bitwise (`~x`) on
/// int tensors.
enum class UnaryOp : std::uint8_t {
    Neg, Abs, Exp, Log, Log1p, Sqrt, Sin, Cos, Tanh, Erf, Recip, Floor, Ceil, Round, Sign,
    Sigmoid, Relu, Gelu, IsNan, Not
};
/// Elementwise functions of two tensors (or a tensor and a scalar). RSub/RDiv/RPow/RRem take
/// the scalar on the left (`2 - x`), for the scalar forms. And/Or/Xor are logical on bool
/// tensors and bitwise on int tensors; Shl/Shr (int tensors only) shift left, and right
/// arithmetically, with a shift by a negative amount or by the element's bit width or more
/// giving 0 (Shl) or the sign fill, 0 or -1 (Shr).
enum class BinaryOp : std::uint8_t {
    // clang-format off
    Add, Sub, Mul, Div, Rem, Pow, Max, Min, And, Or, Xor, RSub, RDiv, RPow, RRem, Shl, Shr
    // clang-format on
};
/// Elementwise comparisons, producing bool tensors.
enum class CompareOp : std::uint8_t { Eq, Ne, Gt, Ge, Lt, Le };
/// Reductions (whole tensor or along one dim).
enum class ReduceOp : std::uint8_t { Sum, Mean, Prod, Max, Min, Any, All };
/// Index-producing reductions along one dim.
enum class ArgReduceOp : std::uint8_t { ArgMax, ArgMin };

/// The scalars of one Adam update, for backends that fuse it into one pass
/// (`float_adam_step`, an optional backend capability that ember::optim uses when present):
///   m ← β₁·m + (1 − β₁)·g,  v ← β₂·v + (1 − β₂)·g²,
///   p ← p − lr · (m / correction_1) / (√(v / correction_2) + ε)
struct AdamStepScalars {
    double beta_1;        ///< decay of the first moment
    double beta_2;        ///< decay of the second moment
    double epsilon;       ///< added to the denominator
    double lr;            ///< learning rate
    double correction_1;  ///< 1 − β₁ᵗ
    double correction_2;  ///< 1 − β₂ᵗ
};

/// One tensor's part of a multi-tensor Adam step (the optional backend op `float_adam_steps`):
/// float_adam_step's update, after Adam's L2 penalty (grad + l2·param) or AdamW's decoupled
/// decay (param·(1 − lr·λ)) folded into the same pass.
struct AdamStepsScalars {
    AdamStepScalars step;        ///< the update's scalars (per tensor: step counts may differ)
    double l2 = 0;               ///< Adam's weight decay: the gradient becomes grad + l2·param
    double decoupled_decay = 0;  ///< AdamW's λ: param·(1 − lr·λ) before the update
};

/// Settings of a training-mode batch norm (the optional backend op `float_batch_norm`).
struct BatchNormScalars {
    double epsilon;   ///< added to the variance
    double momentum;  ///< running = (1 − momentum)·running + momentum·batch
};

/// A backend with fused batch-norm kernels (optional ops, detected at compile time; BatchNorm
/// composes tensor ops elsewhere):
///   float_batch_norm(x, gamma, beta, running_mean, running_var, scalars)
///     → optional {y, batch mean, batch 1/√(var + ε), new running mean, new running var}
///   float_batch_norm_eval(x, gamma, beta, mean, var, eps) → optional y
/// Either may return nothing for operands it does not take (the caller then composes).
template <typename B>
concept BatchNormForwardBackend = requires(typename B::FloatTensorPrimitive t, BatchNormScalars s) {
    B::float_batch_norm(t, t, t, t, t, s);
    B::float_batch_norm_eval(t, t, t, t, t, 0.0);
};
/// BatchNormForwardBackend with the gradient kernel Autodiff's rule calls:
///   float_batch_norm_backward(x, grad, gamma, mean, rstd) → {dx, dgamma, dbeta}.
template <typename B>
concept BatchNormBackend = BatchNormForwardBackend<B> &&
    requires(typename B::FloatTensorPrimitive t) {
    B::float_batch_norm_backward(t, t, t, t, t);
};

/// The gradients of a ReLU-fused batch norm (float_batch_norm_relu_backward).
template <typename FT>
struct BatchNormReluGrads {
    FT dx;                        ///< the input's gradient
    FT dgamma;                    ///< gamma's
    FT dbeta;                     ///< beta's
    std::optional<FT> dresidual;  ///< the residual's (dy·[y > 0]), when the forward had one
};

/// BatchNormBackend with the ReLU folded into its passes (optional ops; nn::BatchNorm's
/// forward_relu and forward_add_relu compose batch norm, addition and ReLU elsewhere):
///   float_batch_norm_relu(x, gamma, beta, running_mean, running_var, residual, scalars)
///     → optional {y = max(bn(x) + residual, 0), batch mean, batch 1/√(var + ε),
///                 new running mean, new running var} (residual optional: y = max(bn(x), 0))
///   float_batch_norm_relu_backward(x, y, grad, gamma, mean, rstd, residual, beta)
///     → {dx, dgamma, dbeta, dresidual when `residual`}; y is the forward's output, whose sign
///       is the ReLU's gradient; beta (optional) is given where the forward had no residual,
///       so a backend may recompute that sign from x, gamma, beta, mean and rstd instead of
///       reading y.
/// Either may decline (return nothing) as float_batch_norm does. nn::BatchNorm needs the
/// forward only (Autodiff declares it); Autodiff needs both of its inner backend.
template <typename B>
concept BatchNormReluForwardBackend = requires(typename B::FloatTensorPrimitive t,
                                               std::optional<typename B::FloatTensorPrimitive> o,
                                               BatchNormScalars s) {
    B::float_batch_norm_relu(t, t, t, t, t, o, s);
};
/// BatchNormReluForwardBackend with the gradient kernel Autodiff's rule calls.
template <typename B>
concept BatchNormReluBackend = BatchNormBackend<B> && BatchNormReluForwardBackend<B> &&
    requires(typename B::FloatTensorPrimitive t) {
    B::float_batch_norm_relu_backward(t, t, t, t, t, t, true, std::optional{t});
};

/// A backend with one kernel for a residual addition and the layer norm after it (an optional op,
/// detected at compile time; module::add_layer_norm composes an addition and layer_norm
/// elsewhere):
///   float_add_layer_norm(x, residual, gamma, beta, eps, out)
///     → optional {sum = x + residual (x's dtype), layer_norm(sum) in `out`'s dtype (x's when
///       empty), mean, rstd}
/// It may decline (return nothing) for operands it does not take. With `out` bf16 the norm is
/// computed in f32 and rounded once on the store: what a cast after an f32 layer norm gives.
template <typename B>
concept AddLayerNormForwardBackend = requires(typename B::FloatTensorPrimitive t,
                                              std::optional<typename B::FloatTensorPrimitive> o,
                                              std::optional<DType> d) {
    B::float_add_layer_norm(t, t, o, o, 0.0, d);
};

namespace detail {
template <std::size_t N>
constexpr std::array<std::size_t, N> filled_array(std::size_t v) {
    std::array<std::size_t, N> a{};
    for (auto& x : a) x = v;
    return a;
}
}  // namespace detail

/// Options of an N-d convolution (PyTorch's Conv*d arguments).
template <std::size_t N>
struct ConvOptions {
    std::array<std::size_t, N> stride = detail::filled_array<N>(1);    ///< step per spatial dim
    std::array<std::size_t, N> padding = detail::filled_array<N>(0);   ///< zero padding per side
    std::array<std::size_t, N> dilation = detail::filled_array<N>(1);  ///< kernel dilation
    std::size_t groups = 1;  ///< channel groups (in and out channels divisible by it)
};

/// Options of an N-d transposed convolution (PyTorch's ConvTranspose*d arguments).
template <std::size_t N>
struct ConvTransposeOptions {
    std::array<std::size_t, N> stride = detail::filled_array<N>(1);       ///< step
    std::array<std::size_t, N> padding = detail::filled_array<N>(0);      ///< input padding
    std::array<std::size_t, N> padding_out = detail::filled_array<N>(0);  ///< output_padding
    std::array<std::size_t, N> dilation = detail::filled_array<N>(1);     ///< kernel dilation
    std::size_t groups = 1;                                               ///< channel groups
};

/// Options of a deformable 2-d convolution (torchvision's deform_conv2d).
struct DeformConvOptions {
    std::array<std::size_t, 2> stride{1, 1};    ///< step
    std::array<std::size_t, 2> padding{0, 0};   ///< zero padding
    std::array<std::size_t, 2> dilation{1, 1};  ///< kernel dilation
    std::size_t weight_groups = 1;              ///< groups of the weight
    std::size_t offset_groups = 1;              ///< groups of the offsets
};

/// Options of N-d pooling.
template <std::size_t N>
struct PoolOptions {
    std::array<std::size_t, N> kernel_size = detail::filled_array<N>(2);  ///< window
    std::array<std::size_t, N> stride = detail::filled_array<N>(2);       ///< step
    std::array<std::size_t, N> padding = detail::filled_array<N>(0);      ///< implicit padding
    std::array<std::size_t, N> dilation = detail::filled_array<N>(1);     ///< max pool only
    bool ceil_mode = false;          ///< round the output size up, as PyTorch's ceil_mode
    bool count_include_pad = true;   ///< avg pool only: padded zeros count in the divisor
};

/// Interpolation modes.
enum class InterpolateMode : std::uint8_t { Nearest, Bilinear, Bicubic };
/// Options of `interpolate`.
struct InterpolateOptions {
    InterpolateMode mode = InterpolateMode::Nearest;  ///< how values between samples are made
    bool align_corners = true;  ///< Burn's default; ignored by Nearest
};

}  // namespace ember
