// Optimizers against torch.optim: 10-step trajectories of a small model (Linear 4→3 and a
// separate scale parameter) for every optimizer and option set, gradient clipping, two
// optimizers on two parts of one model, saving and resuming optimizer state, gradient
// accumulation, GradientsParams, and errors. References: tests/fixtures/gen_optim.py.
// The trajectories run on ember::test::AutodiffF64 (torch runs in float64 too) and match to
// 1e-9 relative; one Adam run on Autodiff<Cpu> (f32) checks the f32 path at 1e-4.
#include <ember/nn/linear.hpp>
#include <ember/optim.hpp>
#include <ember/record/recorder.hpp>
#include <filesystem>

#include "module_check.hpp"

namespace test_optim {

namespace {

using F64 = ember::test::AutodiffF64;
using F32 = ember::Autodiff<ember::Cpu>;
using ember::optim::GradientsParams;
namespace optim = ember::optim;

template <ember::Backend B>
struct Head {
    ember::Param<ember::Tensor<B, 1>> scale;
    EMBER_MODULE(Head, scale)
};

// out = tanh(x·W + b) · scale; loss = Σ(out − target)² / 15 (gen_optim.py's loss_fn).
template <ember::Backend B>
struct TrainModel {
    ember::nn::Linear<B> linear;
    Head<B> head;
    EMBER_MODULE(TrainModel, linear, head)

    ember::Tensor<B, 1> loss(const ember::Tensor<B, 2>& x,
                             const ember::Tensor<B, 2>& target) const {
        auto out = linear.forward(x).tanh() * head.scale.val().unsqueeze();
        auto diff = out - target;
        return (diff * diff).sum() / 15.0;
    }
};

const char* const kFile = "optim";
constexpr int kSteps = 10;

template <typename B>
ember::Tolerance tolerance() {
    if constexpr (std::is_same_v<B, F64>)
        return {1e-12, 1e-9};
    else
        return {1e-5, 1e-4};
}

template <typename B>
TrainModel<B> load_model(const ember::test::Fixture& fx) {
    TrainModel<B> m{ember::nn::LinearConfig{4, 3}.init<B>(),
                    Head<B>{ember::Param<ember::Tensor<B, 1>>(ember::Tensor<B, 1>::zeros({3}))}};
    m = ember::test::with_param(m, "linear.weight", fx.named("weight"));
    m = ember::test::with_param(m, "linear.bias", fx.named("bias"));
    return ember::test::with_param(m, "head.scale", fx.named("scale"));
}

template <typename B>
struct Data {
    ember::Tensor<B, 2> x, target;
    explicit Data(const ember::test::Fixture& fx)
        : x(fx.named_tensor<B, 2>("input")), target(fx.named_tensor<B, 2>("target")) {}
};

template <typename B>
GradientsParams grads_of(const TrainModel<B>& model, const Data<B>& d) {
    return GradientsParams::from_grads(model.loss(d.x, d.target).backward(), model);
}

template <typename B>
void check_step(const ember::test::Fixture& fx, const TrainModel<B>& model, int k) {
    INFO("after step " << k);
    const auto tol = tolerance<B>();
    const std::string s = "." + std::to_string(k);
    ember::test::check_close(model.linear.weight.val().to_data(), fx.named("weight" + s), tol);
    ember::test::check_close(model.linear.bias->val().to_data(), fx.named("bias" + s), tol);
    ember::test::check_close(model.head.scale.val().to_data(), fx.named("scale" + s), tol);
}

// Runs the case's 10 steps with `optim` (built for TrainModel<B>) at the case's lr.
template <typename B, typename Optim>
void check_trajectory(const std::string& name, Optim optim) {
    INFO("case " << name);
    ember::test::Fixture fx(kFile, name);
    Data<B> data(fx);
    auto model = load_model<B>(fx);
    const double lr = fx.param("lr");
    for (int k = 1; k <= kSteps; ++k) {
        auto grads = grads_of(model, data);  // before `model` is moved into step()
        model = optim.step(lr, std::move(model), std::move(grads));
        check_step(fx, model, k);
    }
}

template <typename Config>
void check_config(const std::string& name, const Config& config) {
    check_trajectory<F64>(name, config.template init<TrainModel<F64>>());
}

bool same_values(const TrainModel<F64>& a, const TrainModel<F64>& b) {
    return a.linear.weight.val().to_data() == b.linear.weight.val().to_data() &&
           a.linear.bias->val().to_data() == b.linear.bias->val().to_data() &&
           a.head.scale.val().to_data() == b.head.scale.val().to_data();
}

}  // namespace

TEST_CASE("SGD follows torch.optim.SGD", "[optim]") {
    using optim::MomentumConfig;
    using optim::SgdConfig;
    using optim::WeightDecayConfig;
    SECTION("plain") {
        check_config("sgd_plain", SgdConfig{});
    }
    SECTION("momentum") {
        check_config("sgd_momentum", SgdConfig{}.with_momentum(MomentumConfig{0.9, 0.0}));
    }
    SECTION("momentum with dampening") {
        check_config("sgd_dampening", SgdConfig{}.with_momentum(MomentumConfig{0.8, 0.3}));
    }
    SECTION("Nesterov momentum") {
        check_config("sgd_nesterov", SgdConfig{}.with_momentum(
                                         MomentumConfig{}.with_dampening(0).with_nesterov(true)));
    }
    SECTION("weight decay") {
        check_config("sgd_weight_decay", SgdConfig{}.with_weight_decay(WeightDecayConfig{0.05}));
    }
    SECTION("momentum, dampening and weight decay") {
        check_config("sgd_momentum_weight_decay", SgdConfig{}
                                                      .with_momentum(MomentumConfig{0.9, 0.1})
                                                      .with_weight_decay(WeightDecayConfig{0.05}));
    }
}

TEST_CASE("Adam and AdamW follow torch.optim", "[optim]") {
    SECTION("Adam (epsilon set to 1e-5 in torch)") {
        check_config("adam", optim::AdamConfig{});
    }
    SECTION("Adam with other betas and epsilon") {
        check_config("adam_betas",
                     optim::AdamConfig{}.with_beta_1(0.8).with_beta_2(0.99).with_epsilon(1e-8));
    }
    SECTION("Adam with L2 weight decay") {
        check_config("adam_weight_decay",
                     optim::AdamConfig{}.with_weight_decay(optim::WeightDecayConfig{0.1}));
    }
    SECTION("AdamW with decoupled weight decay") {
        check_config("adamw", optim::AdamWConfig{}.with_weight_decay(0.1));
    }
    SECTION("Adam on Autodiff<Cpu> (f32)") {
        check_trajectory<F32>("adam", optim::AdamConfig{}.init<TrainModel<F32>>());
    }
}

TEST_CASE("RMSProp follows torch.optim.RMSprop", "[optim]") {
    using optim::RmsPropConfig;
    SECTION("plain") {
        check_config("rmsprop", RmsPropConfig{});
    }
    SECTION("centered") {
        check_config("rmsprop_centered", RmsPropConfig{}.with_alpha(0.9).with_centered(true));
    }
    SECTION("momentum") {
        check_config("rmsprop_momentum", RmsPropConfig{}.with_momentum(0.9));
    }
    SECTION("weight decay") {
        check_config("rmsprop_weight_decay",
                     RmsPropConfig{}.with_weight_decay(optim::WeightDecayConfig{0.1}));
    }
    SECTION("centered, momentum and weight decay") {
        check_config("rmsprop_all", RmsPropConfig{}
                                        .with_alpha(0.95)
                                        .with_centered(true)
                                        .with_momentum(0.5)
                                        .with_weight_decay(optim::WeightDecayConfig{0.1}));
    }
}

TEST_CASE("AdaGrad follows torch.optim.Adagrad", "[optim]") {
    using optim::AdaGradConfig;
    SECTION("plain") {
        check_config("adagrad", AdaGradConfig{});
    }
    SECTION("lr_decay") {
        check_config("adagrad_lr_decay", AdaGradConfig{}.with_lr_decay(0.05));
    }
    SECTION("lr_decay and weight decay") {
        check_config("adagrad_weight_decay", AdaGradConfig{}.with_lr_decay(0.05).with_weight_decay(
                                                 optim::WeightDecayConfig{0.1}));
    }
}

TEST_CASE("Adan follows its reference update", "[optim]") {
    // gen_optim.py writes the update of the authors' implementation (torch 1.13 has no Adan).
    SECTION("defaults") {
        check_config("adan", optim::AdanConfig{});
    }
    SECTION("proximal weight decay") {
        check_config("adan_weight_decay", optim::AdanConfig{}.with_weight_decay(0.1));
    }
    SECTION("decoupled weight decay, other betas") {
        check_config("adan_no_prox", optim::AdanConfig{}
                                         .with_beta_1(0.9)
                                         .with_beta_2(0.8)
                                         .with_beta_3(0.999)
                                         .with_epsilon(1e-6)
                                         .with_weight_decay(0.1)
                                         .with_no_prox(true));
    }
    SECTION("on Autodiff<Cpu> (f32)") {
        check_trajectory<F32>("adan", optim::AdanConfig{}.init<TrainModel<F32>>());
    }
}

namespace {
// Muon steps 2-D parameters only: the bias and the scale are frozen, as gen_optim.py leaves
// them out of its optimizer.
template <typename B, typename Optim>
void check_muon(const std::string& name, Optim optim) {
    INFO("case " << name);
    ember::test::Fixture fx(kFile, name);
    Data<B> data(fx);
    auto model = load_model<B>(fx);
    model.linear.bias = model.linear.bias->set_require_grad(false);
    model.head.scale = model.head.scale.set_require_grad(false);
    for (int k = 1; k <= kSteps; ++k) {
        auto grads = grads_of(model, data);
        model = optim.step(fx.param("lr"), std::move(model), std::move(grads));
        check_step(fx, model, k);
    }
}
}  // namespace

TEST_CASE("Muon follows its reference update", "[optim]") {
    // gen_optim.py writes torch.optim.Muon's update (PyTorch 2.9) in float64.
    SECTION("defaults: Nesterov momentum 0.95, lr scaled by sqrt(max(1, rows / cols))") {
        check_muon<F64>("muon", optim::MuonConfig{}.init<TrainModel<F64>>());
    }
    SECTION("plain momentum, weight decay, the AdamW-matching lr scale") {
        check_muon<F64>("muon_plain_decay", optim::MuonConfig{}
                                                .with_momentum(0.9)
                                                .with_nesterov(false)
                                                .with_weight_decay(0.1)
                                                .with_adjust_lr(optim::MuonAdjustLr::MatchRmsAdamW)
                                                .init<TrainModel<F64>>());
    }
    SECTION("on Autodiff<Cpu> (f32)") {
        check_muon<F32>("muon", optim::MuonConfig{}.init<TrainModel<F32>>());
    }
    SECTION("Newton-Schulz acts on each singular value alone") {
        // diag(3, 0.5) divided by its Frobenius norm has singular values σ = 3/√9.25 and
        // 0.5/√9.25 and keeps its singular vectors, so each entry follows σ ← aσ + bσ³ + cσ⁵
        // five times: into the band around 1 the coefficients are tuned for (not exactly 1).
        auto g = ember::Tensor<ember::CpuF64, 2>::from_data(
            ember::TensorData(std::vector<double>{3.0, 0.0, 0.0, 0.5}, {2, 2}));
        const auto muon = optim::MuonConfig{}.init<TrainModel<F64>>().optimizer();
        const auto v = muon.orthogonalize(g).to_data().to_vec<double>();
        auto iterate = [&](double s) {
            for (int i = 0; i < 5; ++i)
                s = muon.ns_a * s + muon.ns_b * s * s * s + muon.ns_c * s * s * s * s * s;
            return s;
        };
        CHECK(v[0] == Approx(iterate(3.0 / std::sqrt(9.25))).epsilon(1e-12));
        CHECK(v[3] == Approx(iterate(0.5 / std::sqrt(9.25))).epsilon(1e-12));
        CHECK(v[1] == 0.0);
        CHECK(v[2] == 0.0);
        CHECK(v[0] > 0.68);
        CHECK(v[3] < 1.2);
    }
    SECTION("a parameter that is not 2-D is an error naming Muon") {
        ember::test::Fixture fx(kFile, "muon");
        Data<F64> data(fx);
        auto model = load_model<F64>(fx);
        auto muon = optim::MuonConfig{}.init<TrainModel<F64>>();
        CHECK_THROWS_WITH(muon.step(0.05, model, grads_of(model, data)),
                          Catch::Contains("Muon") && Catch::Contains("[3]"));
    }
}

TEST_CASE("L-BFGS follows torch.optim.LBFGS", "[optim]") {
    auto run = [](const std::string& name, optim::LbfgsConfig config) {
        INFO("case " << name);
        ember::test::Fixture fx(kFile, name);
        Data<F64> data(fx);
        auto model = load_model<F64>(fx);
        auto lbfgs = config.init<TrainModel<F64>>();
        const auto closure = [&](const TrainModel<F64>& m) { return m.loss(data.x, data.target); };
        for (int k = 1; k <= 3; ++k) {
            model = lbfgs.step(std::move(model), closure);
            check_step(fx, model, k);
            const std::string s = "." + std::to_string(k);
            CHECK(lbfgs.loss() == Approx(fx.named("loss" + s).value(0)).epsilon(1e-9));
            CHECK(double(lbfgs.func_evals()) == fx.param("evals" + s));
        }
    };
    SECTION("fixed steps, a history of 3 pairs") {
        run("lbfgs", optim::LbfgsConfig{}.with_lr(0.5).with_max_iter(4).with_history_size(3));
    }
    SECTION("strong-Wolfe line search, stopped by max_eval") {
        run("lbfgs_strong_wolfe",
            optim::LbfgsConfig{}.with_max_iter(10).with_history_size(5).with_line_search(
                optim::LbfgsLineSearch::StrongWolfe));
    }
    SECTION("strong-Wolfe line search, torch's defaults") {
        run("lbfgs_strong_wolfe_defaults",
            optim::LbfgsConfig{}.with_line_search(optim::LbfgsLineSearch::StrongWolfe));
    }
    SECTION("frozen parameters stay, a loss of several elements is an error") {
        ember::test::Fixture fx(kFile, "lbfgs");
        Data<F64> data(fx);
        auto model = load_model<F64>(fx);
        model.head.scale = model.head.scale.set_require_grad(false);
        auto lbfgs = optim::LbfgsConfig{}.init<TrainModel<F64>>();
        auto stepped = lbfgs.step(
            model, [&](const TrainModel<F64>& m) { return m.loss(data.x, data.target); });
        CHECK(stepped.head.scale.val().to_data() == model.head.scale.val().to_data());
        CHECK(stepped.linear.weight.val().to_data() != model.linear.weight.val().to_data());
        CHECK(stepped.linear.weight.id() == model.linear.weight.id());
        CHECK(stepped.linear.weight.is_require_grad());
        CHECK_THROWS_WITH(lbfgs.step(model,
                                     [&](const TrainModel<F64>& m) {
                                         return m.linear.forward(data.x).reshape<1>({15});
                                     }),
                          Catch::Contains("Lbfgs") && Catch::Contains("[15]"));
    }
}

TEST_CASE("ModuleLrOptimizer: a parameter group with its own schedule", "[optim]") {
    // torch: one SGD over two groups, the scale's rate from its own LambdaLR.
    const auto sgd =
        optim::SgdConfig{}.with_momentum(optim::MomentumConfig{0.9, 0.0}).init<TrainModel<F64>>();
    auto with_head = [&] {
        return optim::with_module_lr(sgd).with_group(
            "head", ember::lr_scheduler::ExponentialLrSchedulerConfig{0.05, 0.5}.init());
    };
    SECTION("follows torch's parameter groups") {
        check_trajectory<F64>("module_lr", with_head());
    }
    SECTION("saved and resumed: the group's schedule continues") {
        ember::test::Fixture fx(kFile, "module_lr");
        Data<F64> data(fx);
        auto model = load_model<F64>(fx);
        auto optim = with_head();
        for (int k = 1; k <= 4; ++k) model = optim.step(0.1, model, grads_of(model, data));
        auto resumed = with_head().load_record(optim.to_record());
        CHECK(resumed.to_record() == optim.to_record());
        for (int k = 5; k <= kSteps; ++k) {
            model = resumed.step(0.1, model, grads_of(model, data));
            check_step(fx, model, k);
        }
    }
    SECTION("prefixes match whole path components; the last matching group wins") {
        CHECK(optim::detail::under_prefix("head.scale", "head"));
        CHECK(optim::detail::under_prefix("head", "head"));
        CHECK_FALSE(optim::detail::under_prefix("header.w", "head"));
        CHECK(optim::detail::under_prefix("linear.weight", ""));
        // Rate 0 for the head, by a later group overriding an earlier one: the scale stays.
        ember::test::Fixture fx(kFile, "module_lr");
        Data<F64> data(fx);
        auto model = load_model<F64>(fx);
        auto optim =
            optim::with_module_lr(sgd).with_group("head", 0.5).with_group("head.scale", 0.0);
        auto stepped = optim.step(0.1, model, grads_of(model, data));
        CHECK(stepped.head.scale.val().to_data() == model.head.scale.val().to_data());
        CHECK(stepped.linear.bias->val().to_data() != model.linear.bias->val().to_data());
    }
    SECTION("errors") {
        auto optim = with_head();
        CHECK_THROWS_WITH(optim.load_record(optim::with_module_lr(sgd).to_record()),
                          Catch::Contains("ModuleLrOptimizer") && Catch::Contains("0 group"));
    }
}

TEST_CASE("gradient clipping", "[optim]") {
    using optim::GradientClipping;
    SECTION("by value matches clip_grad_value_") {
        check_config("clip_value", optim::SgdConfig{}
                                       .with_momentum(optim::MomentumConfig{0.9, 0.0})
                                       .with_grad_clipping(GradientClipping::Value(0.05)));
    }
    SECTION("by norm matches clip_grad_norm_ applied to each parameter") {
        check_config("clip_norm",
                     optim::AdamConfig{}.with_grad_clipping(GradientClipping::Norm(0.1)));
    }
    SECTION("the adaptor's with_grad_clipping is the config's") {
        auto adaptor = optim::AdamConfig{}.init<TrainModel<F64>>().with_grad_clipping(
            GradientClipping::Norm(0.1));
        check_trajectory<F64>("clip_norm", adaptor);
    }
    SECTION("the formulas") {
        auto g = ember::Tensor<ember::CpuF64, 1>::from_data(
            ember::TensorData(std::vector<double>{3.0, -4.0}, {2}));
        auto by_norm = GradientClipping::Norm(1.0).clip(g).to_data().to_vec<double>();
        CHECK(by_norm[0] == Approx(3.0 / (5.0 + 1e-6)).epsilon(1e-15));
        CHECK(by_norm[1] == Approx(-4.0 / (5.0 + 1e-6)).epsilon(1e-15));
        // Below the bound the gradient passes unchanged.
        CHECK(GradientClipping::Norm(10.0).clip(g).to_data() == g.to_data());
        auto by_value = GradientClipping::Value(3.5).clip(g).to_data().to_vec<double>();
        CHECK(by_value == std::vector<double>{3.0, -3.5});
    }
}

TEST_CASE("two optimizers on two parts of one model", "[optim]") {
    ember::test::Fixture fx(kFile, "two_optimizers");
    Data<F64> data(fx);
    auto model = load_model<F64>(fx);
    auto adam = optim::AdamConfig{}.init<ember::nn::Linear<F64>>();
    auto sgd = optim::SgdConfig{}.with_momentum(optim::MomentumConfig{0.9, 0.0}).init<Head<F64>>();
    for (int k = 1; k <= kSteps; ++k) {
        auto grads = model.loss(data.x, data.target).backward();
        auto linear_grads = GradientsParams::from_module(grads, model.linear);
        CHECK(linear_grads.len() == 2);
        CHECK(grads.size() == 1);  // the head's gradient stays for the second optimizer
        auto head_grads = GradientsParams::from_module(grads, model.head);
        CHECK(head_grads.len() == 1);
        CHECK(grads.empty());
        model.linear = adam.step(fx.param("lr_adam"), model.linear, std::move(linear_grads));
        model.head = sgd.step(fx.param("lr_sgd"), model.head, std::move(head_grads));
        check_step(fx, model, k);
    }
}

TEST_CASE("optimizer state is saved and resumed exactly", "[optim]") {
    auto resume = [](const std::string& name, auto config) {
        INFO("case " << name);
        using M = TrainModel<F64>;
        ember::test::Fixture fx(kFile, name);
        Data<F64> data(fx);
        const double lr = fx.param("lr");
        auto model = load_model<F64>(fx);
        auto optim = config.template init<M>();
        for (int k = 1; k <= 5; ++k) model = optim.step(lr, model, grads_of(model, data));
        // Through a file, as a checkpoint would go (f64 state: double precision keeps it exact).
        ember::record::NamedMpkGzFileRecorder<ember::record::DoublePrecisionSettings> recorder;
        const auto file = std::filesystem::temp_directory_path() / ("ember-optim-" + name);
        recorder.record(optim.to_record(), file);
        const auto record = recorder.load(file);
        std::filesystem::remove(recorder.file_path(file));
        CHECK(record == optim.to_record());
        const auto model_record = model.into_record();
        CHECK(record.at("optimizer").template as<std::string>() ==
              decltype(optim)::Optimizer::name);

        // The uninterrupted run.
        auto straight = model;
        for (int k = 6; k <= kSteps; ++k)
            straight = optim.step(lr, straight, grads_of(straight, data));

        // A fresh model (new ids until the record restores them) and a fresh optimizer.
        auto resumed = load_model<F64>(fx).load_record(model_record);
        CHECK(resumed.linear.weight.id() == model.linear.weight.id());
        auto fresh = config.template init<M>().load_record(record, ember::Device<ember::CpuF64>{});
        CHECK(fresh.num_states() == optim.num_states());
        CHECK(fresh.to_record() == record);  // a loaded state records as it was saved
        for (int k = 6; k <= kSteps; ++k) {
            resumed = fresh.step(lr, resumed, grads_of(resumed, data));
            check_step(fx, resumed, k);
        }
        CHECK(same_values(resumed, straight));
    };
    SECTION("SGD with momentum") {
        resume("sgd_momentum", optim::SgdConfig{}.with_momentum(optim::MomentumConfig{0.9, 0.0}));
    }
    SECTION("Adam") {
        resume("adam", optim::AdamConfig{});
    }
    SECTION("AdamW") {
        resume("adamw", optim::AdamWConfig{}.with_weight_decay(0.1));
    }
    SECTION("RMSProp with optional state (centered, momentum)") {
        resume("rmsprop_all", optim::RmsPropConfig{}
                                  .with_alpha(0.95)
                                  .with_centered(true)
                                  .with_momentum(0.5)
                                  .with_weight_decay(optim::WeightDecayConfig{0.1}));
    }
    SECTION("AdaGrad") {
        resume("adagrad_lr_decay", optim::AdaGradConfig{}.with_lr_decay(0.05));
    }
    SECTION("Adan (the previous gradient is state)") {
        resume("adan_weight_decay", optim::AdanConfig{}.with_weight_decay(0.1));
    }
    SECTION("the record's layout") {
        ember::test::Fixture fx(kFile, "adam");
        Data<F64> data(fx);
        auto model = load_model<F64>(fx);
        auto adam = optim::AdamConfig{}.init<TrainModel<F64>>();
        model = adam.step(0.05, model, grads_of(model, data));
        auto record = adam.to_record();
        const auto& states = record.at("states").as<ember::record::Map>();
        REQUIRE(states.size() == 3);
        const auto& w = record.at("states").at(model.linear.weight.id().to_string());
        CHECK(w.at("moment_1").as<ember::TensorData>().shape() == ember::Shape{4, 3});
        CHECK(w.at("time").as<std::int64_t>() == 1);
    }
}

TEST_CASE("GradientsAccumulator: two half batches make one full-batch step", "[optim]") {
    ember::test::Fixture fx(kFile, "sgd_momentum");
    Data<F64> data(fx);
    auto model = load_model<F64>(fx);
    auto sgd =
        optim::SgdConfig{}.with_momentum(optim::MomentumConfig{0.9, 0.0}).init<TrainModel<F64>>();
    optim::GradientsAccumulator accumulator;
    for (int k = 1; k <= kSteps; ++k) {
        // Each half's loss is its part of the full batch's sum / 15, so the parts add up.
        const std::array<std::pair<std::size_t, std::size_t>, 2> halves{{{0, 3}, {3, 2}}};
        for (auto [start, len] : halves) {
            auto loss = model.loss(data.x.narrow(0, start, len), data.target.narrow(0, start, len));
            accumulator.accumulate(model, GradientsParams::from_grads(loss.backward(), model));
        }
        auto grads = accumulator.grads();
        CHECK(grads.len() == 3);
        CHECK(accumulator.grads().is_empty());  // grads() resets
        model = sgd.step(fx.param("lr"), model, std::move(grads));
        check_step(fx, model, k);
    }
}

TEST_CASE("GradientsParams", "[optim]") {
    ember::test::Fixture fx(kFile, "sgd_plain");
    Data<F64> data(fx);
    auto model = load_model<F64>(fx);
    const auto wid = model.linear.weight.id();

    SECTION("from_grads takes every trainable parameter's gradient, typed by rank") {
        auto grads = grads_of(model, data);
        CHECK(grads.len() == 3);
        CHECK_FALSE(grads.is_empty());
        auto w = grads.get<ember::CpuF64, 2>(wid);
        REQUIRE(w.has_value());
        CHECK(w->shape() == ember::Shape{4, 3});
        CHECK_THROWS_AS((grads.get<ember::CpuF64, 1>(wid)), ember::ArgumentError);
        CHECK_FALSE((grads.get<ember::CpuF64, 2>(ember::ParamId::make()).has_value()));
        auto removed = grads.remove<ember::CpuF64, 2>(wid);
        CHECK(removed.has_value());
        CHECK(grads.len() == 2);
        CHECK_FALSE(grads.contains(wid));
        grads.register_(wid, *removed);
        CHECK(grads.contains(wid));
    }
    SECTION("frozen parameters get no gradient and are not updated") {
        model.head = model.head.no_grad();
        auto grads = grads_of(model, data);
        CHECK(grads.len() == 2);
        CHECK_FALSE(grads.contains(model.head.scale.id()));
        auto sgd = optim::SgdConfig{}.init<TrainModel<F64>>();
        auto next = sgd.step(0.1, model, std::move(grads));
        CHECK(next.head.scale.val().to_data() == model.head.scale.val().to_data());
        CHECK_FALSE(next.head.scale.is_require_grad());
        ember::test::check_close(next.linear.weight.val().to_data(), fx.named("weight.1"),
                                 tolerance<F64>());
    }
    SECTION("from_params takes the listed ids and leaves the rest") {
        auto raw = model.loss(data.x, data.target).backward();
        const ember::ParamId ids[] = {wid};
        auto only_w = GradientsParams::from_params(raw, model, ids);
        CHECK(only_w.len() == 1);
        CHECK(only_w.contains(wid));
        CHECK(raw.size() == 2);
    }
    SECTION("a step keeps ids and trainability, and makes new leaves") {
        auto adam = optim::AdamConfig{}.init<TrainModel<F64>>();
        auto next = adam.step(0.05, model, grads_of(model, data));
        CHECK(next.linear.weight.id() == wid);
        CHECK(next.linear.weight.is_require_grad());
        CHECK(next.linear.weight.val().is_require_grad());
        CHECK(adam.num_states() == 3);
        CHECK(adam.has_state(wid));
        // The updated model trains again: its parameters get gradients.
        CHECK(grads_of(next, data).len() == 3);
    }
}

namespace {
// The custom simple optimizer of docs/optimizers.md ("Writing an optimizer").
struct Sign {
    static constexpr std::string_view name = "Sign";
    template <ember::Backend B, std::size_t D>
    struct State {
        std::int64_t time = 0;
        EMBER_DETAIL_FIELDS(State, time)
    };
    template <ember::Backend B, std::size_t D>
    std::pair<ember::Tensor<B, D>, std::optional<State<B, D>>> step(
        double lr, ember::Tensor<B, D> param, ember::Tensor<B, D> grad,
        std::optional<State<B, D>> state) const {
        const std::int64_t t = state ? state->time + 1 : 1;
        return {param - grad.sign() * lr, State<B, D>{t}};
    }
};
}  // namespace

TEST_CASE("a custom simple optimizer in the adaptor", "[optim]") {
    ember::test::Fixture fx(kFile, "sgd_plain");
    Data<F64> data(fx);
    auto model = load_model<F64>(fx);
    auto optim = optim::OptimizerAdaptor<Sign, TrainModel<F64>>(Sign{});
    for (int k = 1; k <= 2; ++k) {
        auto grads = grads_of(model, data);
        auto g = grads.get<ember::CpuF64, 2>(model.linear.weight.id())->to_data().to_vec<double>();
        auto w = model.linear.weight.val().to_data().to_vec<double>();
        model = optim.step(0.25, model, std::move(grads));
        auto next = model.linear.weight.val().to_data().to_vec<double>();
        for (std::size_t i = 0; i < w.size(); ++i)
            CHECK(next[i] == w[i] - 0.25 * double((g[i] > 0) - (g[i] < 0)));
    }
    auto record = optim.to_record();
    CHECK(record.at("optimizer").as<std::string>() == "Sign");
    CHECK(record.at("states").at(model.head.scale.id().to_string()).at("time").as<std::int64_t>() ==
          2);
}

TEST_CASE("optimizer errors", "[optim]") {
    using M = TrainModel<F64>;
    SECTION("bad config values") {
        CHECK_THROWS_AS(optim::SgdConfig{}.with_momentum(optim::MomentumConfig{-0.1}).init<M>(),
                        ember::ArgumentError);
        CHECK_THROWS_AS(optim::SgdConfig{}.with_momentum(optim::MomentumConfig{0.9, 1.5}).init<M>(),
                        ember::ArgumentError);
        CHECK_THROWS_AS(
            optim::SgdConfig{}.with_weight_decay(optim::WeightDecayConfig{-1}).init<M>(),
            ember::ArgumentError);
        CHECK_THROWS_AS(optim::AdamConfig{}.with_beta_1(1.0).init<M>(), ember::ArgumentError);
        CHECK_THROWS_AS(optim::AdamConfig{}.with_beta_2(-0.5).init<M>(), ember::ArgumentError);
        CHECK_THROWS_AS(optim::AdamConfig{}.with_epsilon(-1e-8).init<M>(), ember::ArgumentError);
        CHECK_THROWS_AS(optim::AdamWConfig{}.with_weight_decay(-0.1).init<M>(),
                        ember::ArgumentError);
        CHECK_THROWS_AS(optim::RmsPropConfig{}.with_alpha(1.5).init<M>(), ember::ArgumentError);
        CHECK_THROWS_AS(optim::RmsPropConfig{}.with_momentum(-1).init<M>(), ember::ArgumentError);
        CHECK_THROWS_AS(optim::AdaGradConfig{}.with_lr_decay(-0.1).init<M>(), ember::ArgumentError);
        CHECK_THROWS_WITH(optim::AdanConfig{}.with_beta_3(1.0).init<M>(),
                          Catch::Contains("AdanConfig") && Catch::Contains("beta_3"));
        CHECK_THROWS_AS(optim::AdanConfig{}.with_weight_decay(-1).init<M>(), ember::ArgumentError);
        CHECK_THROWS_WITH(optim::MuonConfig{}.with_momentum(1.0).init<M>(),
                          Catch::Contains("MuonConfig") && Catch::Contains("momentum"));
        CHECK_THROWS_AS(optim::MuonConfig{}.with_ns_steps(0).init<M>(), ember::ArgumentError);
        CHECK_THROWS_AS(optim::MuonConfig{}.with_epsilon(0).init<M>(), ember::ArgumentError);
        CHECK_THROWS_WITH(optim::LbfgsConfig{}.with_lr(0).init<M>(),
                          Catch::Contains("LbfgsConfig") && Catch::Contains("lr"));
        CHECK_THROWS_AS(optim::LbfgsConfig{}.with_history_size(0).init<M>(), ember::ArgumentError);
        CHECK_THROWS_AS(optim::LbfgsConfig{}.with_tolerance_grad(-1).init<M>(),
                        ember::ArgumentError);
        CHECK_THROWS_AS(
            optim::AdamConfig{}.with_grad_clipping(optim::GradientClipping::Norm(0.0)).init<M>(),
            ember::ArgumentError);
        CHECK_THROWS_WITH(optim::AdamConfig{}.with_beta_1(1.0).init<M>(),
                          Catch::Contains("AdamConfig::init") && Catch::Contains("beta_1"));
    }
    ember::test::Fixture fx(kFile, "adam");
    Data<F64> data(fx);
    auto model = load_model<F64>(fx);
    auto adam = optim::AdamConfig{}.init<M>();
    SECTION("a negative learning rate") {
        CHECK_THROWS_AS(adam.step(-0.1, model, grads_of(model, data)), ember::ArgumentError);
    }
    SECTION("a gradient of the wrong shape") {
        GradientsParams grads;
        grads.register_(model.linear.weight.id(), ember::Tensor<ember::CpuF64, 2>::zeros({3, 4}));
        CHECK_THROWS_AS(adam.step(0.1, model, std::move(grads)), ember::ShapeError);
    }
    model = adam.step(0.05, model, grads_of(model, data));
    const auto record = adam.to_record();
    SECTION("a record of another optimizer") {
        CHECK_THROWS_AS(optim::SgdConfig{}.init<M>().load_record(record), ember::FormatError);
        CHECK_THROWS_WITH(optim::SgdConfig{}.init<M>().load_record(record),
                          Catch::Contains("Adam"));
    }
    SECTION("a record that is not an optimizer record") {
        CHECK_THROWS_AS(adam.load_record(ember::record::Value(3.0)), ember::FormatError);
        CHECK_THROWS_AS(adam.load_record(model.into_record()), ember::FormatError);
    }
    SECTION("a state missing a field, or with a bad id") {
        auto broken = record;
        auto& states =
            broken.as_mut<ember::record::Map>().at(1).second.as_mut<ember::record::Map>();
        auto& fields = states.at(0).second.as_mut<ember::record::Map>();
        fields.erase(fields.begin());  // moment_1
        CHECK_THROWS_WITH(adam.load_record(broken), Catch::Contains("moment_1"));
        auto bad_id = record;
        bad_id.as_mut<ember::record::Map>().at(1).second.as_mut<ember::record::Map>().at(0).first =
            "not-an-id";
        CHECK_THROWS_AS(adam.load_record(bad_id), ember::FormatError);
    }
    SECTION("a state of the wrong shape") {
        auto wrong = record;
        auto& states = wrong.as_mut<ember::record::Map>().at(1).second.as_mut<ember::record::Map>();
        for (auto& [id, state] : states)
            for (auto& [field, v] : state.as_mut<ember::record::Map>())
                if (v.is<ember::TensorData>())
                    v = ember::TensorData(std::vector<double>(7, 0.0), {7});
        auto loaded = optim::AdamConfig{}.init<M>().load_record(wrong);  // shapes are unknown here
        CHECK_THROWS_AS(loaded.step(0.05, model, grads_of(model, data)), ember::ShapeError);
        CHECK_THROWS_WITH(loaded.step(0.05, model, grads_of(model, data)),
                          Catch::Contains("has shape [7]"));
    }
}

// The CPU backend fuses Adam into one pass over p, g, m and v; the reference below is the
// update written out element by element in double (the formula at the top of adam.hpp).
TEST_CASE("the CPU backend's fused Adam step", "[optim]") {
    using B = ember::Cpu;
    using T2 = ember::Tensor<B, 2>;
    const ember::AdamStepScalars s{0.9, 0.999, 1e-8, 0.01, 1 - 0.9 * 0.9, 1 - 0.999 * 0.999};
    B::seed(7);
    const T2 p = T2::random({6, 5}, ember::Distribution::Normal(0, 1));
    const T2 g = T2::random({6, 5}, ember::Distribution::Normal(0, 1));
    const T2 m = T2::random({6, 5}, ember::Distribution::Normal(0, 0.1));
    const T2 v = T2::random({6, 5}, ember::Distribution::Uniform(0, 0.1));

    // Expected values, from the formula.
    auto vec = [](const T2& t) { return t.to_data().convert(ember::DType::F64).to_vec<double>(); };
    const auto pv = vec(p), gv = vec(g), mv = vec(m), vv = vec(v);
    std::vector<double> p_ref(pv.size()), m_ref(pv.size()), v_ref(pv.size());
    for (std::size_t k = 0; k < pv.size(); ++k) {
        m_ref[k] = s.beta_1 * mv[k] + (1 - s.beta_1) * gv[k];
        v_ref[k] = s.beta_2 * vv[k] + (1 - s.beta_2) * gv[k] * gv[k];
        p_ref[k] = pv[k] - s.lr * (m_ref[k] / s.correction_1) /
                               (std::sqrt(v_ref[k] / s.correction_2) + s.epsilon);
    }
    const ember::Tolerance tol{1e-6, 1e-5};
    auto check = [&](const std::array<ember::detail::cpu::CpuTensor, 3>& out, bool transposed) {
        const char* names[] = {"param", "moment_1", "moment_2"};
        const std::vector<double>* refs[] = {&p_ref, &m_ref, &v_ref};
        for (int i = 0; i < 3; ++i) {
            INFO(names[i]);
            T2 t = T2::from_primitive(out[i]);
            if (transposed) t = t.transpose();
            ember::test::check_close(t.to_data(), ember::TensorData(*refs[i], ember::Shape{6, 5}),
                                     tol);
        }
    };
    SECTION("contiguous f32 tensors take the one-pass kernel") {
        check(B::float_adam_step(p.into_primitive(), g.into_primitive(), m.into_primitive(),
                                 v.into_primitive(), s),
              false);
    }
    SECTION("the kernel updates buffers nothing else holds in place, and only those") {
        T2 p_own = T2::from_data(p.to_data());  // a buffer of its own
        const float* before = p_own.into_primitive().data<float>();
        auto out = B::float_adam_step(std::move(p_own).into_primitive(), g.into_primitive(),
                                      m.into_primitive(), v.into_primitive(), s);
        CHECK(out[0].data<float>() == before);
        CHECK(out[1].data<float>() != m.into_primitive().data<float>());
        check(out, false);
    }
    SECTION("strided views take the op-by-op path and agree") {
        auto tr = [](const T2& t) { return t.transpose().into_primitive(); };
        check(B::float_adam_step(tr(p), tr(g), tr(m), tr(v), s), true);
    }
    SECTION("errors") {
        const T2 small = T2::zeros({6, 4});
        CHECK_THROWS_AS(B::float_adam_step(p.into_primitive(), small.into_primitive(),
                                           m.into_primitive(), v.into_primitive(), s),
                        ember::ShapeError);
        CHECK_THROWS_WITH(B::float_adam_step(p.into_primitive(), g.into_primitive(),
                                             m.into_primitive(), small.into_primitive(), s),
                          Catch::Contains("adam_step") && Catch::Contains("[6, 4]"));
        const auto ints = ember::Tensor<B, 2, ember::Int>::zeros({6, 5});
        CHECK_THROWS_AS(B::float_adam_step(p.into_primitive(), ints.into_primitive(),
                                           m.into_primitive(), v.into_primitive(), s),
                        ember::DTypeError);
    }
}

}  // namespace test_optim
