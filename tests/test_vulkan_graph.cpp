// Whole steps recorded once into a Vulkan command buffer and resubmitted
// (ember/stacks/vulkan_graph.hpp): replays equal the same steps run eagerly from the same
// seed, bit for bit (the kernels are the same ones); dropout masks move on at each replay; a
// host synchronisation inside a capture is an error naming the op; StepGraph captures again
// when the inputs' shape changes. Without a Vulkan device, capture refuses with DeviceError and
// the other cases are skipped (CI runs them on lavapipe). Compiled only with the Vulkan backend.
#if defined(EMBER_VULKAN)
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <ember/nn.hpp>
#include <ember/optim.hpp>
#include <ember/stacks.hpp>
#include <ember/stacks/vulkan_fusion.hpp>
#include <ember/stacks/vulkan_graph.hpp>
#include <ember/train/learner.hpp>

#include "harness.hpp"

namespace {
using ember::Tensor;
using ember::Vulkan;

#define REQUIRE_GPU()                          \
    do {                                       \
        if (!ember::vulkan::is_available()) {  \
            WARN("skipped: no Vulkan device"); \
            return;                            \
        }                                      \
    } while (0)

/// A small classifier with dropout: 12 → 32 → 4.
template <ember::Backend B>
struct Net {
    ember::nn::Linear<B> linear1;
    ember::nn::Linear<B> linear2;
    ember::nn::Dropout dropout;
    EMBER_MODULE(Net, linear1, linear2, dropout)

    static Net init() {
        Net n{ember::nn::LinearConfig{12, 32}.init<B>(), ember::nn::LinearConfig{32, 4}.init<B>(),
              ember::nn::DropoutConfig{0.5}.init()};
        n.visit([](std::string_view, const auto& p) { (void)p.val(); });  // drawn now, in order
        return n;
    }
    Tensor<B, 2> forward(Tensor<B, 2> x) const {
        return linear2.forward(ember::activation::relu(dropout.forward(linear1.forward(x))));
    }
};

template <ember::Backend B>
struct Batch {
    Tensor<B, 2> x;
    Tensor<B, 1, ember::Int> y;
    EMBER_DETAIL_FIELDS(Batch, x, y)
};

template <ember::Backend B>
Batch<B> make_batch(std::size_t n, std::uint64_t seed) {
    std::vector<float> x(n * 12);
    std::vector<std::int64_t> y(n);
    for (std::size_t i = 0; i < x.size(); ++i)
        x[i] = float((i * 7919 + seed * 104729) % 1000) / 500.0f - 1.0f;
    for (std::size_t i = 0; i < n; ++i) y[i] = std::int64_t((i + seed) % 4);
    return {Tensor<B, 2>::from_data(ember::TensorData(std::move(x), {n, 12})),
            Tensor<B, 1, ember::Int>::from_data(ember::TensorData(std::move(y), {n}))};
}

/// One training step (forward, backward, Adam).
template <typename M, typename O, typename B>
void train_step(M& model, O& optim, const Batch<B>& batch, double lr = 1e-2) {
    auto scores = model.forward(batch.x);
    auto loss = ember::nn::loss::CrossEntropyLossConfig{}.init<B>().forward(scores, batch.y);
    auto grads = ember::optim::GradientsParams::from_grads(loss.backward(), model);
    model = optim.step(lr, std::move(model), std::move(grads));
}

template <typename M>
std::vector<ember::TensorData> params(const M& model) {
    std::vector<ember::TensorData> out;
    model.visit([&](std::string_view, const auto& p) { out.push_back(p.val().to_data()); });
    return out;
}

void require_identical(const std::vector<ember::TensorData>& a,
                       const std::vector<ember::TensorData>& b) {
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
        INFO("parameter " << i);
        REQUIRE(a[i].shape() == b[i].shape());
        CHECK(a[i].bytes().size() == b[i].bytes().size());
        CHECK(std::memcmp(a[i].bytes().data(), b[i].bytes().data(), a[i].bytes().size()) == 0);
    }
}

/// N steps from the same seed, eagerly and as 1 eager step + capture + N - 2 replays; then, with
/// `tail`, one more eager step after the replays (the generator and Adam's step count moved on).
template <typename B>
void compare_replays(std::size_t n, bool tail) {
    using Model = Net<B>;
    const auto batch = make_batch<B>(16, 1);
    B::seed(7);
    Model eager = Model::init();
    auto eager_optim = ember::optim::AdamConfig{.epsilon = 1e-8}.init<Model>();
    for (std::size_t i = 0; i < n + (tail ? 1 : 0); ++i) train_step(eager, eager_optim, batch);

    B::seed(7);
    Model model = Model::init();
    auto optim = ember::optim::AdamConfig{.epsilon = 1e-8}.init<Model>();
    train_step(model, optim, batch);  // warm-up: Adam's state exists, kernels are compiled
    auto graph = ember::vulkan::capture([&] { train_step(model, optim, batch); });
    REQUIRE(graph.replayable());
    CHECK(graph.num_nodes() > 10);          // forward, backward and update: one command buffer
    CHECK(graph.pool_bytes() > 0);          // the step's own buffers
    CHECK(graph.random_draws() == 1);       // the dropout mask
    CHECK(graph.optimizer_updates() == 4);  // two weights, two biases
    for (std::size_t i = 2; i < n; ++i) graph.replay();
    CHECK(graph.replays() == n - 2);
    if (tail) {
        optim.add_steps(static_cast<std::int64_t>(graph.replays()));
        train_step(model, optim, batch);
    }
    require_identical(params(model), params(eager));
}
}  // namespace

TEST_CASE("vulkan graph: without a device, capture refuses with DeviceError", "[vulkan][graph]") {
    if (ember::vulkan::is_available()) {
        CHECK_THROWS_AS(ember::vulkan::capture([] {}, ember::VulkanDevice{1000}),
                        ember::DeviceError);
        return;
    }
    CHECK_THROWS_AS(ember::vulkan::capture([] {}), ember::DeviceError);
    ember::vulkan::CapturedStep none;
    CHECK_FALSE(none.replayable());
    CHECK_THROWS_AS(none.replay(), ember::ArgumentError);
    CHECK_FALSE(ember::vulkan::is_capturing());
}

TEST_CASE("vulkan graph: replayed training steps equal eager ones bit for bit", "[vulkan][graph]") {
    REQUIRE_GPU();
    SECTION("Autodiff<Vulkan>") {
        compare_replays<ember::Autodiff<Vulkan>>(6, false);
    }
    SECTION("Autodiff<Fusion<Vulkan>>") {
        compare_replays<ember::Autodiff<ember::Fusion<Vulkan>>>(6, false);
    }
    SECTION("an eager step after the replays continues the sequence") {
        compare_replays<ember::Autodiff<Vulkan>>(5, true);
        compare_replays<ember::Autodiff<ember::Fusion<Vulkan>>>(5, true);
    }
}

TEST_CASE("vulkan graph: each replay draws the next mask of the eager sequence",
          "[vulkan][graph]") {
    REQUIRE_GPU();
    const std::size_t n = 4096;
    Vulkan::seed(11);
    std::vector<ember::TensorData> eager;
    for (int i = 0; i < 5; ++i)
        eager.push_back(
            Tensor<Vulkan, 1>::random({n}, ember::Distribution::Bernoulli(0.5)).to_data());
    Vulkan::seed(11);
    std::optional<Tensor<Vulkan, 1>> mask;
    auto graph = ember::vulkan::capture(
        [&] { mask.emplace(Tensor<Vulkan, 1>::random({n}, ember::Distribution::Bernoulli(0.5))); });
    std::vector<ember::TensorData> replayed{mask->to_data()};
    for (int i = 0; i < 3; ++i) {
        graph.replay();
        replayed.push_back(mask->to_data());
    }
    // The host generator moved on with the replays: the next eager draw is the fifth.
    replayed.push_back(
        Tensor<Vulkan, 1>::random({n}, ember::Distribution::Bernoulli(0.5)).to_data());
    require_identical(replayed, eager);
    CHECK(std::memcmp(eager[0].bytes().data(), eager[1].bytes().data(), eager[0].bytes().size()) !=
          0);
    // A new seed between replays reaches the device copy of the generator.
    Vulkan::seed(11);
    graph.replay();
    require_identical({mask->to_data()}, {eager[0]});
}

TEST_CASE("vulkan graph: a host synchronisation inside a capture is an error naming the op",
          "[vulkan][graph]") {
    REQUIRE_GPU();
    auto x = Tensor<Vulkan, 1>::from_data(ember::TensorData(std::vector<float>{1, 2, 3}, {3}));
    auto fails = [](const std::function<void()>& step, const std::string& op) {
        INFO(op);
        CHECK_THROWS_WITH(ember::vulkan::capture(step), Catch::Contains(op));
        CHECK_FALSE(ember::vulkan::is_capturing());
    };
    fails([&] { (void)(x * 2.0).sum().into_scalar(); }, "into_data");
    fails([&] { Vulkan::sync({}); }, "sync");
    fails(
        [&] { (void)Tensor<Vulkan, 1>::from_data(ember::TensorData(std::vector<float>{1}, {1})); },
        "from_data");
    // Index checks: indices whose range the host knows (uploaded, or drawn uniformly) are checked
    // without a readback; computed ones would be read back.
    const auto known = Tensor<Vulkan, 1, ember::Int>::from_data(
        ember::TensorData(std::vector<std::int64_t>{2, 0, 1}, {3}));
    const auto drawn =
        Tensor<Vulkan, 1, ember::Int>::random({5}, ember::Distribution::Uniform(0, 3));
    std::optional<Tensor<Vulkan, 1>> picked;
    auto graph = ember::vulkan::capture(
        [&] { picked.emplace(x.gather(0, known) + x.gather(0, drawn).sum()); });
    CHECK(picked->to_data().as_slice<float>()[0] > 3.0f);
    const auto computed = known + 0;
    fails([&] { (void)x.gather(0, computed); }, "into_data");
    const auto out_of_range = Tensor<Vulkan, 1, ember::Int>::from_data(
        ember::TensorData(std::vector<std::int64_t>{0, 3}, {2}));
    CHECK_THROWS_WITH(x.gather(0, out_of_range), Catch::Contains("index 3 is out of range"));
    // The stream works eagerly afterwards.
    CHECK((x + 1.0).to_data().as_slice<float>()[2] == 4.0f);
}

TEST_CASE("vulkan graph: an update that replaces its tensors is not replayable",
          "[vulkan][graph]") {
    REQUIRE_GPU();
    using B = ember::Autodiff<Vulkan>;
    const auto batch = make_batch<B>(8, 2);
    B::seed(3);
    auto eager = Net<B>::init();
    auto eager_optim = ember::optim::SgdConfig{}.init<Net<B>>();
    train_step(eager, eager_optim, batch, 0.1);
    train_step(eager, eager_optim, batch, 0.1);
    B::seed(3);
    auto model = Net<B>::init();
    auto optim = ember::optim::SgdConfig{}.init<Net<B>>();
    train_step(model, optim, batch, 0.1);
    auto graph = ember::vulkan::capture([&] { train_step(model, optim, batch, 0.1); });
    CHECK_FALSE(graph.replayable());
    CHECK_THAT(graph.why_not(), Catch::Contains("replaced"));
    CHECK_THROWS_AS(graph.replay(), ember::ArgumentError);
    require_identical(params(model), params(eager));  // the run at capture was the step
}

TEST_CASE("vulkan graph: StepGraph replays one shape and captures again on a new one",
          "[vulkan][graph]") {
    REQUIRE_GPU();
    using Run = ember::vulkan::StepGraph<Tensor<Vulkan, 2>>::Ran;
    ember::vulkan::StepGraph<Tensor<Vulkan, 2>> steps;
    std::optional<Tensor<Vulkan, 2>> pending, current;
    auto run = [&](std::size_t rows, float v) {
        std::vector<float> data(rows * 3, v);
        auto x = Tensor<Vulkan, 2>::from_data(ember::TensorData(std::move(data), {rows, 3}));
        pending.reset();
        const Run ran =
            steps.run(x, [&](const Tensor<Vulkan, 2>& b) { pending.emplace(b * 2.0 + 1.0); });
        if (ran != Run::Replayed) current = std::move(pending);
        const auto out = current->to_data();
        CHECK(out.shape() == ember::Shape{rows, 3});
        for (float y : out.as_slice<float>()) CHECK(y == 2 * v + 1);
        return ran;
    };
    CHECK(run(4, 1) == Run::Eager);
    CHECK(run(4, 2) == Run::Captured);
    CHECK(run(4, 3) == Run::Replayed);
    CHECK(run(4, 4) == Run::Replayed);
    CHECK(steps.take_replays() == 2);
    CHECK(run(2, 5) == Run::Eager);  // a short batch: eager, and the graph is dropped
    CHECK(run(2, 6) == Run::Captured);
    CHECK(run(2, 7) == Run::Replayed);
    CHECK(run(4, 8) == Run::Eager);
    CHECK(steps.fallback().empty());
}

namespace {
/// The Learner's view of Net: a classifier whose steps take a Batch.
template <ember::Backend B>
struct LearnerNet {
    Net<B> net;
    EMBER_MODULE(LearnerNet, net)

    ember::train::ClassificationOutput<B> forward(const Batch<B>& b) const {
        auto out = net.forward(b.x);
        auto loss = ember::nn::loss::CrossEntropyLossConfig{}.init<B>().forward(out, b.y);
        return {loss, out, b.y};
    }
    ember::train::TrainOutput<ember::train::ClassificationOutput<B>> step(
        const Batch<B>& b) const requires ember::AutodiffBackend<B> {
        auto item = forward(b);
        return {*this, item.loss.backward(), std::move(item)};
    }
    ember::train::ClassificationOutput<B> step(const Batch<B>& b) const
        requires(!ember::AutodiffBackend<B>) {
        return forward(b);
    }
};

/// Three batches of 16 and a short one of 4, the same every epoch.
template <ember::Backend B>
struct FixedLoader {
    std::size_t num_items() const { return 52; }
    std::size_t num_batches() const { return 4; }
    void set_epoch(std::size_t) {}
    std::vector<Batch<B>> iter() const {
        return {make_batch<B>(16, 1), make_batch<B>(16, 2), make_batch<B>(16, 3),
                make_batch<B>(4, 4)};
    }
};

/// Shows nothing (the test reads the experiment log).
struct Quiet : ember::train::MetricsRenderer {
    void update_train(const ember::train::MetricEntry&) override {}
    void update_valid(const ember::train::MetricEntry&) override {}
    void render_train(const ember::train::TrainingProgress&) override {}
    void render_valid(const ember::train::TrainingProgress&) override {}
};

/// Trains LearnerNet on Autodiff<Vulkan> for two epochs, capturing steps or not; returns the
/// parameters and the experiment log.
std::pair<std::vector<ember::TensorData>, std::string> fit_learner(bool capture) {
    using AB = ember::Autodiff<Vulkan>;
    using Out = ember::train::ClassificationOutput<AB>;
    using VOut = ember::train::ClassificationOutput<Vulkan>;
    const auto dir = std::filesystem::temp_directory_path() /
                     ("ember-vulkan-capture-" + std::to_string(::getpid()) + (capture ? "c" : "e"));
    std::filesystem::remove_all(dir);
    AB::seed(5);
    LearnerNet<AB> model{Net<AB>::init()};
    auto learner =
        ember::train::LearnerBuilder<Out, VOut>(dir)
            .metric_train_numeric(ember::train::LossMetric<AB>{})
            .metric_valid_numeric(ember::train::LossMetric<Vulkan>{})
            .num_epochs(2)
            .seed(9)
            .capture_steps(capture)
            .renderer(std::make_shared<Quiet>())
            .build(std::move(model),
                   ember::optim::AdamConfig{.epsilon = 1e-8}.init<LearnerNet<AB>>(), 1e-2);
    auto trained = learner.fit(FixedLoader<AB>{}, FixedLoader<Vulkan>{});
    std::ifstream in(dir / "experiment.log");
    std::stringstream log;
    log << in.rdbuf();
    std::filesystem::remove_all(dir);
    return {params(trained), log.str()};
}
}  // namespace

TEST_CASE("vulkan graph: the Learner's captured steps train as its eager ones",
          "[vulkan][graph][learner]") {
    REQUIRE_GPU();
    const auto [eager, eager_log] = fit_learner(false);
    const auto [captured, log] = fit_learner(true);
    require_identical(captured, eager);
    INFO(log);
    CHECK_THAT(log, Catch::Contains("training step is replayed as a Vulkan command buffer"));
    CHECK_THAT(log, Catch::Contains("validation step is replayed as a Vulkan command buffer"));
    CHECK_THAT(log, Catch::Contains("short last batch"));
    CHECK_THAT(eager_log, !Catch::Contains("capture_steps"));
}

// The in-place Adam kernel the captured steps need (shaders/adam.comp), also the eager path:
// against the update written out element by element in double (the formula in adam.hpp).
TEST_CASE("vulkan: the fused Adam step follows the formula", "[vulkan][graph][optim]") {
    REQUIRE_GPU();
    using T2 = Tensor<Vulkan, 2>;
    const ember::AdamStepScalars s{0.9, 0.999, 1e-8, 0.01, 1 - 0.9 * 0.9, 1 - 0.999 * 0.999};
    Vulkan::seed(7);
    const T2 p = T2::random({6, 5}, ember::Distribution::Normal(0, 1));
    const T2 g = T2::random({6, 5}, ember::Distribution::Normal(0, 1));
    const T2 m = T2::random({6, 5}, ember::Distribution::Normal(0, 0.1));
    const T2 v = T2::random({6, 5}, ember::Distribution::Uniform(0, 0.1));
    auto vec = [](const T2& t) { return t.to_data().convert(ember::DType::F64).to_vec<double>(); };
    const auto pv = vec(p), gv = vec(g), mv = vec(m), vv = vec(v);
    std::vector<double> p_ref(pv.size()), m_ref(pv.size()), v_ref(pv.size());
    for (std::size_t k = 0; k < pv.size(); ++k) {
        m_ref[k] = s.beta_1 * mv[k] + (1 - s.beta_1) * gv[k];
        v_ref[k] = s.beta_2 * vv[k] + (1 - s.beta_2) * gv[k] * gv[k];
        p_ref[k] = pv[k] - s.lr * (m_ref[k] / s.correction_1) /
                               (std::sqrt(v_ref[k] / s.correction_2) + s.epsilon);
    }
    auto check = [&](const std::array<ember::detail::vk::VulkanTensor, 3>& out, bool transposed) {
        const std::vector<double>* refs[] = {&p_ref, &m_ref, &v_ref};
        for (int i = 0; i < 3; ++i) {
            INFO("output " << i);
            T2 t = T2::from_primitive(out[i]);
            if (transposed) t = t.transpose();
            ember::test::check_close(t.to_data(), ember::TensorData(*refs[i], ember::Shape{6, 5}),
                                     ember::Tolerance{1e-6, 1e-5});
        }
    };
    SECTION("shared inputs are left as they were") {
        check(Vulkan::float_adam_step(p.into_primitive(), g.into_primitive(), m.into_primitive(),
                                      v.into_primitive(), s),
              false);
        CHECK(vec(p) == pv);
        CHECK(vec(m) == mv);
    }
    SECTION("a parameter nothing else holds is updated in place") {
        T2 own = T2::from_data(p.to_data());
        const auto buffer = own.into_primitive().buffer.get();
        auto out = Vulkan::float_adam_step(std::move(own).into_primitive(), g.into_primitive(),
                                           m.into_primitive(), v.into_primitive(), s);
        CHECK(out[0].buffer.get() == buffer);
        check(out, false);
    }
    SECTION("strided views") {
        auto tr = [](const T2& t) { return t.transpose().into_primitive(); };
        check(Vulkan::float_adam_step(tr(p), tr(g), tr(m), tr(v), s), true);
    }
    SECTION("operands of different shapes") {
        const T2 small = T2::zeros({6, 4});
        CHECK_THROWS_AS(Vulkan::float_adam_step(p.into_primitive(), small.into_primitive(),
                                                m.into_primitive(), v.into_primitive(), s),
                        ember::ShapeError);
    }
}

#endif  // EMBER_VULKAN
