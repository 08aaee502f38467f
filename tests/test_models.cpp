// The model examples' networks (examples/resnet/model.hpp, examples/gpt/model.hpp) against
// PyTorch (tests/fixtures/gen_models.py): the same weights give the same scores, loss and
// gradients, the examples' optimizers the same weights after two steps, BatchNorm the same
// running statistics and eval-mode scores, and the GPT's KV-cached generation path the rows of
// PyTorch's full causal forward. Also the warm-up + cosine schedule the GPT example trains with,
// and the GPT benchmark's two sides (benchmarks/gpt_torch.py, tests/fixtures/gen_gpt_peer.py):
// the same initial weights through the PyTorch importer, the same bytes, the same losses.
#include <ember/optim.hpp>
#include <ember/optim/lr_scheduler.hpp>

#include "../examples/gpt/data.hpp"
#include "../examples/gpt/model.hpp"
#include "../examples/gpt/pytorch.hpp"
#include "../examples/resnet/model.hpp"
#include "module_check.hpp"

namespace test_models {

namespace {

using AD = ember::Autodiff<ember::Cpu>;
using ember::Tensor;
using ember::test::check_close;
using ember::test::Fixture;
using ember::test::load_params;

const std::string kFile = "models";
// f32 through a whole network against float64 torch.
const ember::Tolerance kTol{2e-5, 2e-4};

// Every parameter of `model` against the fixture tensor "<prefix><path>" (values, or with
// `grads` the gradients).
template <ember::module::Module M>
std::size_t check_params(const M& model, const Fixture& f, const std::string& prefix,
                         const ember::Gradients* grads = nullptr,
                         std::string_view skip_suffix = {}) {
    std::size_t n = 0;
    model.visit([&](std::string_view path, const auto& p) {
        if (!skip_suffix.empty() && path.ends_with(skip_suffix)) return;
        const std::string name = prefix + std::string(path);
        INFO(name);
        if (grads) {
            auto g = p.val().grad(*grads);
            REQUIRE(g.has_value());
            check_close(g->to_data(), f.named(name), kTol);
        } else {
            check_close(p.val().to_data(), f.named(name), kTol);
        }
        ++n;
    });
    return n;
}

// The running statistics of every BatchNorm of `m` against "<prefix><path>.running_mean/var".
template <ember::Backend B>
void check_running_stats(const resnet::ResNet<B>& m, const Fixture& f, const std::string& prefix) {
    auto check = [&](const ember::nn::BatchNorm<B>& bn, const std::string& path) {
        INFO("running statistics of " << prefix << path);
        check_close(bn.running_mean.value().to_data(), f.named(prefix + path + ".running_mean"),
                    kTol);
        check_close(bn.running_var.value().to_data(), f.named(prefix + path + ".running_var"),
                    kTol);
    };
    check(m.bn1, "bn1");
    for (std::size_t i = 0; i < m.blocks.size(); ++i) {
        const std::string b = "blocks." + std::to_string(i) + ".";
        check(m.blocks[i].bn1, b + "bn1");
        check(m.blocks[i].bn2, b + "bn2");
        if (m.blocks[i].downsample_bn) check(*m.blocks[i].downsample_bn, b + "downsample_bn");
    }
}

gpt::GptConfig gpt_config(const Fixture& f) {
    return gpt::GptConfig{std::size_t(f.param("vocab_size")), std::size_t(f.param("context")),
                          std::size_t(f.param("d_model")),    std::size_t(f.param("n_heads")),
                          std::size_t(f.param("n_layers")),   0.0};
}

}  // namespace

TEST_CASE("the ResNet example's network matches PyTorch", "[models][resnet]") {
    Fixture f(kFile, "resnet");
    const auto config = resnet::ResNetConfig{
        {4, 8}, {1, 1}, std::size_t(f.param("in_channels")), std::size_t(f.param("num_classes"))};
    const auto fresh = load_params(config.init<AD>(), f);
    // Identity shortcut in the first block, a 1×1 projection where the second halves the size.
    REQUIRE(!fresh.blocks[0].downsample_conv);
    REQUIRE(fresh.blocks[1].downsample_conv);
    const resnet::ImageBatch<AD> batch{f.named_tensor<AD, 4>("input"),
                                       f.named_tensor<AD, 1, ember::Int>("targets")};

    SECTION("training-mode scores, loss, gradients and running statistics") {
        const auto model = fresh;  // copies share running statistics: sections start afresh
        auto out = model.classify(batch);
        check_close(out.output.to_data(), f.named("output"), kTol);
        check_close(out.loss.to_data(), f.named("loss"), kTol);
        const auto grads = out.loss.backward();
        CHECK(check_params(model, f, "grad.", &grads) == 20);
        check_running_stats(model, f, "after1.");
    }
    SECTION("two SGD steps (momentum, weight decay), then eval-mode scores") {
        auto model = fresh;
        auto sgd = ember::optim::SgdConfig{}
                       .with_momentum(ember::optim::MomentumConfig{0.9, 0.0})
                       .with_weight_decay(ember::optim::WeightDecayConfig{5e-4})
                       .init<resnet::ResNet<AD>>();
        for (int s = 0; s < 2; ++s) {
            auto grads = ember::optim::GradientsParams::from_grads(
                model.classify(batch).loss.backward(), model);
            model = sgd.step(0.1, std::move(model), std::move(grads));
        }
        check_params(model, f, "step2.");
        check_running_stats(model, f, "step2.");
        const auto eval = model.valid();
        check_close(eval.forward(f.named_tensor<ember::Cpu, 4>("input")).to_data(),
                    f.named("eval_output"), kTol);
    }
}

TEST_CASE("ResNetConfig rejects bad stage lists", "[models][resnet]") {
    CHECK_THROWS_AS((resnet::ResNetConfig{{4, 8}, {1}, 3, 10}.init<ember::Cpu>()),
                    ember::ArgumentError);
    CHECK_THROWS_AS((resnet::ResNetConfig{{}, {}, 3, 10}.init<ember::Cpu>()), ember::ArgumentError);
    CHECK_THROWS_AS((resnet::ResNetConfig{{4, 0}, {1, 1}, 3, 10}.init<ember::Cpu>()),
                    ember::ArgumentError);
    // ResNet-18: 11,173,962 parameters with 10 classes, as torchvision's CIFAR variant.
    CHECK(resnet::ResNetConfig{}.init<ember::Cpu>().num_params() == 11173962);
}

TEST_CASE("the GPT example's network matches PyTorch", "[models][gpt]") {
    Fixture f(kFile, "gpt");
    const auto fresh = load_params(gpt_config(f).init<AD>(), f);
    const auto tokens = f.named_tensor<AD, 2, ember::Int>("tokens");
    const auto targets = f.named_tensor<AD, 1, ember::Int>("targets");

    SECTION("scores, loss and gradients (tied embeddings get both uses' gradients)") {
        const auto model = fresh;
        check_close(model.forward(tokens).to_data(), f.named("output"), kTol);
        auto loss = model.loss(tokens, targets);
        check_close(loss.to_data(), f.named("loss"), kTol);
        const auto grads = loss.backward();
        CHECK(check_params(model, f, "grad.", &grads) == 4 + 2 * 16);
    }
    SECTION("two AdamW steps (decoupled weight decay)") {
        auto model = fresh;
        auto adamw = ember::optim::AdamWConfig{}
                         .with_beta_2(0.95)
                         .with_epsilon(1e-8)
                         .with_weight_decay(0.1)
                         .init<gpt::Gpt<AD>>();
        for (int s = 0; s < 2; ++s) {
            auto grads = ember::optim::GradientsParams::from_grads(
                model.loss(tokens, targets).backward(), model);
            model = adamw.step(1e-3, std::move(model), std::move(grads));
        }
        // Not the key biases: adding a constant to every score of a softmax row changes nothing,
        // so their gradient is zero in exact arithmetic, and Adam's normalisation turns the
        // rounding noise left in it (1e-17 in torch's float64, 1e-9 in f32) into full steps of
        // either sign. Their (near-zero) gradients are checked above.
        CHECK(check_params(model, f, "step2.", nullptr, "mha.key.bias") == 4 + 2 * 15);
    }
    SECTION("the KV cache gives the full forward's rows, one token or several at a time") {
        const auto model = fresh.valid();
        const auto expected = f.named("output");  // [2 · 6, 256], rows of sequence 0 then 1
        const auto in = f.named_tensor<ember::Cpu, 2, ember::Int>("tokens");
        for (std::size_t n = 0; n < 2; ++n) {
            const auto seq = in.narrow(0, n, 1);
            const auto rows = Tensor<ember::Cpu, 2>::from_data(expected).narrow(0, n * 6, 6);
            auto cache = model.new_cache();
            // Three tokens at once (a causal mask among them), then one at a time.
            auto scores = model.forward_cached(seq.narrow(1, 0, 3), cache);
            check_close(scores.to_data(), rows.narrow(0, 0, 3).to_data(), kTol);
            for (std::size_t t = 3; t < 6; ++t) {
                INFO("sequence " << n << ", position " << t);
                scores = model.forward_cached(seq.narrow(1, t, 1), cache);
                check_close(scores.to_data(), rows.narrow(0, t, 1).to_data(), kTol);
            }
            CHECK(cache.len == 6);
            // Positions past the context (8) are refused, not read out of bounds.
            CHECK_THROWS_AS(model.forward_cached(seq.narrow(1, 0, 3), cache), ember::ArgumentError);
        }
    }
}

TEST_CASE("GptConfig's defaults are GPT-2 small's shape over bytes", "[models][gpt]") {
    const gpt::GptConfig c;
    CHECK(c.n_layers == 12);
    CHECK(c.d_model == 768);
    CHECK(c.n_heads == 12);
    CHECK(c.context == 1024);
    CHECK(c.vocab_size == 256);
    // Per layer 12·d² + 13·d (attention 4·(d² + d), MLP 8·d² + 5·d, two LayerNorms 4·d), plus
    // the embeddings (vocab + context)·d and the final LayerNorm 2·d; no separate output matrix
    // (86,039,040 for the defaults).
    const auto tiny = gpt::GptConfig{256, 16, 32, 4, 2, 0.0}.init<ember::Cpu>();
    CHECK(tiny.num_params() == 2 * (12 * 32 * 32 + 13 * 32) + (256 + 16) * 32 + 2 * 32);
    // Biases start at zero, as GPT-2's.
    tiny.visit([](std::string_view path, const auto& p) {
        if (path.ends_with(".bias")) {
            INFO(path);
            CHECK(p.val().abs().max().into_scalar() == 0.0f);
        }
    });
    CHECK_THROWS_AS((gpt::GptConfig{256, 16, 30, 4, 2, 0.0}.init<ember::Cpu>()),
                    ember::ArgumentError);
}

TEST_CASE("WarmupCosineLrScheduler follows torch's SequentialLR(LinearLR, CosineAnnealingLR)",
          "[lr_scheduler][models]") {
    namespace lr = ember::lr_scheduler;
    Fixture f(kFile, "warmup_cosine");
    const auto expected = f.named("lrs").to_vec<double>();
    const auto config =
        lr::WarmupCosineLrSchedulerConfig{f.param("peak_lr"), std::size_t(f.param("warmup_iters")),
                                          std::size_t(f.param("num_iters"))}
            .with_min_lr(f.param("min_lr"));
    auto s = config.init();
    for (std::size_t i = 0; i < expected.size(); ++i) {
        INFO("iteration " << i);
        CHECK(s.step() == Approx(expected[i]).epsilon(1e-12).margin(1e-15));
    }
    // After num_iters it stays at min_lr.
    CHECK(s.step() == Approx(f.param("min_lr")));
    CHECK(s.step() == Approx(f.param("min_lr")));

    SECTION("a resumed scheduler continues the same sequence") {
        auto a = config.init();
        for (int i = 0; i < 6; ++i) a.step();
        auto b = config.init().load_record(a.to_record());
        for (int i = 0; i < 12; ++i) CHECK(b.step() == a.step());
    }
    SECTION("no warm-up starts at the peak") {
        auto c = lr::WarmupCosineLrSchedulerConfig{0.5, 0, 10}.init();
        CHECK(c.step() == 0.5);
    }
    SECTION("bad settings and records") {
        CHECK_THROWS_AS((lr::WarmupCosineLrSchedulerConfig{0.5, 10, 10}.init()),
                        ember::ArgumentError);
        CHECK_THROWS_AS((lr::WarmupCosineLrSchedulerConfig{0.0, 1, 10}.init()),
                        ember::ArgumentError);
        CHECK_THROWS_AS((lr::WarmupCosineLrSchedulerConfig{0.5, 1, 10}.with_min_lr(0.6).init()),
                        ember::ArgumentError);
        const ember::record::Value bad = ember::record::Map{
            {"scheduler", "WarmupCosineLrScheduler"}, {"current_iter", std::int64_t(99)}};
        CHECK_THROWS_AS(config.init().load_record(bad), ember::FormatError);
        const ember::record::Value other =
            ember::record::Map{{"scheduler", "NoamLrScheduler"}, {"step", std::int64_t(1)}};
        CHECK_THROWS_AS(config.init().load_record(other), ember::FormatError);
    }
}

TEST_CASE("the GPT example trains as its PyTorch peer from the peer's saved weights",
          "[models][gpt][pytorch]") {
    Fixture f("gpt_peer", "gpt_peer");
    const auto config = gpt_config(f);
    const std::filesystem::path pt =
        std::filesystem::path(EMBER_FIXTURE_DIR) / "pytorch" / "gpt_peer.pt";
    const auto fresh = config.init<AD>();
    auto model = gpt::load_pytorch(fresh, pt);
    // Every parameter came from the file: none keeps the value of the fresh initialisation
    // (except where both start alike: LayerNorms' gamma 1 and beta 0, biases 0).
    std::map<std::string, std::vector<float>> before;
    fresh.visit([&](std::string_view path, const auto& p) {
        before[std::string(path)] = p.val().to_data().template to_vec<float>();
    });
    std::size_t loaded = 0;
    model.visit([&](std::string_view path, const auto& p) {
        if (path.ends_with("gamma") || path.ends_with("beta") || path.ends_with("bias")) return;
        INFO(path);
        CHECK(p.val().to_data().template to_vec<float>() != before.at(std::string(path)));
        ++loaded;
    });
    CHECK(loaded == 2 + 2 * 6);  // two embeddings, six weight matrices a layer

    // The benchmark's batch formula gives the bytes gpt_torch.py's bench_tokens gave.
    const auto batch = gpt::bench_batch<AD>(3, 12, std::uint64_t(f.param("seed")), {});
    CHECK(batch.inputs.to_data().to_vec<std::int64_t>() ==
          f.named("tokens").to_vec<std::int64_t>());
    CHECK(batch.targets.to_data().to_vec<std::int64_t>() ==
          f.named("targets").to_vec<std::int64_t>());

    // Six AdamW steps with the example's settings: the loss before each, as PyTorch's (float64).
    auto adamw = ember::optim::AdamWConfig{}
                     .with_beta_2(0.95)
                     .with_epsilon(1e-8)
                     .with_weight_decay(0.1)
                     .init<gpt::Gpt<AD>>();
    const auto expected = f.named("losses").to_vec<double>();
    for (std::size_t k = 0; k < expected.size(); ++k) {
        INFO("step " << k);
        auto loss = model.loss(batch.inputs, batch.targets);
        CHECK(double(loss.into_scalar()) == Approx(expected[k]).epsilon(1e-5));
        auto grads = ember::optim::GradientsParams::from_grads(loss.backward(), model);
        model = adamw.step(1e-3, std::move(model), std::move(grads));
    }
    // A state dict of another size is refused, naming the shapes.
    CHECK_THROWS_AS(
        gpt::load_pytorch(gpt::GptConfig{256, 16, 32, 2, 2, 0.0}.init<ember::Cpu>(), pt),
        ember::Error);
}

}  // namespace test_models
