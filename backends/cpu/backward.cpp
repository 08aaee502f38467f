// Gradient kernels of the module ops, the ones Autodiff's backward rules call: the weight
// gradient of 1-, 2- and 3-d convolution (im2col + GEMM, summed over the batch), the input
// gradients of average, adaptive average pooling and interpolation (the transposes of the
// forward kernels' linear maps, built from the same windows and taps), and every gradient of
// torchvision's deformable convolution. The CpuBackend members that run them are defined in
// backend.cpp, where the class is instantiated.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "ember/backend/cpu.hpp"

#include "conv_geometry.hpp"
#include "gemm.hpp"
#include "iter.hpp"
#include "kernels.hpp"
#include "parallel.hpp"
#include "params.hpp"
#include "pool_geometry.hpp"

namespace ember::detail::cpu {
namespace {

bool is_half(DType dt) {
    return dt == DType::F16 || dt == DType::BF16;
}

/// Runs f(n0, n1, parallel_gemm, acc) over the batch, where each call adds the contributions
/// of samples [n0, n1) into `acc` (acc_size elements, zeroed before), and leaves their sum in
/// `out`. Small per-sample products (or a batch large enough to feed every thread) are split
/// across the pool, each chunk into a partial buffer of its own, and the partials are summed in
/// a fixed order (results do not depend on scheduling); otherwise samples run one after another
/// with the GEMMs themselves threaded.
template <typename T, typename F>
void batch_accumulate(std::size_t batch, double per_sample_madds, std::size_t acc_size, T* out,
                      F&& f) {
    const std::size_t threads = num_threads();
    const std::size_t chunks = std::min(batch, threads);
    const bool small = per_sample_madds <= double(std::size_t{1} << 20);
    const bool fits =
        double(chunks) * double(acc_size) * sizeof(T) <= double(std::size_t{64} << 20);
    const bool split = batch > 1 && threads > 1 && (small || (batch >= 2 * threads && fits));
    // Zeroing is split across the pool too: the last ResNet stage's accumulator is 9 MB, the
    // partials of the 8x8 stage at 16 threads 38 MB, which one thread cleared while the others
    // waited.
    constexpr std::size_t kZeroGrain = std::size_t{1} << 15;
    if (!split) {
        parallel_for(acc_size, kZeroGrain,
                     [&](std::size_t i0, std::size_t i1) { std::fill(out + i0, out + i1, T(0)); });
        f(std::size_t{0}, batch, true, out);
        return;
    }
    Scratch<T> partial(chunks * acc_size);
    T* part = partial.get();
    parallel_for(chunks, 1, [&](std::size_t c0, std::size_t c1) {
        for (std::size_t c = c0; c < c1; ++c) {
            T* pc = part + c * acc_size;
            std::fill(pc, pc + acc_size, T(0));  // each chunk clears its own partial
            f(c * batch / chunks, (c + 1) * batch / chunks, false, pc);
        }
    });
    // The partials summed in parallel over the elements (each element in chunk order, so the
    // result does not depend on the thread count's scheduling): done serially this pass costs
    // chunks · acc_size adds on one core, tens of milliseconds for a wide layer at 16 threads.
    // The first partial is copied, not added to a zeroed `out` (0 + x is x: the same sums).
    parallel_for(acc_size, std::size_t{1} << 14, [&](std::size_t i0, std::size_t i1) {
        std::copy(part + i0, part + i1, out + i0);
        for (std::size_t c = 1; c < chunks; ++c) {
            const T* pc = part + c * acc_size;
            for (std::size_t i = i0; i < i1; ++i) out[i] += pc[i];
        }
    });
}

// ---- convolution: weight gradient ----------------------------------------------------------

/// dW[g] = Σ_n grad[n, g] · im2col(x[n, g])ᵀ, per group g.
template <typename T>
void conv_weight_impl(const CpuTensor& x, const CpuTensor& grad, const Geo& g, std::size_t groups,
                      CpuTensor& dw) {
    const std::size_t batch = x.shape[0];
    const i64 cin = static_cast<i64>(x.shape[1]), cout = static_cast<i64>(grad.shape[1]);
    const i64 cg_in = cin / static_cast<i64>(groups), cg_out = cout / static_cast<i64>(groups);
    const i64 K = cg_in * g.k_size(), P = g.out_size(), I = g.in_size();
    const T* X = x.data<T>();
    const T* G = grad.data<T>();
    const bool direct = g.pointwise();  // the input plane is the im2col matrix (P == I)
    const double madds = double(cout) * double(K) * double(P);
    // Samples per GEMM (conv_geometry.hpp): with several side by side the product's depth is
    // nb·P instead of P, and the accumulator (cout × K, megabytes in a late ResNet stage) is
    // read and written once per nb samples instead of once per sample.
    const std::size_t nb = samples_per_gemm(batch, K + cg_out, P, sizeof(T));
    const TapTable taps = direct ? TapTable{} : tap_table(g, g.out, g.in);
    // The product's longer side as its rows: dWᵀ = col · gradᵀ [K × C_out] when K is the larger
    // (OpenBLAS runs 64 × 576 × 1024, a ResNet's first-stage weight gradient, at 70 GFLOP/s
    // and 576 × 64 × 1024 at 90 on one Zen 4 core), transposed into dW once at the end.
    const bool swap = K >= 2 * cg_out;
    // accumulate(depth, a = grad rows, b = col rows, ld, acc of the group): acc += grad · colᵀ.
    auto accumulate = [&](i64 depth, const T* gr, const T* cr, i64 ld, T* acc, bool par) {
        if (swap)
            gemm(false, true, std::size_t(K), std::size_t(cg_out), std::size_t(depth), T(1), cr,
                 std::size_t(ld), gr, std::size_t(ld), T(1), acc, std::size_t(cg_out), par);
        else
            gemm(false, true, std::size_t(cg_out), std::size_t(K), std::size_t(depth), T(1), gr,
                 std::size_t(ld), cr, std::size_t(ld), T(1), acc, std::size_t(K), par);
    };
    Scratch<T> swapped(swap ? static_cast<std::size_t>(cout * K) : 0);

    batch_accumulate<T>(
        batch, madds, static_cast<std::size_t>(cout * K), swap ? swapped.get() : dw.data<T>(),
        [&](std::size_t n0, std::size_t n1, bool par, T* acc) {
            if (nb > 1) {
                const i64 cols = static_cast<i64>(std::min(nb, n1 - n0)) * P;
                Scratch<T> colbuf(static_cast<std::size_t>(K * cols));
                Scratch<T> gradbuf(static_cast<std::size_t>(cg_out * cols));
                const std::size_t plane_buf = taps.empty() ? 0 : static_cast<std::size_t>(I + 1);
                T* col = colbuf.get();
                T* gb = gradbuf.get();
                for (std::size_t m0 = n0; m0 < n1; m0 += nb) {
                    const std::size_t cnt = std::min(nb, n1 - m0);
                    const i64 ld = static_cast<i64>(cnt) * P, q0 = static_cast<i64>(m0);
                    for (std::size_t gi = 0; gi < groups; ++gi) {
                        const i64 gg = static_cast<i64>(gi);
                        const T* xg = X + (q0 * cin + gg * cg_in) * I;
                        if (direct) {
                            gather_planes(xg, cin * I, cg_in, P, static_cast<i64>(cnt), col, ld);
                        } else {
                            per_sample<T>(cnt, par, plane_buf, [&](std::size_t q, T* buf) {
                                unfold(xg + static_cast<i64>(q) * cin * I, cg_in, g, taps,
                                       col + static_cast<i64>(q) * P, ld, buf);
                            });
                        }
                        gather_planes(G + (q0 * cout + gg * cg_out) * P, cout * P, cg_out, P,
                                      static_cast<i64>(cnt), gb, ld);
                        accumulate(ld, gb, col, ld, acc + gg * cg_out * K, par);
                    }
                }
                return;
            }
            Scratch<T> colbuf(direct ? 0 : static_cast<std::size_t>(K * P));
            T* col = colbuf.get();
            for (std::size_t n = n0; n < n1; ++n) {
                const i64 ni = static_cast<i64>(n);
                for (std::size_t gi = 0; gi < groups; ++gi) {
                    const i64 gg = static_cast<i64>(gi);
                    const T* xg = X + (ni * cin + gg * cg_in) * I;
                    const T* go = G + (ni * cout + gg * cg_out) * P;
                    const T* b = xg;
                    if (!direct) {
                        unfold_split(xg, cg_in, g, taps, col, P, par);
                        b = col;
                    }
                    accumulate(P, go, b, P, acc + gg * cg_out * K, par);
                }
            }
        });
    if (!swap) return;
    // dW[g][o][k] = dWᵀ[g][k][o], in 32 × 32 tiles split across the pool over (group, block of
    // k): the loop over groups alone left an ungrouped convolution's transpose (2.4 M values
    // in a late ResNet layer) to one thread while the others waited.
    const T* src = swapped.get();
    T* W = dw.data<T>();
    constexpr i64 kTile = 32;
    const i64 kblocks = (K + kTile - 1) / kTile;
    parallel_for(groups * std::size_t(kblocks),
                 std::size_t(std::max<i64>(1, 4096 / (cg_out * kTile))),
                 [&](std::size_t b0, std::size_t b1) {
                     for (std::size_t b = b0; b < b1; ++b) {
                         const i64 gi = i64(b) / kblocks, k0 = i64(b) % kblocks * kTile;
                         const i64 k1 = std::min(K, k0 + kTile), off = gi * cg_out * K;
                         for (i64 o0 = 0; o0 < cg_out; o0 += kTile) {
                             const i64 o1 = std::min(cg_out, o0 + kTile);
                             for (i64 o = o0; o < o1; ++o)
                                 for (i64 k = k0; k < k1; ++k)
                                     W[off + o * K + k] = src[off + k * cg_out + o];
                         }
                     }
                 });
}

// ---- pooling ---------------------------------------------------------------------------------

/// dx of one plane for an average over the windows `ax` (the transpose of avg_pool_plane):
/// each output's gradient, divided by its window's divisor, is added over its window.
template <typename T>
void avg_plane_backward(const T* __restrict go, T* __restrict gi, const Dims3& g,
                        const std::array<AxisWindows, 3>& ax) {
    const i64 ih = g.in[1], iw = g.in[2];
    std::fill(gi, gi + g.in_size(), T(0));
    for (i64 od = 0; od < g.out[0]; ++od)
        for (i64 oh = 0; oh < g.out[1]; ++oh) {
            const std::size_t ud = std::size_t(od), uh = std::size_t(oh);
            const i64 d0 = ax[0].lo[ud], d1 = ax[0].hi[ud], h0 = ax[1].lo[uh], h1 = ax[1].hi[uh];
            const i64 dh_count = ax[0].count[ud] * ax[1].count[uh];
            const T* grow = go + (od * g.out[1] + oh) * g.out[2];
            for (i64 ow = 0; ow < g.out[2]; ++ow) {
                const std::size_t uw = std::size_t(ow);
                const i64 w0 = ax[2].lo[uw], w1 = ax[2].hi[uw];
                // A window entirely in the padding read nothing (its output is a constant 0).
                if (d0 >= d1 || h0 >= h1 || w0 >= w1) continue;
                const T v = grow[ow] / T(dh_count * ax[2].count[uw]);
                for (i64 d = d0; d < d1; ++d)
                    for (i64 h = h0; h < h1; ++h) {
                        T* row = gi + (d * ih + h) * iw;
                        for (i64 c = w0; c < w1; ++c) row[c] += v;
                    }
            }
        }
}

template <typename T>
void avg_backward_impl(const CpuTensor& grad, const Dims3& g, const std::array<AxisWindows, 3>& ax,
                       i64 window, CpuTensor& dx) {
    const T* G = grad.data<T>();
    T* DX = dx.data<T>();
    const std::size_t planes = dx.shape[0] * dx.shape[1];
    parallel_for(planes, plane_grain(g.in_size() + g.out_size() * window),
                 [&](std::size_t p0, std::size_t p1) {
                     for (std::size_t pl = p0; pl < p1; ++pl) {
                         const i64 q = static_cast<i64>(pl);
                         avg_plane_backward(G + q * g.out_size(), DX + q * g.in_size(), g, ax);
                     }
                 });
}

// ---- interpolation ---------------------------------------------------------------------------

/// dx[iy, ix] += wy·wx·grad[oy, ox] over the separable taps (the transpose of separable_impl).
template <typename T, int Taps>
void separable_backward(const CpuTensor& grad, i64 ih, i64 iw, i64 oh, i64 ow,
                        const AxisWeights<T, Taps>& ay, const AxisWeights<T, Taps>& ax,
                        CpuTensor& dx) {
    const T* G = grad.data<T>();
    T* DX = dx.data<T>();
    const std::size_t planes = dx.shape[0] * dx.shape[1];
    parallel_for(planes, plane_grain(ih * iw + oh * ow * Taps * Taps),
                 [&](std::size_t p0, std::size_t p1) {
                     for (std::size_t pl = p0; pl < p1; ++pl) {
                         const T* go = G + static_cast<i64>(pl) * oh * ow;
                         T* gi = DX + static_cast<i64>(pl) * ih * iw;
                         std::fill(gi, gi + ih * iw, T(0));
                         for (i64 y = 0; y < oh; ++y) {
                             const i64* yi = &ay.idx[std::size_t(y * Taps)];
                             const T* yw = &ay.wt[std::size_t(y * Taps)];
                             for (i64 xo = 0; xo < ow; ++xo) {
                                 const i64* xi = &ax.idx[std::size_t(xo * Taps)];
                                 const T* xw = &ax.wt[std::size_t(xo * Taps)];
                                 const T v = go[y * ow + xo];
                                 for (int r = 0; r < Taps; ++r) {
                                     T* row = gi + yi[r] * iw;
                                     const T vr = yw[r] * v;
                                     for (int c = 0; c < Taps; ++c) row[xi[c]] += xw[c] * vr;
                                 }
                             }
                         }
                     }
                 });
}

/// dx[nearest(oy), nearest(ox)] += grad[oy, ox] (the transpose of nearest_impl).
template <typename T>
void nearest_backward(const CpuTensor& grad, i64 ih, i64 iw, i64 oh, i64 ow, CpuTensor& dx) {
    const T* G = grad.data<T>();
    T* DX = dx.data<T>();
    std::vector<i64> xi(static_cast<std::size_t>(ow));
    for (i64 i = 0; i < ow; ++i) xi[std::size_t(i)] = nearest_index(i, iw, ow);
    const std::size_t planes = dx.shape[0] * dx.shape[1];
    parallel_for(planes, plane_grain(ih * iw + oh * ow), [&](std::size_t p0, std::size_t p1) {
        for (std::size_t pl = p0; pl < p1; ++pl) {
            const T* go = G + static_cast<i64>(pl) * oh * ow;
            T* gi = DX + static_cast<i64>(pl) * ih * iw;
            std::fill(gi, gi + ih * iw, T(0));
            for (i64 y = 0; y < oh; ++y) {
                T* row = gi + nearest_index(y, ih, oh) * iw;
                const T* grow = go + y * ow;
                for (i64 xo = 0; xo < ow; ++xo) row[xi[std::size_t(xo)]] += grow[xo];
            }
        }
    });
}

// ---- deformable convolution -----------------------------------------------------------------

/// One sampling position for the backward pass: its four corners (low/low, low/high,
/// high/low, high/high; `ok` bit j set when corner j lies in the image), the fractional parts,
/// and whether the forward samples there at all (torchvision's bilinear_interpolate returns 0
/// unless -1 < h < height and -1 < w < width). The corners are kept on the boundary h = -1 or
/// w = -1 too, where torchvision's get_coordinate_weight still reads them.
template <typename T>
struct BSample {
    i64 idx[4];
    T lh, lw;
    unsigned ok;
    bool inside;
};

template <typename T>
BSample<T> make_bsample(T h, T w, i64 height, i64 width) {
    BSample<T> s{{0, 0, 0, 0}, T(0), T(0), 0u, false};
    // Outside [-1, height) x [-1, width) every corner is out of the image (and NaN lands here).
    if (!(h >= T(-1) && h < T(height) && w >= T(-1) && w < T(width))) return s;
    const i64 h_low = static_cast<i64>(std::floor(h)), w_low = static_cast<i64>(std::floor(w));
    const i64 h_high = h_low + 1, w_high = w_low + 1;
    s.lh = h - T(h_low);
    s.lw = w - T(w_low);
    s.inside = h > T(-1) && w > T(-1);
    const bool top = h_low >= 0, bottom = h_high <= height - 1;
    const bool left = w_low >= 0, right = w_high <= width - 1;
    if (top && left) {
        s.idx[0] = h_low * width + w_low;
        s.ok |= 1u;
    }
    if (top && right) {
        s.idx[1] = h_low * width + w_high;
        s.ok |= 2u;
    }
    if (bottom && left) {
        s.idx[2] = h_high * width + w_low;
        s.ok |= 4u;
    }
    if (bottom && right) {
        s.idx[3] = h_high * width + w_high;
        s.ok |= 8u;
    }
    return s;
}

/// The four corner values of a sample (0 for corners outside the image).
template <typename T>
inline void corners(const BSample<T>& s, const T* plane, T v[4]) {
    for (int j = 0; j < 4; ++j) v[j] = (s.ok >> j) & 1u ? plane[s.idx[j]] : T(0);
}

/// torchvision's bilinear_interpolate from the corner values.
template <typename T>
inline T bilinear(const BSample<T>& s, const T v[4]) {
    if (!s.inside) return T(0);
    const T hh = T(1) - s.lh, hw = T(1) - s.lw;
    return hh * hw * v[0] + hh * s.lw * v[1] + s.lh * hw * v[2] + s.lh * s.lw * v[3];
}

template <typename T>
void deform_backward_impl(const CpuTensor& x, const CpuTensor& off, const CpuTensor& w,
                          const CpuTensor* mask, bool has_bias, const CpuTensor& grad,
                          const DeformConvOptions& o, i64 oh_n, i64 ow_n,
                          DeformConv2dGradients& out) {
    const std::size_t batch = x.shape[0];
    const i64 cin = static_cast<i64>(x.shape[1]), H = static_cast<i64>(x.shape[2]),
              Wd = static_cast<i64>(x.shape[3]), HW = H * Wd;
    const i64 cout = static_cast<i64>(w.shape[0]), kh = static_cast<i64>(w.shape[2]),
              kw = static_cast<i64>(w.shape[3]);
    const i64 kk = kh * kw, P = oh_n * ow_n, KP = kk * P;
    const i64 og_n = static_cast<i64>(o.offset_groups), wg_n = static_cast<i64>(o.weight_groups);
    const i64 c_per_og = cin / og_n, cg_in = cin / wg_n, cg_out = cout / wg_n;
    const i64 K = cg_in * kk;
    const i64 sh = static_cast<i64>(o.stride[0]), sw = static_cast<i64>(o.stride[1]);
    const i64 ph = static_cast<i64>(o.padding[0]), pw = static_cast<i64>(o.padding[1]);
    const i64 dh = static_cast<i64>(o.dilation[0]), dw = static_cast<i64>(o.dilation[1]);
    const T* X = x.data<T>();
    const T* OFF = off.data<T>();
    const T* M = mask ? mask->data<T>() : nullptr;
    const T* W = w.data<T>();
    const T* G = grad.data<T>();
    T* DX = out.x.data<T>();
    T* DOFF = out.offset.data<T>();
    T* DM = out.mask ? out.mask->data<T>() : nullptr;
    const std::size_t wsize = static_cast<std::size_t>(cout * K);
    const std::size_t acc_size = wsize + (has_bias ? static_cast<std::size_t>(cout) : 0);
    const double madds = 2 * double(cout) * double(K) * double(P) + double(cin) * double(KP) * 16;
    const std::size_t row_grain =
        std::max<std::size_t>(1, std::size_t(65536 / std::max<i64>(P, 1)));
    const std::size_t chan_grain =
        std::max<std::size_t>(1, std::size_t(65536 / std::max<i64>(KP, 1)));
    constexpr i64 kQChunk = 256;
    const i64 q_chunks = (KP + kQChunk - 1) / kQChunk;

    Scratch<T> accbuf(acc_size);
    batch_accumulate<T>(
        batch, madds, acc_size, accbuf.get(),
        [&](std::size_t n0, std::size_t n1, bool par, T* acc) {
            Scratch<T> colbuf(static_cast<std::size_t>(cin * KP));
            Scratch<BSample<T>> sbuf(static_cast<std::size_t>(og_n * KP));
            T* col = colbuf.get();
            BSample<T>* samples = sbuf.get();
            for (std::size_t n = n0; n < n1; ++n) {
                const i64 ni = static_cast<i64>(n);
                const T* Xn = X + ni * cin * HW;
                const T* OFFn = OFF + ni * og_n * 2 * KP;
                const T* Mn = M ? M + ni * og_n * KP : nullptr;
                const T* Gn = G + ni * cout * P;
                T* DXn = DX + ni * cin * HW;
                T* DOFFn = DOFF + ni * og_n * 2 * KP;
                T* DMn = DM ? DM + ni * og_n * KP : nullptr;

                // 1. Sampling positions, per offset group, kernel tap and output position.
                parallel_for(
                    std::size_t(og_n * kk), row_grain, [&](std::size_t r0, std::size_t r1) {
                        for (std::size_t r = r0; r < r1; ++r) {
                            const i64 og = static_cast<i64>(r) / kk, k = static_cast<i64>(r) % kk;
                            const i64 i = k / kw, j = k % kw;
                            const T* offg = OFFn + og * 2 * KP;
                            BSample<T>* sk = samples + og * KP + k * P;
                            for (i64 y = 0; y < oh_n; ++y)
                                for (i64 xo = 0; xo < ow_n; ++xo) {
                                    const i64 pidx = y * ow_n + xo;
                                    const T hpos =
                                        T(y * sh - ph + i * dh) + offg[(2 * k) * P + pidx];
                                    const T wpos =
                                        T(xo * sw - pw + j * dw) + offg[(2 * k + 1) * P + pidx];
                                    sk[pidx] = make_bsample<T>(hpos, wpos, H, Wd);
                                }
                        }
                    });

                // 2. The forward's columns: col[c, k, p] = mask · bilinear(x[c], position).
                parallel_for(std::size_t(cin), chan_grain, [&](std::size_t c0, std::size_t c1) {
                    for (std::size_t cu = c0; cu < c1; ++cu) {
                        const i64 c = static_cast<i64>(cu), og = c / c_per_og;
                        const T* plane = Xn + c * HW;
                        const BSample<T>* sg = samples + og * KP;
                        const T* mg = Mn ? Mn + og * KP : nullptr;
                        T* dst = col + c * KP;
                        for (i64 q = 0; q < KP; ++q) {
                            T v[4];
                            corners(sg[q], plane, v);
                            const T val = bilinear(sg[q], v);
                            dst[q] = mg ? mg[q] * val : val;
                        }
                    }
                });

                // 3. dW[g] += grad[g] · col[g]ᵀ and dbias += Σ_p grad.
                for (i64 gi = 0; gi < wg_n; ++gi)
                    gemm(false, true, std::size_t(cg_out), std::size_t(K), std::size_t(P), T(1),
                         Gn + gi * cg_out * P, std::size_t(P), col + gi * K * P, std::size_t(P),
                         T(1), acc + gi * cg_out * K, std::size_t(K), par);
                if (has_bias) {
                    T* db = acc + wsize;
                    for (i64 co = 0; co < cout; ++co) {
                        const T* gr = Gn + co * P;
                        T s = T(0);
                        for (i64 p = 0; p < P; ++p) s += gr[p];
                        db[co] += s;
                    }
                }

                // 4. dcol[g] = W[g]ᵀ · grad[g] (over the columns, which are no longer needed).
                for (i64 gi = 0; gi < wg_n; ++gi)
                    gemm(true, false, std::size_t(K), std::size_t(P), std::size_t(cg_out), T(1),
                         W + gi * cg_out * K, std::size_t(K), Gn + gi * cg_out * P, std::size_t(P),
                         T(0), col + gi * K * P, std::size_t(P), par);
                const T* dcol = col;

                // 5. dx: each column gradient goes back to the corners it was sampled from (as
                // torchvision's col2im: corners of zero weight receive nothing).
                parallel_for(std::size_t(cin), chan_grain, [&](std::size_t c0, std::size_t c1) {
                    for (std::size_t cu = c0; cu < c1; ++cu) {
                        const i64 c = static_cast<i64>(cu), og = c / c_per_og;
                        T* dplane = DXn + c * HW;
                        std::fill(dplane, dplane + HW, T(0));
                        const BSample<T>* sg = samples + og * KP;
                        const T* mg = Mn ? Mn + og * KP : nullptr;
                        const T* dc = dcol + c * KP;
                        for (i64 q = 0; q < KP; ++q) {
                            const BSample<T>& s = sg[q];
                            if (!s.inside) continue;
                            const T d = mg ? mg[q] * dc[q] : dc[q];
                            const T hh = T(1) - s.lh, hw = T(1) - s.lw;
                            const T wt[4] = {hh * hw, hh * s.lw, s.lh * hw, s.lh * s.lw};
                            for (int j = 0; j < 4; ++j)
                                if (((s.ok >> j) & 1u) && wt[j] != T(0))
                                    dplane[s.idx[j]] += wt[j] * d;
                        }
                    }
                });

                // 6. doffset and dmask: per position, summed over the channels of its offset group
                // (torchvision's deformable_col2im_coord), in chunks of positions.
                parallel_for(std::size_t(og_n * q_chunks), 1, [&](std::size_t r0, std::size_t r1) {
                    T gy[kQChunk], gx[kQChunk], gm[kQChunk];
                    for (std::size_t r = r0; r < r1; ++r) {
                        const i64 og = static_cast<i64>(r) / q_chunks;
                        const i64 q0 = (static_cast<i64>(r) % q_chunks) * kQChunk;
                        const i64 q1 = std::min(q0 + kQChunk, KP), nq = q1 - q0;
                        const BSample<T>* sg = samples + og * KP;
                        std::fill(gy, gy + nq, T(0));
                        std::fill(gx, gx + nq, T(0));
                        std::fill(gm, gm + nq, T(0));
                        for (i64 c = og * c_per_og; c < (og + 1) * c_per_og; ++c) {
                            const T* plane = Xn + c * HW;
                            const T* dc = dcol + c * KP;
                            for (i64 q = q0; q < q1; ++q) {
                                const BSample<T>& s = sg[q];
                                if (!s.ok) continue;
                                T v[4];
                                corners(s, plane, v);
                                const T d = dc[q];
                                // d/dh and d/dw of the bilinear sample (get_coordinate_weight).
                                gy[q - q0] +=
                                    (s.lw * (v[3] - v[1]) + (T(1) - s.lw) * (v[2] - v[0])) * d;
                                gx[q - q0] +=
                                    (s.lh * (v[3] - v[2]) + (T(1) - s.lh) * (v[1] - v[0])) * d;
                                if (Mn) gm[q - q0] += bilinear(s, v) * d;
                            }
                        }
                        T* doffg = DOFFn + og * 2 * KP;
                        const T* mg = Mn ? Mn + og * KP : nullptr;
                        for (i64 q = q0; q < q1; ++q) {
                            const i64 k = q / P;
                            const T m = mg ? mg[q] : T(1);
                            doffg[q + k * P] = m * gy[q - q0];        // (2k) * P + p
                            doffg[q + (k + 1) * P] = m * gx[q - q0];  // (2k + 1) * P + p
                            if (DMn) DMn[og * KP + q] = gm[q - q0];
                        }
                    }
                });
            }
        });
    std::copy(accbuf.get(), accbuf.get() + wsize, out.weight.data<T>());
    if (has_bias) std::copy(accbuf.get() + wsize, accbuf.get() + acc_size, out.bias->data<T>());
}

}  // namespace

// ---- public kernels --------------------------------------------------------------------------

CpuTensor conv_weight_backward(CpuTensor x, CpuTensor grad, const Shape& weight_shape,
                               const ConvParams& p) {
    const check::Conv c = check::conv_weight_backward(x, grad, weight_shape, p);
    const Geo g{c.g};
    const Shape& out_shape = c.out;
    const DType dt = x.dtype;
    if (is_half(dt))
        return cast(conv_weight_backward(cast(std::move(x), DType::F32),
                                         cast(std::move(grad), DType::F32), weight_shape, p),
                    dt);
    CpuTensor dw = empty(weight_shape, dt);
    if (weight_shape.num_elements() == 0) return dw;
    if (out_shape.num_elements() == 0) return full(weight_shape, Scalar(0.0), dt);
    x = contiguous(std::move(x));
    grad = contiguous(std::move(grad));
    by_float_type(dt,
                  [&]<typename T>(TypeTag<T>) { conv_weight_impl<T>(x, grad, g, p.groups, dw); });
    return dw;
}

CpuTensor avg_pool_backward(CpuTensor x, CpuTensor grad, const PoolParams& p) {
    Shape out_shape;
    const Dims3 g = pool_geometry("avg_pool", x, p, false, out_shape, "_backward");
    const std::string op = "avg_pool" + std::to_string(p.n) + "d_backward";
    check::grad(op, x, grad, out_shape);
    const DType dt = x.dtype;
    if (is_half(dt))
        return cast(
            avg_pool_backward(cast(std::move(x), DType::F32), cast(std::move(grad), DType::F32), p),
            dt);
    if (x.shape.num_elements() == 0) return empty(x.shape, dt);
    if (out_shape.num_elements() == 0) return full(x.shape, Scalar(0.0), dt);
    CpuTensor dx = empty(x.shape, dt);
    grad = contiguous(std::move(grad));
    const Window3 w = window3(p);
    std::array<AxisWindows, 3> ax;
    for (int d = 0; d < 3; ++d)
        ax[d] = avg_windows(g.in[d], g.out[d], w.k[d], w.s[d], w.pad[d], p.count_include_pad);
    by_float_type(dt, [&]<typename T>(TypeTag<T>) {
        avg_backward_impl<T>(grad, g, ax, w.k[0] * w.k[1] * w.k[2], dx);
    });
    return dx;
}

CpuTensor adaptive_avg_pool_backward(CpuTensor x, CpuTensor grad, std::size_t n) {
    check::adaptive_avg_pool_backward(x, grad, n);
    Dims3 g;
    for (std::size_t d = 0; d < n; ++d) {
        const std::size_t s = 3 - n + d;
        g.in[s] = static_cast<i64>(x.shape[2 + d]);
        g.out[s] = static_cast<i64>(grad.shape[2 + d]);
    }
    const DType dt = x.dtype;
    if (is_half(dt))
        return cast(adaptive_avg_pool_backward(cast(std::move(x), DType::F32),
                                               cast(std::move(grad), DType::F32), n),
                    dt);
    if (x.shape.num_elements() == 0) return empty(x.shape, dt);
    if (grad.shape.num_elements() == 0) return full(x.shape, Scalar(0.0), dt);
    CpuTensor dx = empty(x.shape, dt);
    grad = contiguous(std::move(grad));
    std::array<AxisWindows, 3> ax;
    i64 window = 1;
    for (int d = 0; d < 3; ++d) {
        for (i64 o = 0; o < g.out[d]; ++o) {
            const i64 lo = adaptive_start(o, g.out[d], g.in[d]);
            const i64 hi = adaptive_end(o, g.out[d], g.in[d]);
            ax[d].lo.push_back(lo);
            ax[d].hi.push_back(hi);
            ax[d].count.push_back(hi - lo);
        }
        window *= (g.in[d] + g.out[d] - 1) / g.out[d] + 1;
    }
    by_float_type(dt,
                  [&]<typename T>(TypeTag<T>) { avg_backward_impl<T>(grad, g, ax, window, dx); });
    return dx;
}

CpuTensor interpolate_backward(CpuTensor x, CpuTensor grad,
                               std::span<const std::size_t> output_size,
                               const InterpolateOptions& o) {
    check::interpolate_backward(x, grad, output_size);
    const std::size_t n = output_size.size();
    const i64 ih = n == 2 ? static_cast<i64>(x.shape[2]) : 1;
    const i64 iw = static_cast<i64>(x.shape[n + 1]);
    const i64 oh = n == 2 ? static_cast<i64>(output_size[0]) : 1;
    const i64 ow = static_cast<i64>(output_size[n - 1]);
    const DType dt = x.dtype;
    if (is_half(dt))
        return cast(interpolate_backward(cast(std::move(x), DType::F32),
                                         cast(std::move(grad), DType::F32), output_size, o),
                    dt);
    CpuTensor dx = empty(x.shape, dt);
    if (x.shape.num_elements() == 0) return dx;
    grad = contiguous(std::move(grad));
    by_float_type(dt, [&]<typename T>(TypeTag<T>) {
        switch (o.mode) {
            case InterpolateMode::Nearest:
                nearest_backward<T>(grad, ih, iw, oh, ow, dx);
                break;
            case InterpolateMode::Bilinear:
                separable_backward<T, 2>(grad, ih, iw, oh, ow,
                                         linear_weights<T>(ih, oh, o.align_corners),
                                         linear_weights<T>(iw, ow, o.align_corners), dx);
                break;
            case InterpolateMode::Bicubic:
                separable_backward<T, 4>(grad, ih, iw, oh, ow,
                                         cubic_weights<T>(ih, oh, o.align_corners),
                                         cubic_weights<T>(iw, ow, o.align_corners), dx);
                break;
        }
    });
    return dx;
}

DeformConv2dGradients deform_conv2d_backward(CpuTensor x, CpuTensor offset, CpuTensor w,
                                             std::optional<CpuTensor> mask,
                                             std::optional<CpuTensor> bias, CpuTensor grad,
                                             const DeformConvOptions& o) {
    const char* op = "deform_conv2d_backward";
    const check::Deform geo =
        check::deform_conv2d(op, x, offset, w, check::operand(mask), check::operand(bias), o);
    const Shape& out_shape = geo.out;
    check::grad(op, x, grad, out_shape);
    const DType dt = x.dtype;
    if (is_half(dt)) {
        auto r = deform_conv2d_backward(
            cast(std::move(x), DType::F32), cast(std::move(offset), DType::F32),
            cast(std::move(w), DType::F32), cast_opt(std::move(mask), DType::F32),
            cast_opt(std::move(bias), DType::F32), cast(std::move(grad), DType::F32), o);
        return {cast(std::move(r.x), dt), cast(std::move(r.offset), dt),
                cast(std::move(r.weight), dt), cast_opt(std::move(r.mask), dt),
                cast_opt(std::move(r.bias), dt)};
    }
    if (out_shape.num_elements() == 0 || x.shape.num_elements() == 0) {
        // Nothing was sampled: every gradient is zero.
        DeformConv2dGradients r{full(x.shape, Scalar(0.0), dt), full(offset.shape, Scalar(0.0), dt),
                                full(w.shape, Scalar(0.0), dt), std::nullopt, std::nullopt};
        if (mask) r.mask = full(mask->shape, Scalar(0.0), dt);
        if (bias) r.bias = full(bias->shape, Scalar(0.0), dt);
        return r;
    }
    // Every element of each result is written below (dx, doffset and dmask per sample).
    DeformConv2dGradients r{empty(x.shape, dt), empty(offset.shape, dt), empty(w.shape, dt),
                            std::nullopt, std::nullopt};
    if (mask) r.mask = empty(mask->shape, dt);
    if (bias) r.bias = empty(bias->shape, dt);
    x = contiguous(std::move(x));
    offset = contiguous(std::move(offset));
    w = contiguous(std::move(w));
    if (mask) mask = contiguous(std::move(*mask));
    grad = contiguous(std::move(grad));
    by_float_type(dt, [&]<typename T>(TypeTag<T>) {
        deform_backward_impl<T>(x, offset, w, mask ? &*mask : nullptr, bias.has_value(), grad, o,
                                geo.oh, geo.ow, r);
    });
    return r;
}

}  // namespace ember::detail::cpu
