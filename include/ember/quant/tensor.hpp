#pragma once
// Tensor-level quantization, as Burn's burn::tensor::quantization:
//
//   auto scheme = ember::quant::QuantizationScheme::per_tensor_affine();
//   auto range = ember::quant::MinMaxCalibration{scheme}.compute_range(x);
//   auto qparams = scheme.compute_q_params(range);
//   ember::quant::QuantizedTensor<B, 2> q = x.quantize(scheme, qparams);
//   auto q2 = x.quantize_dynamic(scheme);            // the same, in one step
//   ember::Tensor<B, 2> back = q.dequantize();
//
// A QuantizedTensor holds the backend's quantized primitive. Layout ops (reshape, permute,
// slice, flip) stay quantized and exact; arithmetic gives float tensors computed from the
// dequantized values (matmul in integers where the parameters allow), so results keep their
// meaning on every backend.
#include <cmath>
#include <optional>
#include <utility>
#include <vector>

#include "../tensor/quant_primitive.hpp"
#include "../tensor/tensor.hpp"

namespace ember::quant {

/// Quantization parameters: scale [1] (per tensor) or [C] (per channel), and for affine
/// schemes the zero points (offset) of the same shape.
template <Backend B>
struct QuantizationParameters {
    Tensor<B, 1> scale;                       ///< the scales, > 0
    std::optional<Tensor<B, 1, Int>> offset;  ///< zero points in [-128, 127] (affine schemes)
};

/// The range a calibration found: [1] per tensor, [C] per channel.
template <Backend B>
struct CalibrationRange {
    Tensor<B, 1> min;  ///< smallest values
    Tensor<B, 1> max;  ///< largest values
};

namespace detail {

/// The scheme with its per-channel axis checked against `rank` and made non-negative.
inline QuantizationScheme resolve(const QuantizationScheme& scheme, const Shape& shape,
                                  const char* op) {
    QuantizationScheme s = scheme;
    if (!s.is_per_channel()) return s;
    EMBER_CHECK(s.axis != QuantizationScheme::kOutputChannels, Argument, op, ": the scheme ",
                s.to_string(), " needs an explicit channel axis for a tensor of shape ",
                shape.to_string());
    const long r = static_cast<long>(shape.rank());
    EMBER_CHECK(s.axis >= -r && s.axis < r, Dim, op, ": channel axis ", s.axis,
                " is out of range for a tensor of shape ", shape.to_string());
    if (s.axis < 0) s.axis += r;
    return s;
}

/// Checks parameters against the scheme and the tensor: shapes, presence of zero points, scales
/// finite and positive, zero points in range (reads them back: parameters are small).
template <Backend B>
void check_qparams(const Shape& shape, const QuantizationScheme& s,
                   const QuantizationParameters<B>& q, const char* op) {
    const std::size_t c = s.is_per_channel() ? shape[static_cast<std::size_t>(s.axis)] : 1;
    EMBER_CHECK(q.scale.dims()[0] == c, Shape, op, ": ", s.to_string(), " on a tensor of shape ",
                shape.to_string(), " needs ", c, " scale(s), got ", q.scale.dims()[0]);
    EMBER_CHECK(s.is_symmetric() != q.offset.has_value(), Argument, op, ": ", s.to_string(),
                s.is_symmetric() ? " takes no offset, but one was given"
                                 : " needs an offset (zero points), but none was given");
    const auto scales = q.scale.to_data().template to_vec<double>();
    for (std::size_t i = 0; i < scales.size(); ++i)
        EMBER_CHECK(std::isfinite(scales[i]) && scales[i] > 0, Argument, op, ": scale[", i, "] is ",
                    scales[i],
                    "; scales must be finite and positive (a zero range "
                    "has no scale)");
    if (q.offset) {
        EMBER_CHECK(q.offset->dims()[0] == c, Shape, op, ": ", s.to_string(), " needs ", c,
                    " offset(s), got ", q.offset->dims()[0]);
        const auto zps = q.offset->to_data().template to_vec<std::int64_t>();
        for (std::size_t i = 0; i < zps.size(); ++i)
            EMBER_CHECK(zps[i] >= s.q_min() && zps[i] <= s.q_max(), Argument, op, ": offset[", i,
                        "] is ", zps[i], ", outside [", s.q_min(), ", ", s.q_max(), "]");
    }
}

/// The parameters as backend primitives.
template <Backend B>
QParamsPrimitive<typename B::FloatTensorPrimitive, typename B::IntTensorPrimitive> to_primitive(
    const QuantizationParameters<B>& q) {
    std::optional<typename B::IntTensorPrimitive> o;
    if (q.offset) o = q.offset->primitive();
    return {q.scale.primitive(), std::move(o)};
}

}  // namespace detail

/// A quantized tensor of rank D on backend B (Burn's QFloat tensor).
template <Backend B, std::size_t D>
class QuantizedTensor {
  public:
    /// The backend's quantized primitive.
    using Primitive = QuantizedPrimitive<B>;
    /// The backend.
    using BackendType = B;
    /// The rank.
    static constexpr std::size_t rank = D;

    /// Wraps a primitive; throws ShapeError when its rank is not D.
    explicit QuantizedTensor(Primitive p) : p_(std::move(p)) {
        EMBER_CHECK(B::q_shape(p_).rank() == D, Shape, "QuantizedTensor: primitive of shape ",
                    B::q_shape(p_).to_string(), " is not of rank ", D);
    }
    /// Quantized values given as i8 data with their scheme and parameters (Burn's q_from_data);
    /// throws DTypeError for other dtypes, and as quantize() for parameters that do not fit.
    static QuantizedTensor from_data(const TensorData& values, const QuantizationScheme& scheme,
                                     const QuantizationParameters<B>& qparams,
                                     const Device<B>& device = {}) {
        EMBER_CHECK(values.dtype() == DType::I8, DType,
                    "QuantizedTensor::from_data: values must be ", "i8 (QInt8), got ",
                    dtype_name(values.dtype()));
        EMBER_CHECK(values.shape().rank() == D, Shape,
                    "QuantizedTensor::from_data: values of shape ", values.shape().to_string(),
                    " are not of rank ", D);
        const auto s = detail::resolve(scheme, values.shape(), "QuantizedTensor::from_data");
        detail::check_qparams(values.shape(), s, qparams, "QuantizedTensor::from_data");
        auto q = detail::to_primitive(qparams);
        Primitive p;
        p.values = int8_values(values, device);
        p.scale = std::move(q.scale);
        p.offset = std::move(q.offset);
        p.scheme = s;
        return QuantizedTensor(std::move(p));
    }

    /// The dims.
    std::array<std::size_t, D> dims() const { return shape().template to_array<D>(); }
    /// The shape.
    Shape shape() const { return B::q_shape(p_); }
    /// The scheme (per-channel axis non-negative).
    const QuantizationScheme& scheme() const { return p_.scheme; }
    /// The parameters.
    QuantizationParameters<B> qparams() const {
        QuantizationParameters<B> q{Tensor<B, 1>(p_.scale), std::nullopt};
        if (p_.offset) q.offset = Tensor<B, 1, Int>(*p_.offset);
        return q;
    }
    /// The stored integers (dtype i8).
    Tensor<B, D, Int> int_values() const { return Tensor<B, D, Int>(p_.values); }
    /// The stored integers as host data (i8).
    TensorData to_data() const { return B::int_into_data(p_.values); }
    /// The device.
    Device<B> device() const { return B::int_device(p_.values); }
    /// The primitive.
    const Primitive& primitive() const { return p_; }
    /// Number of elements.
    std::size_t num_elements() const { return shape().num_elements(); }

    /// The float values (q - offset) · scale.
    Tensor<B, D> dequantize() const { return Tensor<B, D>(B::dequantize(p_)); }

    // ---- layout ops: stay quantized, exact -------------------------------------------------
    /// Another shape of as many elements; a per-channel axis must stay a dim of its own.
    template <std::size_t D2>
    QuantizedTensor<B, D2> reshape(const Shape& shape) const {
        EMBER_CHECK(shape.rank() == D2 && shape.num_elements() == num_elements(), Shape,
                    "QuantizedTensor::reshape: ", this->shape().to_string(), " cannot become ",
                    shape.to_string());
        return QuantizedTensor<B, D2>(B::q_reshape(p_, shape));
    }
    /// Dims reordered.
    QuantizedTensor permute(const std::array<long, D>& axes) const {
        std::array<std::size_t, D> a{};
        std::array<bool, D> seen{};
        for (std::size_t i = 0; i < D; ++i) {
            a[i] = normalize_dim(axes[i], D, "QuantizedTensor::permute");
            EMBER_CHECK(!seen[a[i]], Dim, "QuantizedTensor::permute: axis ", axes[i], " repeats");
            seen[a[i]] = true;
        }
        return QuantizedTensor(B::q_permute(p_, std::span<const std::size_t>(a)));
    }
    /// Two dims swapped.
    QuantizedTensor swap_dims(long d1, long d2) const {
        std::array<long, D> a{};
        for (std::size_t i = 0; i < D; ++i) a[i] = static_cast<long>(i);
        std::swap(a[normalize_dim(d1, D, "QuantizedTensor::swap_dims")],
                  a[normalize_dim(d2, D, "QuantizedTensor::swap_dims")]);
        return permute(a);
    }
    /// The last two dims swapped.
    QuantizedTensor transpose() const { return swap_dims(-2, -1); }
    /// A sub-range per leading dim (Slice's rules; per-channel parameters follow their axis).
    QuantizedTensor slice(std::span<const Slice> ranges) const {
        EMBER_CHECK(ranges.size() <= D, Dim, "QuantizedTensor::slice: ", ranges.size(),
                    " ranges for rank ", D);
        return QuantizedTensor(B::q_slice(p_, ranges));
    }
    /// Reversed along `axes`.
    QuantizedTensor flip(std::span<const long> axes) const {
        std::array<std::size_t, kMaxRank> a{};
        for (std::size_t i = 0; i < axes.size(); ++i)
            a[i] = normalize_dim(axes[i], D, "QuantizedTensor::flip");
        return QuantizedTensor(B::q_flip(p_, std::span<const std::size_t>(a.data(), axes.size())));
    }

    // ---- arithmetic: float results -----------------------------------------------------------
    /// Matrix product in float; multiplied in integers where the parameters factor out of the
    /// sum (self per tensor or per row, other per tensor or per column).
    Tensor<B, D> matmul(const QuantizedTensor& other) const {
        const Shape a = shape(), b = other.shape();
        EMBER_CHECK(a[D - 1] == b[D - 2], Shape, "QuantizedTensor::matmul: ", a.to_string(), " @ ",
                    b.to_string(), " (inner dims differ)");
        return Tensor<B, D>(B::q_matmul(p_, other.p_));
    }
    /// Matrix product with a float tensor (through the dequantized values).
    Tensor<B, D> matmul(const Tensor<B, D>& other) const { return dequantize().matmul(other); }
    /// Elementwise sum in float.
    Tensor<B, D> add(const Tensor<B, D>& other) const { return dequantize() + other; }
    /// Elementwise sum of two quantized tensors, in float.
    Tensor<B, D> add(const QuantizedTensor& other) const {
        return dequantize() + other.dequantize();
    }
    /// Elementwise difference in float.
    Tensor<B, D> sub(const Tensor<B, D>& other) const { return dequantize() - other; }
    /// Elementwise product in float.
    Tensor<B, D> mul(const Tensor<B, D>& other) const { return dequantize() * other; }
    /// Elementwise product of two quantized tensors, in float.
    Tensor<B, D> mul(const QuantizedTensor& other) const {
        return dequantize() * other.dequantize();
    }
    /// Elementwise quotient in float.
    Tensor<B, D> div(const Tensor<B, D>& other) const { return dequantize() / other; }
    /// max(x, 0), still quantized: the stored values below the zero point become it (exact).
    QuantizedTensor relu() const {
        Primitive p = p_;
        p.packed = std::make_shared<PackedSlot>();
        const Shape ps = quant::detail::param_shape(shape(), p_.scheme);
        auto zero = p_.offset ? B::int_expand(B::int_reshape(*p_.offset, ps), shape())
                              : B::int_full(shape(), Scalar(0), device());
        zero = B::int_cast(std::move(zero), DType::I8);
        p.values = B::int_binary(BinaryOp::Max, p_.values, std::move(zero));
        return QuantizedTensor(std::move(p));
    }

  private:
    // i8 data as the backend's int primitive of dtype i8. Backends create int tensors in their
    // own int dtype (i64 on the CPU) before a cast, so the data goes in pieces of at most 8192
    // values: the wide temporary stays small (64 KiB), which firmware arenas need.
    static typename B::IntTensorPrimitive int8_values(const TensorData& values,
                                                      const Device<B>& device) {
        constexpr std::size_t kPiece = 8192;
        const Shape s = values.shape();
        const std::size_t rows = s[0], per_row = rows ? s.num_elements() / rows : 0;
        if (s.num_elements() <= kPiece || per_row == 0)
            return B::int_cast(B::int_from_data(values, device), DType::I8);
        const std::size_t step = std::max<std::size_t>(1, kPiece / per_row);
        const auto bytes = values.bytes();
        std::vector<typename B::IntTensorPrimitive> pieces;
        for (std::size_t r = 0; r < rows; r += step) {
            const std::size_t n = std::min(step, rows - r);
            Shape ps = s;
            ps[0] = n;
            TensorData piece(std::vector<std::byte>(bytes.begin() + r * per_row,
                                                    bytes.begin() + (r + n) * per_row),
                             ps, DType::I8);
            pieces.push_back(B::int_cast(B::int_from_data(piece, device), DType::I8));
        }
        return pieces.size() == 1 ? std::move(pieces[0]) : B::int_cat(std::move(pieces), 0);
    }

    Primitive p_;
};

/// Min-max calibration (Burn's MinMaxCalibration): the range of the values, per tensor or per
/// channel as the scheme says.
struct MinMaxCalibration {
    QuantizationScheme scheme = QuantizationScheme::per_tensor_affine();  ///< what to calibrate for

    /// The range of `tensor`: [1] per tensor, [C] per channel along the scheme's axis.
    template <Backend B, std::size_t D>
    CalibrationRange<B> compute_range(const Tensor<B, D>& tensor) const {
        const auto s = detail::resolve(scheme, tensor.shape(), "MinMaxCalibration::compute_range");
        auto [lo, hi] = B::min_max(tensor.primitive(), s);
        return {Tensor<B, 1>(std::move(lo)), Tensor<B, 1>(std::move(hi))};
    }
};

namespace detail {
// Tensor::quantize / quantize_dynamic and QuantizationScheme::compute_q_params land here.
template <>
struct QuantizeHook<QuantizationScheme> {
    template <Backend B, std::size_t D>
    static QuantizedTensor<B, D> quantize(const Tensor<B, D>& x, const QuantizationScheme& scheme,
                                          const QuantizationParameters<B>& qparams) {
        const auto s = resolve(scheme, x.shape(), "quantize");
        check_qparams(x.shape(), s, qparams, "quantize");
        return QuantizedTensor<B, D>(B::quantize(x.primitive(), s, to_primitive(qparams)));
    }
    template <Backend B, std::size_t D>
    static QuantizedTensor<B, D> quantize_dynamic(const Tensor<B, D>& x,
                                                  const QuantizationScheme& scheme) {
        const auto s = resolve(scheme, x.shape(), "quantize_dynamic");
        EMBER_CHECK(x.num_elements() > 0, Shape, "quantize_dynamic: the tensor of shape ",
                    x.shape().to_string(), " is empty (no range)");
        return QuantizedTensor<B, D>(B::quantize_dynamic(x.primitive(), s));
    }
};
}  // namespace detail

namespace detail {
template <Backend B>
struct QParamsHook<CalibrationRange<B>> {
    static QuantizationParameters<B> compute(const QuantizationScheme& s,
                                             const CalibrationRange<B>& r);
};
}  // namespace detail

/// Parameters for `scheme` from a calibrated range, as PyTorch's MinMaxObserver computes them
/// (Burn's scheme.compute_q_params(range)). Throws ArgumentError when min > max somewhere or a
/// bound is not finite.
template <Backend B>
QuantizationParameters<B> compute_q_params(const QuantizationScheme& scheme,
                                           const CalibrationRange<B>& range) {
    const auto lo = range.min.to_data().template to_vec<double>();
    const auto hi = range.max.to_data().template to_vec<double>();
    EMBER_CHECK(lo.size() == hi.size(), Shape, "compute_q_params: min has ", lo.size(),
                " values but max has ", hi.size());
    for (std::size_t i = 0; i < lo.size(); ++i)
        EMBER_CHECK(std::isfinite(lo[i]) && std::isfinite(hi[i]) && lo[i] <= hi[i], Argument,
                    "compute_q_params: range[", i, "] = [", lo[i], ", ", hi[i],
                    "] is not a finite range with min <= max");
    auto p = B::q_params_from_range(range.min.primitive(), range.max.primitive(), scheme);
    QuantizationParameters<B> q{Tensor<B, 1>(std::move(p.scale)), std::nullopt};
    if (p.offset) q.offset = Tensor<B, 1, Int>(std::move(*p.offset));
    return q;
}

template <Backend B>
QuantizationParameters<B> detail::QParamsHook<CalibrationRange<B>>::compute(
    const QuantizationScheme& s, const CalibrationRange<B>& r) {
    return compute_q_params(s, r);
}

}  // namespace ember::quant
