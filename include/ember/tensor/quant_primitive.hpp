#pragma once
// Quantized tensors as a backend primitive (Burn's QuantizedTensorPrimitive) and the default
// quantized ops every backend inherits through BackendBase, composed from its float and int ops:
// a backend that writes nothing can still quantize, dequantize, reshape and multiply quantized
// tensors; one with integer kernels (the CPU's int8 GEMM) overrides q_linear / q_matmul.
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <utility>

#include "../detail/sync.hpp"
#include "dtype.hpp"
#include "error.hpp"
#include "ops.hpp"
#include "quant_scheme.hpp"
#include "shape.hpp"

namespace ember::quant {

/// Quantization parameters as backend primitives: scale [1] or [C] (float), zero points of the
/// same shape (int) for affine schemes.
template <typename FT, typename IT>
struct QParamsPrimitive {
    FT scale;                  ///< the scales
    std::optional<IT> offset;  ///< the zero points (none for symmetric schemes)
};

/// Where a backend keeps its own packed form of a quantized tensor (a GEMM panel layout, say),
/// built once on first use and shared by copies of the primitive.
struct PackedSlot {
    ember::detail::OnceFlag once;      ///< guards the one build
    std::shared_ptr<const void> data;  ///< the backend's packed form, once built
};

/// A quantized tensor: int8 values in the backend's int primitive plus its parameters.
template <typename IT, typename FT>
struct QTensorPrimitive {
    IT values;                  ///< the stored integers (dtype i8), the tensor's shape
    FT scale;                   ///< [1] per tensor, [C] per channel
    std::optional<IT> offset;   ///< zero points, shaped as scale; none for symmetric schemes
    QuantizationScheme scheme;  ///< per-channel axis normalised to [0, rank)
    /// The backend's packed form (filled lazily by its kernels; a new one after every op).
    std::shared_ptr<PackedSlot> packed = std::make_shared<PackedSlot>();
};

namespace detail {
template <typename B>
struct QuantizedPrimitiveOf {
    using type = QTensorPrimitive<typename B::IntTensorPrimitive, typename B::FloatTensorPrimitive>;
};
template <typename B>
requires requires {
    typename B::QuantizedTensorPrimitive;
}
struct QuantizedPrimitiveOf<B> {
    using type = typename B::QuantizedTensorPrimitive;
};

/// The shape the parameters broadcast with: all ones, but C at a per-channel scheme's axis.
inline Shape param_shape(const Shape& s, const QuantizationScheme& scheme) {
    Shape p = Shape::filled(s.rank(), 1);
    if (scheme.is_per_channel())
        p[static_cast<std::size_t>(scheme.axis)] = s[static_cast<std::size_t>(scheme.axis)];
    return p;
}
/// The f32 epsilon PyTorch's observers clamp scales to (a constant range still gets a scale).
inline constexpr double kScaleEps = 1.1920928955078125e-07;
}  // namespace detail

/// The quantized primitive of backend B: `B::QuantizedTensorPrimitive` when the backend declares
/// one, else the composed QTensorPrimitive of its int and float primitives.
template <typename B>
using QuantizedPrimitive = typename detail::QuantizedPrimitiveOf<B>::type;

/// The default quantized ops, composed from `Self`'s float and int ops. BackendBase derives from
/// it; a backend overrides any of them by declaring a static function of the same name.
template <typename Self>
struct QuantizedOps {
    /// Parameters from a range (min, max: [1] or [C]) as PyTorch's MinMaxObserver computes them:
    /// the range widened to contain 0; affine: scale = (max - min) / 255, offset = -128 -
    /// round(min / scale); symmetric: scale = max(|min|, |max|) / 127.5, no offset; scales at
    /// least f32 epsilon.
    template <typename FT>
    static auto q_params_from_range(FT min, FT max, const QuantizationScheme& scheme) {
        using IT = decltype(Self::float_into_int(min));
        auto lo = Self::float_binary_scalar(BinaryOp::Min, std::move(min), Scalar(0.0));
        auto hi = Self::float_binary_scalar(BinaryOp::Max, std::move(max), Scalar(0.0));
        if (scheme.is_symmetric()) {
            auto amax = Self::float_binary(BinaryOp::Max, Self::float_unary(UnaryOp::Neg, lo), hi);
            auto scale = Self::float_binary_scalar(
                BinaryOp::Max,
                Self::float_binary_scalar(BinaryOp::Div, std::move(amax), Scalar(127.5)),
                Scalar(detail::kScaleEps));
            return QParamsPrimitive<FT, IT>{std::move(scale), std::nullopt};
        }
        auto scale = Self::float_binary_scalar(
            BinaryOp::Max,
            Self::float_binary_scalar(BinaryOp::Div, Self::float_binary(BinaryOp::Sub, hi, lo),
                                      Scalar(255.0)),
            Scalar(detail::kScaleEps));
        auto zp = Self::float_binary_scalar(
            BinaryOp::RSub,
            Self::float_unary(UnaryOp::Round, Self::float_binary(BinaryOp::Div, lo, scale)),
            Scalar(-128.0));
        zp = Self::float_clamp(std::move(zp), Scalar(-128.0), Scalar(127.0));
        return QParamsPrimitive<FT, IT>{std::move(scale), Self::float_into_int(std::move(zp))};
    }

    /// Quantizes `x` (checked by the caller: axis normalised, parameter shapes fit).
    template <typename FT, typename IT>
    static auto quantize(FT x, const QuantizationScheme& scheme, QParamsPrimitive<FT, IT> qparams) {
        const Shape ps = detail::param_shape(Self::float_shape(x), scheme);
        auto inv = Self::float_unary(UnaryOp::Recip, Self::float_reshape(qparams.scale, ps));
        auto y = Self::float_unary(UnaryOp::Round,
                                   Self::float_binary(BinaryOp::Mul, std::move(x), std::move(inv)));
        if (qparams.offset)
            y = Self::float_binary(BinaryOp::Add, std::move(y),
                                   Self::int_into_float(Self::int_reshape(*qparams.offset, ps)));
        y = Self::float_clamp(std::move(y), Scalar(scheme.q_min()), Scalar(scheme.q_max()));
        QuantizedPrimitive<Self> q;
        q.values = Self::int_cast(Self::float_into_int(std::move(y)), DType::I8);
        q.scale = std::move(qparams.scale);
        q.offset = std::move(qparams.offset);
        q.scheme = scheme;
        return q;
    }

    /// Quantizes `x` with parameters from its own min and max (per tensor, or per channel along
    /// the scheme's axis).
    template <typename FT>
    static auto quantize_dynamic(FT x, const QuantizationScheme& scheme) {
        auto [lo, hi] = min_max(x, scheme);
        return Self::quantize(std::move(x), scheme,
                              Self::q_params_from_range(std::move(lo), std::move(hi), scheme));
    }

    /// (min, max) of `x`: shape [1] per tensor, [C] per channel along the scheme's axis.
    template <typename FT>
    static std::pair<FT, FT> min_max(const FT& x, const QuantizationScheme& scheme) {
        if (!scheme.is_per_channel())
            return {Self::float_reduce(ReduceOp::Min, x), Self::float_reduce(ReduceOp::Max, x)};
        const Shape s = Self::float_shape(x);
        const auto axis = static_cast<std::size_t>(scheme.axis);
        // Channels first, then everything else in one dim: one reduction per statistic.
        std::array<std::size_t, kMaxRank> order{};
        std::size_t n = 0;
        order[n++] = axis;
        for (std::size_t i = 0; i < s.rank(); ++i)
            if (i != axis) order[n++] = i;
        auto t = Self::float_permute(x, std::span<const std::size_t>(order.data(), n));
        t = Self::float_reshape(std::move(t), Shape{s[axis], s.num_elements() / s[axis]});
        auto lo = Self::float_reshape(Self::float_reduce_dim(ReduceOp::Min, t, 1), Shape{s[axis]});
        auto hi = Self::float_reshape(Self::float_reduce_dim(ReduceOp::Max, std::move(t), 1),
                                      Shape{s[axis]});
        return {std::move(lo), std::move(hi)};
    }

    /// The float values (q - offset) · scale.
    template <typename QP>
    static auto dequantize(QP q) {
        const Shape ps = detail::param_shape(Self::int_shape(q.values), q.scheme);
        auto f = Self::int_into_float(std::move(q.values));
        if (q.offset)
            f = Self::float_binary(BinaryOp::Sub, std::move(f),
                                   Self::int_into_float(Self::int_reshape(*q.offset, ps)));
        return Self::float_binary(BinaryOp::Mul, std::move(f), Self::float_reshape(q.scale, ps));
    }

    /// The shape.
    template <typename QP>
    static Shape q_shape(const QP& q) {
        return Self::int_shape(q.values);
    }

    /// The same values in another shape; a per-channel axis must survive as a dim of its own.
    template <typename QP>
    static QP q_reshape(const QP& q, const Shape& shape) {
        QP out = fresh(q);
        if (q.scheme.is_per_channel()) {
            const Shape s = Self::int_shape(q.values);
            const auto axis = static_cast<std::size_t>(q.scheme.axis);
            std::size_t before = 1, nb = 1, j = 0;
            for (std::size_t i = 0; i < axis; ++i) before *= s[i];
            while (j < shape.rank() && nb < before) nb *= shape[j++];
            EMBER_CHECK(nb == before && j < shape.rank() && shape[j] == s[axis], Shape,
                        "QuantizedTensor::reshape: ", s.to_string(), " → ", shape.to_string(),
                        " splits or merges the per-channel axis ", axis);
            out.scheme.axis = static_cast<long>(j);
        }
        out.values = Self::int_reshape(q.values, shape);
        return out;
    }

    /// Dims reordered; a per-channel axis follows its dim.
    template <typename QP>
    static QP q_permute(const QP& q, std::span<const std::size_t> axes) {
        QP out = fresh(q);
        if (q.scheme.is_per_channel())
            for (std::size_t i = 0; i < axes.size(); ++i)
                if (axes[i] == static_cast<std::size_t>(q.scheme.axis))
                    out.scheme.axis = static_cast<long>(i);
        out.values = Self::int_permute(q.values, axes);
        return out;
    }

    /// A sub-range; per-channel parameters are cut to the channels kept.
    template <typename QP>
    static QP q_slice(const QP& q, std::span<const Slice> ranges) {
        QP out = fresh(q);
        const auto axis = static_cast<std::size_t>(q.scheme.axis);
        if (q.scheme.is_per_channel() && axis < ranges.size()) {
            const Slice r[1] = {ranges[axis]};
            out.scale = Self::float_slice(q.scale, r);
            if (q.offset) out.offset = Self::int_slice(*q.offset, r);
        }
        out.values = Self::int_slice(q.values, ranges);
        return out;
    }

    /// Reversed along `axes`; per-channel parameters are reversed with their axis.
    template <typename QP>
    static QP q_flip(const QP& q, std::span<const std::size_t> axes) {
        QP out = fresh(q);
        for (std::size_t a : axes) {
            if (q.scheme.is_per_channel() && a == static_cast<std::size_t>(q.scheme.axis)) {
                const std::size_t zero[1] = {0};
                out.scale = Self::float_flip(q.scale, zero);
                if (q.offset) out.offset = Self::int_flip(*q.offset, zero);
            }
        }
        out.values = Self::int_flip(q.values, axes);
        return out;
    }

    /// a @ b in float. In integers (exact int64 sums, one rescale) when the parameters factor
    /// out of the sum — a per tensor or per row, b per tensor or per column — else through the
    /// dequantized values.
    template <typename QP>
    static auto q_matmul(QP a, QP b) {
        const std::size_t r = Self::int_shape(a.values).rank();
        const bool a_ok = !a.scheme.is_per_channel() || a.scheme.axis == long(r) - 2;
        const bool b_ok = !b.scheme.is_per_channel() || b.scheme.axis == long(r) - 1;
        if (!a_ok || !b_ok)
            return Self::float_matmul(Self::dequantize(std::move(a)),
                                      Self::dequantize(std::move(b)));
        const Shape pa = detail::param_shape(Self::int_shape(a.values), a.scheme);
        const Shape pb = detail::param_shape(Self::int_shape(b.values), b.scheme);
        auto centred = [](auto&& q, const Shape& ps) {
            auto v = Self::int_cast(std::move(q.values), DType::I64);
            if (q.offset)
                v = Self::int_binary(BinaryOp::Sub, std::move(v),
                                     Self::int_cast(Self::int_reshape(*q.offset, ps), DType::I64));
            return v;
        };
        auto acc = Self::int_matmul(centred(a, pa), centred(b, pb));
        auto f = Self::float_binary(BinaryOp::Mul, Self::int_into_float(std::move(acc)),
                                    Self::float_reshape(std::move(a.scale), pa));
        return Self::float_binary(BinaryOp::Mul, std::move(f),
                                  Self::float_reshape(std::move(b.scale), pb));
    }

    /// x [M, K] @ w [K, N] (+ bias [N]) with a quantized weight. Dynamic and Static activations
    /// quantize x per tensor (affine int8) and multiply in integers; Float dequantizes w.
    template <typename FT, typename QP>
    static FT q_linear(FT x, QP w, std::optional<FT> bias, const ActivationQuantization& act) {
        FT y = [&] {
            if (act.mode == ActivationMode::Float)
                return Self::float_matmul(std::move(x), Self::dequantize(std::move(w)));
            const auto scheme = QuantizationScheme::per_tensor_affine();
            auto xq = [&] {
                if (act.mode == ActivationMode::Dynamic)
                    return Self::quantize_dynamic(std::move(x), scheme);
                const Shape one{1};
                auto dev = Self::float_device(x);
                using IT = decltype(Self::float_into_int(x));
                QParamsPrimitive<FT, IT> p{
                    Self::float_full(one, Scalar(double(act.scale)), dev),
                    Self::float_into_int(Self::float_full(one, Scalar(double(act.offset)), dev))};
                return Self::quantize(std::move(x), scheme, std::move(p));
            }();
            return Self::q_matmul(std::move(xq), std::move(w));
        }();
        if (bias) {
            const std::size_t n = Self::float_shape(*bias)[0];
            y = Self::float_binary(BinaryOp::Add, std::move(y),
                                   Self::float_reshape(std::move(*bias), Shape{1, n}));
        }
        return y;
    }

    /// conv2d(x, w, bias) with a quantized weight [out, in/groups, kh, kw]. Composed: Dynamic and
    /// Static activations round x through its int8 values first (what an integer kernel computes
    /// with), then the float convolution runs on the dequantized weight.
    template <typename FT, typename QP>
    static FT q_conv2d(FT x, QP w, std::optional<FT> bias, const ConvOptions<2>& options,
                       const ActivationQuantization& act) {
        if (act.mode != ActivationMode::Float) {
            const auto scheme = QuantizationScheme::per_tensor_affine();
            if (act.mode == ActivationMode::Dynamic) {
                x = Self::dequantize(Self::quantize_dynamic(std::move(x), scheme));
            } else {
                const Shape one{1};
                auto dev = Self::float_device(x);
                using IT = decltype(Self::float_into_int(x));
                QParamsPrimitive<FT, IT> p{
                    Self::float_full(one, Scalar(double(act.scale)), dev),
                    Self::float_into_int(Self::float_full(one, Scalar(double(act.offset)), dev))};
                x = Self::dequantize(Self::quantize(std::move(x), scheme, std::move(p)));
            }
        }
        return Self::conv2d(std::move(x), Self::dequantize(std::move(w)), std::move(bias), options);
    }

  private:
    // A copy with its own (empty) packed slot: the values are about to change.
    template <typename QP>
    static QP fresh(const QP& q) {
        QP out = q;
        out.packed = std::make_shared<PackedSlot>();
        return out;
    }
};

}  // namespace ember::quant
