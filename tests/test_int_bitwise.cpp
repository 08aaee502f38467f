// The int bitwise ops (Burn's bitwise_and/or/xor/not, their scalar forms, bitwise_left_shift
// and bitwise_right_shift) on every stack, against tests/fixtures/bitwise.json
// (tests/fixtures/gen_bitwise.py, PyTorch 1.13; shifts by amounts outside [0, 64) follow the
// rule that file documents). Tagged [cuda][vulkan] as well: those filters run them on the GPU
// stacks (Cuda, Fusion<Cuda>, Vulkan, Fusion<Vulkan>).
#include <limits>
#include <type_traits>
#include <utility>

#include "op_test.hpp"

namespace test_int_bitwise {

namespace {
Fixture bitwise(const char* name) {
    return Fixture("bitwise", name);
}

template <typename T>
struct IsFusion : std::false_type {};
template <typename X>
struct IsFusion<ember::Fusion<X>> : std::true_type {};

// The bitwise ops exist on Int tensors only: a Float or Bool tensor has no such method.
template <typename T>
constexpr bool has_bitwise = requires(const T& t) {
    t.bitwise_and(t);
    t.bitwise_left_shift_scalar(1);
    t.bitwise_not();
};
static_assert(has_bitwise<ember::Tensor<ember::Cpu, 2, Int>>);
static_assert(!has_bitwise<ember::Tensor<ember::Cpu, 2>>);
static_assert(!has_bitwise<ember::Tensor<ember::Cpu, 2, Bool>>);
}  // namespace

TEMPLATE_LIST_TEST_CASE("int bitwise and, or, xor against PyTorch", "[int][bitwise][cuda][vulkan]",
                        ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    auto f = bitwise("bitwise_binary");
    auto a = f.tensor<B, 2, Int>(0), b = f.tensor<B, 2, Int>(1), c = f.tensor<B, 2, Int>(2);
    SECTION("[2, 6] with [1, 6], broadcast over the rows") {
        EXPECT_SAME(f.output(0), a.bitwise_and(b));
        EXPECT_SAME(f.output(1), a.bitwise_or(b));
        EXPECT_SAME(f.output(2), a.bitwise_xor(b));
    }
    SECTION("with a [2, 1] column, and two operands that both broadcast") {
        EXPECT_SAME(f.output(3), a.bitwise_and(c));
        EXPECT_SAME(f.output(4), c.bitwise_or(b));
        EXPECT_SAME(f.output(5), b.bitwise_xor(c));
    }
    SECTION("shapes that do not broadcast are a ShapeError naming the op") {
        auto wide = ember::Tensor<B, 2, Int>::zeros(Shape{2, 4});
        CHECK_THROWS_AS(a.bitwise_and(wide), ember::ShapeError);
        CHECK_THROWS_WITH(a.bitwise_xor(wide), Catch::Contains("bitwise_xor"));
        CHECK_THROWS_WITH(a.bitwise_left_shift(wide), Catch::Contains("bitwise_left_shift"));
        CHECK_THROWS_AS(a.bitwise_right_shift(wide), ember::ShapeError);
    }
}

TEMPLATE_LIST_TEST_CASE("int bitwise ops with a scalar and bitwise_not against PyTorch",
                        "[int][bitwise][cuda][vulkan]", ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    auto f = bitwise("bitwise_scalar");
    auto a = f.tensor<B, 2, Int>(0);
    constexpr std::int64_t kLowest = std::numeric_limits<std::int64_t>::min();
    EXPECT_SAME(f.output(0), a.bitwise_and_scalar(0xFF));
    EXPECT_SAME(f.output(1), a.bitwise_or_scalar(-16));
    EXPECT_SAME(f.output(2), a.bitwise_xor_scalar(-1));
    EXPECT_SAME(f.output(3), a.bitwise_and_scalar(kLowest));
    EXPECT_SAME(f.output(4), a.bitwise_or_scalar(0));
    EXPECT_SAME(f.output(5), a.bitwise_xor_scalar(std::int64_t{0x0F0F0F0F0F}));
    EXPECT_SAME(bitwise("bitwise_not").output(0), a.bitwise_not());
    SECTION("not twice is the identity") {
        EXPECT_SAME(a.into_data(), a.bitwise_not().bitwise_not());
    }
}

TEMPLATE_LIST_TEST_CASE("int shifts against PyTorch, edges included",
                        "[int][bitwise][shift][cuda][vulkan]",
                        ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    using I2 = ember::Tensor<B, 2, Int>;
    SECTION("tensor amounts 0 to 63, broadcast, on every sign and the extremes") {
        auto f = bitwise("bitwise_shift");
        auto x = f.tensor<B, 2, Int>(0), n = f.tensor<B, 2, Int>(1);
        EXPECT_SAME(f.output(0), x.bitwise_left_shift(n));
        EXPECT_SAME(f.output(1), x.bitwise_right_shift(n));  // arithmetic: -5 >> 1 == -3
        EXPECT_SAME(f.output(2), I2::ones(Shape{1, 1}).bitwise_left_shift(n));
        EXPECT_SAME(f.output(3), I2::full(Shape{1, 1}, -1).bitwise_right_shift(n));
    }
    SECTION("scalar amounts 0, 1, 2 and 63") {
        auto f = bitwise("bitwise_shift_scalar");
        auto x = f.tensor<B, 2, Int>(0);
        EXPECT_SAME(f.output(0), x.bitwise_left_shift_scalar(0));
        EXPECT_SAME(f.output(1), x.bitwise_left_shift_scalar(1));
        EXPECT_SAME(f.output(2), x.bitwise_left_shift_scalar(63));
        EXPECT_SAME(f.output(3), x.bitwise_right_shift_scalar(0));
        EXPECT_SAME(f.output(4), x.bitwise_right_shift_scalar(1));
        EXPECT_SAME(f.output(5), x.bitwise_right_shift_scalar(63));
        EXPECT_SAME(f.output(6), x.bitwise_right_shift_scalar(2));
    }
    SECTION("amounts below 0 or of 64 and more: 0 to the left, the sign fill to the right") {
        auto f = bitwise("bitwise_shift_out_of_range");
        auto x = f.tensor<B, 2, Int>(0), m = f.tensor<B, 2, Int>(1);
        EXPECT_SAME(f.output(0), x.bitwise_left_shift(m));
        EXPECT_SAME(f.output(1), x.bitwise_right_shift(m));
        // The scalar forms follow the same rule (rows 0, 2 and 5 of the case: -1, 64, lowest).
        for (const auto& [row, amount] : {std::pair<long, std::int64_t>{0, -1},
                                          {2, 64},
                                          {5, std::numeric_limits<std::int64_t>::min()}}) {
            INFO("amount " << amount);
            auto left = ember::Tensor<ember::Cpu, 2, Int>::from_data(f.output(0))
                            .slice({Slice{row, row + 1}});
            auto right = ember::Tensor<ember::Cpu, 2, Int>::from_data(f.output(1))
                             .slice({Slice{row, row + 1}});
            EXPECT_SAME(left.into_data(), x.bitwise_left_shift_scalar(amount));
            EXPECT_SAME(right.into_data(), x.bitwise_right_shift_scalar(amount));
        }
    }
}

TEMPLATE_LIST_TEST_CASE("int bitwise chain: one fused launch on Fusion stacks",
                        "[int][bitwise][fusion][cuda][vulkan]",
                        ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    auto f = bitwise("bitwise_chain");
    auto a = f.tensor<B, 2, Int>(0), b = f.tensor<B, 2, Int>(1), n = f.tensor<B, 2, Int>(2);
    ember::fusion::reset_stats();
    auto y = a.bitwise_and(b)
                 .bitwise_xor(a.bitwise_not())
                 .bitwise_left_shift(n)
                 .bitwise_right_shift_scalar(2)
                 .bitwise_or_scalar(7);
    EXPECT_SAME(f.output(0), y);
    if constexpr (IsFusion<B>::value)
        CHECK(ember::fusion::stats().fused_launches == 1);  // the whole chain, one kernel
}

TEMPLATE_TEST_CASE("int bitwise ops through Autodiff (not differentiable: forwarded)",
                   "[int][bitwise][autodiff]", ember::Autodiff<ember::Cpu>,
                   ember::Autodiff<ember::Fusion<ember::Cpu>>) {
    using B = TestType;
    auto f = bitwise("bitwise_binary");
    auto a = f.tensor<B, 2, Int>(0), b = f.tensor<B, 2, Int>(1);
    EXPECT_SAME(f.output(0), a.bitwise_and(b));
    EXPECT_SAME(bitwise("bitwise_scalar").output(2), a.bitwise_xor_scalar(-1));
    EXPECT_SAME(bitwise("bitwise_not").output(0), a.bitwise_not());
    auto s = bitwise("bitwise_shift");
    EXPECT_SAME(s.output(1), s.tensor<B, 2, Int>(0).bitwise_right_shift(s.tensor<B, 2, Int>(1)));
}

TEMPLATE_LIST_TEST_CASE("bitwise op codes on float and bool primitives are DType errors",
                        "[int][bitwise][errors][cuda][vulkan]", ember::test::TestBackends) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    // The Tensor API offers these ops on Int tensors only (checked at compile time above); a
    // caller of the backend's op codes with a float or bool tensor gets the shared check's error.
    auto x = ember::Tensor<B, 2>::ones(Shape{2, 3}).into_primitive();
    auto m = ember::Tensor<B, 2>::ones(Shape{2, 3}).greater_elem(0.5).into_primitive();
    CHECK_THROWS_AS(B::float_binary(ember::BinaryOp::Shl, x, x), ember::DTypeError);
    CHECK_THROWS_WITH(B::float_binary(ember::BinaryOp::And, x, x),
                      Catch::Contains("bitwise_and") && Catch::Contains("int and bool tensors"));
    CHECK_THROWS_WITH(B::float_binary_scalar(ember::BinaryOp::Shr, x, ember::Scalar(1)),
                      Catch::Contains("bitwise_right_shift"));
    CHECK_THROWS_AS(B::float_binary_scalar(ember::BinaryOp::Xor, x, ember::Scalar(1)),
                    ember::DTypeError);
    CHECK_THROWS_WITH(B::float_unary(ember::UnaryOp::Not, x), Catch::Contains("bitwise_not"));
    CHECK_THROWS_WITH(B::bool_binary(ember::BinaryOp::Shl, m, m),
                      Catch::Contains("bitwise_left_shift") && Catch::Contains("bool"));
}

}  // namespace test_int_bitwise
