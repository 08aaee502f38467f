#pragma once
// Metrics (Burn's Metric and Numeric traits). A metric consumes one iteration's input and
// reports a MetricEntry; the Learner feeds it the step output through an Adaptor (Burn's
// `Adaptor<Input>`), so one training output type serves many metrics. The Learner clears every
// metric at the start of each epoch.
#include <concepts>
#include <cstddef>
#include <optional>
#include <string>

#include "../export.hpp"
#include "renderer.hpp"

namespace ember::train {

/// What the Learner knows about the iteration a metric is updated in (Burn's MetricMetadata).
struct MetricMetadata {
    TrainingProgress progress;  ///< epoch, iteration, items processed
    std::optional<double> lr;   ///< the learning rate of this iteration (training only)
};

/// The input of metrics that need nothing from the step output (learning rate, CPU usage,
/// iteration speed): every output adapts to it.
struct NoInput {};

/// How a step output `Item` feeds a metric whose input is `Input`: specialise it with
/// `static Input adapt(const Item&)` (Burn's `impl Adaptor<Input> for Item`).
template <typename Item, typename Input>
struct Adaptor;

/// Every output adapts to NoInput.
template <typename Item>
struct Adaptor<Item, NoInput> {
    /// Nothing to take.
    static NoInput adapt(const Item&) { return {}; }
};

/// Whether `Item` adapts to `Input`.
template <typename Item, typename Input>
concept AdaptsTo = requires(const Item& item) {
    { Adaptor<Item, Input>::adapt(item) } -> std::convertible_to<Input>;
};

/// A metric: `typename M::Input`, `MetricEntry update(const Input&, const MetricMetadata&)`,
/// `void clear()` (a new epoch) and `std::string name()` (the log file and column name).
template <typename M>
concept Metric = requires(M& m, const M& cm, const typename M::Input& in,
                          const MetricMetadata& md) {
    { m.update(in, md) } -> std::same_as<MetricEntry>;
    m.clear();
    { cm.name() } -> std::convertible_to<std::string>;
};

/// A metric with a numeric value (Burn's Numeric): `double value()` is the last update's value,
/// which charts plot and early stopping reads.
template <typename M>
concept Numeric = Metric<M> && requires(const M& m) {
    { m.value() } -> std::convertible_to<double>;
};

/// The state most numeric metrics keep (Burn's NumericMetricState): the last value and the
/// epoch's running mean, weighted by batch size, and the entry that shows them.
class EMBER_API NumericMetricState {
  public:
    /// Records `value` for a batch of `batch_size` items (its weight in the epoch mean; 0 leaves
    /// the mean as it is) and returns the entry: the value with `precision` decimals (a negative
    /// precision: scientific notation with -precision decimals) followed by `unit` (" %").
    MetricEntry update(const std::string& name, double value, std::size_t batch_size,
                       int precision = 4, const std::string& unit = "");
    /// The last value (0 before any update).
    double value() const { return value_; }
    /// The epoch's mean so far (0 before any update).
    double mean() const { return count_ == 0 ? 0.0 : sum_ / double(count_); }
    /// Forgets the epoch.
    void reset() { *this = NumericMetricState{}; }

  private:
    double value_ = 0, sum_ = 0;
    std::size_t count_ = 0;
};

}  // namespace ember::train
