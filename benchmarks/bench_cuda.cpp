// ember's CUDA benchmarks (ANCHORS.md, GPU table), run next to bench_cuda_torch.py in one call
// on the GPU machine by benchmarks/cuda.sh: sgemm 8192³ in f32, TF32 and bf16, softmax
// 4096×4096, the per-op overhead of a 1-element add, and training steps (Adam, batch 64) of
// the MLP 784-512-512-10 and the guide CNN on random batches. Prints one JSON line per result.
#include <chrono>
#include <cstdio>
#include <functional>
#include <iostream>
#include <string>

#include <ember/backend/cuda.hpp>
#include <ember/ember.hpp>
#include <ember/nn.hpp>
#include <ember/optim.hpp>

#include "../examples/mnist/model.hpp"

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

template <typename Model>
void train_step(const char* name) {
    using B = ember::Autodiff<Cuda>;
    Model model = Model::init();
    auto optim = ember::optim::AdamConfig{.epsilon = 1e-8}.init<Model>();
    auto images = Tensor<B, 3>::random({64, 28, 28}, ember::Distribution::Default);
    auto targets = Tensor<B, 1, ember::Int>::random({64}, ember::Distribution::Uniform(0, 10));
    mnist::MnistBatch<B> batch{images, targets};
    const double s = time_per_call(
        [&] {
            auto out = mnist::classify(model, batch);
            auto grads = ember::optim::GradientsParams::from_grads(out.loss.backward(), model);
            model = optim.step(1e-3, std::move(model), std::move(grads));
        },
        50, 10);
    emit(name, s * 1e3, "ms");
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
    }
    if (want("train")) {
        train_step<mnist::Mlp<ember::Autodiff<Cuda>>>("train_step_mlp_b64");
        train_step<mnist::Cnn<ember::Autodiff<Cuda>>>("train_step_cnn_b64");
    }
    return 0;
} catch (const std::exception& e) {
    std::cerr << "bench_cuda: " << e.what() << '\n';
    return 1;
}
