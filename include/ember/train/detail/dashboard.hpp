#pragma once
// The pure parts of the live dashboard (TuiRenderer): key decoding, braille charts, progress
// bars, durations and the composition of a whole frame from the dashboard's state. They take
// no terminal and no clock, so tests check them with hand-worked values.
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ember/train/renderer.hpp"

namespace ember::train::detail {

/// A key the dashboard reacts to.
enum class Key { Left, Right, Up, Down, Quit, CtrlC, Other };

/// Decodes the keys at the front of `buffer` and removes their bytes. An escape sequence cut
/// in the middle stays in the buffer for the next read, unless `flush` is set (no more bytes
/// are coming soon): then a lone ESC decodes as Key::Other.
std::vector<Key> decode_keys(std::string& buffer, bool flush = false);

/// A grid of braille cells, each 2 dots wide and 4 high, that remembers which series drew
/// each cell last (for its colour).
class BrailleCanvas {
  public:
    /// A canvas of `width` x `height` cells (2*width x 4*height dots).
    BrailleCanvas(int width, int height);
    /// Sets the dot (x, y), y from the top; dots outside the canvas are ignored.
    void set(int x, int y, int series);
    /// Draws a straight line of dots between two dots (Bresenham).
    void line(int x0, int y0, int x1, int y1, int series);
    /// The dot pattern of a cell (bit i is braille dot i+1).
    std::uint8_t bits(int cx, int cy) const { return bits_[index(cx, cy)]; }
    /// The series that drew a cell last (-1 for none).
    int owner(int cx, int cy) const { return owner_[index(cx, cy)]; }
    /// One row of cells as UTF-8 (a blank cell is a space); `colors[s]` is the SGR code used
    /// for series s, none when `colors` is empty.
    std::string row(int cy, const std::vector<std::string>& colors = {}) const;
    /// Width in cells.
    int width() const { return width_; }
    /// Height in cells.
    int height() const { return height_; }

  private:
    std::size_t index(int cx, int cy) const {
        return static_cast<std::size_t>(cy) * static_cast<std::size_t>(width_) +
               static_cast<std::size_t>(cx);
    }
    int width_, height_;
    std::vector<std::uint8_t> bits_;
    std::vector<int> owner_;
};

/// A point of a chart, in data units.
struct ChartPoint {
    double x;  ///< position along the run
    double y;  ///< the metric's value
};

/// The value range a chart shows.
struct ChartRange {
    double x_min, x_max, y_min, y_max;
};

/// Draws `points` joined by lines on `canvas`, mapping `range` onto the whole canvas (y_max at
/// the top row of dots, y_min at the bottom one).
void plot_series(BrailleCanvas& canvas, const std::vector<ChartPoint>& points,
                 const ChartRange& range, int series);

/// The y range that shows every point of the given series, with a margin when all values are
/// equal (so a flat line is drawn in the middle); {0, 1} when there are none.
std::pair<double, double> value_range(const std::vector<const std::vector<ChartPoint>*>& series);

/// A bar of `width` cells filled to `fraction` (clamped to [0, 1]) with full blocks and one
/// eighth-block for the remainder, padded with spaces.
std::string progress_bar(double fraction, int width);

/// A duration for people: "45s", "3m 05s", "2h 07m" (rounded down to the second).
std::string format_duration(double seconds);

/// The time left when `fraction` of the work took `elapsed` seconds; none before any progress.
std::optional<double> eta_seconds(double elapsed, double fraction);

/// The number of terminal columns of a UTF-8 string, skipping ANSI escape sequences (every
/// other code point counts as one column: the dashboard draws no wide characters).
std::size_t display_width(std::string_view s);

/// Cuts a UTF-8 string with escapes to `width` columns, or pads it with spaces to that width.
std::string fit_width(std::string_view s, std::size_t width);

/// Which history the chart shows.
enum class ChartView { Iterations, Epochs };

/// One metric of one split, as the dashboard keeps it.
struct MetricTrack {
    std::string formatted;                ///< the current value as shown
    std::optional<double> epoch_mean;     ///< the epoch's running mean
    std::vector<ChartPoint> history;      ///< numeric values by position in the run
    std::vector<ChartPoint> epoch_means;  ///< each finished epoch's mean, mid-epoch
    double epoch_sum = 0;                 ///< the sum of this epoch's numeric values
    std::size_t epoch_count = 0;          ///< how many values epoch_sum holds
};

/// Everything a frame shows.
struct DashboardState {
    std::vector<std::string> metric_order;            ///< metric names, first seen first
    std::map<std::string, MetricTrack> train, valid;  ///< by metric name
    std::optional<TrainingProgress> train_progress, valid_progress;
    Split active = Split::Train;  ///< the split of the latest progress
    std::size_t selected = 0;     ///< index into the numeric metrics, for the chart
    ChartView view = ChartView::Iterations;
    bool stopping = false;     ///< a stop was asked for
    double elapsed = 0;        ///< seconds since the run began
    double epoch_elapsed = 0;  ///< seconds since the active split's epoch began
    bool color = true;         ///< use ANSI colours

    /// The names of the metrics with numeric values (the ones the chart can show).
    std::vector<std::string> numeric_metrics() const;
    /// Records a metric's new value at position `x` of the run (in epochs).
    void update(Split split, const MetricEntry& entry, double x);
    /// Records the end of an epoch: each numeric metric's mean becomes a point of the epoch view.
    void end_epoch(Split split, std::size_t epoch);
};

/// Where an iteration lies along the run, in epochs: epoch 1 spans [0, 1), and within an
/// epoch the position follows the items done (or the iteration count when the total is unknown,
/// with `iterations_hint` iterations taken for a whole epoch, 0 for none known).
double run_position(const TrainingProgress& p, std::size_t iterations_hint);

/// The frame of a `width` x `height` terminal, one string per line, each exactly `width`
/// columns wide (escape sequences aside).
std::vector<std::string> compose_frame(const DashboardState& state, int width, int height);

}  // namespace ember::train::detail
