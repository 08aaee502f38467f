#pragma once
// Tensor ops composed from the primitives every backend has (Burn's Tensor methods that
// ember::Tensor does not spell as members): inverse trigonometric and hyperbolic functions,
// cumulative scans, reductions over several dims, split/roll/take/unfold, gather_nd and
// scatter_nd, cross and dot products, median, categorical sampling. Because they only call
// Tensor ops, every backend and decorator (Cpu, Vulkan, Cuda, Fusion, Autodiff, Dispatch) has
// them at once, gradients included. Each checks its own arguments before it computes anything,
// so a misuse names the op called, not the primitive it would have reached. They are free
// functions of namespace ember, found by argument-dependent lookup: `cumsum(x, 1)`,
// `ember::atan2(y, x)`.
#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <numbers>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "check.hpp"
#include "tensor.hpp"

namespace ember {

namespace detail::composed {
/// A list of dims normalised for `op`; a dim listed twice is an error (as in PyTorch).
template <std::size_t D>
std::vector<std::size_t> dims(const std::vector<long>& list, const Shape& shape, const char* op) {
    std::vector<std::size_t> out;
    for (long l : list) {
        const std::size_t d = normalize_dim(l, D, op);
        EMBER_CHECK(std::find(out.begin(), out.end(), d) == out.end(), Dim, op, ": dim ", d,
                    " is listed twice for shape ", shape.to_string());
        out.push_back(d);
    }
    return out;
}
/// "[a, b, c]" of a list of integers (error messages).
template <typename T>
std::string list(const std::vector<T>& v) {
    std::string s = "[";
    for (std::size_t i = 0; i < v.size(); ++i) {
        if (i) s += ", ";
        s += std::to_string(v[i]);
    }
    return s + "]";
}
/// The broadcast shape of two same-rank operands of `op` (ShapeError naming both otherwise).
template <typename T>
Shape broadcast(const T& a, const T& b, const char* op) {
    return broadcast_shapes(a.shape(), b.shape(), op);
}
/// Hillis-Steele inclusive scan along `dim`: after the step of width s each element holds the
/// combination of the 2s elements ending at it, so ceil(log2 n) steps of slices, one
/// elementwise op and a cat; every backend has those, and autodiff differentiates them.
template <typename T, typename F>
T scan(const T& x, long dim, const char* op, F combine) {
    constexpr std::size_t D = T::rank;
    const std::size_t d = normalize_dim(dim, D, op);
    const long ld = static_cast<long>(d);
    const std::size_t n = x.shape()[d];
    T y = x;
    for (std::size_t s = 1; s < n; s *= 2)
        y = T::cat({y.narrow(ld, 0, s), combine(y.narrow(ld, s, n - s), y.narrow(ld, 0, n - s))},
                   ld);
    return y;
}
/// atan on [-inf, inf] from primitives: three half-angle steps u ← u / (1 + √(1 + u²)) take any
/// x into |u| ≤ tan(π/16) ≈ 0.199, where the Taylor series to u¹⁹ is exact to double precision;
/// atan(x) = 8·atan(u). The first step is written as sign(x) / (1/|x| + √(1/x² + 1)) for |x| > 1
/// so that x² never overflows; each branch sees only inputs it is safe on, so that neither
/// produces an infinity whose zero gradient would turn into NaN.
template <Backend B, std::size_t D>
Tensor<B, D> atan(const Tensor<B, D>& x) {
    auto ax = x.abs();
    auto big = ax.greater_elem(1.0);
    auto xs = x.mask_fill(big, 0.0);
    auto small_step = xs / ((xs * xs + 1.0).sqrt() + 1.0);
    auto inv = ax.mask_fill(big.not_(), 1.0).recip();
    auto big_step = x.sign() / ((inv * inv + 1.0).sqrt() + inv);
    auto u = small_step.mask_where(big, big_step);
    for (int i = 0; i < 2; ++i) u = u / ((u * u + 1.0).sqrt() + 1.0);
    auto z = u * u;
    // atan(u) = u · Σ (-z)^k / (2k + 1), k = 0..9, by Horner's rule.
    auto p = z * (-1.0 / 19.0) + 1.0 / 17.0;
    for (int k = 7; k >= 0; --k) {
        const double c = (k % 2 == 0 ? 1.0 : -1.0) / (2.0 * k + 1.0);
        p = p * z + c;
    }
    return u * p * 8.0;
}
/// π in every element of x's shape.
template <Backend B, std::size_t D>
Tensor<B, D> pi_like(const Tensor<B, D>& x) {
    return x.full_like(std::numbers::pi);
}
}  // namespace detail::composed

// ---- elementwise (float) ---------------------------------------------------------------------
/// tan(x) = sin(x) / cos(x).
template <Backend B, std::size_t D>
Tensor<B, D> tan(const Tensor<B, D>& x) {
    return x.sin() / x.cos();
}
/// sinh(x): 2t / (1 - t²) with t = tanh(x/2) for |x| < 1 (no cancellation near 0), else
/// (eˣ - e⁻ˣ) / 2.
template <Backend B, std::size_t D>
Tensor<B, D> sinh(const Tensor<B, D>& x) {
    auto large = x.abs().greater_equal_elem(1.0);
    auto t = (x.mask_fill(large, 0.0) * 0.5).tanh();
    auto near = t * 2.0 / (1.0 - t * t);
    auto xl = x.mask_fill(large.not_(), 1.0);
    auto far = (xl.exp() - (-xl).exp()) * 0.5;
    return near.mask_where(large, far);
}
/// cosh(x) = (eˣ + e⁻ˣ) / 2.
template <Backend B, std::size_t D>
Tensor<B, D> cosh(const Tensor<B, D>& x) {
    return (x.exp() + (-x).exp()) * 0.5;
}
/// asinh(x) = sign(x) · log1p(|x| + x² / (1 + √(x² + 1))), and log(2|x|) where x² would lose
/// the 1 (|x| > 1e8).
template <Backend B, std::size_t D>
Tensor<B, D> asinh(const Tensor<B, D>& x) {
    auto a = x.abs();
    auto big = a.greater_elem(1e8);
    auto s = a.mask_fill(big, 0.0);
    auto s2 = s * s;
    auto small_r = (s + s2 / ((s2 + 1.0).sqrt() + 1.0)).log1p();
    auto big_r = a.mask_fill(big.not_(), 1.0).log() + std::numbers::ln2;
    auto r = small_r.mask_where(big, big_r);
    return r.mask_where(x.lower_elem(0.0), -r);
}
/// acosh(x) = log1p((x - 1) + √((x - 1)(x + 1))) for x ≥ 1 (NaN below), log(2x) past 1e8.
template <Backend B, std::size_t D>
Tensor<B, D> acosh(const Tensor<B, D>& x) {
    auto big = x.greater_elem(1e8);
    auto s = x.mask_fill(big, 1.0);
    auto small_r = ((s - 1.0) + ((s - 1.0) * (s + 1.0)).sqrt()).log1p();
    auto big_r = x.mask_fill(big.not_(), 1.0).log() + std::numbers::ln2;
    return small_r.mask_where(big, big_r);
}
/// atanh(x) = log1p(2x / (1 - x)) / 2: ±inf at ±1, NaN outside [-1, 1].
template <Backend B, std::size_t D>
Tensor<B, D> atanh(const Tensor<B, D>& x) {
    return (x * 2.0 / (1.0 - x)).log1p() * 0.5;
}
/// atan(x), in (-π/2, π/2) (see detail::composed::atan for how).
template <Backend B, std::size_t D>
Tensor<B, D> atan(const Tensor<B, D>& x) {
    return detail::composed::atan(x);
}
/// atan2(y, x): the angle of the point (x, y), in [-π, π] (torch.atan2; the operands
/// broadcast). Computed as 2·atan(y / (r + x)) for x > 0 and 2·atan((r - x) / y) otherwise
/// (r = √(x² + y²)), which never cancels, after scaling both by max(|x|, |y|) so that r cannot
/// overflow; an infinite operand becomes ±1 and a finite one beside it ±1e-30, which keeps the
/// limit angles (atan2(1, -inf) = π, atan2(inf, inf) = π/4).
template <Backend B, std::size_t D>
Tensor<B, D> atan2(const Tensor<B, D>& y, const Tensor<B, D>& x) {
    const Shape s = detail::composed::broadcast(y, x, "atan2");
    auto yb = y.template expand<D>(s), xb = x.template expand<D>(s);
    auto iy = yb.abs().equal_elem(std::numeric_limits<double>::infinity());
    auto ix = xb.abs().equal_elem(std::numeric_limits<double>::infinity());
    auto inf = iy.bool_or(ix);
    auto limit = [&](const Tensor<B, D>& v, const Tensor<B, D, Bool>& is_inf) {
        auto mag = v.ones_like().mask_fill(is_inf.not_(), 1e-30);
        return v.mask_where(inf, v.sign() * mag);
    };
    auto yf = limit(yb, iy), xf = limit(xb, ix);
    auto scale = yf.abs().max_pair(xf.abs());
    scale = scale.mask_fill(scale.equal_elem(0.0), 1.0);
    auto yn = yf / scale, xn = xf / scale;
    auto r = (xn * xn + yn * yn).sqrt();
    auto pos = xn.greater_elem(0.0);
    auto y_zero = yn.equal_elem(0.0);
    auto t_pos = yn / (r + xn).mask_fill(pos.not_(), 1.0);
    auto t_neg = (r - xn) / yn.mask_fill(y_zero, 1.0);
    auto angle = detail::composed::atan(t_pos.mask_where(pos.not_(), t_neg)) * 2.0;
    // y = 0 with x ≤ 0: π for x < 0, 0 at the origin.
    // (+ xn · 0 keeps a NaN x a NaN.)
    auto axis = detail::composed::pi_like(xn).mask_fill(xn.lower_elem(0.0).not_(), 0.0) + xn * 0.0;
    return angle.mask_where(pos.not_().bool_and(y_zero), axis);
}
/// asin(x) = atan2(x, √((1 - x)(1 + x))): NaN outside [-1, 1].
template <Backend B, std::size_t D>
Tensor<B, D> asin(const Tensor<B, D>& x) {
    return atan2(x, ((1.0 - x) * (x + 1.0)).sqrt());
}
/// acos(x) = atan2(√((1 - x)(1 + x)), x): NaN outside [-1, 1].
template <Backend B, std::size_t D>
Tensor<B, D> acos(const Tensor<B, D>& x) {
    return atan2(((1.0 - x) * (x + 1.0)).sqrt(), x);
}
/// Rounds toward zero (ceil below 0, floor above).
template <Backend B, std::size_t D>
Tensor<B, D> trunc(const Tensor<B, D>& x) {
    return x.floor().mask_where(x.lower_elem(0.0), x.ceil());
}
/// Degrees to radians (x · π / 180).
template <Backend B, std::size_t D>
Tensor<B, D> deg2rad(const Tensor<B, D>& x) {
    return x * (std::numbers::pi / 180.0);
}
/// Radians to degrees (x · 180 / π).
template <Backend B, std::size_t D>
Tensor<B, D> rad2deg(const Tensor<B, D>& x) {
    return x * (180.0 / std::numbers::pi);
}
/// √(a² + b²), elementwise (the operands broadcast).
template <Backend B, std::size_t D>
Tensor<B, D> hypot(const Tensor<B, D>& a, const Tensor<B, D>& b) {
    (void)detail::composed::broadcast(a, b, "hypot");
    return (a * a + b * b).sqrt();
}
/// C's fmod: a - trunc(a / b) · b, whose sign is the dividend's (torch.fmod; `rem` is
/// torch.remainder, signed like the divisor). The operands broadcast.
template <Backend B, std::size_t D>
Tensor<B, D> fmod(const Tensor<B, D>& a, const Tensor<B, D>& b) {
    (void)detail::composed::broadcast(a, b, "fmod");
    return a - trunc(a / b) * b;
}
/// fmod with a scalar divisor.
template <Backend B, std::size_t D>
Tensor<B, D> fmod_scalar(const Tensor<B, D>& a, double b) {
    return a - trunc(a / b) * b;
}
/// True where the element is +inf or -inf.
template <Backend B, std::size_t D>
Tensor<B, D, Bool> is_inf(const Tensor<B, D>& x) {
    return x.abs().equal_elem(std::numeric_limits<double>::infinity());
}
/// True where the element is neither infinite nor NaN.
template <Backend B, std::size_t D>
Tensor<B, D, Bool> is_finite(const Tensor<B, D>& x) {
    return is_inf(x).bool_or(x.is_nan()).not_();
}

// ---- elementwise (float and int) -------------------------------------------------------------
/// x · x.
template <Backend B, std::size_t D, typename K>
requires NumericKind<K> Tensor<B, D, K> square(const Tensor<B, D, K>& x) {
    return x * x;
}

// ---- reductions ------------------------------------------------------------------------------
/// max(|x|) over every element; shape [1].
template <Backend B, std::size_t D, typename K>
requires NumericKind<K> Tensor<B, 1, K> max_abs(const Tensor<B, D, K>& x) {
    detail::check::reduce_all("max_abs", false, x.shape());
    return x.abs().max();
}
/// max(|x|) along `dim`, kept with size 1.
template <Backend B, std::size_t D, typename K>
requires NumericKind<K> Tensor<B, D, K> max_abs_dim(const Tensor<B, D, K>& x, long dim) {
    detail::check::reduce_dim("max_abs_dim", false, normalize_dim(dim, D, "max_abs_dim"),
                              x.shape());
    return x.abs().max_dim(dim);
}
namespace detail::composed {
/// A reduction along each of `dims` in turn, each kept with size 1.
template <Backend B, std::size_t D, typename K, typename F>
Tensor<B, D, K> reduce_dims(const Tensor<B, D, K>& x, const std::vector<long>& dims, const char* op,
                            bool has_identity, F reduce) {
    const Shape s = x.shape();
    auto ds = composed::dims<D>(dims, s, op);
    for (std::size_t d : ds) check::reduce_dim(op, has_identity, d, s);
    Tensor<B, D, K> y = x;
    for (std::size_t d : ds) y = reduce(y, static_cast<long>(d));
    return y;
}
}  // namespace detail::composed
/// Sums along each of `dims`, each kept with size 1 (a dim listed twice is a DimError).
template <Backend B, std::size_t D, typename K>
requires NumericKind<K> Tensor<B, D, K> sum_dims(const Tensor<B, D, K>& x,
                                                 const std::vector<long>& dims) {
    return detail::composed::reduce_dims(x, dims, "sum_dims", true,
                                         [](const auto& t, long d) { return t.sum_dim(d); });
}
/// Means along each of `dims`, each kept with size 1. Int: the sum over the dims divided once by
/// their element count, rounding toward zero as mean_dim does (means taken dim by dim would
/// round at each step); ShapeError when the dims hold no element.
template <Backend B, std::size_t D, typename K>
requires NumericKind<K> Tensor<B, D, K> mean_dims(const Tensor<B, D, K>& x,
                                                  const std::vector<long>& dims) {
    if constexpr (std::same_as<K, Int>) {
        const Shape s = x.shape();
        std::size_t count = 1;
        for (std::size_t d : detail::composed::dims<D>(dims, s, "mean_dims")) count *= s[d];
        auto sum = detail::composed::reduce_dims(
            x, dims, "mean_dims", true, [](const auto& t, long d) { return t.sum_dim(d); });
        EMBER_CHECK(count > 0, Shape, "mean_dims: the mean of no elements (Int tensor of shape ",
                    s.to_string(), ") has no Int value");
        return sum.abs().div_scalar(Scalar(count)).mul(sum.sign());
    } else {
        return detail::composed::reduce_dims(x, dims, "mean_dims", true,
                                             [](const auto& t, long d) { return t.mean_dim(d); });
    }
}
/// Products along each of `dims`, each kept with size 1.
template <Backend B, std::size_t D, typename K>
requires NumericKind<K> Tensor<B, D, K> prod_dims(const Tensor<B, D, K>& x,
                                                  const std::vector<long>& dims) {
    return detail::composed::reduce_dims(x, dims, "prod_dims", true,
                                         [](const auto& t, long d) { return t.prod_dim(d); });
}
/// Maxima over `dims` (each kept with size 1; the dims must not be empty).
template <Backend B, std::size_t D, typename K>
requires NumericKind<K> Tensor<B, D, K> max_dims(const Tensor<B, D, K>& x,
                                                 const std::vector<long>& dims) {
    return detail::composed::reduce_dims(x, dims, "max_dims", false,
                                         [](const auto& t, long d) { return t.max_dim(d); });
}
/// Minima over `dims` (each kept with size 1; the dims must not be empty).
template <Backend B, std::size_t D, typename K>
requires NumericKind<K> Tensor<B, D, K> min_dims(const Tensor<B, D, K>& x,
                                                 const std::vector<long>& dims) {
    return detail::composed::reduce_dims(x, dims, "min_dims", false,
                                         [](const auto& t, long d) { return t.min_dim(d); });
}
/// max(|x|) over `dims` (each kept with size 1).
template <Backend B, std::size_t D, typename K>
requires NumericKind<K> Tensor<B, D, K> max_abs_dims(const Tensor<B, D, K>& x,
                                                     const std::vector<long>& dims) {
    return detail::composed::reduce_dims(x.abs(), dims, "max_abs_dims", false,
                                         [](const auto& t, long d) { return t.max_dim(d); });
}
/// Removes the listed dims, each of which must have size 1 (ShapeError otherwise); an empty list
/// removes every dim of size 1. D2 must be the rank that leaves (DimError otherwise).
template <std::size_t D2, Backend B, std::size_t D, typename K>
Tensor<B, D2, K> squeeze_dims(const Tensor<B, D, K>& x, const std::vector<long>& dims) {
    const Shape s = x.shape();
    std::array<bool, kMaxRank> drop{};
    if (dims.empty()) {
        for (std::size_t i = 0; i < D; ++i) drop[i] = s[i] == 1;
    } else {
        for (std::size_t d : detail::composed::dims<D>(dims, s, "squeeze_dims")) {
            EMBER_CHECK(s[d] == 1, Shape, "squeeze_dims: dim ", d, " of shape ", s.to_string(),
                        " has size ", s[d], ", not 1");
            drop[d] = true;
        }
    }
    Shape out;
    for (std::size_t i = 0; i < D; ++i)
        if (!drop[i]) out.push_back(s[i]);
    EMBER_CHECK(out.rank() == D2, Dim, "squeeze_dims: removing dims ", detail::composed::list(dims),
                " of shape ", s.to_string(), " leaves rank ", out.rank(), ", not ", D2);
    return x.template reshape<D2>(out);
}
/// Sums along `dims` and removes them (D2 = D - dims.size()).
template <std::size_t D2, Backend B, std::size_t D, typename K>
requires NumericKind<K> Tensor<B, D2, K> sum_dims_squeeze(const Tensor<B, D, K>& x,
                                                          const std::vector<long>& dims) {
    EMBER_CHECK(D2 + dims.size() == D, Dim, "sum_dims_squeeze: summing ", dims.size(),
                " dims of rank ", D, " leaves rank ", D - std::min(D, dims.size()), ", not ", D2);
    if (dims.empty()) return x.template reshape<D2>(x.shape());
    return squeeze_dims<D2>(sum_dims(x, dims), dims);
}
/// The lower median along `dim` (the ⌊(n - 1)/2⌋-th smallest, torch.median), kept with size 1,
/// and its index.
template <Backend B, std::size_t D, typename K>
requires NumericKind<K> std::pair<Tensor<B, D, K>, Tensor<B, D, Int>> median_with_indices(
    const Tensor<B, D, K>& x, long dim) {
    const std::size_t d = normalize_dim(dim, D, "median");
    const Shape s = x.shape();
    detail::check::nonempty_dim("median", d, s);
    auto [v, i] = x.sort_with_indices(static_cast<long>(d));
    const std::size_t k = (s[d] - 1) / 2;
    return {v.narrow(static_cast<long>(d), k, 1), i.narrow(static_cast<long>(d), k, 1)};
}
/// The lower median along `dim`, kept with size 1 (torch.median(x, dim, keepdim=True).values).
template <Backend B, std::size_t D, typename K>
requires NumericKind<K> Tensor<B, D, K> median(const Tensor<B, D, K>& x, long dim) {
    return median_with_indices(x, dim).first;
}

// ---- cumulative ------------------------------------------------------------------------------
/// Running sums along `dim` (torch.cumsum).
template <Backend B, std::size_t D, typename K>
requires NumericKind<K> Tensor<B, D, K> cumsum(const Tensor<B, D, K>& x, long dim) {
    return detail::composed::scan(x, dim, "cumsum", [](auto a, auto b) { return a + b; });
}
/// Running products along `dim` (torch.cumprod; its gradient is right at zeros too).
template <Backend B, std::size_t D, typename K>
requires NumericKind<K> Tensor<B, D, K> cumprod(const Tensor<B, D, K>& x, long dim) {
    return detail::composed::scan(x, dim, "cumprod", [](auto a, auto b) { return a * b; });
}
/// Running maxima along `dim` (torch.cummax's values).
template <Backend B, std::size_t D, typename K>
requires NumericKind<K> Tensor<B, D, K> cummax(const Tensor<B, D, K>& x, long dim) {
    return detail::composed::scan(x, dim, "cummax", [](auto a, auto b) { return a.max_pair(b); });
}
/// Running minima along `dim` (torch.cummin's values).
template <Backend B, std::size_t D, typename K>
requires NumericKind<K> Tensor<B, D, K> cummin(const Tensor<B, D, K>& x, long dim) {
    return detail::composed::scan(x, dim, "cummin", [](auto a, auto b) { return a.min_pair(b); });
}

// ---- shape -----------------------------------------------------------------------------------
/// Pieces of `split_size` along `dim`, the last one smaller when the size does not divide
/// (torch.split); a dim of size 0 gives the tensor itself.
template <Backend B, std::size_t D, typename K>
std::vector<Tensor<B, D, K>> split(const Tensor<B, D, K>& x, std::size_t split_size, long dim) {
    const std::size_t d = normalize_dim(dim, D, "split");
    const Shape s = x.shape();
    const std::size_t n = s[d];
    if (n == 0) return {x};
    EMBER_CHECK(split_size > 0, Argument, "split: split_size 0 for dim ", d, " of shape ",
                s.to_string());
    std::vector<Tensor<B, D, K>> out;
    for (std::size_t i = 0; i < n; i += split_size)
        out.push_back(x.narrow(static_cast<long>(d), i, std::min(split_size, n - i)));
    return out;
}
/// Pieces of the given sizes along `dim`, which must add up to its size (torch.split with a
/// list).
template <Backend B, std::size_t D, typename K>
std::vector<Tensor<B, D, K>> split_with_sizes(const Tensor<B, D, K>& x,
                                              const std::vector<std::size_t>& sizes, long dim) {
    const std::size_t d = normalize_dim(dim, D, "split_with_sizes");
    const Shape s = x.shape();
    std::size_t total = 0;
    bool overflow = false;
    for (std::size_t v : sizes) overflow |= __builtin_add_overflow(total, v, &total);
    EMBER_CHECK(!overflow && total == s[d], Shape, "split_with_sizes: sizes ",
                detail::composed::list(sizes), " do not add up to dim ", d, " of shape ",
                s.to_string());
    std::vector<Tensor<B, D, K>> out;
    std::size_t at = 0;
    for (std::size_t v : sizes) {
        out.push_back(x.narrow(static_cast<long>(d), at, v));
        at += v;
    }
    return out;
}
/// The size-1 slices along `dim`, in order (Burn's iter_dim).
template <Backend B, std::size_t D, typename K>
std::vector<Tensor<B, D, K>> iter_dim(const Tensor<B, D, K>& x, long dim) {
    const std::size_t d = normalize_dim(dim, D, "iter_dim");
    const std::size_t n = x.shape()[d];
    std::vector<Tensor<B, D, K>> out;
    out.reserve(n);
    for (std::size_t i = 0; i < n; ++i) out.push_back(x.narrow(static_cast<long>(d), i, 1));
    return out;
}
/// Rotates the elements along `dim` by `shift` places (torch.roll; negative shifts go left).
template <Backend B, std::size_t D, typename K>
Tensor<B, D, K> roll_dim(const Tensor<B, D, K>& x, long shift, long dim) {
    const std::size_t d = normalize_dim(dim, D, "roll_dim");
    const long n = static_cast<long>(x.shape()[d]);
    if (n == 0) return x;
    const long s = ((shift % n) + n) % n;
    if (s == 0) return x;
    const long ld = static_cast<long>(d);
    using T = Tensor<B, D, K>;
    return T::cat({x.narrow(ld, static_cast<std::size_t>(n - s), static_cast<std::size_t>(s)),
                   x.narrow(ld, 0, static_cast<std::size_t>(n - s))},
                  ld);
}
/// roll_dim for each (shift, dim) pair; the lists must have the same length.
template <Backend B, std::size_t D, typename K>
Tensor<B, D, K> roll(const Tensor<B, D, K>& x, const std::vector<long>& shifts,
                     const std::vector<long>& dims) {
    EMBER_CHECK(shifts.size() == dims.size() && !dims.empty(), Argument, "roll: ", shifts.size(),
                " shifts ", detail::composed::list(shifts), " for ", dims.size(), " dims ",
                detail::composed::list(dims), " (need one per dim, at least one)");
    for (long dm : dims) (void)normalize_dim(dm, D, "roll");
    Tensor<B, D, K> y = x;
    for (std::size_t i = 0; i < dims.size(); ++i) y = roll_dim(y, shifts[i], dims[i]);
    return y;
}
/// Elements along `dim` picked by an int index tensor of any rank DI, whose dims replace `dim`
/// in the output (rank D + DI - 1; Burn's take, torch.index_select with a shaped index).
template <std::size_t DO, Backend B, std::size_t D, typename K, std::size_t DI>
Tensor<B, DO, K> take(const Tensor<B, D, K>& x, long dim, const Tensor<B, DI, Int>& indices) {
    static_assert(DO == D + DI - 1, "take: the output rank must be D + DI - 1");
    const std::size_t d = normalize_dim(dim, D, "take");
    const Shape s = x.shape(), si = indices.shape();
    Shape flat{si.num_elements("take")};
    auto picked = x.select(static_cast<long>(d), indices.template reshape<1>(flat));
    Shape out;
    for (std::size_t i = 0; i < d; ++i) out.push_back(s[i]);
    for (std::size_t i = 0; i < DI; ++i) out.push_back(si[i]);
    for (std::size_t i = d + 1; i < D; ++i) out.push_back(s[i]);
    return picked.template reshape<DO>(out);
}
/// `x` with the region `ranges` (as `slice` takes them) set to `value`.
template <Backend B, std::size_t D, typename K>
requires NumericKind<K> Tensor<B, D, K> slice_fill(const Tensor<B, D, K>& x,
                                                   std::span<const Slice> ranges, Scalar value) {
    EMBER_CHECK(ranges.size() <= D, Dim, "slice_fill: ", ranges.size(), " ranges for shape ",
                x.shape().to_string());
    return x.slice_assign(ranges, x.slice(ranges).full_like(value));
}
/// slice_fill with a braced list of ranges: `slice_fill(x, {{0, 2}, {1, 3}}, 0.0)`.
template <Backend B, std::size_t D, typename K, std::size_t N>
requires NumericKind<K> Tensor<B, D, K> slice_fill(const Tensor<B, D, K>& x,
                                                   const Slice (&ranges)[N], Scalar value) {
    return slice_fill(x, std::span<const Slice>(ranges, N), value);
}
/// Indices of the k largest elements along `dim`, largest first (topk's indices).
template <Backend B, std::size_t D, typename K>
requires NumericKind<K> Tensor<B, D, Int> argtopk(const Tensor<B, D, K>& x, std::size_t k,
                                                  long dim) {
    return x.topk_with_indices(k, dim).second;
}

// ---- more shape and index ops ----------------------------------------------------------------
/// Inserts dims of size 1 at the listed positions of the output (negative counts from the
/// output's end; Burn's unsqueeze_dims). D2 must be D + dims.size().
template <std::size_t D2, Backend B, std::size_t D, typename K>
Tensor<B, D2, K> unsqueeze_dims(const Tensor<B, D, K>& x, const std::vector<long>& dims) {
    const Shape s = x.shape();
    EMBER_CHECK(D2 == D + dims.size(), Dim, "unsqueeze_dims: inserting ", dims.size(),
                " dims into shape ", s.to_string(), " gives rank ", D + dims.size(), ", not ", D2);
    std::array<bool, kMaxRank> one{};
    for (std::size_t d : detail::composed::dims<D2>(dims, s, "unsqueeze_dims")) one[d] = true;
    Shape out;
    for (std::size_t i = 0, j = 0; i < D2; ++i) out.push_back(one[i] ? 1 : s[j++]);
    return x.template reshape<D2>(out);
}
/// Sliding windows of `size` elements every `step` along `dim`: that dim becomes the window
/// count (size_dim - size) / step + 1 and a new last dim holds each window (torch.Tensor.unfold).
/// One `select` with a window index, so any backend and autodiff have it.
template <std::size_t DO, Backend B, std::size_t D, typename K>
Tensor<B, DO, K> unfold(const Tensor<B, D, K>& x, long dim, std::size_t size, std::size_t step) {
    static_assert(DO == D + 1, "unfold: the output rank is D + 1");
    const std::size_t d = normalize_dim(dim, D, "unfold");
    const Shape s = x.shape();
    EMBER_CHECK(step > 0, Argument, "unfold: step 0 for shape ", s.to_string());
    EMBER_CHECK(size <= s[d], Shape, "unfold: window size ", size, " exceeds dim ", d, " of shape ",
                s.to_string());
    const std::size_t n = (s[d] - size) / step + 1;
    const auto dev = x.device();
    using I = Tensor<B, 1, Int>;
    auto starts = I::arange(0, static_cast<std::int64_t>(n), dev) * static_cast<std::int64_t>(step);
    auto offsets = I::arange(0, static_cast<std::int64_t>(size), dev);
    auto index =
        starts.template reshape<2>(Shape{n, 1}) + offsets.template reshape<2>(Shape{1, size});
    auto picked = x.select(static_cast<long>(d), index.template reshape<1>(Shape{n * size}));
    Shape split;
    for (std::size_t i = 0; i < D; ++i) {
        if (i == d) {
            split.push_back(n);
            split.push_back(size);
        } else {
            split.push_back(s[i]);
        }
    }
    return picked.template reshape<DO>(split).movedim(static_cast<long>(d + 1), -1);
}
/// One-hot encoding with chosen values and position: a new dim of `num_classes` at `axis` (of
/// the output; -1 is last) holding `on` at each index and `off` elsewhere (ONNX OneHot, Burn's
/// one_hot_fill). Negative indices count from num_classes; indices outside
/// [-num_classes, num_classes) give a row of `off`, as in ONNX.
template <std::size_t DO, Backend B, std::size_t D>
Tensor<B, DO> one_hot_fill(const Tensor<B, D, Int>& indices, std::size_t num_classes, double on,
                           double off, long axis = -1) {
    static_assert(DO == D + 1, "one_hot_fill: the output rank is D + 1");
    const std::size_t a = normalize_dim(axis, DO, "one_hot_fill");
    EMBER_CHECK(num_classes > 0, Argument, "one_hot_fill: num_classes is 0 for indices of shape ",
                indices.shape().to_string());
    const auto c = static_cast<std::int64_t>(num_classes);
    auto wrapped = indices.mask_where(indices.lower_elem(0), indices + c);
    Shape cls = Shape::filled(DO, 1);
    cls[D] = num_classes;
    auto classes = Tensor<B, 1, Int>::arange(0, c, indices.device()).template reshape<DO>(cls);
    auto hit = wrapped.template unsqueeze_dim<DO>(-1).equal(classes.template expand<DO>([&] {
        Shape full = indices.shape();
        full.push_back(num_classes);
        return full;
    }()));
    auto values = hit.float_() * (on - off) + off;
    return values.movedim(static_cast<long>(D), static_cast<long>(a));
}

namespace detail::composed {
/// The index tuples of gather_nd / scatter_nd as row numbers of `x` seen as
/// [prod(first k dims), rest]; negative components count from the end, and a component outside
/// its dim is an IndexError (read back once: a row number alone could land in range).
template <Backend B, std::size_t D, typename K, std::size_t DI>
std::pair<Tensor<B, 1, Int>, std::size_t> nd_rows(const Tensor<B, D, K>& x,
                                                  const Tensor<B, DI, Int>& indices,
                                                  const char* op) {
    const Shape s = x.shape(), si = indices.shape();
    const std::size_t k = si[DI - 1];
    EMBER_CHECK(k >= 1 && k <= D, Shape, op, ": index tuples of length ", k, " (indices ",
                si.to_string(), ") for data of shape ", s.to_string());
    std::vector<std::int64_t> sizes(k), strides(k);
    std::int64_t stride = 1;
    for (std::size_t j = k; j-- > 0;) {
        sizes[j] = static_cast<std::int64_t>(s[j]);
        strides[j] = stride;
        stride *= sizes[j];
    }
    const std::size_t m = si.num_elements(op) / k;
    const auto dev = x.device();
    auto flat = indices.template reshape<2>(Shape{m, k});
    auto size_row = Tensor<B, 1, Int>::from_data(TensorData(sizes, Shape{k}), dev)
                        .template reshape<2>(Shape{1, k});
    auto wrapped = flat.mask_where(flat.lower_elem(0), flat + size_row);
    if (m > 0) {
        const bool bad =
            wrapped.lower_elem(0)
                .bool_or(wrapped.greater_equal(size_row.template expand<2>(Shape{m, k})))
                .any()
                .into_scalar();
        EMBER_CHECK(!bad, Index, op, ": an index tuple of ", si.to_string(),
                    " is outside the first ", k, " dims of shape ", s.to_string());
    }
    auto stride_row = Tensor<B, 1, Int>::from_data(TensorData(strides, Shape{k}), dev)
                          .template reshape<2>(Shape{1, k});
    auto rows = (wrapped * stride_row).sum_dim(1).template reshape<1>(Shape{m});
    return {rows, k};
}
}  // namespace detail::composed

/// The slices of `x` named by index tuples (ONNX GatherND with batch_dims 0, Burn's gather_nd):
/// `indices` [..., k] picks x[i0, ..., ik-1] (a slice of the remaining dims) for each tuple; the
/// output is indices.shape[:-1] + x.shape[k:], of rank DO = DI - 1 + D - k.
template <std::size_t DO, Backend B, std::size_t D, typename K, std::size_t DI>
Tensor<B, DO, K> gather_nd(const Tensor<B, D, K>& x, const Tensor<B, DI, Int>& indices) {
    const Shape s = x.shape(), si = indices.shape();
    const std::size_t k = si[DI - 1];
    EMBER_CHECK(k <= D && DO + 1 + k == DI + D, Dim, "gather_nd: indices ", si.to_string(),
                " into shape ", s.to_string(), " give rank ", DI + D - std::min(D, k) - 1, ", not ",
                DO);
    auto [rows, kk] = detail::composed::nd_rows(x, indices, "gather_nd");
    std::size_t lead = 1, rest = 1;
    for (std::size_t i = 0; i < D; ++i) (i < kk ? lead : rest) *= s[i];
    auto picked = x.template reshape<2>(Shape{lead, rest}).select(0, rows);
    Shape out;
    for (std::size_t i = 0; i + 1 < DI; ++i) out.push_back(si[i]);
    for (std::size_t i = kk; i < D; ++i) out.push_back(s[i]);
    return picked.template reshape<DO>(out);
}
/// `x` with the slices named by index tuples replaced by `values` (ONNX ScatterND without a
/// reduction; Burn's scatter_nd): `values` has the shape gather_nd would return. Where a tuple
/// repeats, the values written there add up (ONNX leaves that case undefined).
template <Backend B, std::size_t D, typename K, std::size_t DI, std::size_t DV>
requires NumericKind<K> Tensor<B, D, K> scatter_nd(const Tensor<B, D, K>& x,
                                                   const Tensor<B, DI, Int>& indices,
                                                   const Tensor<B, DV, K>& values) {
    const Shape s = x.shape(), si = indices.shape(), sv = values.shape();
    auto [rows, k] = detail::composed::nd_rows(x, indices, "scatter_nd");
    Shape expect;
    for (std::size_t i = 0; i + 1 < DI; ++i) expect.push_back(si[i]);
    for (std::size_t i = k; i < D; ++i) expect.push_back(s[i]);
    EMBER_CHECK(sv == expect, Shape, "scatter_nd: values of shape ", sv.to_string(),
                " for indices ", si.to_string(), " into shape ", s.to_string(), " (expected ",
                expect.to_string(), ")");
    std::size_t lead = 1, rest = 1;
    for (std::size_t i = 0; i < D; ++i) (i < k ? lead : rest) *= s[i];
    const std::size_t m = rows.shape()[0];
    auto x2 = x.template reshape<2>(Shape{lead, rest});
    auto v2 = values.template reshape<2>(Shape{m, rest});
    auto hit = Tensor<B, 2, K>::zeros(Shape{lead, 1}, x.device())
                   .select_assign(0, rows, Tensor<B, 2, K>::ones(Shape{m, 1}, x.device()))
                   .greater_elem(0);
    return x2.mask_fill(hit, 0).select_assign(0, rows, v2).template reshape<D>(s);
}

// ---- sampling --------------------------------------------------------------------------------
/// `num_samples` class indices per row of `weights` [batch, classes], drawn with replacement
/// with probability proportional to the weights (torch.multinomial(weights, n, True)): each
/// draw counts the classes whose cumulative weight is at most a uniform draw in [0, total).
/// Negative weights, or a row without any weight, are an ArgumentError (found with one read).
/// Builds a [batch, num_samples, classes] comparison, so it suits moderate class counts.
template <Backend B>
Tensor<B, 2, Int> categorical(const Tensor<B, 2>& weights, std::size_t num_samples) {
    const Shape s = weights.shape();
    const std::size_t rows = s[0], classes = s[1];
    EMBER_CHECK(classes > 0, Shape, "categorical: no classes in weights of shape ", s.to_string());
    const auto dev = weights.device();
    if (rows == 0 || num_samples == 0)
        return Tensor<B, 2, Int>::zeros(Shape{rows, num_samples}, dev);
    auto cdf = cumsum(weights, 1);
    auto total = cdf.narrow(1, classes - 1, 1);  // [rows, 1]
    const bool bad = weights.lower_elem(0.0)
                         .any()
                         .bool_or(total.lower_equal_elem(0.0).any())
                         .bool_or(weights.is_nan().any())
                         .into_scalar();
    EMBER_CHECK(!bad, Argument, "categorical: weights of shape ", s.to_string(),
                " hold a negative or NaN weight, or a row without weight");
    auto u = Tensor<B, 2>::random(Shape{rows, num_samples}, Distribution::Default, dev) * total;
    auto below = cdf.template unsqueeze_dim<3>(1).lower_equal(
        u.template unsqueeze_dim<3>(2).template expand<3>(Shape{rows, num_samples, classes}));
    auto picked = below.int_().sum_dim(2).clamp_max(static_cast<std::int64_t>(classes - 1));
    return picked.template reshape<2>(Shape{rows, num_samples});
}

/// How `pad` fills the new elements.
enum class PadMode {
    Constant,  ///< a given value
    Reflect,   ///< the input mirrored without repeating its edge (torch's "reflect")
    Replicate  ///< the edge element repeated
};
/// Pads the trailing dims: `pads` lists (before, after) counts from the last dim backwards, as
/// torch.nn.functional.pad ({left, right, top, bottom, ...}); Reflect needs each count below
/// its dim's size (ArgumentError otherwise), Replicate a non-empty dim.
template <Backend B, std::size_t D, typename K>
requires NumericKind<K> Tensor<B, D, K> pad(const Tensor<B, D, K>& x,
                                            const std::vector<std::size_t>& pads, PadMode mode,
                                            Scalar value = 0.0) {
    const Shape s = x.shape();
    EMBER_CHECK(pads.size() % 2 == 0 && pads.size() / 2 <= D, Argument, "pad: ", pads.size(),
                " pad counts ", detail::composed::list(pads), " for shape ", s.to_string(),
                " (need a (before, after) pair per trailing dim)");
    using T = Tensor<B, D, K>;
    T y = x;
    for (std::size_t i = 0; i < pads.size() / 2; ++i) {
        const std::size_t d = D - 1 - i, before = pads[2 * i], after = pads[2 * i + 1];
        if (before == 0 && after == 0) continue;
        const long ld = static_cast<long>(d);
        const std::size_t n = y.shape()[d];
        std::vector<T> parts;
        if (mode == PadMode::Constant) {
            auto side = [&](std::size_t count) {
                Shape p = y.shape();
                p[d] = count;
                return T::full(p, value, y.device());
            };
            if (before) parts.push_back(side(before));
            parts.push_back(y);
            if (after) parts.push_back(side(after));
        } else if (mode == PadMode::Replicate) {
            EMBER_CHECK(n > 0, Argument, "pad: Replicate needs elements in dim ", d, " of shape ",
                        s.to_string());
            if (before) parts.push_back(y.narrow(ld, 0, 1).repeat_dim(ld, before));
            parts.push_back(y);
            if (after) parts.push_back(y.narrow(ld, n - 1, 1).repeat_dim(ld, after));
        } else {
            EMBER_CHECK(before < n && after < n, Argument, "pad: Reflect pads ", before, " and ",
                        after, " must be below dim ", d, "'s size in shape ", s.to_string());
            const long axes[] = {ld};
            if (before) parts.push_back(y.narrow(ld, 1, before).flip(axes));
            parts.push_back(y);
            if (after) parts.push_back(y.narrow(ld, n - 1 - after, after).flip(axes));
        }
        y = T::cat(parts, ld);
    }
    return y;
}

// ---- products --------------------------------------------------------------------------------
/// The cross product of 3-vectors along `dim` (torch.linalg.cross; the operands broadcast and
/// `dim` must have size 3 in both).
template <Backend B, std::size_t D, typename K>
requires NumericKind<K> Tensor<B, D, K> cross(const Tensor<B, D, K>& a, const Tensor<B, D, K>& b,
                                              long dim) {
    const std::size_t d = normalize_dim(dim, D, "cross");
    const Shape sa = a.shape(), sb = b.shape();
    EMBER_CHECK(sa[d] == 3 && sb[d] == 3, Shape, "cross: dim ", d, " must have size 3, but the ",
                "shapes are ", sa.to_string(), " and ", sb.to_string());
    (void)broadcast_shapes(sa, sb, "cross");
    const long ld = static_cast<long>(d);
    auto c = [&](const Tensor<B, D, K>& t, std::size_t i) { return t.narrow(ld, i, 1); };
    return Tensor<B, D, K>::cat(
        {c(a, 1) * c(b, 2) - c(a, 2) * c(b, 1), c(a, 2) * c(b, 0) - c(a, 0) * c(b, 2),
         c(a, 0) * c(b, 1) - c(a, 1) * c(b, 0)},
        ld);
}
/// The inner product of two vectors of the same length; shape [1].
template <Backend B, typename K>
requires NumericKind<K> Tensor<B, 1, K> dot(const Tensor<B, 1, K>& a, const Tensor<B, 1, K>& b) {
    const Shape sa = a.shape(), sb = b.shape();
    EMBER_CHECK(sa == sb, Shape, "dot: the vectors have shapes ", sa.to_string(), " and ",
                sb.to_string());
    return (a * b).sum();
}

}  // namespace ember
