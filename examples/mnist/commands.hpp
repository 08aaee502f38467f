#pragma once
// What `mnist train`, `infer` and `export` do on ember::Dispatch whatever the model, compiled
// once in commands.cpp: main.cpp (the models and the Learner) calls them with the model's part
// as a function, and parses none of their headers (the data loader, the datasets, file streams).
#include <ember/dispatch/tensor.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <vector>

#include "data.hpp"
#include "options.hpp"

namespace mnist {

// A model's class scores [N, 10] for images [N, 28, 28].
using Forward = std::function<ember::Tensor<ember::Dispatch, 2>(ember::Tensor<ember::Dispatch, 3>)>;

/// The class `forward` predicts for each of `items` (compiled once, whatever the model).
std::vector<std::int64_t> predict(const Forward& forward,
                                  const std::vector<ember::data::MnistItem>& items,
                                  const ember::DispatchDevice& device);

/// A loaded model's predictions for a batch of items (what infer and export ask of the model).
using Predictor =
    std::function<std::vector<std::int64_t>(const std::vector<ember::data::MnistItem>&)>;

/// What examples/firmware embeds besides the model (export_model writes it): the first
/// --count test images (raw pixels), their labels, and the classes `predict` (the model loaded
/// from the Bin file itself) gives them, which the firmware must reproduce.
void export_test_images(const Options& o, const Predictor& predict);

/// `mnist infer` with `predict` (the loaded model on `device`): the accuracy on the test set,
/// and the first --count predictions.
void infer_test_set(const Options& o, const Predictor& predict);

/// The devices to train on: --backend with autodiff, once per replica of --devices (N copies
/// of the CPU; the GPUs by index).
std::vector<ember::DispatchDevice> training_devices(const Options& o);

/// Prints `what` as `mnist: what` on stderr (main's report of an ember::Error).
void report_error(const char* what);

}  // namespace mnist
