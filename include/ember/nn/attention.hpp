#pragma once
// Multi-head attention (Burn's burn::nn::attention): MultiHeadAttention with its input/output
// structs, the autoregressive cache, and the mask helpers. Unless the attention weights are asked
// for, it runs module::attention (include/ember/tensor/attention.hpp), the backend's fused kernel
// where it has one.
//
// From a PyTorch nn.MultiheadAttention state_dict (d = embed_dim):
//   in_proj_weight [3d, d] → query.weight = rows [0, d)ᵀ, key.weight = rows [d, 2d)ᵀ,
//                            value.weight = rows [2d, 3d)ᵀ   (Linear stores [d_input, d_output])
//   in_proj_bias [3d]      → query.bias, key.bias, value.bias (the three thirds)
//   out_proj.weight        → output.weight (transposed), out_proj.bias → output.bias
#include <cmath>
#include <optional>
#include <utility>
#include <vector>

#include "../autodiff/attention.hpp"
#include "../fusion/attention.hpp"
#include "../module/config.hpp"
#include "../module/module.hpp"
#include "../tensor/activation.hpp"
#include "../tensor/attention.hpp"
#if defined(EMBER_CUDA)  // set by linking ember::cuda
#include "../backend/cuda_attention.hpp"
#endif
#include "dropout.hpp"
#include "initializer.hpp"
#include "linear.hpp"

namespace ember::nn {

namespace detail {
// A copy of `obj` with `field` set to `value`: the builder setters of the attention and
// transformer inputs (`input.mask_pad(m)`).
template <typename T, typename F, typename V>
T with_field(const T& obj, F T::*field, V&& value) {
    T copy = obj;
    copy.*field = std::forward<V>(value);
    return copy;
}

// The rows [start, start + n) of a [batch, seq_q, seq_k] mask, if any.
template <Backend B>
std::optional<Tensor<B, 3, Bool>> attn_mask_rows(const std::optional<Tensor<B, 3, Bool>>& m,
                                                 std::size_t start, std::size_t n) {
    if (!m) return std::nullopt;
    return m->narrow(1, start, n);
}

// ShapeError unless the mask `name`, if any, has the shape `want` (described as `dims`, e.g.
// "[batch, seq_k] = ", before its value in the message).
template <Backend B, std::size_t D>
void check_attn_mask(const std::optional<Tensor<B, D, Bool>>& m,
                     const std::array<std::size_t, D>& want, const char* op, const char* name,
                     const char* dims = "") {
    if (!m) return;
    EMBER_CHECK(m->dims() == want, Shape, op, ": ", name, " has shape ", m->shape().to_string(),
                " but ", dims, Shape(want).to_string(), " is needed");
}

// ShapeError unless `what`, the whole sequence so far, has more than the `held` positions of
// a cache.
inline void check_new_positions(const char* op, const char* what, std::size_t seq, std::size_t held,
                                const char* whole = "sequence") {
    EMBER_CHECK(seq > held, Shape, op, ": the ", what, " has ", seq,
                " positions but the cache already holds ", held, "; pass the whole ", whole,
                " so far, with at least one new position");
}

// ShapeError unless a cache that holds a batch of `held` gets a batch of `batch`.
inline void check_cache_batch(const char* op, std::size_t batch, std::size_t held) {
    EMBER_CHECK(held == batch, Shape, op, ": batch of ", batch, " but the cache holds a batch of ",
                held);
}
}  // namespace detail

/// The inputs of MultiHeadAttention::forward: query [batch, seq_q, d_model], key and value
/// [batch, seq_k, d_model], and optional masks where `true` means "do not attend":
/// `mask_pad` [batch, seq_k] (padding keys) and `mask_attn` [batch, seq_q, seq_k]; `causal()`
/// masks future keys without a mask tensor; `need_weights()` asks for the attention weights.
/// Built as Burn's: `MhaInput<B>::self_attn(x).mask_pad(m)`, `MhaInput<B>::new_(q, k, v)`.
template <Backend B>
class MhaInput {
  public:
    /// Query, key and value given separately (cross-attention).
    MhaInput(Tensor<B, 3> query, Tensor<B, 3> key, Tensor<B, 3> value)
        : query_(std::move(query)), key_(std::move(key)), value_(std::move(value)) {}
    /// Query, key and value all `x` (self-attention).
    static MhaInput self_attn(const Tensor<B, 3>& x) {
        MhaInput in(x, x, x);
        in.self_ = true;
        return in;
    }
    /// Burn's `MhaInput::new` (`new` is a C++ keyword).
    static MhaInput new_(Tensor<B, 3> query, Tensor<B, 3> key, Tensor<B, 3> value) {
        return MhaInput(std::move(query), std::move(key), std::move(value));
    }

    /// A copy with the padding mask [batch, seq_k] set.
    MhaInput mask_pad(Tensor<B, 2, Bool> mask) const {
        return detail::with_field(*this, &MhaInput::mask_pad_, std::move(mask));
    }
    /// A copy with the attention mask [batch, seq_q, seq_k] set.
    MhaInput mask_attn(Tensor<B, 3, Bool> mask) const {
        return detail::with_field(*this, &MhaInput::mask_attn_, std::move(mask));
    }
    /// A copy with the padding mask set when `mask` holds one.
    MhaInput mask_pad(const std::optional<Tensor<B, 2, Bool>>& mask) const {
        return detail::with_field(*this, &MhaInput::mask_pad_, mask);
    }
    /// A copy with the attention mask set when `mask` holds one.
    MhaInput mask_attn(const std::optional<Tensor<B, 3, Bool>>& mask) const {
        return detail::with_field(*this, &MhaInput::mask_attn_, mask);
    }

    /// A copy that masks every key after the query's position (the query rows being the last
    /// seq_q of the seq_k positions, so incremental steps line up), with no mask tensor: the
    /// fused kernel then skips the masked blocks.
    MhaInput causal(bool on = true) const {
        return detail::with_field(*this, &MhaInput::causal_, on);
    }
    /// A copy that asks for the attention weights in MhaOutput (PyTorch's need_weights). They
    /// take the composed path, which materialises [batch, n_heads, seq_q, seq_k].
    MhaInput need_weights(bool on = true) const {
        return detail::with_field(*this, &MhaInput::need_weights_, on);
    }

    /// The query [batch, seq_q, d_model].
    const Tensor<B, 3>& query() const { return query_; }
    /// The key [batch, seq_k, d_model].
    const Tensor<B, 3>& key() const { return key_; }
    /// The value [batch, seq_k, d_model].
    const Tensor<B, 3>& value() const { return value_; }
    /// The padding mask, if set.
    const std::optional<Tensor<B, 2, Bool>>& mask_pad() const { return mask_pad_; }
    /// The attention mask, if set.
    const std::optional<Tensor<B, 3, Bool>>& mask_attn() const { return mask_attn_; }
    /// Whether future keys are masked.
    bool is_causal() const { return causal_; }
    /// Whether the attention weights are asked for.
    bool weights_needed() const { return need_weights_; }
    /// Whether query, key and value are one tensor (built by self_attn).
    bool is_self_attn() const { return self_; }

  private:
    Tensor<B, 3> query_, key_, value_;
    std::optional<Tensor<B, 2, Bool>> mask_pad_;
    std::optional<Tensor<B, 3, Bool>> mask_attn_;
    bool causal_ = false;
    bool need_weights_ = false;
    bool self_ = false;
};

/// What MultiHeadAttention returns.
template <Backend B>
struct MhaOutput {
    Tensor<B, 3> context;  ///< [batch, seq_q, d_model]
    /// Attention weights per head [batch, n_heads, seq_q, seq_k], when the input asked for them
    /// (MhaInput::need_weights).
    std::optional<Tensor<B, 4>> weights;
};

template <Backend B>
struct MultiHeadAttention;

/// The state of incremental (autoregressive) attention: the projected keys and values of the
/// positions seen so far, so each step projects only the new positions. One cache serves one
/// sequence batch; start a new one for a new sequence.
template <Backend B>
class MhaCache {
  public:
    /// A cache for self-attention: keys and values grow with every step.
    static MhaCache autoregressive() { return MhaCache(false); }
    /// A cache for cross-attention: keys and values (the memory) are projected on the first
    /// step and reused afterwards; later steps' key/value inputs are ignored.
    static MhaCache autoregressive_cross_attention() { return MhaCache(true); }

    /// Query positions processed so far.
    std::size_t len() const { return queries_; }
    /// Key positions cached so far.
    std::size_t key_len() const { return key_ ? key_->dims()[2] : 0; }
    /// Whether this is a cross-attention cache.
    bool is_cross_attention() const { return cross_; }
    /// Forgets everything (for a new sequence).
    void clear() { *this = MhaCache(cross_); }

  private:
    explicit MhaCache(bool cross) : cross_(cross) {}
    friend struct MultiHeadAttention<B>;

    bool cross_ = false;
    std::size_t queries_ = 0;
    std::optional<Tensor<B, 4>> key_, value_;  // projected, [batch, n_heads, seq_k, d_k]
    std::optional<Tensor<B, 3>> context_;      // forward_cache's output rows so far
};

/// Multi-head scaled dot-product attention ("Attention Is All You Need"), as Burn's
/// MultiHeadAttention and PyTorch's nn.MultiheadAttention(batch_first=True).
///
/// Runs module::attention (one fused kernel on CUDA, no [seq_q x seq_k] matrix in memory) unless
/// the input asks for the weights, quiet_softmax is on or attention dropout is active (training
/// with dropout > 0); those take the composed path, which returns the weights. On the fused path
/// masked keys are left out exactly (as PyTorch) and a query whose keys are all masked gets a
/// zero context; on the composed path masked scores are set to `min_float` (Burn), so such a
/// query gets uniform weights. Dropout applies to the attention weights after the softmax, as in
/// PyTorch and the paper (Burn applies it to the scores before).
template <Backend B>
struct MultiHeadAttention {
    Linear<B> query;      ///< query projection [d_model, d_model]
    Linear<B> key;        ///< key projection
    Linear<B> value;      ///< value projection
    Linear<B> output;     ///< output projection
    Dropout dropout;      ///< on the attention weights (training only)
    std::size_t n_heads;  ///< number of heads
    std::size_t d_k;      ///< size of each head (d_model / n_heads)
    double min_float;     ///< value given to masked scores
    bool quiet_softmax;   ///< softmax with an extra zero logit (heads may attend to nothing)
    EMBER_MODULE(MultiHeadAttention, query, key, value, output, dropout, n_heads, d_k, min_float,
                 quiet_softmax)

    /// d_model = n_heads · d_k.
    std::size_t d_model() const { return n_heads * d_k; }

    /// Attends the query to the keys and values.
    MhaOutput<B> forward(const MhaInput<B>& input) const;

    /// Burn's cached forward for autoregressive inference: `input` holds the whole sequence so
    /// far (query and, for self-attention, key and value of [batch, seq, d_model]) and the cache
    /// holds the projections of the positions seen before, so only the new positions are
    /// projected and attended. Returns the context of the whole sequence (earlier rows from
    /// the cache) and the weights of the new query rows [batch, n_heads, new, seq_k]. Masks
    /// have their full shapes ([batch, seq_k], [batch, seq_q, seq_k]); the rows of `mask_attn`
    /// for earlier positions are not used again. A causal mask is only needed when one call
    /// brings several new positions.
    MhaOutput<B> forward_cache(const MhaInput<B>& input, MhaCache<B>& cache) const;

    /// Incremental attention, one or more new positions at a time: `input` holds only the new
    /// positions (query [batch, new, d_model]; for self-attention the new keys and values too),
    /// which attend to every cached key and the new ones. Masks cover all keys:
    /// `mask_pad` [batch, seq_k], `mask_attn` [batch, new, seq_k]. Returns the context of the
    /// new positions and their weights. Feeding a sequence one token at a time gives the rows
    /// of the full forward with a causal mask.
    MhaOutput<B> forward_incremental(const MhaInput<B>& input, MhaCache<B>& cache) const;

    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const {
        c.add("d_model", d_model())
            .add("n_heads", n_heads)
            .add("d_k", d_k)
            .add("dropout", dropout.prob)
            .add("min_float", min_float)
            .add("quiet_softmax", quiet_softmax);
    }

  private:
    struct Dims {
        std::size_t batch, seq_q, seq_k;
    };

    Dims check_input(const MhaInput<B>& input, const char* op) const {
        const auto q = input.query().dims();
        const auto k = input.key().dims();
        const auto v = input.value().dims();
        const std::size_t d = d_model();
        EMBER_CHECK(q[2] == d && k[2] == d && v[2] == d, Shape, op, ": query ",
                    input.query().shape().to_string(), ", key ", input.key().shape().to_string(),
                    " and value ", input.value().shape().to_string(),
                    " must all end in d_model = ", d);
        EMBER_CHECK(k[0] == q[0] && v[0] == q[0] && k[1] == v[1], Shape, op, ": query ",
                    input.query().shape().to_string(), ", key ", input.key().shape().to_string(),
                    " and value ", input.value().shape().to_string(),
                    " must share the batch, and key and value the sequence length");
        return {q[0], q[1], k[1]};
    }

    static void check_masks(const MhaInput<B>& input, std::size_t batch, std::size_t seq_q,
                            std::size_t seq_k, const char* op) {
        detail::check_attn_mask<B, 2>(input.mask_pad(), {batch, seq_k}, op, "mask_pad",
                                      "[batch, seq_k] = ");
        detail::check_attn_mask<B, 3>(input.mask_attn(), {batch, seq_q, seq_k}, op, "mask_attn",
                                      "[batch, seq_q, seq_k] = ");
    }

    // [batch, seq, d_model] → [batch, n_heads, seq, d_k].
    Tensor<B, 4> project(const Tensor<B, 3>& x, const Linear<B>& linear) const {
        const auto [batch, seq, d] = x.dims();
        (void)d;
        return linear.forward(x)
            .template reshape<4>(std::array<std::size_t, 4>{batch, seq, n_heads, d_k})
            .swap_dims(1, 2);
    }

    /// Self-attention with the three projections as one product of x by the weights side by
    /// side ([d_model, 3·d_model], their casts' concatenation) and the backend's packed fused
    /// kernel reading the heads in place (module::attention_packed), where the backend has one
    /// that takes x and nothing needs the composed path: no masks but the causal one, no
    /// weights asked for, no quiet softmax or active dropout, float weights, biases on all
    /// three projections or none. Else nothing, and forward projects them one by one.
    std::optional<MhaOutput<B>> attend_packed(const Tensor<B, 3>& x,
                                              const MhaInput<B>& input) const {
        if constexpr (FusedPackedAttention<B>) {
            const bool biases = query.bias.has_value();
            if (input.weights_needed() || quiet_softmax || input.mask_pad() || input.mask_attn() ||
                dropout_active(x.device()) || query.weight.quantized() || key.weight.quantized() ||
                value.weight.quantized() || key.bias.has_value() != biases ||
                value.bias.has_value() != biases ||
                !AttentionKernel<B>::supports_packed(x.primitive(), n_heads, d_k))
                return std::nullopt;
            namespace ac = ember::detail::autocast;
            // Each parameter cast on its own (autocast's cache knows them), then put together.
            const auto w =
                Tensor<B, 2>::cat({ac::lower(query.weight.val()), ac::lower(key.weight.val()),
                                   ac::lower(value.weight.val())},
                                  1);
            std::optional<Tensor<B, 1>> b;
            if (biases)
                b = Tensor<B, 1>::cat({ac::lower(query.bias->val()), ac::lower(key.bias->val()),
                                       ac::lower(value.bias->val())},
                                      0);
            AttentionOptions o;
            o.causal = input.is_causal();
            o.scale = 1.0 / std::sqrt(double(d_k));
            auto ctx = ember::module::attention_packed(module::linear(x, w, b), n_heads, o);
            return MhaOutput<B>{output.forward(ctx), std::nullopt};
        } else {
            (void)x;
            (void)input;
            return std::nullopt;
        }
    }

    /// Whether attention dropout would drop anything now (training with dropout > 0).
    bool dropout_active(const Device<B>& device) const {
        if constexpr (AutodiffBackend<B>)
            return dropout.prob > 0.0 && ad_enabled<B>(device);
        else
            return false;
    }

    /// Attends the projected heads q [batch, n_heads, seq_q, d_k] to k and v with the input's
    /// masks: module::attention, or the composed path when the weights are needed.
    MhaOutput<B> attend(const Tensor<B, 4>& q, const Tensor<B, 4>& k, const Tensor<B, 4>& v,
                        const MhaInput<B>& input) const {
        // Plain variables, not structured bindings: the lambdas below capture them (Clang < 16
        // cannot capture a structured binding).
        const auto qd = q.dims();
        const std::size_t batch = qd[0], seq_q = qd[2], seq_k = k.dims()[2];
        const auto& pad = input.mask_pad();
        const auto& attn = input.mask_attn();
        const bool fused = !input.weights_needed() && !quiet_softmax && !dropout_active(q.device());
        // The op's own causal flag aligns queries and keys at the start; it serves when they
        // are the same positions and there is no other mask. Otherwise the causal part joins
        // the mask, aligned at the end (the queries are the last seq_q positions).
        const bool causal_flag = fused && input.is_causal() && seq_q == seq_k && !pad && !attn;
        const Shape m4{batch, 1, seq_q, seq_k};
        std::optional<Tensor<B, 4, Bool>> masked;  // true: not attended, [batch, 1, seq_q, seq_k]
        auto add = [&](Tensor<B, 4, Bool> m) {
            masked = masked ? masked->bool_or(m) : std::move(m);
        };
        if (pad)
            add(pad->template reshape<4>(std::array<std::size_t, 4>{batch, 1, 1, seq_k})
                    .template expand<4>(m4));
        if (attn)
            add(attn->template reshape<4>(std::array<std::size_t, 4>{batch, 1, seq_q, seq_k}));
        if (input.is_causal() && !causal_flag)
            add(Tensor<B, 4, Bool>::tril_mask(
                m4, static_cast<long>(seq_k) - static_cast<long>(seq_q), q.device()));
        auto merge = [&](const Tensor<B, 4>& ctx) {  // [batch, n_heads, seq_q, d_k] → [.., d_model]
            return ctx.swap_dims(1, 2).template reshape<3>(
                std::array<std::size_t, 3>{batch, seq_q, d_model()});
        };
        if (fused) {
            AttentionOptions o;
            o.causal = causal_flag;
            o.scale = 1.0 / std::sqrt(double(d_k));
            auto ctx = masked ? ember::module::attention(q, k, v, masked->not_(), o)
                              : ember::module::attention(q, k, v, o);
            return {output.forward(merge(ctx)), std::nullopt};
        }
        auto scores = q.matmul(k.swap_dims(2, 3)) / std::sqrt(double(d_k));
        const Shape full{batch, n_heads, seq_q, seq_k};
        if (masked) scores = scores.mask_fill(masked->template expand<4>(full), min_float);
        auto weights = quiet_softmax ? activation::quiet_softmax(std::move(scores), 3)
                                     : activation::softmax(std::move(scores), 3);
        weights = dropout.forward(std::move(weights));
        auto context = merge(weights.matmul(v));
        return {output.forward(context), std::move(weights)};
    }
};

/// Configuration of MultiHeadAttention.
struct MultiHeadAttentionConfig {
    std::size_t d_model;         ///< model size (input and output features)
    std::size_t n_heads;         ///< number of heads; must divide d_model
    double dropout = 0.1;        ///< dropout on the attention weights
    double min_float = -1.0e4;   ///< value given to masked scores
    bool quiet_softmax = false;  ///< use quiet softmax (an extra zero logit)
    /// Initialiser of the four projections (weights and biases). Burn's default, which is
    /// PyTorch's nn.Linear default (uniform ±1/√d_model); PyTorch's MultiheadAttention instead
    /// draws the packed input projection with Xavier-uniform and zeroes the biases.
    Initializer initializer = Initializer::KaimingUniform(1.0 / std::sqrt(3.0));
    EMBER_CONFIG(MultiHeadAttentionConfig, d_model, n_heads, dropout, min_float, quiet_softmax,
                 initializer)

    /// Builds the module on `device`.
    template <Backend B>
    MultiHeadAttention<B> init(const Device<B>& device = {}) const;
};

/// Masks where `true` marks a future position: [batch, seq, seq] with (i, j) true for j > i,
/// for causal self-attention (Burn's generate_autoregressive_mask).
template <Backend B>
Tensor<B, 3, Bool> generate_autoregressive_mask(std::size_t batch, std::size_t seq,
                                                const Device<B>& device = {}) {
    return Tensor<B, 3, Bool>::tril_mask(Shape{batch, seq, seq}, 0, device);
}

/// What generate_padding_mask returns: the padded token ids and where the padding is.
template <Backend B>
struct GeneratePaddingMask {
    Tensor<B, 2, Int> tensor;  ///< token ids [batch, seq], padded with the pad token
    Tensor<B, 2, Bool> mask;   ///< true where a position holds the pad token
};

/// Pads token lists to one length (the longest, capped at `max_seq_length` when given; longer
/// lists are truncated) and marks the padding, as Burn's generate_padding_mask. As in Burn,
/// the mask is "token == pad_token", so a pad token inside a list is masked too.
template <Backend B>
GeneratePaddingMask<B> generate_padding_mask(std::size_t pad_token,
                                             const std::vector<std::vector<std::size_t>>& tokens,
                                             std::optional<std::size_t> max_seq_length,
                                             const Device<B>& device = {}) {
    EMBER_CHECK(!tokens.empty(), Argument, "generate_padding_mask: no token lists given");
    std::size_t len = 0;
    for (const auto& t : tokens) len = std::max(len, t.size());
    if (max_seq_length) len = std::min(len, *max_seq_length);
    std::vector<std::int64_t> ids(tokens.size() * len, std::int64_t(pad_token));
    for (std::size_t b = 0; b < tokens.size(); ++b)
        for (std::size_t i = 0; i < std::min(len, tokens[b].size()); ++i)
            ids[b * len + i] = std::int64_t(tokens[b][i]);
    auto tensor = Tensor<B, 2, Int>::from_data(TensorData(ids, Shape{tokens.size(), len}), device);
    auto mask = tensor.equal_elem(std::int64_t(pad_token));
    return {tensor, mask};
}

// Defined out of their classes, so not inline: where an `extern template` declaration names an
// instance (include/ember/dispatch/nn.hpp for Dispatch), a file that calls it compiles the call
// only, not the body (compilers instantiate an inline function to consider inlining it, even
// one declared extern).

template <Backend B>
MhaOutput<B> MultiHeadAttention<B>::forward(const MhaInput<B>& input) const {
    const char* op = "MultiHeadAttention::forward";
    const auto [batch, seq_q, seq_k] = check_input(input, op);
    check_masks(input, batch, seq_q, seq_k, op);
    if (input.is_self_attn()) {
        // Under autocast the three projections would each cast x: cast it once. Backward
        // then sums the three input gradients in the autocast dtype and casts the sum back
        // once, as for a weight used twice (tensor/autocast.hpp).
        const auto x = ember::detail::autocast::lower(input.query());
        if (auto out = attend_packed(x, input)) return std::move(*out);
        return attend(project(x, query), project(x, key), project(x, value), input);
    }
    return attend(project(input.query(), query), project(input.key(), key),
                  project(input.value(), value), input);
}

template <Backend B>
MhaOutput<B> MultiHeadAttention<B>::forward_cache(const MhaInput<B>& input,
                                                  MhaCache<B>& cache) const {
    const char* op = "MultiHeadAttention::forward_cache";
    const auto [batch, seq_q, seq_k_in] = check_input(input, op);
    const std::size_t start = cache.queries_;
    const std::size_t rows = cache.context_ ? cache.context_->dims()[1] : 0;
    EMBER_CHECK(rows == start, Argument, op, ": the cache was advanced by ",
                "forward_incremental; use one of the two per cache");
    detail::check_new_positions(op, "query", seq_q, start);
    const std::size_t seq_k = cache.cross_ && cache.key_ ? cache.key_len() : seq_k_in;
    check_masks(input, batch, seq_q, seq_k, op);
    const std::size_t new_q = seq_q - start;
    const std::size_t old_k = cache.key_len();
    std::optional<Tensor<B, 3>> k = input.key(), v = input.value();
    if (!cache.cross_) {
        detail::check_new_positions(op, "key", seq_k_in, old_k);
        k = input.key().narrow(1, old_k, seq_k_in - old_k);
        v = input.value().narrow(1, old_k, seq_k_in - old_k);
    }
    auto step = MhaInput<B>(input.query().narrow(1, start, new_q), *k, *v)
                    .mask_pad(input.mask_pad())
                    .mask_attn(detail::attn_mask_rows(input.mask_attn(), start, new_q))
                    .causal(input.is_causal())
                    .need_weights(input.weights_needed());
    auto out = forward_incremental(step, cache);
    out.context =
        cache.context_ ? Tensor<B, 3>::cat({*cache.context_, out.context}, 1) : out.context;
    cache.context_ = out.context;
    return out;
}

template <Backend B>
MhaOutput<B> MultiHeadAttention<B>::forward_incremental(const MhaInput<B>& input,
                                                        MhaCache<B>& cache) const {
    const char* op = "MultiHeadAttention::forward_incremental";
    const auto [batch, new_q, new_k] = check_input(input, op);
    (void)new_k;
    if (cache.key_) detail::check_cache_batch(op, batch, cache.key_->dims()[0]);
    if (!cache.cross_ || !cache.key_) {
        auto k = project(input.key(), key);
        auto v = project(input.value(), value);
        if (cache.key_ && !cache.cross_) {
            k = Tensor<B, 4>::cat({*cache.key_, k}, 2);
            v = Tensor<B, 4>::cat({*cache.value_, v}, 2);
        }
        cache.key_ = k;
        cache.value_ = v;
    }
    check_masks(input, batch, new_q, cache.key_len(), op);
    auto out = attend(project(input.query(), query), *cache.key_, *cache.value_, input);
    cache.queries_ += new_q;
    return out;
}

template <Backend B>
MultiHeadAttention<B> MultiHeadAttentionConfig::init(const Device<B>& device) const {
    EMBER_CHECK(d_model > 0 && n_heads > 0, Argument,
                "MultiHeadAttentionConfig::init: d_model and n_heads must be positive, got ",
                d_model, " and ", n_heads);
    EMBER_CHECK(d_model % n_heads == 0, Argument, "MultiHeadAttentionConfig::init: d_model ",
                d_model, " is not divisible by n_heads ", n_heads);
    auto linear = [&] {
        return LinearConfig{d_model, d_model}
            .with_initializer(initializer)
            .template init<B>(device);
    };
    // Drawn in field order so a seeded init is reproducible.
    auto q = linear();
    auto k = linear();
    auto v = linear();
    auto o = linear();
    return {
        std::move(q), std::move(k),      std::move(v), std::move(o), DropoutConfig{dropout}.init(),
        n_heads,      d_model / n_heads, min_float,    quiet_softmax};
}

}  // namespace ember::nn
