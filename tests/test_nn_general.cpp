// General layers against torch (tests/fixtures/gen_nn_general.py): normalisation (BatchNorm in
// training and inference, GroupNorm, InstanceNorm, LayerNorm, RmsNorm), activations (HardSigmoid,
// LeakyRelu, PRelu, SwiGlu), Embedding and Interpolate1d/2d. Each compares the forward value and
// the gradients of every parameter and of the input, and checks parameter gradients against f64
// finite differences.
#include <ember/nn/activations.hpp>
#include <ember/nn/embedding.hpp>
#include <ember/nn/interpolate.hpp>
#include <ember/nn/norm.hpp>

#include "grad_check.hpp"
#include "nn_general_check.hpp"

namespace test_nn_general {

using namespace ember::test::general;
using ember::Distribution;
using ember::Tensor;
using ember::test::check_close;
namespace nn = ember::nn;

namespace {

// forward(model, x) for any module with a forward of one tensor.
constexpr auto fwd = [](const auto& m, const auto& x) { return m.forward(x); };

template <typename AD, std::size_t D, typename M>
void torch_case(const M& model, const std::string& name, const std::vector<ParamName>& names) {
    auto f = fx(name);
    auto m = with_params(model, f, names);
    auto x = f.named_tensor<AD, D>("input").require_grad();
    check_against(m, f, names, x, m.forward(x));
}

const std::vector<ParamName> kAffine{{"gamma", "weight"}, {"beta", "bias"}};

}  // namespace

// ---- BatchNorm -----------------------------------------------------------------------------

namespace {
// One fixture case on the autodiff stack `B` (the CPU's composed BatchNorm, or CUDA's kernels).
template <typename B, std::size_t D>
void batchnorm_case(const std::string& name) {
    using AD = B;
    using Inner = ember::InnerBackend<B>;
    auto f = fx(name);
    const std::size_t channels = f.named("weight").shape()[0];
    auto config = nn::BatchNormConfig{channels}
                      .with_momentum(f.param("momentum"))
                      .with_epsilon(f.param("epsilon"));
    auto model = with_params(config.init<AD>(), f, kAffine);
    model.running_mean =
        ember::RunningState<Tensor<AD, 1>>(Tensor<AD, 1>::from_data(f.named("running_mean")));
    model.running_var =
        ember::RunningState<Tensor<AD, 1>>(Tensor<AD, 1>::from_data(f.named("running_var")));

    SECTION("training normalises with batch statistics; gradients match torch") {
        auto x = f.named_tensor<AD, D>("input").require_grad();
        check_against(model, f, kAffine, x, model.forward(x));
    }
    SECTION("running statistics follow torch over two training passes") {
        (void)model.forward(f.named_tensor<AD, D>("input"));
        check_close(model.running_mean.value().to_data(), f.named("running_mean.1"));
        check_close(model.running_var.value().to_data(), f.named("running_var.1"));
        (void)model.forward(f.named_tensor<AD, D>("input2"));
        check_close(model.running_mean.value().to_data(), f.named("running_mean.2"));
        check_close(model.running_var.value().to_data(), f.named("running_var.2"));

        SECTION("then inference (valid()) uses the running statistics, as torch's eval()") {
            auto inference = model.valid();
            static_assert(std::is_same_v<decltype(inference), nn::BatchNorm<Inner>>);
            auto y = inference.forward(f.named_tensor<Inner, D>("input3"));
            check_close(y.to_data(), f.named("output_eval"));
            // and leaves them alone
            check_close(inference.running_mean.value().to_data(), f.named("running_mean.2"));
        }
    }
    SECTION("copies of the module share the running statistics") {
        auto copy = model;
        (void)copy.forward(f.named_tensor<AD, D>("input"));
        check_close(model.running_mean.value().to_data(), f.named("running_mean.1"));
    }
}
}  // namespace

namespace {
template <typename B>
void batchnorm_cases() {
    SECTION("[N, C] (BatchNorm1d)") {
        batchnorm_case<B, 2>("batchnorm_2d_input");
    }
    SECTION("[N, C, L] (BatchNorm1d)") {
        batchnorm_case<B, 3>("batchnorm1d");
    }
    SECTION("[N, C, H, W] (BatchNorm2d)") {
        batchnorm_case<B, 4>("batchnorm2d");
    }
    SECTION("momentum 0.3, epsilon 1e-3") {
        batchnorm_case<B, 4>("batchnorm2d_momentum");
    }
}
}  // namespace

TEST_CASE("BatchNorm matches torch in training and inference", "[nn][general]") {
    batchnorm_cases<AD>();
}

#if defined(EMBER_CUDA)
// The same cases on CUDA's batch-norm kernels (CudaBackend::float_batch_norm and its backward,
// the eval kernel for valid()), plain and under Fusion.
TEMPLATE_TEST_CASE("BatchNorm matches torch on CUDA's fused kernels",
                   "[nn][general][cuda][batchnorm]", ember::Autodiff<ember::Cuda>,
                   ember::Autodiff<ember::Fusion<ember::Cuda>>) {
    if (!ember::cuda::is_available()) {
        WARN("skipped: no CUDA device");
        return;
    }
    static_assert(ember::BatchNormForwardBackend<TestType>);
    batchnorm_cases<TestType>();
}
#endif

TEST_CASE("BatchNorm defaults, gradients, display and errors", "[nn][general]") {
    auto model = nn::BatchNormConfig{3}.init<AD>();
    SECTION("PyTorch's initial state") {
        CHECK(model.gamma.val().to_data() == ember::TensorData({1.f, 1.f, 1.f}, {3}));
        CHECK(model.beta.val().to_data() == ember::TensorData({0.f, 0.f, 0.f}, {3}));
        CHECK(model.running_mean.value().to_data() == ember::TensorData({0.f, 0.f, 0.f}, {3}));
        CHECK(model.running_var.value().to_data() == ember::TensorData({1.f, 1.f, 1.f}, {3}));
        CHECK(model.momentum == 0.1);
        CHECK(model.epsilon == 1e-5);
        CHECK(model.num_params() == 6);
    }
    SECTION("finite differences") {
        if (!std::is_same_v<AD, ember::Autodiff<ember::Cpu>>) return;  // f64 on the CPU: once
        auto m = perturbed(nn::BatchNormConfig{2}.init<F64>());
        check_fd(m, Tensor<F64, 3>::random({3, 2, 4}, Distribution::Normal(0, 1)), fwd);
    }
    SECTION("records keep the running statistics") {
        (void)model.forward(Tensor<AD, 2>::random({4, 3}, Distribution::Normal(0, 1)));
        auto loaded = nn::BatchNormConfig{3}.init<AD>().load_record(model.into_record());
        CHECK(loaded.running_var.value().to_data() == model.running_var.value().to_data());
        CHECK(loaded.running_mean.id() == model.running_mean.id());
    }
    SECTION("display") {
        std::ostringstream os;
        os << model;
        CHECK(os.str() == "BatchNorm {num_features: 3, momentum: 0.1, epsilon: 1e-05, params: 6}");
    }
    SECTION("errors") {
        CHECK_THROWS_AS(nn::BatchNormConfig{0}.init<AD>(), ember::ArgumentError);
        CHECK_THROWS_AS(nn::BatchNormConfig{3}.with_momentum(1.5).init<AD>(), ember::ArgumentError);
        CHECK_THROWS_AS(nn::BatchNormConfig{3}.with_epsilon(0.0).init<AD>(), ember::ArgumentError);
        auto wrong = Tensor<AD, 3>::zeros({2, 4, 5});
        CHECK_THROWS_AS(model.forward(wrong), ember::ShapeError);
        CHECK_THROWS_WITH(model.forward(wrong), Catch::Contains("BatchNorm") &&
                                                    Catch::Contains("[2, 4, 5]") &&
                                                    Catch::Contains("3"));
        CHECK_THROWS_AS(model.forward(Tensor<AD, 2>::zeros({1, 3})), ember::ArgumentError);
        // inference needs no batch statistics
        CHECK_NOTHROW(model.valid().forward(Tensor<ember::Cpu, 2>::zeros({1, 3})));
    }
}

// ---- GroupNorm, InstanceNorm, LayerNorm, RmsNorm --------------------------------------------

TEMPLATE_LIST_TEST_CASE("GroupNorm matches torch", "[nn][general]",
                        ember::test::AutodiffBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using AD = TestType;  // every autodiff stack
    SECTION("[N, C, L], 2 groups") {
        torch_case<AD, 3>(nn::GroupNormConfig{2, 6}.init<AD>(), "groupnorm_3d", kAffine);
    }
    SECTION("[N, C, H, W], 3 groups, epsilon 1e-3") {
        torch_case<AD, 4>(nn::GroupNormConfig{3, 6}.with_epsilon(1e-3).init<AD>(), "groupnorm_4d",
                      kAffine);
    }
    SECTION("without affine parameters") {
        auto m = nn::GroupNormConfig{1, 4}.with_affine(false).init<AD>();
        CHECK(m.num_params() == 0);
        torch_case<AD, 3>(m, "groupnorm_noaffine", {});
    }
    SECTION("finite differences") {
        if (!std::is_same_v<AD, ember::Autodiff<ember::Cpu>>) return;  // f64 on the CPU: once
        auto m = perturbed(nn::GroupNormConfig{2, 4}.init<F64>());
        check_fd(m, Tensor<F64, 4>::random({2, 4, 2, 3}, Distribution::Normal(0, 1)), fwd);
    }
    SECTION("errors") {
        CHECK_THROWS_AS((nn::GroupNormConfig{4, 6}.init<AD>()), ember::ArgumentError);
        CHECK_THROWS_WITH((nn::GroupNormConfig{4, 6}.init<AD>()),
                          Catch::Contains("num_groups (4)") && Catch::Contains("(6)"));
        CHECK_THROWS_AS((nn::GroupNormConfig{0, 6}.init<AD>()), ember::ArgumentError);
        auto m = nn::GroupNormConfig{2, 6}.init<AD>();
        CHECK_THROWS_AS(m.forward(Tensor<AD, 3>::zeros({2, 4, 3})), ember::ShapeError);
    }
}

TEMPLATE_LIST_TEST_CASE("InstanceNorm matches torch", "[nn][general]",
                        ember::test::AutodiffBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using AD = TestType;  // every autodiff stack
    SECTION("[N, C, L] (InstanceNorm1d, affine)") {
        torch_case<AD, 3>(nn::InstanceNormConfig{3}.init<AD>(), "instancenorm1d", kAffine);
    }
    SECTION("[N, C, H, W] (InstanceNorm2d, affine)") {
        torch_case<AD, 4>(nn::InstanceNormConfig{3}.init<AD>(), "instancenorm2d", kAffine);
    }
    SECTION("without affine parameters (PyTorch's default)") {
        torch_case<AD, 3>(nn::InstanceNormConfig{2}.with_affine(false).init<AD>(),
                      "instancenorm_noaffine", {});
    }
    SECTION("inference gives the same values (no running statistics)") {
        auto f = fx("instancenorm1d");
        auto m = with_params(nn::InstanceNormConfig{3}.init<AD>(), f, kAffine);
        auto y = m.valid().forward(f.named_tensor<ember::InnerBackend<AD>, 3>("input"));
        check_close(y.to_data(), f.named("output"));
    }
    SECTION("finite differences") {
        if (!std::is_same_v<AD, ember::Autodiff<ember::Cpu>>) return;  // f64 on the CPU: once
        auto m = perturbed(nn::InstanceNormConfig{2}.init<F64>());
        check_fd(m, Tensor<F64, 3>::random({2, 2, 5}, Distribution::Normal(0, 1)), fwd);
    }
    SECTION("errors") {
        CHECK_THROWS_AS(nn::InstanceNormConfig{0}.init<AD>(), ember::ArgumentError);
        auto m = nn::InstanceNormConfig{3}.init<AD>();
        CHECK_THROWS_AS(m.forward(Tensor<AD, 3>::zeros({2, 2, 3})), ember::ShapeError);
    }
}

TEMPLATE_LIST_TEST_CASE("LayerNorm matches torch", "[nn][general]",
                        ember::test::AutodiffBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using AD = TestType;  // every autodiff stack
    SECTION("[N, S, d]") {
        torch_case<AD, 3>(nn::LayerNormConfig{5}.init<AD>(), "layernorm_3d", kAffine);
    }
    SECTION("[N, d], epsilon 1e-3") {
        torch_case<AD, 2>(nn::LayerNormConfig{4}.with_epsilon(1e-3).init<AD>(), "layernorm_2d",
                      kAffine);
    }
    SECTION("finite differences") {
        if (!std::is_same_v<AD, ember::Autodiff<ember::Cpu>>) return;  // f64 on the CPU: once
        auto m = perturbed(nn::LayerNormConfig{4}.init<F64>());
        check_fd(m, Tensor<F64, 3>::random({2, 3, 4}, Distribution::Normal(0, 1)), fwd);
    }
    SECTION("display") {
        std::ostringstream os;
        os << nn::LayerNormConfig{5}.init<AD>();
        CHECK(os.str() == "LayerNorm {d_model: 5, epsilon: 1e-05, params: 10}");
    }
    SECTION("errors") {
        CHECK_THROWS_AS(nn::LayerNormConfig{0}.init<AD>(), ember::ArgumentError);
        auto m = nn::LayerNormConfig{5}.init<AD>();
        CHECK_THROWS_AS(m.forward(Tensor<AD, 2>::zeros({3, 4})), ember::ShapeError);
        CHECK_THROWS_WITH(m.forward(Tensor<AD, 2>::zeros({3, 4})),
                          Catch::Contains("LayerNorm") && Catch::Contains("[3, 4]"));
    }
}

TEMPLATE_LIST_TEST_CASE("RmsNorm matches torch ops", "[nn][general]",
                        ember::test::AutodiffBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using AD = TestType;  // every autodiff stack
    const std::vector<ParamName> names{{"gamma", "weight"}};
    SECTION("[N, S, d]") {
        torch_case<AD, 3>(nn::RmsNormConfig{5}.init<AD>(), "rmsnorm_3d", names);
    }
    SECTION("[N, d], epsilon 1e-2") {
        torch_case<AD, 2>(nn::RmsNormConfig{4}.with_epsilon(1e-2).init<AD>(), "rmsnorm_2d", names);
    }
    SECTION("finite differences") {
        if (!std::is_same_v<AD, ember::Autodiff<ember::Cpu>>) return;  // f64 on the CPU: once
        auto m = perturbed(nn::RmsNormConfig{4}.init<F64>());
        check_fd(m, Tensor<F64, 2>::random({3, 4}, Distribution::Normal(0, 1)), fwd);
    }
    SECTION("errors") {
        CHECK_THROWS_AS(nn::RmsNormConfig{4}.with_epsilon(-1.0).init<AD>(), ember::ArgumentError);
        auto m = nn::RmsNormConfig{4}.init<AD>();
        CHECK_THROWS_AS(m.forward(Tensor<AD, 2>::zeros({3, 5})), ember::ShapeError);
    }
}

// ---- activations ---------------------------------------------------------------------------

TEMPLATE_LIST_TEST_CASE("activation modules match torch", "[nn][general]",
                        ember::test::AutodiffBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using AD = TestType;  // every autodiff stack
    SECTION("HardSigmoid, Burn's default alpha 0.2") {
        auto m = nn::HardSigmoidConfig{}.init();
        CHECK(m.alpha == 0.2);
        torch_case<AD, 2>(m, "hardsigmoid_burn", {});
    }
    SECTION("HardSigmoid with PyTorch's alpha 1/6") {
        torch_case<AD, 2>(nn::HardSigmoidConfig{}.with_alpha(1.0 / 6.0).init(), "hardsigmoid_torch",
                      {});
    }
    SECTION("LeakyRelu, default slope 0.01") {
        torch_case<AD, 3>(nn::LeakyReluConfig{}.init(), "leakyrelu_default", {});
    }
    SECTION("LeakyRelu, slope 0.2") {
        torch_case<AD, 1>(nn::LeakyReluConfig{0.2}.init(), "leakyrelu_02", {});
    }
    SECTION("PRelu, one shared slope") {
        auto m = nn::PReluConfig{}.init<AD>();
        CHECK(m.alpha.val().to_data() == ember::TensorData({0.25f}, {1}));
        torch_case<AD, 3>(m, "prelu_shared", {{"alpha", "weight"}});
    }
    SECTION("PRelu, one slope per channel") {
        torch_case<AD, 4>(nn::PReluConfig{3}.init<AD>(), "prelu_channels", {{"alpha", "weight"}});
    }
    SECTION("SwiGlu without bias (Burn's default)") {
        auto m = nn::SwiGluConfig{4, 5}.init<AD>();
        CHECK_FALSE(m.linear_inner.bias.has_value());
        torch_case<AD, 3>(m, "swiglu_nobias",
                      {{"linear_inner.weight", "linear_inner.weight", true},
                       {"linear_outer.weight", "linear_outer.weight", true}});
    }
    SECTION("SwiGlu with bias") {
        torch_case<AD, 2>(nn::SwiGluConfig{3, 2}.with_bias(true).init<AD>(), "swiglu_bias",
                      {{"linear_inner.weight", "linear_inner.weight", true},
                       {"linear_inner.bias", "linear_inner.bias"},
                       {"linear_outer.weight", "linear_outer.weight", true},
                       {"linear_outer.bias", "linear_outer.bias"}});
    }
    SECTION("finite differences") {
        if (!std::is_same_v<AD, ember::Autodiff<ember::Cpu>>) return;  // f64 on the CPU: once
        check_fd(perturbed(nn::PReluConfig{3}.init<F64>()),
                 Tensor<F64, 3>::random({2, 3, 4}, Distribution::Normal(0, 1)), fwd);
        check_fd(nn::SwiGluConfig{3, 4}.with_bias(true).init<F64>(),
                 Tensor<F64, 2>::random({2, 3}, Distribution::Normal(0, 1)), fwd);
    }
    SECTION("display") {
        std::ostringstream os;
        os << nn::PReluConfig{3}.init<AD>() << '\n' << nn::LeakyReluConfig{}.init();
        CHECK(os.str() ==
              "PRelu {num_parameters: 3, alpha_value: 0.25, params: 3}\n"
              "LeakyRelu {negative_slope: 0.01}");
    }
    SECTION("errors") {
        CHECK_THROWS_AS(nn::PReluConfig{0}.init<AD>(), ember::ArgumentError);
        CHECK_THROWS_AS((nn::SwiGluConfig{0, 3}.init<AD>()), ember::ArgumentError);
        auto m = nn::PReluConfig{3}.init<AD>();
        CHECK_THROWS_AS(m.forward(Tensor<AD, 3>::zeros({2, 4, 5})), ember::ShapeError);
        CHECK_THROWS_WITH(m.forward(Tensor<AD, 3>::zeros({2, 4, 5})),
                          Catch::Contains("PRelu") && Catch::Contains("[2, 4, 5]"));
        auto s = nn::SwiGluConfig{3, 2}.init<AD>();
        CHECK_THROWS_AS(s.forward(Tensor<AD, 2>::zeros({2, 4})), ember::ShapeError);
    }
}

// ---- Embedding -----------------------------------------------------------------------------

TEMPLATE_LIST_TEST_CASE("Embedding matches torch", "[nn][general]",
                        ember::test::AutodiffBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using AD = TestType;  // every autodiff stack
    auto f = fx("embedding");
    const std::vector<ParamName> names{{"weight", "weight"}};
    auto model = with_params(nn::EmbeddingConfig{10, 4}.init<AD>(), f, names);
    auto ids = f.named_tensor<AD, 2, ember::Int>("input");

    SECTION("lookup and weight gradient (repeated ids accumulate)") {
        check_against(model, f, names, ids, model.forward(ids));
    }
    SECTION("standard normal initialisation, as PyTorch") {
        auto m = nn::EmbeddingConfig{200, 50}.init<AD>();
        auto w = m.weight.val();
        CHECK(w.dims() == std::array<std::size_t, 2>{200, 50});
        CHECK(std::abs(w.mean().into_scalar()) < 0.05);
        CHECK(std::abs(w.var(0).mean().into_scalar() - 1.0) < 0.1);
    }
    SECTION("finite differences") {
        if (!std::is_same_v<AD, ember::Autodiff<ember::Cpu>>) return;  // f64 on the CPU: once
        auto m = nn::EmbeddingConfig{5, 3}.init<F64>();
        auto x = Tensor<F64, 2, ember::Int>::from_data(
            ember::TensorData(std::vector<std::int64_t>{4, 0, 4, 2}, {2, 2}));
        check_fd(m, x, fwd);
    }
    SECTION("display") {
        std::ostringstream os;
        os << model;
        CHECK(os.str() == "Embedding {n_embedding: 10, d_model: 4, params: 40}");
    }
    SECTION("errors") {
        CHECK_THROWS_AS((nn::EmbeddingConfig{0, 4}.init<AD>()), ember::ArgumentError);
        auto bad = Tensor<AD, 2, ember::Int>::from_data(
            ember::TensorData(std::vector<std::int64_t>{1, 10}, {1, 2}));
        CHECK_THROWS_AS(model.forward(bad), ember::IndexError);
        CHECK_THROWS_WITH(model.forward(bad), Catch::Contains("10"));
    }
}

// ---- Interpolate ---------------------------------------------------------------------------

namespace {
// Interpolate1d (D = 3) or Interpolate2d (D = 4) set up as the fixture `name` says (mode,
// align_corners, and an output size "out"/"out0", "out1" or a scale "scale"/"scale0", "scale1"),
// against torch.
template <typename AD, std::size_t D, typename Config>
void interpolate_case(const std::string& name) {
    auto f = fx(name);
    auto config = Config{}
                      .with_mode(nn::InterpolateMode(int(f.param("mode"))))
                      .with_align_corners(f.param("align_corners") != 0);
    if constexpr (D == 3) {
        if (f.has_param("out"))
            config.output_size = std::size_t(f.param("out"));
        else
            config.scale_factor = f.param("scale");
    } else {
        if (f.has_param("out0"))
            config.output_size = {std::size_t(f.param("out0")), std::size_t(f.param("out1"))};
        else
            config.scale_factor = {f.param("scale0"), f.param("scale1")};
    }
    auto m = config.init();
    auto x = f.named_tensor<AD, D>("input").require_grad();
    check_against(m, f, {}, x, m.forward(x));
}
}  // namespace

TEMPLATE_LIST_TEST_CASE("Interpolate2d matches torch.nn.functional.interpolate", "[nn][general]",
                        ember::test::AutodiffBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using AD = TestType;  // every autodiff stack
    for (const char* name :
         {"interpolate2d_nearest_size", "interpolate2d_nearest_scale", "interpolate2d_linear_size",
          "interpolate2d_linear_noalign", "interpolate2d_cubic_scale"}) {
        DYNAMIC_SECTION(name) {
            interpolate_case<AD, 4, nn::Interpolate2dConfig>(name);
        }
    }
    SECTION("without a size or a scale the input passes through") {
        auto x = Tensor<AD, 4>::random({1, 2, 3, 4}, Distribution::Default);
        CHECK(nn::Interpolate2dConfig{}.init().forward(x).to_data() == x.to_data());
    }
    SECTION("display") {
        std::ostringstream os;
        os << nn::Interpolate2dConfig{}
                  .with_output_size(std::array<std::size_t, 2>{4, 6})
                  .with_mode(nn::InterpolateMode::Linear)
                  .init();
        CHECK(os.str() ==
              "Interpolate2d {output_size: [4, 6], scale_factor: None, mode: Linear, "
              "align_corners: true}");
    }
    SECTION("errors") {
        auto both = nn::Interpolate2dConfig{std::array<std::size_t, 2>{2, 2},
                                            std::array<double, 2>{2.0, 2.0}};
        CHECK_THROWS_AS(both.init(), ember::ArgumentError);
        CHECK_THROWS_AS(
            nn::Interpolate2dConfig{}.with_output_size(std::array<std::size_t, 2>{0, 2}).init(),
            ember::ArgumentError);
        CHECK_THROWS_AS(
            nn::Interpolate2dConfig{}.with_scale_factor(std::array<double, 2>{1, -1}).init(),
            ember::ArgumentError);
        auto shrink =
            nn::Interpolate2dConfig{}.with_scale_factor(std::array<double, 2>{0.1, 1}).init();
        CHECK_THROWS_AS(shrink.forward(Tensor<AD, 4>::zeros({1, 1, 4, 4})), ember::ArgumentError);
    }
}

TEMPLATE_LIST_TEST_CASE("Interpolate1d matches torch.nn.functional.interpolate", "[nn][general]",
                        ember::test::AutodiffBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using AD = TestType;  // every autodiff stack
    for (const char* name :
         {"interpolate1d_nearest_size", "interpolate1d_nearest_scale", "interpolate1d_linear_size",
          "interpolate1d_linear_noalign", "interpolate1d_cubic_size"}) {
        DYNAMIC_SECTION(name) {
            interpolate_case<AD, 3, nn::Interpolate1dConfig>(name);
        }
    }
    SECTION("errors") {
        CHECK_THROWS_AS((nn::Interpolate1dConfig{3, 2.0}.init()), ember::ArgumentError);
        CHECK_THROWS_AS(nn::Interpolate1dConfig{}.with_output_size(0).init(), ember::ArgumentError);
    }
}

}  // namespace test_nn_general
