#pragma once
// What the host example and the firmware (examples/firmware) share: the tiny MLP the firmware
// runs, and the pixel normalisation (pixels.hpp). Only freestanding-safe ember headers are included
// here, so that the firmware compiles the very definition the host trained and saved.
#include <ember/ember.hpp>
#include <ember/nn/dropout.hpp>
#include <ember/nn/linear.hpp>

#include "pixels.hpp"

namespace mnist {

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
