#pragma once
// What the IDX targets share: a labels file and an images file written where MnistDataset looks
// for them, loaded, and every item read back.
#include <ember/data/vision.hpp>

#include "fuzz.hpp"

namespace ember::fuzz {

/// Loads the training split from `dir` and reads every item, pixel and label.
inline void load_mnist(const std::filesystem::path& dir) {
    refused_or_fine([&] {
        const auto ds = data::MnistDataset::train(dir);
        std::size_t sum = 0;
        for (std::size_t i = 0; i < ds.len(); ++i) {
            const auto item = ds.get(i);
            if (!item) throw std::logic_error("fuzz: MnistDataset::get(i) empty below len()");
            sum += item->label + ds.pixels(i)[data::MNIST_PIXELS - 1] + ds.label(i);
        }
        volatile std::size_t sink = sum;
        (void)sink;
        if (ds.get(ds.len())) throw std::logic_error("fuzz: MnistDataset::get(len()) not empty");
    });
}

}  // namespace ember::fuzz
