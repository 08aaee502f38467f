// The CPU backend's Winograd path for 3×3 stride-1 convolutions (backends/cpu/winograd.cpp,
// EMBER_CPU_WINOGRAD: 0 off, 2 or 4 the tile forced wherever the shape allows, read at each
// call). Each result is checked against the sum over the taps computed in double, for both
// tiles at 1-3 threads (the same bits at each count, for the forced tiles): positions that are and
// are not a multiple of the tile, padding 0, 1 and 2, channel counts that are not a multiple of the
// vector width, depths past one block of the GEMM, batches that run in several chunks, with and
// without bias; groups and strides, which the path declines, still give the convolution; calls of
// fewer than 32 tiles (products run transposed) and the default choice; and the transformed weights
// kept across calls (the inference path) are used, and dropped when the weights change.
//
// Tolerance: Winograd's transforms round where im2col's sums do not. The error grows with the
// tile (F(4×4, 3×3)'s transforms carry factors up to 8 and 1/24) and with the depth of the sums;
// on these cases it stays under 4e-6 (m = 2) and 6e-5 (m = 4) of the output's root mean square,
// so the checks allow 2e-5 and 2e-4: a wrong tap or tile edge is an error of order 1.
#include <cmath>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "harness.hpp"

namespace test_cpu_winograd {

namespace {

using ember::Cpu;
using T4 = ember::Tensor<Cpu, 4>;
using T1 = ember::Tensor<Cpu, 1>;

// Restores the pool's size and EMBER_CPU_WINOGRAD when a case ends.
struct Guard {
    std::size_t threads = ember::cpu::num_threads();
    std::optional<std::string> mode = [] {
        const char* e = std::getenv("EMBER_CPU_WINOGRAD");
        return e ? std::optional<std::string>(e) : std::nullopt;
    }();
    ~Guard() {
        ember::cpu::set_num_threads(threads);
        if (mode)
            ::setenv("EMBER_CPU_WINOGRAD", mode->c_str(), 1);
        else
            ::unsetenv("EMBER_CPU_WINOGRAD");
    }
};

struct Case {
    std::size_t n, cin, cout, h, w, pad, stride = 1, groups = 1;
    bool bias = true;
};

std::size_t out_side(const Case& c, std::size_t side) {
    return (side + 2 * c.pad - 3) / c.stride + 1;
}

/// y[n, o, p] = bias[o] + Σ x · w over the 3×3 taps, in double.
std::vector<double> reference(const Case& c, const std::vector<float>& x,
                              const std::vector<float>& w, const std::vector<float>& b) {
    const std::size_t oh = out_side(c, c.h), ow = out_side(c, c.w);
    const std::size_t cg_in = c.cin / c.groups, cg_out = c.cout / c.groups;
    std::vector<double> y(c.n * c.cout * oh * ow);
    for (std::size_t n = 0; n < c.n; ++n)
        for (std::size_t o = 0; o < c.cout; ++o) {
            const std::size_t gi = o / cg_out;
            for (std::size_t i = 0; i < oh; ++i)
                for (std::size_t j = 0; j < ow; ++j) {
                    double s = c.bias ? b[o] : 0.0;
                    for (std::size_t ci = 0; ci < cg_in; ++ci)
                        for (std::size_t r = 0; r < 3; ++r)
                            for (std::size_t q = 0; q < 3; ++q) {
                                const long yy = long(i * c.stride + r) - long(c.pad);
                                const long xx = long(j * c.stride + q) - long(c.pad);
                                if (yy < 0 || xx < 0 || yy >= long(c.h) || xx >= long(c.w))
                                    continue;
                                s += double(
                                         x[((n * c.cin + gi * cg_in + ci) * c.h + std::size_t(yy)) *
                                               c.w +
                                           std::size_t(xx)]) *
                                     double(w[((o * cg_in + ci) * 3 + r) * 3 + q]);
                            }
                    y[((n * c.cout + o) * oh + i) * ow + j] = s;
                }
        }
    return y;
}

/// max |got − want| over the root mean square of want.
double error(const std::vector<float>& got, const std::vector<double>& want) {
    REQUIRE(got.size() == want.size());
    double worst = 0, sq = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
        worst = std::max(worst, std::fabs(double(got[i]) - want[i]));
        sq += want[i] * want[i];
    }
    return worst / std::sqrt(sq / double(want.size()) + 1e-30);
}

double tolerance(const char* mode) {
    const std::string m = mode;
    return m == "4" || m.empty() ? 2e-4 : 2e-5;
}

struct Problem {
    T4 x, w;
    T1 b;
    std::vector<double> want;
};

Problem make(const Case& c) {
    Problem p{T4::random({c.n, c.cin, c.h, c.w}, ember::Distribution::Normal(0, 1)),
              T4::random({c.cout, c.cin / c.groups, 3, 3}, ember::Distribution::Normal(0, 0.2)),
              T1::random({c.cout}, ember::Distribution::Normal(0, 1)),
              {}};
    p.want = reference(c, p.x.to_data().to_vec<float>(), p.w.to_data().to_vec<float>(),
                       p.b.to_data().to_vec<float>());
    return p;
}

std::vector<float> run(const Case& c, const Problem& p) {
    ember::ConvOptions<2> o;
    o.stride = {c.stride, c.stride};
    o.padding = {c.pad, c.pad};
    o.groups = c.groups;
    return ember::module::conv2d(p.x, p.w, c.bias ? std::optional(p.b) : std::nullopt, o)
        .to_data()
        .to_vec<float>();
}

void check(const Case& c) {
    INFO(c.n << "x" << c.cin << "x" << c.h << "x" << c.w << " -> " << c.cout << ", pad " << c.pad
             << ", stride " << c.stride << ", groups " << c.groups << (c.bias ? "" : ", no bias"));
    const Problem p = make(c);
    // "": unset, the default choice (either tile, or im2col).
    for (const char* mode : {"2", "4", "", "0"}) {
        std::vector<float> first;  // at one thread
        for (const std::size_t threads : {1, 2, 3}) {
            INFO("EMBER_CPU_WINOGRAD=" << mode << ", " << threads << " threads");
            if (*mode)
                ::setenv("EMBER_CPU_WINOGRAD", mode, 1);
            else
                ::unsetenv("EMBER_CPU_WINOGRAD");
            ember::cpu::set_num_threads(threads);
            const std::vector<float> got = run(c, p);
            const double err = error(got, p.want);
            INFO("error / rms " << err);
            CHECK(err < tolerance(mode));
            // The Winograd path's products split by point and by columns, never by depth:
            // the same bits at every thread count. im2col's need not (OpenBLAS may take other
            // kernels for other tile widths): EMBER_CPU_WINOGRAD=0, the default, which may take
            // it, and the shapes Winograd declines even when forced are not compared.
            const bool winograd = (*mode == '2' || *mode == '4') && c.stride == 1 && c.groups == 1;
            if (threads == 1)
                first = got;
            else if (winograd)
                CHECK(got == first);
        }
    }
}

}  // namespace

TEST_CASE("cpu winograd: 3x3 stride-1 convolutions are the sum over the taps",
          "[cpu_winograd][cpu_conv][conv]") {
    Guard guard;
    ember::Autodiff<Cpu>::seed(41);
    SECTION("positions a multiple of both tiles") {
        check({1, 16, 16, 8, 8, 1});
    }
    SECTION("odd positions and channels, batch 2") {
        check({2, 17, 19, 7, 9, 1});
    }
    SECTION("no padding, three samples, no bias") {
        check({.n = 3, .cin = 33, .cout = 20, .h = 5, .w = 13, .pad = 0, .bias = false});
    }
    SECTION("padding 2, a one-tile-wide output") {
        check({1, 24, 40, 11, 2, 2});
    }
    SECTION("few channels") {
        check({2, 3, 5, 6, 6, 1});
    }
    SECTION("one output position") {
        check({2, 20, 18, 3, 3, 0});
    }
    SECTION("a depth past one block of the GEMM") {
        check({2, 300, 70, 6, 5, 1});
    }
    SECTION("a batch in several chunks") {
        check({20, 64, 64, 16, 16, 1});
    }
    // Fewer than 32 tiles: each point's product transposed, from the kept Uᵀ (the default
    // takes F(2×2) here, a batch-1 ResNet-18 8×8 layer's shape at a quarter of its channels).
    SECTION("few tiles: the transposed products") {
        check({1, 64, 72, 8, 8, 1});
    }
    SECTION("declined: stride 2, groups (the im2col path runs)") {
        check({.n = 2, .cin = 16, .cout = 16, .h = 9, .w = 9, .pad = 1, .stride = 2});
        check({.n = 2, .cin = 32, .cout = 32, .h = 8, .w = 8, .pad = 1, .groups = 2});
    }
}

TEST_CASE("cpu winograd: the transformed weights kept across calls", "[cpu_winograd][conv]") {
    Guard guard;
    ember::Autodiff<Cpu>::seed(43);
    for (const char* mode : {"2", "4"}) {
        INFO("EMBER_CPU_WINOGRAD=" << mode);
        ::setenv("EMBER_CPU_WINOGRAD", mode, 1);
        const Case c{2, 40, 48, 12, 10, 1};
        Problem p = make(c);
        // The first call transforms for itself, the second keeps the transform, the third and
        // later read the kept one.
        for (int use = 0; use < 4; ++use) {
            INFO("use " << use);
            CHECK(error(run(c, p), p.want) < tolerance(mode));
        }
        // New values in the weight (an op that would write in place if it held the buffer's
        // only reference): the kept transform must not be used for them.
        p.w = std::move(p.w) * 2.0f;
        p.want = reference(c, p.x.to_data().to_vec<float>(), p.w.to_data().to_vec<float>(),
                           p.b.to_data().to_vec<float>());
        for (int use = 0; use < 3; ++use) {
            INFO("after the change, use " << use);
            CHECK(error(run(c, p), p.want) < tolerance(mode));
        }
    }
}

}  // namespace test_cpu_winograd
