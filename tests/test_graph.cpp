// Whole steps captured once and replayed, on every GPU backend that captures
// (ember/stacks/cuda_graph.hpp: one CUDA graph; ember/stacks/vulkan_graph.hpp: one Vulkan
// command buffer), through one suite: replays equal the same steps run eagerly from the same
// seed, bit for bit (the kernels are the same ones); dropout masks move on at each replay; a
// host synchronisation inside a capture is an error naming the op; an update that replaces its
// tensors is not replayable; StepGraph captures again when the inputs' shape changes; the
// Learner's captured steps train as its eager ones. Without a device, capture refuses with
// DeviceError and the other cases are skipped (CI runs the Vulkan ones on lavapipe).
#if defined(EMBER_CUDA) || defined(EMBER_VULKAN)
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <tuple>

#include <ember/nn.hpp>
#include <ember/optim.hpp>
#include <ember/stacks.hpp>
#include <ember/train/learner.hpp>
#if defined(EMBER_CUDA)
#include <ember/stacks/cuda_graph.hpp>
#endif
#if defined(EMBER_VULKAN)
#include <ember/stacks/vulkan_fusion.hpp>
#include <ember/stacks/vulkan_graph.hpp>
#endif

#include "harness.hpp"

namespace {
using ember::Tensor;

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

// What the suite needs of each backend's capture API.
#if defined(EMBER_CUDA)
struct CudaGraphs {
    using B = ember::Cuda;
    using Device = ember::CudaDevice;
    template <typename Inputs>
    using StepGraph = ember::cuda::StepGraph<Inputs>;
    using CapturedStep = ember::cuda::CapturedStep;
    static constexpr const char* tag = "cuda";
    static constexpr const char* replayed_as = "replayed as a CUDA graph";
    static bool available() { return ember::cuda::is_available(); }
    static CapturedStep capture(const std::function<void()>& f, const Device& d = {}) {
        return ember::cuda::capture(f, d);
    }
    static bool capturing() { return ember::cuda::is_capturing(); }
};
#endif
#if defined(EMBER_VULKAN)
struct VulkanGraphs {
    using B = ember::Vulkan;
    using Device = ember::VulkanDevice;
    template <typename Inputs>
    using StepGraph = ember::vulkan::StepGraph<Inputs>;
    using CapturedStep = ember::vulkan::CapturedStep;
    static constexpr const char* tag = "vulkan";
    static constexpr const char* replayed_as = "replayed as a Vulkan command buffer";
    static bool available() { return ember::vulkan::is_available(); }
    static CapturedStep capture(const std::function<void()>& f, const Device& d = {}) {
        return ember::vulkan::capture(f, d);
    }
    static bool capturing() { return ember::vulkan::is_capturing(); }
};
#endif
using GraphKinds = decltype(std::tuple_cat(
#if defined(EMBER_CUDA)
    std::tuple<CudaGraphs>{},
#endif
#if defined(EMBER_VULKAN)
    std::tuple<VulkanGraphs>{},
#endif
    std::tuple<>{}));

#define REQUIRE_DEVICE(K)                                \
    do {                                                 \
        if (!K::available()) {                           \
            WARN("skipped: no " << K::tag << " device"); \
            return;                                      \
        }                                                \
    } while (0)

/// N steps from the same seed, eagerly and as 1 eager step + capture + N - 2 replays; then, with
/// `tail`, one more eager step after the replays (the generator and Adam's step count moved on).
template <typename K, typename B>
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
    auto graph = K::capture([&] { train_step(model, optim, batch); });
    REQUIRE(graph.replayable());
    CHECK(graph.random_draws() == 1);       // the dropout mask
    CHECK(graph.optimizer_updates() == 4);  // two weights, two biases
    CHECK(graph.num_nodes() > 10);          // forward, backward and update
    CHECK(graph.pool_bytes() > 0);          // the step's own buffers
    for (std::size_t i = 2; i < n; ++i) graph.replay();
    CHECK(graph.replays() == n - 2);
    if (tail) {
        optim.add_steps(static_cast<std::int64_t>(graph.replays()));
        train_step(model, optim, batch);
    }
    require_identical(params(model), params(eager));
}

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

/// Trains LearnerNet on Autodiff<K::B> for two epochs, capturing steps or not; returns the
/// parameters and the experiment log.
template <typename K>
std::pair<std::vector<ember::TensorData>, std::string> fit_learner(bool capture) {
    using B = typename K::B;
    using AB = ember::Autodiff<B>;
    using Out = ember::train::ClassificationOutput<AB>;
    using VOut = ember::train::ClassificationOutput<B>;
    const auto dir = std::filesystem::temp_directory_path() /
                     ("ember-" + std::string(K::tag) + "-capture-" + std::to_string(::getpid()) +
                      (capture ? "c" : "e"));
    std::filesystem::remove_all(dir);
    AB::seed(5);
    LearnerNet<AB> model{Net<AB>::init()};
    auto learner =
        ember::train::LearnerBuilder<Out, VOut>(dir)
            .metric_train_numeric(ember::train::LossMetric<AB>{})
            .metric_valid_numeric(ember::train::LossMetric<B>{})
            .num_epochs(2)
            .seed(9)
            .capture_steps(capture)
            .renderer(std::make_shared<Quiet>())
            .build(std::move(model),
                   ember::optim::AdamConfig{.epsilon = 1e-8}.init<LearnerNet<AB>>(), 1e-2);
    auto trained = learner.fit(FixedLoader<AB>{}, FixedLoader<B>{});
    std::ifstream in(dir / "experiment.log");
    std::stringstream log;
    log << in.rdbuf();
    std::filesystem::remove_all(dir);
    return {params(trained), log.str()};
}
}  // namespace

TEMPLATE_LIST_TEST_CASE("graph: without a device, capture refuses with DeviceError", "[graph]",
                        GraphKinds) {
    using K = TestType;
    if (K::available()) {
        CHECK_THROWS_AS(K::capture([] {}, typename K::Device{1000}), ember::DeviceError);
        return;
    }
    CHECK_THROWS_AS(K::capture([] {}), ember::DeviceError);
    typename K::CapturedStep none;
    CHECK_FALSE(none.replayable());
    CHECK_THROWS_AS(none.replay(), ember::ArgumentError);
    CHECK_FALSE(K::capturing());
}

TEMPLATE_LIST_TEST_CASE("graph: replayed training steps equal eager ones bit for bit", "[graph]",
                        GraphKinds) {
    using K = TestType;
    using B = typename K::B;
    REQUIRE_DEVICE(K);
    SECTION("Autodiff<B>") {
        compare_replays<K, ember::Autodiff<B>>(6, false);
    }
    SECTION("Autodiff<Fusion<B>>") {
        compare_replays<K, ember::Autodiff<ember::Fusion<B>>>(6, false);
    }
    SECTION("an eager step after the replays continues the sequence") {
        compare_replays<K, ember::Autodiff<B>>(5, true);
        compare_replays<K, ember::Autodiff<ember::Fusion<B>>>(5, true);
    }
}

TEMPLATE_LIST_TEST_CASE("graph: each replay draws the next mask of the eager sequence", "[graph]",
                        GraphKinds) {
    using K = TestType;
    using B = typename K::B;
    REQUIRE_DEVICE(K);
    const std::size_t n = 4096;
    const auto draw = [&] {
        return Tensor<B, 1>::random({n}, ember::Distribution::Bernoulli(0.5));
    };
    B::seed(11);
    std::vector<ember::TensorData> eager;
    for (int i = 0; i < 5; ++i) eager.push_back(draw().to_data());
    B::seed(11);
    std::optional<Tensor<B, 1>> mask;
    auto graph = K::capture([&] { mask.emplace(draw()); });
    std::vector<ember::TensorData> replayed{mask->to_data()};
    for (int i = 0; i < 3; ++i) {
        graph.replay();
        replayed.push_back(mask->to_data());
    }
    // The host generator moved on with the replays: the next eager draw is the fifth.
    replayed.push_back(draw().to_data());
    require_identical(replayed, eager);
    CHECK(std::memcmp(eager[0].bytes().data(), eager[1].bytes().data(), eager[0].bytes().size()) !=
          0);
    // A new seed between replays reaches the device copy of the generator.
    B::seed(11);
    graph.replay();
    require_identical({mask->to_data()}, {eager[0]});
}

TEMPLATE_LIST_TEST_CASE("graph: pooling forward and backward replay as they ran eagerly", "[graph]",
                        GraphKinds) {
    // Vulkan's average pools are matmuls with small geometry matrices: they must already be on
    // the device when the step is captured (an upload inside a capture is refused).
    using K = TestType;
    using A = ember::Autodiff<typename K::B>;
    REQUIRE_DEVICE(K);
    A::seed(3);
    const auto x = Tensor<A, 4>::random({2, 3, 10, 9}, ember::Distribution::Default).require_grad();
    std::optional<Tensor<typename K::B, 4>> y_out, g_out;
    const auto step = [&] {
        // [2, 3, 4, 3] both: an adaptive pool, and a strided, padded pool's first four rows.
        auto y = ember::module::adaptive_avg_pool2d(x, {4, 3}) +
                 ember::module::avg_pool2d(x, {3, 3}, {2, 3}, {1, 0}).slice({{0, 2}, {0, 3}, {0, 4}});
        auto grads = (y * y).sum().backward();
        y_out.emplace(y.inner());
        g_out.emplace(*x.grad(grads));
    };
    step();
    const std::vector<ember::TensorData> eager{y_out->to_data(), g_out->to_data()};
    y_out.reset();  // the captured step makes its own outputs
    g_out.reset();
    auto graph = K::capture(step);
    graph.replay();
    require_identical({y_out->to_data(), g_out->to_data()}, eager);
}

TEMPLATE_LIST_TEST_CASE("graph: a host synchronisation inside a capture is an error naming the op",
                        "[graph]", GraphKinds) {
    using K = TestType;
    using B = typename K::B;
    REQUIRE_DEVICE(K);
    auto x = Tensor<B, 1>::from_data(ember::TensorData(std::vector<float>{1, 2, 3}, {3}));
    auto fails = [](const std::function<void()>& step, const std::string& op) {
        INFO(op);
        CHECK_THROWS_WITH(K::capture(step), Catch::Contains(op));
        CHECK_FALSE(K::capturing());
    };
    fails([&] { (void)(x * 2.0).sum().into_scalar(); }, "into_data");
    fails([&] { B::sync({}); }, "sync");
    fails([&] { (void)Tensor<B, 1>::from_data(ember::TensorData(std::vector<float>{1}, {1})); },
          "from_data");
#if defined(EMBER_VULKAN)
    if constexpr (std::is_same_v<K, VulkanGraphs>) {
        // Index checks: indices whose range the host knows (uploaded, or drawn uniformly) are
        // checked without a readback; computed ones would be read back.
        const auto known = Tensor<B, 1, ember::Int>::from_data(
            ember::TensorData(std::vector<std::int64_t>{2, 0, 1}, {3}));
        const auto drawn =
            Tensor<B, 1, ember::Int>::random({5}, ember::Distribution::Uniform(0, 3));
        std::optional<Tensor<B, 1>> picked;
        auto graph =
            K::capture([&] { picked.emplace(x.gather(0, known) + x.gather(0, drawn).sum()); });
        CHECK(picked->to_data().template as_slice<float>()[0] > 3.0f);
        const auto computed = known + 0;
        fails([&] { (void)x.gather(0, computed); }, "into_data");
        const auto out_of_range = Tensor<B, 1, ember::Int>::from_data(
            ember::TensorData(std::vector<std::int64_t>{0, 3}, {2}));
        CHECK_THROWS_WITH(x.gather(0, out_of_range), Catch::Contains("index 3 is out of range"));
    }
#endif
    // The stream works eagerly afterwards.
    CHECK((x + 1.0).to_data().template as_slice<float>()[2] == 4.0f);
}

TEMPLATE_LIST_TEST_CASE("graph: an update that replaces its tensors is not replayable", "[graph]",
                        GraphKinds) {
    using K = TestType;
    using B = ember::Autodiff<typename K::B>;
    REQUIRE_DEVICE(K);
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
    auto graph = K::capture([&] { train_step(model, optim, batch, 0.1); });
    CHECK_FALSE(graph.replayable());
    CHECK_THAT(graph.why_not(), Catch::Contains("replaced"));
    CHECK_THROWS_AS(graph.replay(), ember::ArgumentError);
    require_identical(params(model), params(eager));  // the run at capture was the step
}

#if defined(EMBER_CUDA)
TEST_CASE("graph: a CUDA step's private pool splits freed blocks and merges them back", "[graph]") {
    REQUIRE_DEVICE(CudaGraphs);
    using B = ember::Cuda;
    const ember::CudaDevice dev{};
    constexpr std::size_t kMiB = std::size_t{1} << 20;
    // The growable arenas (where the driver has virtual memory management), then cudaMalloc'd
    // segments.
    const std::string arenas = GENERATE(as<std::string>{}, "1", "0");
    ::setenv("EMBER_CUDA_GRAPH_ARENAS", arenas.c_str(), 1);
    struct Unset {
        ~Unset() { ::unsetenv("EMBER_CUDA_GRAPH_ARENAS"); }
    } unset;
    const auto x = Tensor<B, 1>::full(ember::Shape{2 * kMiB}, 1.5f, dev);  // 8 MiB of f32
    std::optional<Tensor<B, 1>> a, b, c;
    auto graph = ember::cuda::capture(
        [&] {
            {
                const auto big = x * 2.0f;  // 8 MiB, freed before the halves are made
                a = big.narrow(0, 0, kMiB).sum();
            }
            // Two 4 MiB buffers: both carved from the freed 8 MiB block; then, freed, they merge
            // back, and the 8 MiB product is that block again.
            {
                const auto lo = x.narrow(0, 0, kMiB) + 1.0f;
                const auto hi = x.narrow(0, kMiB, kMiB) + 2.0f;
                b = lo.sum() + hi.sum();
            }
            c = (x * 3.0f).sum();
        },
        dev);
    REQUIRE(graph.replayable());
    graph.replay();
    // The large buffers all fit in 8 MiB (without splitting, the second half would need a new
    // block), the small ones (the sums) in 2 MiB of their own.
    CHECK(graph.pool_bytes() <= 10 * kMiB);
    CHECK(a->into_scalar() == Approx(3.0 * double(kMiB)));
    CHECK(b->into_scalar() == Approx(6.0 * double(kMiB)));
    CHECK(c->into_scalar() == Approx(4.5 * 2.0 * double(kMiB)));
    // The graph gone and its tensors freed, the pool's memory goes back: to the driver (its
    // arenas) or to the caching pool (cudaMalloc'd segments, without virtual memory management).
    const auto pool = graph.pool_bytes();
    const auto reserved = ember::cuda::memory_stats(dev).bytes_reserved;
    graph = {};
    a.reset();
    b.reset();
    c.reset();
    const auto after = ember::cuda::memory_stats(dev).bytes_reserved;
    CHECK((after == reserved || after + pool == reserved));
    const auto again = Tensor<B, 1>::full(ember::Shape{2 * kMiB}, 1.0f, dev);
    CHECK(again.sum().into_scalar() == Approx(2.0 * double(kMiB)));
}
#endif

TEMPLATE_LIST_TEST_CASE("graph: StepGraph replays one shape and captures again on a new one",
                        "[graph]", GraphKinds) {
    using K = TestType;
    using B = typename K::B;
    REQUIRE_DEVICE(K);
    using Steps = typename K::template StepGraph<Tensor<B, 2>>;
    using Run = typename Steps::Ran;
    Steps steps;
    std::optional<Tensor<B, 2>> pending, current;
    auto run = [&](std::size_t rows, float v) {
        std::vector<float> data(rows * 3, v);
        auto x = Tensor<B, 2>::from_data(ember::TensorData(std::move(data), {rows, 3}));
        pending.reset();
        const Run ran =
            steps.run(x, [&](const Tensor<B, 2>& b) { pending.emplace(b * 2.0 + 1.0); });
        if (ran != Run::Replayed) current = std::move(pending);
        const auto out = current->to_data();
        CHECK(out.shape() == ember::Shape{rows, 3});
        for (float y : out.template as_slice<float>()) CHECK(y == 2 * v + 1);
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

TEMPLATE_LIST_TEST_CASE("graph: the Learner's captured steps train as its eager ones",
                        "[graph][learner]", GraphKinds) {
    using K = TestType;
    REQUIRE_DEVICE(K);
    const auto [eager, eager_log] = fit_learner<K>(false);
    const auto [captured, log] = fit_learner<K>(true);
    require_identical(captured, eager);
    INFO(log);
    CHECK_THAT(log, Catch::Contains(std::string("training step is ") + K::replayed_as));
    CHECK_THAT(log, Catch::Contains(std::string("validation step is ") + K::replayed_as));
    CHECK_THAT(log, Catch::Contains("short last batch"));
    CHECK_THAT(eager_log, !Catch::Contains("capture_steps"));
}

#endif  // EMBER_CUDA || EMBER_VULKAN

namespace test_graph {

#undef REQUIRE_DEVICE

}  // namespace test_graph
