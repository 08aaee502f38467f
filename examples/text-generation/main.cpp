// Text generation: a character-level causal transformer trained on the fortunes corpus with the
// Learner, saved, then sampled one character at a time from a prompt. It runs on ember::Dispatch,
// on the device --backend names.
//
//   text-generation train [--epochs N] [--limit N] [--artifact-dir DIR] [--prompt S] ...
//   text-generation generate [--artifact-dir DIR] [--prompt S] [--length N]
//                            [--temperature X] [--seed N] [--backend B]
#include <ember/data/text.hpp>
// The modules, losses and optimizers with their Dispatch instances compiled in ember_dispatch.
#include <ember/dispatch/nn.hpp>
#include <ember/dispatch/train.hpp>  // the Learner, its Dispatch instances extern
#include <ember/record.hpp>
#include <ember/train/plain_renderer.hpp>

#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "../backend.hpp"
#include "../cli.hpp"
#include "data.hpp"
#include "model.hpp"

namespace fs = std::filesystem;
namespace train = ember::train;

namespace text_generation {

/// What `train` was run with; saved beside the model so that `generate` rebuilds the same model
/// and the same tokenizer.
struct ExperimentConfig {
    CharLmConfig model;               ///< the model (vocab_size set by train)
    std::vector<int> vocab;           ///< the tokenizer's bytes, in token order
    std::size_t num_epochs = 3;       ///< epochs to train
    std::size_t batch_size = 32;      ///< windows per batch
    std::size_t limit = 40000;        ///< training windows per epoch (0: all)
    std::size_t valid_windows = 500;  ///< held-out windows validated on
    std::size_t num_workers = 1;      ///< data loader threads
    std::uint64_t seed = 42;          ///< initialisation, split, shuffling and dropout
    double learning_rate = 2e-3;      ///< Adam's learning rate
    ember::optim::AdamConfig optimizer = ember::optim::AdamConfig{}.with_epsilon(1e-8);
    EMBER_CONFIG(ExperimentConfig, model, vocab, num_epochs, batch_size, limit, valid_windows,
                 num_workers, seed, learning_rate, optimizer)
};

using Recorder = ember::record::NamedMpkFileRecorder<ember::record::FullPrecisionSettings>;

/// How to sample.
struct Sampling {
    std::string prompt = "The ";
    std::size_t length = 300;
    double temperature = 0.8;
    std::uint64_t seed = 42;
};

struct Options {
    std::string command;
    ExperimentConfig config;
    Sampling sampling;
    fs::path artifact_dir = "artifacts/text-generation";
    std::string backend = "cpu";
    std::optional<std::size_t> threads;
    bool plain = false;
};

Options parse(int argc, char** argv) {
    Options o;
    CLI::App app{"A character-level language model of Debian's fortunes.", "text-generation"};
    ember_examples::setup(app);
    app.require_subcommand(1, 1);
    auto* train_cmd =
        app.add_subcommand("train", "train a character-level model on fortunes, then sample");
    auto* generate_cmd = app.add_subcommand("generate", "load the trained model and sample from it");
    std::uint64_t seed = o.config.seed;
    std::vector<const CLI::Option*> backends;
    for (auto* cmd : {train_cmd, generate_cmd}) {
        if (cmd == train_cmd) {
            cmd->add_option("--epochs", o.config.num_epochs, "epochs to train")
                ->check(ember_examples::positive);
            cmd->add_option("--limit", o.config.limit,
                            "training windows of 65 characters per epoch (0: all)")
                ->check(ember_examples::non_negative);
            cmd->add_option("--batch-size", o.config.batch_size, "windows per batch")
                ->check(ember_examples::positive);
            cmd->add_option("--lr", o.config.learning_rate, "Adam's learning rate")
                ->check(ember_examples::positive);
            cmd->add_flag("--plain", o.plain, "plain line output even on a terminal");
        }
        cmd->add_option("--artifact-dir", o.artifact_dir, "where the logs, config and model go");
        cmd->add_option("--prompt", o.sampling.prompt, "what the sample starts with");
        cmd->add_option("--length", o.sampling.length, "characters to generate")
            ->check(ember_examples::non_negative);
        cmd->add_option("--temperature", o.sampling.temperature,
                        "sampling temperature; 0 picks the likeliest character")
            ->check(ember_examples::non_negative);
        cmd->add_option("--seed", seed, "seed of training and of sampling");
        cmd->add_option("--threads", o.threads,
                        "CPU backend threads (default: EMBER_NUM_THREADS or all)")
            ->check(ember_examples::positive);
        backends.push_back(ember_examples::add_backend_option(cmd, o.backend));
    }
    ember_examples::parse_or_exit(app, argc, argv);
    ember_examples::backend_from_env(app, {backends[0], backends[1]}, o.backend);
    o.command = train_cmd->parsed() ? "train" : "generate";
    o.config.seed = o.sampling.seed = seed;
    return o;
}

/// `length` characters following `prompt`, drawn one at a time from the model's next-character
/// distribution sharpened (temperature < 1) or flattened (> 1) by the temperature.
template <ember::Backend B>
std::string generate(const CharLm<B>& model, std::size_t context,
                     const ember::data::CharTokenizer& tokenizer, const Sampling& s,
                     const ember::Device<B>& device) {
    std::vector<std::size_t> tokens = encode_known(tokenizer, s.prompt);
    if (tokens.empty()) tokens = tokenizer.encode("\n");
    // mt19937_64's output is fixed by the standard (its distributions are not), so the same seed
    // gives the same text with every standard library.
    std::mt19937_64 rng(s.seed);
    for (std::size_t i = 0; i < s.length; ++i) {
        // The model knows `context` positions: it reads the last window each time. (Its
        // positions are learnt embeddings, so an attention cache could not slide past the
        // context; the whole window is recomputed, which is cheap at this size.)
        const std::size_t n = std::min(context, tokens.size());
        std::vector<std::int64_t> window(tokens.end() - std::ptrdiff_t(n), tokens.end());
        auto input = ember::Tensor<B, 2, ember::Int>::from_data(
            ember::TensorData(std::move(window), {1, n}), device);
        const auto logits = model.forward(input)
                                .slice({{0, 1}, {long(n) - 1, long(n)}})
                                .into_data()
                                .template to_vec<float>();
        std::size_t next = 0;
        for (std::size_t v = 1; v < logits.size(); ++v)
            if (logits[v] > logits[next]) next = v;
        if (s.temperature > 0) {
            std::vector<double> weights(logits.size());
            double total = 0;
            for (std::size_t v = 0; v < logits.size(); ++v)
                total += weights[v] = std::exp((logits[v] - logits[next]) / s.temperature);
            double u = double(rng() >> 11) * 0x1.0p-53 * total;  // uniform in [0, total)
            for (next = 0; next + 1 < weights.size() && u >= weights[next]; ++next)
                u -= weights[next];
        }
        tokens.push_back(next);
    }
    return tokenizer.decode(tokens);
}

void print_sample(const std::string& text) {
    std::printf("\n--- sample ---\n%s\n---\n", text.c_str());
}

// Trains; returns the exit status (130 when Ctrl-C stopped the run).
int train_model(Options& o) {
    using B = ember::Dispatch;
    using Inner = B::InnerBackend;
    ExperimentConfig& c = o.config;
    // Training records the graph (autodiff); validation runs on the same device without.
    const auto valid_device = ember_examples::backend_device_of(o.backend);
    const auto device = valid_device.autodiff(true);

    const ember::data::FortunesDataset fortunes;
    const auto tokenizer = std::make_shared<const ember::data::CharTokenizer>(fortunes.corpus());
    c.vocab.assign(tokenizer->vocab().begin(), tokenizer->vocab().end());
    for (int& b : c.vocab) b = int(static_cast<unsigned char>(b));
    c.model.vocab_size = tokenizer->vocab_size();

    // Hold out 5 % of the fortunes of every category; cut both parts into windows. Training
    // windows overlap by half so that every character is seen at several positions.
    auto [train_split, valid_split] = fortunes.split(0.95, c.seed);
    auto tokens_of = [&](const ember::data::FortunesDataset& d) {
        return std::make_shared<const std::vector<std::size_t>>(tokenizer->encode(d.corpus()));
    };
    const std::size_t context = c.model.context;
    const auto train_windows = ember::data::ShuffledDataset(
        CharWindowsDataset(tokens_of(train_split), context, context / 2), c.seed);
    const auto valid_windows = ember::data::ShuffledDataset(
        CharWindowsDataset(tokens_of(valid_split), context, context), c.seed);
    const std::size_t n_train =
        c.limit == 0 ? train_windows.len() : std::min(c.limit, train_windows.len());
    const std::size_t n_valid = std::min(c.valid_windows, valid_windows.len());
    // Locked before the config is written: a second run in this directory stops here. The
    // Learner shares the lock.
    const train::ArtifactLock lock(o.artifact_dir);
    c.save(o.artifact_dir / "config.json");
    B::seed(c.seed);

    auto train_loader = ember::data::DataLoaderBuilder(CharBatcher<B>{})
                            .batch_size(c.batch_size)
                            .set_device(device)
                            .shuffle(c.seed)
                            .num_workers(c.num_workers)
                            .build(ember::data::PartialDataset(train_windows, 0, n_train));
    auto valid_loader = ember::data::DataLoaderBuilder(CharBatcher<Inner>{})
                            .batch_size(100)
                            .set_device(valid_device)
                            .num_workers(c.num_workers)
                            .build(ember::data::PartialDataset(valid_windows, 0, n_valid));
    std::printf(
        "%zu characters of fortunes, %zu distinct; training on %zu of %zu windows of %zu "
        "characters per epoch, validating on %zu\n",
        fortunes.corpus().size(), tokenizer->vocab_size(), n_train, train_windows.len(),
        context + 1, n_valid);

    using TrainItem = train::ClassificationOutput<B>;
    using ValidItem = train::ClassificationOutput<Inner>;
    train::LearnerBuilder<TrainItem, ValidItem> builder(o.artifact_dir);
    builder.metric_train_numeric(train::LossMetric<B>{})
        .metric_valid_numeric(train::LossMetric<Inner>{})
        .metric_train_numeric(train::AccuracyMetric<B>{})
        .metric_valid_numeric(train::AccuracyMetric<Inner>{})
        .num_epochs(c.num_epochs)
        .seed(c.seed);
    if (o.plain) builder.renderer(std::make_shared<train::PlainRenderer>());
    auto model = c.model.init<B>(device);
    std::printf("model: %zu parameters\n", model.num_params());
    auto learner =
        builder.build(std::move(model), c.optimizer.template init<CharLm<B>>(), c.learning_rate);

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
    const auto inference = trained.valid();
    inference.save_file(o.artifact_dir / "model", Recorder{});

    // Epoch means of the per-batch values (next-character cross-entropy in nats, and how often
    // the likeliest character is the right one).
    const auto& history = learner.history();
    const auto& train_loss = history.at(train::Split::Train).at("Loss");
    const auto& valid_loss = history.at(train::Split::Valid).at("Loss");
    const auto& valid_acc = history.at(train::Split::Valid).at("Accuracy");
    std::printf("\nepoch  train loss  valid loss  valid accuracy\n");
    for (std::size_t e = 0; e < valid_loss.size(); ++e)
        std::printf("%5zu  %10.4f  %10.4f  %12.2f %%\n", e + 1, train_loss[e], valid_loss[e],
                    valid_acc[e]);
    std::printf("trained in %.1f s; model saved to %s\n", seconds,
                (o.artifact_dir / "model.mpk").string().c_str());
    print_sample(generate(inference, context, *tokenizer, o.sampling, valid_device));
    return 0;
}

void generate_text(const Options& o) {
    using B = ember::Dispatch;
    const auto device = ember_examples::backend_device_of(o.backend);
    const auto c = ExperimentConfig::load(o.artifact_dir / "config.json");
    std::string bytes;
    for (int b : c.vocab) bytes.push_back(char(b));
    // The vocabulary string is itself a corpus with each byte once: the same tokens again.
    const ember::data::CharTokenizer tokenizer(bytes);
    const auto model =
        c.model.init<B>(device).load_file(o.artifact_dir / "model", Recorder{}, device);
    print_sample(generate(model, c.model.context, tokenizer, o.sampling, device));
}

int run(int argc, char** argv) {
    Options o = parse(argc, argv);
    if (o.threads) ember::cpu::set_num_threads(*o.threads);
    if (o.command == "generate") {
        generate_text(o);
        return 0;
    }
    return train_model(o);
}

}  // namespace text_generation

int main(int argc, char** argv) {
    try {
        return text_generation::run(argc, argv);
    } catch (const ember::Error& e) {
        std::cerr << "text-generation: " << e.what() << '\n';
        return 1;
    }
}
