// Convolution and pooling layers (ember::nn): Conv1d/2d/3d, ConvTranspose1d/2d/3d,
// DeformConv2d, AvgPool1d/2d, MaxPool1d/2d and AdaptiveAvgPool1d/2d, built from their configs and
// checked against torch.nn (tests/fixtures/gen_nn_conv.py): forward values and the gradients of
// the input and every parameter; float64 finite differences; PyTorch's default initialisation;
// display; and the errors of bad configs and bad inputs.
#include <algorithm>
#include <cmath>
#include <ember/nn/conv.hpp>
#include <ember/nn/pool.hpp>
#include <numeric>

#include "grad_check.hpp"
#include "module_check.hpp"

namespace test_nn_conv {

namespace {

using CpuB = ember::Autodiff<ember::Cpu>;  // the stack of the CPU-only cases
using F64 = ember::test::AutodiffF64;
using ember::Distribution;
using ember::Shape;
using ember::Tensor;
using ember::test::check_close;
using ember::test::Fixture;
using namespace ember::nn;

const char* const kFile = "nn_conv";

/// `model` with every parameter set from the fixture tensor of the same name (its state_dict
/// name: "weight", "bias"); checks that the fixture has exactly the module's parameters.
template <typename M>
M with_fixture_params(const M& model, const Fixture& f) {
    std::vector<std::string> paths;
    model.visit([&](std::string_view path, const auto&) { paths.emplace_back(path); });
    for (const char* name : {"weight", "bias"}) {
        INFO("parameter " << name);
        CHECK(f.has(name) == (std::find(paths.begin(), paths.end(), name) != paths.end()));
    }
    return model.map([&](std::string_view path, const auto& p) {
        return ember::test::param_from(p, f.named(std::string(path)));
    });
}

/// Checks the gradient of every parameter of `model` against the fixture's "grad.<path>".
template <typename M>
void check_param_grads(const M& model, const ember::Gradients& grads, const Fixture& f) {
    model.visit([&](std::string_view path, const auto& p) {
        INFO("gradient of " << path);
        auto g = p.val().grad(grads);
        REQUIRE(g.has_value());
        check_close(g->to_data(), f.named("grad." + std::string(path)));
    });
}

/// Runs the fixture case `name` through `built` (with the fixture's weights) on the autodiff
/// backend B: output, input gradient and parameter gradients against torch, with
/// L = sum(output * gout).
template <typename B, std::size_t D, typename M>
void check_layer(const std::string& name, const M& built) {
    INFO("case " << name);
    Fixture f(kFile, name);
    const M model = with_fixture_params(built, f);
    auto x = f.named_tensor<B, D>("input").require_grad();
    auto y = model.forward(x);
    check_close(y.to_data(), f.named("output"));
    auto grads = (y * f.named_tensor<B, D>("gout")).sum().backward();
    auto gx = x.grad(grads);
    REQUIRE(gx.has_value());
    check_close(gx->to_data(), f.named("grad.input"));
    check_param_grads(model, grads, f);
}

/// Parameter gradients of `model` (on the f64 autodiff backend) against central finite
/// differences, for L = sum(forward(x) * gout) with random x and gout.
template <std::size_t D, typename M>
void check_fd(const M& model, const Shape& input_shape) {
    auto x = Tensor<F64, D>::random(input_shape, Distribution::Uniform(-1.0, 1.0));
    auto gout = Tensor<F64, D>::random(model.forward(x).shape(), Distribution::Uniform(-1.0, 1.0));
    ember::test::check_param_grads_fd(model,
                                      [&](const M& m) { return (m.forward(x) * gout).sum(); });
}

/// Whether `m.forward(x)` compiles.
template <typename M, typename X>
concept Forwards = requires(const M& m, const X& x) {
    m.forward(x);
};

/// Runs `f` and checks it throws E with `fragment` in its message.
template <typename E, typename Fn>
void check_throws(Fn&& fn, const std::string& fragment) {
    try {
        fn();
    } catch (const E& e) {
        INFO("message: " << e.what());
        CHECK(std::string(e.what()).find(fragment) != std::string::npos);
        return;
    }
    FAIL("expected an exception containing \"" << fragment << "\"");
}

/// Checks that a default-initialised parameter is uniform on ±bound: inside the bound, spread to
/// both ends, centred, and with the uniform distribution's variance bound²/3.
template <typename P>
void check_uniform(const P& param, double bound) {
    const auto v = param.val().to_data().template to_vec<float>();
    const double n = double(v.size());
    const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
    const double mean = std::accumulate(v.begin(), v.end(), 0.0) / n;
    double var = 0.0;
    for (float x : v) var += (x - mean) * (x - mean) / n;
    INFO("bound " << bound << ", min " << *lo << ", max " << *hi << ", mean " << mean
                  << ", variance " << var << " over " << v.size() << " values");
    CHECK(*hi <= bound);
    CHECK(*lo >= -bound);
    CHECK(*hi > 0.8 * bound);
    CHECK(*lo < -0.8 * bound);
    // Five standard errors of the mean and of the variance of n uniform draws.
    CHECK(std::abs(mean) < 5.0 * bound / std::sqrt(3.0 * n));
    CHECK(std::abs(var - bound * bound / 3.0) < 5.0 * std::sqrt(4.0 / 45.0 / n) * bound * bound);
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("Conv1d matches torch.nn.Conv1d", "[nn][conv]",
                        ember::test::AutodiffBackends) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    SECTION("basic") {
        check_layer<B, 3>("conv1d_basic", Conv1dConfig{3, 4, 3}.init<B>());
    }
    SECTION("stride, explicit padding and dilation") {
        auto c = Conv1dConfig{2, 4, 3}.with_stride(2).with_dilation(2).with_padding(
            PaddingConfig1d::Explicit(2));
        check_layer<B, 3>("conv1d_stride_pad_dil", c.init<B>());
    }
    SECTION("Same padding keeps the length") {
        auto c = Conv1dConfig{3, 2, 5}.with_padding(PaddingConfig1d::Same());
        check_layer<B, 3>("conv1d_same", c.init<B>());
    }
    SECTION("Same padding with dilation (PyTorch's padding=\"same\")") {
        auto c = Conv1dConfig{2, 3, 3}.with_padding(PaddingConfig1d::Same()).with_dilation(2);
        check_layer<B, 3>("conv1d_same_dilation", c.init<B>());
    }
    SECTION("groups, no bias") {
        auto c = Conv1dConfig{4, 6, 2}.with_groups(2).with_bias(false);
        check_layer<B, 3>("conv1d_groups_nobias", c.init<B>());
    }
    SECTION("finite differences") {
        if (!std::is_same_v<B, CpuB>) return;  // f64 on the CPU: once, not per stack
        auto c = Conv1dConfig{4, 2, 3}.with_groups(2).with_padding(PaddingConfig1d::Explicit(1));
        check_fd<3>(c.init<F64>(), {2, 4, 6});
    }
}

TEMPLATE_LIST_TEST_CASE("Conv2d matches torch.nn.Conv2d", "[nn][conv]",
                        ember::test::AutodiffBackends) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    SECTION("basic") {
        check_layer<B, 4>("conv2d_basic", Conv2dConfig{{3, 4}, {3, 3}}.init<B>());
    }
    SECTION("stride and explicit padding") {
        auto c = Conv2dConfig{{2, 3}, {3, 2}}.with_stride({2, 1}).with_padding(
            PaddingConfig2d::Explicit(1, 0));
        check_layer<B, 4>("conv2d_stride_pad", c.init<B>());
    }
    SECTION("Same padding with dilation") {
        auto c = Conv2dConfig{{2, 4}, {3, 5}}
                     .with_padding(PaddingConfig2d::Same())
                     .with_dilation({2, 1});
        check_layer<B, 4>("conv2d_same_dilation", c.init<B>());
    }
    SECTION("groups and dilation, no bias") {
        auto c = Conv2dConfig{{4, 6}, {2, 2}}.with_groups(2).with_dilation({1, 2}).with_bias(false);
        check_layer<B, 4>("conv2d_groups_nobias", c.init<B>());
    }
    SECTION("depthwise") {
        auto c = Conv2dConfig{{3, 3}, {3, 3}}.with_groups(3).with_padding(
            PaddingConfig2d::Explicit(1, 1));
        check_layer<B, 4>("conv2d_depthwise", c.init<B>());
    }
    SECTION("finite differences") {
        if (!std::is_same_v<B, CpuB>) return;  // f64 on the CPU: once, not per stack
        auto c = Conv2dConfig{{2, 3}, {3, 2}}.with_stride({1, 2}).with_padding(
            PaddingConfig2d::Explicit(1, 1));
        check_fd<4>(c.init<F64>(), {2, 2, 4, 5});
    }
}

TEMPLATE_LIST_TEST_CASE("Conv3d matches torch.nn.Conv3d", "[nn][conv]",
                        ember::test::AutodiffBackends) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    SECTION("basic") {
        check_layer<B, 5>("conv3d_basic", Conv3dConfig{{2, 3}, {2, 3, 2}}.init<B>());
    }
    SECTION("stride, padding, dilation and groups, no bias") {
        auto c = Conv3dConfig{{4, 2}, {3, 2, 2}}
                     .with_stride({2, 1, 2})
                     .with_padding(PaddingConfig3d::Explicit(1, 1, 0))
                     .with_dilation({1, 2, 1})
                     .with_groups(2)
                     .with_bias(false);
        check_layer<B, 5>("conv3d_stride_pad_groups", c.init<B>());
    }
    SECTION("Same padding") {
        auto c = Conv3dConfig{{2, 2}, {3, 3, 3}}.with_padding(PaddingConfig3d::Same());
        check_layer<B, 5>("conv3d_same", c.init<B>());
    }
    SECTION("finite differences") {
        if (!std::is_same_v<B, CpuB>) return;  // f64 on the CPU: once, not per stack
        check_fd<5>(Conv3dConfig{{2, 2}, {2, 2, 2}}.init<F64>(), {1, 2, 3, 3, 3});
    }
}

TEMPLATE_LIST_TEST_CASE("ConvTranspose1d/2d/3d match torch.nn.ConvTranspose*", "[nn][conv]",
                        ember::test::AutodiffBackends) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    SECTION("1-d basic") {
        check_layer<B, 3>("conv_transpose1d_basic", ConvTranspose1dConfig{{3, 2}, 3}.init<B>());
    }
    SECTION("1-d stride, padding, output padding") {
        auto c =
            ConvTranspose1dConfig{{2, 4}, 3}.with_stride(2).with_padding(1).with_padding_out(1);
        check_layer<B, 3>("conv_transpose1d_stride_pad_opad", c.init<B>());
    }
    SECTION("1-d groups and dilation, no bias") {
        auto c = ConvTranspose1dConfig{{4, 6}, 2}
                     .with_stride(3)
                     .with_padding_out(2)
                     .with_groups(2)
                     .with_dilation(2)
                     .with_bias(false);
        check_layer<B, 3>("conv_transpose1d_groups_dil_nobias", c.init<B>());
    }
    SECTION("2-d basic") {
        check_layer<B, 4>("conv_transpose2d_basic",
                          ConvTranspose2dConfig{{3, 2}, {3, 2}}.init<B>());
    }
    SECTION("2-d stride, padding, output padding") {
        auto c = ConvTranspose2dConfig{{2, 4}, {3, 3}}
                     .with_stride({2, 3})
                     .with_padding({1, 0})
                     .with_padding_out({1, 2});
        check_layer<B, 4>("conv_transpose2d_stride_pad_opad", c.init<B>());
    }
    SECTION("2-d groups and dilation, no bias") {
        auto c = ConvTranspose2dConfig{{4, 2}, {2, 3}}
                     .with_stride({1, 2})
                     .with_groups(2)
                     .with_dilation({2, 1})
                     .with_bias(false);
        check_layer<B, 4>("conv_transpose2d_groups_dil_nobias", c.init<B>());
    }
    SECTION("3-d basic") {
        check_layer<B, 5>("conv_transpose3d_basic",
                          ConvTranspose3dConfig{{2, 3}, {2, 2, 3}}.init<B>());
    }
    SECTION("3-d stride, padding, output padding and groups, no bias") {
        auto c = ConvTranspose3dConfig{{4, 4}, {2, 3, 2}}
                     .with_stride({2, 1, 2})
                     .with_padding({0, 1, 1})
                     .with_padding_out({1, 0, 1})
                     .with_groups(2)
                     .with_bias(false);
        check_layer<B, 5>("conv_transpose3d_stride_groups_nobias", c.init<B>());
    }
    SECTION("finite differences") {
        if (!std::is_same_v<B, CpuB>) return;  // f64 on the CPU: once, not per stack
        auto c1 = ConvTranspose1dConfig{{2, 4}, 3}.with_stride(2).with_groups(2);
        check_fd<3>(c1.init<F64>(), {1, 2, 4});
        auto c2 = ConvTranspose2dConfig{{2, 3}, {2, 3}}.with_stride({2, 1}).with_padding({0, 1});
        check_fd<4>(c2.init<F64>(), {2, 2, 3, 3});
        check_fd<5>(ConvTranspose3dConfig{{2, 2}, {2, 2, 2}}.init<F64>(), {1, 2, 2, 3, 2});
    }
}

namespace {
/// DeformConv2d's fixture case: input, offset and (when present) mask, all with gradients.
template <typename B>
void check_deform(const std::string& name, const DeformConv2d<B>& built) {
    INFO("case " << name);
    Fixture f(kFile, name);
    const auto model = with_fixture_params(built, f);
    auto x = f.named_tensor<B, 4>("input").require_grad();
    auto offset = f.named_tensor<B, 4>("offset").require_grad();
    std::optional<Tensor<B, 4>> mask;
    if (f.has("mask")) mask = f.named_tensor<B, 4>("mask").require_grad();
    auto y = model.forward(x, offset, mask);
    check_close(y.to_data(), f.named("output"));
    auto grads = (y * f.named_tensor<B, 4>("gout")).sum().backward();
    std::vector<std::pair<std::string, Tensor<B, 4>>> inputs{{"input", x}, {"offset", offset}};
    if (mask) inputs.emplace_back("mask", *mask);
    for (const auto& [input_name, t] : inputs) {
        INFO("gradient of " << input_name);
        auto g = t.grad(grads);
        REQUIRE(g.has_value());
        check_close(g->to_data(), f.named("grad." + input_name));
    }
    check_param_grads(model, grads, f);
}
}  // namespace

TEMPLATE_LIST_TEST_CASE("DeformConv2d matches torchvision's DeformConv2d", "[nn][conv]",
                        ember::test::AutodiffBackends) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    SECTION("basic, no mask") {
        check_deform("deform_conv2d_basic", DeformConv2dConfig{{2, 3}, {3, 3}}.init<B>());
    }
    SECTION("mask (DCNv2) and Same padding") {
        auto c = DeformConv2dConfig{{3, 4}, {3, 3}}.with_padding(PaddingConfig2d::Same());
        check_deform("deform_conv2d_mask_same", c.init<B>());
    }
    SECTION("stride, dilation, weight and offset groups, no bias") {
        auto c = DeformConv2dConfig{{4, 4}, {2, 3}}
                     .with_stride({2, 1})
                     .with_padding(PaddingConfig2d::Explicit(1, 1))
                     .with_dilation({1, 2})
                     .with_weight_groups(2)
                     .with_offset_groups(2)
                     .with_bias(false);
        check_deform("deform_conv2d_stride_dil_groups_nobias", c.init<B>());
    }
    SECTION("finite differences") {
        if (!std::is_same_v<B, CpuB>) return;  // f64 on the CPU: once, not per stack
        auto model = DeformConv2dConfig{{2, 2}, {2, 2}}.init<F64>();
        auto x = Tensor<F64, 4>::random({1, 2, 4, 4}, Distribution::Uniform(-1.0, 1.0));
        auto offset = Tensor<F64, 4>::random({1, 8, 3, 3}, Distribution::Uniform(-1.5, 1.5));
        auto mask = Tensor<F64, 4>::random({1, 4, 3, 3}, Distribution::Uniform(0.0, 1.0));
        auto gout = Tensor<F64, 4>::random({1, 2, 3, 3}, Distribution::Uniform(-1.0, 1.0));
        ember::test::check_param_grads_fd(model, [&](const DeformConv2d<F64>& m) {
            return (m.forward(x, offset, mask) * gout).sum();
        });
    }
}

TEMPLATE_LIST_TEST_CASE("pooling layers match torch.nn pools", "[nn][conv][pool]",
                        ember::test::AutodiffBackends) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    SECTION("AvgPool1d") {
        check_layer<B, 3>("avg_pool1d_basic", AvgPool1dConfig{3}.init());
        check_layer<B, 3>("avg_pool1d_stride_pad_exclude",
                          AvgPool1dConfig{4}
                              .with_stride(2)
                              .with_padding(PaddingConfig1d::Explicit(2))
                              .with_count_include_pad(false)
                              .init());
        check_layer<B, 3>("avg_pool1d_same",
                          AvgPool1dConfig{3}.with_padding(PaddingConfig1d::Same()).init());
        check_layer<B, 3>("avg_pool1d_ceil", AvgPool1dConfig{3}
                                                 .with_stride(2)
                                                 .with_padding(PaddingConfig1d::Explicit(1))
                                                 .with_ceil_mode(true)
                                                 .init());
    }
    SECTION("AvgPool2d") {
        check_layer<B, 4>("avg_pool2d_basic", AvgPool2dConfig{{2, 3}}.init());
        check_layer<B, 4>("avg_pool2d_stride_pad_exclude",
                          AvgPool2dConfig{{3, 3}}
                              .with_strides({2, 2})
                              .with_padding(PaddingConfig2d::Explicit(1, 1))
                              .with_count_include_pad(false)
                              .init());
        check_layer<B, 4>("avg_pool2d_same",
                          AvgPool2dConfig{{3, 5}}.with_padding(PaddingConfig2d::Same()).init());
        check_layer<B, 4>("avg_pool2d_ceil", AvgPool2dConfig{{3, 2}}
                                                 .with_strides({2, 2})
                                                 .with_padding(PaddingConfig2d::Explicit(1, 1))
                                                 .with_ceil_mode(true)
                                                 .init());
    }
    SECTION("MaxPool1d") {
        check_layer<B, 3>("max_pool1d_basic", MaxPool1dConfig{3}.init());
        check_layer<B, 3>("max_pool1d_stride_pad_dil",
                          MaxPool1dConfig{3}
                              .with_stride(2)
                              .with_padding(PaddingConfig1d::Explicit(1))
                              .with_dilation(2)
                              .init());
        check_layer<B, 3>("max_pool1d_ceil",
                          MaxPool1dConfig{2}.with_stride(3).with_ceil_mode(true).init());
    }
    SECTION("MaxPool2d") {
        check_layer<B, 4>("max_pool2d_basic", MaxPool2dConfig{{2, 2}}.init());
        check_layer<B, 4>("max_pool2d_stride_pad_dil",
                          MaxPool2dConfig{{3, 2}}
                              .with_strides({2, 1})
                              .with_padding(PaddingConfig2d::Explicit(1, 1))
                              .with_dilation({1, 2})
                              .init());
        // Same with dilation pads by dilation·(kernel−1)/2 = (2, 1): more than torch's max_pool
        // accepts, so the fixture pads with -inf explicitly.
        check_layer<B, 4>("max_pool2d_same_dilation", MaxPool2dConfig{{3, 3}}
                                                          .with_padding(PaddingConfig2d::Same())
                                                          .with_dilation({2, 1})
                                                          .init());
    }
    SECTION("AdaptiveAvgPool1d and AdaptiveAvgPool2d") {
        check_layer<B, 3>("adaptive_avg_pool1d_down", AdaptiveAvgPool1dConfig{3}.init());
        check_layer<B, 3>("adaptive_avg_pool1d_up", AdaptiveAvgPool1dConfig{5}.init());
        check_layer<B, 4>("adaptive_avg_pool2d_down", AdaptiveAvgPool2dConfig{{3, 2}}.init());
        check_layer<B, 4>("adaptive_avg_pool2d_mixed", AdaptiveAvgPool2dConfig{{4, 4}}.init());
    }
    SECTION("pools run on a backend without autodiff") {
        Fixture f(kFile, "max_pool2d_stride_pad_dil");
        auto pool = MaxPool2dConfig{{3, 2}}
                        .with_strides({2, 1})
                        .with_padding(PaddingConfig2d::Explicit(1, 1))
                        .with_dilation({1, 2})
                        .init();
        check_close(pool.forward(f.named_tensor<ember::Cpu, 4>("input")).to_data(),
                    f.named("output"));
    }
}

TEST_CASE("convolutions draw PyTorch's default initialisation", "[nn][conv]") {
    using B = CpuB;
    // PyTorch: kaiming_uniform_(a=√5) on the weight and uniform ±1/√fan_in on the bias, i.e.
    // both uniform on ±1/√fan_in with fan_in = weight.size(1) · ∏kernel.
    SECTION("Conv2d: fan_in = channels_in · kh · kw") {
        auto conv = Conv2dConfig{{6, 8}, {3, 3}}.init<B>();
        CHECK(conv.weight.shape() == Shape{8, 6, 3, 3});
        check_uniform(conv.weight, 1.0 / std::sqrt(54.0));
        auto bias = conv.bias->val().to_data().to_vec<float>();
        CHECK(bias.size() == 8);
        for (float b : bias) CHECK(std::abs(b) <= 1.0 / std::sqrt(54.0));
        CHECK(*std::max_element(bias.begin(), bias.end()) >
              *std::min_element(bias.begin(), bias.end()));
    }
    SECTION("groups divide fan_in") {
        check_uniform(Conv2dConfig{{6, 8}, {3, 3}}.with_groups(2).init<B>().weight,
                      1.0 / std::sqrt(27.0));
        check_uniform(Conv1dConfig{16, 32, 5}.init<B>().weight, 1.0 / std::sqrt(80.0));
        check_uniform(Conv3dConfig{{4, 4}, {3, 3, 3}}.init<B>().weight, 1.0 / std::sqrt(108.0));
        check_uniform(DeformConv2dConfig{{4, 6}, {3, 3}}.with_weight_groups(2).init<B>().weight,
                      1.0 / std::sqrt(18.0));
    }
    SECTION("transposed convolutions: fan_in = channels_out / groups · ∏kernel") {
        auto t = ConvTranspose2dConfig{{8, 6}, {3, 3}}.with_groups(2).init<B>();
        CHECK(t.weight.shape() == Shape{8, 3, 3, 3});
        check_uniform(t.weight, 1.0 / std::sqrt(27.0));
        check_uniform(ConvTranspose1dConfig{{32, 16}, 5}.init<B>().weight, 1.0 / std::sqrt(80.0));
    }
    SECTION("a fan-out initialiser sees channels_out / groups · ∏kernel") {
        auto c = Conv2dConfig{{6, 8}, {3, 3}}.with_groups(2).with_initializer(
            Initializer::KaimingUniform(1.0 / std::sqrt(3.0), true));
        check_uniform(c.init<B>().weight, 1.0 / std::sqrt(36.0));
    }
    SECTION("another initialiser replaces the default") {
        auto conv = Conv2dConfig{{2, 3}, {2, 2}}.with_initializer(Initializer::Zeros()).init<B>();
        CHECK(conv.weight.val().abs().sum().into_scalar() == 0.0f);
        CHECK(conv.bias->val().abs().sum().into_scalar() == 0.0f);
    }
    SECTION("parameters are lazy: nothing is drawn until first use") {
        auto conv = Conv2dConfig{{2, 3}, {2, 2}}.init<B>();
        CHECK_FALSE(conv.weight.is_initialized());
        CHECK(conv.num_params() == 3 * 2 * 2 * 2 + 3);
        CHECK(conv.channels_in() == 2);
        CHECK_FALSE(conv.weight.is_initialized());
    }
}

TEST_CASE("convolution modules: valid, records, display", "[nn][conv]") {
    using B = CpuB;
    SECTION("valid() is the same layer on the inner backend") {
        auto conv = Conv2dConfig{{2, 3}, {3, 3}}.with_padding(PaddingConfig2d::Same()).init<B>();
        auto inner = conv.valid();
        static_assert(std::is_same_v<decltype(inner), Conv2d<ember::Cpu>>);
        auto x = Tensor<B, 4>::random({1, 2, 5, 4}, Distribution::Default);
        check_close(inner.forward(x.inner()).to_data(), conv.forward(x).to_data());
        CHECK(inner.padding == PaddingConfig2d::Same());
    }
    SECTION("records keep weight and bias under PyTorch's names") {
        auto conv = ConvTranspose2dConfig{{2, 3}, {2, 2}}.init<B>();
        auto loaded =
            ConvTranspose2dConfig{{2, 3}, {2, 2}}.init<B>().load_record(conv.into_record());
        CHECK(loaded.weight.val().to_data() == conv.weight.val().to_data());
        CHECK(loaded.bias->val().to_data() == conv.bias->val().to_data());
        std::vector<std::string> paths;
        conv.visit([&](std::string_view p, const auto&) { paths.emplace_back(p); });
        CHECK(paths == std::vector<std::string>{"weight", "bias"});
    }
    SECTION("display") {
        std::ostringstream conv, deform, convt, pool, adaptive;
        conv
            << Conv2dConfig{{2, 3}, {3, 3}}.with_padding(PaddingConfig2d::Explicit(1, 0)).init<B>();
        CHECK(conv.str() ==
              "Conv2d {ch_in: 2, ch_out: 3, stride: [1, 1], kernel_size: [3, 3], dilation: [1, 1], "
              "groups: 1, padding: Explicit(1, 0), params: 57}");
        deform << DeformConv2dConfig{{5, 1}, {5, 5}}.init<B>();  // Burn's own display test
        CHECK(deform.str() ==
              "DeformConv2d {stride: [1, 1], kernel_size: [5, 5], dilation: [1, 1], "
              "weight_groups: 1, offset_groups: 1, padding: Valid, params: 126}");
        convt << ConvTranspose1dConfig{{4, 2}, 3}.with_stride(2).with_bias(false).init<B>();
        CHECK(convt.str() ==
              "ConvTranspose1d {channels: [4, 2], stride: 2, kernel_size: 3, dilation: 1, "
              "groups: 1, padding: 0, padding_out: 0, params: 24}");
        pool << MaxPool2dConfig{{3, 3}}.with_padding(PaddingConfig2d::Same()).init();
        CHECK(pool.str() ==
              "MaxPool2d {kernel_size: [3, 3], stride: [1, 1], padding: Same, dilation: [1, 1], "
              "ceil_mode: false}");
        adaptive << AdaptiveAvgPool2dConfig{{3, 3}}.init();
        CHECK(adaptive.str() == "AdaptiveAvgPool2d {output_size: [3, 3]}");
    }
}

TEST_CASE("convolution and pooling errors", "[nn][conv][errors]") {
    using B = CpuB;
    using ember::ArgumentError;
    using ember::ShapeError;
    SECTION("channels not divisible by groups") {
        auto c2 = Conv2dConfig{{3, 4}, {3, 3}}.with_groups(2);
        check_throws<ArgumentError>([&] { c2.init<B>(); }, "divisible by groups");
        auto c1 = Conv1dConfig{4, 3, 3}.with_groups(2);
        check_throws<ArgumentError>([&] { c1.init<B>(); }, "Conv1dConfig::init");
        auto t = ConvTranspose3dConfig{{4, 6}, {1, 1, 1}}.with_groups(4);
        check_throws<ArgumentError>([&] { t.init<B>(); }, "divisible by groups");
        auto d = DeformConv2dConfig{{1, 4}, {1, 1}}.with_weight_groups(4);
        check_throws<ArgumentError>([&] { d.init<B>(); }, "divisible by weight_groups");
        auto o = DeformConv2dConfig{{4, 4}, {1, 1}}.with_offset_groups(3);
        check_throws<ArgumentError>([&] { o.init<B>(); }, "offset_groups");
    }
    SECTION("zero sizes") {
        auto k = Conv2dConfig{{2, 2}, {0, 3}};
        check_throws<ArgumentError>([&] { k.init<B>(); }, "kernel_size must be >= 1");
        auto s = Conv3dConfig{{2, 2}, {1, 1, 1}}.with_stride({1, 0, 1});
        check_throws<ArgumentError>([&] { s.init<B>(); }, "stride must be >= 1");
        auto ch = Conv1dConfig{0, 2, 1};
        check_throws<ArgumentError>([&] { ch.init<B>(); }, "channels must be positive");
        auto g = Conv2dConfig{{2, 2}, {1, 1}}.with_groups(0);
        check_throws<ArgumentError>([&] { g.init<B>(); }, "groups must be >= 1");
        check_throws<ArgumentError>([] { AvgPool1dConfig{0}.init(); }, "AvgPool1dConfig::init");
        check_throws<ArgumentError>([] { AdaptiveAvgPool2dConfig{{2, 0}}.init(); }, "output_size");
    }
    SECTION("Same padding with an even kernel or a stride") {
        auto even = Conv2dConfig{{4, 4}, {3, 2}}.with_padding(PaddingConfig2d::Same());
        check_throws<ArgumentError>([&] { even.init<B>(); }, "even kernel size");
        auto strided = Conv1dConfig{4, 4, 3}.with_padding(PaddingConfig1d::Same()).with_stride(2);
        check_throws<ArgumentError>([&] { strided.init<B>(); }, "needs stride 1");
        auto deform = DeformConv2dConfig{{4, 4}, {2, 2}}.with_padding(PaddingConfig2d::Same());
        check_throws<ArgumentError>([&] { deform.init<B>(); }, "even kernel size");
        auto pool = AvgPool2dConfig{{2, 2}}.with_padding(PaddingConfig2d::Same());
        check_throws<ArgumentError>([&] { pool.init(); }, "even kernel size");
        auto mp = MaxPool1dConfig{3}.with_padding(PaddingConfig1d::Same()).with_stride(2);
        check_throws<ArgumentError>([&] { mp.init(); }, "needs stride 1");
    }
    SECTION("pool padding over half the kernel, output padding too large") {
        auto pool = MaxPool1dConfig{3}.with_padding(PaddingConfig1d::Explicit(2));
        check_throws<ArgumentError>([&] { pool.init(); }, "at most half");
        auto t = ConvTranspose2dConfig{{2, 2}, {3, 3}}.with_stride({2, 2}).with_padding_out({0, 2});
        check_throws<ArgumentError>([&] { t.init<B>(); }, "padding_out");
    }
    SECTION("input with the wrong number of channels") {
        auto conv = Conv2dConfig{{3, 4}, {3, 3}}.init<B>();
        auto x = Tensor<B, 4>::zeros({1, 2, 5, 5});
        check_throws<ShapeError>([&] { conv.forward(x); }, "Conv2d: input [1, 2, 5, 5] has 2");
        auto grouped = Conv1dConfig{4, 2, 1}.with_groups(2).init<B>();
        check_throws<ShapeError>(
            [&] {
                grouped.forward(Tensor<B, 3>::zeros({1, 2, 3}));
            },
            "expects 4");
        auto t = ConvTranspose1dConfig{{3, 4}, 2}.init<B>();
        check_throws<ShapeError>(
            [&] {
                t.forward(Tensor<B, 3>::zeros({1, 4, 3}));
            },
            "ConvTranspose1d");
        auto d = DeformConv2dConfig{{5, 3}, {3, 3}}.init<B>();
        auto offset = Tensor<B, 4>::zeros({1, 18, 8, 8});
        check_throws<ShapeError>(
            [&] {
                d.forward(Tensor<B, 4>::zeros({1, 4, 10, 10}), offset);
            },
            "expects 5");
    }
    SECTION("deformable offsets of the wrong shape") {
        auto d = DeformConv2dConfig{{2, 3}, {3, 3}}.init<B>();
        auto x = Tensor<B, 4>::zeros({1, 2, 6, 6});
        check_throws<ShapeError>(
            [&] {
                d.forward(x, Tensor<B, 4>::zeros({1, 9, 4, 4}));
            },
            "offset");
        check_throws<ShapeError>(
            [&] {
                d.forward(x, Tensor<B, 4>::zeros({1, 18, 4, 4}), Tensor<B, 4>::zeros({1, 9, 3, 4}));
            },
            "mask");
    }
    SECTION("an input too small for the kernel") {
        auto conv = Conv2dConfig{{1, 1}, {5, 5}}.init<B>();
        CHECK_THROWS_AS(conv.forward(Tensor<B, 4>::zeros({1, 1, 3, 8})), ShapeError);
        auto pool = MaxPool1dConfig{4}.init();
        CHECK_THROWS_AS(pool.forward(Tensor<B, 3>::zeros({1, 1, 3})), ShapeError);
    }
    SECTION("inputs of the wrong rank do not compile") {
        static_assert(!Forwards<Conv2d<B>, Tensor<B, 3>>);
        static_assert(!Forwards<Conv1d<B>, Tensor<B, 4>>);
        static_assert(!Forwards<ConvTranspose3d<B>, Tensor<B, 4>>);
        static_assert(!Forwards<MaxPool2d, Tensor<B, 3>>);
        static_assert(!Forwards<AdaptiveAvgPool1d, Tensor<B, 4>>);
        static_assert(Forwards<Conv2d<B>, Tensor<B, 4>>);
        static_assert(Forwards<MaxPool2d, Tensor<B, 4>>);
        SUCCEED();
    }
}

}  // namespace test_nn_conv
