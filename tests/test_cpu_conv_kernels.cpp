// The CPU backend's two ways of feeding a convolution's GEMM (EMBER_CPU_CONV, read at each call):
// "packed" writes im2col straight into the portable GEMM's panels (zero-padded sample copies,
// several samples side by side in one product, the weights packed once, the bias added as the
// output is written), "im2col" writes the im2col matrix for `gemm`. Both must give the sum over
// the kernel taps that the definition says, here computed directly in double, for every
// geometry the packer handles differently: 1-, 2- and 3-d, strides (the stride-2 copies),
// padding, dilation, groups, short rows (offsets column by column), products deeper than one
// depth block, taller than one row block and wider than one column block, batch 1 and batches
// whose samples share a product; and the stride-1 transposed convolution, which runs as a
// convolution with the kernel flipped, beside the shapes that keep col2im.
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "harness.hpp"

namespace test_cpu_conv_kernels {

namespace {

using ember::Cpu;

// Restores the pool's size, EMBER_CPU_CONV and EMBER_CPU_WINOGRAD when a case ends. The cases
// turn the Winograd path off (EMBER_CPU_WINOGRAD=0): its 3×3 layers are
// test_cpu_winograd.cpp's, with its own tolerance, and these check the two im2col kernels.
struct ThreadsKernelGuard {
    std::size_t threads = ember::cpu::num_threads();
    std::optional<std::string> kernel = env("EMBER_CPU_CONV");
    std::optional<std::string> winograd = env("EMBER_CPU_WINOGRAD");
    static std::optional<std::string> env(const char* name) {
        const char* e = std::getenv(name);
        return e ? std::optional<std::string>(e) : std::nullopt;
    }
    static void restore(const char* name, const std::optional<std::string>& v) {
        if (v)
            ::setenv(name, v->c_str(), 1);
        else
            ::unsetenv(name);
    }
    ThreadsKernelGuard() { ::setenv("EMBER_CPU_WINOGRAD", "0", 1); }
    ~ThreadsKernelGuard() {
        ember::cpu::set_num_threads(threads);
        restore("EMBER_CPU_CONV", kernel);
        restore("EMBER_CPU_WINOGRAD", winograd);
    }
};

/// A convolution in 3-d form (leading unit dims for 1- and 2-d).
struct Geo {
    std::size_t n, cin, cout, groups;
    std::array<std::size_t, 3> in, k, stride, pad, dil;
    std::array<std::size_t, 3> out_pad{0, 0, 0};  // transposed only
    bool bias;
    std::array<std::size_t, 3> out(bool transposed) const {
        std::array<std::size_t, 3> o{};
        for (int d = 0; d < 3; ++d)
            o[d] = transposed
                       ? (in[d] - 1) * stride[d] + dil[d] * (k[d] - 1) + 1 + out_pad[d] - 2 * pad[d]
                       : (in[d] + 2 * pad[d] - dil[d] * (k[d] - 1) - 1) / stride[d] + 1;
        return o;
    }
};

/// out[n, co, o] = bias[co] + Σ x[n, ci, i] · w[...] over the taps, in double: the convolution
/// (o = (i + pad − k·dil) / stride) or the transposed one (o = i·stride − pad + k·dil).
std::vector<double> reference(const Geo& g, bool transposed, const std::vector<float>& x,
                              const std::vector<float>& w, const std::vector<float>& b) {
    const auto out = g.out(transposed);
    const std::size_t osz = out[0] * out[1] * out[2], isz = g.in[0] * g.in[1] * g.in[2];
    const std::size_t taps = g.k[0] * g.k[1] * g.k[2];
    const std::size_t cg_in = g.cin / g.groups, cg_out = g.cout / g.groups;
    std::vector<double> y(g.n * g.cout * osz, 0.0);
    for (std::size_t n = 0; n < g.n; ++n)
        for (std::size_t co = 0; co < g.cout; ++co)
            for (std::size_t p = 0; p < osz; ++p)
                y[(n * g.cout + co) * osz + p] = g.bias ? b[co] : 0;
    for (std::size_t n = 0; n < g.n; ++n)
        for (std::size_t gi = 0; gi < g.groups; ++gi)
            for (std::size_t ci = 0; ci < cg_in; ++ci)
                for (std::size_t co = 0; co < cg_out; ++co)
                    for (std::size_t t = 0; t < taps; ++t) {
                        const std::size_t kk[3] = {t / (g.k[1] * g.k[2]), t / g.k[2] % g.k[1],
                                                   t % g.k[2]};
                        // weight [cout, cg_in, taps] or, transposed, [cin, cg_out, taps]
                        const double wv = transposed
                                              ? w[((gi * cg_in + ci) * cg_out + co) * taps + t]
                                              : w[((gi * cg_out + co) * cg_in + ci) * taps + t];
                        for (std::size_t i = 0; i < isz; ++i) {
                            const std::size_t ii[3] = {i / (g.in[1] * g.in[2]),
                                                       i / g.in[2] % g.in[1], i % g.in[2]};
                            long o[3];
                            bool inside = true;
                            for (int d = 0; d < 3; ++d) {
                                const long num =
                                    long(ii[d]) + long(g.pad[d]) - long(kk[d] * g.dil[d]);
                                if (transposed) {
                                    o[d] = long(ii[d] * g.stride[d]) - long(g.pad[d]) +
                                           long(kk[d] * g.dil[d]);
                                } else {
                                    // input i feeds output o when o·stride − pad + k·dil = i
                                    o[d] = num % long(g.stride[d]) == 0 && num >= 0
                                               ? num / long(g.stride[d])
                                               : -1;
                                }
                                inside = inside && o[d] >= 0 && o[d] < long(out[d]);
                            }
                            if (!inside) continue;
                            const std::size_t op =
                                (std::size_t(o[0]) * out[1] + std::size_t(o[1])) * out[2] +
                                std::size_t(o[2]);
                            y[(n * g.cout + gi * cg_out + co) * osz + op] +=
                                double(x[(n * g.cin + gi * cg_in + ci) * isz + i]) * wv;
                        }
                    }
    return y;
}

/// ember's result (dims as the problem's rank) for geometry g, in 3-d form.
template <std::size_t D, typename B>
std::vector<float> run(const Geo& g, bool transposed, const ember::Tensor<B, D + 2>& x,
                       const ember::Tensor<B, D + 2>& w, const ember::Tensor<B, 1>& b) {
    const std::optional<ember::Tensor<B, 1>> bias =
        g.bias ? std::optional(b) : std::optional<ember::Tensor<B, 1>>{};
    auto fill = [&](auto& o) {
        for (std::size_t d = 0; d < D; ++d) {
            o.stride[d] = g.stride[3 - D + d];
            o.padding[d] = g.pad[3 - D + d];
            o.dilation[d] = g.dil[3 - D + d];
        }
        o.groups = g.groups;
    };
    if (transposed) {
        ember::ConvTransposeOptions<D> o;
        fill(o);
        for (std::size_t d = 0; d < D; ++d) o.padding_out[d] = g.out_pad[3 - D + d];
        if constexpr (D == 1)
            return ember::module::conv_transpose1d(x, w, bias, o)
                .to_data()
                .template to_vec<float>();
        else if constexpr (D == 2)
            return ember::module::conv_transpose2d(x, w, bias, o)
                .to_data()
                .template to_vec<float>();
        else
            return ember::module::conv_transpose3d(x, w, bias, o)
                .to_data()
                .template to_vec<float>();
    }
    ember::ConvOptions<D> o;
    fill(o);
    if constexpr (D == 1)
        return ember::module::conv1d(x, w, bias, o).to_data().template to_vec<float>();
    else if constexpr (D == 2)
        return ember::module::conv2d(x, w, bias, o).to_data().template to_vec<float>();
    else
        return ember::module::conv3d(x, w, bias, o).to_data().template to_vec<float>();
}

/// Both kernels at 1-3 threads against the reference, on the f32 backend (or B: CpuF64).
template <std::size_t D, typename B = Cpu>
void check(const Geo& g, bool transposed) {
    std::vector<std::size_t> xs{g.n, g.cin},
        ws{transposed ? g.cin : g.cout, (transposed ? g.cout : g.cin) / g.groups};
    for (std::size_t d = 3 - D; d < 3; ++d) {
        xs.push_back(g.in[d]);
        ws.push_back(g.k[d]);
    }
    const auto x = ember::Tensor<B, D + 2>::random(ember::Shape(std::span<const std::size_t>(xs)),
                                                   ember::Distribution::Normal(0, 1));
    const auto w = ember::Tensor<B, D + 2>::random(ember::Shape(std::span<const std::size_t>(ws)),
                                                   ember::Distribution::Normal(0, 0.2));
    const auto b = ember::Tensor<B, 1>::random({g.cout}, ember::Distribution::Normal(0, 1));
    const auto want =
        reference(g, transposed, x.to_data().template to_vec<float>(),
                  w.to_data().template to_vec<float>(), b.to_data().template to_vec<float>());
    for (const char* kernel : {"packed", "im2col"})
        for (const std::size_t threads : {1, 2, 3}) {
            INFO(kernel << " kernel, " << threads << " threads");
            ::setenv("EMBER_CPU_CONV", kernel, 1);
            ember::cpu::set_num_threads(threads);
            const auto got = run<D, B>(g, transposed, x, w, b);
            REQUIRE(got.size() == want.size());
            double worst = 0;
            for (std::size_t i = 0; i < got.size(); ++i)
                worst = std::max(worst, std::fabs(got[i] - want[i]) / (1.0 + std::fabs(want[i])));
            CHECK(worst < 1e-5);
        }
}

Geo geo2(std::size_t n, std::size_t cin, std::size_t cout, std::size_t groups, std::size_t h,
         std::size_t w, std::size_t kh, std::size_t kw, std::size_t s, std::size_t p, std::size_t d,
         bool bias) {
    return Geo{n,         cin,       cout,      groups,    {1, h, w}, {1, kh, kw},
               {1, s, s}, {0, p, p}, {1, d, d}, {0, 0, 0}, bias};
}

}  // namespace

TEST_CASE("cpu conv kernels: packed and im2col convolutions are the sum over the taps",
          "[cpu_conv][conv]") {
    ThreadsKernelGuard guard;
    ember::Autodiff<Cpu>::seed(37);
    struct Case {
        const char* what;
        Geo g;
    };
    const std::vector<Case> cases{
        {"3x3 pad 1, batch 1, 100 positions", geo2(1, 8, 16, 1, 10, 10, 3, 3, 1, 1, 1, true)},
        {"3x3 pad 1, 25 positions: samples side by side",
         geo2(5, 12, 20, 1, 5, 5, 3, 3, 1, 1, 1, true)},
        {"4x4 positions, batch 9: samples side by side, short rows",
         geo2(9, 16, 24, 1, 4, 4, 3, 3, 1, 1, 1, false)},
        {"stride 2 (even and odd widths)", geo2(3, 8, 12, 1, 17, 20, 3, 3, 2, 1, 1, true)},
        {"stride 3, pad 2, dilation 2", geo2(2, 6, 10, 1, 13, 15, 3, 3, 3, 2, 2, false)},
        {"1x1 stride 2", geo2(2, 40, 24, 1, 12, 12, 1, 1, 2, 0, 1, true)},
        {"3x2 kernel, groups 2", geo2(3, 16, 10, 2, 9, 11, 3, 2, 1, 1, 1, true)},
        {"depth 576, over one depth block", geo2(2, 64, 20, 1, 9, 9, 3, 3, 1, 1, 1, true)},
        {"200 outputs, over one row block", geo2(2, 4, 200, 1, 9, 9, 3, 3, 1, 1, 1, true)},
        {"4900 positions, over one column block", geo2(1, 4, 8, 1, 70, 70, 3, 3, 1, 1, 1, true)},
        {"no padding, odd sizes", geo2(4, 7, 9, 1, 11, 13, 5, 3, 1, 0, 1, true)},
        // Batch 1 with threads: im2col split across the pool by channels (row copies, and the
        // tap table of 8x8 planes), and a depth-27 first layer split in column strips.
        {"batch 1, 40x40, im2col by channels", geo2(1, 16, 8, 1, 40, 40, 3, 3, 1, 1, 1, true)},
        {"batch 1, 8x8, 256 channels", geo2(1, 256, 8, 1, 8, 8, 3, 3, 1, 1, 1, false)},
        {"batch 1, 3 channels, 32x32", geo2(1, 3, 16, 1, 32, 32, 3, 3, 1, 1, 1, true)},
    };
    for (const Case& c : cases) {
        INFO(c.what);
        check<2>(c.g, false);
    }
    INFO("1-d: length 80, kernel 5, pad 2");
    check<1>(
        Geo{3, 10, 7, 1, {1, 1, 80}, {1, 1, 5}, {1, 1, 1}, {0, 0, 2}, {1, 1, 1}, {0, 0, 0}, true},
        false);
    INFO("f64: 3x3 pad 1 and stride 2, 4x4 positions side by side");
    check<2, ember::CpuF64>(geo2(3, 8, 12, 1, 17, 20, 3, 3, 2, 1, 1, true), false);
    check<2, ember::CpuF64>(geo2(9, 16, 24, 1, 4, 4, 3, 3, 1, 1, 1, true), false);
    check<2, ember::CpuF64>(geo2(2, 12, 10, 1, 8, 8, 3, 3, 1, 1, 1, true), true);
    INFO("3-d: 5x6x7, kernel 3, pad 1");
    check<3>(
        Geo{2, 4, 6, 1, {5, 6, 7}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0}, true},
        false);
}

TEST_CASE("cpu conv kernels: stride-1 transposed convolutions, as convolutions and through col2im",
          "[cpu_conv][conv]") {
    ThreadsKernelGuard guard;
    ember::Autodiff<Cpu>::seed(38);
    // Runs as a convolution with the flipped kernel: stride 1, padding within the kernel's reach.
    check<2>(geo2(2, 12, 10, 1, 8, 8, 3, 3, 1, 1, 1, true), true);
    check<2>(geo2(3, 16, 12, 2, 9, 7, 3, 3, 1, 1, 2, false), true);  // groups 2, dilation 2
    check<2>(geo2(9, 16, 8, 1, 4, 4, 3, 3, 1, 1, 1, true), true);    // 16 positions a sample
    check<1>(
        Geo{2, 6, 5, 1, {1, 1, 30}, {1, 1, 4}, {1, 1, 1}, {0, 0, 1}, {1, 1, 1}, {0, 0, 0}, true},
        true);
    check<3>(
        Geo{2, 4, 6, 1, {4, 5, 6}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0}, false},
        true);
    // Through col2im: a stride, an output padding, padding past the kernel's reach, few
    // output channels for many input ones.
    check<2>(geo2(2, 8, 6, 1, 7, 7, 3, 3, 2, 1, 1, true), true);
    Geo op = geo2(2, 8, 6, 1, 7, 7, 3, 3, 1, 1, 2, true);
    op.out_pad = {0, 1, 1};
    check<2>(op, true);
    check<2>(geo2(2, 8, 6, 1, 9, 9, 3, 3, 1, 3, 1, true), true);
    check<2>(geo2(2, 24, 3, 1, 8, 8, 3, 3, 1, 1, 1, true), true);
}

}  // namespace test_cpu_conv_kernels
