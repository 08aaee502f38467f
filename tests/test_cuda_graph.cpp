// Whole steps captured as CUDA graphs (ember/stacks/cuda_graph.hpp): replays equal the same
// steps run eagerly from the same seed, bit for bit (the kernels are the same ones); dropout
// masks move on at each replay; a host synchronisation inside a capture is an error naming the
// op; StepGraph captures again when the inputs' shape changes. Without a GPU, capture refuses
// with DeviceError and the other cases are skipped. Compiled only with the CUDA backend.
#if defined(EMBER_CUDA)
#include <ember/nn.hpp>
#include <ember/optim.hpp>
#include <ember/stacks.hpp>
#include <ember/stacks/cuda_graph.hpp>

#include "harness.hpp"

namespace {
using ember::Cuda;
using ember::Tensor;

#define REQUIRE_GPU()                        \
    do {                                     \
        if (!ember::cuda::is_available()) {  \
            WARN("skipped: no CUDA device"); \
            return;                          \
        }                                    \
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
    auto graph = ember::cuda::capture([&] { train_step(model, optim, batch); });
    REQUIRE(graph.replayable());
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

TEST_CASE("cuda graph: without a device, capture refuses with DeviceError", "[cuda][graph]") {
    if (ember::cuda::is_available()) {
        CHECK_THROWS_AS(ember::cuda::capture([] {}, ember::CudaDevice{1000}), ember::DeviceError);
        return;
    }
    CHECK_THROWS_AS(ember::cuda::capture([] {}), ember::DeviceError);
    ember::cuda::CapturedStep none;
    CHECK_FALSE(none.replayable());
    CHECK_THROWS_AS(none.replay(), ember::ArgumentError);
    CHECK_FALSE(ember::cuda::is_capturing());
}

TEST_CASE("cuda graph: replayed training steps equal eager ones bit for bit", "[cuda][graph]") {
    REQUIRE_GPU();
    SECTION("Autodiff<Cuda>") {
        compare_replays<ember::Autodiff<Cuda>>(6, false);
    }
    SECTION("Autodiff<Fusion<Cuda>>") {
        compare_replays<ember::Autodiff<ember::Fusion<Cuda>>>(6, false);
    }
    SECTION("an eager step after the replays continues the sequence") {
        compare_replays<ember::Autodiff<Cuda>>(5, true);
        compare_replays<ember::Autodiff<ember::Fusion<Cuda>>>(5, true);
    }
}

TEST_CASE("cuda graph: each replay draws the next mask of the eager sequence", "[cuda][graph]") {
    REQUIRE_GPU();
    const std::size_t n = 4096;
    Cuda::seed(11);
    std::vector<ember::TensorData> eager;
    for (int i = 0; i < 5; ++i)
        eager.push_back(
            Tensor<Cuda, 1>::random({n}, ember::Distribution::Bernoulli(0.5)).to_data());
    Cuda::seed(11);
    std::optional<Tensor<Cuda, 1>> mask;
    auto graph = ember::cuda::capture(
        [&] { mask.emplace(Tensor<Cuda, 1>::random({n}, ember::Distribution::Bernoulli(0.5))); });
    std::vector<ember::TensorData> replayed{mask->to_data()};
    for (int i = 0; i < 3; ++i) {
        graph.replay();
        replayed.push_back(mask->to_data());
    }
    // The host generator moved on with the replays: the next eager draw is the fifth.
    replayed.push_back(Tensor<Cuda, 1>::random({n}, ember::Distribution::Bernoulli(0.5)).to_data());
    require_identical(replayed, eager);
    CHECK(std::memcmp(eager[0].bytes().data(), eager[1].bytes().data(), eager[0].bytes().size()) !=
          0);
    // A new seed between replays reaches the device copy of the generator.
    Cuda::seed(11);
    graph.replay();
    require_identical({mask->to_data()}, {eager[0]});
}

TEST_CASE("cuda graph: a host synchronisation inside a capture is an error naming the op",
          "[cuda][graph]") {
    REQUIRE_GPU();
    auto x = Tensor<Cuda, 1>::from_data(ember::TensorData(std::vector<float>{1, 2, 3}, {3}));
    auto fails = [](const std::function<void()>& step, const std::string& op) {
        INFO(op);
        CHECK_THROWS_WITH(ember::cuda::capture(step), Catch::Contains(op));
        CHECK_FALSE(ember::cuda::is_capturing());
    };
    fails([&] { (void)(x * 2.0).sum().into_scalar(); }, "into_data");
    fails([&] { Cuda::sync({}); }, "sync");
    fails([&] { (void)Tensor<Cuda, 1>::from_data(ember::TensorData(std::vector<float>{1}, {1})); },
          "from_data");
    // The stream works eagerly afterwards.
    CHECK((x + 1.0).to_data().as_slice<float>()[2] == 4.0f);
}

TEST_CASE("cuda graph: an update that replaces its tensors is not replayable", "[cuda][graph]") {
    REQUIRE_GPU();
    using B = ember::Autodiff<Cuda>;
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
    auto graph = ember::cuda::capture([&] { train_step(model, optim, batch, 0.1); });
    CHECK_FALSE(graph.replayable());
    CHECK_THAT(graph.why_not(), Catch::Contains("replaced"));
    CHECK_THROWS_AS(graph.replay(), ember::ArgumentError);
    require_identical(params(model), params(eager));  // the run at capture was the step
}

TEST_CASE("cuda graph: StepGraph replays one shape and captures again on a new one",
          "[cuda][graph]") {
    REQUIRE_GPU();
    using Run = ember::cuda::StepGraph<Tensor<Cuda, 2>>::Ran;
    ember::cuda::StepGraph<Tensor<Cuda, 2>> steps;
    std::optional<Tensor<Cuda, 2>> pending, current;
    auto run = [&](std::size_t rows, float v) {
        std::vector<float> data(rows * 3, v);
        auto x = Tensor<Cuda, 2>::from_data(ember::TensorData(std::move(data), {rows, 3}));
        pending.reset();
        const Run ran =
            steps.run(x, [&](const Tensor<Cuda, 2>& b) { pending.emplace(b * 2.0 + 1.0); });
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

#endif  // EMBER_CUDA
