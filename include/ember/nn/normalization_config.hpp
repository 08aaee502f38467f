#pragma once
// Burn's `Normalization` enum module and its `NormalizationConfig`: one field that holds any of
// the normalisation layers, for models whose norm is chosen by configuration (as Activation
// does for activations).
#include <utility>
#include <variant>

#include "norm.hpp"

namespace ember::nn {

/// Any normalisation layer (Burn's `Normalization` enum); forward runs the active one.
template <Backend B>
struct Normalization {
    /// The active layer.
    using Variant =
        std::variant<BatchNorm<B>, GroupNorm<B>, InstanceNorm<B>, LayerNorm<B>, RmsNorm<B>>;
    Variant inner;  ///< the layer in use (recorded at this module's own path, as Burn's)
    EMBER_MODULE(Normalization, inner)

    /// Normalises `input` with the active layer: [N, C, ...] for BatchNorm (rank ≥ 2),
    /// GroupNorm (rank ≥ 2) and InstanceNorm (rank ≥ 3), [..., d_model] for LayerNorm and
    /// RmsNorm. A rank the active layer cannot take throws DimError (the variant is chosen at
    /// run time, so the layers' compile-time rank checks cannot apply).
    template <std::size_t D>
    Tensor<B, D> forward(const Tensor<B, D>& input) const {
        return std::visit(
            [&](const auto& m) -> Tensor<B, D> {
                using M = std::decay_t<decltype(m)>;
                constexpr std::size_t min_rank =
                    std::is_same_v<M, InstanceNorm<B>>                                   ? 3
                    : std::is_same_v<M, BatchNorm<B>> || std::is_same_v<M, GroupNorm<B>> ? 2
                                                                                         : 1;
                if constexpr (D >= min_rank) {
                    return m.forward(input);
                } else {
                    EMBER_FAIL(Dim, "Normalization: ", layer_name(), " needs an input of rank ",
                               min_rank, " or more, got shape ", input.shape().to_string());
                }
            },
            inner);
    }
    /// The features it normalises: channels C (Batch, Group, Instance) or d_model (Layer, Rms).
    std::size_t num_features() const {
        return std::visit(
            [](const auto& m) -> std::size_t {
                using M = std::decay_t<decltype(m)>;
                if constexpr (std::is_same_v<M, GroupNorm<B>> || std::is_same_v<M, InstanceNorm<B>>)
                    return m.num_channels;
                else
                    return m.gamma.shape()[0];
            },
            inner);
    }
    /// "BatchNorm", "GroupNorm", "InstanceNorm", "LayerNorm" or "RmsNorm".
    const char* layer_name() const {
        constexpr const char* names[] = {"BatchNorm", "GroupNorm", "InstanceNorm", "LayerNorm",
                                         "RmsNorm"};
        return names[inner.index()];
    }
};

/// Configuration of Normalization (Burn's `NormalizationConfig`): the config of one of the
/// normalisation layers.
struct NormalizationConfig {
    /// Every normalisation layer ember builds.
    using Variant = std::variant<BatchNormConfig, GroupNormConfig, InstanceNormConfig,
                                 LayerNormConfig, RmsNormConfig>;
    Variant kind;  ///< the chosen layer's config

    /// Builds the layer on `device`; throws what the chosen config's init throws.
    template <Backend B>
    Normalization<B> init(const Device<B>& device = {}) const {
        return std::visit(
            [&](const auto& c) -> Normalization<B> { return {c.template init<B>(device)}; }, kind);
    }
    /// The features the layer normalises (num_features, num_channels or d_model).
    std::size_t num_features() const {
        return std::visit(
            [](const auto& c) -> std::size_t {
                using C = std::decay_t<decltype(c)>;
                if constexpr (std::is_same_v<C, BatchNormConfig>)
                    return c.num_features;
                else if constexpr (std::is_same_v<C, GroupNormConfig> ||
                                   std::is_same_v<C, InstanceNormConfig>)
                    return c.num_channels;
                else
                    return c.d_model;
            },
            kind);
    }
    /// This config with the feature count set to `n` (Burn's with_num_features: a model
    /// chooses the norm's kind, the layer it sits in knows the size). GroupNorm's groups stay.
    NormalizationConfig with_num_features(std::size_t n) const {
        NormalizationConfig out = *this;
        std::visit(
            [n](auto& c) {
                using C = std::decay_t<decltype(c)>;
                if constexpr (std::is_same_v<C, BatchNormConfig>)
                    c.num_features = n;
                else if constexpr (std::is_same_v<C, GroupNormConfig> ||
                                   std::is_same_v<C, InstanceNormConfig>)
                    c.num_channels = n;
                else
                    c.d_model = n;
            },
            out.kind);
        return out;
    }
};

}  // namespace ember::nn
