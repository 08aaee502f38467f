#pragma once
// What `mnist train`, `infer` and `export` do on ember::Dispatch whatever the model, compiled
// once in commands.cpp: main.cpp (the models and the Learner) calls them with the model's part
// as a function, and parses none of their headers (the data loader, the datasets, file streams).
#include <ember/dispatch/tensor.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "data.hpp"
#include "options.hpp"

namespace mnist {

// A model's class scores [N, 10] for images [N, 28, 28].
using Forward = std::function<ember::Tensor<ember::Dispatch, 2>(ember::Tensor<ember::Dispatch, 3>)>;

/// What examples/firmware embeds besides the model (export_model writes it): the first
/// --count test images (raw pixels), their labels, and the classes `forward` (the model loaded
/// from the Bin file itself, on the CPU) predicts for them, which the firmware must reproduce.
void export_test_images(const Options& o, const Forward& forward);

/// `mnist infer` with `forward` (the loaded model on `device`): the accuracy on the test set,
/// and the first --count predictions.
void infer_test_set(const Options& o, const Forward& forward, const ember::DispatchDevice& device);

/// What each command does with one model type (main.cpp's commands_of<Model>): train it on
/// `devices` (validating on `valid_device`; returns the exit status), infer with its saved
/// state, export it for the firmware.
struct ModelCommands {
    int (*train)(const Options&, const std::vector<ember::DispatchDevice>&,
                 const ember::DispatchDevice&);
    void (*infer)(const Options&);
    void (*export_model)(const Options&);
};

/// `mnist`: parses the command line and runs its command with the commands of the model the
/// run's config names (`commands(name)`); an ember::Error is reported on stderr (exit status 1).
int run(int argc, char** argv, ModelCommands (*commands)(const std::string& model));

}  // namespace mnist
