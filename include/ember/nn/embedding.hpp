#pragma once
// Embedding: a lookup table of learned vectors, indexed by integer ids.
#include "../module/config.hpp"
#include "../module/module.hpp"
#include "../tensor/module_ops.hpp"
#include "initializer.hpp"

namespace ember::nn {

/// Maps each id of [batch, seq] to a row of `weight`, giving [batch, seq, d_model].
/// PyTorch's state_dict: weight → weight (same [n_embedding, d_model] layout).
template <Backend B>
struct Embedding {
    Param<Tensor<B, 2>> weight;  ///< [n_embedding, d_model]
    EMBER_MODULE(Embedding, weight)

    /// Looks up `input` [batch, seq] of ids in [0, n_embedding). An id outside that range throws
    /// IndexError (from the backend's index check, which names the id and the table size).
    Tensor<B, 3> forward(const Tensor<B, 2, Int>& input) const;
    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const {
        auto s = weight.shape();
        c.add("n_embedding", s[0]).add("d_model", s[1]);
    }
};

/// Configuration of Embedding.
struct EmbeddingConfig {
    std::size_t n_embedding;  ///< number of ids
    std::size_t d_model;      ///< size of each vector
    /// Weight initialiser; the default is PyTorch's (standard normal).
    Initializer initializer = Initializer::Normal(0.0, 1.0);
    EMBER_CONFIG(EmbeddingConfig, n_embedding, d_model, initializer)

    /// Builds the layer on `device` (the table is drawn on first use).
    template <Backend B>
    Embedding<B> init(const Device<B>& device = {}) const;
};

// Defined out of their classes, so not inline: where an `extern template` declaration names an
// instance (include/ember/dispatch/nn.hpp for Dispatch), a file that calls it compiles the call
// only, not the body (compilers instantiate an inline function to consider inlining it, even
// one declared extern).

template <Backend B>
Tensor<B, 3> Embedding<B>::forward(const Tensor<B, 2, Int>& input) const {
    return module::embedding(weight.val(), input);
}

template <Backend B>
Embedding<B> EmbeddingConfig::init(const Device<B>& device) const {
    EMBER_CHECK(n_embedding > 0 && d_model > 0, Argument,
                "EmbeddingConfig::init: n_embedding and d_model must be positive, got ",
                n_embedding, " and ", d_model);
    return {initializer.init<B, 2>(Shape{n_embedding, d_model}, device, n_embedding, d_model)};
}

}  // namespace ember::nn
