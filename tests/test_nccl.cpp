// NcclCollective on the GPU machine (two or more CUDA devices; every case is skipped elsewhere):
// the ops against closed-form sums with a thread per device, the device check, and data-parallel
// training on two GPUs (bare loop and Learner) against one GPU with the whole batch.
#if defined(EMBER_NCCL)
#include <ember/backend/cuda.hpp>
#include <ember/collective/gradients.hpp>
#include <ember/collective/nccl.hpp>
#include <ember/ember.hpp>
#include <ember/nn/dropout.hpp>
#include <ember/nn/linear.hpp>
#include <ember/nn/loss.hpp>
#include <ember/optim.hpp>
#include <thread>
#include "harness.hpp"

namespace test_nccl {

namespace {

using namespace ember::collective;
using ember::Cuda;
using ember::CudaDevice;
using ember::Tensor;
using ember::TensorData;
using ADC = ember::Autodiff<Cuda>;

bool two_gpus() {
    if (!NcclCollective::is_available() || ember::cuda::device_count() < 2) {
        WARN("skipped: NCCL needs libnccl.so.2 and two CUDA devices");
        return false;
    }
    return true;
}

template <typename Fn>
void on_devices(std::vector<std::unique_ptr<NcclCollective>>& ranks, Fn fn) {
    std::vector<std::thread> threads;
    std::vector<std::string> errors(ranks.size());
    for (std::size_t r = 0; r < ranks.size(); ++r)
        threads.emplace_back([&, r] {
            try {
                fn(r, *ranks[r], CudaDevice{ranks[r]->device().index});
            } catch (const std::exception& e) {
                errors[r] = e.what();
            }
        });
    for (auto& t : threads) t.join();
    for (const auto& e : errors) CHECK(e.empty());
}

template <ember::Backend B>
struct Net {
    ember::nn::Linear<B> l1;
    ember::nn::Linear<B> l2;
    ember::nn::Relu act;
    EMBER_MODULE(Net, l1, l2, act)
    Tensor<B, 1> loss(const Tensor<B, 2>& x, const Tensor<B, 2>& y) const {
        return ember::nn::loss::MseLoss{}.forward(l2.forward(act.forward(l1.forward(x))), y);
    }
};

TensorData items(std::size_t first, std::size_t n, std::size_t width, float phase) {
    std::vector<float> v;
    for (std::size_t i = first; i < first + n; ++i)
        for (std::size_t j = 0; j < width; ++j)
            v.push_back(std::sin(0.31f * float(i) + phase * float(j + 1)));
    return TensorData(v, {n, width});
}

}  // namespace

TEST_CASE("NcclCollective: argument errors (no GPU needed)", "[nccl][collective][errors]") {
    using Catch::Matchers::Contains;
    CHECK_THROWS_WITH(NcclCollective::init_all({CudaDevice{0}, CudaDevice{0}}),
                      Contains("Cuda(0) is listed twice"));
    CHECK_THROWS_AS(NcclCollective::init_local({}, 2, 0, {}), ember::ArgumentError);
    CHECK_THROWS_WITH(NcclCollective::init_local({}, 2, 1, {CudaDevice{0}, CudaDevice{1}}),
                      Contains("ranks 1..2 are out of range for a world of 2"));
    CHECK_THROWS_WITH(NcclCollective::init({}, 2, 2, CudaDevice{0}),
                      Contains("rank 2 is out of range"));
}

TEST_CASE("NcclCollective: all_reduce, broadcast, all_gather, reduce_scatter on 2 GPUs",
          "[nccl][collective]") {
    if (!two_gpus()) return;
    auto ranks = NcclCollective::init_all({CudaDevice{0}, CudaDevice{1}});
    REQUIRE(ranks.size() == 2);
    CHECK(ranks[1]->rank() == 1);
    CHECK(ranks[1]->world_size() == 2);
    const std::size_t n = 1001;
    on_devices(ranks, [&](std::size_t r, Collective& c, CudaDevice dev) {
        std::vector<float> mine(n);
        for (std::size_t i = 0; i < n; ++i) mine[i] = float(r * 1000 + i);
        auto t = Tensor<Cuda, 1>::from_data(TensorData(mine, {n}), dev);
        auto sum = all_reduce(c, t).to_data().to_vec<float>();
        auto mean = all_reduce(c, t, ReduceOp::Mean).to_data().to_vec<float>();
        for (std::size_t i = 0; i < n; ++i) {
            REQUIRE(sum[i] == float(1000 + 2 * i));
            REQUIRE(mean[i] == Approx(500.0 + double(i)));
        }
        CHECK(broadcast(c, t, 1).to_data().to_vec<float>()[5] == 1005.f);
        auto g = all_gather(c, t.reshape<2>({1, long(n)}));
        CHECK(g.shape() == ember::Shape{2, n});
        CHECK(g.to_data().to_vec<float>()[n + 3] == 1003.f);
        auto s = reduce_scatter(c, Tensor<Cuda, 2>::from_data(items(0, 4, 3, 0.5f), dev));
        CHECK(s.shape() == ember::Shape{2, 3});
        const auto want = items(0, 4, 3, 0.5f).to_vec<float>();
        CHECK(s.to_data().to_vec<float>()[0] == Approx(2 * want[r * 6]));
        // Started on the side stream, in order, while the backend's stream goes on; an
        // ordinary op after them waits for them.
        auto pa = all_reduce_async(c, t);
        auto pb = all_reduce_async(c, t.mul_scalar(2.0), ReduceOp::Mean);
        auto after = all_reduce(c, Tensor<Cuda, 1>::ones({3}, dev)).to_data().to_vec<float>();
        CHECK(after == std::vector<float>{2, 2, 2});
        auto a = std::move(pa).wait().add_scalar(1.0).to_data().to_vec<float>();
        auto b = std::move(pb).wait().to_data().to_vec<float>();
        for (std::size_t i = 0; i < n; ++i) {
            REQUIRE(a[i] == float(1000 + 2 * i + 1));
            REQUIRE(b[i] == Approx(1000.0 + 2.0 * double(i)));
        }
        // Fusion<Cuda>: the pending chain is computed and its CUDA buffer goes to NCCL.
        using F = ember::Fusion<Cuda>;
        auto f = Tensor<F, 1>::ones({5}, dev).mul_scalar(double(r + 1)).add_scalar(1.0);
        CHECK(all_reduce(c, f).to_data().to_vec<float>() == std::vector<float>(5, 5.f));
        auto k = all_reduce(c, Tensor<Cuda, 1, ember::Int>::arange(0, 4, dev));
        CHECK(k.to_data().to_vec<std::int64_t>() == std::vector<std::int64_t>{0, 2, 4, 6});
        // A tensor on the other rank's device is refused, naming the op and the devices.
        auto other = Tensor<Cuda, 1>::zeros({4}, CudaDevice{1 - dev.index});
        CHECK_THROWS_AS(all_reduce(c, other), ember::DeviceError);
        c.barrier();
    });
}

TEST_CASE("NcclCollective: 2 GPUs with shards of B match 1 GPU with batches of 2B",
          "[nccl][data-parallel]") {
    if (!two_gpus()) return;
    ADC::seed(3);
    Net<ADC> model{ember::nn::LinearConfig{8, 32}.init<ADC>({}),
                   ember::nn::LinearConfig{32, 4}.init<ADC>({}),
                   {}};
    const std::size_t shard = 16, steps = 5;
    auto optim = ember::optim::AdamConfig{}.init<Net<ADC>>();
    auto single = model;
    {
        auto o = optim;
        for (std::size_t k = 0; k < steps; ++k) {
            auto x = Tensor<ADC, 2>::from_data(items(k * 2 * shard, 2 * shard, 8, 0.7f), {});
            auto y = Tensor<ADC, 2>::from_data(items(k * 2 * shard, 2 * shard, 4, 1.1f), {});
            auto grads =
                ember::optim::GradientsParams::from_grads(single.loss(x, y).backward(), single);
            single = o.step(1e-2, std::move(single), std::move(grads));
        }
    }
    const bool overlap = GENERATE(false, true);
    INFO("gradients reduced " << (overlap ? "during" : "after") << " backward");
    auto ranks = NcclCollective::init_all({CudaDevice{0}, CudaDevice{1}});
    std::vector<Net<ADC>> replicas(2, model);
    on_devices(ranks, [&](std::size_t r, Collective& c, CudaDevice dev) {
        auto m = broadcast_module(c, model.fork(dev), 0);
        auto o = optim;
        for (std::size_t k = 0; k < steps; ++k) {
            const std::size_t first = k * 2 * shard + r * shard;
            auto x = Tensor<ADC, 2>::from_data(items(first, shard, 8, 0.7f), dev);
            auto y = Tensor<ADC, 2>::from_data(items(first, shard, 4, 1.1f), dev);
            if (!overlap) {
                auto grads = ember::optim::GradientsParams::from_grads(m.loss(x, y).backward(), m);
                // The gradients are synchronised before m is moved into step (the order in
                // which a call's arguments are evaluated is unspecified).
                auto synced = sync_gradients(c, m, std::move(grads));
                m = o.step(1e-2, std::move(m), std::move(synced));
                continue;
            }
            // A bucket per parameter, each started on NCCL's stream during backward.
            GradientReducer reducer(c, m, {.bucket_bytes = 1});
            ember::optim::GradientsParams grads;
            {
                auto scope = reducer.attach();
                grads = ember::optim::GradientsParams::from_grads(m.loss(x, y).backward(), m);
            }
            m = o.step(1e-2, std::move(m), reducer.finish(std::move(grads)));
            CHECK(reducer.overlapped() == 4);
        }
        replicas[r] = m;
    });
    double worst = 0;
    for (const auto& rep : replicas) {
        std::vector<std::vector<float>> a, b;
        rep.visit([&](std::string_view, const auto& p) {
            a.push_back(p.val().to_data().template to_vec<float>());
        });
        single.visit([&](std::string_view, const auto& p) {
            b.push_back(p.val().to_data().template to_vec<float>());
        });
        for (std::size_t i = 0; i < a.size(); ++i)
            for (std::size_t j = 0; j < a[i].size(); ++j)
                worst = std::max(worst, double(std::abs(a[i][j] - b[i][j])));
    }
    INFO("largest difference " << worst);
    CHECK(worst <= 1e-5);
}

}  // namespace test_nccl

#endif
