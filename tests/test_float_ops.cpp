// Float operations (Burn's "Float Operations" table), checked against PyTorch fixtures written
// by tests/fixtures/gen_tensor_ops.py; random draws are checked against closed-form statistics.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "op_test.hpp"

namespace test_float_ops {

// ---------------------------------------------------------------------------------------------
namespace {
const char* const kUnary[] = {"ceil", "floor", "round", "cos", "sin",  "tanh",
                              "erf",  "exp",   "log",   "log1p", "sqrt", "recip"};

template <typename T>
T apply_unary(const std::string& op, const T& t) {
    if (op == "ceil") return t.ceil();
    if (op == "floor") return t.floor();
    if (op == "round") return t.round();
    if (op == "cos") return t.cos();
    if (op == "sin") return t.sin();
    if (op == "tanh") return t.tanh();
    if (op == "erf") return t.erf();
    if (op == "exp") return t.exp();
    if (op == "log") return t.log();
    if (op == "log1p") return t.log1p();
    if (op == "sqrt") return t.sqrt();
    if (op == "recip") return t.recip();
    throw std::runtime_error("unknown unary op " + op);
}

/// Each unary function on a [3, 4] input, on special values (NaN, ±inf, ±0, halves, tiny),
/// on a transposed input and on a strided slice.
template <typename B>
void check_unary_functions() {
    for (const std::string op : kUnary) {
        DYNAMIC_SECTION(op) {
            auto f = fixture(("float_" + op).c_str());
            auto x = f.tensor<B, 2>(0);
            auto special = f.tensor<B, 1>(1);
            SECTION("values") { EXPECT_CLOSE(f.output(0), apply_unary(op, x)); }
            SECTION("NaN, infinities, signed zeros, halves") {
                EXPECT_CLOSE(f.output(1), apply_unary(op, special));
            }
            SECTION("a transposed input") { EXPECT_CLOSE(f.output(2), apply_unary(op, x.transpose())); }
            SECTION("a strided slice") {
                EXPECT_CLOSE(f.output(3), apply_unary(op, x.slice({Slice{1}, Slice{0, kEnd, 2}})));
            }
        }
    }
}
}  // namespace

TEMPLATE_LIST_TEST_CASE("unary float functions", "[float][unary]",
                        ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    check_unary_functions<B>();
    SECTION("round is half to even") {
        auto f = fixture("float_round_half_even");
        EXPECT_CLOSE(f.output(0), f.tensor<B, 1>(0).round());
    }
}

TEMPLATE_TEST_CASE("unary float functions on the f64 backend", "[float][unary][f64]", ember::CpuF64) {
    using B = TestType;  // f32 inputs, expected values computed by torch in float64
    check_unary_functions<B>();
}

// ---------------------------------------------------------------------------------------------
TEMPLATE_LIST_TEST_CASE("int_ / one_hot / from_floats", "[float][int_][one_hot]",
                        ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    using T1 = ember::Tensor<B, 1>;
    SECTION("int_ truncates toward zero") {
        auto f = fixture("float_to_int");
        auto x = f.tensor<B, 2>(0);
        EXPECT_SAME(f.output(0), x.int_());
        CHECK(x.int_().dtype() == DType::I64);
    }
    SECTION("one_hot") {
        auto f = fixture("float_one_hot");
        EXPECT_CLOSE(f.output(0), T1::one_hot(2, 5));
        EXPECT_CLOSE(f.output(1), T1::one_hot(0, 1));
        CHECK_THROWS_AS(T1::one_hot(5, 5), ember::IndexError);
    }
    SECTION("from_floats") {
        auto t = T1::from_floats({1.5f, -2.f, 0.f});
        CHECK(t.dims() == std::array<std::size_t, 1>{3});
        EXPECT_CLOSE(TensorData({1.5f, -2.f, 0.f}, Shape{3}), t);
    }
}

TEMPLATE_LIST_TEST_CASE("matmul", "[float][matmul]", ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    auto f = fixture("float_matmul");
    auto a = f.tensor<B, 2>(0), b = f.tensor<B, 2>(1);
    auto a3 = f.tensor<B, 3>(2), b3 = f.tensor<B, 3>(3), b31 = f.tensor<B, 3>(4);
    auto a4 = f.tensor<B, 4>(5), b4 = f.tensor<B, 4>(6);
    SECTION("[2, 3] x [3, 4]") { EXPECT_CLOSE(f.output(0), a.matmul(b)); }
    SECTION("batched") { EXPECT_CLOSE(f.output(1), a3.matmul(b3)); }
    SECTION("broadcast batch [2] with [1]") { EXPECT_CLOSE(f.output(2), a3.matmul(b31)); }
    SECTION("broadcast batch [2, 1] with [1, 3]") { EXPECT_CLOSE(f.output(3), a4.matmul(b4)); }
    SECTION("transposed inputs") { EXPECT_CLOSE(f.output(4), b.transpose().matmul(a.transpose())); }
    SECTION("strided slices") {
        EXPECT_CLOSE(f.output(5),
                     a.slice({Slice{0}, Slice{0, 2}}).matmul(b.slice({Slice{1}, Slice{0, kEnd, 2}})));
    }
    SECTION("a times its transpose") { EXPECT_CLOSE(f.output(6), a.matmul(a.transpose())); }
    SECTION("an inner dim of 0 gives zeros") {
        auto z0 = ember::Tensor<B, 2>::zeros(Shape{2, 0}), z1 = ember::Tensor<B, 2>::zeros(Shape{0, 3});
        EXPECT_CLOSE(f.output(7), z0.matmul(z1));
    }
    SECTION("moved-in lhs") { EXPECT_CLOSE(f.output(0), std::move(a).matmul(b)); }
    SECTION("size-1 dims") {
        auto g = fixture("float_matmul_sizes");
        auto r1 = g.tensor<B, 2>(0), r5 = g.tensor<B, 2>(1), c5 = g.tensor<B, 2>(2);
        EXPECT_CLOSE(g.output(0), r1.matmul(r5));
        EXPECT_CLOSE(g.output(1), r5.matmul(c5));
        EXPECT_CLOSE(g.output(2), c5.matmul(r5));
    }
    SECTION("inner dims that differ") { CHECK_THROWS_AS(a.matmul(a), ember::ShapeError); }
}

TEMPLATE_LIST_TEST_CASE("var / var_bias / var_mean / var_mean_bias", "[float][var]",
                        ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    auto f = fixture("float_var");
    auto x = f.tensor<B, 2>(0);
    SECTION("var (n - 1)") {
        EXPECT_CLOSE(f.output(0), x.var(1));
        EXPECT_CLOSE(f.output(1), x.var(0));
    }
    SECTION("var_bias (n)") {
        EXPECT_CLOSE(f.output(2), x.var_bias(1));
        EXPECT_CLOSE(f.output(3), x.var_bias(0));
    }
    SECTION("var_mean") {
        auto [v, m] = x.var_mean(1);
        EXPECT_CLOSE(f.output(4), v);
        EXPECT_CLOSE(f.output(5), m);
    }
    SECTION("var_mean_bias") {
        auto [v, m] = x.var_mean_bias(0);
        EXPECT_CLOSE(f.output(6), v);
        EXPECT_CLOSE(f.output(7), m);
    }
    SECTION("a transposed input, negative dim") { EXPECT_CLOSE(f.output(8), x.transpose().var(-1)); }
    SECTION("a single sample: var is NaN, var_bias 0") {
        auto g = fixture("float_var_single");
        auto y = g.tensor<B, 2>(0);
        EXPECT_CLOSE(g.output(0), y.var(0));
        EXPECT_CLOSE(g.output(1), y.var_bias(0));
    }
}

TEMPLATE_LIST_TEST_CASE("swap_dims / transpose", "[float][swap_dims][transpose]",
                        ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    auto f = fixture("float_swap_dims");
    auto x = f.tensor<B, 3>(0);  // [2, 3, 4]
    SECTION("swap_dims(0, 2)") { EXPECT_CLOSE(f.output(0), x.swap_dims(0, 2)); }
    SECTION("swap_dims(1, -1)") { EXPECT_CLOSE(f.output(1), x.swap_dims(1, -1)); }
    SECTION("transpose swaps the last two dims") {
        EXPECT_CLOSE(f.output(2), x.transpose());
        EXPECT_CLOSE(f.output(2), x.swap_dims(-2, -1));
    }
    SECTION("a swapped view as an operand") { EXPECT_CLOSE(f.output(3), x.swap_dims(0, 2) * 2.0); }
    SECTION("swapping twice is the identity") { EXPECT_CLOSE(f.output(4), x.swap_dims(1, 2).swap_dims(1, 2)); }
    SECTION("transpose of a vector is itself") {
        auto v = ember::Tensor<B, 1>::from_floats({1.f, 2.f});
        EXPECT_CLOSE(TensorData({1.f, 2.f}, Shape{2}), v.transpose());
    }
}

// ---------------------------------------------------------------------------------------------
TEMPLATE_LIST_TEST_CASE("casts and full precision", "[float][cast][f64]",
                        ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    SECTION("cast(F64) computes in double") {
        auto f = fixture("float_cast_f64");
        auto x = f.tensor<B, 2>(0).cast(DType::F64), y = f.tensor<B, 2>(1).cast(DType::F64);
        CHECK(x.dtype() == DType::F64);
        auto r = x * y + x;
        CHECK(r.dtype() == DType::F64);
        auto d = r.into_data();
        CHECK(d.dtype() == DType::F64);
        const ember::Tolerance tight = ember::test::computes_f64<B>()
                                           ? ember::Tolerance{1e-12, 1e-12}
                                           : ember::test::default_tolerance<B>();
        ember::test::check_close(d, f.output(0), tight);
        ember::test::check_close((x - y).exp().into_data(), f.output(1), tight);
        ember::test::check_close(x.matmul(y.transpose()).into_data(), f.output(2), tight);
    }
    SECTION("to_full_precision / from_full_precision") {
        auto x = fixture("float_cast_f64").tensor<B, 2>(0);
        auto full = x.cast(DType::F64).to_full_precision();
        CHECK(full.dtype() == DType::F32);
        auto back = ember::Tensor<B, 2>::from_full_precision(full);
        CHECK(back.dtype() == ember::dtype_of<typename B::FloatElem>());
        EXPECT_CLOSE(fixture("float_cast_f64").input(0), back);
    }
    SECTION("cast to an int dtype is an error") {
        auto x = fixture("float_cast_f64").tensor<B, 2>(0);
        CHECK_THROWS_AS(x.cast(DType::I64), ember::DTypeError);
    }
}

TEST_CASE("the f64 backend keeps double precision", "[float][f64]") {
    using B = ember::CpuF64;
    auto f = fixture("float_f64");
    auto a = f.tensor<B, 2>(0), b = f.tensor<B, 2>(1);
    CHECK(a.dtype() == DType::F64);
    const ember::Tolerance tight{1e-300, 1e-15};
    SECTION("add") { ember::test::check_close((a + b).into_data(), f.output(0), tight); }
    SECTION("mul") { ember::test::check_close((a * b).into_data(), f.output(1), tight); }
    SECTION("sub") { ember::test::check_close((a - b).into_data(), f.output(2), tight); }
    SECTION("exp") { ember::test::check_close(b.exp().into_data(), f.output(3), {1e-300, 1e-14}); }
    SECTION("sum") { ember::test::check_close(a.sum().into_data(), f.output(4), tight); }
    SECTION("sum_dim") { ember::test::check_close(a.sum_dim(1).into_data(), f.output(5), tight); }
    SECTION("to f32") {
        auto d = a.cast(DType::F32).into_data();
        CHECK(d.dtype() == DType::F32);
        ember::test::check_close(d, f.output(6), {0, 0});
        CHECK(a.to_full_precision().dtype() == DType::F32);
    }
}

// ---------------------------------------------------------------------------------------------
namespace {
struct Stats {
    double mean = 0, std = 0, min = 0, max = 0;
};
Stats stats_of(const std::vector<double>& v) {
    Stats s;
    s.mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
    double sq = 0;
    for (double x : v) sq += (x - s.mean) * (x - s.mean);
    s.std = std::sqrt(sq / static_cast<double>(v.size()));
    s.min = *std::min_element(v.begin(), v.end());
    s.max = *std::max_element(v.begin(), v.end());
    return s;
}
}  // namespace

TEMPLATE_LIST_TEST_CASE("random / random_like", "[float][random]",
                        ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    using T2 = ember::Tensor<B, 2>;
    using Dist = ember::Distribution;
    constexpr std::size_t kRows = 400, kCols = 500;  // 200000 draws: standard errors ~1/450
    const Shape shape{kRows, kCols};
    auto draw = [&](const Dist& d) { return T2::random(shape, d).into_data().template to_vec<double>(); };

    SECTION("B::seed makes draws reproducible") {
        B::seed(1234);
        auto a = T2::random(Shape{4, 5}, Dist::Default).into_data();
        auto a2 = T2::random(Shape{4, 5}, Dist::Default).into_data();
        B::seed(1234);
        auto b = T2::random(Shape{4, 5}, Dist::Default).into_data();
        CHECK(a == b);
        CHECK_FALSE(a == a2);  // the generator moves on between draws
        B::seed(1235);
        CHECK_FALSE(T2::random(Shape{4, 5}, Dist::Default).into_data() == a);
        B::seed(99);
        auto n1 = T2::random(Shape{3, 3}, Dist::Normal(0, 1)).into_data();
        B::seed(99);
        CHECK(T2::random(Shape{3, 3}, Dist::Normal(0, 1)).into_data() == n1);
    }
    SECTION("random_like keeps the shape and follows the seed") {
        auto x = T2::zeros(Shape{3, 7}).transpose();
        B::seed(7);
        auto r = x.random_like(Dist::Uniform(-1, 1));
        CHECK(r.dims() == std::array<std::size_t, 2>{7, 3});
        B::seed(7);
        CHECK(T2::random(Shape{7, 3}, Dist::Uniform(-1, 1)).into_data() == r.into_data());
    }
    SECTION("Default is uniform on [0, 1)") {
        B::seed(1);
        const auto s = stats_of(draw(Dist::Default));
        CHECK(s.min >= 0.0);
        CHECK(s.max < 1.0);
        CHECK(s.mean == Approx(0.5).margin(0.01));
        CHECK(s.std == Approx(std::sqrt(1.0 / 12.0)).margin(0.01));
    }
    SECTION("Uniform(-2, 3)") {
        B::seed(2);
        const auto s = stats_of(draw(Dist::Uniform(-2, 3)));
        CHECK(s.min >= -2.0);
        CHECK(s.max < 3.0);
        CHECK(s.mean == Approx(0.5).margin(0.03));
        CHECK(s.std == Approx(5.0 / std::sqrt(12.0)).margin(0.03));
    }
    SECTION("Normal(1, 2)") {
        B::seed(3);
        const auto v = draw(Dist::Normal(1, 2));
        const auto s = stats_of(v);
        CHECK(s.mean == Approx(1.0).margin(0.04));
        CHECK(s.std == Approx(2.0).margin(0.04));
        // About 68.27% of draws fall within one standard deviation.
        const auto within = std::count_if(v.begin(), v.end(), [](double x) { return std::abs(x - 1.0) < 2.0; });
        CHECK(static_cast<double>(within) / static_cast<double>(v.size()) == Approx(0.6827).margin(0.01));
    }
    SECTION("Bernoulli(0.3)") {
        B::seed(4);
        const auto v = draw(Dist::Bernoulli(0.3));
        CHECK(std::all_of(v.begin(), v.end(), [](double x) { return x == 0.0 || x == 1.0; }));
        CHECK(stats_of(v).mean == Approx(0.3).margin(0.01));
    }
    SECTION("an empty uniform range is an error") {
        CHECK_THROWS_AS(T2::random(Shape{2, 2}, Dist::Uniform(1, 0)), ember::ArgumentError);
    }
}

}  // namespace test_float_ops
