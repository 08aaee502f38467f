// Compiled with the firmware, never run: the forward pass of each family of built-in layers,
// instantiated on the CPU backend under the firmware's flags (-fno-exceptions -fno-rtti, no
// threads, no iostream or filesystem), so that the freestanding build keeps them all
// compiling, not only the MLP that main.cpp runs.
#include <ember/ember.hpp>
#include <ember/nn.hpp>

namespace {

using B = ember::Cpu;
using ember::Tensor;

}  // namespace

/// Runs one small input through a layer of each family; returns a checksum.
float nn_forward_check() {
    namespace nn = ember::nn;
    const auto images = Tensor<B, 4>::zeros({1, 1, 8, 8});
    auto x = nn::Conv2dConfig{{1, 4}, {3, 3}}.init<B>().forward(images);
    x = nn::BatchNormConfig{4}.init<B>().forward(x);
    x = nn::MaxPool2dConfig{{2, 2}}.init().forward(x);
    x = nn::AdaptiveAvgPool2dConfig{{2, 2}}.init().forward(x);
    x = nn::ConvTranspose2dConfig{{4, 2}, {2, 2}}.init<B>().forward(x);
    auto flat = x.flatten<2>(1, 3);
    flat = nn::LayerNormConfig{flat.dims()[1]}.init<B>().forward(flat);
    flat = nn::Gelu{}.forward(nn::LinearConfig{flat.dims()[1], 8}.init<B>().forward(flat));

    const auto tokens = Tensor<B, 2, ember::Int>::zeros({1, 5});
    auto seq = nn::EmbeddingConfig{10, 8}.init<B>().forward(tokens);
    seq = nn::PositionalEncodingConfig{8}.init<B>().forward(seq);
    seq = nn::TransformerEncoderConfig{8, 16, 2, 1}.init<B>().forward(
        nn::TransformerEncoderInput<B>(seq));
    auto [lstm_out, state] = nn::LstmConfig{8, 4}.init<B>().forward(seq);
    auto gru_out = nn::GruConfig{4, 4}.init<B>().forward(lstm_out);
    return flat.sum().into_scalar() + gru_out.sum().into_scalar() +
           state.hidden.sum().into_scalar();
}
