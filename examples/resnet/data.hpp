#pragma once
// The data of the ResNet example: Fashion-MNIST (ember::data::MnistDataset, Debian's
// dataset-fashion-mnist) made CIFAR-shaped — each 28×28 image padded with two background pixels
// on every side to 32×32 and its one channel copied to three — and, for throughput runs,
// synthetic batches of random images and labels.
#include <ember/data.hpp>
#include <ember/ember.hpp>

#include <cstdint>
#include <random>
#include <vector>

#include "model.hpp"

namespace resnet {

/// Side of the padded images.
inline constexpr std::size_t kSide = 32;
/// Pixels added on each side of a 28×28 image.
inline constexpr std::size_t kPad = (kSide - ember::data::MNIST_WIDTH) / 2;

/// One raw pixel (0..255) scaled to [0, 1] and standardised with Fashion-MNIST's training-set
/// mean and deviation (0.2860, 0.3530), so the padding (raw 0) is the background value.
inline float normalise_pixel(float raw) {
    return (raw / 255.0f - 0.2860f) / 0.3530f;
}

/// Builds ImageBatch<B> of [N, 3, 32, 32] from Fashion-MNIST items (stateless: the loader's
/// workers may share it).
template <Backend B>
struct FashionBatcher {
    /// The items padded, replicated to three channels and stacked on `device`.
    ImageBatch<B> batch(std::vector<ember::data::MnistItem> items,
                        const ember::Device<B>& device) const {
        const std::size_t n = items.size(), plane = kSide * kSide;
        std::vector<float> pixels(n * 3 * plane, normalise_pixel(0));
        std::vector<std::int64_t> labels;
        labels.reserve(n);
        for (std::size_t i = 0; i < n; ++i) {
            float* first = pixels.data() + i * 3 * plane;
            for (std::size_t y = 0; y < ember::data::MNIST_HEIGHT; ++y)
                for (std::size_t x = 0; x < ember::data::MNIST_WIDTH; ++x)
                    first[(y + kPad) * kSide + x + kPad] =
                        normalise_pixel(items[i].image[y * ember::data::MNIST_WIDTH + x]);
            std::copy(first, first + plane, first + plane);
            std::copy(first, first + plane, first + 2 * plane);
            labels.push_back(items[i].label);
        }
        return {
            Tensor<B, 4>::from_data(ember::TensorData(std::move(pixels), {n, 3, kSide, kSide}),
                                    device),
            Tensor<B, 1, ember::Int>::from_data(ember::TensorData(std::move(labels), {n}), device)};
    }
};

/// A synthetic batch: standard-normal images [n, 3, 32, 32] and uniform labels 0..classes-1,
/// drawn from `rng` on the host (so a seed gives the same data on every backend).
template <Backend B>
ImageBatch<B> synthetic_batch(std::size_t n, std::size_t classes, std::mt19937_64& rng,
                              const ember::Device<B>& device) {
    std::normal_distribution<float> pixel(0.0f, 1.0f);
    std::vector<float> pixels(n * 3 * kSide * kSide);
    for (float& p : pixels) p = pixel(rng);
    std::vector<std::int64_t> labels(n);
    for (auto& l : labels) l = std::int64_t(rng() % classes);
    return {
        Tensor<B, 4>::from_data(ember::TensorData(std::move(pixels), {n, 3, kSide, kSide}), device),
        Tensor<B, 1, ember::Int>::from_data(ember::TensorData(std::move(labels), {n}), device)};
}

/// `images` [N, C, H, W] stored channels-last, [N, H, W, C] in memory, as PyTorch's
/// `images.to(memory_format=torch.channels_last)`: the CUDA backend keeps that layout through
/// the convolutions (cuDNN's NHWC kernels), batch norms and elementwise ops, and so does the
/// backward pass. Relaid once on the host (a batch is made once); other backends read it as any
/// permuted view.
template <Backend B>
Tensor<B, 4> channels_last(const Tensor<B, 4>& images) {
    auto nhwc = images.permute({0, 2, 3, 1}).into_data();  // [N, H, W, C], row-major
    return Tensor<B, 4>::from_data(std::move(nhwc), images.device()).permute({0, 3, 1, 2});
}

/// `m` with its convolution weights stored channels-last ([out, kh, kw, in] in memory, cuDNN's
/// KRSC), as PyTorch's model.to(memory_format=torch.channels_last) stores them: with
/// channels-last images the CUDA backend then copies no weight before a convolution, and the
/// weight gradients (KRSC from cuDNN) and the optimizer's updates stay in that layout.
template <Backend B>
ResNet<B> channels_last_weights(ResNet<B> m) {
    auto relay = [](nn::Conv2d<B>& c) {
        c.weight = c.weight.map([](const Tensor<B, 4>& w) { return channels_last(w); });
    };
    relay(m.conv1);
    for (auto& b : m.blocks) {
        relay(b.conv1);
        relay(b.conv2);
        if (b.downsample_conv) relay(*b.downsample_conv);
    }
    return m;
}

}  // namespace resnet
