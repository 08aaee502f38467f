#pragma once
// What `mnist train` runs, shared by main.cpp (every backend, through ember::Dispatch) and
// train_cuda_stack.cpp (the concrete CUDA stack, for CUDA graphs and NCCL): the run's config,
// the parsed command line, and a model's part of the training (train_model). What does not
// depend on the model (train_with: the loaders, the Learner's options, the report) is declared
// here and defined in train_with.hpp, which commands.cpp compiles for Dispatch: main.cpp, the
// models and the Learner, parses no data loader, dataset or renderer.
#include <ember/optim/adam.hpp>
#include <ember/record.hpp>
#include <ember/train/learner.hpp>

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "data.hpp"
#include "model.hpp"
#include "options.hpp"

namespace ember::data {
template <class Batch>
class DataLoader;
}  // namespace ember::data

namespace mnist {

namespace fs = std::filesystem;
namespace train = ember::train;

// The class names of Fashion-MNIST, by label.
constexpr const char* kClasses[10] = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                      "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};

using Recorder = ember::record::NamedMpkFileRecorder<ember::record::FullPrecisionSettings>;
using CheckpointRecorder = ember::record::NamedMpkGzFileRecorder<>;

/// What one model's run of the Learner leaves for the report (train_model's callback).
struct Fitted {
    std::optional<int> interrupted;  ///< the exit status when Ctrl-C stopped the run
    double accuracy = 0;             ///< the last epoch's test accuracy (%)
};

/// The Learner's options for a run on backend B, the model's types aside.
template <ember::AutodiffBackend B>
using Builder = train::LearnerBuilder<train::ClassificationOutput<B>,
                                      train::ClassificationOutput<typename B::InnerBackend>>;

/// The loaders a model's part is given on backend B: type-erased on Dispatch (the Learner of a
/// Dispatch model trains on them as they are, so main.cpp compiles none of the loader's code),
/// the data loaders themselves on the concrete stacks.
template <ember::Backend B>
using LoaderFor =
    std::conditional_t<ember::module::detail::CompiledWalks<B>, ember::train::ErasedLoader<B>,
                       ember::data::DataLoader<MnistBatch<B>>>;

/// A model's part of `mnist train`: builds the Learner from the configured options, fits it
/// on the loaders, saves the trained model.
template <ember::AutodiffBackend B>
using FitModel =
    std::function<Fitted(const Builder<B>&, LoaderFor<B>&, LoaderFor<typename B::InnerBackend>&)>;

/// Writes the trained model's record (of its validation model) to the artifact directory.
void save_model(const Options& o, const ember::record::Value& record);
/// The last epoch's validation accuracy in a fit's `history`.
double valid_accuracy(const train::detail::MetricHistory& history);

/// `mnist train` whatever the model (train_with.hpp).
template <ember::AutodiffBackend B>
int train_with(const Options& o, const std::vector<ember::Device<B>>& devices,
               const ember::Device<typename B::InnerBackend>& valid_device,
               const std::function<void(Builder<B>&)>& configure, const FitModel<B>& fit);

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
            const Model trained = learner.fit(train_loader, valid_loader);
            if (learner.interrupter().should_stop())
                return {learner.interrupter().exit_status(), 0};
            save_model(o, trained.valid().into_record());
            return {std::nullopt, valid_accuracy(learner.history())};
        });
}

}  // namespace mnist
