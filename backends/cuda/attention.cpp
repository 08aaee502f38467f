// Host side of the fused attention (kernels in attention.cu): which operands the kernel takes,
// their layout (any strides over batch, head and position; a contiguous head dim), and the
// buffers of the forward and backward passes.
#include "ember/backend/cuda_attention.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string_view>

#include "attention_kernels.hpp"
#include "ops.hpp"

namespace ember::cuda {
namespace {

using detail::cuda::AttnParams;
using detail::cuda::CudaTensor;

bool float_storage(DType d) {
    return d == DType::F32 || d == DType::BF16 || d == DType::F16;
}

/// `t` with a unit stride in its last dim (copied when it has another).
CudaTensor dense_rows(CudaTensor t) {
    if (t.shape[3] <= 1 || t.strides[3] == 1) return t;
    return detail::cuda::contiguous(std::move(t));
}

void set_strides(std::int64_t (&dst)[3], const CudaTensor& t) {
    for (int d = 0; d < 3; ++d) dst[d] = t.strides[d];
}

/// Whether `t`'s strides lay its elements out densely in some order of its dims (a permuted
/// view of a contiguous tensor, such as the heads [B, H, L, D] of a [B, L, H·D] projection)
/// with a unit last-dim stride, from offset 0 of its buffer.
bool dense_in_some_order(const CudaTensor& t) {
    const std::size_t r = t.shape.rank();
    if (t.offset != 0 || (t.shape[r - 1] > 1 && t.strides[r - 1] != 1)) return false;
    std::array<std::size_t, 4> order{0, 1, 2, 3};
    std::stable_sort(order.begin(), order.begin() + r,
                     [&](std::size_t a, std::size_t b) { return t.strides[a] > t.strides[b]; });
    std::int64_t expect = 1;
    for (std::size_t k = r; k-- > 0;) {
        const std::size_t d = order[k];
        if (t.shape[d] == 1) continue;
        if (t.strides[d] != expect) return false;
        expect *= static_cast<std::int64_t>(t.shape[d]);
    }
    return true;
}

/// A new tensor of `like`'s shape laid out as `like` is where that is a dense order of its
/// dims (else contiguous): an output in its input's layout. The attention's output and
/// gradients then merge their heads back into [B, L, H·D] as free views, not copies.
CudaTensor empty_laid_out_as(const CudaTensor& like, DType dt) {
    CudaTensor out = detail::cuda::empty(like.shape, dt, like.device());
    if (dense_in_some_order(like)) out.strides = like.strides;
    return out;
}

/// `t` (dense in some order) cast to `to` in the same layout: its buffer cast as a flat vector.
CudaTensor cast_in_layout(const CudaTensor& t, DType to) {
    if (t.dtype == to) return t;
    CudaTensor flat = t;
    flat.shape = Shape{t.num_elements()};
    flat.strides = detail::contiguous_strides(flat.shape);
    CudaTensor out = detail::cuda::cast(flat, to);
    out.shape = t.shape;
    out.strides = t.strides;
    return out;
}

/// The kernel's view of the operands (q, k, v already with dense rows; `mask` kept alive by
/// the caller in `mask_store`).
AttnParams params(const CudaTensor& q, const CudaTensor& k, const CudaTensor& v,
                  const std::optional<CudaTensor>& mask, std::optional<CudaTensor>& mask_store,
                  bool causal, double scale) {
    AttnParams p;
    p.q = q.ptr();
    p.k = k.ptr();
    p.v = v.ptr();
    set_strides(p.qs, q);
    set_strides(p.ks, k);
    set_strides(p.vs, v);
    p.batch = static_cast<int>(q.shape[0]);
    p.heads = static_cast<int>(q.shape[1]);
    p.lq = static_cast<int>(q.shape[2]);
    p.lk = static_cast<int>(k.shape[2]);
    p.head_dim = static_cast<int>(q.shape[3]);
    p.scale = static_cast<float>(scale);
    p.causal = causal;
    if (mask) {
        const Shape full{q.shape[0], q.shape[1], q.shape[2], k.shape[2]};
        if (mask->dtype == DType::Bool) {
            mask_store = *mask;
            p.mask_is_bool = true;
        } else {
            mask_store = detail::cuda::cast(*mask, DType::F32);
        }
        // A mask of rank < 4 is aligned at the right, as broadcasting does.
        const auto st = detail::cuda::broadcast_strides(*mask_store, full);
        for (int d = 0; d < 4; ++d) p.ms[d] = st[d];
        p.mask = mask_store->ptr();
    }
    return p;
}

/// The heads of the columns [col0, col0 + H·E) of a [B, L, ·] tensor (unit last-dim stride) as
/// a [B, H, L, E] view: q, k or v of a packed projection, or the merged output and gradients.
CudaTensor heads_view(const CudaTensor& t, std::size_t heads, std::size_t e, std::size_t col0) {
    CudaTensor v = t;
    v.shape = Shape{t.shape[0], heads, t.shape[1], e};
    v.strides = {};
    v.strides[0] = t.strides[0];
    v.strides[1] = static_cast<std::int64_t>(e);
    v.strides[2] = t.strides[1];
    v.strides[3] = 1;
    v.offset = t.offset + static_cast<std::int64_t>(col0);
    return v;
}

/// `t` [B, L, C] with a unit stride in its last dim (copied when it has another).
CudaTensor dense_last(CudaTensor t) {
    if (t.shape[2] <= 1 || t.strides[2] == 1) return t;
    return detail::cuda::contiguous(std::move(t));
}

/// The backward kernel's launch, shared by the plain and the packed op: o, dout, dq's f32
/// accumulator, dk and dv are [B, H, L, E] views (of any strides with dense rows) that `p`
/// learns the strides of; lse is contiguous [B, H, L].
void launch_backward(AttnParams& p, DType dt, const CudaTensor& o, const CudaTensor& go,
                     const CudaTensor& lse, const CudaTensor& dq32, const CudaTensor& dk,
                     const CudaTensor& dv, int dev) {
    CudaTensor delta = detail::cuda::empty(lse.shape, DType::F32, dev);
    set_strides(p.os, o);
    set_strides(p.gs, go);
    set_strides(p.dqs, dq32);
    set_strides(p.dks, dk);
    set_strides(p.dvs, dv);
    p.dout = go.ptr();
    detail::cuda::launch_attention_backward(
        p, dt, o.ptr(), go.ptr(), static_cast<const float*>(lse.ptr()),
        static_cast<float*>(delta.ptr()), static_cast<float*>(dq32.ptr()), dk.ptr(), dv.ptr(),
        detail::cuda::stream(dev));
}

}  // namespace

bool attention_supported(const CudaTensor& q, const CudaTensor& k, const CudaTensor& v,
                         const std::optional<CudaTensor>& mask) {
    if (q.shape.rank() != 4 || k.shape.rank() != 4 || v.shape.rank() != 4) return false;
    if (!float_storage(q.dtype) || k.dtype != q.dtype || v.dtype != q.dtype) return false;
    if (k.device() != q.device() || v.device() != q.device()) return false;
    if (mask && mask->device() != q.device()) return false;
    const std::size_t e = q.shape[3];
    if (k.shape[3] != e || v.shape[3] != e) return false;
    if (!detail::cuda::attention_head_dim_supported(static_cast<int>(e))) return false;
    constexpr auto kIntMax = static_cast<std::size_t>(std::numeric_limits<int>::max());
    if (q.shape[0] * q.shape[1] > 65535 || q.shape[2] > kIntMax || k.shape[2] > kIntMax)
        return false;
    return true;
}

std::array<CudaTensor, 2> attention_forward(const CudaTensor& q_in, const CudaTensor& k_in,
                                            const CudaTensor& v_in,
                                            const std::optional<CudaTensor>& mask, bool causal,
                                            double scale) {
    EMBER_CHECK(attention_supported(q_in, k_in, v_in, mask), Argument,
                "attention_forward (cuda): the fused kernel does not take q ",
                q_in.shape.to_string(), " ", dtype_name(q_in.dtype), ", k ", k_in.shape.to_string(),
                " ", dtype_name(k_in.dtype), ", v ", v_in.shape.to_string(), " ",
                dtype_name(v_in.dtype), " (it needs one of f32/bf16/f16, head dim 32, 64 or 128)");
    const CudaTensor q = dense_rows(q_in), k = dense_rows(k_in), v = dense_rows(v_in);
    const int dev = q.device();
    std::optional<CudaTensor> mask_store;
    const AttnParams p = params(q, k, v, mask, mask_store, causal, scale);
    CudaTensor out = empty_laid_out_as(q, q.dtype);
    CudaTensor lse =
        detail::cuda::empty(Shape{q.shape[0], q.shape[1], q.shape[2]}, DType::F32, dev);
    AttnParams pf = p;
    set_strides(pf.os, out);
    detail::cuda::launch_attention_forward(pf, q.dtype, out.ptr(), static_cast<float*>(lse.ptr()),
                                           detail::cuda::stream(dev));
    return {std::move(out), std::move(lse)};
}

std::array<CudaTensor, 3> attention_backward(const CudaTensor& q_in, const CudaTensor& k_in,
                                             const CudaTensor& v_in, const CudaTensor& out,
                                             const CudaTensor& lse, const CudaTensor& dout,
                                             const std::optional<CudaTensor>& mask, bool causal,
                                             double scale) {
    EMBER_CHECK(attention_supported(q_in, k_in, v_in, mask), Argument,
                "attention_backward (cuda): the fused kernel does not take q ",
                q_in.shape.to_string(), " ", dtype_name(q_in.dtype),
                " (it needs one of f32/bf16/f16, head dim 32, 64 or 128)");
    EMBER_CHECK(out.shape == q_in.shape && dout.shape == q_in.shape &&
                    lse.shape == Shape({q_in.shape[0], q_in.shape[1], q_in.shape[2]}) &&
                    lse.dtype == DType::F32,
                Shape, "attention_backward (cuda): out ", out.shape.to_string(), ", dout ",
                dout.shape.to_string(), " and lse ", lse.shape.to_string(), " do not fit q ",
                q_in.shape.to_string());
    const CudaTensor q = dense_rows(q_in), k = dense_rows(k_in), v = dense_rows(v_in);
    const int dev = q.device();
    std::optional<CudaTensor> mask_store;
    AttnParams p = params(q, k, v, mask, mask_store, causal, scale);
    // o and dout are read at their strides (rows must be dense); the gradients are laid out as
    // q, k and v are, so that the heads' views in front of the op pass them back without copies.
    const CudaTensor o = dense_rows(detail::cuda::cast(out, q.dtype));
    const CudaTensor go = dense_rows(detail::cuda::cast(dout, q.dtype));
    const CudaTensor l = detail::cuda::contiguous(lse);
    CudaTensor dq32 = empty_laid_out_as(q, DType::F32);
    CudaTensor dk = empty_laid_out_as(k, q.dtype);
    CudaTensor dv = empty_laid_out_as(v, q.dtype);
    launch_backward(p, q.dtype, o, go, l, dq32, dk, dv, dev);
    return {cast_in_layout(dq32, q.dtype), std::move(dk), std::move(dv)};
}

bool attention_packed_supported(const CudaTensor& like, std::size_t heads, std::size_t head_dim) {
    // EMBER_CUDA_ATTENTION_PACKED=0 declines every packed call: MultiHeadAttention then
    // projects q, k and v separately and calls the unpacked kernel (to compare both).
    static const bool enabled = [] {
        const char* v = std::getenv("EMBER_CUDA_ATTENTION_PACKED");
        return v == nullptr || std::string_view(v) != "0";
    }();
    return enabled && float_storage(like.dtype) && heads > 0 && like.shape.rank() == 3 &&
           detail::cuda::attention_head_dim_supported(static_cast<int>(head_dim)) &&
           like.shape[0] * heads <= 65535 &&
           like.shape[1] <= static_cast<std::size_t>(std::numeric_limits<int>::max());
}

namespace {
/// The packed operand's dims: {B, L, H·E, E}, or an ArgumentError naming `op`.
std::array<std::size_t, 4> packed_dims(const CudaTensor& qkv, std::size_t heads, const char* op) {
    EMBER_CHECK(qkv.shape.rank() == 3 && heads > 0 && qkv.shape[2] % (3 * heads) == 0 &&
                    attention_packed_supported(qkv, heads, qkv.shape[2] / (3 * heads)),
                Argument, op, " (cuda): the fused kernel does not take qkv ", qkv.shape.to_string(),
                " ", dtype_name(qkv.dtype), " with ", heads,
                " heads (it needs [B, L, 3 x heads x E], f32/bf16/f16, E 32, 64 or 128)");
    const std::size_t c = qkv.shape[2] / 3;
    return {qkv.shape[0], qkv.shape[1], c, c / heads};
}
}  // namespace

std::array<CudaTensor, 2> attention_forward_packed(const CudaTensor& qkv_in, std::size_t heads,
                                                   bool causal, double scale) {
    const auto [b, l, c, e] = packed_dims(qkv_in, heads, "attention_forward_packed");
    const CudaTensor x = dense_last(qkv_in);
    const int dev = x.device();
    std::optional<CudaTensor> no_mask;
    AttnParams p = params(heads_view(x, heads, e, 0), heads_view(x, heads, e, c),
                          heads_view(x, heads, e, 2 * c), std::nullopt, no_mask, causal, scale);
    CudaTensor out = detail::cuda::empty(Shape{b, l, c}, x.dtype, dev);
    CudaTensor lse = detail::cuda::empty(Shape{b, heads, l}, DType::F32, dev);
    set_strides(p.os, heads_view(out, heads, e, 0));
    detail::cuda::launch_attention_forward(p, x.dtype, out.ptr(), static_cast<float*>(lse.ptr()),
                                           detail::cuda::stream(dev));
    return {std::move(out), std::move(lse)};
}

CudaTensor attention_backward_packed(const CudaTensor& qkv_in, const CudaTensor& out,
                                     const CudaTensor& lse, const CudaTensor& dout,
                                     std::size_t heads, bool causal, double scale) {
    const auto [b, l, c, e] = packed_dims(qkv_in, heads, "attention_backward_packed");
    EMBER_CHECK(out.shape == Shape({b, l, c}) && dout.shape == out.shape &&
                    lse.shape == Shape({b, heads, l}) && lse.dtype == DType::F32,
                Shape, "attention_backward_packed (cuda): out ", out.shape.to_string(), ", dout ",
                dout.shape.to_string(), " and lse ", lse.shape.to_string(), " do not fit qkv ",
                qkv_in.shape.to_string(), " with ", heads, " heads");
    const CudaTensor x = dense_last(qkv_in);
    const int dev = x.device();
    std::optional<CudaTensor> no_mask;
    AttnParams p = params(heads_view(x, heads, e, 0), heads_view(x, heads, e, c),
                          heads_view(x, heads, e, 2 * c), std::nullopt, no_mask, causal, scale);
    const CudaTensor o = dense_last(detail::cuda::cast(out, x.dtype));
    const CudaTensor go = dense_last(detail::cuda::cast(dout, x.dtype));
    const CudaTensor lc = detail::cuda::contiguous(lse);
    // dq accumulates atomically in f32 ([B, L, H·E], as the heads lie in qkv), then is cast
    // into its columns of the one gradient buffer; dk and dv are written there directly.
    CudaTensor dqkv = detail::cuda::empty(x.shape, x.dtype, dev);
    CudaTensor dq32 = detail::cuda::empty(Shape{b, l, c}, DType::F32, dev);
    launch_backward(p, x.dtype, heads_view(o, heads, e, 0), heads_view(go, heads, e, 0), lc,
                    heads_view(dq32, heads, e, 0), heads_view(dqkv, heads, e, c),
                    heads_view(dqkv, heads, e, 2 * c), dev);
    CudaTensor dq = dqkv;  // its first H·E columns
    dq.shape = Shape{b, l, c};
    detail::cuda::copy_into(dq, dq32);
    return dqkv;
}

}  // namespace ember::cuda
