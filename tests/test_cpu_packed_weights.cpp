// The CPU backend's weights packed once (matmul.cpp, packed_weights): a B operand seen twice
// with the same buffer and values is packed whole and kept, and later products read it from
// there. Each product is checked against the sums written out in double, on the first use
// (packed as usual), the second (packed whole and kept) and the third (from the kept copy),
// and after the weight is changed by an op that could have run in place.
#include <thread>
#include <vector>

#include "harness.hpp"
#include "matmul_reference.hpp"

namespace test_cpu_packed_weights {

namespace {

using B = ember::Cpu;
using T2 = ember::Tensor<B, 2>;

// Σ_p a[i, p] · b[p, j], in double, from the operands' values.
ember::TensorData reference(const T2& a, const T2& b) {
    return ember::test::matmul_reference(a, b);
}

const ember::Tolerance kTol{1e-4, 1e-4};

// op(A) [m, k] times the same op(B) [k, n] three times, then after B is scaled (an op that
// would write in place if it held B's only reference), then with a fresh A.
void check_weight(std::size_t m, std::size_t n, std::size_t k, bool ta, bool tb) {
    INFO("m " << m << ", n " << n << ", k " << k << (ta ? ", A transposed" : "")
              << (tb ? ", B transposed" : ""));
    const auto dist = ember::Distribution::Uniform(-1, 1);
    const T2 a = ta ? T2::random({k, m}, dist).transpose() : T2::random({m, k}, dist);
    T2 b = tb ? T2::random({n, k}, dist).transpose() : T2::random({k, n}, dist);
    const auto want = reference(a, b);
    for (int use = 0; use < 3; ++use) {
        INFO("use " << use);
        ember::test::check_close(a.matmul(b).to_data(), want, kTol);
    }
    b = std::move(b) * 2.0f;
    ember::test::check_close(a.matmul(b).to_data(), reference(a, b), kTol);
    ember::test::check_close(a.matmul(b).to_data(), reference(a, b), kTol);
    const T2 a2 = T2::random({m, k}, dist);
    ember::test::check_close(a2.matmul(b).to_data(), reference(a2, b), kTol);
}

}  // namespace

TEST_CASE("cpu packed weights: products from a weight packed once", "[gemm][cpu]") {
    B::seed(23);
    SECTION("a batch-1 Linear's shapes, edge panels and several depth blocks") {
        for (bool ta : {false, true})
            for (bool tb : {false, true}) check_weight(64, 300, 200, ta, tb);
        check_weight(64, 96, 1000, false, false);  // depth past one block of the kernels
        check_weight(3, 70, 50, false, false);     // three rows (two go to the row path)
        check_weight(33, 17, 129, false, true);
    }
    SECTION("more columns than one block of the kernels (4096)") {
        check_weight(5, 4100, 24, false, false);
        check_weight(5, 4100, 24, false, true);
    }
    SECTION("a view of part of a buffer, and another view of the same buffer") {
        const auto dist = ember::Distribution::Uniform(-1, 1);
        const T2 a = T2::random({40, 64}, dist);
        const T2 whole = T2::random({64, 200}, dist);
        const T2 left = whole.slice({{0, 64}, {0, 100}});
        const T2 right = whole.slice({{0, 64}, {100, 200}});
        for (int use = 0; use < 3; ++use) {
            ember::test::check_close(a.matmul(left).to_data(), reference(a, left), kTol);
            ember::test::check_close(a.matmul(right).to_data(), reference(a, right), kTol);
        }
    }
    SECTION("batched input through one weight (the rows folded into one product)") {
        const auto dist = ember::Distribution::Uniform(-1, 1);
        const auto x = ember::Tensor<B, 3>::random({2, 32, 200}, dist);
        const T2 w = T2::random({200, 150}, dist);
        for (int use = 0; use < 3; ++use) {
            const auto y = x.matmul(w.unsqueeze_dim<3>(0));
            for (long i = 0; i < 2; ++i) {
                const T2 xi = x.slice({{i, i + 1}}).squeeze<2>(0);
                ember::test::check_close(y.slice({{i, i + 1}}).squeeze<2>(0).to_data(),
                                         reference(xi, w), kTol);
            }
        }
    }
    SECTION("a weight that changes between uses (a training step's) is not kept stale") {
        const auto dist = ember::Distribution::Uniform(-1, 1);
        const T2 a = T2::random({64, 128}, dist);
        T2 w = T2::random({128, 96}, dist);
        for (int step = 0; step < 4; ++step) {
            ember::test::check_close(a.matmul(w).to_data(), reference(a, w), kTol);
            w = std::move(w) - 0.125f;  // in place when w holds its buffer alone
        }
    }
    SECTION("threads sharing one weight (an inference server, a request a thread)") {
        const std::size_t threads_before = ember::cpu::num_threads();
        ember::cpu::set_num_threads(1);
        const auto dist = ember::Distribution::Uniform(-1, 1);
        const T2 w = T2::random({96, 200}, dist);
        std::vector<T2> xs;
        std::vector<ember::TensorData> want;
        for (int t = 0; t < 4; ++t) {
            xs.push_back(T2::random({16 + 8 * std::size_t(t), 96}, dist));
            want.push_back(reference(xs.back(), w));
        }
        std::vector<std::vector<ember::TensorData>> got(4);
        std::vector<std::thread> pool;
        for (int t = 0; t < 4; ++t)
            pool.emplace_back([&, t] {
                for (int use = 0; use < 12; ++use) got[t].push_back(xs[t].matmul(w).to_data());
            });
        for (auto& th : pool) th.join();
        ember::cpu::set_num_threads(threads_before);
        for (int t = 0; t < 4; ++t)
            for (const auto& g : got[t]) ember::test::check_close(g, want[t], kTol);
    }
    SECTION("a dropped weight's buffer and packing are freed by the next product") {
        const auto dist = ember::Distribution::Uniform(-1, 1);
        const T2 a = T2::random({64, 128}, dist);
        const T2 v = T2::random({128, 64}, dist);
        const std::size_t before = ember::cpu::memory_stats().bytes_in_use;
        {
            const T2 w = T2::random({128, 96}, dist);
            for (int use = 0; use < 3; ++use) (void)a.matmul(w).into_data();
        }
        (void)a.matmul(v).into_data();
        CHECK(ember::cpu::memory_stats().bytes_in_use == before);
    }
}

namespace {

// conv2d of x [n, cin, h, w] with w [cout, cin / groups, k, k] (+ bias), stride s, padding p,
// in double: out[n, co, oy, ox] = bias[co] + Σ x[n, ci, oy·s − p + ky, ox·s − p + kx]·w[...].
std::vector<double> conv_reference(const std::vector<float>& x, const std::vector<float>& w,
                                   const std::vector<float>& b, std::size_t n, std::size_t cin,
                                   std::size_t h, std::size_t cout, std::size_t k, std::size_t s,
                                   std::size_t p, std::size_t groups) {
    const std::size_t oh = (h + 2 * p - k) / s + 1, cg_in = cin / groups, cg_out = cout / groups;
    std::vector<double> y(n * cout * oh * oh, 0.0);
    for (std::size_t q = 0; q < n; ++q)
        for (std::size_t co = 0; co < cout; ++co)
            for (std::size_t oy = 0; oy < oh; ++oy)
                for (std::size_t ox = 0; ox < oh; ++ox) {
                    double acc = b.empty() ? 0.0 : b[co];
                    const std::size_t gi = co / cg_out;
                    for (std::size_t ci = 0; ci < cg_in; ++ci)
                        for (std::size_t ky = 0; ky < k; ++ky)
                            for (std::size_t kx = 0; kx < k; ++kx) {
                                const long iy = long(oy * s + ky) - long(p),
                                           ix = long(ox * s + kx) - long(p);
                                if (iy < 0 || ix < 0 || iy >= long(h) || ix >= long(h)) continue;
                                acc += double(x[((q * cin + gi * cg_in + ci) * h + iy) * h + ix]) *
                                       w[((co * cg_in + ci) * k + ky) * k + kx];
                            }
                    y[((q * cout + co) * oh + oy) * oh + ox] = acc;
                }
    return y;
}

}  // namespace

TEST_CASE("cpu packed weights: batch-1 convolutions from weights packed once", "[conv][cpu]") {
    B::seed(29);
    struct Case {
        std::size_t cin, h, cout, k, s, p, groups;
        bool bias;
    };
    // Late ResNet-18 layers at batch 1 (4×4 and 8×8 planes: 16 and 64 positions; 64 and more
    // run with im2col packed into the panels, the weights' packing kept), a stride-2 one, two
    // groups, odd channel counts (edge panels of the kernels).
    for (const Case c : {Case{32, 4, 48, 3, 1, 1, 1, true}, Case{24, 8, 40, 3, 2, 1, 1, false},
                         Case{16, 4, 20, 3, 1, 1, 2, true}, Case{19, 4, 37, 1, 1, 0, 1, true},
                         Case{32, 8, 40, 3, 1, 1, 1, true}, Case{40, 10, 24, 3, 1, 1, 2, false}}) {
        INFO("cin " << c.cin << ", " << c.h << "x" << c.h << ", cout " << c.cout << ", k " << c.k
                    << ", stride " << c.s << ", groups " << c.groups);
        const auto dist = ember::Distribution::Uniform(-1, 1);
        const auto x = ember::Tensor<B, 4>::random({1, c.cin, c.h, c.h}, dist);
        const auto w = ember::Tensor<B, 4>::random({c.cout, c.cin / c.groups, c.k, c.k}, dist);
        const auto b = ember::Tensor<B, 1>::random({c.cout}, dist);
        const auto want =
            conv_reference(x.to_data().to_vec<float>(), w.to_data().to_vec<float>(),
                           c.bias ? b.to_data().to_vec<float>() : std::vector<float>{}, 1, c.cin,
                           c.h, c.cout, c.k, c.s, c.p, c.groups);
        ember::ConvOptions<2> o;
        o.stride = {c.s, c.s};
        o.padding = {c.p, c.p};
        o.groups = c.groups;
        const std::optional<ember::Tensor<B, 1>> bias = c.bias ? std::optional(b) : std::nullopt;
        for (int use = 0; use < 3; ++use) {
            INFO("use " << use);
            const auto got = ember::module::conv2d(x, w, bias, o).to_data();
            ember::test::check_close(got, ember::TensorData(want, got.shape()), kTol);
        }
    }
}

}  // namespace test_cpu_packed_weights
