#pragma once
// The plain line renderer: the Learner's default when stdout is not a terminal (logs, CI, pipes).
// One line per reported iteration: split, epoch, iteration, items, and each metric's value.
#include <chrono>
#include <iosfwd>
#include <string>
#include <vector>

#include "../export.hpp"
#include "renderer.hpp"

namespace ember::train {

/// Writes progress as plain lines, at most one per `interval_s` seconds and split, and always
/// one at the last iteration of an epoch (when the epoch's item count is known) and a summary
/// line at each epoch's end.
class EMBER_API PlainRenderer : public MetricsRenderer {
  public:
    /// Writes to `os` (kept by reference; std::cout by default); ArgumentError for a negative
    /// interval. An interval of 0 writes every iteration.
    explicit PlainRenderer(std::ostream& os, double interval_s = 1.0);
    /// Writes to std::cout.
    PlainRenderer();
    void update_train(const MetricEntry& entry) override;
    void update_valid(const MetricEntry& entry) override;
    void render_train(const TrainingProgress& progress) override;
    void render_valid(const TrainingProgress& progress) override;
    void on_epoch_end(Split split, std::size_t epoch) override;

  private:
    struct SplitState {
        std::vector<MetricEntry> entries;  // this iteration's, in registration order
        std::chrono::steady_clock::time_point last{};
        bool printed_once = false;
        TrainingProgress progress;
    };
    void update(SplitState& s, const MetricEntry& e);
    void render(Split split, SplitState& s, const TrainingProgress& p);

    std::ostream* os_;
    double interval_;
    SplitState train_, valid_;
};

}  // namespace ember::train
