#pragma once
// Transformers (Burn's burn::nn::transformer): the position-wise feed-forward block, and the
// encoder and decoder stacks with post-norm (the paper's) or pre-norm layers and a cache for
// autoregressive inference.
//
// From PyTorch's nn.TransformerEncoderLayer / nn.TransformerDecoderLayer state_dicts (built with
// activation="gelu", which is the activation here):
//   self_attn.*      → mha.* (encoder) or self_attn.* (decoder): see attention.hpp
//   multihead_attn.* → cross_attn.*
//   linear1, linear2 → pwff.linear_inner, pwff.linear_outer (weights transposed)
//   norms (weight → gamma, bias → beta), following Burn, which names a norm by the block it
//   follows in post-norm layers and so by the block after it in pre-norm layers:
//     encoder, norm_first = false: norm1 → norm_1, norm2 → norm_2
//     encoder, norm_first = true:  norm1 → norm_2, norm2 → norm_1
//     decoder, norm_first = false: norm1 → norm_1, norm2 → norm_2, norm3 → norm_3
//     decoder, norm_first = true:  norm1 → norm_3, norm2 → norm_1, norm3 → norm_2
// A PyTorch nn.TransformerEncoder/Decoder built with a final `norm` has no counterpart here
// (Burn has none): apply a LayerNorm after the stack.
#include <cmath>
#include <optional>
#include <vector>

#include "attention.hpp"
#include "dropout.hpp"
#include "linear.hpp"
#include "norm.hpp"

namespace ember::nn {

// ---- PositionWiseFeedForward -----------------------------------------------------------------

/// The feed-forward block of a transformer layer: linear_outer(dropout(gelu(linear_inner(x)))).
template <Backend B>
struct PositionWiseFeedForward {
    Linear<B> linear_inner;  ///< [d_model, d_ff]
    Linear<B> linear_outer;  ///< [d_ff, d_model]
    Dropout dropout;         ///< after the activation (training only)
    Gelu gelu;               ///< the activation
    EMBER_MODULE(PositionWiseFeedForward, linear_inner, linear_outer, dropout, gelu)

    /// x [..., d_model] → [..., d_model].
    template <std::size_t D>
    Tensor<B, D> forward(const Tensor<B, D>& input) const;
};

/// Configuration of PositionWiseFeedForward.
struct PositionWiseFeedForwardConfig {
    std::size_t d_model;   ///< input and output size
    std::size_t d_ff;      ///< hidden size
    double dropout = 0.1;  ///< dropout after the activation
    /// Initialiser of both linear layers (PyTorch's nn.Linear default, as Burn's).
    Initializer initializer = Initializer::KaimingUniform(1.0 / std::sqrt(3.0));
    EMBER_CONFIG(PositionWiseFeedForwardConfig, d_model, d_ff, dropout, initializer)

    /// Builds the block on `device`.
    template <Backend B>
    PositionWiseFeedForward<B> init(const Device<B>& device = {}) const;
};

namespace detail {
// The context of `mha` on `input`: the full forward, or the incremental one when given a cache.
template <Backend B>
Tensor<B, 3> attention_context(const MultiHeadAttention<B>& mha, const MhaInput<B>& input,
                               MhaCache<B>* cache) {
    return (cache ? mha.forward_incremental(input, *cache) : mha.forward(input)).context;
}

// One residual branch of a transformer layer: post-norm `after(x + dropout(branch(x)))`,
// pre-norm (`norm_first`) `x + dropout(branch(before(x)))`.
template <Backend B, typename Branch>
Tensor<B, 3> residual(const Tensor<B, 3>& x, bool norm_first, const LayerNorm<B>& before,
                      const LayerNorm<B>& after, const Dropout& dropout, Branch&& branch) {
    if (norm_first) return x + dropout.forward(branch(before.forward(x)));
    return after.forward(x + dropout.forward(branch(x)));
}

// Pre-norm encoder layers (TransformerEncoderLayer::forward in turn, the same values): the
// residual addition that ends each branch and the LayerNorm that starts the next one — within a
// layer and across layers — run as one module::add_layer_norm (one kernel on CUDA instead of an
// addition, a norm and, under autocast, the cast the next branch's products make), its normed
// output in the autocast dtype under a guard.
template <Backend B, typename Layer, typename Input>
Tensor<B, 3> pre_norm_layers(const std::vector<Layer>& layers, Tensor<B, 3> x, const Input& input) {
    const std::optional<DType> out = autocast_dtype();
    auto add_norm = [&](const Tensor<B, 3>& a, const Tensor<B, 3>& r, const LayerNorm<B>& norm) {
        return module::add_layer_norm(a, r, std::optional(norm.gamma.val()),
                                      std::optional(norm.beta.val()), norm.epsilon, out);
    };
    auto h = layers[0].norm_2.forward(x);  // before the first attention
    for (std::size_t l = 0; l < layers.size(); ++l) {
        const Layer& layer = layers[l];
        auto in = MhaInput<B>::self_attn(h)
                      .mask_pad(input.mask_pad())
                      .mask_attn(input.mask_attn())
                      .causal(input.is_causal());
        auto a = add_norm(x, layer.dropout.forward(attention_context<B>(layer.mha, in, nullptr)),
                          layer.norm_1);
        auto f = layer.dropout.forward(layer.pwff.forward(a.normed));
        if (l + 1 == layers.size()) return a.sum + f;
        auto next = add_norm(a.sum, f, layers[l + 1].norm_2);
        x = std::move(next.sum);
        h = std::move(next.normed);
    }
    return x;  // not reached: the last layer returns above
}

// The attention and feed-forward blocks of a layer of `config` (a TransformerEncoderConfig or
// TransformerDecoderConfig).
template <Backend B, typename Config>
MultiHeadAttention<B> transformer_mha(const Config& config, const Device<B>& device) {
    return MultiHeadAttentionConfig{config.d_model, config.n_heads}
        .with_dropout(config.dropout)
        .with_quiet_softmax(config.quiet_softmax)
        .with_initializer(config.initializer)
        .template init<B>(device);
}
template <Backend B, typename Config>
PositionWiseFeedForward<B> transformer_pwff(const Config& config, const Device<B>& device) {
    return PositionWiseFeedForwardConfig{config.d_model, config.d_ff}
        .with_dropout(config.dropout)
        .with_initializer(config.initializer)
        .template init<B>(device);
}

// The TransformerEncoder or TransformerDecoder (`Stack`) of `config`, with n_layers layers from
// `make_layer()`; `op` names the config's init in errors.
template <typename Stack, typename Config, typename MakeLayer>
Stack transformer_stack(const Config& config, const char* op, MakeLayer&& make_layer) {
    EMBER_CHECK(config.n_layers > 0, Argument, op, ": n_layers must be positive, got 0");
    decltype(Stack::layers) layers;
    layers.reserve(config.n_layers);
    for (std::size_t i = 0; i < config.n_layers; ++i) layers.push_back(make_layer());
    return {std::move(layers), config.d_model, config.d_ff,       config.n_heads,
            config.n_layers,   config.dropout, config.norm_first, config.quiet_softmax};
}

// Burn's cached inference of a stack: `sequence` [batch, seq, d_model] (`what` in errors) is the
// whole sequence so far and `output` the outputs cached so far; `layers(x, start)` runs the
// layers on the new rows x, rows `start`.. of the sequence. Appends and returns the output of
// the whole sequence.
template <Backend B, typename Layers>
Tensor<B, 3> autoregressive_inference(const Tensor<B, 3>& sequence,
                                      std::optional<Tensor<B, 3>>& output, const char* op,
                                      const char* what, const char* whole, Layers&& layers) {
    const auto [batch, seq, d] = sequence.dims();
    (void)d;
    const std::size_t start = output ? output->dims()[1] : 0;
    check_new_positions(op, what, seq, start, whole);
    if (output) check_cache_batch(op, batch, output->dims()[0]);
    auto x = layers(sequence.narrow(1, start, seq - start), start);
    output = output ? Tensor<B, 3>::cat({*output, x}, 1) : x;
    return *output;
}

// The display line of a TransformerEncoder or TransformerDecoder.
template <typename Stack>
void display_transformer(module::DisplayContent& c, const Stack& s) {
    c.add("d_model", s.d_model)
        .add("d_ff", s.d_ff)
        .add("n_heads", s.n_heads)
        .add("n_layers", s.n_layers)
        .add("dropout", s.dropout)
        .add("norm_first", s.norm_first)
        .add("quiet_softmax", s.quiet_softmax);
}
}  // namespace detail

// ---- encoder ---------------------------------------------------------------------------------

/// The input of TransformerEncoder: the sequence [batch, seq, d_model] and optional masks
/// (`true` = do not attend): mask_pad [batch, seq], mask_attn [batch, seq, seq]; `causal()`
/// masks later positions without a mask tensor (MhaInput::causal).
template <Backend B>
class TransformerEncoderInput {
  public:
    /// The sequence without masks.
    explicit TransformerEncoderInput(Tensor<B, 3> tensor) : tensor_(std::move(tensor)) {}
    /// Burn's `TransformerEncoderInput::new`.
    static TransformerEncoderInput new_(Tensor<B, 3> tensor) {
        return TransformerEncoderInput(std::move(tensor));
    }
    /// A copy with the padding mask [batch, seq] set.
    TransformerEncoderInput mask_pad(Tensor<B, 2, Bool> mask) const {
        return detail::with_field(*this, &TransformerEncoderInput::mask_pad_, std::move(mask));
    }
    /// A copy with the attention mask [batch, seq, seq] set.
    TransformerEncoderInput mask_attn(Tensor<B, 3, Bool> mask) const {
        return detail::with_field(*this, &TransformerEncoderInput::mask_attn_, std::move(mask));
    }
    /// A copy in which each position attends only to itself and earlier ones, with no mask
    /// tensor: the fused attention kernel then skips the masked blocks (a GPT's causal mask).
    TransformerEncoderInput causal(bool on = true) const {
        return detail::with_field(*this, &TransformerEncoderInput::causal_, on);
    }
    /// The sequence.
    const Tensor<B, 3>& tensor() const { return tensor_; }
    /// The padding mask, if set.
    const std::optional<Tensor<B, 2, Bool>>& mask_pad() const { return mask_pad_; }
    /// The attention mask, if set.
    const std::optional<Tensor<B, 3, Bool>>& mask_attn() const { return mask_attn_; }
    /// Whether later positions are masked.
    bool is_causal() const { return causal_; }

  private:
    Tensor<B, 3> tensor_;
    std::optional<Tensor<B, 2, Bool>> mask_pad_;
    std::optional<Tensor<B, 3, Bool>> mask_attn_;
    bool causal_ = false;
};

/// One encoder layer: self-attention then feed-forward, each in a residual branch with a
/// LayerNorm after it (post-norm) or at the start of the next branch (pre-norm, `norm_first`).
template <Backend B>
struct TransformerEncoderLayer {
    MultiHeadAttention<B> mha;        ///< self-attention
    PositionWiseFeedForward<B> pwff;  ///< feed-forward block
    LayerNorm<B> norm_1;              ///< after attention (post-norm) / before pwff (pre-norm)
    LayerNorm<B> norm_2;              ///< after pwff (post-norm) / before attention (pre-norm)
    Dropout dropout;                  ///< on each branch's output (training only)
    bool norm_first;                  ///< pre-norm
    EMBER_MODULE(TransformerEncoderLayer, mha, pwff, norm_1, norm_2, dropout, norm_first)

    /// x [batch, seq, d_model] with masks as MhaInput's (`causal` as MhaInput::causal).
    Tensor<B, 3> forward(const Tensor<B, 3>& x, const std::optional<Tensor<B, 2, Bool>>& mask_pad,
                         const std::optional<Tensor<B, 3, Bool>>& mask_attn,
                         bool causal = false) const;
    /// The new positions x [batch, new, d_model] attending to the cached ones and themselves;
    /// masks as MultiHeadAttention::forward_incremental's (`causal`: among the new positions).
    Tensor<B, 3> forward_incremental(const Tensor<B, 3>& x,
                                     const std::optional<Tensor<B, 2, Bool>>& mask_pad,
                                     const std::optional<Tensor<B, 3, Bool>>& mask_attn,
                                     MhaCache<B>& cache, bool causal = false) const;

  private:
    Tensor<B, 3> run(Tensor<B, 3> x, const std::optional<Tensor<B, 2, Bool>>& mask_pad,
                     const std::optional<Tensor<B, 3, Bool>>& mask_attn, bool causal,
                     MhaCache<B>* cache) const {
        x = detail::residual(x, norm_first, norm_2, norm_1, dropout, [&](const Tensor<B, 3>& r) {
            auto in =
                MhaInput<B>::self_attn(r).mask_pad(mask_pad).mask_attn(mask_attn).causal(causal);
            return detail::attention_context(mha, in, cache);
        });
        return detail::residual(x, norm_first, norm_1, norm_2, dropout,
                                [&](const Tensor<B, 3>& r) { return pwff.forward(r); });
    }
};

/// The state of TransformerEncoder::forward_autoregressive_inference: each layer's attention
/// cache and the outputs so far. Make one with TransformerEncoder::new_autoregressive_cache().
template <Backend B>
struct TransformerEncoderAutoregressiveCache {
    std::vector<MhaCache<B>> layers;     ///< one attention cache per layer
    std::optional<Tensor<B, 3>> output;  ///< the outputs [batch, len, d_model] so far
    /// Positions processed so far.
    std::size_t len() const { return output ? output->dims()[1] : 0; }
};

/// A stack of encoder layers (Burn's TransformerEncoder; PyTorch's nn.TransformerEncoder with
/// batch_first=True and activation="gelu").
template <Backend B>
struct TransformerEncoder {
    std::vector<TransformerEncoderLayer<B>> layers;  ///< the layers, applied in order
    std::size_t d_model;                             ///< model size
    std::size_t d_ff;                                ///< feed-forward hidden size
    std::size_t n_heads;                             ///< attention heads
    std::size_t n_layers;                            ///< number of layers
    double dropout;                                  ///< dropout rate
    bool norm_first;                                 ///< pre-norm layers
    bool quiet_softmax;                              ///< quiet softmax in attention
    EMBER_MODULE(TransformerEncoder, layers, d_model, d_ff, n_heads, n_layers, dropout, norm_first,
                 quiet_softmax)

    /// input.tensor() [batch, seq, d_model] → [batch, seq, d_model].
    Tensor<B, 3> forward(const TransformerEncoderInput<B>& input) const;

    /// Burn's cached inference: `input` holds the whole sequence so far (with masks of their
    /// full shapes) and only the positions not yet in `cache` are computed; returns the output
    /// of the whole sequence. Pass generate_autoregressive_mask as mask_attn when a call brings
    /// several new positions (one new position per call needs no mask).
    Tensor<B, 3> forward_autoregressive_inference(
        const TransformerEncoderInput<B>& input,
        TransformerEncoderAutoregressiveCache<B>& cache) const;

    /// An empty cache for forward_autoregressive_inference.
    TransformerEncoderAutoregressiveCache<B> new_autoregressive_cache() const {
        return {std::vector<MhaCache<B>>(layers.size(), MhaCache<B>::autoregressive()),
                std::nullopt};
    }

    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const { detail::display_transformer(c, *this); }

  private:
    void check(const TransformerEncoderInput<B>& input, const char* op) const {
        const auto [batch, seq, d] = input.tensor().dims();
        EMBER_CHECK(d == d_model, Shape, op, ": input of shape ",
                    input.tensor().shape().to_string(), " does not end in d_model = ", d_model);
        detail::check_attn_mask<B, 2>(input.mask_pad(), {batch, seq}, op, "mask_pad");
        detail::check_attn_mask<B, 3>(input.mask_attn(), {batch, seq, seq}, op, "mask_attn");
    }
};

/// Configuration of TransformerEncoder.
struct TransformerEncoderConfig {
    std::size_t d_model;         ///< model size
    std::size_t d_ff;            ///< feed-forward hidden size
    std::size_t n_heads;         ///< attention heads; must divide d_model
    std::size_t n_layers;        ///< number of layers
    double dropout = 0.1;        ///< dropout in attention, feed-forward and residual branches
    bool norm_first = false;     ///< pre-norm layers
    bool quiet_softmax = false;  ///< quiet softmax in attention
    /// Initialiser of every linear layer (Burn's default: PyTorch's nn.Linear default). LayerNorms
    /// start at gamma 1, beta 0.
    Initializer initializer = Initializer::KaimingUniform(1.0 / std::sqrt(3.0));
    EMBER_CONFIG(TransformerEncoderConfig, d_model, d_ff, n_heads, n_layers, dropout, norm_first,
                 quiet_softmax, initializer)

    /// Builds the encoder on `device`.
    template <Backend B>
    TransformerEncoder<B> init(const Device<B>& device = {}) const;
};

// ---- decoder ---------------------------------------------------------------------------------

/// The input of TransformerDecoder: the target [batch, seq_t, d_model] and the memory (the
/// encoder's output) [batch, seq_m, d_model], each with optional masks (`true` = do not
/// attend): target_mask_pad [batch, seq_t], target_mask_attn [batch, seq_t, seq_t],
/// memory_mask_pad [batch, seq_m], memory_mask_attn [batch, seq_t, seq_m].
template <Backend B>
class TransformerDecoderInput {
  public:
    /// Target and memory without masks.
    TransformerDecoderInput(Tensor<B, 3> target, Tensor<B, 3> memory)
        : target_(std::move(target)), memory_(std::move(memory)) {}
    /// Burn's `TransformerDecoderInput::new`.
    static TransformerDecoderInput new_(Tensor<B, 3> target, Tensor<B, 3> memory) {
        return TransformerDecoderInput(std::move(target), std::move(memory));
    }
    /// A copy with the target padding mask set.
    TransformerDecoderInput target_mask_pad(Tensor<B, 2, Bool> m) const {
        return detail::with_field(*this, &TransformerDecoderInput::target_mask_pad_, std::move(m));
    }
    /// A copy with the target attention mask set.
    TransformerDecoderInput target_mask_attn(Tensor<B, 3, Bool> m) const {
        return detail::with_field(*this, &TransformerDecoderInput::target_mask_attn_, std::move(m));
    }
    /// A copy with the memory padding mask set.
    TransformerDecoderInput memory_mask_pad(Tensor<B, 2, Bool> m) const {
        return detail::with_field(*this, &TransformerDecoderInput::memory_mask_pad_, std::move(m));
    }
    /// A copy with the memory attention mask set.
    TransformerDecoderInput memory_mask_attn(Tensor<B, 3, Bool> m) const {
        return detail::with_field(*this, &TransformerDecoderInput::memory_mask_attn_, std::move(m));
    }
    /// The target.
    const Tensor<B, 3>& target() const { return target_; }
    /// The memory.
    const Tensor<B, 3>& memory() const { return memory_; }
    /// The target padding mask, if set.
    const std::optional<Tensor<B, 2, Bool>>& target_mask_pad() const { return target_mask_pad_; }
    /// The target attention mask, if set.
    const std::optional<Tensor<B, 3, Bool>>& target_mask_attn() const { return target_mask_attn_; }
    /// The memory padding mask, if set.
    const std::optional<Tensor<B, 2, Bool>>& memory_mask_pad() const { return memory_mask_pad_; }
    /// The memory attention mask, if set.
    const std::optional<Tensor<B, 3, Bool>>& memory_mask_attn() const { return memory_mask_attn_; }

  private:
    Tensor<B, 3> target_, memory_;
    std::optional<Tensor<B, 2, Bool>> target_mask_pad_, memory_mask_pad_;
    std::optional<Tensor<B, 3, Bool>> target_mask_attn_, memory_mask_attn_;
};

/// One decoder layer: self-attention, cross-attention to the memory, then feed-forward, each in
/// a residual branch, post-norm or pre-norm as TransformerEncoderLayer.
template <Backend B>
struct TransformerDecoderLayer {
    MultiHeadAttention<B> cross_attn;  ///< attention to the memory
    MultiHeadAttention<B> self_attn;   ///< self-attention
    PositionWiseFeedForward<B> pwff;   ///< feed-forward block
    LayerNorm<B> norm_1;  ///< after self-attention (post-norm) / before cross-attention (pre-norm)
    LayerNorm<B> norm_2;  ///< after cross-attention (post-norm) / before pwff (pre-norm)
    LayerNorm<B> norm_3;  ///< after pwff (post-norm) / before self-attention (pre-norm)
    Dropout dropout;      ///< on each branch's output (training only)
    bool norm_first;      ///< pre-norm
    EMBER_MODULE(TransformerDecoderLayer, cross_attn, self_attn, pwff, norm_1, norm_2, norm_3,
                 dropout, norm_first)

    /// The target rows `x` of `input` (all of them, or the new ones with caches).
    Tensor<B, 3> forward(const Tensor<B, 3>& x, const TransformerDecoderInput<B>& input) const {
        return run(x, input, input.target_mask_attn(), input.memory_mask_attn(), nullptr, nullptr);
    }
    /// The new target rows x [batch, new, d_model], rows `start`.. of the sequence, with the
    /// layer's self- and cross-attention caches.
    Tensor<B, 3> forward_incremental(const Tensor<B, 3>& x, const TransformerDecoderInput<B>& input,
                                     std::size_t start, MhaCache<B>& self_cache,
                                     MhaCache<B>& cross_cache) const {
        const std::size_t n = x.dims()[1];
        return run(x, input, detail::attn_mask_rows(input.target_mask_attn(), start, n),
                   detail::attn_mask_rows(input.memory_mask_attn(), start, n), &self_cache,
                   &cross_cache);
    }

  private:
    // The layer with the target and memory attention masks given (the rows of x's positions).
    Tensor<B, 3> run(Tensor<B, 3> x, const TransformerDecoderInput<B>& input,
                     const std::optional<Tensor<B, 3, Bool>>& target_mask_attn,
                     const std::optional<Tensor<B, 3, Bool>>& memory_mask_attn,
                     MhaCache<B>* self_cache, MhaCache<B>* cross_cache) const {
        x = detail::residual(x, norm_first, norm_3, norm_1, dropout, [&](const Tensor<B, 3>& r) {
            auto in = MhaInput<B>::self_attn(r)
                          .mask_pad(input.target_mask_pad())
                          .mask_attn(target_mask_attn);
            return detail::attention_context(self_attn, in, self_cache);
        });
        x = detail::residual(x, norm_first, norm_1, norm_2, dropout, [&](const Tensor<B, 3>& r) {
            auto in = MhaInput<B>(r, input.memory(), input.memory())
                          .mask_pad(input.memory_mask_pad())
                          .mask_attn(memory_mask_attn);
            return detail::attention_context(cross_attn, in, cross_cache);
        });
        return detail::residual(x, norm_first, norm_2, norm_3, dropout,
                                [&](const Tensor<B, 3>& r) { return pwff.forward(r); });
    }
};

/// The state of TransformerDecoder::forward_autoregressive_inference. Make one with
/// TransformerDecoder::new_autoregressive_cache().
template <Backend B>
struct TransformerDecoderAutoregressiveCache {
    std::vector<MhaCache<B>> self_attn;   ///< per layer: the target's keys and values
    std::vector<MhaCache<B>> cross_attn;  ///< per layer: the memory's keys and values
    std::optional<Tensor<B, 3>> output;   ///< the outputs [batch, len, d_model] so far
    /// Target positions processed so far.
    std::size_t len() const { return output ? output->dims()[1] : 0; }
};

/// A stack of decoder layers (Burn's TransformerDecoder; PyTorch's nn.TransformerDecoder with
/// batch_first=True and activation="gelu").
template <Backend B>
struct TransformerDecoder {
    std::vector<TransformerDecoderLayer<B>> layers;  ///< the layers, applied in order
    std::size_t d_model;                             ///< model size
    std::size_t d_ff;                                ///< feed-forward hidden size
    std::size_t n_heads;                             ///< attention heads
    std::size_t n_layers;                            ///< number of layers
    double dropout;                                  ///< dropout rate
    bool norm_first;                                 ///< pre-norm layers
    bool quiet_softmax;                              ///< quiet softmax in attention
    EMBER_MODULE(TransformerDecoder, layers, d_model, d_ff, n_heads, n_layers, dropout, norm_first,
                 quiet_softmax)

    /// input.target() [batch, seq_t, d_model] → [batch, seq_t, d_model].
    Tensor<B, 3> forward(const TransformerDecoderInput<B>& input) const {
        check(input, "TransformerDecoder::forward");
        auto x = input.target();
        for (const auto& layer : layers) x = layer.forward(x, input);
        return x;
    }

    /// Burn's cached inference: `input.target()` holds the whole target so far (masks of their
    /// full shapes) and only the positions not yet in `cache` are computed; the memory is
    /// projected on the first call and reused. Returns the output of the whole target.
    Tensor<B, 3> forward_autoregressive_inference(
        const TransformerDecoderInput<B>& input,
        TransformerDecoderAutoregressiveCache<B>& cache) const {
        const char* op = "TransformerDecoder::forward_autoregressive_inference";
        check(input, op);
        EMBER_CHECK(
            cache.self_attn.size() == layers.size() && cache.cross_attn.size() == layers.size(),
            Argument, op, ": the cache has ", cache.self_attn.size(), " layers but the decoder ",
            layers.size(), "; make it with new_autoregressive_cache()");
        auto run_layers = [&](Tensor<B, 3> x, std::size_t start) {
            for (std::size_t i = 0; i < layers.size(); ++i)
                x = layers[i].forward_incremental(x, input, start, cache.self_attn[i],
                                                  cache.cross_attn[i]);
            return x;
        };
        return detail::autoregressive_inference(input.target(), cache.output, op, "target",
                                                "target", run_layers);
    }

    /// An empty cache for forward_autoregressive_inference.
    TransformerDecoderAutoregressiveCache<B> new_autoregressive_cache() const {
        return {
            std::vector<MhaCache<B>>(layers.size(), MhaCache<B>::autoregressive()),
            std::vector<MhaCache<B>>(layers.size(), MhaCache<B>::autoregressive_cross_attention()),
            std::nullopt};
    }

    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const { detail::display_transformer(c, *this); }

  private:
    void check(const TransformerDecoderInput<B>& input, const char* op) const {
        const auto [batch, seq_t, dt] = input.target().dims();
        const auto [batch_m, seq_m, dm] = input.memory().dims();
        EMBER_CHECK(dt == d_model && dm == d_model && batch_m == batch, Shape, op, ": target ",
                    input.target().shape().to_string(), " and memory ",
                    input.memory().shape().to_string(),
                    " must share the batch and end in d_model = ", d_model);
        detail::check_attn_mask<B, 2>(input.target_mask_pad(), {batch, seq_t}, op,
                                      "target_mask_pad");
        detail::check_attn_mask<B, 3>(input.target_mask_attn(), {batch, seq_t, seq_t}, op,
                                      "target_mask_attn");
        detail::check_attn_mask<B, 2>(input.memory_mask_pad(), {batch, seq_m}, op,
                                      "memory_mask_pad");
        detail::check_attn_mask<B, 3>(input.memory_mask_attn(), {batch, seq_t, seq_m}, op,
                                      "memory_mask_attn");
    }
};

/// Configuration of TransformerDecoder.
struct TransformerDecoderConfig {
    std::size_t d_model;         ///< model size
    std::size_t d_ff;            ///< feed-forward hidden size
    std::size_t n_heads;         ///< attention heads; must divide d_model
    std::size_t n_layers;        ///< number of layers
    double dropout = 0.1;        ///< dropout in attention, feed-forward and residual branches
    bool norm_first = false;     ///< pre-norm layers
    bool quiet_softmax = false;  ///< quiet softmax in attention
    /// Initialiser of every linear layer (Burn's default: PyTorch's nn.Linear default). LayerNorms
    /// start at gamma 1, beta 0.
    Initializer initializer = Initializer::KaimingUniform(1.0 / std::sqrt(3.0));
    EMBER_CONFIG(TransformerDecoderConfig, d_model, d_ff, n_heads, n_layers, dropout, norm_first,
                 quiet_softmax, initializer)

    /// Builds the decoder on `device`.
    template <Backend B>
    TransformerDecoder<B> init(const Device<B>& device = {}) const {
        return detail::transformer_stack<TransformerDecoder<B>>(
            *this, "TransformerDecoderConfig::init", [&]() -> TransformerDecoderLayer<B> {
                auto cross = detail::transformer_mha<B>(*this, device);
                auto self = detail::transformer_mha<B>(*this, device);
                auto pwff = detail::transformer_pwff<B>(*this, device);
                return {std::move(cross),
                        std::move(self),
                        std::move(pwff),
                        LayerNormConfig{d_model}.init<B>(device),
                        LayerNormConfig{d_model}.init<B>(device),
                        LayerNormConfig{d_model}.init<B>(device),
                        DropoutConfig{dropout}.init(),
                        norm_first};
            });
    }
};

// Defined out of their classes, so not inline: where an `extern template` declaration names an
// instance (include/ember/dispatch/nn.hpp for Dispatch), a file that calls it compiles the call
// only, not the body (compilers instantiate an inline function to consider inlining it, even
// one declared extern).

template <Backend B>
template <std::size_t D>
Tensor<B, D> PositionWiseFeedForward<B>::forward(const Tensor<B, D>& input) const {
    auto x = linear_inner.forward(input);
    x = gelu.forward(std::move(x));
    x = dropout.forward(std::move(x));
    return linear_outer.forward(x);
}

template <Backend B>
PositionWiseFeedForward<B> PositionWiseFeedForwardConfig::init(const Device<B>& device) const {
    EMBER_CHECK(d_model > 0 && d_ff > 0, Argument,
                "PositionWiseFeedForwardConfig::init: d_model and d_ff must be positive, got ",
                d_model, " and ", d_ff);
    auto inner = LinearConfig{d_model, d_ff}.with_initializer(initializer).init<B>(device);
    auto outer = LinearConfig{d_ff, d_model}.with_initializer(initializer).init<B>(device);
    return {std::move(inner), std::move(outer), DropoutConfig{dropout}.init(), Gelu{}};
}

template <Backend B>
Tensor<B, 3> TransformerEncoderLayer<B>::forward(const Tensor<B, 3>& x,
                                                 const std::optional<Tensor<B, 2, Bool>>& mask_pad,
                                                 const std::optional<Tensor<B, 3, Bool>>& mask_attn,
                                                 bool causal) const {
    return run(x, mask_pad, mask_attn, causal, nullptr);
}

template <Backend B>
Tensor<B, 3> TransformerEncoderLayer<B>::forward_incremental(
    const Tensor<B, 3>& x, const std::optional<Tensor<B, 2, Bool>>& mask_pad,
    const std::optional<Tensor<B, 3, Bool>>& mask_attn, MhaCache<B>& cache, bool causal) const {
    return run(x, mask_pad, mask_attn, causal, &cache);
}

template <Backend B>
Tensor<B, 3> TransformerEncoder<B>::forward(const TransformerEncoderInput<B>& input) const {
    check(input, "TransformerEncoder::forward");
    auto x = input.tensor();
    if (norm_first && !layers.empty()) return detail::pre_norm_layers(layers, std::move(x), input);
    for (const auto& layer : layers)
        x = layer.forward(x, input.mask_pad(), input.mask_attn(), input.is_causal());
    return x;
}

template <Backend B>
Tensor<B, 3> TransformerEncoder<B>::forward_autoregressive_inference(
    const TransformerEncoderInput<B>& input,
    TransformerEncoderAutoregressiveCache<B>& cache) const {
    const char* op = "TransformerEncoder::forward_autoregressive_inference";
    check(input, op);
    EMBER_CHECK(cache.layers.size() == layers.size(), Argument, op, ": the cache has ",
                cache.layers.size(), " layers but the encoder ", layers.size(),
                "; make it with new_autoregressive_cache()");
    auto run_layers = [&](Tensor<B, 3> x, std::size_t start) {
        auto attn = detail::attn_mask_rows(input.mask_attn(), start, x.dims()[1]);
        for (std::size_t i = 0; i < layers.size(); ++i)
            x = layers[i].forward_incremental(x, input.mask_pad(), attn, cache.layers[i],
                                              input.is_causal());
        return x;
    };
    return detail::autoregressive_inference(input.tensor(), cache.output, op, "input", "sequence",
                                            run_layers);
}

template <Backend B>
TransformerEncoder<B> TransformerEncoderConfig::init(const Device<B>& device) const {
    return detail::transformer_stack<TransformerEncoder<B>>(
        *this, "TransformerEncoderConfig::init", [&]() -> TransformerEncoderLayer<B> {
            auto mha = detail::transformer_mha<B>(*this, device);
            auto pwff = detail::transformer_pwff<B>(*this, device);
            return {std::move(mha),
                    std::move(pwff),
                    LayerNormConfig{d_model}.init<B>(device),
                    LayerNormConfig{d_model}.init<B>(device),
                    DropoutConfig{dropout}.init(),
                    norm_first};
        });
}

}  // namespace ember::nn
