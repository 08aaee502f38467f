#pragma once
// The Learner (Burn's LearnerBuilder and Learner): a training loop with metrics, loggers, a
// renderer, gradient accumulation, checkpoints, resuming, early stopping and graceful
// interruption. Build it with the types of the training and validation step outputs, which the
// metrics adapt from:
//
//   using B = ember::Autodiff<ember::Cpu>;
//   auto learner = ember::train::LearnerBuilder<ClassificationOutput<B>,
//                                               ClassificationOutput<ember::Cpu>>("runs/mnist")
//                      .metric_train_numeric(LossMetric<B>{})
//                      .metric_valid_numeric(AccuracyMetric<ember::Cpu>{})
//                      .with_file_checkpointer(record::NamedMpkGzFileRecorder<>{}, 2)
//                      .num_epochs(10)
//                      .build(model, optim, 1e-3);
//   auto trained = learner.fit(train_loader, valid_loader);
//
// The run is a pure function of its seed: epoch E seeds the backend with epoch_seed(seed, E) and
// gives its loaders set_epoch(E); checkpoints are written after each completed epoch, and a run
// resumed from checkpoint N replays epochs N+1.. exactly as an uninterrupted run would.
#include <any>
#include <cmath>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../collective/collective.hpp"
#include "../optim/accumulator.hpp"
#include "../optim/lr_scheduler.hpp"
#include "../record/recorder.hpp"
#include "checkpoint.hpp"
#include "dashboard.hpp"
#include "detail/learner_core.hpp"
#include "detail/learner_support.hpp"
#include "logger.hpp"
#include "metrics.hpp"
#include "output.hpp"
#include "report.hpp"
#if defined(EMBER_CUDA)
#include "../stacks/cuda_graph.hpp"
#endif
#if defined(EMBER_VULKAN)
#include "../stacks/vulkan_graph.hpp"
#endif

namespace ember::train {

/// What the Learner needs of a data loader: `iter()` (a range of batches), `num_items()` and
/// `num_batches()`. Optional: `set_epoch(std::size_t)` (called before each epoch, so a shuffled
/// order depends on the epoch only) and `batch_size()` (for exact item counts in the progress).
template <typename L>
concept LearnerLoader = requires(L& l) {
    l.iter();
    { l.num_items() } -> std::convertible_to<std::size_t>;
    { l.num_batches() } -> std::convertible_to<std::size_t>;
};

/// What the Learner needs of an optimizer for model type `M` (OptimizerAdaptor provides it).
template <typename O, typename M>
concept LearnerOptimizer = requires(O& o, const O& co, M m, optim::GradientsParams g,
                                    const record::Value& r) {
    { o.step(1.0, std::move(m), std::move(g)) } -> std::same_as<M>;
    { co.to_record() } -> std::same_as<record::Value>;
    { co.load_record(r) } -> std::same_as<O>;
};

namespace detail {

// One registered metric, its input type erased behind the step output type.
template <typename Item>
struct MetricSlot : MetricSlotBase {
    virtual MetricEntry update(const Item& item, const MetricMetadata& md) = 0;
    MetricEntry update_erased(const void* item, const MetricMetadata& md) final {
        return update(*static_cast<const Item*>(item), md);
    }
};

template <typename Item, typename M>
struct MetricSlotOf final : MetricSlot<Item> {
    explicit MetricSlotOf(M m) : metric(std::move(m)) {}
    MetricEntry update(const Item& item, const MetricMetadata& md) override {
        return metric.update(Adaptor<Item, typename M::Input>::adapt(item), md);
    }
    void clear() override { metric.clear(); }
    std::string name() const override { return metric.name(); }
    M metric;
};

/// Adds `metric`'s slot to `slots`: numeric where the metric has values, given to the renderer
/// where `plotted`. A name already there is an ArgumentError naming `owner` (and `scope`).
template <typename Item, typename M>
void add_metric_slot(std::vector<std::shared_ptr<MetricSlot<Item>>>& slots, M metric, bool plotted,
                     const char* owner, const char* scope) {
    static_assert(AdaptsTo<Item, typename M::Input>,
                  "this metric's Input has no Adaptor from the step output type: specialise "
                  "ember::train::Adaptor<Item, Input>");
    auto slot = std::make_shared<MetricSlotOf<Item, M>>(std::move(metric));
    slot->numeric = Numeric<M>;
    slot->plotted = plotted;
    const std::string name = slot->name();
    for (const auto& s : slots)
        EMBER_CHECK(s->name() != name, Argument, owner, ": metric '", name, "' is registered twice",
                    scope);
    slots.push_back(std::move(slot));
}

template <typename T>
decltype(auto) deref(T& x) {
    if constexpr (requires {
                      *x;
                      x.get();
                  })
        return *x;  // shared_ptr, unique_ptr
    else
        return (x);
}

/// Whether steps on backend B can be captured and replayed (LearnerBuilder::capture_steps): as
/// CUDA graphs, or as recorded Vulkan command buffers.
template <typename B>
constexpr bool capturable_backend() {
    bool on = false;
#if defined(EMBER_CUDA)
    on = on || ember::cuda::detail::CudaStack<B>;
#endif
#if defined(EMBER_VULKAN)
    on = on || ember::vulkan::detail::VulkanStack<B>;
#endif
    return on;
}

}  // namespace detail

/// Everything a Learner was configured with (shared by the builder and the Learner): the
/// settings, and the metrics of the training and validation step outputs.
template <typename TrainItem, typename ValidItem>
struct LearnerOptions : LearnerSettings {
    std::vector<std::shared_ptr<detail::MetricSlot<TrainItem>>> train_metrics;  ///< in order
    std::vector<std::shared_ptr<detail::MetricSlot<ValidItem>>> valid_metrics;  ///< in order
};

template <typename M, typename O, typename S, typename TrainItem, typename ValidItem>
class Learner;

/// Configures a Learner (Burn's LearnerBuilder). `TrainItem` is what the training model's
/// `step` returns in its TrainOutput, `ValidItem` what the validation model's `step` returns.
template <typename TrainItem, typename ValidItem>
class LearnerBuilder {
  public:
    /// Artifacts (checkpoints, metric logs, experiment.log) go under `artifact_dir`.
    explicit LearnerBuilder(std::filesystem::path artifact_dir) {
        EMBER_CHECK(!artifact_dir.empty(), Argument,
                    "LearnerBuilder: the artifact directory is empty");
        o_.artifact_dir = std::move(artifact_dir);
    }

    /// Registers a training metric (shown as text).
    template <Metric Me>
    LearnerBuilder& metric_train(Me metric) {
        add(o_.train_metrics, std::move(metric), false);
        return *this;
    }
    /// Registers a validation metric (shown as text).
    template <Metric Me>
    LearnerBuilder& metric_valid(Me metric) {
        add(o_.valid_metrics, std::move(metric), false);
        return *this;
    }
    /// Registers a numeric training metric whose values are plotted.
    template <Numeric Me>
    LearnerBuilder& metric_train_numeric(Me metric) {
        add(o_.train_metrics, std::move(metric), true);
        return *this;
    }
    /// Registers a numeric validation metric whose values are plotted.
    template <Numeric Me>
    LearnerBuilder& metric_valid_numeric(Me metric) {
        add(o_.valid_metrics, std::move(metric), true);
        return *this;
    }
    /// Replaces the metric loggers (default: FileMetricLogger under train/ and valid/).
    LearnerBuilder& with_metric_logger(std::shared_ptr<MetricLogger> train,
                                       std::shared_ptr<MetricLogger> valid) {
        EMBER_CHECK(train && valid, Argument, "LearnerBuilder::with_metric_logger: null logger");
        o_.train_logger = std::move(train);
        o_.valid_logger = std::move(valid);
        return *this;
    }
    /// Replaces the renderer (default: make_default_renderer: the dashboard when stdout is a
    /// terminal, PlainRenderer otherwise).
    LearnerBuilder& renderer(std::shared_ptr<MetricsRenderer> renderer) {
        EMBER_CHECK(renderer != nullptr, Argument, "LearnerBuilder::renderer: null renderer");
        o_.renderer = std::move(renderer);
        return *this;
    }
    /// Sums the gradients of `n` iterations before each optimizer step (n ≥ 1; 1 = off).
    LearnerBuilder& grads_accumulation(std::size_t n) {
        EMBER_CHECK(n >= 1, Argument, "LearnerBuilder::grads_accumulation: n must be >= 1");
        o_.grads_accumulation = n;
        return *this;
    }
    /// Saves model, optimizer and scheduler after every epoch under checkpoint/ with
    /// `recorder`, keeping the last `keep` (≥ 1) epochs' files.
    template <record::FileRecorder R>
    LearnerBuilder& with_file_checkpointer(R recorder, std::size_t keep = 2) {
        EMBER_CHECK(keep >= 1, Argument,
                    "LearnerBuilder::with_file_checkpointer: keep must be >= 1, got ", keep);
        o_.checkpointer = detail::Checkpointer{
            [recorder](const record::Value& v, const std::filesystem::path& p) {
                recorder.record(v, p);
            },
            [recorder](const std::filesystem::path& p) { return recorder.load(p); },
            [recorder](const std::filesystem::path& p) { return recorder.file_path(p); }, keep};
        return *this;
    }
    /// The number of epochs (≥ 1; default 1).
    LearnerBuilder& num_epochs(std::size_t n) {
        EMBER_CHECK(n >= 1, Argument, "LearnerBuilder::num_epochs: n must be >= 1");
        o_.num_epochs = n;
        return *this;
    }
    /// The devices to train on. One device: the model is forked to it. Several: data-parallel
    /// training, a replica of the model per device, each on its own thread, each batch split
    /// into one shard per replica (the batch type must be a ShardableBatch), gradients averaged
    /// over the replicas before every optimizer step (docs/multi-device.md). A device may be
    /// listed more than once (the CPU has one device: replicas on threads).
    template <typename Dev>
    LearnerBuilder& devices(std::vector<Dev> devices) {
        EMBER_CHECK(!devices.empty(), Argument, "LearnerBuilder::devices: no device given");
        o_.devices = std::move(devices);
        return *this;
    }
    /// The collective endpoints of the replicas, endpoint i for devices()[i] (default: an
    /// in-process ThreadCollective group). Their ranks place each replica's shard of the batch
    /// in a group that may span processes and hosts (NcclCollective), where every process runs
    /// the same loader and keeps the shards of its own ranks; checkpoints are written by the
    /// process that holds rank 0.
    LearnerBuilder& collectives(std::vector<std::shared_ptr<collective::Collective>> endpoints) {
        EMBER_CHECK(!endpoints.empty(), Argument, "LearnerBuilder::collectives: no endpoint given");
        for (std::size_t i = 0; i < endpoints.size(); ++i)
            EMBER_CHECK(endpoints[i] != nullptr, Argument, "LearnerBuilder::collectives: endpoint ",
                        i, " is null");
        o_.collectives = std::move(endpoints);
        return *this;
    }
    /// Data parallel: whether the replicas' gradients are all-reduced while backward still runs
    /// (on by default; collective::GradientReducer, bucket by bucket as they become final) or
    /// after step() returns. Turn it off when step() changes its gradients after backward
    /// (clipping, scaling), which the reduction during backward cannot see. With gradient
    /// accumulation the reduction always follows the last step of an update.
    LearnerBuilder& overlap_gradient_sync(bool on) {
        o_.overlap_gradient_sync = on;
        return *this;
    }
    /// Resumes from the checkpoint of epoch `epoch` (≥ 1): training continues at epoch + 1.
    /// fit() throws FormatError when that checkpoint is missing or incomplete.
    LearnerBuilder& checkpoint(std::size_t epoch) {
        EMBER_CHECK(epoch >= 1, Argument, "LearnerBuilder::checkpoint: epochs count from 1");
        o_.checkpoint = epoch;
        return *this;
    }
    /// Resumes from the newest complete checkpoint in the artifact directory when fit() starts
    /// (latest_checkpoint; a checkpoint cut short by a kill is skipped); starts afresh when
    /// there is none.
    LearnerBuilder& resume() {
        o_.resume = true;
        return *this;
    }
    /// Replaces the application logger (default: experiment.log in the artifact directory;
    /// nullptr: none).
    LearnerBuilder& with_application_logger(std::shared_ptr<ApplicationLogger> logger) {
        o_.app_logger = std::move(logger);
        o_.app_logger_set = true;
        return *this;
    }
    /// Stops when the epoch mean of numeric metric `metric` of `split` has not improved by more
    /// than `min_delta` (≥ 0) in `direction` for `patience` (≥ 1) epochs.
    LearnerBuilder& early_stopping(std::string metric, Split split, Direction direction,
                                   double min_delta, std::size_t patience) {
        EMBER_CHECK(min_delta >= 0 && std::isfinite(min_delta), Argument,
                    "LearnerBuilder::early_stopping: min_delta must be >= 0, got ", min_delta);
        EMBER_CHECK(patience >= 1, Argument,
                    "LearnerBuilder::early_stopping: patience must be >= 1");
        o_.early_stopping = {std::move(metric), split, direction, min_delta, patience};
        return *this;
    }
    /// Keeps, besides the last `keep` checkpoints, the one of the epoch whose epoch mean of
    /// numeric metric `metric` of `split` is the best in `direction` so far (Burn's
    /// MetricCheckpointingStrategy; ties keep the earlier epoch). Learner::best_checkpoint()
    /// names it. build() throws ArgumentError without a checkpointer or for a metric that is
    /// not a numeric one of that split.
    LearnerBuilder& keep_best_checkpoint(std::string metric, Split split, Direction direction) {
        o_.keep_best = {std::move(metric), split, direction};
        return *this;
    }
    /// The run's seed (default 0): with the loaders' set_epoch it fixes every random draw.
    LearnerBuilder& seed(std::uint64_t seed) {
        o_.seed = seed;
        return *this;
    }
    /// Captures the training and validation steps once and replays them (Burn-style name;
    /// ember::cuda::StepGraph or ember::vulkan::StepGraph, docs/learner.md): the first batch of
    /// a shape runs eagerly, the second is captured, the rest of that shape are replays; a batch
    /// of another shape (a short last batch) runs eagerly, and the log says so once. For models
    /// on Cuda, Fusion<Cuda>, Vulkan or Fusion<Vulkan> under Autodiff, on one device, without
    /// gradient accumulation; build() throws ArgumentError otherwise. A step that cannot be
    /// replayed runs eagerly, with the reason in the log.
    LearnerBuilder& capture_steps(bool on) {
        o_.capture_steps = on;
        return *this;
    }
    /// Runs the model's training and validation steps (step() and valid_step(): forward, loss
    /// and backward) under ember::Autocast(dtype) on the threads that run them, data-parallel
    /// replicas included: mixed precision with the model's f32 parameters, gradients and
    /// optimizer state (<ember/tensor/autocast.hpp> lists the ops it casts). The optimizer
    /// step runs outside it. Throws ArgumentError for a dtype other than BF16 or F16.
    LearnerBuilder& autocast(DType dtype = DType::BF16) {
        EMBER_CHECK(dtype == DType::BF16 || dtype == DType::F16, Argument,
                    "LearnerBuilder::autocast: the dtype must be bf16 or f16, got ",
                    dtype_name(dtype));
        o_.autocast = dtype;
        return *this;
    }
    /// Prints a summary of the metrics (best and worst epochs) at the end of fit.
    LearnerBuilder& summary() {
        o_.summary = true;
        return *this;
    }
    /// Whether to write `metrics.csv` and `report.html` (the curves of every metric) into the
    /// artifact directory at the end of every epoch (default: on; see report.hpp).
    LearnerBuilder& report(bool on) {
        o_.report = on;
        return *this;
    }
    /// The interrupter of the run: stop() ends it after the current iteration.
    Interrupter interrupter() const { return o_.interrupter; }

    /// The Learner for `model`, `optimizer` and a learning rate (a double) or an
    /// lr_scheduler. ArgumentError for options that do not fit together: resuming without a
    /// checkpointer or from beyond num_epochs, early stopping on a metric not registered as
    /// numeric for its split, devices of another backend than the model's
    /// (detail::check_learner_settings).
    template <module::Module M, typename O, typename S>
    auto build(M model, O optimizer, S scheduler) const {
        using Sched = std::conditional_t<std::is_arithmetic_v<S>, lr_scheduler::ConstantLr, S>;
        static_assert(lr_scheduler::LrScheduler<Sched>,
                      "LearnerBuilder::build: the third argument must be a learning rate or an "
                      "lr_scheduler");
        static_assert(LearnerOptimizer<O, M>,
                      "LearnerBuilder::build: the optimizer must step this model type");
        using Dev = Device<module::BackendOf<M>>;
        const auto* devs = std::any_cast<std::vector<Dev>>(&o_.devices);
        // What does not depend on the model is made by make_core, one function whatever the
        // model; the checks are compiled once, in ember_train: the model enters as facts.
        detail::LearnerCore core = make_core({detail::capturable_backend<module::BackendOf<M>>(),
                                              module::BackendOf<M>::name(), devs != nullptr,
                                              devs != nullptr ? devs->size() : 0});
        return Learner<M, O, Sched, TrainItem, ValidItem>(
            std::move(core), devs != nullptr ? model.fork(devs->front()) : std::move(model),
            std::move(optimizer), Sched(std::move(scheduler)));
    }

  private:
    template <typename Item, typename Me>
    void add(std::vector<std::shared_ptr<detail::MetricSlot<Item>>>& slots, Me metric,
             bool plotted) {
        detail::add_metric_slot<Item>(slots, std::move(metric), plotted, "LearnerBuilder",
                                      " for the same split");
    }

    // The Learner's core for a model of these facts: the options checked and completed
    // (detail::check_learner_settings, detail::complete_learner_settings). Defined out of the
    // class, so not inline: ember_dispatch compiles it for the Dispatch outputs once
    // (EMBER_DISPATCH_PART_LEARNER).
    detail::LearnerCore make_core(const detail::LearnerModelFacts& model) const;

    template <typename Item>
    static std::vector<std::shared_ptr<detail::MetricSlotBase>> erase(
        const std::vector<std::shared_ptr<detail::MetricSlot<Item>>>& slots) {
        return {slots.begin(), slots.end()};
    }

    template <typename Item>
    static std::vector<const detail::MetricSlotBase*> slot_pointers(
        const std::vector<std::shared_ptr<detail::MetricSlot<Item>>>& slots) {
        std::vector<const detail::MetricSlotBase*> out;
        for (const auto& s : slots) out.push_back(s.get());
        return out;
    }

    LearnerOptions<TrainItem, ValidItem> o_;
};

template <typename TrainItem, typename ValidItem>
detail::LearnerCore LearnerBuilder<TrainItem, ValidItem>::make_core(
    const detail::LearnerModelFacts& model) const {
    LearnerSettings o = o_;
    detail::check_learner_settings(o, slot_pointers(o_.train_metrics),
                                   slot_pointers(o_.valid_metrics), model);
    detail::complete_learner_settings(o);
    return detail::LearnerCore(std::move(o), erase(o_.train_metrics), erase(o_.valid_metrics));
}

}  // namespace ember::train

#include "detail/learner_impl.hpp"
