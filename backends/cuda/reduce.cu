// Reductions: along one dim (a warp per output when the reduced dim is contiguous; else a thread
// per output when there are many, or 32 neighbouring outputs a block with the reduced dim split
// over threads and slices when there are few, so reads stay coalesced and the GPU full), over a
// whole tensor (grid partials, then one block), arg-reductions, and row softmax with the max and
// the sum taken in one pass (online softmax) so that each row is read twice and written once.
#include <algorithm>
#include <cfloat>
#include <cstdint>

#include "device.cuh"

namespace ember::detail::cuda {
namespace {

/// The accumulator of op on element type T: integer sums and products wrap (as the CPU's).
template <typename T>
struct Acc {
    using type = std::conditional_t<std::is_integral_v<T>, std::uint64_t, T>;
};

template <typename T>
__device__ __forceinline__ typename Acc<T>::type init(ReduceOp op) {
    using A = typename Acc<T>::type;
    switch (op) {
        case ReduceOp::Prod:
        case ReduceOp::All:
            return A(1);
        case ReduceOp::Max:
            if constexpr (std::is_integral_v<T>)
                return static_cast<A>(INT64_MIN);
            else
                return -INFINITY;
        case ReduceOp::Min:
            if constexpr (std::is_integral_v<T>)
                return static_cast<A>(INT64_MAX);
            else
                return INFINITY;
        default:
            return A(0);
    }
}

template <typename T>
__device__ __forceinline__ typename Acc<T>::type fold(ReduceOp op, typename Acc<T>::type a,
                                                      typename Acc<T>::type b) {
    using A = typename Acc<T>::type;
    switch (op) {
        case ReduceOp::Sum:
        case ReduceOp::Mean:
            return a + b;
        case ReduceOp::Prod:
            return a * b;
        case ReduceOp::Max:
            if constexpr (std::is_integral_v<T>)
                return static_cast<A>(
                    nan_max(static_cast<std::int64_t>(a), static_cast<std::int64_t>(b)));
            else
                return nan_max(a, b);
        case ReduceOp::Min:
            if constexpr (std::is_integral_v<T>)
                return static_cast<A>(
                    nan_min(static_cast<std::int64_t>(a), static_cast<std::int64_t>(b)));
            else
                return nan_min(a, b);
        case ReduceOp::Any:
            return A((a != A(0)) || (b != A(0)));
        default:
            return A((a != A(0)) && (b != A(0)));  // All
    }
}

template <typename T>
__device__ __forceinline__ typename Acc<T>::type lift(ReduceOp op, T x) {
    using A = typename Acc<T>::type;
    if (op == ReduceOp::Any || op == ReduceOp::All) return A(x != T(0));
    return static_cast<A>(x);
}

/// Writes the final value: Any/All as a byte, Mean divided by the count, else as T.
template <typename T>
__device__ __forceinline__ void emit(ReduceOp op, void* out, std::int64_t o,
                                     typename Acc<T>::type a, std::int64_t k) {
    if (op == ReduceOp::Any || op == ReduceOp::All) {
        static_cast<std::uint8_t*>(out)[o] = a != 0;
    } else if (op == ReduceOp::Mean) {
        static_cast<T*>(out)[o] = static_cast<T>(a / static_cast<typename Acc<T>::type>(k));
    } else {
        static_cast<T*>(out)[o] = static_cast<T>(a);
    }
}

template <typename A>
__device__ __forceinline__ A shfl_down(A v, int d) {
    return __shfl_down_sync(0xffffffffu, v, d);
}

/// A warp per output: lanes stride through the contiguous reduced dim.
template <typename T>
__global__ void reduce_warp_kernel(ReduceOp op, Iter<2> it, std::int64_t k, const T* in,
                                   void* out) {
    using A = typename Acc<T>::type;
    const std::int64_t warp =
        (blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * blockDim.x / 32;
    for (std::int64_t o = warp; o < it.n; o += warps) {
        std::int64_t off[2];
        offsets(it, o, off);
        A a = init<T>(op);
        for (std::int64_t j = lane; j < k; j += 32) a = fold<T>(op, a, lift(op, in[off[1] + j]));
        for (int d = 16; d > 0; d /= 2) a = fold<T>(op, a, shfl_down(a, d));
        if (lane == 0) emit<T>(op, out, off[0], a, k);
    }
}

/// An input element as the compute type T: f16/bf16 storage widens to f32 (reductions of
/// halves read them directly instead of casting the whole tensor first).
template <typename T, typename In>
__device__ __forceinline__ T load_as(In x) {
    if constexpr (std::is_same_v<In, __half>)
        return __half2float(x);
    else if constexpr (std::is_same_v<In, __nv_bfloat16>)
        return __bfloat162float(x);
    else
        return static_cast<T>(x);
}

/// A thread per output, folding k inputs `stride` apart (enough outputs to fill the GPU).
template <typename T, typename In>
__global__ void reduce_thread_kernel(ReduceOp op, Iter<2> it, std::int64_t k, std::int64_t stride,
                                     const In* in, void* out) {
    using A = typename Acc<T>::type;
    EMBER_GRID_LOOP(o, it.n) {
        std::int64_t off[2];
        offsets(it, o, off);
        A a = init<T>(op);
        for (std::int64_t j = 0; j < k; ++j)
            a = fold<T>(op, a, lift(op, load_as<T>(in[off[1] + j * stride])));
        emit<T>(op, out, off[0], a, k);
    }
}

/// Outputs up to which a strided reduction splits its reduced dim over threads (below: too few
/// outputs for a thread each to fill the GPU); past it a thread per output, whose k independent
/// loads hide their latency better than a block's single row of them (k is then often small:
/// the batch of a [B, L, C] bias gradient).
constexpr std::int64_t kColsMaxOutputs = 131072;

/// Rows of threads a reduce_cols_kernel block splits the reduced dim over (reduce_dim_strided
/// asks for k ≥ kColRows).
constexpr int kColRows = 8;

/// Few outputs with a long strided reduced dim (a bias gradient: [rows, cols] summed over the
/// rows), where a thread per output would leave most of the GPU idle and run k dependent loads.
/// A block holds 32 neighbouring outputs (one warp reads 32 neighbouring inputs: coalesced) ×
/// kColRows threads splitting the reduced dim; gridDim.y slices it further. With one slice the
/// block emits the result; with more, slice y writes partial[y·n + o] and reduce_parts_kernel
/// folds the slices in order (deterministic: no atomics).
template <typename T, typename In>
__global__ void reduce_cols_kernel(ReduceOp op, Iter<2> it, std::int64_t k, std::int64_t stride,
                                   const In* in, void* out, typename Acc<T>::type* partial) {
    using A = typename Acc<T>::type;
    __shared__ A tile[kColRows][33];
    const std::int64_t o = blockIdx.x * 32LL + threadIdx.x;
    const std::int64_t per = (k + gridDim.y - 1) / gridDim.y;
    const std::int64_t j0 = blockIdx.y * per, j1 = j0 + per < k ? j0 + per : k;
    A a = init<T>(op);
    std::int64_t off[2] = {0, 0};
    if (o < it.n) {
        offsets(it, o, off);
        const In* x = in + off[1];
        for (std::int64_t j = j0 + threadIdx.y; j < j1; j += kColRows)
            a = fold<T>(op, a, lift(op, load_as<T>(x[j * stride])));
    }
    tile[threadIdx.y][threadIdx.x] = a;
    __syncthreads();
    if (threadIdx.y != 0 || o >= it.n) return;
    for (int r = 1; r < kColRows; ++r) a = fold<T>(op, a, tile[r][threadIdx.x]);
    if (gridDim.y == 1)
        emit<T>(op, out, off[0], a, k);
    else
        partial[blockIdx.y * it.n + o] = a;
}

/// Rows of the reduced dim each thread of reduce_cols_vec_kernel reads at least, per slice.
constexpr int kVecRowsPerThread = 16;

/// reduce_cols_kernel for a sum or mean over the rows of a dense row-major [k, n] matrix (a
/// bias gradient: [batch · seq, features]) into n f32 outputs: each thread reads 16 bytes of a
/// row (8 bf16/f16 or 4 f32 columns) instead of one element, so a warp reads 512 bytes of a row
/// at once. The columns of a thread are summed in the same order as reduce_cols_kernel's (its
/// thread row, then the block's rows in order, then the slices in order), on fewer, wider slices.
template <typename In>
__global__ void __launch_bounds__(32 * kColRows)
    reduce_cols_vec_kernel(ReduceOp op, std::int64_t n, std::int64_t k, const In* in, void* out,
                           float* partial) {
    constexpr int V = 16 / sizeof(In);
    __shared__ float tile[kColRows][V][33];
    const std::int64_t c0 = (blockIdx.x * 32LL + threadIdx.x) * V;
    const std::int64_t per = (k + gridDim.y - 1) / gridDim.y;
    const std::int64_t j0 = blockIdx.y * per, j1 = j0 + per < k ? j0 + per : k;
    float a[V];
    for (int v = 0; v < V; ++v) a[v] = 0.f;
    if (c0 < n) {
        for (std::int64_t j = j0 + threadIdx.y; j < j1; j += kColRows) {
            const uint4 raw = __ldg(reinterpret_cast<const uint4*>(in + j * n + c0));
            const In* e = reinterpret_cast<const In*>(&raw);
            for (int v = 0; v < V; ++v) a[v] += load_as<float>(e[v]);
        }
    }
    for (int v = 0; v < V; ++v) tile[threadIdx.y][v][threadIdx.x] = a[v];
    __syncthreads();
    if (threadIdx.y != 0 || c0 >= n) return;
    for (int r = 1; r < kColRows; ++r)
        for (int v = 0; v < V; ++v) a[v] += tile[r][v][threadIdx.x];
    for (int v = 0; v < V; ++v) {
        if (gridDim.y == 1)
            emit<float>(op, out, c0 + v, a[v], k);
        else
            partial[blockIdx.y * n + c0 + v] = a[v];
    }
}

/// Slices of the rows reduce_cols_vec_kernel uses for n outputs of `v` columns a thread.
int column_parts_vec(std::int64_t n, std::int64_t k, int v) {
    // At least one block: reduce_dim_scratch asks for any n, fewer columns than v among them.
    const std::int64_t blocks = std::max<std::int64_t>(1, (n / v + 31) / 32);
    std::int64_t parts = (1024 + blocks - 1) / blocks;
    const std::int64_t most = k / (kColRows * kVecRowsPerThread);
    if (parts > most) parts = most;
    if (parts > 256) parts = 256;
    return parts < 1 ? 1 : static_cast<int>(parts);
}

template <typename T>
__global__ void reduce_parts_kernel(ReduceOp op, Iter<2> it, std::int64_t k, int parts,
                                    const typename Acc<T>::type* partial, void* out) {
    using A = typename Acc<T>::type;
    EMBER_GRID_LOOP(o, it.n) {
        std::int64_t off[2];
        offsets(it, o, off);
        A a = partial[o];
        for (int p = 1; p < parts; ++p) a = fold<T>(op, a, partial[p * it.n + o]);
        emit<T>(op, out, off[0], a, k);
    }
}

/// Slices of the reduced dim reduce_cols_kernel uses for n outputs.
int column_parts(std::int64_t n, std::int64_t k) {
    return row_slices(n, k, kColRows);
}

/// Block-wide fold of one value per thread (blockDim.x = kThreads); lane 0 of warp 0 gets it.
template <typename T>
__device__ typename Acc<T>::type block_fold(ReduceOp op, typename Acc<T>::type a) {
    using A = typename Acc<T>::type;
    __shared__ A part[kThreads / 32];
    for (int d = 16; d > 0; d /= 2) a = fold<T>(op, a, shfl_down(a, d));
    if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = a;
    __syncthreads();
    a = threadIdx.x < kThreads / 32 ? part[threadIdx.x] : init<T>(op);
    if (threadIdx.x < 32)
        for (int d = 16; d > 0; d /= 2) a = fold<T>(op, a, shfl_down(a, d));
    return a;
}

template <typename T>
__global__ void reduce_partial_kernel(ReduceOp op, std::int64_t n, const T* in,
                                      typename Acc<T>::type* partial) {
    using A = typename Acc<T>::type;
    A a = init<T>(op);
    EMBER_GRID_LOOP(i, n) a = fold<T>(op, a, lift(op, in[i]));
    a = block_fold<T>(op, a);
    if (threadIdx.x == 0) partial[blockIdx.x] = a;
}

template <typename T>
__global__ void reduce_final_kernel(ReduceOp op, int parts, const typename Acc<T>::type* partial,
                                    std::int64_t n, void* out) {
    using A = typename Acc<T>::type;
    A a = init<T>(op);
    for (int i = threadIdx.x; i < parts; i += blockDim.x) a = fold<T>(op, a, partial[i]);
    a = block_fold<T>(op, a);
    if (threadIdx.x == 0) emit<T>(op, out, 0, a, n);
}

/// First position of the extreme; NaN is the extreme once present (PyTorch's argmax).
template <typename T>
__global__ void arg_kernel(bool is_max, Iter<2> it, std::int64_t k, std::int64_t stride,
                           const T* in, std::int64_t* out) {
    EMBER_GRID_LOOP(o, it.n) {
        std::int64_t off[2];
        offsets(it, o, off);
        T best = in[off[1]];
        std::int64_t at = 0;
        for (std::int64_t j = 1; j < k && !is_nan(best); ++j) {
            const T x = in[off[1] + j * stride];
            if (is_nan(x) || (is_max ? x > best : x < best)) {
                best = x;
                at = j;
            }
        }
        out[off[0]] = at;
    }
}

/// Online softmax: one block per row; pass 1 keeps a running (max, sum of exp), pass 2 writes.
template <typename T>
__global__ void softmax_kernel(bool log_out, std::int64_t cols, const T* in, T* out) {
    const T* x = in + blockIdx.x * cols;
    T* y = out + blockIdx.x * cols;
    T m = -INFINITY, s = 0;
    for (std::int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
        const T v = x[j];
        if (v > m) {
            s = s * exp(m - v) + T(1);
            m = v;
        } else if (v == v) {
            s += exp(v - m);
        } else {
            m = v;  // NaN: the whole row becomes NaN
        }
    }
    __shared__ T sm[32], ss[32];
    // Combine (m, s) pairs: first within warps, then across them.
    for (int d = 16; d > 0; d /= 2) {
        const T m2 = __shfl_down_sync(0xffffffffu, m, d), s2 = __shfl_down_sync(0xffffffffu, s, d);
        const T mm = (m != m || m2 != m2) ? (m != m ? m : m2) : (m > m2 ? m : m2);
        s = (mm == -INFINITY) ? T(0) : s * exp(m - mm) + s2 * exp(m2 - mm);
        m = mm;
    }
    const int w = threadIdx.x / 32, nw = blockDim.x / 32;
    if (threadIdx.x % 32 == 0) {
        sm[w] = m;
        ss[w] = s;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        T M = sm[0], S = ss[0];
        for (int i = 1; i < nw; ++i) {
            const T mm =
                (M != M || sm[i] != sm[i]) ? (M != M ? M : sm[i]) : (M > sm[i] ? M : sm[i]);
            S = (mm == -INFINITY) ? T(0) : S * exp(M - mm) + ss[i] * exp(sm[i] - mm);
            M = mm;
        }
        sm[0] = M;
        ss[0] = S;
    }
    __syncthreads();
    m = sm[0];
    s = ss[0];
    const T ls = log(s);
    for (std::int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
        const T v = x[j] - m;
        y[j] = log_out ? v - ls : exp(v) / s;
    }
}

/// Small rows: a warp per row, the row held in registers (cols ≤ 32·kPer).
template <typename T, int kPer>
__global__ void softmax_warp_kernel(bool log_out, std::int64_t rows, std::int64_t cols, const T* in,
                                    T* out) {
    const std::int64_t row =
        (blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    if (row >= rows) return;
    const T* x = in + row * cols;
    T v[kPer];
    T m = -INFINITY;
    bool nan = false;
    for (int i = 0; i < kPer; ++i) {
        const std::int64_t j = lane + 32 * i;
        v[i] = j < cols ? x[j] : T(-INFINITY);
        nan |= v[i] != v[i];
        m = v[i] > m ? v[i] : m;
    }
    for (int d = 16; d > 0; d /= 2) {
        const T m2 = __shfl_xor_sync(0xffffffffu, m, d);
        m = m2 > m ? m2 : m;
        nan |= __shfl_xor_sync(0xffffffffu, static_cast<int>(nan), d) != 0;
    }
    T s = 0;
    for (int i = 0; i < kPer; ++i) s += (lane + 32 * i < cols) ? exp(v[i] - m) : T(0);
    for (int d = 16; d > 0; d /= 2) s += __shfl_xor_sync(0xffffffffu, s, d);
    const T ls = log(s);
    T* y = out + row * cols;
    for (int i = 0; i < kPer; ++i) {
        const std::int64_t j = lane + 32 * i;
        if (j >= cols) continue;
        const T r = log_out ? (v[i] - m) - ls : exp(v[i] - m) / s;
        y[j] = nan ? T(NAN) : r;
    }
}

/// Wide f32 rows (cols % 4 == 0, cols ≤ 4·256·N): the row is read once into registers as
/// float4s, reduced for its max and its sum of exponentials, and written once.
template <int N>
__global__ void softmax_vec_kernel(bool log_out, int cols4, const float4* in, float4* out) {
    const float4* x = in + static_cast<std::int64_t>(blockIdx.x) * cols4;
    float4* y = out + static_cast<std::int64_t>(blockIdx.x) * cols4;
    __shared__ float red[32];
    float4 v[N];
    float m = -INFINITY;
#pragma unroll
    for (int i = 0; i < N; ++i) {
        const int j = threadIdx.x + i * blockDim.x;
        v[i] = j < cols4 ? x[j] : make_float4(-INFINITY, -INFINITY, -INFINITY, -INFINITY);
        // fmaxf skips NaN: a NaN never wins the max, but it reaches the sum and makes the row NaN.
        m = fmaxf(m, fmaxf(fmaxf(v[i].x, v[i].y), fmaxf(v[i].z, v[i].w)));
    }
    for (int d = 16; d > 0; d /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, d));
    if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = m;
    __syncthreads();
    m = red[0];
    for (int w = 1; w < static_cast<int>(blockDim.x / 32); ++w) m = fmaxf(m, red[w]);
    __syncthreads();
    float sum = 0.f;
#pragma unroll
    for (int i = 0; i < N; ++i) {
        if (threadIdx.x + i * blockDim.x < cols4)
            sum += expf(v[i].x - m) + expf(v[i].y - m) + expf(v[i].z - m) + expf(v[i].w - m);
    }
    for (int d = 16; d > 0; d /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, d);
    if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = sum;
    __syncthreads();
    sum = 0.f;
    for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) sum += red[w];
    const float ls = logf(sum), inv = 1.f / sum;
#pragma unroll
    for (int i = 0; i < N; ++i) {
        const int j = threadIdx.x + i * blockDim.x;
        if (j >= cols4) continue;
        const float4 a = v[i];
        y[j] = log_out ? make_float4(a.x - m - ls, a.y - m - ls, a.z - m - ls, a.w - m - ls)
                       : make_float4(expf(a.x - m) * inv, expf(a.y - m) * inv, expf(a.z - m) * inv,
                                     expf(a.w - m) * inv);
    }
}

}  // namespace

std::size_t reduce_dim_scratch(std::int64_t n, std::int64_t k, std::int64_t stride) {
    if (!reduce_dim_strided(k, stride) || n == 0 || n > kColsMaxOutputs) return 0;
    // Room for either kernel's slices (which one runs depends on the dtype and alignment).
    const int parts =
        std::max({column_parts(n, k), column_parts_vec(n, k, 4), column_parts_vec(n, k, 8)});
    return parts == 1 ? 0 : static_cast<std::size_t>(parts) * static_cast<std::size_t>(n) * 8;
}

void launch_reduce_dim(ReduceOp op, DType cd, DType in_dtype, const Iter<2>& it, std::int64_t k,
                       std::int64_t stride, void* out, const void* in, void* scratch,
                       cudaStream_t s) {
    if (it.n == 0) return;
    const bool strided = reduce_dim_strided(k, stride), cols = strided && it.n <= kColsMaxOutputs;
    visit_compute(cd, [&]<typename T>(T) {
        if constexpr (!std::is_same_v<T, std::uint8_t>) {
            using A = typename Acc<T>::type;
            if constexpr (std::is_same_v<T, float>) {
                // A sum or mean over the rows of a dense [k, n] matrix with 16-byte aligned rows:
                // the vectorised column kernel.
                const std::size_t elem = in_dtype == DType::F32 ? 4 : 2;
                const bool dense = it.rank == 1 && it.strides[0][0] == 1 && it.strides[1][0] == 1 &&
                                   stride == it.n;
                if (cols && dense && (op == ReduceOp::Sum || op == ReduceOp::Mean) &&
                    (in_dtype == DType::F32 || in_dtype == DType::F16 || in_dtype == DType::BF16) &&
                    (static_cast<std::size_t>(it.n) * elem) % 16 == 0 &&
                    reinterpret_cast<std::uintptr_t>(in) % 16 == 0) {
                    const int v = static_cast<int>(16 / elem);
                    const int parts = column_parts_vec(it.n, k, v);
                    const dim3 grid(static_cast<unsigned>((it.n / v + 31) / 32), parts),
                        block(32, kColRows);
                    auto* partial = static_cast<float*>(scratch);
                    if (in_dtype == DType::F32)
                        reduce_cols_vec_kernel<float><<<grid, block, 0, s>>>(
                            op, it.n, k, static_cast<const float*>(in), out, partial);
                    else if (in_dtype == DType::F16)
                        reduce_cols_vec_kernel<__half><<<grid, block, 0, s>>>(
                            op, it.n, k, static_cast<const __half*>(in), out, partial);
                    else
                        reduce_cols_vec_kernel<__nv_bfloat16><<<grid, block, 0, s>>>(
                            op, it.n, k, static_cast<const __nv_bfloat16*>(in), out, partial);
                    if (parts > 1)
                        reduce_parts_kernel<T>
                            <<<blocks_for(it.n), kThreads, 0, s>>>(op, it, k, parts, partial, out);
                    return;
                }
            }
            if (strided) {
                const int parts = cols ? column_parts(it.n, k) : 1;
                const dim3 grid(static_cast<unsigned>((it.n + 31) / 32), parts),
                    block(32, kColRows);
                auto* partial = static_cast<A*>(scratch);
                const auto run = [&]<typename In>(const In* x) {
                    if (cols)
                        reduce_cols_kernel<T, In>
                            <<<grid, block, 0, s>>>(op, it, k, stride, x, out, partial);
                    else
                        reduce_thread_kernel<T, In>
                            <<<blocks_for(it.n), kThreads, 0, s>>>(op, it, k, stride, x, out);
                };
                if constexpr (std::is_same_v<T, float>) {
                    if (in_dtype == DType::F16)
                        run(static_cast<const __half*>(in));
                    else if (in_dtype == DType::BF16)
                        run(static_cast<const __nv_bfloat16*>(in));
                    else
                        run(static_cast<const T*>(in));
                } else {
                    run(static_cast<const T*>(in));
                }
                if (parts > 1)
                    reduce_parts_kernel<T>
                        <<<blocks_for(it.n), kThreads, 0, s>>>(op, it, k, parts, partial, out);
                return;
            }
            const T* x = static_cast<const T*>(in);
            if (stride == 1 && k >= 32) {
                const std::int64_t threads = it.n * 32;
                reduce_warp_kernel<T><<<blocks_for(threads), kThreads, 0, s>>>(op, it, k, x, out);
            } else {
                reduce_thread_kernel<T, T>
                    <<<blocks_for(it.n), kThreads, 0, s>>>(op, it, k, stride, x, out);
            }
        }
    });
    check_launch("reduce_dim");
}

void launch_reduce_all(ReduceOp op, DType cd, std::int64_t n, void* out, const void* in,
                       void* scratch, cudaStream_t s) {
    visit_compute(cd, [&]<typename T>(T) {
        if constexpr (!std::is_same_v<T, std::uint8_t>) {
            using A = typename Acc<T>::type;
            const int parts =
                static_cast<int>(std::min<std::int64_t>(1024, (n + kThreads - 1) / kThreads));
            auto* partial = static_cast<A*>(scratch);
            if (parts > 0)
                reduce_partial_kernel<T>
                    <<<parts, kThreads, 0, s>>>(op, n, static_cast<const T*>(in), partial);
            reduce_final_kernel<T><<<1, kThreads, 0, s>>>(op, parts, partial, n, out);
        }
    });
    check_launch("reduce");
}

void launch_arg_reduce(ArgReduceOp op, DType cd, const Iter<2>& it, std::int64_t k,
                       std::int64_t stride, std::int64_t* out, const void* in, cudaStream_t s) {
    if (it.n == 0) return;
    visit_compute(cd, [&]<typename T>(T) {
        if constexpr (!std::is_same_v<T, std::uint8_t>)
            arg_kernel<T><<<blocks_for(it.n), kThreads, 0, s>>>(
                op == ArgReduceOp::ArgMax, it, k, stride, static_cast<const T*>(in), out);
    });
    check_launch("arg_reduce");
}

void launch_softmax(bool log, DType cd, std::int64_t rows, std::int64_t cols, void* out,
                    const void* in, cudaStream_t s) {
    if (rows == 0 || cols == 0) return;
    auto run = [&]<typename T>(T) {
        const T* x = static_cast<const T*>(in);
        T* y = static_cast<T*>(out);
        const auto warp_blocks = static_cast<unsigned>((rows * 32 + kThreads - 1) / kThreads);
        if (cols <= 32)
            softmax_warp_kernel<T, 1><<<warp_blocks, kThreads, 0, s>>>(log, rows, cols, x, y);
        else if (cols <= 128)
            softmax_warp_kernel<T, 4><<<warp_blocks, kThreads, 0, s>>>(log, rows, cols, x, y);
        else if (cols <= 512)
            softmax_warp_kernel<T, 16><<<warp_blocks, kThreads, 0, s>>>(log, rows, cols, x, y);
        else
            softmax_kernel<T>
                <<<static_cast<unsigned>(rows), cols >= 4096 ? 1024 : 256, 0, s>>>(log, cols, x, y);
    };
    const auto aligned = [](const void* p) {
        return reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
    };
    if (cd == DType::F32 && cols > 512 && cols % 4 == 0 && cols <= 4 * 256 * 8 && aligned(in) &&
        aligned(out)) {
        const int cols4 = static_cast<int>(cols / 4);
        const auto* x = static_cast<const float4*>(in);
        auto* y = static_cast<float4*>(out);
        const auto r = static_cast<unsigned>(rows);
        if (cols4 <= 256)
            softmax_vec_kernel<1><<<r, 256, 0, s>>>(log, cols4, x, y);
        else if (cols4 <= 512)
            softmax_vec_kernel<2><<<r, 256, 0, s>>>(log, cols4, x, y);
        else if (cols4 <= 1024)
            softmax_vec_kernel<4><<<r, 256, 0, s>>>(log, cols4, x, y);
        else
            softmax_vec_kernel<8><<<r, 256, 0, s>>>(log, cols4, x, y);
        check_launch("softmax");
        return;
    }
    if (cd == DType::F64)
        run(double{});
    else
        run(float{});
    check_launch("softmax");
}

}  // namespace ember::detail::cuda
