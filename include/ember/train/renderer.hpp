#pragma once
// The interface between the Learner and what shows its progress (Burn's MetricsRenderer): the
// live terminal dashboard, plain line output, or a test's recorder. The Learner calls it from
// its own thread, in order: update_* for each metric of an iteration, then render_*.
#include <atomic>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>

namespace ember::train {

/// Training or validation.
enum class Split { Train, Valid };

/// One metric's current value, as the Learner reports it after each iteration.
struct MetricEntry {
    std::string name;               ///< "Loss", "Accuracy", ...
    std::string formatted;          ///< the value as shown ("0.4312", "87.50 %")
    std::optional<double> numeric;  ///< the value for charts, for numeric metrics
    std::optional<double> epoch_mean;  ///< the running mean over the epoch so far, when numeric
};

/// Where training stands.
struct TrainingProgress {
    std::size_t epoch = 1;             ///< the current epoch, from 1
    std::size_t epoch_total = 1;       ///< the number of epochs of the run
    std::size_t iteration = 0;         ///< iterations done in this epoch and split
    std::size_t items_processed = 0;   ///< items done in this epoch and split
    std::size_t items_total = 0;       ///< items in this epoch's split (0 when unknown)
    std::size_t global_iteration = 0;  ///< training iterations since the run began
};

/// A request to stop, shared between the Learner, the renderer (the `q` key) and signal
/// handlers (Ctrl-C): the Learner finishes the current iteration, completes the checkpoint and
/// returns, so the run can be resumed.
class Interrupter {
public:
    /// Asks the run to stop.
  void stop() { state_->stop.store(true, std::memory_order_relaxed); }
  /// Asks the run to stop because signal `sig` (SIGINT, SIGTERM) came; async-signal-safe.
  void stop_by_signal(int sig) {
      state_->signal.store(sig, std::memory_order_relaxed);
      state_->stop.store(true, std::memory_order_relaxed);
  }
    /// Whether a stop was asked for.
  bool should_stop() const { return state_->stop.load(std::memory_order_relaxed); }
  /// The signal that asked the run to stop, 0 when none did (stop(), `q`, not stopped).
  int signal() const { return state_->signal.load(std::memory_order_relaxed); }
  /// The exit status a program should end with after the run: 128 + the signal that stopped
  /// it (130 for Ctrl-C, as shells expect), 0 when no signal did.
  int exit_status() const { return signal() ? 128 + signal() : 0; }
  /// Clears the request (for a new run).
  void reset() {
      state_->stop.store(false, std::memory_order_relaxed);
      state_->signal.store(0, std::memory_order_relaxed);
  }

private:
  struct State {
      std::atomic<bool> stop{false};
      std::atomic<int> signal{0};
  };
  std::shared_ptr<State> state_ = std::make_shared<State>();
};

/// Shows metrics and progress.
class MetricsRenderer {
public:
    virtual ~MetricsRenderer() = default;
    /// A training metric's new value.
    virtual void update_train(const MetricEntry& entry) = 0;
    /// A validation metric's new value.
    virtual void update_valid(const MetricEntry& entry) = 0;
    /// Training progress after an iteration (after its metrics were updated).
    virtual void render_train(const TrainingProgress& progress) = 0;
    /// Validation progress after an iteration.
    virtual void render_valid(const TrainingProgress& progress) = 0;
    /// An epoch of `split` ended.
    virtual void on_epoch_end(Split split, std::size_t epoch) { (void)split, (void)epoch; }
    /// The run ended (normally or interrupted); the renderer restores the terminal.
    virtual void on_run_end() {}
};

}  // namespace ember::train
