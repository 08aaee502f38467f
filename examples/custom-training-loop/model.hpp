#pragma once
// A small CNN in two parts, so that each part can have its own optimizer: a convolutional
// feature extractor ([N, 28, 28] → [N, 400]) and a classifier head ([N, 400] → [N, 10]).
// Each part is a module of its own, which is what GradientsParams::from_module and an
// optimizer's step work on.
#include <ember/ember.hpp>
#include <ember/nn.hpp>

namespace custom_loop {

using ember::Backend;
using ember::Tensor;

/// Two 3×3 convolutions, each followed by ReLU and a 2×2 max pool, flattened.
template <Backend B>
struct FeatureExtractor {
    ember::nn::Conv2d<B> conv1;
    ember::nn::Conv2d<B> conv2;
    ember::nn::MaxPool2d pool;
    ember::nn::Relu activation;
    EMBER_MODULE(FeatureExtractor, conv1, conv2, pool, activation)

    /// The features [N, 400] of images [N, 28, 28].
    Tensor<B, 2> forward(Tensor<B, 3> images) const {
        const auto [n, h, w] = images.dims();
        auto x = images.template reshape<4>({long(n), 1, long(h), long(w)});
        x = pool.forward(activation.forward(conv1.forward(x)));  // [N, 8, 13, 13]
        x = pool.forward(activation.forward(conv2.forward(x)));  // [N, 16, 5, 5]
        return x.template flatten<2>(1, 3);
    }
};

/// A hidden layer with ReLU and dropout, then the class scores.
template <Backend B>
struct Classifier {
    ember::nn::Linear<B> hidden;
    ember::nn::Linear<B> output;
    ember::nn::Dropout dropout;
    ember::nn::Relu activation;
    EMBER_MODULE(Classifier, hidden, output, dropout, activation)

    /// Class scores [N, 10] of features [N, 400].
    Tensor<B, 2> forward(Tensor<B, 2> features) const {
        auto x = dropout.forward(activation.forward(hidden.forward(features)));
        return output.forward(x);
    }
};

/// The whole model: features, then the head.
template <Backend B>
struct Net {
    FeatureExtractor<B> features;
    Classifier<B> classifier;
    EMBER_MODULE(Net, features, classifier)

    /// Class scores [N, 10] of images [N, 28, 28].
    Tensor<B, 2> forward(Tensor<B, 3> images) const {
        return classifier.forward(features.forward(std::move(images)));
    }
};

/// Configuration of Net: the head's width and dropout (the feature extractor is fixed).
struct NetConfig {
    std::size_t hidden = 128;  ///< units of the head's hidden layer
    double dropout = 0.25;     ///< dropout before the output layer
    EMBER_CONFIG(NetConfig, hidden, dropout)

    /// A fresh model with PyTorch's default initialisation, on `device`.
    template <Backend B>
    Net<B> init(const ember::Device<B>& device = {}) const {
        FeatureExtractor<B> features{ember::nn::Conv2dConfig{{1, 8}, {3, 3}}.init<B>(device),
                                     ember::nn::Conv2dConfig{{8, 16}, {3, 3}}.init<B>(device),
                                     ember::nn::MaxPool2dConfig{{2, 2}, {2, 2}}.init(),
                                     {}};
        Classifier<B> classifier{ember::nn::LinearConfig{16 * 5 * 5, hidden}.init<B>(device),
                                 ember::nn::LinearConfig{hidden, 10}.init<B>(device),
                                 ember::nn::DropoutConfig{dropout}.init(),
                                 {}};
        return {std::move(features), std::move(classifier)};
    }
};

}  // namespace custom_loop
