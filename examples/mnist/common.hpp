#pragma once
// What the host example shares with the firmware (examples/firmware) and the web classifier
// (examples/web-classifier): the guide's CNN, the tiny MLP the firmware runs, and the pixel
// normalisation (pixels.hpp). Only freestanding-safe ember headers are included
// here, so that the firmware compiles the very definition the host trained and saved.
#include <ember/tensor/tensor.hpp>
#include <ember/nn/conv.hpp>
#include <ember/nn/dropout.hpp>
#include <ember/nn/linear.hpp>
#include <ember/nn/pool.hpp>

#include "pixels.hpp"

namespace mnist {

/// The guide's CNN.
template <ember::Backend B>
struct Cnn {
    ember::nn::Conv2d<B> conv1;
    ember::nn::Conv2d<B> conv2;
    ember::nn::AdaptiveAvgPool2d pool;
    ember::nn::Dropout dropout;
    ember::nn::Linear<B> linear1;
    ember::nn::Linear<B> linear2;
    ember::nn::Relu activation;
    EMBER_MODULE(Cnn, conv1, conv2, pool, dropout, linear1, linear2, activation)

    /// A fresh model with PyTorch's default initialisation, on `device`.
    static Cnn init(const ember::Device<B>& device = {}) {
        return {ember::nn::Conv2dConfig{{1, 8}, {3, 3}}.init<B>(device),
                ember::nn::Conv2dConfig{{8, 16}, {3, 3}}.init<B>(device),
                ember::nn::AdaptiveAvgPool2dConfig{{8, 8}}.init(),
                ember::nn::DropoutConfig{0.5}.init(),
                ember::nn::LinearConfig{16 * 8 * 8, 512}.init<B>(device),
                ember::nn::LinearConfig{512, 10}.init<B>(device),
                {}};
    }

    /// Class scores [N, 10] of images [N, 28, 28].
    ember::Tensor<B, 2> forward(ember::Tensor<B, 3> images) const {
        const auto [n, h, w] = images.dims();
        auto x = images.template reshape<4>({long(n), 1, long(h), long(w)});
        x = dropout.forward(conv1.forward(x));                     // [N, 8, 26, 26]
        x = activation.forward(dropout.forward(conv2.forward(x)));  // [N, 16, 24, 24]
        x = pool.forward(x);                                        // [N, 16, 8, 8]
        auto y = x.template reshape<2>({long(n), 16 * 8 * 8});
        y = activation.forward(dropout.forward(linear1.forward(y)));
        return linear2.forward(y);
    }

#ifdef MNIST_LEARNER_STEPS
    MNIST_LEARNER_STEPS
#endif
};

/// An MLP 784-64-10 with ReLU: small enough for a microcontroller (50 890 parameters, 199 KiB
/// in f32).
template <ember::Backend B>
struct TinyMlp {
    ember::nn::Linear<B> linear1;
    ember::nn::Linear<B> linear2;
    ember::nn::Relu activation;
    EMBER_MODULE(TinyMlp, linear1, linear2, activation)

    /// A fresh model with PyTorch's default initialisation, on `device`.
    static TinyMlp init(const ember::Device<B>& device = {}) {
        return {ember::nn::LinearConfig{784, 64}.init<B>(device),
                ember::nn::LinearConfig{64, 10}.init<B>(device),
                {}};
    }

    /// Class scores [N, 10] of images [N, 28, 28].
    ember::Tensor<B, 2> forward(ember::Tensor<B, 3> images) const {
        const auto n = images.dims()[0];
        auto x = images.template reshape<2>({long(n), 784});
        return linear2.forward(activation.forward(linear1.forward(x)));
    }

#ifdef MNIST_LEARNER_STEPS  // the host example adds what the Learner calls
    MNIST_LEARNER_STEPS
#endif
};

}  // namespace mnist
