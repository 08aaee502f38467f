// The public headers in one translation unit, and the stacks users build on instantiated in
// full, so that a compiler other than the one that built the package (the Clang checks of
// tests/consumer) sees all of ember's templates: the decorators explicitly instantiated, and a
// model of the common layers trained one step on each autodiff stack. (all_headers.cpp, which
// the project's CMakeLists.txt writes from the installed package, includes every public header
// as well, so that one missing from this list is compiled all the same.)
// Compiled only (an object library): the consumer's own program is what runs.
#include <ember/autodiff/attention.hpp>
#include <ember/autodiff/autodiff.hpp>
#include <ember/autodiff/gradients.hpp>
#include <ember/backend/arena.hpp>
#include <ember/backend/cpu.hpp>
#include <ember/backend/cuda.hpp>
#include <ember/backend/cuda_attention.hpp>
#include <ember/backend/cudnn.hpp>
#include <ember/backend/vulkan.hpp>
#include <ember/collective/collective.hpp>
#include <ember/collective/gradients.hpp>
#include <ember/collective/nccl.hpp>
#include <ember/collective/ops.hpp>
#include <ember/collective/rendezvous.hpp>
#include <ember/collective/thread.hpp>
#include <ember/data.hpp>
#include <ember/data/dataloader.hpp>
#include <ember/data/dataset.hpp>
#include <ember/data/mnist_item.hpp>
#include <ember/data/sqlite.hpp>
#include <ember/data/text.hpp>
#include <ember/data/transform.hpp>
#include <ember/data/vision.hpp>
#include <ember/dispatch/device.hpp>
#include <ember/dispatch/dispatch.hpp>
#include <ember/dispatch/instance_lists.hpp>
#include <ember/dispatch/module.hpp>
#include <ember/dispatch/nn.hpp>
#include <ember/dispatch/nn/activation_modules.hpp>
#include <ember/dispatch/nn/activations.hpp>
#include <ember/dispatch/nn/attention.hpp>
#include <ember/dispatch/nn/conv.hpp>
#include <ember/dispatch/nn/dropout.hpp>
#include <ember/dispatch/nn/embedding.hpp>
#include <ember/dispatch/nn/linear.hpp>
#include <ember/dispatch/nn/loss.hpp>
#include <ember/dispatch/nn/norm.hpp>
#include <ember/dispatch/nn/pool.hpp>
#include <ember/dispatch/nn/rnn.hpp>
#include <ember/dispatch/nn/transformer.hpp>
#include <ember/dispatch/ops.hpp>
#include <ember/dispatch/optim/adam.hpp>
#include <ember/dispatch/optim/gradients_params.hpp>
#include <ember/dispatch/optim/sgd.hpp>
#include <ember/dispatch/tensor.hpp>
#include <ember/ember.hpp>
#include <ember/export.hpp>
#include <ember/fusion/attention.hpp>
#include <ember/fusion/fusion.hpp>
#include <ember/module/config.hpp>
#include <ember/module/module.hpp>
#include <ember/module/param.hpp>
#include <ember/module/running_state.hpp>
#include <ember/nn.hpp>
#include <ember/nn/activation_config.hpp>
#include <ember/nn/activation_modules.hpp>
#include <ember/nn/activations.hpp>
#include <ember/nn/attention.hpp>
#include <ember/nn/conv.hpp>
#include <ember/nn/conv_transpose.hpp>
#include <ember/nn/cross_attention.hpp>
#include <ember/nn/dropout.hpp>
#include <ember/nn/embedding.hpp>
#include <ember/nn/initializer.hpp>
#include <ember/nn/interpolate.hpp>
#include <ember/nn/linear.hpp>
#include <ember/nn/loss.hpp>
#include <ember/nn/loss_ctc.hpp>
#include <ember/nn/loss_margin.hpp>
#include <ember/nn/loss_regression.hpp>
#include <ember/nn/loss_rnnt.hpp>
#include <ember/nn/norm.hpp>
#include <ember/nn/normalization_config.hpp>
#include <ember/nn/padding.hpp>
#include <ember/nn/pool.hpp>
#include <ember/nn/pool3d.hpp>
#include <ember/nn/positional.hpp>
#include <ember/nn/rnn.hpp>
#include <ember/nn/rnn_elman.hpp>
#include <ember/nn/transformer.hpp>
#include <ember/nn/utility.hpp>
#include <ember/optim.hpp>
#include <ember/optim/accumulator.hpp>
#include <ember/optim/adagrad.hpp>
#include <ember/optim/adam.hpp>
#include <ember/optim/adan.hpp>
#include <ember/optim/decay.hpp>
#include <ember/optim/grad_clipping.hpp>
#include <ember/optim/grad_scaler.hpp>
#include <ember/optim/gradients_params.hpp>
#include <ember/optim/lbfgs.hpp>
#include <ember/optim/lr_scheduler.hpp>
#include <ember/optim/lr_scheduler_compose.hpp>
#include <ember/optim/module_lr.hpp>
#include <ember/optim/muon.hpp>
#include <ember/optim/optimizer.hpp>
#include <ember/optim/rmsprop.hpp>
#include <ember/optim/sgd.hpp>
#include <ember/quant/module.hpp>
#include <ember/quant/param.hpp>
#include <ember/quant/tensor.hpp>
#include <ember/record.hpp>
#include <ember/record/pytorch.hpp>
#include <ember/record/recorder.hpp>
#include <ember/record/safetensors.hpp>
#include <ember/record/serde.hpp>
#include <ember/record/untrusted.hpp>
#include <ember/record/value.hpp>
#include <ember/stacks.hpp>
#include <ember/stacks/cuda_graph.hpp>
#include <ember/stacks/step_graph.hpp>
#include <ember/stacks/vulkan_autodiff.hpp>
#include <ember/stacks/vulkan_fusion.hpp>
#include <ember/stacks/vulkan_graph.hpp>
#include <ember/tensor/activation.hpp>
#include <ember/tensor/attention.hpp>
#include <ember/tensor/autocast.hpp>
#include <ember/tensor/backend.hpp>
#include <ember/tensor/check.hpp>
#include <ember/tensor/composed.hpp>
#include <ember/tensor/data.hpp>
#include <ember/tensor/display.hpp>
#include <ember/tensor/distribution.hpp>
#include <ember/tensor/dtype.hpp>
#include <ember/tensor/error.hpp>
#include <ember/tensor/fusion_check.hpp>
#include <ember/tensor/fusion_program.hpp>
#include <ember/tensor/kind.hpp>
#include <ember/tensor/linalg.hpp>
#include <ember/tensor/module_ops.hpp>
#include <ember/tensor/module_ops_composed.hpp>
#include <ember/tensor/ops.hpp>
#include <ember/tensor/quant_primitive.hpp>
#include <ember/tensor/quant_scheme.hpp>
#include <ember/tensor/sampling.hpp>
#include <ember/tensor/shape.hpp>
#include <ember/tensor/strided.hpp>
#include <ember/tensor/tensor.hpp>
#include <ember/tensor/transaction.hpp>
#include <ember/train/checkpoint.hpp>
#include <ember/train/classification_metrics.hpp>
#include <ember/train/dashboard.hpp>
#include <ember/train/device_metrics.hpp>
#include <ember/train/evaluator.hpp>
#include <ember/train/learner.hpp>
#include <ember/train/logger.hpp>
#include <ember/train/metric.hpp>
#include <ember/train/metrics.hpp>
#include <ember/train/output.hpp>
#include <ember/train/plain_renderer.hpp>
#include <ember/train/ranking_metrics.hpp>
#include <ember/train/renderer.hpp>
#include <ember/train/report.hpp>
#include <ember/train/text_metrics.hpp>
#include <ember/train/vision_metrics.hpp>

#include <utility>

// The decorator stacks the library compiles (src/stacks/), compiled here by this compiler too.
template struct ember::Autodiff<ember::Cpu>;
template struct ember::Autodiff<ember::CpuF64>;
template struct ember::Autodiff<ember::Cpu, ember::BalancedCheckpointing>;
template struct ember::Fusion<ember::Cpu>;
template struct ember::Autodiff<ember::Fusion<ember::Cpu>>;

namespace {

/// A model of the common layers: convolution, norms, pooling, recurrence, attention, linear.
template <ember::Backend B>
struct Net {
    ember::nn::Conv2d<B> conv;
    ember::nn::BatchNorm<B> bn;
    ember::nn::MaxPool2d pool;
    ember::nn::Lstm<B> lstm;
    ember::nn::TransformerEncoder<B> encoder;
    ember::nn::LayerNorm<B> norm;
    ember::nn::Embedding<B> embedding;
    ember::nn::Dropout dropout;
    ember::nn::Linear<B> head;
    ember::nn::Gelu gelu;
    EMBER_MODULE(Net, conv, bn, pool, lstm, encoder, norm, embedding, dropout, head, gelu)

    static Net init(const ember::Device<B>& device) {
        return {ember::nn::Conv2dConfig{{1, 4}, {3, 3}}.init<B>(device),
                ember::nn::BatchNormConfig{4}.init<B>(device),
                ember::nn::MaxPool2dConfig{{2, 2}}.init(),
                ember::nn::LstmConfig{12, 8}.init<B>(device),
                ember::nn::TransformerEncoderConfig{8, 16, 2, 1}.init<B>(device),
                ember::nn::LayerNormConfig{8}.init<B>(device),
                ember::nn::EmbeddingConfig{10, 8}.init<B>(device),
                ember::nn::DropoutConfig{0.1}.init(),
                ember::nn::LinearConfig{8, 3}.init<B>(device),
                {}};
    }

    /// Scores [N, 3] of images [N, 1, 6, 6] plus token embeddings of `tokens` [N, 4].
    ember::Tensor<B, 2> forward(const ember::Tensor<B, 4>& x,
                                const ember::Tensor<B, 2, ember::Int>& tokens) const {
        const auto n = static_cast<long>(x.dims()[0]);
        auto y = pool.forward(bn.forward(conv.forward(x)));             // [N, 4, 2, 2]
        auto seq = y.template reshape<3>({n, 1, 16}).narrow(2, 0, 12);  // [N, 1, 12]
        auto h = lstm.forward(seq, std::nullopt).first;                 // [N, 1, 8]
        h = h + embedding.forward(tokens).narrow(1, 0, 1);
        h = encoder.forward(ember::nn::TransformerEncoderInput<B>(norm.forward(h)));
        auto z = gelu.forward(dropout.forward(h)).template reshape<2>({n, 8});
        return head.forward(z);
    }
};

/// One training step with the optimizers users pick first, and the records they save.
template <ember::AutodiffBackend AD>
void train_step(const ember::Device<AD>& device) {
    auto model = Net<AD>::init(device);
    auto x = ember::Tensor<AD, 4>::random({2, 1, 6, 6}, ember::Distribution::Default, device);
    auto tokens =
        ember::Tensor<AD, 1, ember::Int>::arange(0, 8, device).template reshape<2>({2, 4});
    auto targets = ember::Tensor<AD, 1, ember::Int>::arange(0, 2, device);
    auto loss = ember::nn::loss::CrossEntropyLossConfig{}.init<AD>(device).forward(
        model.forward(x, tokens), targets);
    loss = loss + ember::nn::loss::MseLoss{}.forward(model.forward(x, tokens),
                                                     ember::Tensor<AD, 2>::zeros({2, 3}, device),
                                                     ember::nn::loss::Reduction::Mean);
    auto grads = ember::optim::GradientsParams::from_grads(loss.backward(), model);
    auto adam = ember::optim::AdamWConfig{}.init<Net<AD>>();
    model = adam.step(1e-3, model, std::move(grads));
    auto sgd = ember::optim::SgdConfig{}.init<Net<AD>>();
    model = sgd.step(1e-2, model,
                     ember::optim::GradientsParams::from_grads(
                         model.forward(x, tokens).sum().backward(), model));
    model.save_file("net", ember::record::NamedMpkGzFileRecorder<>{});
    auto valid = model.valid();
    (void)valid.forward(x.inner(), tokens.inner());
}

}  // namespace

/// Referenced, so that the templates above are instantiated; never called.
void consumer_instantiate_stacks() {
    train_step<ember::Autodiff<ember::Cpu>>({});
    train_step<ember::Autodiff<ember::Fusion<ember::Cpu>>>({});
}
