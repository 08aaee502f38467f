#pragma once
// Activation modules over the functions of ember::activation (tensor/activation.hpp), with
// Burn's names and PyTorch's parameters and defaults. Rrelu is random on autodiff backends
// (training) and uses its mean slope elsewhere (inference), as Dropout does.
#include "../module/config.hpp"
#include "../module/module.hpp"
#include "../tensor/activation.hpp"

namespace ember::nn {
/// 1 / (1 + e^-x) (PyTorch's Sigmoid).
struct Sigmoid {
    EMBER_MODULE(Sigmoid)
    /// Applies the activation elementwise.
    template <Backend B, std::size_t D>
    Tensor<B, D> forward(Tensor<B, D> input) const;
};
/// tanh(x).
struct Tanh {
    EMBER_MODULE(Tanh)
    /// Applies the activation elementwise.
    template <Backend B, std::size_t D>
    Tensor<B, D> forward(Tensor<B, D> input) const;
};
/// x · sigmoid(x) (PyTorch's SiLU; Burn's and ONNX's Swish).
struct SiLU {
    EMBER_MODULE(SiLU)
    /// Applies the activation elementwise.
    template <Backend B, std::size_t D>
    Tensor<B, D> forward(Tensor<B, D> input) const;
};
/// scale · elu(x, alpha) with the self-normalising constants (PyTorch's SELU).
struct Selu {
    EMBER_MODULE(Selu)
    /// Applies the activation elementwise.
    template <Backend B, std::size_t D>
    Tensor<B, D> forward(Tensor<B, D> input) const {
        return activation::selu(std::move(input));
    }
};
/// x / (1 + |x|).
struct Softsign {
    EMBER_MODULE(Softsign)
    /// Applies the activation elementwise.
    template <Backend B, std::size_t D>
    Tensor<B, D> forward(Tensor<B, D> input) const {
        return activation::softsign(std::move(input));
    }
};
/// x · tanh(softplus(x)).
struct Mish {
    EMBER_MODULE(Mish)
    /// Applies the activation elementwise.
    template <Backend B, std::size_t D>
    Tensor<B, D> forward(Tensor<B, D> input) const {
        return activation::mish(std::move(input));
    }
};
/// x · relu6(x + 3) / 6 (PyTorch's Hardswish).
struct HardSwish {
    EMBER_MODULE(HardSwish)
    /// Applies the activation elementwise.
    template <Backend B, std::size_t D>
    Tensor<B, D> forward(Tensor<B, D> input) const {
        return activation::hard_swish(std::move(input));
    }
};
/// clamp(x, 0, 6).
struct Relu6 {
    EMBER_MODULE(Relu6)
    /// Applies the activation elementwise.
    template <Backend B, std::size_t D>
    Tensor<B, D> forward(Tensor<B, D> input) const {
        return activation::relu6(std::move(input));
    }
};
/// log(sigmoid(x)), stable for large |x|.
struct LogSigmoid {
    EMBER_MODULE(LogSigmoid)
    /// Applies the activation elementwise.
    template <Backend B, std::size_t D>
    Tensor<B, D> forward(Tensor<B, D> input) const {
        return activation::log_sigmoid(std::move(input));
    }
};
/// x - tanh(x).
struct Tanhshrink {
    EMBER_MODULE(Tanhshrink)
    /// Applies the activation elementwise.
    template <Backend B, std::size_t D>
    Tensor<B, D> forward(Tensor<B, D> input) const {
        return activation::tanhshrink(std::move(input));
    }
};
/// gelu with the tanh approximation (PyTorch's GELU(approximate="tanh")).
struct GeluTanh {
    EMBER_MODULE(GeluTanh)
    /// Applies the activation elementwise.
    template <Backend B, std::size_t D>
    Tensor<B, D> forward(Tensor<B, D> input) const {
        return activation::gelu_tanh(std::move(input));
    }
};
/// Burn's name for SiLU.
using Swish = SiLU;
/// x for x > 0, alpha·(e^x - 1) otherwise (PyTorch's ELU).
struct Elu {
    double alpha = 1.0;  ///< scale of the negative branch
    EMBER_MODULE(Elu, alpha)

    /// Applies the activation.
    template <Backend B, std::size_t D>
    Tensor<B, D> forward(Tensor<B, D> input) const {
        return activation::elu(std::move(input), alpha);
    }
    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const { c.add("alpha", alpha); }
};

/// Configuration of Elu (PyTorch's defaults).
struct EluConfig {
    double alpha = 1.0;  ///< scale of the negative branch
    EMBER_CONFIG(EluConfig, alpha)
    /// Builds the module.
    Elu init() const { return Elu{alpha}; }
};
/// max(0, x) + min(0, alpha·(e^(x/alpha) - 1)) (PyTorch's CELU).
struct Celu {
    double alpha = 1.0;  ///< scale of the negative branch; not 0
    EMBER_MODULE(Celu, alpha)

    /// Applies the activation.
    template <Backend B, std::size_t D>
    Tensor<B, D> forward(Tensor<B, D> input) const {
        return activation::celu(std::move(input), alpha);
    }
    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const { c.add("alpha", alpha); }
};

/// Configuration of Celu (PyTorch's defaults).
struct CeluConfig {
    double alpha = 1.0;  ///< scale of the negative branch; not 0
    EMBER_CONFIG(CeluConfig, alpha)
    /// Builds the module; ArgumentError when alpha is 0 (as PyTorch).
    Celu init() const {
        EMBER_CHECK(alpha != 0.0, Argument, "CeluConfig::init: alpha cannot be 0");
        return Celu{alpha};
    }
};
/// log(1 + e^(beta·x)) / beta, x where beta·x > threshold (PyTorch's Softplus).
struct Softplus {
    double beta = 1.0;        ///< sharpness
    double threshold = 20.0;  ///< beta·x above which the result is x
    EMBER_MODULE(Softplus, beta, threshold)

    /// Applies the activation.
    template <Backend B, std::size_t D>
    Tensor<B, D> forward(Tensor<B, D> input) const {
        return activation::softplus(std::move(input), beta, threshold);
    }
    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const {
        c.add("beta", beta).add("threshold", threshold);
    }
};

/// Configuration of Softplus (PyTorch's defaults).
struct SoftplusConfig {
    double beta = 1.0;        ///< sharpness
    double threshold = 20.0;  ///< beta·x above which the result is x
    EMBER_CONFIG(SoftplusConfig, beta, threshold)
    /// Builds the module; ArgumentError when beta is 0 (a division by zero).
    Softplus init() const {
        EMBER_CHECK(beta != 0.0, Argument, "SoftplusConfig::init: beta cannot be 0");
        return Softplus{beta, threshold};
    }
};
/// clamp(x, min, max) (PyTorch's Hardtanh).
struct HardTanh {
    double min = -1.0;  ///< lower bound
    double max = 1.0;   ///< upper bound
    EMBER_MODULE(HardTanh, min, max)

    /// Applies the activation.
    template <Backend B, std::size_t D>
    Tensor<B, D> forward(Tensor<B, D> input) const {
        return activation::hard_tanh(std::move(input), min, max);
    }
    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const { c.add("min", min).add("max", max); }
};

/// Configuration of HardTanh (PyTorch's defaults).
struct HardTanhConfig {
    double min = -1.0;  ///< lower bound
    double max = 1.0;   ///< upper bound
    EMBER_CONFIG(HardTanhConfig, min, max)
    /// Builds the module; ArgumentError when min > max (PyTorch's Hardtanh asserts it).
    HardTanh init() const {
        EMBER_CHECK(min <= max, Argument, "HardTanhConfig::init: min ", min,
                    " is greater than max ", max);
        return HardTanh{min, max};
    }
};
/// The gated linear unit along `dim`: a · sigmoid(b) of x's two halves a, b.
struct Glu {
    long dim = -1;  ///< the dim split in two halves (negative: from the end)
    EMBER_MODULE(Glu, dim)

    /// Applies the activation.
    template <Backend B, std::size_t D>
    Tensor<B, D> forward(Tensor<B, D> input) const {
        return activation::glu(std::move(input), dim);
    }
    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const { c.add("dim", dim); }
};

/// Configuration of Glu (PyTorch's defaults).
struct GluConfig {
    long dim = -1;  ///< the dim split in two halves (negative: from the end)
    EMBER_CONFIG(GluConfig, dim)
    /// Builds the module.
    Glu init() const { return Glu{dim}; }
};
/// x where |x| > lambda, else 0 (PyTorch's Hardshrink).
struct HardShrink {
    double lambda = 0.5;  ///< half-width of the zeroed band
    EMBER_MODULE(HardShrink, lambda)

    /// Applies the activation.
    template <Backend B, std::size_t D>
    Tensor<B, D> forward(Tensor<B, D> input) const {
        return activation::hard_shrink(std::move(input), lambda);
    }
    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const { c.add("lambda", lambda); }
};

/// Configuration of HardShrink (PyTorch's defaults).
struct HardShrinkConfig {
    double lambda = 0.5;  ///< half-width of the zeroed band
    EMBER_CONFIG(HardShrinkConfig, lambda)
    /// Builds the module.
    HardShrink init() const { return HardShrink{lambda}; }
};
/// x ∓ lambda outside [-lambda, lambda], else 0 (PyTorch's Softshrink).
struct SoftShrink {
    double lambda = 0.5;  ///< half-width of the zeroed band; >= 0
    EMBER_MODULE(SoftShrink, lambda)

    /// Applies the activation.
    template <Backend B, std::size_t D>
    Tensor<B, D> forward(Tensor<B, D> input) const {
        return activation::soft_shrink(std::move(input), lambda);
    }
    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const { c.add("lambda", lambda); }
};

/// Configuration of SoftShrink (PyTorch's defaults).
struct SoftShrinkConfig {
    double lambda = 0.5;  ///< half-width of the zeroed band; >= 0
    EMBER_CONFIG(SoftShrinkConfig, lambda)
    /// Builds the module; ArgumentError when lambda < 0 (as PyTorch).
    SoftShrink init() const {
        EMBER_CHECK(lambda >= 0.0, Argument, "SoftShrinkConfig::init: lambda must be >= 0, got ",
                    lambda);
        return SoftShrink{lambda};
    }
};
/// x - bias where x > lambda, x + bias where x < -lambda, else 0 (Burn's Shrink).
struct Shrink {
    double lambda = 0.5;  ///< half-width of the zeroed band
    double bias = 0.0;    ///< shift of the kept values toward 0
    EMBER_MODULE(Shrink, lambda, bias)

    /// Applies the activation.
    template <Backend B, std::size_t D>
    Tensor<B, D> forward(Tensor<B, D> input) const {
        return activation::shrink(std::move(input), lambda, bias);
    }
    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const {
        c.add("lambda", lambda).add("bias", bias);
    }
};

/// Configuration of Shrink (PyTorch's defaults).
struct ShrinkConfig {
    double lambda = 0.5;  ///< half-width of the zeroed band
    double bias = 0.0;    ///< shift of the kept values toward 0
    EMBER_CONFIG(ShrinkConfig, lambda, bias)
    /// Builds the module.
    Shrink init() const { return Shrink{lambda, bias}; }
};
/// x where x > alpha, else 0 (Burn's ThresholdedRelu).
struct ThresholdedRelu {
    double alpha = 1.0;  ///< threshold
    EMBER_MODULE(ThresholdedRelu, alpha)

    /// Applies the activation.
    template <Backend B, std::size_t D>
    Tensor<B, D> forward(Tensor<B, D> input) const {
        return activation::thresholded_relu(std::move(input), alpha);
    }
    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const { c.add("alpha", alpha); }
};

/// Configuration of ThresholdedRelu (PyTorch's defaults).
struct ThresholdedReluConfig {
    double alpha = 1.0;  ///< threshold
    EMBER_CONFIG(ThresholdedReluConfig, alpha)
    /// Builds the module.
    ThresholdedRelu init() const { return ThresholdedRelu{alpha}; }
};
/// x where x > threshold, else value (PyTorch's Threshold).
struct Threshold {
    double threshold = 0.0;  ///< threshold
    double value = 0.0;      ///< replacement at or below it
    EMBER_MODULE(Threshold, threshold, value)

    /// Applies the activation.
    template <Backend B, std::size_t D>
    Tensor<B, D> forward(Tensor<B, D> input) const {
        return activation::threshold(std::move(input), threshold, value);
    }
    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const {
        c.add("threshold", threshold).add("value", value);
    }
};

/// Configuration of Threshold (PyTorch's defaults).
struct ThresholdConfig {
    double threshold = 0.0;  ///< threshold
    double value = 0.0;      ///< replacement at or below it
    EMBER_CONFIG(ThresholdConfig, threshold, value)
    /// Builds the module.
    Threshold init() const { return Threshold{threshold, value}; }
};
/// Randomised leaky relu (PyTorch's RReLU): on autodiff backends (training) each negative
/// element gets a slope drawn from [lower, upper); elsewhere (inference) the mean slope.
struct Rrelu {
    double lower = 1.0 / 8.0;  ///< least slope
    double upper = 1.0 / 3.0;  ///< greatest slope
    EMBER_MODULE(Rrelu, lower, upper)

    /// Applies the activation (random slopes only in training).
    template <Backend B, std::size_t D>
    Tensor<B, D> forward(Tensor<B, D> input) const {
        const bool training = ad_enabled<B>(input.device());
        return activation::rrelu(std::move(input), lower, upper, training);
    }
    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const {
        c.add("lower", lower).add("upper", upper);
    }
};

/// Configuration of Rrelu (PyTorch's defaults 1/8 and 1/3).
struct RreluConfig {
    double lower = 1.0 / 8.0;  ///< least slope
    double upper = 1.0 / 3.0;  ///< greatest slope
    EMBER_CONFIG(RreluConfig, lower, upper)

    /// Builds the module; ArgumentError when lower > upper (as PyTorch).
    Rrelu init() const {
        EMBER_CHECK(lower <= upper, Argument, "RreluConfig::init: lower bound ", lower,
                    " is greater than upper bound ", upper);
        return Rrelu{lower, upper};
    }
};

// Defined out of their classes, so not inline: where an `extern template` declaration names an
// instance (include/ember/dispatch/nn.hpp for Dispatch), a file that calls it compiles the call
// only, not the body (compilers instantiate an inline function to consider inlining it, even
// one declared extern).

template <Backend B, std::size_t D>
Tensor<B, D> Sigmoid::forward(Tensor<B, D> input) const {
    return activation::sigmoid(std::move(input));
}

template <Backend B, std::size_t D>
Tensor<B, D> Tanh::forward(Tensor<B, D> input) const {
    return activation::tanh(std::move(input));
}

template <Backend B, std::size_t D>
Tensor<B, D> SiLU::forward(Tensor<B, D> input) const {
    return activation::silu(std::move(input));
}

}  // namespace ember::nn
