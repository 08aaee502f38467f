// Bad input: every broken precondition throws the right subclass of ember::Error, and its message
// names the op and the offending shapes or values.
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "harness.hpp"

namespace test_errors {

using Catch::Contains;

namespace {
template <typename E>
constexpr bool is_ember_error = std::is_base_of_v<ember::Error, E> &&
                                std::is_base_of_v<std::runtime_error, E>;
}  // namespace

TEST_CASE("errors: every class derives from ember::Error and std::runtime_error", "[errors]") {
    static_assert(std::is_base_of_v<std::runtime_error, ember::Error>);
    static_assert(is_ember_error<ember::ShapeError>);
    static_assert(is_ember_error<ember::DimError>);
    static_assert(is_ember_error<ember::IndexError>);
    static_assert(is_ember_error<ember::DTypeError>);
    static_assert(is_ember_error<ember::ArgumentError>);
    static_assert(is_ember_error<ember::DeviceError>);
    static_assert(is_ember_error<ember::FormatError>);

    SECTION("caught as the base classes, message kept") {
        auto check = [](auto error) {
            try {
                throw error;
            } catch (const ember::Error& e) {
                CHECK(std::string(e.what()) == "msg");
            }
            try {
                throw error;
            } catch (const std::runtime_error& e) {
                CHECK(std::string(e.what()) == "msg");
            }
        };
        check(ember::Error("msg"));
        check(ember::ShapeError("msg"));
        check(ember::DimError("msg"));
        check(ember::IndexError("msg"));
        check(ember::DTypeError("msg"));
        check(ember::ArgumentError("msg"));
        check(ember::DeviceError("msg"));
        check(ember::FormatError("msg"));
    }
    SECTION("the classes are distinct") {
        REQUIRE_THROWS_AS(throw ember::ShapeError("x"), ember::ShapeError);
        bool caught_as_dim = false;
        try {
            throw ember::ShapeError("x");
        } catch (const ember::DimError&) {
            caught_as_dim = true;
        } catch (const ember::Error&) {
        }
        CHECK_FALSE(caught_as_dim);
    }
    SECTION("an error raised by an op is catchable as ember::Error and std::runtime_error") {
        using T = ember::Tensor<ember::Cpu, 2>;
        auto a = T::zeros({2, 3});
        auto b = T::zeros({4, 3});
        REQUIRE_THROWS_AS(a + b, ember::Error);
        REQUIRE_THROWS_AS(a + b, std::runtime_error);
    }
}

TEMPLATE_LIST_TEST_CASE("errors: ShapeError", "[errors]", ember::test::TestBackends) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    using T2 = ember::Tensor<B, 2>;

    SECTION("the Int mean of no elements") {
        auto t = ember::Tensor<B, 2, ember::Int>::zeros({3, 0});
        REQUIRE_THROWS_AS(t.mean(), ember::ShapeError);
        REQUIRE_THROWS_WITH(t.mean(), Contains("mean") && Contains("[3, 0]"));
        REQUIRE_THROWS_AS(t.mean_dim(1), ember::ShapeError);
    }
    SECTION("elementwise shapes that do not broadcast") {
        auto a = T2::zeros({2, 3});
        auto b = T2::zeros({4, 3});
        REQUIRE_THROWS_AS(a + b, ember::ShapeError);
        REQUIRE_THROWS_WITH(a + b, Contains("add") && Contains("[2, 3]") && Contains("[4, 3]"));
        REQUIRE_THROWS_WITH(a * b, Contains("mul") && Contains("[2, 3]") && Contains("[4, 3]"));
        REQUIRE_THROWS_AS(a.equal(b), ember::ShapeError);
    }
    SECTION("matmul with mismatched inner dims") {
        auto a = T2::zeros({2, 3});
        auto b = T2::zeros({4, 5});
        REQUIRE_THROWS_AS(a.matmul(b), ember::ShapeError);
        REQUIRE_THROWS_WITH(a.matmul(b), Contains("matmul") && Contains("[2, 3]") && Contains("[4, 5]"));
    }
    SECTION("matmul with batch dims that do not broadcast") {
        auto a = ember::Tensor<B, 3>::zeros({2, 2, 3});
        auto b = ember::Tensor<B, 3>::zeros({3, 3, 4});
        REQUIRE_THROWS_AS(a.matmul(b), ember::ShapeError);
        REQUIRE_THROWS_WITH(a.matmul(b), Contains("matmul") && Contains("[2, 2, 3]") && Contains("[3, 3, 4]"));
    }
    SECTION("cat of tensors that differ outside the cat dim") {
        std::vector<T2> ts{T2::zeros({2, 3}), T2::zeros({2, 4})};
        REQUIRE_THROWS_AS(T2::cat(ts, 0), ember::ShapeError);
        REQUIRE_THROWS_WITH(T2::cat(ts, 0), Contains("cat") && Contains("[2, 3]") && Contains("[2, 4]"));
        CHECK_NOTHROW(T2::cat(ts, 1));
    }
    SECTION("reshape to a different element count") {
        auto t = T2::zeros({2, 3});
        REQUIRE_THROWS_AS(t.template reshape<2>({4, 2}), ember::ShapeError);
        REQUIRE_THROWS_WITH(t.template reshape<2>({4, 2}),
                            Contains("reshape") && Contains("[2, 3]") && Contains("[4, 2]"));
        REQUIRE_THROWS_AS(t.template reshape<2>({-1, 4}), ember::ShapeError);
    }
    SECTION("squeeze of a dim whose size is not 1") {
        auto t = T2::zeros({2, 3});
        REQUIRE_THROWS_AS(t.template squeeze<1>(0), ember::ShapeError);
        REQUIRE_THROWS_WITH(t.template squeeze<1>(1), Contains("squeeze") && Contains("[2, 3]"));
    }
    SECTION("from_data with the wrong rank") {
        ember::TensorData d({1.f, 2.f, 3.f}, {3});
        REQUIRE_THROWS_AS(T2::from_data(d), ember::ShapeError);
        REQUIRE_THROWS_WITH(T2::from_data(d), Contains("from_data") && Contains("[3]"));
    }
    SECTION("TensorData whose values do not fill the shape") {
        REQUIRE_THROWS_AS(ember::TensorData({1.f, 2.f, 3.f}, {2, 2}), ember::ShapeError);
        REQUIRE_THROWS_WITH(ember::TensorData({1.f, 2.f, 3.f}, {2, 2}),
                            Contains("TensorData") && Contains("3") && Contains("[2, 2]"));
        REQUIRE_THROWS_AS(ember::TensorData(std::vector<std::byte>(5), {2}, ember::DType::F32),
                          ember::ShapeError);
    }
    SECTION("conv with channels not divisible by groups") {
        auto x = ember::Tensor<B, 4>::zeros({1, 3, 5, 5});
        auto w = ember::Tensor<B, 4>::zeros({4, 1, 3, 3});
        ember::ConvOptions<2> o;
        o.groups = 2;
        REQUIRE_THROWS_AS(ember::module::conv2d(x, w, std::nullopt, o), ember::ShapeError);
        REQUIRE_THROWS_WITH(ember::module::conv2d(x, w, std::nullopt, o),
                            Contains("conv2d") && Contains("groups") && Contains("[1, 3, 5, 5]"));
    }
    SECTION("conv with a weight whose input channels do not match") {
        auto x = ember::Tensor<B, 3>::zeros({1, 3, 8});
        auto w = ember::Tensor<B, 3>::zeros({2, 4, 3});
        REQUIRE_THROWS_AS(ember::module::conv1d(x, w), ember::ShapeError);
        REQUIRE_THROWS_WITH(ember::module::conv1d(x, w),
                            Contains("conv1d") && Contains("[2, 4, 3]") && Contains("[1, 3, 8]"));
    }
    SECTION("pooling kernel bigger than the input") {
        auto x = ember::Tensor<B, 4>::zeros({1, 1, 2, 2});
        REQUIRE_THROWS_AS(ember::module::max_pool2d(x, {3, 3}, {1, 1}), ember::ShapeError);
        REQUIRE_THROWS_WITH(ember::module::max_pool2d(x, {3, 3}, {1, 1}),
                            Contains("max_pool2d") && Contains("[1, 1, 2, 2]"));
        auto x1 = ember::Tensor<B, 3>::zeros({1, 2, 2});
        REQUIRE_THROWS_AS(ember::module::avg_pool1d(x1, 4, 1), ember::ShapeError);
        REQUIRE_THROWS_WITH(ember::module::avg_pool1d(x1, 4, 1),
                            Contains("avg_pool1d") && Contains("4") && Contains("[1, 2, 2]"));
    }
}

TEMPLATE_LIST_TEST_CASE("errors: DimError", "[errors]", ember::test::TestBackends) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    using T2 = ember::Tensor<B, 2>;
    auto t = T2::zeros({2, 3});

    SECTION("permute with an axis out of range") {
        REQUIRE_THROWS_AS(t.permute({0, 2}), ember::DimError);
        REQUIRE_THROWS_WITH(t.permute({0, 2}), Contains("permute") && Contains("2"));
    }
    SECTION("permute with a repeated axis") {
        REQUIRE_THROWS_AS(t.permute({1, 1}), ember::DimError);
        REQUIRE_THROWS_WITH(t.permute({1, 1}), Contains("permute"));
    }
    SECTION("sum_dim with a dim out of range") {
        REQUIRE_THROWS_AS(t.sum_dim(2), ember::DimError);
        REQUIRE_THROWS_WITH(t.sum_dim(2), Contains("sum_dim") && Contains("dim 2") && Contains("rank 2"));
        REQUIRE_THROWS_AS(t.sum_dim(-3), ember::DimError);
        REQUIRE_THROWS_WITH(t.sum_dim(-3), Contains("sum_dim") && Contains("-3"));
    }
    SECTION("squeeze with a dim out of range") {
        auto u = ember::Tensor<B, 2>::zeros({1, 3});
        REQUIRE_THROWS_AS(u.template squeeze<1>(2), ember::DimError);
        REQUIRE_THROWS_WITH(u.template squeeze<1>(2), Contains("squeeze"));
    }
    SECTION("cat along a dim out of range") {
        REQUIRE_THROWS_AS(T2::cat({t, t}, 2), ember::DimError);
        REQUIRE_THROWS_WITH(T2::cat({t, t}, 2), Contains("cat"));
    }
    SECTION("Shape::dim and normalize_dim") {
        REQUIRE_THROWS_AS(ember::Shape({2, 3}).dim(2), ember::DimError);
        REQUIRE_THROWS_WITH(ember::normalize_dim(5, 3, "my_op"),
                            Contains("my_op") && Contains("5") && Contains("rank 3"));
    }
}

TEMPLATE_LIST_TEST_CASE("errors: IndexError", "[errors]", ember::test::TestBackends) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    using T2 = ember::Tensor<B, 2>;
    using I1 = ember::Tensor<B, 1, ember::Int>;
    using I2 = ember::Tensor<B, 2, ember::Int>;
    using F1 = ember::Tensor<B, 1>;
    auto t = T2::zeros({2, 3});

    SECTION("slice beyond the dim is clamped, more ranges than dims are an error") {
        // PyTorch's rule (DESIGN.md "Bad input"): t[0:5] of a 2-long dim is the whole dim.
        CHECK(t.slice({ember::Slice{0, 5}}).dims() == std::array<std::size_t, 2>{2, 3});
        CHECK(t.slice({ember::Slice{0, 2}, ember::Slice{-4, 2}}).dims() ==
              std::array<std::size_t, 2>{2, 2});
        const std::vector<ember::Slice> three(3, ember::Slice{0, 1});
        REQUIRE_THROWS_AS(t.slice(std::span<const ember::Slice>(three)), ember::DimError);
        REQUIRE_THROWS_WITH(t.slice(std::span<const ember::Slice>(three)),
                            Contains("slice") && Contains("3 ranges"));
    }
    SECTION("narrow beyond the dim") {
        REQUIRE_THROWS_AS(t.narrow(1, 2, 2), ember::IndexError);
        REQUIRE_THROWS_WITH(t.narrow(1, 2, 2), Contains("narrow") && Contains("2") && Contains("size 3"));
    }
    SECTION("gather with an index out of range") {
        auto idx = I2::from_data(ember::TensorData(std::vector<std::int64_t>{0, 1, 3, 0, 0, 0}, {2, 3}));
        REQUIRE_THROWS_AS(t.gather(1, idx), ember::IndexError);
        REQUIRE_THROWS_WITH(t.gather(1, idx), Contains("gather") && Contains("3") && Contains("size 3"));
        auto neg = I2::from_data(ember::TensorData(std::vector<std::int64_t>{0, 1, -1, 0, 0, 0}, {2, 3}));
        REQUIRE_THROWS_AS(t.gather(1, neg), ember::IndexError);
    }
    SECTION("select with an index out of range") {
        auto idx = I1::from_ints({0, 2});
        REQUIRE_THROWS_AS(t.select(0, idx), ember::IndexError);
        REQUIRE_THROWS_WITH(t.select(0, idx), Contains("select") && Contains("2") && Contains("size 2"));
    }
    SECTION("one_hot with a class out of range") {
        auto classes = I1::from_ints({0, 5, 1});
        REQUIRE_THROWS_AS(classes.one_hot(3), ember::IndexError);
        REQUIRE_THROWS_WITH(classes.one_hot(3), Contains("one_hot") && Contains("5") && Contains("3"));
        REQUIRE_THROWS_AS(I1::from_ints({-1}).one_hot(3), ember::IndexError);
        REQUIRE_THROWS_AS(F1::one_hot(3, 3), ember::IndexError);
    }
    SECTION("TensorData::value past the end") {
        ember::TensorData d({1.f, 2.f}, {2});
        REQUIRE_THROWS_AS(d.value(2), ember::IndexError);
    }
}

TEMPLATE_LIST_TEST_CASE("errors: DTypeError", "[errors]", ember::test::TestBackends) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;

    SECTION("as_slice of another element type") {
        ember::TensorData d({1.f, 2.f}, {2});
        REQUIRE_THROWS_AS(d.as_slice<double>(), ember::DTypeError);
        REQUIRE_THROWS_WITH(d.as_slice<double>(), Contains("as_slice") && Contains("f32") && Contains("f64"));
        REQUIRE_THROWS_AS(d.as_slice<std::int64_t>(), ember::DTypeError);
        ember::TensorData i(std::vector<std::int64_t>{1, 2}, {2});
        REQUIRE_THROWS_WITH(i.as_mut_slice<float>(), Contains("as_mut_slice") && Contains("i64"));
        CHECK(d.as_slice<float>().size() == 2);
    }
    SECTION("casting a float tensor to an int dtype") {
        auto t = ember::Tensor<B, 1>::from_floats({1.f});
        REQUIRE_THROWS_AS(t.cast(ember::DType::I64), ember::DTypeError);
        REQUIRE_THROWS_WITH(t.cast(ember::DType::I64), Contains("cast") && Contains("i64"));
    }
}

TEMPLATE_LIST_TEST_CASE("errors: ArgumentError", "[errors]", ember::test::TestBackends) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    using T1 = ember::Tensor<B, 1>;
    using I1 = ember::Tensor<B, 1, ember::Int>;

    SECTION("cat of an empty list") {
        REQUIRE_THROWS_AS(T1::cat({}, 0), ember::ArgumentError);
        REQUIRE_THROWS_WITH(T1::cat({}, 0), Contains("cat"));
        REQUIRE_THROWS_AS(T1::stack({}, 0), ember::ArgumentError);
    }
    SECTION("integer division by zero") {
        auto a = I1::from_ints({4, 5});
        auto z = I1::from_ints({1, 0});
        REQUIRE_THROWS_AS(a / z, ember::ArgumentError);
        REQUIRE_THROWS_WITH(a / z, Contains("div") && Contains("zero"));
        REQUIRE_THROWS_AS(a / 0, ember::ArgumentError);
        REQUIRE_THROWS_AS(a % 0, ember::ArgumentError);
        // Float division by zero is not an error (inf, as IEEE 754).
        CHECK_NOTHROW(T1::from_floats({1.f}) / 0.0);
    }
    SECTION("topk with k larger than the dim") {
        auto t = T1::from_floats({1.f, 2.f, 3.f});
        REQUIRE_THROWS_AS(t.topk(5, 0), ember::ArgumentError);
        REQUIRE_THROWS_WITH(t.topk(5, 0), Contains("topk") && Contains("5") && Contains("[3]"));
        CHECK_NOTHROW(t.topk(3, 0));
    }
    SECTION("clamp with min > max") {
        auto t = T1::from_floats({1.f, 2.f});
        REQUIRE_THROWS_AS(t.clamp(2.0, 1.0), ember::ArgumentError);
        REQUIRE_THROWS_WITH(t.clamp(2.0, 1.0), Contains("clamp") && Contains("2") && Contains("1"));
        REQUIRE_THROWS_AS(I1::from_ints({1}).clamp(3, -3), ember::ArgumentError);
    }
    SECTION("arange with step 0") {
        REQUIRE_THROWS_AS(I1::arange_step(0, 5, 0), ember::ArgumentError);
        REQUIRE_THROWS_WITH(I1::arange_step(0, 5, 0), Contains("arange") && Contains("step"));
    }
    SECTION("random with a bad distribution") {
        REQUIRE_THROWS_AS(T1::random({4}, ember::Distribution::Uniform(2.0, 1.0)), ember::ArgumentError);
        REQUIRE_THROWS_WITH(T1::random({4}, ember::Distribution::Uniform(2.0, 1.0)),
                            Contains("random") && Contains("uniform"));
        REQUIRE_THROWS_AS(T1::random({4}, ember::Distribution::Normal(0.0, -1.0)), ember::ArgumentError);
        REQUIRE_THROWS_WITH(T1::random({4}, ember::Distribution::Normal(0.0, -1.0)),
                            Contains("random") && Contains("normal"));
        REQUIRE_THROWS_AS(T1::random({4}, ember::Distribution::Bernoulli(1.5)), ember::ArgumentError);
        REQUIRE_THROWS_WITH(T1::random({4}, ember::Distribution::Bernoulli(1.5)),
                            Contains("random") && Contains("bernoulli"));
    }
    SECTION("slice with a non-positive step") {
        auto t = T1::from_floats({1.f, 2.f, 3.f});
        REQUIRE_THROWS_AS(t.slice({ember::Slice{0, 3, 0}}), ember::ArgumentError);
        REQUIRE_THROWS_WITH(t.slice({ember::Slice{0, 3, 0}}), Contains("slice") && Contains("step"));
    }
    SECTION("chunk into zero pieces") {
        auto t = T1::from_floats({1.f, 2.f});
        REQUIRE_THROWS_AS(t.chunk(0, 0), ember::ArgumentError);
    }
    SECTION("conv with zero stride") {
        auto x = ember::Tensor<B, 3>::zeros({1, 1, 5});
        auto w = ember::Tensor<B, 3>::zeros({1, 1, 2});
        REQUIRE_THROWS_AS(ember::module::conv1d(x, w, std::nullopt, ember::ConvOptions<1>{{0}, {0}, {1}, 1}),
                          ember::ArgumentError);
        REQUIRE_THROWS_WITH(ember::module::conv1d(x, w, std::nullopt, ember::ConvOptions<1>{{0}, {0}, {1}, 1}),
                            Contains("conv1d") && Contains("stride"));
    }
}

}  // namespace test_errors
