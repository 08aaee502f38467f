// The CPU backend's vector kernels on inputs long enough to reach them (the op suites' fixtures
// are small): contiguous sums past the 2048-element blocks, max and min with a NaN at any
// position, long softmax rows, and exp and erf over a sweep with the special values. On
// AArch64 these are the NEON kernels (and, with EMBER_CPU_NEON=0, the portable ones), on
// x86-64 the AVX2/AVX-512 ones. Expected values are computed in double with <cmath>.
#include <cmath>
#include <limits>
#include <vector>

#include "harness.hpp"

namespace test_cpu_kernels {

namespace {

using B = ember::Cpu;
using T1 = ember::Tensor<B, 1>;

/// n floats of a fixed, irregular pattern in [-3, 3] (no random generator: the values are the
/// same on every platform).
std::vector<float> pattern(std::size_t n) {
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i)
        v[i] = static_cast<float>(3.0 * std::sin(0.37 * double(i) + 0.1 * double(i % 7)));
    return v;
}

T1 tensor(const std::vector<float>& v) {
    return T1::from_data(ember::TensorData(v, ember::Shape{v.size()}), {});
}

float scalar(const T1& t) {
    return t.into_scalar();
}

}  // namespace

TEST_CASE("cpu kernels: long contiguous sums", "[cpu_kernels]") {
    for (std::size_t n : {5, 2047, 2048, 2049, 10000, 65537}) {
        INFO("n " << n);
        const auto v = pattern(n);
        double want = 0;
        for (float x : v) want += x;
        // The float lanes are folded into a double every block: the error stays at a few ulps
        // of the block sums, far below n·ε.
        CHECK(std::fabs(double(scalar(tensor(v).sum())) - want) <=
              1e-5 * (1 + std::fabs(want)) + 1e-4);
    }
}

TEST_CASE("cpu kernels: max and min, with NaN anywhere", "[cpu_kernels]") {
    for (std::size_t n : {1, 3, 4, 17, 64, 1000}) {
        const auto v = pattern(n);
        float hi = v[0], lo = v[0];
        for (float x : v) {
            hi = std::max(hi, x);
            lo = std::min(lo, x);
        }
        INFO("n " << n);
        CHECK(scalar(tensor(v).max()) == hi);
        CHECK(scalar(tensor(v).min()) == lo);
        for (std::size_t at : {std::size_t{0}, n / 2, n - 1}) {
            auto w = v;
            w[at] = std::numeric_limits<float>::quiet_NaN();
            INFO("NaN at " << at);
            CHECK(std::isnan(scalar(tensor(w).max())));
            CHECK(std::isnan(scalar(tensor(w).min())));
        }
    }
}

TEST_CASE("cpu kernels: long softmax and log-softmax rows", "[cpu_kernels]") {
    for (std::size_t n : {7, 64, 1001}) {
        INFO("n " << n);
        auto v = pattern(n);
        v[n / 3] = 40.0f;  // one large logit: the max shift matters
        double mx = -INFINITY, sum = 0;
        for (float x : v) mx = std::max(mx, double(x));
        for (float x : v) sum += std::exp(double(x) - mx);
        std::vector<double> soft(n), logsoft(n);
        for (std::size_t i = 0; i < n; ++i) {
            soft[i] = std::exp(double(v[i]) - mx) / sum;
            logsoft[i] = double(v[i]) - mx - std::log(sum);
        }
        const auto x = tensor(v);
        ember::test::check_close(ember::activation::softmax(x, 0).to_data(),
                                 ember::TensorData(soft, ember::Shape{n}),
                                 ember::Tolerance{1e-6, 1e-5});
        ember::test::check_close(ember::activation::log_softmax(x, 0).to_data(),
                                 ember::TensorData(logsoft, ember::Shape{n}),
                                 ember::Tolerance{1e-5, 1e-5});
        // A NaN anywhere makes the whole row NaN (as PyTorch's).
        auto w = v;
        w[n - 1] = std::numeric_limits<float>::quiet_NaN();
        for (float y : ember::activation::softmax(tensor(w), 0).to_data().to_vec<float>())
            CHECK(std::isnan(y));
    }
}

TEST_CASE("cpu kernels: exp and erf over a sweep and the special values", "[cpu_kernels]") {
    std::vector<float> v;
    for (int i = -1200; i <= 1200; ++i) v.push_back(0.1f * float(i));  // [-120, 120]
    for (float s : {0.0f, -0.0f, 1e-30f, -1e-30f, 88.7f, 88.8f, -103.9f, -104.1f}) v.push_back(s);
    const float inf = std::numeric_limits<float>::infinity();
    v.push_back(inf);
    v.push_back(-inf);
    v.push_back(std::numeric_limits<float>::quiet_NaN());
    const auto x = tensor(v);
    const auto e = x.exp().to_data().to_vec<float>();
    const auto f = x.erf().to_data().to_vec<float>();
    for (std::size_t i = 0; i < v.size(); ++i) {
        INFO("x = " << v[i]);
        const double we = std::exp(double(v[i])), wf = std::erf(double(v[i]));
        if (std::isnan(v[i])) {
            CHECK(std::isnan(e[i]));
            CHECK(std::isnan(f[i]));
            continue;
        }
        if (we > double(std::numeric_limits<float>::max())) {
            CHECK(e[i] == inf);  // overflows to inf, as expf
        } else if (we < double(std::numeric_limits<float>::min())) {
            CHECK(std::fabs(double(e[i])) <= double(std::numeric_limits<float>::min()));
        } else {
            CHECK(std::fabs(double(e[i]) - we) <= 4e-7 * we);  // about 1 ulp
        }
        CHECK(std::fabs(double(f[i]) - wf) <= 3e-7);
    }
}

}  // namespace test_cpu_kernels
