// A GPT-2-shaped byte-level language model on ember: trained with AdamW and a warm-up + cosine
// learning rate on Debian's text, checkpointed, and sampled with a KV cache. It runs on
// ember::Dispatch, on the device --backend names (cpu|vulkan|cuda[:i][+fusion]); data-parallel
// training over several GPUs (--devices, --distributed) runs on the concrete CUDA stack
// (train_cuda.cpp).
//
//   gpt train [--layers N --d-model N --heads N --context N] [--steps N] [--batch-size N] ...
//   gpt train --bench [--batch 8 --seq 1024] [--peak-tflops X] [--init-from torch.pt]
//   gpt train --backend cuda --devices 0,1,2,3 [--bench] ...     (a replica per GPU)
//   gpt generate [--artifact-dir DIR] [--prompt S] [--length N] [--temperature X] [--top-k K]
//                                                                              (see --help)
// The modules, losses and optimizers with their Dispatch instances compiled in ember_dispatch.
#include <ember/dispatch/nn.hpp>
#include <ember/record.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
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
#include "train.hpp"

namespace gpt {

#if defined(EMBER_CUDA)
/// Data-parallel `train` (and --bench) over the CUDA devices of --devices or of --distributed's
/// process group (train_cuda.cpp).
int train_on_gpus(const Options& o);
#endif

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
    train_cmd->add_flag("--bf16", o.bf16,
                        "bf16 mixed precision, as torch.autocast(dtype=torch.bfloat16): the "
                        "forward pass and the loss under ember::Autocast (linear layers, "
                        "attention and the output scores in bf16; LayerNorm, softmax and the loss "
                        "in f32); weights, gradients and AdamW's state stay f32");
    train_cmd->add_flag("--check", o.check,
                        "also validate before training; exit 1 unless the validation loss fell");
    train_cmd->add_option("--seed", c.seed, "seed of initialisation, batches and dropout");
    train_cmd
        ->add_option("--init-from", o.init_from,
                     "start from these weights: a PyTorch state dict of "
                     "benchmarks/gpt_torch.py's model (its --save-init)")
        ->check(CLI::ExistingFile);
    train_cmd
        ->add_option("--devices", o.devices,
                     "data-parallel training on these CUDA devices (0,1,2,3): a replica and a "
                     "thread on each, every step's batch split between them (--batch-size "
                     "sequences each), gradients averaged through NCCL during backward; with "
                     "--backend cuda or cuda+fusion")
        ->delimiter(',')
        ->group("Data parallel");
    train_cmd
        ->add_flag("--distributed", o.distributed,
                   "this process is one replica of a group of processes, one per GPU: "
                   "EMBER_WORLD_SIZE and EMBER_RANK place it, its device is EMBER_LOCAL_RANK "
                   "(else the rank, or the one --devices names), and the ranks meet through "
                   "EMBER_MASTER_ADDR, EMBER_NCCL_ID or EMBER_NCCL_ID_FILE (docs/multi-device.md)")
        ->group("Data parallel");
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
    train_cmd
        ->add_flag("--graph", o.graph,
                   "with --bench on a CUDA device: capture one step as a CUDA graph and time "
                   "its replays")
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
    if (o.graph && !o.bench)
        throw ember::ArgumentError(
            "gpt: --graph times the replays of --bench's step: it needs "
            "--bench");
    return o;
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

// `train` on ember::Dispatch: the device --backend names.
template <ember::AutodiffBackend B>
int train_on_backend(const Options& o) {
    const Corpus corpus = load_corpus(o.texts);
    B::seed(o.config.seed);
    // Training records the graph (autodiff); evaluation runs on the same device without.
    const auto valid_device = ember_examples::backend_device_of(o.backend);
    const auto device = valid_device.autodiff(true);
    return train<B>(o, corpus, device, valid_device, initial_model<B>(o, device));
}

// `train --bench` on ember::Dispatch.
template <ember::AutodiffBackend B>
int bench_on_backend(const Options& o) {
    B::seed(o.config.seed);
    const auto inner = ember_examples::backend_device_of(o.backend);
    const auto device = inner.autodiff(true);
    std::optional<std::size_t> cuda_device;
    if (inner.kind() == ember::DispatchKind::Cuda) cuda_device = inner.index();
    return bench<B>(o, device, initial_model<B>(o, device), {}, cuda_device);
}

int run(int argc, char** argv) {
    const Options o = parse(argc, argv);
    if (o.threads) ember::cpu::set_num_threads(*o.threads);
    using B = ember::Dispatch;
    if (o.command == "train" && (!o.devices.empty() || o.distributed)) {
#if defined(EMBER_CUDA)
        return train_on_gpus(o);
#else
        std::string have;
        for (const auto& b : B::backends()) have += (have.empty() ? "" : ", ") + b;
        throw ember::ArgumentError(
            "--devices and --distributed train on CUDA devices through NCCL, and this "
            "build has no CUDA backend (it has: " +
            have + ")");
#endif
    }
    if (o.command == "train") return o.bench ? bench_on_backend<B>(o) : train_on_backend<B>(o);
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
