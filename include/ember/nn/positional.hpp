#pragma once
// Position encodings (Burn's burn::nn::PositionalEncoding and RotaryEncoding). Neither has
// trainable parameters: their tables are constant tensors, moved with the module between
// devices and rebuilt by the config rather than recorded.
#include <cmath>
#include <vector>

#include "../module/config.hpp"
#include "../module/module.hpp"

namespace ember::nn {

/// Adds the sinusoidal position encoding of "Attention Is All You Need" to [batch, seq,
/// d_model]: pe[p, 2i] = sin(p / T^(2i/d)), pe[p, 2i+1] = cos(p / T^(2i/d)), T = max_timescale.
template <Backend B>
struct PositionalEncoding {
    Tensor<B, 3> sinusoids;  ///< the table [1, max_sequence_size, d_model]
    EMBER_MODULE(PositionalEncoding, sinusoids)

    /// input [batch, seq, d_model] + the encoding of positions 0..seq-1.
    Tensor<B, 3> forward(const Tensor<B, 3>& input) const {
        const auto [batch, seq, d] = input.dims();
        (void)batch;
        const auto table = sinusoids.dims();
        EMBER_CHECK(d == table[2], Shape, "PositionalEncoding: input of shape ",
                    input.shape().to_string(), " does not end in d_model = ", table[2]);
        EMBER_CHECK(seq <= table[1], Shape, "PositionalEncoding: input of shape ",
                    input.shape().to_string(), " is longer than max_sequence_size = ", table[1]);
        return input + sinusoids.narrow(1, 0, seq);
    }
    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const {
        const auto table = sinusoids.dims();
        c.add("max_sequence_size", table[1]).add("d_model", table[2]);
    }
};

/// Configuration of PositionalEncoding (Burn's field order puts max_sequence_size first; here
/// the required d_model comes first).
struct PositionalEncodingConfig {
    std::size_t d_model;                   ///< model size; must be even
    std::size_t max_sequence_size = 5000;  ///< longest sequence the table covers
    std::size_t max_timescale = 10000;     ///< T, the longest wavelength / 2π
    EMBER_CONFIG(PositionalEncodingConfig, d_model, max_sequence_size, max_timescale)

    /// Builds the table on `device` (computed in double, then stored in the backend's dtype).
    template <Backend B>
    PositionalEncoding<B> init(const Device<B>& device = {}) const {
        EMBER_CHECK(d_model > 0 && d_model % 2 == 0, Argument,
                    "PositionalEncodingConfig::init: d_model must be positive and even, got ",
                    d_model);
        EMBER_CHECK(max_sequence_size > 0 && max_timescale > 0, Argument,
                    "PositionalEncodingConfig::init: max_sequence_size and max_timescale must be ",
                    "positive, got ", max_sequence_size, " and ", max_timescale);
        std::vector<double> table(max_sequence_size * d_model);
        const double log_t = std::log(double(max_timescale));
        for (std::size_t p = 0; p < max_sequence_size; ++p) {
            for (std::size_t k = 0; k < d_model; k += 2) {
                const double angle = double(p) * std::exp(-log_t * double(k) / double(d_model));
                table[p * d_model + k] = std::sin(angle);
                table[p * d_model + k + 1] = std::cos(angle);
            }
        }
        TensorData data(table, Shape{1, max_sequence_size, d_model});
        return {Tensor<B, 3>::from_data(data.convert(dtype_of<typename B::FloatElem>()), device)};
    }
};

/// Rotary position embedding (RoFormer), as Burn's RotaryEncoding: each interleaved pair
/// (x[2i], x[2i+1]) of a position p is rotated by the angle p·θ^(-2i/d_model).
template <Backend B>
struct RotaryEncoding {
    /// cos and sin of every (position, pair) angle: [max_sequence_length, d_model / 2, 2].
    Tensor<B, 3> freq_complex;
    double theta = 10000.0;  ///< base of the frequencies
    EMBER_MODULE(RotaryEncoding, freq_complex, theta)

    /// Rotates x [..., seq, d_model] as positions 0..seq-1.
    template <std::size_t D>
    Tensor<B, D> forward(const Tensor<B, D>& x) const {
        return apply(x, 0);
    }

    /// Rotates x [..., seq, d_model] as positions start..start+seq-1 (for decoding with a
    /// cache, where the new tokens continue a sequence).
    template <std::size_t D>
    Tensor<B, D> apply(const Tensor<B, D>& x, std::size_t start) const {
        static_assert(D >= 2, "RotaryEncoding: the input needs [..., seq, d_model]");
        const auto table = freq_complex.dims();
        const auto dims = x.dims();
        const std::size_t seq = dims[D - 2], d = dims[D - 1];
        EMBER_CHECK(d == 2 * table[1], Shape, "RotaryEncoding: input of shape ",
                    x.shape().to_string(), " does not end in d_model = ", 2 * table[1]);
        EMBER_CHECK(start + seq <= table[0], Shape, "RotaryEncoding: positions ", start, "..",
                    start + seq, " of input ", x.shape().to_string(),
                    " exceed max_sequence_length = ", table[0]);
        // x as [..., seq, d/2, 2]: the pairs on the last dim.
        Shape pairs_shape;
        for (std::size_t i = 0; i + 1 < D; ++i) pairs_shape.push_back(dims[i]);
        pairs_shape.push_back(d / 2);
        pairs_shape.push_back(2);
        auto pairs = x.template reshape<D + 1>(pairs_shape);
        auto a = pairs.narrow(D, 0, 1);
        auto b = pairs.narrow(D, 1, 1);
        // cos and sin as [1, ..., 1, seq, d/2, 1], broadcast over the leading dims.
        Shape f_shape = Shape::filled(D + 1, 1);
        f_shape[D - 2] = seq;
        f_shape[D - 1] = d / 2;
        auto f = freq_complex.narrow(0, start, seq);
        auto cos = f.narrow(2, 0, 1).template reshape<D + 1>(f_shape);
        auto sin = f.narrow(2, 1, 1).template reshape<D + 1>(f_shape);
        auto out = Tensor<B, D + 1>::cat({a * cos - b * sin, a * sin + b * cos}, long(D));
        return out.template reshape<D>(x.shape());
    }
    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const {
        const auto table = freq_complex.dims();
        c.add("max_sequence_length", table[0]).add("d_model", 2 * table[1]).add("theta", theta);
    }
};

/// Configuration of RotaryEncoding.
struct RotaryEncodingConfig {
    std::size_t max_sequence_length;  ///< longest sequence (start + seq) the table covers
    std::size_t d_model;              ///< size of the rotated last dim; must be even
    double theta = 10000.0;           ///< base of the frequencies
    EMBER_CONFIG(RotaryEncodingConfig, max_sequence_length, d_model, theta)

    /// Builds the table on `device` (computed in double, then stored in the backend's dtype).
    template <Backend B>
    RotaryEncoding<B> init(const Device<B>& device = {}) const {
        EMBER_CHECK(d_model > 0 && d_model % 2 == 0, Argument,
                    "RotaryEncodingConfig::init: d_model must be positive and even, got ", d_model);
        EMBER_CHECK(max_sequence_length > 0, Argument,
                    "RotaryEncodingConfig::init: max_sequence_length must be positive, got 0");
        EMBER_CHECK(theta > 0.0, Argument, "RotaryEncodingConfig::init: theta must be positive, ",
                    "got ", theta);
        const std::size_t half = d_model / 2;
        std::vector<double> table(max_sequence_length * half * 2);
        for (std::size_t p = 0; p < max_sequence_length; ++p) {
            for (std::size_t i = 0; i < half; ++i) {
                const double angle = double(p) * std::pow(theta, -double(2 * i) / double(d_model));
                table[(p * half + i) * 2] = std::cos(angle);
                table[(p * half + i) * 2 + 1] = std::sin(angle);
            }
        }
        TensorData data(table, Shape{max_sequence_length, half, 2});
        return {Tensor<B, 3>::from_data(data.convert(dtype_of<typename B::FloatElem>()), device),
                theta};
    }
};

}  // namespace ember::nn
