#pragma once
// The inference path of the web classifier: the guide's CNN (examples/mnist/common.hpp) loaded
// from the Bin record that `mnist export` writes, classifying one image at a time. The page runs
// it compiled to WebAssembly (wasm_main.cpp); native_main.cpp runs the very same code natively,
// so that both builds can be compared image by image and timed side by side.
#include <ember/ember.hpp>
#include <ember/record/recorder.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "../mnist/common.hpp"

namespace web {

inline constexpr std::size_t kPixels = 28 * 28;  ///< pixels of one image
inline constexpr std::size_t kClasses = 10;      ///< Fashion-MNIST's clothing classes

/// The guide's CNN on the CPU backend, ready to classify images.
class Classifier {
  public:
    using B = ember::Cpu;

    /// The model whose weights `record` holds (the bytes of a Bin record, `model.bin`).
    explicit Classifier(std::span<const std::byte> record)
        : model_(mnist::Cnn<B>::init().load_record(ember::record::BinBytesRecorder<>{}.load(record))) {}

    /// The 10 class probabilities of one image: raw pixels 0..255, row-major, a light object on
    /// a dark background as in Fashion-MNIST.
    std::array<float, kClasses> classify(std::span<const std::uint8_t, kPixels> pixels) const {
        std::vector<float> x(kPixels);
        for (std::size_t k = 0; k < kPixels; ++k) x[k] = mnist::normalise_pixel(float(pixels[k]));
        auto images = ember::Tensor<B, 3>::from_data(ember::TensorData(std::move(x), {1, 28, 28}));
        const auto probs =
            ember::activation::softmax(model_.forward(std::move(images)), 1).to_data().to_vec<float>();
        std::array<float, kClasses> out{};
        for (std::size_t c = 0; c < kClasses; ++c) out[c] = probs[c];
        return out;
    }

  private:
    mnist::Cnn<B> model_;
};

/// The most probable class (the first of equals, as argmax).
inline std::size_t argmax(const std::array<float, kClasses>& probs) {
    std::size_t best = 0;
    for (std::size_t c = 1; c < kClasses; ++c)
        if (probs[c] > probs[best]) best = c;
    return best;
}

}  // namespace web
