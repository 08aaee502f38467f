// compile probe (b): examples/mnist's models (MLP and CNN) and a training loop — forward,
// cross-entropy, backward, an Adam step — on ember::Dispatch (-DPROBE_DISPATCH) or on
// Autodiff<Fusion<Cpu>> (benchmarks/compile_dispatch.sh). The Learner is not in it (the
// mnist_example probe, examples/mnist/main.cpp, has it).
#if defined(PROBE_DISPATCH)
// Dispatch's headers of the modules, the loss and the optimizer the models use: each declares
// its Dispatch instances (compiled in ember_dispatch) extern, and no other module is parsed.
#include <ember/dispatch/nn/conv.hpp>
#include <ember/dispatch/nn/dropout.hpp>
#include <ember/dispatch/nn/linear.hpp>
#include <ember/dispatch/nn/loss.hpp>
#include <ember/dispatch/nn/pool.hpp>
#include <ember/dispatch/optim/adam.hpp>
#else
#include <ember/ember.hpp>
#include <ember/nn.hpp>
#include <ember/optim.hpp>
#endif
#include <iostream>

#include "../../examples/mnist/model.hpp"
#if defined(PROBE_DISPATCH)
using B = ember::Dispatch;
#else
using B = ember::Autodiff<ember::Fusion<ember::Cpu>>;
#endif

template <typename Model>
float train(const ember::Device<B>& device) {
    auto model = Model::init(device);
    auto optim = ember::optim::AdamConfig{}.init<Model>();
    auto images = ember::Tensor<B, 3>::random({8, 28, 28}, ember::Distribution::Default, device);
    auto targets = ember::Tensor<B, 1, ember::Int>::from_ints({0, 1, 2, 3, 4, 5, 6, 7}, device);
    float last = 0;
    for (int step = 0; step < 2; ++step) {
        auto scores = model.forward(images);
        auto loss = ember::nn::loss::CrossEntropyLossConfig{}.init<B>().forward(scores, targets);
        last = loss.into_scalar();
        auto grads = ember::optim::GradientsParams::from_grads(loss.backward(), model);
        model = optim.step(1e-3, model, std::move(grads));
    }
    return last;
}

int main(int argc, char** argv) {
#if defined(PROBE_DISPATCH)
    const auto device = ember::DispatchDevice::parse(argc > 1 ? argv[1] : "cpu+autodiff");
#else
    (void)argc, (void)argv;
    const ember::Device<B> device{};
#endif
    std::cout << train<mnist::Mlp<B>>(device) << ' ' << train<mnist::Cnn<B>>(device) << '\n';
}
