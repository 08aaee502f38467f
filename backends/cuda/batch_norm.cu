// Batch norm over [N, C, HW] data stored contiguous or channels-last ([N·HW, C] row-major), in
// three kernels each way:
//   forward:  partial sums per (channel, split of N) → per-channel statistics and the running
//             update (one warp a channel) → y, elementwise;
//   backward: partial Σdy and Σdy·(x − mean) → dgamma, dbeta and dx's per-channel
//             coefficients → dx, elementwise.
// The sums are of x − s_c, s_c being the channel's first value: the variance Σ(x − s)²/M −
// (Σ(x − s)/M)² then loses no more precision than the data's spread around its mean (the plain
// Σx² form cancels catastrophically when the mean is large). f16/bf16 data is read and written
// in its own type, with f32 statistics. Channels-last data has its own reduction kernels (a
// block sums 32 channels over a range of rows, each warp reading whole row segments); the
// elementwise kernels read 16 bytes a thread with the per-channel coefficients staged in shared
// memory (or, where the channels are not a multiple of the vector, find an element's channel
// as the contiguous ones do).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <initializer_list>

#include "batch_norm.hpp"
#include "device.cuh"

namespace ember::detail::cuda {
namespace {

constexpr int kBnThreads = 256;

/// Four consecutive elements, loaded and stored as one access.
template <typename T>
struct alignas(4 * sizeof(T)) Quad {
    T v[4];
};

template <typename A, typename T>
__device__ __forceinline__ A to_acc(T v) {
    return static_cast<A>(static_cast<float>(v));
}
template <>
__device__ __forceinline__ double to_acc<double, double>(double v) {
    return v;
}
template <typename T, typename A>
__device__ __forceinline__ T from_acc(A v) {
    return T(static_cast<float>(v));
}
template <>
__device__ __forceinline__ double from_acc<double, double>(double v) {
    return v;
}

template <typename A>
__device__ __forceinline__ A inv_sqrt(A v) {
    return A(1) / sqrt(v);
}

/// Sums a and b over the block; thread 0 gets the totals.
template <typename A>
__device__ __forceinline__ void block_sum2(A& a, A& b) {
    __shared__ A sa[32], sb[32];
    for (int d = 16; d > 0; d /= 2) {
        a += __shfl_xor_sync(0xffffffffu, a, d);
        b += __shfl_xor_sync(0xffffffffu, b, d);
    }
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    if (lane == 0) {
        sa[warp] = a;
        sb[warp] = b;
    }
    __syncthreads();
    if (warp == 0) {
        const int warps = blockDim.x / 32;
        a = lane < warps ? sa[lane] : A(0);
        b = lane < warps ? sb[lane] : A(0);
        for (int d = 16; d > 0; d /= 2) {
            a += __shfl_xor_sync(0xffffffffu, a, d);
            b += __shfl_xor_sync(0xffffffffu, b, d);
        }
    }
}

/// Sums the block's (s1, s2) and stores them as channel `c`'s partial sums of split `sp`
/// (called by every thread of the block: the sum synchronises it).
template <typename A>
__device__ __forceinline__ void store_partials(A s1, A s2, const BatchNormShape& g, std::int64_t c,
                                               int sp, A* part) {
    block_sum2(s1, s2);
    if (threadIdx.x == 0) {
        part[2 * (c * g.splits + sp)] = s1;
        part[2 * (c * g.splits + sp) + 1] = s2;
    }
}

/// Channel `c`'s partial sums added up over the splits by the calling warp (a lane every 32nd
/// split, then a butterfly over the lanes: a fixed order, so the same sums every run); every
/// lane gets the totals. One thread a channel walking hundreds of splits took 50 µs a launch.
template <typename A>
__device__ __forceinline__ void sum_partials(const A* part, const BatchNormShape& g, std::int64_t c,
                                             A& s1, A& s2) {
    s1 = 0;
    s2 = 0;
    const int lane = static_cast<int>(threadIdx.x % 32);
    if (c < g.c)
        for (int sp = lane; sp < g.splits; sp += 32) {
            s1 += part[2 * (c * g.splits + sp)];
            s2 += part[2 * (c * g.splits + sp) + 1];
        }
    for (int d = 16; d > 0; d /= 2) {
        s1 += __shfl_xor_sync(0xffffffffu, s1, d);
        s2 += __shfl_xor_sync(0xffffffffu, s2, d);
    }
}

/// The channel a finalising kernel's warp works on (a warp a channel, kBnThreads / 32 a block).
__device__ __forceinline__ std::int64_t warp_channel() {
    return (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
}

/// The samples [n0, n1) of split `sp` out of `splits`.
__device__ __forceinline__ void split_range(std::int64_t n, int sp, int splits, std::int64_t& n0,
                                            std::int64_t& n1) {
    n0 = n * sp / splits;
    n1 = n * (sp + 1) / splits;
}

/// Calls f(value, index) for the elements of channel `c` in samples [n0, n1), spread over the
/// block's threads (`index` is the element's offset in x).
template <bool V, typename T, typename F>
__device__ __forceinline__ void for_channel(const T* x, const BatchNormShape& g, std::int64_t c,
                                            std::int64_t n0, std::int64_t n1, F&& f) {
    if constexpr (V) {
        const auto q = static_cast<std::uint32_t>(g.hw / 4);
        const auto len = static_cast<std::uint32_t>((n1 - n0) * q);
        for (std::uint32_t e = threadIdx.x; e < len; e += blockDim.x) {
            const std::int64_t off = ((n0 + e / q) * g.c + c) * g.hw + 4 * (e % q);
            const Quad<T> v = *reinterpret_cast<const Quad<T>*>(x + off);
#pragma unroll
            for (int k = 0; k < 4; ++k) f(v.v[k], off + k);
        }
    } else {
        const auto q = static_cast<std::uint32_t>(g.hw);
        const auto len = static_cast<std::uint32_t>((n1 - n0) * q);
        for (std::uint32_t e = threadIdx.x; e < len; e += blockDim.x) {
            const std::int64_t off = ((n0 + e / q) * g.c + c) * g.hw + e % q;
            f(x[off], off);
        }
    }
}

/// The channel of element i (an offset into the data).
__device__ __forceinline__ std::int64_t channel_of(const BatchNormShape& g, std::int64_t i) {
    return g.channels_last ? i % g.c : (i / g.hw) % g.c;
}

/// The offset of channel c's first element (its shift s_c).
__device__ __forceinline__ std::int64_t first_of(const BatchNormShape& g, std::int64_t c) {
    return g.channels_last ? c : c * g.hw;
}

/// The normalised value v as the composed ops hand it to the residual addition: rounded to the
/// data's dtype T first (a no-op for f32 and f64). PyTorch's autocast rounds there too (batch
/// norm writes bf16, the addition reads it), and so must the fused form: rounding the sum only
/// once is more accurate, but differs from the composed ops by an ulp in about one element in
/// eight, where bn(x) ≈ -residual by up to half the value, and a small network's gradients
/// amplify that (measured on the ResNet test's model: 14 % in a BatchNorm's beta gradient).
template <typename T, typename A>
__device__ __forceinline__ A as_stored(A v) {
    return to_acc<A>(from_acc<T>(v));
}

/// The epilogue's forward on one normalised value v (in A) at offset i: + residual, then ReLU.
template <typename T, typename A>
__device__ __forceinline__ A epilogue(const BatchNormShape& g, A v, std::int64_t i) {
    if (g.residual != nullptr)
        v = as_stored<T>(v) + to_acc<A>(static_cast<const T*>(g.residual)[i]);
    return g.relu && !(v > A(0)) ? A(0) : v;
}

/// dy at offset i as the normalisation sees it: masked by the ReLU's output where it has one.
template <typename T, typename A>
__device__ __forceinline__ A grad_at(const BatchNormShape& g, const T* dy, std::int64_t i) {
    const A d = to_acc<A>(dy[i]);
    return g.relu && !(to_acc<A>(static_cast<const T*>(g.out)[i]) > A(0)) ? A(0) : d;
}

constexpr int kClChannels = 32;  ///< channels a channels-last reduction block covers
constexpr int kClRows = 8;       ///< rows it reads at once (blockDim.y)

/// Channels-last reductions: grid (channel tiles, splits), block (32, 8). Thread (x, y) sums
/// f(row, channel) for channel tile·32 + x over rows y, y + 8, ... of the split's range, then
/// the block adds its 8 rows of partial sums and stores each channel's pair as split `sp`'s.
template <typename A, typename F>
__device__ __forceinline__ void cl_channel_sums(const BatchNormShape& g, A* part, F&& f) {
    __shared__ A s1s[kClRows][kClChannels + 1], s2s[kClRows][kClChannels + 1];
    const std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * kClChannels + threadIdx.x;
    const int sp = static_cast<int>(blockIdx.y);
    std::int64_t r0, r1;
    split_range(g.n * g.hw, sp, g.splits, r0, r1);
    A s1 = 0, s2 = 0;
    if (c < g.c)
        for (std::int64_t r = r0 + threadIdx.y; r < r1; r += kClRows) f(r * g.c + c, c, s1, s2);
    s1s[threadIdx.y][threadIdx.x] = s1;
    s2s[threadIdx.y][threadIdx.x] = s2;
    __syncthreads();
    if (threadIdx.y == 0 && c < g.c) {
        for (int y = 1; y < kClRows; ++y) {
            s1 += s1s[y][threadIdx.x];
            s2 += s2s[y][threadIdx.x];
        }
        part[2 * (c * g.splits + sp)] = s1;
        part[2 * (c * g.splits + sp) + 1] = s2;
    }
}

// Channels-last: Σ(x − s_c) and Σ(x − s_c)² of each channel's share of rows.
template <typename T, typename A>
__global__ void bn_stats_cl_kernel(BatchNormShape g, const T* x, A* part) {
    cl_channel_sums<A>(g, part, [&](std::int64_t off, std::int64_t c, A& s1, A& s2) {
        const A d = to_acc<A>(x[off]) - to_acc<A>(x[c]);
        s1 += d;
        s2 += d * d;
    });
}

// Channels-last: Σdy and Σdy·(x − mean) of each channel's share of rows.
template <typename T, typename A>
__global__ void bn_grad_stats_cl_kernel(BatchNormShape g, const T* x, const T* dy, const A* mean,
                                        A* part) {
    cl_channel_sums<A>(g, part, [&](std::int64_t off, std::int64_t c, A& s1, A& s2) {
        const A d = grad_at<T, A>(g, dy, off);
        s1 += d;
        s2 += d * (to_acc<A>(x[off]) - mean[c]);
    });
}

// grid (c, splits): Σ(x − s_c) and Σ(x − s_c)² of one channel's share.
template <bool V, typename T, typename A>
__global__ void bn_stats_kernel(BatchNormShape g, const T* x, A* part) {
    const std::int64_t c = blockIdx.x;
    const int sp = static_cast<int>(blockIdx.y);
    std::int64_t n0, n1;
    split_range(g.n, sp, g.splits, n0, n1);
    const A shift = to_acc<A>(x[c * g.hw]);
    A s1 = 0, s2 = 0;
    for_channel<V>(x, g, c, n0, n1, [&](T v, std::int64_t) {
        const A d = to_acc<A>(v) - shift;
        s1 += d;
        s2 += d * d;
    });
    store_partials(s1, s2, g, c, sp, part);
}

// A warp a channel: the statistics, the running update, from the partial sums.
template <typename T, typename A>
__global__ void bn_stats_final_kernel(BatchNormShape g, const T* x, const A* part, A eps,
                                      A momentum, const A* rm, const A* rv, A* mean, A* rstd,
                                      A* rm_out, A* rv_out) {
    const std::int64_t c = warp_channel();
    A s1, s2;
    sum_partials(part, g, c, s1, s2);
    if (c >= g.c || threadIdx.x % 32 != 0) return;
    const A count = static_cast<A>(g.n * g.hw);
    const A d = s1 / count;
    A var = s2 / count - d * d;
    if (var < A(0)) var = A(0);
    const A m = to_acc<A>(x[first_of(g, c)]) + d;
    mean[c] = m;
    rstd[c] = inv_sqrt(var + eps);
    // As the composed update: running·(1 − momentum) + batch·momentum, the variance unbiased.
    const A unbias = count / (count - A(1));
    rm_out[c] = rm[c] * (A(1) - momentum) + m * momentum;
    rv_out[c] = rv[c] * (A(1) - momentum) + var * (unbias * momentum);
}

// y = (x − mean)·(rstd·gamma) + beta; with `var`, rstd is 1/√(var + eps) (eval mode).
template <bool V, typename T, typename A>
__global__ void bn_apply_kernel(BatchNormShape g, const T* x, const A* mean, const A* scale,
                                bool var, A eps, const A* gamma, const A* beta, T* y) {
    const std::int64_t total = g.n * g.c * g.hw;
    const std::int64_t step = static_cast<std::int64_t>(blockDim.x) * gridDim.x;
    auto coef = [&](std::int64_t c, A& m, A& k, A& b) {
        m = mean[c];
        k = (var ? inv_sqrt(scale[c] + eps) : scale[c]) * gamma[c];
        b = beta[c];
    };
    if constexpr (V) {
        for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
             4 * i < total; i += step) {
            A m, k, b;
            coef(channel_of(g, 4 * i), m, k, b);
            const Quad<T> v = reinterpret_cast<const Quad<T>*>(x)[i];
            Quad<T> o;
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                if (g.channels_last && j > 0) coef(channel_of(g, 4 * i + j), m, k, b);
                o.v[j] = from_acc<T>(epilogue<T>(g, (to_acc<A>(v.v[j]) - m) * k + b, 4 * i + j));
            }
            reinterpret_cast<Quad<T>*>(y)[i] = o;
        }
    } else {
        for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
             i < total; i += step) {
            A m, k, b;
            coef(channel_of(g, i), m, k, b);
            y[i] = from_acc<T>(epilogue<T>(g, (to_acc<A>(x[i]) - m) * k + b, i));
        }
    }
}

// grid (c, splits): Σdy and Σdy·(x − mean) of one channel's share.
template <bool V, typename T, typename A>
__global__ void bn_grad_stats_kernel(BatchNormShape g, const T* x, const T* dy, const A* mean,
                                     A* part) {
    const std::int64_t c = blockIdx.x;
    const int sp = static_cast<int>(blockIdx.y);
    std::int64_t n0, n1;
    split_range(g.n, sp, g.splits, n0, n1);
    const A m = mean[c];
    A s1 = 0, s2 = 0;
    for_channel<V>(x, g, c, n0, n1, [&](T v, std::int64_t off) {
        const A d = grad_at<T, A>(g, dy, off);
        s1 += d;
        s2 += d * (to_acc<A>(v) - m);
    });
    store_partials(s1, s2, g, c, sp, part);
}

// A warp a channel: dbeta = Σdy, dgamma = Σdy·x̂, and dx = a·(dy − b − (x − mean)·k) with
// a = gamma·rstd, b = Σdy/M, k = rstd²·Σdy·(x − mean)/M.
template <typename A>
__global__ void bn_grad_final_kernel(BatchNormShape g, const A* part, const A* gamma, const A* rstd,
                                     A* coef, A* dgamma, A* dbeta) {
    const std::int64_t c = warp_channel();
    A s1, s2;
    sum_partials(part, g, c, s1, s2);
    if (c >= g.c || threadIdx.x % 32 != 0) return;
    const A count = static_cast<A>(g.n * g.hw);
    const A r = rstd[c];
    dbeta[c] = s1;
    dgamma[c] = s2 * r;
    coef[3 * c] = gamma[c] * r;
    coef[3 * c + 1] = s1 / count;
    coef[3 * c + 2] = r * r * s2 / count;
}

template <bool V, typename T, typename A>
__global__ void bn_grad_input_kernel(BatchNormShape g, const T* x, const T* dy, const A* mean,
                                     const A* coef, T* dx) {
    const std::int64_t total = g.n * g.c * g.hw;
    const std::int64_t step = static_cast<std::int64_t>(blockDim.x) * gridDim.x;
    if constexpr (V) {
        for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
             4 * i < total; i += step) {
            std::int64_t c = channel_of(g, 4 * i);
            A m = mean[c], a = coef[3 * c], b = coef[3 * c + 1], k = coef[3 * c + 2];
            const Quad<T> xv = reinterpret_cast<const Quad<T>*>(x)[i];
            const Quad<T> dv = reinterpret_cast<const Quad<T>*>(dy)[i];
            Quad<T> o;
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                if (g.channels_last && j > 0) {
                    c = channel_of(g, 4 * i + j);
                    m = mean[c], a = coef[3 * c], b = coef[3 * c + 1], k = coef[3 * c + 2];
                }
                const A d = g.relu ? grad_at<T, A>(g, dy, 4 * i + j) : to_acc<A>(dv.v[j]);
                if (g.dresidual != nullptr)
                    static_cast<T*>(g.dresidual)[4 * i + j] = from_acc<T>(d);
                o.v[j] = from_acc<T>(a * (d - b - (to_acc<A>(xv.v[j]) - m) * k));
            }
            reinterpret_cast<Quad<T>*>(dx)[i] = o;
        }
    } else {
        for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
             i < total; i += step) {
            const std::int64_t c = channel_of(g, i);
            const A m = mean[c], a = coef[3 * c], b = coef[3 * c + 1], k = coef[3 * c + 2];
            const A d = grad_at<T, A>(g, dy, i);
            if (g.dresidual != nullptr) static_cast<T*>(g.dresidual)[i] = from_acc<T>(d);
            dx[i] = from_acc<T>(a * (d - b - (to_acc<A>(x[i]) - m) * k));
        }
    }
}

/// Sixteen bytes of consecutive elements, loaded and stored as one access.
template <typename T>
struct alignas(16) Vec16 {
    static constexpr int kWidth = static_cast<int>(16 / sizeof(T));
    T v[kWidth];
};

/// Calls f(i, c0) for each 16-byte vector i of channels-last data, spread over the grid (c0: the
/// channel of its first element; c is a multiple of the width, so its channels are c0, c0 + 1...).
template <typename T, typename F>
__device__ __forceinline__ void for_cl_vectors(const BatchNormShape& g, F&& f) {
    constexpr int W = Vec16<T>::kWidth;
    const std::int64_t total = g.n * g.c * g.hw / W;
    for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
         i < total; i += static_cast<std::int64_t>(blockDim.x) * gridDim.x)
        f(i, (i * W) % g.c);
}

// Channels-last, 16 bytes a thread: y = x·k_c + b_c with k = rstd·gamma (eval mode:
// gamma/√(var + eps)) and b = beta − mean·k, each block staging the per-channel pairs in shared
// memory first (the generic kernel's four global loads an element were its bottleneck). Needs
// c a multiple of the vector width, so a vector's channels are consecutive.
template <typename T, typename A>
__global__ void bn_apply_cl_kernel(BatchNormShape g, const T* x, const A* mean, const A* scale,
                                   bool var, A eps, const A* gamma, const A* beta, T* y) {
    extern __shared__ unsigned char bn_smem[];
    A* kc = reinterpret_cast<A*>(bn_smem);
    A* bc = kc + g.c;
    for (std::int64_t c = threadIdx.x; c < g.c; c += blockDim.x) {
        const A k = (var ? inv_sqrt(scale[c] + eps) : scale[c]) * gamma[c];
        kc[c] = k;
        bc[c] = beta[c] - mean[c] * k;
    }
    __syncthreads();
    for_cl_vectors<T>(g, [&](std::int64_t i, std::int64_t c0) {
        const Vec16<T> v = reinterpret_cast<const Vec16<T>*>(x)[i];
        Vec16<T> o;
        if (g.residual != nullptr) {
            const Vec16<T> r = reinterpret_cast<const Vec16<T>*>(g.residual)[i];
#pragma unroll
            for (int j = 0; j < Vec16<T>::kWidth; ++j) {
                const A t =
                    as_stored<T>(to_acc<A>(v.v[j]) * kc[c0 + j] + bc[c0 + j]) + to_acc<A>(r.v[j]);
                o.v[j] = from_acc<T>(g.relu && !(t > A(0)) ? A(0) : t);
            }
        } else {
#pragma unroll
            for (int j = 0; j < Vec16<T>::kWidth; ++j) {
                const A t = to_acc<A>(v.v[j]) * kc[c0 + j] + bc[c0 + j];
                o.v[j] = from_acc<T>(g.relu && !(t > A(0)) ? A(0) : t);
            }
        }
        reinterpret_cast<Vec16<T>*>(y)[i] = o;
    });
}

// Channels-last, 16 bytes a thread: dx = a·(dy − b − (x − mean)·k) as dx = p·dy + q·x + r with
// per-channel p = a, q = −a·k, r = a·(mean·k − b) staged in shared memory.
/// The forward's per-channel k = rstd·γ and b = β − mean·k, term for term as bn_apply_cl_kernel
/// computes them, into shared memory: the ReLU's mask is then x·k + b > 0, the forward's own
/// test, with no read of its output (g.beta set).
template <typename A>
__device__ __forceinline__ void stage_mask(const BatchNormShape& g, const A* mean, const A* rstd,
                                           const A* gamma, A* kc, A* bc) {
    const A* beta = static_cast<const A*>(g.beta);
    for (std::int64_t c = threadIdx.x; c < g.c; c += blockDim.x) {
        const A k = rstd[c] * gamma[c];
        kc[c] = k;
        bc[c] = beta[c] - mean[c] * k;
    }
}

/// dv masked by the ReLU's gradient: recomputed from x (g.beta) or read from the output.
template <typename T, typename A>
__device__ __forceinline__ void mask_vec(const BatchNormShape& g, const Vec16<T>& xv,
                                         const T* out_vec, const A* kc, const A* bc,
                                         std::int64_t c0, Vec16<T>& dv) {
    if (g.beta != nullptr) {
#pragma unroll
        for (int j = 0; j < Vec16<T>::kWidth; ++j) {
            const A t = to_acc<A>(xv.v[j]) * kc[c0 + j] + bc[c0 + j];
            if (!(t > A(0))) dv.v[j] = from_acc<T>(A(0));
        }
        return;
    }
    const Vec16<T> yv = *reinterpret_cast<const Vec16<T>*>(out_vec);
#pragma unroll
    for (int j = 0; j < Vec16<T>::kWidth; ++j)
        if (!(to_acc<A>(yv.v[j]) > A(0))) dv.v[j] = from_acc<T>(A(0));
}

template <typename T, typename A>
__global__ void bn_grad_input_cl_kernel(BatchNormShape g, const T* x, const T* dy, const A* mean,
                                        const A* rstd, const A* gamma, const A* coef, T* dx) {
    extern __shared__ unsigned char bn_smem[];
    A* pc = reinterpret_cast<A*>(bn_smem);
    A* qc = pc + g.c;
    A* rc = qc + g.c;
    A* kc = rc + g.c;  // the mask's k and b (g.beta: 5·c values in all)
    A* bc = kc + g.c;
    for (std::int64_t c = threadIdx.x; c < g.c; c += blockDim.x) {
        const A a = coef[3 * c], b = coef[3 * c + 1], k = coef[3 * c + 2];
        pc[c] = a;
        qc[c] = -a * k;
        rc[c] = a * (mean[c] * k - b);
    }
    if (g.relu && g.beta != nullptr) stage_mask(g, mean, rstd, gamma, kc, bc);
    __syncthreads();
    for_cl_vectors<T>(g, [&](std::int64_t i, std::int64_t c0) {
        const Vec16<T> xv = reinterpret_cast<const Vec16<T>*>(x)[i];
        Vec16<T> dv = reinterpret_cast<const Vec16<T>*>(dy)[i];
        if (g.relu) {
            mask_vec<T, A>(g, xv, static_cast<const T*>(g.out) + i * Vec16<T>::kWidth, kc, bc, c0,
                           dv);
            if (g.dresidual != nullptr) reinterpret_cast<Vec16<T>*>(g.dresidual)[i] = dv;
        }
        Vec16<T> o;
#pragma unroll
        for (int j = 0; j < Vec16<T>::kWidth; ++j)
            o.v[j] = from_acc<T>(pc[c0 + j] * to_acc<A>(dv.v[j]) +
                                 qc[c0 + j] * to_acc<A>(xv.v[j]) + rc[c0 + j]);
        reinterpret_cast<Vec16<T>*>(dx)[i] = o;
    });
}

/// The first channel of the calling thread's group in cl_vec_channel_sums.
template <typename T>
__device__ __forceinline__ int cl_sums_c0(const BatchNormShape& g) {
    constexpr int W = Vec16<T>::kWidth;
    return static_cast<int>(threadIdx.x % (g.c / W)) * W;
}

/// Channels-last sums, 16 bytes a thread: thread t reads channel group t mod G (G = c / width
/// groups of `width` channels, first channel cl_sums_c0) of rows t / G, t / G + R, ... of split
/// sp's range (R = blockDim / G rows at once), so a warp reads whole row segments as single
/// 16-byte loads, two rows' loads in flight (the loop is unrolled; nothing in it is stored);
/// the block adds its R rows of sums in shared memory (2·R·c values of type A) and stores each
/// channel's pair as split sp's. f(row, s1[], s2[]) adds a row's `width` values.
template <typename T, typename A, typename F>
__device__ __forceinline__ void cl_vec_channel_sums(const BatchNormShape& g, A* part, F&& f) {
    constexpr int W = Vec16<T>::kWidth;
    extern __shared__ unsigned char bn_smem[];
    const int groups = static_cast<int>(g.c / W);
    const int rows_at_once = static_cast<int>(blockDim.x) / groups;
    const int grp = static_cast<int>(threadIdx.x) % groups;
    const int r = static_cast<int>(threadIdx.x) / groups;
    const int sp = static_cast<int>(blockIdx.y);
    std::int64_t r0, r1;
    split_range(g.n * g.hw, sp, g.splits, r0, r1);
    A s1[W], s2[W];
#pragma unroll
    for (int j = 0; j < W; ++j) s1[j] = s2[j] = A(0);
    if (r < rows_at_once) {
#pragma unroll 2
        for (std::int64_t row = r0 + r; row < r1; row += rows_at_once) f(row, s1, s2);
    }
    A* m1 = reinterpret_cast<A*>(bn_smem);
    A* m2 = m1 + static_cast<std::int64_t>(rows_at_once) * g.c;
    if (r < rows_at_once)
#pragma unroll
        for (int j = 0; j < W; ++j) {
            m1[r * g.c + grp * W + j] = s1[j];
            m2[r * g.c + grp * W + j] = s2[j];
        }
    __syncthreads();
    for (std::int64_t c = threadIdx.x; c < g.c; c += blockDim.x) {
        A t1 = 0, t2 = 0;
        for (int k = 0; k < rows_at_once; ++k) {
            t1 += m1[k * g.c + c];
            t2 += m2[k * g.c + c];
        }
        part[2 * (c * g.splits + sp)] = t1;
        part[2 * (c * g.splits + sp) + 1] = t2;
    }
}

// Channels-last, 16 bytes a thread: Σ(x − s_c) and Σ(x − s_c)² of each channel's share of rows.
template <typename T, typename A>
__global__ void __launch_bounds__(kBnThreads, 4)
    bn_stats_cl_vec_kernel(BatchNormShape g, const T* x, A* part) {
    constexpr int W = Vec16<T>::kWidth;
    const int c0 = cl_sums_c0<T>(g);
    const Vec16<T> first = *reinterpret_cast<const Vec16<T>*>(x + c0);
    A shift[W];
#pragma unroll
    for (int j = 0; j < W; ++j) shift[j] = to_acc<A>(first.v[j]);
    cl_vec_channel_sums<T, A>(g, part, [&](std::int64_t row, A* s1, A* s2) {
        const Vec16<T> v = *reinterpret_cast<const Vec16<T>*>(x + row * g.c + c0);
#pragma unroll
        for (int j = 0; j < W; ++j) {
            const A d = to_acc<A>(v.v[j]) - shift[j];
            s1[j] += d;
            s2[j] += d * d;
        }
    });
}

// Channels-last, 16 bytes a thread: Σdy and Σdy·(x − mean) of each channel's share of rows, dy
// masked by the ReLU's gradient where the forward had one.
template <typename T, typename A>
__global__ void __launch_bounds__(kBnThreads, 4)
    bn_grad_stats_cl_vec_kernel(BatchNormShape g, const T* x, const T* dy, const A* mean,
                                const A* rstd, const A* gamma, A* part) {
    constexpr int W = Vec16<T>::kWidth;
    // The mask's k and b sit after the sums' shared memory (cl_sums_smem's extra 2·c).
    extern __shared__ unsigned char bn_smem[];
    const std::int64_t rows_at_once = blockDim.x / (g.c / W);
    A* kc = reinterpret_cast<A*>(bn_smem) + 2 * rows_at_once * g.c;
    A* bc = kc + g.c;
    if (g.relu && g.beta != nullptr) {
        stage_mask(g, mean, rstd, gamma, kc, bc);
        __syncthreads();
    }
    const int c0 = cl_sums_c0<T>(g);
    const A* m = mean + c0;
    const T* out = static_cast<const T*>(g.out);
    cl_vec_channel_sums<T, A>(g, part, [&](std::int64_t row, A* s1, A* s2) {
        const std::int64_t off = row * g.c + c0;
        const Vec16<T> xv = *reinterpret_cast<const Vec16<T>*>(x + off);
        Vec16<T> dv = *reinterpret_cast<const Vec16<T>*>(dy + off);
        if (g.relu) mask_vec<T, A>(g, xv, out + off, kc, bc, c0, dv);
#pragma unroll
        for (int j = 0; j < W; ++j) {
            const A d = to_acc<A>(dv.v[j]);
            s1[j] += d;
            s2[j] += d * (to_acc<A>(xv.v[j]) - m[j]);
        }
    });
}

// ---------------------------------------------------------------------------------------------
// Channels-last, 16 bytes a thread, the per-channel pass folded into the sums (the "tiled"
// kernels): a reduction block covers a tile of up to kTileGroups vector groups (128 bytes of a
// row: 64 bf16 channels, 32 f32) over a range of rows, each thread keeping kClUnroll rows' loads
// in flight; its sums go to part as [split][2][c], and the last block of a tile to finish (an
// integer ticket per tile, reset by that block: the order of the sums never depends on which
// block is last) adds up the tile's splits in a fixed order and writes the statistics (or the
// backward's coefficients) itself: no finalising launch. The elementwise kernels keep a
// thread on the same channels all along (the grid's stride is a multiple of the channel groups),
// so a thread computes its channels' coefficients once, in registers, and keeps kClUnroll
// vectors in flight.

#ifndef EMBER_BN_UNROLL
#define EMBER_BN_UNROLL 4
#endif
#ifndef EMBER_BN_GRAD_UNROLL
#define EMBER_BN_GRAD_UNROLL 2
#endif
#ifndef EMBER_BN_EW_UNROLL
#define EMBER_BN_EW_UNROLL 2
#endif
constexpr int kClUnroll = EMBER_BN_UNROLL;           ///< rows a reduction thread has in flight
constexpr int kClGradUnroll = EMBER_BN_GRAD_UNROLL;  ///< rows in flight, backward sums
constexpr int kEwUnroll = EMBER_BN_EW_UNROLL;  ///< vectors an elementwise thread has in flight
constexpr int kTileGroups = 8;                 ///< 16-byte groups of a reduction tile
constexpr int kMaxTiles = 4096;                ///< tickets (tiles of one launch)

/// The tickets of the tiled reductions: a launch's blocks count themselves in; the last one of a
/// tile resets its ticket to 0 for the next launch (launches on one stream run one at a time).
__device__ unsigned int g_bn_tickets[kMaxTiles];

/// Launch tuning of the tiled kernels (constants of the library; benchmarks/bench_bn.cu, which
/// includes this file, sweeps them).
struct ClTuning {
    int blocks_per_sm = 2;     ///< reduction grid: about this many blocks an SM
    int min_rows = 4;          ///< rows a reduction thread reads at least
    int max_splits = 256;      ///< splits at most (the finishing block reads tile × splits sums)
    int ew_blocks_per_sm = 4;  ///< elementwise grid: at most this many blocks an SM
    bool tiled = true;         ///< false: the earlier kernels (bench_bn's before side)
    /// Tiles a launch needs at least for the tiled kernels: a single tile (64 bf16 channels)
    /// ran slower tiled than the earlier kernels (bench_bn, H200, 2026-12-02: ResNet-18's C = 64
    /// layers, forward 35.5 against 43.9 µs, backward 47.8 against 53.8 µs), several faster.
    int min_tiles = 2;
};
ClTuning g_cl_tuning;

/// The tile geometry of a tiled reduction over c channels of width W.
struct ClTile {
    int groups;  ///< 16-byte groups of a tile (the last tile may have fewer channels)
    int rows;    ///< rows a block reads at once (kBnThreads / groups)
    int tiles;
};
__host__ __device__ inline ClTile cl_tile(std::int64_t c, int width) {
    const auto g = static_cast<int>(c / width);
    ClTile t{};
    t.groups = g < kTileGroups ? g : kTileGroups;
    t.rows = kBnThreads / t.groups;
    t.tiles = (g + t.groups - 1) / t.groups;
    return t;
}

/// Loads W values of type A from p (the per-channel vectors, in registers).
template <int W, typename A>
__device__ __forceinline__ void load_channels(const A* p, A (&v)[W]) {
#pragma unroll
    for (int j = 0; j < W; ++j) v[j] = p[j];
}

/// The tiled reduction: f(row, n, s1, s2) adds rows row, row + rows_at_once, ... (n of them, n
/// at most kClUnroll, loads first) of the thread's group; `fin(c, s1, s2)` gets each channel's
/// totals in the tile's last block. part: [splits][2][c].
template <typename T, typename A, int U, typename Rows, typename Fin>
__device__ __forceinline__ void cl_tiled_sums(const BatchNormShape& g, A* part, Rows&& rows,
                                              Fin&& fin) {
    constexpr int W = Vec16<T>::kWidth;
    const ClTile t = cl_tile(g.c, W);
    const int tile = static_cast<int>(blockIdx.x);
    const int sp = static_cast<int>(blockIdx.y);
    const int tid = static_cast<int>(threadIdx.x);
    const int grp = tid % t.groups, ry = tid / t.groups;
    const std::int64_t group = static_cast<std::int64_t>(tile) * t.groups + grp;
    const bool active = ry < t.rows && group * W < g.c;
    std::int64_t r0, r1;
    split_range(g.n * g.hw, sp, g.splits, r0, r1);
    A s1[W], s2[W];
#pragma unroll
    for (int j = 0; j < W; ++j) s1[j] = s2[j] = A(0);
    if (active) {
        const int c0 = static_cast<int>(group * W);
        std::int64_t row = r0 + ry;
        const std::int64_t span = static_cast<std::int64_t>(U) * t.rows;
        for (; row + span - t.rows < r1; row += span) rows(row, U, c0, s1, s2);
        for (; row < r1; row += t.rows) rows(row, 1, c0, s1, s2);
    }
    // The block's sums: [rows][tile channels] in shared memory, then summed per channel by
    // `subs` threads each (a fixed order), then by one.
    extern __shared__ unsigned char bn_smem[];
    const int tch = t.groups * W;  // channels of a full tile
    A* m1 = reinterpret_cast<A*>(bn_smem);
    A* m2 = m1 + t.rows * tch;
    if (ry < t.rows)
#pragma unroll
        for (int j = 0; j < W; ++j) {
            m1[ry * tch + grp * W + j] = s1[j];
            m2[ry * tch + grp * W + j] = s2[j];
        }
    __syncthreads();
    const int subs = kBnThreads / tch;  // ≥ 1: tch ≤ 8·16 / sizeof(T) ≤ 128... see cl_tiled_ok
    const int cl = tid % tch, sub = tid / tch;
    A t1 = 0, t2 = 0;
    if (sub < subs)
        for (int r = sub; r < t.rows; r += subs) {
            t1 += m1[r * tch + cl];
            t2 += m2[r * tch + cl];
        }
    __syncthreads();
    A* q1 = m1;  // reused: [subs][tch]
    A* q2 = m1 + subs * tch;
    if (sub < subs) {
        q1[sub * tch + cl] = t1;
        q2[sub * tch + cl] = t2;
    }
    __syncthreads();
    const std::int64_t c = static_cast<std::int64_t>(tile) * tch + tid;
    if (tid < tch && c < g.c) {
        A u1 = 0, u2 = 0;
        for (int k = 0; k < subs; ++k) {
            u1 += q1[k * tch + tid];
            u2 += q2[k * tch + tid];
        }
        part[(static_cast<std::int64_t>(sp) * 2) * g.c + c] = u1;
        part[(static_cast<std::int64_t>(sp) * 2 + 1) * g.c + c] = u2;
    }
    // The tile's last block adds up its splits.
    __shared__ bool last;
    __threadfence();
    __syncthreads();
    if (tid == 0) last = atomicAdd(&g_bn_tickets[tile], 1u) == static_cast<unsigned>(g.splits - 1);
    __syncthreads();
    if (!last) return;
    __threadfence();
    A f1 = 0, f2 = 0;
    const std::int64_t cc = static_cast<std::int64_t>(tile) * tch + cl;
    if (sub < subs && cc < g.c) {
        int s = sub;
        for (; s + 3 * subs < g.splits; s += 4 * subs) {
            A a[4], b[4];
#pragma unroll
            for (int u = 0; u < 4; ++u) {
                a[u] = __ldcg(part + (static_cast<std::int64_t>(s + u * subs) * 2) * g.c + cc);
                b[u] = __ldcg(part + (static_cast<std::int64_t>(s + u * subs) * 2 + 1) * g.c + cc);
            }
#pragma unroll
            for (int u = 0; u < 4; ++u) {
                f1 += a[u];
                f2 += b[u];
            }
        }
        for (; s < g.splits; s += subs) {
            f1 += __ldcg(part + (static_cast<std::int64_t>(s) * 2) * g.c + cc);
            f2 += __ldcg(part + (static_cast<std::int64_t>(s) * 2 + 1) * g.c + cc);
        }
    }
    if (sub < subs) {
        q1[sub * tch + cl] = f1;
        q2[sub * tch + cl] = f2;
    }
    __syncthreads();
    if (tid < tch && c < g.c) {
        A u1 = 0, u2 = 0;
        for (int k = 0; k < subs; ++k) {
            u1 += q1[k * tch + tid];
            u2 += q2[k * tch + tid];
        }
        fin(c, u1, u2);
    }
    if (tid == 0) g_bn_tickets[tile] = 0;
}

/// Shared memory of a tiled reduction block.
template <typename T, typename A>
std::size_t cl_tiled_smem(const BatchNormShape& g) {
    const ClTile t = cl_tile(g.c, Vec16<T>::kWidth);
    return 2 * static_cast<std::size_t>(t.rows) * t.groups * Vec16<T>::kWidth * sizeof(A);
}

// Training statistics, tiled: Σ(x − s_c), Σ(x − s_c)², then (last block of a tile) the mean,
// 1/√(var + eps) and the running update, as bn_stats_final_kernel computes them.
template <typename T, typename A>
__global__ void __launch_bounds__(kBnThreads)
    bn_stats_cl_tiled_kernel(BatchNormShape g, const T* x, A* part, A eps, A momentum, const A* rm,
                             const A* rv, A* mean, A* rstd, A* rm_out, A* rv_out) {
    constexpr int W = Vec16<T>::kWidth;
    A shift[W];
    bool have_shift = false;
    cl_tiled_sums<T, A, kClUnroll>(
        g, part,
        [&](std::int64_t row, int n, int c0, A* s1, A* s2) {
            if (!have_shift) {
                const Vec16<T> f = *reinterpret_cast<const Vec16<T>*>(x + c0);
#pragma unroll
                for (int j = 0; j < W; ++j) shift[j] = to_acc<A>(f.v[j]);
                have_shift = true;
            }
            Vec16<T> v[kClUnroll];
            const std::int64_t step =
                static_cast<std::int64_t>(kBnThreads / cl_tile(g.c, W).groups);
#pragma unroll
            for (int u = 0; u < kClUnroll; ++u)
                if (u < n)
                    v[u] = *reinterpret_cast<const Vec16<T>*>(x + (row + u * step) * g.c + c0);
#pragma unroll
            for (int u = 0; u < kClUnroll; ++u)
                if (u < n)
#pragma unroll
                    for (int j = 0; j < W; ++j) {
                        const A d = to_acc<A>(v[u].v[j]) - shift[j];
                        s1[j] += d;
                        s2[j] += d * d;
                    }
        },
        [&](std::int64_t c, A s1, A s2) {
            const A count = static_cast<A>(g.n * g.hw);
            const A d = s1 / count;
            A var = s2 / count - d * d;
            if (var < A(0)) var = A(0);
            const A m = to_acc<A>(x[c]) + d;
            mean[c] = m;
            rstd[c] = inv_sqrt(var + eps);
            const A unbias = count / (count - A(1));
            rm_out[c] = rm[c] * (A(1) - momentum) + m * momentum;
            rv_out[c] = rv[c] * (A(1) - momentum) + var * (unbias * momentum);
        });
}

// Backward sums, tiled: Σdy and Σdy·(x − mean), dy masked by the ReLU's gradient where the
// forward had one, then (last block of a tile) dbeta, dgamma and dx's coefficients, as
// bn_grad_final_kernel computes them.
template <typename T, typename A>
__global__ void __launch_bounds__(kBnThreads)
    bn_grad_stats_cl_tiled_kernel(BatchNormShape g, const T* x, const T* dy, const A* mean,
                                  const A* rstd, const A* gamma, A* part, A* coef, A* dgamma,
                                  A* dbeta) {
    constexpr int W = Vec16<T>::kWidth;
    const T* out = static_cast<const T*>(g.out);
    const A* beta = static_cast<const A*>(g.beta);
    A m[W], mk[W], mb[W];
    bool have = false;
    cl_tiled_sums<T, A, kClGradUnroll>(
        g, part,
        [&](std::int64_t row, int n, int c0, A* s1, A* s2) {
            const std::int64_t step =
                static_cast<std::int64_t>(kBnThreads / cl_tile(g.c, W).groups);
            Vec16<T> xv[kClGradUnroll], dv[kClGradUnroll], ov[kClGradUnroll];
#pragma unroll
            for (int u = 0; u < kClGradUnroll; ++u)
                if (u < n) {
                    const std::int64_t off = (row + u * step) * g.c + c0;
                    xv[u] = *reinterpret_cast<const Vec16<T>*>(x + off);
                    dv[u] = *reinterpret_cast<const Vec16<T>*>(dy + off);
                    if (g.relu && beta == nullptr)
                        ov[u] = *reinterpret_cast<const Vec16<T>*>(out + off);
                }
            if (!have) {
                load_channels<W>(mean + c0, m);
                if (g.relu && beta != nullptr)
#pragma unroll
                    for (int j = 0; j < W; ++j) {
                        const A k = rstd[c0 + j] * gamma[c0 + j];
                        mk[j] = k;
                        mb[j] = beta[c0 + j] - mean[c0 + j] * k;
                    }
                have = true;
            }
#pragma unroll
            for (int u = 0; u < kClGradUnroll; ++u)
                if (u < n)
#pragma unroll
                    for (int j = 0; j < W; ++j) {
                        const A xa = to_acc<A>(xv[u].v[j]);
                        A d = to_acc<A>(dv[u].v[j]);
                        if (g.relu) {
                            const bool on = beta != nullptr ? xa * mk[j] + mb[j] > A(0)
                                                            : to_acc<A>(ov[u].v[j]) > A(0);
                            if (!on) d = A(0);
                        }
                        s1[j] += d;
                        s2[j] += d * (xa - m[j]);
                    }
        },
        [&](std::int64_t c, A s1, A s2) {
            const A count = static_cast<A>(g.n * g.hw);
            const A r = rstd[c];
            dbeta[c] = s1;
            dgamma[c] = s2 * r;
            coef[3 * c] = gamma[c] * r;
            coef[3 * c + 1] = s1 / count;
            coef[3 * c + 2] = r * r * s2 / count;
        });
}

/// Calls f(i, n) for the thread's 16-byte vectors i, i + stride, ... (n of them at once, n ≤
/// kEwUnroll) of channels-last data; the grid's stride is a multiple of the channel groups, so
/// all of a thread's vectors start at channel c0 = (thread index mod groups)·W.
template <typename T, typename F>
__device__ __forceinline__ void for_cl_vectors_batched(const BatchNormShape& g, F&& f) {
    constexpr int W = Vec16<T>::kWidth;
    const std::int64_t total = g.n * g.c * g.hw / W;
    const std::int64_t stride = static_cast<std::int64_t>(blockDim.x) * gridDim.x;
    std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
    for (; i + (kEwUnroll - 1) * stride < total; i += kEwUnroll * stride) f(i, stride, kEwUnroll);
    for (; i < total; i += stride) f(i, stride, 1);
}

// Channels-last, registers: y = x·k_c + b_c (+ residual, ReLU) as bn_apply_cl_kernel, each
// thread's k and b computed once for its channels.
template <typename T, typename A>
__global__ void __launch_bounds__(kBnThreads)
    bn_apply_cl_reg_kernel(BatchNormShape g, const T* x, const A* mean, const A* scale, bool var,
                           A eps, const A* gamma, const A* beta, T* y) {
    constexpr int W = Vec16<T>::kWidth;
    const int c0 = static_cast<int>(threadIdx.x % (g.c / W)) * W;
    const T* res = static_cast<const T*>(g.residual);
    A kc[W], bc[W];
    bool have = false;
    for_cl_vectors_batched<T>(g, [&](std::int64_t i, std::int64_t stride, int n) {
        Vec16<T> v[kEwUnroll], r[kEwUnroll];
#pragma unroll
        for (int u = 0; u < kEwUnroll; ++u)
            if (u < n) {
                v[u] = reinterpret_cast<const Vec16<T>*>(x)[i + u * stride];
                if (res != nullptr) r[u] = reinterpret_cast<const Vec16<T>*>(res)[i + u * stride];
            }
        if (!have) {
#pragma unroll
            for (int j = 0; j < W; ++j) {
                const int c = c0 + j;
                const A k = (var ? inv_sqrt(scale[c] + eps) : scale[c]) * gamma[c];
                kc[j] = k;
                bc[j] = beta[c] - mean[c] * k;
            }
            have = true;
        }
#pragma unroll
        for (int u = 0; u < kEwUnroll; ++u)
            if (u < n) {
                Vec16<T> o;
#pragma unroll
                for (int j = 0; j < W; ++j) {
                    A t = to_acc<A>(v[u].v[j]) * kc[j] + bc[j];
                    if (res != nullptr) t = as_stored<T>(t) + to_acc<A>(r[u].v[j]);
                    o.v[j] = from_acc<T>(g.relu && !(t > A(0)) ? A(0) : t);
                }
                reinterpret_cast<Vec16<T>*>(y)[i + u * stride] = o;
            }
    });
}

// Channels-last, registers: dx = p·dy + q·x + r as bn_grad_input_cl_kernel, each thread's p, q,
// r (and the recomputed mask's k, b) computed once for its channels.
template <typename T, typename A>
__global__ void __launch_bounds__(kBnThreads)
    bn_grad_input_cl_reg_kernel(BatchNormShape g, const T* x, const T* dy, const A* mean,
                                const A* rstd, const A* gamma, const A* coef, T* dx) {
    constexpr int W = Vec16<T>::kWidth;
    const int c0 = static_cast<int>(threadIdx.x % (g.c / W)) * W;
    const T* out = static_cast<const T*>(g.out);
    const A* beta = static_cast<const A*>(g.beta);
    T* dres = static_cast<T*>(g.dresidual);
    A pc[W], qc[W], rc[W], mk[W], mb[W];
    bool have = false;
    for_cl_vectors_batched<T>(g, [&](std::int64_t i, std::int64_t stride, int n) {
        Vec16<T> xv[kEwUnroll], dv[kEwUnroll], ov[kEwUnroll];
#pragma unroll
        for (int u = 0; u < kEwUnroll; ++u)
            if (u < n) {
                xv[u] = reinterpret_cast<const Vec16<T>*>(x)[i + u * stride];
                dv[u] = reinterpret_cast<const Vec16<T>*>(dy)[i + u * stride];
                if (g.relu && beta == nullptr)
                    ov[u] = reinterpret_cast<const Vec16<T>*>(out)[i + u * stride];
            }
        if (!have) {
#pragma unroll
            for (int j = 0; j < W; ++j) {
                const int c = c0 + j;
                const A a = coef[3 * c], b = coef[3 * c + 1], k = coef[3 * c + 2];
                pc[j] = a;
                qc[j] = -a * k;
                rc[j] = a * (mean[c] * k - b);
                if (g.relu && beta != nullptr) {
                    const A kk = rstd[c] * gamma[c];
                    mk[j] = kk;
                    mb[j] = beta[c] - mean[c] * kk;
                }
            }
            have = true;
        }
#pragma unroll
        for (int u = 0; u < kEwUnroll; ++u)
            if (u < n) {
                if (g.relu) {
#pragma unroll
                    for (int j = 0; j < W; ++j) {
                        const bool on = beta != nullptr
                                            ? to_acc<A>(xv[u].v[j]) * mk[j] + mb[j] > A(0)
                                            : to_acc<A>(ov[u].v[j]) > A(0);
                        if (!on) dv[u].v[j] = from_acc<T>(A(0));
                    }
                    if (dres != nullptr) reinterpret_cast<Vec16<T>*>(dres)[i + u * stride] = dv[u];
                }
                Vec16<T> o;
#pragma unroll
                for (int j = 0; j < W; ++j)
                    o.v[j] = from_acc<T>(pc[j] * to_acc<A>(dv[u].v[j]) +
                                         qc[j] * to_acc<A>(xv[u].v[j]) + rc[j]);
                reinterpret_cast<Vec16<T>*>(dx)[i + u * stride] = o;
            }
    });
}

unsigned elementwise_blocks(const BatchNormShape& g) {
    const std::int64_t total = g.n * g.c * g.hw;
    return blocks_for(g.vec4 ? (total + 3) / 4 : total);
}

/// Whether the channels-last 16-byte kernels take g (staging `per_channel` values of type A a
/// channel in at most 24 KiB of shared memory) with data at pointers `ptrs`.
template <typename T, typename A>
bool cl_vec16(const BatchNormShape& g, int per_channel, std::initializer_list<const void*> ptrs) {
    if (!g.channels_last || g.c % Vec16<T>::kWidth != 0) return false;
    if (static_cast<std::int64_t>(per_channel) * g.c * static_cast<std::int64_t>(sizeof(A)) >
        24 * 1024)
        return false;
    for (const void* p : ptrs)
        if (reinterpret_cast<std::uintptr_t>(p) % 16 != 0) return false;
    return true;
}

unsigned cl_vec16_blocks(const BatchNormShape& g, int width) {
    return blocks_for(g.n * g.c * g.hw / width);
}

/// Whether the register elementwise kernels take g: channels-last, 16-byte vectors whose channel
/// groups divide a block (so a thread's vectors all start at one channel), aligned data.
template <typename T>
bool cl_reg(const BatchNormShape& g, std::initializer_list<const void*> ptrs) {
    constexpr int W = Vec16<T>::kWidth;
    if (!g_cl_tuning.tiled || !g.channels_last || g.c % W != 0) return false;
    if (kBnThreads % (g.c / W) != 0) return false;
    if (cl_tile(g.c, W).tiles < g_cl_tuning.min_tiles) return false;
    for (const void* p : ptrs)
        if (reinterpret_cast<std::uintptr_t>(p) % 16 != 0) return false;
    return true;
}

/// Blocks of the register elementwise kernels: a vector a thread, at most ew_blocks_per_sm an SM
/// (the threads then loop).
template <typename T>
unsigned cl_reg_blocks(const BatchNormShape& g) {
    const std::int64_t vecs = g.n * g.c * g.hw / Vec16<T>::kWidth;
    std::int64_t b = (vecs + kBnThreads - 1) / kBnThreads;
    const std::int64_t cap =
        static_cast<std::int64_t>(multiprocessors()) * g_cl_tuning.ew_blocks_per_sm;
    if (b > cap) b = cap;
    return static_cast<unsigned>(b < 1 ? 1 : b);
}

/// Whether the tiled reductions take g: channels-last, 16-byte vectors, aligned data.
template <typename T>
bool cl_tiled(const BatchNormShape& g, std::initializer_list<const void*> ptrs) {
    constexpr int W = Vec16<T>::kWidth;
    if (!g_cl_tuning.tiled || !g.channels_last || g.c % W != 0) return false;
    const int tiles = cl_tile(g.c, W).tiles;
    if (tiles > kMaxTiles || tiles < g_cl_tuning.min_tiles) return false;
    for (const void* p : ptrs)
        if (reinterpret_cast<std::uintptr_t>(p) % 16 != 0) return false;
    return true;
}

dim3 cl_tiled_grid(const BatchNormShape& g, int width) {
    return dim3(static_cast<unsigned>(cl_tile(g.c, width).tiles), static_cast<unsigned>(g.splits));
}

/// bn_apply_kernel over the whole tensor (its vectorised form where the shape allows).
template <typename T, typename A>
void launch_apply(const BatchNormShape& g, const T* x, const A* mean, const A* scale, bool var,
                  A eps, const A* gamma, const A* beta, T* y, cudaStream_t s) {
    if (cl_reg<T>(g, {x, y, g.residual})) {
        bn_apply_cl_reg_kernel<T, A><<<cl_reg_blocks<T>(g), kBnThreads, 0, s>>>(
            g, x, mean, scale, var, eps, gamma, beta, y);
    } else if (cl_vec16<T, A>(g, 2, {x, y, g.residual})) {
        const std::size_t smem = 2 * static_cast<std::size_t>(g.c) * sizeof(A);
        bn_apply_cl_kernel<T, A><<<cl_vec16_blocks(g, Vec16<T>::kWidth), kThreads, smem, s>>>(
            g, x, mean, scale, var, eps, gamma, beta, y);
    } else if (g.vec4)
        bn_apply_kernel<true, T, A><<<elementwise_blocks(g), kThreads, 0, s>>>(
            g, x, mean, scale, var, eps, gamma, beta, y);
    else
        bn_apply_kernel<false, T, A><<<elementwise_blocks(g), kThreads, 0, s>>>(
            g, x, mean, scale, var, eps, gamma, beta, y);
}

/// The channel groups of the 16-byte channels-last sums over c channels of `elem_bytes` each (c
/// / width, width = 16 / elem_bytes), or 0 where they do not take them: channels not a multiple
/// of the width, or more groups than a block has threads.
std::int64_t cl_sum_groups(std::int64_t c, std::size_t elem_bytes) {
    if (c <= 0 || elem_bytes == 0 || elem_bytes > 16) return 0;
    const auto width = static_cast<std::int64_t>(16 / elem_bytes);
    return c % width == 0 && c / width <= kBnThreads ? c / width : 0;
}

/// Whether the 16-byte channels-last sums take g: cl_sum_groups takes its channels and the data
/// is 16-byte aligned.
template <typename T, typename A>
bool cl_sums_vec16(const BatchNormShape& g, std::initializer_list<const void*> ptrs) {
    if (!g.channels_last || cl_sum_groups(g.c, sizeof(T)) == 0) return false;
    for (const void* p : ptrs)
        if (reinterpret_cast<std::uintptr_t>(p) % 16 != 0) return false;
    return true;
}

/// Shared memory of the 16-byte channels-last sums: two sums for each of the block's rows at
/// once and each channel.
template <typename T, typename A>
std::size_t cl_sums_smem(const BatchNormShape& g) {
    const std::int64_t groups = g.c / Vec16<T>::kWidth;
    const std::int64_t mask = g.relu && g.beta != nullptr ? 2 * g.c : 0;  // stage_mask's k, b
    return static_cast<std::size_t>(2 * (kBnThreads / groups) * g.c + mask) * sizeof(A);
}

dim3 cl_grid(const BatchNormShape& g) {
    return dim3(static_cast<unsigned>((g.c + kClChannels - 1) / kClChannels),
                static_cast<unsigned>(g.splits));
}

/// Blocks of the finalising kernels: a warp a channel.
unsigned channel_blocks(const BatchNormShape& g) {
    constexpr int kPerBlock = kBnThreads / 32;
    return static_cast<unsigned>((g.c + kPerBlock - 1) / kPerBlock);
}

}  // namespace

int batch_norm_splits(std::int64_t n, std::int64_t c, std::int64_t hw, bool channels_last,
                      std::size_t elem_bytes) {
    if (g_cl_tuning.tiled && channels_last && elem_bytes != 0 && elem_bytes <= 16 &&
        c % static_cast<std::int64_t>(16 / elem_bytes) == 0 &&
        cl_tile(c, static_cast<int>(16 / elem_bytes)).tiles >= g_cl_tuning.min_tiles) {
        // The tiled sums: about blocks_per_sm blocks an SM in all, each thread reading at least
        // min_rows rows, at most max_splits splits (the tile's last block adds them up).
        const ClTile t = cl_tile(c, static_cast<int>(16 / elem_bytes));
        const std::int64_t target =
            static_cast<std::int64_t>(multiprocessors()) * g_cl_tuning.blocks_per_sm;
        std::int64_t s = (target + t.tiles - 1) / t.tiles;
        const std::int64_t by_rows =
            n * hw / (static_cast<std::int64_t>(t.rows) * g_cl_tuning.min_rows);
        if (s > by_rows) s = by_rows;
        if (s > g_cl_tuning.max_splits) s = g_cl_tuning.max_splits;
        return static_cast<int>(s < 1 ? 1 : s);
    }
    const std::int64_t groups = channels_last ? cl_sum_groups(c, elem_bytes) : 0;
    if (groups != 0) {
        // The 16-byte sums (a block covers every channel, R rows at once): at least 8 rows a
        // thread, at most 512 splits. The earlier rule (64 rows a split) left layer 4 of a
        // ResNet-18 at batch 256 with 64 blocks on a 132-SM GPU; at least 4 rows a thread was
        // slower than 8 (H200, 2026-11-30: 3.68 against 3.66 ms a replayed step, 3.73 before).
        constexpr std::int64_t kMinRows = 8;
        const std::int64_t rows_at_once = kBnThreads / groups;
        std::int64_t s = n * hw / (kMinRows * rows_at_once);
        if (s > 512) s = 512;
        return static_cast<int>(s < 1 ? 1 : s);
    }
    if (channels_last) {
        // About 2048 blocks of 32 channels, each at least 64 rows; the finalising kernels add
        // up a channel's splits one by one, so no more than 512.
        const std::int64_t tiles = (c + kClChannels - 1) / kClChannels;
        std::int64_t s = (2048 + tiles - 1) / tiles;
        const std::int64_t by_rows = n * hw / 64;
        if (s > by_rows) s = by_rows;
        if (s > 512) s = 512;
        return static_cast<int>(s < 1 ? 1 : s);
    }
    // About 1024 blocks in all (several waves on any current GPU), each at least 4096 values.
    std::int64_t s = (1024 + c - 1) / c;
    const std::int64_t by_size = n * hw / 4096;
    if (s > by_size) s = by_size;
    if (s > n) s = n;
    if (s > 65535) s = 65535;
    return static_cast<int>(s < 1 ? 1 : s);
}

void launch_batch_norm_forward(DType t, const BatchNormShape& g, const void* x, const void* gamma,
                               const void* beta, const void* rm, const void* rv, double eps,
                               double momentum, void* part, void* mean, void* rstd, void* rm_out,
                               void* rv_out, void* y, cudaStream_t s) {
    if (g.c == 0) return;
    visit_float_storage(t, [&]<typename T, typename A>() {
        const dim3 grid(static_cast<unsigned>(g.c), static_cast<unsigned>(g.splits));
        const auto* xp = static_cast<const T*>(x);
        auto* pp = static_cast<A*>(part);
        if (cl_tiled<T>(g, {xp})) {
            bn_stats_cl_tiled_kernel<T, A>
                <<<cl_tiled_grid(g, Vec16<T>::kWidth), kBnThreads, cl_tiled_smem<T, A>(g), s>>>(
                    g, xp, pp, static_cast<A>(eps), static_cast<A>(momentum),
                    static_cast<const A*>(rm), static_cast<const A*>(rv), static_cast<A*>(mean),
                    static_cast<A*>(rstd), static_cast<A*>(rm_out), static_cast<A*>(rv_out));
            check_launch("batch_norm (statistics)");
            launch_apply(g, xp, static_cast<const A*>(mean), static_cast<const A*>(rstd), false,
                         A(0), static_cast<const A*>(gamma), static_cast<const A*>(beta),
                         static_cast<T*>(y), s);
            check_launch("batch_norm (normalize)");
            return;
        }
        if (cl_sums_vec16<T, A>(g, {xp}))
            bn_stats_cl_vec_kernel<T, A>
                <<<dim3(1, static_cast<unsigned>(g.splits)), kBnThreads, cl_sums_smem<T, A>(g), s>>>(
                    g, xp, pp);
        else if (g.channels_last)
            bn_stats_cl_kernel<T, A><<<cl_grid(g), dim3(kClChannels, kClRows), 0, s>>>(g, xp, pp);
        else if (g.vec4)
            bn_stats_kernel<true, T, A><<<grid, kBnThreads, 0, s>>>(g, xp, pp);
        else
            bn_stats_kernel<false, T, A><<<grid, kBnThreads, 0, s>>>(g, xp, pp);
        check_launch("batch_norm (statistics)");
        bn_stats_final_kernel<T, A><<<channel_blocks(g), kBnThreads, 0, s>>>(
            g, xp, pp, static_cast<A>(eps), static_cast<A>(momentum), static_cast<const A*>(rm),
            static_cast<const A*>(rv), static_cast<A*>(mean), static_cast<A*>(rstd),
            static_cast<A*>(rm_out), static_cast<A*>(rv_out));
        check_launch("batch_norm (finalize)");
        launch_apply(g, xp, static_cast<const A*>(mean), static_cast<const A*>(rstd), false, A(0),
                     static_cast<const A*>(gamma), static_cast<const A*>(beta), static_cast<T*>(y),
                     s);
        check_launch("batch_norm (normalize)");
    });
}

void launch_batch_norm_eval(DType t, const BatchNormShape& g, const void* x, const void* gamma,
                            const void* beta, const void* mean, const void* var, double eps,
                            void* y, cudaStream_t s) {
    if (g.n * g.c * g.hw == 0) return;
    visit_float_storage(t, [&]<typename T, typename A>() {
        launch_apply(g, static_cast<const T*>(x), static_cast<const A*>(mean),
                     static_cast<const A*>(var), true, static_cast<A>(eps),
                     static_cast<const A*>(gamma), static_cast<const A*>(beta), static_cast<T*>(y),
                     s);
        check_launch("batch_norm (eval)");
    });
}

void launch_batch_norm_backward(DType t, const BatchNormShape& g, const void* x, const void* dy,
                                const void* gamma, const void* mean, const void* rstd, void* part,
                                void* coef, void* dgamma, void* dbeta, void* dx, cudaStream_t s) {
    if (g.c == 0) return;
    visit_float_storage(t, [&]<typename T, typename A>() {
        const dim3 grid(static_cast<unsigned>(g.c), static_cast<unsigned>(g.splits));
        const auto* xp = static_cast<const T*>(x);
        const auto* dp = static_cast<const T*>(dy);
        const auto* mp = static_cast<const A*>(mean);
        auto* pp = static_cast<A*>(part);
        auto* cp = static_cast<A*>(coef);
        const auto* gp = static_cast<const A*>(gamma);
        const auto* rp = static_cast<const A*>(rstd);
        const bool tiled = cl_tiled<T>(g, {xp, dp, g.out});
        if (tiled)
            bn_grad_stats_cl_tiled_kernel<T, A>
                <<<cl_tiled_grid(g, Vec16<T>::kWidth), kBnThreads, cl_tiled_smem<T, A>(g), s>>>(
                    g, xp, dp, mp, rp, gp, pp, cp, static_cast<A*>(dgamma), static_cast<A*>(dbeta));
        else if (cl_sums_vec16<T, A>(g, {xp, dp, g.out}))
            bn_grad_stats_cl_vec_kernel<T, A>
                <<<dim3(1, static_cast<unsigned>(g.splits)), kBnThreads, cl_sums_smem<T, A>(g),
                   s>>>(g, xp, dp, mp, rp, gp, pp);
        else if (g.channels_last)
            bn_grad_stats_cl_kernel<T, A>
                <<<cl_grid(g), dim3(kClChannels, kClRows), 0, s>>>(g, xp, dp, mp, pp);
        else if (g.vec4)
            bn_grad_stats_kernel<true, T, A><<<grid, kBnThreads, 0, s>>>(g, xp, dp, mp, pp);
        else
            bn_grad_stats_kernel<false, T, A><<<grid, kBnThreads, 0, s>>>(g, xp, dp, mp, pp);
        check_launch("batch_norm_backward (sums)");
        if (!tiled) {
            bn_grad_final_kernel<A><<<channel_blocks(g), kBnThreads, 0, s>>>(
                g, pp, static_cast<const A*>(gamma), static_cast<const A*>(rstd), cp,
                static_cast<A*>(dgamma), static_cast<A*>(dbeta));
            check_launch("batch_norm_backward (finalize)");
        }
        if (cl_reg<T>(g, {xp, dp, dx, g.out, g.dresidual}))
            bn_grad_input_cl_reg_kernel<T, A><<<cl_reg_blocks<T>(g), kBnThreads, 0, s>>>(
                g, xp, dp, mp, rp, gp, cp, static_cast<T*>(dx));
        else if (cl_vec16<T, A>(g, g.relu && g.beta != nullptr ? 5 : 3,
                                {xp, dp, dx, g.out, g.dresidual})) {
            const std::size_t per = g.relu && g.beta != nullptr ? 5 : 3;
            const std::size_t smem = per * static_cast<std::size_t>(g.c) * sizeof(A);
            bn_grad_input_cl_kernel<T, A>
                <<<cl_vec16_blocks(g, Vec16<T>::kWidth), kThreads, smem, s>>>(
                    g, xp, dp, mp, rp, gp, cp, static_cast<T*>(dx));
        } else if (g.vec4)
            bn_grad_input_kernel<true, T, A>
                <<<elementwise_blocks(g), kThreads, 0, s>>>(g, xp, dp, mp, cp, static_cast<T*>(dx));
        else
            bn_grad_input_kernel<false, T, A>
                <<<elementwise_blocks(g), kThreads, 0, s>>>(g, xp, dp, mp, cp, static_cast<T*>(dx));
        check_launch("batch_norm_backward (dx)");
    });
}

}  // namespace ember::detail::cuda
