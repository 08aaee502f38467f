#pragma once
// Cross-attention (Burn's CrossAttention): queries from one sequence (a decoder state) attend
// to a context of another size and width (an encoder's output), with grouped-query attention
// (n_heads_kv key/value heads shared by n_heads / n_heads_kv query heads each; 1 is multi-query
// attention) and a cache that projects a constant context once for streaming inference.
//
// Like MultiHeadAttention it runs module::attention (the backend's fused kernel where it has
// one) unless quiet_softmax is on or attention dropout is active (training with dropout > 0);
// then it computes the weights: masked scores set to min_float, softmax (or quiet_softmax),
// dropout. The two paths agree except for a query whose every context position is masked: the
// fused path gives it a zero output, the composed one uniform weights (Burn's).
#include <cmath>
#include <optional>
#include <string_view>
#include <utility>

#include "../module/config.hpp"
#include "../module/module.hpp"
#include "../tensor/activation.hpp"
#include "../tensor/attention.hpp"
#include "dropout.hpp"
#include "initializer.hpp"
#include "linear.hpp"

namespace ember::nn {

/// The projected keys and values of a constant context, kept between CrossAttention::
/// forward_cache calls (Burn's CrossAttentionCache). One cache serves one context; clear() it
/// (or start a new one) when the context changes.
template <Backend B>
struct CrossAttentionCache {
    std::optional<Tensor<B, 4>> k;  ///< projected keys [batch, n_heads_kv, seq_context, d_head]
    std::optional<Tensor<B, 4>> v;  ///< projected values, as k
    /// Whether the keys and values have been computed.
    bool filled() const { return k.has_value() && v.has_value(); }
    /// Forgets the cached context.
    void clear() {
        k.reset();
        v.reset();
    }
};

/// Multi-head attention of queries [batch, seq_q, d_model] over a context [batch, seq_c,
/// d_context] (Burn's CrossAttention): softmax(q kᵀ / √d_head) v per head, with n_heads query
/// heads and n_heads_kv key/value heads of d_head features each, and an output projection back
/// to d_model.
template <Backend B>
struct CrossAttention {
    Linear<B> query;             ///< [d_model, n_heads·d_head]
    Linear<B> key;               ///< [d_context, n_heads_kv·d_head]
    Linear<B> value;             ///< [d_context, n_heads_kv·d_head]
    Linear<B> output;            ///< [n_heads·d_head, d_model]
    Dropout dropout;             ///< on the attention weights (training only)
    std::size_t n_heads = 1;     ///< query heads
    std::size_t n_heads_kv = 1;  ///< key/value heads (divides n_heads)
    std::size_t d_head = 1;      ///< features per head
    double min_float = -1.0e4;   ///< the score of a masked position (composed path)
    bool quiet_softmax = false;  ///< softmax with an extra zero logit (attending to nothing)
    EMBER_MODULE(CrossAttention, query, key, value, output, dropout, n_heads, n_heads_kv, d_head,
                 min_float, quiet_softmax)

    /// Query heads per key/value head: n_heads / n_heads_kv.
    std::size_t group_size() const { return n_heads / n_heads_kv; }

    /// Attends the queries `query_in` [batch, seq_q, d_model] to `context` [batch, seq_c,
    /// d_context]; `mask` [batch, seq_c] is true at context positions to leave out (padding).
    /// Returns [batch, seq_q, d_model].
    Tensor<B, 3> forward(const Tensor<B, 3>& query_in, const Tensor<B, 3>& context,
                         const std::optional<Tensor<B, 2, Bool>>& mask = std::nullopt) const {
        constexpr std::string_view who = "CrossAttention::forward";
        check_inputs(who, query_in, context, mask);
        return attend(query_in, project_kv(context, key), project_kv(context, value), mask);
    }

    /// forward() for a context that stays the same from call to call (streaming decoding):
    /// the first call projects it into `cache`, later calls reuse the cached keys and values
    /// and do not read `context` beyond checking its batch size against the cache.
    Tensor<B, 3> forward_cache(const Tensor<B, 3>& query_in, const Tensor<B, 3>& context,
                               CrossAttentionCache<B>& cache,
                               const std::optional<Tensor<B, 2, Bool>>& mask = std::nullopt) const {
        constexpr std::string_view who = "CrossAttention::forward_cache";
        check_inputs(who, query_in, context, mask);
        if (!cache.filled()) {
            cache.k = project_kv(context, key);
            cache.v = project_kv(context, value);
        }
        const Shape ks = cache.k->shape();
        EMBER_CHECK(ks[0] == query_in.dims()[0], Shape, who,
                    ": the cache holds a context of batch ", ks[0], " but the query ",
                    query_in.shape().to_string(), " has batch ", query_in.dims()[0],
                    "; clear() the cache for a new context");
        if (mask)
            EMBER_CHECK(mask->dims()[1] == ks[2], Shape, who, ": mask ", mask->shape().to_string(),
                        " does not match the cached context of ", ks[2], " positions");
        return attend(query_in, *cache.k, *cache.v, mask);
    }

    /// Shown on the module's display line.
    void display_content(module::DisplayContent& c) const {
        c.add("d_model", query.weight.shape()[0])
            .add("d_context", key.weight.shape()[0])
            .add("n_heads", n_heads)
            .add("n_heads_kv", n_heads_kv)
            .add("d_head", d_head)
            .add("dropout", dropout.prob)
            .add("quiet_softmax", quiet_softmax);
    }

  private:
    void check_inputs(std::string_view who, const Tensor<B, 3>& q, const Tensor<B, 3>& c,
                      const std::optional<Tensor<B, 2, Bool>>& mask) const {
        const Shape qs = q.shape(), cs = c.shape();
        const std::size_t d_model = query.weight.shape()[0], d_context = key.weight.shape()[0];
        EMBER_CHECK(qs[2] == d_model, Shape, who, ": query ", qs.to_string(),
                    " must be [batch, seq_q, d_model = ", d_model, "]");
        EMBER_CHECK(cs[2] == d_context, Shape, who, ": context ", cs.to_string(),
                    " must be [batch, seq_c, d_context = ", d_context, "]");
        EMBER_CHECK(qs[0] == cs[0], Shape, who, ": query ", qs.to_string(), " and context ",
                    cs.to_string(), " must share the batch size");
        if (mask)
            EMBER_CHECK(mask->shape() == (Shape{cs[0], cs[1]}), Shape, who, ": mask ",
                        mask->shape().to_string(), " must be [batch, seq_c] = [", cs[0], ", ",
                        cs[1], "] for context ", cs.to_string());
    }

    // [batch, seq, d] through `linear` → [batch, heads, seq, d_head].
    Tensor<B, 4> heads(const Tensor<B, 3>& x, const Linear<B>& linear, std::size_t h) const {
        const auto [batch, seq, d] = x.dims();
        (void)d;
        return linear.forward(x)
            .template reshape<4>(std::array<std::size_t, 4>{batch, seq, h, d_head})
            .swap_dims(1, 2);
    }
    Tensor<B, 4> project_kv(const Tensor<B, 3>& context, const Linear<B>& linear) const {
        return heads(context, linear, n_heads_kv);
    }

    // [batch, n_heads_kv, seq, d_head] → [batch, n_heads, seq, d_head]: kv head j serves query
    // heads j·r .. j·r + r - 1 (r = n_heads / n_heads_kv), as Burn's and PyTorch's GQA.
    Tensor<B, 4> repeat_kv(const Tensor<B, 4>& x) const {
        if (n_heads == n_heads_kv) return x;
        const auto [b, h, l, d] = x.dims();
        const std::size_t r = group_size();
        return x.template reshape<5>(std::array<std::size_t, 5>{b, h, 1, l, d})
            .template expand<5>(Shape{b, h, r, l, d})
            .template reshape<4>(std::array<std::size_t, 4>{b, h * r, l, d});
    }

    bool dropout_active(const Device<B>& device) const {
        if constexpr (AutodiffBackend<B>)
            return dropout.prob > 0.0 && ad_enabled<B>(device);
        else
            return false;
    }

    Tensor<B, 3> attend(const Tensor<B, 3>& query_in, const Tensor<B, 4>& k_kv,
                        const Tensor<B, 4>& v_kv,
                        const std::optional<Tensor<B, 2, Bool>>& mask) const {
        const auto [batch, seq_q, d_model] = query_in.dims();
        (void)d_model;
        const std::size_t seq_c = k_kv.dims()[2];
        auto q = heads(query_in, query, n_heads);
        auto k = repeat_kv(k_kv), v = repeat_kv(v_kv);
        const Shape full{batch, n_heads, seq_q, seq_c};
        std::optional<Tensor<B, 4, Bool>> masked;  // true: left out, [batch, n_heads, seq_q, seq_c]
        if (mask)
            masked = mask->template reshape<4>(std::array<std::size_t, 4>{batch, 1, 1, seq_c})
                         .template expand<4>(full);
        Tensor<B, 4> ctx = [&] {
            if (!quiet_softmax && !dropout_active(q.device())) {
                AttentionOptions o;
                o.scale = 1.0 / std::sqrt(double(d_head));
                return masked ? ember::module::attention(q, k, v, masked->not_(), o)
                              : ember::module::attention(q, k, v, o);
            }
            auto scores = q.matmul(k.swap_dims(2, 3)) / std::sqrt(double(d_head));
            if (masked) scores = scores.mask_fill(*masked, min_float);
            auto w = quiet_softmax ? activation::quiet_softmax(std::move(scores), 3)
                                   : activation::softmax(std::move(scores), 3);
            return dropout.forward(std::move(w)).matmul(v);
        }();
        return output.forward(ctx.swap_dims(1, 2).template reshape<3>(
            std::array<std::size_t, 3>{batch, seq_q, n_heads * d_head}));
    }
};

/// Configuration of CrossAttention (Burn's CrossAttentionConfig).
struct CrossAttentionConfig {
    std::size_t d_model;         ///< query (and output) features
    std::size_t d_context;       ///< context features
    std::size_t n_heads;         ///< query heads
    std::size_t n_heads_kv;      ///< key/value heads: n_heads for MHA, 1 for MQA; divides n_heads
    std::size_t d_head;          ///< features per head
    double dropout = 0.1;        ///< attention-weight dropout (Burn's default)
    double min_float = -1.0e4;   ///< the score of a masked position (-1e4 is f16-safe)
    bool quiet_softmax = false;  ///< softmax with an extra zero logit
    /// Initialiser of the four projections; the default is Burn's (Kaiming-uniform with gain
    /// 1/√d_head).
    std::optional<Initializer> initializer = std::nullopt;
    EMBER_CONFIG(CrossAttentionConfig, d_model, d_context, n_heads, n_heads_kv, d_head, dropout,
                 min_float, quiet_softmax, initializer)

    /// Builds the layer on `device` (parameters are drawn on first use); throws ArgumentError
    /// for zero sizes, n_heads not a multiple of n_heads_kv, or a dropout outside [0, 1].
    template <Backend B>
    CrossAttention<B> init(const Device<B>& device = {}) const {
        EMBER_CHECK(d_model > 0 && d_context > 0 && n_heads > 0 && n_heads_kv > 0 && d_head > 0,
                    Argument, "CrossAttentionConfig::init: d_model ", d_model, ", d_context ",
                    d_context, ", n_heads ", n_heads, ", n_heads_kv ", n_heads_kv, " and d_head ",
                    d_head, " must be positive");
        EMBER_CHECK(n_heads % n_heads_kv == 0, Argument, "CrossAttentionConfig::init: n_heads ",
                    n_heads, " is not a multiple of n_heads_kv ", n_heads_kv);
        const Initializer init =
            initializer.value_or(Initializer::KaimingUniform(1.0 / std::sqrt(double(d_head))));
        auto linear = [&](std::size_t in, std::size_t out) {
            return LinearConfig{in, out}.with_initializer(init).template init<B>(device);
        };
        auto q = linear(d_model, n_heads * d_head);
        auto k = linear(d_context, n_heads_kv * d_head);
        auto v = linear(d_context, n_heads_kv * d_head);
        auto o = linear(n_heads * d_head, d_model);
        return {
            std::move(q), std::move(k), std::move(v), std::move(o), DropoutConfig{dropout}.init(),
            n_heads,      n_heads_kv,   d_head,       min_float,    quiet_softmax};
    }
};

}  // namespace ember::nn
