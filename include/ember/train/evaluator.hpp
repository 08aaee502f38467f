#pragma once
// Evaluation on a test split (Burn's Evaluator): a trained model's step over a loader, once,
// feeding metrics as the Learner's validation does, with the same adaptors and the same
// item-weighted means. The metric logs go under <artifact_dir>/test/<name>/, so that several
// test sets of one run sit side by side with its train/ and valid/ logs.
#include <cstddef>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "learner.hpp"

namespace ember::train {

/// What Evaluator::eval returns: the test set's name, its items, and the mean over its items of
/// every numeric metric (the number the Learner's history would hold for a validation epoch).
struct EvaluationResult {
    std::string name;                       ///< the test set's name
    std::size_t items = 0;                  ///< items evaluated
    std::map<std::string, double> numeric;  ///< metric name → mean over the items
};

/// Runs a model over test sets and reports its metrics; made by EvaluatorBuilder::build.
template <typename VM, typename Item>
class Evaluator {
  public:
    /// Use EvaluatorBuilder::build.
    Evaluator(VM model, std::filesystem::path dir,
              std::vector<std::shared_ptr<detail::MetricSlot<Item>>> metrics,
              std::shared_ptr<MetricsRenderer> renderer)
        : model_(std::move(model)),
          dir_(std::move(dir)),
          metrics_(std::move(metrics)),
          renderer_(std::move(renderer)) {}

    /// Evaluates the model on `loader` (a LearnerLoader whose batches the model's step takes)
    /// under the name `name`: every metric is cleared, updated with each batch's step output,
    /// logged to <artifact_dir>/test/<name>/epoch-1/ and shown on the renderer's validation
    /// side. ArgumentError for an empty name, one with a path separator, or an empty loader.
    template <typename L>
    EvaluationResult eval(const std::string& name, L&& loader) {
        static_assert(LearnerLoader<std::remove_cvref_t<L>>,
                      "Evaluator::eval: the loader needs iter(), num_items() and num_batches()");
        EMBER_CHECK(
            !name.empty() && name.find('/') == std::string::npos && name != "." && name != "..",
            Argument, "Evaluator::eval: '", name, "' is not a test set name (one path component)");
        const std::size_t n = loader.num_items(), nb = loader.num_batches();
        EMBER_CHECK(nb > 0, Argument, "Evaluator::eval: the loader of '", name, "' has no batch (",
                    n, " items)");
        FileMetricLogger logger(dir_ / "test" / name);
        logger.start_epoch(1);
        for (auto& m : metrics_) m->clear();
        detail::MetricSums sums;
        std::size_t iteration = 0, done = 0;
        // Batches of equal size but the last, as the Learner counts them.
        detail::LoaderShape shape{n, nb, std::nullopt};
        if constexpr (requires { loader.batch_size(); })
            shape.batch_size = std::size_t(loader.batch_size());
        for (auto&& batch : loader.iter()) {
            // The validation step, as the Learner calls it: valid_step, else step.
            static_assert(std::same_as<decltype(run_valid_step(model_, batch)), Item>,
                          "Evaluator::eval: the model's valid_step(batch) (or step(batch)) must "
                          "return the Item the EvaluatorBuilder was made for");
            const Item item = run_valid_step(model_, batch);
            ++iteration;
            const std::size_t after = shape.items_after(iteration);
            const std::size_t items = after - done;
            done = after;
            TrainingProgress p{1, 1, iteration, after, n, 0};
            for (auto& m : metrics_) {
                const MetricEntry e =
                    detail::update_metric(*m, &item, {p, std::nullopt}, items, logger, sums);
                if (renderer_) renderer_->update_valid(e);
            }
            if (renderer_) renderer_->render_valid(p);
        }
        logger.end_epoch(1);  // the logs are written whole, as an epoch's are
        if (renderer_) renderer_->on_epoch_end(Split::Valid, 1);
        EvaluationResult out{name, n, {}};
        for (const auto& [metric, sc] : sums)
            if (sc.second) out.numeric[metric] = sc.first / double(sc.second);
        return out;
    }

    /// The model evaluated.
    const VM& model() const { return model_; }

  private:
    VM model_;
    std::filesystem::path dir_;
    std::vector<std::shared_ptr<detail::MetricSlot<Item>>> metrics_;
    std::shared_ptr<MetricsRenderer> renderer_;
};

/// Builds an Evaluator for models whose step returns `Item` (Burn's EvaluatorBuilder):
/// `EvaluatorBuilder<ClassificationOutput<B>>(dir).metric_test_numeric(AccuracyMetric<B>{})
/// .build(trained.valid())`.
template <typename Item>
class EvaluatorBuilder {
  public:
    /// Logs go under `artifact_dir`/test/<name>.
    explicit EvaluatorBuilder(std::filesystem::path artifact_dir) : dir_(std::move(artifact_dir)) {}

    /// A metric of the test split, shown as text.
    template <Metric Me>
    EvaluatorBuilder& metric_test(Me metric) {
        add(std::move(metric), false);
        return *this;
    }
    /// A numeric metric of the test split: its mean is in the result.
    template <Numeric Me>
    EvaluatorBuilder& metric_test_numeric(Me metric) {
        add(std::move(metric), true);
        return *this;
    }
    /// Shows progress on `renderer` (its validation side); none by default.
    EvaluatorBuilder& renderer(std::shared_ptr<MetricsRenderer> renderer) {
        renderer_ = std::move(renderer);
        return *this;
    }
    /// The evaluator of `model` (usually `trained.valid()`, off autodiff).
    template <typename VM>
    Evaluator<VM, Item> build(VM model) const {
        return Evaluator<VM, Item>(std::move(model), dir_, metrics_, renderer_);
    }

  private:
    template <typename Me>
    void add(Me metric, bool plotted) {
        detail::add_metric_slot<Item>(metrics_, std::move(metric), plotted, "EvaluatorBuilder", "");
    }

    std::filesystem::path dir_;
    std::vector<std::shared_ptr<detail::MetricSlot<Item>>> metrics_;
    std::shared_ptr<MetricsRenderer> renderer_;
};

}  // namespace ember::train
