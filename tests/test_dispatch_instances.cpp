// A model written against <ember/dispatch/nn.hpp>: the modules, losses and optimizers whose
// Dispatch instances ember_dispatch compiles (src/dispatch/instances_*.cpp) and this header
// declares extern. These cases link against those instances and check them on values from
// arithmetic: constant-initialised layers, and Adam's first step, which moves each parameter
// by the learning rate against the sign of its gradient.
#include <ember/dispatch/nn.hpp>

#include "harness.hpp"

using ember::Dispatch;
using ember::Tensor;
using ember::TensorData;
using ember::test::check_close;
using Dev = ember::Device<Dispatch>;
namespace nn = ember::nn;

TEST_CASE("dispatch instances: Linear and Conv2d with constant weights", "[dispatch]") {
    for (const auto* name : {"cpu", "cpu+autodiff", "cpu+fusion"}) {
        INFO(name);
        const Dev dev = Dev::parse(name);
        const auto half = nn::Initializer::Constant(0.5);
        // y = x·W + b with every weight and bias 0.5: 0.5 · (1 + 2 + 3) + 0.5 = 3.5.
        auto linear = nn::LinearConfig{3, 2}.with_initializer(half).init<Dispatch>(dev);
        auto x = Tensor<Dispatch, 2>::from_data(TensorData({1.f, 2.f, 3.f}, {1, 3}), dev);
        check_close(linear.forward(x).to_data(), TensorData({3.5f, 3.5f}, {1, 2}));
        // Rank 3 through the same layer: [2, 1, 3] → [2, 1, 2].
        auto x3 = Tensor<Dispatch, 3>::from_data(
            TensorData({1.f, 2.f, 3.f, 0.f, 0.f, 0.f}, {2, 1, 3}), dev);
        check_close(linear.forward(x3).to_data(), TensorData({3.5f, 3.5f, 0.5f, 0.5f}, {2, 1, 2}));
        // A 3×3 kernel of 0.5 over a 3×3 input of ones, bias 0.5: 9 · 0.5 + 0.5 = 5.
        auto conv = nn::Conv2dConfig{{1, 2}, {3, 3}}.with_initializer(half).init<Dispatch>(dev);
        auto ones = Tensor<Dispatch, 4>::ones({1, 1, 3, 3}, dev);
        check_close(conv.forward(ones).to_data(), TensorData({5.f, 5.f}, {1, 2, 1, 1}));
        // LayerNorm of [1, 2, 3]: mean 2, variance 2/3, so ±1/√(2/3 + ε).
        auto norm = nn::LayerNormConfig{3}.init<Dispatch>(dev);
        const float s = float(1.0 / std::sqrt(2.0 / 3.0 + 1e-5));
        check_close(norm.forward(x).to_data(), TensorData({-s, 0.f, s}, {1, 3}));
    }
}

TEST_CASE("dispatch instances: an Adam step of a Linear layer", "[dispatch]") {
    const Dev dev = Dev::parse("cpu+autodiff");
    auto model =
        nn::LinearConfig{2, 1}.with_initializer(nn::Initializer::Constant(0.5)).init<Dispatch>(dev);
    auto optim = ember::optim::AdamConfig{}.init<nn::Linear<Dispatch>>();
    auto x = Tensor<Dispatch, 2>::from_data(TensorData({1.f, -2.f}, {1, 2}), dev);
    // loss = x·W + b: dW = xᵀ = [1, -2], db = 1. Adam's first step is lr · g / (|g| + ε): each
    // parameter moves by (almost exactly) lr against its gradient's sign.
    auto loss = model.forward(x).sum();
    auto grads = ember::optim::GradientsParams::from_grads(loss.backward(), model);
    model = optim.step(0.1, std::move(model), std::move(grads));
    check_close(model.weight.val().to_data(), TensorData({0.4f, 0.6f}, {2, 1}), {1e-5, 1e-5});
    check_close(model.bias->val().to_data(), TensorData({0.4f}, {1}), {1e-5, 1e-5});
    // Cross-entropy through the loss's instance: a layer of zeros scores both classes 0, so the
    // loss of either target is log 2.
    auto two =
        nn::LinearConfig{2, 2}.with_initializer(nn::Initializer::Zeros()).init<Dispatch>(dev);
    auto targets = Tensor<Dispatch, 1, ember::Int>::from_ints({0}, dev);
    auto ce =
        nn::loss::CrossEntropyLossConfig{}.init<Dispatch>(dev).forward(two.forward(x), targets);
    check_close(ce.to_data(), TensorData({float(std::log(2.0))}, {1}), {1e-5, 1e-5});
}
