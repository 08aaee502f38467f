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

template <Backend B, std::size_t N>
auto conv_transpose_params(const Initializer& init, const std::array<std::size_t, 2>& channels,
                           std::size_t groups, const std::array<std::size_t, N>& kernel_size,
                           bool bias, const Device<B>& device) {
    const std::size_t k = product(kernel_size);
    return conv_params<B, N>(init, channels[0], channels[1] / groups, kernel_size, channels[1],
                             bias, channels[1] / groups * k, channels[0] / groups * k, device);
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
        detail::conv::check_input_channels("ConvTranspose1d", input, channels_in());
        ConvTransposeOptions<1> o{{stride}, {padding}, {padding_out}, {dilation}, groups};
        return module::conv_transpose1d(input, weight.val(), detail::conv::bias_value(bias), o);
    }
    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const {
        c.add("channels", std::array<std::size_t, 2>{channels_in(), channels_out()})
            .add("stride", stride)
            .add("kernel_size", kernel_size)
            .add("dilation", dilation)
            .add("groups", groups)
            .add("padding", padding)
            .add("padding_out", padding_out);
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
        const std::array<std::size_t, 1> k{kernel_size};
        detail::conv::check_conv_transpose_config<1>("ConvTranspose1dConfig::init", channels,
                                                     groups, k, {stride}, {dilation},
                                                     {padding_out});
        auto [w, b] = detail::conv::conv_transpose_params<B, 1>(initializer, channels, groups, k,
                                                                bias, device);
        return {std::move(w), std::move(b), stride,  kernel_size,
                dilation,     groups,       padding, padding_out};
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
    Tensor<B, 4> forward(const Tensor<B, 4>& input) const {
        detail::conv::check_input_channels("ConvTranspose2d", input, channels_in());
        ConvTransposeOptions<2> o{stride, padding, padding_out, dilation, groups};
        return module::conv_transpose2d(input, weight.val(), detail::conv::bias_value(bias), o);
    }
    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const {
        c.add("channels", std::array<std::size_t, 2>{channels_in(), channels_out()})
            .add("stride", stride)
            .add("kernel_size", kernel_size)
            .add("dilation", dilation)
            .add("groups", groups)
            .add("padding", padding)
            .add("padding_out", padding_out);
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
    ConvTranspose2d<B> init(const Device<B>& device = {}) const {
        detail::conv::check_conv_transpose_config<2>("ConvTranspose2dConfig::init", channels,
                                                     groups, kernel_size, stride, dilation,
                                                     padding_out);
        auto [w, b] = detail::conv::conv_transpose_params<B, 2>(initializer, channels, groups,
                                                                kernel_size, bias, device);
        return {std::move(w), std::move(b), stride,  kernel_size,
                dilation,     groups,       padding, padding_out};
    }
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
        detail::conv::check_input_channels("ConvTranspose3d", input, channels_in());
        ConvTransposeOptions<3> o{stride, padding, padding_out, dilation, groups};
        return module::conv_transpose3d(input, weight.val(), detail::conv::bias_value(bias), o);
    }
    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const {
        c.add("channels", std::array<std::size_t, 2>{channels_in(), channels_out()})
            .add("stride", stride)
            .add("kernel_size", kernel_size)
            .add("dilation", dilation)
            .add("groups", groups)
            .add("padding", padding)
            .add("padding_out", padding_out);
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
        detail::conv::check_conv_transpose_config<3>("ConvTranspose3dConfig::init", channels,
                                                     groups, kernel_size, stride, dilation,
                                                     padding_out);
        auto [w, b] = detail::conv::conv_transpose_params<B, 3>(initializer, channels, groups,
                                                                kernel_size, bias, device);
        return {std::move(w), std::move(b), stride,  kernel_size,
                dilation,     groups,       padding, padding_out};
    }
};

}  // namespace ember::nn
