// The NEON kernels (backends/cpu/neon.hpp) on their own, cross-compiled and run under
// qemu-aarch64 (CTest's aarch64.neon_kernels; tests/aarch64/run.sh kernels): exp and erf give
// the portable functions' bits (elementwise_fns.hpp) over a dense sweep and the special values;
// the GEMM micro-kernel, sum, max/min (NaN anywhere) and the softmax rows match references
// computed in double. Exit status 0 when every check passes.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>
#include "elementwise_fns.hpp"
#include "neon.hpp"
using namespace ember::detail::cpu;
static int fails = 0;
#define CHECK(c, ...)                         \
    do {                                      \
        if (!(c)) {                           \
            ++fails;                          \
            if (fails < 20) {                 \
                std::printf("FAIL %s: ", #c); \
                std::printf(__VA_ARGS__);     \
                std::printf("\n");            \
            }                                 \
        }                                     \
    } while (0)
static unsigned bits(float f) {
    unsigned u;
    std::memcpy(&u, &f, 4);
    return u;
}
int main() {
    // The run-time choice (neon.cpp): AdvSIMD is reported, unless EMBER_CPU_NEON=0 asks for the
    // portable kernels.
    const char* env = std::getenv("EMBER_CPU_NEON");
    const bool off = env && (std::strcmp(env, "0") == 0 || std::strcmp(env, "off") == 0);
    CHECK(neon_enabled() == !off, "neon_enabled() is %d with EMBER_CPU_NEON=%s", neon_enabled(),
          env ? env : "(unset)");
    // exp / erf: bit-identical to fast_exp / fast_erf, over a dense sweep and special values.
    std::vector<float> x;
    for (int i = -2000000; i <= 2000000; i += 7) x.push_back(i * 6e-5f);
    for (float s : {0.f, -0.f, INFINITY, -INFINITY, NAN, 88.72f, 88.73f, -103.97f, -103.98f, 1e-38f,
                    -1e-45f, 3.9999f, 4.0001f})
        x.push_back(s);
    std::vector<float> y(x.size()), z(x.size());
    neon::exp_f32(x.data(), y.data(), x.size(), [](float v) { return fast_exp(v); });
    neon::erf_f32(x.data(), z.data(), x.size(), kErfP, kErfQ, [](float v) { return fast_erf(v); });
    std::size_t diff_e = 0, diff_f = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
        const float e = fast_exp(x[i]), f = fast_erf(x[i]);
        if (!(bits(e) == bits(y[i]) || (std::isnan(e) && std::isnan(y[i])))) {
            ++diff_e;
            CHECK(false, "exp(%g): neon %a scalar %a", x[i], y[i], e);
        }
        if (!(bits(f) == bits(z[i]) || (std::isnan(f) && std::isnan(z[i])))) {
            ++diff_f;
            CHECK(false, "erf(%g): neon %a scalar %a", x[i], z[i], f);
        }
    }
    std::printf("exp/erf: %zu values, %zu / %zu differ from the scalar bits\n", x.size(), diff_e,
                diff_f);
    // GEMM micro-kernel vs a double reference.
    for (std::size_t kc : {1, 7, 384}) {
        std::vector<float> a(kc * 8), b(kc * 12), c(96), pf(kc * 12, 0.f);
        for (std::size_t i = 0; i < a.size(); ++i) a[i] = std::sin(0.3 * i);
        for (std::size_t i = 0; i < b.size(); ++i) b[i] = std::cos(0.7 * i);
        neon::gemm_8x12(kc, a.data(), b.data(), c.data(), kc > 1 ? pf.data() : nullptr);
        for (int i = 0; i < 8; ++i)
            for (int j = 0; j < 12; ++j) {
                double s = 0;
                for (std::size_t p = 0; p < kc; ++p) s += double(a[p * 8 + i]) * b[p * 12 + j];
                CHECK(std::fabs(c[i * 12 + j] - s) <= 1e-4 * (1 + std::sqrt(double(kc))),
                      "gemm kc %zu (%d,%d): %g vs %g", kc, i, j, c[i * 12 + j], s);
            }
    }
    // sum, max/min with NaN, softmax.
    for (std::size_t n : {1, 5, 2047, 2048, 2049, 10000}) {
        std::vector<float> v(n);
        for (std::size_t i = 0; i < n; ++i) v[i] = 3 * std::sin(0.37 * i);
        double s = 0;
        float hi = -INFINITY, lo = INFINITY;
        for (float t : v) {
            s += t;
            hi = std::max(hi, t);
            lo = std::min(lo, t);
        }
        CHECK(std::fabs(neon::sum_f32(v.data(), n) - s) <= 1e-4 * (1 + std::fabs(s)), "sum n %zu",
              n);
        CHECK(neon::extreme_f32<true>(v.data(), n) == hi, "max n %zu", n);
        CHECK(neon::extreme_f32<false>(v.data(), n) == lo, "min n %zu", n);
        for (std::size_t at : {std::size_t{0}, n / 2, n - 1}) {
            auto w = v;
            w[at] = NAN;
            CHECK(std::isnan(neon::extreme_f32<true>(w.data(), n)), "max NaN n %zu at %zu", n, at);
            CHECK(std::isnan(neon::extreme_f32<false>(w.data(), n)), "min NaN n %zu at %zu", n, at);
        }
        std::vector<float> o(n), lo_(n);
        auto e1 = [](float t) { return std::exp(t); };
        auto l1 = [](float t) { return std::log(t); };
        neon::softmax_row_f32<false>(v.data(), o.data(), n, e1, l1);
        neon::softmax_row_f32<true>(v.data(), lo_.data(), n, e1, l1);
        double mx = hi, den = 0;
        for (float t : v) den += std::exp(t - mx);
        for (std::size_t i = 0; i < n; ++i) {
            CHECK(std::fabs(o[i] - std::exp(v[i] - mx) / den) <= 1e-6, "softmax n %zu i %zu", n, i);
            CHECK(std::fabs(lo_[i] - (v[i] - mx - std::log(den))) <= 1e-5,
                  "log_softmax n %zu i %zu", n, i);
        }
        auto w = v;
        w[n - 1] = NAN;
        neon::softmax_row_f32<false>(w.data(), o.data(), n, e1, l1);
        for (float t : o) CHECK(std::isnan(t), "softmax NaN row n %zu", n);
    }
    std::printf("%s (%d failures)\n", fails ? "FAILED" : "all NEON kernel checks passed", fails);
    return fails != 0;
}
