// Batch norm on the CPU (CpuBackend::float_batch_norm, _backward, _eval): one task a block of
// channels, and each channel's values (N planes of H·W) read while they sit in L2. The composed
// form (a transpose to [C, N·H·W], var_mean, four broadcast ops forward and a dozen ops backward)
// reads and writes the whole tensor ten times and more; here the forward reads x twice from
// memory-order planes and writes y once, the backward reads x and dy twice and writes dx once.
// Statistics are PyTorch's: the mean, the biased variance by the centered two-pass sum (not
// E[x²] − mean², so channels far from zero keep their digits), the running variance unbiased.
// f16 and bf16 inputs run in f32 (statistics and per-channel vectors in f32, as CUDA's kernels);
// f64 runs in f64. EMBER_CPU_BATCH_NORM=0 declines every call, so nn::BatchNorm composes tensor
// ops as before (to compare both paths without rebuilding).
//
// float_batch_norm_relu (y = max(bn(x) + residual, 0), the residual optional) and its backward
// run the ReLU and the residual addition inside the same passes: forward x and the residual are
// read once and y written once (the composed batch norm, addition and ReLU write and read the
// activation three more times), backward the ReLU's mask is applied as dy is summed, the masked
// gradient written once (into dx's buffer, or the residual's gradient) and read back while the
// channel is still in cache. f16/bf16 data with a residual declines (nn::BatchNorm composes): the
// composed ops round bn(x) to the data's dtype before the addition, as PyTorch does, and these
// kernels keep the sum in f32. EMBER_CPU_BATCH_NORM_RELU=0 (read at each call) declines the ReLU
// forms alone.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "iter.hpp"
#include "kernels.hpp"
#include "parallel.hpp"
#include "vec8.hpp"

namespace ember::detail::cpu {
namespace {

using i64 = std::int64_t;

/// [N, C, HW] of x, after checking x and the per-channel operands.
struct BnShape {
    i64 n = 0, c = 0, hw = 1;
    i64 count() const { return n * hw; }  ///< values per channel
};

BnShape geometry(std::string_view op, const CpuTensor& x,
                 std::initializer_list<const CpuTensor*> channels) {
    EMBER_CHECK(x.shape.rank() >= 2, Shape, op, ": the input needs a batch and a channel dim, ",
                "got shape ", x.shape);
    EMBER_CHECK(is_float(x.dtype), DType, op, ": needs a float input, got ", dtype_name(x.dtype));
    BnShape g;
    g.n = static_cast<i64>(x.shape[0]);
    g.c = static_cast<i64>(x.shape[1]);
    for (std::size_t d = 2; d < x.shape.rank(); ++d) g.hw *= static_cast<i64>(x.shape[d]);
    for (const CpuTensor* t : channels) {
        EMBER_CHECK(t->shape.rank() == 1 && static_cast<i64>(t->shape[0]) == g.c, Shape, op,
                    ": per-channel operand of shape ", t->shape, " does not match the ", g.c,
                    " channels of input ", x.shape);
        EMBER_CHECK(is_float(t->dtype), DType, op, ": per-channel operands must be float, got ",
                    dtype_name(t->dtype));
    }
    return g;
}

bool kernels_enabled() {
    static const bool on = [] {
        const char* v = std::getenv("EMBER_CPU_BATCH_NORM");
        return v == nullptr || std::string_view(v) != "0";
    }();
    return on;
}

/// EMBER_CPU_BATCH_NORM_RELU=0 declines the ReLU forms (read at each call: a test or a benchmark
/// compares them with the composed ops in one process; a call takes far longer than getenv).
bool relu_kernels_enabled() {
    if (!kernels_enabled()) return false;
    const char* v = std::getenv("EMBER_CPU_BATCH_NORM_RELU");
    return v == nullptr || std::string_view(v) != "0";
}

/// The dtype the kernels compute in: f64 for f64 data, else f32.
DType compute_dtype(DType d) {
    return d == DType::F64 ? DType::F64 : DType::F32;
}

/// A per-channel operand as a contiguous vector of the compute dtype.
CpuTensor per_channel(CpuTensor t, DType a) {
    return contiguous(cast(std::move(t), a));
}

/// Channels a parallel task takes: enough values to repay a task.
std::size_t channel_grain(i64 count) {
    constexpr i64 kWorkGrain = i64{1} << 15;
    return static_cast<std::size_t>(std::max<i64>(1, kWorkGrain / std::max<i64>(count, 1)));
}

// ---- plane loops -----------------------------------------------------------------------------
// Sums go into 16 float partial sums (two 8-wide vectors) per plane, added up in double: a
// plane of thousands keeps f32's accuracy, and the adds have room to pipeline.

inline double hsum(const f32x8& a, const f32x8& b) {
    double s = 0;
    for (std::size_t l = 0; l < kW; ++l) s += double(a[l]) + double(b[l]);
    return s;
}

/// Σ x.
inline double plane_sum(const float* x, i64 n) {
    const i64 nv = n / 16 * 16;
    f32x8 s0{}, s1{};
    for (i64 j = 0; j < nv; j += 16) {
        s0 += load8(x + j);
        s1 += load8(x + j + 8);
    }
    double s = hsum(s0, s1);
    for (i64 j = nv; j < n; ++j) s += x[j];
    return s;
}
inline double plane_sum(const double* x, i64 n) {
    double s[4] = {0, 0, 0, 0};
    const i64 nv = n / 4 * 4;
    for (i64 j = 0; j < nv; j += 4)
        for (int l = 0; l < 4; ++l) s[l] += x[j + l];
    double t = (s[0] + s[1]) + (s[2] + s[3]);
    for (i64 j = nv; j < n; ++j) t += x[j];
    return t;
}

/// Σ (x − m)².
inline double plane_sq(const float* x, i64 n, float m) {
    const i64 nv = n / 16 * 16;
    const f32x8 mv = splat8(m);
    f32x8 s0{}, s1{};
    for (i64 j = 0; j < nv; j += 16) {
        const f32x8 d0 = load8(x + j) - mv, d1 = load8(x + j + 8) - mv;
        s0 += d0 * d0;
        s1 += d1 * d1;
    }
    double s = hsum(s0, s1);
    for (i64 j = nv; j < n; ++j) s += double(x[j] - m) * double(x[j] - m);
    return s;
}
inline double plane_sq(const double* x, i64 n, double m) {
    double s[4] = {0, 0, 0, 0};
    const i64 nv = n / 4 * 4;
    for (i64 j = 0; j < nv; j += 4)
        for (int l = 0; l < 4; ++l) s[l] += (x[j + l] - m) * (x[j + l] - m);
    double t = (s[0] + s[1]) + (s[2] + s[3]);
    for (i64 j = nv; j < n; ++j) t += (x[j] - m) * (x[j] - m);
    return t;
}

/// Σ g and Σ g·(x − m) of g = dy, or (Masked: the ReLU's gradient) of g = dy·[y > 0], which
/// is then written to `g`.
template <bool Masked>
inline void grad_sums_f32(const float* x, const float* dy, const float* y, float* g, i64 n, float m,
                          double& sdy, double& sdyx) {
    const i64 nv = n / 16 * 16;
    const f32x8 mv = splat8(m), zero{};
    f32x8 a0{}, a1{}, b0{}, b1{};
    for (i64 j = 0; j < nv; j += 16) {
        f32x8 g0 = load8(dy + j), g1 = load8(dy + j + 8);
        if constexpr (Masked) {
            g0 = (f32x8)((i32x8)g0 & (load8(y + j) > zero));
            g1 = (f32x8)((i32x8)g1 & (load8(y + j + 8) > zero));
            store8(g + j, g0);
            store8(g + j + 8, g1);
        }
        a0 += g0;
        a1 += g1;
        b0 += g0 * (load8(x + j) - mv);
        b1 += g1 * (load8(x + j + 8) - mv);
    }
    double s = hsum(a0, a1), t = hsum(b0, b1);
    for (i64 j = nv; j < n; ++j) {
        float gj = dy[j];
        if constexpr (Masked) {
            gj = y[j] > 0.0f ? gj : 0.0f;
            g[j] = gj;
        }
        s += gj;
        t += double(gj) * double(x[j] - m);
    }
    sdy += s;
    sdyx += t;
}

/// Σ dy and Σ dy·(x − m).
inline void plane_grad_sums(const float* x, const float* dy, i64 n, float m, double& sdy,
                            double& sdyx) {
    grad_sums_f32<false>(x, dy, nullptr, nullptr, n, m, sdy, sdyx);
}
inline void plane_grad_sums(const double* x, const double* dy, i64 n, double m, double& sdy,
                            double& sdyx) {
    double s[4] = {0, 0, 0, 0}, t[4] = {0, 0, 0, 0};
    const i64 nv = n / 4 * 4;
    for (i64 j = 0; j < nv; j += 4)
        for (int l = 0; l < 4; ++l) {
            s[l] += dy[j + l];
            t[l] += dy[j + l] * (x[j + l] - m);
        }
    double a = (s[0] + s[1]) + (s[2] + s[3]), b = (t[0] + t[1]) + (t[2] + t[3]);
    for (i64 j = nv; j < n; ++j) {
        a += dy[j];
        b += dy[j] * (x[j] - m);
    }
    sdy += a;
    sdyx += b;
}

/// y = a·x + b (vectorised by the compiler: no reduction).
template <typename T>
inline void plane_affine(const T* __restrict x, i64 n, T a, T b, T* __restrict y) {
    for (i64 j = 0; j < n; ++j) y[j] = a * x[j] + b;
}

/// y = max(a·x + b, 0): NaN stays NaN, as relu(NaN).
template <typename T>
inline void plane_affine_relu(const T* __restrict x, i64 n, T a, T b, T* __restrict y) {
    for (i64 j = 0; j < n; ++j) {
        const T t = a * x[j] + b;
        y[j] = t < T(0) ? T(0) : t;
    }
}

/// y = max((a·x + b) + r, 0): bn(x) first, as the composed ops add it to the residual.
template <typename T>
inline void plane_affine_add_relu(const T* __restrict x, const T* __restrict r, i64 n, T a, T b,
                                  T* __restrict y) {
    for (i64 j = 0; j < n; ++j) {
        const T t = (a * x[j] + b) + r[j];
        y[j] = t < T(0) ? T(0) : t;
    }
}

/// The ReLU's gradient g = dy·[y > 0] written to `g`, and Σ g and Σ g·(x − m).
inline void plane_relu_grad_sums(const float* x, const float* y, const float* dy, i64 n, float m,
                                 double& sdy, double& sdyx, float* g) {
    grad_sums_f32<true>(x, dy, y, g, n, m, sdy, sdyx);
}
inline void plane_relu_grad_sums(const double* x, const double* y, const double* dy, i64 n,
                                 double m, double& sdy, double& sdyx, double* g) {
    for (i64 j = 0; j < n; ++j) g[j] = y[j] > 0.0 ? dy[j] : 0.0;
    plane_grad_sums(x, g, n, m, sdy, sdyx);
}

/// dx = a·dx + b·x + c in place (dx holds the masked gradient).
template <typename T>
inline void plane_dx_inplace(const T* __restrict x, i64 n, T a, T b, T c, T* __restrict dx) {
    for (i64 j = 0; j < n; ++j) dx[j] = a * dx[j] + b * x[j] + c;
}

/// dx = a·dy + b·x + c.
template <typename T>
inline void plane_dx(const T* __restrict x, const T* __restrict dy, i64 n, T a, T b, T c,
                     T* __restrict dx) {
    for (i64 j = 0; j < n; ++j) dx[j] = a * dy[j] + b * x[j] + c;
}

// ---- kernels ---------------------------------------------------------------------------------

/// What the forward's normalising pass writes: bn(x), max(bn(x), 0) or max(bn(x) + r, 0).
enum class Post { None, Relu, AddRelu };

template <typename T, Post P = Post::None>
void forward_impl(const BnShape& g, const CpuTensor& x, const CpuTensor& gamma,
                  const CpuTensor& beta, const CpuTensor& rm, const CpuTensor& rv,
                  const BatchNormScalars& s, CpuTensor& y, CpuTensor& mean, CpuTensor& rstd,
                  CpuTensor& rm_out, CpuTensor& rv_out, const CpuTensor* residual = nullptr) {
    const T* X = x.data<T>();
    const T* Res = residual ? residual->data<T>() : nullptr;
    const T* G = gamma.data<T>();
    const T* B = beta.data<T>();
    const T* RM = rm.data<T>();
    const T* RV = rv.data<T>();
    T* Y = y.data<T>();
    T* M = mean.data<T>();
    T* R = rstd.data<T>();
    T* RMo = rm_out.data<T>();
    T* RVo = rv_out.data<T>();
    const i64 cnt = g.count(), stride = g.c * g.hw;
    const double unbias = double(cnt) / double(cnt - 1);
    parallel_for(std::size_t(g.c), channel_grain(cnt), [&](std::size_t c0, std::size_t c1) {
        for (std::size_t cu = c0; cu < c1; ++cu) {
            const i64 c = static_cast<i64>(cu);
            const T* xc = X + c * g.hw;
            double sum = 0;
            for (i64 q = 0; q < g.n; ++q) sum += plane_sum(xc + q * stride, g.hw);
            const T m = static_cast<T>(sum / double(cnt));
            double sq = 0;
            for (i64 q = 0; q < g.n; ++q) sq += plane_sq(xc + q * stride, g.hw, m);
            const double var = sq / double(cnt);
            const T r = static_cast<T>(1.0 / std::sqrt(var + s.epsilon));
            const T a = G[c] * r, b = B[c] - T(m) * a;
            for (i64 q = 0; q < g.n; ++q) {
                const i64 o = c * g.hw + q * stride;
                if constexpr (P == Post::None)
                    plane_affine(X + o, g.hw, a, b, Y + o);
                else if constexpr (P == Post::Relu)
                    plane_affine_relu(X + o, g.hw, a, b, Y + o);
                else
                    plane_affine_add_relu(X + o, Res + o, g.hw, a, b, Y + o);
            }
            M[c] = m;
            R[c] = r;
            RMo[c] = static_cast<T>((1.0 - s.momentum) * double(RM[c]) + s.momentum * double(m));
            RVo[c] = static_cast<T>((1.0 - s.momentum) * double(RV[c]) + s.momentum * var * unbias);
        }
    });
}

/// The batch norm's gradients; with `y` (the forward's output after a ReLU) dy is masked by
/// [y > 0] first, the masked gradient written to `dres` when given (the residual's gradient),
/// else into dx's buffer, and read back from there by the second pass.
template <typename T>
void backward_impl(const BnShape& g, const CpuTensor& x, const CpuTensor& dy,
                   const CpuTensor& gamma, const CpuTensor& mean, const CpuTensor& rstd,
                   CpuTensor& dx, CpuTensor& dgamma, CpuTensor& dbeta, const CpuTensor* y = nullptr,
                   CpuTensor* dres = nullptr) {
    const T* X = x.data<T>();
    const T* DY = dy.data<T>();
    const T* Yr = y ? y->data<T>() : nullptr;
    T* DR = dres ? dres->data<T>() : nullptr;
    const T* G = gamma.data<T>();
    const T* M = mean.data<T>();
    const T* R = rstd.data<T>();
    T* DX = dx.data<T>();
    T* DG = dgamma.data<T>();
    T* DB = dbeta.data<T>();
    const i64 cnt = g.count(), stride = g.c * g.hw;
    parallel_for(std::size_t(g.c), channel_grain(2 * cnt), [&](std::size_t c0, std::size_t c1) {
        for (std::size_t cu = c0; cu < c1; ++cu) {
            const i64 c = static_cast<i64>(cu);
            const T* xc = X + c * g.hw;
            const T* gc = DY + c * g.hw;
            // With the ReLU: the masked gradient's plane q, where pass 1 writes it.
            T* const gm = DR ? DR + c * g.hw : DX + c * g.hw;
            double sdy = 0, sdyx = 0;
            for (i64 q = 0; q < g.n; ++q) {
                if (Yr)
                    plane_relu_grad_sums(xc + q * stride, Yr + c * g.hw + q * stride,
                                         gc + q * stride, g.hw, M[c], sdy, sdyx, gm + q * stride);
                else
                    plane_grad_sums(xc + q * stride, gc + q * stride, g.hw, M[c], sdy, sdyx);
            }
            // dbeta = Σ dy, dgamma = Σ dy·x̂ = rstd·Σ dy·(x − mean), and
            // dx = γ·rstd·(dy − dbeta/n − x̂·dgamma/n) = a·dy + b·x + k.
            const double r = double(R[c]), gr = double(G[c]) * r;
            const double dgam = r * sdyx;
            const double a = gr, b = -gr * r * dgam / double(cnt);
            const double k = -gr * sdy / double(cnt) - b * double(M[c]);
            for (i64 q = 0; q < g.n; ++q) {
                T* const d = DX + c * g.hw + q * stride;
                if (!Yr)
                    plane_dx(xc + q * stride, gc + q * stride, g.hw, T(a), T(b), T(k), d);
                else if (DR)
                    plane_dx(xc + q * stride, gm + q * stride, g.hw, T(a), T(b), T(k), d);
                else
                    plane_dx_inplace(xc + q * stride, g.hw, T(a), T(b), T(k), d);
            }
            DG[c] = static_cast<T>(dgam);
            DB[c] = static_cast<T>(sdy);
        }
    });
}

template <typename T>
void eval_impl(const BnShape& g, const CpuTensor& x, const CpuTensor& gamma, const CpuTensor& beta,
               const CpuTensor& mean, const CpuTensor& var, double eps, CpuTensor& y) {
    const T* X = x.data<T>();
    const T* G = gamma.data<T>();
    const T* B = beta.data<T>();
    const T* M = mean.data<T>();
    const T* V = var.data<T>();
    T* Y = y.data<T>();
    const i64 cnt = g.count(), stride = g.c * g.hw;
    parallel_for(std::size_t(g.c), channel_grain(cnt), [&](std::size_t c0, std::size_t c1) {
        for (std::size_t cu = c0; cu < c1; ++cu) {
            const i64 c = static_cast<i64>(cu);
            const double r = 1.0 / std::sqrt(double(V[c]) + eps);
            const T a = static_cast<T>(double(G[c]) * r);
            const T b = static_cast<T>(double(B[c]) - double(M[c]) * double(G[c]) * r);
            for (i64 q = 0; q < g.n; ++q)
                plane_affine(X + c * g.hw + q * stride, g.hw, a, b, Y + c * g.hw + q * stride);
        }
    });
}

/// The forward kernels' common part: operands checked and converted, then forward_impl (with
/// the ReLU when `relu`, the residual added before it when given).
std::optional<std::array<CpuTensor, 5>> forward(std::string_view op, CpuTensor x, CpuTensor gamma,
                                                CpuTensor beta, CpuTensor rm, CpuTensor rv,
                                                std::optional<CpuTensor> residual, bool relu,
                                                const BatchNormScalars& s) {
    const BnShape g = geometry(op, x, {&gamma, &beta, &rm, &rv});
    EMBER_CHECK(g.count() > 1, Argument, op,
                ": training needs more than one value per channel, got input of shape ", x.shape);
    if (residual) {
        EMBER_CHECK(residual->shape == x.shape, Shape, op, ": residual of shape ", residual->shape,
                    " for an input of shape ", x.shape);
        // f16/bf16 round bn(x) before the addition (PyTorch's order, the composed ops'); a
        // residual of another dtype is the composed ops' promotion to sort out.
        if (residual->dtype != x.dtype || (x.dtype != DType::F32 && x.dtype != DType::F64))
            return std::nullopt;
    }
    if (g.c == 0) return std::nullopt;  // nothing to normalise: the composed path's empty result
    const DType a = compute_dtype(x.dtype), xd = x.dtype, rmd = rm.dtype, rvd = rv.dtype;
    x = contiguous(cast(std::move(x), a));
    if (residual) residual = contiguous(std::move(*residual));
    gamma = per_channel(std::move(gamma), a);
    beta = per_channel(std::move(beta), a);
    rm = per_channel(std::move(rm), a);
    rv = per_channel(std::move(rv), a);
    const Shape cs{static_cast<std::size_t>(g.c)};
    CpuTensor y = empty(x.shape, a), mean = empty(cs, a), rstd = empty(cs, a);
    CpuTensor rm_out = empty(cs, a), rv_out = empty(cs, a);
    by_float_type(a, [&]<typename T>(TypeTag<T>) {
        if (residual)
            forward_impl<T, Post::AddRelu>(g, x, gamma, beta, rm, rv, s, y, mean, rstd, rm_out,
                                           rv_out, &*residual);
        else if (relu)
            forward_impl<T, Post::Relu>(g, x, gamma, beta, rm, rv, s, y, mean, rstd, rm_out,
                                        rv_out);
        else
            forward_impl<T>(g, x, gamma, beta, rm, rv, s, y, mean, rstd, rm_out, rv_out);
    });
    return std::array<CpuTensor, 5>{cast(std::move(y), xd), std::move(mean), std::move(rstd),
                                    cast(std::move(rm_out), rmd), cast(std::move(rv_out), rvd)};
}

/// The backward kernels' common part: with `y` (a ReLU's output) dy is masked by its sign and
/// the residual's gradient returned when `residual`.
BatchNormReluGrads<CpuTensor> backward(std::string_view op, CpuTensor x, std::optional<CpuTensor> y,
                                       CpuTensor dy, CpuTensor gamma, CpuTensor mean,
                                       CpuTensor rstd, bool residual) {
    const BnShape g = geometry(op, x, {&gamma, &mean, &rstd});
    EMBER_CHECK(dy.shape == x.shape && (!y || y->shape == x.shape), Shape, op,
                ": gradient of shape ", dy.shape,
                y ? " and output of shape " + y->shape.to_string() : std::string(),
                " for an input of shape ", x.shape);
    const DType a = compute_dtype(x.dtype), xd = x.dtype, gd = gamma.dtype;
    const Shape cs{static_cast<std::size_t>(g.c)};
    BatchNormReluGrads<CpuTensor> out;
    if (x.shape.num_elements() == 0) {
        out.dx = empty(x.shape, xd);
        out.dgamma = full(cs, Scalar(0.0), gd);
        out.dbeta = full(cs, Scalar(0.0), gd);
        if (residual) out.dresidual = empty(x.shape, xd);
        return out;
    }
    x = contiguous(cast(std::move(x), a));
    if (y) y = contiguous(cast(std::move(*y), a));
    dy = contiguous(cast(std::move(dy), a));
    gamma = per_channel(std::move(gamma), a);
    mean = per_channel(std::move(mean), a);
    rstd = per_channel(std::move(rstd), a);
    CpuTensor dx = empty(x.shape, a), dgamma = empty(cs, a), dbeta = empty(cs, a);
    std::optional<CpuTensor> dres;
    if (residual) dres = empty(x.shape, a);
    by_float_type(a, [&]<typename T>(TypeTag<T>) {
        backward_impl<T>(g, x, dy, gamma, mean, rstd, dx, dgamma, dbeta, y ? &*y : nullptr,
                         dres ? &*dres : nullptr);
    });
    out.dx = cast(std::move(dx), xd);
    out.dgamma = cast(std::move(dgamma), gd);
    out.dbeta = cast(std::move(dbeta), gd);
    if (dres) out.dresidual = cast(std::move(*dres), xd);
    return out;
}

}  // namespace

std::optional<std::array<CpuTensor, 5>> batch_norm(CpuTensor x, CpuTensor gamma, CpuTensor beta,
                                                   CpuTensor rm, CpuTensor rv,
                                                   const BatchNormScalars& s) {
    if (!kernels_enabled()) return std::nullopt;
    return forward("batch_norm", std::move(x), std::move(gamma), std::move(beta), std::move(rm),
                   std::move(rv), std::nullopt, false, s);
}

std::optional<std::array<CpuTensor, 5>> batch_norm_relu(CpuTensor x, CpuTensor gamma,
                                                        CpuTensor beta, CpuTensor rm, CpuTensor rv,
                                                        std::optional<CpuTensor> residual,
                                                        const BatchNormScalars& s) {
    if (!relu_kernels_enabled()) return std::nullopt;
    return forward("batch_norm_relu", std::move(x), std::move(gamma), std::move(beta),
                   std::move(rm), std::move(rv), std::move(residual), true, s);
}

BatchNormReluGrads<CpuTensor> batch_norm_relu_backward(CpuTensor x, CpuTensor y, CpuTensor dy,
                                                       CpuTensor gamma, CpuTensor mean,
                                                       CpuTensor rstd, bool residual) {
    return backward("batch_norm_relu_backward", std::move(x), std::move(y), std::move(dy),
                    std::move(gamma), std::move(mean), std::move(rstd), residual);
}

std::array<CpuTensor, 3> batch_norm_backward(CpuTensor x, CpuTensor dy, CpuTensor gamma,
                                             CpuTensor mean, CpuTensor rstd) {
    auto d = backward("batch_norm_backward", std::move(x), std::nullopt, std::move(dy),
                      std::move(gamma), std::move(mean), std::move(rstd), false);
    return {std::move(d.dx), std::move(d.dgamma), std::move(d.dbeta)};
}

std::optional<CpuTensor> batch_norm_eval(CpuTensor x, CpuTensor gamma, CpuTensor beta,
                                         CpuTensor mean, CpuTensor var, double eps) {
    constexpr std::string_view op = "batch_norm_eval";
    if (!kernels_enabled()) return std::nullopt;
    const BnShape g = geometry(op, x, {&gamma, &beta, &mean, &var});
    const DType a = compute_dtype(x.dtype), xd = x.dtype;
    x = contiguous(cast(std::move(x), a));
    gamma = per_channel(std::move(gamma), a);
    beta = per_channel(std::move(beta), a);
    mean = per_channel(std::move(mean), a);
    var = per_channel(std::move(var), a);
    CpuTensor y = empty(x.shape, a);
    if (x.shape.num_elements() != 0)
        by_float_type(
            a, [&]<typename T>(TypeTag<T>) { eval_impl<T>(g, x, gamma, beta, mean, var, eps, y); });
    return cast(std::move(y), xd);
}

}  // namespace ember::detail::cpu
