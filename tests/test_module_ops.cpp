// Functional module ops (ember::module) against PyTorch: convolutions, transposed and deformable
// convolutions, pooling, adaptive pooling, interpolation, embedding and linear. Expected values come
// from tests/fixtures/gen_module_ops.py; each case's options are stored with it as params.
#include <cmath>
#include <optional>
#include <string>

#include "fixture_options.hpp"

namespace test_module_ops {

namespace {

using namespace ember::test;  // Fixture, options from params (fixture_options.hpp)

constexpr const char* kFile = "module_ops";

template <typename B, std::size_t D>
void expect_close(const ember::Tensor<B, D>& actual, const ember::TensorData& expected) {
    ember::test::check_close(actual.to_data(), expected, ember::test::default_tolerance<B>());
}

template <typename B>
std::optional<ember::Tensor<B, 1>> bias_of(const Fixture& f, std::size_t index) {
    if (!bparam(f, "bias")) return std::nullopt;
    return f.tensor<B, 1>(index);
}

template <typename B, std::size_t N>
ember::Tensor<B, N + 2> run_conv(const Fixture& f, const ember::Tensor<B, N + 2>& x) {
    auto w = f.tensor<B, N + 2>(1);
    const auto o = conv_options<N>(f);
    return conv_nd<N>(x, w, bias_of<B>(f, 2), o);
}

template <typename B, std::size_t N>
ember::Tensor<B, N + 2> run_conv_transpose(const Fixture& f) {
    auto x = f.tensor<B, N + 2>(0);
    auto w = f.tensor<B, N + 2>(1);
    const auto o = conv_transpose_options<N>(f);
    return conv_transpose_nd<N>(x, w, bias_of<B>(f, 2), o);
}

}  // namespace

// ---- convolutions -------------------------------------------------------------------------------

TEMPLATE_LIST_TEST_CASE("module: conv1d/2d/3d match torch", "[module][conv]",
                        ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    for (const char* name : {"conv1d_basic", "conv1d_nobias", "conv1d_stride_pad_dil", "conv1d_groups"}) {
        DYNAMIC_SECTION(name) {
            Fixture f(kFile, name);
            expect_close(run_conv<B, 1>(f, f.tensor<B, 3>(0)), f.output(0));
        }
    }
    for (const char* name : {"conv2d_basic", "conv2d_nobias", "conv2d_stride_pad_dil", "conv2d_groups",
                             "conv2d_depthwise", "conv2d_1x1", "conv2d_large",
                             "conv2d_large_groups"}) {
        DYNAMIC_SECTION(name) {
            Fixture f(kFile, name);
            expect_close(run_conv<B, 2>(f, f.tensor<B, 4>(0)), f.output(0));
        }
    }
    for (const char* name : {"conv3d_basic", "conv3d_stride_pad_dil", "conv3d_groups"}) {
        DYNAMIC_SECTION(name) {
            Fixture f(kFile, name);
            expect_close(run_conv<B, 3>(f, f.tensor<B, 5>(0)), f.output(0));
        }
    }
}

TEMPLATE_LIST_TEST_CASE("module: conv bias may be a tensor or std::nullopt", "[module][conv]",
                        ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    using ember::module::conv1d;
    using ember::module::conv2d;

    SECTION("a tensor bias converts to the optional, nullopt and the default mean no bias") {
        Fixture f(kFile, "conv2d_basic");
        auto x = f.tensor<B, 4>(0);
        auto w = f.tensor<B, 4>(1);
        auto b = f.tensor<B, 1>(2);
        expect_close(conv2d(x, w, b, ember::ConvOptions<2>{}), f.output(0));
        expect_close(conv2d(x, w, b), f.output(0));
        // Without bias: the same as subtracting the bias from the biased result.
        auto unbiased = conv2d(x, w, std::nullopt, ember::ConvOptions<2>{});
        auto unbiased_default = conv2d(x, w);
        auto rebiased = unbiased + b.template reshape<4>({1, -1, 1, 1});
        expect_close(rebiased, f.output(0));
        expect_close(unbiased_default, unbiased.to_data());
    }
    SECTION("options as an aggregate: {stride, padding, dilation, groups}") {
        Fixture f(kFile, "conv1d_stride_pad_dil");
        auto y = conv1d(f.tensor<B, 3>(0), f.tensor<B, 3>(1), f.tensor<B, 1>(2),
                        ember::ConvOptions<1>{{2}, {2}, {2}, 1});
        expect_close(y, f.output(0));
    }
    SECTION("a transposed (strided) input gives the same result") {
        Fixture f(kFile, "conv2d_noncontig");
        auto xt = f.tensor<B, 4>(3).swap_dims(2, 3);
        REQUIRE(xt.dims() == f.tensor<B, 4>(0).dims());
        expect_close(run_conv<B, 2>(f, xt), f.output(0));
        expect_close(run_conv<B, 2>(f, f.tensor<B, 4>(0)), f.output(0));
    }
}

TEMPLATE_LIST_TEST_CASE("module: conv_transpose1d/2d/3d match torch", "[module][conv]",
                        ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    for (const char* name : {"conv_transpose1d_basic", "conv_transpose1d_stride_pad_opad",
                             "conv_transpose1d_dil", "conv_transpose1d_groups"}) {
        DYNAMIC_SECTION(name) {
            Fixture f(kFile, name);
            expect_close(run_conv_transpose<B, 1>(f), f.output(0));
        }
    }
    for (const char* name : {"conv_transpose2d_basic", "conv_transpose2d_stride_pad_opad",
                             "conv_transpose2d_dil", "conv_transpose2d_groups",
                             "conv_transpose2d_large"}) {
        DYNAMIC_SECTION(name) {
            Fixture f(kFile, name);
            expect_close(run_conv_transpose<B, 2>(f), f.output(0));
        }
    }
    for (const char* name : {"conv_transpose3d_basic", "conv_transpose3d_stride_pad_opad",
                             "conv_transpose3d_groups"}) {
        DYNAMIC_SECTION(name) {
            Fixture f(kFile, name);
            expect_close(run_conv_transpose<B, 3>(f), f.output(0));
        }
    }
    SECTION("nullopt bias compiles") {
        Fixture f(kFile, "conv_transpose2d_stride_pad_opad");
        auto y = ember::module::conv_transpose2d(f.tensor<B, 4>(0), f.tensor<B, 4>(1), std::nullopt,
                                                 conv_transpose_options<2>(f));
        expect_close(y, f.output(0));
    }
}

TEMPLATE_LIST_TEST_CASE("module: deform_conv2d matches torchvision semantics", "[module][conv]",
                        ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    for (const char* name : {"deform_conv2d_basic", "deform_conv2d_mask", "deform_conv2d_mask_bias",
                             "deform_conv2d_stride_pad_dil", "deform_conv2d_groups"}) {
        DYNAMIC_SECTION(name) {
            Fixture f(kFile, name);
            const ember::DeformConvOptions o = deform_options(f);
            std::size_t next = 3;
            std::optional<ember::Tensor<B, 4>> mask;
            std::optional<ember::Tensor<B, 1>> bias;
            if (bparam(f, "mask")) mask = f.tensor<B, 4>(next++);
            if (bparam(f, "bias")) bias = f.tensor<B, 1>(next++);
            auto y = ember::module::deform_conv2d(f.tensor<B, 4>(0), f.tensor<B, 4>(1),
                                                  f.tensor<B, 4>(2), mask, bias, o);
            expect_close(y, f.output(0));
        }
    }
    SECTION("without mask and bias, through the defaults") {
        Fixture f(kFile, "deform_conv2d_basic");
        auto y = ember::module::deform_conv2d(f.tensor<B, 4>(0), f.tensor<B, 4>(1), f.tensor<B, 4>(2));
        expect_close(y, f.output(0));
    }
    SECTION("a mask of ones equals no mask; zero offsets equal conv2d") {
        Fixture f(kFile, "deform_conv2d_basic");
        auto x = f.tensor<B, 4>(0);
        auto off = f.tensor<B, 4>(1);
        auto w = f.tensor<B, 4>(2);
        const auto od = off.dims();
        auto ones = ember::Tensor<B, 4>::ones({od[0], od[1] / 2, od[2], od[3]});
        expect_close(ember::module::deform_conv2d(x, off, w, ones), f.output(0));
        auto plain = ember::module::deform_conv2d(x, off.zeros_like(), w);
        expect_close(plain, ember::module::conv2d(x, w).to_data());
    }
}

// ---- pooling ------------------------------------------------------------------------------------

TEMPLATE_LIST_TEST_CASE("module: avg_pool1d/2d match torch", "[module][pool]",
                        ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    for (const char* name : {"avg_pool1d_basic", "avg_pool1d_pad", "avg_pool1d_pad_exclude",
                             "avg_pool1d_ceil", "avg_pool1d_ceil_pad", "avg_pool1d_ceil_pad_exclude"}) {
        DYNAMIC_SECTION(name) {
            Fixture f(kFile, name);
            auto y = ember::module::avg_pool1d(f.tensor<B, 3>(0), uparam(f, "k0"), uparam(f, "stride0"),
                                               uparam(f, "pad0"), bparam(f, "count_include_pad"),
                                               bparam(f, "ceil"));
            expect_close(y, f.output(0));
        }
    }
    for (const char* name : {"avg_pool2d_basic", "avg_pool2d_pad", "avg_pool2d_pad_exclude",
                             "avg_pool2d_ceil", "avg_pool2d_ceil_pad", "avg_pool2d_ceil_pad_exclude",
                             "avg_pool2d_large"}) {
        DYNAMIC_SECTION(name) {
            Fixture f(kFile, name);
            auto y = ember::module::avg_pool2d(
                f.tensor<B, 4>(0), {uparam(f, "k0"), uparam(f, "k1")},
                {uparam(f, "stride0"), uparam(f, "stride1")}, {uparam(f, "pad0"), uparam(f, "pad1")},
                bparam(f, "count_include_pad"), bparam(f, "ceil"));
            expect_close(y, f.output(0));
        }
    }
}

TEMPLATE_LIST_TEST_CASE("module: max_pool1d/2d and their indices match torch", "[module][pool]",
                        ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    for (const char* name : {"max_pool1d_basic", "max_pool1d_pad", "max_pool1d_dil",
                             "max_pool1d_ceil", "max_pool1d_ceil_dil"}) {
        DYNAMIC_SECTION(name) {
            Fixture f(kFile, name);
            auto x = f.tensor<B, 3>(0);
            const auto k = uparam(f, "k0"), s = uparam(f, "stride0"), p = uparam(f, "pad0"),
                       d = uparam(f, "dil0");
            const bool ceil = bparam(f, "ceil");
            expect_close(ember::module::max_pool1d(x, k, s, p, d, ceil), f.output(0));
            auto [v, i] = ember::module::max_pool1d_with_indices(x, k, s, p, d, ceil);
            expect_close(v, f.output(0));
            ember::test::check_equal(i.to_data(), f.output(1));
        }
    }
    for (const char* name : {"max_pool2d_basic", "max_pool2d_pad", "max_pool2d_dil",
                             "max_pool2d_ceil", "max_pool2d_ceil_pad_dil", "max_pool2d_large"}) {
        DYNAMIC_SECTION(name) {
            Fixture f(kFile, name);
            auto x = f.tensor<B, 4>(0);
            const std::array<std::size_t, 2> k{uparam(f, "k0"), uparam(f, "k1")},
                s{uparam(f, "stride0"), uparam(f, "stride1")}, p{uparam(f, "pad0"), uparam(f, "pad1")},
                d{uparam(f, "dil0"), uparam(f, "dil1")};
            const bool ceil = bparam(f, "ceil");
            expect_close(ember::module::max_pool2d(x, k, s, p, d, ceil), f.output(0));
            auto [v, i] = ember::module::max_pool2d_with_indices(x, k, s, p, d, ceil);
            expect_close(v, f.output(0));
            ember::test::check_equal(i.to_data(), f.output(1));
        }
    }
    SECTION("a transposed (strided) input gives the same values and indices") {
        Fixture f(kFile, "max_pool2d_noncontig");
        auto xt = f.tensor<B, 4>(1).swap_dims(2, 3);
        REQUIRE(xt.dims() == f.tensor<B, 4>(0).dims());
        const std::array<std::size_t, 2> k{uparam(f, "k0"), uparam(f, "k1")},
            s{uparam(f, "stride0"), uparam(f, "stride1")}, p{uparam(f, "pad0"), uparam(f, "pad1")};
        auto [v, i] = ember::module::max_pool2d_with_indices(xt, k, s, p);
        expect_close(v, f.output(0));
        ember::test::check_equal(i.to_data(), f.output(1));
        expect_close(ember::module::max_pool2d(xt, k, s, p), f.output(0));
    }
}

TEMPLATE_LIST_TEST_CASE("module: adaptive_avg_pool1d/2d match torch", "[module][pool]",
                        ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    for (const char* name : {"adaptive_avg_pool1d_div", "adaptive_avg_pool1d_nondiv",
                             "adaptive_avg_pool1d_up", "adaptive_avg_pool1d_one"}) {
        DYNAMIC_SECTION(name) {
            Fixture f(kFile, name);
            expect_close(ember::module::adaptive_avg_pool1d(f.tensor<B, 3>(0), uparam(f, "out0")),
                         f.output(0));
        }
    }
    for (const char* name : {"adaptive_avg_pool2d_div", "adaptive_avg_pool2d_nondiv",
                             "adaptive_avg_pool2d_mixed", "adaptive_avg_pool2d_up",
                             "adaptive_avg_pool2d_one"}) {
        DYNAMIC_SECTION(name) {
            Fixture f(kFile, name);
            expect_close(ember::module::adaptive_avg_pool2d(f.tensor<B, 4>(0),
                                                            {uparam(f, "out0"), uparam(f, "out1")}),
                         f.output(0));
        }
    }
    SECTION("output size 1 is the mean over the spatial dims") {
        Fixture f(kFile, "adaptive_avg_pool2d_one");
        auto x = f.tensor<B, 4>(0);
        expect_close(ember::module::adaptive_avg_pool2d(x, {1, 1}),
                     x.mean_dim(3).mean_dim(2).to_data());
    }
}

// ---- interpolate --------------------------------------------------------------------------------

TEMPLATE_LIST_TEST_CASE("module: interpolate matches torch", "[module][interpolate]",
                        ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    std::vector<std::string> names{"interpolate_nearest_up", "interpolate_nearest_down",
                                   "interpolate_nearest_mixed"};
    for (const char* mode : {"bilinear", "bicubic"})
        for (const char* dir : {"up", "down", "mixed", "same"})
            for (const char* ac : {"ac", "noac"})
                names.push_back(std::string("interpolate_") + mode + "_" + dir + "_" + ac);
    for (const auto& name : names) {
        DYNAMIC_SECTION(name) {
            Fixture f(kFile, name);
            auto y = ember::module::interpolate(f.tensor<B, 4>(0), param_array<2>(f, "out"),
                                                interpolate_options(f));
            expect_close(y, f.output(0));
        }
    }
    SECTION("align_corners defaults to true, as in Burn") {
        CHECK(ember::InterpolateOptions{}.align_corners);
        Fixture f(kFile, "interpolate_bilinear_up_ac");
        auto y = ember::module::interpolate(f.tensor<B, 4>(0), {8, 9},
                                            ember::InterpolateOptions{ember::InterpolateMode::Bilinear});
        expect_close(y, f.output(0));
    }
    SECTION("nearest is the default mode and ignores align_corners") {
        Fixture f(kFile, "interpolate_nearest_up");
        auto x = f.tensor<B, 4>(0);
        expect_close(ember::module::interpolate(x, {8, 7}), f.output(0));
        expect_close(ember::module::interpolate(x, {8, 7}, {ember::InterpolateMode::Nearest, false}),
                     f.output(0));
    }
    SECTION("a transposed (strided) input gives the same result") {
        Fixture f(kFile, "interpolate_bilinear_noncontig");
        auto xt = f.tensor<B, 4>(1).swap_dims(2, 3);
        REQUIRE(xt.dims() == f.tensor<B, 4>(0).dims());
        auto y = ember::module::interpolate(xt, {7, 6}, {ember::InterpolateMode::Bilinear, false});
        expect_close(y, f.output(0));
    }
}

// ---- embedding and linear -----------------------------------------------------------------------

TEMPLATE_LIST_TEST_CASE("module: embedding matches torch", "[module][embedding]",
                        ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    for (const char* name : {"embedding", "embedding_col"}) {
        DYNAMIC_SECTION(name) {
            Fixture f(kFile, name);
            auto y = ember::module::embedding(f.tensor<B, 2>(0), f.tensor<B, 2, ember::Int>(1));
            expect_close(y, f.output(0));
        }
    }
    SECTION("an index past the table is an IndexError") {
        Fixture f(kFile, "embedding");
        auto idx = ember::Tensor<B, 2, ember::Int>::from_data(
            ember::TensorData(std::vector<std::int64_t>{0, 10}, {1, 2}));
        REQUIRE_THROWS_AS(ember::module::embedding(f.tensor<B, 2>(0), idx), ember::IndexError);
    }
}

TEMPLATE_LIST_TEST_CASE("module: linear matches torch (weight [in, out] as Burn)",
                        "[module][linear]", ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    using ember::module::linear;
    SECTION("rank 2 with bias") {
        Fixture f(kFile, "linear_2d_bias");
        expect_close(linear(f.tensor<B, 2>(0), f.tensor<B, 2>(1), f.tensor<B, 1>(2)), f.output(0));
    }
    SECTION("rank 2 without bias") {
        Fixture f(kFile, "linear_2d_nobias");
        expect_close(linear(f.tensor<B, 2>(0), f.tensor<B, 2>(1)), f.output(0));
        expect_close(linear(f.tensor<B, 2>(0), f.tensor<B, 2>(1), std::nullopt), f.output(0));
    }
    SECTION("rank 3 with bias") {
        Fixture f(kFile, "linear_3d_bias");
        expect_close(linear(f.tensor<B, 3>(0), f.tensor<B, 2>(1), f.tensor<B, 1>(2)), f.output(0));
    }
    SECTION("rank 3 without bias") {
        Fixture f(kFile, "linear_3d_nobias");
        expect_close(linear(f.tensor<B, 3>(0), f.tensor<B, 2>(1), std::nullopt), f.output(0));
    }
    SECTION("a transposed (strided) weight") {
        Fixture f(kFile, "linear_noncontig");
        auto w = f.tensor<B, 2>(1).transpose();
        REQUIRE(w.dims() == std::array<std::size_t, 2>{4, 5});
        expect_close(linear(f.tensor<B, 3>(0), w, f.tensor<B, 1>(2)), f.output(0));
    }
    SECTION("a weight whose rows do not match the input features is a ShapeError") {
        Fixture f(kFile, "linear_2d_bias");
        auto w = ember::Tensor<B, 2>::zeros({3, 5});
        REQUIRE_THROWS_AS(linear(f.tensor<B, 2>(0), w), ember::ShapeError);
    }
}

// add_layer_norm on every backend against gen_autodiff_modules.py's cases (inputs x, residual[,
// gamma, beta]; output 0 is torch's layer_norm(x + r) + 0.5 · (x + r)); the autodiff suite checks
// the gradients. The 16-bit output is the f32 norm cast, bit for bit, on every backend (CUDA's
// fused kernel rounds once on the store).
TEMPLATE_LIST_TEST_CASE("module: add_layer_norm matches torch", "[module][norm]",
                        TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    using ember::DType;
    using ember::module::add_layer_norm;
    SECTION("rank 3, rows of 516, gamma and beta") {
        Fixture f("autodiff_modules", "add_layer_norm_affine");
        const auto x = f.tensor<B, 3>(0), r = f.tensor<B, 3>(1);
        auto o = add_layer_norm(x, r, f.tensor<B, 1>(2), f.tensor<B, 1>(3), f.param("eps"));
        expect_close(o.normed + o.sum * 0.5, f.output(0));
        // The sum is x + r, exactly.
        CHECK(o.sum.to_data().template to_vec<float>() ==
              (x + r).to_data().template to_vec<float>());
        SECTION("a bf16 residual and a bf16 normed output") {
            const auto r16 = r.cast(DType::BF16);
            auto h =
                add_layer_norm(x, r16, f.tensor<B, 1>(2), f.tensor<B, 1>(3), 1e-5, DType::BF16);
            CHECK(h.sum.dtype() == DType::F32);
            CHECK(h.normed.dtype() == DType::BF16);
            const auto sum = x + r16;
            CHECK(h.sum.to_data().template to_vec<float>() ==
                  sum.to_data().template to_vec<float>());
            const auto want =
                ember::module::layer_norm(sum, f.tensor<B, 1>(2), f.tensor<B, 1>(3), 1e-5)
                    .cast(DType::BF16);
            CHECK(h.normed.cast(DType::F32).to_data().template to_vec<float>() ==
                  want.cast(DType::F32).to_data().template to_vec<float>());
        }
    }
    SECTION("no affine, eps 1e-3") {
        Fixture f("autodiff_modules", "add_layer_norm_plain");
        auto o = add_layer_norm(f.tensor<B, 2>(0), f.tensor<B, 2>(1), std::nullopt, std::nullopt,
                                f.param("eps"));
        expect_close(o.normed + o.sum * 0.5, f.output(0));
    }
    SECTION("errors name the op, the shapes and the dtype") {
        auto x = ember::Tensor<B, 2>::zeros({3, 4});
        auto r = ember::Tensor<B, 2>::zeros({4, 3});
        CHECK_THROWS_AS(add_layer_norm(x, r), ember::ShapeError);
        CHECK_THROWS_WITH(add_layer_norm(x, r), Catch::Contains("add_layer_norm") &&
                                                    Catch::Contains("[3, 4]") &&
                                                    Catch::Contains("[4, 3]"));
        auto g = ember::Tensor<B, 1>::ones({5});
        CHECK_THROWS_WITH(add_layer_norm(x, x, g), Catch::Contains("add_layer_norm") &&
                                                       Catch::Contains("gamma") &&
                                                       Catch::Contains("[5]"));
        CHECK_THROWS_AS(add_layer_norm(x, x, std::nullopt, std::nullopt, -1.0),
                        ember::ArgumentError);
        CHECK_THROWS_AS(add_layer_norm(x, x, std::nullopt, std::nullopt, 1e-5, DType::I64),
                        ember::DTypeError);
    }
}

// One layer_norm fixture case: x, then gamma and beta where the case has them; eps from params.
template <typename B, std::size_t D>
void layer_norm_case(const char* name, bool has_gamma, bool has_beta) {
    Fixture f("autodiff_modules", name);
    std::optional<ember::Tensor<B, 1>> gamma, beta;
    std::size_t next = 1;
    if (has_gamma) gamma = f.tensor<B, 1>(next++);
    if (has_beta) beta = f.tensor<B, 1>(next++);
    expect_close(ember::module::layer_norm(f.tensor<B, D>(0), gamma, beta, f.param("eps")),
                 f.output(0));
}

// layer_norm's forward values on every backend (the autodiff suite checks its gradients on every
// autodiff stack); the cases come from gen_autodiff_modules.py: inputs x[, gamma][, beta], then
// the upstream gradient; output 0 is torch's F.layer_norm.
TEMPLATE_LIST_TEST_CASE("module: layer_norm matches torch", "[module][norm]",
                        TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    using ember::module::layer_norm;
    SECTION("rank 3, gamma and beta") { layer_norm_case<B, 3>("layer_norm_affine", true, true); }
    SECTION("no affine, eps 1e-3") { layer_norm_case<B, 2>("layer_norm_plain", false, false); }
    SECTION("gamma only") { layer_norm_case<B, 2>("layer_norm_gamma", true, false); }
    SECTION("rows of 516") { layer_norm_case<B, 2>("layer_norm_wide", true, true); }
    SECTION("f16 inputs give f16 results within f16's precision") {
        Fixture f("autodiff_modules", "layer_norm_wide");
        const auto h = ember::DType::F16;
        auto y = layer_norm(f.tensor<B, 2>(0).cast(h), f.tensor<B, 1>(1).cast(h),
                            f.tensor<B, 1>(2).cast(h), 1e-5);
        CHECK(y.dtype() == h);
        // Inputs rounded to 11 bits move the normalised values by a few 1e-3 (|y| < 6 here).
        check_close(y.cast(ember::DType::F32).to_data(), f.output(0), ember::Tolerance{2e-2, 2e-2});
    }
    SECTION("a row of equal values normalises to beta; the input is not changed") {
        auto x = ember::Tensor<B, 1>::from_floats({3.f, 3.f, 3.f, 3.f, 1.f, 2.f, 3.f, 4.f})
                     .template reshape<2>({2, 4});
        auto b = ember::Tensor<B, 1>::from_floats({0.5f, -1.f, 2.f, 0.f});
        auto y = layer_norm(x, std::nullopt, b, 1e-5).to_data().template to_vec<double>();
        const double r = 1.0 / std::sqrt(1.25 + 1e-5);  // mean 2.5, biased variance 1.25
        const double want[] = {0.5, -1, 2, 0, -1.5 * r + 0.5, -0.5 * r - 1, 0.5 * r + 2, 1.5 * r};
        for (std::size_t i = 0; i < 8; ++i)
            CHECK(y[i] == Approx(want[i]).epsilon(1e-5).margin(1e-6));
        CHECK(x.to_data().template to_vec<double>()[4] == 1.0);
    }
    SECTION("errors name the op and the shapes") {
        auto x = ember::Tensor<B, 2>::zeros({3, 4});
        auto g = ember::Tensor<B, 1>::ones({5});
        CHECK_THROWS_AS(layer_norm(x, g), ember::ShapeError);
        CHECK_THROWS_WITH(layer_norm(x, std::nullopt, g),
                          Catch::Contains("layer_norm") && Catch::Contains("beta") &&
                              Catch::Contains("[5]") && Catch::Contains("[3, 4]"));
        CHECK_THROWS_AS(layer_norm(x, std::nullopt, std::nullopt, -1.0), ember::ArgumentError);
    }
}

}  // namespace test_module_ops
