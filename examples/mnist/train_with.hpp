#pragma once
// What `mnist train` does whatever the model (train.hpp declares it): the loaders, the
// Learner's options, the report. Compiled by commands.cpp (Dispatch) and train_cuda_stack.cpp.
#include <ember/data/dataloader.hpp>
#include <ember/data/vision.hpp>
#include <ember/train/plain_renderer.hpp>

#include <chrono>
#include <iomanip>
#include <iostream>

#include "train.hpp"

namespace mnist {

/// The training or the test split, from --data or the default place.
inline ember::data::MnistDataset load_split(const Options& o, bool training) {
    if (o.data_dir)
        return training ? ember::data::MnistDataset::train(*o.data_dir)
                        : ember::data::MnistDataset::test(*o.data_dir);
    return training ? ember::data::MnistDataset::train() : ember::data::MnistDataset::test();
}

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
    const Fitted fitted = [&] {
        if constexpr (std::is_same_v<LoaderFor<B>, ember::train::ErasedLoader<B>>) {
            auto train = ember::train::ErasedLoader<B>::template of<MnistBatch<B>>(train_loader);
            auto valid =
                ember::train::ErasedLoader<Inner>::template of<MnistBatch<Inner>>(valid_loader);
            return fit(builder, train, valid);
        } else {
            return fit(builder, train_loader, valid_loader);
        }
    }();
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

}  // namespace mnist
