#pragma once
// The part of the Learner that does not depend on the model, the optimizer, the loaders or the
// step outputs, compiled once in ember_train (src/train/learner_core.cpp): the options, the run's
// frame (resume, epochs, checkpoints, early stopping, the summary), and each iteration's metrics,
// logs and rendering. Learner<M, ...> (learner_impl.hpp) is a thin shell over it: it steps the
// model and hands the core each step's output behind a `const void*` (the metric slots know its
// type) and the model's records, so that a file which trains several models compiles this code
// not at all, rather than once per model.
#include <any>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "../../export.hpp"
#include "../../record/value.hpp"
#include "../../tensor/dtype.hpp"
#include "../checkpoint.hpp"
#include "../logger.hpp"
#include "../metric.hpp"
#include "../renderer.hpp"
#include "learner_support.hpp"

namespace ember::collective {
class Collective;
}

namespace ember::train {

namespace detail {

/// A registered metric with its input type erased: what the Learner's core reads of a metric
/// slot (MetricSlot<Item> in learner.hpp adds the typed update).
struct MetricSlotBase {
    virtual ~MetricSlotBase() = default;
    /// Updates the metric with the step output `item` points to (the slot's Item).
    virtual MetricEntry update_erased(const void* item, const MetricMetadata& md) = 0;
    virtual void clear() = 0;
    virtual std::string name() const = 0;
    bool numeric = false;  // the metric has values (history, early stopping)
    bool plotted = false;  // the renderer gets them (metric_*_numeric)
};

// A file checkpointer with its recorder's type erased.
struct Checkpointer {
    std::function<void(const record::Value&, const std::filesystem::path&)> save;
    std::function<record::Value(const std::filesystem::path&)> load;
    std::function<std::filesystem::path(const std::filesystem::path&)> file_path;
    std::size_t keep = 2;
};

}  // namespace detail

/// The Learner's options that depend on neither the model nor the step outputs (LearnerOptions
/// adds the metrics).
struct EMBER_API LearnerSettings {
    LearnerSettings();
    LearnerSettings(const LearnerSettings&);
    LearnerSettings(LearnerSettings&&) noexcept;
    LearnerSettings& operator=(const LearnerSettings&);
    LearnerSettings& operator=(LearnerSettings&&) noexcept;
    ~LearnerSettings();

    std::filesystem::path artifact_dir;                        ///< where artifacts go
    std::shared_ptr<MetricLogger> train_logger, valid_logger;  ///< default: files
    std::shared_ptr<MetricsRenderer> renderer;                 ///< default: plain
    std::size_t grads_accumulation = 1;                        ///< steps per update
    std::optional<detail::Checkpointer> checkpointer;          ///< none by default
    std::size_t num_epochs = 1;                                ///< epochs of the run
    std::any devices;                                          ///< std::vector<Device>
    /// The collective endpoints of a data-parallel run, one per device (none: threads).
    std::vector<std::shared_ptr<collective::Collective>> collectives;
    /// Data parallel: reduce gradients during backward (collective::GradientReducer).
    bool overlap_gradient_sync = true;
    std::optional<std::size_t> checkpoint;  ///< resume from it
    bool resume = false;                    ///< resume from the newest complete one
    /// The artifact directory's lock, held from build() while the Learner lives (not by the
    /// processes of a multi-process run that hold no rank 0: they write no checkpoints).
    std::optional<ArtifactLock> lock;
    std::shared_ptr<ApplicationLogger> app_logger;  ///< experiment.log
    bool app_logger_set = false;                    ///< given explicitly
    struct EarlyStopping {
        std::string metric;
        Split split;
        Direction direction;
        double min_delta;
        std::size_t patience;
    };
    std::optional<EarlyStopping> early_stopping;  ///< none by default
    /// The metric whose best epoch's checkpoint is kept besides the last ones.
    struct KeepBest {
        std::string metric;   ///< a numeric metric's name
        Split split;          ///< the split it is registered for
        Direction direction;  ///< Lowest or Highest is best
    };
    std::optional<KeepBest> keep_best;  ///< none by default
    std::uint64_t seed = 0;             ///< the run's seed
    bool capture_steps = false;         ///< replay steps as CUDA graphs
    std::optional<DType> autocast;      ///< the steps' mixed precision (none: off)
    bool summary = false;               ///< print the summary at the end
    bool report = true;                 ///< write metrics.csv and report.html
    Interrupter interrupter;            ///< shared with renderers and handlers
};

namespace detail {

/// What LearnerBuilder::build knows of the model's backend for its checks.
struct LearnerModelFacts {
    bool capturable = false;      ///< capture_steps can capture its steps
    std::string backend;          ///< its name, for messages
    bool devices_match = false;   ///< devices() were given as devices of its backend
    std::size_t num_devices = 0;  ///< how many (when they match)
};
/// Throws ArgumentError for the settings of `s` that do not fit together or with the model:
/// resuming without a checkpointer or beyond num_epochs, early stopping and keep_best on metrics
/// that are not numeric metrics of `train` or `valid`, capture_steps where it cannot capture,
/// devices of another backend than the model's, collective endpoints that do not match the
/// devices (LearnerBuilder::build).
EMBER_API void check_learner_settings(const LearnerSettings& s,
                                      const std::vector<const MetricSlotBase*>& train,
                                      const std::vector<const MetricSlotBase*>& valid,
                                      const LearnerModelFacts& model);
/// Takes the artifact directory's lock where this process writes (no collectives, or one of
/// rank 0) and fills in the default loggers and renderer (LearnerBuilder::build).
EMBER_API void complete_learner_settings(LearnerSettings& s);

/// A loader as the core sees it: its item and batch counts (batch_size when it has one).
struct LoaderShape {
    std::size_t num_items = 0, num_batches = 0;
    std::optional<std::size_t> batch_size;
    /// Items in the first `iteration` batches.
    EMBER_API std::size_t items_after(std::size_t iteration) const;
    /// Items in batch `iteration` (from 1).
    std::size_t batch_items(std::size_t iteration) const {
        return items_after(iteration) - items_after(iteration - 1);
    }
};

/// The running sums of an epoch's numeric metrics, by name: the sum of values × items, items.
using MetricSums = std::map<std::string, std::pair<double, std::size_t>>;

/// Feeds the step output `item` points to (`slot`'s Item) to `slot` and returns its entry: logged
/// to `logger`; for a numeric metric counted in `sums` with `items` items (its value weighs what
/// its batch's items do) and given the epoch's mean so far; stripped of its values unless the
/// metric is plotted. What the Learner and the Evaluator do with each metric after each batch.
EMBER_API MetricEntry update_metric(MetricSlotBase& slot, const void* item,
                                    const MetricMetadata& md, std::size_t items,
                                    MetricLogger& logger, MetricSums& sums);

/// What the model-typed shell of a Learner does for the core's fit.
class LearnerTask {
  public:
    virtual ~LearnerTask() = default;
    /// Loads the model, optimizer and scheduler of checkpoint `n` (core.load_checkpoint).
    virtual void resume(std::size_t n) = 0;
    /// Called once before the first epoch (data-parallel replicas are made here).
    virtual void start() = 0;
    /// One training epoch; false when interrupted.
    virtual bool train_epoch(std::size_t epoch) = 0;
    /// One validation epoch; false when interrupted.
    virtual bool valid_epoch(std::size_t epoch) = 0;
    /// Whether this process writes checkpoints and reports (holds rank 0, or no collective).
    virtual bool writes() const = 0;
    /// The records of a checkpoint: what = "model", "optim" or "scheduler".
    virtual record::Value record_of(const char* what) const = 0;
};

/// The model-independent Learner (see the top of this file).
class EMBER_API LearnerCore {
  public:
    /// The settings of the run and its metrics (the slots' items are the shell's step outputs).
    LearnerCore(LearnerSettings settings, std::vector<std::shared_ptr<MetricSlotBase>> train,
                std::vector<std::shared_ptr<MetricSlotBase>> valid);
    LearnerCore(const LearnerCore&);
    LearnerCore& operator=(const LearnerCore&);
    LearnerCore(LearnerCore&&) noexcept;
    LearnerCore& operator=(LearnerCore&&) noexcept;
    ~LearnerCore();

    /// The settings.
    const LearnerSettings& settings() const { return s_; }
    /// Runs a fit over loaders of these shapes (the loop of Learner::fit): resume, the epochs,
    /// checkpoints, reports, early stopping, the summary.
    void fit(LearnerTask& task, const LoaderShape& train, const LoaderShape& valid);

    /// The backend seed of `split` in `epoch`.
    std::uint64_t seed_of(std::size_t epoch, Split split) const {
        return epoch_seed(s_.seed, epoch, split);
    }
    /// Starts an epoch of `split`: clears its metrics and opens its logger's epoch.
    void begin_epoch(Split split, std::size_t epoch);
    /// After iteration `iteration` (from 1) of `split` in `epoch`: feeds `item` (the step output;
    /// nullptr: none on this process) to the metrics with `batch_items` items (nullopt: the
    /// loader's count for that batch), logs and renders; true when the run should stop.
    bool step_done(Split split, std::size_t epoch, std::size_t iteration, const void* item,
                   std::optional<double> lr, std::optional<std::size_t> batch_items = {});
    /// Ends an epoch of `split`: its means join the history.
    void end_epoch(Split split, std::size_t epoch);
    /// A checkpoint's record (FormatError when its file is missing).
    record::Value load_checkpoint(const char* what, std::size_t epoch) const;
    /// Writes a line to the application log.
    void log(const std::string& message);
    /// The collective endpoints of a data-parallel run's `n` local replicas: the settings'
    /// (LearnerBuilder::collectives), or else an in-process ThreadCollective group of `n`; the
    /// run's log says how many replicas of how many train.
    std::vector<std::shared_ptr<collective::Collective>> replica_comms(std::size_t n);

    /// Learner::history.
    const MetricHistory& history() const { return history_; }
    /// Learner::best_checkpoint.
    std::optional<std::size_t> best_checkpoint() const;

  private:
    std::filesystem::path checkpoint_dir() const;
    std::filesystem::path checkpoint_path(const char* what, std::size_t epoch) const;
    std::vector<std::filesystem::path> checkpoint_files(std::size_t epoch) const;
    void save_checkpoint(std::size_t epoch, const LearnerTask& task);
    std::optional<std::size_t> best_epoch(std::size_t upto) const;
    void restore_history(std::size_t n);
    std::vector<std::shared_ptr<MetricSlotBase>>& slots(Split split) {
        return split == Split::Train ? train_metrics_ : valid_metrics_;
    }

    LearnerSettings s_;
    std::vector<std::shared_ptr<MetricSlotBase>> train_metrics_, valid_metrics_;
    MetricHistory history_;
    LoaderShape shapes_[2];  // train, valid (set by fit)
    MetricSums sums_[2];     // the current epoch's, per split
};

}  // namespace detail
}  // namespace ember::train
