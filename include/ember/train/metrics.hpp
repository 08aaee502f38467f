#pragma once
// The bundled metrics (Burn's train::metric): accuracy, top-k accuracy, loss, learning rate,
// CPU usage and memory, iteration speed. Values are computed on the host from each batch's
// output: a metric reads a few numbers per iteration, never enough to matter next to the step.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "../export.hpp"
#include "../tensor/tensor.hpp"
#include "metric.hpp"

namespace ember::train {

namespace detail {

/// Items of an [N, C] score matrix whose target [N] is among the k best scores, and items
/// counted (those whose target is not `pad`). A target ties with another class in its favour.
/// Throws ShapeError when N differs, IndexError for a target outside [0, C) (pad excepted).
EMBER_API std::pair<std::size_t, std::size_t> topk_correct(const TensorData& outputs,
                                                           const TensorData& targets, std::size_t k,
                                                           std::optional<std::size_t> pad,
                                                           const char* metric);

/// CPU times from a /proc/stat "cpu" line: busy and total jiffies.
struct CpuTimes {
    std::uint64_t busy = 0;   ///< user + nice + system + irq + softirq + steal
    std::uint64_t total = 0;  ///< busy + idle + iowait
};
/// Parses the first (aggregate) "cpu" line of /proc/stat's text; FormatError naming `source`.
CpuTimes parse_proc_stat(const std::string& text, const std::string& source);
/// MemTotal and MemAvailable of /proc/meminfo's text, in bytes; FormatError naming `source`.
std::pair<std::uint64_t, std::uint64_t> parse_meminfo(const std::string& text,
                                                      const std::string& source);
/// The whole file; FormatError naming the metric and the file when it cannot be read.
std::string read_text(const std::string& path, const char* metric);

}  // namespace detail

/// Input of AccuracyMetric: class scores [N, C] and targets [N].
template <Backend B>
struct AccuracyInput {
    Tensor<B, 2> outputs;       ///< scores (logits or probabilities) per class
    Tensor<B, 1, Int> targets;  ///< class ids
};

/// Input of TopKAccuracyMetric: class scores [N, C] and targets [N].
template <Backend B>
struct TopKAccuracyInput {
    Tensor<B, 2> outputs;       ///< scores per class
    Tensor<B, 1, Int> targets;  ///< class ids
};

/// Input of LossMetric: the loss of the batch.
template <Backend B>
struct LossInput {
    Tensor<B, 1> tensor;  ///< the loss ([1], or per item: its mean is taken)
};

/// The share of items whose best-scoring class is the target, in percent; items whose target
/// is the pad token are not counted (Burn's AccuracyMetric).
template <Backend B>
class AccuracyMetric {
  public:
    /// The input.
    using Input = AccuracyInput<B>;
    /// A copy that ignores targets equal to `pad_token`.
    AccuracyMetric with_pad_token(std::size_t pad_token) const {
        AccuracyMetric out = *this;
        out.pad_ = pad_token;
        return out;
    }
    /// Updates with one batch.
    MetricEntry update(const Input& in, const MetricMetadata&) {
        auto [correct, total] = detail::topk_correct(in.outputs.to_data(), in.targets.to_data(), 1,
                                                     pad_, "AccuracyMetric");
        const double v = total == 0 ? 0.0 : 100.0 * double(correct) / double(total);
        return state_.update(name(), v, total, 2, " %");
    }
    /// Forgets the epoch.
    void clear() { state_.reset(); }
    /// "Accuracy".
    std::string name() const { return "Accuracy"; }
    /// The last batch's accuracy in percent.
    double value() const { return state_.value(); }

  private:
    NumericMetricState state_;
    std::optional<std::size_t> pad_;
};

/// The share of items whose target is among the k best-scoring classes, in percent (Burn's
/// TopKAccuracyMetric).
template <Backend B>
class TopKAccuracyMetric {
  public:
    /// The input.
    using Input = TopKAccuracyInput<B>;
    /// Top-`k` accuracy; ArgumentError for k = 0.
    explicit TopKAccuracyMetric(std::size_t k) : k_(k) {
        EMBER_CHECK(k >= 1, Argument, "TopKAccuracyMetric: k must be at least 1, got ", k);
    }
    /// A copy that ignores targets equal to `pad_token`.
    TopKAccuracyMetric with_pad_token(std::size_t pad_token) const {
        TopKAccuracyMetric out = *this;
        out.pad_ = pad_token;
        return out;
    }
    /// Updates with one batch; ArgumentError when k exceeds the number of classes.
    MetricEntry update(const Input& in, const MetricMetadata&) {
        const auto classes = in.outputs.dims()[1];
        EMBER_CHECK(k_ <= classes, Argument, "TopKAccuracyMetric: k = ", k_, " exceeds the ",
                    classes, " classes of the output");
        auto [correct, total] = detail::topk_correct(in.outputs.to_data(), in.targets.to_data(), k_,
                                                     pad_, "TopKAccuracyMetric");
        const double v = total == 0 ? 0.0 : 100.0 * double(correct) / double(total);
        return state_.update(name(), v, total, 2, " %");
    }
    /// Forgets the epoch.
    void clear() { state_.reset(); }
    /// "Top-<k> Accuracy".
    std::string name() const { return "Top-" + std::to_string(k_) + " Accuracy"; }
    /// The last batch's top-k accuracy in percent.
    double value() const { return state_.value(); }

  private:
    std::size_t k_;
    NumericMetricState state_;
    std::optional<std::size_t> pad_;
};

/// The loss of each iteration; the epoch value is the mean over iterations (Burn's LossMetric).
template <Backend B>
class LossMetric {
  public:
    /// The input.
    using Input = LossInput<B>;
    /// Updates with one batch's loss (its mean when it has several elements).
    MetricEntry update(const Input& in, const MetricMetadata&) {
        const auto v = in.tensor.to_data().template to_vec<double>();
        EMBER_CHECK(!v.empty(), Shape, "LossMetric: the loss tensor is empty");
        double sum = 0;
        for (double x : v) sum += x;
        return state_.update(name(), sum / double(v.size()), 1);
    }
    /// Forgets the epoch.
    void clear() { state_.reset(); }
    /// "Loss".
    std::string name() const { return "Loss"; }
    /// The last iteration's loss.
    double value() const { return state_.value(); }

  private:
    NumericMetricState state_;
};

/// The learning rate of each training iteration (Burn's LearningRateMetric); no value in
/// validation, which has none.
class EMBER_API LearningRateMetric {
  public:
    /// The input: nothing, the rate comes with the metadata.
    using Input = NoInput;
    /// The iteration's learning rate.
    MetricEntry update(const Input&, const MetricMetadata& md);
    /// Forgets the epoch.
    void clear() { state_.reset(); }
    /// "Learning Rate".
    std::string name() const { return "Learning Rate"; }
    /// The last rate.
    double value() const { return state_.value(); }

  private:
    NumericMetricState state_;
};

/// The machine's CPU utilisation in percent over the time since the previous sample, from
/// /proc/stat (Burn's CpuUse).
class EMBER_API CpuUsage {
  public:
    /// Samples `path` now; FormatError when it cannot be read or parsed. A new value is taken
    /// when at least `min_interval_s` has passed since the last sample (shorter intervals give
    /// noise); between samples the last value is reported.
    explicit CpuUsage(std::string path = "/proc/stat", double min_interval_s = 1.0);
    /// The input: nothing.
    using Input = NoInput;
    /// The current utilisation.
    MetricEntry update(const Input&, const MetricMetadata& md);
    /// Forgets the epoch (keeps the last sample).
    void clear() { state_.reset(); }
    /// "CPU Usage".
    std::string name() const { return "CPU Usage"; }
    /// The last utilisation in percent.
    double value() const { return state_.value(); }

  private:
    std::string path_;
    double min_interval_;
    detail::CpuTimes last_;
    double last_time_;
    double usage_ = 0;
    NumericMetricState state_;
};

/// The machine's used memory (MemTotal − MemAvailable of /proc/meminfo) in GB (10⁹ bytes);
/// shown as "used / total GB" (Burn's CpuMemory).
class EMBER_API CpuMemory {
  public:
    /// Reads `path` at each update; FormatError when it cannot be read or parsed.
    explicit CpuMemory(std::string path = "/proc/meminfo") : path_(std::move(path)) {}
    /// The input: nothing.
    using Input = NoInput;
    /// The current memory use.
    MetricEntry update(const Input&, const MetricMetadata& md);
    /// Forgets the epoch.
    void clear() { state_.reset(); }
    /// "CPU Memory".
    std::string name() const { return "CPU Memory"; }
    /// The last used memory in GB.
    double value() const { return state_.value(); }

  private:
    std::string path_;
    NumericMetricState state_;
};

/// Items processed per second since the first iteration of the epoch (Burn's
/// IterationSpeedMetric): 0 at the first update, which starts the clock, then
/// items_processed / elapsed.
class EMBER_API IterationSpeedMetric {
  public:
    /// With the steady clock, or `clock` (seconds) for tests.
    explicit IterationSpeedMetric(std::function<double()> clock = {});
    /// The input: nothing, the item count comes with the metadata.
    using Input = NoInput;
    /// The speed so far.
    MetricEntry update(const Input&, const MetricMetadata& md);
    /// A new epoch: the clock restarts at the next update.
    void clear() {
        start_.reset();
        state_.reset();
    }
    /// "Iteration Speed".
    std::string name() const { return "Iteration Speed"; }
    /// The last speed in items/s.
    double value() const { return state_.value(); }

  private:
    std::function<double()> clock_;
    std::optional<double> start_;
    NumericMetricState state_;
};

}  // namespace ember::train
