#pragma once
// Interpolate1d and Interpolate2d: resizing modules over the functional module::interpolate.
#include <array>
#include <cmath>
#include <optional>
#include <string_view>

#include "../module/config.hpp"
#include "../module/module.hpp"
#include "../tensor/module_ops.hpp"

namespace ember::nn {

/// How Interpolate modules make values between samples (Burn's nn InterpolateMode; Linear and
/// Cubic are PyTorch's bilinear and bicubic modes, separable per axis).
enum class InterpolateMode : int {
    Nearest,  ///< the nearest sample (PyTorch's "nearest")
    Linear,   ///< linear per axis (PyTorch's "linear" / "bilinear")
    Cubic     ///< cubic convolution per axis, a = -0.75 (PyTorch's "bicubic")
};

namespace detail {
inline ember::InterpolateMode tensor_mode(InterpolateMode m) {
    switch (m) {
        case InterpolateMode::Linear:
            return ember::InterpolateMode::Bilinear;
        case InterpolateMode::Cubic:
            return ember::InterpolateMode::Bicubic;
        default:
            return ember::InterpolateMode::Nearest;
    }
}
inline std::string_view mode_name(InterpolateMode m) {
    constexpr std::string_view names[] = {"Nearest", "Linear", "Cubic"};
    return names[int(m)];
}
// The output extent of one axis: the given size, or ⌊size · scale⌋ (PyTorch's and Burn's rule).
inline std::size_t scaled_size(std::size_t in, double scale, const char* module) {
    const double out = std::floor(double(in) * scale);
    EMBER_CHECK(out >= 1.0, Argument, module, ": scale factor ", scale, " turns size ", in,
                " into an empty output");
    return std::size_t(out);
}
/// A 1-d module's optional size or scale as the one-axis array of the N-d helpers.
template <typename T>
std::optional<std::array<T, 1>> as_array(const std::optional<T>& v) {
    if (!v) return std::nullopt;
    return std::array{*v};
}
/// The output extents for input extents `in`: `output_size`, or ⌊in · scale⌋ per axis with
/// `scale_factor`, or `in` when neither is given.
template <std::size_t N>
std::array<std::size_t, N> output_extents(
    const std::array<std::size_t, N>& in,
    const std::optional<std::array<std::size_t, N>>& output_size,
    const std::optional<std::array<double, N>>& scale_factor, const char* module) {
    if (output_size) return *output_size;
    if (!scale_factor) return in;
    std::array<std::size_t, N> out{};
    for (std::size_t d = 0; d < N; ++d) out[d] = scaled_size(in[d], (*scale_factor)[d], module);
    return out;
}
/// An Interpolate module's display items.
template <typename M>
void display_interpolate(module::DisplayContent& c, const M& m) {
    c.add("output_size", m.output_size)
        .add("scale_factor", m.scale_factor)
        .add("mode", mode_name(m.mode))
        .add("align_corners", m.align_corners);
}
template <std::size_t N>
void check_interpolate_config(const std::optional<std::array<std::size_t, N>>& output_size,
                              const std::optional<std::array<double, N>>& scale_factor,
                              const char* config) {
    EMBER_CHECK(!(output_size && scale_factor), Argument, config,
                "::init: give output_size or scale_factor, not both");
    if (output_size)
        for (auto s : *output_size)
            EMBER_CHECK(s > 0, Argument, config, "::init: output_size must be positive, got 0");
    if (scale_factor)
        for (auto s : *scale_factor)
            EMBER_CHECK(s > 0.0 && std::isfinite(s), Argument, config,
                        "::init: scale_factor must be positive and finite, got ", s);
}
}  // namespace detail

/// Resizes [N, C, H, W] to a fixed output size or by a scale factor. With a scale factor the
/// output is ⌊size·scale⌋ and the sampling grid follows the input/output ratio (PyTorch with
/// recompute_scale_factor=True); with neither, the input passes through unchanged.
struct Interpolate2d {
    std::optional<std::array<std::size_t, 2>> output_size;  ///< [height, width] of the output
    std::optional<std::array<double, 2>> scale_factor;      ///< per-axis scale of the input
    InterpolateMode mode = InterpolateMode::Nearest;        ///< how values are made
    bool align_corners = true;  ///< map corner pixels onto corner pixels (Burn's default)
    EMBER_MODULE(Interpolate2d, output_size, scale_factor, mode, align_corners)

    /// The output [height, width] for an input of [height, width] `in`.
    std::array<std::size_t, 2> output_for(std::array<std::size_t, 2> in) const {
        return detail::output_extents(in, output_size, scale_factor, "Interpolate2d");
    }
    /// Resizes `input` [N, C, H, W].
    template <Backend B>
    Tensor<B, 4> forward(const Tensor<B, 4>& input) const {
        if (!output_size && !scale_factor) return input;
        const auto d = input.dims();
        const auto out = output_for({d[2], d[3]});
        return module::interpolate(input, out,
                                   InterpolateOptions{detail::tensor_mode(mode), align_corners});
    }
    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const { detail::display_interpolate(c, *this); }
};

/// Configuration of Interpolate2d.
struct Interpolate2dConfig {
    std::optional<std::array<std::size_t, 2>> output_size;  ///< [height, width] of the output
    std::optional<std::array<double, 2>> scale_factor;      ///< per-axis scale of the input
    InterpolateMode mode = InterpolateMode::Nearest;        ///< how values are made
    bool align_corners = true;  ///< map corner pixels onto corner pixels (Burn's default)
    EMBER_CONFIG(Interpolate2dConfig, output_size, scale_factor, mode, align_corners)

    /// Builds the module; throws ArgumentError when both sizes are given or one is not positive.
    Interpolate2d init() const {
        detail::check_interpolate_config(output_size, scale_factor, "Interpolate2dConfig");
        return Interpolate2d{output_size, scale_factor, mode, align_corners};
    }
};

/// Resizes [N, C, L] to a fixed length or by a scale factor (Interpolate2d over [N, C, 1, L]).
struct Interpolate1d {
    std::optional<std::size_t> output_size;           ///< length of the output
    std::optional<double> scale_factor;               ///< scale of the input length
    InterpolateMode mode = InterpolateMode::Nearest;  ///< how values are made
    bool align_corners = true;  ///< map end samples onto end samples (Burn's default)
    EMBER_MODULE(Interpolate1d, output_size, scale_factor, mode, align_corners)

    /// Resizes `input` [N, C, L].
    template <Backend B>
    Tensor<B, 3> forward(const Tensor<B, 3>& input) const {
        if (!output_size && !scale_factor) return input;
        const auto out = detail::output_extents<1>({input.dims()[2]}, detail::as_array(output_size),
                                                   detail::as_array(scale_factor), "Interpolate1d");
        auto x = input.template unsqueeze_dim<4>(2);
        return module::interpolate(x, {1, out[0]},
                                   InterpolateOptions{detail::tensor_mode(mode), align_corners})
            .template squeeze<3>(2);
    }
    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const { detail::display_interpolate(c, *this); }
};

/// Configuration of Interpolate1d.
struct Interpolate1dConfig {
    std::optional<std::size_t> output_size;           ///< length of the output
    std::optional<double> scale_factor;               ///< scale of the input length
    InterpolateMode mode = InterpolateMode::Nearest;  ///< how values are made
    bool align_corners = true;  ///< map end samples onto end samples (Burn's default)
    EMBER_CONFIG(Interpolate1dConfig, output_size, scale_factor, mode, align_corners)

    /// Builds the module; throws ArgumentError when both sizes are given or one is not positive.
    Interpolate1d init() const {
        detail::check_interpolate_config(detail::as_array(output_size),
                                         detail::as_array(scale_factor), "Interpolate1dConfig");
        return Interpolate1d{output_size, scale_factor, mode, align_corners};
    }
};

}  // namespace ember::nn
