#pragma once
// A transformer text classifier: token and learned position embeddings, a pre-norm
// TransformerEncoder attending to the real tokens only (padding masked), a mean over the real
// tokens' outputs, and a linear layer giving one score per category. It provides the two
// `step` overloads the Learner calls.
#include <ember/ember.hpp>
#include <ember/nn.hpp>
#include <ember/train/output.hpp>

#include "data.hpp"

namespace text_classification {

using ember::Backend;
using ember::Tensor;

/// The classifier.
template <Backend B>
struct TextClassifier {
    ember::nn::Embedding<B> embedding_token;       ///< [vocab + 1 (pad), d_model]
    ember::nn::Embedding<B> embedding_pos;         ///< [max_seq_length, d_model]
    ember::nn::TransformerEncoder<B> transformer;  ///< pre-norm layers
    ember::nn::LayerNorm<B> norm;                  ///< pre-norm stacks end unnormalised
    ember::nn::Linear<B> output;                   ///< [d_model, n_classes]
    EMBER_MODULE(TextClassifier, embedding_token, embedding_pos, transformer, norm, output)

    /// Category scores [N, C] of tokens [N, S] with their padding mask [N, S].
    Tensor<B, 2> forward(const Tensor<B, 2, ember::Int>& tokens,
                         const Tensor<B, 2, ember::Bool>& mask_pad) const {
        const auto [n, s] = tokens.dims();
        const long d = long(transformer.d_model);
        auto positions = Tensor<B, 1, ember::Int>::arange(0, std::int64_t(s), tokens.device())
                             .template reshape<2>({1, long(s)});
        // [N, S, d] + [1, S, d]: every text gets the same position vectors.
        auto x = embedding_token.forward(tokens) + embedding_pos.forward(positions);
        x = transformer.forward(ember::nn::TransformerEncoderInput<B>(x).mask_pad(mask_pad));
        x = norm.forward(x);

        // Mean over the real tokens only: padding would otherwise dilute short texts.
        auto keep = mask_pad.not_().float_().template unsqueeze_dim<3>(2);     // [N, S, 1]
        auto pooled = (x * keep).sum_dim(1) / keep.sum_dim(1).clamp_min(1.0);  // [N, 1, d]
        return output.forward(pooled.template reshape<2>({long(n), d}));
    }

    /// Cross-entropy loss and scores on `batch`, as the metrics read them.
    ember::train::ClassificationOutput<B> classify(const TextBatch<B>& batch) const {
        auto scores = forward(batch.tokens, batch.mask_pad);
        auto loss =
            ember::nn::loss::CrossEntropyLossConfig{}.init<B>().forward(scores, batch.targets);
        return {std::move(loss), std::move(scores), batch.targets};
    }

    /// The Learner's training step: loss, scores and the gradients of the loss.
    ember::train::TrainOutput<ember::train::ClassificationOutput<B>> step(
        const TextBatch<B>& batch) const requires ember::AutodiffBackend<B> {
        auto out = classify(batch);
        return {*this, out.loss.backward(), std::move(out)};
    }
    /// The Learner's validation step: loss and scores.
    ember::train::ClassificationOutput<B> valid_step(const TextBatch<B>& batch) const {
        return classify(batch);
    }
};

/// Configuration of TextClassifier.
struct TextClassifierConfig {
    std::size_t n_classes;             ///< categories
    std::size_t vocab_size;            ///< tokens, the pad token included
    std::size_t max_seq_length = 256;  ///< longest text (in bytes) the model reads
    std::size_t d_model = 64;          ///< embedding and transformer width
    std::size_t d_ff = 256;            ///< feed-forward hidden size
    std::size_t n_heads = 4;           ///< attention heads
    std::size_t n_layers = 2;          ///< encoder layers
    double dropout = 0.1;              ///< dropout inside the encoder
    EMBER_CONFIG(TextClassifierConfig, n_classes, vocab_size, max_seq_length, d_model, d_ff,
                 n_heads, n_layers, dropout)

    /// A fresh model on `device`.
    template <Backend B>
    TextClassifier<B> init(const ember::Device<B>& device = {}) const {
        return {ember::nn::EmbeddingConfig{vocab_size, d_model}.init<B>(device),
                ember::nn::EmbeddingConfig{max_seq_length, d_model}.init<B>(device),
                ember::nn::TransformerEncoderConfig{d_model, d_ff, n_heads, n_layers}
                    .with_dropout(dropout)
                    .with_norm_first(true)
                    .init<B>(device),
                ember::nn::LayerNormConfig{d_model}.init<B>(device),
                ember::nn::LinearConfig{d_model, n_classes}.init<B>(device)};
    }
};

}  // namespace text_classification
