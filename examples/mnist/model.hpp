#pragma once
// The models of the guide: a plain MLP 784-512-512-10 here, and in common.hpp (which the
// firmware and the web classifier compile too) the CNN of Burn's guide and the tiny MLP. All take
// a batch of normalised images [N, 28, 28] and give class scores [N, 10]; all provide the two
// steps the Learner calls (`step` for training on an autodiff backend, `valid_step` for
// validation).
// The headers of what the models use, not <ember/ember.hpp> and <ember/nn.hpp>: a file that
// compiles them on Dispatch parses no other module (and no concrete stack).
#include <ember/nn/dropout.hpp>
#include <ember/nn/linear.hpp>
#include <ember/nn/loss.hpp>
#include <ember/train/output.hpp>

#include "data.hpp"

namespace mnist {

using ember::Backend;
using ember::Tensor;

/// Cross-entropy loss of class `scores` [N, 10] against `batch`'s labels, with the scores, as
/// the metrics read them (one function a backend, whatever the model).
template <Backend B>
ember::train::ClassificationOutput<B> classify(Tensor<B, 2> scores, const MnistBatch<B>& batch) {
    auto loss = ember::nn::loss::CrossEntropyLossConfig{}.init<B>().forward(scores, batch.targets);
    return {std::move(loss), std::move(scores), batch.targets};
}

}  // namespace mnist

// The two steps the Learner calls, shared by every model here (and by TinyMlp in common.hpp):
// training (`step`, on an autodiff backend) and validation (`valid_step`). Two names, because
// on ember::Dispatch the training and the validation model are the same type.
#define MNIST_LEARNER_STEPS                                                              \
    /** The Learner's training step: loss, scores and the gradients of the loss. */      \
    ember::train::TrainOutput<ember::train::ClassificationOutput<B>> step(               \
        const MnistBatch<B>& batch) const requires ember::AutodiffBackend<B> {           \
        auto out = classify(forward(batch.images), batch);                               \
        return {*this, out.loss.backward(), std::move(out)};                             \
    }                                                                                    \
    /** The Learner's validation step: loss and scores. */                               \
    ember::train::ClassificationOutput<B> valid_step(const MnistBatch<B>& batch) const { \
        return classify(forward(batch.images), batch);                                   \
    }

#include "common.hpp"

namespace mnist {

/// The MLP 784-512-512-10 with ReLU.
template <Backend B>
struct Mlp {
    ember::nn::Linear<B> linear1;
    ember::nn::Linear<B> linear2;
    ember::nn::Linear<B> linear3;
    ember::nn::Relu activation;
    EMBER_MODULE(Mlp, linear1, linear2, linear3, activation)

    /// A fresh model with PyTorch's default initialisation, on `device`.
    static Mlp init(const ember::Device<B>& device = {}) {
        return {ember::nn::LinearConfig{784, 512}.init<B>(device),
                ember::nn::LinearConfig{512, 512}.init<B>(device),
                ember::nn::LinearConfig{512, 10}.init<B>(device),
                {}};
    }

    /// Class scores [N, 10] of images [N, 28, 28].
    Tensor<B, 2> forward(Tensor<B, 3> images) const {
        const auto n = images.dims()[0];
        auto x = activation.forward(linear1.forward(images.template reshape<2>({long(n), 784})));
        x = activation.forward(linear2.forward(x));
        return linear3.forward(x);
    }

    MNIST_LEARNER_STEPS
};

}  // namespace mnist
