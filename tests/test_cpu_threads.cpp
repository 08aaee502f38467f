// The CPU backend's thread pool at several sizes (ember::cpu::set_num_threads): results must not
// depend on the thread count. Parallel regions of every shape — fewer chunks than threads, one
// chunk per thread, many — give the exact sums and elementwise results math says (integer
// values, exact in f32); convolutions, whose batch is split across the pool once it gives every
// thread two samples, and their gradients (per-thread partial sums, added in parallel) are within
// a float32 sum's rounding of float64 sums at every thread count.
#include <cmath>
#include <cstddef>
#include <vector>

#include "harness.hpp"

namespace test_cpu_threads {

namespace {

using ember::Cpu;
using AD = ember::Autodiff<Cpu>;

// Restores the pool's size when a case ends, so the other cases run as configured.
struct ThreadsGuard {
    std::size_t before = ember::cpu::num_threads();
    ~ThreadsGuard() { ember::cpu::set_num_threads(before); }
};

// 0, 1, ..., n-1 modulo 7, as floats (every partial sum an exact integer in f32).
std::vector<float> ramp(std::size_t n) {
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = float(i % 7);
    return v;
}

double ramp_sum(std::size_t n) {
    double s = 0;
    for (std::size_t i = 0; i < n; ++i) s += double(i % 7);
    return s;
}

// The largest |a - b| / (1 + |b|) over two equally shaped tensors.
template <typename B, std::size_t D>
double worst(const ember::Tensor<B, D>& a, const ember::Tensor<B, D>& b) {
    const auto x = a.to_data().template to_vec<float>();
    const auto y = b.to_data().template to_vec<float>();
    REQUIRE(x.size() == y.size());
    double w = 0;
    for (std::size_t i = 0; i < x.size(); ++i)
        w = std::max(w, std::fabs(double(x[i]) - double(y[i])) / (1.0 + std::fabs(double(y[i]))));
    return w;
}

}  // namespace

TEST_CASE("cpu threads: regions of every size give the exact sums and elementwise results",
          "[cpu_threads]") {
    ThreadsGuard guard;
    // Around the elementwise grain (32 Ki elements): one chunk, two, a few, many.
    const std::vector<std::size_t> sizes{1, 1000, 32768, 32769, 65537, 200000, 1 << 20};
    for (const std::size_t threads : {1, 2, 3, 5, 8, 16}) {
        ember::cpu::set_num_threads(threads);
        CHECK(ember::cpu::num_threads() == threads);
        for (const std::size_t n : sizes) {
            INFO(threads << " threads, " << n << " elements");
            const auto a = ember::Tensor<Cpu, 1>::from_data(ember::TensorData(ramp(n), {n}));
            CHECK(double(a.sum().into_scalar()) == ramp_sum(n));
            // a + a + 1 elementwise, element by element: 2 (i mod 7) + 1.
            const auto b = (a + a + 1.0).to_data().to_vec<float>();
            bool all = b.size() == n;
            for (std::size_t i = 0; all && i < n; ++i) all = b[i] == float(2 * (i % 7) + 1);
            CHECK(all);
        }
        // Many small regions back to back (the pool's wake-ups), each checked.
        const auto x = ember::Tensor<Cpu, 1>::from_data(ember::TensorData(ramp(70000), {70000}));
        double total = 0;
        for (int r = 0; r < 200; ++r) total += double((x * 2.0).sum().into_scalar());
        CHECK(total == 200 * 2 * ramp_sum(70000));
    }
}

TEST_CASE("cpu threads: convolutions and their gradients do not depend on the thread count",
          "[cpu_threads][conv]") {
    ThreadsGuard guard;
    // Per-sample products of 32 x 288 x 256 multiply-adds (over 2^20: the size the batch split
    // used to leave to a threaded GEMM sample by sample) and a batch of 8: split from 2 to 4
    // threads, not at 1 or at 8 (fewer than two samples a thread). 16 x 16 = 256 positions a
    // sample: where OpenBLAS runs the products, such layers run on one thread each.
    //
    // Each thread count sums the same terms in its own order (per-thread partials, OpenBLAS's or
    // ember's blocking), so the results are compared with float64 sums, not with each other:
    // every output is within n * 2^-24 of its exact value relative to the sum of its n terms'
    // magnitudes (a float32 sum in any order). A lost or doubled partial (one sample of eight)
    // is off by about an eighth of that sum. The gradients' references take the run's own
    // float32 y as dL/dy, so that y's rounding is not counted twice.
    AD::seed(11);
    constexpr std::size_t N = 8, C = 32, O = 32, H = 16, W = 16, K = 3;
    const auto x0 = ember::Tensor<Cpu, 4>::random({N, C, H, W}, ember::Distribution::Normal(0, 1));
    const auto w0 =
        ember::Tensor<Cpu, 4>::random({O, C, K, K}, ember::Distribution::Normal(0, 0.1));
    const auto b0 = ember::Tensor<Cpu, 1>::random({O}, ember::Distribution::Normal(0, 0.1));
    ember::ConvOptions<2> o;
    o.padding = {1, 1};
    const auto xv = x0.to_data().to_vec<float>(), wv = w0.to_data().to_vec<float>(),
               bv = b0.to_data().to_vec<float>();
    const auto xi = [&](std::size_t n, std::size_t c, std::size_t h, std::size_t w) {
        return ((n * C + c) * H + h) * W + w;
    };
    const auto wi = [&](std::size_t oc, std::size_t c, std::size_t kh, std::size_t kw) {
        return ((oc * C + c) * K + kh) * K + kw;
    };
    const auto yi = [&](std::size_t n, std::size_t oc, std::size_t h, std::size_t w) {
        return ((n * O + oc) * H + h) * W + w;
    };
    // Calls f(n, o, h, w, c, kh, kw, input index) for every in-bounds tap (padding 1).
    const auto taps = [&](auto&& f) {
        for (std::size_t n = 0; n < N; ++n)
            for (std::size_t oc = 0; oc < O; ++oc)
                for (std::size_t h = 0; h < H; ++h)
                    for (std::size_t w = 0; w < W; ++w)
                        for (std::size_t c = 0; c < C; ++c)
                            for (std::size_t kh = 0; kh < K; ++kh)
                                for (std::size_t kw = 0; kw < K; ++kw) {
                                    if (h + kh < 1 || h + kh > H || w + kw < 1 || w + kw > W)
                                        continue;
                                    f(n, oc, h, w, c, kh, kw, xi(n, c, h + kh - 1, w + kw - 1));
                                }
    };
    // A float64 value with the sum of its terms' magnitudes.
    struct Ref {
        std::vector<double> sum, mag;
        explicit Ref(std::size_t n) : sum(n, 0.0), mag(n, 0.0) {}
        void add(std::size_t i, double t) {
            sum[i] += t;
            mag[i] += std::fabs(t);
        }
    };
    // The largest |got - exact| over the sum of magnitudes, in units of 2^-24 per term.
    const auto off = [](const auto& got, const Ref& ref, double terms) {
        const auto v = got.to_data().template to_vec<float>();
        REQUIRE(v.size() == ref.sum.size());
        double e = 0;
        for (std::size_t i = 0; i < v.size(); ++i)
            e = std::max(e, std::fabs(double(v[i]) - ref.sum[i]) / (ref.mag[i] + 1e-30));
        return e / (terms * std::ldexp(1.0, -24));
    };
    Ref y_ref(N * O * H * W);
    for (std::size_t n = 0; n < N; ++n)
        for (std::size_t oc = 0; oc < O; ++oc)
            for (std::size_t p = 0; p < H * W; ++p) y_ref.add(yi(n, oc, 0, 0) + p, bv[oc]);
    taps([&](std::size_t n, std::size_t oc, std::size_t h, std::size_t w, std::size_t c,
             std::size_t kh, std::size_t kw, std::size_t at) {
        y_ref.add(yi(n, oc, h, w), double(xv[at]) * wv[wi(oc, c, kh, kw)]);
    });

    for (const std::size_t threads : {1, 2, 3, 4, 8}) {
        INFO(threads << " threads");
        ember::cpu::set_num_threads(threads);
        const auto x = ember::Tensor<AD, 4>::from_inner(x0).require_grad();
        const auto w = ember::Tensor<AD, 4>::from_inner(w0).require_grad();
        const auto b = ember::Tensor<AD, 1>::from_inner(b0).require_grad();
        const auto y = ember::module::conv2d(x, w, std::optional(b), o);
        // A loss whose gradient differs per element: sum(y^2) / 2 has gradient y.
        const auto grads = (y * y).sum().mul_scalar(0.5).backward();
        const auto dy = y.inner().to_data().to_vec<float>();
        Ref dx_ref(N * C * H * W), dw_ref(O * C * K * K), db_ref(O);
        taps([&](std::size_t n, std::size_t oc, std::size_t h, std::size_t w, std::size_t c,
                 std::size_t kh, std::size_t kw, std::size_t at) {
            const double g = dy[yi(n, oc, h, w)];
            dx_ref.add(at, g * wv[wi(oc, c, kh, kw)]);
            dw_ref.add(wi(oc, c, kh, kw), g * xv[at]);
        });
        for (std::size_t n = 0; n < N; ++n)
            for (std::size_t oc = 0; oc < O; ++oc)
                for (std::size_t p = 0; p < H * W; ++p) db_ref.add(oc, dy[yi(n, oc, 0, 0) + p]);
        // Terms per output: C K^2 taps (+ the bias) for y and dx, N H W positions for dw, db.
        CHECK(off(y.inner(), y_ref, C * K * K + 1) < 1.0);
        CHECK(off(*x.grad(grads), dx_ref, O * K * K) < 1.0);
        CHECK(off(*w.grad(grads), dw_ref, N * H * W) < 1.0);
        CHECK(off(*b.grad(grads), db_ref, N * H * W) < 1.0);
    }
}

TEST_CASE("cpu threads: batched matmuls do not depend on the thread count", "[cpu_threads]") {
    ThreadsGuard guard;
    // 12 products of 64 x 64 x 64 multiply-adds (2^18: too large for the small-product split):
    // split across the pool at 2 to 6 threads (two products a thread or more), threaded one by
    // one at 8 and 16, inline at 1.
    AD::seed(5);
    const auto a = ember::Tensor<Cpu, 3>::random({12, 64, 64}, ember::Distribution::Normal(0, 1));
    const auto b = ember::Tensor<Cpu, 3>::random({12, 64, 64}, ember::Distribution::Normal(0, 1));
    ember::cpu::set_num_threads(1);
    const auto one = a.matmul(b);
    // The first product against a plain triple loop.
    const auto av = a.to_data().to_vec<float>(), bv = b.to_data().to_vec<float>();
    const auto cv = one.to_data().to_vec<float>();
    double err = 0;
    for (std::size_t i = 0; i < 64; ++i)
        for (std::size_t j = 0; j < 64; ++j) {
            double s = 0;
            for (std::size_t k = 0; k < 64; ++k) s += double(av[i * 64 + k]) * bv[k * 64 + j];
            err = std::max(err, std::fabs(s - cv[i * 64 + j]) / (1.0 + std::fabs(s)));
        }
    CHECK(err < 1e-5);
    for (const std::size_t threads : {2, 3, 6, 8, 16}) {
        INFO(threads << " threads");
        ember::cpu::set_num_threads(threads);
        CHECK(worst(a.matmul(b), one) < 1e-5);
    }
}

TEST_CASE("cpu threads: products of one or two rows split across the pool give the same sums",
          "[cpu_threads]") {
    ThreadsGuard guard;
    // A batch-1 (and batch-2) Linear, 784 inputs: x · W with W [784, n] as stored, and x · Vᵀ
    // with V [n, 784] (the layout of an ONNX Gemm with transB); n = 500 leaves a strip narrower
    // than two cache lines. From 2 threads on the columns are split in strips across the pool
    // (at 1, OpenBLAS runs them where it is used): each output is the same sum over k in the
    // same order on any number of threads, checked exactly from 2 threads on, and against a
    // float64 loop at 1 and 2.
    AD::seed(11);
    for (const std::size_t n : {512, 500}) {
        for (const std::size_t m : {1, 2}) {
            INFO(m << " x 784 x " << n);
            const auto x =
                ember::Tensor<Cpu, 2>::random({m, 784}, ember::Distribution::Normal(0, 1));
            const auto w =
                ember::Tensor<Cpu, 2>::random({784, n}, ember::Distribution::Normal(0, 1));
            const auto v =
                ember::Tensor<Cpu, 2>::random({n, 784}, ember::Distribution::Normal(0, 1));
            const auto xv = x.to_data().to_vec<float>(), wv = w.to_data().to_vec<float>();
            const auto vv = v.to_data().to_vec<float>();
            // Each output against its float64 sum, relative to the sum of its terms' magnitudes
            // (a float32 sum of 784 terms in any order is within 784 · 2^-24 of that: 4.7e-5).
            std::vector<double> ref(m * n, 0.0), ref_t(m * n, 0.0), mag(m * n, 0.0),
                mag_t(m * n, 0.0);
            for (std::size_t i = 0; i < m; ++i)
                for (std::size_t j = 0; j < n; ++j)
                    for (std::size_t p = 0; p < 784; ++p) {
                        const double t = double(xv[i * 784 + p]) * double(wv[p * n + j]);
                        const double u = double(xv[i * 784 + p]) * double(vv[j * 784 + p]);
                        ref[i * n + j] += t;
                        ref_t[i * n + j] += u;
                        mag[i * n + j] += std::fabs(t);
                        mag_t[i * n + j] += std::fabs(u);
                    }
            auto off = [](const ember::Tensor<Cpu, 2>& y, const std::vector<double>& r,
                          const std::vector<double>& g) {
                const auto yv = y.to_data().to_vec<float>();
                REQUIRE(yv.size() == r.size());
                double e = 0;
                for (std::size_t i = 0; i < r.size(); ++i)
                    e = std::max(e, std::fabs(yv[i] - r[i]) / g[i]);
                return e;
            };
            ember::cpu::set_num_threads(1);
            CHECK(off(x.matmul(w), ref, mag) < 4.7e-5);
            CHECK(off(x.matmul(v.clone().transpose()), ref_t, mag_t) < 4.7e-5);
            ember::cpu::set_num_threads(2);
            const auto two = x.matmul(w);
            const auto two_t = x.matmul(v.clone().transpose());
            CHECK(off(two, ref, mag) < 4.7e-5);
            CHECK(off(two_t, ref_t, mag_t) < 4.7e-5);
            for (const std::size_t threads : {3, 4, 8, 16}) {
                INFO(threads << " threads");
                ember::cpu::set_num_threads(threads);
                CHECK(worst(x.matmul(w), two) == 0.0);
                CHECK(worst(x.matmul(v.clone().transpose()), two_t) == 0.0);
            }
        }
    }
}

}  // namespace test_cpu_threads
