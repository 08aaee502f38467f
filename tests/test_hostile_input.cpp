// Hostile sizes and misuse, each case named after the attack it stops (issue 34): element
// counts and byte sizes that overflow, ranges whose arithmetic wraps, allocations no device can
// satisfy, and tensors used after std::move. Every one must be an ember::Error naming the op
// and the values (docs/security.md), never a wrapped size, an out-of-bounds access, SIGFPE or
// SIGSEGV. Expected values are from the arithmetic spelled out in each case.
#include <climits>
#include <cstdint>
#include <string>
#include <typeinfo>

#include "harness.hpp"

namespace test_hostile_input {

// Under AddressSanitizer, an allocation larger than it supports is reported and ends the
// program unless the allocator may return null; the allocation cases below ask for 2^61 bytes
// and expect the null (then an ember::Error). Options from the environment still apply.
#if defined(__SANITIZE_ADDRESS__)
#define EMBER_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EMBER_TEST_ASAN 1
#endif
#endif
#if defined(EMBER_TEST_ASAN)
extern "C" const char* __asan_default_options() {
    return "allocator_may_return_null=1";
}
#endif

namespace {

using ember::Cpu;
using ember::Shape;
using ember::Slice;
using ember::Tensor;
using ember::TensorData;

constexpr std::size_t k2_32 = std::size_t{1} << 32;

// The message of the ember::Error `f` throws (fails the case when it throws none, or another
// type than E).
template <typename E, typename F>
std::string error_of(F&& f) {
    try {
        f();
    } catch (const E& e) {
        return e.what();
    } catch (const std::exception& e) {
        FAIL("expected " << typeid(E).name() << ", got " << typeid(e).name() << ": " << e.what());
    }
    FAIL("no error thrown");
    return {};
}

bool has(const std::string& s, const std::string& part) {
    return s.find(part) != std::string::npos;
}

}  // namespace

// ---- element counts -----------------------------------------------------------------------

TEMPLATE_LIST_TEST_CASE("attack: zeros({1<<32, 1<<32}) overflows the element count",
                        "[hostile][overflow]", ember::test::TestBackends) {
    using B = TestType;
    EMBER_SKIP_IF_UNAVAILABLE(B);
    // 2^64 elements wrap to 0 in size_t: the probe got a 4-byte buffer, then read past it.
    const auto msg = error_of<ember::ShapeError>([] {
        (void)Tensor<B, 2>::zeros(Shape{k2_32, k2_32});
    });
    CHECK(has(msg, "zeros"));
    CHECK(has(msg, "[4294967296, 4294967296]"));
    CHECK_THROWS_AS((Tensor<B, 2>::ones(Shape{k2_32, k2_32})), ember::ShapeError);
    CHECK_THROWS_AS((Tensor<B, 2>::empty(Shape{k2_32, k2_32})), ember::ShapeError);
    CHECK_THROWS_AS((Tensor<B, 2>::random(Shape{k2_32, k2_32}, ember::Distribution::Uniform(0, 1))),
                    ember::ShapeError);
    CHECK_THROWS_AS((Tensor<B, 2, ember::Int>::full(Shape{k2_32, k2_32}, 1)), ember::ShapeError);
}

TEMPLATE_LIST_TEST_CASE("attack: zeros({SIZE_MAX}) is refused, not a division fault",
                        "[hostile][overflow]", ember::test::TestBackends) {
    using B = TestType;
    EMBER_SKIP_IF_UNAVAILABLE(B);
    const auto msg =
        error_of<ember::ShapeError>([] { (void)Tensor<B, 1>::zeros(Shape{SIZE_MAX}); });
    CHECK(has(msg, std::to_string(SIZE_MAX)));
    // A shape with a 0 dim holds nothing, but its other dims would still overflow its strides.
    CHECK_THROWS_AS((Tensor<B, 3>::zeros(Shape{0, k2_32, k2_32})), ember::ShapeError);
    // The limit itself: 2^60 - 1 elements is a shape; 2^60 is not.
    CHECK(Shape{ember::kMaxElements}.num_elements() == ember::kMaxElements);
    CHECK_THROWS_AS(Shape{ember::kMaxElements + 1}.num_elements(), ember::ShapeError);
    CHECK_THROWS_AS((Shape{std::size_t{1} << 30, std::size_t{1} << 30, 2}.num_elements()),
                    ember::ShapeError);
}

TEST_CASE("attack: TensorData with an overflowing shape is refused", "[hostile][overflow]") {
    // 2^64 elements: 0 bytes would have matched the wrapped count.
    CHECK_THROWS_AS(TensorData(std::vector<std::byte>{}, Shape{k2_32, k2_32}, ember::DType::F32),
                    ember::ShapeError);
    CHECK_THROWS_AS(TensorData(std::vector<float>{}, Shape{0, SIZE_MAX}), ember::ShapeError);
    CHECK_THROWS_AS(TensorData::zeros(Shape{SIZE_MAX}, ember::DType::F64), ember::ShapeError);
    CHECK_THROWS_AS(TensorData({1.f, 2.f}, Shape{2}).reshape(Shape{k2_32, k2_32, 2}),
                    ember::ShapeError);
    // Within the limit but past any memory: an ember::Error naming the size, not bad_alloc.
    // Not under AddressSanitizer: its operator new cannot throw std::bad_alloc and ends the
    // program instead, whatever allocator_may_return_null says (that covers malloc's family,
    // which the allocation case below goes through).
#if !defined(EMBER_TEST_ASAN)
    const std::size_t n = std::size_t{1} << 59;  // 2^62 bytes of f64
    const auto msg =
        error_of<ember::Error>([&] { (void)TensorData::zeros(Shape{n}, ember::DType::F64); });
    CHECK(has(msg, "4611686018427387904"));
#endif
}

TEST_CASE("attack: reshape to an overflowing or wrapped shape is refused", "[hostile][overflow]") {
    const auto x = Tensor<Cpu, 1>::from_floats({1, 2, 3, 4});
    // [2^32, 2^32] would wrap to 0 elements and [2^62, 4] to 0 as well; neither is 4.
    CHECK_THROWS_AS((x.reshape<2>(Shape{k2_32, k2_32})), ember::ShapeError);
    CHECK_THROWS_AS((x.reshape<2>(std::array<std::size_t, 2>{std::size_t{1} << 62, 4})),
                    ember::ShapeError);
    // SIZE_MAX would turn into -1 as a long, which means "infer".
    CHECK_THROWS_AS((x.reshape<2>(std::array<std::size_t, 2>{SIZE_MAX, 4})), ember::ShapeError);
    CHECK_THROWS_AS((x.reshape<3>({-1L, 1L << 40, 1L << 40})), ember::ShapeError);
    CHECK((x.reshape<2>({-1, 2}).dims() == std::array<std::size_t, 2>{2, 2}));
}

TEST_CASE("attack: expand, cat, repeat and pad that overflow the element count are refused",
          "[hostile][overflow]") {
    // A broadcast view of 2^59 elements holds one value: it is a valid tensor.
    const auto one = Tensor<Cpu, 1>::from_floats({7});
    const auto big = one.expand<1>(Shape{std::size_t{1} << 59});
    CHECK(big.dims()[0] == (std::size_t{1} << 59));
    CHECK_THROWS_AS((one.expand<2>(Shape{k2_32, k2_32})), ember::ShapeError);
    // 3 * 2^59 > 2^60 - 1.
    const auto msg = error_of<ember::ShapeError>([&] {
        (void)Tensor<Cpu, 1>::cat({big, big, big}, 0);
    });
    CHECK(has(msg, "cat"));
    // stack first makes each view contiguous, which is the 2^61-byte allocation that fails.
    CHECK_THROWS_AS((Tensor<Cpu, 1>::stack<2>({big, big, big}, 1)), ember::Error);
    // 2^59 * 4 and 2^59 * 2^59.
    CHECK_THROWS_AS(big.repeat_dim(0, 4), ember::ShapeError);
    CHECK_THROWS_AS(big.repeat({std::size_t{1} << 59}), ember::ShapeError);
    CHECK_THROWS_AS(one.repeat_dim(0, SIZE_MAX), ember::ShapeError);
    const auto m = Tensor<Cpu, 2>::zeros(Shape{2, 2});
    CHECK_THROWS_AS(m.pad({SIZE_MAX, 2, 0, 0}, ember::Scalar(0)), ember::ShapeError);
    CHECK_THROWS_AS(m.pad({std::size_t{1} << 40, 0, std::size_t{1} << 40, 0}, ember::Scalar(0)),
                    ember::ShapeError);
}

// ---- ranges -------------------------------------------------------------------------------

TEMPLATE_LIST_TEST_CASE("attack: arange(INT64_MIN, INT64_MAX) is refused, not SIGFPE",
                        "[hostile][overflow]", ember::test::TestBackends) {
    using B = TestType;
    EMBER_SKIP_IF_UNAVAILABLE(B);
    using I = Tensor<B, 1, ember::Int>;
    // 2^64 - 1 elements: end - start overflowed a signed 64-bit integer.
    const auto msg = error_of<ember::ShapeError>([] { (void)I::arange(INT64_MIN, INT64_MAX); });
    CHECK(has(msg, "arange"));
    CHECK(has(msg, std::to_string(INT64_MIN)));
    CHECK_THROWS_AS(I::arange_step(INT64_MAX, INT64_MIN, -1), ember::ShapeError);
    CHECK_THROWS_AS(I::arange_step(0, 10, 0), ember::ArgumentError);
    CHECK_THROWS_AS(I::arange_step(INT64_MIN, INT64_MAX, 0), ember::ArgumentError);
    CHECK_THROWS_AS(I::arange_step(10, 0, 1), ember::ArgumentError);
    // The whole int64 range in 4 steps of 2^62 is a small tensor: -2^63, -2^62, 0, 2^62.
    const auto v = I::arange_step(INT64_MIN, INT64_MAX, std::int64_t{1} << 62)
                       .into_data()
                       .template to_vec<std::int64_t>();
    CHECK(v ==
          std::vector<std::int64_t>{INT64_MIN, -(std::int64_t{1} << 62), 0, std::int64_t{1} << 62});
    const auto w =
        I::arange_step(INT64_MAX, INT64_MIN, INT64_MIN).into_data().template to_vec<std::int64_t>();
    CHECK(w == std::vector<std::int64_t>{INT64_MAX, -1});
}

TEMPLATE_LIST_TEST_CASE("attack: narrow(1, SIZE_MAX, 2) wraps start + length and is refused",
                        "[hostile][overflow]", ember::test::TestBackends) {
    using B = TestType;
    EMBER_SKIP_IF_UNAVAILABLE(B);
    const auto x = Tensor<B, 2>::zeros(Shape{2, 3});
    // SIZE_MAX + 2 wraps to 1 <= 3: the probe got a tensor instead of an error.
    const auto msg = error_of<ember::IndexError>([&] { (void)x.narrow(1, SIZE_MAX, 2); });
    CHECK(has(msg, "narrow"));
    CHECK(has(msg, std::to_string(SIZE_MAX)));
    CHECK_THROWS_AS(x.narrow(1, 2, SIZE_MAX), ember::IndexError);
    CHECK_THROWS_AS(x.narrow(0, 3, 0), ember::IndexError);
    CHECK(x.narrow(1, 3, 0).dims()[1] == 0);
}

TEMPLATE_LIST_TEST_CASE("attack: slices with extreme bounds and steps do not wrap",
                        "[hostile][overflow]", ember::test::TestBackends) {
    using B = TestType;
    EMBER_SKIP_IF_UNAVAILABLE(B);
    const auto x = Tensor<B, 1>::from_floats({1, 2, 3, 4, 5});
    // A step of LONG_MAX made (end - start + step - 1) overflow: one element, x[1].
    const auto s = x.slice({Slice{1, 5, LONG_MAX}}).into_data().template to_vec<float>();
    CHECK(s == std::vector<float>{2});
    // In 2-D the column stride (1) and row stride (3) times LONG_MAX would overflow: x2[:, 1].
    const auto x2 = Tensor<B, 2>::from_data(TensorData({1.f, 2.f, 3.f, 4.f, 5.f, 6.f}, {2, 3}));
    const auto c = x2.slice({Slice{0, 2, LONG_MAX}, Slice{1, 3, LONG_MAX}}).into_data();
    CHECK(c.shape() == Shape{1, 1});
    CHECK(c.template to_vec<float>() == std::vector<float>{2});
    const auto put = x2.slice_assign({Slice{1, 2, LONG_MAX}, Slice{0, 3, LONG_MAX}},
                                     Tensor<B, 2>::zeros(Shape{1, 1}))
                         .into_data()
                         .template to_vec<float>();
    CHECK(put == std::vector<float>{1, 2, 3, 0, 5, 6});
    // Extreme bounds clamp to the ends (Python's rule) without overflowing on the way.
    CHECK(x.slice({Slice{LONG_MIN, 3}}).into_data().template to_vec<float>() ==
          std::vector<float>{1, 2, 3});
    CHECK(x.slice({Slice{0, LONG_MIN}}).dims()[0] == 0);
    CHECK_THROWS_AS(x.slice({Slice{0, 3, LONG_MIN}}), ember::ArgumentError);
}

// ---- allocations --------------------------------------------------------------------------

TEMPLATE_LIST_TEST_CASE(
    "attack: an allocation no device can satisfy is an ember::Error naming the size",
    "[hostile][memory]", ember::test::TestBackends) {
    using B = TestType;
    EMBER_SKIP_IF_UNAVAILABLE(B);
    // 2^59 f32 elements are a valid shape, but 2^61 bytes exceed any machine's address space:
    // the CPU's aligned_alloc returns null, Vulkan's buffer range and CUDA's cudaMalloc refuse.
    const auto msg = error_of<ember::Error>(
        [] { (void)Tensor<B, 1>::zeros(Shape{std::size_t{1} << 59}).into_data(); });
    CHECK(has(msg, "2305843009213693952"));  // 2^61 bytes
}

// ---- window geometry ------------------------------------------------------------------------
// Kernel, stride, padding and dilation are the caller's numbers (or a model file's, through
// ONNX): the output sizes computed from them must not wrap into small, valid-looking sizes
// whose windows then reach past the input.

TEMPLATE_LIST_TEST_CASE(
    "attack: pooling with a huge kernel, stride, padding or dilation is refused",
    "[hostile][overflow]", ember::test::TestBackends) {
    using B = TestType;
    EMBER_SKIP_IF_UNAVAILABLE(B);
    namespace m = ember::module;
    const auto x = Tensor<B, 3>::ones(Shape{1, 1, 8});
    // (kernel - 1) * dilation = 2^62 * 4 wrapped to 0: a window of extent 1 over 2^62 taps.
    // Each number is now at most kMaxElements (2^60 - 1), and their product is checked.
    constexpr std::size_t big = std::size_t{1} << 59;
    CHECK(has(error_of<ember::ArgumentError>(
                  [&] { (void)m::max_pool1d(x, (std::size_t{1} << 62) + 1, 1, 0, 4); }),
              "max_pool1d"));
    CHECK(has(error_of<ember::ShapeError>([&] { (void)m::max_pool1d(x, big + 1, 1, 0, big); }),
              "max_pool1d"));
    // A padding of SIZE_MAX turned into -1 in signed arithmetic and passed "at most half the
    // kernel"; a stride of SIZE_MAX turned into -1 and a negative output size.
    CHECK(has(error_of<ember::ArgumentError>([&] { (void)m::avg_pool1d(x, 2, 1, SIZE_MAX); }),
              "avg_pool1d"));
    CHECK(has(error_of<ember::ArgumentError>([&] { (void)m::max_pool1d(x, 2, 1, SIZE_MAX); }),
              "max_pool1d"));
    CHECK(has(error_of<ember::ArgumentError>([&] { (void)m::avg_pool1d(x, 2, SIZE_MAX); }),
              "18446744073709551615"));
    CHECK(has(error_of<ember::ArgumentError>(
                  [&] { (void)m::max_pool1d(x, 2, SIZE_MAX, 0, 1, /*ceil_mode=*/true); }),
              "max_pool1d"));
    CHECK(has(error_of<ember::ArgumentError>([&] { (void)m::max_pool1d(x, SIZE_MAX, 1); }),
              "max_pool1d"));
    // Large but representable: an ordinary "kernel larger than the input".
    CHECK(has(error_of<ember::ShapeError>([&] { (void)m::max_pool1d(x, big, 1); }),
              "larger than the input"));
    // The limits leave ordinary pools alone: 8 -> (8 + 2 - 3) / 2 + 1 = 4.
    CHECK(m::max_pool1d(x, 3, 2, 1).dims()[2] == 4);
}

TEMPLATE_LIST_TEST_CASE(
    "attack: convolutions with a huge stride, padding or dilation are refused, not wrapped",
    "[hostile][overflow]", ember::test::TestBackends) {
    using B = TestType;
    EMBER_SKIP_IF_UNAVAILABLE(B);
    namespace m = ember::module;
    const auto x = Tensor<B, 3>::ones(Shape{1, 1, 4});
    const auto w = Tensor<B, 3>::ones(Shape{1, 1, 5});
    constexpr std::size_t big = std::size_t{1} << 59;
    // dilation * (k - 1) = 2^62 * 4 wrapped to 0: a 4-long output whose taps lie 2^62 apart.
    // Each number is now at most kMaxElements (2^60 - 1), and their products are checked.
    ember::ConvOptions<1> dilated;
    dilated.dilation = {big};
    CHECK(has(error_of<ember::ShapeError>([&] { (void)m::conv1d(x, w, std::nullopt, dilated); }),
              "conv1d"));
    ember::ConvOptions<1> strided;
    strided.stride = {SIZE_MAX};
    CHECK(has(error_of<ember::ArgumentError>([&] { (void)m::conv1d(x, w, std::nullopt, strided); }),
              "conv1d"));
    ember::ConvOptions<1> padded;
    padded.padding = {SIZE_MAX / 2};
    CHECK(has(error_of<ember::ArgumentError>([&] { (void)m::conv1d(x, w, std::nullopt, padded); }),
              "conv1d"));
    // conv_transpose: (input - 1) * stride and dilation * (k - 1) past kMaxElements.
    ember::ConvTransposeOptions<1> t;
    t.stride = {big};
    CHECK(
        has(error_of<ember::ShapeError>([&] { (void)m::conv_transpose1d(x, w, std::nullopt, t); }),
            "conv_transpose1d"));
    ember::ConvTransposeOptions<1> td;
    td.dilation = {big};
    CHECK(
        has(error_of<ember::ShapeError>([&] { (void)m::conv_transpose1d(x, w, std::nullopt, td); }),
            "conv_transpose1d"));
    // deform_conv2d shares the rule.
    const auto x4 = Tensor<B, 4>::ones(Shape{1, 1, 4, 4});
    const auto w4 = Tensor<B, 4>::ones(Shape{1, 1, 5, 5});
    const auto off = Tensor<B, 4>::zeros(Shape{1, 50, 4, 4});
    ember::DeformConvOptions d;
    d.dilation = {big, big};
    CHECK(has(error_of<ember::ShapeError>(
                  [&] { (void)m::deform_conv2d(x4, off, w4, std::nullopt, std::nullopt, d); }),
              "deform_conv2d"));
    // Ordinary geometry is untouched: (4 + 2 * 2 - 5) / 1 + 1 = 4.
    ember::ConvOptions<1> same;
    same.padding = {2};
    CHECK(m::conv1d(x, w, std::nullopt, same).dims()[2] == 4);
}

// ---- moved-from tensors -------------------------------------------------------------------

TEMPLATE_LIST_TEST_CASE("attack: a tensor used after std::move throws naming the op",
                        "[hostile][moved]", ember::test::TestBackends) {
    using B = TestType;
    EMBER_SKIP_IF_UNAVAILABLE(B);
    auto x = Tensor<B, 2>::ones(Shape{2, 2});
    const auto y = std::move(x);  // NOLINT: the use after move is the point
    CHECK_FALSE(x.is_valid());    // NOLINT
    CHECK(y.is_valid());
    // Each op names itself; the probe got SIGSEGV from each.
    CHECK(has(error_of<ember::ArgumentError>([&] { (void)x.add(y); }), "add"));         // NOLINT
    CHECK(has(error_of<ember::ArgumentError>([&] { (void)y.add(x); }), "add"));         // NOLINT
    CHECK(has(error_of<ember::ArgumentError>([&] { (void)x.matmul(y); }), "matmul"));   // NOLINT
    CHECK(has(error_of<ember::ArgumentError>([&] { (void)x.sum(); }), "sum"));          // NOLINT
    CHECK(has(error_of<ember::ArgumentError>([&] { (void)x.exp(); }), "exp"));          // NOLINT
    CHECK(has(error_of<ember::ArgumentError>([&] { (void)x.to_data(); }), "to_data"));  // NOLINT
    CHECK(
        has(error_of<ember::ArgumentError>([&] { (void)x.narrow(0, 0, 1); }), "narrow"));  // NOLINT
    CHECK(has(error_of<ember::ArgumentError>([&] { (void)x.template reshape<1>({4}); }),   // NOLINT
              "reshape"));
    CHECK(has(error_of<ember::ArgumentError>([&] {
                  (void)Tensor<B, 2>::cat({y, x}, 0);
              }),  // NOLINT
              "cat"));
    CHECK(has(error_of<ember::ArgumentError>([&] { (void)(x + y); }), "moved from"));  // NOLINT
    CHECK_THROWS_AS(ember::activation::relu(x), ember::ArgumentError);                 // NOLINT
    // A tensor consumed by an op taking it by rvalue is moved-from too.
    auto z = Tensor<B, 2>::ones(Shape{2, 2});
    const auto w = std::move(z).add(y);
    CHECK(has(error_of<ember::ArgumentError>([&] { (void)z.neg(); }), "neg"));  // NOLINT
    // Assigning a tensor makes it usable again; a copy of a moved-from tensor is moved-from.
    x = w;
    CHECK(x.is_valid());
    CHECK(x.sum().into_scalar() == Approx(8.0));
    const auto copy = z;  // NOLINT
    CHECK_FALSE(copy.is_valid());
}

#undef EMBER_TEST_ASAN

}  // namespace test_hostile_input
