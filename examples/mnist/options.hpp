#pragma once
// What `mnist` was run with: the training run's config and the parsed command line. Apart from
// parse() and the config's file (options.cpp, the one file that compiles CLI11 and the config's
// JSON), so that main.cpp, the model and Learner file, does not parse and instantiate them.
#include <ember/optim/adam.hpp>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace mnist {

namespace fs = std::filesystem;

/// What `train` was run with; saved beside the model so that `infer` rebuilds the same model.
struct TrainingConfig {
    std::string model = "cnn";    ///< "cnn" (the guide's), "mlp" or "tiny" (for firmware)
    std::size_t num_epochs = 10;  ///< epochs to train
    std::size_t batch_size = 64;  ///< items per batch
    std::size_t num_workers = 2;  ///< data loader threads
    std::uint64_t seed = 42;      ///< the run's seed (initialisation, shuffling, dropout)
    double learning_rate = 1e-4;  ///< Adam's learning rate
    ember::optim::AdamConfig optimizer = ember::optim::AdamConfig{}.with_epsilon(1e-8);
    EMBER_CONFIG(TrainingConfig, model, num_epochs, batch_size, num_workers, seed, learning_rate,
                 optimizer)
};

/// The parsed command line.
struct Options {
    std::string command;
    TrainingConfig config;
    std::string backend = "cpu";
    fs::path artifact_dir = "artifacts/mnist";
    std::optional<fs::path> data_dir;
    fs::path out_dir = "artifacts/firmware";
    std::optional<std::size_t> threads;
    std::vector<std::size_t> devices;  // --devices: GPU indices, or {N} replicas on the CPU
    bool plain = false;
    bool resume = false;
    bool capture = false;  // --capture: training and validation steps replayed as CUDA graphs
    std::size_t count = 10;
};

/// Parses and checks the command line (options.cpp); --help, --version and a bad command line
/// exit (status 0 or 2, examples/cli.hpp's rule).
Options parse(int argc, char** argv);

/// The run's config saved in `file` (JSON; options.cpp, so that main.cpp does not compile the
/// config's JSON reader and writer).
TrainingConfig load_config(const fs::path& file);
/// Saves `config` to `file` (JSON).
void save_config(const TrainingConfig& config, const fs::path& file);

}  // namespace mnist
