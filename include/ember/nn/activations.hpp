#pragma once
// Activation modules beyond Gelu and Relu (which live in dropout.hpp): HardSigmoid, LeakyRelu,
// PRelu and SwiGlu, as Burn's modules of the same names.
#include <cmath>

#include "../module/config.hpp"
#include "../module/module.hpp"
#include "../tensor/activation.hpp"
#include "initializer.hpp"
#include "linear.hpp"

namespace ember::nn {

/// clamp(alpha·x + beta, 0, 1). Burn's (and ONNX's) defaults are alpha 0.2, beta 0.5;
/// PyTorch's Hardsigmoid is alpha 1/6, beta 0.5.
struct HardSigmoid {
    double alpha = 0.2;  ///< slope
    double beta = 0.5;   ///< offset
    EMBER_MODULE(HardSigmoid, alpha, beta)

    /// Applies the activation elementwise.
    template <Backend B, std::size_t D>
    Tensor<B, D> forward(Tensor<B, D> input) const {
        return activation::hard_sigmoid(std::move(input), alpha, beta);
    }
    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const {
        c.add("alpha", alpha).add("beta", beta);
    }
};

/// Configuration of HardSigmoid.
struct HardSigmoidConfig {
    double alpha = 0.2;  ///< slope (PyTorch's Hardsigmoid: 1/6)
    double beta = 0.5;   ///< offset
    EMBER_CONFIG(HardSigmoidConfig, alpha, beta)

    /// Builds the module.
    HardSigmoid init() const { return HardSigmoid{alpha, beta}; }
};

/// x for x >= 0, negative_slope·x otherwise.
struct LeakyRelu {
    double negative_slope = 0.01;  ///< slope for negative inputs
    EMBER_MODULE(LeakyRelu, negative_slope)

    /// Applies the activation elementwise.
    template <Backend B, std::size_t D>
    Tensor<B, D> forward(Tensor<B, D> input) const;
    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const {
        c.add("negative_slope", negative_slope);
    }
};

/// Configuration of LeakyRelu (PyTorch's default slope).
struct LeakyReluConfig {
    double negative_slope = 0.01;  ///< slope for negative inputs
    EMBER_CONFIG(LeakyReluConfig, negative_slope)

    /// Builds the module.
    LeakyRelu init() const { return LeakyRelu{negative_slope}; }
};

/// x for x >= 0, alpha·x otherwise, with a learned alpha shared by all channels or one per
/// channel (dim 1 of the input). PyTorch's state_dict: weight → alpha.
template <Backend B>
struct PRelu {
    Param<Tensor<B, 1>> alpha;  ///< slopes [num_parameters]
    double alpha_value = 0.25;  ///< the slope alpha was initialised with
    EMBER_MODULE(PRelu, alpha, alpha_value)

    /// Applies the activation elementwise; with num_parameters > 1 the input must be [N, C, ...]
    /// with C == num_parameters.
    template <std::size_t D>
    Tensor<B, D> forward(const Tensor<B, D>& input) const {
        const std::size_t n = alpha.shape()[0];
        if (n != 1) {
            EMBER_CHECK(D >= 2 && input.dims()[D >= 2 ? 1 : 0] == n, Shape, "PRelu: input of ",
                        "shape ", input.shape().to_string(), " does not have ", n,
                        " channels at dim 1");
        }
        return activation::prelu(input, alpha.val());
    }
    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const {
        c.add("num_parameters", alpha.shape()[0]).add("alpha_value", alpha_value);
    }
};

/// Configuration of PRelu (PyTorch's defaults: one slope, 0.25).
struct PReluConfig {
    std::size_t num_parameters = 1;  ///< 1, or the number of channels
    double alpha = 0.25;             ///< initial slope
    EMBER_CONFIG(PReluConfig, num_parameters, alpha)

    /// Builds the module on `device`.
    template <Backend B>
    PRelu<B> init(const Device<B>& device = {}) const {
        EMBER_CHECK(num_parameters > 0, Argument,
                    "PReluConfig::init: num_parameters must be positive, got 0");
        return {Initializer::Constant(alpha).init<B, 1>(Shape{num_parameters}, device), alpha};
    }
};

/// The spelling of the layer table (Burn spells it PRelu).
template <Backend B>
using Prelu = PRelu<B>;
/// The spelling of the layer table.
using PreluConfig = PReluConfig;

/// The SwiGLU gated unit: silu(linear_inner(x)) · linear_outer(x) (Burn's SwiGlu).
template <Backend B>
struct SwiGlu {
    Linear<B> linear_inner;  ///< the gate's projection, passed through silu
    Linear<B> linear_outer;  ///< the value's projection
    EMBER_MODULE(SwiGlu, linear_inner, linear_outer)

    /// x [..., d_input] → [..., d_output].
    template <std::size_t D>
    Tensor<B, D> forward(const Tensor<B, D>& input) const {
        return activation::silu(linear_inner.forward(input)) * linear_outer.forward(input);
    }
};

/// Configuration of SwiGlu.
struct SwiGluConfig {
    std::size_t d_input;   ///< input features
    std::size_t d_output;  ///< output features
    bool bias = false;     ///< whether both linear layers have a bias (Burn's default: no)
    /// Initialiser of both layers; the default is PyTorch's Linear one (uniform ±1/√d_input).
    Initializer initializer = Initializer::KaimingUniform(1.0 / std::sqrt(3.0));
    EMBER_CONFIG(SwiGluConfig, d_input, d_output, bias, initializer)

    /// Builds the module on `device`.
    template <Backend B>
    SwiGlu<B> init(const Device<B>& device = {}) const {
        EMBER_CHECK(d_input > 0 && d_output > 0, Argument,
                    "SwiGluConfig::init: d_input and d_output must be positive, got ", d_input,
                    " and ", d_output);
        LinearConfig linear{d_input, d_output, bias, initializer};
        return {linear.init<B>(device), linear.init<B>(device)};
    }
};

// Defined out of their classes, so not inline: where an `extern template` declaration names an
// instance (include/ember/dispatch/nn.hpp for Dispatch), a file that calls it compiles the call
// only, not the body (compilers instantiate an inline function to consider inlining it, even
// one declared extern).

template <Backend B, std::size_t D>
Tensor<B, D> LeakyRelu::forward(Tensor<B, D> input) const {
    return activation::leaky_relu(std::move(input), negative_slope);
}

}  // namespace ember::nn
