// Basic operations (Burn's "Basic Operations" table: every tensor kind), checked against
// PyTorch fixtures written by tests/fixtures/gen_tensor_ops.py and closed-form values.
#include <limits>
#include <vector>

#include "op_test.hpp"

namespace test_basic_ops {

// ---------------------------------------------------------------------------------------------
TEMPLATE_LIST_TEST_CASE("cat", "[basic][cat]", ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    using T2 = ember::Tensor<B, 2>;
    using T3 = ember::Tensor<B, 3>;

    SECTION("float") {
        SECTION("along dim 0") {
            auto f = fixture("basic_cat_dim0");
            EXPECT_CLOSE(f.output(0), T2::cat({f.tensor<B, 2>(0), f.tensor<B, 2>(1)}, 0));
        }
        SECTION("along dim 1") {
            auto f = fixture("basic_cat_dim1");
            EXPECT_CLOSE(f.output(0), T2::cat({f.tensor<B, 2>(0), f.tensor<B, 2>(1)}, 1));
        }
        SECTION("along a negative dim") {
            auto f = fixture("basic_cat_neg_dim");
            EXPECT_CLOSE(f.output(0), T3::cat({f.tensor<B, 3>(0), f.tensor<B, 3>(1)}, -1));
        }
        SECTION("three tensors") {
            auto f = fixture("basic_cat_three");
            EXPECT_CLOSE(f.output(0), T2::cat({f.tensor<B, 2>(0), f.tensor<B, 2>(1), f.tensor<B, 2>(2)}, 0));
        }
        SECTION("a single tensor") {
            auto f = fixture("basic_cat_dim0");
            EXPECT_CLOSE(f.input(0), T2::cat({f.tensor<B, 2>(0)}, 0));
        }
        SECTION("with size-0 tensors") {
            auto f = fixture("basic_cat_empty");
            auto e0 = f.tensor<B, 2>(0), x = f.tensor<B, 2>(1), e1 = f.tensor<B, 2>(2);
            EXPECT_CLOSE(f.output(0), T2::cat({e0, x}, 0));
            EXPECT_CLOSE(f.output(1), T2::cat({e1, x}, 1));
        }
        SECTION("a transposed (non-contiguous) input") {
            auto f = fixture("basic_cat_transposed");
            EXPECT_CLOSE(f.output(0), T2::cat({f.tensor<B, 2>(0).transpose(), f.tensor<B, 2>(1)}, 0));
        }
    }
    SECTION("int") {
        auto f = fixture("basic_cat_int");
        using I2 = ember::Tensor<B, 2, Int>;
        EXPECT_SAME(f.output(0), I2::cat({f.tensor<B, 2, Int>(0), f.tensor<B, 2, Int>(1)}, 1));
    }
    SECTION("bool") {
        auto f = fixture("basic_cat_bool");
        using B2 = ember::Tensor<B, 2, Bool>;
        EXPECT_SAME(f.output(0), B2::cat({f.tensor<B, 2, Bool>(0), f.tensor<B, 2, Bool>(1)}, 0));
    }
    SECTION("bad input") {
        auto f = fixture("basic_cat_dim1");
        auto a = f.tensor<B, 2>(0), b = f.tensor<B, 2>(1);  // [2, 3] and [2, 2]
        CHECK_THROWS_AS(T2::cat({a, b}, 0), ember::ShapeError);
        CHECK_THROWS_AS(T2::cat({}, 0), ember::ArgumentError);
        CHECK_THROWS_AS(T2::cat({a, b}, 2), ember::DimError);
    }
}

TEMPLATE_LIST_TEST_CASE("stack", "[basic][stack]", ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    using T2 = ember::Tensor<B, 2>;

    SECTION("float") {
        auto f = fixture("basic_stack");
        auto a = f.tensor<B, 2>(0), b = f.tensor<B, 2>(1);
        SECTION("new leading dim") { EXPECT_CLOSE(f.output(0), T2::template stack<3>({a, b}, 0)); }
        SECTION("new middle dim") { EXPECT_CLOSE(f.output(1), T2::template stack<3>({a, b}, 1)); }
        SECTION("new last dim") { EXPECT_CLOSE(f.output(2), T2::template stack<3>({a, b}, 2)); }
        SECTION("negative dim") { EXPECT_CLOSE(f.output(2), T2::template stack<3>({a, b}, -1)); }
        SECTION("default output rank") { EXPECT_CLOSE(f.output(0), T2::stack({a, b}, 0)); }
        SECTION("shapes must match") {
            CHECK_THROWS_AS(T2::stack({a, b.slice({Slice{0, 1}})}, 0), ember::ShapeError);
        }
    }
    SECTION("int") {
        auto f = fixture("basic_stack_int");
        using I2 = ember::Tensor<B, 2, Int>;
        EXPECT_SAME(f.output(0), I2::template stack<3>({f.tensor<B, 2, Int>(0), f.tensor<B, 2, Int>(1)}, 1));
    }
    SECTION("bool") {
        auto f = fixture("basic_stack_bool");
        using B1 = ember::Tensor<B, 1, Bool>;
        auto a = f.tensor<B, 1, Bool>(0), b = f.tensor<B, 1, Bool>(1);
        EXPECT_SAME(f.output(0), B1::template stack<2>({a, b}, 0));
        EXPECT_SAME(f.output(1), B1::template stack<2>({a, b}, 1));
    }
}

// ---------------------------------------------------------------------------------------------
namespace {
template <typename B, typename K>
void check_all_any(const char* name) {
    auto f = fixture(name);
    auto x = f.tensor<B, 2, K>(0);
    SECTION("all") { EXPECT_SAME(f.output(0), x.all()); }
    SECTION("any") { EXPECT_SAME(f.output(1), x.any()); }
    SECTION("all_dim(0)") { EXPECT_SAME(f.output(2), x.all_dim(0)); }
    SECTION("all_dim(1)") { EXPECT_SAME(f.output(3), x.all_dim(1)); }
    SECTION("any_dim(0)") { EXPECT_SAME(f.output(4), x.any_dim(0)); }
    SECTION("any_dim(-1)") { EXPECT_SAME(f.output(5), x.any_dim(-1)); }
    SECTION("transposed") {
        EXPECT_SAME(f.output(3).convert(ember::DType::Bool).reshape(Shape{1, 3}),
                    x.transpose().all_dim(0));
    }
}
}  // namespace

TEMPLATE_LIST_TEST_CASE("all / any", "[basic][all][any]", ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    SECTION("float (NaN counts as non-zero)") { check_all_any<B, Float>("basic_all_any_float"); }
    SECTION("int") { check_all_any<B, Int>("basic_all_any_int"); }
    SECTION("bool") { check_all_any<B, Bool>("basic_all_any_bool"); }
    SECTION("size-0 tensor") {
        auto f = fixture("basic_all_any_empty");
        auto x = f.tensor<B, 2>(0);
        EXPECT_SAME(f.output(0), x.all());
        EXPECT_SAME(f.output(1), x.any());
        EXPECT_SAME(f.output(2), x.all_dim(0));
        EXPECT_SAME(f.output(3), x.any_dim(0));
        EXPECT_SAME(f.output(4), x.all_dim(1));
    }
}

// ---------------------------------------------------------------------------------------------
namespace {
template <typename B, typename K>
void check_chunks(const char* name) {
    auto f = fixture(name);
    auto x = f.tensor<B, 2, K>(0);
    const auto chunks = static_cast<std::size_t>(f.param("chunks"));
    const auto dim = static_cast<long>(f.param("dim"));
    auto parts = x.chunk(chunks, dim);
    // As many pieces as torch.chunk gives: the fixture has no output past the last one.
    CHECK_THROWS(f.output(parts.size()));
    for (std::size_t i = 0; i < parts.size(); ++i) {
        INFO("chunk " << i);
        if constexpr (std::is_same_v<K, Float>) EXPECT_CLOSE(f.output(i), parts[i]);
        else EXPECT_SAME(f.output(i), parts[i]);
    }
}
}  // namespace

TEMPLATE_LIST_TEST_CASE("chunk", "[basic][chunk]", ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    SECTION("5 rows into 2: the last is smaller") { check_chunks<B, Float>("basic_chunk_uneven"); }
    SECTION("5 rows into 3") { check_chunks<B, Float>("basic_chunk_three"); }
    SECTION("6 columns into 4 gives 3 chunks, as torch") { check_chunks<B, Float>("basic_chunk_dim1"); }
    SECTION("more chunks than elements") { check_chunks<B, Float>("basic_chunk_more_than_size"); }
    SECTION("int") { check_chunks<B, Int>("basic_chunk_int"); }
    SECTION("zero chunks is an error") {
        auto x = fixture("basic_chunk_uneven").tensor<B, 2>(0);
        CHECK_THROWS_AS(x.chunk(0, 0), ember::ArgumentError);
    }
}

// ---------------------------------------------------------------------------------------------
TEMPLATE_LIST_TEST_CASE("equal / not_equal", "[basic][equal]",
                        ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    SECTION("float, broadcast [3, 4] with [1, 4], NaN never equal") {
        auto f = fixture("basic_equal_float");
        auto a = f.tensor<B, 2>(0), b = f.tensor<B, 2>(1);
        EXPECT_SAME(f.output(0), a.equal(b));
        EXPECT_SAME(f.output(1), a.not_equal(b));
    }
    SECTION("int") {
        auto f = fixture("basic_equal_int");
        auto a = f.tensor<B, 2, Int>(0), b = f.tensor<B, 2, Int>(1);
        EXPECT_SAME(f.output(0), a.equal(b));
        EXPECT_SAME(f.output(1), a.not_equal(b));
    }
    SECTION("bool") {
        auto f = fixture("basic_equal_bool");
        auto a = f.tensor<B, 2, Bool>(0), b = f.tensor<B, 2, Bool>(1);
        EXPECT_SAME(f.output(0), a.equal(b));
        EXPECT_SAME(f.output(1), a.not_equal(b));
    }
    SECTION("shapes that do not broadcast") {
        auto f = fixture("basic_cat_dim1");
        auto a = f.tensor<B, 2>(0), b = f.tensor<B, 2>(1);
        CHECK_THROWS_AS(a.equal(b), ember::ShapeError);
    }
}

// ---------------------------------------------------------------------------------------------
TEMPLATE_LIST_TEST_CASE("expand", "[basic][expand]", ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    auto f = fixture("basic_expand");
    auto x = f.tensor<B, 2>(0);  // [3, 1]
    auto y = f.tensor<B, 1>(1);  // [4]
    auto z = f.tensor<B, 2>(2);  // [2, 2]
    SECTION("size-1 dim to 4") { EXPECT_CLOSE(f.output(0), x.template expand<2>(Shape{3, 4})); }
    SECTION("to a higher rank") { EXPECT_CLOSE(f.output(1), y.template expand<3>(Shape{2, 3, 4})); }
    SECTION("expanded view as an operand") {
        EXPECT_CLOSE(f.output(2), z + x.slice({Slice{0, 2}}).template expand<2>(Shape{2, 2}) * 2.0);
    }
    SECTION("int") {
        auto g = fixture("basic_expand_int");
        EXPECT_SAME(g.output(0), g.tensor<B, 2, Int>(0).template expand<2>(Shape{2, 3}));
    }
    SECTION("bool") {
        auto g = fixture("basic_expand_bool");
        EXPECT_SAME(g.output(0), g.tensor<B, 2, Bool>(0).template expand<2>(Shape{2, 3}));
    }
    SECTION("a dim that is not 1 cannot change") {
        CHECK_THROWS_AS(x.template expand<2>(Shape{2, 4}), ember::ShapeError);
    }
}

TEMPLATE_LIST_TEST_CASE("flatten", "[basic][flatten]", ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    auto f = fixture("basic_flatten");
    auto x = f.tensor<B, 3>(0);  // [2, 3, 4]
    SECTION("dims 0..=1") { EXPECT_CLOSE(f.output(0), x.template flatten<2>(0, 1)); }
    SECTION("dims 1..=2") { EXPECT_CLOSE(f.output(1), x.template flatten<2>(1, 2)); }
    SECTION("all dims") { EXPECT_CLOSE(f.output(2), x.template flatten<1>(0, 2)); }
    SECTION("negative dims") { EXPECT_CLOSE(f.output(3), x.template flatten<2>(-2, -1)); }
    SECTION("a permuted input") {
        EXPECT_CLOSE(f.output(4), x.permute({2, 0, 1}).template flatten<2>(0, 1));
    }
    SECTION("int") {
        auto g = fixture("basic_flatten_int");
        EXPECT_SAME(g.output(0), g.tensor<B, 3, Int>(0).template flatten<2>(0, 1));
    }
    SECTION("start after end") { CHECK_THROWS_AS(x.template flatten<2>(2, 1), ember::DimError); }
}

TEMPLATE_LIST_TEST_CASE("flip", "[basic][flip]", ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    auto f = fixture("basic_flip");
    auto x = f.tensor<B, 3>(0);  // [2, 3, 4]
    SECTION("dim 0") { EXPECT_CLOSE(f.output(0), x.flip({0})); }
    SECTION("last dim") { EXPECT_CLOSE(f.output(1), x.flip({2})); }
    SECTION("two dims") { EXPECT_CLOSE(f.output(2), x.flip({0, 2})); }
    SECTION("all dims, negative spelled") { EXPECT_CLOSE(f.output(3), x.flip({-1, 0, 1})); }
    SECTION("a permuted input") { EXPECT_CLOSE(f.output(4), x.permute({1, 0, 2}).flip({1})); }
    SECTION("no dims") { EXPECT_CLOSE(f.input(0), x.flip(std::span<const long>{})); }
    SECTION("int and bool") {
        auto g = fixture("basic_flip_int_bool");
        EXPECT_SAME(g.output(0), g.tensor<B, 2, Int>(0).flip({1}));
        EXPECT_SAME(g.output(1), g.tensor<B, 2, Bool>(1).flip({0, 1}));
    }
}

TEMPLATE_LIST_TEST_CASE("narrow", "[basic][narrow]", ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    auto f = fixture("basic_narrow");
    auto x = f.tensor<B, 2>(0);  // [4, 5]
    SECTION("rows") { EXPECT_CLOSE(f.output(0), x.narrow(0, 1, 2)); }
    SECTION("columns") { EXPECT_CLOSE(f.output(1), x.narrow(1, 2, 3)); }
    SECTION("negative dim") { EXPECT_CLOSE(f.output(2), x.narrow(-1, 0, 1)); }
    SECTION("length 0 at the end") { EXPECT_CLOSE(f.output(3), x.narrow(0, 4, 0)); }
    SECTION("int") {
        auto g = fixture("basic_narrow_int");
        EXPECT_SAME(g.output(0), g.tensor<B, 2, Int>(0).narrow(1, 1, 2));
    }
    SECTION("out of range") { CHECK_THROWS_AS(x.narrow(0, 3, 2), ember::IndexError); }
}

TEMPLATE_LIST_TEST_CASE("permute / movedim", "[basic][permute][movedim]",
                        ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    SECTION("permute") {
        auto f = fixture("basic_permute");
        auto x = f.tensor<B, 3>(0), y = f.tensor<B, 3>(1);
        SECTION("(2, 0, 1)") { EXPECT_CLOSE(f.output(0), x.permute({2, 0, 1})); }
        SECTION("(1, 0, 2)") { EXPECT_CLOSE(f.output(1), x.permute({1, 0, 2})); }
        SECTION("identity") { EXPECT_CLOSE(f.output(2), x.permute({0, 1, 2})); }
        SECTION("negative axes") { EXPECT_CLOSE(f.output(0), x.permute({-1, -3, -2})); }
        SECTION("permuted view as an operand") { EXPECT_CLOSE(f.output(3), x.permute({2, 0, 1}) + y); }
        SECTION("permute of a permute") {
            EXPECT_CLOSE(f.output(4), x.permute({1, 2, 0}).permute({2, 0, 1}));
        }
        SECTION("an axis twice") { CHECK_THROWS_AS(x.permute({0, 0, 1}), ember::Error); }
        SECTION("int and bool") {
            auto g = fixture("basic_permute_int_bool");
            EXPECT_SAME(g.output(0), g.tensor<B, 2, Int>(0).permute({1, 0}));
            EXPECT_SAME(g.output(1), g.tensor<B, 2, Bool>(1).permute({1, 0}));
        }
    }
    SECTION("movedim") {
        auto f = fixture("basic_movedim");
        auto x = f.tensor<B, 3>(0);
        SECTION("0 to 2") { EXPECT_CLOSE(f.output(0), x.movedim(0, 2)); }
        SECTION("-1 to 0") { EXPECT_CLOSE(f.output(1), x.movedim(-1, 0)); }
        SECTION("1 to 1") { EXPECT_CLOSE(f.output(2), x.movedim(1, 1)); }
    }
}

TEMPLATE_LIST_TEST_CASE("repeat / repeat_dim", "[basic][repeat]",
                        ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    SECTION("repeat_dim") {
        auto f = fixture("basic_repeat_dim");
        auto x = f.tensor<B, 2>(0);  // [2, 3]
        SECTION("dim 0, 3 times") { EXPECT_CLOSE(f.output(0), x.repeat_dim(0, 3)); }
        SECTION("dim 1, 2 times") { EXPECT_CLOSE(f.output(1), x.repeat_dim(1, 2)); }
        SECTION("negative dim, once") { EXPECT_CLOSE(f.output(2), x.repeat_dim(-1, 1)); }
        SECTION("zero times") { EXPECT_CLOSE(f.output(3), x.repeat_dim(0, 0)); }
        SECTION("a transposed input") { EXPECT_CLOSE(f.output(4), x.transpose().repeat_dim(0, 2)); }
    }
    SECTION("repeat") {
        auto f = fixture("basic_repeat");
        auto x = f.tensor<B, 2>(0);
        SECTION("(2, 1)") { EXPECT_CLOSE(f.output(0), x.repeat({2, 1})); }
        SECTION("(1, 3)") { EXPECT_CLOSE(f.output(1), x.repeat({1, 3})); }
        SECTION("(2, 2)") { EXPECT_CLOSE(f.output(2), x.repeat({2, 2})); }
    }
    SECTION("int and bool") {
        auto g = fixture("basic_repeat_int_bool");
        EXPECT_SAME(g.output(0), g.tensor<B, 2, Int>(0).repeat({2, 3}));
        EXPECT_SAME(g.output(1), g.tensor<B, 2, Bool>(1).repeat_dim(0, 2));
    }
}

TEMPLATE_LIST_TEST_CASE("reshape", "[basic][reshape]", ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    auto f = fixture("basic_reshape");
    auto x = f.tensor<B, 3>(0);  // [2, 3, 4]
    auto y = f.tensor<B, 2>(1);  // [3, 4]
    SECTION("-1 first") { EXPECT_CLOSE(f.output(0), x.template reshape<2>({-1, 4})); }
    SECTION("-1 last") { EXPECT_CLOSE(f.output(1), x.template reshape<2>({4, -1})); }
    SECTION("to rank 1") { EXPECT_CLOSE(f.output(2), x.template reshape<1>({24})); }
    SECTION("-1 in the middle") { EXPECT_CLOSE(f.output(3), x.template reshape<3>({2, -1, 2})); }
    SECTION("0 keeps the dim") { EXPECT_CLOSE(f.output(3), x.template reshape<3>({0, -1, 2})); }
    SECTION("a leading 1") { EXPECT_CLOSE(f.output(4), x.template reshape<2>({1, 24})); }
    SECTION("from a Shape") { EXPECT_CLOSE(f.output(0), x.template reshape<2>(Shape{6, 4})); }
    SECTION("a transposed input is read in logical order") {
        EXPECT_CLOSE(f.output(5), y.transpose().template reshape<1>({-1}));
        EXPECT_CLOSE(f.output(6), y.transpose().template reshape<2>({2, 6}));
    }
    SECTION("int and bool") {
        auto g = fixture("basic_reshape_int_bool");
        EXPECT_SAME(g.output(0), g.tensor<B, 2, Int>(0).template reshape<2>({3, 2}));
        EXPECT_SAME(g.output(1), g.tensor<B, 2, Bool>(1).template reshape<1>({-1}));
    }
    SECTION("bad shapes") {
        CHECK_THROWS_AS(x.template reshape<2>({5, -1}), ember::ShapeError);
        CHECK_THROWS_AS(x.template reshape<2>({-1, -1}), ember::ShapeError);
        CHECK_THROWS_AS(x.template reshape<2>({7, 4}), ember::ShapeError);
    }
}

TEMPLATE_LIST_TEST_CASE("slice", "[basic][slice]", ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    auto f = fixture("basic_slice");
    auto x = f.tensor<B, 2>(0);   // [4, 5]
    auto x3 = f.tensor<B, 3>(1);  // [3, 4, 2]
    SECTION("ranges on both dims") { EXPECT_CLOSE(f.output(0), x.slice({{0, 2}, {1, 3}})); }
    SECTION("ranges as pairs") {
        EXPECT_CLOSE(f.output(0), x.slice(std::array<std::pair<long, long>, 2>{{{0, 2}, {1, 3}}}));
    }
    SECTION("ranges as a run-time list") {
        std::vector<Slice> r{Slice{0, 2}, Slice{1, 3}};
        EXPECT_CLOSE(f.output(0), x.slice(std::span<const Slice>(r)));
    }
    SECTION("fewer ranges than dims") { EXPECT_CLOSE(f.output(1), x.slice({Slice{1}})); }
    SECTION("step 2") { EXPECT_CLOSE(f.output(2), x.slice({Slice{0, 4, 2}})); }
    SECTION("steps on both dims") {
        EXPECT_CLOSE(f.output(3), x.slice({Slice{0, kEnd, 2}, Slice{1, kEnd, 2}}));
    }
    SECTION("negative start") { EXPECT_CLOSE(f.output(4), x.slice({Slice{-2}})); }
    SECTION("negative ends") { EXPECT_CLOSE(f.output(5), x.slice({{0, -1}, {-3, -1}})); }
    // As in PyTorch and Burn, bounds past either end are clamped to it (DESIGN.md "Bad input"):
    // each clamped range is the in-range one it means.
    SECTION("ends past the size are clamped") {
        const auto y = x.slice({{1, 100}, {3, 100}});
        CHECK(y.dims() == std::array<std::size_t, 2>{3, 2});  // x is [4, 5]
        EXPECT_CLOSE(x.slice({Slice{1, kEnd}, Slice{3, kEnd}}).into_data(), y);
    }
    SECTION("starts before the beginning are clamped") {
        EXPECT_CLOSE(x.slice({{0, 2}}).into_data(), x.slice({{-100, 2}}));
        EXPECT_CLOSE(x.slice({Slice{0, kEnd, 2}}).into_data(), x.slice({Slice{-100, 100, 2}}));
    }
    SECTION("a range wholly past the end is empty") {
        CHECK(x.slice({{100, 200}}).dims()[0] == 0);
        CHECK(x.slice({{-100, -90}}).dims()[0] == 0);
    }
    SECTION("a transposed input with a step") {
        EXPECT_CLOSE(f.output(7), x.transpose().slice({Slice{1, 3}, Slice{0, kEnd, 2}}));
    }
    SECTION("a slice of a slice") { EXPECT_CLOSE(f.output(8), x.slice({Slice{1}}).slice({Slice{0}, Slice{2}})); }
    SECTION("empty range") { EXPECT_CLOSE(f.output(9), x.slice({{2, 2}})); }
    SECTION("rank 3, two ranges") { EXPECT_CLOSE(f.output(10), x3.slice({Slice{1}, Slice{0, 2}})); }
    SECTION("a single column") { EXPECT_CLOSE(f.output(11), x.slice({Slice{0}, Slice{4, 5}})); }
    SECTION("int and bool") {
        auto g = fixture("basic_slice_int_bool");
        EXPECT_SAME(g.output(0), g.tensor<B, 2, Int>(0).slice({Slice{1, 3}, Slice{0, kEnd, 2}}));
        EXPECT_SAME(g.output(1), g.tensor<B, 2, Bool>(1).slice({Slice{0, kEnd, 3}, Slice{1}}));
    }
}

TEMPLATE_LIST_TEST_CASE("slice_assign", "[basic][slice_assign]",
                        ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    auto f = fixture("basic_slice_assign");
    auto x = f.tensor<B, 2>(0);  // [4, 5]
    auto v1 = f.tensor<B, 2>(1), v2 = f.tensor<B, 2>(2), v3 = f.tensor<B, 2>(3);
    SECTION("a block") { EXPECT_CLOSE(f.output(0), x.slice_assign({{1, 3}, {2, 4}}, v1)); }
    SECTION("with steps") {
        EXPECT_CLOSE(f.output(1), x.slice_assign({Slice{0, kEnd, 2}, Slice{1, kEnd, 2}}, v1));
    }
    SECTION("negative indices") { EXPECT_CLOSE(f.output(2), x.slice_assign({Slice{-1}, Slice{0, -3}}, v3)); }
    SECTION("touching the last column") { EXPECT_CLOSE(f.output(3), x.slice_assign({{0, 2}, {2, 5}}, v2)); }
    SECTION("a run-time list of ranges") {
        std::vector<Slice> r{Slice{1, 3}, Slice{2, 4}};
        EXPECT_CLOSE(f.output(0), x.slice_assign(std::span<const Slice>(r), v1));
    }
    SECTION("an empty range changes nothing") {
        EXPECT_CLOSE(f.input(0), x.slice_assign({{2, 2}}, x.slice({{2, 2}})));
    }
    SECTION("the source tensor is unchanged") {
        auto y = x.slice_assign({{1, 3}, {2, 4}}, v1);
        EXPECT_CLOSE(f.input(0), x);
        EXPECT_CLOSE(f.output(0), y);
    }
    SECTION("into a transposed tensor") {
        EXPECT_CLOSE(f.output(0), x.transpose().slice_assign({{2, 4}, {1, 3}}, v1.transpose()).transpose());
    }
    SECTION("values of the wrong shape") {
        CHECK_THROWS_AS(x.slice_assign({{1, 3}, {2, 4}}, v2), ember::ShapeError);
    }
    SECTION("int and bool") {
        auto g = fixture("basic_slice_assign_int_bool");
        EXPECT_SAME(g.output(0), g.tensor<B, 2, Int>(0).slice_assign({Slice{1}, Slice{0, kEnd, 2}},
                                                                      g.tensor<B, 2, Int>(1)));
        EXPECT_SAME(g.output(1), g.tensor<B, 2, Bool>(2).slice_assign({Slice{0, kEnd, 2}},
                                                                       g.tensor<B, 2, Bool>(3)));
    }
}

TEMPLATE_LIST_TEST_CASE("squeeze / unsqueeze", "[basic][squeeze][unsqueeze]",
                        ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    SECTION("squeeze") {
        auto f = fixture("basic_squeeze");
        auto x = f.tensor<B, 3>(0);  // [2, 1, 3]
        auto y = f.tensor<B, 2>(1);  // [1, 3]
        auto z = f.tensor<B, 2>(2);  // [3, 1]
        SECTION("middle dim") { EXPECT_CLOSE(f.output(0), x.template squeeze<2>(1)); }
        SECTION("leading dim") { EXPECT_CLOSE(f.output(1), y.template squeeze<1>(0)); }
        SECTION("negative dim") { EXPECT_CLOSE(f.output(2), z.template squeeze<1>(-1)); }
        SECTION("squeeze_dim alias") { EXPECT_CLOSE(f.output(0), x.template squeeze_dim<2>(1)); }
        SECTION("a dim that is not 1") { CHECK_THROWS_AS(x.template squeeze<2>(0), ember::ShapeError); }
    }
    SECTION("unsqueeze") {
        auto f = fixture("basic_unsqueeze");
        auto x = f.tensor<B, 2>(0);  // [3, 4]
        SECTION("unsqueeze() adds a leading dim") { EXPECT_CLOSE(f.output(0), x.unsqueeze()); }
        SECTION("dim 1") { EXPECT_CLOSE(f.output(1), x.template unsqueeze_dim<3>(1)); }
        SECTION("dim -1") { EXPECT_CLOSE(f.output(2), x.template unsqueeze_dim<3>(-1)); }
        SECTION("dim 2 (the end)") { EXPECT_CLOSE(f.output(3), x.template unsqueeze_dim<3>(2)); }
        SECTION("dim -3") { EXPECT_CLOSE(f.output(4), x.template unsqueeze_dim<3>(-3)); }
        SECTION("out of range") { CHECK_THROWS_AS(x.template unsqueeze_dim<3>(3), ember::DimError); }
        SECTION("int and bool") {
            auto g = fixture("basic_unsqueeze_int_bool");
            EXPECT_SAME(g.output(0), g.tensor<B, 1, Int>(0).template unsqueeze_dim<2>(1));
            EXPECT_SAME(g.output(1), g.tensor<B, 1, Bool>(1).unsqueeze());
        }
    }
}

// ---------------------------------------------------------------------------------------------
TEMPLATE_LIST_TEST_CASE("creation, access and transfer", "[basic][data]",
                        ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    using T2 = ember::Tensor<B, 2>;
    const ember::Device<B> device{};
    const TensorData data({1.f, -2.f, 3.5f, 4.f, 0.f, -0.25f}, Shape{2, 3});

    SECTION("empty has the shape asked for") {
        auto e = T2::empty(Shape{2, 3}, device);
        CHECK(e.dims() == std::array<std::size_t, 2>{2, 3});
        CHECK(ember::Tensor<B, 3, Int>::empty(Shape{0, 2, 1}).shape() == Shape{0, 2, 1});
        CHECK(ember::Tensor<B, 1, Bool>::empty(Shape{4}).num_elements() == 4);
        CHECK_THROWS_AS(T2::empty(Shape{2}, device), ember::ShapeError);
    }
    SECTION("dims and shape") {
        auto t = T2::from_data(data, device);
        CHECK(t.dims() == std::array<std::size_t, 2>{2, 3});
        CHECK(t.shape() == Shape{2, 3});
        CHECK(t.num_elements() == 6);
        CHECK(t.transpose().dims() == std::array<std::size_t, 2>{3, 2});
    }
    SECTION("to_data and into_data give the values back") {
        auto t = T2::from_data(data, device);
        EXPECT_CLOSE(data, t);  // into_data
        auto d = t.to_data();
        CHECK(d.shape() == Shape{2, 3});
        CHECK(d.template to_vec<float>() == std::vector<float>{1.f, -2.f, 3.5f, 4.f, 0.f, -0.25f});
        CHECK(t.to_data() == d);  // t is still usable after to_data
    }
    SECTION("from_data with the wrong rank") {
        using T3 = ember::Tensor<B, 3>;
        CHECK_THROWS_AS(T3::from_data(data, device), ember::ShapeError);
    }
    SECTION("into_primitive and from_primitive round-trip") {
        auto t = T2::from_data(data, device);
        auto p = std::move(t).into_primitive();
        auto back = T2::from_primitive(std::move(p));
        EXPECT_CLOSE(data, back);
        auto i = ember::Tensor<B, 1, Int>::from_ints({4, -5, 6});
        auto ib = ember::Tensor<B, 1, Int>::from_primitive(i.into_primitive());
        EXPECT_SAME(TensorData(std::vector<std::int64_t>{4, -5, 6}, Shape{3}), ib);
    }
    SECTION("device and to_device") {
        auto t = T2::from_data(data, device);
        CHECK(t.device() == device);
        auto moved = t.to_device(device);
        CHECK(moved.device() == device);
        EXPECT_CLOSE(data, moved);
        auto b = t.greater_elem(0.0).to_device(device);
        EXPECT_SAME(TensorData({true, false, true, true, false, false}, Shape{2, 3}), b);
    }
    SECTION("into_scalar") {
        CHECK(ember::Tensor<B, 1>::from_floats({2.5f}).into_scalar() == 2.5);
        CHECK(ember::Tensor<B, 2>::from_data(TensorData({-7.f}, Shape{1, 1})).into_scalar() == -7.0);
        CHECK(ember::Tensor<B, 1, Int>::from_ints({-42}).into_scalar() == -42);
        CHECK(ember::Tensor<B, 1>::from_floats({1.f, 2.f, 3.f}).sum().into_scalar() == 6.0);
        CHECK(ember::Tensor<B, 1, Bool>::from_data(TensorData({true}, Shape{1})).into_scalar() == true);
        CHECK_THROWS_AS(T2::from_data(data).into_scalar(), ember::ShapeError);
    }
    SECTION("a copied handle shares nothing observable") {
        auto t = T2::from_data(data, device);
        auto u = t;  // Burn's clone()
        auto w = std::move(u) + 1.0;
        EXPECT_CLOSE(data, t);
        EXPECT_CLOSE(TensorData({2.f, -1.f, 4.5f, 5.f, 1.f, 0.75f}, Shape{2, 3}), w);
    }
}

}  // namespace test_basic_ops
