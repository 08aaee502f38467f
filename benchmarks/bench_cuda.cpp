// ember's CUDA benchmarks (ANCHORS.md, GPU table), run next to bench_cuda_torch.py in one call
// on the GPU machine by benchmarks/cuda.sh: sgemm 8192³ in f32, TF32 and bf16, softmax
// 4096×4096, the per-op overhead of a 1-element add, training steps (Adam, batch 64) of the
// MLP 784-512-512-10 and the guide CNN on random batches, gelu_custom over 64M floats through
// Fusion<Cuda> (one generated kernel) beside the unfused chain and x·1 (a copy), and the int8
// Linear (cuBLASLt) beside the f32 Linear at batch 1 and 64, and matmul epilogues on Fusion<Cuda>
// (bias and relu inside cuBLASLt's GEMM) against the separate kernel. Prints one JSON line per
// result. `train` also replays each step as a captured CUDA graph (issue 31), on Autodiff<Cuda>
// and Autodiff<Fusion<Cuda>>, at batch 64 and 1024; `overhead` times a captured chain of adds;
// `conv` (only when named) times 3×3 convolutions through cuDNN and through im2col.
// `attention` times scaled dot-product attention at batch 8, 12 heads, 1024 positions, head dim
// 64 (f32 and bf16, plain and causal): forward and forward+backward, the fused kernel
// (module::attention) against the composed matmul-softmax-matmul.
#include <chrono>
#include <cstdio>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include <ember/backend/cuda.hpp>
#include <ember/backend/cuda_attention.hpp>
#include <ember/backend/cudnn.hpp>
#include <ember/ember.hpp>
#include <ember/nn.hpp>
#include <ember/optim.hpp>
#include <ember/stacks/cuda_graph.hpp>
#include <numbers>

#include "../examples/mnist/model.hpp"
#include "reduce_chain.hpp"

namespace {
using ember::Cuda;
using ember::Tensor;
using Clock = std::chrono::steady_clock;

/// Seconds per call of f: `warm` untimed calls, then the best of 5 timings of `reps` calls,
/// with the stream drained before and after each timing.
double time_per_call(const std::function<void()>& f, int reps, int warm = 3) {
    for (int i = 0; i < warm; ++i) f();
    Cuda::sync({});
    double best = 1e30;
    for (int r = 0; r < 5; ++r) {
        const auto t0 = Clock::now();
        for (int i = 0; i < reps; ++i) f();
        Cuda::sync({});
        best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count() / reps);
    }
    return best;
}

void emit(const char* name, double value, const char* unit) {
    std::printf("{\"framework\": \"ember\", \"name\": \"%s\", \"value\": %.4f, \"unit\": \"%s\"}\n",
                name, value, unit);
    std::fflush(stdout);
}

void gemm(const char* name, ember::DType dt, bool tf32) {
    const long n = 8192;
    ember::cuda::set_allow_tf32(tf32);
    auto a = Tensor<Cuda, 2>::random({n, n}, ember::Distribution::Default).cast(dt);
    auto b = Tensor<Cuda, 2>::random({n, n}, ember::Distribution::Default).cast(dt);
    Tensor<Cuda, 2> c = a;
    const double s = time_per_call([&] { c = a.matmul(b); }, 10);
    emit(name, 2.0 * n * n * n / s / 1e12, "TFLOP/s");
    ember::cuda::set_allow_tf32(false);
}

/// Training steps (forward, backward, Adam) of model M on one random batch of `batch` images:
/// eagerly, and (`graph`) captured once as a CUDA graph and replayed (ember::cuda::capture).
template <template <typename> class M, typename B>
void train_step(const std::string& name, std::size_t batch, bool graph) {
    using Model = M<B>;
    Model model = Model::init();
    auto optim = ember::optim::AdamConfig{.epsilon = 1e-8}.init<Model>();
    auto images = Tensor<B, 3>::random({batch, 28, 28}, ember::Distribution::Default);
    auto targets = Tensor<B, 1, ember::Int>::random({batch}, ember::Distribution::Uniform(0, 10));
    mnist::MnistBatch<B> data{images, targets};
    auto step = [&] {
        auto out = mnist::classify(model.forward(data.images), data);
        auto grads = ember::optim::GradientsParams::from_grads(out.loss.backward(), model);
        model = optim.step(1e-3, std::move(model), std::move(grads));
    };
    if (!graph) {
        emit(name.c_str(), time_per_call([&] { step(); }, 50, 10) * 1e3, "ms");
        return;
    }
    for (int i = 0; i < 3; ++i) step();  // warm-up: kernels compiled, Adam's state made
    auto captured = ember::cuda::capture(step);
    if (!captured.replayable()) {
        std::fprintf(stderr, "bench_cuda: %s: %s\n", name.c_str(), captured.why_not().c_str());
        return;
    }
    emit(name.c_str(), time_per_call([&] { captured.replay(); }, 50, 10) * 1e3, "ms");
    std::fprintf(stderr, "bench_cuda: %s: %zu graph nodes, %zu random draws, %zu Adam updates\n",
                 name.c_str(), captured.num_nodes(), captured.random_draws(),
                 captured.optimizer_updates());
}

/// Every training-step row (or the one named `only`): MLP and guide CNN at batch 64 and 1024 (or
/// the batches given), on Autodiff<Cuda> and Autodiff<Fusion<Cuda>>, eager and replayed. The
/// eager Autodiff<Cuda> rows at batch 64 keep their historical names.
void train(const std::string& only, std::vector<std::size_t> batches = {64, 1024}) {
    using A = ember::Autodiff<Cuda>;
    using AF = ember::Autodiff<ember::Fusion<Cuda>>;
    for (std::size_t batch : batches) {
        const std::string b = "_b" + std::to_string(batch);
        for (bool graph : {false, true}) {
            const std::string g = graph ? "_graph" : "";
            auto row = [&](const std::string& name, auto run) {
                if (only.empty() || only == name) run(name);
            };
            row("train_step_mlp" + b + g,
                [&](const std::string& n) { train_step<mnist::Mlp, A>(n, batch, graph); });
            row("train_step_cnn" + b + g,
                [&](const std::string& n) { train_step<mnist::Cnn, A>(n, batch, graph); });
            row("train_step_mlp" + b + "_fusion" + g,
                [&](const std::string& n) { train_step<mnist::Mlp, AF>(n, batch, graph); });
            row("train_step_cnn" + b + "_fusion" + g,
                [&](const std::string& n) { train_step<mnist::Cnn, AF>(n, batch, graph); });
        }
    }
}

template <ember::Backend B, std::size_t D>
Tensor<B, D> gelu_custom(Tensor<B, D> x) {
    auto y = x * ((x / std::numbers::sqrt2_v<float>).erf() + 1);
    return y / 2;
}

/// gelu_custom over 64M floats: effective bandwidth counts 4 bytes read and 4 written an
/// element (what one fused kernel moves), whatever the implementation moves.
void fusion() {
    using F = ember::Fusion<Cuda>;
    const long n = 64L << 20;
    const auto gbs = [&](double s) { return 8.0 * n / s / 1e9; };
    auto x = Tensor<Cuda, 1>::random({n}, ember::Distribution::Normal(0, 1));
    Tensor<Cuda, 1> y = x;
    // x·1 into a new tensor moves what a device copy moves: the bandwidth to compare with.
    emit("mul1_64M", gbs(time_per_call([&] { y = x * 1.0; }, 20)), "GB/s");
    emit("gelu_custom_unfused_64M", gbs(time_per_call([&] { y = gelu_custom(x); }, 20)), "GB/s");
    auto xf = Tensor<F, 1>::from_data(x.to_data());
    Tensor<F, 1> yf = xf;
    const double s = time_per_call(
        [&] {
            yf = gelu_custom(xf);
            F::flush();
        },
        20);
    emit("gelu_custom_fusion_64M", gbs(s), "GB/s");
    const auto st = ember::fusion::stats();
    std::fprintf(stderr, "bench_cuda: fusion: %llu fused launches, %llu compiled\n",
                 static_cast<unsigned long long>(st.fused_launches),
                 static_cast<unsigned long long>(st.programs_compiled));
}

/// Matmul epilogues on Fusion<Cuda>: relu(x·w + b) at three sizes and the MLP's forward pass
/// (inference, batch 64), with the bias and relu in cuBLASLt's epilogue and as a fused kernel
/// after cuBLAS's GEMM (epilogues off), in turn.
void epilogue() {
    using F = ember::Fusion<Cuda>;
    // Reads nothing back: computes the pending value on the stream (time_per_call syncs).
    const auto force = [](const Tensor<F, 2>& t) {
        (void)ember::detail::fusion::take<Cuda>(t.primitive());
    };
    struct Case {
        std::size_t m, k, n;
        int reps;
    };
    for (Case c : {Case{64, 784, 512, 2000}, Case{256, 1024, 1024, 2000}, Case{4096, 4096, 4096, 50}}) {
        auto x = Tensor<F, 2>::random({c.m, c.k}, ember::Distribution::Default);
        auto w = Tensor<F, 2>::random({c.k, c.n}, ember::Distribution::Default);
        auto b = Tensor<F, 2>::random({1, c.n}, ember::Distribution::Default);
        const std::string name = "linear_relu_" + std::to_string(c.m) + "x" + std::to_string(c.k) +
                                 "x" + std::to_string(c.n);
        for (bool on : {true, false}) {
            ember::fusion::set_matmul_epilogues(on);
            const double s = time_per_call(
                [&] { force(ember::activation::relu(x.matmul(w) + b)); }, c.reps, 10);
            emit((name + (on ? "_epilogue" : "_separate")).c_str(), s * 1e6, "us");
        }
    }
    auto model = mnist::Mlp<F>::init();
    auto images = Tensor<F, 3>::random({64, 28, 28}, ember::Distribution::Default);
    for (bool on : {true, false}) {
        ember::fusion::set_matmul_epilogues(on);
        ember::fusion::reset_stats();
        const double s = time_per_call([&] { force(model.forward(images)); }, 2000, 10);
        emit(on ? "mlp_forward_b64_epilogue" : "mlp_forward_b64_separate", s * 1e6, "us");
        std::fprintf(stderr, "bench_cuda: mlp forward, epilogues %s: %llu epilogues\n",
                     on ? "on" : "off",
                     static_cast<unsigned long long>(ember::fusion::stats().epilogues));
    }
    ember::fusion::set_matmul_epilogues(true);
}

/// The int8 Linear (dynamic activations, per-channel weights) beside the f32 Linear, for the
/// guide's layer sizes, at batch 1 and 64 (as bench_quant on the CPU).
void quant() {
    struct Layer {
        std::size_t in, out;
    };
    for (Layer l : {Layer{784, 512}, Layer{1024, 512}, Layer{512, 512}}) {
        auto f32 = ember::nn::LinearConfig{l.in, l.out}.init<Cuda>();
        auto int8 = f32.quantize_weights(ember::quant::Quantizer<>{});
        for (std::size_t batch : {std::size_t{1}, std::size_t{64}}) {
            auto x = Tensor<Cuda, 2>::random({batch, l.in}, ember::Distribution::Default);
            Tensor<Cuda, 2> y = x;
            const std::string w = "linear_" + std::to_string(l.in) + "x" + std::to_string(l.out) +
                                  "_b" + std::to_string(batch);
            emit((w + "_f32").c_str(), time_per_call([&] { y = f32.forward(x); }, 1000) * 1e6,
                 "us");
            emit((w + "_int8").c_str(), time_per_call([&] { y = int8.forward(x); }, 1000) * 1e6,
                 "us");
        }
    }
}
/// 3×3 convolutions of ResNet-18's CIFAR shapes (stride 1, padding 1): forward, input gradient
/// (the transposed convolution) and weight gradient, in f32 and bf16, through cuDNN and through
/// the im2col kernels (ember::cuda::set_use_cudnn). Only on request (`bench_cuda conv`).
void conv() {
    struct Layer {
        std::size_t n, c, hw;
    };
    {
        // One convolution first: it loads cuDNN and makes the device's handle.
        auto x = Tensor<Cuda, 4>::ones({1, 1, 3, 3});
        (void)ember::module::conv2d(x, x, std::nullopt, ember::ConvOptions<2>{}).to_data();
    }
    std::fprintf(stderr, "bench_cuda conv: cuDNN %s (version %zu) %s\n",
                 ember::cuda::cudnn_available() ? "in use" : "not in use",
                 ember::cuda::cudnn_version(), ember::cuda::cudnn_unavailable_reason().c_str());
    for (const Layer l : {Layer{64, 64, 32}, Layer{256, 128, 16}, Layer{256, 512, 4}}) {
        for (const ember::DType dt : {ember::DType::F32, ember::DType::BF16}) {
            const std::size_t n = l.n, c = l.c, hw = l.hw;
            auto x = Tensor<Cuda, 4>::random({n, c, hw, hw}, ember::Distribution::Default).cast(dt);
            auto w = Tensor<Cuda, 4>::random({c, c, 3, 3}, ember::Distribution::Default).cast(dt);
            auto g = Tensor<Cuda, 4>::random({n, c, hw, hw}, ember::Distribution::Default).cast(dt);
            ember::ConvOptions<2> o;
            o.padding = {1, 1};
            ember::ConvTransposeOptions<2> t;
            t.padding = {1, 1};
            const double flops = 2.0 * double(n * c * c * 9 * hw * hw);
            const std::string base = "conv2d_3x3_b" + std::to_string(l.n) + "_c" +
                                     std::to_string(l.c) + "_" + std::to_string(l.hw) + "x" +
                                     std::to_string(l.hw) + "_" +
                                     (dt == ember::DType::F32 ? "f32" : "bf16");
            for (const bool use : {true, false}) {
                ember::cuda::set_use_cudnn(use);
                const std::string path = use ? "_cudnn" : "_im2col";
                Tensor<Cuda, 4> y = x;
                const double fwd =
                    time_per_call([&] { y = ember::module::conv2d(x, w, std::nullopt, o); }, 20);
                const double dgrad = time_per_call(
                    [&] { y = ember::module::conv_transpose2d(g, w, std::nullopt, t); }, 20);
                const double wgrad = time_per_call(
                    [&] {
                        y = Tensor<Cuda, 4>(Cuda::conv2d_weight_backward(
                            x.primitive(), g.primitive(), ember::Shape{c, c, 3, 3}, o));
                    },
                    20);
                emit((base + "_fwd" + path).c_str(), flops / fwd / 1e12, "TFLOP/s");
                emit((base + "_dgrad" + path).c_str(), flops / dgrad / 1e12, "TFLOP/s");
                emit((base + "_wgrad" + path).c_str(), flops / wgrad / 1e12, "TFLOP/s");
            }
        }
    }
    ember::cuda::set_use_cudnn(true);
}

void attention() {
    using AD = ember::Autodiff<Cuda>;
    const std::size_t b = 8, h = 12, l = 1024, e = 64;
    const double scale = 1.0 / std::sqrt(double(e));
    for (auto [dt, dname] : {std::pair{ember::DType::F32, "f32"}, {ember::DType::BF16, "bf16"}}) {
        auto make = [&] {
            return Tensor<AD, 4>::random({b, h, l, e}, ember::Distribution::Normal(0, 1)).cast(dt);
        };
        auto q = make().require_grad(), k = make().require_grad(), v = make().require_grad();
        for (bool causal : {false, true}) {
            ember::AttentionOptions o;
            o.causal = causal;
            auto fused = [&] { return ember::module::attention(q, k, v, o); };
            auto composed = [&] {
                return ember::detail::attention::composed<AD>(q, k, v, std::nullopt, std::nullopt,
                                                              causal, scale);
            };
            const std::string w =
                std::string("attention_") + dname + (causal ? "_causal" : "") + "_b8h12l1024d64";
            for (auto [path, f] : {std::pair{"fused", std::function<Tensor<AD, 4>()>(fused)},
                                   {"composed", std::function<Tensor<AD, 4>()>(composed)}}) {
                Tensor<AD, 4> out = q;
                // Forward alone, without recording: the inner tensors.
                auto qi = q.inner(), ki = k.inner(), vi = v.inner();
                const double fwd = time_per_call(
                    [&] {
                        if (std::string(path) == "fused")
                            (void)ember::module::attention(qi, ki, vi, o);
                        else
                            (void)ember::detail::attention::composed<Cuda>(
                                qi, ki, vi, std::nullopt, std::nullopt, causal, scale);
                    },
                    20);
                emit((w + "_fwd_" + path).c_str(), fwd * 1e3, "ms");
                const double both = time_per_call([&] { (void)f().backward(); }, 10);
                emit((w + "_fwdbwd_" + path).c_str(), both * 1e3, "ms");
            }
        }
    }
}
}  // namespace

int main(int argc, char** argv) try {
    const std::string only = argc > 1 ? argv[1] : "";
    if (!ember::cuda::is_available()) {
        std::cerr << "bench_cuda: no CUDA device\n";
        return 1;
    }
    auto want = [&](const char* w) { return only.empty() || only == w; };
    if (want("gemm")) {
        gemm("sgemm_f32_8192", ember::DType::F32, false);
        gemm("gemm_tf32_8192", ember::DType::F32, true);
        gemm("gemm_bf16_8192", ember::DType::BF16, false);
    }
    if (want("softmax")) {
        auto x = Tensor<Cuda, 2>::random({4096, 4096}, ember::Distribution::Default);
        Tensor<Cuda, 2> y = x;
        const double s = time_per_call([&] { y = ember::activation::softmax(x, 1); }, 50);
        emit("softmax_4096x4096", 2.0 * 4096 * 4096 * 4 / s / 1e9, "GB/s");
    }
    if (want("overhead")) {
        auto a = Tensor<Cuda, 1>::ones({1});
        auto b = Tensor<Cuda, 1>::ones({1});
        const double s = time_per_call([&] { a = a + b; }, 10000);
        emit("op_overhead_add_1", s * 1e6, "us/op");
        // Where the time goes: the host's share alone (500 ops queue without blocking on a
        // full launch queue), and the add written into its moved-in operand (no allocation).
        Cuda::sync({});
        const auto t0 = Clock::now();
        for (int i = 0; i < 500; ++i) a = a + b;
        const double host = std::chrono::duration<double>(Clock::now() - t0).count() / 500;
        Cuda::sync({});
        emit("op_overhead_add_1_host_only", host * 1e6, "us/op");
        const double inplace = time_per_call([&] { a = std::move(a) + b; }, 10000);
        emit("op_overhead_add_1_in_place", inplace * 1e6, "us/op");
        // The same in-place adds, 1000 of them captured as one CUDA graph and replayed: the
        // per-op cost of a replayed graph (the GPU's time per tiny kernel, the launch gone).
        constexpr int kChain = 1000;
        auto chain = ember::cuda::capture([&] {
            for (int i = 0; i < kChain; ++i) a = std::move(a) + b;
        });
        const double replayed = time_per_call([&] { chain.replay(); }, 20);
        emit("op_overhead_add_1_graph", replayed / kChain * 1e6, "us/op");
    }
    if (want("fusion")) fusion();
    if (want("reduce")) {
        // Reductions that end a chain, unfused on Cuda and one kernel each on Fusion<Cuda>.
        using F = ember::Fusion<Cuda>;
        auto x = Tensor<Cuda, 2>::random({8192, 4096}, ember::Distribution::Normal(0, 1));
        auto timed = [](const std::function<void()>& f, int reps) {
            return time_per_call(f, reps);
        };
        bench::reduce_chain(x, "unfused", timed, emit, [] {});
        bench::reduce_chain(Tensor<F, 2>::from_data(x.to_data()), "fusion", timed, emit,
                            [] { F::flush(); });
    }
    if (want("quant")) quant();
    if (want("attention")) attention();
    if (want("epilogue")) epilogue();
    if (only == "conv") conv();  // not in the default run (benchmarks/cuda.sh's table)
    if (want("train")) train("");
    if (only.rfind("train_step_", 0) == 0) train(only, {64, 1024, 4096});  // one row (to profile)
    if (only == "train_b4096") train("", {4096});  // benchmarks/gpu_train.sh's compute-bound rows
    return 0;
} catch (const std::exception& e) {
    std::cerr << "bench_cuda: " << e.what() << '\n';
    return 1;
}
