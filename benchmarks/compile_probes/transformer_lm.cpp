// compile probe (c): the GPT example's transformer language model (examples/gpt/model.hpp:
// embeddings, pre-norm TransformerEncoder, tied output) with a training step — loss, backward,
// an AdamW step — and a cached generation step, on ember::Dispatch (-DPROBE_DISPATCH), on
// Autodiff<Fusion<Cuda>> (-DPROBE_CUDA, where the build has CUDA: ember's CUDA header needs no
// CUDA toolkit to compile) or else on Autodiff<Fusion<Cpu>> (benchmarks/compile_dispatch.sh).
#if defined(PROBE_DISPATCH)
// Dispatch's headers of the modules, the loss and the optimizer the model uses: each declares
// its Dispatch instances (compiled in ember_dispatch) extern, and no other module is parsed.
#include <ember/dispatch/nn/embedding.hpp>
#include <ember/dispatch/nn/loss.hpp>
#include <ember/dispatch/nn/norm.hpp>
#include <ember/dispatch/nn/transformer.hpp>
#include <ember/dispatch/optim/adam.hpp>
#else
#include <ember/ember.hpp>
#include <ember/nn.hpp>
#include <ember/optim.hpp>
#endif
#include <iostream>

#include "../../examples/gpt/model.hpp"
#if defined(PROBE_DISPATCH)
using B = ember::Dispatch;
#elif defined(PROBE_CUDA)
using B = ember::Autodiff<ember::Fusion<ember::Cuda>>;
#else
using B = ember::Autodiff<ember::Fusion<ember::Cpu>>;
#endif

int main(int argc, char** argv) {
#if defined(PROBE_DISPATCH)
    const auto device = ember::DispatchDevice::parse(argc > 1 ? argv[1] : "cpu+autodiff");
#else
    (void)argc, (void)argv;
    const ember::Device<B> device{};
#endif
    const gpt::GptConfig config{256, 64, 64, 4, 2, 0.1};
    auto model = config.init<B>(device);
    auto optim = ember::optim::AdamWConfig{}.init<gpt::Gpt<B>>();
    auto all = ember::Tensor<B, 1, ember::Int>::arange(0, 34, device).reshape<2>({2, 17});
    auto tokens = all.slice({{0, 2}, {0, 16}});
    auto targets = all.slice({{0, 2}, {1, 17}}).reshape<1>({-1});
    for (int step = 0; step < 2; ++step) {
        auto loss = model.loss(tokens, targets);
        std::cout << loss.into_scalar() << '\n';
        auto grads = ember::optim::GradientsParams::from_grads(loss.backward(), model);
        model = optim.step(3e-4, std::move(model), std::move(grads));
    }
    // Generation with the KV cache, on the model without autodiff.
    auto infer = model.valid();
    auto cache = infer.new_cache();
    auto prompt = tokens.inner().slice({{0, 1}, {0, 4}});
    auto scores = infer.forward_cached(prompt, cache);
    std::cout << scores.argmax(1).into_data().to_vec<std::int64_t>().back() << '\n';
}
