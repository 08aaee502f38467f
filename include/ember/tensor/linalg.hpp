#pragma once
// Burn's tensor-function modules, composed from Tensor ops (so every backend, Fusion and
// Autodiff have them, gradients included): ember::linalg (diagonal, trace, vector norms,
// matrix-vector and outer products, cosine similarity), ember::grid (meshgrid), ember::signal
// (window functions) and ember::stats (median).
#include <array>
#include <cmath>
#include <limits>
#include <numbers>
#include <vector>

#include "composed.hpp"

namespace ember::linalg {

/// The main diagonal of the last two dims ([..., n, m] → [..., min(n, m)]; torch.diagonal).
template <std::size_t DO, Backend B, std::size_t D, typename K>
requires NumericKind<K> Tensor<B, DO, K> diag(const Tensor<B, D, K>& x) {
    static_assert(D >= 2 && DO == D - 1, "linalg::diag: a rank-D matrix (D >= 2) gives rank D - 1");
    const Shape s = x.shape();
    const std::size_t k = std::min(s[D - 2], s[D - 1]);
    auto sq = x.narrow(-2, 0, k).narrow(-1, 0, k);
    auto off = Tensor<B, D, Bool>::diag_mask(sq.shape(), 0, x.device());
    return sq.mask_fill(off, 0).sum_dim(-1).template squeeze<DO>(-1);
}
/// The sum of the diagonal of the last two dims ([..., n, m] → [..., 1]; [n, m] → [1]).
template <std::size_t DO, Backend B, std::size_t D, typename K>
requires NumericKind<K> Tensor<B, DO, K> trace(const Tensor<B, D, K>& x) {
    return diag<DO>(x).sum_dim(-1);
}

/// The p-norm of `x` along `dim`, kept with size 1 (torch.linalg.vector_norm): p = 0 counts the
/// non-zero elements, p = ±inf is max/min |x|, otherwise (Σ|x|^p)^(1/p).
template <Backend B, std::size_t D>
Tensor<B, D> vector_norm(const Tensor<B, D>& x, double p, long dim) {
    const std::size_t d = normalize_dim(dim, D, "vector_norm");
    EMBER_CHECK(!std::isnan(p), Argument, "vector_norm: p is NaN");
    const long ld = static_cast<long>(d);
    const double inf = std::numeric_limits<double>::infinity();
    if (p == inf || p == -inf) {
        detail::check::reduce_dim("vector_norm", false, d, x.shape());
        return p > 0 ? x.abs().max_dim(ld) : x.abs().min_dim(ld);
    }
    if (p == 0) return x.not_equal_elem(0.0).float_().sum_dim(ld);
    if (p == 1) return x.abs().sum_dim(ld);
    if (p == 2) return (x * x).sum_dim(ld).sqrt();
    return x.abs().powf_scalar(p).sum_dim(ld).powf_scalar(1.0 / p);
}
/// The number of non-zero elements along `dim`.
template <Backend B, std::size_t D>
Tensor<B, D> l0_norm(const Tensor<B, D>& x, long dim) {
    return vector_norm(x, 0.0, dim);
}
/// Σ|x| along `dim`.
template <Backend B, std::size_t D>
Tensor<B, D> l1_norm(const Tensor<B, D>& x, long dim) {
    return vector_norm(x, 1.0, dim);
}
/// √(Σx²) along `dim`.
template <Backend B, std::size_t D>
Tensor<B, D> l2_norm(const Tensor<B, D>& x, long dim) {
    return vector_norm(x, 2.0, dim);
}
/// (Σ|x|^p)^(1/p) along `dim`.
template <Backend B, std::size_t D>
Tensor<B, D> lp_norm(const Tensor<B, D>& x, double p, long dim) {
    return vector_norm(x, p, dim);
}
/// max|x| along `dim`.
template <Backend B, std::size_t D>
Tensor<B, D> max_abs_norm(const Tensor<B, D>& x, long dim) {
    return vector_norm(x, std::numeric_limits<double>::infinity(), dim);
}
/// min|x| along `dim`.
template <Backend B, std::size_t D>
Tensor<B, D> min_abs_norm(const Tensor<B, D>& x, long dim) {
    return vector_norm(x, -std::numeric_limits<double>::infinity(), dim);
}
/// x divided by its p-norm along `dim`, the norm clamped below at `epsilon`
/// (torch.nn.functional.normalize).
template <Backend B, std::size_t D>
Tensor<B, D> vector_normalize(const Tensor<B, D>& x, double p, long dim, double epsilon = 1e-12) {
    return x / vector_norm(x, p, dim).clamp_min(epsilon);
}

/// Matrix times vector: [..., m, n] · [..., n] → [..., m] (batch dims broadcast).
template <Backend B, std::size_t D, std::size_t DV>
Tensor<B, DV> matvec(const Tensor<B, D>& m, const Tensor<B, DV>& v) {
    static_assert(D >= 2 && DV == D - 1, "linalg::matvec: the vector has one dim less");
    const Shape sm = m.shape(), sv = v.shape();
    EMBER_CHECK(sm[D - 1] == sv[DV - 1], Shape, "matvec: matrix ", sm.to_string(), " and vector ",
                sv.to_string(), " differ in the summed dim");
    return m.matmul(v.template unsqueeze_dim<D>(-1)).template squeeze<DV>(-1);
}
/// Outer product of the last dims: [..., m] and [..., n] → [..., m, n] (batch dims broadcast).
template <std::size_t DO, Backend B, std::size_t D, typename K>
requires NumericKind<K> Tensor<B, DO, K> outer(const Tensor<B, D, K>& x, const Tensor<B, D, K>& y) {
    static_assert(DO == D + 1, "linalg::outer: the output has one dim more");
    const Shape sx = x.shape(), sy = y.shape();
    Shape bx, by;
    for (std::size_t i = 0; i + 1 < D; ++i) {
        bx.push_back(sx[i]);
        by.push_back(sy[i]);
    }
    if constexpr (D > 1) (void)broadcast_shapes(bx, by, "outer");
    return x.template unsqueeze_dim<DO>(-1) * y.template unsqueeze_dim<DO>(-2);
}
/// Cosine of the angle between x and y along `dim`, kept with size 1:
/// Σxy / max(‖x‖·‖y‖, ε) (the operands broadcast).
template <Backend B, std::size_t D>
Tensor<B, D> cosine_similarity(const Tensor<B, D>& x, const Tensor<B, D>& y, long dim,
                               double epsilon = 1e-8) {
    (void)broadcast_shapes(x.shape(), y.shape(), "cosine_similarity");
    const long d = static_cast<long>(normalize_dim(dim, D, "cosine_similarity"));
    auto norms = (l2_norm(x, d) * l2_norm(y, d)).clamp_min(epsilon);
    return (x * y).sum_dim(d) / norms;
}

}  // namespace ember::linalg

namespace ember {
/// The covariance matrix of a [variables, observations] tensor with the observations along
/// `dim` (1: torch.cov's layout; 0: rows are observations): Σ(x - x̄)(x - x̄)ᵀ / (n - correction).
template <Backend B>
Tensor<B, 2> cov(const Tensor<B, 2>& x, long dim = 1, std::size_t correction = 1) {
    const std::size_t d = normalize_dim(dim, 2, "cov");
    const Shape s = x.shape();
    EMBER_CHECK(s[d] > correction, Argument, "cov: ", s[d], " observations (dim ", d, " of shape ",
                s.to_string(), ") with correction ", correction);
    auto c = x - x.mean_dim(static_cast<long>(d));
    auto v = d == 1 ? c : c.transpose();
    return v.matmul(v.transpose()) / static_cast<double>(s[d] - correction);
}
}  // namespace ember

namespace ember::grid {
/// How meshgrid orders its outputs: Matrix is 'ij' (output i varies along dim i), Cartesian is
/// 'xy' (the first two swap, as in plotting).
enum class GridIndexing {
    Matrix,    ///< 'ij': output i varies along dim i
    Cartesian  ///< 'xy': the first two dims swap
};
/// N coordinate tensors of shape [s0, s1, ...] from N vectors (torch.meshgrid).
template <Backend B, std::size_t N, typename K>
std::array<Tensor<B, N, K>, N> meshgrid(const std::array<Tensor<B, 1, K>, N>& axes,
                                        GridIndexing indexing = GridIndexing::Matrix) {
    std::array<std::size_t, N> pos{};
    for (std::size_t i = 0; i < N; ++i) pos[i] = i;
    if (indexing == GridIndexing::Cartesian && N >= 2) std::swap(pos[0], pos[1]);
    Shape full = Shape::filled(N, 1);
    for (std::size_t i = 0; i < N; ++i) full[pos[i]] = axes[i].shape()[0];
    std::array<Tensor<B, N, K>, N> out = [&]<std::size_t... I>(std::index_sequence<I...>) {
        auto one = [&](std::size_t i) {
            Shape s = Shape::filled(N, 1);
            s[pos[i]] = full[pos[i]];
            return axes[i].template reshape<N>(s).template expand<N>(full);
        };
        return std::array<Tensor<B, N, K>, N>{one(I)...};
    }
    (std::make_index_sequence<N>{});
    return out;
}
/// meshgrid's outputs stacked along a new last dim: [s0, s1, ..., N].
template <std::size_t DO, Backend B, std::size_t N, typename K>
Tensor<B, DO, K> meshgrid_stack(const std::array<Tensor<B, 1, K>, N>& axes,
                                GridIndexing indexing = GridIndexing::Matrix) {
    static_assert(DO == N + 1, "grid::meshgrid_stack: the output rank is N + 1");
    auto g = meshgrid(axes, indexing);
    return Tensor<B, N, K>::template stack<DO>(std::vector<Tensor<B, N, K>>(g.begin(), g.end()),
                                               static_cast<long>(N));
}
}  // namespace ember::grid

namespace ember::signal {
namespace detail {
/// Σ a_k cos(2πk·n / L) over n = 0..size-1, L = size (periodic) or size - 1 (symmetric);
/// a window of one sample is [1], as in PyTorch.
template <Backend B>
Tensor<B, 1> cosine_window(std::size_t size, bool periodic, std::initializer_list<double> a,
                           const Device<B>& device) {
    if (size == 0) return Tensor<B, 1>::zeros(Shape{0}, device);
    if (size == 1) return Tensor<B, 1>::ones(Shape{1}, device);
    const double l = static_cast<double>(periodic ? size : size - 1);
    auto n = Tensor<B, 1, Int>::arange(0, static_cast<std::int64_t>(size), device).float_();
    Tensor<B, 1> w = Tensor<B, 1>::zeros(Shape{size}, device);
    int k = 0;
    for (double c : a) {
        w = w + (n * (2.0 * std::numbers::pi * k / l)).cos() * c;
        ++k;
    }
    return w;
}
}  // namespace detail
/// The Hann window, 0.5 - 0.5·cos(2πn / L) (torch.hann_window; `periodic` for spectral use).
template <Backend B>
Tensor<B, 1> hann_window(std::size_t size, bool periodic = true, const Device<B>& device = {}) {
    return detail::cosine_window<B>(size, periodic, {0.5, -0.5}, device);
}
/// The Hamming window, 0.54 - 0.46·cos(2πn / L) (torch.hamming_window).
template <Backend B>
Tensor<B, 1> hamming_window(std::size_t size, bool periodic = true, const Device<B>& device = {}) {
    return detail::cosine_window<B>(size, periodic, {0.54, -0.46}, device);
}
/// The Blackman window, 0.42 - 0.5·cos(2πn / L) + 0.08·cos(4πn / L) (torch.blackman_window).
template <Backend B>
Tensor<B, 1> blackman_window(std::size_t size, bool periodic = true, const Device<B>& device = {}) {
    return detail::cosine_window<B>(size, periodic, {0.42, -0.5, 0.08}, device);
}
}  // namespace ember::signal

namespace ember::stats {
using ember::median;
using ember::median_with_indices;
}  // namespace ember::stats
