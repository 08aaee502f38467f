#pragma once
// Convolution layers (Burn's Conv1d, Conv2d, Conv3d and DeformConv2d; the transposed ones are in
// conv_transpose.hpp). Weights use PyTorch's layout, [channels_out, channels_in / groups,
// kernel...], so a PyTorch state_dict's `weight` and `bias` load as they are.
//
// Default initialisation is PyTorch's: weight and bias uniform on ±1/√fan_in with
// fan_in = channels_in / groups · ∏kernel_size (Burn's KaimingUniform{gain 1/√3}). The fan_out
// given to fan-out and Xavier schemes is Burn's, channels_out / groups · ∏kernel_size (PyTorch's
// does not divide by groups).
#include <array>
#include <cmath>
#include <optional>
#include <string_view>
#include <type_traits>
#include <utility>

#include "../module/config.hpp"
#include "../module/module.hpp"
#include "../tensor/module_ops.hpp"
#include "initializer.hpp"
#include "padding.hpp"

namespace ember::nn {

namespace detail::conv {

template <std::size_t N>
std::size_t product(const std::array<std::size_t, N>& a) {
    std::size_t p = 1;
    for (auto v : a) p *= v;
    return p;
}

template <std::size_t N>
void check_at_least_one(std::string_view layer, std::string_view what,
                        const std::array<std::size_t, N>& a) {
    for (auto v : a)
        EMBER_CHECK(v >= 1, Argument, layer, ": ", what, " must be >= 1 in every dim, got ",
                    array_str(a));
}

/// The config checks every convolution shares: positive sizes and channels divisible by groups.
template <std::size_t N>
void check_conv_config(std::string_view layer, std::size_t channels_in, std::size_t channels_out,
                       std::size_t groups, std::string_view groups_name,
                       const std::array<std::size_t, N>& kernel_size,
                       const std::array<std::size_t, N>& stride,
                       const std::array<std::size_t, N>& dilation) {
    EMBER_CHECK(channels_in >= 1 && channels_out >= 1, Argument, layer,
                ": channels must be positive, got [", channels_in, ", ", channels_out, "]");
    EMBER_CHECK(groups >= 1, Argument, layer, ": ", groups_name, " must be >= 1, got ", groups);
    EMBER_CHECK(channels_in % groups == 0 && channels_out % groups == 0, Argument, layer,
                ": both channels must be divisible by ", groups_name, ", got channels [",
                channels_in, ", ", channels_out, "] and ", groups_name, " ", groups);
    check_at_least_one(layer, "kernel_size", kernel_size);
    check_at_least_one(layer, "stride", stride);
    check_at_least_one(layer, "dilation", dilation);
}

/// A 1-d layer's size as the one-element array of the N-d helpers; an N-d layer's array as it is.
inline std::array<std::size_t, 1> as_array(std::size_t v) {
    return {v};
}
template <std::size_t N>
std::array<std::size_t, N> as_array(const std::array<std::size_t, N>& a) {
    return a;
}

/// A lazy weight [lead, second / groups, kernel...] and, when asked, a bias of `bias_size`, both
/// drawn by `init` with fan_in = second / groups · ∏kernel_size (PyTorch's, from the weight's
/// second dim) and fan_out = lead / groups · ∏kernel_size (Burn's).
template <Backend B, std::size_t N>
std::pair<Param<Tensor<B, N + 2>>, std::optional<Param<Tensor<B, 1>>>> conv_params(
    const Initializer& init, std::size_t lead, std::size_t second, std::size_t groups,
    const std::array<std::size_t, N>& kernel_size, std::size_t bias_size, bool bias,
    const Device<B>& device) {
    const std::size_t k = product(kernel_size);
    const std::size_t fan_in = second / groups * k, fan_out = lead / groups * k;
    Shape shape{lead, second / groups};
    for (auto v : kernel_size) shape.push_back(v);
    auto weight = init.init<B, N + 2>(shape, device, fan_in, fan_out);
    std::optional<Param<Tensor<B, 1>>> b;
    if (bias) b = init.init<B, 1>(Shape{bias_size}, device, fan_in, fan_out);
    return {std::move(weight), std::move(b)};
}

/// Conv1d/2d/3dConfig::init of config `c` with `channels` [in, out]: the config checks, then the
/// layer with a lazy weight [channels_out, channels_in / groups, kernel...] and bias.
template <typename Layer, Backend B, typename Config>
Layer init_conv(std::string_view layer, const Config& c, const std::array<std::size_t, 2>& channels,
                const Device<B>& device) {
    const auto kernel_size = as_array(c.kernel_size), stride = as_array(c.stride);
    check_conv_config(layer, channels[0], channels[1], c.groups, "groups", kernel_size, stride,
                      as_array(c.dilation));
    c.padding.check(layer, kernel_size, stride);
    auto [w, b] = conv_params<B>(c.initializer, channels[1], channels[0], c.groups, kernel_size,
                                 channels[1], c.bias, device);
    return {std::move(w), std::move(b), c.stride, c.kernel_size, c.dilation, c.groups, c.padding};
}

/// Throws ShapeError unless `input` [batch, channels, spatial...] has `channels` channels.
template <Backend B, std::size_t D>
void check_input_channels(std::string_view layer, const Tensor<B, D>& input, std::size_t channels) {
    const Shape s = input.shape();
    EMBER_CHECK(s[1] == channels, Shape, layer, ": input ", s.to_string(), " has ", s[1],
                " channels but the layer expects ", channels,
                " (input layout [batch, channels, spatial...])");
}

template <Backend B>
std::optional<Tensor<B, 1>> bias_value(const std::optional<Param<Tensor<B, 1>>>& bias) {
    if (!bias) return std::nullopt;
    return bias->val();
}

/// The forward of convolution module `m` (`layer` in messages): checks the input's channels, then
/// runs module::conv*d or module::conv_transpose*d, as the type of `options` says, with the
/// module's weight and bias.
template <typename M, Backend B, std::size_t D, typename Options>
Tensor<B, D> convolve(std::string_view layer, const M& m, const Tensor<B, D>& input,
                      const Options& options) {
    check_input_channels(layer, input, m.channels_in());
    if constexpr (std::is_same_v<Options, ConvOptions<2>>) {
        if (const auto* q = m.weight.quantized())  // int8 weights: the backend's q_conv2d
            return quant::detail::conv2d(input, *q, bias_value(m.bias), options);
    }
    const auto weight = m.weight.val();
    const auto bias = bias_value(m.bias);
    if constexpr (std::is_same_v<Options, ConvOptions<1>>)
        return module::conv1d(input, weight, bias, options);
    else if constexpr (std::is_same_v<Options, ConvOptions<2>>)
        return module::conv2d(input, weight, bias, options);
    else if constexpr (std::is_same_v<Options, ConvOptions<3>>)
        return module::conv3d(input, weight, bias, options);
    else if constexpr (std::is_same_v<Options, ConvTransposeOptions<1>>)
        return module::conv_transpose1d(input, weight, bias, options);
    else if constexpr (std::is_same_v<Options, ConvTransposeOptions<2>>)
        return module::conv_transpose2d(input, weight, bias, options);
    else
        return module::conv_transpose3d(input, weight, bias, options);
}

/// Conv1d/2d/3d's forward, with the padding resolved for the module's kernel and dilation.
template <typename M, Backend B, std::size_t D>
Tensor<B, D> conv_forward(std::string_view layer, const M& m, const Tensor<B, D>& input) {
    const auto kernel_size = as_array(m.kernel_size), dilation = as_array(m.dilation);
    const ConvOptions<D - 2> options{as_array(m.stride), m.padding.resolve(kernel_size, dilation),
                                     dilation, m.groups};
    return convolve(layer, m, input, options);
}

/// Adds the display items that follow a Conv or ConvTranspose module's channels, in Burn's order.
template <typename M>
module::DisplayContent& add_conv_items(module::DisplayContent& c, const M& m) {
    return c.add("stride", m.stride)
        .add("kernel_size", m.kernel_size)
        .add("dilation", m.dilation)
        .add("groups", m.groups)
        .add("padding", m.padding);
}

/// Conv1d/2d/3d's display items.
template <typename M>
void display_conv(module::DisplayContent& c, const M& m) {
    c.add("ch_in", m.channels_in()).add("ch_out", m.channels_out());
    add_conv_items(c, m);
}

}  // namespace detail::conv

// ---- Conv1d ------------------------------------------------------------------------------------

/// A 1-d convolution over [batch, channels_in, length].
template <Backend B>
struct Conv1d {
    Param<Tensor<B, 3>> weight;               ///< [channels_out, channels_in / groups, kernel_size]
    std::optional<Param<Tensor<B, 1>>> bias;  ///< [channels_out], when the config asks for one
    std::size_t stride = 1;                   ///< step
    std::size_t kernel_size = 1;              ///< kernel length
    std::size_t dilation = 1;                 ///< spacing between kernel taps
    std::size_t groups = 1;                   ///< channel groups
    PaddingConfig1d padding;                  ///< padding scheme (resolved per forward)
    EMBER_MODULE(Conv1d, weight, bias, stride, kernel_size, dilation, groups, padding)

    /// Input channels the layer expects.
    std::size_t channels_in() const { return weight.shape()[1] * groups; }
    /// Output channels.
    std::size_t channels_out() const { return weight.shape()[0]; }

    /// [batch, channels_in, length_in] → [batch, channels_out, length_out].
    Tensor<B, 3> forward(const Tensor<B, 3>& input) const;
    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const { detail::conv::display_conv(c, *this); }
};

/// Configuration of a Conv1d layer.
struct Conv1dConfig {
    std::size_t channels_in;   ///< input channels
    std::size_t channels_out;  ///< output channels
    std::size_t kernel_size;   ///< kernel length
    std::size_t stride = 1;    ///< step
    std::size_t dilation = 1;  ///< spacing between kernel taps
    std::size_t groups = 1;    ///< channel groups (both channel counts divisible by it)
    PaddingConfig1d padding = PaddingConfig1d::Valid();  ///< padding scheme
    bool bias = true;                                    ///< whether to add a bias
    /// Weight and bias initialiser; the default is PyTorch's (uniform ±1/√fan_in).
    Initializer initializer = Initializer::KaimingUniform(1.0 / std::sqrt(3.0));
    EMBER_CONFIG(Conv1dConfig, channels_in, channels_out, kernel_size, stride, dilation, groups,
                 padding, bias, initializer)

    /// Builds the layer on `device` (parameters are drawn on first use). Throws ArgumentError
    /// for non-positive sizes, channels not divisible by groups, or unsupported Same padding.
    template <Backend B>
    Conv1d<B> init(const Device<B>& device = {}) const;
};

// ---- Conv2d ------------------------------------------------------------------------------------

/// A 2-d convolution over [batch, channels_in, height, width].
template <Backend B>
struct Conv2d {
    Param<Tensor<B, 4>> weight;                    ///< [channels_out, channels_in / groups, kh, kw]
    std::optional<Param<Tensor<B, 1>>> bias;       ///< [channels_out], when the config asks for one
    std::array<std::size_t, 2> stride{1, 1};       ///< step
    std::array<std::size_t, 2> kernel_size{1, 1};  ///< kernel size
    std::array<std::size_t, 2> dilation{1, 1};     ///< spacing between kernel taps
    std::size_t groups = 1;                        ///< channel groups
    PaddingConfig2d padding;                       ///< padding scheme (resolved per forward)
    EMBER_MODULE(Conv2d, weight, bias, stride, kernel_size, dilation, groups, padding)

    /// Input channels the layer expects.
    std::size_t channels_in() const { return weight.shape()[1] * groups; }
    /// Output channels.
    std::size_t channels_out() const { return weight.shape()[0]; }

    /// [batch, channels_in, height_in, width_in] → [batch, channels_out, height_out, width_out].
    Tensor<B, 4> forward(const Tensor<B, 4>& input) const;
    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const { detail::conv::display_conv(c, *this); }
};

/// Configuration of a Conv2d layer.
struct Conv2dConfig {
    std::array<std::size_t, 2> channels;        ///< [channels_in, channels_out]
    std::array<std::size_t, 2> kernel_size;     ///< [kh, kw]
    std::array<std::size_t, 2> stride{1, 1};    ///< step
    std::array<std::size_t, 2> dilation{1, 1};  ///< spacing between kernel taps
    std::size_t groups = 1;  ///< channel groups (both channel counts divisible by it)
    PaddingConfig2d padding = PaddingConfig2d::Valid();  ///< padding scheme
    bool bias = true;                                    ///< whether to add a bias
    /// Weight and bias initialiser; the default is PyTorch's (uniform ±1/√fan_in).
    Initializer initializer = Initializer::KaimingUniform(1.0 / std::sqrt(3.0));
    EMBER_CONFIG(Conv2dConfig, channels, kernel_size, stride, dilation, groups, padding, bias,
                 initializer)

    /// Builds the layer on `device` (parameters are drawn on first use). Throws ArgumentError
    /// for non-positive sizes, channels not divisible by groups, or unsupported Same padding.
    template <Backend B>
    Conv2d<B> init(const Device<B>& device = {}) const;
};

// ---- Conv3d ------------------------------------------------------------------------------------

/// A 3-d convolution over [batch, channels_in, depth, height, width].
template <Backend B>
struct Conv3d {
    Param<Tensor<B, 5>> weight;               ///< [channels_out, channels_in / groups, kd, kh, kw]
    std::optional<Param<Tensor<B, 1>>> bias;  ///< [channels_out], when the config asks for one
    std::array<std::size_t, 3> stride{1, 1, 1};       ///< step
    std::array<std::size_t, 3> kernel_size{1, 1, 1};  ///< kernel size
    std::array<std::size_t, 3> dilation{1, 1, 1};     ///< spacing between kernel taps
    std::size_t groups = 1;                           ///< channel groups
    PaddingConfig3d padding;                          ///< padding scheme (resolved per forward)
    EMBER_MODULE(Conv3d, weight, bias, stride, kernel_size, dilation, groups, padding)

    /// Input channels the layer expects.
    std::size_t channels_in() const { return weight.shape()[1] * groups; }
    /// Output channels.
    std::size_t channels_out() const { return weight.shape()[0]; }

    /// [batch, channels_in, d, h, w] → [batch, channels_out, d_out, h_out, w_out].
    Tensor<B, 5> forward(const Tensor<B, 5>& input) const {
        return detail::conv::conv_forward("Conv3d", *this, input);
    }
    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const { detail::conv::display_conv(c, *this); }
};

/// Configuration of a Conv3d layer.
struct Conv3dConfig {
    std::array<std::size_t, 2> channels;           ///< [channels_in, channels_out]
    std::array<std::size_t, 3> kernel_size;        ///< [kd, kh, kw]
    std::array<std::size_t, 3> stride{1, 1, 1};    ///< step
    std::array<std::size_t, 3> dilation{1, 1, 1};  ///< spacing between kernel taps
    std::size_t groups = 1;  ///< channel groups (both channel counts divisible by it)
    PaddingConfig3d padding = PaddingConfig3d::Valid();  ///< padding scheme
    bool bias = true;                                    ///< whether to add a bias
    /// Weight and bias initialiser; the default is PyTorch's (uniform ±1/√fan_in).
    Initializer initializer = Initializer::KaimingUniform(1.0 / std::sqrt(3.0));
    EMBER_CONFIG(Conv3dConfig, channels, kernel_size, stride, dilation, groups, padding, bias,
                 initializer)

    /// Builds the layer on `device` (parameters are drawn on first use). Throws ArgumentError
    /// for non-positive sizes, channels not divisible by groups, or unsupported Same padding.
    template <Backend B>
    Conv3d<B> init(const Device<B>& device = {}) const {
        return detail::conv::init_conv<Conv3d<B>, B>("Conv3dConfig::init", *this, channels, device);
    }
};

// ---- DeformConv2d ------------------------------------------------------------------------------

/// A deformable 2-d convolution (torchvision.ops.DeformConv2d; DCNv2 when given a mask): each
/// kernel tap samples the input at its regular position plus a learned (dy, dx) offset, by
/// bilinear interpolation, optionally scaled by a modulation mask.
template <Backend B>
struct DeformConv2d {
    Param<Tensor<B, 4>> weight;  ///< [channels_out, channels_in / weight_groups, kh, kw]
    std::optional<Param<Tensor<B, 1>>> bias;       ///< [channels_out], when the config asks for one
    std::array<std::size_t, 2> stride{1, 1};       ///< step
    std::array<std::size_t, 2> kernel_size{1, 1};  ///< kernel size
    std::array<std::size_t, 2> dilation{1, 1};     ///< spacing between kernel taps
    std::size_t weight_groups = 1;                 ///< channel groups of the weight
    std::size_t offset_groups = 1;                 ///< channel groups sharing one offset field
    PaddingConfig2d padding;                       ///< padding scheme (resolved per forward)
    EMBER_MODULE(DeformConv2d, weight, bias, stride, kernel_size, dilation, weight_groups,
                 offset_groups, padding)

    /// Input channels the layer expects.
    std::size_t channels_in() const { return weight.shape()[1] * weight_groups; }
    /// Output channels.
    std::size_t channels_out() const { return weight.shape()[0]; }

    /// input [batch, channels_in, h, w], offset [batch, 2·offset_groups·kh·kw, h_out, w_out]
    /// ((dy, dx) pairs per tap, taps row-major), optional mask
    /// [batch, offset_groups·kh·kw, h_out, w_out] → [batch, channels_out, h_out, w_out].
    /// Input channel c uses offset group c / (channels_in / offset_groups).
    Tensor<B, 4> forward(const Tensor<B, 4>& input, const Tensor<B, 4>& offset,
                         const std::optional<Tensor<B, 4>>& mask = std::nullopt) const {
        detail::conv::check_input_channels("DeformConv2d", input, channels_in());
        DeformConvOptions o{stride, padding.resolve(kernel_size, dilation), dilation, weight_groups,
                            offset_groups};
        return module::deform_conv2d(input, offset, weight.val(), mask,
                                     detail::conv::bias_value(bias), o);
    }
    /// Shown on the module's display line (Burn's items).
    void display_content(module::DisplayContent& c) const {
        c.add("stride", stride)
            .add("kernel_size", kernel_size)
            .add("dilation", dilation)
            .add("weight_groups", weight_groups)
            .add("offset_groups", offset_groups)
            .add("padding", padding);
    }
};

/// Configuration of a DeformConv2d layer.
struct DeformConv2dConfig {
    std::array<std::size_t, 2> channels;        ///< [channels_in, channels_out]
    std::array<std::size_t, 2> kernel_size;     ///< [kh, kw]
    std::array<std::size_t, 2> stride{1, 1};    ///< step
    std::array<std::size_t, 2> dilation{1, 1};  ///< spacing between kernel taps
    std::size_t weight_groups = 1;  ///< weight groups (both channel counts divisible by it)
    std::size_t offset_groups = 1;  ///< offset groups (channels_in divisible by it)
    PaddingConfig2d padding = PaddingConfig2d::Valid();  ///< padding scheme
    bool bias = true;                                    ///< whether to add a bias
    /// Weight and bias initialiser; the default is torchvision's (uniform ±1/√fan_in).
    Initializer initializer = Initializer::KaimingUniform(1.0 / std::sqrt(3.0));
    EMBER_CONFIG(DeformConv2dConfig, channels, kernel_size, stride, dilation, weight_groups,
                 offset_groups, padding, bias, initializer)

    /// Builds the layer on `device` (parameters are drawn on first use). Throws ArgumentError
    /// for non-positive sizes, channels not divisible by the groups, or unsupported Same
    /// padding.
    template <Backend B>
    DeformConv2d<B> init(const Device<B>& device = {}) const {
        constexpr std::string_view layer = "DeformConv2dConfig::init";
        detail::conv::check_conv_config<2>(layer, channels[0], channels[1], weight_groups,
                                           "weight_groups", kernel_size, stride, dilation);
        EMBER_CHECK(offset_groups >= 1 && channels[0] % offset_groups == 0, Argument, layer,
                    ": channels_in (", channels[0], ") must be divisible by offset_groups (",
                    offset_groups, ")");
        padding.check(layer, kernel_size, stride);
        auto [w, b] =
            detail::conv::conv_params<B>(initializer, channels[1], channels[0], weight_groups,
                                         kernel_size, channels[1], bias, device);
        return {std::move(w), std::move(b),  stride,        kernel_size,
                dilation,     weight_groups, offset_groups, padding};
    }
};

// Defined out of their classes, so not inline: where an `extern template` declaration names an
// instance (include/ember/dispatch/nn.hpp for Dispatch), a file that calls it compiles the call
// only, not the body (compilers instantiate an inline function to consider inlining it, even
// one declared extern).

template <Backend B>
Tensor<B, 3> Conv1d<B>::forward(const Tensor<B, 3>& input) const {
    return detail::conv::conv_forward("Conv1d", *this, input);
}

template <Backend B>
Conv1d<B> Conv1dConfig::init(const Device<B>& device) const {
    return detail::conv::init_conv<Conv1d<B>, B>("Conv1dConfig::init", *this,
                                                 {channels_in, channels_out}, device);
}

template <Backend B>
Tensor<B, 4> Conv2d<B>::forward(const Tensor<B, 4>& input) const {
    return detail::conv::conv_forward("Conv2d", *this, input);
}

template <Backend B>
Conv2d<B> Conv2dConfig::init(const Device<B>& device) const {
    return detail::conv::init_conv<Conv2d<B>, B>("Conv2dConfig::init", *this, channels, device);
}

}  // namespace ember::nn

#include "conv_transpose.hpp"
