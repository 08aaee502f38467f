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

/// Trains `Model` on `devices` (one, or the replicas of data-parallel training: autodiff
/// devices), validating on `valid_device`; `configure` may add to the Learner's options (NCCL).
/// Returns the exit status (130 when Ctrl-C stopped the run).
template <typename Model, ember::AutodiffBackend B>
int train_model(const Options& o, const std::vector<ember::Device<B>>& devices,
                const ember::Device<typename B::InnerBackend>& valid_device,
                const std::function<void(
                    train::LearnerBuilder<train::ClassificationOutput<B>,
                                          train::ClassificationOutput<typename B::InnerBackend>>&)>&
                    configure = {}) {
    using Inner = typename B::InnerBackend;
    const TrainingConfig& c = o.config;
    // Locked before the config is written: a second run in this directory stops here, before
    // it could mix its config with this run's checkpoints. The Learner shares the lock.
    const train::ArtifactLock lock(o.artifact_dir);
    c.save(o.artifact_dir / "config.json");
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

    using TrainItem = train::ClassificationOutput<B>;
    using ValidItem = train::ClassificationOutput<Inner>;
    train::LearnerBuilder<TrainItem, ValidItem> builder(o.artifact_dir);
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

    auto learner =
        builder.build(Model::init(), c.optimizer.template init<Model>(), c.learning_rate);
    const auto start = std::chrono::steady_clock::now();
    Model trained = learner.fit(train_loader, valid_loader);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

    if (learner.interrupter().should_stop()) {
        std::cout << "interrupted: run `mnist train --resume` with the same options to go on\n";
        return learner.interrupter().exit_status();
    }
    trained.valid().save_file(o.artifact_dir / "model", Recorder{});
    const auto& acc = learner.history().at(train::Split::Valid).at("Accuracy");
    std::cout << std::fixed << std::setprecision(2) << "trained " << c.model << " for "
              << c.num_epochs << " epochs in " << seconds << " s; test accuracy " << acc.back()
              << " %; model saved to " << (o.artifact_dir / "model.mpk").string() << '\n';
    return 0;
}

}  // namespace mnist
