#pragma once
// What a model's step returns (Burn's TrainOutput, ClassificationOutput, RegressionOutput) and
// the step concepts the Learner calls: the training model's `step(batch)` runs forward and
// backward and returns the gradients with the output; the validation model (`model.valid()`,
// the same module off autodiff) returns the output only, from `valid_step(batch)` where it has
// one, else from `step(batch)`. On ember::Dispatch the training and validation models are one
// type (autodiff is a property of the device), so there the two steps need the two names.
#include <concepts>
#include <span>
#include <utility>
#include <vector>

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

/// Whether `M` has a `valid_step(batch)`.
template <typename M, typename Batch>
concept HasValidStepMember = requires(const M& model, const Batch& batch) {
    model.valid_step(batch);
};
/// Whether `M` has a `step(batch)`.
template <typename M, typename Batch>
concept HasStepMember = requires(const M& model, const Batch& batch) { model.step(batch); };

/// The validation step of `model` on `batch`: `valid_step` where the model has it, else `step`.
template <typename M, typename Batch>
    requires HasValidStepMember<M, Batch> || HasStepMember<M, Batch>
decltype(auto) run_valid_step(const M& model, const Batch& batch) {
    if constexpr (HasValidStepMember<M, Batch>)
        return model.valid_step(batch);
    else
        return model.step(batch);
}

/// A validation model: `valid_step(batch)` (or, where it has none, `step(batch)`) returns
/// `Item`.
template <typename M, typename Batch, typename Item>
concept ValidStep = requires(const M& model, const Batch& batch) {
    { run_valid_step(model, batch) } -> std::same_as<Item>;
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

// ---- data-parallel training: batches split into shards, outputs merged back ----------------

/// A batch that data-parallel training can split (LearnerBuilder::devices with several devices):
/// `num_items()` and `shard(begin, end, device)`, the items [begin, end) as a batch on `device`
/// (shard_rows does it for each tensor).
template <typename Batch, typename Dev>
concept ShardableBatch = requires(const Batch& b, std::size_t i, const Dev& d) {
    { b.num_items() } -> std::convertible_to<std::size_t>;
    { b.shard(i, i, d) } -> std::convertible_to<Batch>;
};

/// Rows [begin, end) of `t` (along dim 0), on `device`: a view where no move is needed.
template <Backend B, std::size_t D, typename K>
Tensor<B, D, K> shard_rows(const Tensor<B, D, K>& t, std::size_t begin, std::size_t end,
                           const Device<B>& device) {
    EMBER_CHECK(begin <= end && end <= t.dims()[0], Index, "shard_rows: rows [", begin, ", ", end,
                ") of a tensor of shape ", t.shape().to_string());
    auto rows = t.narrow(0, begin, end - begin);
    return rows.device() == device ? rows : rows.to_device(device);
}

/// How the Learner merges the step outputs of the replicas into the one output the metrics read
/// (specialise it for your own output types). `weights[r]` is replica r's share of the batch's
/// items; the result lives on the device of items[0].
template <typename Item>
struct ItemMerge;

namespace detail {
template <Backend B, std::size_t D, typename K>
Tensor<B, D, K> detached_on(const Tensor<B, D, K>& t, const Device<B>& device) {
    auto d = t.detach();
    return d.device() == device ? d : d.to_device(device);
}
template <Backend B, std::size_t D, typename K>
Tensor<B, D, K> merge_rows(const std::vector<Tensor<B, D, K>>& parts) {
    const auto device = parts.front().device();
    std::vector<Tensor<B, D, K>> moved;
    for (const auto& p : parts) moved.push_back(detached_on(p, device));
    return moved.size() == 1 ? moved.front() : Tensor<B, D, K>::cat(moved, 0);
}
template <Backend B>
Tensor<B, 1> merge_loss(const std::vector<Tensor<B, 1>>& losses, std::span<const double> w) {
    const auto device = losses.front().device();
    Tensor<B, 1> sum = detached_on(losses.front(), device).mul_scalar(w[0]);
    for (std::size_t r = 1; r < losses.size(); ++r)
        sum = std::move(sum).add(detached_on(losses[r], device).mul_scalar(w[r]));
    return sum;
}
}  // namespace detail

/// ClassificationOutput: the loss is the weighted mean of the replicas' (a mean loss over the
/// whole batch), scores and targets are concatenated in replica order.
template <Backend B>
struct ItemMerge<ClassificationOutput<B>> {
    /// One output for the whole batch.
    static ClassificationOutput<B> merge(std::vector<ClassificationOutput<B>> items,
                                         std::span<const double> weights);
};

/// RegressionOutput: as ClassificationOutput.
template <Backend B>
struct ItemMerge<RegressionOutput<B>> {
    /// One output for the whole batch.
    static RegressionOutput<B> merge(std::vector<RegressionOutput<B>> items,
                                     std::span<const double> weights);
};

namespace detail {
/// The outputs `items` of the replicas merged: `loss` weighted by `weights`, `output` and
/// `targets` concatenated in replica order (ClassificationOutput, RegressionOutput).
template <typename Out>
Out merge_outputs_of(std::vector<Out> items, std::span<const double> weights) {
    std::vector<decltype(Out::loss)> loss;
    std::vector<decltype(Out::output)> out;
    std::vector<decltype(Out::targets)> targets;
    for (auto& i : items) {
        loss.push_back(i.loss);
        out.push_back(i.output);
        targets.push_back(i.targets);
    }
    return {merge_loss(loss, weights), merge_rows(out), merge_rows(targets)};
}
}  // namespace detail

// Out of the classes, so not inline: ember_dispatch compiles the Dispatch instances once
// (<ember/dispatch/train.hpp> declares them extern).
template <Backend B>
ClassificationOutput<B> ItemMerge<ClassificationOutput<B>>::merge(
    std::vector<ClassificationOutput<B>> items, std::span<const double> weights) {
    return detail::merge_outputs_of(std::move(items), weights);
}

template <Backend B>
RegressionOutput<B> ItemMerge<RegressionOutput<B>>::merge(std::vector<RegressionOutput<B>> items,
                                                          std::span<const double> weights) {
    return detail::merge_outputs_of(std::move(items), weights);
}

/// Whether the Learner can merge replicas' outputs of type Item.
template <typename Item>
concept MergeableItem = requires(std::vector<Item> v, std::span<const double> w) {
    { ItemMerge<Item>::merge(std::move(v), w) } -> std::convertible_to<Item>;
};

}  // namespace ember::train
