// Layer norm on the CPU: one task a block of rows, and each row read from memory once. Its three
// passes (sum, centered sum of squares, normalise) run while the row sits in L1/L2, where the
// composed form reads and writes the whole tensor five times. The variance is the centered
// two-pass one (not E[x²] - mean²), as PyTorch's, so that rows far from zero keep their digits.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <optional>

#include "../common/norm_check.hpp"
#include "isa.hpp"  // EMBER_CPU_ISA_BEGIN/END: one copy per instruction set (EMBER_CPU_ARCH)
#include "kernels.hpp"
#include "parallel.hpp"
#include "vec8.hpp"

namespace ember::detail::cpu {
EMBER_CPU_ISA_BEGIN
namespace {

// Elements a parallel task takes at least (as the reductions').
constexpr std::size_t kWorkGrain = std::size_t{1} << 15;

// Two 8-wide float accumulators per pass: 16 partial sums keep f32 rows of thousands accurate
// (each partial adds c/16 terms) and give the adds room to pipeline.
inline double hsum(const f32x8& a, const f32x8& b) {
    double s = 0.0;
    for (int l = 0; l < 8; ++l) s += double(a[l]) + double(b[l]);
    return s;
}

// Mean and 1/sqrt(biased variance + eps) of one f32 row.
void stats_row(const float* x, std::size_t c, double eps, float& mean, float& rstd) {
    const std::size_t cv = c / 16 * 16;
    f32x8 s0{}, s1{};
    for (std::size_t j = 0; j < cv; j += 16) {
        s0 += load8(x + j);
        s1 += load8(x + j + 8);
    }
    double sum = hsum(s0, s1);
    for (std::size_t j = cv; j < c; ++j) sum += x[j];
    const float m = static_cast<float>(sum / double(c));
    const f32x8 mv = f32x8{} + m;
    f32x8 q0{}, q1{};
    for (std::size_t j = 0; j < cv; j += 16) {
        const f32x8 d0 = load8(x + j) - mv, d1 = load8(x + j + 8) - mv;
        q0 += d0 * d0;
        q1 += d1 * d1;
    }
    double sq = hsum(q0, q1);
    for (std::size_t j = cv; j < c; ++j) sq += double(x[j] - m) * double(x[j] - m);
    mean = m;
    rstd = static_cast<float>(1.0 / std::sqrt(sq / double(c) + eps));
}

void normalise_row(const float* x, const float* g, const float* b, std::size_t c, float mean,
                   float rstd, float* y) {
    const std::size_t cv = c / 8 * 8;
    const f32x8 mv = f32x8{} + mean, rv = f32x8{} + rstd;
    // Four loops rather than branches inside one, so that each vectorises on its own.
    if (g && b) {
        for (std::size_t j = 0; j < cv; j += 8)
            store8(y + j, (load8(x + j) - mv) * rv * load8(g + j) + load8(b + j));
        for (std::size_t j = cv; j < c; ++j) y[j] = (x[j] - mean) * rstd * g[j] + b[j];
    } else if (g) {
        for (std::size_t j = 0; j < cv; j += 8)
            store8(y + j, (load8(x + j) - mv) * rv * load8(g + j));
        for (std::size_t j = cv; j < c; ++j) y[j] = (x[j] - mean) * rstd * g[j];
    } else if (b) {
        for (std::size_t j = 0; j < cv; j += 8)
            store8(y + j, (load8(x + j) - mv) * rv + load8(b + j));
        for (std::size_t j = cv; j < c; ++j) y[j] = (x[j] - mean) * rstd + b[j];
    } else {
        for (std::size_t j = 0; j < cv; j += 8) store8(y + j, (load8(x + j) - mv) * rv);
        for (std::size_t j = cv; j < c; ++j) y[j] = (x[j] - mean) * rstd;
    }
}

// f64 rows: plain loops, double throughout.
void stats_row(const double* x, std::size_t c, double eps, double& mean, double& rstd) {
    double sum = 0.0;
    for (std::size_t j = 0; j < c; ++j) sum += x[j];
    const double m = sum / double(c);
    double sq = 0.0;
    for (std::size_t j = 0; j < c; ++j) sq += (x[j] - m) * (x[j] - m);
    mean = m;
    rstd = 1.0 / std::sqrt(sq / double(c) + eps);
}

void normalise_row(const double* x, const double* g, const double* b, std::size_t c, double mean,
                   double rstd, double* y) {
    for (std::size_t j = 0; j < c; ++j) {
        double v = (x[j] - mean) * rstd;
        if (g) v *= g[j];
        if (b) v += b[j];
        y[j] = v;
    }
}

template <typename T>
void layer_norm_rows(const CpuTensor& x, const std::optional<CpuTensor>& gamma,
                     const std::optional<CpuTensor>& beta, double eps, CpuTensor& y,
                     CpuTensor& mean, CpuTensor& rstd) {
    const std::size_t c = x.shape[x.shape.rank() - 1];
    const std::size_t rows = c == 0 ? 0 : x.num_elements() / c;
    const T* xp = x.data<T>();
    const T* gp = gamma ? gamma->data<T>() : nullptr;
    const T* bp = beta ? beta->data<T>() : nullptr;
    T* yp = y.data<T>();
    T* mp = mean.data<T>();
    T* rp = rstd.data<T>();
    const std::size_t grain = std::max<std::size_t>(1, kWorkGrain / std::max<std::size_t>(c, 1));
    parallel_for(rows, grain, [&](std::size_t r0, std::size_t r1) {
        for (std::size_t r = r0; r < r1; ++r) {
            stats_row(xp + r * c, c, eps, mp[r], rp[r]);
            normalise_row(xp + r * c, gp, bp, c, mp[r], rp[r], yp + r * c);
        }
    });
}

// Rows a task of the backward takes: a number fixed by the row count alone, so that dgamma's
// and dbeta's partial sums (one per block of rows, merged in block order) do not depend on the
// thread count. 16 rows, or more where there would be over 1024 blocks: the partial sums
// (2·c floats a block) then stay below a few MB whatever the batch.
std::size_t backward_rows(std::size_t rows) {
    return std::max<std::size_t>(16, (rows + 1023) / 1024);
}

/// The backward of f32 rows [rows, c]: dx = rstd·(g' − mean(g') − x̂·mean(g'·x̂)) (+ acc), with
/// x̂ = (x − mean)·rstd and g' = g·gamma, each row read while it sits in L1; and, with gamma,
/// block b's Σ g·x̂ and Σ g over its rows into part[b][0] and part[b][1] (c values each).
void layer_norm_backward_rows(const float* x, const float* g, const float* gamma, const float* mean,
                              const float* rstd, const float* acc, std::size_t rows, std::size_t c,
                              float* dx, float* part) {
    const std::size_t cv = c / 8 * 8;
    const std::size_t per = backward_rows(rows);
    const std::size_t blocks = (rows + per - 1) / per;
    parallel_for(blocks, 1, [&](std::size_t b0, std::size_t b1) {
        for (std::size_t blk = b0; blk < b1; ++blk) {
            float* pg = gamma ? part + blk * 2 * c : nullptr;
            float* pb = gamma ? pg + c : nullptr;
            if (gamma) std::fill_n(pg, 2 * c, 0.0f);
            const std::size_t r1 = std::min(rows, (blk + 1) * per);
            for (std::size_t r = blk * per; r < r1; ++r) {
                const float* xr = x + r * c;
                const float* gr = g + r * c;
                const f32x8 mv = splat8(mean[r]), rv = splat8(rstd[r]);
                f32x8 a0{}, a1{};  // Σ g', Σ g'·x̂
                std::size_t j = 0;
                for (; j < cv; j += 8) {
                    const f32x8 xh = (load8(xr + j) - mv) * rv, gv = load8(gr + j);
                    const f32x8 gg = gamma ? gv * load8(gamma + j) : gv;
                    a0 += gg;
                    a1 += gg * xh;
                    if (gamma) {
                        store8(pg + j, load8(pg + j) + gv * xh);
                        store8(pb + j, load8(pb + j) + gv);
                    }
                }
                double s0 = 0.0, s1 = 0.0;
                for (int l = 0; l < 8; ++l) {
                    s0 += double(a0[l]);
                    s1 += double(a1[l]);
                }
                for (; j < c; ++j) {
                    const float xh = (xr[j] - mean[r]) * rstd[r];
                    const float gg = gamma ? gr[j] * gamma[j] : gr[j];
                    s0 += gg;
                    s1 += double(gg) * xh;
                    if (gamma) {
                        pg[j] += gr[j] * xh;
                        pb[j] += gr[j];
                    }
                }
                const float m1 = static_cast<float>(s0 / double(c));
                const float m2 = static_cast<float>(s1 / double(c));
                const f32x8 m1v = splat8(m1), m2v = splat8(m2);
                float* dr = dx + r * c;
                const float* ar = acc ? acc + r * c : nullptr;
                for (j = 0; j < cv; j += 8) {
                    const f32x8 xh = (load8(xr + j) - mv) * rv, gv = load8(gr + j);
                    const f32x8 gg = gamma ? gv * load8(gamma + j) : gv;
                    f32x8 d = (gg - m1v - xh * m2v) * rv;
                    if (ar) d += load8(ar + j);
                    store8(dr + j, d);
                }
                for (; j < c; ++j) {
                    const float xh = (xr[j] - mean[r]) * rstd[r];
                    const float gg = gamma ? gr[j] * gamma[j] : gr[j];
                    float d = (gg - m1 - xh * m2) * rstd[r];
                    if (ar) d += ar[j];
                    dr[j] = d;
                }
            }
        }
    });
}

}  // namespace

std::optional<std::array<CpuTensor, 3>> layer_norm_backward(CpuTensor x, CpuTensor grad,
                                                            std::optional<CpuTensor> gamma,
                                                            CpuTensor mean, CpuTensor rstd,
                                                            std::optional<CpuTensor> acc) {
    const auto f32 = [](const CpuTensor& t) { return t.dtype == DType::F32; };
    if (!f32(x) || !f32(grad) || !f32(mean) || !f32(rstd) || (gamma && !f32(*gamma)) ||
        (acc && !f32(*acc)) || x.shape.rank() == 0 || grad.shape != x.shape ||
        (acc && acc->shape != x.shape))
        return std::nullopt;
    const std::size_t c = x.shape[x.shape.rank() - 1];
    const std::size_t rows = c == 0 ? 0 : x.num_elements() / c;
    if (rows == 0 || (gamma && gamma->num_elements() != c) || mean.num_elements() != rows ||
        rstd.num_elements() != rows)
        return std::nullopt;
    x = contiguous(std::move(x));
    grad = contiguous(std::move(grad));
    mean = contiguous(std::move(mean));
    rstd = contiguous(std::move(rstd));
    if (gamma) gamma = contiguous(std::move(*gamma));
    if (acc) acc = contiguous(std::move(*acc));
    // dx over the gradient's (or the accumulated gradient's) buffer where nobody else holds it.
    CpuTensor dx = acc && acc->is_unique()    ? *acc
                   : grad.is_unique() && !acc ? grad
                                              : empty(x.shape, DType::F32);
    const std::size_t per = backward_rows(rows);
    const std::size_t blocks = (rows + per - 1) / per;
    CpuTensor part = empty(Shape{gamma ? blocks * 2 * c : 1}, DType::F32);
    layer_norm_backward_rows(x.data<float>(), grad.data<float>(),
                             gamma ? gamma->data<float>() : nullptr, mean.data<float>(),
                             rstd.data<float>(), acc ? acc->data<float>() : nullptr, rows, c,
                             dx.data<float>(), part.data<float>());
    CpuTensor dgamma = empty(Shape{gamma ? c : 0}, DType::F32);
    CpuTensor dbeta = empty(Shape{gamma ? c : 0}, DType::F32);
    if (gamma) {
        // The blocks' partial sums in block order, in double.
        const float* p = part.data<float>();
        float* dg = dgamma.data<float>();
        float* db = dbeta.data<float>();
        parallel_for(c, std::max<std::size_t>(1, kWorkGrain / blocks),
                     [&](std::size_t j0, std::size_t j1) {
                         for (std::size_t j = j0; j < j1; ++j) {
                             double sg = 0.0, sb = 0.0;
                             for (std::size_t blk = 0; blk < blocks; ++blk) {
                                 sg += p[blk * 2 * c + j];
                                 sb += p[blk * 2 * c + c + j];
                             }
                             dg[j] = static_cast<float>(sg);
                             db[j] = static_cast<float>(sb);
                         }
                     });
    }
    return std::array<CpuTensor, 3>{std::move(dx), std::move(dgamma), std::move(dbeta)};
}

std::optional<std::array<CpuTensor, 4>> add_layer_norm(CpuTensor x, CpuTensor residual,
                                                       std::optional<CpuTensor> gamma,
                                                       std::optional<CpuTensor> beta, double eps) {
    const auto f32 = [](const CpuTensor& t) { return t.dtype == DType::F32; };
    if (!f32(x) || !f32(residual) || (gamma && !f32(*gamma)) || (beta && !f32(*beta)) ||
        residual.shape != x.shape || x.shape.rank() == 0 || x.num_elements() == 0)
        return std::nullopt;
    norm::check_layer_norm(x, gamma, beta);
    x = contiguous(std::move(x));
    residual = contiguous(std::move(residual));
    for (auto* p : {&gamma, &beta})
        if (*p) **p = contiguous(std::move(**p));
    const std::size_t c = x.shape[x.shape.rank() - 1];
    const std::size_t rows = c == 0 ? 0 : x.num_elements() / c;
    Shape stat_shape = x.shape;
    stat_shape[stat_shape.rank() - 1] = 1;
    CpuTensor sum = empty(x.shape, DType::F32), y = empty(x.shape, DType::F32);
    CpuTensor mean = empty(stat_shape, DType::F32), rstd = empty(stat_shape, DType::F32);
    const float* xp = x.data<float>();
    const float* rp = residual.data<float>();
    const float* gp = gamma ? gamma->data<float>() : nullptr;
    const float* bp = beta ? beta->data<float>() : nullptr;
    float* sp = sum.data<float>();
    float* yp = y.data<float>();
    float* mp = mean.data<float>();
    float* sdp = rstd.data<float>();
    const std::size_t cv = c / 8 * 8;
    const std::size_t grain = std::max<std::size_t>(1, kWorkGrain / std::max<std::size_t>(c, 1));
    // Each row's sum is written and normalised while it sits in L1: x and the residual read
    // once, the sum and the normed rows written once (the composed form: three passes more).
    parallel_for(rows, grain, [&](std::size_t r0, std::size_t r1) {
        for (std::size_t r = r0; r < r1; ++r) {
            const float* a = xp + r * c;
            const float* b = rp + r * c;
            float* o = sp + r * c;
            std::size_t j = 0;
            for (; j < cv; j += 8) store8(o + j, load8(a + j) + load8(b + j));
            for (; j < c; ++j) o[j] = a[j] + b[j];
            stats_row(o, c, eps, mp[r], sdp[r]);
            normalise_row(o, gp, bp, c, mp[r], sdp[r], yp + r * c);
        }
    });
    return std::array<CpuTensor, 4>{std::move(sum), std::move(y), std::move(mean), std::move(rstd)};
}

std::array<CpuTensor, 3> layer_norm(CpuTensor x, std::optional<CpuTensor> gamma,
                                    std::optional<CpuTensor> beta, double eps) {
    norm::check_layer_norm(x, gamma, beta);
    const DType dt = x.dtype;
    // Halves compute in f32 (each result rounded once), the rest in their own type; gamma and
    // beta are brought to that type directly, never through the halves.
    const DType cd = dt == DType::F32 || dt == DType::F64 ? dt : DType::F32;
    for (auto* p : {&gamma, &beta})
        if (*p) **p = contiguous(cast(std::move(**p), cd));
    if (cd != dt) {
        auto r = EMBER_CPU_ISA_NS::layer_norm(cast(std::move(x), cd), std::move(gamma),
                                              std::move(beta), eps);
        for (auto& t : r) t = cast(std::move(t), dt);
        return r;
    }
    x = contiguous(std::move(x));
    Shape stat_shape = x.shape;
    stat_shape[stat_shape.rank() - 1] = 1;
    CpuTensor y = x.is_unique() ? x : empty(x.shape, dt);
    CpuTensor mean = empty(stat_shape, dt), rstd = empty(stat_shape, dt);
    if (dt == DType::F32)
        layer_norm_rows<float>(x, gamma, beta, eps, y, mean, rstd);
    else
        layer_norm_rows<double>(x, gamma, beta, eps, y, mean, rstd);
    return {std::move(y), std::move(mean), std::move(rstd)};
}

EMBER_CPU_ISA_END
}  // namespace ember::detail::cpu
