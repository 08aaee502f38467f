// A GPT-2-shaped byte-level language model on ember: trained with AdamW and a warm-up + cosine
// learning rate on Debian's text, checkpointed, and sampled with a KV cache. It runs on
// ember::Dispatch, on the device --backend names (cpu|vulkan|cuda[:i][+fusion]).
//
//   gpt train [--layers N --d-model N --heads N --context N] [--steps N] [--batch-size N] ...
//   gpt train --bench [--batch 8 --seq 1024] [--peak-tflops X] [--init-from torch.pt]
//   gpt generate [--artifact-dir DIR] [--prompt S] [--length N] [--temperature X] [--top-k K]
//                                                                              (see --help)
#include <ember/dispatch/dispatch.hpp>
#include <ember/ember.hpp>
#include <ember/nn.hpp>
#include <ember/optim.hpp>
#include <ember/record.hpp>
#if defined(EMBER_CUDA)
#include <ember/backend/cuda.hpp>  // the peak memory of --bench
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "../backend.hpp"
#include "../cli.hpp"
#include "data.hpp"
#include "model.hpp"

namespace fs = std::filesystem;

namespace gpt {

/// What `train` runs with; saved as config.json beside the checkpoint, so `generate` and
/// `train --resume` rebuild the same model.
struct TrainConfig {
    GptConfig model;              ///< the network
    std::size_t steps = 2000;     ///< optimizer steps of the run
    std::size_t batch_size = 8;   ///< sequences per step
    std::size_t seq_len = 0;      ///< tokens per sequence (0: the context)
    double learning_rate = 6e-4;  ///< peak rate, after the warm-up
    double min_lr = 6e-5;         ///< the rate the cosine ends at
    std::size_t warmup = 100;     ///< warm-up steps
    double weight_decay = 0.1;    ///< AdamW's decoupled decay
    double beta_2 = 0.95;         ///< AdamW's second-moment decay
    std::uint64_t seed = 42;      ///< initialisation, batches, dropout
    EMBER_CONFIG(TrainConfig, model, steps, batch_size, seq_len, learning_rate, min_lr, warmup,
                 weight_decay, beta_2, seed)
};

/// How to sample.
struct Sampling {
    std::string prompt = "\n";
    std::size_t length = 400;
    double temperature = 0.8;
    std::size_t top_k = 0;  // 0: all tokens
    std::uint64_t seed = 7;
    bool cache = true;
};

struct Options {
    std::string command;
    TrainConfig config;
    Sampling sampling;
    std::string backend = "cpu";
    fs::path artifact_dir = "artifacts/gpt";
    std::vector<fs::path> texts;
    std::size_t log_every = 10;
    std::size_t eval_every = 200;
    std::size_t eval_batches = 8;
    std::size_t checkpoint_every = 500;
    std::optional<std::size_t> stop_at;  // end the process after this step (with a checkpoint)
    std::optional<std::size_t> threads;
    bool resume = false;
    bool check = false;
    fs::path init_from;      // a PyTorch state dict of benchmarks/gpt_torch.py's model
    bool bench = false;      // time steps on a fixed batch instead of training
    double peak_tflops = 0;  // the device's peak, for the model FLOPs utilisation
    std::size_t bench_warmup = 3;
    std::size_t bench_reps = 10;
    std::size_t bench_rounds = 3;
    std::size_t loss_steps = 0;  // --bench: print the losses of this many steps first
};

Options parse(int argc, char** argv) {
    Options o;
    TrainConfig& c = o.config;
    Sampling& s = o.sampling;
    CLI::App app{
        "A byte-level GPT on Debian's text (fortunes, licences): trained with AdamW, "
        "checkpointed, and sampled with a KV cache.",
        "gpt"};
    ember_examples::setup(app);
    app.require_subcommand(1, 1);
    auto* train_cmd = app.add_subcommand(
        "train", "train a byte-level GPT on Debian's text (default: GPT-2 small's shape)");
    auto* gen_cmd =
        app.add_subcommand("generate", "sample from the checkpoint in the artifact directory");
    const auto& positive = ember_examples::positive;
    train_cmd->add_option("--layers", c.model.n_layers, "transformer blocks")
        ->check(positive)
        ->group("Model");
    train_cmd->add_option("--d-model", c.model.d_model, "width")->check(positive)->group("Model");
    train_cmd->add_option("--heads", c.model.n_heads, "attention heads")
        ->check(positive)
        ->group("Model");
    train_cmd->add_option("--context", c.model.context, "longest sequence, learned positions")
        ->check(positive)
        ->group("Model");
    train_cmd->add_option("--dropout", c.model.dropout, "dropout probability, in [0, 1)")
        ->check(ember_examples::number_where(
            "PROBABILITY", [](double v) { return v >= 0 && v < 1; }, "in [0, 1)"))
        ->group("Model");
    train_cmd->add_option("--steps", c.steps, "optimizer steps")->check(positive);
    train_cmd->add_option("--batch-size,--batch", c.batch_size, "sequences per step")
        ->check(positive);
    train_cmd
        ->add_option("--seq-len,--seq", c.seq_len,
                     "tokens per training sequence (0: the context), at most the context")
        ->check(ember_examples::non_negative);
    train_cmd
        ->add_option("--lr", c.learning_rate,
                     "peak learning rate, reached after --warmup steps, then cosine-annealed "
                     "to --min-lr at the last step")
        ->check(positive);
    train_cmd->add_option("--min-lr", c.min_lr, "the rate the cosine ends at")
        ->check(ember_examples::non_negative);
    train_cmd
        ->add_option("--warmup", c.warmup,
                     "warm-up steps (a tenth of the steps when not below --steps)")
        ->check(ember_examples::non_negative);
    train_cmd->add_option("--weight-decay", c.weight_decay, "AdamW's decoupled weight decay")
        ->check(ember_examples::non_negative);
    train_cmd->add_option("--beta2", c.beta_2, "AdamW's second-moment decay (beta1 is 0.9)")
        ->check(ember_examples::number_where(
            "FRACTION", [](double v) { return v >= 0 && v < 1; }, "in [0, 1)"));
    train_cmd->add_option("--text", o.texts, "more text to train on (repeatable)")
        ->check(CLI::ExistingFile);
    train_cmd->add_option("--log-every", o.log_every, "print the loss every N steps")
        ->check(positive);
    train_cmd
        ->add_option("--eval-every", o.eval_every,
                     "the validation loss every N steps, and at the end")
        ->check(positive);
    train_cmd->add_option("--eval-batches", o.eval_batches, "batches of held-out text it is over")
        ->check(positive);
    train_cmd
        ->add_option("--checkpoint-every", o.checkpoint_every,
                     "save model, optimizer and position every N steps (0: only at the end) "
                     "and at the end")
        ->check(ember_examples::non_negative);
    train_cmd->add_flag("--resume", o.resume,
                        "go on from the checkpoint in the artifact directory");
    train_cmd
        ->add_option("--stop-at", o.stop_at,
                     "stop after step N, with a checkpoint (a run to --resume later)")
        ->check(positive);
    train_cmd->add_flag("--check", o.check,
                        "also validate before training; exit 1 unless the validation loss fell");
    train_cmd->add_option("--seed", c.seed, "seed of initialisation, batches and dropout");
    train_cmd
        ->add_option("--init-from", o.init_from,
                     "start from these weights: a PyTorch state dict of "
                     "benchmarks/gpt_torch.py's model (its --save-init)")
        ->check(CLI::ExistingFile);
    train_cmd
        ->add_flag("--bench", o.bench,
                   "time training steps on one fixed batch (the bytes gpt_torch.py uses) at "
                   "the constant --lr; print JSON lines (step time, tokens/s, MFU); no text, "
                   "no checkpoint")
        ->group("Benchmark");
    train_cmd
        ->add_option("--peak-tflops", o.peak_tflops,
                     "the device's peak TFLOP/s (e.g. 989: an H100/H200's dense bf16), for the "
                     "model FLOPs utilisation")
        ->check(positive)
        ->group("Benchmark");
    train_cmd->add_option("--bench-warmup", o.bench_warmup, "untimed steps first")
        ->check(ember_examples::non_negative)
        ->group("Benchmark");
    train_cmd->add_option("--bench-reps", o.bench_reps, "steps per timed round")
        ->check(positive)
        ->group("Benchmark");
    train_cmd->add_option("--bench-rounds", o.bench_rounds, "timed rounds; the fastest one counts")
        ->check(positive)
        ->group("Benchmark");
    train_cmd
        ->add_option("--loss-steps", o.loss_steps,
                     "before timing, print the loss of each of N steps (gpt_torch.py "
                     "--loss-steps prints PyTorch's)")
        ->check(ember_examples::non_negative)
        ->group("Benchmark");
    gen_cmd->add_option("--prompt", s.prompt, "what the text starts with")
        ->default_str("a newline");
    gen_cmd->add_option("--length", s.length, "bytes to generate")
        ->check(ember_examples::non_negative);
    gen_cmd->add_option("--temperature", s.temperature, "below 1 sharper, 0 greedy")
        ->check(ember_examples::non_negative);
    gen_cmd->add_option("--top-k", s.top_k, "sample among the K likeliest bytes only (0: all)")
        ->check(ember_examples::non_negative);
    bool no_cache = false;
    gen_cmd->add_flag("--no-cache", no_cache,
                      "recompute the whole window for every byte (to compare with the cache)");
    gen_cmd->add_option("--seed", s.seed, "seed of sampling");
    std::vector<const CLI::Option*> backends;
    for (auto* cmd : {train_cmd, gen_cmd}) {
        cmd->add_option("--artifact-dir", o.artifact_dir, "checkpoint and config.json");
        backends.push_back(ember_examples::add_backend_option(cmd, o.backend));
        cmd->add_option("--threads", o.threads,
                        "CPU backend threads (default: EMBER_NUM_THREADS or all)")
            ->check(positive);
    }
    train_cmd->callback([&c] {
        if (c.seq_len > c.model.context)
            throw CLI::ValidationError("--seq-len", std::to_string(c.seq_len) +
                                                        " is longer than the context " +
                                                        std::to_string(c.model.context));
    });
    ember_examples::parse_or_exit(app, argc, argv);
    ember_examples::backend_from_env(app, {backends[0], backends[1]}, o.backend);
    o.command = train_cmd->parsed() ? "train" : "generate";
    s.cache = !no_cache;
    if (c.seq_len == 0) c.seq_len = c.model.context;
    if (c.warmup >= c.steps) c.warmup = c.steps / 10;  // short runs: a tenth of the steps
    return o;
}

using Recorder = ember::record::NamedMpkFileRecorder<ember::record::FullPrecisionSettings>;

double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Mean loss of `model` over `batches` fixed windows of the validation stream (the same windows
// at every evaluation: drawn from a generator seeded the same way each time).
template <ember::Backend B>
double evaluate(const Gpt<B>& model, const Corpus& corpus, const TrainConfig& c,
                std::size_t batches, const ember::Device<B>& device) {
    std::mt19937_64 rng(c.seed + 1);
    double total = 0;
    for (std::size_t i = 0; i < batches; ++i) {
        auto batch = sample_batch<B>(corpus.valid, c.batch_size, c.seq_len, rng, device);
        total += double(model.loss(batch.inputs, batch.targets).into_scalar());
    }
    return total / double(batches);
}

// The checkpoint: model.mpk (weights with their parameter ids), optimizer.mpk (AdamW's moments
// by parameter id) and state.mpk (the step and the scheduler's position). Each file is written
// atomically; state.mpk last, so a checkpoint is complete when its state says so.
template <typename Model, typename Optim, typename Sched>
void save_checkpoint(const fs::path& dir, const Model& model, const Optim& optim,
                     const Sched& schedule, std::size_t step) {
    const Recorder r;
    model.valid().save_file(dir / "model", r);
    r.record(optim.to_record(), dir / "optimizer");
    r.record(ember::record::Map{{"step", std::int64_t(step)}, {"scheduler", schedule.to_record()}},
             dir / "state");
}

template <ember::AutodiffBackend B>
int train(const Options& o) {
    using Inner = typename B::InnerBackend;
    const TrainConfig& c = o.config;
    const Corpus corpus = load_corpus(o.texts);
    fs::create_directories(o.artifact_dir);
    if (o.resume) {
        const auto saved = TrainConfig::load(o.artifact_dir / "config.json");
        if (saved.to_json() != c.to_json())
            throw ember::ArgumentError("gpt: --resume needs the options of the run in " +
                                       o.artifact_dir.string() +
                                       " (its config.json differs from this command's)");
    } else {
        c.save(o.artifact_dir / "config.json");
    }
    B::seed(c.seed);
    // Training records the graph (autodiff); evaluation runs on the same device without.
    const auto valid_device = ember_examples::backend_device_of(o.backend);
    const auto device = valid_device.autodiff(true);
    auto model = c.model.template init<B>(device);
    if (!o.init_from.empty() && !o.resume) model = load_pytorch(model, o.init_from, device);
    auto optim = ember::optim::AdamWConfig{}
                     .with_beta_2(c.beta_2)
                     .with_epsilon(1e-8)
                     .with_weight_decay(c.weight_decay)
                     .template init<Gpt<B>>();
    auto schedule =
        ember::lr_scheduler::WarmupCosineLrSchedulerConfig{c.learning_rate, c.warmup, c.steps}
            .with_min_lr(std::min(c.min_lr, c.learning_rate))
            .init();
    std::size_t step = 0;
    if (o.resume) {
        const Recorder r;
        model = model.load_file(o.artifact_dir / "model", r, device);
        optim = optim.load_record(r.load(o.artifact_dir / "optimizer"));
        const auto state = r.load(o.artifact_dir / "state");
        step = std::size_t(state.at("step").as<std::int64_t>("step"));
        schedule = schedule.load_record(state.at("scheduler"));
        std::printf("resuming at step %zu\n", step);
    }
    for (const auto& s : corpus.sources) std::printf("text: %s\n", s.c_str());
    std::printf(
        "%zu training bytes, %zu held out; model: %zu parameters (%zu layers, d_model %zu, %zu "
        "heads, context %zu), backend %s\n",
        corpus.train.size(), corpus.valid.size(), model.num_params(), c.model.n_layers,
        c.model.d_model, c.model.n_heads, c.model.context, o.backend.c_str());
    std::printf(
        "%zu steps of %zu x %zu tokens; AdamW (beta2 %g, weight decay %g), lr %g after %zu "
        "warm-up steps, cosine to %g\n",
        c.steps, c.batch_size, c.seq_len, c.beta_2, c.weight_decay, c.learning_rate, c.warmup,
        c.min_lr);

    std::optional<double> first_eval;
    if (o.check) {
        first_eval = evaluate<Inner>(model.valid(), corpus, c, o.eval_batches, valid_device);
        std::printf("step %5zu  validation loss %.4f\n", step, *first_eval);
    }
    double last_eval = first_eval.value_or(0);
    const std::size_t tokens_per_step = c.batch_size * c.seq_len;
    double window_loss = 0, window_seconds = 0;
    std::size_t window_steps = 0;
    const auto run_start = std::chrono::steady_clock::now();
    const std::clock_t cpu_start = std::clock();
    const std::size_t first_step = step;
    const std::size_t last = std::min(c.steps, o.stop_at.value_or(c.steps));
    while (step < last) {
        // Batches depend on the seed and the step only, so a resumed run sees what an
        // uninterrupted one would.
        std::mt19937_64 rng(c.seed * 1000003 + step);
        const auto start = std::chrono::steady_clock::now();
        auto batch = sample_batch<B>(corpus.train, c.batch_size, c.seq_len, rng, device);
        auto loss = model.loss(batch.inputs, batch.targets);
        auto grads = ember::optim::GradientsParams::from_grads(loss.backward(), model);
        const double lr = schedule.step();
        model = optim.step(lr, std::move(model), std::move(grads));
        window_loss += double(loss.into_scalar());  // waits for the step
        window_seconds += seconds_since(start);
        ++window_steps;
        ++step;
        if (step % o.log_every == 0 || step == last) {
            std::printf("step %5zu  loss %.4f  lr %.3g  %.1f ms/step  %.0f tokens/s\n", step,
                        window_loss / double(window_steps), lr,
                        1e3 * window_seconds / double(window_steps),
                        double(tokens_per_step * window_steps) / window_seconds);
            std::fflush(stdout);
            window_loss = window_seconds = 0;
            window_steps = 0;
        }
        if (step % o.eval_every == 0 || step == last) {
            last_eval = evaluate<Inner>(model.valid(), corpus, c, o.eval_batches, valid_device);
            std::printf("step %5zu  validation loss %.4f\n", step, last_eval);
        }
        if ((o.checkpoint_every > 0 && step % o.checkpoint_every == 0) || step == last)
            save_checkpoint(o.artifact_dir, model, optim, schedule, step);
    }
    const double total = seconds_since(run_start);
    const std::size_t done = step - first_step;
    // On a shared machine the wall time depends on the other jobs; the process's CPU time (all
    // its threads) says how much work the run took.
    const double cpu = double(std::clock() - cpu_start) / CLOCKS_PER_SEC;
    if (done > 0)
        std::printf(
            "%zu steps in %.1f s: %.3f steps/s, %.0f tokens/s (evaluation and checkpoints "
            "included); process CPU time %.1f s\n",
            done, total, double(done) / total, double(done * tokens_per_step) / total, cpu);
    std::printf("checkpoint at step %zu: %s\n", step,
                (o.artifact_dir / "model.mpk").string().c_str());
    if (!o.check) return 0;
    const bool fell = last_eval < *first_eval;
    std::printf("check: validation loss %.4f -> %.4f: %s\n", *first_eval, last_eval,
                fell ? "fell" : "did NOT fall");
    return fell ? 0 : 1;
}

// One JSON line, as benchmarks/gpt_torch.py prints them.
void print_json(const std::string& fields) {
    std::printf("{\"framework\": \"ember\", %s}\n", fields.c_str());
    std::fflush(stdout);
}

std::string json_number(double v, int digits = 6) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*g", digits, v);
    return buf;
}

// `train --bench`: AdamW steps (the example's settings, the constant rate --lr) on one fixed
// batch; the best of --bench-rounds rounds of --bench-reps steps after --bench-warmup steps. A
// round ends by reading the last loss, which waits for the device, so the time is the steps'.
template <ember::AutodiffBackend B>
int bench(const Options& o) {
    const TrainConfig& c = o.config;
    B::seed(c.seed);
    const auto inner = ember_examples::backend_device_of(o.backend);
    const auto device = inner.autodiff(true);
    auto model = c.model.template init<B>(device);
    if (!o.init_from.empty()) model = load_pytorch(model, o.init_from, device);
    auto optim = ember::optim::AdamWConfig{}
                     .with_beta_2(c.beta_2)
                     .with_epsilon(1e-8)
                     .with_weight_decay(c.weight_decay)
                     .template init<Gpt<B>>();
    const auto batch = bench_batch<B>(c.batch_size, c.seq_len, c.seed, device);
    auto step = [&] {
        auto loss = model.loss(batch.inputs, batch.targets);
        auto grads = ember::optim::GradientsParams::from_grads(loss.backward(), model);
        model = optim.step(c.learning_rate, std::move(model), std::move(grads));
        return loss;
    };
    for (std::size_t k = 0; k < o.loss_steps; ++k) {
        const double loss = double(step().into_scalar());
        print_json("\"name\": \"gpt_loss\", \"step\": " + std::to_string(k) +
                   ", \"value\": " + json_number(loss, 7));
    }
#if defined(EMBER_CUDA)
    const bool cuda = inner.kind() == ember::DispatchKind::Cuda;
    if (cuda) ember::cuda::reset_peak_memory(ember::CudaDevice{inner.index()});
#endif
    double last_loss = 0;
    for (std::size_t k = 0; k < o.bench_warmup; ++k) last_loss = double(step().into_scalar());
    double best = 1e300;
    for (std::size_t r = 0; r < o.bench_rounds; ++r) {
        const auto start = std::chrono::steady_clock::now();
        std::optional<ember::Tensor<B, 1>> loss;
        for (std::size_t k = 0; k < o.bench_reps; ++k) loss = step();
        last_loss = double(loss->into_scalar());
        best = std::min(best, seconds_since(start) / double(o.bench_reps));
    }
    const double tokens = double(c.batch_size * c.seq_len);
    std::string line = "\"name\": \"gpt_train_step_b" + std::to_string(c.batch_size) + "_s" +
                       std::to_string(c.seq_len) + "_f32\", \"value\": " + json_number(best * 1e3) +
                       ", \"unit\": \"ms\", \"tokens_per_s\": " + json_number(tokens / best, 7);
    if (o.peak_tflops > 0)
        line += ", \"mfu\": " +
                json_number(
                    model_flops(model, c.batch_size, c.seq_len) / best / (o.peak_tflops * 1e12), 4);
#if defined(EMBER_CUDA)
    if (cuda)
        line +=
            ", \"peak_memory_mib\": " +
            json_number(
                double(
                    ember::cuda::memory_stats(ember::CudaDevice{inner.index()}).peak_bytes_in_use) /
                (1 << 20));
#endif
    line += ", \"loss\": " + json_number(last_loss) + ", \"backend\": \"" + o.backend +
            "\", \"params\": " + std::to_string(model.num_params());
    print_json(line);
    return 0;
}

// The next byte from `scores` (the vocabulary's scores): the likeliest at temperature 0, else a
// draw from softmax(scores / temperature) over the top_k likeliest (all when top_k is 0).
std::size_t sample(std::vector<float> scores, const Sampling& s, std::mt19937_64& rng) {
    std::vector<std::size_t> order(scores.size());
    std::iota(order.begin(), order.end(), 0);
    const std::size_t k = s.top_k == 0 ? order.size() : std::min(s.top_k, order.size());
    std::partial_sort(order.begin(), order.begin() + std::ptrdiff_t(k), order.end(),
                      [&](std::size_t a, std::size_t b) { return scores[a] > scores[b]; });
    if (s.temperature == 0) return order[0];
    std::vector<double> weights(k);
    double total = 0;
    for (std::size_t i = 0; i < k; ++i)
        total += weights[i] = std::exp((scores[order[i]] - scores[order[0]]) / s.temperature);
    // mt19937_64's output is fixed by the standard (its distributions are not): the same seed
    // gives the same text everywhere.
    double u = double(rng() >> 11) * 0x1.0p-53 * total;
    std::size_t i = 0;
    for (; i + 1 < k && u >= weights[i]; ++i) u -= weights[i];
    return order[i];
}

// The scores of the last row of `scores` [rows, vocab].
template <ember::Backend B>
std::vector<float> last_row(const ember::Tensor<B, 2>& scores) {
    const std::size_t rows = scores.dims()[0];
    return scores.narrow(0, rows - 1, 1).into_data().template to_vec<float>();
}

template <ember::Backend B>
int generate(const Options& o) {
    const auto c = TrainConfig::load(o.artifact_dir / "config.json");
    const auto device = ember_examples::backend_device_of(o.backend);
    const auto model =
        c.model.template init<B>(device).load_file(o.artifact_dir / "model", Recorder{}, device);
    const Sampling& s = o.sampling;
    std::vector<std::int64_t> tokens(s.prompt.begin(), s.prompt.end());
    for (auto& t : tokens) t = std::int64_t(static_cast<unsigned char>(t));
    if (tokens.empty()) tokens.push_back('\n');
    const std::size_t context = model.context();
    auto as_tensor = [&device](std::vector<std::int64_t> t) {
        const std::size_t n = t.size();
        return ember::Tensor<B, 2, ember::Int>::from_data(ember::TensorData(std::move(t), {1, n}),
                                                          device);
    };
    // The model reads positions 0..context-1 (learned positions end there). The window it
    // reads starts at `base`; when it is full, it restarts from the last half of itself.
    std::size_t base = tokens.size() > context ? tokens.size() - context : 0;
    bool refill = true;
    std::mt19937_64 rng(s.seed);
    const auto start = std::chrono::steady_clock::now();
    auto cache = model.new_cache();
    std::vector<float> scores;
    for (std::size_t i = 0; i < s.length; ++i) {
        if (tokens.size() - base > context) {
            base = tokens.size() - std::max<std::size_t>(1, context / 2);
            refill = true;
        }
        auto window = [&] {
            return std::vector<std::int64_t>(tokens.begin() + std::ptrdiff_t(base), tokens.end());
        };
        if (!s.cache) {
            // Without a cache: the whole window again for every byte, O(T²) per byte.
            scores = last_row(model.forward(as_tensor(window())));
        } else if (refill) {
            // The window's keys and values into a fresh cache (the prompt, or after a restart).
            cache = model.new_cache();
            scores = last_row(model.forward_cached(as_tensor(window()), cache));
            refill = false;
        } else {
            // One new position attending to the cached ones: O(T) per byte.
            scores = last_row(model.forward_cached(as_tensor({tokens.back()}), cache));
        }
        tokens.push_back(std::int64_t(sample(std::move(scores), s, rng)));
    }
    const double seconds = seconds_since(start);
    const std::string text(tokens.begin(), tokens.end());
    std::fwrite(text.data(), 1, text.size(), stdout);  // the bytes as they are, NULs included
    std::printf("\n---\n%zu bytes in %.2f s (%.1f bytes/s, %s, %s)\n", s.length, seconds,
                double(s.length) / seconds, s.cache ? "KV cache" : "no cache", o.backend.c_str());
    return 0;
}

int run(int argc, char** argv) {
    const Options o = parse(argc, argv);
    if (o.threads) ember::cpu::set_num_threads(*o.threads);
    using B = ember::Dispatch;
    if (o.command == "train") return o.bench ? bench<B>(o) : train<B>(o);
    return generate<B>(o);
}

}  // namespace gpt

int main(int argc, char** argv) {
    try {
        return gpt::run(argc, argv);
    } catch (const ember::Error& e) {
        std::cerr << "gpt: " << e.what() << '\n';
        return 1;
    }
}
