// bench_cpu: ember's CPU backend on the workloads of ANCHORS.md, with OpenBLAS called directly
// (the matmul reference) and memcpy (the roof for elementwise work) timed in the same process.
//
//   bench_cpu [--threads N] [--reps N] [--quick] [--only NAME[,NAME...]] [--list]
//
// Prints one JSON object per line and per (workload, implementation):
//   {"workload":"matmul_1024","impl":"ember","threads":1,"unit":"GFLOP/s","value":98.7,
//    "median_s":0.0217,"min_s":0.0215,"runs":11}
// Each figure is the median of `--reps` timed runs after warm-up. CPU ops are synchronous, so
// no sync is needed; every result is read back (one element, through the primitive's pointer)
// so that nothing can be skipped. Benchmarks measure, they never assert.
#include <ember/ember.hpp>
#include <ember/nn.hpp>

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <numbers>
#include <string>
#include <vector>

namespace {

using ember::Cpu;
template <std::size_t D>
using T = ember::Tensor<Cpu, D>;
using Clock = std::chrono::steady_clock;

struct Options {
    std::size_t threads = 1;
    int reps = 11;
    int warmup = 2;
    bool quick = false;
    std::vector<std::string> only;
};
Options opt;

volatile double g_sink = 0;  // every result lands here

template <typename B, std::size_t D>
void consume(const ember::Tensor<B, D>& t) {
    const auto& p = t.primitive();
    if (p.num_elements() != 0) g_sink = g_sink + static_cast<double>(p.template data<float>()[0]);
}
// A Fusion<Cpu> tensor: computes what is pending (the fused kernel), then reads one element.
template <std::size_t D>
void consume(const ember::Tensor<ember::Fusion<Cpu>, D>& t) {
    consume(ember::Tensor<Cpu, D>(ember::detail::fusion::take<Cpu>(t.primitive())));
}

bool selected(const std::string& name) {
    if (opt.only.empty()) return true;
    for (const auto& o : opt.only)
        if (name.find(o) != std::string::npos) return true;
    return false;
}

struct Timing {
    double median_s, min_s;
    int runs;
};

// Runs `f` `warmup` times, then `reps` timed times; median and min of the timed runs.
Timing time_runs(const std::function<void()>& f, int warmup, int reps) {
    for (int i = 0; i < warmup; ++i) f();
    std::vector<double> s;
    s.reserve(static_cast<std::size_t>(reps));
    for (int i = 0; i < reps; ++i) {
        const auto t0 = Clock::now();
        f();
        s.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    }
    std::sort(s.begin(), s.end());
    const std::size_t n = s.size();
    const double med = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
    return {med, s.front(), reps};
}

// `work` is the amount per run (FLOPs, bytes or ops); `scale` turns work/s into the unit.
void report(const std::string& workload, const char* impl, const char* unit, double value,
            const Timing& t) {
    std::printf(
        "{\"workload\":\"%s\",\"impl\":\"%s\",\"threads\":%zu,\"unit\":\"%s\",\"value\":%.6g,"
        "\"median_s\":%.6g,\"min_s\":%.6g,\"runs\":%d}\n",
        workload.c_str(), impl, opt.threads, unit, value, t.median_s, t.min_s, t.runs);
    std::fflush(stdout);
}
void report_rate(const std::string& workload, const char* impl, const char* unit, double work,
                 double scale, const Timing& t) {
    report(workload, impl, unit, work / t.median_s / scale, t);
}

// 64-byte aligned float buffer, first-touched (so that page faults are not timed).
struct Buf {
    float* p = nullptr;
    std::size_t n = 0;
    explicit Buf(std::size_t n_) : n(n_) {
        p = static_cast<float*>(std::aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64));
        for (std::size_t i = 0; i < n; ++i)
            p[i] = static_cast<float>((i * 2654435761u) % 1000) / 1000.f;
    }
    ~Buf() { std::free(p); }
    Buf(const Buf&) = delete;
    Buf& operator=(const Buf&) = delete;
};

// ---- workloads -------------------------------------------------------------------------------

// Runs `f` and `g` alternately (warm-up, then `reps` timed pairs), so that both see the same
// machine: on a shared machine the load changes from second to second.
// With `ratios`, also the ratio g ÷ f of each pair's times.
std::pair<Timing, Timing> time_alternating(const std::function<void()>& f,
                                           const std::function<void()>& g, int warmup, int reps,
                                           std::vector<double>* ratios = nullptr) {
    for (int i = 0; i < warmup; ++i) {
        f();
        g();
    }
    std::vector<double> sf, sg;
    auto once = [](const std::function<void()>& h) {
        const auto t0 = Clock::now();
        h();
        return std::chrono::duration<double>(Clock::now() - t0).count();
    };
    for (int i = 0; i < reps; ++i) {
        sf.push_back(once(f));
        sg.push_back(once(g));
        if (ratios) ratios->push_back(sg.back() / sf.back());
    }
    auto summarise = [](std::vector<double>& s) {
        std::sort(s.begin(), s.end());
        const std::size_t n = s.size();
        return Timing{n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2, s.front(),
                      static_cast<int>(n)};
    };
    return {summarise(sf), summarise(sg)};
}

void bench_matmul(std::size_t n) {
    const std::string name = "matmul_" + std::to_string(n);
    if (!selected(name)) return;
    const double flops = 2.0 * double(n) * double(n) * double(n);
    auto a = T<2>::random({n, n}, ember::Distribution::Default);
    auto b = T<2>::random({n, n}, ember::Distribution::Default);
    // OpenBLAS called directly on buffers of its own, row-major, C = A B.
    Buf ra(n * n), rb(n * n), rc(n * n);
    const int ni = static_cast<int>(n);
    const auto [te, to] = time_alternating(
        [&] { consume(a.matmul(b)); },
        [&] {
            // At the run's count each time: ember's GEMM sets OpenBLAS to one thread (it runs
            // OpenBLAS single-threaded on tiles across its own pool).
            openblas_set_num_threads(static_cast<int>(opt.threads));
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, ni, ni, ni, 1.f, ra.p, ni, rb.p,
                        ni, 0.f, rc.p, ni);
            g_sink = g_sink + rc.p[0];
        },
        opt.warmup, n <= 256 ? opt.reps * 5 : opt.reps);  // small: cheap, and noisier
    report_rate(name, "ember", "GFLOP/s", flops, 1e9, te);
    report_rate(name, "openblas", "GFLOP/s", flops, 1e9, to);
}

constexpr std::size_t k16M = std::size_t{1} << 24;

void bench_add() {
    if (!selected("add_new_16M") && !selected("add_inplace_16M")) return;
    const std::size_t n = opt.quick ? k16M / 8 : k16M;
    auto a = T<1>::random({n}, ember::Distribution::Default);
    auto b = T<1>::random({n}, ember::Distribution::Default);
    if (selected("add_new_16M")) {
        // `a + b` copies the handle of a (a stays alive), so the result needs a new buffer;
        // the previous result is freed at the end of each run and its buffer comes back.
        const auto t = time_runs([&] { consume(a + b); }, opt.warmup, opt.reps);
        report_rate("add_new_16M", "ember", "GB/s", 12.0 * double(n), 1e9, t);
    }
    if (selected("add_inplace_16M")) {
        // The moved-in handle is the only reference: the backend writes into its buffer.
        const auto t = time_runs(
            [&] {
                a = std::move(a) + b;
                consume(a);
            },
            opt.warmup, opt.reps);
        report_rate("add_inplace_16M", "ember", "GB/s", 12.0 * double(n), 1e9, t);
    }
}

void bench_gelu() {
    if (!selected("gelu_custom_16M")) return;
    const std::size_t n = opt.quick ? k16M / 8 : k16M;
    auto x = T<1>::random({n}, ember::Distribution::Normal(0, 1));
    const auto t = time_runs(
        [&] { consume(x * ((x / std::numbers::sqrt2_v<float>).erf() + 1) / 2); }, 1, opt.reps);
    report_rate("gelu_custom_16M", "ember", "GB/s", 8.0 * double(n), 1e9, t);
}

// gelu_custom through Fusion<Cpu>: one kernel; the unfused chain timed alternately with it in
// the same process, so that both see the same machine, for the fused ÷ unfused ratio (also
// reported as the median of the ratios of consecutive pairs, the figure least disturbed by
// neighbours whose load changes from second to second).
void bench_gelu_fused() {
    if (!selected("gelu_custom_16M_fused")) return;
    const std::size_t n = opt.quick ? k16M / 8 : k16M;
    using F = ember::Fusion<Cpu>;
    auto x = T<1>::random({n}, ember::Distribution::Normal(0, 1));
    auto xf = ember::Tensor<F, 1>::from_data(x.to_data());
    auto gelu = [](auto v) { return v * ((v / std::numbers::sqrt2_v<float>).erf() + 1) / 2; };
    std::vector<double> ratios;
    const auto [tf, tu] = time_alternating([&] { consume(gelu(xf)); }, [&] { consume(gelu(x)); }, 1,
                                           opt.reps, &ratios);
    report_rate("gelu_custom_16M_fused", "ember", "GB/s", 8.0 * double(n), 1e9, tf);
    report_rate("gelu_custom_16M_fused", "ember_unfused", "GB/s", 8.0 * double(n), 1e9, tu);
    std::sort(ratios.begin(), ratios.end());
    report("gelu_custom_16M_fused", "fused_over_unfused_pairs", "x", ratios[ratios.size() / 2], tf);
}

// Reductions that end an elementwise chain, [8192, 2048] f32: a row sum of exp(2x) (4 bytes
// read an element) and LayerNorm over the last dim (4 read + 4 written), on Fusion<Cpu> (the
// chain and its reduction one pass) and unfused, in turn in the same process.
void bench_reduce_fused() {
    if (!selected("reduce_chain_8192x2048")) return;
    const std::size_t rows = opt.quick ? 1024 : 8192, cols = 2048;
    const double n = double(rows * cols);
    using F = ember::Fusion<Cpu>;
    auto x = T<2>::random({rows, cols}, ember::Distribution::Normal(0, 1));
    auto xf = ember::Tensor<F, 2>::from_data(x.to_data());
    auto rowsum = [](auto v) { return (v * 2.0).exp().sum_dim(1); };
    auto ln = ember::nn::LayerNormConfig{cols}.init<Cpu>();
    auto lnf = ember::nn::LayerNormConfig{cols}.init<F>();
    const auto rf = time_runs([&] { consume(rowsum(xf)); }, 1, opt.reps);
    const auto ru = time_runs([&] { consume(rowsum(x)); }, 1, opt.reps);
    const auto lf = time_runs([&] { consume(lnf.forward(xf)); }, 1, opt.reps);
    const auto lu = time_runs([&] { consume(ln.forward(x)); }, 1, opt.reps);
    report_rate("rowsum_exp_8192x2048", "ember_fused", "GB/s", 4.0 * n, 1e9, rf);
    report_rate("rowsum_exp_8192x2048", "ember_unfused", "GB/s", 4.0 * n, 1e9, ru);
    report_rate("layer_norm_8192x2048", "ember_fused", "GB/s", 8.0 * n, 1e9, lf);
    report_rate("layer_norm_8192x2048", "ember_unfused", "GB/s", 8.0 * n, 1e9, lu);
}

// What a matmul epilogue could save on the CPU: a Linear layer with bias and relu on Fusion<Cpu>
// (the matmul through OpenBLAS, then the bias add and relu as one fused pass over the result)
// against the bare matmul, timed in turn. The difference bounds the gain of applying the bias
// and relu inside the GEMM.
void bench_linear_epilogue() {
    if (!selected("linear_bias_relu")) return;
    using F = ember::Fusion<Cpu>;
    const std::size_t sizes[][3] = {{64, 784, 512}, {256, 1024, 1024}, {2048, 1024, 1024}};
    for (const auto& s : sizes) {
        const std::size_t m = s[0], k = s[1], n = opt.quick ? s[2] / 4 : s[2];
        const std::string name = "linear_bias_relu_" + std::to_string(m) + "x" +
                                 std::to_string(k) + "x" + std::to_string(n);
        auto x = ember::Tensor<F, 2>::random({m, k}, ember::Distribution::Normal(0, 1));
        auto w = ember::Tensor<F, 2>::random({k, n}, ember::Distribution::Normal(0, 0.05));
        auto b = ember::Tensor<F, 2>::random({1, n}, ember::Distribution::Normal(0, 1));
        std::vector<double> ratios;
        const auto [tm, tl] = time_alternating(
            [&] { consume(x.matmul(w)); },
            [&] { consume(ember::activation::relu(x.matmul(w) + b)); }, 2, opt.reps, &ratios);
        std::sort(ratios.begin(), ratios.end());
        const double flop = 2.0 * double(m) * double(k) * double(n);
        report_rate(name, "ember_matmul", "GFLOP/s", flop, 1e9, tm);
        report_rate(name, "ember_linear", "GFLOP/s", flop, 1e9, tl);
        // The share of the layer's time outside the matmul (median of the pairs).
        report(name, "epilogue_share_pct", "%", 100.0 * (1.0 - 1.0 / ratios[ratios.size() / 2]),
               tl);
    }
}

void bench_sum() {
    if (!selected("sum_16M")) return;
    const std::size_t n = opt.quick ? k16M / 8 : k16M;
    auto x = T<1>::random({n}, ember::Distribution::Default);
    const auto t = time_runs([&] { consume(x.sum()); }, opt.warmup, opt.reps);
    report_rate("sum_16M", "ember", "GB/s", 4.0 * double(n), 1e9, t);
}

void bench_softmax() {
    if (!selected("softmax_4096x1024")) return;
    const std::size_t rows = opt.quick ? 1024 : 8192, cols = 2048;
    auto x = T<2>::random({rows, cols}, ember::Distribution::Normal(0, 1));
    const auto t =
        time_runs([&] { consume(ember::activation::softmax(x, 1)); }, opt.warmup, opt.reps);
    report_rate("softmax_4096x1024", "ember", "GB/s", 8.0 * double(rows * cols), 1e9, t);
}

// conv2d [N, Ci, HW, HW] x Co 3x3 filters with bias (ember::module::conv2d); `pad` each side.
void bench_conv2d(std::size_t N, std::size_t Ci, std::size_t HW, std::size_t Co, std::size_t pad) {
    const std::string name = "conv2d_" + std::to_string(N) + "x" + std::to_string(Ci) + "x" +
                             std::to_string(HW) + "x" + std::to_string(HW) + "_" +
                             std::to_string(Co) + "x3x3";
    if (!selected(name)) return;
    const std::size_t K = 3;
    auto x = T<4>::random({N, Ci, HW, HW}, ember::Distribution::Normal(0, 1));
    auto w = T<4>::random({Co, Ci, K, K}, ember::Distribution::Uniform(-1. / 3, 1. / 3));
    auto bias = T<1>::random({Co}, ember::Distribution::Uniform(-1. / 3, 1. / 3));
    ember::ConvOptions<2> o;
    o.padding = {pad, pad};
    const double oh = double(HW + 2 * pad - K + 1), ow = oh;
    const double flops = 2.0 * double(N * Co) * oh * ow * double(Ci * K * K);
    // Enough convolutions per run for ~1 ms or more: the small one takes well under that.
    const int per_run = flops > 1e9 ? 1 : (opt.quick ? 5 : 20);
    const auto t = time_runs(
        [&] {
            for (int i = 0; i < per_run; ++i)
                consume(ember::module::conv2d(x, w, std::optional<T<1>>(bias), o));
        },
        opt.warmup, opt.reps);
    report_rate(name, "ember", "GFLOP/s", flops * per_run, 1e9, t);
}

void bench_overhead() {
    if (!selected("overhead_add_1")) return;
    auto a = T<1>::from_floats({1.f});
    auto b = T<1>::from_floats({2.f});
    const int iters = opt.quick ? 2000 : 50000;
    const auto t = time_runs(
        [&] {
            for (int i = 0; i < iters; ++i) consume(a + b);
        },
        opt.warmup, opt.reps);
    report("overhead_add_1", "ember", "us/op", t.median_s / iters * 1e6, t);
}

// Forward + backward of the MLP 784-512-512-10 on a batch of 64, cross-entropy loss, on
// Autodiff<Cpu>: the training step without the optimizer.
void bench_mlp() {
    if (!selected("mlp_fwd_bwd_784_512_512_10_b64")) return;
    using AD = ember::Autodiff<Cpu>;
    using ember::Distribution;
    const std::size_t batch = 64;
    auto param = [](std::size_t in, std::size_t out) {
        const double b = 1.0 / std::sqrt(double(in));
        return ember::Tensor<AD, 2>::random({in, out}, Distribution::Uniform(-b, b)).require_grad();
    };
    auto bias = [](std::size_t in, std::size_t out) {
        const double b = 1.0 / std::sqrt(double(in));
        return ember::Tensor<AD, 1>::random({out}, Distribution::Uniform(-b, b)).require_grad();
    };
    auto w1 = param(784, 512), w2 = param(512, 512), w3 = param(512, 10);
    auto b1 = bias(784, 512), b2 = bias(512, 512), b3 = bias(512, 10);
    auto x = ember::Tensor<AD, 2>::random({batch, 784}, Distribution::Default);
    auto y = ember::Tensor<AD, 2, ember::Int>::random({batch, 1}, Distribution::Uniform(0, 10));
    const int per_run = opt.quick ? 5 : 20;
    const auto t = time_runs(
        [&] {
            for (int i = 0; i < per_run; ++i) {
                auto h = ember::activation::relu(x.matmul(w1) + b1.unsqueeze());
                h = ember::activation::relu(h.matmul(w2) + b2.unsqueeze());
                auto logits = h.matmul(w3) + b3.unsqueeze();
                auto loss = -ember::activation::log_softmax(logits, 1).gather(1, y).mean();
                auto grads = loss.backward();
                consume(w1.grad(grads).value());
            }
        },
        opt.warmup, opt.reps);
    report("mlp_fwd_bwd_784_512_512_10_b64", "ember", "ms/step", t.median_s / per_run * 1e3, t);
}

// Autograd overhead: a 4-op chain on 1-element tensors, forward and backward.
void bench_autograd_overhead() {
    if (!selected("autograd_chain4_1")) return;
    using AD = ember::Autodiff<Cpu>;
    auto a = ember::Tensor<AD, 1>::from_floats({0.5f}).require_grad();
    auto b = ember::Tensor<AD, 1>::from_floats({1.5f}).require_grad();
    const int iters = opt.quick ? 1000 : 20000;
    const auto t = time_runs(
        [&] {
            for (int i = 0; i < iters; ++i) {
                auto y = ((a * b + a).exp() * b).sum();
                auto grads = y.backward();
                consume(a.grad(grads).value());
            }
        },
        opt.warmup, opt.reps);
    report("autograd_chain4_1", "ember", "us/iter", t.median_s / iters * 1e6, t);
}

void bench_memcpy() {
    if (!selected("memcpy_64M")) return;
    // 64M f32 elements (256 MiB) copied into a first-touched buffer; GB/s counts the bytes
    // read and written (2 x 256 MiB), as the add figures count both inputs and the output.
    const std::size_t n = opt.quick ? (std::size_t{64} << 20) / 8 : std::size_t{64} << 20;
    Buf src(n), dst(n);
    const auto t = time_runs(
        [&] {
            std::memcpy(dst.p, src.p, n * sizeof(float));
            g_sink = g_sink + dst.p[n / 2];
        },
        1, opt.reps);
    report_rate("memcpy_64M", "memcpy", "GB/s", 8.0 * double(n), 1e9, t);
}

const std::vector<std::pair<std::string, std::function<void()>>>& workloads() {
    static const std::vector<std::pair<std::string, std::function<void()>>> w = {
        {"matmul_256", [] { bench_matmul(256); }},
        {"matmul_1024", [] { bench_matmul(1024); }},
        {"matmul_2048", [] { bench_matmul(2048); }},
        // Issue 37's rows: only when --only names them (they take seconds at one thread).
        {"matmul_4096",
         [] {
             if (!opt.only.empty()) bench_matmul(4096);
         }},
        {"add_new_16M", bench_add},  // also add_inplace_16M
        {"gelu_custom_16M", bench_gelu},
        {"gelu_custom_16M_fused", bench_gelu_fused},
        {"reduce_chain_8192x2048", bench_reduce_fused},  // rowsum_exp_, layer_norm_8192x2048
        {"linear_bias_relu", bench_linear_epilogue},     // three sizes m x k x n
        {"sum_16M", bench_sum},
        {"softmax_4096x1024", bench_softmax},
        {"conv2d_64x1x28x28_32x3x3", [] { bench_conv2d(64, 1, 28, 32, 0); }},
        // A ResNet-18 stage-1 convolution (issue 37): compute-bound, unlike the one above.
        {"conv2d_64x64x32x32_64x3x3",
         [] {
             if (!opt.only.empty()) bench_conv2d(64, 64, 32, 64, 1);
         }},
        {"overhead_add_1", bench_overhead},
        {"memcpy_64M", bench_memcpy},
        {"mlp_fwd_bwd_784_512_512_10_b64", bench_mlp},
        {"autograd_chain4_1", bench_autograd_overhead},
    };
    return w;
}

}  // namespace

int main(int argc, char** argv) {
    if (const char* e = std::getenv("EMBER_NUM_THREADS"))
        opt.threads = std::max(1l, std::strtol(e, nullptr, 10));
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "bench_cpu: %s needs a value\n", a.c_str());
                std::exit(2);
            }
            return argv[++i];
        };
        if (a == "--threads")
            opt.threads = std::max(1l, std::strtol(next().c_str(), nullptr, 10));
        else if (a == "--reps")
            opt.reps = std::max(1, std::atoi(next().c_str()));
        else if (a == "--quick")
            opt.quick = true;
        else if (a == "--only") {
            std::string s = next();
            for (std::size_t p = 0; p <= s.size();) {
                const std::size_t q = std::min(s.find(',', p), s.size());
                if (q > p) opt.only.push_back(s.substr(p, q - p));
                p = q + 1;
            }
        } else if (a == "--list") {
            for (const auto& [name, f] : workloads()) std::printf("%s\n", name.c_str());
            std::printf("add_inplace_16M\n");
            return 0;
        } else {
            std::fprintf(
                stderr,
                "usage: bench_cpu [--threads N] [--reps N] [--quick] [--only NAME,...] [--list]\n");
            return 2;
        }
    }
    if (opt.quick) {
        opt.reps = std::min(opt.reps, 3);
        opt.warmup = 1;
    }
    // Same thread count for ember's pool and for OpenBLAS (ember's matmul and the direct calls).
    ember::cpu::set_num_threads(opt.threads);
    openblas_set_num_threads(static_cast<int>(opt.threads));
    std::printf(
        "{\"meta\":\"bench_cpu\",\"threads\":%zu,\"ember_threads\":%zu,\"openblas_threads\":%d,"
        "\"openblas_core\":\"%s\",\"quick\":%s}\n",
        opt.threads, ember::cpu::num_threads(), openblas_get_num_threads(), openblas_get_corename(),
        opt.quick ? "true" : "false");

    for (const auto& [name, f] : workloads()) f();
    std::fprintf(stderr, "bench_cpu: done (sink %g)\n", static_cast<double>(g_sink));
    return 0;
}
