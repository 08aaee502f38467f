#pragma once
// Batches of Fashion-MNIST images for the guide's models: pixels scaled to [0, 1] and
// normalised with the dataset's mean and standard deviation (those of Burn's guide), stacked
// into [N, 28, 28], with the labels as class ids.
#include <ember/data/mnist_item.hpp>
#include <ember/tensor/tensor.hpp>
#include <ember/train/output.hpp>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "pixels.hpp"

namespace mnist {

/// A batch: images [N, 28, 28] and their class ids [N].
template <ember::Backend B>
struct MnistBatch {
    ember::Tensor<B, 3> images;               ///< normalised pixels
    ember::Tensor<B, 1, ember::Int> targets;  ///< labels 0..9
    EMBER_DETAIL_FIELDS(MnistBatch, images, targets)

    /// Number of images (data-parallel training splits batches by it).
    std::size_t num_items() const { return images.dims()[0]; }
    /// Images [begin, end) on `device`: one replica's shard.
    MnistBatch shard(std::size_t begin, std::size_t end, const ember::Device<B>& device) const {
        return {ember::train::shard_rows(images, begin, end, device),
                ember::train::shard_rows(targets, begin, end, device)};
    }
};

/// Builds MnistBatch<B> from dataset items (thread-safe: it holds nothing).
template <ember::Backend B>
struct MnistBatcher {
    /// The items stacked into one batch on `device`.
    MnistBatch<B> batch(std::vector<ember::data::MnistItem> items,
                        const ember::Device<B>& device) const {
        const std::size_t n = items.size();
        std::vector<float> pixels;
        pixels.reserve(n * ember::data::MNIST_PIXELS);
        std::vector<std::int64_t> labels;
        labels.reserve(n);
        for (const auto& item : items) {
            for (float p : item.image) pixels.push_back(normalise_pixel(p));
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

/// The first `count` items of a test split (a dataset of MnistItems) with their raw pixels and
/// labels as bytes: what examples/firmware embeds beside the model (`mnist export`,
/// `mnist-quantize --export`).
struct FirmwareImages {
    std::vector<ember::data::MnistItem> items;
    std::vector<std::uint8_t> pixels, labels;
};
template <typename Dataset>
FirmwareImages firmware_images(const Dataset& test, std::size_t count) {
    FirmwareImages out;
    for (std::size_t i = 0; i < std::min(count, test.len()); ++i) {
        out.items.push_back(*test.get(i));
        for (float p : out.items.back().image) out.pixels.push_back(static_cast<std::uint8_t>(p));
        out.labels.push_back(static_cast<std::uint8_t>(out.items.back().label));
    }
    return out;
}

}  // namespace mnist
