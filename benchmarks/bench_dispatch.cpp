// bench_dispatch: what ember::Dispatch adds to an op (issue 36, item 3). Times the same small
// chain — add, mul, exp, sum_dim on [16, 16] — on each CPU stack and on Dispatch with the device
// naming that stack, rounds alternating, and prints one JSON line a stack with both medians and
// their ratio (Dispatch / concrete; 1.0 = no overhead). Where the build has CUDA or Vulkan and a
// device is present, their stacks are timed the same way; there the chain is launch-bound (the
// kernels run asynchronously and the one read-back at the end waits for them), so the figure is
// the host's cost of issuing four ops.
//   bench_dispatch [--rounds N] [--iters N]
#include <ember/dispatch/dispatch.hpp>
#include <ember/ember.hpp>
#if defined(BENCH_DISPATCH_CUDA)
#include <ember/backend/cuda.hpp>
#endif
#if defined(BENCH_DISPATCH_VULKAN)
#include <ember/backend/vulkan.hpp>
#endif

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

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

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

template <typename B>
void compare(const char* stack, const ember::DispatchDevice& d, int rounds, int iters) {
    std::vector<double> concrete, dispatch;
    for (int r = 0; r < rounds; ++r) {
        concrete.push_back(time_chain<B>({}, iters));
        dispatch.push_back(time_chain<ember::Dispatch>(d, iters));
    }
    const double c = median(concrete), s = median(dispatch);
    std::printf("{\"workload\":\"dispatch_overhead\",\"stack\":\"%s\",\"unit\":\"us_per_chain\","
                "\"concrete\":%.3f,\"dispatch\":%.3f,\"ratio\":%.4f,\"ops_per_chain\":4,"
                "\"rounds\":%d,\"iters\":%d}\n",
                stack, c, s, s / c, rounds, iters);
}

}  // namespace

int main(int argc, char** argv) {
    int rounds = 7, iters = 20000;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!std::strcmp(argv[i], "--rounds")) rounds = std::atoi(argv[i + 1]);
        else if (!std::strcmp(argv[i], "--iters")) iters = std::atoi(argv[i + 1]);
    }
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
    return 0;
}
