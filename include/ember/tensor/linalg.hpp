#pragma once
// Burn's tensor-function modules, composed from Tensor ops (so every backend, Fusion and
// Autodiff have them, gradients included): ember::linalg (diagonal, trace, vector norms,
// matrix-vector and outer products, cosine similarity, lu, det), ember::grid (meshgrid,
// affine_grid_2d), ember::signal (window functions, rfft, irfft, cfft, stft, istft), ember::stats
// (median) and ember::cov, and ember::loss::cross_entropy_with_logits.
#include <array>
#include <cmath>
#include <limits>
#include <numbers>
#include <optional>
#include <type_traits>
#include <vector>

#include "activation.hpp"
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
/// Outer product along `dim`: [..., m, ...] and [..., n, ...] → [..., m, n, ...] (Burn's
/// outer_dim; the other dims broadcast).
template <std::size_t DO, Backend B, std::size_t D, typename K>
requires NumericKind<K> Tensor<B, DO, K> outer_dim(const Tensor<B, D, K>& x,
                                                   const Tensor<B, D, K>& y, long dim) {
    static_assert(DO == D + 1, "linalg::outer_dim: the output has one dim more");
    const std::size_t d = normalize_dim(dim, D, "outer_dim");
    Shape sx = x.shape(), sy = y.shape();
    sx[d] = 1;
    sy[d] = 1;
    (void)broadcast_shapes(sx, sy, "outer_dim");
    return x.template unsqueeze_dim<DO>(static_cast<long>(d + 1)) *
           y.template unsqueeze_dim<DO>(static_cast<long>(d));
}
/// Outer product of the last dims: [..., m] and [..., n] → [..., m, n] (batch dims broadcast).
template <std::size_t DO, Backend B, std::size_t D, typename K>
requires NumericKind<K> Tensor<B, DO, K> outer(const Tensor<B, D, K>& x, const Tensor<B, D, K>& y) {
    return outer_dim<DO>(x, y, -1);
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

/// The factors of an LU decomposition with partial pivoting: a = p · l · u (torch.linalg.lu).
template <Backend B, std::size_t D>
struct Lu {
    Tensor<B, D> p;         ///< the permutation matrix
    Tensor<B, D> l;         ///< unit lower triangular
    Tensor<B, D> u;         ///< upper triangular
    Tensor<B, D - 1> sign;  ///< det(p), ±1, shape [..., 1]
};
/// LU decomposition with partial pivoting of square matrices [..., n, n] (batched): at each
/// column the row of largest magnitude becomes the pivot, as LAPACK's getrf. Composed from
/// argmax, gather and slices, so autodiff differentiates l and u (away from ties of pivots).
template <Backend B, std::size_t D>
Lu<B, D> lu(const Tensor<B, D>& a) {
    static_assert(D >= 2, "linalg::lu: needs a matrix");
    const Shape s = a.shape();
    const std::size_t n = s[D - 1];
    EMBER_CHECK(s[D - 2] == n, Shape, "lu: the matrix of shape ", s.to_string(), " is not square");
    const auto dev = a.device();
    using I = Tensor<B, D, Int>;
    Shape col = s;
    col[D - 1] = 1;
    // Row numbers of each column, [..., n, 1]; and a [..., 1, 1] count of row swaps' parity.
    Shape rows_shape = Shape::filled(D, 1);
    rows_shape[D - 2] = n;
    auto rows = Tensor<B, 1, Int>::arange(0, static_cast<std::int64_t>(n), dev)
                    .template reshape<D>(rows_shape)
                    .template expand<D>(col);
    Shape one = col;
    one[D - 2] = 1;
    Tensor<B, D> u = a;
    Tensor<B, D> l = Tensor<B, D>::zeros(s, dev);
    I perm = rows;  // perm[i] = the row of a now at row i
    Tensor<B, D> sign = Tensor<B, D>::ones(one, dev);
    for (std::size_t k = 0; k < n; ++k) {
        const long kk = static_cast<long>(k);
        auto mag = u.narrow(-1, k, 1).abs().mask_fill(rows.lower_elem(kk), -1.0);
        auto piv = mag.argmax(-2);  // [..., 1, 1]
        // swap[i] = piv where i == k, k where i == piv, i elsewhere.
        auto is_k = rows.equal_elem(kk);
        auto is_p = rows.equal(piv.template expand<D>(col));
        auto swap =
            rows.mask_where(is_p, rows.full_like(kk)).mask_where(is_k, piv.template expand<D>(col));
        auto full_swap = swap.template expand<D>(s);  // the same row order for every column
        u = u.gather(-2, full_swap);
        l = l.gather(-2, full_swap);
        perm = perm.gather(-2, swap);
        sign = sign.mask_where(piv.not_equal_elem(kk), -sign);
        if (k + 1 < n) {
            auto pivot_row = u.narrow(-2, k, 1);
            auto below = u.narrow(-2, k + 1, n - k - 1);
            auto f = below.narrow(-1, k, 1) / pivot_row.narrow(-1, k, 1);
            u = Tensor<B, D>::cat({u.narrow(-2, 0, k + 1), below - f * pivot_row}, -2);
            std::array<Slice, D> r{};
            r[D - 2] = Slice{static_cast<long>(k + 1), static_cast<long>(n)};
            r[D - 1] = Slice{kk, kk + 1};
            l = l.slice_assign(std::span<const Slice>(r.data(), D), f);
        }
    }
    l = l + Tensor<B, 2>::eye(n, dev).template reshape<D>([&] {
        Shape e = Shape::filled(D, 1);
        e[D - 2] = n;
        e[D - 1] = n;
        return e;
    }());
    // a = p · l · u with p[perm[i], i] = 1: p is the transpose of one_hot(perm).
    auto q = perm.template reshape<D - 1>([&] {
                     Shape v;
                     for (std::size_t i = 0; i + 1 < D; ++i) v.push_back(s[i]);
                     return v;
                 }())
                 .one_hot(n)
                 .float_();
    return {q.transpose(), l, u, sign.template squeeze<D - 1>(-1)};
}
/// The determinant of square matrices [..., n, n], shape [..., 1] ([n, n] → [1]): the product
/// of lu's pivots times the permutation's sign.
template <std::size_t DO, Backend B, std::size_t D>
Tensor<B, DO> det(const Tensor<B, D>& a) {
    static_assert(D >= 2 && DO == D - 1, "linalg::det: a rank-D matrix gives rank D - 1");
    auto f = lu(a);
    return diag<DO>(f.u).prod_dim(-1) * f.sign;
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
/// The sampling grid of a batch of 2-d affine transforms (torch.nn.functional.affine_grid):
/// `theta` [N, 2, 3] maps the output's normalised coordinates (x, y, 1) to the input's; the
/// grid is [N, H, W, 2] for size {N, C, H, W}. With align_corners, -1 and 1 are the centres of
/// the corner pixels; without, their outer edges.
template <Backend B>
Tensor<B, 4> affine_grid_2d(const Tensor<B, 3>& theta, const std::array<std::size_t, 4>& size,
                            bool align_corners = false) {
    const Shape st = theta.shape();
    EMBER_CHECK(st[0] == size[0] && st[1] == 2 && st[2] == 3, Shape, "affine_grid_2d: theta ",
                st.to_string(), " for size ", Shape(size).to_string(), " (expected [", size[0],
                ", 2, 3])");
    const std::size_t h = size[2], w = size[3];
    const auto dev = theta.device();
    auto coords = [&](std::size_t n) {
        auto i = Tensor<B, 1, Int>::arange(0, static_cast<std::int64_t>(n), dev).float_();
        if (n == 1) return i * 0.0;
        if (align_corners) return i * (2.0 / static_cast<double>(n - 1)) - 1.0;
        return (i * 2.0 + 1.0) / static_cast<double>(n) - 1.0;
    };
    auto xs = coords(w).template reshape<2>(Shape{1, w}).template expand<2>(Shape{h, w});
    auto ys = coords(h).template reshape<2>(Shape{h, 1}).template expand<2>(Shape{h, w});
    auto base = Tensor<B, 2>::template stack<3>({xs, ys, Tensor<B, 2>::ones(Shape{h, w}, dev)}, 2)
                    .template reshape<3>(Shape{1, h * w, 3});
    // [1, HW, 3] · [N, 3, 2] → [N, HW, 2].
    return base.matmul(theta.swap_dims(1, 2)).template reshape<4>(Shape{size[0], h, w, 2});
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
namespace detail {
/// cos and sin of 2π·(a·b mod n)/n for a in [0, rows), b in [0, cols): the DFT's twiddles,
/// with the product reduced mod n in integers so that the angle keeps full precision.
template <Backend B>
std::pair<Tensor<B, 2>, Tensor<B, 2>> twiddles(std::size_t rows, std::size_t cols, std::size_t n,
                                               const Device<B>& device) {
    using I = Tensor<B, 1, Int>;
    auto a =
        I::arange(0, static_cast<std::int64_t>(rows), device).template reshape<2>(Shape{rows, 1});
    auto b =
        I::arange(0, static_cast<std::int64_t>(cols), device).template reshape<2>(Shape{1, cols});
    auto angle = (a * b).rem_scalar(static_cast<std::int64_t>(n)).float_() *
                 (2.0 * std::numbers::pi / static_cast<double>(n));
    return {angle.cos(), angle.sin()};
}
/// x with `dim` moved last and the rest flattened: [rows, size].
template <Backend B, std::size_t D>
Tensor<B, 2> rows_along(const Tensor<B, D>& x, std::size_t dim) {
    auto t = x.movedim(static_cast<long>(dim), -1);
    const Shape s = t.shape();
    const std::size_t n = s[D - 1];
    return t.template reshape<2>(Shape{n == 0 ? 0 : s.num_elements() / n, n});
}
/// The inverse of rows_along for an output of `size` along `dim`.
template <Backend B, std::size_t D>
Tensor<B, D> unrows(const Tensor<B, 2>& r, Shape s, std::size_t dim, std::size_t size) {
    Shape moved;
    for (std::size_t i = 0; i < D; ++i)
        if (i != dim) moved.push_back(s[i]);
    moved.push_back(size);
    return r.template reshape<D>(moved).movedim(-1, static_cast<long>(dim));
}
}  // namespace detail
/// The discrete Fourier transform of real `x` along `dim`: the real and imaginary parts of the
/// n/2 + 1 non-negative frequencies (torch.fft.rfft). A DFT as two matmuls with cosine and sine
/// tables: O(n²) per signal, exact to rounding, on every backend and through autodiff; fine for
/// the frame lengths of audio features, slow for signals of many thousands of points.
template <Backend B, std::size_t D>
std::pair<Tensor<B, D>, Tensor<B, D>> rfft(const Tensor<B, D>& x, long dim) {
    const std::size_t d = normalize_dim(dim, D, "rfft");
    const Shape s = x.shape();
    const std::size_t n = s[d];
    EMBER_CHECK(n > 0, Shape, "rfft: dim ", d, " of shape ", s.to_string(), " is empty");
    const std::size_t m = n / 2 + 1;
    auto [c, sn] = detail::twiddles<B>(n, m, n, x.device());
    auto r = detail::rows_along(x, d);
    return {detail::unrows<B, D>(r.matmul(c), s, d, m),
            detail::unrows<B, D>(-r.matmul(sn), s, d, m)};
}
/// The discrete Fourier transform of a complex signal (re, im) along `dim` (torch.fft.fft; Burn's
/// cfft): the n frequencies' real and imaginary parts. Two matmul pairs with the cosine and sine
/// tables, as rfft (O(n²) per signal).
template <Backend B, std::size_t D>
std::pair<Tensor<B, D>, Tensor<B, D>> cfft(const Tensor<B, D>& re, const Tensor<B, D>& im,
                                           long dim) {
    const std::size_t d = normalize_dim(dim, D, "cfft");
    const Shape s = re.shape();
    EMBER_CHECK(im.shape() == s, Shape, "cfft: real part ", s.to_string(), " and imaginary part ",
                im.shape().to_string(), " differ");
    const std::size_t n = s[d];
    EMBER_CHECK(n > 0, Shape, "cfft: dim ", d, " of shape ", s.to_string(), " is empty");
    auto [c, sn] = detail::twiddles<B>(n, n, n, re.device());
    auto r = detail::rows_along(re, d), i = detail::rows_along(im, d);
    // (r + i·j)(cos - j·sin) = (r·cos + i·sin) + j·(i·cos - r·sin).
    return {detail::unrows<B, D>(r.matmul(c) + i.matmul(sn), s, d, n),
            detail::unrows<B, D>(i.matmul(c) - r.matmul(sn), s, d, n)};
}
/// The real signal of length `n` whose rfft along `dim` is (re, im) (torch.fft.irfft; n = 0
/// means 2·(bins - 1)). Bins past n/2 + 1 are ignored and missing ones count as zero, as in
/// PyTorch; the imaginary parts of the zero and Nyquist bins do not contribute.
template <Backend B, std::size_t D>
Tensor<B, D> irfft(const Tensor<B, D>& re, const Tensor<B, D>& im, long dim, std::size_t n = 0) {
    const std::size_t d = normalize_dim(dim, D, "irfft");
    const Shape s = re.shape();
    EMBER_CHECK(im.shape() == s, Shape, "irfft: real part ", s.to_string(), " and imaginary part ",
                im.shape().to_string(), " differ");
    const std::size_t bins = s[d];
    EMBER_CHECK(bins > 0, Shape, "irfft: dim ", d, " of shape ", s.to_string(), " is empty");
    if (n == 0) n = 2 * (bins - 1);
    EMBER_CHECK(n > 0, Argument, "irfft: output length 0 from ", bins, " bin(s) of shape ",
                s.to_string());
    const std::size_t used = std::min(bins, n / 2 + 1);
    auto [c, sn] = detail::twiddles<B>(used, n, n, re.device());
    // Each bin but the zero (and, for even n, the Nyquist) one stands for itself and its mirror.
    const double inv = 1.0 / static_cast<double>(n);
    auto wt = Tensor<B, 2>::full(Shape{used, 1}, 2.0 * inv, re.device());
    wt = ember::slice_fill(wt, {Slice{0, 1}}, inv);
    if (n % 2 == 0 && used == n / 2 + 1)
        wt = ember::slice_fill(wt, {Slice{static_cast<long>(used) - 1}}, inv);
    auto r = detail::rows_along(re.narrow(static_cast<long>(d), 0, used), d);
    auto i = detail::rows_along(im.narrow(static_cast<long>(d), 0, used), d);
    auto out = r.matmul(c * wt) - i.matmul(sn * wt);
    return detail::unrows<B, D>(out, s, d, n);
}
/// The short-time Fourier transform along the last dim (torch.stft with onesided output):
/// frames of `n_fft` samples every `hop` samples, each multiplied by `window` (n_fft samples;
/// none: rectangular) and transformed by rfft; [..., L] → real and imaginary parts
/// [..., n_fft/2 + 1, frames]. With `center`, the signal is first padded by n_fft/2 on each side
/// by reflection (PyTorch's default pad_mode), which needs n_fft/2 < L.
template <std::size_t DO, Backend B, std::size_t D>
std::pair<Tensor<B, DO>, Tensor<B, DO>> stft(
    const Tensor<B, D>& x, std::size_t n_fft, std::size_t hop,
    const std::optional<std::type_identity_t<Tensor<B, 1>>>& window = {}, bool center = true) {
    static_assert(DO == D + 1, "signal::stft: the output has one dim more");
    const Shape s = x.shape();
    EMBER_CHECK(n_fft > 0 && hop > 0, Argument, "stft: n_fft ", n_fft, " and hop ", hop,
                " must be positive (signal ", s.to_string(), ")");
    if (window)
        EMBER_CHECK(window->shape()[0] == n_fft, Shape, "stft: window ",
                    window->shape().to_string(), " for n_fft ", n_fft);
    Tensor<B, D> sig = x;
    if (center) {
        const std::size_t p = n_fft / 2, len = s[D - 1];
        EMBER_CHECK(p < len, Shape, "stft: centring pads ", p,
                    " samples by reflection, which needs a ", "longer signal than ", s.to_string());
        if (p > 0) {
            const long l = static_cast<long>(len);
            auto left = x.narrow(-1, 1, p).flip({-1L});
            auto right = x.narrow(-1, static_cast<std::size_t>(l) - p - 1, p).flip({-1L});
            sig = Tensor<B, D>::cat({left, x, right}, -1);
        }
    }
    EMBER_CHECK(n_fft <= sig.shape()[D - 1], Shape, "stft: n_fft ", n_fft, " exceeds the signal ",
                sig.shape().to_string());
    auto frames = ember::unfold<DO>(sig, -1, n_fft, hop);  // [..., frames, n_fft]
    if (window) {
        Shape ws = Shape::filled(DO, 1);
        ws[DO - 1] = n_fft;
        frames = frames * window->template reshape<DO>(ws);
    }
    auto [re, im] = rfft(frames, -1);  // [..., frames, bins]
    return {re.swap_dims(-1, -2), im.swap_dims(-1, -2)};
}
/// The inverse of stft (torch.istft with onesided input): each frame's spectrum (re, im)
/// [..., n_fft/2 + 1, frames] goes back through irfft, is multiplied by `window` (none:
/// rectangular) and overlap-added every `hop` samples; the sum is divided by the overlap-added
/// squared window, which must not vanish anywhere inside the output (PyTorch's NOLA condition;
/// an ArgumentError otherwise). With `center`, the n_fft/2 samples stft padded at the start are
/// removed, and without a `length` those at the end too; a `length` (0: none) trims the result or
/// pads it with zeros.
template <std::size_t DO, Backend B, std::size_t D>
Tensor<B, DO> istft(const Tensor<B, D>& re, const Tensor<B, D>& im, std::size_t n_fft,
                    std::size_t hop,
                    const std::optional<std::type_identity_t<Tensor<B, 1>>>& window = {},
                    bool center = true, std::size_t length = 0) {
    static_assert(D >= 2 && DO == D - 1, "signal::istft: the output has one dim less");
    const Shape s = re.shape();
    EMBER_CHECK(im.shape() == s, Shape, "istft: real part ", s.to_string(), " and imaginary part ",
                im.shape().to_string(), " differ");
    EMBER_CHECK(n_fft > 0 && hop > 0 && hop <= n_fft, Argument, "istft: n_fft ", n_fft, " and hop ",
                hop, " (need 0 < hop <= n_fft) for a spectrum of shape ", s.to_string());
    EMBER_CHECK(s[D - 2] == n_fft / 2 + 1, Shape, "istft: ", s[D - 2], " frequency bins in ",
                s.to_string(), " for n_fft ", n_fft, " (expected ", n_fft / 2 + 1, ")");
    if (window)
        EMBER_CHECK(window->shape()[0] == n_fft, Shape, "istft: window ",
                    window->shape().to_string(), " for n_fft ", n_fft);
    const std::size_t frames = s[D - 1];
    EMBER_CHECK(frames > 0, Shape, "istft: no frames in ", s.to_string());
    const auto dev = re.device();
    // [..., frames, n_fft] signals, windowed.
    auto sig = irfft(re.swap_dims(-1, -2), im.swap_dims(-1, -2), -1, n_fft);
    auto w = window ? *window : Tensor<B, 1>::ones(Shape{n_fft}, dev);
    Shape ws = Shape::filled(D, 1);
    ws[D - 1] = n_fft;
    sig = sig * w.template reshape<D>(ws);
    // Overlap-add: sample j of frame f lands at f·hop + j.
    const std::size_t total = n_fft + hop * (frames - 1);
    using I = Tensor<B, 1, Int>;
    auto pos =
        (I::arange(0, static_cast<std::int64_t>(frames), dev) * static_cast<std::int64_t>(hop))
            .template reshape<2>(Shape{frames, 1}) +
        I::arange(0, static_cast<std::int64_t>(n_fft), dev).template reshape<2>(Shape{1, n_fft});
    auto index = pos.template reshape<1>(Shape{frames * n_fft});
    Shape lead;
    for (std::size_t i = 0; i + 2 < D; ++i) lead.push_back(s[i]);
    Shape flat_in = lead, flat_out = lead;
    flat_in.push_back(frames * n_fft);
    flat_out.push_back(total);
    auto summed = Tensor<B, DO>::zeros(flat_out, dev)
                      .select_assign(-1, index, sig.template reshape<DO>(flat_in));
    auto w2 = (w * w).template reshape<2>(Shape{1, n_fft}).template expand<2>(Shape{frames, n_fft});
    auto envelope = Tensor<B, 1>::zeros(Shape{total}, dev)
                        .select_assign(0, index, w2.template reshape<1>(Shape{frames * n_fft}));
    const std::size_t start = center ? n_fft / 2 : 0;
    // Without a length, the centring padding is cut from the end too; with one, the output
    // runs on into it (and past the last sample as zeros), as PyTorch.
    const std::size_t end =
        length > 0 ? std::min(total, start + length) : (center ? total - n_fft / 2 : total);
    EMBER_CHECK(end > start, Shape, "istft: nothing is left of ", total,
                " samples after removing the ", "centring padding (spectrum ", s.to_string(), ")");
    auto env = envelope.narrow(0, start, end - start);
    const bool nola = env.abs().greater_elem(1e-11).all().into_scalar();
    EMBER_CHECK(nola, Argument, "istft: the window's overlap-added square vanishes inside the ",
                "output (NOLA fails for n_fft ", n_fft, ", hop ", hop, ")");
    Shape es = Shape::filled(DO, 1);
    es[DO - 1] = end - start;
    auto out = summed.narrow(-1, start, end - start) / env.template reshape<DO>(es);
    if (length > end - start) {
        Shape pad = lead;
        pad.push_back(length - (end - start));
        out = Tensor<B, DO>::cat({out, Tensor<B, DO>::zeros(pad, dev)}, -1);
    }
    return out;
}
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

namespace ember::loss {
/// Cross entropy against target probabilities over the last dim, averaged over the other
/// elements: -mean(Σ target · log_softmax(logits)) (Burn's loss::cross_entropy_with_logits,
/// torch.nn.functional.cross_entropy with probability targets); shape [1].
template <Backend B, std::size_t D>
Tensor<B, 1> cross_entropy_with_logits(const Tensor<B, D>& logits, const Tensor<B, D>& targets) {
    EMBER_CHECK(logits.shape() == targets.shape(), Shape, "cross_entropy_with_logits: logits ",
                logits.shape().to_string(), " and targets ", targets.shape().to_string(),
                " differ");
    return -(activation::log_softmax(logits, -1) * targets).sum_dim(-1).mean();
}
}  // namespace ember::loss
