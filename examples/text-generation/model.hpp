#pragma once
// A character-level causal transformer (a tiny GPT): token and learned position embeddings, a
// pre-norm TransformerEncoder whose attention mask hides every later position, a final
// LayerNorm and a linear layer giving the scores of the next character at every position.
#include <ember/ember.hpp>
#include <ember/nn.hpp>
#include <ember/train/output.hpp>

#include "data.hpp"

namespace text_generation {

using ember::Backend;
using ember::Tensor;

/// The language model.
template <Backend B>
struct CharLm {
    ember::nn::Embedding<B> embedding_token;       ///< [vocab, d_model]
    ember::nn::Embedding<B> embedding_pos;         ///< [context, d_model]
    ember::nn::TransformerEncoder<B> transformer;  ///< pre-norm layers, causal attention
    ember::nn::LayerNorm<B> norm;                  ///< pre-norm stacks end unnormalised
    ember::nn::Linear<B> output;                   ///< [d_model, vocab]
    EMBER_MODULE(CharLm, embedding_token, embedding_pos, transformer, norm, output)

    /// Next-token scores [N, S, vocab] of tokens [N, S], S <= the context: position i sees
    /// tokens 0..i only.
    Tensor<B, 3> forward(const Tensor<B, 2, ember::Int>& tokens) const {
        const auto [n, s] = tokens.dims();
        const auto device = tokens.device();
        auto positions = Tensor<B, 1, ember::Int>::arange(0, std::int64_t(s), device)
                             .template reshape<2>({1, long(s)});
        auto x = embedding_token.forward(tokens) + embedding_pos.forward(positions);
        auto causal = ember::nn::generate_autoregressive_mask<B>(n, s, device);
        x = transformer.forward(ember::nn::TransformerEncoderInput<B>(x).mask_attn(causal));
        return output.forward(norm.forward(x));
    }

    /// Cross-entropy of every position's prediction, and the scores [N · S, vocab].
    ember::train::ClassificationOutput<B> predict(const CharBatch<B>& batch) const {
        const auto [n, s] = batch.inputs.dims();
        auto scores = forward(batch.inputs).template reshape<2>({long(n * s), -1});
        auto loss =
            ember::nn::loss::CrossEntropyLossConfig{}.init<B>().forward(scores, batch.targets);
        return {std::move(loss), std::move(scores), batch.targets};
    }

    /// The Learner's training step: loss, scores and the gradients of the loss.
    ember::train::TrainOutput<ember::train::ClassificationOutput<B>> step(
        const CharBatch<B>& batch) const requires ember::AutodiffBackend<B> {
        auto out = predict(batch);
        return {*this, out.loss.backward(), std::move(out)};
    }
    /// The Learner's validation step: loss and scores.
    ember::train::ClassificationOutput<B> valid_step(const CharBatch<B>& batch) const {
        return predict(batch);
    }
};

/// Configuration of CharLm.
struct CharLmConfig {
    std::size_t vocab_size;    ///< distinct characters (bytes) of the corpus
    std::size_t context = 64;  ///< longest input the model reads
    std::size_t d_model = 64;  ///< embedding and transformer width
    std::size_t d_ff = 256;    ///< feed-forward hidden size
    std::size_t n_heads = 4;   ///< attention heads
    std::size_t n_layers = 2;  ///< encoder layers
    double dropout = 0.1;      ///< dropout inside the encoder
    EMBER_CONFIG(CharLmConfig, vocab_size, context, d_model, d_ff, n_heads, n_layers, dropout)

    /// A fresh model on `device`.
    template <Backend B>
    CharLm<B> init(const ember::Device<B>& device = {}) const {
        return {ember::nn::EmbeddingConfig{vocab_size, d_model}.init<B>(device),
                ember::nn::EmbeddingConfig{context, d_model}.init<B>(device),
                ember::nn::TransformerEncoderConfig{d_model, d_ff, n_heads, n_layers}
                    .with_dropout(dropout)
                    .with_norm_first(true)
                    .init<B>(device),
                ember::nn::LayerNormConfig{d_model}.init<B>(device),
                ember::nn::LinearConfig{d_model, vocab_size}.init<B>(device)};
    }
};

}  // namespace text_generation
