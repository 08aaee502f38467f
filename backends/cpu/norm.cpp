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

}  // namespace

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
