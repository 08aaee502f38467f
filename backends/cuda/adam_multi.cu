// The multi-tensor Adam and SGD steps: many tensors updated by one launch, as PyTorch's
// fused/foreach optimizers. The tensors' pointers, sizes and scalars travel in the kernel's
// parameters (a table of up to kAdamMultiPerLaunch entries, under the 4 KiB parameter limit), so
// nothing is copied to the device first and a captured graph replays the launch as it was recorded.
// Each block takes one chunk of one tensor; the update per element is adam_kernel's
// (elementwise.cu), with Adam's L2 penalty or AdamW's decay applied first in separately rounded
// operations, as the per-tensor path's own kernels round them; SGD's is sgd_kernel's, each
// operation rounded on its own.
#include <cstdint>

#include "batch_norm.hpp"
#include "device.cuh"
#include "rounding.cuh"

namespace ember::detail::cuda {
namespace {

constexpr int kAdamMultiPerLaunch = 28;
constexpr int kAdamChunk = 4 * kThreads;  // elements a block updates

template <typename T>
struct AdamMultiEntry {
    T* po;
    T* mo;
    T* vo;
    const T* p;
    const T* g;
    const T* m;
    const T* v;
    std::int64_t n;
    const double* replayed;
    double lr, correction_1, correction_2, decay;
};

template <typename T>
struct AdamMultiArgs {
    double beta_1, beta_2, epsilon, l2;
    int count;
    int block_start[kAdamMultiPerLaunch + 1];
    AdamMultiEntry<T> e[kAdamMultiPerLaunch];
};
static_assert(sizeof(AdamMultiArgs<float>) <= 4000, "the table must fit the kernel parameters");

template <typename T>
__global__ void adam_multi_kernel(const __grid_constant__ AdamMultiArgs<T> a) {
    int t = 0;
    while (t + 1 < a.count && static_cast<int>(blockIdx.x) >= a.block_start[t + 1]) ++t;
    const AdamMultiEntry<T>& e = a.e[t];
    double lr = e.lr, c1 = e.correction_1, c2 = e.correction_2;
    // In a captured graph the rate and corrections change from replay to replay (graph.cpp).
    if (e.replayed != nullptr) {
        lr = e.replayed[0];
        c1 = e.replayed[1];
        c2 = e.replayed[2];
    }
    const T b1 = T(a.beta_1), b2 = T(a.beta_2), eps = T(a.epsilon);
    const T inv_sqrt_c2 = T(1.0 / std::sqrt(c2));
    const T step = T(lr / c1);
    // AdamW's factor 1 − lr·λ from this replay's rate, rounded as the host rounds it.
    const bool decay = e.decay != 0.0, penalty = a.l2 != 0.0;
    const T l2 = T(a.l2), scale = T(__dsub_rn(1.0, __dmul_rn(lr, e.decay)));
    const std::int64_t begin =
        static_cast<std::int64_t>(blockIdx.x - a.block_start[t]) * kAdamChunk;
    const std::int64_t end = begin + kAdamChunk < e.n ? begin + kAdamChunk : e.n;
    for (std::int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
        const T p0 = e.p[i];
        T gi = e.g[i];
        if (penalty) gi = add_rn(gi, mul_rn(p0, l2));
        const T pi = decay ? mul_rn(p0, scale) : p0;
        const T mk = b1 * e.m[i] + (T(1) - b1) * gi;
        const T vk = b2 * e.v[i] + (T(1) - b2) * gi * gi;
        const T denom = sqrt(vk) * inv_sqrt_c2 + eps;
        e.po[i] = pi - step * mk / denom;
        e.mo[i] = mk;
        e.vo[i] = vk;
    }
}

/// Launches a multi-tensor kernel over tensors ts[0..count): each launch's table `a` (its
/// shared fields set by the caller) takes up to PerLaunch tensors and fewer than 2^31 blocks of
/// kAdamChunk elements; fill(entry, tensor) writes one entry, launch(a, blocks) runs a table.
template <int PerLaunch, typename Args, typename Tensor, typename Fill, typename Launch>
void launch_tables(Args& a, const Tensor* ts, std::size_t count, Fill fill, Launch launch) {
    int blocks = 0;
    auto flush = [&] {
        if (a.count == 0) return;
        a.block_start[a.count] = blocks;
        launch(a, static_cast<unsigned>(blocks));
        a.count = 0;
        blocks = 0;
    };
    for (std::size_t i = 0; i < count; ++i) {
        if (ts[i].n == 0) continue;
        const std::int64_t chunks = (ts[i].n + kAdamChunk - 1) / kAdamChunk;
        if (a.count == PerLaunch || blocks + chunks > 0x7fffffff - 1) flush();
        fill(a.e[a.count], ts[i]);
        a.block_start[a.count] = blocks;
        blocks += static_cast<int>(chunks);
        ++a.count;
    }
    flush();
}

template <typename T>
void launch_group(const AdamMultiTensor* ts, std::size_t count, cudaStream_t s) {
    AdamMultiArgs<T> a{};
    a.beta_1 = ts[0].s.step.beta_1;
    a.beta_2 = ts[0].s.step.beta_2;
    a.epsilon = ts[0].s.step.epsilon;
    a.l2 = ts[0].s.l2;
    auto fill = [](AdamMultiEntry<T>& e, const AdamMultiTensor& t) {
        e.po = static_cast<T*>(t.p_out);
        e.mo = static_cast<T*>(t.m_out);
        e.vo = static_cast<T*>(t.v_out);
        e.p = static_cast<const T*>(t.p);
        e.g = static_cast<const T*>(t.g);
        e.m = static_cast<const T*>(t.m);
        e.v = static_cast<const T*>(t.v);
        e.n = t.n;
        e.replayed = t.replayed;
        e.lr = t.s.step.lr;
        e.correction_1 = t.s.step.correction_1;
        e.correction_2 = t.s.step.correction_2;
        e.decay = t.s.decoupled_decay;
    };
    launch_tables<kAdamMultiPerLaunch>(a, ts, count, fill, [&](const auto& args, unsigned blocks) {
        adam_multi_kernel<T><<<blocks, kThreads, 0, s>>>(args);
        check_launch("adam_steps");
    });
}

template <typename T>
struct SgdMultiEntry {
    T* po;
    T* vo;
    const T* p;
    const T* g;
    const T* v;
    std::int64_t n;
    const double* replayed;
    double lr;
};

// More entries than Adam's fit the same parameter space (fewer pointers each).
constexpr int kSgdMultiPerLaunch = 40;

template <typename T>
struct SgdMultiArgs {
    SgdStepScalars s;
    int count;
    int block_start[kSgdMultiPerLaunch + 1];
    SgdMultiEntry<T> e[kSgdMultiPerLaunch];
};
static_assert(sizeof(SgdMultiArgs<double>) <= 4000, "the table must fit the kernel parameters");

template <typename T>
__global__ void sgd_multi_kernel(const __grid_constant__ SgdMultiArgs<T> a) {
    int t = 0;
    while (t + 1 < a.count && static_cast<int>(blockIdx.x) >= a.block_start[t + 1]) ++t;
    const SgdMultiEntry<T>& e = a.e[t];
    // In a captured graph the rate changes from replay to replay (graph.cpp).
    const T lr = T(e.replayed != nullptr ? e.replayed[0] : e.lr);
    const T mu = T(a.s.momentum), keep = T(1.0 - a.s.dampening), wd = T(a.s.weight_decay);
    const bool decay = a.s.weight_decay != 0.0, nesterov = a.s.nesterov;
    const std::int64_t begin =
        static_cast<std::int64_t>(blockIdx.x - a.block_start[t]) * kAdamChunk;
    const std::int64_t end = begin + kAdamChunk < e.n ? begin + kAdamChunk : e.n;
    for (std::int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
        const T pi = e.p[i];
        T gi = e.g[i];
        if (decay) gi = add_rn(gi, mul_rn(pi, wd));
        const T vk = add_rn(mul_rn(e.v[i], mu), mul_rn(gi, keep));
        const T d = nesterov ? add_rn(gi, mul_rn(vk, mu)) : vk;
        e.po[i] = sub_rn(pi, mul_rn(d, lr));
        e.vo[i] = vk;
    }
}

template <typename T>
void launch_sgd_group(const SgdMultiTensor* ts, std::size_t count, const SgdStepScalars& sc,
                      cudaStream_t s) {
    SgdMultiArgs<T> a{};
    a.s = sc;
    auto fill = [](SgdMultiEntry<T>& e, const SgdMultiTensor& t) {
        e.po = static_cast<T*>(t.p_out);
        e.vo = static_cast<T*>(t.v_out);
        e.p = static_cast<const T*>(t.p);
        e.g = static_cast<const T*>(t.g);
        e.v = static_cast<const T*>(t.v);
        e.n = t.n;
        e.replayed = t.replayed;
        e.lr = t.lr;
    };
    launch_tables<kSgdMultiPerLaunch>(a, ts, count, fill, [&](const auto& args, unsigned blocks) {
        sgd_multi_kernel<T><<<blocks, kThreads, 0, s>>>(args);
        check_launch("sgd_steps");
    });
}

}  // namespace

void launch_adam_multi(DType cd, const AdamMultiTensor* ts, std::size_t count, cudaStream_t s) {
    if (count == 0) return;
    if (cd == DType::F64)
        launch_group<double>(ts, count, s);
    else
        launch_group<float>(ts, count, s);
}

void launch_sgd_multi(DType cd, const SgdMultiTensor* ts, std::size_t count,
                      const SgdStepScalars& sc, cudaStream_t s) {
    if (count == 0) return;
    if (cd == DType::F64)
        launch_sgd_group<double>(ts, count, sc, s);
    else
        launch_sgd_group<float>(ts, count, sc, s);
}

}  // namespace ember::detail::cuda
