#pragma once
// Dropout, and the parameter-free activation modules of the seed (Gelu, Relu).
#include "../module/config.hpp"
#include "../module/module.hpp"
#include "../tensor/activation.hpp"

namespace ember::nn {

/// Zeroes each element with probability `prob` and scales the rest by 1/(1-prob), on autodiff
/// backends only (training); on any other backend (a `valid()` model: inference) it is the
/// identity, as in Burn.
struct Dropout {
    double prob = 0.5;  ///< probability of zeroing an element
    EMBER_MODULE(Dropout, prob)

    /// Applies dropout (training) or passes the input through (inference).
    template <Backend B, std::size_t D>
    Tensor<B, D> forward(Tensor<B, D> input) const;
    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const { c.add("prob", prob); }
};

/// Configuration of Dropout.
struct DropoutConfig {
    double prob = 0.5;  ///< probability of zeroing an element
    EMBER_CONFIG(DropoutConfig, prob)

    /// Builds the module; throws ArgumentError unless 0 <= prob <= 1.
    Dropout init() const {
        EMBER_CHECK(prob >= 0.0 && prob <= 1.0, Argument,
                    "DropoutConfig::init: prob must be in [0, 1], got ", prob);
        return Dropout{prob};
    }
};

/// GELU (exact, erf-based) as a module.
struct Gelu {
    EMBER_MODULE(Gelu)
    /// gelu(input).
    template <Backend B, std::size_t D>
    Tensor<B, D> forward(Tensor<B, D> input) const;
};

/// ReLU as a module.
struct Relu {
    EMBER_MODULE(Relu)
    /// max(input, 0).
    template <Backend B, std::size_t D>
    Tensor<B, D> forward(Tensor<B, D> input) const;
};

// Defined out of their classes, so not inline: where an `extern template` declaration names an
// instance (include/ember/dispatch/nn.hpp for Dispatch), a file that calls it compiles the call
// only, not the body (compilers instantiate an inline function to consider inlining it, even
// one declared extern).

template <Backend B, std::size_t D>
Tensor<B, D> Dropout::forward(Tensor<B, D> input) const {
    if constexpr (!AutodiffBackend<B>) {
        return input;
    } else {
        if (prob == 0.0 || !ad_enabled<B>(input.device())) return input;
        if (prob >= 1.0) return input.zeros_like();
        auto keep = Tensor<B, D>::random(input.shape(), Distribution::Bernoulli(1.0 - prob),
                                         input.device());
        return input * keep * (1.0 / (1.0 - prob));
    }
}

template <Backend B, std::size_t D>
Tensor<B, D> Gelu::forward(Tensor<B, D> input) const {
    return activation::gelu(std::move(input));
}

template <Backend B, std::size_t D>
Tensor<B, D> Relu::forward(Tensor<B, D> input) const {
    return activation::relu(std::move(input));
}

}  // namespace ember::nn
