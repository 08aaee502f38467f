#pragma once
// What the two import examples share: Fashion-MNIST test images as a batch in the
// normalisation their PyTorch model was trained with, and the check of ember's predictions
// against PyTorch's (expected.bin, written by onnx-inference/train_export.py).
#include <ember/backend/cpu.hpp>
#include <ember/data/vision.hpp>
#include <ember/ember.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "mnist/pixels.hpp"

namespace import_example {

inline constexpr const char* kClasses[10] = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                             "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};

/// Images [first, first + n) of `test` as a normalised batch [n, 1, 28, 28].
inline ember::Tensor<ember::Cpu, 4> batch(const ember::data::MnistDataset& test, std::size_t first,
                                          std::size_t n) {
    std::vector<float> x(n * 784);
    for (std::size_t i = 0; i < n; ++i) {
        const std::uint8_t* p = test.pixels(first + i);
        for (std::size_t k = 0; k < 784; ++k) x[i * 784 + k] = mnist::normalise_pixel(float(p[k]));
    }
    return ember::Tensor<ember::Cpu, 4>::from_data(ember::TensorData(std::move(x), {n, 1, 28, 28}));
}

/// Classifies the 10,000 test images with `scores` (a batch [n, 1, 28, 28] → [n, 10]), prints
/// the accuracy, the agreement with PyTorch's predictions in `expected` and the time, and
/// returns the exit status: 0 when at least 99.9% of the predictions equal PyTorch's.
template <class F>
int evaluate(F&& scores, const std::filesystem::path& expected) {
    const auto test = ember::data::MnistDataset::test();
    std::ifstream in(expected, std::ios::binary);
    const std::vector<char> want{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    if (want.size() != test.len()) {
        std::fprintf(stderr, "%s holds %zu predictions for %zu test images\n", expected.c_str(),
                     want.size(), test.len());
        return 1;
    }
    std::size_t correct = 0, agree = 0;
    const auto start = std::chrono::steady_clock::now();
    for (std::size_t first = 0; first < test.len(); first += 500) {
        const std::size_t n = std::min<std::size_t>(500, test.len() - first);
        const auto predicted =
            scores(batch(test, first, n)).argmax(1).to_data().template to_vec<std::int64_t>();
        for (std::size_t i = 0; i < n; ++i) {
            correct += predicted[i] == test.label(first + i);
            agree += predicted[i] == want[first + i];
            if (first == 0 && i < 5)
                std::printf("image %zu: %-11s (label %s)\n", i, kClasses[predicted[i]],
                            kClasses[test.label(i)]);
        }
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const std::size_t n = test.len();
    if (n == 0) {  // an accuracy over no images is undefined: no "nan %"
        std::printf("the test set holds no images: there is no accuracy to report\n");
        return 1;
    }
    std::printf("test accuracy %.2f%%; %zu of %zu predictions equal PyTorch's; %.2f s\n",
                100.0 * double(correct) / double(n), agree, n, s);
    return agree * 1000 >= n * 999 ? 0 : 1;
}

}  // namespace import_example
