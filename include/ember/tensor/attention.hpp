#pragma once
// Scaled dot-product attention (ember::module::attention, Burn's ModuleOps::attention), with
// the semantics of PyTorch's F.scaled_dot_product_attention:
//     softmax(q kᵀ · scale + mask) v,   q [B, H, Lq, E], k [B, H, Lk, E], v [B, H, Lk, Ev]
//
// Every backend gets the composed form below (matmul, masked fill, softmax, matmul), which
// Autodiff differentiates op by op. A backend with a fused kernel says so by specialising
// ember::AttentionKernel<B> (detected at compile time, so no other backend changes); the CUDA
// backend's is in <ember/backend/cuda_attention.hpp>, Autodiff's and Fusion's (over such a
// backend) in <ember/autodiff/attention.hpp> and <ember/fusion/attention.hpp>.
// <ember/nn/attention.hpp> includes all of them; code that calls module::attention on
// Autodiff<Cuda> or Fusion<Cuda> directly includes those headers to get the fused kernel.
#include <cmath>
#include <concepts>
#include <limits>
#include <optional>

#include "activation.hpp"
#include "tensor.hpp"

namespace ember {

/// The options of module::attention.
struct AttentionOptions {
    /// Mask out keys after the query's position (key j > query i, aligned at the top left as
    /// PyTorch's `is_causal`). Not allowed together with an explicit mask.
    bool causal = false;
    /// The factor applied to q kᵀ; 1 / sqrt(E) when unset.
    std::optional<double> scale;
};

/// A backend's fused attention kernel, if any: specialise with
///   static bool supports(const FT& q, const FT& k, const FT& v, const std::optional<BT>& keep,
///                        const std::optional<FT>& bias);   // shapes/dtypes it handles
///   static std::array<FT, 2> forward(const FT& q, const FT& k, const FT& v,
///                                    const std::optional<BT>& keep,
///                                    const std::optional<FT>& bias, bool causal, double scale);
///       // {output [B, H, Lq, E], log-sum-exp of each row's scaled logits [B, H, Lq]}
/// and, for Autodiff over the backend,
///   static std::array<FT, 3> backward(const FT& q, const FT& k, const FT& v, const FT& out,
///                                     const FT& lse, const FT& dout,
///                                     const std::optional<BT>& keep,
///                                     const std::optional<FT>& bias, bool causal, double scale);
///       // {dq, dk, dv}
/// `keep` is a boolean mask (true = attend) and `bias` an additive one, both broadcastable to
/// [B, H, Lq, Lk]; at most one is set. The primary template has none of these.
template <typename B>
struct AttentionKernel {};

/// `B` has a fused attention forward (`AttentionKernel<B>` specialised).
template <typename B>
concept FusedAttention = requires(const typename B::FloatTensorPrimitive& t,
                                  const std::optional<typename B::BoolTensorPrimitive>& keep,
                                  const std::optional<typename B::FloatTensorPrimitive>& bias) {
    { AttentionKernel<B>::supports(t, t, t, keep, bias) } -> std::convertible_to<bool>;
    {
        AttentionKernel<B>::forward(t, t, t, keep, bias, true, 1.0)
        } -> std::same_as<std::array<typename B::FloatTensorPrimitive, 2>>;
};

/// The fused attention of `B` has a backward too (what `Autodiff<B>` needs to use it).
template <typename B>
concept FusedAttentionBackward = FusedAttention<B> &&
    requires(const typename B::FloatTensorPrimitive& t,
             const std::optional<typename B::BoolTensorPrimitive>& keep,
             const std::optional<typename B::FloatTensorPrimitive>& bias) {
    {
        AttentionKernel<B>::backward(t, t, t, t, t, t, keep, bias, true, 1.0)
        } -> std::same_as<std::array<typename B::FloatTensorPrimitive, 3>>;
};

/// A backend's fused attention over packed projections, if any: specialise AttentionKernel<B>
/// with these too (each name optional; the ones for the forward go together):
///   static bool supports_packed(const FT& like, std::size_t heads, std::size_t head_dim);
///       // whether a qkv of `like`'s dtype and device with these heads would run fused
///   static std::array<FT, 2> forward_packed(const FT& qkv, std::size_t heads, bool causal,
///                                           double scale);
///       // qkv [B, L, 3·H·E] (q, k, v side by side, each [B, L, H, E]) →
///       // {output [B, L, H·E] (the heads merged), log-sum-exp [B, H, L]}
///   static FT backward_packed(const FT& qkv, const FT& out, const FT& lse, const FT& dout,
///                             std::size_t heads, bool causal, double scale);
///       // the gradient of qkv [B, L, 3·H·E], written in one buffer
/// A self-attention's three projections then run as one product and the heads need no
/// copies either way (MultiHeadAttention uses it where it can).
template <typename B>
concept FusedPackedAttention = requires(const typename B::FloatTensorPrimitive& t, std::size_t n) {
    { AttentionKernel<B>::supports_packed(t, n, n) } -> std::convertible_to<bool>;
    {
        AttentionKernel<B>::forward_packed(t, n, true, 1.0)
        } -> std::same_as<std::array<typename B::FloatTensorPrimitive, 2>>;
};

/// The packed fused attention of `B` has a backward too (what `Autodiff<B>` needs to use it).
template <typename B>
concept FusedPackedAttentionBackward = FusedPackedAttention<B> &&
    requires(const typename B::FloatTensorPrimitive& t, std::size_t n) {
    {
        AttentionKernel<B>::backward_packed(t, t, t, t, n, true, 1.0)
        } -> std::same_as<typename B::FloatTensorPrimitive>;
};

namespace detail::attention {

// ShapeError/ArgumentError unless q, k, v (and the mask, of shape `mask`) fit together.
inline void check(const Shape& q, const Shape& k, const Shape& v, const Shape* mask, bool causal,
                  std::optional<double> scale) {
    EMBER_CHECK(q[0] == k[0] && q[0] == v[0] && q[1] == k[1] && q[1] == v[1], Shape,
                "attention: q ", q.to_string(), ", k ", k.to_string(), " and v ", v.to_string(),
                " must have the same batch and heads [B, H, ..]");
    EMBER_CHECK(q[3] == k[3], Shape, "attention: q ", q.to_string(), " and k ", k.to_string(),
                " must have the same head dim (last dim)");
    EMBER_CHECK(k[2] == v[2], Shape, "attention: k ", k.to_string(), " and v ", v.to_string(),
                " must have the same sequence length (dim 2)");
    if (mask) {
        const std::size_t want[4] = {q[0], q[1], q[2], k[2]};
        bool ok = true;
        for (std::size_t d = 0; d < 4; ++d) ok = ok && ((*mask)[d] == want[d] || (*mask)[d] == 1);
        EMBER_CHECK(ok, Shape, "attention: mask of shape ", mask->to_string(),
                    " does not broadcast to [B, H, Lq, Lk] = ",
                    Shape{want[0], want[1], want[2], want[3]}.to_string());
        EMBER_CHECK(!causal, Argument,
                    "attention: an explicit mask and causal = true cannot be combined (as "
                    "PyTorch); fold the causal part into the mask");
    }
    EMBER_CHECK(!scale || std::isfinite(*scale), Argument, "attention: scale must be finite, got ",
                *scale);
}

inline double scale_of(const Shape& q, std::optional<double> scale) {
    return scale ? *scale : 1.0 / std::sqrt(static_cast<double>(q[3]));
}

// The composed form: softmax over keys of q kᵀ · scale + mask, then · v. Masked positions get
// a very negative finite logit (not -inf), so that a row that attends to nothing gives no NaN, and
// its probabilities are zeroed afterwards: such a row's output and gradients are 0, as PyTorch
// (≥ 2.5) gives.
template <Backend B>
Tensor<B, 4> composed(const Tensor<B, 4>& q, const Tensor<B, 4>& k, const Tensor<B, 4>& v,
                      const std::optional<Tensor<B, 4, Bool>>& keep,
                      const std::optional<Tensor<B, 4>>& bias, bool causal, double scale) {
    const Shape qs = q.shape(), ks = k.shape();
    const Shape full{qs[0], qs[1], qs[2], ks[2]};
    // Finite, so that a row with nothing to attend to stays finite (f16's lowest for f16).
    const double lowest = q.dtype() == DType::F16 ? -65504.0 : -1e30;
    auto s = q.matmul(k.swap_dims(2, 3)) * scale;
    std::optional<Tensor<B, 4, Bool>> drop;  // true: not attended
    if (bias) {
        s = std::move(s) + bias->template expand<4>(full);
        drop = bias->template expand<4>(full).equal_elem(-std::numeric_limits<double>::infinity());
    }
    if (keep) {
        auto d = keep->template expand<4>(full).not_();
        drop = drop ? drop->bool_or(d) : std::move(d);
    }
    if (causal)
        s = s.mask_fill(Tensor<B, 4, Bool>::tril_mask(Shape{1, 1, qs[2], ks[2]}, 0, q.device()),
                        Scalar(lowest));
    if (drop) s = s.mask_fill(*drop, Scalar(lowest));
    auto p = activation::softmax(std::move(s), -1);
    if (drop) {
        // 1 where the row attends to something, else 0 (a constant: no gradient through it), in
        // the probabilities' dtype: an f32 factor would promote bf16/f16 probabilities to f32,
        // which the product with v (bf16/f16) then refuses.
        auto any = drop->not_().any_dim(3).float_().cast(p.dtype()).detach();
        p = std::move(p) * std::move(any);
    }
    return p.matmul(v);
}

}  // namespace detail::attention

namespace module {

/// Scaled dot-product attention with an optional mask: q [B, H, Lq, E], k [B, H, Lk, E],
/// v [B, H, Lk, Ev] → [B, H, Lq, Ev]. `keep` (true = attend) broadcasts to [B, H, Lq, Lk], as
/// PyTorch's boolean attn_mask. Runs the backend's fused kernel where it has one
/// (AttentionKernel) and supports the shapes, else the composed form. Under an ember::Autocast
/// guard q, k, v and `bias` are cast to its dtype, and the whole op runs in it.
template <Backend B>
Tensor<B, 4> attention(const Tensor<B, 4>& q, const Tensor<B, 4>& k, const Tensor<B, 4>& v,
                       const std::optional<std::type_identity_t<Tensor<B, 4, Bool>>>& keep,
                       const std::optional<std::type_identity_t<Tensor<B, 4>>>& bias,
                       const AttentionOptions& options = {}) {
    if (::ember::detail::autocast::current()) [[unlikely]] {
        // On PyTorch's autocast list: q, k, v and an additive mask in the autocast dtype.
        namespace ac = ::ember::detail::autocast;
        const auto a = *ac::current();
        const auto ql = ac::lower(q, a), kl = ac::lower(k, a), vl = ac::lower(v, a);
        const auto bl = ac::lower(bias);
        // The cast tensors are all in one dtype now: the guard is off for the rest, so that the
        // composed form's softmax stays in it, as inside PyTorch's fused attention.
        const Autocast off(a, false);
        return attention<B>(ql, kl, vl, keep, bl, options);
    }
    const Shape mshape = keep ? keep->shape() : bias ? bias->shape() : Shape{};
    EMBER_CHECK(!(keep && bias), Argument,
                "attention: give either a boolean or an additive mask, not both");
    ::ember::detail::attention::check(q.shape(), k.shape(), v.shape(),
                                      keep || bias ? &mshape : nullptr, options.causal,
                                      options.scale);
    const double scale = ::ember::detail::attention::scale_of(q.shape(), options.scale);
    if constexpr (FusedAttention<B>) {
        std::optional<typename B::BoolTensorPrimitive> kp;
        std::optional<typename B::FloatTensorPrimitive> bp;
        if (keep) kp = keep->primitive();
        if (bias) bp = bias->primitive();
        if (AttentionKernel<B>::supports(q.primitive(), k.primitive(), v.primitive(), kp, bp)) {
            auto r = AttentionKernel<B>::forward(q.primitive(), k.primitive(), v.primitive(), kp,
                                                 bp, options.causal, scale);
            return Tensor<B, 4>(std::move(r[0]));
        }
    }
    return ::ember::detail::attention::composed(q, k, v, keep, bias, options.causal, scale);
}

/// Self-attention over packed projections: qkv [B, L, 3·H·E] holds q, k and v side by side
/// (each [B, L, H, E], as one Linear of H·E → 3·H·E outputs gives them) → the attention's
/// output with the heads merged, [B, L, H·E]: the same values as
/// `attention(q, k, v)` on the heads' views ([B, H, L, E]) merged back, with no mask but the
/// causal one of `options`. Where the backend has a packed fused kernel
/// (FusedPackedAttention) it reads the heads in place and, under Autodiff, writes the gradient
/// of qkv as one buffer; elsewhere the heads are sliced and attention composed. Under an
/// ember::Autocast guard qkv is cast to its dtype.
template <Backend B>
Tensor<B, 3> attention_packed(const Tensor<B, 3>& qkv, std::size_t heads,
                              const AttentionOptions& options = {}) {
    if (::ember::detail::autocast::current()) [[unlikely]] {
        namespace ac = ::ember::detail::autocast;
        const auto a = *ac::current();
        const auto low = ac::lower(qkv, a);
        const Autocast off(a, false);
        return attention_packed<B>(low, heads, options);
    }
    // Plain variables, not structured bindings: the lambda below captures them (Clang < 16
    // cannot capture a structured binding).
    const auto dims = qkv.dims();
    const std::size_t batch = dims[0], len = dims[1], width = dims[2];
    EMBER_CHECK(heads > 0 && width % (3 * heads) == 0 && width > 0, Shape,
                "attention_packed: qkv of shape ", qkv.shape().to_string(),
                " does not hold q, k and v of ", heads,
                " heads each (its last dim must be a positive multiple of 3 x heads)");
    const std::size_t e = width / (3 * heads);
    EMBER_CHECK(!options.scale || std::isfinite(*options.scale), Argument,
                "attention_packed: scale must be finite, got ", *options.scale);
    const double scale = options.scale ? *options.scale : 1.0 / std::sqrt(static_cast<double>(e));
    if constexpr (FusedPackedAttention<B>) {
        if (AttentionKernel<B>::supports_packed(qkv.primitive(), heads, e)) {
            auto r =
                AttentionKernel<B>::forward_packed(qkv.primitive(), heads, options.causal, scale);
            return Tensor<B, 3>(std::move(r[0]));
        }
    }
    const auto parts =
        qkv.template reshape<5>(std::array<std::size_t, 5>{batch, len, 3, heads, e}).chunk(3, 2);
    auto head = [&](const Tensor<B, 5>& t) {  // [B, L, 1, H, E] → [B, H, L, E]
        return t.template reshape<4>(std::array<std::size_t, 4>{batch, len, heads, e})
            .swap_dims(1, 2);
    };
    AttentionOptions o = options;
    o.scale = scale;
    return attention<B>(head(parts[0]), head(parts[1]), head(parts[2]), std::nullopt, std::nullopt,
                        o)
        .swap_dims(1, 2)
        .template reshape<3>(std::array<std::size_t, 3>{batch, len, heads * e});
}

/// Attention without a mask (or with only the causal one of `options`).
template <Backend B>
Tensor<B, 4> attention(const Tensor<B, 4>& q, const Tensor<B, 4>& k, const Tensor<B, 4>& v,
                       const AttentionOptions& options = {}) {
    return attention<B>(q, k, v, std::nullopt, std::nullopt, options);
}

/// Attention with a boolean mask (true = attend), as PyTorch's boolean attn_mask.
template <Backend B>
Tensor<B, 4> attention(const Tensor<B, 4>& q, const Tensor<B, 4>& k, const Tensor<B, 4>& v,
                       const Tensor<B, 4, Bool>& mask, const AttentionOptions& options = {}) {
    return attention<B>(q, k, v, mask, std::nullopt, options);
}

/// Attention with an additive float mask (added to the scaled logits; -inf masks out), as
/// PyTorch's float attn_mask.
template <Backend B>
Tensor<B, 4> attention(const Tensor<B, 4>& q, const Tensor<B, 4>& k, const Tensor<B, 4>& v,
                       const Tensor<B, 4>& mask, const AttentionOptions& options = {}) {
    return attention<B>(q, k, v, std::nullopt, mask, options);
}

}  // namespace module
}  // namespace ember
