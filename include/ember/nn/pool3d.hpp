#pragma once
// 3-d pooling layers (AvgPool3d, MaxPool3d, AdaptiveAvgPool3d), in the style of pool.hpp's 1-d
// and 2-d ones: parameter-free modules over [batch, channels, depth, height, width], with Burn's
// defaults (stride 1, PaddingConfig3d::Valid()). Their ops are module::avg_pool3d, max_pool3d
// and adaptive_avg_pool3d (tensor/module_ops_composed.hpp), so they run on every backend.
#include <array>

#include "../tensor/module_ops_composed.hpp"
#include "pool.hpp"

namespace ember::nn {

// ---- AvgPool3d ---------------------------------------------------------------------------------

/// 3-d average pooling over [batch, channels, depth, height, width].
struct AvgPool3d {
    std::array<std::size_t, 3> stride{1, 1, 1};       ///< step
    std::array<std::size_t, 3> kernel_size{1, 1, 1};  ///< window
    PaddingConfig3d padding;                          ///< zero padding
    bool count_include_pad = true;                    ///< whether padded zeros count in the divisor
    bool ceil_mode = false;                           ///< round the output size up
    EMBER_MODULE(AvgPool3d, stride, kernel_size, padding, count_include_pad, ceil_mode)

    /// [batch, channels, d_in, h_in, w_in] → [batch, channels, d_out, h_out, w_out].
    template <Backend B>
    Tensor<B, 5> forward(const Tensor<B, 5>& input) const {
        return module::avg_pool3d(input, kernel_size, stride,
                                  padding.resolve(kernel_size, {1, 1, 1}), count_include_pad,
                                  ceil_mode);
    }
    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const {
        detail::conv::display_pool(c, *this, "count_include_pad", count_include_pad);
    }
};

/// Configuration of AvgPool3d.
struct AvgPool3dConfig {
    std::array<std::size_t, 3> kernel_size;              ///< window
    std::array<std::size_t, 3> strides{1, 1, 1};         ///< step (Burn's name and default)
    PaddingConfig3d padding = PaddingConfig3d::Valid();  ///< zero padding
    bool count_include_pad = true;  ///< whether padded zeros count in the divisor
    bool ceil_mode = false;         ///< round the output size up
    EMBER_CONFIG(AvgPool3dConfig, kernel_size, strides, padding, count_include_pad, ceil_mode)

    /// Builds the layer; throws ArgumentError for sizes below 1, unsupported Same padding or
    /// padding over half the kernel.
    AvgPool3d init() const {
        detail::conv::check_pool_config<3>("AvgPool3dConfig::init", kernel_size, strides, {1, 1, 1},
                                           padding);
        return {strides, kernel_size, padding, count_include_pad, ceil_mode};
    }
};

// ---- MaxPool3d ---------------------------------------------------------------------------------

/// 3-d max pooling over [batch, channels, depth, height, width]; padding never wins the max.
struct MaxPool3d {
    std::array<std::size_t, 3> stride{1, 1, 1};       ///< step
    std::array<std::size_t, 3> kernel_size{1, 1, 1};  ///< window
    PaddingConfig3d padding;                          ///< padding (never selected)
    std::array<std::size_t, 3> dilation{1, 1, 1};     ///< spacing between window taps
    bool ceil_mode = false;                           ///< round the output size up
    EMBER_MODULE(MaxPool3d, stride, kernel_size, padding, dilation, ceil_mode)

    /// [batch, channels, d_in, h_in, w_in] → [batch, channels, d_out, h_out, w_out].
    template <Backend B>
    Tensor<B, 5> forward(const Tensor<B, 5>& input) const {
        return module::max_pool3d(input, kernel_size, stride,
                                  padding.resolve(kernel_size, dilation), dilation, ceil_mode);
    }
    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const {
        detail::conv::display_pool(c, *this, "dilation", dilation);
    }
};

/// Configuration of MaxPool3d.
struct MaxPool3dConfig {
    std::array<std::size_t, 3> kernel_size;              ///< window
    std::array<std::size_t, 3> strides{1, 1, 1};         ///< step (Burn's name and default)
    PaddingConfig3d padding = PaddingConfig3d::Valid();  ///< padding (never selected)
    std::array<std::size_t, 3> dilation{1, 1, 1};        ///< spacing between window taps
    bool ceil_mode = false;                              ///< round the output size up
    EMBER_CONFIG(MaxPool3dConfig, kernel_size, strides, padding, dilation, ceil_mode)

    /// Builds the layer; throws ArgumentError for sizes below 1, unsupported Same padding or
    /// padding over half the dilated kernel.
    MaxPool3d init() const {
        detail::conv::check_pool_config<3>("MaxPool3dConfig::init", kernel_size, strides, dilation,
                                           padding);
        return {strides, kernel_size, padding, dilation, ceil_mode};
    }
};

// ---- AdaptiveAvgPool3d -------------------------------------------------------------------------

/// Adaptive 3-d average pooling to a fixed output size.
struct AdaptiveAvgPool3d {
    std::array<std::size_t, 3> output_size{1, 1, 1};  ///< [depth, height, width] of the output
    EMBER_MODULE(AdaptiveAvgPool3d, output_size)

    /// [batch, channels, d, h, w] → [batch, channels, output_size...].
    template <Backend B>
    Tensor<B, 5> forward(const Tensor<B, 5>& input) const {
        return module::adaptive_avg_pool3d(input, output_size);
    }
    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const { c.add("output_size", output_size); }
};

/// Configuration of AdaptiveAvgPool3d.
struct AdaptiveAvgPool3dConfig {
    std::array<std::size_t, 3> output_size;  ///< [depth, height, width] of the output
    EMBER_CONFIG(AdaptiveAvgPool3dConfig, output_size)

    /// Builds the layer; throws ArgumentError for a zero output size.
    AdaptiveAvgPool3d init() const {
        for (auto s : output_size)
            EMBER_CHECK(s >= 1, Argument, "AdaptiveAvgPool3dConfig::init: output_size ",
                        detail::conv::array_str(output_size), " must be positive");
        return {output_size};
    }
};

}  // namespace ember::nn
