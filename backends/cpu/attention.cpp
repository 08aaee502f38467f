// Fused scaled-dot-product attention on the CPU (AttentionKernel<CpuBackend<F>>, f32, no mask
// but the causal flag): softmax(q kᵀ · scale) v without the [Lq × Lk] matrices of the composed
// form in memory. A task takes one head's block of kBlockQ query rows; its scores sit in an
// L2-sized scratch row block, and with the causal flag the keys after the block's last query are
// never multiplied (for long sequences about half the products of the composed form, which
// computes every score and then masks; 62.5 % of them at 256 tokens). The composed form's forward
// and backward read and write the [B, H, Lq, Lk] scores about a dozen times (scale, mask, softmax,
// its three-op backward), each in a pass of its own. Backward recomputes the probabilities from the
// forward's log-sum-exp, flash-attention style; a task there is one (batch, head), which owns its
// dk and dv rows, so that nothing is summed across threads and results do not depend on the thread
// count. The products are ember's GEMM, single-threaded inside the pool's tasks, with kᵀ and vᵀ
// transposed once per head (transpose_rows says why); the exps are vec8.hpp's polynomial. The
// packed entry points read q, k and v in place from one [B, L, 3·H·E] projection and write the
// output with the heads merged ([B, L, H·E]) and the gradient of the projection as one buffer: no
// copies to split or merge heads.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>

#include "gemm.hpp"
#include "isa.hpp"  // EMBER_CPU_ISA_BEGIN/END: one copy per instruction set (EMBER_CPU_ARCH)
#include "kernels.hpp"
#include "parallel.hpp"
#include "vec8.hpp"

namespace ember::detail::cpu {
EMBER_CPU_ISA_BEGIN
namespace {

// Query rows a task takes: 64 rows of 1024 keys' scores (and their gradient) are 512 KB. 128
// measured slower on the GPT's 4 × 256 tokens at 2 threads (forward 3.3-3.9 ms a layer against
// 3.2, backward 7.5-8.3 against 6.9: less of the causal half skipped).
constexpr std::size_t kBlockQ = 64;

/// One operand's rows for every (batch, head): row i of head (b, h) at base + b·sb + h·sh + i·ld.
struct Rows {
    float* base;
    std::int64_t sb, sh, ld;
    float* at(std::size_t b, std::size_t h) const {
        return base + static_cast<std::int64_t>(b) * sb + static_cast<std::int64_t>(h) * sh;
    }
};

struct Geometry {
    std::size_t batch, heads, lq, lk, e, ev;
    bool causal;
    float scale;
    /// Keys query row i attends to: 0..i (top-left aligned, as PyTorch's is_causal) or all.
    std::size_t keys(std::size_t i) const { return causal ? std::min(lk, i + 1) : lk; }
};

/// A task's scratch (scores, their gradient) from the caching allocator: a recycled buffer, so
/// that repeated calls do not page-fault, and nothing thread-local (firmware builds have no
/// threads and no TLS).
struct Scratch {
    std::shared_ptr<Storage> s;
    explicit Scratch(std::size_t n) : s(allocate(std::max<std::size_t>(n, 1) * sizeof(float))) {}
    float* get() const { return static_cast<float*>(s->data); }
};

/// Row r's scores s[0, n) → probabilities exp(s·scale − lse), written over s; returns lse,
/// the log-sum-exp of the scaled scores.
float softmax_row(float* s, std::size_t n, float scale) {
    const f32x8 vs = splat8(scale);
    // Scaled and their maximum taken in one pass over the row.
    float mx = -std::numeric_limits<float>::infinity();
    f32x8 vm = splat8(mx);
    std::size_t j = 0;
    for (; j + kW <= n; j += kW) {
        const f32x8 x = load8(s + j) * vs;
        store8(s + j, x);
        vm = x > vm ? x : vm;
    }
    for (std::size_t l = 0; l < kW; ++l) mx = vm[l] > mx ? vm[l] : mx;
    for (; j < n; ++j) {
        s[j] *= scale;
        mx = s[j] > mx ? s[j] : mx;
    }
    const f32x8 vmx = splat8(mx);
    f32x8 acc{};
    float sum = 0.f;
    for (j = 0; j + kW <= n; j += kW) {
        f32x8 e;
        exp_nonpos_to<f32x8, i32x8>(load8(s + j) - vmx, e);
        store8(s + j, e);
        acc += e;
    }
    for (; j < n; ++j) {
        float e;
        exp_nonpos_to<float, std::int32_t>(s[j] - mx, e);
        s[j] = e;
        sum += e;
    }
    for (std::size_t l = 0; l < kW; ++l) sum += acc[l];
    const f32x8 vinv = splat8(1.0f / sum);
    for (j = 0; j + kW <= n; j += kW) store8(s + j, load8(s + j) * vinv);
    for (; j < n; ++j) s[j] *= 1.0f / sum;
    return mx + std::log(sum);
}

/// Rows [0, n) of x (c values each, row stride ld) transposed into t (c rows of n, stride n).
/// The score products q·kᵀ and dout·vᵀ then read kᵀ and vᵀ as plain row-major B: handed a
/// transposed B with 64 rows of A, the GEMM takes its dot-product path (gemm.cpp,
/// dot_preferred), which ran these products at a third of the blocked kernels' speed (the
/// fused backward took 14.5 ms a GPT layer at 2 threads, the composed form 11.5; now 6.9).
void transpose_rows(const float* x, std::int64_t ld, std::size_t n, std::size_t c, float* t) {
    constexpr std::size_t kTile = 16;  // a tile of rows read while its columns are written
    for (std::size_t j0 = 0; j0 < n; j0 += kTile) {
        const std::size_t j1 = std::min(n, j0 + kTile);
        for (std::size_t col = 0; col < c; ++col)
            for (std::size_t j = j0; j < j1; ++j)
                t[col * n + j] =
                    x[static_cast<std::int64_t>(j) * ld + static_cast<std::int64_t>(col)];
    }
}

/// The forward of one head's query rows [i0, i0 + mq): o's rows and lse[i0..], from the head's
/// kᵀ ([e × lk], row stride lk).
void forward_block(const Geometry& g, const float* q, std::int64_t ldq, const float* kt,
                   const float* v, std::int64_t ldv, float* o, std::int64_t ldo, float* lse,
                   std::size_t i0, std::size_t mq) {
    const std::size_t kend = g.causal ? std::min(g.lk, i0 + mq) : g.lk;
    const Scratch buf(mq * kend);
    float* s = buf.get();
    gemm(false, false, mq, kend, g.e, 1.0f, q + static_cast<std::int64_t>(i0) * ldq,
         static_cast<std::size_t>(ldq), kt, g.lk, 0.0f, s, kend, false);
    for (std::size_t r = 0; r < mq; ++r) {
        float* row = s + r * kend;
        const std::size_t n = g.keys(i0 + r);
        lse[i0 + r] = softmax_row(row, n, g.scale);
        std::fill(row + n, row + kend, 0.0f);
    }
    gemm(false, false, mq, g.ev, kend, 1.0f, s, kend, v, static_cast<std::size_t>(ldv), 0.0f,
         o + static_cast<std::int64_t>(i0) * ldo, static_cast<std::size_t>(ldo), false);
}

void forward(const Geometry& g, const Rows& q, const Rows& k, const Rows& v, const Rows& o,
             float* lse) {
    // Every head's kᵀ first, once (each of a head's query blocks reads it).
    const std::size_t per = g.e * g.lk;
    const Scratch kts(g.batch * g.heads * per);
    float* kt = kts.get();
    parallel_for(g.batch * g.heads, 1, [&](std::size_t t0, std::size_t t1) {
        for (std::size_t bh = t0; bh < t1; ++bh)
            transpose_rows(k.at(bh / g.heads, bh % g.heads), k.ld, g.lk, g.e, kt + bh * per);
    });
    const std::size_t blocks = (g.lq + kBlockQ - 1) / kBlockQ;
    parallel_for(g.batch * g.heads * blocks, 1, [&](std::size_t t0, std::size_t t1) {
        for (std::size_t t = t0; t < t1; ++t) {
            const std::size_t bh = t / blocks, b = bh / g.heads, h = bh % g.heads;
            const std::size_t i0 = t % blocks * kBlockQ, mq = std::min(kBlockQ, g.lq - i0);
            forward_block(g, q.at(b, h), q.ld, kt + bh * per, v.at(b, h), v.ld, o.at(b, h), o.ld,
                          lse + bh * g.lq, i0, mq);
        }
    });
}

/// dq, dk and dv of one head (b, h): its query blocks in turn, dk and dv summed over them.
void backward_head(const Geometry& g, const float* q, std::int64_t ldq, const float* k,
                   std::int64_t ldk, const float* v, std::int64_t ldv, const float* o,
                   std::int64_t ldo, const float* lse, const float* dout, std::int64_t lddo,
                   float* dq, std::int64_t lddq, float* dk, std::int64_t lddk, float* dv,
                   std::int64_t lddv) {
    for (std::size_t j = 0; j < g.lk; ++j) {
        std::fill_n(dk + static_cast<std::int64_t>(j) * lddk, g.e, 0.0f);
        std::fill_n(dv + static_cast<std::int64_t>(j) * lddv, g.ev, 0.0f);
    }
    const std::size_t most = std::min(kBlockQ, g.lq);
    const Scratch buf(2 * most * g.lk + most + (g.e + g.ev) * g.lk);
    float* p = buf.get();
    float* dp = p + most * g.lk;
    float* delta = dp + most * g.lk;
    float* kt = delta + most;  // kᵀ [e × lk] and vᵀ [ev × lk] (transpose_rows says why)
    float* vt = kt + g.e * g.lk;
    transpose_rows(k, ldk, g.lk, g.e, kt);
    transpose_rows(v, ldv, g.lk, g.ev, vt);
    for (std::size_t i0 = 0; i0 < g.lq; i0 += kBlockQ) {
        const std::size_t mq = std::min(kBlockQ, g.lq - i0);
        const std::size_t kend = g.causal ? std::min(g.lk, i0 + mq) : g.lk;
        const float* qb = q + static_cast<std::int64_t>(i0) * ldq;
        const float* dob = dout + static_cast<std::int64_t>(i0) * lddo;
        // delta_i = Σ_e dout·out over row i: Σ_j p_ij dp_ij, the softmax backward's row term.
        for (std::size_t r = 0; r < mq; ++r) {
            const float* a = dob + static_cast<std::int64_t>(r) * lddo;
            const float* b = o + static_cast<std::int64_t>(i0 + r) * ldo;
            f32x8 acc{};
            std::size_t c = 0;
            for (; c + kW <= g.ev; c += kW) acc += load8(a + c) * load8(b + c);
            float d = 0.f;
            for (; c < g.ev; ++c) d += a[c] * b[c];
            for (std::size_t l = 0; l < kW; ++l) d += acc[l];
            delta[r] = d;
        }
        // The probabilities again, from the forward's log-sum-exp.
        gemm(false, false, mq, kend, g.e, 1.0f, qb, static_cast<std::size_t>(ldq), kt, g.lk, 0.0f,
             p, kend, false);
        for (std::size_t r = 0; r < mq; ++r) {
            float* row = p + r * kend;
            const std::size_t n = g.keys(i0 + r);
            const f32x8 vs = splat8(g.scale), vl = splat8(lse[i0 + r]);
            std::size_t j = 0;
            for (; j + kW <= n; j += kW) {
                f32x8 e;
                exp_nonpos_to<f32x8, i32x8>(load8(row + j) * vs - vl, e);
                store8(row + j, e);
            }
            for (; j < n; ++j)
                exp_nonpos_to<float, std::int32_t>(row[j] * g.scale - lse[i0 + r], row[j]);
            std::fill(row + n, row + kend, 0.0f);
        }
        // dv += pᵀ · dout
        gemm(true, false, kend, g.ev, mq, 1.0f, p, kend, dob, static_cast<std::size_t>(lddo), 1.0f,
             dv, static_cast<std::size_t>(lddv), false);
        // dp = dout · vᵀ; ds = p (dp − delta) · scale, written over dp
        gemm(false, false, mq, kend, g.ev, 1.0f, dob, static_cast<std::size_t>(lddo), vt, g.lk,
             0.0f, dp, kend, false);
        for (std::size_t r = 0; r < mq; ++r) {
            const float* pr = p + r * kend;
            float* dr = dp + r * kend;
            const f32x8 vd = splat8(delta[r]), vs = splat8(g.scale);
            std::size_t j = 0;
            for (; j + kW <= kend; j += kW)
                store8(dr + j, load8(pr + j) * (load8(dr + j) - vd) * vs);
            for (; j < kend; ++j) dr[j] = pr[j] * (dr[j] - delta[r]) * g.scale;
        }
        // dq = ds · k; dk += dsᵀ · q
        gemm(false, false, mq, g.e, kend, 1.0f, dp, kend, k, static_cast<std::size_t>(ldk), 0.0f,
             dq + static_cast<std::int64_t>(i0) * lddq, static_cast<std::size_t>(lddq), false);
        gemm(true, false, kend, g.e, mq, 1.0f, dp, kend, qb, static_cast<std::size_t>(ldq), 1.0f,
             dk, static_cast<std::size_t>(lddk), false);
    }
}

void backward(const Geometry& g, const Rows& q, const Rows& k, const Rows& v, const Rows& o,
              const float* lse, const Rows& dout, const Rows& dq, const Rows& dk, const Rows& dv) {
    parallel_for(g.batch * g.heads, 1, [&](std::size_t t0, std::size_t t1) {
        for (std::size_t bh = t0; bh < t1; ++bh) {
            const std::size_t b = bh / g.heads, h = bh % g.heads;
            backward_head(g, q.at(b, h), q.ld, k.at(b, h), k.ld, v.at(b, h), v.ld, o.at(b, h), o.ld,
                          lse + bh * g.lq, dout.at(b, h), dout.ld, dq.at(b, h), dq.ld, dk.at(b, h),
                          dk.ld, dv.at(b, h), dv.ld);
        }
    });
}

/// A [B, H, L, E] operand's rows, in place. Copied first where the GEMM could not read its
/// rows as a matrix: a last dim that is not stride-1, rows closer than E apart (a broadcast
/// sequence dim; BLAS refuses a leading dim below the row length) or a negative stride.
Rows heads_of(CpuTensor& t) {
    const auto& st = t.strides;
    if (st[3] != 1 || st[2] < static_cast<std::int64_t>(t.shape[3]) || st[0] < 0 || st[1] < 0)
        t = contiguous(std::move(t));
    return {t.data<float>(), t.strides[0], t.strides[1], t.strides[2]};
}

/// Head h of the packed [B, L, 3·H·E] projection's part `part` (0 q, 1 k, 2 v), or of a
/// merged [B, L, H·E] tensor with part 0 and width H·E.
Rows packed_rows(float* base, std::size_t len, std::size_t width, std::size_t e, std::size_t heads,
                 std::size_t part) {
    const auto w = static_cast<std::int64_t>(width);
    return {base + part * heads * e, static_cast<std::int64_t>(len) * w,
            static_cast<std::int64_t>(e), w};
}

}  // namespace

std::array<CpuTensor, 2> attention_forward(CpuTensor q, CpuTensor k, CpuTensor v, bool causal,
                                           double scale) {
    const Shape& qs = q.shape;
    const Geometry g{qs[0], qs[1],      qs[2],  k.shape[2],
                     qs[3], v.shape[3], causal, static_cast<float>(scale)};
    CpuTensor out = empty(Shape{g.batch, g.heads, g.lq, g.ev}, DType::F32);
    CpuTensor lse = empty(Shape{g.batch, g.heads, g.lq}, DType::F32);
    forward(g, heads_of(q), heads_of(k), heads_of(v), heads_of(out), lse.data<float>());
    return {std::move(out), std::move(lse)};
}

std::array<CpuTensor, 3> attention_backward(CpuTensor q, CpuTensor k, CpuTensor v, CpuTensor out,
                                            const CpuTensor& lse, CpuTensor dout, bool causal,
                                            double scale) {
    const Shape& qs = q.shape;
    const Geometry g{qs[0], qs[1],      qs[2],  k.shape[2],
                     qs[3], v.shape[3], causal, static_cast<float>(scale)};
    CpuTensor dq = empty(q.shape, DType::F32), dk = empty(k.shape, DType::F32),
              dv = empty(v.shape, DType::F32);
    const CpuTensor l = contiguous(lse);
    backward(g, heads_of(q), heads_of(k), heads_of(v), heads_of(out), l.data<float>(),
             heads_of(dout), heads_of(dq), heads_of(dk), heads_of(dv));
    return {std::move(dq), std::move(dk), std::move(dv)};
}

std::array<CpuTensor, 2> attention_forward_packed(CpuTensor qkv, std::size_t heads, bool causal,
                                                  double scale) {
    qkv = contiguous(std::move(qkv));
    const std::size_t batch = qkv.shape[0], len = qkv.shape[1], width = qkv.shape[2];
    const std::size_t e = width / (3 * heads);
    const Geometry g{batch, heads, len, len, e, e, causal, static_cast<float>(scale)};
    CpuTensor out = empty(Shape{batch, len, heads * e}, DType::F32);
    CpuTensor lse = empty(Shape{batch, heads, len}, DType::F32);
    float* base = qkv.data<float>();
    forward(g, packed_rows(base, len, width, e, heads, 0),
            packed_rows(base, len, width, e, heads, 1), packed_rows(base, len, width, e, heads, 2),
            packed_rows(out.data<float>(), len, heads * e, e, heads, 0), lse.data<float>());
    return {std::move(out), std::move(lse)};
}

CpuTensor attention_backward_packed(CpuTensor qkv, CpuTensor out, const CpuTensor& lse,
                                    CpuTensor dout, std::size_t heads, bool causal, double scale) {
    qkv = contiguous(std::move(qkv));
    out = contiguous(std::move(out));
    dout = contiguous(std::move(dout));
    const CpuTensor l = contiguous(lse);
    const std::size_t batch = qkv.shape[0], len = qkv.shape[1], width = qkv.shape[2];
    const std::size_t e = width / (3 * heads);
    const Geometry g{batch, heads, len, len, e, e, causal, static_cast<float>(scale)};
    CpuTensor grad = empty(qkv.shape, DType::F32);
    float* x = qkv.data<float>();
    float* d = grad.data<float>();
    const std::size_t merged = heads * e;
    backward(g, packed_rows(x, len, width, e, heads, 0), packed_rows(x, len, width, e, heads, 1),
             packed_rows(x, len, width, e, heads, 2),
             packed_rows(out.data<float>(), len, merged, e, heads, 0), l.data<float>(),
             packed_rows(dout.data<float>(), len, merged, e, heads, 0),
             packed_rows(d, len, width, e, heads, 0), packed_rows(d, len, width, e, heads, 1),
             packed_rows(d, len, width, e, heads, 2));
    return grad;
}

EMBER_CPU_ISA_END
}  // namespace ember::detail::cpu
