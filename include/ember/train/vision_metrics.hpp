#pragma once
// Image metrics (Burn's train::metric::vision): the Dice coefficient of segmentation masks, the
// peak signal-to-noise ratio and the structural similarity (single- and multi-scale) of
// reconstructions. Each reads its batch back to the host.
#include <algorithm>
#include <cmath>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "metrics.hpp"

namespace ember::train {

namespace detail {

/// ShapeError, naming `metric`, unless a batch's outputs and targets have the same shape.
inline void check_same_shape(const Shape& outputs, const Shape& targets, const char* metric) {
    EMBER_CHECK(outputs == targets, Shape, metric, ": outputs of shape ", outputs.to_string(),
                " and targets of shape ", targets.to_string(), " differ");
}

}  // namespace detail

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
        detail::check_same_shape(s, in.targets.shape(), "DiceMetric");
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
        detail::check_same_shape(s, in.targets.shape(), "PsnrMetric");
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

// ---- SsimMetric -----------------------------------------------------------------------------

/// Input of SsimMetric: reconstructed and true images [N, C, H, W], H and W at least the
/// window size.
template <Backend B>
struct SsimInput {
    Tensor<B, 4> outputs;  ///< reconstructions
    Tensor<B, 4> targets;  ///< originals
};

/// Configuration of SsimMetric (torchmetrics' StructuralSimilarityIndexMeasure defaults).
struct SsimMetricConfig {
    std::size_t kernel_size = 11;  ///< the gaussian window's side (odd)
    double sigma = 1.5;            ///< the gaussian window's standard deviation
    /// The range of pixel values L; unset: the larger of the batch's outputs' and targets'
    /// max − min, as torchmetrics does when data_range is None.
    std::optional<double> data_range;
    double k1 = 0.01;  ///< C1 = (k1·L)²
    double k2 = 0.03;  ///< C2 = (k2·L)²
};

namespace detail {

/// The normalised 1-D gaussian window: exp(−x²/(2σ²)) at x = −(k−1)/2 … (k−1)/2, summing to 1.
inline std::vector<double> gaussian_window(std::size_t k, double sigma) {
    std::vector<double> w(k);
    double sum = 0;
    for (std::size_t i = 0; i < k; ++i) {
        const double x = double(i) - double(k - 1) / 2;
        w[i] = std::exp(-x * x / (2 * sigma * sigma));
        sum += w[i];
    }
    for (double& v : w) v /= sum;
    return w;
}

/// The "valid" correlation of an h × w plane with the separable window w ⊗ w:
/// (h − k + 1) × (w − k + 1) weighted means.
inline std::vector<double> gaussian_filter_valid(const double* plane, std::size_t h, std::size_t wd,
                                                 const std::vector<double>& win) {
    const std::size_t k = win.size(), oh = h - k + 1, ow = wd - k + 1;
    std::vector<double> rows(h * ow), out(oh * ow);
    for (std::size_t y = 0; y < h; ++y)
        for (std::size_t x = 0; x < ow; ++x) {
            double s = 0;
            for (std::size_t j = 0; j < k; ++j) s += win[j] * plane[y * wd + x + j];
            rows[y * ow + x] = s;
        }
    for (std::size_t y = 0; y < oh; ++y)
        for (std::size_t x = 0; x < ow; ++x) {
            double s = 0;
            for (std::size_t j = 0; j < k; ++j) s += win[j] * rows[(y + j) * ow + x];
            out[y * ow + x] = s;
        }
    return out;
}

/// ArgumentError, naming `metric`, for an SSIM configuration's even or zero kernel size or a
/// non-positive sigma, k1, k2 or (set) data_range.
inline void check_ssim_window(std::size_t kernel_size, double sigma, double k1, double k2,
                              const std::optional<double>& data_range, const char* metric) {
    EMBER_CHECK(kernel_size % 2 == 1, Argument, metric, ": kernel_size must be odd, got ",
                kernel_size);
    EMBER_CHECK(sigma > 0.0 && k1 > 0.0 && k2 > 0.0, Argument, metric,
                ": sigma, k1 and k2 must be positive, got ", sigma, ", ", k1, " and ", k2);
    EMBER_CHECK(!data_range || *data_range > 0.0, Argument, metric,
                ": data_range must be positive, got ", data_range.value_or(0));
}

/// The data range L of images `x` and `y` (host values): `configured` when set, else the larger
/// of their max − min (torchmetrics' rule for data_range=None); ArgumentError, naming `metric`,
/// when that is 0 (constant images leave the index 0/0).
inline double ssim_data_range(const std::optional<double>& configured, const std::vector<double>& x,
                              const std::vector<double>& y, const char* metric) {
    if (configured) return *configured;
    const auto [xl, xh] = std::minmax_element(x.begin(), x.end());
    const auto [yl, yh] = std::minmax_element(y.begin(), y.end());
    const double range = std::max(*xh - *xl, *yh - *yl);
    EMBER_CHECK(range > 0.0, Argument, metric,
                ": outputs and targets are constant, so the data range is 0; set the config's "
                "data_range");
    return range;
}

/// Per image of [n, c, h, w] host images: (the mean SSIM, the mean contrast-sensitivity term
/// (2σxy + C2) / (σx² + σy² + C2)) over its channels and the positions where the k × k window
/// lies inside (torchmetrics' _ssim_update with return_contrast_sensitivity).
inline std::vector<std::pair<double, double>> ssim_and_cs(
    const std::vector<double>& x, const std::vector<double>& y, std::size_t n, std::size_t c,
    std::size_t h, std::size_t w, const std::vector<double>& win, double c1, double c2) {
    const std::size_t plane = h * w;
    std::vector<double> xx(plane), yy(plane), xy(plane);
    std::vector<std::pair<double, double>> out(n);
    for (std::size_t i = 0; i < n; ++i) {
        double sim = 0, cs = 0;
        std::size_t positions = 0;
        for (std::size_t ch = 0; ch < c; ++ch) {
            const double* px = x.data() + (i * c + ch) * plane;
            const double* py = y.data() + (i * c + ch) * plane;
            for (std::size_t p = 0; p < plane; ++p) {
                xx[p] = px[p] * px[p];
                yy[p] = py[p] * py[p];
                xy[p] = px[p] * py[p];
            }
            const auto mx = gaussian_filter_valid(px, h, w, win);
            const auto my = gaussian_filter_valid(py, h, w, win);
            const auto mxx = gaussian_filter_valid(xx.data(), h, w, win);
            const auto myy = gaussian_filter_valid(yy.data(), h, w, win);
            const auto mxy = gaussian_filter_valid(xy.data(), h, w, win);
            for (std::size_t p = 0; p < mx.size(); ++p) {
                const double vx = mxx[p] - mx[p] * mx[p], vy = myy[p] - my[p] * my[p];
                const double cov = mxy[p] - mx[p] * my[p];
                const double contrast = (2 * cov + c2) / (vx + vy + c2);
                cs += contrast;
                sim += (2 * mx[p] * my[p] + c1) / (mx[p] * mx[p] + my[p] * my[p] + c1) * contrast;
            }
            positions += mx.size();
        }
        out[i] = {sim / double(positions), cs / double(positions)};
    }
    return out;
}

/// 2 × 2 average pooling of [planes, h, w] host images (odd trailing rows and columns dropped,
/// as torch's avg_pool2d(2)).
inline std::vector<double> avg_pool_2x2(const std::vector<double>& v, std::size_t planes,
                                        std::size_t h, std::size_t w) {
    const std::size_t oh = h / 2, ow = w / 2;
    std::vector<double> out(planes * oh * ow);
    for (std::size_t p = 0; p < planes; ++p)
        for (std::size_t y = 0; y < oh; ++y)
            for (std::size_t x = 0; x < ow; ++x) {
                const double* a = v.data() + (p * h + 2 * y) * w + 2 * x;
                out[(p * oh + y) * ow + x] = (a[0] + a[1] + a[w] + a[w + 1]) / 4;
            }
    return out;
}

}  // namespace detail

/// The structural similarity index (Wang et al. 2004) in [−1, 1], as torchmetrics'
/// StructuralSimilarityIndexMeasure with its defaults: local means, variances and covariance
/// under an 11 × 11 gaussian window of σ = 1.5 (population moments, no N/(N−1)), the SSIM map
/// ((2μxμy + C1)(2σxy + C2)) / ((μx² + μy² + C1)(σx² + σy² + C2)) over the positions where the
/// window lies inside the image, averaged over channels and positions per image, then over the
/// batch. scikit-image's structural_similarity gives the same number with gaussian_weights=True,
/// use_sample_covariance=False and the same data_range, once its border of (k − 1)/2 is cropped.
template <Backend B>
class SsimMetric {
  public:
    /// The input.
    using Input = SsimInput<B>;
    /// The metric with `config`; ArgumentError for an even or zero kernel size, a non-positive
    /// sigma, data_range, k1 or k2.
    explicit SsimMetric(SsimMetricConfig config = {}) : config_(config) {
        detail::check_ssim_window(config.kernel_size, config.sigma, config.k1, config.k2,
                                  config.data_range, "SsimMetric");
    }
    /// Updates with one batch; ShapeError when the shapes differ, the batch is empty or an
    /// image is smaller than the window.
    MetricEntry update(const Input& in, const MetricMetadata&) {
        const Shape& s = in.outputs.shape();
        detail::check_same_shape(s, in.targets.shape(), "SsimMetric");
        const std::size_t n = s[0], c = s[1], h = s[2], w = s[3], k = config_.kernel_size;
        EMBER_CHECK(n > 0 && c > 0, Shape, "SsimMetric: an empty batch of shape ", s.to_string());
        EMBER_CHECK(h >= k && w >= k, Shape, "SsimMetric: images of shape ", s.to_string(),
                    " are smaller than the ", k, " × ", k, " window");
        const auto x = in.outputs.to_data().template to_vec<double>();
        const auto y = in.targets.to_data().template to_vec<double>();
        const double range = detail::ssim_data_range(config_.data_range, x, y, "SsimMetric");
        const double c1 = std::pow(config_.k1 * range, 2), c2 = std::pow(config_.k2 * range, 2);
        const auto win = detail::gaussian_window(k, config_.sigma);
        double total = 0;
        for (const auto& [sim, cs] : detail::ssim_and_cs(x, y, n, c, h, w, win, c1, c2))
            total += sim;
        return state_.update(name(), total / double(n), n, 4);
    }
    /// Forgets the epoch.
    void clear() { state_.reset(); }
    /// "SSIM".
    std::string name() const { return "SSIM"; }
    /// The last batch's mean SSIM.
    double value() const { return state_.value(); }

  private:
    SsimMetricConfig config_;
    NumericMetricState state_;
};

// ---- MsSsimMetric ---------------------------------------------------------------------------

/// Input of MsSsimMetric: reconstructed and true images [N, C, H, W]; at the coarsest scale
/// (H and W halved once per beta after the first) they must still hold the window.
template <Backend B>
using MsSsimInput = SsimInput<B>;

/// How MsSsimMetric maps each scale's term before the weighted product (torchmetrics'
/// `normalize`): negative terms raised to fractional powers would be NaN.
enum class MsSsimNormalize {
    Relu,    ///< max(term, 0) (torchmetrics' default)
    Simple,  ///< (term + 1) / 2
    None,    ///< the terms as they are (a negative term gives NaN)
};

/// Configuration of MsSsimMetric (torchmetrics' MultiScaleStructuralSimilarityIndexMeasure
/// defaults).
struct MsSsimMetricConfig {
    std::size_t kernel_size = 11;  ///< the gaussian window's side (odd)
    double sigma = 1.5;            ///< the gaussian window's standard deviation
    /// The range of pixel values L; unset: at each scale, the larger of the outputs' and
    /// targets' max − min over the batch (torchmetrics recomputes it per scale).
    std::optional<double> data_range;
    double k1 = 0.01;  ///< C1 = (k1·L)²
    double k2 = 0.03;  ///< C2 = (k2·L)²
    /// One weight per scale, finest first (Wang et al. 2003's five).
    std::vector<double> betas{0.0448, 0.2856, 0.3001, 0.2363, 0.1333};
    MsSsimNormalize normalize = MsSsimNormalize::Relu;  ///< the terms' mapping
};

/// Multi-scale SSIM (Wang, Simoncelli and Bovik 2003), as torchmetrics'
/// MultiScaleStructuralSimilarityIndexMeasure: at scales 1 … M (the images 2 × 2 average
/// pooled between them) the contrast-sensitivity term cs_j (the mean over channels and window
/// positions of (2σxy + C2) / (σx² + σy² + C2), as SsimMetric's window), and at the coarsest
/// scale the mean SSIM; each mapped by `normalize`, then ∏_{j<M} cs_j^β_j · ssim_M^β_M per image,
/// averaged over the batch.
template <Backend B>
class MsSsimMetric {
  public:
    /// The input.
    using Input = MsSsimInput<B>;
    /// The metric with `config`; ArgumentError for an even or zero kernel size, a non-positive
    /// sigma, data_range, k1 or k2, no betas or a negative one.
    explicit MsSsimMetric(MsSsimMetricConfig config = {}) : config_(std::move(config)) {
        detail::check_ssim_window(config_.kernel_size, config_.sigma, config_.k1, config_.k2,
                                  config_.data_range, "MsSsimMetric");
        EMBER_CHECK(!config_.betas.empty(), Argument, "MsSsimMetric: needs at least one beta");
        for (double b : config_.betas)
            EMBER_CHECK(b >= 0.0, Argument, "MsSsimMetric: betas must be non-negative, got ", b);
    }
    /// Updates with one batch; ShapeError when the shapes differ, the batch is empty or the
    /// coarsest scale is smaller than the window.
    MetricEntry update(const Input& in, const MetricMetadata&) {
        const Shape& s = in.outputs.shape();
        detail::check_same_shape(s, in.targets.shape(), "MsSsimMetric");
        const std::size_t n = s[0], c = s[1], k = config_.kernel_size;
        const std::size_t scales = config_.betas.size();
        std::size_t h = s[2], w = s[3];
        EMBER_CHECK(n > 0 && c > 0, Shape, "MsSsimMetric: an empty batch of shape ", s.to_string());
        EMBER_CHECK(std::min(h, w) >> (scales - 1) >= k, Shape, "MsSsimMetric: images of shape ",
                    s.to_string(), " are smaller than the ", k, " × ", k, " window at scale ",
                    scales, " (H and W halved ", scales - 1, " times: at least ", k << (scales - 1),
                    " needed)");
        auto x = in.outputs.to_data().template to_vec<double>();
        auto y = in.targets.to_data().template to_vec<double>();
        const auto win = detail::gaussian_window(k, config_.sigma);
        const auto map = [&](double t) {
            switch (config_.normalize) {
                case MsSsimNormalize::Relu:
                    return std::max(t, 0.0);
                case MsSsimNormalize::Simple:
                    return (t + 1) / 2;
                case MsSsimNormalize::None:
                    break;
            }
            return t;
        };
        std::vector<double> product(n, 1.0);
        for (std::size_t j = 0; j < scales; ++j) {
            const double range = detail::ssim_data_range(config_.data_range, x, y, "MsSsimMetric");
            const double c1 = std::pow(config_.k1 * range, 2), c2 = std::pow(config_.k2 * range, 2);
            const auto terms = detail::ssim_and_cs(x, y, n, c, h, w, win, c1, c2);
            for (std::size_t i = 0; i < n; ++i) {
                const double t = j + 1 == scales ? terms[i].first : terms[i].second;
                product[i] *= std::pow(map(t), config_.betas[j]);
            }
            if (j + 1 < scales) {
                x = detail::avg_pool_2x2(x, n * c, h, w);
                y = detail::avg_pool_2x2(y, n * c, h, w);
                h /= 2;
                w /= 2;
            }
        }
        double total = 0;
        for (double v : product) total += v;
        return state_.update(name(), total / double(n), n, 4);
    }
    /// Forgets the epoch.
    void clear() { state_.reset(); }
    /// "MS-SSIM".
    std::string name() const { return "MS-SSIM"; }
    /// The last batch's mean MS-SSIM.
    double value() const { return state_.value(); }

  private:
    MsSsimMetricConfig config_;
    NumericMetricState state_;
};

}  // namespace ember::train
