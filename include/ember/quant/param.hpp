#pragma once
// What a quantized parameter holds (Param::quantized()): the int8 weight, how its layer treats
// input activations, and while calibrating an observer of their range. And the parameter's
// record: the int8 values as raw bytes (u8, so that no recorder's precision setting widens
// them: a quantized model file is about 4× smaller than f32) with the scheme and parameters.
#include <algorithm>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "../detail/sync.hpp"
#include "../record/value.hpp"
#include "tensor.hpp"

namespace ember::quant {

/// The range of a layer's inputs over calibration batches.
struct ActivationObserver {
    ember::detail::Mutex mutex;                           ///< forwards may run on several threads
    float min = std::numeric_limits<float>::infinity();   ///< smallest input seen
    float max = -std::numeric_limits<float>::infinity();  ///< largest input seen
    std::size_t batches = 0;                              ///< forwards observed

    /// Widens the range with one batch's.
    void update(float lo, float hi) {
        ember::detail::LockGuard lock(mutex);
        min = std::min(min, lo);
        max = std::max(max, hi);
        ++batches;
    }
};

/// A quantized parameter's state.
template <Backend B, std::size_t D>
struct QuantizedParam {
    QuantizedTensor<B, D> weight;                    ///< the int8 values and their parameters
    ActivationQuantization activation{};             ///< how the layer quantizes its input
    std::shared_ptr<ActivationObserver> observer{};  ///< set while calibrating activations
};

namespace detail {

inline QuantizationMode mode_from_name(std::string_view name, std::string_view path) {
    for (int i = 0; i < 4; ++i)
        if (mode_name(static_cast<QuantizationMode>(i)) == name)
            return static_cast<QuantizationMode>(i);
    EMBER_FAIL(Format, "load_record: '", path, "' names the unknown quantization mode \"", name,
               "\"");
}

inline constexpr std::string_view kActivationNames[] = {"Dynamic", "Static", "Float"};

/// The record of a quantized parameter (see the file comment).
template <Backend B, std::size_t D>
record::Value param_record(const std::string& id, const QuantizedParam<B, D>& q) {
    TensorData values = q.weight.to_data();
    const Shape shape = values.shape();
    auto bytes = std::move(values).into_bytes();
    const auto qp = q.weight.qparams();
    record::Map quant{
        {"mode", std::string(mode_name(q.weight.scheme().mode))},
        {"axis", static_cast<std::int64_t>(q.weight.scheme().axis)},
        {"scale", qp.scale.to_data()},
        {"offset", qp.offset ? record::Value(qp.offset->to_data()) : record::Value{}},
        {"activation", std::string(kActivationNames[static_cast<int>(q.activation.mode)])},
        {"activation_scale", static_cast<double>(q.activation.scale)},
        {"activation_offset", static_cast<std::int64_t>(q.activation.offset)}};
    return record::Map{{"id", id},
                       {"param", TensorData(std::move(bytes), shape, DType::U8)},
                       {"quant", std::move(quant)}};
}

/// The quantized state in record `v` (at `path`), checked against the module's `shape`.
template <Backend B, std::size_t D>
std::shared_ptr<const QuantizedParam<B, D>> param_from_record(const record::Value& v,
                                                              std::string_view path,
                                                              const Shape& shape,
                                                              const Device<B>& device) {
    const std::string qpath = record::Value::join_path(path, "quant");
    const record::Value& q = v.at("quant", path);
    const auto& raw = v.at("param", path).as<TensorData>(record::Value::join_path(path, "param"));
    EMBER_CHECK(raw.dtype() == DType::U8, DType, "load_record: quantized parameter '", path,
                "' should hold u8 bytes but holds ", dtype_name(raw.dtype()));
    EMBER_CHECK(raw.shape() == shape, Shape, "load_record: parameter '", path, "' has shape ",
                raw.shape().to_string(), " in the record but ", shape.to_string(),
                " in the module");
    QuantizationScheme scheme;
    scheme.mode = mode_from_name(q.at("mode", qpath).as<std::string>(qpath), qpath);
    scheme.axis = static_cast<long>(q.at("axis", qpath).as<std::int64_t>(qpath));
    const auto& scale = q.at("scale", qpath).as<TensorData>(qpath);
    EMBER_CHECK(is_float(scale.dtype()), DType, "load_record: '", qpath,
                ".scale' should hold floats but holds ", dtype_name(scale.dtype()));
    QuantizationParameters<B> qp{Tensor<B, 1>::from_data(scale.convert(DType::F32), device),
                                 std::nullopt};
    const record::Value& off = q.at("offset", qpath);
    if (!off.is_null()) {
        const auto& o = off.as<TensorData>(qpath);
        EMBER_CHECK(is_int(o.dtype()), DType, "load_record: '", qpath,
                    ".offset' should hold integers but holds ", dtype_name(o.dtype()));
        qp.offset = Tensor<B, 1, Int>::from_data(o.convert(DType::I64), device);
    }
    std::vector<std::byte> bytes(raw.bytes().begin(), raw.bytes().end());
    auto weight = QuantizedTensor<B, D>::from_data(TensorData(std::move(bytes), shape, DType::I8),
                                                   scheme, qp, device);
    ActivationQuantization act;
    const auto& act_name = q.at("activation", qpath).as<std::string>(qpath);
    const auto* it = std::find(std::begin(kActivationNames), std::end(kActivationNames), act_name);
    EMBER_CHECK(it != std::end(kActivationNames), Format, "load_record: '", qpath,
                ".activation' is \"", act_name, "\" (Dynamic, Static or Float)");
    act.mode = static_cast<ActivationMode>(it - std::begin(kActivationNames));
    act.scale = static_cast<float>(q.at("activation_scale", qpath).as<double>(qpath));
    act.offset =
        static_cast<std::int32_t>(q.at("activation_offset", qpath).as<std::int64_t>(qpath));
    return std::make_shared<const QuantizedParam<B, D>>(
        QuantizedParam<B, D>{std::move(weight), act, nullptr});
}

// The quantized layers' forwards (nn/linear.hpp and nn/conv.hpp call them for a quantized
// weight): with the parameters, in the module layer, below module quantization.

/// The quantized Linear forward: x [..., K] @ w [K, N] (+ bias) through B::q_linear.
template <Backend B, std::size_t D>
Tensor<B, D> linear(const Tensor<B, D>& input, const QuantizedParam<B, 2>& q,
                    const std::optional<Tensor<B, 1>>& bias) {
    const auto ws = q.weight.dims();
    const auto in = input.dims();
    EMBER_CHECK(in[D - 1] == ws[0], Shape, "Linear: input ", input.shape().to_string(),
                " does not end in the layer's ", ws[0], " input features");
    auto x = input.template reshape<2>({-1, static_cast<long>(ws[0])});
    if (q.observer)
        q.observer->update(static_cast<float>(x.min().into_scalar()),
                           static_cast<float>(x.max().into_scalar()));
    std::optional<typename B::FloatTensorPrimitive> b;
    if (bias) b = bias->primitive();
    Tensor<B, 2> y(B::q_linear(x.primitive(), q.weight.primitive(), std::move(b), q.activation));
    Shape out = input.shape();
    out[D - 1] = ws[1];
    return y.template reshape<D>(out);
}

/// The quantized Conv2d forward through B::q_conv2d.
template <Backend B>
Tensor<B, 4> conv2d(const Tensor<B, 4>& input, const QuantizedParam<B, 4>& q,
                    const std::optional<Tensor<B, 1>>& bias, const ConvOptions<2>& options) {
    if (q.observer)
        q.observer->update(static_cast<float>(input.min().into_scalar()),
                           static_cast<float>(input.max().into_scalar()));
    std::optional<typename B::FloatTensorPrimitive> b;
    if (bias) b = bias->primitive();
    return Tensor<B, 4>(
        B::q_conv2d(input.primitive(), q.weight.primitive(), std::move(b), options, q.activation));
}

}  // namespace detail
}  // namespace ember::quant
