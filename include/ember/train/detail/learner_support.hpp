#pragma once
// The Learner's non-template helpers (src/train/learner_support.cpp): the SIGINT handler, the
// seed of each epoch, early stopping, the end-of-run summary.
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "../../export.hpp"
#include "../renderer.hpp"

namespace ember::train {

/// Whether a metric improves downwards (a loss) or upwards (an accuracy).
enum class Direction { Lowest, Highest };

namespace detail {

/// While alive, SIGINT asks `interrupter` to stop instead of killing the process; a second
/// SIGINT while a stop is pending restores the default action and re-raises it (a run stuck in
/// an iteration can still be killed). The previous handler is restored on destruction.
class EMBER_API SigintGuard {
  public:
    /// Installs the handler.
    explicit SigintGuard(const Interrupter& interrupter);
    /// Restores the previous handler.
    ~SigintGuard();
    SigintGuard(const SigintGuard&) = delete;
    SigintGuard& operator=(const SigintGuard&) = delete;

  private:
    Interrupter interrupter_;
    void* previous_action_;     // struct sigaction, kept out of this header
    const Interrupter* outer_;  // the guard this one replaced (nested fits)
};

/// The backend seed of `split` in `epoch` of a run seeded with `seed` (splitmix64 of the
/// three): each epoch draws the same numbers whether the run was resumed or not.
EMBER_API std::uint64_t epoch_seed(std::uint64_t seed, std::size_t epoch, Split split);

/// Early stopping on one metric's epoch means (Burn's MetricEarlyStoppingStrategy with
/// NoImprovementSince): stops when `patience` epochs passed since the best value, an
/// improvement being a change beyond `min_delta` in `direction`.
class EMBER_API EarlyStopper {
  public:
    /// The rule.
    EarlyStopper(Direction direction, double min_delta, std::size_t patience)
        : direction_(direction), min_delta_(min_delta), patience_(patience) {}
    /// Records the metric's mean of `epoch`; true when training should stop.
    bool update(std::size_t epoch, double value);
    /// The epoch of the best value (0 before any).
    std::size_t best_epoch() const { return best_epoch_; }

  private:
    Direction direction_;
    double min_delta_;
    std::size_t patience_;
    std::optional<double> best_;
    std::size_t best_epoch_ = 0;
};

/// Epoch means of every numeric metric: history[split][name][epoch - 1] (NaN where unknown).
using MetricHistory = std::map<Split, std::map<std::string, std::vector<double>>>;

/// The summary table of a run (Burn's LearnerSummary): per split and metric, the lowest and
/// highest epoch mean and their epochs.
EMBER_API std::string format_summary(const MetricHistory& history, std::size_t epochs_done);

/// "Loss 0.4312 | Accuracy 87.50 %": the epoch means of one split's metrics in `epoch`.
EMBER_API std::string format_epoch(const std::map<std::string, std::vector<double>>& split_history,
                                   std::size_t epoch);

}  // namespace detail
}  // namespace ember::train
