#pragma once
// The reductions-that-end-a-chain workload shared by the GPU benchmarks (bench_cuda,
// bench_vulkan): on [8192, 4096] f32, a row sum of exp(2x) (4 bytes read an element) and
// LayerNorm over the last dim (4 read + 4 written), as effective GB/s.
#include <string>

#include <ember/ember.hpp>
#include <ember/nn.hpp>

namespace bench {

/// Times both workloads on backend B and reports them as "<workload>_<tag>" through `emit`.
/// `time_per_call(f, reps)` gives seconds a call; `flush()` runs what a fusion backend holds.
template <ember::Backend B, typename Time, typename Emit, typename Flush>
void reduce_chain(const ember::Tensor<B, 2>& x, const std::string& tag, Time time_per_call,
                  Emit emit, Flush flush) {
    const double n = double(x.shape().num_elements());
    ember::Tensor<B, 2> y = x;
    const double s1 = time_per_call(
        [&] {
            y = (x * 2.0).exp().sum_dim(1);
            flush();
        },
        20);
    emit(("rowsum_exp_8192x4096_" + tag).c_str(), 4.0 * n / s1 / 1e9, "GB/s");
    auto ln = ember::nn::LayerNormConfig{x.shape()[1]}.init<B>(x.device());
    const double s2 = time_per_call(
        [&] {
            y = ln.forward(x);
            flush();
        },
        20);
    emit(("layer_norm_8192x4096_" + tag).c_str(), 8.0 * n / s2 / 1e9, "GB/s");
}

}  // namespace bench
