// bench_dispatch: what ember::Dispatch adds to an op (issue 36, item 3). Times the same small
// chain — add, mul, exp, sum_dim on [16, 16] — on each CPU stack and on Dispatch with the device
// naming that stack, in rounds (each side first in every other round), and prints one JSON line a
// stack with both medians and their ratio (Dispatch / concrete; 1.0 = no overhead), and the
// median and quartiles of the rounds' own ratios (`paired_ratio`, `paired_q1`, `paired_q3`). Where
// the build has CUDA or Vulkan and a device is present, their stacks are timed the same way; there
// the chain is launch-bound (the kernels run asynchronously and the one read-back at the end waits
// for them), so the figure is the host's cost of issuing four ops. Then the same comparison for
// whole training steps (forward, backward, Adam) of the mnist example's MLP and CNN at batch 64 on
// each autodiff stack, where the goal is ≤ 2 % added; those lines also give the host's
// share of each side's time (`concrete_host`, `dispatch_host`: ms a step until the last step was
// issued, before the read-back waits) and the host's ms a step in each phase (`*_phases`:
// forward with the loss, backward, collecting the gradients, the optimizer's step), which say
// where a difference comes from when the host is the bottleneck (small CUDA steps).
//   bench_dispatch [--rounds N] [--iters N] [--train-steps N] [--stacks LIST]
//                  [--side concrete|dispatch]
// `--stacks cpu,cpu+autodiff` runs only the rows of those stacks (the names the JSON lines give);
// `--iters 0` skips the chains and `--train-steps 0` the training steps. One stack's chain alone
// is what benchmarks/dispatch_callgrind.sh counts instructions of. `--side concrete|dispatch`
// runs one side of each training-step row only (its line then has that side's median alone), so
// that a profiler run on the whole process (`perf stat -e instructions:u`, `perf record`) sees one
// side: two such runs with the same --rounds and --train-steps compare the host's work a step.
#include <ember/dispatch/dispatch.hpp>
#include <ember/ember.hpp>
#include <ember/nn.hpp>
#include <ember/optim.hpp>
#if defined(BENCH_DISPATCH_CUDA)
#include <ember/backend/cuda.hpp>
#endif
#if defined(BENCH_DISPATCH_VULKAN)
#include <ember/backend/vulkan.hpp>
#endif

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../examples/mnist/model.hpp"

namespace {

template <typename B>
double time_chain(const ember::Device<B>& d, int iters) {
    auto x = ember::Tensor<B, 2>::random({16, 16}, ember::Distribution::Default, d);
    auto y = ember::Tensor<B, 2>::random({16, 16}, ember::Distribution::Default, d);
    float sink = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) {
        auto z = ((x + y) * y).exp().sum_dim(1);
        if (i + 1 == iters) sink = z.to_data().template to_vec<float>()[0];
    }
    const auto t1 = std::chrono::steady_clock::now();
    if (sink < 0) std::puts("");  // keeps the chain alive
    return std::chrono::duration<double, std::micro>(t1 - t0).count() / iters;
}

/// The host's share of time_train's last call: ms a step until the last step was issued, before
/// the read-back waits for the device (equal to the step time where the host is the bottleneck;
/// less where the device's queue runs behind).
double g_last_host_ms = 0;
/// The host's ms a step in each phase of time_train's last call: forward and loss, backward,
/// GradientsParams::from_grads, the optimizer's step.
std::array<double, 4> g_last_phase_ms{};
/// The four phases' medians over rounds as a JSON field `name`: [forward, backward, grads, step].
std::string phases_json(const char* name, const std::vector<std::array<double, 4>>& rounds) {
    std::string out = std::string("\"") + name + "\":[";
    for (std::size_t i = 0; i < 4; ++i) {
        std::vector<double> v;
        for (const auto& r : rounds) v.push_back(r[i]);
        std::sort(v.begin(), v.end());
        char buf[32];
        std::snprintf(buf, sizeof buf, "%s%.4f", i ? "," : "", v[v.size() / 2]);
        out += buf;
    }
    return out + "]";
}

/// Milliseconds a training step of the mnist example's model Net (its MLP or its CNN; batch 64,
/// Adam) takes on B, an autodiff stack or Dispatch on an autodiff device: `steps` steps after
/// three untimed ones, the last loss read back so the device's queue is included.
template <template <typename> class Net, typename B>
double time_train(const ember::Device<B>& d, int steps) {
    using Model = Net<B>;
    Model model = Model::init(d);
    auto optim = ember::optim::AdamConfig{.epsilon = 1e-8}.init<Model>();
    mnist::MnistBatch<B> data{
        ember::Tensor<B, 3>::random({64, 28, 28}, ember::Distribution::Default, d),
        ember::Tensor<B, 1, ember::Int>::random({64}, ember::Distribution::Uniform(0, 10), d)};
    // The host's time in each phase of a step (forward with the loss, backward, the gradients'
    // collection, the optimizer), summed over the timed steps: where the host is the bottleneck
    // (a small CUDA step) these say which phase a difference between two stacks comes from.
    std::array<double, 4> phase{};
    auto step = [&] {
        using clock = std::chrono::steady_clock;
        const auto a = clock::now();
        auto out = mnist::classify(model.forward(data.images), data);
        auto loss = out.loss;
        const auto b = clock::now();
        auto grads_raw = out.loss.backward();
        const auto c = clock::now();
        auto grads = ember::optim::GradientsParams::from_grads(std::move(grads_raw), model);
        const auto e = clock::now();
        model = optim.step(1e-3, std::move(model), std::move(grads));
        const auto f = clock::now();
        const std::array<clock::time_point, 5> t{a, b, c, e, f};
        for (std::size_t i = 0; i < 4; ++i)
            phase[i] += std::chrono::duration<double, std::milli>(t[i + 1] - t[i]).count();
        return loss;
    };
    for (int i = 0; i < 3; ++i) (void)step().to_data();
    phase = {};
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i + 1 < steps; ++i) (void)step();
    auto loss = step();
    const auto issued = std::chrono::steady_clock::now();
    const float last = std::move(loss).to_data().template to_vec<float>()[0];
    const auto t1 = std::chrono::steady_clock::now();
    if (last < 0) std::puts("");  // a loss is never negative: keeps the read-back
    g_last_host_ms = std::chrono::duration<double, std::milli>(issued - t0).count() / steps;
    for (std::size_t i = 0; i < 4; ++i) g_last_phase_ms[i] = phase[i] / steps;
    return std::chrono::duration<double, std::milli>(t1 - t0).count() / steps;
}

/// The stacks named by --stacks (all when empty).
std::vector<std::string> g_stacks;
int g_iters = 20000, g_train_steps = 20;
/// --side: "concrete" or "dispatch" runs that side of the training-step rows only.
std::string g_side;

bool wanted(const char* stack, bool train) {
    if ((train ? g_train_steps : g_iters) <= 0) return false;
    return g_stacks.empty() || std::find(g_stacks.begin(), g_stacks.end(), stack) != g_stacks.end();
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

/// The rounds' own ratios (Dispatch / concrete, the two runs of one round side by side): their
/// median and quartiles as JSON fields. A drift of the machine between rounds moves both runs
/// of a round, so these spread less than the ratio of the two medians.
std::string paired(const std::vector<double>& concrete, const std::vector<double>& dispatch) {
    std::vector<double> r;
    for (std::size_t i = 0; i < concrete.size(); ++i) r.push_back(dispatch[i] / concrete[i]);
    std::sort(r.begin(), r.end());
    char buf[128];
    std::snprintf(buf, sizeof buf, "\"paired_ratio\":%.4f,\"paired_q1\":%.4f,\"paired_q3\":%.4f",
                  r[r.size() / 2], r[r.size() / 4], r[(3 * r.size()) / 4]);
    return buf;
}

template <typename B>
void compare(const char* stack, const ember::DispatchDevice& d, int rounds, int iters) {
    if (!wanted(stack, false)) return;
    std::vector<double> concrete, dispatch;
    for (int r = 0; r < rounds; ++r) {  // the order alternates: neither side always runs first
        if (r % 2 == 0) concrete.push_back(time_chain<B>({}, iters));
        dispatch.push_back(time_chain<ember::Dispatch>(d, iters));
        if (r % 2 == 1) concrete.push_back(time_chain<B>({}, iters));
    }
    const double c = median(concrete), s = median(dispatch);
    std::printf(
        "{\"workload\":\"dispatch_overhead\",\"stack\":\"%s\",\"unit\":\"us_per_chain\","
        "\"concrete\":%.3f,\"dispatch\":%.3f,\"ratio\":%.4f,%s,\"ops_per_chain\":4,"
        "\"rounds\":%d,\"iters\":%d}\n",
        stack, c, s, s / c, paired(concrete, dispatch).c_str(), rounds, iters);
}

template <template <typename> class Net, typename B>
void compare_train_model(const char* model, const char* stack, const ember::DispatchDevice& d,
                         int rounds, int steps) {
    if (!wanted(stack, true)) return;
    std::vector<double> concrete, dispatch;
    if (!g_side.empty()) {  // one side only, for a profiler
        std::vector<double> t, host;
        for (int r = 0; r < rounds; ++r) {
            t.push_back(g_side == "dispatch" ? time_train<Net, ember::Dispatch>(d, steps)
                                             : time_train<Net, B>({}, steps));
            host.push_back(g_last_host_ms);
        }
        std::printf(
            "{\"workload\":\"dispatch_train_step_side\",\"stack\":\"%s\",\"side\":\"%s\","
            "\"unit\":\"ms_per_step\",\"model\":\"mnist %s, batch 64, adam\",\"ms\":%.4f,"
            "\"host_ms\":%.4f,\"rounds\":%d,\"steps\":%d}\n",
            stack, g_side.c_str(), model, median(t), median(host), rounds, steps);
        return;
    }
    std::vector<double> concrete_host, dispatch_host;
    std::vector<std::array<double, 4>> concrete_phases, dispatch_phases;
    auto run_concrete = [&] {
        concrete.push_back(time_train<Net, B>({}, steps));
        concrete_host.push_back(g_last_host_ms);
        concrete_phases.push_back(g_last_phase_ms);
    };
    for (int r = 0; r < rounds; ++r) {  // the order alternates: neither side always runs first
        if (r % 2 == 0) run_concrete();
        dispatch.push_back(time_train<Net, ember::Dispatch>(d, steps));
        dispatch_host.push_back(g_last_host_ms);
        dispatch_phases.push_back(g_last_phase_ms);
        if (r % 2 == 1) run_concrete();
    }
    const double c = median(concrete), s = median(dispatch);
    std::printf(
        "{\"workload\":\"dispatch_train_step\",\"stack\":\"%s\",\"unit\":\"ms_per_step\","
        "\"model\":\"mnist %s, batch 64, adam\",\"concrete\":%.4f,\"dispatch\":%.4f,"
        "\"ratio\":%.4f,%s,\"concrete_host\":%.4f,\"dispatch_host\":%.4f,%s,%s,\"rounds\":%d,"
        "\"steps\":%d}\n",
        stack, model, c, s, s / c, paired(concrete, dispatch).c_str(), median(concrete_host),
        median(dispatch_host), phases_json("concrete_phases", concrete_phases).c_str(),
        phases_json("dispatch_phases", dispatch_phases).c_str(), rounds, steps);
}

/// The MLP's and the CNN's training-step rows on autodiff stack B (Dispatch on `d`).
template <typename B>
void compare_train(const char* stack, const ember::DispatchDevice& d, int rounds, int steps) {
    compare_train_model<mnist::Mlp, B>("mlp", stack, d, rounds, steps);
    compare_train_model<mnist::Cnn, B>("cnn", stack, d, rounds, steps);
}

}  // namespace

int main(int argc, char** argv) {
    int rounds = 7;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!std::strcmp(argv[i], "--rounds")) rounds = std::atoi(argv[i + 1]);
        else if (!std::strcmp(argv[i], "--iters"))
            g_iters = std::atoi(argv[i + 1]);
        else if (!std::strcmp(argv[i], "--train-steps"))
            g_train_steps = std::atoi(argv[i + 1]);
        else if (!std::strcmp(argv[i], "--side")) {
            g_side = argv[i + 1];
            if (g_side != "concrete" && g_side != "dispatch") {
                std::fprintf(stderr, "bench_dispatch: --side is concrete or dispatch\n");
                return 2;
            }
        } else if (!std::strcmp(argv[i], "--stacks")) {
            std::string list = argv[i + 1];
            for (std::size_t b = 0; b <= list.size();) {
                const std::size_t e = std::min(list.find(',', b), list.size());
                if (e > b) g_stacks.push_back(list.substr(b, e - b));
                b = e + 1;
            }
        }
    }
    const int iters = g_iters, train_steps = g_train_steps;
    using ember::DispatchDevice;
    compare<ember::Cpu>("cpu", DispatchDevice::cpu(), rounds, iters);
    compare<ember::Fusion<ember::Cpu>>("cpu+fusion", DispatchDevice::cpu().fusion(), rounds, iters);
    compare<ember::Autodiff<ember::Cpu>>("cpu+autodiff", DispatchDevice::cpu().autodiff(), rounds,
                                         iters);
#if defined(BENCH_DISPATCH_CUDA)
    if (ember::cuda::is_available()) {
        compare<ember::Cuda>("cuda", DispatchDevice::cuda(), rounds, iters);
        compare<ember::Fusion<ember::Cuda>>("cuda+fusion", DispatchDevice::cuda().fusion(), rounds,
                                            iters);
        compare<ember::Autodiff<ember::Cuda>>("cuda+autodiff", DispatchDevice::cuda().autodiff(),
                                              rounds, iters);
    }
#endif
#if defined(BENCH_DISPATCH_VULKAN)
    if (ember::vulkan::is_available()) {
        compare<ember::Vulkan>("vulkan", DispatchDevice::vulkan(), rounds, iters);
        compare<ember::Fusion<ember::Vulkan>>("vulkan+fusion", DispatchDevice::vulkan().fusion(),
                                              rounds, iters);
        compare<ember::Autodiff<ember::Vulkan>>("vulkan+autodiff",
                                                DispatchDevice::vulkan().autodiff(), rounds, iters);
    }
#endif
    using ember::Autodiff;
    using ember::Fusion;
    compare_train<Autodiff<ember::Cpu>>("cpu+autodiff", DispatchDevice::cpu().autodiff(), rounds,
                                        train_steps);
    compare_train<Autodiff<Fusion<ember::Cpu>>>(
        "cpu+fusion+autodiff", DispatchDevice::cpu().fusion().autodiff(), rounds, train_steps);
#if defined(BENCH_DISPATCH_CUDA)
    if (ember::cuda::is_available()) {
        compare_train<Autodiff<ember::Cuda>>("cuda+autodiff", DispatchDevice::cuda().autodiff(),
                                             rounds, train_steps);
        compare_train<Autodiff<Fusion<ember::Cuda>>>(
            "cuda+fusion+autodiff", DispatchDevice::cuda().fusion().autodiff(), rounds, train_steps);
    }
#endif
#if defined(BENCH_DISPATCH_VULKAN)
    if (ember::vulkan::is_available()) {
        compare_train<Autodiff<ember::Vulkan>>("vulkan+autodiff",
                                               DispatchDevice::vulkan().autodiff(), rounds,
                                               train_steps);
        compare_train<Autodiff<Fusion<ember::Vulkan>>>(
            "vulkan+fusion+autodiff", DispatchDevice::vulkan().fusion().autodiff(), rounds,
            train_steps);
    }
#endif
    return 0;
}
