#pragma once
// Module-level quantization, as Burn's (plus activations):
//
//   ember::quant::Quantizer quantizer{
//       .calibration = ember::quant::MinMaxCalibration{},
//       .scheme = ember::quant::QuantizationScheme::per_channel_symmetric()};
//   auto qmodel = model.quantize_weights(quantizer);   // int8 weights, dynamic activations
//
//   // Static activations: record input ranges on representative batches, then fix them.
//   auto observed = ember::quant::observe_activations(qmodel);
//   for (const auto& batch : calibration_batches) observed.forward(batch);
//   auto qstatic = ember::quant::freeze_activations(observed);
//
//   auto back = qmodel.map(ember::quant::Dequantize{});   // float parameters again
//
// Weights are the float parameters of rank ≥ 2 (Linear and convolution weights); biases and
// normalisation parameters stay float, as in PyTorch's quantized layers. Quantized layers with
// an integer kernel (Linear on the CPU: the int8 GEMM) never dequantize their weights; others
// (convolutions) dequantize them once, on first use.
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "../module/module.hpp"
#include "param.hpp"

namespace ember::quant {

/// How quantize_weights quantizes (Burn's Quantizer): the calibration that finds each weight's
/// range, the scheme, and how the quantized layers treat their input activations.
template <typename C = MinMaxCalibration>
struct Quantizer {
    C calibration{};  ///< computes ranges (its scheme is set to `scheme` per weight)
    QuantizationScheme scheme = QuantizationScheme::per_channel_symmetric();  ///< weights' scheme
    ActivationMode activations = ActivationMode::Dynamic;  ///< the layers' input handling
};

namespace detail {

/// The per-channel axis `kOutputChannels` resolved for a weight of rank D: Linear weights
/// [d_input, d_output] have their channels last, convolution weights [out, in, k...] first.
template <std::size_t D>
QuantizationScheme weight_scheme(QuantizationScheme s) {
    if (s.is_per_channel() && s.axis == QuantizationScheme::kOutputChannels)
        s.axis = D == 2 ? 1 : 0;
    return s;
}

/// Maps every quantized parameter's state through `f` (other parameters are kept).
template <module::Module M, typename F>
M map_quantized(const M& m, F&& f) {
    return module::map(m, [&](std::string_view path, const auto& p) {
        using P = std::remove_cvref_t<decltype(p)>;
        if constexpr (requires { typename P::Quantized; }) {
            if (const auto* q = p.quantized()) {
                auto next = std::make_shared<typename P::Quantized>(*q);
                f(path, *next);
                return P::from_quantized(p.id(), std::move(next));
            }
        }
        return p;
    });
}

}  // namespace detail

/// The module with every float weight (parameters of rank ≥ 2) quantized by `quantizer`:
/// frozen int8 parameters that records save at 8 bits.
template <module::Module M, typename C>
M quantize_weights(const M& m, const Quantizer<C>& quantizer) {
    return module::map(m, [&](std::string_view, const auto& p) {
        using P = std::remove_cvref_t<decltype(p)>;
        using V = typename P::Value;
        if constexpr (std::is_same_v<typename V::Kind, Float> && V::rank >= 2) {
            using B = typename V::BackendType;
            const auto scheme = detail::weight_scheme<V::rank>(quantizer.scheme);
            auto calibration = quantizer.calibration;
            calibration.scheme = scheme;
            const auto w = p.val();
            auto qparams = compute_q_params(scheme, calibration.compute_range(w));
            QuantizedParam<B, V::rank> q{
                w.quantize(scheme, qparams), {quantizer.activations, 1.0f, 0}, nullptr};
            return P::from_quantized(
                p.id(), std::make_shared<const QuantizedParam<B, V::rank>>(std::move(q)));
        } else {
            return p;
        }
    });
}

/// The module with every quantized layer's activations set to `mode` (Static needs
/// freeze_activations' parameters: use that instead).
template <module::Module M>
M with_activations(const M& m, ActivationMode mode) {
    EMBER_CHECK(mode != ActivationMode::Static, Argument,
                "with_activations: Static needs "
                "calibrated parameters; use observe_activations then freeze_activations");
    return detail::map_quantized(m, [&](std::string_view, auto& q) {
        q.activation = {mode, 1.0f, 0};
    });
}

/// The module with an observer on every quantized layer: each forward records the range of the
/// layer's input (running in dynamic mode meanwhile). Run representative batches through it,
/// then call freeze_activations.
template <module::Module M>
M observe_activations(const M& m) {
    return detail::map_quantized(m, [](std::string_view, auto& q) {
        q.observer = std::make_shared<ActivationObserver>();
        q.activation = {ActivationMode::Dynamic, 1.0f, 0};
    });
}

/// The observed module with static activation parameters (per-tensor affine int8 from each
/// layer's observed min and max, as PyTorch's MinMaxObserver); observers removed. Throws
/// ArgumentError naming a layer whose observer saw no batch.
template <module::Module M>
M freeze_activations(const M& m) {
    return detail::map_quantized(m, [](std::string_view path, auto& q) {
        if (!q.observer) return;
        EMBER_CHECK(q.observer->batches > 0, Argument, "freeze_activations: '", path,
                    "' saw no calibration batch (did its layer run after observe_activations?)");
        const float lo = std::min(q.observer->min, 0.0f), hi = std::max(q.observer->max, 0.0f);
        const float scale = std::max((hi - lo) / 255.0f, float(detail::kScaleEps));
        const float zero =
            std::min(127.0f, std::max(-128.0f, -128.0f - std::nearbyint(lo / scale)));
        q.activation = {ActivationMode::Static, scale, static_cast<std::int32_t>(zero)};
        q.observer.reset();
    });
}

/// The mapper that turns quantized parameters back into float ones (Burn's Dequantize):
/// `model.map(ember::quant::Dequantize{})`.
struct Dequantize {
    /// The parameter with its dequantized values (trainable again) when it is quantized.
    template <typename P>
    P operator()(std::string_view, const P& p) const {
        if constexpr (requires { typename P::Quantized; }) {
            if (const auto* q = p.quantized()) return P(p.id(), q->weight.dequantize(), true);
        }
        return p;
    }
};

}  // namespace ember::quant
