#pragma once
// What the fusion tests of every backend share: the gelu_custom, an input ramp and a
// closed-form value check.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <numbers>
#include <optional>
#include <utility>
#include <vector>

#include <ember/ember.hpp>
#include <ember/tensor/fusion_program.hpp>

namespace ember::test {

/// gelu written with tensor ops (five elementwise ops: one fused kernel under Fusion<B>).
template <ember::Backend BE, std::size_t D>
Tensor<BE, D> gelu_custom(Tensor<BE, D> x) {
    auto y = x * ((x / std::numbers::sqrt2_v<float>).erf() + 1);
    return y / 2;
}

/// n evenly spaced values from lo to hi (n >= 2).
inline std::vector<float> ramp(std::size_t n, float lo, float hi) {
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i)
        v[i] = lo + (hi - lo) * static_cast<float>(i) / static_cast<float>(n - 1);
    return v;
}

/// Every element within 1e-6 absolute plus `rel` of |want|.
inline void check_values(const std::vector<float>& got, const std::vector<double>& want,
                         double rel) {
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
        INFO("element " << i << ": " << got[i] << " vs " << want[i]);
        CHECK(std::abs(got[i] - want[i]) <= 1e-6 + rel * std::abs(want[i]));
    }
}

/// Reductions along the last dim that end a pending chain, on Fusion<Inner> where Inner fuses
/// them (`fused_reductions`): each is one kernel with the values of the math, and a reduced
/// value that is still held comes out of the same kernel. Reductions along another dim, and
/// of values already computed, run as before.
template <typename FB>
void check_fused_reductions(const typename FB::Device& device = {}) {
    using fusion_stats = ember::fusion::Stats;
    const std::vector<float> v = ramp(15, -2.f, 2.f);  // x[i][j] = v[5 i + j]
    auto x = Tensor<FB, 2>::from_data(TensorData(v, {3, 5}), device);
    auto launches = [](auto&& run) {
        ember::fusion::reset_stats();
        run();
        const fusion_stats s = ember::fusion::stats();
        return std::pair{s.fused_launches, s.kernels_launched};
    };
    auto rows = [&](auto f) {  // f over each row of x, from the math
        std::vector<double> out;
        for (std::size_t i = 0; i < 3; ++i) {
            std::vector<double> row(v.begin() + 5 * i, v.begin() + 5 * i + 5);
            out.push_back(f(row));
        }
        return out;
    };
    SECTION("sum, mean, max and min of a chain: one kernel each") {
        std::vector<float> got;
        auto n = launches(
            [&] { got = (x * 2.0).exp().sum_dim(1).into_data().template to_vec<float>(); });
        CHECK(n == std::pair<std::uint64_t, std::uint64_t>{1, 1});
        check_values(got, rows([](const std::vector<double>& r) {
                         double a = 0;
                         for (double e : r) a += std::exp(2 * e);
                         return a;
                     }),
                     1e-6);
        n = launches([&] { got = (x * x).mean_dim(1).into_data().template to_vec<float>(); });
        CHECK(n.first == 1);
        check_values(got, rows([](const std::vector<double>& r) {
                         double a = 0;
                         for (double e : r) a += e * e;
                         return a / 5;
                     }),
                     1e-6);
        n = launches(
            [&] { got = (x - 1.0).abs().max_dim(1).into_data().template to_vec<float>(); });
        CHECK(n.first == 1);
        check_values(got, rows([](const std::vector<double>& r) {
                         double a = 0;
                         for (double e : r) a = std::max(a, std::abs(e - 1));
                         return a;
                     }),
                     1e-6);
        n = launches([&] { got = x.sin().min_dim(1).into_data().template to_vec<float>(); });
        CHECK(n.first == 1);
        check_values(got, rows([](const std::vector<double>& r) {
                         double a = 2;
                         for (double e : r) a = std::min(a, std::sin(e));
                         return a;
                     }),
                     1e-6);
    }
    SECTION("a reduced value that is still held is written by the same kernel") {
        std::optional<Tensor<FB, 2>> e, s;
        auto n = launches([&] {
            e = x.exp();
            s = e->sum_dim(1);
            (void)s->to_data();
        });
        CHECK(n == std::pair<std::uint64_t, std::uint64_t>{1, 1});
        std::vector<double> ev;
        for (float f : v) ev.push_back(std::exp(double(f)));
        check_values(e->to_data().template to_vec<float>(), ev, 1e-6);
        check_values(s->to_data().template to_vec<float>(), rows([](const std::vector<double>& r) {
                         double a = 0;
                         for (double q : r) a += std::exp(q);
                         return a;
                     }),
                     1e-6);
    }
    SECTION("strided inputs, rank 3, NaN and other dims") {
        // x transposed: [5, 3], row j holds column j of x.
        auto t = (x.transpose() + 1.0).sum_dim(1).into_data().template to_vec<float>();
        std::vector<double> want;
        for (std::size_t j = 0; j < 5; ++j)
            want.push_back(3 + double(v[j]) + double(v[5 + j]) + double(v[10 + j]));
        check_values(t, want, 1e-6);
        auto x3 = Tensor<FB, 3>::from_data(TensorData(ramp(24, -1.f, 1.f), {2, 3, 4}), device);
        auto r3 = x3.clamp_min(0.0).sum_dim(2);
        CHECK(r3.shape() == ember::Shape{2, 3, 1});
        std::vector<double> w3;
        const auto v3 = ramp(24, -1.f, 1.f);
        for (std::size_t r = 0; r < 6; ++r) {
            double a = 0;
            for (std::size_t c = 0; c < 4; ++c) a += std::max(0.0, double(v3[4 * r + c]));
            w3.push_back(a);
        }
        check_values(r3.into_data().template to_vec<float>(), w3, 1e-6);
        // A NaN in row 1 is the row's max, as unfused.
        std::vector<float> with_nan = v;
        with_nan[6] = std::numeric_limits<float>::quiet_NaN();
        auto xn = Tensor<FB, 2>::from_data(TensorData(with_nan, {3, 5}), device);
        auto nan_max = (xn + 1.0).max_dim(1).into_data().template to_vec<float>();
        CHECK(std::isnan(nan_max[1]));
        CHECK(nan_max[0] == Approx(v[4] + 1));
        // Along dim 0: reduced unfused after the chain.
        auto n = launches([&] { (void)(x * 3.0).sum_dim(0).into_data(); });
        CHECK(n == std::pair<std::uint64_t, std::uint64_t>{0, 2});
    }
}

/// x · w + bias and relu of it, in double (row-major x [m, k], w [k, n]).
inline std::vector<double> linear_reference(const std::vector<float>& x, const std::vector<float>& w,
                                            const std::vector<float>* bias, bool relu,
                                            std::size_t m, std::size_t k, std::size_t n) {
    std::vector<double> want(m * n);
    for (std::size_t i = 0; i < m; ++i)
        for (std::size_t j = 0; j < n; ++j) {
            double s = bias ? (*bias)[j] : 0.0;
            for (std::size_t q = 0; q < k; ++q) s += double(x[i * k + q]) * w[q * n + j];
            want[i * n + j] = relu ? std::max(s, 0.0) : s;
        }
    return want;
}

/// Turns matmul epilogues back on however a test ends.
struct RestoreEpilogues {
    ~RestoreEpilogues() { ember::fusion::set_matmul_epilogues(true); }
};

/// Matmul epilogues on Fusion<Inner> where Inner takes them (`fused_matmul_epilogue`): a 2-D
/// f32 product followed by a bias row add and/or relu is one launch with the values of the
/// math; a product or sum held elsewhere, other ops, full-size biases and batched products run
/// as before, as does everything with epilogues turned off.
template <typename FB>
void check_matmul_epilogues(const typename FB::Device& device = {}) {
    namespace fusion = ember::fusion;
    RestoreEpilogues restore;
    const std::size_t m = 5, k = 7, n = 6;
    const auto xv = ramp(m * k, -2.f, 2.f), wv = ramp(k * n, 1.5f, -1.f), bv = ramp(n, -1.f, 1.f);
    auto x = Tensor<FB, 2>::from_data(TensorData(xv, {m, k}), device);
    auto w = Tensor<FB, 2>::from_data(TensorData(wv, {k, n}), device);
    auto b = Tensor<FB, 2>::from_data(TensorData(bv, {1, n}), device);
    auto b1 = Tensor<FB, 1>::from_data(TensorData(bv, {n}), device);
    const auto with_bias = linear_reference(xv, wv, &bv, true, m, k, n);
    const auto plain = linear_reference(xv, wv, nullptr, false, m, k, n);
    auto values = [](const auto& t) { return t.clone().into_data().template to_vec<float>(); };

    SECTION("relu(x · w + b): one launch with the values of the math") {
        fusion::reset_stats();
        auto y = ember::activation::relu(x.matmul(w) + b);
        CHECK(fusion::stats().kernels_launched == 0);  // the matmul waits for its epilogue
        check_values(values(y), with_bias, 1e-5);
        CHECK(fusion::stats().epilogues == 1);
        CHECK(fusion::stats().kernels_launched == 1);
    }
    SECTION("the bias on either side, and without relu or without bias") {
        fusion::reset_stats();
        // (A statement of its own: a temporary product still alive when the sum is read would
        // be held elsewhere, and computed on its own.)
        auto left = ember::activation::relu(b1.unsqueeze() + x.matmul(w));
        check_values(values(left), with_bias, 1e-5);
        CHECK(fusion::stats().epilogues == 1);
        check_values(values(x.matmul(w) + b1.unsqueeze()),
                     linear_reference(xv, wv, &bv, false, m, k, n), 1e-5);
        CHECK(fusion::stats().epilogues == 2);
        check_values(values(ember::activation::relu(x.matmul(w))),
                     linear_reference(xv, wv, nullptr, true, m, k, n), 1e-5);
        CHECK(fusion::stats().epilogues == 3);
    }
    SECTION("a product or sum held elsewhere is computed on its own") {
        fusion::reset_stats();
        auto mm = x.matmul(w);
        auto y = ember::activation::relu(mm + b);
        check_values(values(y), with_bias, 1e-5);
        check_values(values(mm), plain, 1e-5);
        auto s = x.matmul(w) + b;
        auto z = ember::activation::relu(s);
        check_values(values(z), with_bias, 1e-5);
        check_values(values(s), linear_reference(xv, wv, &bv, false, m, k, n), 1e-5);
        CHECK(fusion::stats().epilogues == 0);
    }
    SECTION("what is not an epilogue: a full bias, other ops, reductions, batched products") {
        fusion::reset_stats();
        auto full = Tensor<FB, 2>::ones({m, n}, device);
        std::vector<double> want(plain);
        for (auto& e : want) e += 1;
        check_values(values(x.matmul(w) + full), want, 1e-5);
        for (std::size_t i = 0; i < want.size(); ++i) want[i] = std::exp(plain[i] * 0.5);
        check_values(values((x.matmul(w) * 0.5).exp()), want, 1e-5);
        std::vector<double> sums(m, 0.0);
        for (std::size_t i = 0; i < m; ++i)
            for (std::size_t j = 0; j < n; ++j) sums[i] += plain[i * n + j];
        check_values(values(x.matmul(w).sum_dim(1)), sums, 1e-5);
        auto x3 = x.template unsqueeze_dim<3>(0);
        auto y3 = ember::activation::relu(x3.matmul(w.template unsqueeze_dim<3>(0)) + b.unsqueeze());
        check_values(values(y3), with_bias, 1e-5);
        CHECK(fusion::stats().epilogues == 0);
    }
    SECTION("turned off: the matmul and the chain run apart, with the same values") {
        fusion::set_matmul_epilogues(false);
        fusion::reset_stats();
        check_values(values(ember::activation::relu(x.matmul(w) + b)), with_bias, 1e-5);
        CHECK(fusion::stats().epilogues == 0);
        CHECK(fusion::stats().kernels_launched == 2);
    }
    SECTION("inner dims that differ are an error at the matmul, as without fusion") {
        auto bad = Tensor<FB, 2>::ones({k + 1, n}, device);
        CHECK_THROWS_AS(x.matmul(bad), ember::ShapeError);
    }
}

}  // namespace ember::test
