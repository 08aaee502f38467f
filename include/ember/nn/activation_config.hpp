#pragma once
// Burn's `Activation` enum module and its `ActivationConfig`: one field that holds any of the
// activation modules, for layers whose activation is chosen by configuration.
#include <utility>
#include <variant>

#include "activation_modules.hpp"
#include "activations.hpp"
#include "dropout.hpp"

namespace ember::nn {

/// Any activation module (Burn's `Activation` enum); forward runs the active one.
template <Backend B>
struct Activation {
    /// The active activation module.
    using Variant = std::variant<Gelu, GeluTanh, Relu, LeakyRelu, PRelu<B>, SwiGlu<B>, HardSigmoid,
                                 Sigmoid, Tanh, SiLU, Elu, Celu, Selu, Softplus, Softsign, Mish,
                                 HardSwish, HardTanh, Relu6, LogSigmoid, Glu, HardShrink,
                                 SoftShrink, Shrink, ThresholdedRelu, Threshold, Tanhshrink, Rrelu>;
    Variant inner;  ///< the activation in use (recorded at this module's own path, as Burn's)
    EMBER_MODULE(Activation, inner)

    /// Applies the active activation.
    template <std::size_t D>
    Tensor<B, D> forward(const Tensor<B, D>& input) const {
        return std::visit([&](const auto& m) { return m.forward(input); }, inner);
    }
};

/// Configuration of Activation (Burn's `ActivationConfig`): a parameter-free activation module
/// (which is its own configuration) or the config of one with parameters.
struct ActivationConfig {
    /// Every activation ember builds.
    using Variant =
        std::variant<Gelu, GeluTanh, Relu, LeakyReluConfig, PReluConfig, SwiGluConfig,
                     HardSigmoidConfig, Sigmoid, Tanh, SiLU, EluConfig, CeluConfig, Selu,
                     SoftplusConfig, Softsign, Mish, HardSwish, HardTanhConfig, Relu6, LogSigmoid,
                     GluConfig, HardShrinkConfig, SoftShrinkConfig, ShrinkConfig,
                     ThresholdedReluConfig, ThresholdConfig, Tanhshrink, RreluConfig>;
    Variant kind = Relu{};  ///< the chosen activation (Burn's default is Relu)

    /// Builds the activation on `device` (only PRelu and SwiGlu have parameters to place);
    /// throws what the chosen config's init throws.
    template <Backend B>
    Activation<B> init(const Device<B>& device = {}) const {
        return std::visit(
            [&](const auto& c) -> Activation<B> {
                using C = std::decay_t<decltype(c)>;
                if constexpr (std::is_same_v<C, PReluConfig> || std::is_same_v<C, SwiGluConfig>)
                    return {c.template init<B>(device)};
                else if constexpr (requires { c.init(); })
                    return {c.init()};
                else
                    return {c};
            },
            kind);
    }
};

}  // namespace ember::nn
