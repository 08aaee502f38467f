// ResNet-18 (CIFAR form) on ember: a throughput run on synthetic data, or a convergence run on
// Fashion-MNIST padded to 3×32×32 with the Learner. It runs on ember::Dispatch, on the device
// --backend names.
//
//   resnet --synthetic [--backend B] [--batch N] [--steps N] [--warmup N] [--bf16] [--graph]
//          [--channels-last] ...
//   resnet [--backend B] [--epochs N] [--limit N] [--optimizer sgd|adam] [--bf16] ...
//                                                      (B: cpu|vulkan|cuda[:i][+fusion])
// --bf16 trains in bf16 mixed precision (ember::Autocast: convolutions and the classifier in
// bf16, BatchNorm's statistics and the loss in f32, f32 weights and optimizer state).
// --channels-last (with --synthetic) stores the images and the convolution weights
// channels-last, as PyTorch's .to(memory_format=torch.channels_last): CUDA then runs the whole
// network in that layout.
// --init-from FILE.pt starts from PyTorch's weights (benchmarks/resnet_torch.py writes them), and
// --synthetic --batch-from FILE.pt trains on that file's fixed batch: the two together reproduce
// resnet_torch.py's losses.
// The modules, losses and optimizers with their Dispatch instances compiled in ember_dispatch.
#include <ember/dispatch/nn.hpp>
#include <ember/record.hpp>
#include <ember/record/pytorch.hpp>
#include <ember/train/learner.hpp>
#include <ember/train/plain_renderer.hpp>
#if defined(EMBER_CUDA)
#include <ember/backend/cuda.hpp>       // the peak memory of --synthetic
#include <ember/stacks/cuda_graph.hpp>  // --synthetic --graph
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <functional>
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

namespace resnet {

/// What a run was started with (saved beside the model as config.json).
struct RunConfig {
    ResNetConfig model;              ///< the network
    std::string optimizer = "sgd";   ///< "sgd" (momentum, weight decay) or "adam"
    double learning_rate = 0.05;     ///< peak rate (cosine-annealed to 0 over the run)
    double momentum = 0.9;           ///< SGD's momentum
    double weight_decay = 5e-4;      ///< SGD's L2 penalty (Adam: none)
    std::size_t batch_size = 64;     ///< images per step
    std::size_t num_epochs = 1;      ///< epochs of the convergence run
    std::size_t limit = 10000;       ///< training images per epoch (0: all 60000)
    std::size_t valid_limit = 2000;  ///< test images validated on (0: all 10000)
    std::uint64_t seed = 42;         ///< initialisation, shuffling, synthetic data
    EMBER_CONFIG(RunConfig, model, optimizer, learning_rate, momentum, weight_decay, batch_size,
                 num_epochs, limit, valid_limit, seed)
};

struct Options {
    RunConfig config;
    std::string backend = "cpu";
    bool synthetic = false;
    std::size_t steps = 20;  // --synthetic: timed steps per round
    std::size_t rounds = 1;  // --synthetic: timed rounds (the best is reported)
    std::size_t warmup = 3;  // --synthetic: untimed steps first
    bool check = false;      // exit 1 unless the loss fell
    bool bf16 = false;       // bf16 mixed precision (ember::Autocast around the forward pass)
    bool graph = false;      // --synthetic: the timed steps are replays of one captured CUDA graph
    bool channels_last = false;  // --synthetic: images stored [N, H, W, C] (resnet::channels_last)
    bool plain = false;
    std::optional<std::size_t> threads;
    std::optional<fs::path> data_dir;
    fs::path artifact_dir = "artifacts/resnet";
    std::string model_name = "resnet18";  // for the JSON lines' names
    std::optional<fs::path> init_from;    // PyTorch weights to start from
    std::optional<fs::path> batch_from;   // --synthetic: the fixed batch (and its expected losses)
};

Options parse(int argc, char** argv) {
    Options o;
    RunConfig& c = o.config;
    CLI::App app{
        "Trains ResNet-18 (CIFAR form: 3x32x32 images, 10 classes) on Fashion-MNIST padded "
        "to 32x32 and copied to three channels, with the Learner; or, with --synthetic, "
        "times training steps on random data.",
        "resnet"};
    ember_examples::setup(app);
    auto* synthetic =
        app.add_flag("--synthetic", o.synthetic,
                     "throughput mode: --warmup untimed then --steps timed steps on random images "
                     "and labels (fixed seed); prints JSON lines: each step's loss, each round's "
                     "time per step, the best round's and images/s");
    app.add_option("--steps", o.steps, "(synthetic) timed steps per round")
        ->check(ember_examples::positive)
        ->needs(synthetic);
    app.add_option("--rounds", o.rounds,
                   "(synthetic) timed rounds of --steps steps; the summary's value is the best "
                   "round's time per step")
        ->check(ember_examples::positive)
        ->needs(synthetic);
    auto* warmup = app.add_option("--warmup", o.warmup, "(synthetic) untimed steps before them")
                       ->check(ember_examples::non_negative)
                       ->needs(synthetic);
    app.add_flag("--channels-last", o.channels_last,
                 "(synthetic) store the images ([N, H, W, C] in memory) and the convolution "
                 "weights channels-last, as PyTorch's memory_format=torch.channels_last: on CUDA "
                 "the convolutions (cuDNN's NHWC kernels), batch norms and elementwise ops then "
                 "keep that layout; the summary's name gets _channels_last after the precision");
    app.add_flag("--graph", o.graph,
                 "(synthetic, one CUDA device) capture the last warm-up step as a CUDA graph "
                 "(ember::cuda::capture; needs --warmup >= 2, the steps before it eager) and time "
                 "its replays on the first batch of the pool, as resnet_torch.py's cuda_graph "
                 "configuration replays one batch; the summary's name ends in _graph")
        ->needs(synthetic)
        ->needs(warmup);
    auto* batch_from =
        app.add_option("--batch-from", o.batch_from,
                       "(synthetic) train on the one batch of this PyTorch file ({'images': "
                       "[N,3,32,32], 'targets': [N]}, as resnet_torch.py weights --batch-file "
                       "writes) instead of random ones; with --check, each step's loss must be "
                       "within 1e-4 of the file's 'losses', where it has them")
            ->check(CLI::ExistingFile)
            ->needs(synthetic);
    app.add_option("--init-from", o.init_from,
                   "start from the weights of this PyTorch state_dict file (torch.save; "
                   "benchmarks/resnet_torch.py weights writes one) instead of a fresh "
                   "initialisation")
        ->check(CLI::ExistingFile);
    app.add_option("--model", o.model_name,
                   "resnet18, or tiny (widths 8/16/32/64, one block per stage: for tests and "
                   "quick runs)")
        ->check(CLI::IsMember({"resnet18", "tiny"}));
    std::optional<std::size_t> width;
    app.add_option("--width", width,
                   "channels of the first stage; the others have 2x, 4x, 8x (default 64 for "
                   "resnet18, 8 for tiny)")
        ->check(ember_examples::positive);
    // BatchNorm needs two values per channel in training.
    app.add_option("--batch-size,--batch", c.batch_size, "images per step")
        ->check(ember_examples::number_where(
            "AT_LEAST_2", [](double v) { return v >= 2; }, "at least 2"))
        ->excludes(batch_from);
    auto* fashion_only = app.add_option_group("Fashion-MNIST run");
    fashion_only->add_option("--epochs", c.num_epochs, "epochs of the Fashion-MNIST run")
        ->check(ember_examples::positive);
    fashion_only->add_option("--limit", c.limit, "training images per epoch (0: all 60000)")
        ->check(ember_examples::non_negative);
    fashion_only
        ->add_option("--valid-limit", c.valid_limit, "test images validated on (0: all 10000)")
        ->check(ember_examples::non_negative);
    fashion_only->add_option(
        "--data", o.data_dir,
        "the IDX files (default: EMBER_DATA_DIR or Debian's dataset-fashion-mnist)");
    fashion_only->add_option("--artifact-dir", o.artifact_dir,
                             "where the Learner's logs, config.json and model.mpk go");
    fashion_only->add_flag("--plain", o.plain, "plain line output even on a terminal");
    fashion_only->excludes(synthetic);
    app.add_option("--optimizer", c.optimizer, "sgd (momentum 0.9, weight decay 5e-4) or adam")
        ->check(CLI::IsMember({"sgd", "adam"}));
    std::optional<double> lr;
    app.add_option("--lr", lr,
                   "peak learning rate, cosine-annealed to 0 over the run, in (0, 1] (default 0.05 "
                   "for sgd, 1e-3 for adam)")
        ->check(ember_examples::number_where(
            "RATE", [](double v) { return v > 0 && v <= 1; }, "in (0, 1]"));
    app.add_option("--seed", c.seed, "seed of initialisation, shuffling and synthetic data");
    const auto* backend = ember_examples::add_backend_option(&app, o.backend);
    app.add_option("--threads", o.threads,
                   "CPU backend threads (default: EMBER_NUM_THREADS or all)")
        ->check(ember_examples::positive);
    app.add_flag("--bf16", o.bf16,
                 "bf16 mixed precision, as torch.autocast(dtype=torch.bfloat16): the forward "
                 "pass and the loss under ember::Autocast (convolutions and the classifier in "
                 "bf16, BatchNorm's statistics and the loss in f32); weights, gradients and "
                 "optimizer state stay f32");
    app.add_flag("--check", o.check,
                 "exit with status 1 unless the loss fell (synthetic: the mean of the last third "
                 "of the steps below that of the first third, or with --batch-from, every loss "
                 "within 1e-4 of the file's; Fashion-MNIST: the last epoch's validation loss "
                 "below ln 10, a uniform guess)");
    ember_examples::parse_or_exit(app, argc, argv);
    ember_examples::backend_from_env(app, {backend}, o.backend);
    if (o.graph && o.warmup < 2)
        throw ember::ArgumentError(
            "--graph captures the last warm-up step after at least one eager one (the "
            "optimizer's velocity and cuDNN's choices made): it needs --warmup 2 or more");
    if (o.model_name == "tiny") c.model.blocks = {1, 1, 1, 1};
    const std::size_t w = width.value_or(o.model_name == "tiny" ? 8 : 64);
    c.model.widths = {w, 2 * w, 4 * w, 8 * w};
    c.learning_rate = lr.value_or(c.optimizer == "adam" ? 1e-3 : c.learning_rate);
    return o;
}

// The precision in the JSON lines' names ("bf16" or "f32").
const char* precision(const Options& o) {
    return o.bf16 ? "bf16" : "f32";
}

// SGD with momentum and L2 weight decay, or Adam, for modules M.
template <typename M>
auto sgd_optimizer(const RunConfig& c) {
    return ember::optim::SgdConfig{}
        .with_momentum(ember::optim::MomentumConfig{c.momentum, 0.0})
        .with_weight_decay(ember::optim::WeightDecayConfig{c.weight_decay})
        .template init<M>();
}
template <typename M>
auto adam_optimizer(const RunConfig&) {
    return ember::optim::AdamConfig{}.with_epsilon(1e-8).template init<M>();
}

// A fresh model on `device`, or with --init-from the PyTorch file's weights in it (its keys are
// ember's paths: resnet_torch.py names its modules so; Linear weights are transposed on load).
template <Backend B>
ResNet<B> initial_model(const Options& o, const ember::Device<B>& device) {
    auto model = o.config.model.template init<B>(device);
    if (!o.init_from) return model;
    const ember::record::PyTorchFileRecorder<ember::record::FullPrecisionSettings> recorder;
    return recorder.load_into(model, ember::record::LoadArgs(*o.init_from), device);
}

// The fixed batch of --batch-from: "images" [N, 3, 32, 32] (float), "targets" [N] (integer) and,
// where the file has them, the "losses" PyTorch measured on it.
template <Backend B>
std::pair<ImageBatch<B>, std::vector<double>> load_batch(const fs::path& file,
                                                         const ember::Device<B>& device) {
    const auto tensors = ember::record::read_pytorch_tensors(file);
    auto find = [&](const std::string& key) -> const ember::TensorData* {
        for (const auto& [name, data] : tensors)
            if (name == key) return &data;
        return nullptr;
    };
    const auto* images = find("images");
    const auto* targets = find("targets");
    EMBER_CHECK(images && targets, Format, "resnet --batch-from: ", file.string(),
                " must hold the tensors 'images' and 'targets'");
    const auto& is = images->shape();
    EMBER_CHECK(is.rank() == 4 && is[0] >= 2 && is[1] == 3 && is[2] == kSide && is[3] == kSide,
                Shape, "resnet --batch-from: ", file.string(), ": 'images' has shape ",
                is.to_string(), ", expected [N >= 2, 3, 32, 32]");
    EMBER_CHECK(targets->shape() == ember::Shape{is[0]}, Shape,
                "resnet --batch-from: ", file.string(), ": 'targets' has shape ",
                targets->shape().to_string(), ", expected [", is[0], "]");
    std::vector<double> losses;
    if (const ember::TensorData* l = find("losses")) losses = l->to_vec<double>();
    return {{Tensor<B, 4>::from_data(images->convert(ember::DType::F32), device),
             Tensor<B, 1, ember::Int>::from_data(targets->convert(ember::DType::I64), device)},
            std::move(losses)};
}

// Throughput: `warmup` steps, then `rounds` timed rounds of `steps` training steps, on random data
// (or --batch-from's batch). Every line is JSON: the run, each step's loss (a warm-up step's time
// too), each round's time per step, and the summary, whose "value" is the best round's time per
// step (resnet_torch.py reports PyTorch's the same way), named like resnet_torch.py's
// configurations.
template <ember::AutodiffBackend B, typename Optim>
int synthetic(const Options& o, Optim optim) {
    const RunConfig& c = o.config;
    B::seed(c.seed);
    const auto device = ember_examples::backend_device_of(o.backend).autodiff(true);
    auto model = initial_model<B>(o, device);
    std::mt19937_64 rng(c.seed);
    // A pool of 4 batches drawn once, so the timed steps measure the model, not the generator
    // (and so the loss can fall: the model learns the pool's random labels).
    std::vector<ImageBatch<B>> pool;
    std::vector<double> expected;
    if (o.batch_from) {
        auto [batch, losses] = load_batch<B>(*o.batch_from, device);
        pool.push_back(std::move(batch));
        expected = std::move(losses);
    } else {
        for (int i = 0; i < 4; ++i)
            pool.push_back(synthetic_batch<B>(c.batch_size, c.model.num_classes, rng, device));
    }
    if (o.channels_last) {
        for (auto& b : pool) b.images = channels_last(b.images);
        model = channels_last_weights(std::move(model));
    }
    const std::size_t batch_size = pool.front().targets.dims()[0];
    std::printf(
        "{\"model\":\"%s\",\"widths\":[%zu,%zu,%zu,%zu],\"params\":%zu,\"backend\":\"%s\","
        "\"batch\":%zu,\"optimizer\":\"%s\",\"lr\":%g,\"precision\":\"%s\",\"init\":\"%s\"}\n",
        o.model_name.c_str(), c.model.widths[0], c.model.widths[1], c.model.widths[2],
        c.model.widths[3], model.num_params(), o.backend.c_str(), batch_size, c.optimizer.c_str(),
        c.learning_rate, precision(o), o.init_from ? o.init_from->string().c_str() : "fresh");
    auto train_on = [&](const ImageBatch<B>& batch) {
        auto loss = [&] {
            // Only the forward pass and the loss: backward and the step need no policy.
            const ember::Autocast autocast(ember::DType::BF16, o.bf16);
            return model.classify(batch).loss;
        }();
        auto grads = ember::optim::GradientsParams::from_grads(loss.backward(), model);
        model = optim.step(c.learning_rate, std::move(model), std::move(grads));
        return loss.detach();  // without its graph, so that keeping it keeps no activations
    };
    std::function<Tensor<B, 1>(std::size_t)> step = [&](std::size_t s) {
        return train_on(pool[s % pool.size()]);
    };
#if defined(EMBER_CUDA)
    // --graph: the last warm-up step is captured (and so run once) on the pool's first batch;
    // each later step replays it. The loss tensor the capture made is rewritten by each replay.
    std::optional<ember::cuda::CapturedStep> graph;
    std::optional<Tensor<B, 1>> graph_loss;
    const auto inner_device = ember_examples::backend_device_of(o.backend);
    EMBER_CHECK(!o.graph || inner_device.kind() == ember::DispatchKind::Cuda, Argument,
                "--graph replays a CUDA graph: it needs --backend cuda[:i][+fusion]");
    auto capture_step = [&] {
        graph_loss.reset();  // empty at capture: the step's output is the graph's own buffer
        graph.emplace(ember::cuda::capture([&] { graph_loss.emplace(train_on(pool.front())); },
                                           ember::CudaDevice{inner_device.index()}));
        EMBER_CHECK(graph->replayable(), Argument,
                    "--graph: the captured step cannot be replayed: ", graph->why_not());
        std::fprintf(stderr,
                     "resnet: captured one training step: %zu graph nodes, %zu optimizer "
                     "updates, %.1f MiB private pool\n",
                     graph->num_nodes(), graph->optimizer_updates(),
                     double(graph->pool_bytes()) / (1 << 20));
        return *graph_loss;
    };
    auto replay_step = [&](std::size_t) {
        graph->replay();
        return *graph_loss;  // a handle on the buffer the replay writes
    };
#else
    EMBER_CHECK(!o.graph, Argument, "--graph replays a CUDA graph: this build has no CUDA");
#endif
    // Warm-up: each step waited for and timed alone.
    std::vector<double> warm_losses;
    for (std::size_t s = 0; s < o.warmup; ++s) {
        const auto start = std::chrono::steady_clock::now();
#if defined(EMBER_CUDA)
        const double l =
            double((o.graph && s + 1 == o.warmup ? capture_step() : step(s)).into_scalar());
#else
        const double l = double(step(s).into_scalar());
#endif
        warm_losses.push_back(l);
        const double t =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        std::printf("{\"step\":%zu,\"warmup\":true,\"loss\":%.9g,\"ms\":%.3f}\n", s + 1, l,
                    t * 1e3);
        std::fflush(stdout);
    }
#if defined(EMBER_CUDA)
    const auto& inner = inner_device;
    const bool cuda = inner.kind() == ember::DispatchKind::Cuda;
    if (cuda) ember::cuda::reset_peak_memory(ember::CudaDevice{inner.index()});
    if (o.graph) step = replay_step;
#endif
    // A replay's loss lives in one buffer that the next replay overwrites: with --graph each
    // step's loss is read before the next (a wait per step) only where the losses are compared
    // (--batch-from); otherwise the timed round's last loss is the one read.
    const bool read_each = o.graph && o.batch_from.has_value();
    // Timed rounds: the steps queued back to back, as a training loop runs them (the host builds
    // the next step while the device runs the last one), and the round ends by reading the last
    // loss, which waits for the device. The losses are read after the round's time is taken.
    std::vector<double> losses, round_ms;
    const std::clock_t cpu_start = std::clock();
    for (std::size_t r = 0; r < o.rounds; ++r) {
        std::vector<Tensor<B, 1>> round_losses;
        std::vector<double> read;
        const auto start = std::chrono::steady_clock::now();
        for (std::size_t k = 0; k < o.steps; ++k) {
            round_losses.push_back(step(o.warmup + r * o.steps + k));
            if (read_each) read.push_back(double(round_losses.back().into_scalar()));
        }
        (void)round_losses.back().to_data();
        const double t =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        round_ms.push_back(t / double(o.steps) * 1e3);
        for (std::size_t k = 0; k < o.steps; ++k) {
            // A replayed round's earlier losses were overwritten (unless read as they came).
            if (o.graph && !read_each && k + 1 < o.steps) continue;
            losses.push_back(read_each ? read[k] : double(round_losses[k].into_scalar()));
            std::printf("{\"step\":%zu,\"warmup\":false,\"loss\":%.9g}\n",
                        o.warmup + r * o.steps + k + 1, losses.back());
        }
        std::printf("{\"round\":%zu,\"steps\":%zu,\"ms\":%.4f,\"images_per_s\":%.1f}\n", r + 1,
                    o.steps, round_ms.back(), double(batch_size) / round_ms.back() * 1e3);
        std::fflush(stdout);
    }
    // On a shared machine the wall time depends on the other jobs; the process's CPU time (all
    // its threads) says how much work the steps took.
    const double cpu = double(std::clock() - cpu_start) / CLOCKS_PER_SEC;
    const double best = *std::min_element(round_ms.begin(), round_ms.end());
    double mean = 0;
    for (double t : round_ms) mean += t / double(round_ms.size());
    std::string memory;
#if defined(EMBER_CUDA)
    if (cuda) {
        const auto peak =
            ember::cuda::memory_stats(ember::CudaDevice{inner.index()}).peak_bytes_in_use;
        // The captured step's buffers live in its private pool, made before the peak was reset
        // and not counted in it: the replays hold them all the while, so they are added.
        const double pool = graph ? double(graph->pool_bytes()) : 0.0;
        memory = ",\"peak_memory_mib\":" + std::to_string((double(peak) + pool) / (1 << 20));
        if (graph) memory += ",\"graph_pool_mib\":" + std::to_string(pool / (1 << 20));
    }
#endif
    std::printf(
        "{\"framework\":\"ember\",\"name\":\"%s_b%zu_%s_%s%s_%s%s\",\"backend\":\"%s\","
        "\"graph\":%s,\"value\":%.4f,\"unit\":\"ms\",\"mean_ms\":%.4f,\"images_per_s\":%.1f,"
        "\"steps\":%zu,\"rounds\":%zu,\"cpu_s\":%.2f%s}\n",
        o.model_name.c_str(), batch_size, c.optimizer.c_str(), precision(o),
        o.channels_last ? "_channels_last" : "", o.backend.c_str(), o.graph ? "_graph" : "",
        o.backend.c_str(), o.graph ? "true" : "false", best, mean,
        double(batch_size) / best * 1e3, o.steps, o.rounds, cpu, memory.c_str());
    if (!o.check) return 0;
    if (!expected.empty()) {
        // The loss check against PyTorch: same weights, same batch, same optimizer.
        // With --graph every step is read (the warm-up's eager ones and the capture's first).
        std::vector<double> all = o.graph ? warm_losses : std::vector<double>{};
        all.insert(all.end(), losses.begin(), losses.end());
        const std::size_t k = std::min(expected.size(), all.size());
        double worst = 0;
        for (std::size_t i = 0; i < k; ++i) worst = std::max(worst, std::abs(all[i] - expected[i]));
        const bool from_first = o.warmup == 0 || o.graph;
        const bool ok = from_first && k > 0 && worst <= 1e-4;
        std::fprintf(stderr, "check: %zu losses against %s's, largest difference %.3g: %s\n", k,
                     o.batch_from->string().c_str(), worst,
                     !from_first ? "FAILED (--warmup must be 0 to compare)"
                                   : (ok ? "within 1e-4" : "NOT within 1e-4"));
        return ok ? 0 : 1;
    }
    const std::size_t third = std::max<std::size_t>(1, losses.size() / 3);
    double first = 0, last = 0;
    for (std::size_t i = 0; i < third; ++i)
        first += losses[i], last += losses[losses.size() - 1 - i];
    const bool fell = last < first;
    std::fprintf(
        stderr, "check: mean loss of the first %zu timed steps %.4f, of the last %zu %.4f: %s\n",
        third, first / double(third), third, last / double(third), fell ? "fell" : "did NOT fall");
    return fell ? 0 : 1;
}

ember::data::MnistDataset load_split(const Options& o, bool training) {
    if (o.data_dir)
        return training ? ember::data::MnistDataset::train(*o.data_dir)
                        : ember::data::MnistDataset::test(*o.data_dir);
    return training ? ember::data::MnistDataset::train() : ember::data::MnistDataset::test();
}

// The convergence run: the Learner on Fashion-MNIST, cosine-annealed learning rate.
template <ember::AutodiffBackend B, typename Optim>
int fashion(const Options& o, Optim optim) {
    using Inner = typename B::InnerBackend;
    const RunConfig& c = o.config;
    // Training records the graph (autodiff); validation runs on the same device without.
    const auto valid_device = ember_examples::backend_device_of(o.backend);
    const auto device = valid_device.autodiff(true);
    fs::create_directories(o.artifact_dir);
    c.save(o.artifact_dir / "config.json");
    B::seed(c.seed);
    const auto train_split = load_split(o, true);
    const auto test_split = load_split(o, false);
    const std::size_t n_train =
        c.limit == 0 ? train_split.len() : std::min(c.limit, train_split.len());
    const std::size_t n_valid =
        c.valid_limit == 0 ? test_split.len() : std::min(c.valid_limit, test_split.len());
    // The first n_train of a fixed shuffle of the 60000, so --limit takes every class.
    const auto shuffled = ember::data::ShuffledDataset(train_split, c.seed);
    auto train_loader = ember::data::DataLoaderBuilder(FashionBatcher<B>{})
                            .batch_size(c.batch_size)
                            .set_device(device)
                            .shuffle(c.seed)
                            .num_workers(1)
                            .build(ember::data::PartialDataset(shuffled, 0, n_train));
    auto valid_loader = ember::data::DataLoaderBuilder(FashionBatcher<Inner>{})
                            .batch_size(256)
                            .set_device(valid_device)
                            .num_workers(1)
                            .build(ember::data::PartialDataset(test_split, 0, n_valid));
    const std::size_t total_steps = train_loader.num_batches() * c.num_epochs;

    using TrainItem = train::ClassificationOutput<B>;
    using ValidItem = train::ClassificationOutput<Inner>;
    train::LearnerBuilder<TrainItem, ValidItem> builder(o.artifact_dir);
    builder.metric_train_numeric(train::LossMetric<B>{})
        .metric_valid_numeric(train::LossMetric<Inner>{})
        .metric_train_numeric(train::AccuracyMetric<B>{})
        .metric_valid_numeric(train::AccuracyMetric<Inner>{})
        .metric_train_numeric(train::LearningRateMetric{})
        .num_epochs(c.num_epochs)
        .seed(c.seed);
    if (o.plain) builder.renderer(std::make_shared<train::PlainRenderer>());
    if (o.bf16) builder.autocast(ember::DType::BF16);  // the steps under ember::Autocast
    auto model = initial_model<B>(o, device);
    std::printf(
        "ResNet: %zu parameters, backend %s, %s; %s, peak lr %g cosine-annealed over %zu steps; "
        "training on %zu Fashion-MNIST images per epoch (padded to 3x32x32), validating on %zu\n",
        model.num_params(), o.backend.c_str(), o.bf16 ? "bf16 mixed precision" : "f32",
        c.optimizer.c_str(), c.learning_rate, total_steps, n_train, n_valid);
    auto schedule =
        ember::lr_scheduler::CosineAnnealingLrSchedulerConfig{c.learning_rate, total_steps}.init();
    auto learner = builder.build(std::move(model), std::move(optim), schedule);

    const auto start = std::chrono::steady_clock::now();
    auto trained = learner.fit(train_loader, valid_loader);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    using Recorder = ember::record::NamedMpkFileRecorder<ember::record::FullPrecisionSettings>;
    trained.valid().save_file(o.artifact_dir / "model", Recorder{});

    const auto& history = learner.history();
    const auto& train_loss = history.at(train::Split::Train).at("Loss");
    const auto& valid_loss = history.at(train::Split::Valid).at("Loss");
    const auto& valid_acc = history.at(train::Split::Valid).at("Accuracy");
    std::printf("\nepoch  train loss  valid loss  valid accuracy\n");
    for (std::size_t e = 0; e < valid_loss.size(); ++e)
        std::printf("%5zu  %10.4f  %10.4f  %12.2f %%\n", e + 1, train_loss[e], valid_loss[e],
                    valid_acc[e]);
    std::printf("trained in %.1f s (%.2f steps/s); model saved to %s\n", seconds,
                double(total_steps) / seconds, (o.artifact_dir / "model.mpk").string().c_str());
    if (!o.check) return 0;
    const bool fell = valid_loss.back() < std::log(10.0);
    std::printf("check: validation loss %.4f %s ln 10 = %.4f\n", valid_loss.back(),
                fell ? "is below" : "is NOT below", std::log(10.0));
    return fell ? 0 : 1;
}

template <ember::AutodiffBackend B>
int run_on(const Options& o) {
    using Model = ResNet<B>;
    const RunConfig& c = o.config;
    if (o.synthetic)
        return c.optimizer == "adam" ? synthetic<B>(o, adam_optimizer<Model>(c))
                                     : synthetic<B>(o, sgd_optimizer<Model>(c));
    return c.optimizer == "adam" ? fashion<B>(o, adam_optimizer<Model>(c))
                                 : fashion<B>(o, sgd_optimizer<Model>(c));
}

int run(int argc, char** argv) {
    const Options o = parse(argc, argv);
    if (o.threads) ember::cpu::set_num_threads(*o.threads);
    return run_on<ember::Dispatch>(o);
}

}  // namespace resnet

int main(int argc, char** argv) {
    try {
        return resnet::run(argc, argv);
    } catch (const ember::Error& e) {
        std::cerr << "resnet: " << e.what() << '\n';
        return 1;
    }
}
