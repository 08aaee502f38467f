#pragma once
// Linear: y = x·W + b with W stored [d_input, d_output] (Burn's layout; PyTorch stores Wᵀ).
#include <cmath>

#include "../module/config.hpp"
#include "../module/module.hpp"
#include "../tensor/module_ops.hpp"
#include "initializer.hpp"

namespace ember::nn {

/// A fully connected layer over the last dim.
template <Backend B>
struct Linear {
    Param<Tensor<B, 2>> weight;               ///< [d_input, d_output]
    std::optional<Param<Tensor<B, 1>>> bias;  ///< [d_output], when the config asks for one
    EMBER_MODULE(Linear, weight, bias)

    /// x [..., d_input] → [..., d_output].
    template <std::size_t D>
    Tensor<B, D> forward(const Tensor<B, D>& input) const;
    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const {
        auto s = weight.shape();
        c.add("d_input", s[0]).add("d_output", s[1]).add("bias", bias.has_value());
    }
};

/// Configuration of a Linear layer.
struct LinearConfig {
    std::size_t d_input;   ///< input features
    std::size_t d_output;  ///< output features
    bool bias = true;      ///< whether to add a bias
    /// Weight and bias initialiser; the default is PyTorch's (uniform ±1/√d_input).
    Initializer initializer = Initializer::KaimingUniform(1.0 / std::sqrt(3.0));
    EMBER_CONFIG(LinearConfig, d_input, d_output, bias, initializer)

    /// Builds the layer on `device` (parameters are drawn on first use).
    template <Backend B>
    Linear<B> init(const Device<B>& device = {}) const;
};

// Defined out of their classes, so not inline: where an `extern template` declaration names an
// instance (include/ember/dispatch/nn.hpp for Dispatch), a file that calls it compiles the call
// only, not the body (compilers instantiate an inline function to consider inlining it, even
// one declared extern).

template <Backend B>
template <std::size_t D>
Tensor<B, D> Linear<B>::forward(const Tensor<B, D>& input) const {
    if constexpr (D == 1) {
        return forward(input.template unsqueeze_dim<2>(0)).template squeeze<1>(0);
    } else if (const auto* q = weight.quantized()) {  // int8 weights: the integer kernel
        return quant::detail::linear(input, *q, bias ? std::optional(bias->val()) : std::nullopt);
    } else {
        return module::linear(input, weight.val(),
                              bias ? std::optional(bias->val()) : std::nullopt);
    }
}

template <Backend B>
Linear<B> LinearConfig::init(const Device<B>& device) const {
    EMBER_CHECK(d_input > 0 && d_output > 0, Argument,
                "LinearConfig::init: d_input and d_output must be positive, got ", d_input, " and ",
                d_output);
    Linear<B> out{initializer.init<B, 2>(Shape{d_input, d_output}, device, d_input, d_output),
                  std::nullopt};
    if (bias) out.bias = initializer.init<B, 1>(Shape{d_output}, device, d_input, d_output);
    return out;
}

}  // namespace ember::nn
