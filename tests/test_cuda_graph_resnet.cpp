// A ResNet training step (examples/resnet's model: convolutions, BatchNorm, residual blocks, SGD
// with momentum and weight decay) captured as a CUDA graph and replayed: N steps as one eager
// step, the capture and N - 2 replays equal N eager steps from the same weights, parameters and
// BatchNorm running statistics alike, in f32 and under bf16 autocast, on Autodiff<Cuda>,
// Autodiff<Fusion<Cuda>> and Dispatch. This needs SGD's update in place inside a capture
// (CudaBackend::float_sgd_step), which is also checked against Sgd's composed ops. With cuDNN
// switched off every kernel is deterministic and the replays equal the eager steps bit for bit;
// cuDNN's measured algorithms may add atomics, so that case is compared within f32 rounding.
// Every case skips without a GPU.
#if defined(EMBER_CUDA)
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <ember/backend/cudnn.hpp>
#include <ember/dispatch/nn.hpp>
#include <ember/optim.hpp>
#include <ember/stacks.hpp>
#include <ember/stacks/cuda_graph.hpp>

#include "../examples/resnet/model.hpp"
#include "cuda_harness.hpp"

namespace test_cuda_graph_resnet {

namespace {

using ember::Tensor;
using ember::TensorData;

// Two stages of one block each (an identity shortcut, then a strided 1×1 projection with its
// BatchNorm): every kind of layer ResNet-18 has, at 4 and 8 channels.
template <ember::Backend B>
resnet::ResNet<B> small_resnet(const ember::Device<B>& d) {
    return resnet::ResNetConfig{{4, 8}, {1, 1}, 3, 10}.init<B>(d);
}

template <ember::Backend B>
resnet::ImageBatch<B> batch_of(const ember::Device<B>& d) {
    const std::size_t n = 8, side = 8;
    std::vector<float> x(n * 3 * side * side);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = float((i * 7919) % 1000) / 500.0f - 1.0f;
    std::vector<std::int64_t> y(n);
    for (std::size_t i = 0; i < n; ++i) y[i] = std::int64_t((3 * i + 1) % 10);
    return {Tensor<B, 4>::from_data(TensorData(std::move(x), {n, 3, side, side}), d),
            Tensor<B, 1, ember::Int>::from_data(TensorData(std::move(y), {n}), d)};
}

// Everything a step changes: the parameters (in visiting order), then each BatchNorm's running
// mean and variance.
template <ember::Backend B>
std::vector<TensorData> state_of(const resnet::ResNet<B>& m) {
    std::vector<TensorData> out;
    m.visit([&](std::string_view, const auto& p) { out.push_back(p.val().to_data()); });
    auto bn = [&](const ember::nn::BatchNorm<B>& n) {
        out.push_back(n.running_mean.value().to_data());
        out.push_back(n.running_var.value().to_data());
    };
    bn(m.bn1);
    for (const auto& b : m.blocks) {
        bn(b.bn1);
        bn(b.bn2);
        if (b.downsample_bn) bn(*b.downsample_bn);
    }
    return out;
}

void require_equal(const std::vector<TensorData>& a, const std::vector<TensorData>& b,
                   bool bitwise) {
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
        INFO("tensor " << i << " of " << a.size() << " (parameters, then running statistics)");
        REQUIRE(a[i].shape() == b[i].shape());
        if (bitwise)
            CHECK(std::memcmp(a[i].bytes().data(), b[i].bytes().data(), a[i].bytes().size()) ==
                  0);
        else
            ember::test::check_close(a[i], b[i], {1e-5, 1e-4});
    }
}

// `n` SGD steps (momentum 0.9, weight decay 5e-4, as examples/resnet) eagerly, and as one eager
// step, the capture and n - 2 replays, from the same weights; both end states compared.
template <ember::AutodiffBackend B>
void compare_replays(const ember::Device<B>& d, bool bf16, bool bitwise, std::size_t n = 5) {
    using Model = resnet::ResNet<B>;
    auto sgd = [] {
        return ember::optim::SgdConfig{}
            .with_momentum(ember::optim::MomentumConfig{0.9, 0.0})
            .with_weight_decay(ember::optim::WeightDecayConfig{5e-4})
            .template init<Model>();
    };
    const auto batch = batch_of<B>(d);
    auto train_step = [&](Model& model, auto& optim) {
        auto loss = [&] {
            const ember::Autocast autocast(ember::DType::BF16, bf16);
            return model.classify(batch).loss;
        }();
        auto grads = ember::optim::GradientsParams::from_grads(loss.backward(), model);
        model = optim.step(0.05, std::move(model), std::move(grads));
        return loss.detach();
    };

    B::seed(3);
    Model eager = small_resnet<B>(d);
    // The parameters are lazy: drawn here in visiting order, as state_of draws the other
    // model's below (drawn at their first use in the forward pass, they would differ).
    (void)state_of(eager);
    auto eager_optim = sgd();
    std::vector<double> eager_losses;
    for (std::size_t i = 0; i < n; ++i)
        eager_losses.push_back(double(train_step(eager, eager_optim).into_scalar()));

    B::seed(3);
    Model model = small_resnet<B>(d);
    auto optim = sgd();
    const auto initial = state_of(model);  // drawn in the order the eager model's were
    (void)train_step(model, optim);  // the velocity exists and cuDNN has measured its choices
    std::optional<Tensor<B, 1>> loss;
    auto graph = ember::cuda::capture([&] { loss.emplace(train_step(model, optim)); });
    REQUIRE(graph.replayable());
    std::size_t params = 0;
    model.visit([&](std::string_view, const auto&) { ++params; });
    CHECK(params == 20);
    CHECK(graph.optimizer_updates() == params);  // every parameter's SGD update, in place
    CHECK(graph.num_nodes() > 50);
    std::vector<double> losses{double(Tensor<B, 1>(*loss).into_scalar())};
    for (std::size_t i = 2; i < n; ++i) {
        graph.replay();
        losses.push_back(double(Tensor<B, 1>(*loss).into_scalar()));
    }
    CHECK(graph.replays() == n - 2);
    // The replays trained: the losses moved on, and so did the weights.
    for (std::size_t i = 0; i < losses.size(); ++i) {
        INFO("step " << i + 2);
        if (bitwise)
            CHECK(losses[i] == eager_losses[i + 1]);
        else
            CHECK(std::abs(losses[i] - eager_losses[i + 1]) <=
                  1e-4 * std::abs(eager_losses[i + 1]));
    }
    CHECK(losses.back() != losses.front());
    const auto replayed = state_of(model);
    require_equal(replayed, state_of(eager), bitwise);
    CHECK(std::memcmp(replayed[0].bytes().data(), initial[0].bytes().data(),
                      initial[0].bytes().size()) != 0);
}

// Switches cuDNN off for a scope (im2col + GEMM: deterministic kernels).
struct NoCudnn {
    NoCudnn() { ember::cuda::set_use_cudnn(false); }
    ~NoCudnn() { ember::cuda::set_use_cudnn(true); }
    NoCudnn(const NoCudnn&) = delete;
    NoCudnn& operator=(const NoCudnn&) = delete;
};

}  // namespace

TEST_CASE("cuda graph: replayed ResNet steps with BatchNorm and SGD equal eager ones",
          "[cuda][graph]") {
    REQUIRE_GPU();
    using AC = ember::Autodiff<ember::Cuda>;
    using AF = ember::Autodiff<ember::Fusion<ember::Cuda>>;
    SECTION("Autodiff<Cuda>, f32, bit for bit") {
        const NoCudnn off;
        compare_replays<AC>(ember::CudaDevice{0}, false, true);
    }
    SECTION("Autodiff<Fusion<Cuda>>, bf16 autocast, bit for bit") {
        const NoCudnn off;
        compare_replays<AF>(ember::CudaDevice{0}, true, true);
    }
    SECTION("Dispatch on cuda:0+fusion+autodiff, bf16 autocast, bit for bit") {
        const NoCudnn off;
        compare_replays<ember::Dispatch>(ember::DispatchDevice::parse("cuda:0+fusion+autodiff"),
                                         true, true);
    }
    SECTION("Autodiff<Fusion<Cuda>>, f32, cuDNN's convolutions") {
        compare_replays<AF>(ember::CudaDevice{0}, false, false);
    }
}

TEST_CASE("cuda float_sgd_step equals Sgd's composed ops", "[cuda][optim]") {
    REQUIRE_GPU();
    using C = ember::Cuda;
    ember::Cpu::seed(4);
    auto r = [](std::size_t n) {
        return Tensor<C, 1>::from_data(
            Tensor<ember::Cpu, 1>::random({n}, ember::Distribution::Normal(0, 1)).to_data());
    };
    for (const bool nesterov : {false, true}) {
        for (const double wd : {0.0, 5e-4}) {
            INFO("nesterov " << nesterov << ", weight decay " << wd);
            const std::size_t n = 1037;
            const auto p = r(n), g = r(n), v = r(n);
            const ember::SgdStepScalars s{0.05, 0.9, 0.1, wd, nesterov};
            // Sgd::step's composed arrangement (include/ember/optim/sgd.hpp).
            auto grad = wd != 0 ? g.add(p.mul_scalar(wd)) : g;
            auto v_next = v.mul_scalar(0.9).add(grad.mul_scalar(1.0 - 0.1));
            auto d = nesterov ? grad.add(v_next.mul_scalar(0.9)) : v_next;
            auto p_next = p.sub(d.mul_scalar(0.05));
            auto [p2, v2] = C::float_sgd_step(p.primitive(), g.primitive(), v.primitive(), s);
            const auto got_p = Tensor<C, 1>::from_primitive(p2).to_data();
            const auto got_v = Tensor<C, 1>::from_primitive(v2).to_data();
            CHECK(std::memcmp(got_p.bytes().data(), p_next.to_data().bytes().data(), 4 * n) == 0);
            CHECK(std::memcmp(got_v.bytes().data(), v_next.to_data().bytes().data(), 4 * n) == 0);
            // The inputs were shared, so they kept their values (the update wrote new buffers).
            CHECK(std::memcmp(p.to_data().bytes().data(), p_next.to_data().bytes().data(), 4 * n) !=
                  0);
        }
    }
}

}  // namespace test_cuda_graph_resnet

#endif  // EMBER_CUDA
