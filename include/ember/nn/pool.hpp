#pragma once
// Pooling layers (Burn's AdaptiveAvgPool1d/2d, AvgPool1d/2d, MaxPool1d/2d): parameter-free
// modules whose forward works on any backend.
//
// As in Burn, the stride defaults to 1 (PyTorch's defaults to the kernel size) and padding is a
// PaddingConfig (Valid by default; Same needs odd kernels and stride 1). ceil_mode (PyTorch's,
// off by default) rounds the output size up.
#include <array>
#include <string_view>

#include "../module/config.hpp"
#include "../module/module.hpp"
#include "../tensor/module_ops.hpp"
#include "padding.hpp"

namespace ember::nn {

namespace detail::conv {

/// The config checks every pooling layer shares: sizes of at least 1, a supported Same padding,
/// and explicit padding at most half the (dilated) kernel, as PyTorch requires.
template <std::size_t N>
void check_pool_config(std::string_view layer, const std::array<std::size_t, N>& kernel_size,
                       const std::array<std::size_t, N>& stride,
                       const std::array<std::size_t, N>& dilation,
                       const PaddingConfig<N>& padding) {
    for (std::size_t d = 0; d < N; ++d)
        EMBER_CHECK(kernel_size[d] >= 1 && stride[d] >= 1 && dilation[d] >= 1, Argument, layer,
                    ": kernel_size, stride and dilation must be >= 1, got kernel_size ",
                    array_str(kernel_size), ", stride ", array_str(stride), ", dilation ",
                    array_str(dilation));
    padding.check(layer, kernel_size, stride);
    const auto p = padding.resolve(kernel_size, dilation);
    for (std::size_t d = 0; d < N; ++d)
        EMBER_CHECK(2 * p[d] <= dilation[d] * (kernel_size[d] - 1) + 1, Argument, layer,
                    ": padding ", padding.to_string(), " must be at most half of the kernel size ",
                    array_str(kernel_size));
}

/// A pool's display items, in Burn's order: kernel_size, stride, padding, the pool's own option
/// (`option`, shown as `name`: count_include_pad or dilation) and ceil_mode.
template <typename Pool, typename T>
void display_pool(module::DisplayContent& c, const Pool& p, std::string_view name,
                  const T& option) {
    c.add("kernel_size", p.kernel_size)
        .add("stride", p.stride)
        .add("padding", p.padding)
        .add(name, option)
        .add("ceil_mode", p.ceil_mode);
}

}  // namespace detail::conv

// ---- AvgPool1d ---------------------------------------------------------------------------------

/// 1-d average pooling over [batch, channels, length].
struct AvgPool1d {
    std::size_t stride = 1;         ///< step
    std::size_t kernel_size = 1;    ///< window length
    PaddingConfig1d padding;        ///< zero padding
    bool count_include_pad = true;  ///< whether padded zeros count in the divisor
    bool ceil_mode = false;         ///< round the output length up
    EMBER_MODULE(AvgPool1d, stride, kernel_size, padding, count_include_pad, ceil_mode)

    /// [batch, channels, length_in] → [batch, channels, length_out].
    template <Backend B>
    Tensor<B, 3> forward(const Tensor<B, 3>& input) const {
        const auto p = padding.resolve({kernel_size}, {1});
        return module::avg_pool1d(input, kernel_size, stride, p[0], count_include_pad, ceil_mode);
    }
    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const {
        detail::conv::display_pool(c, *this, "count_include_pad", count_include_pad);
    }
};

/// Configuration of AvgPool1d.
struct AvgPool1dConfig {
    std::size_t kernel_size;                             ///< window length
    std::size_t stride = 1;                              ///< step (Burn's default)
    PaddingConfig1d padding = PaddingConfig1d::Valid();  ///< zero padding
    bool count_include_pad = true;  ///< whether padded zeros count in the divisor
    bool ceil_mode = false;         ///< round the output length up
    EMBER_CONFIG(AvgPool1dConfig, kernel_size, stride, padding, count_include_pad, ceil_mode)

    /// Builds the layer; throws ArgumentError for sizes below 1, unsupported Same padding or
    /// padding over half the kernel.
    AvgPool1d init() const {
        detail::conv::check_pool_config<1>("AvgPool1dConfig::init", {kernel_size}, {stride}, {1},
                                           padding);
        return {stride, kernel_size, padding, count_include_pad, ceil_mode};
    }
};

// ---- AvgPool2d ---------------------------------------------------------------------------------

/// 2-d average pooling over [batch, channels, height, width].
struct AvgPool2d {
    std::array<std::size_t, 2> stride{1, 1};       ///< step
    std::array<std::size_t, 2> kernel_size{1, 1};  ///< window
    PaddingConfig2d padding;                       ///< zero padding
    bool count_include_pad = true;                 ///< whether padded zeros count in the divisor
    bool ceil_mode = false;                        ///< round the output size up
    EMBER_MODULE(AvgPool2d, stride, kernel_size, padding, count_include_pad, ceil_mode)

    /// [batch, channels, h_in, w_in] → [batch, channels, h_out, w_out].
    template <Backend B>
    Tensor<B, 4> forward(const Tensor<B, 4>& input) const;
    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const {
        detail::conv::display_pool(c, *this, "count_include_pad", count_include_pad);
    }
};

/// Configuration of AvgPool2d.
struct AvgPool2dConfig {
    std::array<std::size_t, 2> kernel_size;              ///< window
    std::array<std::size_t, 2> strides{1, 1};            ///< step (Burn's name and default)
    PaddingConfig2d padding = PaddingConfig2d::Valid();  ///< zero padding
    bool count_include_pad = true;  ///< whether padded zeros count in the divisor
    bool ceil_mode = false;         ///< round the output size up
    EMBER_CONFIG(AvgPool2dConfig, kernel_size, strides, padding, count_include_pad, ceil_mode)

    /// Builds the layer; throws ArgumentError for sizes below 1, unsupported Same padding or
    /// padding over half the kernel.
    AvgPool2d init() const {
        detail::conv::check_pool_config<2>("AvgPool2dConfig::init", kernel_size, strides, {1, 1},
                                           padding);
        return {strides, kernel_size, padding, count_include_pad, ceil_mode};
    }
};

// ---- MaxPool1d ---------------------------------------------------------------------------------

/// 1-d max pooling over [batch, channels, length]; padding never wins the max.
struct MaxPool1d {
    std::size_t stride = 1;       ///< step
    std::size_t kernel_size = 1;  ///< window length
    PaddingConfig1d padding;      ///< padding (never selected)
    std::size_t dilation = 1;     ///< spacing between window taps
    bool ceil_mode = false;       ///< round the output length up
    EMBER_MODULE(MaxPool1d, stride, kernel_size, padding, dilation, ceil_mode)

    /// [batch, channels, length_in] → [batch, channels, length_out].
    template <Backend B>
    Tensor<B, 3> forward(const Tensor<B, 3>& input) const {
        const auto p = padding.resolve({kernel_size}, {dilation});
        return module::max_pool1d(input, kernel_size, stride, p[0], dilation, ceil_mode);
    }
    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const {
        detail::conv::display_pool(c, *this, "dilation", dilation);
    }
};

/// Configuration of MaxPool1d.
struct MaxPool1dConfig {
    std::size_t kernel_size;                             ///< window length
    std::size_t stride = 1;                              ///< step (Burn's default)
    PaddingConfig1d padding = PaddingConfig1d::Valid();  ///< padding (never selected)
    std::size_t dilation = 1;                            ///< spacing between window taps
    bool ceil_mode = false;                              ///< round the output length up
    EMBER_CONFIG(MaxPool1dConfig, kernel_size, stride, padding, dilation, ceil_mode)

    /// Builds the layer; throws ArgumentError for sizes below 1, unsupported Same padding or
    /// padding over half the dilated kernel.
    MaxPool1d init() const {
        detail::conv::check_pool_config<1>("MaxPool1dConfig::init", {kernel_size}, {stride},
                                           {dilation}, padding);
        return {stride, kernel_size, padding, dilation, ceil_mode};
    }
};

// ---- MaxPool2d ---------------------------------------------------------------------------------

/// 2-d max pooling over [batch, channels, height, width]; padding never wins the max.
struct MaxPool2d {
    std::array<std::size_t, 2> stride{1, 1};       ///< step
    std::array<std::size_t, 2> kernel_size{1, 1};  ///< window
    PaddingConfig2d padding;                       ///< padding (never selected)
    std::array<std::size_t, 2> dilation{1, 1};     ///< spacing between window taps
    bool ceil_mode = false;                        ///< round the output size up
    EMBER_MODULE(MaxPool2d, stride, kernel_size, padding, dilation, ceil_mode)

    /// [batch, channels, h_in, w_in] → [batch, channels, h_out, w_out].
    template <Backend B>
    Tensor<B, 4> forward(const Tensor<B, 4>& input) const;
    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const {
        detail::conv::display_pool(c, *this, "dilation", dilation);
    }
};

/// Configuration of MaxPool2d.
struct MaxPool2dConfig {
    std::array<std::size_t, 2> kernel_size;              ///< window
    std::array<std::size_t, 2> strides{1, 1};            ///< step (Burn's name and default)
    PaddingConfig2d padding = PaddingConfig2d::Valid();  ///< padding (never selected)
    std::array<std::size_t, 2> dilation{1, 1};           ///< spacing between window taps
    bool ceil_mode = false;                              ///< round the output size up
    EMBER_CONFIG(MaxPool2dConfig, kernel_size, strides, padding, dilation, ceil_mode)

    /// Builds the layer; throws ArgumentError for sizes below 1, unsupported Same padding or
    /// padding over half the dilated kernel.
    MaxPool2d init() const {
        detail::conv::check_pool_config<2>("MaxPool2dConfig::init", kernel_size, strides, dilation,
                                           padding);
        return {strides, kernel_size, padding, dilation, ceil_mode};
    }
};

// ---- adaptive average pooling ------------------------------------------------------------------

/// 1-d adaptive average pooling: [batch, channels, length] to a fixed output length, each
/// output averaging the input range [⌊i·L/out⌋, ⌈(i+1)·L/out⌉) as PyTorch does.
struct AdaptiveAvgPool1d {
    std::size_t output_size = 1;  ///< output length
    EMBER_MODULE(AdaptiveAvgPool1d, output_size)

    /// [batch, channels, length] → [batch, channels, output_size].
    template <Backend B>
    Tensor<B, 3> forward(const Tensor<B, 3>& input) const {
        return module::adaptive_avg_pool1d(input, output_size);
    }
    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const { c.add("output_size", output_size); }
};

/// Configuration of AdaptiveAvgPool1d.
struct AdaptiveAvgPool1dConfig {
    std::size_t output_size;  ///< output length
    EMBER_CONFIG(AdaptiveAvgPool1dConfig, output_size)

    /// Builds the layer; throws ArgumentError for an output size of 0.
    AdaptiveAvgPool1d init() const {
        EMBER_CHECK(output_size >= 1, Argument,
                    "AdaptiveAvgPool1dConfig::init: output_size must be >= 1, got ", output_size);
        return {output_size};
    }
};

/// 2-d adaptive average pooling: [batch, channels, height, width] to a fixed output size.
struct AdaptiveAvgPool2d {
    std::array<std::size_t, 2> output_size{1, 1};  ///< [h_out, w_out]
    EMBER_MODULE(AdaptiveAvgPool2d, output_size)

    /// [batch, channels, h, w] → [batch, channels, h_out, w_out].
    template <Backend B>
    Tensor<B, 4> forward(const Tensor<B, 4>& input) const;
    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const { c.add("output_size", output_size); }
};

/// Configuration of AdaptiveAvgPool2d.
struct AdaptiveAvgPool2dConfig {
    std::array<std::size_t, 2> output_size;  ///< [h_out, w_out]
    EMBER_CONFIG(AdaptiveAvgPool2dConfig, output_size)

    /// Builds the layer; throws ArgumentError for an output size of 0.
    AdaptiveAvgPool2d init() const {
        EMBER_CHECK(output_size[0] >= 1 && output_size[1] >= 1, Argument,
                    "AdaptiveAvgPool2dConfig::init: output_size must be >= 1 in both dims, got ",
                    detail::conv::array_str(output_size));
        return {output_size};
    }
};

// Defined out of their classes, so not inline: where an `extern template` declaration names an
// instance (include/ember/dispatch/nn.hpp for Dispatch), a file that calls it compiles the call
// only, not the body (compilers instantiate an inline function to consider inlining it, even
// one declared extern).

template <Backend B>
Tensor<B, 4> AvgPool2d::forward(const Tensor<B, 4>& input) const {
    return module::avg_pool2d(input, kernel_size, stride, padding.resolve(kernel_size, {1, 1}),
                              count_include_pad, ceil_mode);
}

template <Backend B>
Tensor<B, 4> MaxPool2d::forward(const Tensor<B, 4>& input) const {
    return module::max_pool2d(input, kernel_size, stride, padding.resolve(kernel_size, dilation),
                              dilation, ceil_mode);
}

template <Backend B>
Tensor<B, 4> AdaptiveAvgPool2d::forward(const Tensor<B, 4>& input) const {
    return module::adaptive_avg_pool2d(input, output_size);
}

}  // namespace ember::nn
