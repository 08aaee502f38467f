#pragma once
// ResNet in its CIFAR form (He et al. 2016, as the CIFAR-10 ResNet-18 most training recipes use):
// a 3×3 stem convolution without max-pool, stages of BasicBlocks whose first block may halve the
// resolution (a strided 3×3 convolution, with a 1×1 convolution + BatchNorm on the shortcut when
// the shape changes), global average pooling and one linear layer. ResNetConfig's defaults are
// ResNet-18: widths 64/128/256/512, two blocks per stage, 11.2 M parameters.
//
// The parameter paths are PyTorch's torchvision-style names with ember's layouts: a block's
// `conv1.weight` is torch's [out, in, kh, kw]; `bn1.gamma`/`beta` are torch's weight/bias; the
// classifier `fc.weight` is [in, out] (torch's transposed). tests/test_models.cpp loads the
// weights of tests/fixtures/gen_models.py's PyTorch model through these paths.
#include <ember/ember.hpp>
#include <ember/nn.hpp>
#include <ember/train/output.hpp>

#include <cmath>
#include <optional>
#include <vector>

namespace resnet {

using ember::Backend;
using ember::Tensor;
namespace nn = ember::nn;

/// A batch of images [N, C, H, W] and their class ids [N].
template <Backend B>
struct ImageBatch {
    Tensor<B, 4> images;               ///< normalised pixels
    Tensor<B, 1, ember::Int> targets;  ///< class ids
};

namespace detail {
// He et al.'s initialisation for convolutions followed by ReLU (normal, std √(2 / fan_out)), as
// torchvision's ResNet draws them.
inline nn::Conv2dConfig conv(std::size_t in, std::size_t out, std::size_t kernel,
                             std::size_t stride) {
    const std::size_t pad = kernel / 2;
    return nn::Conv2dConfig{{in, out}, {kernel, kernel}}
        .with_stride({stride, stride})
        .with_padding(nn::PaddingConfig2d::Explicit(pad, pad))
        .with_bias(false)
        .with_initializer(nn::Initializer::KaimingNormal(std::sqrt(2.0), true));
}
}  // namespace detail

/// Two 3×3 convolutions with BatchNorm and a residual connection: relu(bn2(conv2(relu(bn1(
/// conv1(x))))) + shortcut(x)). The shortcut is the identity, or a strided 1×1 convolution with
/// BatchNorm where the block changes the resolution or the width. The ReLUs (and the residual
/// addition) go through BatchNorm's forward_relu / forward_add_relu, which run them inside batch
/// norm's own kernels in training on CUDA and the CPU and compose them elsewhere.
template <Backend B>
struct BasicBlock {
    nn::Conv2d<B> conv1;                            ///< 3×3, stride 1 or 2
    nn::BatchNorm<B> bn1;                           ///< after conv1
    nn::Conv2d<B> conv2;                            ///< 3×3, stride 1
    nn::BatchNorm<B> bn2;                           ///< after conv2
    std::optional<nn::Conv2d<B>> downsample_conv;   ///< 1×1 projection of the shortcut
    std::optional<nn::BatchNorm<B>> downsample_bn;  ///< after downsample_conv
    EMBER_MODULE(BasicBlock, conv1, bn1, conv2, bn2, downsample_conv, downsample_bn)

    /// x [N, in, H, W] → [N, out, H / stride, W / stride].
    Tensor<B, 4> forward(const Tensor<B, 4>& x) const {
        auto y = bn1.forward_relu(conv1.forward(x));
        auto shortcut = downsample_conv ? downsample_bn->forward(downsample_conv->forward(x)) : x;
        return bn2.forward_add_relu(conv2.forward(y), shortcut);
    }
};

/// The network: stem, blocks, pooling and classifier.
template <Backend B>
struct ResNet {
    nn::Conv2d<B> conv1;                ///< the 3×3 stem convolution
    nn::BatchNorm<B> bn1;               ///< after the stem
    std::vector<BasicBlock<B>> blocks;  ///< all stages' blocks in order
    nn::AdaptiveAvgPool2d pool;         ///< global average pooling
    nn::Linear<B> fc;                   ///< [last width, classes]
    EMBER_MODULE(ResNet, conv1, bn1, blocks, pool, fc)

    /// Class scores [N, classes] of images [N, C, H, W]. On an autodiff backend BatchNorm uses
    /// the batch statistics and updates its running ones; on a `valid()` model, the running ones.
    Tensor<B, 2> forward(const Tensor<B, 4>& images) const {
        auto x = bn1.forward_relu(conv1.forward(images));
        for (const auto& block : blocks) x = block.forward(x);
        return fc.forward(pool.forward(x).template flatten<2>(1, 3));
    }

    /// Cross-entropy loss and scores of `batch`, as the Learner's metrics read them.
    ember::train::ClassificationOutput<B> classify(const ImageBatch<B>& batch) const {
        auto scores = forward(batch.images);
        auto loss = nn::loss::CrossEntropyLossConfig{}.init<B>().forward(scores, batch.targets);
        return {std::move(loss), std::move(scores), batch.targets};
    }
    /// The Learner's training step: loss, scores and the gradients of the loss.
    ember::train::TrainOutput<ember::train::ClassificationOutput<B>> step(
        const ImageBatch<B>& batch) const requires ember::AutodiffBackend<B> {
        auto out = classify(batch);
        return {*this, out.loss.backward(), std::move(out)};
    }
    /// The Learner's validation step: loss and scores.
    ember::train::ClassificationOutput<B> valid_step(const ImageBatch<B>& batch) const {
        return classify(batch);
    }
};

/// Configuration of ResNet; the defaults are the CIFAR ResNet-18.
struct ResNetConfig {
    std::vector<std::size_t> widths{64, 128, 256, 512};  ///< channels of each stage
    std::vector<std::size_t> blocks{2, 2, 2, 2};         ///< BasicBlocks of each stage
    std::size_t in_channels = 3;                         ///< image channels
    std::size_t num_classes = 10;                        ///< classifier outputs
    EMBER_CONFIG(ResNetConfig, widths, blocks, in_channels, num_classes)

    /// A fresh model on `device`: convolutions He-normal (fan_out), BatchNorm γ 1 β 0, the
    /// classifier PyTorch's nn.Linear default. Every stage after the first starts with a stride-2
    /// block. Throws ArgumentError for empty or mismatched stage lists and zero sizes.
    template <Backend B>
    ResNet<B> init(const ember::Device<B>& device = {}) const {
        EMBER_CHECK(!widths.empty() && widths.size() == blocks.size(), Argument,
                    "ResNetConfig::init: widths (", widths.size(), " stages) and blocks (",
                    blocks.size(), " stages) must be non-empty and of one length");
        EMBER_CHECK(in_channels > 0 && num_classes > 0, Argument,
                    "ResNetConfig::init: in_channels and num_classes must be positive, got ",
                    in_channels, " and ", num_classes);
        for (std::size_t s = 0; s < widths.size(); ++s)
            EMBER_CHECK(widths[s] > 0 && blocks[s] > 0, Argument, "ResNetConfig::init: stage ", s,
                        " has width ", widths[s], " and ", blocks[s], " blocks; both must be > 0");
        auto bn = [&](std::size_t c) { return nn::BatchNormConfig{c}.init<B>(device); };
        ResNet<B> m{detail::conv(in_channels, widths[0], 3, 1).template init<B>(device),
                    bn(widths[0]),
                    {},
                    nn::AdaptiveAvgPool2dConfig{{1, 1}}.init(),
                    nn::LinearConfig{widths.back(), num_classes}.init<B>(device)};
        std::size_t in = widths[0];
        for (std::size_t s = 0; s < widths.size(); ++s) {
            for (std::size_t b = 0; b < blocks[s]; ++b) {
                const std::size_t out = widths[s];
                const std::size_t stride = (s > 0 && b == 0) ? 2 : 1;
                BasicBlock<B> block{detail::conv(in, out, 3, stride).template init<B>(device),
                                    bn(out),
                                    detail::conv(out, out, 3, 1).template init<B>(device),
                                    bn(out),
                                    std::nullopt,
                                    std::nullopt};
                if (stride != 1 || in != out) {
                    block.downsample_conv =
                        detail::conv(in, out, 1, stride).template init<B>(device);
                    block.downsample_bn = bn(out);
                }
                m.blocks.push_back(std::move(block));
                in = out;
            }
        }
        return m;
    }
};

}  // namespace resnet
