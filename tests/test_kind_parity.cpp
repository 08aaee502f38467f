// Where ember matched Burn on what it already had (issue 33 item 0): the range forms of
// slice_assign, clamped and negative bounds, Int means, the Bool constructors and mask / select
// ops, and transpose / swap_dims on Int and Bool tensors. Expected values are worked out by hand
// in the comments (closed-form math), on every backend of the shared suite.
#include <array>
#include <utility>
#include <vector>

#include <ember/tensor/composed.hpp>

#include "op_test.hpp"

namespace test_kind_parity {

namespace {
TensorData ints(std::vector<std::int64_t> v, Shape s) {
    return TensorData(v, s);
}
TensorData bools(std::initializer_list<bool> v, Shape s) {
    return TensorData(v, s);
}
}  // namespace

TEMPLATE_LIST_TEST_CASE("slice_assign takes every range form of slice",
                        "[basic][slice_assign][parity]", ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    using I2 = ember::Tensor<B, 2, Int>;
    // x = [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
    const auto x = I2::from_data(ints({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, Shape{3, 4}));
    const auto v = I2::from_data(ints({-1, -2, -3, -4}, Shape{2, 2}));
    // Rows 1..3, cols 2..4 replaced by v.
    const auto expected = ints({0, 1, 2, 3, 4, 5, -1, -2, 8, 9, -3, -4}, Shape{3, 4});
    SECTION("ranges as pairs") {
        EXPECT_SAME(expected,
                    x.slice_assign(std::array<std::pair<long, long>, 2>{{{1, 3}, {2, 4}}}, v));
    }
    SECTION("negative bounds count from the end") {
        EXPECT_SAME(expected, x.slice_assign({{-2, 3}, {-2, 4}}, v));
        EXPECT_SAME(expected,
                    x.slice_assign(std::array<std::pair<long, long>, 2>{{{-2, 3}, {-2, 4}}}, v));
    }
    SECTION("ends past the size are clamped, as slice clamps them") {
        EXPECT_SAME(expected, x.slice_assign({{1, 100}, {2, 100}}, v));
        EXPECT_SAME(expected, x.slice_assign({Slice{1, 50}, Slice{2}}, v));
        std::vector<Slice> r{Slice{1, 1000}, Slice{-2, 1000}};
        EXPECT_SAME(expected, x.slice_assign(std::span<const Slice>(r), v));
    }
    SECTION("a start before the beginning is clamped") {
        // Rows 0..1 (start -100 → 0), cols 0..2.
        const auto w = I2::from_data(ints({7, 7}, Shape{1, 2}));
        EXPECT_SAME(ints({7, 7, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, Shape{3, 4}),
                    x.slice_assign({{-100, 1}, {-100, 2}}, w));
    }
    SECTION("clamped ranges whose region does not match the values") {
        // {1, 100} of 3 rows is 2 rows; {0, 100} of 4 cols is 4 cols: [2, 4] against [2, 2].
        CHECK_THROWS_AS(x.slice_assign({{1, 100}, {0, 100}}, v), ember::ShapeError);
    }
}

TEMPLATE_LIST_TEST_CASE("mean and mean_dim of Int tensors round toward zero", "[int][mean][parity]",
                        ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    using I2 = ember::Tensor<B, 2, Int>;
    // x = [[3, 5, 8], [-7, -2, 1]]
    const auto x = I2::from_data(ints({3, 5, 8, -7, -2, 1}, Shape{2, 3}));
    SECTION("mean: 8 / 6 → 1") {
        const auto m = x.mean();
        CHECK(m.dtype() == DType::I64);
        EXPECT_SAME(ints({1}, Shape{1}), m);
    }
    SECTION("a negative mean: -8 / 3 → -2 (floor would give -3)") {
        EXPECT_SAME(ints({-2}, Shape{1}), x.slice({Slice{1}}).mean());
    }
    SECTION("mean_dim(1): 16 / 3 → 5, -8 / 3 → -2") {
        EXPECT_SAME(ints({5, -2}, Shape{2, 1}), x.mean_dim(1));
    }
    SECTION("mean_dim(0): -4 / 2, 3 / 2, 9 / 2 → -2, 1, 4") {
        EXPECT_SAME(ints({-2, 1, 4}, Shape{1, 3}), x.mean_dim(0));
        EXPECT_SAME(ints({-2, 1, 4}, Shape{1, 3}), x.mean_dim(-2));
    }
    SECTION("an exact mean keeps its value") {
        EXPECT_SAME(ints({-4}, Shape{1}), I2::from_data(ints({-6, -2}, Shape{1, 2})).mean());
    }
    SECTION("no elements: ShapeError naming the op") {
        const auto e = I2::from_data(ints({}, Shape{2, 0}));
        CHECK_THROWS_AS(e.mean(), ember::ShapeError);
        CHECK_THROWS_WITH(e.mean(),
                          Catch::Matchers::Contains("mean") && Catch::Matchers::Contains("[2, 0]"));
        CHECK_THROWS_WITH(e.mean_dim(1), Catch::Matchers::Contains("mean_dim"));
        // Along a non-empty dim of an empty tensor the result is empty, not an error.
        CHECK(e.mean_dim(0).dims() == std::array<std::size_t, 2>{1, 0});
    }
    SECTION("a dim out of range") {
        CHECK_THROWS_AS(x.mean_dim(2), ember::DimError);
    }
}

TEMPLATE_LIST_TEST_CASE("mean_dims of Int tensors rounds once", "[int][mean][parity]",
                        ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    using I2 = ember::Tensor<B, 2, Int>;
    // [[1, 2], [2, 3]]: 8 / 4 = 2; dim by dim it would be mean(1, 2) = 1 (3 / 2 → 1, 5 / 2 → 2).
    const auto x = I2::from_ints({{1, 2}, {2, 3}});
    EXPECT_SAME(ints({2}, Shape{1, 1}), ember::mean_dims(x, {0, 1}));
    EXPECT_SAME(ints({-2}, Shape{1, 1}), ember::mean_dims(x.neg(), {-1, 0}));
    EXPECT_SAME(ints({1, 2}, Shape{1, 2}), ember::mean_dims(x, {0}));
    const auto e = I2::zeros({2, 0});
    CHECK_THROWS_AS(ember::mean_dims(e, {0, 1}), ember::ShapeError);
    CHECK_THROWS_WITH(ember::mean_dims(e, {0, 1}), Catch::Matchers::Contains("mean_dims"));
    CHECK_THROWS_AS(ember::mean_dims(x, {0, 0}), ember::DimError);
}

TEMPLATE_LIST_TEST_CASE("Bool full / zeros / ones", "[bool][full][parity]",
                        ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    using Bl2 = ember::Tensor<B, 2, Bool>;
    const ember::Device<B> device{};
    SECTION("full(true) and full(false)") {
        const auto t = Bl2::full({2, 3}, true, device);
        CHECK(t.dtype() == DType::Bool);
        EXPECT_SAME(bools({true, true, true, true, true, true}, Shape{2, 3}), t);
        EXPECT_SAME(bools({false, false}, Shape{1, 2}), Bl2::full({1, 2}, false, device));
    }
    SECTION("zeros and ones") {
        EXPECT_SAME(bools({false, false, false}, Shape{3, 1}), Bl2::zeros({3, 1}, device));
        EXPECT_SAME(bools({true, true, true}, Shape{1, 3}), Bl2::ones({1, 3}, device));
    }
    SECTION("a shape of the wrong rank") {
        CHECK_THROWS_AS(Bl2::ones({3}, device), ember::ShapeError);
    }
}

TEMPLATE_LIST_TEST_CASE("Bool mask_where / mask_fill", "[bool][mask_where][mask_fill][parity]",
                        ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    using Bl2 = ember::Tensor<B, 2, Bool>;
    // x = [[T, F, T], [F, F, T]], mask = [[T, T, F], [F, T, F]]
    const auto x = Bl2::from_data(bools({true, false, true, false, false, true}, Shape{2, 3}));
    const auto mask = Bl2::from_data(bools({true, true, false, false, true, false}, Shape{2, 3}));
    SECTION("mask_where takes the value where the mask is true") {
        const auto value =
            Bl2::from_data(bools({false, true, true, true, true, true}, Shape{2, 3}));
        EXPECT_SAME(bools({false, true, true, false, true, true}, Shape{2, 3}),
                    x.mask_where(mask, value));
    }
    SECTION("mask_fill(true) / mask_fill(false)") {
        EXPECT_SAME(bools({true, true, true, false, true, true}, Shape{2, 3}),
                    x.mask_fill(mask, true));
        EXPECT_SAME(bools({false, false, true, false, false, true}, Shape{2, 3}),
                    x.mask_fill(mask, false));
    }
    SECTION("a broadcast mask: one row for both") {
        const auto row = Bl2::from_data(bools({false, true, true}, Shape{1, 3}));
        EXPECT_SAME(bools({true, false, false, false, false, false}, Shape{2, 3}),
                    x.mask_fill(row, false));
    }
    SECTION("a mask that would grow the tensor is a ShapeError") {
        const auto big = Bl2::from_data(bools({true, true, true, true, true, true}, Shape{2, 3}));
        const auto small = Bl2::from_data(bools({true, false, true}, Shape{1, 3}));
        CHECK_THROWS_AS(small.mask_fill(big, true), ember::ShapeError);
        CHECK_THROWS_WITH(small.mask_fill(big, true), Catch::Matchers::Contains("mask_fill"));
    }
}

TEMPLATE_LIST_TEST_CASE("Bool equal_elem / not_equal_elem", "[bool][equal_elem][parity]",
                        ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    using Bl1 = ember::Tensor<B, 1, Bool>;
    const auto x = Bl1::from_data(bools({true, false, false, true}, Shape{4}));
    EXPECT_SAME(bools({true, false, false, true}, Shape{4}), x.equal_elem(true));
    EXPECT_SAME(bools({false, true, true, false}, Shape{4}), x.equal_elem(false));
    EXPECT_SAME(bools({false, true, true, false}, Shape{4}), x.not_equal_elem(true));
    EXPECT_SAME(bools({true, false, false, true}, Shape{4}), x.not_equal_elem(false));
}

TEMPLATE_LIST_TEST_CASE("Bool select_assign ors the values in", "[bool][select_assign][parity]",
                        ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    using Bl2 = ember::Tensor<B, 2, Bool>;
    using I1 = ember::Tensor<B, 1, Int>;
    // x = [[F, T], [F, F], [T, F]]; rows 2, 0, 2 get [[F, T], [T, F], [T, T]]:
    // row 0 = [F, T] | [T, F] = [T, T]; row 1 stays [F, F]; row 2 = [T, F] | [F, T] | [T, T].
    const auto x = Bl2::from_data(bools({false, true, false, false, true, false}, Shape{3, 2}));
    const auto values = Bl2::from_data(bools({false, true, true, false, true, true}, Shape{3, 2}));
    const auto idx = I1::from_ints({2, 0, 2});
    SECTION("along dim 0") {
        const auto y = x.select_assign(0, idx, values);
        CHECK(y.dtype() == DType::Bool);
        EXPECT_SAME(bools({true, true, false, false, true, true}, Shape{3, 2}), y);
    }
    SECTION("along dim 1 (-1)") {
        // Column k of v goes to column idx[k] of x: v = [[T, F, F], [F, F, T], [F, F, F]].
        const auto v = Bl2::from_data(
            bools({true, false, false, false, false, true, false, false, false}, Shape{3, 3}));
        // row 0: col 1 |= T, col 1 |= F, col 0 |= F → [F, T]; row 1: col 0 |= T → [T, F];
        // row 2: nothing true → [T, F].
        EXPECT_SAME(bools({false, true, true, false, true, false}, Shape{3, 2}),
                    x.select_assign(-1, I1::from_ints({1, 1, 0}), v));
    }
    SECTION("an index out of range is an IndexError") {
        CHECK_THROWS_AS(x.select_assign(0, I1::from_ints({3, 0, 1}), values), ember::IndexError);
    }
}

TEMPLATE_LIST_TEST_CASE("transpose and swap_dims of Int and Bool tensors",
                        "[int][bool][transpose][parity]", ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    // i = [[[0, 1, 2], [3, 4, 5]]] of shape [1, 2, 3]
    const auto i = ember::Tensor<B, 3, Int>::from_data(ints({0, 1, 2, 3, 4, 5}, Shape{1, 2, 3}));
    SECTION("Int transpose: the last two dims") {
        EXPECT_SAME(ints({0, 3, 1, 4, 2, 5}, Shape{1, 3, 2}), i.transpose());
    }
    SECTION("Int swap_dims(0, 2): [3, 2, 1]") {
        EXPECT_SAME(ints({0, 3, 1, 4, 2, 5}, Shape{3, 2, 1}), i.swap_dims(0, -1));
    }
    SECTION("Bool transpose and swap_dims") {
        const auto b = ember::Tensor<B, 2, Bool>::from_data(
            bools({true, false, false, true, true, false}, Shape{2, 3}));
        const auto t = bools({true, true, false, true, false, false}, Shape{3, 2});
        EXPECT_SAME(t, b.transpose());
        EXPECT_SAME(t, b.swap_dims(1, 0));
        // Ops after the view read it in its new order.
        EXPECT_SAME(bools({false, false, true, false, true, true}, Shape{3, 2}),
                    b.transpose().not_());
    }
    SECTION("a dim out of range") {
        CHECK_THROWS_AS(i.swap_dims(0, 3), ember::DimError);
    }
}

TEMPLATE_LIST_TEST_CASE("nested-literal construction", "[from_floats][from_ints][parity]",
                        ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    const ember::Device<B> device{};
    SECTION("2-d floats, row by row") {
        const auto t = ember::Tensor<B, 2>::from_floats({{1, 2, 3}, {4.5f, -5, 6}}, device);
        EXPECT_CLOSE(TensorData({1.f, 2.f, 3.f, 4.5f, -5.f, 6.f}, {2, 3}), t);
    }
    SECTION("3-d floats, block by block") {
        const auto t = ember::Tensor<B, 3>::from_floats(
            {{{1, 2}, {3, 4}}, {{5, 6}, {7, 8}}, {{9, 10}, {11, 12}}});
        EXPECT_CLOSE(
            TensorData({1.f, 2.f, 3.f, 4.f, 5.f, 6.f, 7.f, 8.f, 9.f, 10.f, 11.f, 12.f}, {3, 2, 2}),
            t);
    }
    SECTION("2-d and 3-d ints keep 64 bits") {
        EXPECT_SAME(ints({1, -2, 1LL << 40, 4}, Shape{2, 2}),
                    ember::Tensor<B, 2, Int>::from_ints({{1, -2}, {1LL << 40, 4}}, device));
        EXPECT_SAME(ints({1, 2, 3, 4, 5, 6}, Shape{2, 1, 3}),
                    ember::Tensor<B, 3, Int>::from_ints({{{1, 2, 3}}, {{4, 5, 6}}}, device));
    }
    SECTION("empty rows") {
        CHECK(ember::Tensor<B, 2>::from_floats({{}, {}}).dims() ==
              std::array<std::size_t, 2>{2, 0});
    }
    SECTION("ragged rows are a ShapeError naming the op and the lengths") {
        using Catch::Matchers::Contains;
        using T2 = ember::Tensor<B, 2>;
        CHECK_THROWS_AS(T2::from_floats({{1, 2}, {3, 4, 5}}), ember::ShapeError);
        CHECK_THROWS_WITH(T2::from_floats({{1, 2}, {3, 4, 5}}),
                          Contains("from_floats") && Contains("rows") && Contains("2, 3"));
        CHECK_THROWS_WITH((ember::Tensor<B, 2, Int>::from_ints({{1}, {2}, {}})),
                          Contains("from_ints") && Contains("1, 1, 0"));
        using T3 = ember::Tensor<B, 3>;
        // Blocks with 2 and 1 rows; then rows of 2 and 3 elements across blocks.
        CHECK_THROWS_WITH(T3::from_floats({{{1, 2}, {3, 4}}, {{5, 6}}}),
                          Contains("from_floats") && Contains("blocks") && Contains("2, 1"));
        CHECK_THROWS_WITH(T3::from_floats({{{1, 2}}, {{3, 4, 5}}}),
                          Contains("from_floats") && Contains("2, 3"));
    }
}

}  // namespace test_kind_parity
