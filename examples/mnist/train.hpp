#pragma once
// What `mnist train` runs, shared by main.cpp (every backend, through ember::Dispatch) and
// train_cuda_stack.cpp (the concrete CUDA stack, for CUDA graphs and NCCL): the run's config,
// the parsed command line, and the training function.
#include <ember/data/dataloader.hpp>
#include <ember/data/vision.hpp>
#include <ember/optim/adam.hpp>
#include <ember/record.hpp>
#include <ember/train/learner.hpp>
#include <ember/train/plain_renderer.hpp>

#include <chrono>
#include <filesystem>
#include <functional>
#include <iomanip>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "data.hpp"
#include "model.hpp"
#include "options.hpp"

namespace mnist {

namespace fs = std::filesystem;
namespace train = ember::train;

// The class names of Fashion-MNIST, by label.
constexpr const char* kClasses[10] = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                      "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};

using Recorder = ember::record::NamedMpkFileRecorder<ember::record::FullPrecisionSettings>;
using CheckpointRecorder = ember::record::NamedMpkGzFileRecorder<>;

/// The training or the test split, from --data or the default place.
inline ember::data::MnistDataset load_split(const Options& o, bool training) {
    if (o.data_dir)
        return training ? ember::data::MnistDataset::train(*o.data_dir)
                        : ember::data::MnistDataset::test(*o.data_dir);
    return training ? ember::data::MnistDataset::train() : ember::data::MnistDataset::test();
}

/// What one model's run of the Learner leaves for the report (train_model's callback).
struct Fitted {
    std::optional<int> interrupted;  ///< the exit status when Ctrl-C stopped the run
    double accuracy = 0;             ///< the last epoch's test accuracy (%)
};

/// The Learner's options for a run on backend B, the model's types aside.
template <ember::AutodiffBackend B>
using Builder = train::LearnerBuilder<train::ClassificationOutput<B>,
                                      train::ClassificationOutput<typename B::InnerBackend>>;

/// A model's part of `mnist train`: builds the Learner from the configured options, fits it
/// on the loaders, saves the trained model.
template <ember::AutodiffBackend B>
using FitModel =
    std::function<Fitted(const Builder<B>&, ember::data::DataLoader<MnistBatch<B>>&,
                         ember::data::DataLoader<MnistBatch<typename B::InnerBackend>>&)>;

/// `mnist train` whatever the model (compiled once a backend, not once a model): locks the
/// artifact directory, saves the config, makes the loaders and the Learner's options (metrics,
/// checkpoints, resuming; `configure` may add to them: NCCL), runs `fit` on `devices` (one, or
/// the replicas of data-parallel training: autodiff devices), validating on `valid_device`, and
/// reports. Returns the exit status (130 when Ctrl-C stopped the run).
template <ember::AutodiffBackend B>
int train_with(const Options& o, const std::vector<ember::Device<B>>& devices,
               const ember::Device<typename B::InnerBackend>& valid_device,
               const std::function<void(Builder<B>&)>& configure, const FitModel<B>& fit) {
    using Inner = typename B::InnerBackend;
    const TrainingConfig& c = o.config;
    // Locked before the config is written: a second run in this directory stops here, before
    // it could mix its config with this run's checkpoints. The Learner shares the lock.
    const train::ArtifactLock lock(o.artifact_dir);
    save_config(c, o.artifact_dir / "config.json");
    B::seed(c.seed);

    auto train_loader = ember::data::DataLoaderBuilder(MnistBatcher<B>{})
                            .batch_size(c.batch_size * devices.size())  // split between them
                            .set_device(devices.front())
                            .shuffle(c.seed)
                            .num_workers(c.num_workers)
                            .build(load_split(o, true));
    auto valid_loader = ember::data::DataLoaderBuilder(MnistBatcher<Inner>{})
                            .batch_size(256)
                            .set_device(valid_device)
                            .num_workers(c.num_workers)
                            .build(load_split(o, false));

    Builder<B> builder(o.artifact_dir);
    builder.metric_train_numeric(train::AccuracyMetric<B>{})
        .metric_valid_numeric(train::AccuracyMetric<Inner>{})
        .metric_train_numeric(train::LossMetric<B>{})
        .metric_valid_numeric(train::LossMetric<Inner>{})
        .metric_train_numeric(train::LearningRateMetric{})
        .metric_train_numeric(train::IterationSpeedMetric{})
        .metric_train(train::CpuUsage{})
        .metric_train(train::CpuMemory{})
        .with_file_checkpointer(CheckpointRecorder{}, 2)
        .num_epochs(c.num_epochs)
        .seed(c.seed)
        .summary();
    builder.devices(devices);
    if (configure) configure(builder);
    if (devices.size() > 1)
        std::cout << "data-parallel training on " << devices.size() << " replicas, " << c.batch_size
                  << " images each per step\n";
    if (o.capture) builder.capture_steps(true);
    if (o.plain) builder.renderer(std::make_shared<train::PlainRenderer>());
    if (o.resume) {
        // The newest complete checkpoint: one cut short by a kill is skipped.
        if (const auto n = train::latest_checkpoint(o.artifact_dir))
            std::cout << "resuming from checkpoint " << *n << '\n';
        else
            std::cout << "no checkpoint in " << o.artifact_dir << ": starting afresh\n";
        builder.resume();
    }

    const auto start = std::chrono::steady_clock::now();
    const Fitted fitted = fit(builder, train_loader, valid_loader);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

    if (fitted.interrupted) {
        std::cout << "interrupted: run `mnist train --resume` with the same options to go on\n";
        return *fitted.interrupted;
    }
    std::cout << std::fixed << std::setprecision(2) << "trained " << c.model << " for "
              << c.num_epochs << " epochs in " << seconds << " s; test accuracy " << fitted.accuracy
              << " %; model saved to " << (o.artifact_dir / "model.mpk").string() << '\n';
    return 0;
}

/// Trains `Model` (train_with, whose options and loaders it is given): only the Learner's
/// build, fit and the model's save are compiled once a model.
template <typename Model, ember::AutodiffBackend B>
int train_model(const Options& o, const std::vector<ember::Device<B>>& devices,
                const ember::Device<typename B::InnerBackend>& valid_device,
                const std::function<void(Builder<B>&)>& configure = {}) {
    return train_with<B>(
        o, devices, valid_device, configure,
        [&o](const Builder<B>& builder, auto& train_loader, auto& valid_loader) -> Fitted {
            const TrainingConfig& c = o.config;
            auto learner =
                builder.build(Model::init(), c.optimizer.template init<Model>(), c.learning_rate);
            Model trained = learner.fit(train_loader, valid_loader);
            if (learner.interrupter().should_stop())
                return {learner.interrupter().exit_status(), 0};
            trained.valid().save_file(o.artifact_dir / "model", Recorder{});
            return {std::nullopt, learner.history().at(train::Split::Valid).at("Accuracy").back()};
        });
}

}  // namespace mnist
