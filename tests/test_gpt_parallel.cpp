// The GPT example's data parallelism (examples/gpt/parallel.hpp, data.hpp): a replica's share of
// a batch is those rows of the whole batch, and two replicas that each step on their half, with
// the gradients averaged during backward, end with the parameters and losses of one model
// stepping on the whole batch. On the CPU through ThreadCollective (every build), and on two
// GPUs through NCCL (skipped without two CUDA devices and libnccl).
#include <ember/collective/thread.hpp>
#include <ember/ember.hpp>
#include <ember/optim.hpp>

#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "../examples/gpt/data.hpp"
#include "../examples/gpt/model.hpp"
#include "../examples/gpt/parallel.hpp"
#include "module_check.hpp"

#if defined(EMBER_NCCL)
#include <ember/backend/cuda.hpp>
#include <ember/collective/nccl.hpp>
#endif

namespace test_gpt_parallel {

namespace {

using ember::Tensor;
using ember::test::largest_difference;
using ember::test::param_values;

// A 2-layer model, context 16, d_model 32, no dropout (the replicas must compute what one
// model does).
const gpt::GptConfig kTiny{256, 16, 32, 2, 2, 0.0};
constexpr std::size_t kRows = 4, kSeq = 16, kSteps = 3;
constexpr double kLr = 0.1;

// kSteps SGD steps of `model` on the whole bench batch (one replica): its losses and model.
template <ember::AutodiffBackend B>
std::pair<std::vector<double>, gpt::Gpt<B>> whole_batch_run(gpt::Gpt<B> model,
                                                            const ember::Device<B>& device) {
    auto optim = ember::optim::SgdConfig{}.init<gpt::Gpt<B>>();
    const auto batch = gpt::bench_batch<B>(kRows, kSeq, 11, device);
    std::vector<double> losses;
    for (std::size_t k = 0; k < kSteps; ++k) {
        auto [stepped, loss] =
            gpt::replica_step(std::move(model), optim, kLr, batch.inputs, batch.targets, {});
        model = std::move(stepped);
        losses.push_back(gpt::mean_loss(std::move(loss), {}));
    }
    return {losses, std::move(model)};
}

// The same steps as replica `rep` of two, on its half of the rows.
template <ember::AutodiffBackend B>
std::pair<std::vector<double>, gpt::Gpt<B>> replica_run(gpt::Gpt<B> model,
                                                        const ember::Device<B>& device,
                                                        const gpt::Replica& rep) {
    auto optim = ember::optim::SgdConfig{}.init<gpt::Gpt<B>>();
    const std::size_t share = kRows / rep.world;
    const auto batch =
        gpt::bench_batch<B>(kRows, kSeq, 11, device, rep.rank * share, share);
    std::vector<double> losses;
    for (std::size_t k = 0; k < kSteps; ++k) {
        auto [stepped, loss] =
            gpt::replica_step(std::move(model), optim, kLr, batch.inputs, batch.targets, rep);
        model = std::move(stepped);
        losses.push_back(gpt::mean_loss(std::move(loss), rep));
    }
    return {losses, std::move(model)};
}

// Runs replicas 0 and 1 of two on threads (`run(r)`: replica r's losses and parameter values;
// `abort(r, what)`: tells the other replica that r failed, so that neither waits forever) and
// checks that each took the whole-batch model's steps: its losses and parameters within margins.
template <class Run, class Abort>
void check_two_replicas(Run run, Abort abort, const std::vector<double>& single_losses,
                        const std::vector<std::vector<float>>& want, double loss_margin,
                        double param_margin) {
    std::vector<std::vector<double>> losses(2);
    std::vector<std::vector<std::vector<float>>> values(2);
    std::vector<std::string> errors(2);
    std::vector<std::thread> threads;
    for (std::size_t r = 0; r < 2; ++r)
        threads.emplace_back([&, r] {
            try {
                std::tie(losses[r], values[r]) = run(r);
            } catch (const std::exception& e) {
                errors[r] = e.what();
                abort(r, e.what());
            }
        });
    for (auto& t : threads) t.join();
    CHECK(errors == std::vector<std::string>(2));
    for (std::size_t r = 0; r < 2; ++r) {
        INFO("replica " << r);
        REQUIRE(losses[r].size() == kSteps);
        for (std::size_t k = 0; k < kSteps; ++k)
            CHECK(losses[r][k] == Approx(single_losses[k]).margin(loss_margin));
        const double worst = largest_difference(values[r], want);
        INFO("largest parameter difference " << worst);
        CHECK(worst <= param_margin);
    }
}

}  // namespace

TEST_CASE("gpt example: a replica's share of a batch is those rows of the whole batch",
          "[models][gpt][data-parallel]") {
    using B = ember::Cpu;
    const auto whole = gpt::bench_batch<B>(6, 5, 3, {});
    const auto part = gpt::bench_batch<B>(6, 5, 3, {}, 2, 3);
    CHECK(part.inputs.shape() == ember::Shape{3, 5});
    CHECK(part.targets.shape() == ember::Shape{15});
    const auto wi = whole.inputs.to_data().to_vec<std::int64_t>();
    const auto wt = whole.targets.to_data().to_vec<std::int64_t>();
    CHECK(part.inputs.to_data().to_vec<std::int64_t>() ==
          std::vector<std::int64_t>(wi.begin() + 10, wi.begin() + 25));
    CHECK(part.targets.to_data().to_vec<std::int64_t>() ==
          std::vector<std::int64_t>(wt.begin() + 10, wt.begin() + 25));
    // Windows of a text: every offset is drawn, each share keeps its own windows.
    std::vector<std::uint8_t> text(500);
    for (std::size_t i = 0; i < text.size(); ++i) text[i] = std::uint8_t((i * 7 + i / 13) & 255);
    std::mt19937_64 a(9), b(9);
    const auto all = gpt::sample_batch<B>(text, 4, 8, a, {});
    const auto last = gpt::sample_batch<B>(text, 4, 8, b, {}, 3, 1);
    const auto ai = all.inputs.to_data().to_vec<std::int64_t>();
    CHECK(last.inputs.to_data().to_vec<std::int64_t>() ==
          std::vector<std::int64_t>(ai.begin() + 24, ai.end()));
    CHECK(a() == b());  // both drew four offsets
}

TEST_CASE("gpt example: 2 replicas on halves step as 1 model on the whole batch (threads)",
          "[models][gpt][data-parallel]") {
    using AD = ember::Autodiff<ember::Cpu>;
    AD::seed(5);
    const auto model = kTiny.init<AD>();
    const auto [single_losses, single] = whole_batch_run<AD>(model, {});
    auto ranks = ember::collective::ThreadCollective::group(2);
    check_two_replicas(
        [&](std::size_t r) {
            auto [l, m] = replica_run<AD>(model, {}, gpt::Replica{ranks[r].get(), r, 2});
            return std::pair{l, param_values(m)};
        },
        [&](std::size_t r, const char* what) { ranks[r]->abort(what); }, single_losses,
        param_values(single), 1e-6, 1e-5);
    // The steps did something: the loss fell on its batch.
    CHECK(single_losses.back() < single_losses.front());
}

#if defined(EMBER_NCCL)
TEST_CASE("gpt example: 2 GPUs on halves step as 1 GPU on the whole batch",
          "[nccl][gpt][data-parallel]") {
    using ember::CudaDevice;
    using ember::collective::NcclCollective;
    if (!NcclCollective::is_available() || ember::cuda::device_count() < 2) {
        WARN("skipped: NCCL needs libnccl.so.2 and two CUDA devices");
        return;
    }
    using ADC = ember::Autodiff<ember::Cuda>;
    ADC::seed(5);
    const auto model = kTiny.init<ADC>(CudaDevice{0});
    const auto [single_losses, single] = whole_batch_run<ADC>(model, CudaDevice{0});
    // The copies to each GPU are made before the replicas' threads start, as the example does:
    // a copy from GPU 0 waits for GPU 0's stream, which waits for the other replica once
    // replica 0 has queued a reduction.
    std::vector<std::optional<gpt::Gpt<ADC>>> forks(2);
    for (std::size_t r = 0; r < 2; ++r) forks[r].emplace(model.fork(CudaDevice{r}));
    auto ranks = NcclCollective::init_all({CudaDevice{0}, CudaDevice{1}});
    check_two_replicas(
        [&](std::size_t r) {
            const CudaDevice dev{r};
            auto [l, m] =
                replica_run<ADC>(std::move(*forks[r]), dev, gpt::Replica{ranks[r].get(), r, 2});
            return std::pair{l, param_values(m)};
        },
        [&](std::size_t r, const char* what) { ranks[r]->abort(what); }, single_losses,
        param_values(single), 1e-5, 1e-4);
}
#endif

}  // namespace test_gpt_parallel
