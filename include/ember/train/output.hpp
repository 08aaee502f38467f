#pragma once
// What a model's step returns (Burn's TrainOutput, ClassificationOutput, RegressionOutput) and
// the step concepts the Learner calls: the training model's `step(batch)` runs forward and
// backward and returns the gradients with the output; the validation model (`model.valid()`,
// the same module off autodiff) returns the output only.
#include <concepts>
#include <utility>

#include "../optim/gradients_params.hpp"
#include "metrics.hpp"

namespace ember::train {

/// A training step's result: the gradients of its parameters and the output the metrics read.
template <typename Item>
struct TrainOutput {
    optim::GradientsParams grads;  ///< gradients keyed by parameter id
    Item item;                     ///< what the metrics read

    /// From gradients already keyed by parameter.
    TrainOutput(optim::GradientsParams grads, Item item)
        : grads(std::move(grads)), item(std::move(item)) {}
    /// Takes `model`'s gradients out of `grads` (the result of `loss.backward()`), as Burn's
    /// `TrainOutput::new(module, grads, item)`.
    template <module::Module M>
    TrainOutput(const M& model, Gradients&& grads, Item item)
        : grads(optim::GradientsParams::from_grads(std::move(grads), model)),
          item(std::move(item)) {}
};

/// A training model: `step(batch)` returns `TrainOutput<Item>`.
template <typename M, typename Batch, typename Item>
concept TrainStep = requires(const M& model, const Batch& batch) {
    { model.step(batch) } -> std::same_as<TrainOutput<Item>>;
};

/// A validation model: `step(batch)` returns `Item`.
template <typename M, typename Batch, typename Item>
concept ValidStep = requires(const M& model, const Batch& batch) {
    { model.step(batch) } -> std::same_as<Item>;
};

/// The output of a classifier: loss, class scores [N, C] and targets [N]. Feeds LossMetric,
/// AccuracyMetric and TopKAccuracyMetric.
template <Backend B>
struct ClassificationOutput {
    Tensor<B, 1> loss;          ///< the batch's loss
    Tensor<B, 2> output;        ///< scores per class
    Tensor<B, 1, Int> targets;  ///< class ids
};

/// The output of a regression: loss, predictions [N, D] and targets [N, D]. Feeds LossMetric.
template <Backend B>
struct RegressionOutput {
    Tensor<B, 1> loss;     ///< the batch's loss
    Tensor<B, 2> output;   ///< predictions
    Tensor<B, 2> targets;  ///< expected values
};

/// ClassificationOutput → AccuracyMetric.
template <Backend B>
struct Adaptor<ClassificationOutput<B>, AccuracyInput<B>> {
    /// Scores and targets.
    static AccuracyInput<B> adapt(const ClassificationOutput<B>& o) {
        return {o.output, o.targets};
    }
};
/// ClassificationOutput → TopKAccuracyMetric.
template <Backend B>
struct Adaptor<ClassificationOutput<B>, TopKAccuracyInput<B>> {
    /// Scores and targets.
    static TopKAccuracyInput<B> adapt(const ClassificationOutput<B>& o) {
        return {o.output, o.targets};
    }
};
/// ClassificationOutput → LossMetric.
template <Backend B>
struct Adaptor<ClassificationOutput<B>, LossInput<B>> {
    /// The loss.
    static LossInput<B> adapt(const ClassificationOutput<B>& o) { return {o.loss}; }
};
/// RegressionOutput → LossMetric.
template <Backend B>
struct Adaptor<RegressionOutput<B>, LossInput<B>> {
    /// The loss.
    static LossInput<B> adapt(const RegressionOutput<B>& o) { return {o.loss}; }
};

}  // namespace ember::train
