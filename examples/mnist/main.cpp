// The guide: train a Fashion-MNIST classifier with the Learner (live dashboard on a terminal),
// save it, then load it again for inference.
//
//   mnist train [--model cnn|mlp] [--epochs N] [--backend cpu|cuda] [--devices N|I,J] ...
//                                                                          (see --help)
//   mnist infer [--artifact-dir DIR] [--count N]
//   mnist export [--artifact-dir DIR] [--out DIR] [--count N]   (for examples/firmware)
#include <ember/ember.hpp>
#include <ember/nn.hpp>
#include <ember/optim.hpp>
#include <ember/record.hpp>
#include <ember/train/learner.hpp>
#include <ember/train/plain_renderer.hpp>
#if defined(EMBER_NCCL)
#include <ember/collective/nccl.hpp>
#endif

#include <fstream>

#include <charconv>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "../cli.hpp"
#include "data.hpp"
#include "model.hpp"

namespace fs = std::filesystem;
namespace train = ember::train;

namespace mnist {

/// What `train` was run with; saved beside the model so that `infer` rebuilds the same model.
struct TrainingConfig {
    std::string model = "cnn";    ///< "cnn" (the guide's), "mlp" or "tiny" (for firmware)
    std::size_t num_epochs = 10;  ///< epochs to train
    std::size_t batch_size = 64;  ///< items per batch
    std::size_t num_workers = 2;  ///< data loader threads
    std::uint64_t seed = 42;      ///< the run's seed (initialisation, shuffling, dropout)
    double learning_rate = 1e-4;  ///< Adam's learning rate
    ember::optim::AdamConfig optimizer = ember::optim::AdamConfig{}.with_epsilon(1e-8);
    EMBER_CONFIG(TrainingConfig, model, num_epochs, batch_size, num_workers, seed, learning_rate,
                 optimizer)
};

// The class names of Fashion-MNIST, by label.
constexpr const char* kClasses[10] = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                      "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};

using Recorder = ember::record::NamedMpkFileRecorder<ember::record::FullPrecisionSettings>;
using CheckpointRecorder = ember::record::NamedMpkGzFileRecorder<>;

struct Options {
    std::string command;
    TrainingConfig config;
    std::string backend = "cpu";
    fs::path artifact_dir = "artifacts/mnist";
    std::optional<fs::path> data_dir;
    fs::path out_dir = "artifacts/firmware";
    std::optional<std::size_t> threads;
    std::vector<std::size_t> devices;  // --devices: CUDA indices, or {N} replicas on the CPU
    bool plain = false;
    bool resume = false;
    bool capture = false;  // --capture: training and validation steps replayed as CUDA graphs
    std::size_t count = 10;
};

Options parse(int argc, char** argv) {
    Options o;
    CLI::App app{"Trains a classifier on Fashion-MNIST with the Learner, classifies test images "
                 "with it, or exports it for examples/firmware.",
                 "mnist"};
    ember_examples::setup(app);
    app.require_subcommand(1, 1);
    auto* train_cmd = app.add_subcommand("train", "train a classifier on Fashion-MNIST with the Learner");
    auto* infer_cmd = app.add_subcommand("infer", "load the trained model and classify test images");
    auto* export_cmd =
        app.add_subcommand("export", "write the model and test images for examples/firmware");
    auto& c = o.config;
    std::optional<double> lr;
    for (auto* cmd : {train_cmd, infer_cmd, export_cmd}) {
        cmd->add_option("--artifact-dir", o.artifact_dir, "where checkpoints, logs and the model go");
        cmd->add_option("--data", o.data_dir,
                        "the IDX files (default: EMBER_DATA_DIR or Debian's dataset-fashion-mnist)");
        cmd->add_option("--threads", o.threads, "CPU backend threads (default: EMBER_NUM_THREADS or all)")
            ->check(ember_examples::positive);
    }
    train_cmd->add_option("--model", c.model,
                          "the guide's CNN, an MLP 784-512-512-10, or the MLP 784-64-10 that "
                          "examples/firmware runs")
        ->check(CLI::IsMember({"cnn", "mlp", "tiny"}));
    train_cmd->add_option("--epochs", c.num_epochs, "epochs to train")->check(ember_examples::positive);
    train_cmd->add_option("--batch-size", c.batch_size, "items per batch (per device with --devices)")
        ->check(ember_examples::positive);
    train_cmd->add_option("--lr", lr, "Adam's learning rate (default 1e-4 for the CNN, 1e-3 for the MLPs)")
        ->check(ember_examples::positive);
    train_cmd->add_option("--seed", c.seed, "the run's seed");
    train_cmd->add_option("--workers", c.num_workers, "data loader threads")
        ->check(ember_examples::non_negative);
    train_cmd->add_option("--backend", o.backend, "the backend to train on: cpu, or cuda where the build has it");
    train_cmd->add_option("--devices", o.devices,
                          "data-parallel training (docs/multi-device.md): on cpu, N replicas on "
                          "threads; on cuda, the devices by index (0,1: two GPUs)")
        ->delimiter(',');
    train_cmd->add_flag("--plain", o.plain, "plain line output even on a terminal");
    train_cmd->add_flag("--resume", o.resume, "go on from the last checkpoint in the artifact directory");
    train_cmd->add_flag("--capture", o.capture,
                        "(cuda) capture the training and validation steps once and replay them as "
                        "CUDA graphs (LearnerBuilder::capture_steps)");
    infer_cmd->add_option("--count", o.count, "predictions to print")->check(ember_examples::positive);
    export_cmd->add_option("--count", o.count, "test images to write")->check(ember_examples::positive);
    export_cmd->add_option("--out", o.out_dir,
                           "where model.bin, images.bin, labels.bin and expected.bin go");
    ember_examples::parse_or_exit(app, argc, argv);
    o.command = train_cmd->parsed() ? "train" : infer_cmd->parsed() ? "infer" : "export";
    if (lr) c.learning_rate = *lr;
    else if (c.model != "cnn") c.learning_rate = 1e-3;
#if defined(EMBER_CUDA)
    constexpr const char* kBackends = "cpu, cuda";
    const bool known = o.backend == "cpu" || o.backend == "cuda";
#else
    constexpr const char* kBackends = "cpu";
    const bool known = o.backend == "cpu";
#endif
    if (!known)
        throw ember::ArgumentError("mnist: backend '" + o.backend +
                                   "' is not available in this build (available: " + kBackends +
                                   ")");
    if (o.capture && o.backend != "cuda")
        throw ember::ArgumentError("mnist: --capture replays CUDA graphs: it needs --backend cuda");
    if (o.backend == "cpu" && !o.devices.empty() && (o.devices.size() != 1 || o.devices[0] == 0))
        throw ember::ArgumentError(
            "mnist: on the cpu, --devices takes a number of replicas (>= 1)");
    return o;
}

// The devices of --devices for backend B (none: the default device).
template <ember::Backend B>
std::vector<ember::Device<B>> devices_of(const Options& o) {
    std::vector<ember::Device<B>> out;
    if constexpr (std::is_same_v<ember::Device<B>, ember::CpuDevice>) {
        out.resize(o.devices.empty() ? 1 : o.devices[0]);
    } else {
        for (std::size_t i : o.devices) out.push_back(ember::Device<B>{i});
        if (out.empty()) out.push_back({});
    }
    return out;
}

ember::data::MnistDataset load_split(const Options& o, bool training) {
    if (o.data_dir)
        return training ? ember::data::MnistDataset::train(*o.data_dir)
                        : ember::data::MnistDataset::test(*o.data_dir);
    return training ? ember::data::MnistDataset::train() : ember::data::MnistDataset::test();
}

// Trains; returns the exit status (130 when Ctrl-C stopped the run).
template <typename Model, ember::AutodiffBackend B>
int train_model(const Options& o) {
    using Inner = typename B::InnerBackend;
    const TrainingConfig& c = o.config;
    // Locked before the config is written: a second run in this directory stops here, before
    // it could mix its config with this run's checkpoints. The Learner shares the lock.
    const train::ArtifactLock lock(o.artifact_dir);
    c.save(o.artifact_dir / "config.json");
    B::seed(c.seed);

    const auto devices = devices_of<B>(o);
    auto train_loader = ember::data::DataLoaderBuilder(MnistBatcher<B>{})
                            .batch_size(c.batch_size * devices.size())  // split between them
                            .set_device(devices.front())
                            .shuffle(c.seed)
                            .num_workers(c.num_workers)
                            .build(load_split(o, true));
    auto valid_loader = ember::data::DataLoaderBuilder(MnistBatcher<Inner>{})
                            .batch_size(256)
                            .set_device(devices.front())
                            .num_workers(c.num_workers)
                            .build(load_split(o, false));

    using TrainItem = train::ClassificationOutput<B>;
    using ValidItem = train::ClassificationOutput<Inner>;
    train::LearnerBuilder<TrainItem, ValidItem> builder(o.artifact_dir);
    builder.metric_train_numeric(train::AccuracyMetric<B>{})
        .metric_valid_numeric(train::AccuracyMetric<Inner>{})
        .metric_train_numeric(train::LossMetric<B>{})
        .metric_valid_numeric(train::LossMetric<Inner>{})
        .metric_train_numeric(train::LearningRateMetric{})
        .metric_train_numeric(train::IterationSpeedMetric{})
        .metric_train(train::CpuUsage{})
        .metric_train(train::CpuMemory{})
        .with_file_checkpointer(CheckpointRecorder{}, 2)
        .num_epochs(c.num_epochs)
        .seed(c.seed)
        .summary();
    builder.devices(devices);
#if defined(EMBER_NCCL)
    if constexpr (std::is_same_v<ember::Device<B>, ember::CudaDevice>) {
        if (devices.size() > 1 && ember::collective::NcclCollective::is_available()) {
            std::vector<std::shared_ptr<ember::collective::Collective>> ranks;
            for (auto& r : ember::collective::NcclCollective::init_all(devices))
                ranks.push_back(std::move(r));
            builder.collectives(std::move(ranks));
        }
    }
#endif
    if (devices.size() > 1)
        std::cout << "data-parallel training on " << devices.size() << " replicas, " << c.batch_size
                  << " images each per step\n";
    if (o.capture) builder.capture_steps(true);
    if (o.plain) builder.renderer(std::make_shared<train::PlainRenderer>());
    if (o.resume) {
        // The newest complete checkpoint: one cut short by a kill is skipped.
        if (const auto n = train::latest_checkpoint(o.artifact_dir))
            std::cout << "resuming from checkpoint " << *n << '\n';
        else
            std::cout << "no checkpoint in " << o.artifact_dir << ": starting afresh\n";
        builder.resume();
    }

    auto learner =
        builder.build(Model::init(), c.optimizer.template init<Model>(), c.learning_rate);
    const auto start = std::chrono::steady_clock::now();
    Model trained = learner.fit(train_loader, valid_loader);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

    if (learner.interrupter().should_stop()) {
        std::cout << "interrupted: run `mnist train --resume` with the same options to go on\n";
        return learner.interrupter().exit_status();
    }
    trained.valid().save_file(o.artifact_dir / "model", Recorder{});
    const auto& acc = learner.history().at(train::Split::Valid).at("Accuracy");
    std::cout << std::fixed << std::setprecision(2) << "trained " << c.model << " for "
              << c.num_epochs << " epochs in " << seconds << " s; test accuracy " << acc.back()
              << " %; model saved to " << (o.artifact_dir / "model.mpk").string() << '\n';
    return 0;
}

// The class `model` predicts for each of `items`.
template <typename Model>
std::vector<std::int64_t> predict(const Model& model,
                                  const std::vector<ember::data::MnistItem>& items) {
    auto batch = MnistBatcher<ember::Cpu>{}.batch(items, {});
    auto predicted = model.forward(batch.images).argmax(1).template flatten<1>(0, 1);
    return predicted.to_data().template to_vec<std::int64_t>();
}

// Writes `bytes` to `file` (through a temporary name, so a failed write leaves nothing).
void write_bytes(const fs::path& file, const std::vector<std::uint8_t>& bytes) {
    const fs::path tmp = file.string() + ".tmp";
    {
        std::ofstream out(tmp, std::ios::binary);
        out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
        if (!out) throw ember::ArgumentError("mnist export: cannot write '" + tmp.string() + "'");
    }
    fs::rename(tmp, file);
}

// What examples/firmware embeds: the model in the Bin format, the first `count` test images
// (raw pixels), their labels, and the classes this host predicts for them from the Bin file
// itself, which the firmware must reproduce.
template <typename Model>
void export_model(const Options& o) {
    using B = ember::Cpu;
    using BinRecorder = ember::record::BinFileRecorder<ember::record::FullPrecisionSettings>;
    fs::create_directories(o.out_dir);
    Model::init()
        .load_file(o.artifact_dir / "model", Recorder{}, ember::Device<B>{})
        .save_file(o.out_dir / "model", BinRecorder{});
    const auto model =
        Model::init().load_file(o.out_dir / "model", BinRecorder{}, ember::Device<B>{});
    auto test = load_split(o, false);
    std::vector<ember::data::MnistItem> items;
    std::vector<std::uint8_t> pixels, labels, expected;
    for (std::size_t i = 0; i < std::min(o.count, test.len()); ++i) {
        items.push_back(*test.get(i));
        for (float p : items.back().image) pixels.push_back(static_cast<std::uint8_t>(p));
        labels.push_back(static_cast<std::uint8_t>(items.back().label));
    }
    for (auto c : predict(model, items)) expected.push_back(static_cast<std::uint8_t>(c));
    write_bytes(o.out_dir / "images.bin", pixels);
    write_bytes(o.out_dir / "labels.bin", labels);
    write_bytes(o.out_dir / "expected.bin", expected);
    std::cout << "exported " << o.config.model << " (" << fs::file_size(o.out_dir / "model.bin")
              << " bytes) and " << items.size() << " test images to " << o.out_dir.string() << '\n';
}

template <typename Model>
void infer_model(const Options& o) {
    using B = ember::Cpu;
    auto model = Model::init().load_file(o.artifact_dir / "model", Recorder{}, ember::Device<B>{});
    auto test = load_split(o, false);
    std::size_t correct = 0;
    const std::size_t n = test.len();
    // An accuracy over no images is undefined: say so rather than print "nan %".
    if (n == 0)
        throw ember::ArgumentError("mnist infer: the test set in " + test.images_path().string() +
                                   " holds no images: there is no accuracy to report");
    const auto start = std::chrono::steady_clock::now();
    for (std::size_t s = 0; s < n; s += 500) {
        std::vector<ember::data::MnistItem> items;
        for (std::size_t i = s; i < std::min(n, s + 500); ++i) items.push_back(*test.get(i));
        const auto labels = predict(model, items);
        for (std::size_t i = 0; i < labels.size(); ++i) {
            const auto truth = items[i].label;
            correct += labels[i] == truth;
            if (s + i < o.count)
                std::cout << "image " << std::setw(4) << s + i << ": predicted " << std::setw(11)
                          << std::left << kClasses[labels[i]] << std::right << "  actual "
                          << std::setw(11) << std::left << kClasses[truth] << std::right
                          << (labels[i] == truth ? "" : "  (wrong)") << '\n';
        }
    }
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    std::cout << std::fixed << std::setprecision(2) << "accuracy on the " << n
              << " test images: " << 100.0 * double(correct) / double(n) << " % (" << ms / 1000
              << " s)\n";
}

int run(int argc, char** argv) {
    Options o = parse(argc, argv);
    if (o.threads) ember::cpu::set_num_threads(*o.threads);
    if (o.command == "infer" || o.command == "export") {
        // The model kind comes from the run's config, whatever the command line says.
        o.config = TrainingConfig::load(o.artifact_dir / "config.json");
        const bool infer = o.command == "infer";
        using C = ember::Cpu;
        if (o.config.model == "mlp")
            infer ? infer_model<Mlp<C>>(o) : export_model<Mlp<C>>(o);
        else if (o.config.model == "tiny")
            infer ? infer_model<TinyMlp<C>>(o) : export_model<TinyMlp<C>>(o);
        else
            infer ? infer_model<Cnn<C>>(o) : export_model<Cnn<C>>(o);
        return 0;
    }
#if defined(EMBER_CUDA)
    if (o.backend == "cuda") {
        using B = ember::Autodiff<ember::Cuda>;
        if (o.config.model == "mlp") return train_model<Mlp<B>, B>(o);
        if (o.config.model == "tiny") return train_model<TinyMlp<B>, B>(o);
        return train_model<Cnn<B>, B>(o);
    }
#endif
    using B = ember::Autodiff<ember::Cpu>;
    if (o.config.model == "mlp") return train_model<Mlp<B>, B>(o);
    if (o.config.model == "tiny") return train_model<TinyMlp<B>, B>(o);
    return train_model<Cnn<B>, B>(o);
}

}  // namespace mnist

int main(int argc, char** argv) {
    try {
        return mnist::run(argc, argv);
    } catch (const ember::Error& e) {
        std::cerr << "mnist: " << e.what() << '\n';
        return 1;
    }
}
