// ember's Vulkan benchmarks (issue 6, ANCHORS.md's GPU table), run next to PyTorch on the GPU
// machine by benchmarks/vulkan.sh: elementwise bandwidth (a 64M-float add) beside a device copy,
// sgemm 8192³ in f32, the f16 and bf16 gemms on cooperative matrices, softmax 4096×4096, and
// training steps (Adam, batch 64 and 1024, eager and replayed from one recorded command buffer)
// of the MLP and the guide CNN, on Autodiff<Vulkan> and Autodiff<Fusion<Vulkan>>, and a
// hand-written GELU (five elementwise ops) on 64M floats unfused and through Fusion<Vulkan> (one
// generated kernel), and (`overhead`) the per-op cost of a 1-element add, eager and replayed.
// The PyTorch side is bench_cuda_torch.py (same workload names). Prints one JSON
// line per result.
//
// `bench_vulkan gemm-sweep [N] [config...]`, `coop-sweep [N] [config...]` and
// `coop-sweep-bf16 [N] [config...]` time many configurations of the f32 kernel
// (shaders/matmul_large.comp, "bm:bn:bk:tm:tn:lr:gm", or an index into
// backends/vulkan/matmul.cpp's kVariants) and of the cooperative-matrix kernel on f16 or bf16
// ("bm:bn:bk:sgm:sgn:db:pack[:fn]") in one process, each checked against a reference product,
// so that one run on the GPU machine measures them all; `cm2-sweep [N] [config...]` and
// `cm2-sweep-bf16` do the same for the workgroup-scope kernel ("bm:bn:bk[:gm]",
// VK_NV_cooperative_matrix2). `coop-peak` reports the tensor cores'
// rate through cooperative matrices with no memory traffic (the ceiling of the 16-bit gemm).
#include <chrono>
#include <cstdio>
#include <functional>
#include <iostream>
#include <numbers>
#include <string>
#include <vector>

#include <ember/backend/vulkan.hpp>
#include <ember/ember.hpp>
#include <ember/nn.hpp>
#include <ember/optim.hpp>
#include <ember/stacks/vulkan_autodiff.hpp>
#include <ember/stacks/vulkan_fusion.hpp>
#include <ember/stacks/vulkan_graph.hpp>

#include "../examples/mnist/model.hpp"
#include "reduce_chain.hpp"

namespace {
using ember::Tensor;
using ember::Vulkan;
using FusedVulkan = ember::Fusion<Vulkan>;
using Clock = std::chrono::steady_clock;

/// Seconds per call of f: `warm` untimed calls (autotuning, pipeline creation and fused-kernel
/// compilation happen there), then the best of 5 timings of `reps` calls, the queue drained
/// around each (Fusion's sync runs what is pending, then waits for the device).
double time_per_call(const std::function<void()>& f, int reps, int warm = 3) {
    for (int i = 0; i < warm; ++i) f();
    FusedVulkan::sync({});
    double best = 1e30;
    for (int r = 0; r < 5; ++r) {
        const auto t0 = Clock::now();
        for (int i = 0; i < reps; ++i) f();
        FusedVulkan::sync({});
        best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count() / reps);
    }
    return best;
}

void emit(const char* name, double value, const char* unit) {
    std::printf("{\"framework\": \"ember\", \"name\": \"%s\", \"value\": %.4f, \"unit\": \"%s\"}\n",
                name, value, unit);
    std::fflush(stdout);
}

/// An n x n x n gemm in `dt`, reported as `<name>_<n>`.
void gemm(const char* name, ember::DType dt, std::size_t n) {
    auto a = Tensor<Vulkan, 2>::random({n, n}, ember::Distribution::Default).cast(dt);
    auto b = Tensor<Vulkan, 2>::random({n, n}, ember::Distribution::Default).cast(dt);
    Tensor<Vulkan, 2> c = a;
    const double s = time_per_call([&] { c = a.matmul(b); }, 5, 2);
    emit((std::string(name) + "_" + std::to_string(n)).c_str(), 2.0 * n * n * n / s / 1e12,
         "TFLOP/s");
}

/// Seconds per call of f for sweeps: one untimed call, then the best of 3 timings of 3 calls.
double sweep_time(const std::function<void()>& f) {
    f();
    Vulkan::sync({});
    double best = 1e30;
    for (int r = 0; r < 3; ++r) {
        const auto t0 = Clock::now();
        for (int i = 0; i < 3; ++i) f();
        Vulkan::sync({});
        best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count() / 3);
    }
    return best;
}

// The f32 configurations swept by default: 128 x 128 tiles at several depths, lane grids and
// tile orders, larger 128 x 256 and 256 x 128 tiles (8 x 16 a thread), and 128-thread
// workgroups; 9 and 10 are the table's earlier candidates.
const char* const kGemmSweep[] = {
    "9",
    "10",
    "128:128:8:8:8:4:8",
    "128:128:8:8:8:4:4",
    "128:128:8:8:8:4:16",
    "128:128:16:8:8:4:8",
    "128:128:8:8:8:2:0",
    "128:128:16:8:8:2:0",
    "128:128:8:8:8:8:0",
    "128:128:16:8:8:8:0",
    "128:128:16:4:8:4:0",
    "128:128:16:4:8:4:8",
    "128:256:8:8:16:4:0",
    "128:256:8:8:16:4:8",
    "128:256:16:8:16:4:0",
    "128:256:16:8:16:4:8",
    "128:256:8:8:16:8:0",
    "256:128:8:16:8:4:0",
    "256:128:8:16:8:4:8",
    "256:128:16:16:8:4:0",
    "256:128:16:16:8:4:8",
    "256:128:8:16:8:8:0",
    "128:128:8:8:16:4:0",
    "128:128:16:8:16:4:0",
    "128:128:8:16:8:4:0",
    "128:128:16:16:8:4:0",
    "128:128:8:8:16:4:8",
    "128:128:16:16:8:4:8",
    "64:128:16:8:8:2:0",
    "128:64:16:8:8:4:0",
    "128:256:16:8:16:8:0",
    "256:128:16:16:8:8:0",
};
// The bf16 configurations (16 x 16 x 16 fragments, packed operands only).
const char* const kCoopSweepBf16[] = {
    "128:128:64:2:4:0:1:16", "128:256:32:2:4:0:1:16", "128:128:32:2:2:1:1:16",
    "64:128:64:2:4:0:1:16",  "128:128:64:2:2:0:1:16", "128:128:64:4:2:0:1:16",
    "256:128:32:4:2:0:1:16", "128:256:32:2:2:0:1:16", "128:128:48:2:4:0:1:16",
};
// The f16 configurations: 128 x 256, 256 x 128, 128 x 128 and 64 x 128 tiles of 4 to 16
// subgroups, one or two buffers, 32 to 64 deep, operands packed to f16 first (one read as f32
// words, for comparison; the second and last are one configuration, for the spread).
const char* const kCoopSweep[] = {
    "128:256:32:2:4:0:1", "128:128:64:2:4:0:1", "128:128:64:2:2:0:1", "128:128:64:4:2:0:1",
    "128:128:48:2:4:0:1", "128:256:48:2:4:0:1", "256:128:48:4:2:0:1", "64:128:64:2:4:0:1",
    "128:128:64:4:4:0:1", "128:256:32:4:4:0:1", "256:128:32:4:4:0:1", "128:128:32:4:4:1:1",
    "128:256:32:2:4:0:0", "128:128:64:2:4:0:1",
};

/// Times each configuration (set in `env`) of an n x n x n gemm in `dt`; each result is checked
/// against `ref` computed once (f32: kernel 9; f16: the f32 product of the same f16 values).
void sweep(const char* kind, const char* env, ember::DType dt, std::size_t n,
           const std::vector<std::string>& configs) {
    auto a32 = Tensor<Vulkan, 2>::random({n, n}, ember::Distribution::Uniform(-1, 1));
    auto b32 = Tensor<Vulkan, 2>::random({n, n}, ember::Distribution::Uniform(-1, 1));
    auto a = a32.cast(dt), b = b32.cast(dt);
    // Kernel 9 forced: no autotuning run (every candidate, slow ones too) for the reference.
    ::setenv("EMBER_VULKAN_MATMUL_KERNEL", "9", 1);
    Tensor<Vulkan, 2> ref = dt == ember::DType::F32
                                ? a.matmul(b)
                                : a.cast(ember::DType::F32).matmul(b.cast(ember::DType::F32));
    ::unsetenv("EMBER_VULKAN_MATMUL_KERNEL");
    const float scale = ref.clone().abs().max().into_scalar();
    for (const auto& cfg : configs) {
        ::setenv(env, cfg.c_str(), 1);
        try {
            Tensor<Vulkan, 2> c = ref;
            const double s = sweep_time([&] { c = a.matmul(b); });
            const float err = (c.cast(ember::DType::F32) - ref).abs().max().into_scalar() / scale;
            std::printf(
                "{\"framework\": \"ember\", \"name\": \"%s %s\", \"value\": %.3f, "
                "\"unit\": \"TFLOP/s\", \"max_rel_err\": %.2e}\n",
                kind, cfg.c_str(), 2.0 * n * n * n / s / 1e12, err);
        } catch (const std::exception& e) {
            std::printf("{\"framework\": \"ember\", \"name\": \"%s %s\", \"error\": \"%s\"}\n",
                        kind, cfg.c_str(), e.what());
        }
        std::fflush(stdout);
    }
    ::unsetenv(env);
}

/// Training steps (forward, backward, Adam) of Net on one random batch of `n` images: eagerly,
/// and (`graph`) recorded once into a command buffer and resubmitted (ember::vulkan::capture).
template <ember::Backend B, template <typename> class Net>
void train_step(const std::string& name, std::size_t n = 64, bool graph = false) {
    using Model = Net<B>;
    Model model = Model::init();
    auto optim = ember::optim::AdamConfig{.epsilon = 1e-8}.init<Model>();
    auto images = Tensor<B, 3>::random({n, 28, 28}, ember::Distribution::Default);
    auto targets = Tensor<B, 1, ember::Int>::random({n}, ember::Distribution::Uniform(0, 10));
    mnist::MnistBatch<B> batch{images, targets};
    auto step = [&] {
        auto out = mnist::classify(model.forward(batch.images), batch);
        auto grads = ember::optim::GradientsParams::from_grads(out.loss.backward(), model);
        model = optim.step(1e-3, std::move(model), std::move(grads));
    };
    if (!graph) {
        emit(name.c_str(), time_per_call(step, 20, 5) * 1e3, "ms");
        return;
    }
    for (int i = 0; i < 3; ++i) step();  // warm-up: kernels compiled and tuned, Adam's state made
    auto captured = ember::vulkan::capture(step);
    if (!captured.replayable()) {
        std::fprintf(stderr, "bench_vulkan: %s: %s\n", name.c_str(), captured.why_not().c_str());
        return;
    }
    emit(name.c_str(), time_per_call([&] { captured.replay(); }, 50, 10) * 1e3, "ms");
    std::fprintf(stderr, "bench_vulkan: %s: %zu dispatches, %zu random draws, %zu Adam updates\n",
                 name.c_str(), captured.num_nodes(), captured.random_draws(),
                 captured.optimizer_updates());
}

template <ember::Backend B, std::size_t D>
Tensor<B, D> gelu_custom(Tensor<B, D> x) {
    auto y = x * ((x / std::numbers::sqrt2_v<float>).erf() + 1);
    return y / 2;
}

/// gelu_custom over 64M floats; effective bandwidth = 4 bytes read + 4 written an element.
template <ember::Backend B>
void gelu_64m(const char* name) {
    const long n = 64L << 20;
    auto x = Tensor<B, 1>::random({n}, ember::Distribution::Normal(0, 1));
    Tensor<B, 1> y = x;
    const double s = time_per_call(
        [&] {
            y = gelu_custom(x);
            if constexpr (std::is_same_v<B, FusedVulkan>) FusedVulkan::flush();  // run it now
        },
        20);
    emit(name, 8.0 * n / s / 1e9, "GB/s");
}
}  // namespace

int main(int argc, char** argv) try {
    const std::string only = argc > 1 ? argv[1] : "";
    // `gemm N`: the gemms at N (8192 by default; smaller ones fit lavapipe's 128 MiB buffers).
    const std::size_t gemm_n = argc > 2 ? std::stoul(argv[2]) : 8192;
    if (!ember::vulkan::is_available()) {
        std::cerr << "bench_vulkan: no Vulkan device\n";
        return 1;
    }
    std::cerr << "bench_vulkan: " << ember::vulkan::device_name() << '\n';
    auto want = [&](const char* w) { return only.empty() || only == w; };
    if (only == "cm2-sweep" || only == "cm2-sweep-bf16") {
        const std::vector<std::string> configs(argv + std::min(argc, 3), argv + argc);
        const bool bf16 = only == "cm2-sweep-bf16";
        sweep(bf16 ? "gemm_bf16_cm2" : "gemm_f16_cm2", "EMBER_VULKAN_CM2_CONFIG",
              bf16 ? ember::DType::BF16 : ember::DType::F16, gemm_n, configs);
        return 0;
    }
    if (only == "gemm-sweep" || only == "coop-sweep" || only == "coop-sweep-bf16") {
        std::vector<std::string> configs(argv + std::min(argc, 3), argv + argc);
        if (only == "gemm-sweep") {
            if (configs.empty()) configs.assign(std::begin(kGemmSweep), std::end(kGemmSweep));
            sweep("sgemm_f32", "EMBER_VULKAN_MATMUL_KERNEL", ember::DType::F32, gemm_n, configs);
        } else if (only == "coop-sweep") {
            if (configs.empty()) configs.assign(std::begin(kCoopSweep), std::end(kCoopSweep));
            sweep("gemm_f16", "EMBER_VULKAN_COOP_CONFIG", ember::DType::F16, gemm_n, configs);
        } else {
            if (configs.empty())
                configs.assign(std::begin(kCoopSweepBf16), std::end(kCoopSweepBf16));
            sweep("gemm_bf16", "EMBER_VULKAN_COOP_CONFIG", ember::DType::BF16, gemm_n, configs);
        }
        return 0;
    }
    if (only == "coop-peak") {
        const auto info = ember::vulkan::cooperative_matrix_info();
        std::cerr << "bench_vulkan: cooperative matrices '" << info.extension << "'\n";
        const std::pair<ember::DType, int> kinds[] = {
            {ember::DType::F16, 8}, {ember::DType::F16, 16}, {ember::DType::BF16, 16}};
        for (bool shared : {false, true})
        for (auto [dt, fn] : kinds) {
            const std::string name = "coop_peak_" + std::string(ember::dtype_name(dt)) + "_16x" +
                                     std::to_string(fn) + "x16" + (shared ? "_from_shared" : "");
            try {
                emit(name.c_str(), ember::vulkan::cooperative_matrix_peak(dt, fn, shared),
                     "TFLOP/s");
            } catch (const ember::Error& e) {
                std::printf("{\"framework\": \"ember\", \"name\": \"%s\", \"error\": \"%s\"}\n",
                            name.c_str(), e.what());
            }
        }
        return 0;
    }
    if (want("elementwise")) {
        const long n = 64L << 20;
        auto a = Tensor<Vulkan, 1>::random({n}, ember::Distribution::Default);
        auto b = Tensor<Vulkan, 1>::random({n}, ember::Distribution::Default);
        Tensor<Vulkan, 1> c = a;
        // Into a new tensor (pooled): 12 bytes an element moved.
        const double s = time_per_call([&] { c = a + b; }, 20);
        emit("add_64M", 12.0 * n / s / 1e9, "GB/s");
        // The same bytes through a device copy (contiguous(): read + write, 8 bytes an element).
        auto t = a.reshape<2>({8192, n / 8192});
        Tensor<Vulkan, 2> u = t;
        const double sc = time_per_call([&] { u = t.transpose().transpose() * 1; }, 20);
        emit("scale_64M", 8.0 * n / sc / 1e9, "GB/s");
    }
    if (want("gemm")) {
        gemm("sgemm_f32", ember::DType::F32, gemm_n);
        gemm("gemm_f16", ember::DType::F16, gemm_n);
        gemm("gemm_bf16", ember::DType::BF16, gemm_n);
    }
    if (want("softmax")) {
        auto x = Tensor<Vulkan, 2>::random({4096, 4096}, ember::Distribution::Default);
        Tensor<Vulkan, 2> y = x;
        const double s = time_per_call([&] { y = ember::activation::softmax(x, 1); }, 50);
        emit("softmax_4096x4096", 2.0 * 4096 * 4096 * 4 / s / 1e9, "GB/s");
    }
    if (want("train") || only.starts_with("train_step")) {
        // Eager and replayed (`_graph`) steps at batch 64 and 1024 on both stacks; the eager
        // rows at batch 64 keep their historical names. `bench_vulkan NAME` runs one row.
        using A = ember::Autodiff<Vulkan>;
        using AF = ember::Autodiff<FusedVulkan>;
        for (std::size_t n : {std::size_t{64}, std::size_t{1024}}) {
            const std::string b = "_b" + std::to_string(n);
            for (bool graph : {false, true}) {
                const std::string g = graph ? "_graph" : "";
                auto row = [&](const std::string& name, auto run) {
                    if (!only.starts_with("train_step") || only == name) run(name);
                };
                row("train_step_mlp" + b + g,
                    [&](const std::string& m) { train_step<A, mnist::Mlp>(m, n, graph); });
                row("train_step_cnn" + b + g,
                    [&](const std::string& m) { train_step<A, mnist::Cnn>(m, n, graph); });
                row("train_step_mlp" + b + "_fusion" + g,
                    [&](const std::string& m) { train_step<AF, mnist::Mlp>(m, n, graph); });
                row("train_step_cnn" + b + "_fusion" + g,
                    [&](const std::string& m) { train_step<AF, mnist::Cnn>(m, n, graph); });
            }
        }
    }
    if (want("overhead")) {
        // The per-op cost of a 1-element add (issue 31, item 6): eager, then 1000 in-place adds
        // recorded once and resubmitted (one queue submission for the whole chain).
        auto a = Tensor<Vulkan, 1>::ones({1});
        auto b = Tensor<Vulkan, 1>::ones({1});
        emit("op_overhead_add_1", time_per_call([&] { a = a + b; }, 2000) * 1e6, "us/op");
        const double inplace = time_per_call([&] { a = std::move(a) + b; }, 2000);
        emit("op_overhead_add_1_in_place", inplace * 1e6, "us/op");
        constexpr int kChain = 1000;
        auto chain = ember::vulkan::capture([&] {
            for (int i = 0; i < kChain; ++i) a = std::move(a) + b;
        });
        if (chain.replayable())
            emit("op_overhead_add_1_graph",
                 time_per_call([&] { chain.replay(); }, 20) / kChain * 1e6, "us/op");
        else
            std::fprintf(stderr, "bench_vulkan: overhead chain: %s\n", chain.why_not().c_str());
    }
    if (want("reduce")) {
        // Reductions that end a chain, unfused on Vulkan and one kernel each on Fusion<Vulkan>.
        auto x = Tensor<Vulkan, 2>::random({8192, 4096}, ember::Distribution::Normal(0, 1));
        auto timed = [](const std::function<void()>& f, int reps) {
            return time_per_call(f, reps);
        };
        bench::reduce_chain(x, "vulkan", timed, emit, [] {});
        bench::reduce_chain(Tensor<FusedVulkan, 2>::from_data(x.to_data()), "fusion_vulkan", timed,
                            emit, [] { FusedVulkan::flush(); });
    }
    if (want("fusion")) {
        gelu_64m<Vulkan>("gelu_custom_unfused_64M");
        gelu_64m<FusedVulkan>("gelu_custom_64M");
    }
    return 0;
} catch (const std::exception& e) {
    std::cerr << "bench_vulkan: " << e.what() << '\n';
    return 1;
}
