#pragma once
// A GPT-2-shaped decoder-only transformer over bytes (Radford et al. 2019): token and learned
// position embeddings, pre-LayerNorm blocks of causal self-attention and a 4× GELU MLP (ember's
// TransformerEncoder with norm_first, causal), a final LayerNorm, and output scores
// from the token embedding itself (tied input/output embeddings). GptConfig's defaults are
// GPT-2 small's shape (12 layers, d_model 768, 12 heads, context 1024) with a vocabulary of the
// 256 byte values: 86.0 M parameters.
//
// Two differences from GPT-2: the GELU is the exact erf form (GPT-2 used the tanh
// approximation), and the attention projections are four separate Linear layers (GPT-2 packs q,
// k, v into one; the function is the same).
//
// Parameter paths (tests/test_models.cpp loads tests/fixtures/gen_models.py's PyTorch weights by
// them): token_embedding.weight [vocab, d], position_embedding.weight [context, d],
// transformer.layers.<i>.{norm_2 (before attention), mha.{query,key,value,output}, norm_1
// (before the MLP), pwff.{linear_inner,linear_outer}}, norm; Linear weights are [in, out].
// The headers of the modules it uses, not <ember/ember.hpp> and <ember/nn.hpp>: a file that
// compiles it on Dispatch parses no other module (and no concrete stack). Loading PyTorch
// weights into it is in pytorch.hpp, so that the model's file does not parse the importer.
#include <ember/nn/embedding.hpp>
#include <ember/nn/loss.hpp>
#include <ember/nn/norm.hpp>
#include <ember/nn/transformer.hpp>

#include <cmath>
#include <optional>
#include <string_view>
#include <vector>

namespace gpt {

using ember::Backend;
using ember::Tensor;
namespace nn = ember::nn;

/// The keys and values of every layer for the positions generated so far (Gpt::forward_cached):
/// each new token attends to them instead of recomputing the whole prefix, so a token costs
/// O(T) rather than O(T²) in the length T so far.
template <Backend B>
struct GptCache {
    std::vector<nn::MhaCache<B>> layers;  ///< one self-attention cache per layer
    std::size_t len = 0;                  ///< positions cached
};

/// The language model.
template <Backend B>
struct Gpt {
    nn::Embedding<B> token_embedding;       ///< [vocab, d_model]; also the output projection
    nn::Embedding<B> position_embedding;    ///< [context, d_model], learned
    nn::TransformerEncoder<B> transformer;  ///< pre-norm blocks, causal attention
    nn::LayerNorm<B> norm;                  ///< the final LayerNorm
    nn::Dropout dropout;                    ///< on the summed embeddings (training only)
    EMBER_MODULE(Gpt, token_embedding, position_embedding, transformer, norm, dropout)

    /// Longest sequence the model reads.
    std::size_t context() const { return position_embedding.weight.shape()[0]; }
    /// Vocabulary size.
    std::size_t vocab_size() const { return token_embedding.weight.shape()[0]; }

    /// Next-token scores [N · S, vocab] of tokens [N, S] (row n·S + i: after token i of
    /// sequence n), S <= the context: position i attends to positions 0..i only.
    Tensor<B, 2> forward(const Tensor<B, 2, ember::Int>& tokens) const {
        const std::size_t s = tokens.dims()[1];
        check_length(s, 0, "Gpt::forward");
        auto x = embed(tokens, 0);
        // causal() rather than a mask tensor: the fused attention kernel (CUDA) then skips the
        // blocks above the diagonal instead of reading an [N, S, S] mask.
        x = transformer.forward(nn::TransformerEncoderInput<B>(x).causal());
        return scores(x);
    }

    /// Mean cross-entropy of predicting targets [N · S] (each token's successor) from tokens
    /// [N, S].
    Tensor<B, 1> loss(const Tensor<B, 2, ember::Int>& tokens,
                      const Tensor<B, 1, ember::Int>& targets) const {
        return nn::loss::CrossEntropyLossConfig{}.init<B>().forward(forward(tokens), targets);
    }

    /// An empty cache for forward_cached.
    GptCache<B> new_cache() const {
        return {std::vector<nn::MhaCache<B>>(transformer.layers.size(),
                                             nn::MhaCache<B>::autoregressive()),
                0};
    }

    /// Scores [N · new, vocab] of `tokens` [N, new], the positions cache.len.. of the sequences
    /// whose earlier positions `cache` holds; adds them to the cache. Gives the rows of
    /// forward() on the whole sequence (a causal mask hides later new positions from earlier
    /// ones when new > 1). Throws ArgumentError past the context.
    Tensor<B, 2> forward_cached(const Tensor<B, 2, ember::Int>& tokens, GptCache<B>& cache) const {
        const auto [n, fresh] = tokens.dims();
        const std::size_t start = cache.len;
        check_length(fresh, start, "Gpt::forward_cached");
        auto x = embed(tokens, start);
        std::optional<Tensor<B, 3, ember::Bool>> causal;
        // Row i (position start + i) may see keys 0..start + i.
        if (fresh > 1)
            causal = Tensor<B, 3, ember::Bool>::tril_mask(ember::Shape{n, fresh, start + fresh},
                                                          long(start), tokens.device());
        for (std::size_t l = 0; l < transformer.layers.size(); ++l)
            x = transformer.layers[l].forward_incremental(x, std::nullopt, causal, cache.layers[l]);
        cache.len += fresh;
        return scores(x);
    }

  private:
    void check_length(std::size_t fresh, std::size_t start, const char* op) const {
        EMBER_CHECK(fresh > 0 && start + fresh <= context(), Argument, op, ": ", fresh,
                    " tokens at position ", start, " do not fit the context of ", context());
    }

    // Token plus position embeddings of tokens [N, S] at positions start.., with dropout.
    Tensor<B, 3> embed(const Tensor<B, 2, ember::Int>& tokens, std::size_t start) const {
        const auto [n, s] = tokens.dims();
        (void)n;
        auto positions = Tensor<B, 1, ember::Int>::arange(std::int64_t(start),
                                                          std::int64_t(start + s), tokens.device())
                             .template reshape<2>({1, long(s)});
        return dropout.forward(token_embedding.forward(tokens) +
                               position_embedding.forward(positions));
    }

    // Final LayerNorm, then scores against every token embedding: x [N, S, d] → [N · S, vocab].
    Tensor<B, 2> scores(const Tensor<B, 3>& x) const {
        const auto [n, s, d] = x.dims();
        auto h = norm.forward(x).template reshape<2>({long(n * s), long(d)});
        return h.matmul(token_embedding.weight.val().transpose());
    }
};

/// Configuration of Gpt; the defaults are GPT-2 small's shape over bytes.
struct GptConfig {
    std::size_t vocab_size = 256;  ///< tokens (bytes)
    std::size_t context = 1024;    ///< longest sequence, and learned positions
    std::size_t d_model = 768;     ///< width
    std::size_t n_heads = 12;      ///< attention heads (must divide d_model)
    std::size_t n_layers = 12;     ///< transformer blocks
    double dropout = 0.1;          ///< on embeddings, attention weights and residual branches
    EMBER_CONFIG(GptConfig, vocab_size, context, d_model, n_heads, n_layers, dropout)

    /// A fresh model on `device`, initialised as GPT-2: weights normal with std 0.02, biases 0,
    /// LayerNorms γ 1 β 0 (GPT-2's extra 1/√(2·layers) scale of the residual projections is left
    /// out). Throws ArgumentError for zero sizes or heads that do not divide d_model.
    template <Backend B>
    Gpt<B> init(const ember::Device<B>& device = {}) const {
        EMBER_CHECK(vocab_size > 0 && context > 0, Argument,
                    "GptConfig::init: vocab_size and context must be positive, got ", vocab_size,
                    " and ", context);
        const auto normal = nn::Initializer::Normal(0.0, 0.02);
        auto token =
            nn::EmbeddingConfig{vocab_size, d_model}.with_initializer(normal).init<B>(device);
        auto position =
            nn::EmbeddingConfig{context, d_model}.with_initializer(normal).init<B>(device);
        auto transformer = nn::TransformerEncoderConfig{d_model, 4 * d_model, n_heads, n_layers}
                               .with_dropout(dropout)
                               .with_norm_first(true)
                               .with_initializer(normal)
                               .init<B>(device);
        Gpt<B> model{std::move(token), std::move(position), std::move(transformer),
                     nn::LayerNormConfig{d_model}.init<B>(device),
                     nn::DropoutConfig{dropout}.init()};
        // The Linear layers' initialiser drew the biases too.
        return model.map([](std::string_view path, const auto& p) {
            return path.ends_with(".bias") ? p.with_value(p.val().zeros_like()) : p;
        });
    }
};

/// Model FLOPs of one training step (forward and backward) of `model` on `batch` sequences of
/// `seq` tokens: tokens · (6 · N + 12 · layers · d_model · seq), N the parameters without the
/// position embedding (a lookup, not a matmul; the tied token embedding counts, as the output
/// projection), the second term the attention scores and their use (PaLM's convention, the
/// causal half included). benchmarks/gpt_torch.py counts the same.
template <Backend B>
double model_flops(const Gpt<B>& model, std::size_t batch, std::size_t seq) {
    const auto d = double(model.token_embedding.weight.shape()[1]);
    const double n = double(model.num_params()) - double(model.context()) * d;
    const double layers = double(model.transformer.layers.size());
    return double(batch * seq) * (6 * n + 12 * layers * d * double(seq));
}

}  // namespace gpt
