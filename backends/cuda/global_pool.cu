// Global average pooling, forward and backward, read and written in the tensor's own dtype and
// layout. Adaptive pooling to an output of size 1 is a ResNet's head; the general adaptive
// kernel (nn.cu) works on contiguous f32/f64 planes, so channels-last bf16 data paid a widening
// copy and a relayout before it and atomics after (80 µs of a ResNet-18 step at batch 256 on an
// H200, against a few here). Forward: one thread per (sample, channel) sums its positions
// (consecutive threads read consecutive channels of channels-last data). Backward: one thread
// per element of dx, in dx's memory order, no atomics and no zeroing.
#include <cstdint>

#include "device.cuh"
#include "global_pool.hpp"

namespace ember::detail::cuda {
namespace {

using i64 = std::int64_t;

template <typename T, typename A>
__global__ void global_avg_kernel(GlobalPool g, const T* __restrict__ x, T* __restrict__ out) {
    EMBER_GRID_LOOP(i, g.n * g.c) {
        const T* p = x + (i / g.c) * g.sn + (i % g.c) * g.sc;
        A sum = A(0);
        for (i64 j = 0; j < g.s; ++j) sum += static_cast<A>(p[j * g.ss]);
        out[i] = T(sum / static_cast<A>(g.s));
    }
}

/// dx's elements in memory order: channels-last (sc == 1) is [n, s, c], else [n, c, s]. The
/// index arithmetic is 32-bit where every index fits (I = unsigned): a 64-bit division per
/// element made this kernel compute-bound.
template <typename T, typename A, typename I>
__global__ void global_avg_backward_kernel(GlobalPool g, const T* __restrict__ grad,
                                           T* __restrict__ dx) {
    const bool cl = g.sc == 1 && g.c > 1;
    const I c = static_cast<I>(g.c), s = static_cast<I>(g.s), cs = c * s;
    const A scale = A(1) / static_cast<A>(g.s);
    EMBER_GRID_LOOP(j, g.n * g.c * g.s) {
        const I i = static_cast<I>(j);
        const I b = i / cs, ch = cl ? i % c : i / s % c;
        dx[j] = T(static_cast<A>(grad[b * c + ch]) * scale);
    }
}

}  // namespace

void launch_global_avg_pool(DType t, const GlobalPool& g, const void* x, void* out,
                            cudaStream_t s) {
    if (g.n * g.c == 0) return;
    visit_float_storage(t, [&]<typename T, typename A>() {
        global_avg_kernel<T, A><<<blocks_for(g.n * g.c), kThreads, 0, s>>>(
            g, static_cast<const T*>(x), static_cast<T*>(out));
    });
    check_launch("global_avg_pool");
}

void launch_global_avg_pool_backward(DType t, const GlobalPool& g, const void* grad, void* dx,
                                     cudaStream_t s) {
    if (g.n * g.c * g.s == 0) return;
    visit_float_storage(t, [&]<typename T, typename A>() {
        const unsigned blocks = blocks_for(g.n * g.c * g.s);
        if (g.n * g.c * g.s <= UINT32_MAX)
            global_avg_backward_kernel<T, A, std::uint32_t>
                <<<blocks, kThreads, 0, s>>>(g, static_cast<const T*>(grad), static_cast<T*>(dx));
        else
            global_avg_backward_kernel<T, A, i64>
                <<<blocks, kThreads, 0, s>>>(g, static_cast<const T*>(grad), static_cast<T*>(dx));
    });
    check_launch("global_avg_pool_backward");
}

}  // namespace ember::detail::cuda
