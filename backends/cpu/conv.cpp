// Convolutions: im2col + GEMM for 1-, 2- and 3-d convolution, GEMM + col2im for the transposed
// convolution, and torchvision's deformable convolution (bilinear im2col + GEMM). Every
// spatial rank is handled as 3-d with leading unit dims, so there is one set of loops.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "conv_geometry.hpp"
#include "gemm.hpp"
#include "iter.hpp"
#include "kernels.hpp"
#include "parallel.hpp"
#include "winograd.hpp"

namespace ember::detail::cpu {
namespace {

/// out[c, o] += col[(c, kd, kh, kw), i] where o = i*stride - pad + k*dil (the transpose of
/// im2col), for `channels` output planes; col's rows are ld apart (0: packed). Here `g.in` is
/// the transposed conv's input size and `g.out` its output size.
template <typename T>
void col2im(const T* col, i64 channels, const Geo& g, T* out, i64 ld = 0) {
    const i64 P = ld ? ld : g.in_size();
    const T* src = col;
    for (i64 c = 0; c < channels; ++c) {
        T* oc = out + c * g.out_size();
        for (i64 kd = 0; kd < g.k[0]; ++kd)
            for (i64 kh = 0; kh < g.k[1]; ++kh)
                for (i64 kw = 0; kw < g.k[2]; ++kw) {
                    const i64 s = g.stride[2], off = kw * g.dil[2] - g.pad[2];
                    // Input columns iw whose target iw*s + off lies inside the output row.
                    const auto [lo, hi] = valid_range(g.out[2], g.in[2], s, off);
                    const T* row = src;
                    for (i64 id = 0; id < g.in[0]; ++id) {
                        const i64 od = id * g.stride[0] - g.pad[0] + kd * g.dil[0];
                        if (od < 0 || od >= g.out[0]) {
                            row += g.in[1] * g.in[2];
                            continue;
                        }
                        for (i64 ih = 0; ih < g.in[1]; ++ih, row += g.in[2]) {
                            const i64 oh = ih * g.stride[1] - g.pad[1] + kh * g.dil[1];
                            if (oh < 0 || oh >= g.out[1]) continue;
                            T* orow = oc + (od * g.out[1] + oh) * g.out[2] + off;
                            if (s == 1) {
                                for (i64 iw = lo; iw < hi; ++iw) orow[iw] += row[iw];
                            } else {
                                for (i64 iw = lo; iw < hi; ++iw) orow[iw * s] += row[iw];
                            }
                        }
                    }
                    src += P;
                }
    }
}

/// Fills each of `rows` rows of length `len` with bias[r] (or 0).
template <typename T>
void fill_rows(T* out, i64 rows, i64 len, const T* bias) {
    for (i64 r = 0; r < rows; ++r)
        std::fill(out + r * len, out + (r + 1) * len, bias ? bias[r] : T(0));
}

/// Runs f(n0, n1, parallel_gemm) over the batch: split across the pool (each sample's GEMM then
/// single-threaded) when the per-sample products are small, where BLAS would not thread them
/// and the pool wins, when the kernel never threads anyway, or when the batch gives every thread
/// two samples or more (the im2col, serial per sample, then runs in parallel too, and no BLAS
/// pool has to wake for each sample's GEMM); otherwise sample after sample with the GEMM itself
/// threaded.
template <typename F>
void over_batch(std::size_t batch, double per_sample_madds, bool kernel_threads, F&& f) {
    const std::size_t threads = num_threads();
    const bool split = batch > 1 && threads > 1 &&
                       (!kernel_threads || per_sample_madds <= double(std::size_t{1} << 20) ||
                        batch >= 2 * threads);
    if (split) {
        const std::size_t grain =
            std::max<std::size_t>(1, static_cast<std::size_t>(double(std::size_t{1} << 18) /
                                                              std::max(per_sample_madds, 1.0)));
        parallel_for(batch, grain, [&](std::size_t n0, std::size_t n1) { f(n0, n1, false); });
    } else {
        f(0, batch, true);
    }
}

// ---- convolution ----------------------------------------------------------------------------

/// `winograd`: whether a 3×3 stride-1 float layer may take Winograd's F(m×m, 3×3) where it
/// pays (winograd.cpp); false for the transposed convolution run as a convolution (the input
/// gradient of training, which keeps its im2col path).
template <typename T>
void conv_impl(const CpuTensor& x, const CpuTensor& w, const T* bias, const Geo& g,
               std::size_t groups, CpuTensor& out, bool winograd = true) {
    if constexpr (std::is_same_v<T, float>)
        if (winograd && conv_winograd(x, w, bias, g, groups, out)) return;
    const std::size_t batch = x.shape[0];
    const i64 cin = static_cast<i64>(x.shape[1]), cout = static_cast<i64>(w.shape[0]);
    const i64 cg_in = cin / static_cast<i64>(groups), cg_out = cout / static_cast<i64>(groups);
    const i64 K = cg_in * g.k_size(), P = g.out_size(), I = g.in_size();
    const T* X = x.data<T>();
    const T* W = w.data<T>();
    T* O = out.data<T>();
    const bool direct = g.pointwise();
    // The unpacked small-depth kernel beats packing GEMMs while the im2col matrix stays in L2;
    // BLAS (when preferred) keeps the deeper products.
    const bool small_k =
        K <= static_cast<i64>(kSmallK) ||
        (!gemm_uses_blas() && K <= 256 && double(K * P) * sizeof(T) <= double(1 << 20));
    const double madds = double(cout) * double(K) * double(P);
    // Samples per GEMM: one, or several side by side where a sample has few output positions.
    const std::size_t nb = small_k ? 1 : samples_per_gemm(batch, K, P, sizeof(T));
    // im2col packed straight into the GEMM's panels (conv_geometry.hpp's Im2colPacker), or
    // materialised and handed to gemm (BLAS where preferred).
    // Not below 64 columns a product (a batch-1 4×4 layer: 16): the kernels' panels are 32
    // columns wide, and half-empty ones lose more than the packing saves.
    const bool implicit =
        !small_k && !direct && static_cast<i64>(nb) * P >= 64 && conv_packs_im2col();
    const TapTable taps = direct || implicit ? TapTable{} : tap_table(g, g.out, g.in);
    // The weights packed for the kernels once, not once per sample's product: per sample that
    // packing was a tenth of a late ResNet layer's time. For a single product the GEMM packs
    // them block by block, each block used while it is in cache (a pass of its own would read
    // a late layer's 9 MB of weights from memory twice).
    // A model's weights at inference are packed once and kept (matmul.cpp), for batch 1 too.
    const auto kept =
        implicit ? kept_packed_a(w, W, groups, std::size_t(cg_out), std::size_t(K)) : nullptr;
    const bool prepack = implicit && !kept && (batch + nb - 1) / nb > 1;
    const std::size_t wsize =
        prepack || kept ? gemm_packed_a_size(std::size_t(cg_out), std::size_t(K)) : 0;
    Scratch<T> wpack(prepack ? groups * wsize : 0);
    const T* wpacked =
        kept ? static_cast<const T*>(kept->buf->data) : (prepack ? wpack.get() : nullptr);
    if (prepack)
        for (std::size_t gi = 0; gi < groups; ++gi)
            gemm_pack_a(std::size_t(cg_out), std::size_t(K), W + i64(gi) * cg_out * K,
                        std::size_t(K), wpack.get() + gi * wsize);
    if (nb > 1) {
        const std::size_t units = (batch + nb - 1) / nb;
        over_batch(units, madds * double(nb), true, [&](std::size_t u0, std::size_t u1, bool par) {
            const i64 cols = static_cast<i64>(nb) * P;
            Scratch<T> colbuf(implicit ? 0 : static_cast<std::size_t>(K * cols));
            Scratch<T> outbuf(static_cast<std::size_t>(cg_out * cols));
            const std::size_t plane_buf = taps.empty() ? 0 : static_cast<std::size_t>(I + 1);
            T* col = colbuf.get();
            T* tmp = outbuf.get();
            Im2colPacker<T> packer(implicit ? cg_in : 0, g);
            for (std::size_t u = u0; u < u1; ++u) {
                const std::size_t n0 = u * nb, cnt = std::min(nb, batch - n0);
                const i64 ld = static_cast<i64>(cnt) * P, q0 = static_cast<i64>(n0);
                for (std::size_t gi = 0; gi < groups; ++gi) {
                    const i64 gg = static_cast<i64>(gi);
                    const T* xg = X + (q0 * cin + gg * cg_in) * I;
                    if (implicit) {
                        packer.load(xg, cin * I, static_cast<i64>(cnt));
                        gemm_packed_b(std::size_t(cg_out), std::size_t(ld), std::size_t(K),
                                      W + gg * cg_out * K, std::size_t(K), packer.packer(),
                                      static_cast<const T*>(nullptr), tmp, std::size_t(ld), par,
                                      wpacked ? wpacked + gi * wsize : nullptr);
                    } else if (direct) {
                        gather_planes(xg, cin * I, cg_in, P, static_cast<i64>(cnt), col, ld);
                    } else {
                        per_sample<T>(cnt, par, plane_buf, [&](std::size_t q, T* buf) {
                            unfold(xg + static_cast<i64>(q) * cin * I, cg_in, g, taps,
                                   col + static_cast<i64>(q) * P, ld, buf);
                        });
                    }
                    if (!implicit)
                        gemm(false, false, std::size_t(cg_out), std::size_t(ld), std::size_t(K),
                             T(1), W + gg * cg_out * K, std::size_t(K), col, std::size_t(ld), T(0),
                             tmp, std::size_t(ld), par);
                    scatter_planes(tmp, ld, cg_out, P, static_cast<i64>(cnt),
                                   bias ? bias + gg * cg_out : nullptr,
                                   O + (q0 * cout + gg * cg_out) * P, cout * P);
                }
            }
        });
        return;
    }

    over_batch(batch, madds, !small_k, [&](std::size_t n0, std::size_t n1, bool par) {
        Scratch<T> colbuf(direct || implicit ? 0 : static_cast<std::size_t>(K * P));
        T* col = colbuf.get();
        Im2colPacker<T> packer(implicit ? cg_in : 0, g);
        for (std::size_t n = n0; n < n1; ++n) {
            for (std::size_t gi = 0; gi < groups; ++gi) {
                const i64 gg = static_cast<i64>(gi);
                const T* xg = X + (static_cast<i64>(n) * cin + gg * cg_in) * I;
                const T* wg = W + gg * cg_out * K;
                const T* bg = bias ? bias + gg * cg_out : nullptr;
                T* og = O + (static_cast<i64>(n) * cout + gg * cg_out) * P;
                if (implicit) {  // the bias rides in the GEMM's write of the output
                    packer.load(xg, cin * I, 1);
                    gemm_packed_b(std::size_t(cg_out), std::size_t(P), std::size_t(K), wg,
                                  std::size_t(K), packer.packer(), bg, og, std::size_t(P), par,
                                  wpacked ? wpacked + gi * wsize : nullptr);
                    continue;
                }
                const T* b = xg;
                if (!direct) {
                    unfold_split(xg, cg_in, g, taps, col, P, par);
                    b = col;
                }
                if (small_k) {
                    // The kernel never threads: a batch-1 first layer (3 -> 64 channels over
                    // 32 x 32 positions) splits its columns across the pool in strips of 64.
                    const std::size_t strips = (std::size_t(P) + 63) / 64;
                    const std::size_t grain = std::max<std::size_t>(
                        1, std::size_t(1 << 17) /
                               std::max<std::size_t>(1, std::size_t(cg_out * K) * 64));
                    auto strip = [&](std::size_t s0, std::size_t s1) {
                        const std::size_t j0 = s0 * 64, j1 = std::min(std::size_t(P), s1 * 64);
                        gemm_small_k(std::size_t(cg_out), j1 - j0, std::size_t(K), wg,
                                     std::size_t(K), b + j0, std::size_t(P), bg, og + j0,
                                     std::size_t(P));
                    };
                    if (par)
                        parallel_for(strips, grain, strip);
                    else
                        strip(0, strips);
                } else if (const auto kept =
                               kept_packed_b(w, wg, true, std::size_t(K), true, std::size_t(P),
                                             std::size_t(K), std::size_t(cg_out))) {
                    // The weights kept packed (a model's, at inference: matmul.cpp): the product
                    // transposed, Oᵀ [P × cg_out] = colᵀ · Wᵀ, the weights as B read from their
                    // kept panels instead of packed at every call (a fifth of a batch-1
                    // ResNet-18 pass), and a late layer's few positions (4×4: 16) filling the
                    // kernels' rows, where as columns they half-filled panels of 32.
                    Scratch<T> tbuf(static_cast<std::size_t>(P * cg_out));
                    T* t = tbuf.get();
                    gemm_prepacked(true, std::size_t(P), std::size_t(cg_out), std::size_t(K), T(1),
                                   b, std::size_t(P), *kept, T(0), t, std::size_t(cg_out), par);
                    for (i64 o0 = 0; o0 < cg_out; o0 += 16) {  // og = tᵀ (+ bias), in blocks
                        const i64 o1 = std::min(cg_out, o0 + 16);
                        for (i64 p = 0; p < P; ++p)
                            for (i64 o = o0; o < o1; ++o)
                                og[o * P + p] = bg ? t[p * cg_out + o] + bg[o] : t[p * cg_out + o];
                    }
                } else {
                    if (bg) fill_rows(og, cg_out, P, bg);
                    gemm(false, false, std::size_t(cg_out), std::size_t(P), std::size_t(K), T(1),
                         wg, std::size_t(K), b, std::size_t(P), bg ? T(1) : T(0), og,
                         std::size_t(P), par);
                }
            }
        }
    });
}

// ---- transposed convolution ----------------------------------------------------------------

/// A stride-1 transposed convolution as the convolution it equals: each output reads the
/// inputs its taps reach, through the kernel flipped in every spatial dim, each group's two
/// channel dims swapped, and padding dil·(k − 1) − pad. That is the input gradient of a
/// stride-1 convolution (most of a ResNet's), and it then runs as conv_impl does, its im2col
/// packed into the GEMM's panels, instead of a GEMM into a column matrix scattered back by
/// col2im. False (nothing done) where the shapes do not allow it: a stride, padding beyond the
/// kernel's reach, an output padding, a 1×1 kernel (its GEMM already writes the output); or
/// where it would not pay: few output channels for many input ones (a network's first layer,
/// 64 → 3: the convolution would pack 64 channels' taps for 3 rows of output, where col2im
/// scatters 3 channels' columns; measured 6× slower).
template <typename T>
bool conv_transpose_as_conv(const CpuTensor& x, const CpuTensor& w, const T* bias, const Geo& g,
                            std::size_t groups, CpuTensor& out) {
    if (g.pointwise() || !conv_packs_im2col()) return false;
    if (2 * static_cast<i64>(w.shape[1]) < static_cast<i64>(x.shape[1] / groups)) return false;
    Geo f = g;
    for (int d = 0; d < 3; ++d) {
        f.pad[d] = g.dil[d] * (g.k[d] - 1) - g.pad[d];
        if (g.stride[d] != 1 || f.pad[d] < 0 ||
            g.out[d] != g.in[d] + 2 * f.pad[d] - g.dil[d] * (g.k[d] - 1))
            return false;
    }
    const i64 cin = static_cast<i64>(x.shape[1]), gs = static_cast<i64>(groups);
    const i64 cg_in = cin / gs, cg_out = static_cast<i64>(w.shape[1]), taps = g.k_size();
    const i64 cout = cg_out * gs;
    // wf[g·cg_out + o, i, t] = w[g·cg_in + i, o, taps − 1 − t]
    CpuTensor wf = empty(Shape{static_cast<std::size_t>(cout), static_cast<std::size_t>(cg_in),
                               static_cast<std::size_t>(taps)},
                         x.dtype);
    const T* W = w.data<T>();
    T* F = wf.data<T>();
    parallel_for(static_cast<std::size_t>(cout), 16, [&](std::size_t o0, std::size_t o1) {
        for (i64 oo = static_cast<i64>(o0); oo < static_cast<i64>(o1); ++oo) {
            const i64 gi = oo / cg_out, o = oo % cg_out;
            for (i64 i = 0; i < cg_in; ++i) {
                const T* src = W + ((gi * cg_in + i) * cg_out + o) * taps;
                T* dst = F + (oo * cg_in + i) * taps;
                for (i64 t = 0; t < taps; ++t) dst[t] = src[taps - 1 - t];
            }
        }
    });
    conv_impl<T>(x, wf, bias, f, groups, out, false);
    return true;
}

template <typename T>
void conv_transpose_impl(const CpuTensor& x, const CpuTensor& w, const T* bias, const Geo& g,
                         std::size_t groups, CpuTensor& out) {
    if (conv_transpose_as_conv(x, w, bias, g, groups, out)) return;
    // Here g.in is the input size and g.out the (larger) output size.
    const std::size_t batch = x.shape[0];
    const i64 cin = static_cast<i64>(x.shape[1]);
    const i64 cg_in = cin / static_cast<i64>(groups), cg_out = static_cast<i64>(w.shape[1]);
    const i64 cout = cg_out * static_cast<i64>(groups);
    const i64 Kt = cg_out * g.k_size(), I = g.in_size(), O_sz = g.out_size();
    const T* X = x.data<T>();
    const T* W = w.data<T>();
    T* O = out.data<T>();
    const bool direct = g.pointwise() && g.out == g.in;
    const double madds = double(cin) * double(Kt) * double(I);
    // Samples per GEMM, as in conv_impl: the input gradient of a late ResNet stage is this with
    // I = 16 positions a sample.
    const std::size_t nb = samples_per_gemm(batch, Kt + cg_in, I, sizeof(T));
    const TapTable taps = direct ? TapTable{} : tap_table(g, g.in, g.out);
    // col2im of a sample's cg_out planes from col (rows ld apart) into out, through the table
    // if there is one.
    auto fold = [&](const T* col, T* out, i64 ld, T* buf) {
        if (taps.empty())
            col2im(col, cg_out, g, out, ld);
        else
            col2im_table(col, cg_out, taps, out, ld, buf);
    };
    if (nb > 1) {
        const std::size_t units = (batch + nb - 1) / nb;
        over_batch(units, madds * double(nb), true, [&](std::size_t u0, std::size_t u1, bool par) {
            const i64 cols = static_cast<i64>(nb) * I;
            Scratch<T> inbuf(static_cast<std::size_t>(cg_in * cols));
            Scratch<T> colbuf(static_cast<std::size_t>(Kt * cols));
            const std::size_t plane_buf = taps.empty() ? 0 : static_cast<std::size_t>(O_sz + 1);
            T* xb = inbuf.get();
            T* col = colbuf.get();
            for (std::size_t u = u0; u < u1; ++u) {
                const std::size_t n0 = u * nb, cnt = std::min(nb, batch - n0);
                const i64 ld = static_cast<i64>(cnt) * I, q0 = static_cast<i64>(n0);
                for (std::size_t gi = 0; gi < groups; ++gi) {
                    const i64 gg = static_cast<i64>(gi);
                    const T* bg = bias ? bias + gg * cg_out : nullptr;
                    T* og = O + (q0 * cout + gg * cg_out) * O_sz;
                    gather_planes(X + (q0 * cin + gg * cg_in) * I, cin * I, cg_in, I,
                                  static_cast<i64>(cnt), xb, ld);
                    gemm(true, false, std::size_t(Kt), std::size_t(ld), std::size_t(cg_in), T(1),
                         W + gg * cg_in * Kt, std::size_t(Kt), xb, std::size_t(ld), T(0), col,
                         std::size_t(ld), par);
                    if (direct) {  // output plane = input plane
                        scatter_planes(col, ld, cg_out, I, static_cast<i64>(cnt), bg, og,
                                       cout * O_sz);
                        continue;
                    }
                    per_sample<T>(cnt, par, plane_buf, [&](std::size_t q, T* buf) {
                        T* oq = og + static_cast<i64>(q) * cout * O_sz;
                        fill_rows(oq, cg_out, O_sz, bg);
                        fold(col + static_cast<i64>(q) * I, oq, ld, buf);
                    });
                }
            }
        });
        return;
    }

    over_batch(batch, madds, true, [&](std::size_t n0, std::size_t n1, bool par) {
        Scratch<T> colbuf(direct ? 0 : static_cast<std::size_t>(Kt * I));
        Scratch<T> planebuf(taps.empty() ? 0 : static_cast<std::size_t>(O_sz + 1));
        T* col = colbuf.get();
        for (std::size_t n = n0; n < n1; ++n) {
            for (std::size_t gi = 0; gi < groups; ++gi) {
                const i64 gg = static_cast<i64>(gi);
                const T* xg = X + (static_cast<i64>(n) * cin + gg * cg_in) * I;
                const T* wg = W + gg * cg_in * Kt;
                const T* bg = bias ? bias + gg * cg_out : nullptr;
                T* og = O + (static_cast<i64>(n) * cout + gg * cg_out) * O_sz;
                if (direct) {  // output plane = input plane: the GEMM writes it in place
                    if (bg) fill_rows(og, cg_out, O_sz, bg);
                    gemm(true, false, std::size_t(Kt), std::size_t(I), std::size_t(cg_in), T(1), wg,
                         std::size_t(Kt), xg, std::size_t(I), bg ? T(1) : T(0), og,
                         std::size_t(O_sz), par);
                    continue;
                }
                gemm(true, false, std::size_t(Kt), std::size_t(I), std::size_t(cg_in), T(1), wg,
                     std::size_t(Kt), xg, std::size_t(I), T(0), col, std::size_t(I), par);
                fill_rows(og, cg_out, O_sz, bg);
                fold(col, og, I, planebuf.get());
            }
        }
    });
}

// ---- deformable convolution ------------------------------------------------------------------

/// One bilinear sample: four corner indices into a plane and their weights (0 for corners
/// outside it), already multiplied by the modulation mask.
template <typename T>
struct Sample {
    i64 idx[4];
    T wt[4];
};

/// torchvision's bilinear_interpolate, split into where to read and how much of each.
template <typename T>
Sample<T> make_sample(T h, T w, i64 height, i64 width, T scale) {
    Sample<T> s{{0, 0, 0, 0}, {T(0), T(0), T(0), T(0)}};
    // Written so that a NaN position also lands here (a sample of 0), never in floor().
    if (!(h > T(-1) && h < T(height) && w > T(-1) && w < T(width))) return s;
    const i64 h_low = static_cast<i64>(std::floor(h)), w_low = static_cast<i64>(std::floor(w));
    const i64 h_high = h_low + 1, w_high = w_low + 1;
    const T lh = h - T(h_low), lw = w - T(w_low), hh = T(1) - lh, hw = T(1) - lw;
    const bool top = h_low >= 0, bottom = h_high <= height - 1;
    const bool left = w_low >= 0, right = w_high <= width - 1;
    if (top && left) {
        s.idx[0] = h_low * width + w_low;
        s.wt[0] = hh * hw * scale;
    }
    if (top && right) {
        s.idx[1] = h_low * width + w_high;
        s.wt[1] = hh * lw * scale;
    }
    if (bottom && left) {
        s.idx[2] = h_high * width + w_low;
        s.wt[2] = lh * hw * scale;
    }
    if (bottom && right) {
        s.idx[3] = h_high * width + w_high;
        s.wt[3] = lh * lw * scale;
    }
    return s;
}

template <typename T>
void deform_impl(const CpuTensor& x, const CpuTensor& off, const CpuTensor& w,
                 const CpuTensor* mask, const T* bias, const DeformConvOptions& o, i64 oh_n,
                 i64 ow_n, CpuTensor& out) {
    const std::size_t batch = x.shape[0];
    const i64 cin = static_cast<i64>(x.shape[1]), H = static_cast<i64>(x.shape[2]),
              Wd = static_cast<i64>(x.shape[3]);
    const i64 cout = static_cast<i64>(w.shape[0]), kh = static_cast<i64>(w.shape[2]),
              kw = static_cast<i64>(w.shape[3]);
    const i64 kk = kh * kw, P = oh_n * ow_n;
    const i64 og_n = static_cast<i64>(o.offset_groups), wg_n = static_cast<i64>(o.weight_groups);
    const i64 c_per_og = cin / og_n, cg_in = cin / wg_n, cg_out = cout / wg_n;
    const i64 K = cg_in * kk;
    const T* X = x.data<T>();
    const T* OFF = off.data<T>();
    const T* M = mask ? mask->data<T>() : nullptr;
    const T* W = w.data<T>();
    T* O = out.data<T>();
    const double madds = double(cout) * double(K) * double(P) + double(cin) * double(kk * P) * 4;

    over_batch(batch, madds, true, [&](std::size_t n0, std::size_t n1, bool par) {
        Scratch<T> colbuf(static_cast<std::size_t>(cin * kk * P));
        Scratch<Sample<T>> sbuf(static_cast<std::size_t>(kk * P));
        T* col = colbuf.get();
        Sample<T>* samples = sbuf.get();
        for (std::size_t n = n0; n < n1; ++n) {
            const i64 ni = static_cast<i64>(n);
            // Sampling positions depend on the offset group only: compute them once per group
            // and reuse them for each of its channels.
            for (i64 og = 0; og < og_n; ++og) {
                const T* offg = OFF + (ni * og_n + og) * 2 * kk * P;
                const T* mg = M ? M + (ni * og_n + og) * kk * P : nullptr;
                for (i64 i = 0; i < kh; ++i)
                    for (i64 j = 0; j < kw; ++j) {
                        const i64 k = i * kw + j;
                        for (i64 y = 0; y < oh_n; ++y)
                            for (i64 xo = 0; xo < ow_n; ++xo) {
                                const i64 pidx = y * ow_n + xo;
                                const T dy = offg[(2 * k) * P + pidx];
                                const T dx = offg[(2 * k + 1) * P + pidx];
                                const T sh = T(y * static_cast<i64>(o.stride[0]) -
                                               static_cast<i64>(o.padding[0]) +
                                               i * static_cast<i64>(o.dilation[0])) +
                                             dy;
                                const T sw = T(xo * static_cast<i64>(o.stride[1]) -
                                               static_cast<i64>(o.padding[1]) +
                                               j * static_cast<i64>(o.dilation[1])) +
                                             dx;
                                samples[k * P + pidx] =
                                    make_sample<T>(sh, sw, H, Wd, mg ? mg[k * P + pidx] : T(1));
                            }
                    }
                for (i64 c = og * c_per_og; c < (og + 1) * c_per_og; ++c) {
                    const T* plane = X + (ni * cin + c) * H * Wd;
                    T* dst = col + c * kk * P;
                    for (i64 q = 0; q < kk * P; ++q) {
                        const Sample<T>& s = samples[q];
                        dst[q] = s.wt[0] * plane[s.idx[0]] + s.wt[1] * plane[s.idx[1]] +
                                 s.wt[2] * plane[s.idx[2]] + s.wt[3] * plane[s.idx[3]];
                    }
                }
            }
            for (i64 gi = 0; gi < wg_n; ++gi) {
                const T* wg = W + gi * cg_out * K;
                const T* bg = bias ? bias + gi * cg_out : nullptr;
                T* og = O + (ni * cout + gi * cg_out) * P;
                const T* b = col + gi * K * P;
                if (bg) fill_rows(og, cg_out, P, bg);
                gemm(false, false, std::size_t(cg_out), std::size_t(P), std::size_t(K), T(1), wg,
                     std::size_t(K), b, std::size_t(P), bg ? T(1) : T(0), og, std::size_t(P), par);
            }
        }
    });
}

}  // namespace

CpuTensor conv(CpuTensor x, CpuTensor w, std::optional<CpuTensor> bias, const ConvParams& p) {
    const check::Conv c = check::conv(x, w, check::operand(bias), p);
    const Geo g{c.g};
    const Shape& out_shape = c.out;
    const DType dt = x.dtype;
    if (dt == DType::F16 || dt == DType::BF16)
        return cast(conv(cast(std::move(x), DType::F32), cast(std::move(w), DType::F32),
                         cast_opt(std::move(bias), DType::F32), p),
                    dt);
    CpuTensor out = empty(out_shape, dt);
    if (out_shape.num_elements() == 0) return out;
    x = contiguous(std::move(x));
    w = contiguous(std::move(w));
    if (bias) bias = contiguous(std::move(*bias));
    by_float_type(dt, [&]<typename T>(TypeTag<T>) {
        conv_impl<T>(x, w, bias ? bias->data<T>() : nullptr, g, p.groups, out);
    });
    return out;
}

CpuTensor conv_transpose(CpuTensor x, CpuTensor w, std::optional<CpuTensor> bias,
                         const ConvParams& p) {
    const check::Conv c = check::conv_transpose(x, w, check::operand(bias), p);
    const Geo g{c.g};
    const Shape& out_shape = c.out;
    const DType dt = x.dtype;
    if (dt == DType::F16 || dt == DType::BF16)
        return cast(conv_transpose(cast(std::move(x), DType::F32), cast(std::move(w), DType::F32),
                                   cast_opt(std::move(bias), DType::F32), p),
                    dt);
    CpuTensor out = empty(out_shape, dt);
    if (out_shape.num_elements() == 0) return out;
    x = contiguous(std::move(x));
    w = contiguous(std::move(w));
    if (bias) bias = contiguous(std::move(*bias));
    by_float_type(dt, [&]<typename T>(TypeTag<T>) {
        conv_transpose_impl<T>(x, w, bias ? bias->data<T>() : nullptr, g, p.groups, out);
    });
    return out;
}

CpuTensor deform_conv2d(CpuTensor x, CpuTensor offset, CpuTensor w, std::optional<CpuTensor> mask,
                        std::optional<CpuTensor> bias, const DeformConvOptions& o) {
    const char* op = "deform_conv2d";
    const check::Deform geo =
        check::deform_conv2d(op, x, offset, w, check::operand(mask), check::operand(bias), o);
    const DType dt = x.dtype;
    if (dt == DType::F16 || dt == DType::BF16)
        return cast(
            deform_conv2d(cast(std::move(x), DType::F32), cast(std::move(offset), DType::F32),
                          cast(std::move(w), DType::F32), cast_opt(std::move(mask), DType::F32),
                          cast_opt(std::move(bias), DType::F32), o),
            dt);
    const Shape& out_shape = geo.out;
    CpuTensor out = empty(out_shape, dt);
    if (out_shape.num_elements() == 0) return out;
    x = contiguous(std::move(x));
    offset = contiguous(std::move(offset));
    w = contiguous(std::move(w));
    if (mask) mask = contiguous(std::move(*mask));
    if (bias) bias = contiguous(std::move(*bias));
    by_float_type(dt, [&]<typename T>(TypeTag<T>) {
        deform_impl<T>(x, offset, w, mask ? &*mask : nullptr, bias ? bias->data<T>() : nullptr, o,
                       geo.oh, geo.ow, out);
    });
    return out;
}

}  // namespace ember::detail::cpu
