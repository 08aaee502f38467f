#pragma once
// Quantization schemes (Burn's QuantizationScheme / QuantizationType): how float values map to
// 8-bit integers. Header-only and free of tensors, in the tensor layer (as Burn's burn-std) so
// that the Backend concept's defaults (backend.hpp) and the backends can name them; calibration
// and module quantization sit in include/ember/quant/, above.
//
//   affine:    q = clamp(round(x / scale) + offset, -128, 127),  x ≈ (q - offset) · scale
//   symmetric: the same with offset 0 (the range is centred on zero)
//
// Per-tensor schemes hold one (scale, offset); per-channel schemes one per index of `axis`.
// The rounding (half to even, x multiplied by the f32 reciprocal of the scale) and the ranges are
// PyTorch's (`torch.quantize_per_tensor`, MinMaxObserver), so results match it bit for bit.
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

namespace ember::quant {

namespace detail {
template <typename Range>
struct QParamsHook;  // defined for CalibrationRange<B> in tensor.hpp
}  // namespace detail

/// The integer type quantized values are stored in.
enum class QuantizationType : std::uint8_t {
    QInt8,  ///< 8-bit signed integers, [-128, 127]
};

/// How the parameters are computed and applied.
enum class QuantizationMode : std::uint8_t {
    PerTensorAffine,      ///< one scale and zero point for the tensor
    PerTensorSymmetric,   ///< one scale, zero point 0
    PerChannelAffine,     ///< a scale and zero point per index of `axis`
    PerChannelSymmetric,  ///< a scale per index of `axis`, zero points 0
};

/// "PerTensorAffine", ... (for messages and displays).
constexpr std::string_view mode_name(QuantizationMode m) {
    constexpr std::string_view names[] = {"PerTensorAffine", "PerTensorSymmetric",
                                          "PerChannelAffine", "PerChannelSymmetric"};
    return names[static_cast<int>(m)];
}

/// A quantization scheme: mode, integer type and, for per-channel modes, the channel axis.
struct QuantizationScheme {
    /// Per-channel axis meaning "the layer's output channels", resolved by quantize_weights
    /// (Linear weights [d_input, d_output]: 1; convolution weights [out, in, ...]: 0). Tensor
    /// ops need an explicit axis.
    static constexpr long kOutputChannels = std::numeric_limits<long>::min();

    QuantizationMode mode = QuantizationMode::PerTensorAffine;  ///< how parameters are applied
    QuantizationType type = QuantizationType::QInt8;            ///< the stored integer type
    long axis = 0;  ///< channel axis of per-channel modes (negative counts from the end)

    /// One scale and zero point for the whole tensor.
    static constexpr QuantizationScheme per_tensor_affine(
        QuantizationType t = QuantizationType::QInt8) {
        return {QuantizationMode::PerTensorAffine, t, 0};
    }
    /// One scale for the whole tensor, centred on zero.
    static constexpr QuantizationScheme per_tensor_symmetric(
        QuantizationType t = QuantizationType::QInt8) {
        return {QuantizationMode::PerTensorSymmetric, t, 0};
    }
    /// A scale and zero point per index of `axis`.
    static constexpr QuantizationScheme per_channel_affine(
        long axis = kOutputChannels, QuantizationType t = QuantizationType::QInt8) {
        return {QuantizationMode::PerChannelAffine, t, axis};
    }
    /// A scale per index of `axis`, centred on zero.
    static constexpr QuantizationScheme per_channel_symmetric(
        long axis = kOutputChannels, QuantizationType t = QuantizationType::QInt8) {
        return {QuantizationMode::PerChannelSymmetric, t, axis};
    }

    /// True for the per-channel modes.
    constexpr bool is_per_channel() const {
        return mode == QuantizationMode::PerChannelAffine ||
               mode == QuantizationMode::PerChannelSymmetric;
    }
    /// True for the symmetric modes (zero points are 0).
    constexpr bool is_symmetric() const {
        return mode == QuantizationMode::PerTensorSymmetric ||
               mode == QuantizationMode::PerChannelSymmetric;
    }
    /// Smallest stored value.
    constexpr std::int32_t q_min() const { return -128; }
    /// Largest stored value.
    constexpr std::int32_t q_max() const { return 127; }
    /// Parameters from a calibrated range (Burn's compute_q_params; needs
    /// <ember/quant/tensor.hpp>).
    template <typename Range>
    auto compute_q_params(const Range& range) const {
        return detail::QParamsHook<Range>::compute(*this, range);
    }
    /// "PerChannelSymmetric(QInt8, axis 1)".
    std::string to_string() const {
        std::string s(mode_name(mode));
        s += "(QInt8";
        if (is_per_channel()) {
            s += ", axis ";
            s += axis == kOutputChannels ? std::string("output channels") : std::to_string(axis);
        }
        s += ')';
        return s;
    }
    /// Schemes compare by every field.
    friend constexpr bool operator==(const QuantizationScheme&,
                                     const QuantizationScheme&) = default;
};

/// How a quantized layer treats its input activations.
enum class ActivationMode : std::uint8_t {
    Dynamic,  ///< quantized per batch from its own range (PyTorch's dynamic quantization)
    Static,   ///< quantized with parameters fixed from calibration data
    Float,    ///< not quantized: the weights are dequantized and the layer computes in float
};

/// A layer's activation quantization: the mode and, for Static, per-tensor affine int8
/// parameters (as PyTorch's static quantization uses for activations).
struct ActivationQuantization {
    ActivationMode mode = ActivationMode::Dynamic;  ///< how inputs are quantized
    float scale = 1.0f;                             ///< Static: the input scale
    std::int32_t offset = 0;                        ///< Static: the input zero point
    /// Fields compare by value.
    friend constexpr bool operator==(const ActivationQuantization&,
                                     const ActivationQuantization&) = default;
};

}  // namespace ember::quant
