#pragma once
// The GPT example's training and benchmark loops, written once for any autodiff backend:
// main.cpp runs them on ember::Dispatch (the device --backend names), train_cuda.cpp on the
// concrete CUDA stacks for data-parallel training over several GPUs (--devices, --distributed).
#include <ember/ember.hpp>
#include <ember/nn.hpp>
#include <ember/optim.hpp>
#include <ember/record.hpp>
#if defined(EMBER_CUDA)
#include <ember/backend/cuda.hpp>       // the peak memory of --bench
#include <ember/stacks/cuda_graph.hpp>  // --bench --graph
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "data.hpp"
#include "model.hpp"
#include "parallel.hpp"
#include "pytorch.hpp"

namespace gpt {

namespace fs = std::filesystem;

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
    std::size_t loss_steps = 0;        // --bench: print the losses of this many steps first
    bool graph = false;                // --bench: replay the step as one captured CUDA graph
    bool bf16 = false;                 // bf16 mixed precision (ember::Autocast, forward only)
    std::vector<std::size_t> devices;  // --devices: CUDA devices, a replica on each (threads)
    bool distributed = false;          // --distributed: this process is one rank of a group
};

using Recorder = ember::record::NamedMpkFileRecorder<ember::record::FullPrecisionSettings>;

inline double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// "bf16" or "f32", for the JSON lines.
inline std::string precision(const Options& o) { return o.bf16 ? "bf16" : "f32"; }

// One JSON line, as benchmarks/gpt_torch.py prints them.
inline void print_json(const std::string& fields) {
    std::printf("{\"framework\": \"ember\", %s}\n", fields.c_str());
    std::fflush(stdout);
}

inline std::string json_number(double v, int digits = 6) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*g", digits, v);
    return buf;
}

/// A fresh model for `train` or `--bench` on `device`: GptConfig's initialisation from the
/// seed (the caller seeds the backend), or --init-from's PyTorch weights (not when resuming:
/// the checkpoint's weights replace these).
template <ember::AutodiffBackend B>
Gpt<B> initial_model(const Options& o, const ember::Device<B>& device) {
    auto model = o.config.model.template init<B>(device);
    if (!o.init_from.empty() && !o.resume) model = load_pytorch(model, o.init_from, device);
    return model;
}

/// The example's AdamW (beta1 0.9, --beta2, eps 1e-8, --weight-decay) for Gpt<B>.
template <ember::AutodiffBackend B>
auto make_optimizer(const TrainConfig& c) {
    return ember::optim::AdamWConfig{}
        .with_beta_2(c.beta_2)
        .with_epsilon(1e-8)
        .with_weight_decay(c.weight_decay)
        .template init<Gpt<B>>();
}

/// `model` as rank 0 has it, on every replica (the replicas start alike whatever their
/// initialisation gave them).
template <ember::AutodiffBackend B>
Gpt<B> same_as_lead(Gpt<B> model, const Replica& rep) {
    if constexpr (kCollectiveStack<B>)
        if (rep.comm) return ember::collective::broadcast_module(*rep.comm, model, 0);
    return model;
}

/// Waits until every replica got here (after the device work each one has queued).
inline void barrier(const Replica& rep) {
    if (rep.comm) rep.comm->barrier();
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
// by parameter id) and state.mpk (the step, the scheduler's position and the number of
// replicas). Each file is written atomically; state.mpk last, so a checkpoint is complete when
// its state says so.
template <typename Model, typename Optim, typename Sched>
void save_checkpoint(const fs::path& dir, const Model& model, const Optim& optim,
                     const Sched& schedule, std::size_t step, std::size_t world) {
    const Recorder r;
    model.valid().save_file(dir / "model", r);
    r.record(optim.to_record(), dir / "optimizer");
    r.record(ember::record::Map{{"step", std::int64_t(step)},
                                {"scheduler", schedule.to_record()},
                                {"replicas", std::int64_t(world)}},
             dir / "state");
}

/// `gpt train`: the run of `o` from `model` (initial_model's, the same on every replica) on
/// `device`, validating on `valid_device` (the same device without autodiff). With several
/// replicas, every replica calls it with its own `rep`: each step's batch is world × --batch-size
/// windows, replica r trains on windows r·batch .. (r+1)·batch − 1, and the gradients are
/// averaged during backward; rank 0 alone prints, validates and writes the checkpoints. Returns
/// the process's exit status (rank 0's decides).
template <ember::AutodiffBackend B>
int train(const Options& o, const Corpus& corpus, const ember::Device<B>& device,
          const ember::Device<typename B::InnerBackend>& valid_device, Gpt<B> model,
          const Replica& rep = {}) {
    using Inner = typename B::InnerBackend;
    const TrainConfig& c = o.config;
    if (rep.lead()) fs::create_directories(o.artifact_dir);
    barrier(rep);  // the directory exists before any replica reads from it
    if (o.resume) {
        const auto saved = TrainConfig::load(o.artifact_dir / "config.json");
        if (saved.to_json() != c.to_json())
            throw ember::ArgumentError("gpt: --resume needs the options of the run in " +
                                       o.artifact_dir.string() +
                                       " (its config.json differs from this command's)");
    } else if (rep.lead()) {
        c.save(o.artifact_dir / "config.json");
    }
    auto optim = make_optimizer<B>(c);
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
        // A step's batch is split between the replicas: another number of them sees other
        // batches (a checkpoint without the entry is from one device).
        const auto* saved = state.find("replicas");
        const std::size_t replicas =
            saved ? std::size_t(saved->as<std::int64_t>("replicas")) : std::size_t{1};
        if (replicas != rep.world)
            throw ember::ArgumentError("--resume: the checkpoint in " + o.artifact_dir.string() +
                                       " was written by " + std::to_string(replicas) +
                                       " replica(s), this run has " + std::to_string(rep.world));
        if (rep.lead()) std::printf("resuming at step %zu\n", step);
    }
    model = same_as_lead(std::move(model), rep);
    const std::size_t tokens_per_step = rep.world * c.batch_size * c.seq_len;
    if (rep.lead()) {
        for (const auto& s : corpus.sources) std::printf("text: %s\n", s.c_str());
        std::printf(
            "%zu training bytes, %zu held out; model: %zu parameters (%zu layers, d_model %zu, "
            "%zu heads, context %zu), backend %s, %s\n",
            corpus.train.size(), corpus.valid.size(), model.num_params(), c.model.n_layers,
            c.model.d_model, c.model.n_heads, c.model.context, o.backend.c_str(),
            o.bf16 ? "bf16 mixed precision" : "f32");
        if (rep.world > 1)
            std::printf("data parallel: %zu replicas, %zu sequences each (%zu a step)\n", rep.world,
                        c.batch_size, rep.world * c.batch_size);
        std::printf(
            "%zu steps of %zu x %zu tokens; AdamW (beta2 %g, weight decay %g), lr %g after %zu "
            "warm-up steps, cosine to %g\n",
            c.steps, rep.world * c.batch_size, c.seq_len, c.beta_2, c.weight_decay, c.learning_rate,
            c.warmup, c.min_lr);
    }

    std::optional<double> first_eval;
    if (o.check && rep.lead()) {
        first_eval = evaluate<Inner>(model.valid(), corpus, c, o.eval_batches, valid_device);
        std::printf("step %5zu  validation loss %.4f\n", step, *first_eval);
    }
    double last_eval = first_eval.value_or(0);
    double window_loss = 0, window_seconds = 0;
    std::size_t window_steps = 0;
    const auto run_start = std::chrono::steady_clock::now();
    const std::clock_t cpu_start = std::clock();
    const std::size_t first_step = step;
    const std::size_t last = std::min(c.steps, o.stop_at.value_or(c.steps));
    while (step < last) {
        // Batches depend on the seed and the step only, so a resumed run sees what an
        // uninterrupted one would; each replica takes its share of the step's draw.
        std::mt19937_64 rng(c.seed * 1000003 + step);
        const auto start = std::chrono::steady_clock::now();
        auto batch = sample_batch<B>(corpus.train, rep.world * c.batch_size, c.seq_len, rng, device,
                                     rep.rank * c.batch_size, c.batch_size);
        const double lr = schedule.step();
        auto [stepped, loss] =
            replica_step(std::move(model), optim, lr, batch.inputs, batch.targets, rep, o.bf16);
        model = std::move(stepped);
        window_loss += mean_loss(std::move(loss), rep);  // waits for the step
        window_seconds += seconds_since(start);
        ++window_steps;
        ++step;
        if (rep.lead() && (step % o.log_every == 0 || step == last)) {
            std::printf("step %5zu  loss %.4f  lr %.3g  %.1f ms/step  %.0f tokens/s\n", step,
                        window_loss / double(window_steps), lr,
                        1e3 * window_seconds / double(window_steps),
                        double(tokens_per_step * window_steps) / window_seconds);
            std::fflush(stdout);
        }
        if (step % o.log_every == 0 || step == last) {
            window_loss = window_seconds = 0;
            window_steps = 0;
        }
        if (rep.lead() && (step % o.eval_every == 0 || step == last)) {
            last_eval = evaluate<Inner>(model.valid(), corpus, c, o.eval_batches, valid_device);
            std::printf("step %5zu  validation loss %.4f\n", step, last_eval);
        }
        if (rep.lead() &&
            ((o.checkpoint_every > 0 && step % o.checkpoint_every == 0) || step == last))
            save_checkpoint(o.artifact_dir, model, optim, schedule, step, rep.world);
    }
    barrier(rep);  // the last checkpoint is written before any replica's process may end
    if (!rep.lead()) return 0;
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

/// `train --bench`: AdamW steps (the example's settings, the constant rate --lr) on one fixed
/// batch; the best of --bench-rounds rounds of --bench-reps steps after --bench-warmup steps. A
/// round ends by reading the last loss, which waits for the device, so the time is the steps'.
/// With several replicas the fixed batch is world × --batch rows, replica r trains on its
/// --batch of them, a round ends when every replica's has, and rank 0 prints the losses (the
/// mean over the replicas) and the figures (tokens/s over all of them). `cuda_device`: the
/// CUDA device whose peak memory the line reports, if any (read only where CUDA is built).
template <ember::AutodiffBackend B>
int bench(const Options& o, const ember::Device<B>& device, Gpt<B> model, const Replica& rep = {},
          [[maybe_unused]] std::optional<std::size_t> cuda_device = std::nullopt) {
    const TrainConfig& c = o.config;
    model = same_as_lead(std::move(model), rep);
    auto optim = make_optimizer<B>(c);
    const auto batch = bench_batch<B>(rep.world * c.batch_size, c.seq_len, c.seed, device,
                                      rep.rank * c.batch_size, c.batch_size);
    auto step = [&] {
        auto [stepped, loss] = replica_step(std::move(model), optim, c.learning_rate, batch.inputs,
                                            batch.targets, rep, o.bf16);
        model = std::move(stepped);
        return std::move(loss);
    };
    const std::string world = rep.world > 1 || rep.comm || !o.devices.empty()
                                  ? ", \"world_size\": " + std::to_string(rep.world)
                                  : std::string();
    for (std::size_t k = 0; k < o.loss_steps; ++k) {
        const double loss = mean_loss(step(), rep);
        if (rep.lead())
            print_json("\"name\": \"gpt_loss\", \"precision\": \"" + precision(o) +
                       "\", \"step\": " + std::to_string(k) +
                       ", \"value\": " + json_number(loss, 7) + world);
    }
#if defined(EMBER_CUDA)
    if (cuda_device) ember::cuda::reset_peak_memory(ember::CudaDevice{*cuda_device});
#endif
    double last_loss = 0;
    for (std::size_t k = 0; k < std::max<std::size_t>(o.bench_warmup, o.graph ? 1 : 0); ++k)
        last_loss = double(step().into_scalar());
    // --graph: the step's device work recorded once and replayed, the host's launches gone (the
    // loss tensor made inside the capture is rewritten by each replay).
    std::optional<ember::Tensor<B, 1>> loss;
    std::function<void()> run_step = [&] { loss = step(); };
#if defined(EMBER_CUDA)
    std::optional<ember::cuda::CapturedStep> captured;
    std::size_t eager_peak = 0;
    if (o.graph) {
        EMBER_CHECK(cuda_device && rep.world == 1, Argument,
                    "--graph replays the step on one CUDA device: it needs --backend cuda and "
                    "one replica");
        captured.emplace(ember::cuda::capture(run_step, ember::CudaDevice{*cuda_device}));
        EMBER_CHECK(captured->replayable(), Argument,
                    "--graph: the captured step cannot be replayed: ", captured->why_not());
        run_step = [&] { captured->replay(); };
        // The eager steps' high-water mark, then the replays' own: their activations live in
        // the graph's pool (added below), the eager steps' were freed before the capture.
        eager_peak = ember::cuda::memory_stats(ember::CudaDevice{*cuda_device}).peak_bytes_in_use;
        ember::cuda::reset_peak_memory(ember::CudaDevice{*cuda_device});
    }
#else
    EMBER_CHECK(!o.graph, Argument,
                "--graph replays the step as a CUDA graph: this build has no CUDA");
#endif
    double best = 1e300;
    for (std::size_t r = 0; r < o.bench_rounds; ++r) {
        barrier(rep);
        const auto start = std::chrono::steady_clock::now();
        for (std::size_t k = 0; k < o.bench_reps; ++k) run_step();
        last_loss = double(loss->into_scalar());
        barrier(rep);  // the round ends with the slowest replica
        best = std::min(best, seconds_since(start) / double(o.bench_reps));
    }
    if (!rep.lead()) return 0;
    const double tokens = double(rep.world * c.batch_size * c.seq_len);
    std::string line = "\"name\": \"gpt_train_step_b" + std::to_string(c.batch_size) + "_s" +
                       std::to_string(c.seq_len) + "_" + precision(o) + (o.graph ? "_graph" : "") +
                       "\", \"value\": " + json_number(best * 1e3) +
                       ", \"unit\": \"ms\", \"tokens_per_s\": " + json_number(tokens / best, 7);
    // Per device: each replica does one device's share of the FLOPs in the step's time.
    if (o.peak_tflops > 0)
        line += ", \"mfu\": " +
                json_number(
                    model_flops(model, c.batch_size, c.seq_len) / best / (o.peak_tflops * 1e12), 4);
#if defined(EMBER_CUDA)
    if (cuda_device) {
        // A replayed step's buffers live in its graph's private pool, which the caching
        // allocator's statistics do not count: added to the replays' high-water mark (the
        // parameters, the optimizer's state and the inputs), and reported on its own, as resnet
        // does. The figure is the larger of that and the eager steps' mark before the capture:
        // the most bytes live tensors held at once, as PyTorch's max_memory_allocated counts
        // over its warm-up, capture and replays. (Until 2026-11-30 the eager mark and the pool
        // were added, counting the activations twice.)
        const double pool = captured ? double(captured->pool_bytes()) : 0.0;
        const double peak = std::max(
            double(eager_peak),
            double(ember::cuda::memory_stats(ember::CudaDevice{*cuda_device}).peak_bytes_in_use) +
                pool);
        line += ", \"peak_memory_mib\": " + json_number(peak / (1 << 20));
        if (captured) line += ", \"graph_pool_mib\": " + json_number(pool / (1 << 20));
    }
#endif
    line += ", \"loss\": " + json_number(last_loss) + ", \"precision\": \"" + precision(o) +
            "\", \"backend\": \"" + o.backend +
            "\", \"params\": " + std::to_string(model.num_params()) + world;
    if (!world.empty()) line += ", \"batch_per_gpu\": " + std::to_string(c.batch_size);
    print_json(line);
    return 0;
}

}  // namespace gpt
