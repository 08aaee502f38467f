#pragma once
// The live training dashboard (Burn's TUI renderer): a full-screen view on the terminal's
// alternate screen with a chart of the selected metric's history, the current values of every
// metric, progress bars with ETAs and the epoch counter. Arrow keys switch the chart, `q` or
// Ctrl-C asks the run to stop gracefully through the Interrupter.
#include <functional>
#include <memory>

#include "../export.hpp"
#include "ember/train/renderer.hpp"

namespace ember::train {

/// Options of the dashboard.
struct TuiOptions {
    /// The shortest time between two redraws, in milliseconds (100: ten frames a second).
    int min_redraw_ms = 100;
    /// Whether to colour the chart and the bars (off, whatever this says, when the environment
    /// variable NO_COLOR is set and not empty).
    bool color = true;
};

/// The full-screen dashboard. It takes the terminal on the first update (raw mode, alternate
/// screen, hidden cursor) and gives it back in on_run_end, in its destructor, at exit, and on
/// SIGTERM/SIGHUP/SIGQUIT/SIGABRT before the signal's previous action runs. A background
/// thread reads the keys and redraws; SIGINT (or the Ctrl-C key) asks the Interrupter to stop,
/// and a second one ends the process.
class EMBER_API TuiRenderer final : public MetricsRenderer {
  public:
    /// A dashboard that reports `q`, Ctrl-C and SIGINT to `interrupter` (a copy sharing its
    /// flag). Throws ember::Error (Device) when standard output is not a terminal.
    explicit TuiRenderer(Interrupter interrupter, TuiOptions options = {});
    ~TuiRenderer() override;
    TuiRenderer(const TuiRenderer&) = delete;
    TuiRenderer& operator=(const TuiRenderer&) = delete;

    /// A training metric's new value.
    void update_train(const MetricEntry& entry) override;
    /// A validation metric's new value.
    void update_valid(const MetricEntry& entry) override;
    /// Training progress after an iteration.
    void render_train(const TrainingProgress& progress) override;
    /// Validation progress after an iteration.
    void render_valid(const TrainingProgress& progress) override;
    /// An epoch of `split` ended: its means join the chart's epoch view.
    void on_epoch_end(Split split, std::size_t epoch) override;
    /// Restores the terminal and prints the last values of every metric on the normal screen.
    void on_run_end() override;

  private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

/// The renderer the Learner uses by default: the dashboard when standard output is a terminal
/// (and TERM is not "dumb"), otherwise the one `fallback` makes (plain line output).
EMBER_API std::unique_ptr<MetricsRenderer> make_default_renderer(
    const Interrupter& interrupter,
    const std::function<std::unique_ptr<MetricsRenderer>()>& fallback);

/// The renderer the Learner uses by default: the dashboard on a terminal, otherwise a
/// PlainRenderer writing to standard output.
EMBER_API std::unique_ptr<MetricsRenderer> make_default_renderer(const Interrupter& interrupter);

}  // namespace ember::train
