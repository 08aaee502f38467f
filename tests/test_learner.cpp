// The Learner on tiny models: training, artifacts, checkpoints, resuming, interruption, early
// stopping, gradient accumulation and option errors.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <ember/ember.hpp>
#include <ember/nn/dropout.hpp>
#include <ember/nn/linear.hpp>
#include <ember/nn/loss.hpp>
#include <ember/optim.hpp>
#include <ember/train/checkpoint.hpp>
#include <ember/train/classification_metrics.hpp>
#include <ember/train/device_metrics.hpp>
#include <ember/train/evaluator.hpp>
#include <ember/train/learner.hpp>
#include <ember/train/plain_renderer.hpp>
#include <ember/train/ranking_metrics.hpp>
#include <ember/train/text_metrics.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include "harness.hpp"

namespace test_learner {

namespace {

namespace fs = std::filesystem;
namespace train = ember::train;
using ember::Cpu;
using ember::Int;
using ember::Tensor;
using ember::TensorData;
using AD = ember::Autodiff<Cpu>;

// ---- a tiny data loader: a fixed list of items, batched in an order that depends on the epoch

struct Item {
    float x0, x1;
    std::int64_t label;
};

template <ember::Backend B>
struct Batch {
    Tensor<B, 2> x;
    Tensor<B, 2> y;             // regression target 2·x0 − 3·x1 + 1
    Tensor<B, 1, Int> classes;  // classification target
};

template <ember::Backend B>
struct TinyLoader {
    std::vector<Item> items;
    std::size_t batch = 4;
    bool shuffle = true;
    std::size_t epoch = 0;
    std::vector<std::size_t> epochs_seen{};

    std::size_t num_items() const { return items.size(); }
    std::size_t num_batches() const { return (items.size() + batch - 1) / batch; }
    void set_epoch(std::size_t e) {
        epoch = e;
        epochs_seen.push_back(e);
    }
    std::vector<Batch<B>> iter() const {
        // A deterministic reordering per epoch: a stride permutation (the count is odd-free
        // of 3 for our sizes) rotated by the epoch.
        std::vector<Item> order = items;
        if (shuffle) {
            const std::size_t n = items.size();
            for (std::size_t i = 0; i < n; ++i) order[i] = items[(i * 5 + epoch * 3) % n];
        }
        std::vector<Batch<B>> out;
        for (std::size_t s = 0; s < order.size(); s += batch) {
            const std::size_t m = std::min(batch, order.size() - s);
            std::vector<float> x, y;
            std::vector<std::int64_t> c;
            for (std::size_t i = s; i < s + m; ++i) {
                x.push_back(order[i].x0);
                x.push_back(order[i].x1);
                y.push_back(2 * order[i].x0 - 3 * order[i].x1 + 1);
                c.push_back(order[i].label);
            }
            out.push_back({Tensor<B, 2>::from_data(TensorData(x, {m, 2}), {}),
                           Tensor<B, 2>::from_data(TensorData(y, {m, 1}), {}),
                           Tensor<B, 1, Int>::from_data(TensorData(c, {m}), {})});
        }
        return out;
    }
};

// 16 points on a grid; class = which of three bands x0 + x1 falls in.
std::vector<Item> grid(std::size_t n = 16) {
    std::vector<Item> out;
    for (std::size_t i = 0; i < n; ++i) {
        const float x0 = float(i % 4) / 2 - 0.75f, x1 = float(i / 4 % 4) / 2 - 0.75f;
        const float s = x0 + x1;
        out.push_back({x0, x1, s < -0.4f ? 0 : (s < 0.4f ? 1 : 2)});
    }
    return out;
}

// ---- the models ----------------------------------------------------------------------------

template <ember::Backend B>
struct Regressor {
    ember::nn::Dropout dropout;
    ember::nn::Linear<B> linear;
    EMBER_MODULE(Regressor, dropout, linear)

    train::RegressionOutput<B> forward(const Batch<B>& b) const {
        auto out = linear.forward(dropout.forward(b.x));
        auto loss = ember::nn::loss::MseLoss{}.forward(out, b.y);
        return {loss, out, b.y};
    }
    train::TrainOutput<train::RegressionOutput<B>> step(
        const Batch<B>& b) const requires ember::AutodiffBackend<B> {
        auto item = forward(b);
        return {*this, item.loss.backward(), std::move(item)};
    }
    train::RegressionOutput<B> step(const Batch<B>& b) const requires(!ember::AutodiffBackend<B>) {
        return forward(b);
    }
};

Regressor<AD> regressor(double dropout = 0.2) {
    return {ember::nn::DropoutConfig{dropout}.init(), ember::nn::LinearConfig{2, 1}.init<AD>({})};
}

template <ember::Backend B>
struct Classifier {
    ember::nn::Linear<B> linear;
    EMBER_MODULE(Classifier, linear)

    train::ClassificationOutput<B> forward(const Batch<B>& b) const {
        auto out = linear.forward(b.x);
        auto loss = ember::nn::loss::CrossEntropyLossConfig{}.init<B>().forward(out, b.classes);
        return {loss, out, b.classes};
    }
    train::TrainOutput<train::ClassificationOutput<B>> step(
        const Batch<B>& b) const requires ember::AutodiffBackend<B> {
        auto item = forward(b);
        return {*this, item.loss.backward(), std::move(item)};
    }
    train::ClassificationOutput<B> step(const Batch<B>& b) const
        requires(!ember::AutodiffBackend<B>) {
        return forward(b);
    }
};

using RegOut = train::RegressionOutput<AD>;
using RegValid = train::RegressionOutput<Cpu>;
using RegBuilder = train::LearnerBuilder<RegOut, RegValid>;
using Rec = ember::record::NamedMpkGzFileRecorder<ember::record::FullPrecisionSettings>;

// Records what the Learner reports and may run a hook after each training iteration.
struct Recorder : train::MetricsRenderer {
    std::vector<train::MetricEntry> train_entries, valid_entries;
    std::vector<train::TrainingProgress> train_progress, valid_progress;
    std::vector<std::pair<train::Split, std::size_t>> epoch_ends;
    int run_ends = 0;
    std::function<void(const train::TrainingProgress&)> hook;

    void update_train(const train::MetricEntry& e) override { train_entries.push_back(e); }
    void update_valid(const train::MetricEntry& e) override { valid_entries.push_back(e); }
    void render_train(const train::TrainingProgress& p) override {
        train_progress.push_back(p);
        if (hook) hook(p);
    }
    void render_valid(const train::TrainingProgress& p) override { valid_progress.push_back(p); }
    void on_epoch_end(train::Split s, std::size_t e) override { epoch_ends.push_back({s, e}); }
    void on_run_end() override { ++run_ends; }
};

struct TempDir {
    fs::path path;
    explicit TempDir(const std::string& name)
        : path(fs::temp_directory_path() /
               ("ember-learner-" + name + "-" + std::to_string(::getpid()))) {
        fs::remove_all(path);
    }
    ~TempDir() { fs::remove_all(path); }
};

std::size_t count_lines(const fs::path& p) {
    std::ifstream in(p);
    std::size_t n = 0;
    std::string line;
    while (std::getline(in, line)) ++n;
    return n;
}

std::vector<double> read_values(const fs::path& p) {
    std::ifstream in(p);
    std::vector<double> out;
    double v;
    while (in >> v) out.push_back(v);
    return out;
}

TensorData weights(const Regressor<AD>& m) {
    return m.linear.weight.val().to_data();
}
TensorData bias(const Regressor<AD>& m) {
    return m.linear.bias->val().to_data();
}

// A regression run of `epochs` in `dir`, optionally resumed, with a renderer.
Regressor<AD> run_regression(const fs::path& dir, std::size_t epochs,
                             std::optional<std::size_t> resume = std::nullopt,
                             std::shared_ptr<Recorder> renderer = nullptr,
                             std::function<void(RegBuilder&)> extra = {}) {
    TinyLoader<AD> tl{grid()};
    TinyLoader<Cpu> vl{grid(8), 4, false};
    RegBuilder b(dir);
    b.metric_train_numeric(train::LossMetric<AD>{})
        .metric_valid_numeric(train::LossMetric<Cpu>{})
        .metric_train(train::LearningRateMetric{})
        .with_file_checkpointer(Rec{}, 2)
        .num_epochs(epochs)
        .seed(7)
        .renderer(renderer ? renderer : std::make_shared<Recorder>());
    if (resume) b.checkpoint(*resume);
    if (extra) extra(b);
    auto sched = ember::lr_scheduler::StepLrSchedulerConfig{0.05, 5, 0.5}.init();
    auto learner = b.build(regressor(), ember::optim::AdamConfig{}.init<Regressor<AD>>(), sched);
    return learner.fit(tl, vl);
}

}  // namespace

TEST_CASE("a classifier trained 3 epochs: loss falls, metrics and artifacts", "[learner]") {
    TempDir dir("cls");
    using Out = train::ClassificationOutput<AD>;
    using VOut = train::ClassificationOutput<Cpu>;
    auto renderer = std::make_shared<Recorder>();
    auto tl = std::make_shared<TinyLoader<AD>>(TinyLoader<AD>{grid()});
    TinyLoader<Cpu> vl{grid(12), 4, false};
    Classifier<AD> model{ember::nn::LinearConfig{2, 3}.init<AD>({})};
    auto learner = train::LearnerBuilder<Out, VOut>(dir.path)
                       .metric_train_numeric(train::LossMetric<AD>{})
                       .metric_train_numeric(train::AccuracyMetric<AD>{})
                       .metric_valid_numeric(train::LossMetric<Cpu>{})
                       .metric_valid(train::TopKAccuracyMetric<Cpu>(2))
                       .metric_valid_numeric(train::IterationSpeedMetric{})
                       .with_file_checkpointer(Rec{}, 2)
                       .num_epochs(3)
                       .renderer(renderer)
                       .summary()
                       .build(model, ember::optim::SgdConfig{}.init<Classifier<AD>>(), 0.5);
    auto trained = learner.fit(tl, vl);  // a shared_ptr loader works too

    // The loss falls epoch over epoch (training means over the epoch's 4 iterations).
    const auto& h = learner.history();
    const auto& loss = h.at(train::Split::Train).at("Loss");
    REQUIRE(loss.size() == 3);
    CHECK(loss[1] < loss[0]);
    CHECK(loss[2] < loss[1]);
    const auto& vloss = h.at(train::Split::Valid).at("Loss");
    CHECK(vloss[2] < vloss[0]);
    // The trained model's weights moved.
    CHECK_FALSE(trained.linear.weight.val().to_data() == model.linear.weight.val().to_data());

    // The loaders saw set_epoch(1..3).
    CHECK(tl->epochs_seen == std::vector<std::size_t>{1, 2, 3});

    // Renderer: 2 metrics × 4 iterations × 3 epochs in training, 3 × 3 × 3 in validation.
    CHECK(renderer->train_entries.size() == 24);
    CHECK(renderer->valid_entries.size() == 27);
    CHECK(renderer->run_ends == 1);
    REQUIRE(renderer->train_progress.size() == 12);
    const auto& p = renderer->train_progress[5];  // epoch 2, iteration 2
    CHECK(p.epoch == 2);
    CHECK(p.epoch_total == 3);
    CHECK(p.iteration == 2);
    CHECK(p.items_processed == 8);
    CHECK(p.items_total == 16);
    CHECK(p.global_iteration == 6);
    // TopK (registered with metric_valid) reaches the renderer as text only.
    bool saw_topk = false;
    for (const auto& e : renderer->valid_entries)
        if (e.name == "Top-2 Accuracy") {
            saw_topk = true;
            CHECK_FALSE(e.numeric);
            CHECK(e.formatted.find('%') != std::string::npos);
        }
    CHECK(saw_topk);
    CHECK(renderer->epoch_ends.size() == 6);

    // Artifacts in Burn's layout: one line per iteration.
    for (std::size_t e = 1; e <= 3; ++e) {
        const auto ep = "epoch-" + std::to_string(e);
        CHECK(count_lines(dir.path / "train" / ep / "Loss.log") == 4);
        CHECK(count_lines(dir.path / "train" / ep / "Accuracy.log") == 4);
        CHECK(count_lines(dir.path / "valid" / ep / "Loss.log") == 3);
        CHECK(count_lines(dir.path / "valid" / ep / "Top-2_Accuracy.log") == 3);
        CHECK(count_lines(dir.path / "valid" / ep / "Iteration_Speed.log") == 3);
    }
    // The logged values are the reported ones: their mean is the epoch mean.
    auto v = read_values(dir.path / "train" / "epoch-2" / "Loss.log");
    REQUIRE(v.size() == 4);
    CHECK((v[0] + v[1] + v[2] + v[3]) / 4 == Approx(loss[1]));
    // The report: metrics.csv holds every numeric line of the metric logs (a header, then one
    // row each), report.html the curves.
    std::size_t numeric_lines = 0;
    for (const auto& f : fs::recursive_directory_iterator(dir.path))
        if (f.path().extension() == ".log" && f.path().filename() != "experiment.log") {
            std::ifstream in(f.path());
            for (std::string line; std::getline(in, line);) {
                char* end = nullptr;
                std::strtod(line.c_str(), &end);
                numeric_lines += !line.empty() && *end == '\0';
            }
        }
    CHECK(numeric_lines >= 24 + 18);  // at least train's 2 × 12 and valid's Loss and speed 2 × 9
    CHECK(count_lines(dir.path / "metrics.csv") == 1 + numeric_lines);
    CHECK(fs::exists(dir.path / "report.html"));
    // Checkpoint retention: the last 2 epochs.
    const auto ck = dir.path / "checkpoint";
    for (const char* what : {"model", "optim", "scheduler"}) {
        CHECK_FALSE(fs::exists(ck / (std::string(what) + "-1.mpk.gz")));
        CHECK(fs::exists(ck / (std::string(what) + "-2.mpk.gz")));
        CHECK(fs::exists(ck / (std::string(what) + "-3.mpk.gz")));
    }
    // The checkpoint holds the returned model.
    auto loaded = Classifier<AD>{ember::nn::LinearConfig{2, 3}.init<AD>({})}.load_file(
        ck / "model-3", Rec{}, ember::Device<AD>{});
    CHECK(loaded.linear.weight.val().to_data() == trained.linear.weight.val().to_data());
    // experiment.log tells the story.
    std::ifstream log(dir.path / "experiment.log");
    std::stringstream ss;
    ss << log.rdbuf();
    CHECK(ss.str().find("training for 3 epochs") != std::string::npos);
    CHECK(ss.str().find("epoch 3/3 train: Accuracy") != std::string::npos);
    CHECK(ss.str().find("saved checkpoint 3") != std::string::npos);
    CHECK(ss.str().find("Learner summary") != std::string::npos);
}

TEST_CASE("precision, recall, F-score and perplexity in the Learner", "[learner][metrics]") {
    TempDir dir("cls-scores");
    using Out = train::ClassificationOutput<AD>;
    using VOut = train::ClassificationOutput<Cpu>;
    using R = train::ClassReduction;
    auto renderer = std::make_shared<Recorder>();
    TinyLoader<AD> tl{grid()};
    TinyLoader<Cpu> vl{grid(12), 4, false};
    Classifier<AD> model{ember::nn::LinearConfig{2, 3}.init<AD>({})};
    auto learner =
        train::LearnerBuilder<Out, VOut>(dir.path)
            .metric_valid_numeric(train::AccuracyMetric<Cpu>{})
            .metric_valid_numeric(train::PrecisionMetric<Cpu>::multiclass())
            .metric_valid_numeric(
                train::RecallMetric<Cpu>::multiclass().with_class_reduction(R::Micro))
            .metric_valid_numeric(
                train::FBetaScoreMetric<Cpu>::multiclass(1.0).with_class_reduction(R::Weighted))
            .metric_valid_numeric(train::PerplexityMetric<Cpu>{})
            .num_epochs(2)
            .renderer(renderer)
            .build(model, ember::optim::SgdConfig{}.init<Classifier<AD>>(), 0.5);
    learner.fit(tl, vl);
    const auto& valid = learner.history().at(train::Split::Valid);
    for (const char* name : {"Precision", "Recall", "FBetaScore", "Perplexity"}) {
        INFO(name);
        REQUIRE(valid.at(name).size() == 2);
        CHECK(count_lines(dir.path / "valid" / "epoch-2" / (std::string(name) + ".log")) == 3);
    }
    // Single-label top-1: micro recall counts the items whose best class is the target, which
    // is the accuracy, batch by batch and so over the epoch.
    CHECK(valid.at("Recall")[1] == Approx(valid.at("Accuracy")[1]));
    for (const char* name : {"Precision", "FBetaScore"}) {
        CHECK(valid.at(name)[1] >= 0.0);
        CHECK(valid.at(name)[1] <= 100.0);
    }
    CHECK(valid.at("Perplexity")[1] >= 1.0);
    bool shown = false;
    for (const auto& e : renderer->valid_entries)
        if (e.name == "FBetaScore") {
            shown = true;
            CHECK(e.formatted.find(" %") != std::string::npos);
        }
    CHECK(shown);
}

}  // namespace test_learner

// A step output decoded as text, as a sequence model's adaptor would: each item's best class
// and its target as one letter, so that the character error rate is the share of items wrong.
template <>
struct ember::train::Adaptor<ember::train::ClassificationOutput<ember::Cpu>,
                             ember::train::TextInput> {
    static TextInput adapt(const ClassificationOutput<Cpu>& o) {
        const auto best = o.output.argmax(1).to_data().to_vec<std::int64_t>();
        const auto truth = o.targets.to_data().to_vec<std::int64_t>();
        train::TextInput in;
        for (std::size_t i = 0; i < truth.size(); ++i) {
            in.predictions.emplace_back(1, char('a' + best[i]));
            in.references.emplace_back(1, char('a' + truth[i]));
        }
        return in;
    }
};

namespace test_learner {

TEST_CASE("AUROC, AUC-PR, text and machine metrics in the Learner", "[learner][metrics]") {
    TempDir dir("rank-text");
    using Out = train::ClassificationOutput<AD>;
    using VOut = train::ClassificationOutput<Cpu>;
    auto renderer = std::make_shared<Recorder>();
    TinyLoader<AD> tl{grid()};
    TinyLoader<Cpu> vl{grid(12), 4, false};
    Classifier<AD> model{ember::nn::LinearConfig{2, 3}.init<AD>({})};
    auto learner = train::LearnerBuilder<Out, VOut>(dir.path)
                       .metric_train(train::CudaMetric{})
                       .metric_train_numeric(train::CpuTemperature{})
                       .metric_valid_numeric(train::AccuracyMetric<Cpu>{})
                       .metric_valid_numeric(train::AurocMetric<Cpu>{})
                       .metric_valid_numeric(train::AucPrMetric<Cpu>{})
                       .metric_valid_numeric(train::CerMetric{})
                       .metric_valid_numeric(train::WerMetric{})
                       .metric_valid_numeric(train::BleuMetric(1))
                       .metric_valid_numeric(train::RougeLMetric{})
                       .num_epochs(2)
                       .renderer(renderer)
                       .build(model, ember::optim::SgdConfig{}.init<Classifier<AD>>(), 0.5);
    learner.fit(tl, vl);
    const auto& valid = learner.history().at(train::Split::Valid);
    for (const char* name : {"AUROC", "AUC-PR", "CER", "WER", "BLEU-1", "ROUGE-L"}) {
        INFO(name);
        REQUIRE(valid.at(name).size() == 2);
        CHECK(valid.at(name)[1] >= 0.0);
        CHECK(valid.at(name)[1] <= 100.0);
        CHECK(count_lines(dir.path / "valid" / "epoch-2" / (std::string(name) + ".log")) == 3);
    }
    // One letter per item: the error rates are the share of items wrong, and BLEU-1 and
    // ROUGE-L the share right (a batch's unigram precision; per item, all or nothing).
    CHECK(valid.at("CER")[1] == Approx(100.0 - valid.at("Accuracy")[1]));
    CHECK(valid.at("WER")[1] == Approx(100.0 - valid.at("Accuracy")[1]));
    CHECK(valid.at("ROUGE-L")[1] == Approx(valid.at("Accuracy")[1]));
    CHECK(valid.at("BLEU-1")[1] == Approx(valid.at("Accuracy")[1]));
    // The machine metrics show text; this machine's sensors decide which.
    std::size_t cuda = 0, temp = 0;
    for (const auto& e : renderer->train_entries) {
        if (e.name == "CUDA") {
            ++cuda;
            CHECK(!e.formatted.empty());
            CHECK_FALSE(e.numeric.has_value());
        }
        if (e.name == "CPU Temperature") {
            ++temp;
            CHECK((e.formatted == "unavailable" || e.formatted.find(" °C") != std::string::npos));
        }
    }
    CHECK(cuda == renderer->train_progress.size());
    CHECK(temp == renderer->train_progress.size());
}

TEST_CASE("keep_best_checkpoint keeps the best epoch besides the last", "[learner]") {
    using Out = train::ClassificationOutput<AD>;
    using VOut = train::ClassificationOutput<Cpu>;
    // Both directions on the validation loss: "Highest" keeps an early epoch for the whole run
    // (the loss falls), "Lowest" a late one; which epochs those are is read from the history.
    for (auto direction : {train::Direction::Highest, train::Direction::Lowest}) {
        const bool highest = direction == train::Direction::Highest;
        INFO((highest ? "Highest" : "Lowest"));
        TempDir dir(highest ? "best-high" : "best-low");
        TinyLoader<AD> tl{grid()};
        TinyLoader<Cpu> vl{grid(12), 4, false};
        auto learner = train::LearnerBuilder<Out, VOut>(dir.path)
                           .metric_valid_numeric(train::LossMetric<Cpu>{})
                           .with_file_checkpointer(Rec{}, 1)
                           .keep_best_checkpoint("Loss", train::Split::Valid, direction)
                           .num_epochs(4)
                           .renderer(std::make_shared<Recorder>())
                           .build(Classifier<AD>{ember::nn::LinearConfig{2, 3}.init<AD>({})},
                                  ember::optim::SgdConfig{}.init<Classifier<AD>>(), 0.5);
        learner.fit(tl, vl);
        const auto& loss = learner.history().at(train::Split::Valid).at("Loss");
        REQUIRE(loss.size() == 4);
        const auto it = highest ? std::max_element(loss.begin(), loss.end())
                                : std::min_element(loss.begin(), loss.end());
        const std::size_t best = std::size_t(it - loss.begin()) + 1;
        REQUIRE(learner.best_checkpoint().has_value());
        CHECK(*learner.best_checkpoint() == best);
        const auto ck = dir.path / "checkpoint";
        for (std::size_t e = 1; e <= 4; ++e) {
            INFO("epoch " << e);
            const bool kept = e == 4 || e == best;
            CHECK(fs::exists(ck / ("model-" + std::to_string(e) + ".mpk.gz")) == kept);
            CHECK(fs::exists(ck / ("checkpoint-" + std::to_string(e) + ".json")) == kept);
        }
    }
    SECTION("a resumed run knows the best epoch from the metric logs") {
        TempDir dir("best-resume");
        auto run = [&](std::size_t epochs, bool resume) {
            TinyLoader<AD> tl{grid()};
            TinyLoader<Cpu> vl{grid(12), 4, false};
            train::LearnerBuilder<Out, VOut> b(dir.path);
            b.metric_valid_numeric(train::LossMetric<Cpu>{})
                .with_file_checkpointer(Rec{}, 1)
                .keep_best_checkpoint("Loss", train::Split::Valid, train::Direction::Highest)
                .num_epochs(epochs)
                .renderer(std::make_shared<Recorder>());
            if (resume) b.resume();
            auto learner = b.build(Classifier<AD>{ember::nn::LinearConfig{2, 3}.init<AD>({})},
                                   ember::optim::SgdConfig{}.init<Classifier<AD>>(), 0.5);
            learner.fit(tl, vl);
            const auto& loss = learner.history().at(train::Split::Valid).at("Loss");
            return std::size_t(std::max_element(loss.begin(), loss.end()) - loss.begin()) + 1;
        };
        run(2, false);
        const std::size_t best = run(4, true);
        for (std::size_t e = 1; e <= 4; ++e) {
            INFO("epoch " << e);
            CHECK(fs::exists(dir.path / "checkpoint" /
                             ("checkpoint-" + std::to_string(e) + ".json")) ==
                  (e == 4 || e == best));
        }
    }
    SECTION("errors") {
        TempDir dir("best-errors");
        auto builder = [&] {
            return train::LearnerBuilder<Out, VOut>(dir.path)
                .metric_valid_numeric(train::LossMetric<Cpu>{})
                .renderer(std::make_shared<Recorder>());
        };
        auto model = Classifier<AD>{ember::nn::LinearConfig{2, 3}.init<AD>({})};
        auto sgd = ember::optim::SgdConfig{}.init<Classifier<AD>>();
        CHECK_THROWS_WITH(
            builder()
                .keep_best_checkpoint("Loss", train::Split::Valid, train::Direction::Lowest)
                .build(model, sgd, 0.5),
            Catch::Contains("keep_best_checkpoint") && Catch::Contains("checkpointer"));
        CHECK_THROWS_WITH(
            builder()
                .with_file_checkpointer(Rec{}, 1)
                .keep_best_checkpoint("Accuracy", train::Split::Valid, train::Direction::Highest)
                .build(model, sgd, 0.5),
            Catch::Contains("keep_best_checkpoint on 'Accuracy'"));
    }
}

TEST_CASE("a per-module learning rate in the Learner", "[learner]") {
    // The bias's group has rate 0: it ends where it started, the weight moves; the group's
    // schedule is in the optimizer's checkpoint and a resumed run continues it.
    TempDir dir("module-lr");
    using Out = train::ClassificationOutput<AD>;
    using VOut = train::ClassificationOutput<Cpu>;
    const auto model = Classifier<AD>{ember::nn::LinearConfig{2, 3}.init<AD>({})};
    auto run = [&](std::size_t epochs, bool resume) {
        TinyLoader<AD> tl{grid()};
        TinyLoader<Cpu> vl{grid(12), 4, false};
        train::LearnerBuilder<Out, VOut> b(dir.path);
        b.metric_valid_numeric(train::LossMetric<Cpu>{})
            .with_file_checkpointer(Rec{}, 2)
            .num_epochs(epochs)
            .renderer(std::make_shared<Recorder>());
        if (resume) b.resume();
        auto optim = ember::optim::with_module_lr(ember::optim::SgdConfig{}.init<Classifier<AD>>())
                         .with_group("linear.bias", 0.0);
        return b.build(model, optim, 0.5).fit(tl, vl);
    };
    auto trained = run(1, false);
    trained = run(2, true);
    CHECK(trained.linear.bias->val().to_data() == model.linear.bias->val().to_data());
    CHECK(trained.linear.weight.val().to_data() != model.linear.weight.val().to_data());
}

TEST_CASE("Evaluator: a test split after training", "[learner]") {
    TempDir dir("evaluator");
    using Out = train::ClassificationOutput<AD>;
    using VOut = train::ClassificationOutput<Cpu>;
    TinyLoader<AD> tl{grid()};
    TinyLoader<Cpu> vl{grid(10), 4, false};  // 10 items: the last batch has 2
    auto learner = train::LearnerBuilder<Out, VOut>(dir.path)
                       .metric_valid_numeric(train::AccuracyMetric<Cpu>{})
                       .metric_valid_numeric(train::LossMetric<Cpu>{})
                       .num_epochs(2)
                       .renderer(std::make_shared<Recorder>())
                       .build(Classifier<AD>{ember::nn::LinearConfig{2, 3}.init<AD>({})},
                              ember::optim::SgdConfig{}.init<Classifier<AD>>(), 0.5);
    auto trained = learner.fit(tl, vl);
    auto renderer = std::make_shared<Recorder>();
    auto evaluator = train::EvaluatorBuilder<VOut>(dir.path)
                         .metric_test_numeric(train::AccuracyMetric<Cpu>{})
                         .metric_test_numeric(train::LossMetric<Cpu>{})
                         .metric_test(train::CudaMetric{})
                         .renderer(renderer)
                         .build(trained.valid());
    // The validation set again: the same numbers as the last validation epoch, the same
    // item-weighted means.
    const auto r = evaluator.eval("again", vl);
    CHECK(r.name == "again");
    CHECK(r.items == 10);
    const auto& valid = learner.history().at(train::Split::Valid);
    CHECK(r.numeric.at("Accuracy") == Approx(valid.at("Accuracy")[1]));
    CHECK(r.numeric.at("Loss") == Approx(valid.at("Loss")[1]));
    CHECK(r.numeric.count("CUDA") == 0);  // a text metric: shown and logged only
    // Logs beside train/ and valid/, one line per batch.
    CHECK(count_lines(dir.path / "test" / "again" / "epoch-1" / "Accuracy.log") == 3);
    CHECK(count_lines(dir.path / "test" / "again" / "epoch-1" / "CUDA.log") == 3);
    CHECK(renderer->valid_entries.size() == 9);
    CHECK(renderer->valid_progress.size() == 3);
    // Another test set under another name.
    TinyLoader<Cpu> other{grid(6), 3, false};
    CHECK(evaluator.eval("other", other).items == 6);
    CHECK(fs::exists(dir.path / "test" / "other" / "epoch-1" / "Loss.log"));
    SECTION("errors") {
        CHECK_THROWS_WITH(evaluator.eval("a/b", vl), Catch::Contains("Evaluator::eval"));
        CHECK_THROWS_AS(evaluator.eval("", vl), ember::ArgumentError);
        CHECK_THROWS_AS(train::EvaluatorBuilder<VOut>(dir.path)
                            .metric_test_numeric(train::LossMetric<Cpu>{})
                            .metric_test_numeric(train::LossMetric<Cpu>{}),
                        ember::ArgumentError);
    }
}

TEST_CASE("epoch values are means over items, also when resumed", "[learner]") {
    // 10 items in batches of 4: the last batch has 2, and weighs half what the others do.
    TempDir dir("weighted");
    using Out = train::ClassificationOutput<AD>;
    using VOut = train::ClassificationOutput<Cpu>;
    auto run = [&](std::size_t epochs, std::optional<std::size_t> resume) {
        TinyLoader<AD> tl{grid(10)};
        TinyLoader<Cpu> vl{grid(10), 4, false};
        train::LearnerBuilder<Out, VOut> b(dir.path);
        b.metric_train_numeric(train::AccuracyMetric<AD>{})
            .metric_valid_numeric(train::AccuracyMetric<Cpu>{})
            .metric_valid_numeric(train::LossMetric<Cpu>{})
            .with_file_checkpointer(Rec{}, 3)
            .num_epochs(epochs)
            .seed(3)
            .renderer(std::make_shared<Recorder>());
        if (resume) b.checkpoint(*resume);
        auto learner = b.build(Classifier<AD>{ember::nn::LinearConfig{2, 3}.init<AD>({})},
                               ember::optim::SgdConfig{}.init<Classifier<AD>>(), 0.5);
        learner.fit(tl, vl);
        return learner.history();
    };
    const auto full = run(2, std::nullopt);
    for (const char* split : {"train", "valid"}) {
        INFO(split);
        const auto v = read_values(dir.path / split / "epoch-1" / "Accuracy.log");
        REQUIRE(v.size() == 3);
        // Per-batch accuracies are multiples of 1/4 (or 1/2); the epoch's is correct items / 10.
        const double expected = (4 * v[0] + 4 * v[1] + 2 * v[2]) / 10;
        const auto s = std::string(split) == "train" ? train::Split::Train : train::Split::Valid;
        CHECK(full.at(s).at("Accuracy")[0] == Approx(expected));
        const double correct = expected / 100 * 10;
        CHECK(correct == Approx(std::round(correct)));
    }
    // Resuming restores the earlier epochs' values from the logs, with the same weights.
    const auto resumed = run(2, 1);
    for (auto s : {train::Split::Train, train::Split::Valid})
        for (const auto& [name, values] : full.at(s)) {
            INFO(name);
            REQUIRE(resumed.at(s).at(name).size() == values.size());
            for (std::size_t e = 0; e < values.size(); ++e)
                CHECK(resumed.at(s).at(name)[e] == Approx(values[e]).epsilon(1e-12));
        }
}

TEST_CASE("resuming from a checkpoint is bit-identical to an uninterrupted run", "[learner]") {
    TempDir a("full"), b("resumed");
    auto full = run_regression(a.path, 3);
    run_regression(b.path, 2);
    auto resumed = run_regression(b.path, 3, 2);
    CHECK(weights(resumed) == weights(full));
    CHECK(bias(resumed) == bias(full));
    // And the metrics of epoch 3 are the same, value for value.
    for (const char* split : {"train", "valid"})
        CHECK(read_values(b.path / split / "epoch-3" / "Loss.log") ==
              read_values(a.path / split / "epoch-3" / "Loss.log"));
    // The run did move: epoch 3's training loss differs from epoch 1's.
    CHECK(read_values(a.path / "train" / "epoch-3" / "Loss.log") !=
          read_values(a.path / "train" / "epoch-1" / "Loss.log"));
}

TEST_CASE("an interrupted run resumes to the same final metrics", "[learner]") {
    TempDir a("ref"), b("stop");
    auto full = run_regression(a.path, 3);
    const auto ref_valid = read_values(a.path / "valid" / "epoch-3" / "Loss.log");

    auto stop_in_epoch_2 = [](train::Interrupter i, bool by_signal) {
        auto r = std::make_shared<Recorder>();
        r->hook = [i, by_signal](const train::TrainingProgress& p) mutable {
            if (p.epoch == 2 && p.iteration == 2) {
                if (by_signal)
                    std::raise(SIGINT);
                else
                    i.stop();
            }
        };
        return r;
    };
    for (bool by_signal : {false, true}) {
        DYNAMIC_SECTION((by_signal ? "SIGINT" : "interrupter.stop()") << " in epoch 2") {
            fs::remove_all(b.path);
            std::shared_ptr<Recorder> r;
            struct sigaction before {};
            sigaction(SIGINT, nullptr, &before);
            run_regression(b.path, 3, std::nullopt, nullptr, [&](RegBuilder& rb) {
                r = stop_in_epoch_2(rb.interrupter(), by_signal);
                rb.renderer(r);
            });
            // Stopped after iteration 2 of epoch 2: no validation, no checkpoint 2.
            CHECK(r->train_progress.back().epoch == 2);
            CHECK(r->train_progress.back().iteration == 2);
            CHECK(r->run_ends == 1);
            CHECK(fs::exists(b.path / "checkpoint" / "model-1.mpk.gz"));
            CHECK_FALSE(fs::exists(b.path / "checkpoint" / "model-2.mpk.gz"));
            CHECK_FALSE(fs::exists(b.path / "valid" / "epoch-2"));
            CHECK(count_lines(b.path / "train" / "epoch-2" / "Loss.log") == 2);
            // The Learner's SIGINT handler is gone after fit: the previous one is back.
            struct sigaction now {};
            sigaction(SIGINT, nullptr, &now);
            CHECK(now.sa_handler == before.sa_handler);

            auto resumed = run_regression(b.path, 3, 1);
            CHECK(read_values(b.path / "valid" / "epoch-3" / "Loss.log") == ref_valid);
            CHECK(count_lines(b.path / "train" / "epoch-2" / "Loss.log") == 4);
            CHECK(weights(resumed) == weights(full));
            CHECK(bias(resumed) == bias(full));
        }
    }
}

TEST_CASE("early stopping", "[learner]") {
    TempDir dir("early");
    TinyLoader<AD> tl{grid()};
    TinyLoader<Cpu> vl{grid(8), 4, false};
    auto make = [&](double lr, std::size_t patience, double min_delta) {
        fs::remove_all(dir.path);
        return RegBuilder(dir.path)
            .metric_valid_numeric(train::LossMetric<Cpu>{})
            .num_epochs(6)
            .renderer(std::make_shared<Recorder>())
            .early_stopping("Loss", train::Split::Valid, train::Direction::Lowest, min_delta,
                            patience)
            .build(regressor(0.0), ember::optim::SgdConfig{}.init<Regressor<AD>>(), lr);
    };
    SECTION("a learning rate of 0 never improves: stops after 1 + patience epochs") {
        auto learner = make(0.0, 2, 0.0);
        learner.fit(tl, vl);
        CHECK(fs::exists(dir.path / "valid" / "epoch-3"));
        CHECK_FALSE(fs::exists(dir.path / "valid" / "epoch-4"));
    }
    SECTION("an improving loss runs every epoch") {
        auto learner = make(0.05, 1, 0.0);
        learner.fit(tl, vl);
        CHECK(fs::exists(dir.path / "valid" / "epoch-6"));
    }
    SECTION("improvements smaller than min_delta do not count") {
        auto learner = make(1e-6, 1, 1.0);
        learner.fit(tl, vl);
        CHECK(fs::exists(dir.path / "valid" / "epoch-2"));
        CHECK_FALSE(fs::exists(dir.path / "valid" / "epoch-3"));
    }
    SECTION("the stopper counts epochs since the best one") {
        train::detail::EarlyStopper s(train::Direction::Highest, 0.5, 2);
        CHECK_FALSE(s.update(1, 10.0));
        CHECK_FALSE(s.update(2, 10.4));  // within min_delta: not better
        CHECK_FALSE(s.update(3, 11.0));  // better
        CHECK(s.best_epoch() == 3);
        CHECK_FALSE(s.update(4, 9.0));
        CHECK(s.update(5, 11.2));
    }
}

TEST_CASE("gradient accumulation equals the bigger batch", "[learner]") {
    TempDir a("big"), b("acc");
    auto fit = [](const fs::path& dir, std::size_t batch, std::size_t accumulation, double lr) {
        TinyLoader<AD> tl{grid(), batch};
        TinyLoader<Cpu> vl{grid(8), 4, false};
        auto model = regressor(0.0);
        auto learner = RegBuilder(dir)
                           .grads_accumulation(accumulation)
                           .num_epochs(2)
                           .seed(3)
                           .renderer(std::make_shared<Recorder>())
                           .build(model, ember::optim::SgdConfig{}.init<Regressor<AD>>(), lr);
        return learner.fit(tl, vl);
    };
    // MSE is a mean over the batch: two halves' gradients sum to twice the full batch's, so
    // half the learning rate gives the same update.
    auto big = fit(a.path, 8, 1, 0.1);
    auto acc = fit(b.path, 4, 2, 0.05);
    ember::test::check_close(weights(acc), weights(big), {1e-6, 1e-5});
    ember::test::check_close(bias(acc), bias(big), {1e-6, 1e-5});
    auto plain = fit(a.path, 4, 1, 0.05);
    CHECK_FALSE(weights(plain) == weights(acc));  // accumulation did change the trajectory
}

TEST_CASE("LearnerBuilder::autocast runs the steps in bf16 mixed precision",
          "[learner][autocast]") {
    TempDir a("f32"), b("bf16");
    auto fit = [](const fs::path& dir, bool bf16) {
        TinyLoader<AD> tl{grid(), 4};
        TinyLoader<Cpu> vl{grid(8), 4, false};
        auto builder = RegBuilder(dir);
        builder.num_epochs(2).seed(3).renderer(std::make_shared<Recorder>());
        if (bf16) builder.autocast(ember::DType::BF16);
        auto learner =
            builder.build(regressor(0.0), ember::optim::SgdConfig{}.init<Regressor<AD>>(), 0.1);
        return learner.fit(tl, vl);
    };
    const auto full = fit(a.path, false);
    const auto mixed = fit(b.path, true);
    CHECK(!ember::autocast_dtype());  // the policy was the steps' only
    // The parameters stay f32; the bf16 products moved them along another path, close to the
    // f32 one (bf16 keeps 8 significant bits).
    CHECK(mixed.linear.weight.val().dtype() == ember::DType::F32);
    CHECK_FALSE(weights(mixed) == weights(full));
    ember::test::check_close(weights(mixed), weights(full), {2e-2, 2e-2});
    ember::test::check_close(bias(mixed), bias(full), {2e-2, 2e-2});
    CHECK_THROWS_AS(RegBuilder(a.path).autocast(ember::DType::F32), ember::ArgumentError);
}

TEST_CASE("option errors, missing checkpoints and empty loaders", "[learner]") {
    TempDir dir("errors");
    auto optim = ember::optim::SgdConfig{}.init<Regressor<AD>>();
    CHECK_THROWS_AS(RegBuilder(""), ember::ArgumentError);
    CHECK_THROWS_AS(RegBuilder(dir.path).num_epochs(0), ember::ArgumentError);
    CHECK_THROWS_AS(RegBuilder(dir.path).grads_accumulation(0), ember::ArgumentError);
    CHECK_THROWS_AS(RegBuilder(dir.path).with_file_checkpointer(Rec{}, 0), ember::ArgumentError);
    CHECK_THROWS_AS(RegBuilder(dir.path).checkpoint(0), ember::ArgumentError);
    CHECK_THROWS_AS(RegBuilder(dir.path).renderer(nullptr), ember::ArgumentError);
    CHECK_THROWS_AS(RegBuilder(dir.path).with_metric_logger(nullptr, nullptr),
                    ember::ArgumentError);
    CHECK_THROWS_AS(RegBuilder(dir.path).devices(std::vector<ember::Device<AD>>{}),
                    ember::ArgumentError);
    CHECK_THROWS_AS(RegBuilder(dir.path).early_stopping("Loss", train::Split::Valid,
                                                        train::Direction::Lowest, -1, 1),
                    ember::ArgumentError);
    CHECK_THROWS_AS(RegBuilder(dir.path).early_stopping("Loss", train::Split::Valid,
                                                        train::Direction::Lowest, 0, 0),
                    ember::ArgumentError);
    CHECK_THROWS_AS(RegBuilder(dir.path)
                        .metric_train(train::LossMetric<AD>{})
                        .metric_train_numeric(train::LossMetric<AD>{}),
                    ember::ArgumentError);
    // Resuming needs a checkpointer, and a checkpoint within the run.
    CHECK_THROWS_AS(RegBuilder(dir.path).checkpoint(1).build(regressor(), optim, 0.1),
                    ember::ArgumentError);
    CHECK_THROWS_AS(
        RegBuilder(dir.path).with_file_checkpointer(Rec{}).num_epochs(2).checkpoint(3).build(
            regressor(), optim, 0.1),
        ember::ArgumentError);
    // Early stopping on a metric the split does not have (Loss is a training metric here).
    CHECK_THROWS_AS(RegBuilder(dir.path)
                        .metric_train_numeric(train::LossMetric<AD>{})
                        .early_stopping("Loss", train::Split::Valid, train::Direction::Lowest, 0, 1)
                        .build(regressor(), optim, 0.1),
                    ember::ArgumentError);
    // Devices of another backend.
    CHECK_THROWS_AS(
        RegBuilder(dir.path).devices(std::vector<int>{0}).build(regressor(), optim, 0.1),
        ember::ArgumentError);
    // Captured steps replay CUDA graphs: a model on the CPU is refused, naming the option.
    CHECK_THROWS_AS(RegBuilder(dir.path).capture_steps(true).build(regressor(), optim, 0.1),
                    ember::ArgumentError);
    CHECK_THROWS_WITH(RegBuilder(dir.path).capture_steps(true).build(regressor(), optim, 0.1),
                      Catch::Contains("capture_steps"));

    TinyLoader<AD> tl{grid()};
    TinyLoader<Cpu> vl{grid(8), 4, false};
    SECTION("a missing checkpoint names the file") {
        auto learner = RegBuilder(dir.path)
                           .with_file_checkpointer(Rec{})
                           .num_epochs(3)
                           .checkpoint(2)
                           .renderer(std::make_shared<Recorder>())
                           .build(regressor(), optim, 0.1);
        try {
            learner.fit(tl, vl);
            FAIL("no error");
        } catch (const ember::FormatError& e) {
            CHECK(std::string(e.what()).find("model-2.mpk.gz") != std::string::npos);
        }
    }
    SECTION("an empty loader") {
        TinyLoader<AD> empty{{}};
        auto learner = RegBuilder(dir.path)
                           .renderer(std::make_shared<Recorder>())
                           .build(regressor(), optim, 0.1);
        CHECK_THROWS_AS(learner.fit(empty, vl), ember::ArgumentError);
    }
}

TEST_CASE("the plain renderer and the file loggers", "[learner]") {
    std::ostringstream os;
    train::PlainRenderer r(os, 0.0);
    r.update_train({"Loss", "0.5000", 0.5, 0.5});
    r.render_train({1, 2, 1, 4, 8, 1});
    r.update_train({"Loss", "0.2500", 0.25, 0.375});
    r.render_train({1, 2, 2, 8, 8, 2});
    r.on_epoch_end(train::Split::Train, 1);
    r.update_valid({"Accuracy", "50.00 %", std::nullopt, std::nullopt});
    r.render_valid({1, 2, 1, 4, 4, 2});
    r.on_epoch_end(train::Split::Valid, 1);
    CHECK(os.str() ==
          "[train] epoch 1/2 iteration 1 items 4/8 | Loss 0.5000\n"
          "[train] epoch 1/2 iteration 2 items 8/8 | Loss 0.2500\n"
          "[train] epoch 1 done | Loss mean 0.375\n"
          "[valid] epoch 1/2 iteration 1 items 4/4 | Accuracy 50.00 %\n"
          "[valid] epoch 1 done | Accuracy 50.00 %\n");
    CHECK_THROWS_AS(train::PlainRenderer(os, -1.0), ember::ArgumentError);

    // With a long interval only the first and the last iteration of an epoch are printed.
    std::ostringstream quiet;
    train::PlainRenderer q(quiet, 3600.0);
    for (std::size_t i = 1; i <= 4; ++i) q.render_train({1, 1, i, i * 2, 8, i});
    CHECK(quiet.str() ==
          "[train] epoch 1/1 iteration 1 items 2/8\n[train] epoch 1/1 iteration 4 items 8/8\n");

    TempDir dir("logger");
    train::FileMetricLogger logger(dir.path);
    logger.start_epoch(1);
    logger.log({"Loss", "0.1", 0.1, std::nullopt});
    logger.log({"Top/5 Acc", "text only", std::nullopt, std::nullopt});
    logger.log({"Loss", "0.3", 1.0 / 3.0, std::nullopt});
    CHECK_FALSE(fs::exists(logger.file("Loss", 1)));  // written at the end of the epoch
    logger.end_epoch(1);
    CHECK(logger.file("Top/5 Acc", 1) == dir.path / "epoch-1" / "Top_5_Acc.log");
    std::ifstream in(logger.file("Top/5 Acc", 1));
    std::string line;
    std::getline(in, line);
    CHECK(line == "text only");
    auto back = logger.read_numeric("Loss", 1);
    REQUIRE(back);
    CHECK(*back == std::vector<double>{0.1, 1.0 / 3.0});  // exact round trip
    CHECK_FALSE(logger.read_numeric("Top/5 Acc", 1));
    CHECK_FALSE(logger.read_numeric("Loss", 2));
    logger.start_epoch(1);  // a restarted epoch forgets the old files
    CHECK_FALSE(fs::exists(logger.file("Loss", 1)));
}

// ---- issue 34: checkpoints complete or absent, the directory lock, Ctrl-C ------------------

namespace {

// A recorder that dies while saving the optimizer state of epoch `die_at`: what a kill between
// the checkpoint's files leaves on disk (model-N written, optim-N and the manifest not).
struct DyingRec : Rec {
    std::size_t die_at = 2;
    void record(const ember::record::Value& v, const fs::path& p) const {
        if (p.filename().string() == "optim-" + std::to_string(die_at))
            throw std::runtime_error("killed while writing " + p.string());
        Rec::record(v, p);
    }
};

}  // namespace

TEST_CASE("attack: a run killed between checkpoint files resumes from the newest complete one",
          "[learner][untrusted][hostile]") {
    TempDir a("ck-full"), b("ck-killed");
    const auto full = run_regression(a.path, 3);
    // The manifest of each kept checkpoint lists its three files.
    CHECK(fs::exists(a.path / "checkpoint" / "checkpoint-3.json"));
    CHECK(fs::exists(a.path / "checkpoint" / "checkpoint-2.json"));
    CHECK_FALSE(fs::exists(a.path / "checkpoint" / "checkpoint-1.json"));
    CHECK(train::latest_checkpoint(a.path) == std::optional<std::size_t>(3));

    CHECK_THROWS_WITH(
        run_regression(b.path, 3, std::nullopt, nullptr,
                       [](RegBuilder& rb) { rb.with_file_checkpointer(DyingRec{}, 2); }),
        Catch::Contains("killed while writing"));
    const fs::path ck = b.path / "checkpoint";
    CHECK(fs::exists(ck / "model-2.mpk.gz"));
    CHECK_FALSE(fs::exists(ck / "checkpoint-2.json"));
    // What a kill during a write leaves: a temporary file.
    const fs::path stale = ck / ".optim-2.mpk.gz.tmp-0123456789abcdef";
    std::ofstream(stale) << "half a record";
    // Checkpoint 2 is not complete; 1 is the newest that is.
    CHECK(train::latest_checkpoint(b.path) == std::optional<std::size_t>(1));
    CHECK_THROWS_WITH(run_regression(b.path, 3, 2),
                      Catch::Contains("cannot resume from checkpoint 2: it is incomplete") &&
                          Catch::Contains("the newest complete checkpoint is 1"));
    // resume() takes checkpoint 1, removes the leftovers, and ends where the unbroken run did.
    const auto resumed =
        run_regression(b.path, 3, std::nullopt, nullptr, [](RegBuilder& rb) { rb.resume(); });
    CHECK_FALSE(fs::exists(stale));
    CHECK(weights(resumed) == weights(full));
    CHECK(bias(resumed) == bias(full));
    CHECK(train::latest_checkpoint(b.path) == std::optional<std::size_t>(3));
    // A checkpoint whose file was swapped for one of another size is not complete either.
    std::ofstream(ck / "scheduler-3.mpk.gz", std::ios::app) << "x";
    CHECK(train::latest_checkpoint(b.path) == std::optional<std::size_t>(2));
}

TEST_CASE("checkpoint directories written before manifests still resume", "[learner]") {
    TempDir a("legacy-full"), b("legacy");
    const auto full = run_regression(a.path, 3);
    run_regression(b.path, 2);
    for (const auto& e : fs::directory_iterator(b.path / "checkpoint"))
        if (e.path().extension() == ".json") fs::remove(e.path());
    CHECK(train::latest_checkpoint(b.path) == std::optional<std::size_t>(2));
    const auto resumed =
        run_regression(b.path, 3, std::nullopt, nullptr, [](RegBuilder& rb) { rb.resume(); });
    CHECK(weights(resumed) == weights(full));
}

namespace {

// A process that holds `file`'s flock until killed, as another run would.
struct LockHolder {
    pid_t pid = -1;
    explicit LockHolder(const fs::path& file) {
        int ready[2];
        REQUIRE(::pipe(ready) == 0);
        pid = ::fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {  // only async-signal-safe calls between fork and _exit
            const int fd = ::open(file.c_str(), O_RDWR | O_CREAT, 0644);
            if (fd < 0 || ::flock(fd, LOCK_EX) != 0) ::_exit(1);
            const char pidtext[] = "4242\n";
            if (::pwrite(fd, pidtext, sizeof pidtext - 1, 0) < 0) ::_exit(1);
            if (::write(ready[1], "x", 1) != 1) ::_exit(1);
            for (;;) ::pause();
        }
        ::close(ready[1]);
        char c = 0;
        REQUIRE(::read(ready[0], &c, 1) == 1);
        ::close(ready[0]);
    }
    void crash() {
        if (pid > 0) {
            ::kill(pid, SIGKILL);
            ::waitpid(pid, nullptr, 0);
            pid = -1;
        }
    }
    ~LockHolder() { crash(); }
};

// Whether another process could take `dir`'s lock now (flock(1), util-linux).
bool lockable_from_outside(const fs::path& dir) {
    const std::string cmd = "flock -n '" + (dir / ".lock").string() + "' true";
    return std::system(cmd.c_str()) == 0;
}

}  // namespace

TEST_CASE("attack: two runs in one artifact directory: the second is refused",
          "[learner][untrusted][hostile]") {
    TempDir dir("locked");
    fs::create_directories(dir.path);
    TinyLoader<AD> tl{grid()};
    TinyLoader<Cpu> vl{grid(8), 4, false};
    auto build = [&] {
        return RegBuilder(dir.path)
            .with_file_checkpointer(Rec{})
            .renderer(std::make_shared<Recorder>())
            .build(regressor(), ember::optim::SgdConfig{}.init<Regressor<AD>>(), 0.1);
    };
    {
        // Another process runs in the directory: this one stops before writing anything.
        LockHolder other(dir.path / ".lock");
        CHECK_THROWS_WITH(build(), Catch::Contains("is in use by another run (process 4242") &&
                                       Catch::Contains(dir.path.string()));
        CHECK_THROWS_AS(train::ArtifactLock(dir.path), ember::ArgumentError);
        CHECK_FALSE(fs::exists(dir.path / "experiment.log"));
        // The other run dies (kill -9): the kernel releases its lock.
        other.crash();
        auto learner = build();
        // Now this run holds it: a third process is refused, until this Learner is gone.
        CHECK_FALSE(lockable_from_outside(dir.path));
        learner.fit(tl, vl);
        CHECK_FALSE(lockable_from_outside(dir.path));
        // In one process the lock is shared (a program locks before writing its config, then
        // builds its Learner).
        const train::ArtifactLock again(dir.path);
        CHECK(again.dir() == dir.path);
    }
    CHECK(lockable_from_outside(dir.path));
}

TEST_CASE("attack: Ctrl-C ends training with exit status 130", "[learner][untrusted][hostile]") {
    TempDir dir("sigint");
    train::Interrupter interrupter;
    run_regression(dir.path, 3, std::nullopt, nullptr, [&](RegBuilder& rb) {
        interrupter = rb.interrupter();
        auto r = std::make_shared<Recorder>();
        r->hook = [](const train::TrainingProgress& p) {
            if (p.epoch == 2 && p.iteration == 1) std::raise(SIGINT);
        };
        rb.renderer(r);
    });
    CHECK(interrupter.should_stop());
    CHECK(interrupter.signal() == SIGINT);
    CHECK(interrupter.exit_status() == 130);
    // stop() from code is not a signal: the program ends normally.
    train::Interrupter quiet;
    quiet.stop();
    CHECK(quiet.exit_status() == 0);
    quiet.stop_by_signal(SIGTERM);
    CHECK(quiet.exit_status() == 143);
    quiet.reset();
    CHECK(quiet.signal() == 0);
}

TEST_CASE("attack: an empty test set is an error, not an accuracy of nan", "[learner][untrusted][hostile]") {
    TempDir dir("empty-valid");
    TinyLoader<AD> tl{grid()};
    TinyLoader<Cpu> empty{{}, 4, false};
    auto learner = RegBuilder(dir.path)
                       .renderer(std::make_shared<Recorder>())
                       .build(regressor(), ember::optim::SgdConfig{}.init<Regressor<AD>>(), 0.1);
    CHECK_THROWS_WITH(learner.fit(tl, empty),
                      Catch::Contains("the validation loader is empty (0 items, 0 batches)"));
    // An accuracy over no items is 0, never NaN.
    train::AccuracyMetric<Cpu> acc;
    const auto e = acc.update(
        {Tensor<Cpu, 2>::from_data(TensorData(std::vector<float>{}, {0, 3}), {}),
         Tensor<Cpu, 1, Int>::from_data(TensorData(std::vector<std::int64_t>{}, {0}), {})},
        {});
    REQUIRE(e.numeric);
    CHECK(*e.numeric == 0.0);
    CHECK(e.formatted.find("nan") == std::string::npos);
}

TEST_CASE("attack: kill -9 between a checkpoint's files: resume takes the newest complete one",
          "[learner][untrusted][hostile]") {
#ifndef EMBER_LEARNER_DRIVER
    WARN("the learner driver is not built: skipping");
#else
    const std::string driver = EMBER_LEARNER_DRIVER;
    if (!fs::exists(driver)) {
        WARN("the learner driver is missing: skipping");
        return;
    }
    TempDir a("kill-ref"), b("kill");
    auto run = [&](const fs::path& dir, const std::string& args) {
        const std::string cmd = "'" + driver + "' '" + dir.string() + "' 3 " + args + " >/dev/null";
        return std::system(cmd.c_str());
    };
    REQUIRE(run(a.path, "") == 0);  // the run never interrupted

    // The same run, stalled after checkpoint 2's model file and killed there with SIGKILL.
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        const std::string d = b.path.string();
        const int null = ::open("/dev/null", O_WRONLY);
        if (null >= 0) ::dup2(null, STDOUT_FILENO);
        ::execl(driver.c_str(), driver.c_str(), d.c_str(), "3", "--stall-at", "2", (char*)nullptr);
        ::_exit(127);
    }
    bool stalled = false;
    for (int i = 0; i < 600 && !stalled; ++i) {
        stalled = fs::exists(b.path / "stalled");
        if (!stalled) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    CHECK(stalled);
    CHECK_FALSE(lockable_from_outside(b.path));  // the run holds its directory
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    REQUIRE(WIFSIGNALED(status));
    const fs::path ck = b.path / "checkpoint";
    CHECK(fs::exists(ck / "model-2.mpk.gz"));
    CHECK_FALSE(fs::exists(ck / "optim-2.mpk.gz"));
    CHECK_FALSE(fs::exists(ck / "checkpoint-2.json"));
    CHECK(train::latest_checkpoint(b.path) == std::optional<std::size_t>(1));
    CHECK(lockable_from_outside(b.path));  // the kernel let go of the dead run's lock

    // --resume goes on from checkpoint 1 and ends where the unbroken run ended.
    REQUIRE(run(b.path, "--resume") == 0);
    // The parameters, bit for bit (their ids are drawn per process).
    auto param = [](const fs::path& file, const char* name) {
        return Rec{}.load(file).at("linear").at(name).at("param");
    };
    CHECK(param(b.path / "final", "weight") == param(a.path / "final", "weight"));
    CHECK(param(b.path / "final", "bias") == param(a.path / "final", "bias"));
    CHECK(train::latest_checkpoint(b.path) == std::optional<std::size_t>(3));
#endif
}

// ---- the Learner on ember::Dispatch --------------------------------------------------------

namespace {
// A classifier with the two steps by name, as models on Dispatch need them; valid_step records
// whether its weights carried autodiff (on Dispatch that is the device's switch).
template <ember::Backend B>
struct NamedStepsClassifier {
    ember::nn::Linear<B> linear;
    EMBER_MODULE(NamedStepsClassifier, linear)
    static inline int valid_calls = 0;
    static inline int valid_calls_with_autodiff = 0;

    train::ClassificationOutput<B> forward(const Batch<B>& b) const {
        auto out = linear.forward(b.x);
        auto loss = ember::nn::loss::CrossEntropyLossConfig{}.init<B>().forward(out, b.classes);
        return {loss, out, b.classes};
    }
    train::TrainOutput<train::ClassificationOutput<B>> step(
        const Batch<B>& b) const requires ember::AutodiffBackend<B> {
        auto item = forward(b);
        return {*this, item.loss.backward(), std::move(item)};
    }
    train::ClassificationOutput<B> valid_step(const Batch<B>& b) const {
        ++valid_calls;
        if constexpr (std::is_same_v<B, ember::Dispatch>)
            valid_calls_with_autodiff += linear.weight.val().device().has_autodiff();
        return forward(b);
    }
};

// Three epochs of SGD on the grid from fixed weights, on training backend B (validation on
// its inner backend, on `device` without autodiff); the history of the run.
template <ember::AutodiffBackend B>
train::detail::MetricHistory dispatch_run(const fs::path& dir, const ember::Device<B>& device,
                                          double* evaluated_loss = nullptr) {
    using I = typename B::InnerBackend;
    using M = NamedStepsClassifier<B>;
    M model{ember::nn::LinearConfig{2, 3}.init<B>(device)};
    model.linear.weight = ember::Param<Tensor<B, 2>>(Tensor<B, 2>::from_data(
        TensorData(std::vector<float>{0.1f, -0.2f, 0.3f, 0.05f, 0.4f, -0.1f}, {2, 3}), device));
    model.linear.bias =
        ember::Param<Tensor<B, 1>>(Tensor<B, 1>::from_floats({0.f, 0.1f, -0.1f}, device));
    TinyLoader<B> tl{grid()};
    TinyLoader<I> vl{grid(12), 4, false};
    auto learner =
        train::LearnerBuilder<train::ClassificationOutput<B>, train::ClassificationOutput<I>>(dir)
            .metric_train_numeric(train::LossMetric<B>{})
            .metric_valid_numeric(train::LossMetric<I>{})
            .metric_valid_numeric(train::AccuracyMetric<I>{})
            .num_epochs(3)
            .seed(3)
            .renderer(std::make_shared<Recorder>())
            .build(model, ember::optim::SgdConfig{}.init<M>(), 0.5);
    auto trained = learner.fit(tl, vl);
    if (evaluated_loss) {
        // The Evaluator runs the same validation step (valid_step) over the same batches.
        auto evaluator = train::EvaluatorBuilder<train::ClassificationOutput<I>>(dir)
                             .metric_test_numeric(train::LossMetric<I>{})
                             .build(trained.valid());
        *evaluated_loss = evaluator.eval("test", vl).numeric.at("Loss");
    }
    return learner.history();
}
}  // namespace

TEST_CASE("the Learner trains a model on ember::Dispatch and validates it with valid_step",
          "[learner][dispatch]") {
    using ember::Dispatch;
    TempDir a("dispatch"), b("dispatch-concrete");
    NamedStepsClassifier<Dispatch>::valid_calls = 0;
    double evaluated = 0;
    const auto on_dispatch =
        dispatch_run<Dispatch>(a.path, ember::DispatchDevice::parse("cpu+autodiff"), &evaluated);
    // 3 epochs of 3 validation batches and the Evaluator's 3, each through valid_step on the
    // model of valid(): the same type, on the CPU without autodiff.
    CHECK(NamedStepsClassifier<Dispatch>::valid_calls == 12);
    CHECK(NamedStepsClassifier<Dispatch>::valid_calls_with_autodiff == 0);
    const auto& loss = on_dispatch.at(train::Split::Train).at("Loss");
    REQUIRE(loss.size() == 3);
    CHECK(loss[2] < loss[0]);
    // The Evaluator's loss over the validation set is the last validation epoch's.
    CHECK(evaluated == Approx(on_dispatch.at(train::Split::Valid).at("Loss").back()));
    // The same run on the concrete stack Dispatch's "cpu+autodiff" names (the validation step
    // found by the same name there) gives the same history: Dispatch only forwards the ops.
    const auto concrete = dispatch_run<AD>(b.path, {});
    CHECK(NamedStepsClassifier<Cpu>::valid_calls == 9);
    for (auto split : {train::Split::Train, train::Split::Valid})
        for (const auto& [name, values] : concrete.at(split)) {
            INFO(name);
            REQUIRE(on_dispatch.at(split).at(name).size() == values.size());
            for (std::size_t e = 0; e < values.size(); ++e)
                CHECK(on_dispatch.at(split).at(name)[e] == Approx(values[e]).epsilon(1e-6));
        }
    // Training on a device without autodiff: backward says which device to use.
    TempDir c("dispatch-no-autodiff");
    CHECK_THROWS_WITH(dispatch_run<Dispatch>(c.path, ember::DispatchDevice::cpu()),
                      Catch::Contains("cpu+autodiff"));
}

}  // namespace test_learner
