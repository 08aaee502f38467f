// Int and Bool operations (Burn's "Int Operations" and "Bool Operations" tables), checked
// against PyTorch fixtures written by tests/fixtures/gen_tensor_ops.py and closed-form values.
#include <algorithm>
#include <limits>
#include <vector>

#include "op_test.hpp"

namespace test_int_bool_ops {

namespace {
TensorData ints(std::vector<std::int64_t> v, Shape s) { return TensorData(v, s); }
}  // namespace

// =============================================================================================
// Int
// =============================================================================================
TEMPLATE_LIST_TEST_CASE("arange / arange_step", "[int][arange]",
                        ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    using I1 = ember::Tensor<B, 1, Int>;
    const ember::Device<B> device{};
    auto f = fixture("int_arange");
    SECTION("arange(5, 10)") { EXPECT_SAME(f.output(0), I1::arange(5, 10, device)); }
    SECTION("arange_step(5, 10, 2)") { EXPECT_SAME(f.output(1), I1::arange_step(5, 10, 2, device)); }
    SECTION("a negative step") { EXPECT_SAME(f.output(2), I1::arange_step(10, 5, -2, device)); }
    SECTION("an empty range") { EXPECT_SAME(f.output(3), I1::arange(3, 3)); }
    SECTION("negative start, step that overshoots the end") { EXPECT_SAME(f.output(4), I1::arange_step(-3, 4, 3)); }
    SECTION("one element") { EXPECT_SAME(f.output(5), I1::arange(0, 1)); }
    SECTION("a zero step is an error") { CHECK_THROWS_AS(I1::arange_step(0, 5, 0), ember::ArgumentError); }
}

TEMPLATE_LIST_TEST_CASE("float_ / from_ints", "[int][float_]",
                        ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    SECTION("float_") {
        auto f = fixture("int_to_float");
        auto x = f.tensor<B, 2, Int>(0).float_();
        CHECK(x.dtype() == ember::dtype_of<typename B::FloatElem>());
        EXPECT_CLOSE(f.output(0), x);
    }
    SECTION("from_ints") {
        auto t = ember::Tensor<B, 1, Int>::from_ints({3, -4, 0, 1LL << 40});
        CHECK(t.dtype() == DType::I64);
        EXPECT_SAME(ints({3, -4, 0, 1LL << 40}, Shape{4}), t);
    }
}

TEMPLATE_LIST_TEST_CASE("cartesian_grid", "[int][cartesian_grid]",
                        ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    auto f = fixture("int_cartesian_grid");
    SECTION("2-d grid") { EXPECT_SAME(f.output(0), (ember::Tensor<B, 3, Int>::cartesian_grid({2, 3}))); }
    SECTION("3-d grid with a size-1 dim") {
        EXPECT_SAME(f.output(1), (ember::Tensor<B, 4, Int>::cartesian_grid({2, 1, 3})));
    }
}

TEMPLATE_LIST_TEST_CASE("one_hot (int)", "[int][one_hot]", ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    auto f = fixture("int_one_hot");
    auto idx = f.tensor<B, 2, Int>(0);
    SECTION("[2, 3] indices, 4 classes") { EXPECT_SAME(f.output(0), idx.one_hot(4)); }
    SECTION("a 1-d index, 5 classes") {
        EXPECT_SAME(f.output(1), idx.slice({Slice{0, 1}}).template squeeze<1>(0).one_hot(5));
    }
    SECTION("an index out of range") { CHECK_THROWS_AS(idx.one_hot(3), ember::IndexError); }
    SECTION("a negative index") {
        using I1 = ember::Tensor<B, 1, Int>;
        CHECK_THROWS_AS(I1::from_ints({0, -1}).one_hot(3), ember::IndexError);
    }
}

TEMPLATE_LIST_TEST_CASE("int division and remainder follow Python's // and %", "[int][div][rem]",
                        ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    auto f = fixture("int_div_rem_sign");
    auto a = f.tensor<B, 1, Int>(0), b = f.tensor<B, 1, Int>(1);
    SECTION("tensor / tensor floors") {
        EXPECT_SAME(f.output(0), a / b);
        EXPECT_SAME(f.output(0), a.div(b));
    }
    SECTION("tensor % tensor takes the divisor's sign") {
        EXPECT_SAME(f.output(1), a % b);
        EXPECT_SAME(f.output(1), a.rem(b));
    }
    SECTION("by a positive scalar") {
        EXPECT_SAME(f.output(2), a / 3);
        EXPECT_SAME(f.output(3), a % 3);
        EXPECT_SAME(f.output(2), a.div_scalar(3));
        EXPECT_SAME(f.output(3), a.rem_scalar(3));
    }
    SECTION("by a negative scalar") {
        EXPECT_SAME(f.output(4), a / -4);
        EXPECT_SAME(f.output(5), a % -4);
    }
    SECTION("a scalar on the left") {
        EXPECT_SAME(f.output(6), 7 / b);
        EXPECT_SAME(f.output(7), 7 % b);
        EXPECT_SAME(f.output(8), -7 / b);
    }
    SECTION("division by zero is an error") {
        auto z = ember::Tensor<B, 1, Int>::zeros(Shape{10});
        CHECK_THROWS_AS(a / z, ember::Error);
        CHECK_THROWS_AS(a % z, ember::Error);
        CHECK_THROWS_AS(a / 0, ember::Error);
        CHECK_THROWS_AS(1 / (z + a * 0), ember::Error);
    }
}

// Two's complement wrap-around at the int64 limits (as PyTorch's CPU kernels; without it, C++
// signed overflow is undefined and INT64_MIN / -1 traps). The CPU family only: GPUs wrap in
// hardware and have their own tests.
TEMPLATE_TEST_CASE("int arithmetic wraps at the int64 limits", "[int][wrap]", ember::Cpu,
                   ember::Fusion<ember::Cpu>) {
    using B = TestType;
    using I1 = ember::Tensor<B, 1, Int>;
    constexpr std::int64_t lo = std::numeric_limits<std::int64_t>::min();
    constexpr std::int64_t hi = std::numeric_limits<std::int64_t>::max();
    auto x = I1::from_data(ints({lo, hi, -1, 0}, Shape{4}));
    auto values = [](const I1& t) { return t.clone().into_data().template to_vec<std::int64_t>(); };
    CHECK(values(x + 1) == std::vector<std::int64_t>{lo + 1, lo, 0, 1});
    CHECK(values(x - 1) == std::vector<std::int64_t>{hi, hi - 1, -2, -1});
    CHECK(values(x * 2) == std::vector<std::int64_t>{0, -2, -2, 0});
    CHECK(values(x * x) == std::vector<std::int64_t>{0, 1, 1, 0});
    CHECK(values(-x) == std::vector<std::int64_t>{lo, -hi, 1, 0});
    CHECK(values(x.abs()) == std::vector<std::int64_t>{lo, hi, 1, 0});
    CHECK(values(x / -1) == std::vector<std::int64_t>{lo, -hi, 1, 0});
    CHECK(values(x % -1) == std::vector<std::int64_t>{0, 0, 0, 0});
    CHECK(values(x * -1 + x) == std::vector<std::int64_t>{0, 0, 0, 0});
}

TEMPLATE_LIST_TEST_CASE("int random", "[int][random]", ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    using I2 = ember::Tensor<B, 2, Int>;
    SECTION("uniform integers in [0, 10), every value drawn about equally often") {
        B::seed(11);
        const auto v = I2::random(Shape{200, 500}, ember::Distribution::Uniform(0, 10)).into_data().template to_vec<std::int64_t>();
        std::vector<std::size_t> counts(10, 0);
        for (auto x : v) {
            REQUIRE(x >= 0);
            REQUIRE(x < 10);
            ++counts[static_cast<std::size_t>(x)];
        }
        for (auto c : counts) CHECK(static_cast<double>(c) == Approx(10000.0).epsilon(0.05));
    }
    SECTION("seeded draws repeat") {
        B::seed(5);
        auto a = I2::random(Shape{3, 4}, ember::Distribution::Uniform(-100, 100)).into_data();
        B::seed(5);
        CHECK(I2::random(Shape{3, 4}, ember::Distribution::Uniform(-100, 100)).into_data() == a);
        CHECK(a.dtype() == DType::I64);
    }
}

// =============================================================================================
// Bool
// =============================================================================================
namespace {
template <typename B, std::size_t D>
using Mask = ember::Tensor<B, D, Bool>;

}  // namespace

TEMPLATE_LIST_TEST_CASE("tril_mask / triu_mask / diag_mask", "[bool][mask]",
                        ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    SECTION("tril_mask is true above the diagonal") {
        auto f = fixture("bool_tril_mask");
        using M2 = Mask<B, 2>;
        using M3 = Mask<B, 3>;
        EXPECT_SAME(f.output(0), M2::tril_mask(Shape{3, 4}, 0));
        EXPECT_SAME(f.output(1), M2::tril_mask(Shape{3, 4}, 1));
        EXPECT_SAME(f.output(2), M2::tril_mask(Shape{3, 4}, -1));
        EXPECT_SAME(f.output(3), M2::tril_mask(Shape{4, 3}));
        EXPECT_SAME(f.output(4), M3::tril_mask(Shape{2, 3, 3}));
        EXPECT_SAME(f.output(5), M2::tril_mask(Shape{1, 1}));
    }
    SECTION("triu_mask is true below the diagonal") {
        auto f = fixture("bool_triu_mask");
        using M2 = Mask<B, 2>;
        using M3 = Mask<B, 3>;
        EXPECT_SAME(f.output(0), M2::triu_mask(Shape{3, 4}, 0));
        EXPECT_SAME(f.output(1), M2::triu_mask(Shape{3, 4}, 1));
        EXPECT_SAME(f.output(2), M2::triu_mask(Shape{3, 4}, -1));
        EXPECT_SAME(f.output(3), M2::triu_mask(Shape{4, 3}));
        EXPECT_SAME(f.output(4), M3::triu_mask(Shape{2, 3, 3}));
        EXPECT_SAME(f.output(5), M2::triu_mask(Shape{1, 1}));
    }
    SECTION("diag_mask is false on the diagonal") {
        auto f = fixture("bool_diag_mask");
        using M2 = Mask<B, 2>;
        using M3 = Mask<B, 3>;
        EXPECT_SAME(f.output(0), M2::diag_mask(Shape{3, 4}, 0));
        EXPECT_SAME(f.output(1), M2::diag_mask(Shape{3, 4}, 1));
        EXPECT_SAME(f.output(2), M2::diag_mask(Shape{3, 4}, -1));
        EXPECT_SAME(f.output(3), M2::diag_mask(Shape{4, 3}));
        EXPECT_SAME(f.output(4), M3::diag_mask(Shape{2, 3, 3}));
        EXPECT_SAME(f.output(5), M2::diag_mask(Shape{1, 1}));
    }
    SECTION("mask_fill with tril_mask keeps the lower triangle") {
        auto f = fixture("num_tril_triu");
        auto x = f.tensor<B, 2>(0);
        EXPECT_CLOSE(f.output(0), x.mask_fill(Mask<B, 2>::tril_mask(x.shape()), 0));
        EXPECT_CLOSE(f.output(3), x.mask_fill(Mask<B, 2>::triu_mask(x.shape()), 0));
    }
}

TEMPLATE_LIST_TEST_CASE("argwhere / nonzero", "[bool][argwhere][nonzero]",
                        ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    SECTION("argwhere") {
        auto f = fixture("bool_argwhere");
        auto x = f.tensor<B, 2, Bool>(0);
        SECTION("[3, 4]") { EXPECT_SAME(f.output(0), x.argwhere()); }
        SECTION("rank 3") { EXPECT_SAME(f.output(1), f.tensor<B, 3, Bool>(1).argwhere()); }
        SECTION("no true element gives [0, 2]") { EXPECT_SAME(f.output(2), f.tensor<B, 2, Bool>(2).argwhere()); }
        SECTION("a transposed input, in row-major order of the view") {
            EXPECT_SAME(f.output(3), x.transpose().argwhere());
        }
    }
    SECTION("nonzero") {
        auto f = fixture("bool_nonzero");
        auto nz = f.tensor<B, 2, Bool>(0).nonzero();
        REQUIRE(nz.size() == 2);
        EXPECT_SAME(f.output(0), nz[0]);
        EXPECT_SAME(f.output(1), nz[1]);
        auto nz3 = f.tensor<B, 3, Bool>(1).nonzero();
        REQUIRE(nz3.size() == 3);
        for (std::size_t d = 0; d < 3; ++d) EXPECT_SAME(f.output(2 + d), nz3[d]);
        auto nzz = f.tensor<B, 2, Bool>(2).nonzero();
        REQUIRE(nzz.size() == 2);
        EXPECT_SAME(f.output(5), nzz[0]);
        EXPECT_SAME(f.output(6), nzz[1]);
    }
}

TEMPLATE_LIST_TEST_CASE("bool conversions and logic", "[bool][not_][float_][int_]",
                        ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    auto f = fixture("bool_convert");
    auto x = f.tensor<B, 2, Bool>(0);
    auto y = f.tensor<B, 2, Bool>(1);  // [1, 4], broadcast
    SECTION("float_") {
        EXPECT_CLOSE(f.output(0), x.float_());
        CHECK(x.float_().dtype() == ember::dtype_of<typename B::FloatElem>());
    }
    SECTION("int_") {
        EXPECT_SAME(f.output(1), x.int_());
        CHECK(x.int_().dtype() == DType::I64);
    }
    SECTION("not_") {
        EXPECT_SAME(f.output(2), x.not_());
        EXPECT_SAME(f.output(2), !x);
        EXPECT_SAME(f.output(6), x.transpose().not_());
    }
    SECTION("and / or / xor with broadcasting") {
        EXPECT_SAME(f.output(3), x.bool_and(y));
        EXPECT_SAME(f.output(4), x.bool_or(y));
        EXPECT_SAME(f.output(5), x.bool_xor(y));
    }
}

}  // namespace test_int_bool_ops
