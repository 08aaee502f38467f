#pragma once
// Image metrics (Burn's train::metric::vision): the Dice coefficient of segmentation masks and
// the peak signal-to-noise ratio of reconstructions. Each reads its batch back to the host.
#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>

#include "metrics.hpp"

namespace ember::train {

// ---- DiceMetric -----------------------------------------------------------------------------

/// Input of DiceMetric: predicted and true masks [N, C, ...] (0/1 per class, one-hot encoded by
/// the caller; class 0 is the background when C > 1).
template <Backend B, std::size_t D = 4>
struct DiceInput {
    static_assert(D >= 3, "DiceInput: masks are [N, C, ...] with at least one spatial dim");
    Tensor<B, D, Int> outputs;  ///< predicted masks
    Tensor<B, D, Int> targets;  ///< true masks
};

/// Configuration of DiceMetric.
struct DiceMetricConfig {
    double epsilon = 1e-7;            ///< added to numerator and denominator (empty masks: 1)
    bool include_background = false;  ///< count class 0 (needs C >= 2)
};

/// The Dice coefficient, (2·|X ∩ Y| + ε) / (|X| + |Y| + ε), over the whole batch (Burn's
/// DiceMetric); class 0 is left out unless include_background (and C > 1).
template <Backend B, std::size_t D = 4>
class DiceMetric {
  public:
    /// The input.
    using Input = DiceInput<B, D>;
    /// The metric with `config`; ArgumentError for a negative epsilon.
    explicit DiceMetric(DiceMetricConfig config = {}) : config_(config) {
        EMBER_CHECK(config.epsilon >= 0.0, Argument,
                    "DiceMetric: epsilon must be non-negative, got ", config.epsilon);
    }
    /// Updates with one batch; ShapeError when the shapes differ, ArgumentError when the
    /// background is included with a single class.
    MetricEntry update(const Input& in, const MetricMetadata&) {
        const Shape& s = in.outputs.shape();
        EMBER_CHECK(s == in.targets.shape(), Shape, "DiceMetric: outputs of shape ", s.to_string(),
                    " and targets of shape ", in.targets.shape().to_string(), " differ");
        const std::size_t n = s[0], c = s[1];
        EMBER_CHECK(!config_.include_background || c >= 2, Argument,
                    "DiceMetric: include_background needs at least 2 classes, got ", c);
        const std::size_t first = (!config_.include_background && c > 1) ? 1 : 0;
        const std::size_t plane = s.num_elements() / (n * c);
        const auto x = in.outputs.to_data().template to_vec<double>();
        const auto y = in.targets.to_data().template to_vec<double>();
        double inter = 0, sx = 0, sy = 0;
        for (std::size_t i = 0; i < n; ++i)
            for (std::size_t k = first; k < c; ++k)
                for (std::size_t p = 0; p < plane; ++p) {
                    const std::size_t at = (i * c + k) * plane + p;
                    inter += x[at] * y[at];
                    sx += x[at];
                    sy += y[at];
                }
        const double dice = (2 * inter + config_.epsilon) / (sx + sy + config_.epsilon);
        return state_.update(name(), dice, n, 4);
    }
    /// Forgets the epoch.
    void clear() { state_.reset(); }
    /// "<D>D Dice Metric".
    std::string name() const { return std::to_string(D) + "D Dice Metric"; }
    /// The last batch's coefficient.
    double value() const { return state_.value(); }

  private:
    DiceMetricConfig config_;
    NumericMetricState state_;
};

// ---- PsnrMetric -----------------------------------------------------------------------------

/// Input of PsnrMetric: reconstructed and true images [N, C, H, W].
template <Backend B>
struct PsnrInput {
    Tensor<B, 4> outputs;  ///< reconstructions
    Tensor<B, 4> targets;  ///< originals
};

/// Configuration of PsnrMetric.
struct PsnrMetricConfig {
    double max_pixel_value = 1.0;  ///< 1 for images in [0, 1], 255 for 8-bit ones
    double epsilon = 1e-10;  ///< the smallest MSE used (a perfect image: 10·log10(max²/ε) dB)
};

/// Peak signal-to-noise ratio in dB, 10·log10(max² / MSE), computed per image and averaged over
/// the batch (Burn's PsnrMetric).
template <Backend B>
class PsnrMetric {
  public:
    /// The input.
    using Input = PsnrInput<B>;
    /// The metric with `config`; ArgumentError unless max_pixel_value and epsilon are positive.
    explicit PsnrMetric(PsnrMetricConfig config = {}) : config_(config) {
        EMBER_CHECK(config.max_pixel_value > 0.0 && config.epsilon > 0.0, Argument,
                    "PsnrMetric: max_pixel_value and epsilon must be positive, got ",
                    config.max_pixel_value, " and ", config.epsilon);
    }
    /// Updates with one batch; ShapeError when the shapes differ.
    MetricEntry update(const Input& in, const MetricMetadata&) {
        const Shape& s = in.outputs.shape();
        EMBER_CHECK(s == in.targets.shape(), Shape, "PsnrMetric: outputs of shape ", s.to_string(),
                    " and targets of shape ", in.targets.shape().to_string(), " differ");
        const std::size_t n = s[0], per = n == 0 ? 0 : s.num_elements() / n;
        const auto x = in.outputs.to_data().template to_vec<double>();
        const auto y = in.targets.to_data().template to_vec<double>();
        const double max2 = config_.max_pixel_value * config_.max_pixel_value;
        double total = 0;
        for (std::size_t i = 0; i < n; ++i) {
            double se = 0;
            for (std::size_t p = 0; p < per; ++p) {
                const double d = x[i * per + p] - y[i * per + p];
                se += d * d;
            }
            const double mse = std::max(per == 0 ? 0.0 : se / double(per), config_.epsilon);
            total += 10.0 * std::log10(max2 / mse);
        }
        return state_.update(name(), n == 0 ? 0.0 : total / double(n), n, 2, " dB");
    }
    /// Forgets the epoch.
    void clear() { state_.reset(); }
    /// "PSNR@<max_pixel_value>".
    std::string name() const {
        std::ostringstream os;
        os << "PSNR@" << config_.max_pixel_value;
        return os.str();
    }
    /// The last batch's mean PSNR in dB.
    double value() const { return state_.value(); }

  private:
    PsnrMetricConfig config_;
    NumericMetricState state_;
};

}  // namespace ember::train
