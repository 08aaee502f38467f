// Numeric operations (Burn's "Numeric Operations" table: Float and Int tensors), checked
// against PyTorch fixtures written by tests/fixtures/gen_tensor_ops.py and closed-form values.
#include <limits>
#include <type_traits>
#include <vector>

#include "op_test.hpp"

namespace test_numeric_ops {

namespace {
/// A [rows, cols]-shaped TensorData of doubles (closed-form expectations).
TensorData values(std::vector<double> v, Shape s) { return TensorData(v, s); }

template <typename T>
constexpr bool kIsScalar = std::is_arithmetic_v<std::remove_cvref_t<T>>;

// Binary ops spelled as operators, and as methods (`add`, `add_scalar`; a scalar on the left
// has no method form and uses the operator).
#define OPERATOR_FORM(sym) [](auto x, auto y) { return x sym y; }
#define METHOD_FORM(name, sym)                                                                 \
    [](auto x, auto y) {                                                                       \
        if constexpr (kIsScalar<decltype(x)>) return x sym y;                                  \
        else if constexpr (kIsScalar<decltype(y)>) return x.name##_scalar(ember::Scalar(y));   \
        else return x.name(y);                                                                 \
    }
// max_pair / min_pair have no operator; with a scalar on the left they commute.
#define PAIR_FORM(name)                                                                        \
    [](auto x, auto y) {                                                                       \
        if constexpr (kIsScalar<decltype(x)>) return y.name##_scalar(ember::Scalar(x));        \
        else if constexpr (kIsScalar<decltype(y)>) return x.name##_scalar(ember::Scalar(y));   \
        else return x.name(y);                                                                 \
    }

/// Runs a binary op over the shapes of a `binary_case` fixture (see gen_tensor_ops.py):
/// same shapes, broadcasting, scalars on both sides, transposed and strided views, size-0 and
/// size-1 dims.
template <typename B, typename K, typename Op>
void check_binary(const char* name, Op op) {
    auto f = fixture(name);
    auto a = f.tensor<B, 2, K>(0), b = f.tensor<B, 2, K>(1);
    auto c = f.tensor<B, 2, K>(2), d = f.tensor<B, 2, K>(3);
    auto e = f.tensor<B, 3, K>(4);
    auto v = f.tensor<B, 1, K>(5);
    auto g = f.tensor<B, 2, K>(6);
    auto h = f.tensor<B, 3, K>(7), k = f.tensor<B, 3, K>(8);
    auto z = f.tensor<B, 2, K>(9), s = f.tensor<B, 2, K>(10);
    const double sp = f.param("scalar");
    auto scalar = [&] {
        if constexpr (std::is_same_v<K, Float>) return sp;
        else return static_cast<std::int64_t>(sp);
    }();

    SECTION("same shape [3, 4]") { EXPECT_VALUES(K, f.output(0), op(a, b)); }
    SECTION("broadcast [3, 1] with [1, 4]") { EXPECT_VALUES(K, f.output(1), op(c, d)); }
    SECTION("broadcast [2, 3, 4] with [4]") {
        EXPECT_VALUES(K, f.output(2), op(e, v.template reshape<3>({1, 1, 4})));
    }
    SECTION("tensor with a scalar on the right") { EXPECT_VALUES(K, f.output(3), op(a, scalar)); }
    SECTION("scalar on the left") { EXPECT_VALUES(K, f.output(4), op(scalar, b)); }
    SECTION("transposed lhs") { EXPECT_VALUES(K, f.output(5), op(a.transpose(), g)); }
    SECTION("strided slices") {
        EXPECT_VALUES(K, f.output(6),
                      op(a.slice({Slice{0}, Slice{0, kEnd, 2}}), b.slice({Slice{0}, Slice{1, kEnd, 2}})));
    }
    SECTION("broadcast both ways [2, 1, 4] with [1, 3, 1]") { EXPECT_VALUES(K, f.output(7), op(h, k)); }
    SECTION("size-0 dim broadcast with [1, 4]") { EXPECT_VALUES(K, f.output(8), op(z, d)); }
    SECTION("[1, 1] on the left") { EXPECT_VALUES(K, f.output(9), op(s, b)); }
    SECTION("[1, 1] on the right") { EXPECT_VALUES(K, f.output(10), op(a, s)); }
    SECTION("moved-in operands give the same values") {
        auto a2 = a + a * 0;  // a fresh, uniquely held buffer the op may reuse
        EXPECT_VALUES(K, f.output(0), op(std::move(a2), b));
    }
    SECTION("shapes that do not broadcast") { CHECK_THROWS_AS(op(a, g), ember::ShapeError); }
}
}  // namespace

TEMPLATE_LIST_TEST_CASE("add", "[numeric][add]", ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    SECTION("float, operators") { check_binary<B, Float>("num_add", OPERATOR_FORM(+)); }
    SECTION("float, methods") { check_binary<B, Float>("num_add", METHOD_FORM(add, +)); }
    SECTION("int, operators") { check_binary<B, Int>("num_int_add", OPERATOR_FORM(+)); }
    SECTION("int, methods") { check_binary<B, Int>("num_int_add", METHOD_FORM(add, +)); }
}

TEMPLATE_LIST_TEST_CASE("sub", "[numeric][sub]", ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    SECTION("float, operators") { check_binary<B, Float>("num_sub", OPERATOR_FORM(-)); }
    SECTION("float, methods") { check_binary<B, Float>("num_sub", METHOD_FORM(sub, -)); }
    SECTION("int, operators") { check_binary<B, Int>("num_int_sub", OPERATOR_FORM(-)); }
    SECTION("int, methods") { check_binary<B, Int>("num_int_sub", METHOD_FORM(sub, -)); }
}

TEMPLATE_LIST_TEST_CASE("mul", "[numeric][mul]", ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    SECTION("float, operators") { check_binary<B, Float>("num_mul", OPERATOR_FORM(*)); }
    SECTION("float, methods") { check_binary<B, Float>("num_mul", METHOD_FORM(mul, *)); }
    SECTION("int, operators") { check_binary<B, Int>("num_int_mul", OPERATOR_FORM(*)); }
    SECTION("int, methods") { check_binary<B, Int>("num_int_mul", METHOD_FORM(mul, *)); }
}

TEMPLATE_LIST_TEST_CASE("div", "[numeric][div]", ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    SECTION("float, operators") { check_binary<B, Float>("num_div", OPERATOR_FORM(/)); }
    SECTION("float, methods") { check_binary<B, Float>("num_div", METHOD_FORM(div, /)); }
    SECTION("int (floor division), operators") { check_binary<B, Int>("num_int_div", OPERATOR_FORM(/)); }
    SECTION("int (floor division), methods") { check_binary<B, Int>("num_int_div", METHOD_FORM(div, /)); }
    SECTION("float by zero, NaN and infinities") {
        auto f = fixture("num_div_special");
        auto x = f.tensor<B, 1>(0), y = f.tensor<B, 1>(1);
        EXPECT_CLOSE(f.output(0), x / y);
        EXPECT_CLOSE(f.output(1), 1 / x);
        EXPECT_CLOSE(f.output(1), 1.0 / x);
    }
}

TEMPLATE_LIST_TEST_CASE("rem", "[numeric][rem]", ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    SECTION("float, operators") { check_binary<B, Float>("num_rem", OPERATOR_FORM(%)); }
    SECTION("float, methods") { check_binary<B, Float>("num_rem", METHOD_FORM(rem, %)); }
    SECTION("int, operators") { check_binary<B, Int>("num_int_rem", OPERATOR_FORM(%)); }
    SECTION("int, methods") { check_binary<B, Int>("num_int_rem", METHOD_FORM(rem, %)); }
    SECTION("float: the result takes the divisor's sign") {
        auto f = fixture("num_rem_sign");
        auto x = f.tensor<B, 1>(0), y = f.tensor<B, 1>(1);
        EXPECT_CLOSE(f.output(0), x % y);
        EXPECT_CLOSE(f.output(1), x % 2.0);
        EXPECT_CLOSE(f.output(2), x.rem_scalar(-2.0));
        EXPECT_CLOSE(f.output(3), 7.0 % y);
    }
}

TEMPLATE_LIST_TEST_CASE("max_pair / min_pair", "[numeric][max_pair][min_pair]",
                        ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    SECTION("float max_pair") { check_binary<B, Float>("num_max_pair", PAIR_FORM(max_pair)); }
    SECTION("float min_pair") { check_binary<B, Float>("num_min_pair", PAIR_FORM(min_pair)); }
    SECTION("int max_pair") { check_binary<B, Int>("num_int_max_pair", PAIR_FORM(max_pair)); }
    SECTION("int min_pair") { check_binary<B, Int>("num_int_min_pair", PAIR_FORM(min_pair)); }
    SECTION("NaN propagates") {
        auto f = fixture("num_pair_nan");
        auto x = f.tensor<B, 1>(0), y = f.tensor<B, 1>(1);
        EXPECT_CLOSE(f.output(0), x.max_pair(y));
        EXPECT_CLOSE(f.output(1), x.min_pair(y));
    }
}

TEMPLATE_TEST_CASE("arithmetic on the f64 backend", "[numeric][f64]", ember::CpuF64) {
    using B = TestType;  // f32 inputs, expected values computed by torch in float64
    SECTION("add") { check_binary<B, Float>("num_add", OPERATOR_FORM(+)); }
    SECTION("sub") { check_binary<B, Float>("num_sub", OPERATOR_FORM(-)); }
    SECTION("mul") { check_binary<B, Float>("num_mul", OPERATOR_FORM(*)); }
    SECTION("div") { check_binary<B, Float>("num_div", OPERATOR_FORM(/)); }
    SECTION("rem") { check_binary<B, Float>("num_rem", OPERATOR_FORM(%)); }
    SECTION("reductions") {
        auto f = fixture("num_reduce");
        auto x = f.tensor<B, 2>(0);
        CHECK(x.dtype() == ember::DType::F64);
        EXPECT_CLOSE(f.output(0), x.sum());
        EXPECT_CLOSE(f.output(5), x.mean_dim(0));
        EXPECT_CLOSE(f.output(9), x.prod_dim(1));
        EXPECT_CLOSE(f.output(12), x.max_dim(1));
    }
}

// ---------------------------------------------------------------------------------------------
TEMPLATE_LIST_TEST_CASE("abs / neg / sign", "[numeric][abs][neg][sign]",
                        ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    SECTION("float, with zeros, NaN and infinities") {
        auto f = fixture("num_abs_neg_sign");
        auto x = f.tensor<B, 2>(0);
        SECTION("abs") { EXPECT_CLOSE(f.output(0), x.abs()); }
        SECTION("neg") { EXPECT_CLOSE(f.output(1), x.neg()); }
        SECTION("unary minus") { EXPECT_CLOSE(f.output(1), -x); }
        SECTION("sign (NaN gives 0, as torch)") { EXPECT_CLOSE(f.output(2), x.sign()); }
        SECTION("on a transposed input") { EXPECT_CLOSE(f.output(0), x.transpose().abs().transpose()); }
    }
    SECTION("int") {
        auto f = fixture("num_int_abs_neg_sign");
        auto x = f.tensor<B, 2, Int>(0);
        EXPECT_SAME(f.output(0), x.abs());
        EXPECT_SAME(f.output(1), -x);
        EXPECT_SAME(f.output(1), x.neg());
        EXPECT_SAME(f.output(2), x.sign());
    }
}

TEMPLATE_LIST_TEST_CASE("eye / full / ones / zeros / *_like", "[numeric][creation]",
                        ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    using T2 = ember::Tensor<B, 2>;
    using I2 = ember::Tensor<B, 2, Int>;
    const ember::Device<B> device{};
    SECTION("eye") {
        auto f = fixture("num_eye");
        EXPECT_CLOSE(f.output(0), T2::eye(3, device));
        EXPECT_CLOSE(f.output(1), T2::eye(1));
        EXPECT_SAME(f.output(2), I2::eye(4, device));
        CHECK(T2::eye(0).shape() == Shape{0, 0});
    }
    SECTION("full, ones, zeros") {
        auto f = fixture("num_full");
        EXPECT_CLOSE(f.output(0), T2::full(Shape{2, 3}, 2.5, device));
        EXPECT_SAME(f.output(1), I2::full(Shape{2, 3}, -7, device));
        EXPECT_CLOSE(f.output(2), T2::ones(Shape{3, 1}, device));
        EXPECT_SAME(f.output(3), I2::zeros(Shape{1, 2}, device));
        EXPECT_CLOSE(values({}, Shape{0, 4}), T2::zeros(Shape{0, 4}));
        CHECK_THROWS_AS(T2::zeros(Shape{2, 3, 4}), ember::ShapeError);
    }
    SECTION("full_like, ones_like, zeros_like keep the shape") {
        auto x = fixture("num_mask").tensor<B, 2>(0).transpose();  // [4, 3], non-contiguous
        EXPECT_CLOSE(values(std::vector<double>(12, -1.25), Shape{4, 3}), x.full_like(-1.25));
        EXPECT_CLOSE(values(std::vector<double>(12, 1.0), Shape{4, 3}), x.ones_like());
        EXPECT_CLOSE(values(std::vector<double>(12, 0.0), Shape{4, 3}), x.zeros_like());
        auto i = I2::ones(Shape{1, 2});
        EXPECT_SAME(values({9, 9}, Shape{1, 2}).convert(ember::DType::I64), i.full_like(9));
        EXPECT_SAME(values({0, 0}, Shape{1, 2}).convert(ember::DType::I64), i.zeros_like());
    }
}

// ---------------------------------------------------------------------------------------------
TEMPLATE_LIST_TEST_CASE("is_close / all_close", "[numeric][is_close][all_close]",
                        ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    SECTION("is_close") {
        auto f = fixture("num_is_close");
        auto a = f.tensor<B, 2>(0), b = f.tensor<B, 2>(1);
        SECTION("default tolerances (NaN never close, equal infinities close)") {
            EXPECT_SAME(f.output(0), a.is_close(b));
        }
        SECTION("absolute tolerance only") { EXPECT_SAME(f.output(1), a.is_close(b, 1e-2, 0.0)); }
        SECTION("relative tolerance only") { EXPECT_SAME(f.output(2), a.is_close(b, 0.0, 1e-3)); }
        SECTION("all_close of a part") {
            auto a2 = a.slice({Slice{0}, Slice{0, 2}}), b2 = b.slice({Slice{0}, Slice{0, 2}});
            CHECK(a2.all_close(b2, 0.0, 0.1) == (f.output(3).value(0) != 0));
        }
    }
    SECTION("all_close") {
        auto f = fixture("num_all_close");
        auto a = f.tensor<B, 2>(0), b = f.tensor<B, 2>(1);
        CHECK(a.all_close(b) == (f.output(0).value(0) != 0));
        CHECK(a.all_close(b + 1.0) == (f.output(1).value(0) != 0));
        CHECK(a.all_close(b + 1.0, 2.0) == (f.output(2).value(0) != 0));
        CHECK(a.all_close(a));
    }
    SECTION("int") {
        auto x = ember::Tensor<B, 1, Int>::from_ints({1, 2, 100});
        auto y = ember::Tensor<B, 1, Int>::from_ints({1, 3, 101});
        EXPECT_SAME(TensorData({true, false, true}, Shape{3}), x.is_close(y, 0.0, 0.01));
        CHECK_FALSE(x.all_close(y));
        CHECK(x.all_close(y, 1.0));
    }
}

TEMPLATE_LIST_TEST_CASE("argmax / argmin", "[numeric][argmax][argmin]",
                        ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    SECTION("ties pick the first index") {
        auto f = fixture("num_argmax_argmin");
        auto x = f.tensor<B, 2>(0);
        SECTION("argmax(0)") { EXPECT_SAME(f.output(0), x.argmax(0)); }
        SECTION("argmax(1)") { EXPECT_SAME(f.output(1), x.argmax(1)); }
        SECTION("argmin(0)") { EXPECT_SAME(f.output(2), x.argmin(0)); }
        SECTION("argmin(1)") { EXPECT_SAME(f.output(3), x.argmin(1)); }
        SECTION("argmax(-1)") { EXPECT_SAME(f.output(4), x.argmax(-1)); }
    }
    SECTION("NaN wins") {
        auto f = fixture("num_argmax_nan");
        auto x = f.tensor<B, 2>(0);
        EXPECT_SAME(f.output(0), x.argmax(1));
        EXPECT_SAME(f.output(1), x.argmin(1));
        EXPECT_SAME(f.output(2), x.argmax(0));
    }
    SECTION("a permuted input") {
        auto f = fixture("num_argmax_permuted");
        auto x = f.tensor<B, 3>(0).permute({2, 0, 1});
        EXPECT_SAME(f.output(0), x.argmax(1));
        EXPECT_SAME(f.output(1), x.argmin(2));
    }
    SECTION("int") {
        auto f = fixture("num_int_argmax_argmin");
        auto x = f.tensor<B, 2, Int>(0);
        EXPECT_SAME(f.output(0), x.argmax(1));
        EXPECT_SAME(f.output(1), x.argmin(0));
    }
}

TEMPLATE_LIST_TEST_CASE("sort / argsort", "[numeric][sort][argsort]",
                        ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    SECTION("float, stable with ties") {
        auto f = fixture("num_sort");
        auto x = f.tensor<B, 2>(0);
        SECTION("ascending along dim 1") {
            EXPECT_CLOSE(f.output(0), x.sort(1));
            EXPECT_SAME(f.output(1), x.argsort(1));
            auto [v, i] = x.sort_with_indices(1);
            EXPECT_CLOSE(f.output(0), v);
            EXPECT_SAME(f.output(1), i);
        }
        SECTION("descending along dim 1") {
            EXPECT_CLOSE(f.output(2), x.sort_descending(1));
            EXPECT_SAME(f.output(3), x.argsort_descending(1));
            auto [v, i] = x.sort_descending_with_indices(1);
            EXPECT_CLOSE(f.output(2), v);
            EXPECT_SAME(f.output(3), i);
        }
        SECTION("ascending along dim 0") {
            auto [v, i] = x.sort_with_indices(0);
            EXPECT_CLOSE(f.output(4), v);
            EXPECT_SAME(f.output(5), i);
        }
        SECTION("descending along dim 0") {
            auto [v, i] = x.sort_descending_with_indices(0);
            EXPECT_CLOSE(f.output(6), v);
            EXPECT_SAME(f.output(7), i);
        }
        SECTION("negative dim") { EXPECT_SAME(f.output(1), x.argsort(-1)); }
    }
    SECTION("NaN sorts as the largest value") {
        auto f = fixture("num_sort_nan");
        auto x = f.tensor<B, 2>(0);
        auto [v, i] = x.sort_with_indices(1);
        EXPECT_CLOSE(f.output(0), v);
        EXPECT_SAME(f.output(1), i);
        auto [vd, id] = x.sort_descending_with_indices(1);
        EXPECT_CLOSE(f.output(2), vd);
        EXPECT_SAME(f.output(3), id);
    }
    SECTION("a transposed input") {
        auto f = fixture("num_sort_transposed");
        auto [v, i] = f.tensor<B, 2>(0).transpose().sort_with_indices(1);
        EXPECT_CLOSE(f.output(0), v);
        EXPECT_SAME(f.output(1), i);
    }
    SECTION("int, stable with ties") {
        auto f = fixture("num_int_sort");
        auto x = f.tensor<B, 2, Int>(0);
        EXPECT_SAME(f.output(0), x.sort(1));
        EXPECT_SAME(f.output(1), x.argsort(1));
        EXPECT_SAME(f.output(2), x.sort_descending(1));
        EXPECT_SAME(f.output(3), x.argsort_descending(1));
    }
    SECTION("size-0 dim") {
        auto f = fixture("num_sort_empty");
        auto x = f.tensor<B, 2>(0);
        EXPECT_CLOSE(f.output(0), x.sort(1));
        EXPECT_SAME(f.output(1), x.argsort(1));
    }
}

TEMPLATE_LIST_TEST_CASE("topk", "[numeric][topk]", ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    SECTION("float") {
        auto f = fixture("num_topk");
        auto x = f.tensor<B, 2>(0);
        SECTION("k = 2 along dim 1") {
            EXPECT_CLOSE(f.output(0), x.topk(2, 1));
            auto [v, i] = x.topk_with_indices(2, 1);
            EXPECT_CLOSE(f.output(0), v);
            EXPECT_SAME(f.output(1), i);
        }
        SECTION("k = 1 along dim 0") {
            auto [v, i] = x.topk_with_indices(1, 0);
            EXPECT_CLOSE(f.output(2), v);
            EXPECT_SAME(f.output(3), i);
        }
        SECTION("k = the whole dim") {
            auto [v, i] = x.topk_with_indices(5, -1);
            EXPECT_CLOSE(f.output(4), v);
            EXPECT_SAME(f.output(5), i);
        }
        SECTION("k larger than the dim") { CHECK_THROWS_AS(x.topk(6, 1), ember::Error); }
    }
    SECTION("int") {
        auto f = fixture("num_int_topk");
        auto [v, i] = f.tensor<B, 2, Int>(0).topk_with_indices(3, 1);
        EXPECT_SAME(f.output(0), v);
        EXPECT_SAME(f.output(1), i);
    }
}

TEMPLATE_LIST_TEST_CASE("clamp", "[numeric][clamp]", ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    SECTION("float (NaN stays NaN)") {
        auto f = fixture("num_clamp");
        auto x = f.tensor<B, 2>(0);
        EXPECT_CLOSE(f.output(0), x.clamp(-0.5, 0.5));
        EXPECT_CLOSE(f.output(1), x.clamp_min(0.0));
        EXPECT_CLOSE(f.output(2), x.clamp_max(0.2));
        EXPECT_CLOSE(f.output(3), x.clamp(0.1, 0.1));
    }
    SECTION("int") {
        auto f = fixture("num_int_clamp");
        auto x = f.tensor<B, 2, Int>(0);
        EXPECT_SAME(f.output(0), x.clamp(-2, 3));
        EXPECT_SAME(f.output(1), x.clamp_min(0));
        EXPECT_SAME(f.output(2), x.clamp_max(1));
    }
}

TEMPLATE_LIST_TEST_CASE("is_nan / contains_nan", "[numeric][is_nan][contains_nan]",
                        ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    auto f = fixture("num_is_nan");
    auto x = f.tensor<B, 2>(0), y = f.tensor<B, 2>(1);
    EXPECT_SAME(f.output(0), x.is_nan());
    EXPECT_SAME(f.output(1), x.contains_nan());
    EXPECT_SAME(f.output(2), y.contains_nan());
    CHECK(x.contains_nan().into_scalar());
    CHECK_FALSE(y.contains_nan().into_scalar());
    EXPECT_SAME(f.output(0).convert(ember::DType::Bool).reshape(Shape{3, 2}),
                x.transpose().is_nan().transpose().template reshape<2>({3, 2}));
    auto i = ember::Tensor<B, 1, Int>::from_ints({1, 0, -3});
    EXPECT_SAME(TensorData({false, false, false}, Shape{3}), i.is_nan());
    CHECK_FALSE(i.contains_nan().into_scalar());
}

TEMPLATE_LIST_TEST_CASE("comparisons", "[numeric][compare]",
                        ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    SECTION("float, broadcast [3, 4] with [1, 4], NaN compares false") {
        auto f = fixture("num_compare");
        auto a = f.tensor<B, 2>(0), b = f.tensor<B, 2>(1);
        SECTION("greater") { EXPECT_SAME(f.output(0), a.greater(b)); }
        SECTION("greater_equal") { EXPECT_SAME(f.output(1), a.greater_equal(b)); }
        SECTION("lower") { EXPECT_SAME(f.output(2), a.lower(b)); }
        SECTION("lower_equal") { EXPECT_SAME(f.output(3), a.lower_equal(b)); }
        SECTION("greater_elem") { EXPECT_SAME(f.output(4), a.greater_elem(0.25)); }
        SECTION("greater_equal_elem") { EXPECT_SAME(f.output(5), a.greater_equal_elem(0.25)); }
        SECTION("lower_elem") { EXPECT_SAME(f.output(6), a.lower_elem(0.25)); }
        SECTION("lower_equal_elem") { EXPECT_SAME(f.output(7), a.lower_equal_elem(0.25)); }
        SECTION("equal_elem") { EXPECT_SAME(f.output(8), a.equal_elem(0.5)); }
        SECTION("not_equal_elem") { EXPECT_SAME(f.output(9), a.not_equal_elem(0.5)); }
        SECTION("transposed operands") { EXPECT_SAME(f.output(10), a.transpose().greater(b.transpose())); }
    }
    SECTION("int") {
        auto f = fixture("num_int_compare");
        auto a = f.tensor<B, 2, Int>(0), b = f.tensor<B, 2, Int>(1);
        EXPECT_SAME(f.output(0), a.greater(b));
        EXPECT_SAME(f.output(1), a.greater_equal(b));
        EXPECT_SAME(f.output(2), a.lower(b));
        EXPECT_SAME(f.output(3), a.lower_equal(b));
        EXPECT_SAME(f.output(4), a.greater_elem(1));
        EXPECT_SAME(f.output(5), a.greater_equal_elem(2));
        EXPECT_SAME(f.output(6), a.lower_elem(0));
        EXPECT_SAME(f.output(7), a.lower_equal_elem(1));
        EXPECT_SAME(f.output(8), a.equal_elem(2));
        EXPECT_SAME(f.output(9), a.not_equal_elem(2));
    }
}

// ---------------------------------------------------------------------------------------------
TEMPLATE_LIST_TEST_CASE("gather / scatter", "[numeric][gather][scatter]",
                        ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    SECTION("gather") {
        auto f = fixture("num_gather");
        auto x = f.tensor<B, 2>(0);
        auto x3 = f.tensor<B, 3>(3);
        SECTION("along dim 1") { EXPECT_CLOSE(f.output(0), x.gather(1, f.tensor<B, 2, Int>(1))); }
        SECTION("along dim 0") { EXPECT_CLOSE(f.output(1), x.gather(0, f.tensor<B, 2, Int>(2))); }
        SECTION("rank 3, last dim") { EXPECT_CLOSE(f.output(2), x3.gather(2, f.tensor<B, 3, Int>(4))); }
        SECTION("rank 3, dim -1") { EXPECT_CLOSE(f.output(3), x3.gather(-1, f.tensor<B, 3, Int>(4))); }
        SECTION("transposed input and index") {
            EXPECT_CLOSE(f.output(4), x.transpose().gather(1, f.tensor<B, 2, Int>(2).transpose()));
        }
        SECTION("more indices than the dim holds") {
            EXPECT_CLOSE(f.output(5), x.gather(1, f.tensor<B, 2, Int>(5)));
        }
        SECTION("an index out of range") {
            auto bad = ember::Tensor<B, 2, Int>::full(Shape{3, 1}, 4);
            CHECK_THROWS_AS(x.gather(1, bad), ember::IndexError);
        }
    }
    SECTION("gather, int") {
        auto f = fixture("num_int_gather");
        auto x = f.tensor<B, 2, Int>(0);
        auto i = f.tensor<B, 2, Int>(1);
        EXPECT_SAME(f.output(0), x.gather(1, i));
        EXPECT_SAME(f.output(1), x.gather(0, i % 2));
    }
    SECTION("scatter adds, duplicates accumulate") {
        auto f = fixture("num_scatter");
        auto x = f.tensor<B, 2>(0);
        EXPECT_CLOSE(f.output(0), x.scatter(1, f.tensor<B, 2, Int>(1), f.tensor<B, 2>(2)));
        EXPECT_CLOSE(f.output(1), x.scatter(0, f.tensor<B, 2, Int>(3), f.tensor<B, 2>(4)));
        EXPECT_CLOSE(f.input(0), x);  // the input is unchanged
    }
    SECTION("scatter, int") {
        auto f = fixture("num_int_scatter");
        EXPECT_SAME(f.output(0), f.tensor<B, 2, Int>(0).scatter(1, f.tensor<B, 2, Int>(1), f.tensor<B, 2, Int>(2)));
    }
}

TEMPLATE_LIST_TEST_CASE("select / select_assign", "[numeric][select][select_assign]",
                        ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    SECTION("select") {
        auto f = fixture("num_select");
        auto x = f.tensor<B, 2>(0);
        auto i0 = f.tensor<B, 1, Int>(1), i1 = f.tensor<B, 1, Int>(2), ie = f.tensor<B, 1, Int>(3);
        SECTION("rows, repeated") { EXPECT_CLOSE(f.output(0), x.select(0, i0)); }
        SECTION("columns, repeated") { EXPECT_CLOSE(f.output(1), x.select(1, i1)); }
        SECTION("an empty index") { EXPECT_CLOSE(f.output(2), x.select(0, ie)); }
        SECTION("a transposed input") { EXPECT_CLOSE(f.output(3), x.transpose().select(1, i0)); }
        SECTION("an index out of range") {
            CHECK_THROWS_AS(x.select(0, ember::Tensor<B, 1, Int>::from_ints({4})), ember::IndexError);
        }
    }
    SECTION("select, int and bool") {
        auto f = fixture("num_select_int_bool");
        auto i = f.tensor<B, 1, Int>(2);
        EXPECT_SAME(f.output(0), f.tensor<B, 2, Int>(0).select(0, i));
        EXPECT_SAME(f.output(1), f.tensor<B, 2, Bool>(1).select(0, i));
    }
    SECTION("select_assign adds, duplicates accumulate") {
        auto f = fixture("num_select_assign");
        auto x = f.tensor<B, 2>(0);
        EXPECT_CLOSE(f.output(0), x.select_assign(0, f.tensor<B, 1, Int>(1), f.tensor<B, 2>(2)));
        EXPECT_CLOSE(f.output(1), x.select_assign(1, f.tensor<B, 1, Int>(3), f.tensor<B, 2>(4)));
        EXPECT_CLOSE(f.input(0), x);
    }
    SECTION("select_assign, int") {
        auto f = fixture("num_int_select_assign");
        EXPECT_SAME(f.output(0), f.tensor<B, 2, Int>(0).select_assign(0, f.tensor<B, 1, Int>(1), f.tensor<B, 2, Int>(2)));
    }
}

TEMPLATE_LIST_TEST_CASE("mask_fill / mask_where", "[numeric][mask_fill][mask_where]",
                        ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    SECTION("float") {
        auto f = fixture("num_mask");
        auto x = f.tensor<B, 2>(0);
        auto m = f.tensor<B, 2, Bool>(1), mb = f.tensor<B, 2, Bool>(2);
        auto v = f.tensor<B, 2>(3), vb = f.tensor<B, 2>(4);
        SECTION("mask_fill") { EXPECT_CLOSE(f.output(0), x.mask_fill(m, -1.5)); }
        SECTION("mask_fill with a broadcast mask") { EXPECT_CLOSE(f.output(1), x.mask_fill(mb, 7.0)); }
        SECTION("mask_where") { EXPECT_CLOSE(f.output(2), x.mask_where(m, v)); }
        SECTION("mask_where with a broadcast mask") { EXPECT_CLOSE(f.output(3), x.mask_where(mb, v)); }
        SECTION("mask_where with broadcast values") { EXPECT_CLOSE(f.output(4), x.mask_where(m, vb)); }
        SECTION("transposed tensor and mask") {
            EXPECT_CLOSE(f.output(5), x.transpose().mask_fill(m.transpose(), 0.0));
        }
    }
    SECTION("int") {
        auto f = fixture("num_int_mask");
        auto x = f.tensor<B, 2, Int>(0);
        auto m = f.tensor<B, 2, Bool>(1);
        EXPECT_SAME(f.output(0), x.mask_fill(m, 7));
        EXPECT_SAME(f.output(1), x.mask_where(m, f.tensor<B, 2, Int>(2)));
    }
    SECTION("bool mask_where") {
        auto f = fixture("bool_mask_where");
        EXPECT_SAME(f.output(0), f.tensor<B, 2, Bool>(0).mask_where(f.tensor<B, 2, Bool>(1), f.tensor<B, 2, Bool>(2)));
    }
}

// ---------------------------------------------------------------------------------------------
TEMPLATE_LIST_TEST_CASE("reductions", "[numeric][sum][mean][prod][max][min]",
                        ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    SECTION("float [3, 4]") {
        auto f = fixture("num_reduce");
        auto x = f.tensor<B, 2>(0);
        SECTION("sum") {
            EXPECT_CLOSE(f.output(0), x.sum());
            EXPECT_CLOSE(f.output(1), x.sum_dim(0));
            EXPECT_CLOSE(f.output(2), x.sum_dim(1));
            EXPECT_CLOSE(f.output(3), x.sum_dim(-1));
        }
        SECTION("mean") {
            EXPECT_CLOSE(f.output(4), x.mean());
            EXPECT_CLOSE(f.output(5), x.mean_dim(0));
            EXPECT_CLOSE(f.output(6), x.mean_dim(1));
        }
        SECTION("prod") {
            EXPECT_CLOSE(f.output(7), x.prod());
            EXPECT_CLOSE(f.output(8), x.prod_dim(0));
            EXPECT_CLOSE(f.output(9), x.prod_dim(1));
        }
        SECTION("max") {
            EXPECT_CLOSE(f.output(10), x.max());
            EXPECT_CLOSE(f.output(11), x.max_dim(0));
            EXPECT_CLOSE(f.output(12), x.max_dim(1));
        }
        SECTION("min") {
            EXPECT_CLOSE(f.output(13), x.min());
            EXPECT_CLOSE(f.output(14), x.min_dim(0));
            EXPECT_CLOSE(f.output(15), x.min_dim(1));
        }
        SECTION("whole-tensor reductions have shape [1]") {
            CHECK(x.sum().dims() == std::array<std::size_t, 1>{1});
            CHECK(x.max().dims() == std::array<std::size_t, 1>{1});
            CHECK(x.mean().dims() == std::array<std::size_t, 1>{1});
        }
    }
    SECTION("max_dim_with_indices / min_dim_with_indices") {
        auto f = fixture("num_reduce_with_indices");
        auto x = f.tensor<B, 2>(0);
        auto [mx, imx] = x.max_dim_with_indices(1);
        EXPECT_CLOSE(f.output(0), mx);
        EXPECT_SAME(f.output(1), imx);
        auto [mn, imn] = x.min_dim_with_indices(0);
        EXPECT_CLOSE(f.output(2), mn);
        EXPECT_SAME(f.output(3), imn);
    }
    SECTION("NaN propagates through max, min and sum") {
        auto f = fixture("num_reduce_nan");
        auto x = f.tensor<B, 2>(0);
        EXPECT_CLOSE(f.output(0), x.max());
        EXPECT_CLOSE(f.output(1), x.min());
        EXPECT_CLOSE(f.output(2), x.max_dim(1));
        EXPECT_CLOSE(f.output(3), x.min_dim(0));
        EXPECT_CLOSE(f.output(4), x.sum());
        EXPECT_CLOSE(f.output(5), x.sum_dim(0));
    }
    SECTION("rank 3, permuted and strided inputs") {
        auto f = fixture("num_reduce_3d");
        auto x = f.tensor<B, 3>(0);
        EXPECT_CLOSE(f.output(0), x.sum_dim(1));
        EXPECT_CLOSE(f.output(1), x.mean_dim(2));
        EXPECT_CLOSE(f.output(2), x.prod_dim(0));
        EXPECT_CLOSE(f.output(3), x.max_dim(1));
        EXPECT_CLOSE(f.output(4), x.permute({2, 0, 1}).sum_dim(1));
        EXPECT_CLOSE(f.output(5), x.permute({2, 0, 1}).max_dim(2));
        EXPECT_CLOSE(f.output(6), x.slice({Slice{0}, Slice{1}, Slice{0, kEnd, 2}}).sum());
    }
    SECTION("size-0 tensors: sum 0, prod 1, mean NaN") {
        auto f = fixture("num_reduce_empty");
        auto x = f.tensor<B, 2>(0);
        EXPECT_CLOSE(f.output(0), x.sum());
        EXPECT_CLOSE(f.output(1), x.sum_dim(0));
        EXPECT_CLOSE(f.output(2), x.sum_dim(1));
        EXPECT_CLOSE(f.output(3), x.prod());
        EXPECT_CLOSE(f.output(4), x.prod_dim(0));
        EXPECT_CLOSE(f.output(5), x.mean());
    }
    SECTION("int") {
        auto f = fixture("num_int_reduce");
        auto x = f.tensor<B, 2, Int>(0);
        EXPECT_SAME(f.output(0), x.sum());
        EXPECT_SAME(f.output(1), x.sum_dim(0));
        EXPECT_SAME(f.output(2), x.sum_dim(1));
        EXPECT_SAME(f.output(3), x.prod());
        EXPECT_SAME(f.output(4), x.prod_dim(1));
        EXPECT_SAME(f.output(5), x.max());
        EXPECT_SAME(f.output(6), x.max_dim(0));
        EXPECT_SAME(f.output(7), x.min());
        EXPECT_SAME(f.output(8), x.min_dim(1));
        CHECK(x.sum().into_scalar() == 3);
        // Burn's int_mean: the sum divided by the count, rounded toward zero, an Int result.
        const auto n = static_cast<std::int64_t>(x.shape().num_elements());
        CHECK(x.mean().into_scalar() == 3 / n);
    }
    SECTION("a dim out of range") {
        auto x = fixture("num_reduce").tensor<B, 2>(0);
        CHECK_THROWS_AS(x.sum_dim(2), ember::DimError);
        CHECK_THROWS_AS(x.argmax(-3), ember::DimError);
    }
}

TEMPLATE_LIST_TEST_CASE("size-1 dims", "[numeric][size1]", ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    auto f = fixture("num_size_one");
    auto c = f.tensor<B, 2>(0);  // [3, 1]
    auto r = f.tensor<B, 2>(1);  // [1, 4]
    SECTION("reducing a size-1 dim") {
        EXPECT_CLOSE(f.output(0), c.sum_dim(1));
        EXPECT_SAME(f.output(1), c.argmax(1));
        EXPECT_CLOSE(f.output(3), c.max_dim(1));
        EXPECT_CLOSE(f.output(4), r.sum_dim(0));
        EXPECT_CLOSE(f.output(5), r.max_dim(0));
        EXPECT_CLOSE(f.output(9), c.var_bias(1));
    }
    SECTION("sorting a size-1 dim") {
        EXPECT_CLOSE(f.output(2), c.sort(1));
        EXPECT_CLOSE(f.output(6), r.topk(1, 0));
        EXPECT_SAME(f.output(7), r.argsort(0));
    }
    SECTION("mean of a column") { EXPECT_CLOSE(f.output(8), c.mean_dim(0)); }
}

TEMPLATE_LIST_TEST_CASE("strided and expanded indices", "[numeric][gather][scatter][select]",
                        ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    using I1 = ember::Tensor<B, 1, Int>;
    auto f = fixture("num_strided_index");
    auto x = f.tensor<B, 2>(0);  // [3, 6]
    auto idx = f.tensor<B, 2, Int>(1);  // [1, 2]
    auto v = f.tensor<B, 2>(2);  // [1, 2]
    SECTION("select with a strided index") {
        EXPECT_CLOSE(f.output(0), x.select(1, I1::arange(0, 6).slice({Slice{0, kEnd, 2}})));
    }
    SECTION("gather with an expanded index") {
        EXPECT_CLOSE(f.output(1), x.gather(1, idx.template expand<2>(Shape{3, 2})));
    }
    SECTION("scatter with expanded index and values") {
        EXPECT_CLOSE(f.output(2), x.scatter(1, idx.template expand<2>(Shape{3, 2}), v.template expand<2>(Shape{3, 2})));
    }
    SECTION("select_assign with strided index and values") {
        EXPECT_CLOSE(f.output(3), x.select_assign(1, I1::arange(0, 6).slice({Slice{0, kEnd, 3}}),
                                                   x.slice({Slice{0}, Slice{0, kEnd, 3}})));
    }
}

// ---------------------------------------------------------------------------------------------
TEMPLATE_LIST_TEST_CASE("pad", "[numeric][pad]", ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    auto f = fixture("num_pad");
    auto x = f.tensor<B, 2>(0);
    auto x3 = f.tensor<B, 3>(1);
    SECTION("(left 1, right 2, top 0, bottom 1)") { EXPECT_CLOSE(f.output(0), x.pad({1, 2, 0, 1}, 0.5)); }
    SECTION("no padding") { EXPECT_CLOSE(f.output(1), x.pad({0, 0, 0, 0}, 1.0)); }
    SECTION("rank 3 pads the last two dims") { EXPECT_CLOSE(f.output(2), x3.pad({0, 1, 2, 0}, -1.0)); }
    SECTION("a transposed input") { EXPECT_CLOSE(f.output(3), x.transpose().pad({1, 1, 1, 1}, 0.0)); }
    SECTION("int") {
        auto g = fixture("num_int_pad");
        EXPECT_SAME(g.output(0), g.tensor<B, 2, Int>(0).pad({1, 0, 0, 2}, 7));
    }
}

TEMPLATE_LIST_TEST_CASE("powf / powi", "[numeric][pow]", ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    SECTION("float") {
        auto f = fixture("num_pow");
        auto base = f.tensor<B, 2>(0), expo = f.tensor<B, 2>(1), neg = f.tensor<B, 2>(2);
        auto ie = f.tensor<B, 2, Int>(3);
        SECTION("powf") { EXPECT_CLOSE(f.output(0), base.powf(expo)); }
        SECTION("powf of negative bases (NaN for fractional exponents)") {
            EXPECT_CLOSE(f.output(1), neg.powf(expo));
        }
        SECTION("powf_scalar(0.5)") { EXPECT_CLOSE(f.output(2), base.powf_scalar(0.5)); }
        SECTION("powf_scalar(2)") { EXPECT_CLOSE(f.output(3), neg.powf_scalar(2.0)); }
        SECTION("powf_scalar(-1)") { EXPECT_CLOSE(f.output(4), neg.powf_scalar(-1.0)); }
        SECTION("powi_scalar(3)") { EXPECT_CLOSE(f.output(5), neg.powi_scalar(3)); }
        SECTION("powi_scalar(2)") { EXPECT_CLOSE(f.output(9), neg.powi_scalar(2)); }
        SECTION("powi with an int tensor") { EXPECT_CLOSE(f.output(6), neg.powi(ie)); }
        SECTION("powf_scalar(0.5) of negatives is NaN") { EXPECT_CLOSE(f.output(7), neg.powf_scalar(0.5)); }
        SECTION("broadcast exponent") { EXPECT_CLOSE(f.output(8), base.powf(expo.slice({{0, 1}}))); }
    }
    SECTION("int") {
        auto f = fixture("num_int_pow");
        auto x = f.tensor<B, 2, Int>(0), e = f.tensor<B, 2, Int>(1);
        EXPECT_SAME(f.output(0), x.powi(e));
        EXPECT_SAME(f.output(1), x.powi_scalar(3));
        EXPECT_SAME(f.output(2), x.powi_scalar(0));
        EXPECT_SAME(f.output(3), x.powi_scalar(2));
    }
}

TEMPLATE_LIST_TEST_CASE("tril / triu", "[numeric][tril][triu]",
                        ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    SECTION("float") {
        auto f = fixture("num_tril_triu");
        auto x = f.tensor<B, 2>(0);   // [3, 4]
        auto x3 = f.tensor<B, 3>(1);  // [2, 3, 3]
        SECTION("tril") {
            EXPECT_CLOSE(f.output(0), x.tril());
            EXPECT_CLOSE(f.output(1), x.tril(1));
            EXPECT_CLOSE(f.output(2), x.tril(-1));
            EXPECT_CLOSE(f.output(9), x.tril(-5));
        }
        SECTION("triu") {
            EXPECT_CLOSE(f.output(3), x.triu());
            EXPECT_CLOSE(f.output(4), x.triu(1));
            EXPECT_CLOSE(f.output(5), x.triu(-1));
            EXPECT_CLOSE(f.output(10), x.triu(10));
        }
        SECTION("batched") {
            EXPECT_CLOSE(f.output(6), x3.tril());
            EXPECT_CLOSE(f.output(7), x3.triu(1));
        }
        SECTION("a transposed input") { EXPECT_CLOSE(f.output(8), x.transpose().tril()); }
    }
    SECTION("int") {
        auto f = fixture("num_int_tril_triu");
        auto x = f.tensor<B, 2, Int>(0);
        EXPECT_SAME(f.output(0), x.tril());
        EXPECT_SAME(f.output(1), x.triu(-1));
    }
}

TEMPLATE_LIST_TEST_CASE("bool_", "[numeric][bool_]", ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    auto f = fixture("num_to_bool");
    EXPECT_SAME(f.output(0), f.tensor<B, 2>(0).bool_());
    EXPECT_SAME(f.output(1), f.tensor<B, 2, Int>(1).bool_());
}

#undef OPERATOR_FORM
#undef METHOD_FORM
#undef PAIR_FORM

}  // namespace test_numeric_ops
