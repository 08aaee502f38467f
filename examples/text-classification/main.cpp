// Text classification: which category of Debian's fortune files a fortune comes from, learnt by
// a small transformer over characters with the Learner (Accuracy and Loss metrics), saved, then
// loaded again to classify new texts. It runs on ember::Dispatch, on the device --backend names.
//
//   text-classification train [--epochs N] [--limit N] [--artifact-dir DIR] [--backend B] ...
//                                                                            (see --help)
//   text-classification infer [--artifact-dir DIR] [--backend B] [TEXT ...]
#include <ember/data/text.hpp>
// The modules, losses and optimizers with their Dispatch instances compiled in ember_dispatch.
#include <ember/dispatch/nn.hpp>
#include <ember/dispatch/train.hpp>  // the Learner, its Dispatch instances extern
#include <ember/record.hpp>
#include <ember/train/plain_renderer.hpp>

#include <charconv>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "../backend.hpp"
#include "../cli.hpp"
#include "data.hpp"
#include "model.hpp"

namespace fs = std::filesystem;
namespace train = ember::train;

namespace text_classification {

/// What `train` was run with; saved beside the model so that `infer` rebuilds the same model
/// and the same tokenizer.
struct ExperimentConfig {
    TextClassifierConfig model;           ///< the classifier (n_classes, vocab_size set by train)
    std::vector<std::string> categories;  ///< category names, by label
    std::vector<int> vocab;               ///< the tokenizer's bytes, in token order
    std::size_t num_epochs = 8;           ///< epochs to train
    std::size_t batch_size = 32;          ///< fortunes per batch
    std::size_t limit = 0;                ///< training fortunes used (0: all)
    std::size_t num_workers = 1;          ///< data loader threads
    std::uint64_t seed = 42;              ///< initialisation, split, shuffling and dropout
    double learning_rate = 1e-3;          ///< Adam's learning rate
    ember::optim::AdamConfig optimizer = ember::optim::AdamConfig{}.with_epsilon(1e-8);
    EMBER_CONFIG(ExperimentConfig, model, categories, vocab, num_epochs, batch_size, limit,
                 num_workers, seed, learning_rate, optimizer)
};

using Recorder = ember::record::NamedMpkFileRecorder<ember::record::FullPrecisionSettings>;

// Four categories with plenty of fortunes each and distinct subjects.
const std::vector<std::string> kDefaultCategories = {"computers", "food", "politics", "startrek"};

// Texts for `infer` when none are given: one in the spirit of each default category.
const std::vector<std::string> kSampleTexts = {
    "The program crashed again: the compiler says my pointer points to nothing.",
    "Nothing beats a slice of apple pie with a cup of coffee after dinner.",
    "The senator promised lower taxes, and the voters believed him once more.",
    "Captain, the Klingons are firing on the Enterprise! Shields at forty percent.",
    "A bug in the kernel took the whole network down on Monday morning.",
    "Eat your vegetables, and save some room for dessert.",
};

struct Options {
    std::string command;
    ExperimentConfig config;
    fs::path artifact_dir = "artifacts/text-classification";
    std::string backend = "cpu";
    std::optional<std::size_t> threads;
    bool plain = false;
    std::vector<std::string> texts;  // infer: what to classify
};

Options parse(int argc, char** argv) {
    Options o;
    o.config.categories = kDefaultCategories;
    CLI::App app{"Tells which of Debian's fortune files a fortune comes from.",
                 "text-classification"};
    ember_examples::setup(app);
    app.require_subcommand(1, 1);
    auto* train_cmd = app.add_subcommand("train", "train and save a classifier of fortunes");
    auto* infer_cmd = app.add_subcommand("infer", "load it and classify texts");
    auto& c = o.config;
    train_cmd->add_option("--epochs", c.num_epochs, "epochs to train")->check(ember_examples::positive);
    train_cmd->add_option("--limit", c.limit, "train on N fortunes only (0: all of the split)")
        ->check(ember_examples::non_negative);
    train_cmd->add_option("--categories", c.categories, "the fortune files to tell apart")
        ->delimiter(',')
        ->expected(2, CLI::detail::expected_max_vector_size);
    train_cmd->add_option("--batch-size", c.batch_size, "fortunes per batch")
        ->check(ember_examples::positive);
    train_cmd->add_option("--lr", c.learning_rate, "Adam's learning rate")
        ->check(ember_examples::positive);
    train_cmd->add_option("--seed", c.seed, "the run's seed");
    train_cmd->add_flag("--plain", o.plain, "plain line output even on a terminal");
    infer_cmd->add_option("texts", o.texts, "texts to classify (default: a few samples)");
    std::vector<const CLI::Option*> backends;
    for (auto* cmd : {train_cmd, infer_cmd}) {
        cmd->add_option("--threads", o.threads, "CPU backend threads (default: EMBER_NUM_THREADS or all)")
            ->check(ember_examples::positive);
        cmd->add_option("--artifact-dir", o.artifact_dir, "where the logs, config and model go");
        backends.push_back(ember_examples::add_backend_option(cmd, o.backend));
    }
    ember_examples::parse_or_exit(app, argc, argv);
    ember_examples::backend_from_env(app, {backends[0], backends[1]}, o.backend);
    o.command = train_cmd->parsed() ? "train" : "infer";
    return o;
}

// Trains; returns the exit status (130 when Ctrl-C stopped the run).
int train_model(Options& o) {
    using B = ember::Dispatch;
    using Inner = B::InnerBackend;
    ExperimentConfig& c = o.config;
    // Training records the graph (autodiff); validation runs on the same device without.
    const auto valid_device = ember_examples::backend_device_of(o.backend);
    const auto device = valid_device.autodiff(true);

    const auto fortunes = ember::data::FortunesDataset().filter_categories(c.categories);
    c.categories = fortunes.categories();  // sorted, as the labels are
    const auto tokenizer = std::make_shared<const ember::data::CharTokenizer>(fortunes.corpus());
    c.vocab.assign(tokenizer->vocab().begin(), tokenizer->vocab().end());
    for (int& b : c.vocab) b = int(static_cast<unsigned char>(b));
    c.model.n_classes = c.categories.size();
    c.model.vocab_size = tokenizer->vocab_size() + 1;  // + the pad token

    // The split is stratified but keeps category order: shuffle before taking a --limit.
    auto [train_split, test_split] = fortunes.split(0.8, c.seed);
    const auto shuffled = ember::data::ShuffledDataset(train_split, c.seed);
    const std::size_t n_train = c.limit == 0 ? shuffled.len() : std::min(c.limit, shuffled.len());
    // Locked before the config is written: a second run in this directory stops here. The
    // Learner shares the lock.
    const train::ArtifactLock lock(o.artifact_dir);
    c.save(o.artifact_dir / "config.json");
    B::seed(c.seed);

    auto train_loader =
        ember::data::DataLoaderBuilder(TextBatcher<B>{tokenizer, c.model.max_seq_length})
            .batch_size(c.batch_size)
            .set_device(device)
            .shuffle(c.seed)
            .num_workers(c.num_workers)
            .build(ember::data::PartialDataset(shuffled, 0, n_train));
    auto valid_loader =
        ember::data::DataLoaderBuilder(TextBatcher<Inner>{tokenizer, c.model.max_seq_length})
            .batch_size(64)
            .set_device(valid_device)
            .num_workers(c.num_workers)
            .build(ember::data::ShuffledDataset(test_split, c.seed));
    std::printf("categories:");
    for (const auto& name : c.categories) std::printf(" %s", name.c_str());
    std::printf("\n%zu training fortunes, %zu test fortunes, %zu tokens (with padding)\n", n_train,
                test_split.len(), c.model.vocab_size);

    using TrainItem = train::ClassificationOutput<B>;
    using ValidItem = train::ClassificationOutput<Inner>;
    train::LearnerBuilder<TrainItem, ValidItem> builder(o.artifact_dir);
    builder.metric_train_numeric(train::AccuracyMetric<B>{})
        .metric_valid_numeric(train::AccuracyMetric<Inner>{})
        .metric_train_numeric(train::LossMetric<B>{})
        .metric_valid_numeric(train::LossMetric<Inner>{})
        .num_epochs(c.num_epochs)
        .seed(c.seed)
        .summary();
    if (o.plain) builder.renderer(std::make_shared<train::PlainRenderer>());
    auto model = c.model.init<B>(device);
    std::printf("model: %zu parameters\n", model.num_params());
    auto learner = builder.build(std::move(model), c.optimizer.template init<TextClassifier<B>>(),
                                 c.learning_rate);

    const auto start = std::chrono::steady_clock::now();
    auto trained = learner.fit(train_loader, valid_loader);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (learner.interrupter().should_stop()) {
        // Checkpoints hold the completed epochs; 130 after Ctrl-C, as shells expect.
        std::printf("interrupted after %.1f s: the checkpoints hold the completed epochs\n",
                    seconds);
        return learner.interrupter().exit_status();
    }
    trained.valid().save_file(o.artifact_dir / "model", Recorder{});

    const auto& history = learner.history();
    const auto& train_loss = history.at(train::Split::Train).at("Loss");
    const auto& train_acc = history.at(train::Split::Train).at("Accuracy");
    const auto& valid_loss = history.at(train::Split::Valid).at("Loss");
    const auto& valid_acc = history.at(train::Split::Valid).at("Accuracy");
    std::printf("\nepoch  train loss  train acc  test loss  test acc\n");
    for (std::size_t e = 0; e < valid_acc.size(); ++e)
        std::printf("%5zu  %10.4f  %7.2f %%  %9.4f  %6.2f %%\n", e + 1, train_loss[e], train_acc[e],
                    valid_loss[e], valid_acc[e]);
    std::printf("trained in %.1f s; model saved to %s\n", seconds,
                (o.artifact_dir / "model.mpk").string().c_str());

    // The Learner's epoch figures are means over batches; count the final model's hits exactly,
    // per category, since a majority category can hide a classifier that ignores the others.
    const auto eval = trained.valid();
    std::vector<std::size_t> hits(c.categories.size()), counts(c.categories.size());
    for (const auto& batch : valid_loader.iter()) {
        const auto predicted = eval.forward(batch.tokens, batch.mask_pad)
                                   .argmax(1)
                                   .into_data()
                                   .template to_vec<std::int64_t>();
        const auto targets = batch.targets.to_data().template to_vec<std::int64_t>();
        for (std::size_t i = 0; i < targets.size(); ++i) {
            ++counts[std::size_t(targets[i])];
            hits[std::size_t(targets[i])] += predicted[i] == targets[i];
        }
    }
    std::size_t all_hits = 0, all = 0;
    std::printf("test accuracy by category:");
    for (std::size_t j = 0; j < counts.size(); ++j) {
        // A category absent from the test set has no accuracy ("-", not "nan %").
        if (counts[j] == 0)
            std::printf(" %s - (0/0)%s", c.categories[j].c_str(),
                        j + 1 < counts.size() ? "," : "\n");
        else
            std::printf(" %s %.1f %% (%zu/%zu)%s", c.categories[j].c_str(),
                        100.0 * double(hits[j]) / double(counts[j]), hits[j], counts[j],
                        j + 1 < counts.size() ? "," : "\n");
        all_hits += hits[j];
        all += counts[j];
    }
    if (all == 0)
        std::printf("test accuracy: - (the test set is empty)\n");
    else
        std::printf("test accuracy: %.2f %% (%zu/%zu)\n", 100.0 * double(all_hits) / double(all),
                    all_hits, all);
    return 0;
}

void infer(const Options& o) {
    using B = ember::Dispatch;
    const auto device = ember_examples::backend_device_of(o.backend);
    const auto c = ExperimentConfig::load(o.artifact_dir / "config.json");
    std::string bytes;
    for (int b : c.vocab) bytes.push_back(char(b));
    // The vocabulary string is itself a corpus with each byte once: the same tokens again.
    const auto tokenizer = std::make_shared<const ember::data::CharTokenizer>(bytes);
    const auto model =
        c.model.init<B>(device).load_file(o.artifact_dir / "model", Recorder{}, device);

    const auto& texts = o.texts.empty() ? kSampleTexts : o.texts;
    std::vector<ember::data::FortuneItem> items;
    for (const auto& t : texts) items.push_back({t, "", 0});
    const auto batch = TextBatcher<B>{tokenizer, c.model.max_seq_length}.batch(items, device);
    const auto probs = ember::activation::softmax(model.forward(batch.tokens, batch.mask_pad), 1)
                           .into_data()
                           .to_vec<float>();
    const std::size_t k = c.categories.size();
    for (std::size_t i = 0; i < texts.size(); ++i) {
        std::size_t best = 0;
        for (std::size_t j = 1; j < k; ++j)
            if (probs[i * k + j] > probs[i * k + best]) best = j;
        std::printf("%-10s %5.1f %%  %s\n", c.categories[best].c_str(), 100.0 * probs[i * k + best],
                    texts[i].c_str());
    }
}

int run(int argc, char** argv) {
    Options o = parse(argc, argv);
    if (o.threads) ember::cpu::set_num_threads(*o.threads);
    if (o.command == "infer") {
        infer(o);
        return 0;
    }
    return train_model(o);
}

}  // namespace text_classification

int main(int argc, char** argv) {
    try {
        return text_classification::run(argc, argv);
    } catch (const ember::Error& e) {
        std::cerr << "text-classification: " << e.what() << '\n';
        return 1;
    }
}
