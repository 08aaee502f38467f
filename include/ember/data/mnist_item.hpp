#pragma once
// One MNIST image and its label (MnistItem) with the image's size, apart from the dataset
// (<ember/data/vision.hpp>, which includes this header): a model's batcher that turns items into
// tensors needs the item, not the loader, and this header parses no <filesystem> or <variant>.
#include <array>
#include <cstddef>
#include <cstdint>

namespace ember::data {

/// Width of an MNIST image, in pixels.
inline constexpr std::size_t MNIST_WIDTH = 28;
/// Height of an MNIST image, in pixels.
inline constexpr std::size_t MNIST_HEIGHT = 28;
/// Pixels in an MNIST image.
inline constexpr std::size_t MNIST_PIXELS = MNIST_WIDTH * MNIST_HEIGHT;

/// One MNIST image and its label, as Burn's MnistItem.
struct MnistItem {
    /// The pixels row by row (index y * 28 + x), as raw values 0..255 (not normalised, as Burn).
    std::array<float, MNIST_PIXELS> image{};
    /// The class, 0..9 (for Fashion-MNIST: 0 T-shirt/top ... 9 ankle boot).
    std::uint8_t label = 0;
};

}  // namespace ember::data
