#pragma once
// Fashion-MNIST batches for the hand-written loop: pixels scaled to [0, 1] and standardised with
// Fashion-MNIST's own mean and standard deviation (the digits' 0.1307/0.3081 would leave the
// darker clothing images off-centre), stacked into [N, 28, 28] with the labels as class ids.
#include <ember/data.hpp>
#include <ember/ember.hpp>

namespace custom_loop {

/// A batch: images [N, 28, 28] and their class ids [N].
template <ember::Backend B>
struct FashionBatch {
    ember::Tensor<B, 3> images;               ///< standardised pixels
    ember::Tensor<B, 1, ember::Int> targets;  ///< labels 0..9
};

/// Builds FashionBatch<B> from dataset items; stateless, so the loader's workers may share it.
template <ember::Backend B>
struct FashionBatcher {
    /// The items stacked into one batch on `device`.
    FashionBatch<B> batch(std::vector<ember::data::MnistItem> items,
                          const ember::Device<B>& device) const {
        constexpr float kMean = 0.2860f, kStd = 0.3530f;
        const std::size_t n = items.size();
        std::vector<float> pixels;
        pixels.reserve(n * ember::data::MNIST_PIXELS);
        std::vector<std::int64_t> labels;
        labels.reserve(n);
        for (const auto& item : items) {
            for (float p : item.image) pixels.push_back((p / 255.0f - kMean) / kStd);
            labels.push_back(item.label);
        }
        return {ember::Tensor<B, 3>::from_data(
                    ember::TensorData(std::move(pixels),
                                      {n, ember::data::MNIST_HEIGHT, ember::data::MNIST_WIDTH}),
                    device),
                ember::Tensor<B, 1, ember::Int>::from_data(
                    ember::TensorData(std::move(labels), {n}), device)};
    }
};

}  // namespace custom_loop
