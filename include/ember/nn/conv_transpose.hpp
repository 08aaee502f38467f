#pragma once
// Transposed convolution layers (Burn's ConvTranspose1d/2d/3d). Weights use PyTorch's layout,
// [channels_in, channels_out / groups, kernel...], so a PyTorch state_dict's `weight` and `bias`
// load as they are.
//
// Default initialisation is PyTorch's: weight and bias uniform on ±1/√fan_in where, as PyTorch
// computes it from the weight's second dim, fan_in = channels_out / groups · ∏kernel_size. The
// fan_out given to fan-out and Xavier schemes is channels_in / groups · ∏kernel_size.
#include "conv.hpp"

namespace ember::nn {

namespace detail::conv {

/// The config checks of a transposed convolution: those of a convolution, and an output
/// padding smaller than the stride or the dilation (PyTorch's rule) in every dim.
template <std::size_t N>
void check_conv_transpose_config(std::string_view layer, const std::array<std::size_t, 2>& channels,
                                 std::size_t groups, const std::array<std::size_t, N>& kernel_size,
                                 const std::array<std::size_t, N>& stride,
                                 const std::array<std::size_t, N>& dilation,
                                 const std::array<std::size_t, N>& padding_out) {
    check_conv_config<N>(layer, channels[0], channels[1], groups, "groups", kernel_size, stride,
                         dilation);
    for (std::size_t d = 0; d < N; ++d)
        EMBER_CHECK(padding_out[d] < stride[d] || padding_out[d] < dilation[d], Argument, layer,
                    ": padding_out ", array_str(padding_out), " must be smaller than the stride ",
                    array_str(stride), " or the dilation ", array_str(dilation), " in every dim");
}

/// ConvTranspose1d/2d/3dConfig::init of config `c`: the config checks, then the layer with a lazy
/// weight [channels_in, channels_out / groups, kernel...] and bias.
template <typename Layer, Backend B, typename Config>
Layer init_conv_transpose(std::string_view layer, const Config& c, const Device<B>& device) {
    const auto kernel_size = as_array(c.kernel_size);
    check_conv_transpose_config(layer, c.channels, c.groups, kernel_size, as_array(c.stride),
                                as_array(c.dilation), as_array(c.padding_out));
    auto [w, b] = conv_params<B>(c.initializer, c.channels[0], c.channels[1], c.groups, kernel_size,
                                 c.channels[1], c.bias, device);
    return {std::move(w), std::move(b), c.stride,  c.kernel_size,
            c.dilation,   c.groups,     c.padding, c.padding_out};
}

/// ConvTranspose1d/2d/3d's forward.
template <typename M, Backend B, std::size_t D>
Tensor<B, D> conv_transpose_forward(std::string_view layer, const M& m, const Tensor<B, D>& input) {
    const ConvTransposeOptions<D - 2> options{as_array(m.stride), as_array(m.padding),
                                              as_array(m.padding_out), as_array(m.dilation),
                                              m.groups};
    return convolve(layer, m, input, options);
}

/// ConvTranspose1d/2d/3d's display items.
template <typename M>
void display_conv_transpose(module::DisplayContent& c, const M& m) {
    c.add("channels", std::array<std::size_t, 2>{m.channels_in(), m.channels_out()});
    add_conv_items(c, m).add("padding_out", m.padding_out);
}

}  // namespace detail::conv

// ---- ConvTranspose1d ---------------------------------------------------------------------------

/// A 1-d transposed convolution (the gradient of Conv1d with respect to its input) over
/// [batch, channels_in, length].
template <Backend B>
struct ConvTranspose1d {
    Param<Tensor<B, 3>> weight;               ///< [channels_in, channels_out / groups, kernel_size]
    std::optional<Param<Tensor<B, 1>>> bias;  ///< [channels_out], when the config asks for one
    std::size_t stride = 1;                   ///< step
    std::size_t kernel_size = 1;              ///< kernel length
    std::size_t dilation = 1;                 ///< spacing between kernel taps
    std::size_t groups = 1;                   ///< channel groups
    std::size_t padding = 0;  ///< dilation·(kernel_size−1)−padding zeros added on each side
    std::size_t padding_out = 0;  ///< extra length added on one side of the output
    EMBER_MODULE(ConvTranspose1d, weight, bias, stride, kernel_size, dilation, groups, padding,
                 padding_out)

    /// Input channels the layer expects.
    std::size_t channels_in() const { return weight.shape()[0]; }
    /// Output channels.
    std::size_t channels_out() const { return weight.shape()[1] * groups; }

    /// [batch, channels_in, length_in] → [batch, channels_out, length_out] with
    /// length_out = (length_in−1)·stride − 2·padding + dilation·(kernel_size−1) + padding_out + 1.
    Tensor<B, 3> forward(const Tensor<B, 3>& input) const {
        return detail::conv::conv_transpose_forward("ConvTranspose1d", *this, input);
    }
    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const {
        detail::conv::display_conv_transpose(c, *this);
    }
};

/// Configuration of a ConvTranspose1d layer.
struct ConvTranspose1dConfig {
    std::array<std::size_t, 2> channels;  ///< [channels_in, channels_out]
    std::size_t kernel_size;              ///< kernel length
    std::size_t stride = 1;               ///< step
    std::size_t dilation = 1;             ///< spacing between kernel taps
    std::size_t groups = 1;               ///< channel groups (both channel counts divisible by it)
    std::size_t padding = 0;              ///< PyTorch's padding: trims the output on each side
    std::size_t padding_out = 0;          ///< PyTorch's output_padding (< stride or < dilation)
    bool bias = true;                     ///< whether to add a bias
    /// Weight and bias initialiser; the default is PyTorch's (uniform ±1/√fan_in).
    Initializer initializer = Initializer::KaimingUniform(1.0 / std::sqrt(3.0));
    EMBER_CONFIG(ConvTranspose1dConfig, channels, kernel_size, stride, dilation, groups, padding,
                 padding_out, bias, initializer)

    /// Builds the layer on `device` (parameters are drawn on first use). Throws ArgumentError
    /// for non-positive sizes, channels not divisible by groups, or a too large padding_out.
    template <Backend B>
    ConvTranspose1d<B> init(const Device<B>& device = {}) const {
        return detail::conv::init_conv_transpose<ConvTranspose1d<B>, B>(
            "ConvTranspose1dConfig::init", *this, device);
    }
};

// ---- ConvTranspose2d ---------------------------------------------------------------------------

/// A 2-d transposed convolution (the gradient of Conv2d with respect to its input) over
/// [batch, channels_in, height, width].
template <Backend B>
struct ConvTranspose2d {
    Param<Tensor<B, 4>> weight;                    ///< [channels_in, channels_out / groups, kh, kw]
    std::optional<Param<Tensor<B, 1>>> bias;       ///< [channels_out], when the config asks for one
    std::array<std::size_t, 2> stride{1, 1};       ///< step
    std::array<std::size_t, 2> kernel_size{1, 1};  ///< kernel size
    std::array<std::size_t, 2> dilation{1, 1};     ///< spacing between kernel taps
    std::size_t groups = 1;                        ///< channel groups
    std::array<std::size_t, 2> padding{0, 0};      ///< output trimmed on each side
    std::array<std::size_t, 2> padding_out{0, 0};  ///< extra size added on one side
    EMBER_MODULE(ConvTranspose2d, weight, bias, stride, kernel_size, dilation, groups, padding,
                 padding_out)

    /// Input channels the layer expects.
    std::size_t channels_in() const { return weight.shape()[0]; }
    /// Output channels.
    std::size_t channels_out() const { return weight.shape()[1] * groups; }

    /// [batch, channels_in, h, w] → [batch, channels_out, h_out, w_out], each output size
    /// (in−1)·stride − 2·padding + dilation·(kernel−1) + padding_out + 1.
    Tensor<B, 4> forward(const Tensor<B, 4>& input) const;
    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const {
        detail::conv::display_conv_transpose(c, *this);
    }
};

/// Configuration of a ConvTranspose2d layer.
struct ConvTranspose2dConfig {
    std::array<std::size_t, 2> channels;        ///< [channels_in, channels_out]
    std::array<std::size_t, 2> kernel_size;     ///< [kh, kw]
    std::array<std::size_t, 2> stride{1, 1};    ///< step
    std::array<std::size_t, 2> dilation{1, 1};  ///< spacing between kernel taps
    std::size_t groups = 1;  ///< channel groups (both channel counts divisible by it)
    std::array<std::size_t, 2> padding{0, 0};      ///< PyTorch's padding
    std::array<std::size_t, 2> padding_out{0, 0};  ///< PyTorch's output_padding
    bool bias = true;                              ///< whether to add a bias
    /// Weight and bias initialiser; the default is PyTorch's (uniform ±1/√fan_in).
    Initializer initializer = Initializer::KaimingUniform(1.0 / std::sqrt(3.0));
    EMBER_CONFIG(ConvTranspose2dConfig, channels, kernel_size, stride, dilation, groups, padding,
                 padding_out, bias, initializer)

    /// Builds the layer on `device` (parameters are drawn on first use). Throws ArgumentError
    /// for non-positive sizes, channels not divisible by groups, or a too large padding_out.
    template <Backend B>
    ConvTranspose2d<B> init(const Device<B>& device = {}) const;
};

// ---- ConvTranspose3d ---------------------------------------------------------------------------

/// A 3-d transposed convolution (the gradient of Conv3d with respect to its input) over
/// [batch, channels_in, depth, height, width].
template <Backend B>
struct ConvTranspose3d {
    Param<Tensor<B, 5>> weight;               ///< [channels_in, channels_out / groups, kd, kh, kw]
    std::optional<Param<Tensor<B, 1>>> bias;  ///< [channels_out], when the config asks for one
    std::array<std::size_t, 3> stride{1, 1, 1};       ///< step
    std::array<std::size_t, 3> kernel_size{1, 1, 1};  ///< kernel size
    std::array<std::size_t, 3> dilation{1, 1, 1};     ///< spacing between kernel taps
    std::size_t groups = 1;                           ///< channel groups
    std::array<std::size_t, 3> padding{0, 0, 0};      ///< output trimmed on each side
    std::array<std::size_t, 3> padding_out{0, 0, 0};  ///< extra size added on one side
    EMBER_MODULE(ConvTranspose3d, weight, bias, stride, kernel_size, dilation, groups, padding,
                 padding_out)

    /// Input channels the layer expects.
    std::size_t channels_in() const { return weight.shape()[0]; }
    /// Output channels.
    std::size_t channels_out() const { return weight.shape()[1] * groups; }

    /// [batch, channels_in, d, h, w] → [batch, channels_out, d_out, h_out, w_out], each output
    /// size (in−1)·stride − 2·padding + dilation·(kernel−1) + padding_out + 1.
    Tensor<B, 5> forward(const Tensor<B, 5>& input) const {
        return detail::conv::conv_transpose_forward("ConvTranspose3d", *this, input);
    }
    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const {
        detail::conv::display_conv_transpose(c, *this);
    }
};

/// Configuration of a ConvTranspose3d layer.
struct ConvTranspose3dConfig {
    std::array<std::size_t, 2> channels;           ///< [channels_in, channels_out]
    std::array<std::size_t, 3> kernel_size;        ///< [kd, kh, kw]
    std::array<std::size_t, 3> stride{1, 1, 1};    ///< step
    std::array<std::size_t, 3> dilation{1, 1, 1};  ///< spacing between kernel taps
    std::size_t groups = 1;  ///< channel groups (both channel counts divisible by it)
    std::array<std::size_t, 3> padding{0, 0, 0};      ///< PyTorch's padding
    std::array<std::size_t, 3> padding_out{0, 0, 0};  ///< PyTorch's output_padding
    bool bias = true;                                 ///< whether to add a bias
    /// Weight and bias initialiser; the default is PyTorch's (uniform ±1/√fan_in).
    Initializer initializer = Initializer::KaimingUniform(1.0 / std::sqrt(3.0));
    EMBER_CONFIG(ConvTranspose3dConfig, channels, kernel_size, stride, dilation, groups, padding,
                 padding_out, bias, initializer)

    /// Builds the layer on `device` (parameters are drawn on first use). Throws ArgumentError
    /// for non-positive sizes, channels not divisible by groups, or a too large padding_out.
    template <Backend B>
    ConvTranspose3d<B> init(const Device<B>& device = {}) const {
        return detail::conv::init_conv_transpose<ConvTranspose3d<B>, B>(
            "ConvTranspose3dConfig::init", *this, device);
    }
};

// Defined out of their classes, so not inline: where an `extern template` declaration names an
// instance (include/ember/dispatch/nn.hpp for Dispatch), a file that calls it compiles the call
// only, not the body (compilers instantiate an inline function to consider inlining it, even
// one declared extern).

template <Backend B>
Tensor<B, 4> ConvTranspose2d<B>::forward(const Tensor<B, 4>& input) const {
    return detail::conv::conv_transpose_forward("ConvTranspose2d", *this, input);
}

template <Backend B>
ConvTranspose2d<B> ConvTranspose2dConfig::init(const Device<B>& device) const {
    return detail::conv::init_conv_transpose<ConvTranspose2d<B>, B>("ConvTranspose2dConfig::init",
                                                                    *this, device);
}

}  // namespace ember::nn
