// bench_quant: ember's int8 Linear (quantize_weights, dynamic and static activations) beside its
// f32 Linear, at batch 1 and 64, for the layers of the guide's models. benchmarks/quant.sh runs it
// next to PyTorch's f32 and dynamic-quantized Linear (bench_quant_torch.py).
//
//   bench_quant [--reps N]
//
// Prints one JSON object per line and per (workload, implementation):
//   {"workload":"linear_784x512_b1","impl":"ember_int8_dynamic","us":3.1,"runs":15}
// Each figure is the median of `--reps` timed runs after warm-up; a run repeats the forward
// enough times to last about 2 ms, and reports the time of one forward.
#include <ember/ember.hpp>
#include <ember/nn.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace {

using ember::Cpu;
using Clock = std::chrono::steady_clock;
volatile double g_sink = 0;

template <std::size_t D>
void consume(const ember::Tensor<Cpu, D>& t) {
    g_sink = g_sink + static_cast<double>(t.primitive().template data<float>()[0]);
}

// Median seconds of one call of `f` over `reps` timed runs of `inner` calls each.
double time_us(const std::function<void()>& f, int reps) {
    for (int i = 0; i < 20; ++i) f();
    auto t0 = Clock::now();
    int calls = 0;
    while (std::chrono::duration<double>(Clock::now() - t0).count() < 2e-3) {
        f();
        ++calls;
    }
    const int inner = std::max(1, calls);
    std::vector<double> s;
    for (int r = 0; r < reps; ++r) {
        t0 = Clock::now();
        for (int i = 0; i < inner; ++i) f();
        s.push_back(std::chrono::duration<double>(Clock::now() - t0).count() / inner);
    }
    std::sort(s.begin(), s.end());
    return s[s.size() / 2] * 1e6;
}

void report(const std::string& workload, const char* impl, double us, int reps) {
    std::printf("{\"workload\":\"%s\",\"impl\":\"%s\",\"us\":%.4g,\"runs\":%d}\n", workload.c_str(),
                impl, us, reps);
    std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
    int reps = 15;
    for (int i = 1; i < argc; ++i)
        if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) reps = std::atoi(argv[++i]);
    Cpu::seed(7);
    struct Layer {
        std::size_t in, out;
    };
    for (Layer l : {Layer{784, 512}, Layer{1024, 512}, Layer{512, 512}}) {
        auto f32 = ember::nn::LinearConfig{l.in, l.out}.init<Cpu>();
        (void)f32.weight.val();
        auto dynamic = f32.quantize_weights(ember::quant::Quantizer<>{});
        for (std::size_t batch : {std::size_t{1}, std::size_t{64}}) {
            auto x = ember::Tensor<Cpu, 2>::random({batch, l.in}, ember::Distribution::Default);
            auto observed = ember::quant::observe_activations(dynamic);
            (void)observed.forward(x);
            auto fixed = ember::quant::freeze_activations(observed);
            const std::string w = "linear_" + std::to_string(l.in) + "x" + std::to_string(l.out) +
                                  "_b" + std::to_string(batch);
            report(w, "ember_f32", time_us([&] { consume(f32.forward(x)); }, reps), reps);
            report(w, "ember_int8_dynamic", time_us([&] { consume(dynamic.forward(x)); }, reps),
                   reps);
            report(w, "ember_int8_static", time_us([&] { consume(fixed.forward(x)); }, reps), reps);
        }
    }
    std::printf("{\"kernel\":\"%s\"}\n", std::string(ember::cpu::qgemm_kernel()).c_str());
    return g_sink == 12345.0;
}
