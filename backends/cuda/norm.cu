// Layer norm over contiguous rows: one block a row. Wide f32 rows whose length is a multiple of 4
// are read once into registers as float4s, and their mean, centered variance and normalised
// values all come from those registers (one read and one write of the row, as PyTorch's
// kernel); other rows loop over global memory three times, which L1/L2 mostly serve. The
// backward of such f32 rows (up to 1024 floats) is one pass: a warp a row, x and g read once,
// dgamma/dbeta summed on the way into one partial row a block, which a second pass folds in
// order (split over rows of threads, as the column sums below). Other rows take two kernels: dx a
// row a block, and dgamma/dbeta as column sums split over row slices whose partials a second pass
// folds in order (deterministic, no atomics).
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "device.cuh"

namespace ember::detail::cuda {
namespace {

/// The sum of `v` over the block (every thread gets it); `red` holds one value a warp.
template <typename T>
__device__ __forceinline__ T block_sum(T v, T* red) {
    for (int d = 16; d > 0; d /= 2) v += __shfl_xor_sync(0xffffffffu, v, d);
    __syncthreads();  // `red` may still be read from the previous call
    if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = v;
    __syncthreads();
    T s = T(0);
    for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) s += red[w];
    return s;
}

/// Four consecutive f32, f16 or bf16 values (float4 j of the row) as f32: one 16- or 8-byte
/// access.
template <typename T>
__device__ __forceinline__ float4 load4(const T* p, std::int64_t j) {
    if constexpr (std::is_same_v<T, float>) {
        return reinterpret_cast<const float4*>(p)[j];
    } else {
        const uint2 u = reinterpret_cast<const uint2*>(p)[j];
        float2 a, b;
        if constexpr (std::is_same_v<T, __half>) {
            a = __half22float2(*reinterpret_cast<const __half2*>(&u.x));
            b = __half22float2(*reinterpret_cast<const __half2*>(&u.y));
        } else {
            a = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&u.x));
            b = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&u.y));
        }
        return make_float4(a.x, a.y, b.x, b.y);
    }
}

/// Stores v as float4 j of an f32, f16 or bf16 row, each value rounded to nearest even (the bits
/// a cast of the f32 value gives).
template <typename T>
__device__ __forceinline__ void store4(T* p, std::int64_t j, float4 v) {
    if constexpr (std::is_same_v<T, float>) {
        reinterpret_cast<float4*>(p)[j] = v;
    } else {
        uint2 u;
        if constexpr (std::is_same_v<T, __half>) {
            *reinterpret_cast<__half2*>(&u.x) = __floats2half2_rn(v.x, v.y);
            *reinterpret_cast<__half2*>(&u.y) = __floats2half2_rn(v.z, v.w);
        } else {
            *reinterpret_cast<__nv_bfloat162*>(&u.x) = __floats2bfloat162_rn(v.x, v.y);
            *reinterpret_cast<__nv_bfloat162*>(&u.y) = __floats2bfloat162_rn(v.z, v.w);
        }
        reinterpret_cast<uint2*>(p)[j] = u;
    }
}

/// Layer norm of f32 rows held in registers, N float4s a thread. With `res` the row is first
/// x + res (R: the residual's storage type), written to `sum` (add_layer_norm); the normed row
/// is stored as Y.
template <int N, typename R, typename Y>
__global__ void layer_norm_vec_kernel(int cols4, const float* in, const R* res, const float4* gamma,
                                      const float4* beta, float eps, float* sum, Y* out,
                                      float* mean, float* rstd) {
    const std::int64_t base = static_cast<std::int64_t>(blockIdx.x) * cols4;
    __shared__ float red[32];
    float4 v[N];
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < N; ++i) {
        const int j = threadIdx.x + i * blockDim.x;
        v[i] = j < cols4 ? load4(in, base + j) : make_float4(0.f, 0.f, 0.f, 0.f);
        if (res != nullptr && j < cols4) {
            const float4 r = load4(res, base + j);
            v[i] = make_float4(v[i].x + r.x, v[i].y + r.y, v[i].z + r.z, v[i].w + r.w);
            store4(sum, base + j, v[i]);
        }
        s += (v[i].x + v[i].y) + (v[i].z + v[i].w);
    }
    const float n = 4.f * static_cast<float>(cols4);
    const float m = block_sum(s, red) / n;
    float q = 0.f;
#pragma unroll
    for (int i = 0; i < N; ++i) {
        if (threadIdx.x + i * blockDim.x >= cols4) continue;
        const float a = v[i].x - m, b = v[i].y - m, c = v[i].z - m, d = v[i].w - m;
        q += (a * a + b * b) + (c * c + d * d);
    }
    const float r = rsqrtf(block_sum(q, red) / n + eps);
    if (threadIdx.x == 0) {
        mean[blockIdx.x] = m;
        rstd[blockIdx.x] = r;
    }
#pragma unroll
    for (int i = 0; i < N; ++i) {
        const int j = threadIdx.x + i * blockDim.x;
        if (j >= cols4) continue;
        float4 o =
            make_float4((v[i].x - m) * r, (v[i].y - m) * r, (v[i].z - m) * r, (v[i].w - m) * r);
        if (gamma) {
            const float4 g = gamma[j];
            o = make_float4(o.x * g.x, o.y * g.y, o.z * g.z, o.w * g.w);
        }
        if (beta) {
            const float4 b = beta[j];
            o = make_float4(o.x + b.x, o.y + b.y, o.z + b.z, o.w + b.w);
        }
        store4(out, base + j, o);
    }
}

/// Launches layer_norm_vec_kernel for rows of 4·cols4 values: rows of up to 512 floats take
/// 128 threads, so that few threads sit idle.
template <typename R, typename Y>
void launch_vec(unsigned rows, int cols4, const float* x, const R* res, const float4* gamma,
                const float4* beta, float eps, float* sum, Y* y, float* mean, float* rstd,
                cudaStream_t s) {
    const auto run = [&]<int N>(std::integral_constant<int, N>, unsigned threads) {
        layer_norm_vec_kernel<N, R, Y>
            <<<rows, threads, 0, s>>>(cols4, x, res, gamma, beta, eps, sum, y, mean, rstd);
    };
    if (cols4 <= 128)
        run(std::integral_constant<int, 1>{}, 128);
    else if (cols4 <= 256)
        run(std::integral_constant<int, 1>{}, 256);
    else if (cols4 <= 512)
        run(std::integral_constant<int, 2>{}, 256);
    else if (cols4 <= 1024)
        run(std::integral_constant<int, 4>{}, 256);
    else
        run(std::integral_constant<int, 8>{}, 256);
}

template <typename T>
__global__ void layer_norm_kernel(std::int64_t cols, const T* in, const T* gamma, const T* beta,
                                  T eps, T* out, T* mean, T* rstd) {
    const T* x = in + static_cast<std::int64_t>(blockIdx.x) * cols;
    T* y = out + static_cast<std::int64_t>(blockIdx.x) * cols;
    __shared__ T red[32];
    T s = T(0);
    for (std::int64_t j = threadIdx.x; j < cols; j += blockDim.x) s += x[j];
    const T m = block_sum(s, red) / static_cast<T>(cols);
    T q = T(0);
    for (std::int64_t j = threadIdx.x; j < cols; j += blockDim.x) q += (x[j] - m) * (x[j] - m);
    const T r = T(1) / sqrt(block_sum(q, red) / static_cast<T>(cols) + eps);
    if (threadIdx.x == 0) {
        mean[blockIdx.x] = m;
        rstd[blockIdx.x] = r;
    }
    for (std::int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
        T o = (x[j] - m) * r;
        if (gamma) o *= gamma[j];
        if (beta) o += beta[j];
        y[j] = o;
    }
}

bool aligned16(const void* p) {
    return reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
}

/// dx of one row a block: with x̂ = (x − mean)·rstd and g' = g·gamma,
/// dx = rstd · (g' − mean(g') − x̂ · mean(g'·x̂)).
template <typename T>
__global__ void layer_norm_dx_kernel(std::int64_t cols, const T* x, const T* g, const T* gamma,
                                     const T* mean, const T* rstd, T* dx) {
    __shared__ T red[32];
    const std::int64_t row = blockIdx.x;
    const T* xr = x + row * cols;
    const T* gr = g + row * cols;
    const T mu = mean[row], rs = rstd[row];
    T s1 = T(0), s2 = T(0);
    for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
        const T gg = gamma ? gr[c] * gamma[c] : gr[c];
        s1 += gg;
        s2 += gg * ((xr[c] - mu) * rs);
    }
    const T inv = T(1) / static_cast<T>(cols);
    const T m1 = block_sum(s1, red) * inv;
    const T m2 = block_sum(s2, red) * inv;
    T* out = dx + row * cols;
    for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
        const T gg = gamma ? gr[c] * gamma[c] : gr[c];
        out[c] = rs * (gg - m1 - (xr[c] - mu) * rs * m2);
    }
}

/// Rows of threads a layer_norm_params_kernel block splits its rows over.
constexpr int kParamRows = 8;

/// In a block of 32 × R threads, each column's R partial sums (sg, sb) folded in order into its
/// thread of row 0; true for the threads that then hold a column's totals (row 0, `in_range`).
/// Every thread of the block must call it.
template <typename T, int R = kParamRows>
__device__ __forceinline__ bool fold_thread_rows(T& sg, T& sb, bool in_range) {
    __shared__ T tg[R][33], tb[R][33];
    tg[threadIdx.y][threadIdx.x] = sg;
    tb[threadIdx.y][threadIdx.x] = sb;
    __syncthreads();
    if (threadIdx.y != 0 || !in_range) return false;
    for (int i = 1; i < R; ++i) {
        sg += tg[i][threadIdx.x];
        sb += tb[i][threadIdx.x];
    }
    return true;
}

/// Σ_rows g·x̂ and Σ_rows g (dgamma, dbeta) for 32 neighbouring columns a block, the rows split
/// over kParamRows threads and gridDim.y slices; slice y writes partial[y·cols + c] for each of
/// the two sums, and layer_norm_params_final_kernel folds the slices in order.
template <typename T>
__global__ void layer_norm_params_kernel(std::int64_t rows, std::int64_t cols, const T* x,
                                         const T* g, const T* mean, const T* rstd, T* part_gamma,
                                         T* part_beta) {
    const std::int64_t c = blockIdx.x * 32LL + threadIdx.x;
    const std::int64_t per = (rows + gridDim.y - 1) / gridDim.y;
    const std::int64_t r0 = blockIdx.y * per, r1 = r0 + per < rows ? r0 + per : rows;
    T sg = T(0), sb = T(0);
    if (c < cols)
        for (std::int64_t r = r0 + threadIdx.y; r < r1; r += kParamRows) {
            const T gv = g[r * cols + c];
            sg += gv * ((x[r * cols + c] - mean[r]) * rstd[r]);
            sb += gv;
        }
    if (!fold_thread_rows(sg, sb, c < cols)) return;
    part_gamma[blockIdx.y * cols + c] = sg;
    part_beta[blockIdx.y * cols + c] = sb;
}

template <typename T>
__global__ void layer_norm_params_final_kernel(std::int64_t cols, int parts, const T* part_gamma,
                                               const T* part_beta, T* dgamma, T* dbeta) {
    EMBER_GRID_LOOP(c, cols) {
        T sg = T(0), sb = T(0);
        for (int p = 0; p < parts; ++p) {
            sg += part_gamma[p * cols + c];
            sb += part_beta[p * cols + c];
        }
        dgamma[c] = sg;
        dbeta[c] = sb;
    }
}

/// Slices of the rows for the parameter gradients.
int param_parts(std::int64_t rows, std::int64_t cols) {
    return row_slices(cols, rows, kParamRows);
}

// ---- f32 rows of 4·k ≤ 1024 floats: dx, dgamma and dbeta in one pass ------------------------
// One warp a row, each lane holding N float4s of x, g and gamma in registers: the row is read
// once (the two-kernel path reads x and g three times). The lanes also sum g·x̂ and g over the
// rows their warp visits; the block's warps fold their sums in order into one partial row a
// block, and fold_parts_kernel folds those (deterministic, no atomics).
constexpr int kFusedWarps = 4;
constexpr int kFusedMaxBlocks = 528;  // four a multiprocessor of an H100/H200

int fused_blocks(std::int64_t rows) {
    const std::int64_t want = (rows + 3) / 4;  // at least four rows a block
    return static_cast<int>(want < kFusedMaxBlocks ? (want > 0 ? want : 1) : kFusedMaxBlocks);
}

// Four blocks a multiprocessor up to N = 4, three up to N = 6 (GPT-2's 768 columns: without the
// bound the f32 gradient's copy took 173 registers a thread, two blocks, against the 16-bit
// ones' 168), two for N = 8.
template <int N, typename G>
__global__ void __launch_bounds__(kFusedWarps * 32, N <= 4   ? 4
                                                    : N <= 6 ? 3
                                                             : 2)
    layer_norm_backward_fused_kernel(std::int64_t rows, int cols4, const float4* x, const G* g,
                                     const float4* gamma, const float* mean, const float* rstd,
                                     float4* dx, float* part_gamma, float* part_beta,
                                     const float4* acc) {
    // Per warp, per column: the warp's sums of g·x̂ and of g (dgamma and dbeta), folded below.
    extern __shared__ float fold[];  // [2][kFusedWarps][4·cols4]
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int cols = 4 * cols4;
    float4 gm[N], sg[N], sb[N];
#pragma unroll
    for (int i = 0; i < N; ++i) {
        const int j = lane + 32 * i;
        gm[i] = gamma && j < cols4 ? gamma[j] : make_float4(1.f, 1.f, 1.f, 1.f);
        sg[i] = sb[i] = make_float4(0.f, 0.f, 0.f, 0.f);
    }
    const float inv = 1.f / static_cast<float>(cols);
    for (std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * kFusedWarps + warp; row < rows;
         row += static_cast<std::int64_t>(gridDim.x) * kFusedWarps) {
        const float4* xr = x + row * cols4;
        const float mu = mean[row], rs = rstd[row];
        float4 xh[N], gv[N], av[N];
        float s1 = 0.f, s2 = 0.f;
        // The addend's loads go out with x's and g's, so their latency is not paid per row at
        // the store.
#pragma unroll
        for (int i = 0; i < N; ++i) {
            const int j = lane + 32 * i;
            av[i] = acc && j < cols4 ? acc[row * cols4 + j] : make_float4(0.f, 0.f, 0.f, 0.f);
        }
#pragma unroll
        for (int i = 0; i < N; ++i) {
            const int j = lane + 32 * i;
            const float4 xv = j < cols4 ? xr[j] : make_float4(0.f, 0.f, 0.f, 0.f);
            gv[i] = j < cols4 ? load4(g, row * cols4 + j) : make_float4(0.f, 0.f, 0.f, 0.f);
            xh[i] =
                make_float4((xv.x - mu) * rs, (xv.y - mu) * rs, (xv.z - mu) * rs, (xv.w - mu) * rs);
            const float4 gg = make_float4(gv[i].x * gm[i].x, gv[i].y * gm[i].y, gv[i].z * gm[i].z,
                                          gv[i].w * gm[i].w);
            s1 += (gg.x + gg.y) + (gg.z + gg.w);
            s2 += (gg.x * xh[i].x + gg.y * xh[i].y) + (gg.z * xh[i].z + gg.w * xh[i].w);
            sg[i].x += gv[i].x * xh[i].x, sg[i].y += gv[i].y * xh[i].y;
            sg[i].z += gv[i].z * xh[i].z, sg[i].w += gv[i].w * xh[i].w;
            sb[i].x += gv[i].x, sb[i].y += gv[i].y, sb[i].z += gv[i].z, sb[i].w += gv[i].w;
        }
        for (int d = 16; d > 0; d /= 2) {
            s1 += __shfl_xor_sync(0xffffffffu, s1, d);
            s2 += __shfl_xor_sync(0xffffffffu, s2, d);
        }
        const float m1 = s1 * inv, m2 = s2 * inv;
        float4* out = dx + row * cols4;
#pragma unroll
        for (int i = 0; i < N; ++i) {
            const int j = lane + 32 * i;
            if (j >= cols4) continue;
            float4 d = make_float4(rs * (gv[i].x * gm[i].x - m1 - xh[i].x * m2),
                                   rs * (gv[i].y * gm[i].y - m1 - xh[i].y * m2),
                                   rs * (gv[i].z * gm[i].z - m1 - xh[i].z * m2),
                                   rs * (gv[i].w * gm[i].w - m1 - xh[i].w * m2));
            if (acc)  // the input's gradient from its other consumers, added as written; a
                      // rounded add (no FMA with the product above): the bits of a separate add
                d = make_float4(__fadd_rn(d.x, av[i].x), __fadd_rn(d.y, av[i].y),
                                __fadd_rn(d.z, av[i].z), __fadd_rn(d.w, av[i].w));
            out[j] = d;
        }
    }
    if (part_gamma == nullptr) return;
    float* fg = fold + static_cast<std::int64_t>(warp) * cols;
    float* fb = fold + static_cast<std::int64_t>(kFusedWarps + warp) * cols;
#pragma unroll
    for (int i = 0; i < N; ++i) {
        const int j = lane + 32 * i;
        if (j >= cols4) continue;
        reinterpret_cast<float4*>(fg)[j] = sg[i];
        reinterpret_cast<float4*>(fb)[j] = sb[i];
    }
    __syncthreads();
    for (int c = threadIdx.x; c < cols; c += kFusedWarps * 32) {
        float a = 0.f, b = 0.f;
        for (int w = 0; w < kFusedWarps; ++w) {
            a += fold[w * cols + c];
            b += fold[(kFusedWarps + w) * cols + c];
        }
        part_gamma[static_cast<std::int64_t>(blockIdx.x) * cols + c] = a;
        part_beta[static_cast<std::int64_t>(blockIdx.x) * cols + c] = b;
    }
}

/// How many blocks of layer_norm_backward_fused_kernel<N, ·> the current device holds at once,
/// the fewest over the gradient's storage types: the grid's cap, so that every block starts in
/// the first wave. Four a multiprocessor (fused_blocks' cap) is what narrow rows allow; GPT-2's
/// 768 columns (N = 6) take 168 registers a thread, three blocks a multiprocessor, and a grid of
/// four ran the rest as a second wave behind the first. One count for every storage type keeps
/// the partial sums' grouping, and so dgamma's and dbeta's bits, the same whether the gradient
/// arrives as f32 or as f16/bf16. Asked once per N with the shared memory of N's widest rows
/// (registers bound these kernels long before it does).
template <int N>
int fused_resident() {
    static const int per_sm = [] {
        const std::size_t smem = 2 * kFusedWarps * (128 * N) * sizeof(float);
        int fewest = 255;
        const auto ask = [&](const void* kernel) {
            int n = 0;
            check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, kFusedWarps * 32, smem),
                  "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
            fewest = std::min(fewest, n);
        };
        ask(reinterpret_cast<const void*>(&layer_norm_backward_fused_kernel<N, float>));
        ask(reinterpret_cast<const void*>(&layer_norm_backward_fused_kernel<N, __half>));
        ask(reinterpret_cast<const void*>(&layer_norm_backward_fused_kernel<N, __nv_bfloat16>));
        return fewest > 0 ? fewest : 1;
    }();
    return per_sm * multiprocessors();
}

/// Rows of threads fold_parts_kernel splits the partial rows over: a block of 32 × 32, so that
/// each thread sums about a dozen of the fused kernel's ~400 partials (with 8 rows of threads
/// the fold of 768 columns ran 24 blocks of 50 dependent loads a thread: 6.7 µs).
constexpr int kFoldRows = 32;

/// dgamma[c] and dbeta[c]: the fused kernel's per-block partial rows summed over the blocks,
/// 32 columns a block with the partials split over kFoldRows rows of threads, folded in order.
__global__ void __launch_bounds__(32 * kFoldRows)
    fold_parts_kernel(std::int64_t cols, int parts, const float* part_gamma, const float* part_beta,
                      float* dgamma, float* dbeta) {
    const std::int64_t c = blockIdx.x * 32LL + threadIdx.x;
    float sg = 0.f, sb = 0.f;
    if (c < cols)
        for (int p = threadIdx.y; p < parts; p += kFoldRows) {
            sg += part_gamma[p * cols + c];
            sb += part_beta[p * cols + c];
        }
    if (!fold_thread_rows<float, kFoldRows>(sg, sb, c < cols)) return;
    dgamma[c] = sg;
    dbeta[c] = sb;
}

bool aligned8(const void* p) {
    return reinterpret_cast<std::uintptr_t>(p) % 8 == 0;
}

/// Whether the fused kernel takes these rows: f32 (the gradient f32, f16 or bf16), 4·k ≤ 1024
/// columns, 16-byte aligned (the 16-bit gradient 8-byte aligned).
bool fused_backward_fits(DType cd, DType gd, std::int64_t cols, const void* x, const void* g,
                         const void* gamma, const void* dx) {
    const bool g_ok =
        gd == DType::F32 ? aligned16(g) : (gd == DType::BF16 || gd == DType::F16) && aligned8(g);
    return cd == DType::F32 && g_ok && cols % 4 == 0 && cols > 0 && cols <= 1024 && aligned16(x) &&
           aligned16(dx) && (!gamma || aligned16(gamma));
}

}  // namespace

bool layer_norm_backward_reads(DType cd, DType gd, std::int64_t cols, const void* x, const void* g,
                               const void* gamma, const void* dx) {
    return gd == cd || fused_backward_fits(cd, gd, cols, x, g, gamma, dx);
}

bool layer_norm_backward_adds(DType cd, DType gd, std::int64_t cols, const void* x, const void* g,
                              const void* gamma, const void* dx, const void* acc) {
    return fused_backward_fits(cd, gd, cols, x, g, gamma, dx) && aligned16(acc);
}

std::size_t layer_norm_backward_scratch(DType cd, std::int64_t rows, std::int64_t cols) {
    const std::size_t split = 2 * static_cast<std::size_t>(param_parts(rows, cols)) *
                              static_cast<std::size_t>(cols) * dtype_size(cd);
    const std::size_t fused = 2 * static_cast<std::size_t>(fused_blocks(rows)) *
                              static_cast<std::size_t>(cols) * sizeof(float);
    return split > fused ? split : fused;
}

void launch_layer_norm_backward(DType cd, DType gd, std::int64_t rows, std::int64_t cols,
                                const void* x, const void* g, const void* gamma, const void* mean,
                                const void* rstd, void* dx, void* dgamma, void* dbeta,
                                void* scratch, cudaStream_t s, const void* acc) {
    if (rows == 0 || cols == 0) return;
    EMBER_CHECK(acc == nullptr || layer_norm_backward_adds(cd, gd, cols, x, g, gamma, dx, acc),
                Argument, "layer_norm_backward (cuda): an addend given where the kernel adds none");
    if (fused_backward_fits(cd, gd, cols, x, g, gamma, dx)) {
        const int cols4 = static_cast<int>(cols / 4);
        int blocks = fused_blocks(rows);
        float* pg = dgamma ? static_cast<float*>(scratch) : nullptr;
        const std::size_t smem = dgamma ? 2 * kFusedWarps * cols * sizeof(float) : 0;
        const auto launch = [&]<int N>(std::integral_constant<int, N>) {
            visit_float_storage(gd, [&]<typename G, typename>() {
                if constexpr (!std::is_same_v<G, double>) {
                    blocks = std::min(blocks, fused_resident<N>());
                    float* pb = dgamma ? pg + static_cast<std::int64_t>(blocks) * cols : nullptr;
                    layer_norm_backward_fused_kernel<N, G><<<blocks, kFusedWarps * 32, smem, s>>>(
                        rows, cols4, static_cast<const float4*>(x), static_cast<const G*>(g),
                        static_cast<const float4*>(gamma), static_cast<const float*>(mean),
                        static_cast<const float*>(rstd), static_cast<float4*>(dx), pg, pb,
                        static_cast<const float4*>(acc));
                }
            });
        };
        const int n = (cols4 + 31) / 32;  // float4s a lane
        if (n <= 1)
            launch(std::integral_constant<int, 1>{});
        else if (n <= 2)
            launch(std::integral_constant<int, 2>{});
        else if (n <= 4)
            launch(std::integral_constant<int, 4>{});
        else if (n <= 6)
            launch(std::integral_constant<int, 6>{});
        else
            launch(std::integral_constant<int, 8>{});
        if (dgamma)
            fold_parts_kernel<<<dim3(static_cast<unsigned>((cols + 31) / 32)), dim3(32, kFoldRows),
                                0, s>>>(cols, blocks, pg,
                                        pg + static_cast<std::int64_t>(blocks) * cols,
                                        static_cast<float*>(dgamma), static_cast<float*>(dbeta));
        check_launch("layer_norm_backward");
        return;
    }
    const auto run = [&]<typename T>(T) {
        const T* xs = static_cast<const T*>(x);
        const T* gs = static_cast<const T*>(g);
        const T* ms = static_cast<const T*>(mean);
        const T* rs = static_cast<const T*>(rstd);
        const unsigned threads = cols <= 256 ? 64 : 256;
        layer_norm_dx_kernel<T><<<static_cast<unsigned>(rows), threads, 0, s>>>(
            cols, xs, gs, static_cast<const T*>(gamma), ms, rs, static_cast<T*>(dx));
        if (!dgamma) return;
        const int parts = param_parts(rows, cols);
        T* pg = static_cast<T*>(scratch);
        T* pb = pg + static_cast<std::int64_t>(parts) * cols;
        const dim3 grid(static_cast<unsigned>((cols + 31) / 32), parts), block(32, kParamRows);
        layer_norm_params_kernel<T><<<grid, block, 0, s>>>(rows, cols, xs, gs, ms, rs, pg, pb);
        layer_norm_params_final_kernel<T><<<blocks_for(cols), kThreads, 0, s>>>(
            cols, parts, pg, pb, static_cast<T*>(dgamma), static_cast<T*>(dbeta));
    };
    if (cd == DType::F64)
        run(double{});
    else
        run(float{});
    check_launch("layer_norm_backward");
}

void launch_layer_norm(DType cd, std::int64_t rows, std::int64_t cols, const void* x,
                       const void* gamma, const void* beta, double eps, void* y, void* mean,
                       void* rstd, cudaStream_t s) {
    if (rows == 0 || cols == 0) return;
    const auto r = static_cast<unsigned>(rows);
    const bool vec = cd == DType::F32 && cols % 4 == 0 && cols <= 4 * 256 * 8 && aligned16(x) &&
                     aligned16(y) && (!gamma || aligned16(gamma)) && (!beta || aligned16(beta));
    if (vec) {
        launch_vec<float, float>(r, static_cast<int>(cols / 4), static_cast<const float*>(x),
                                 nullptr, static_cast<const float4*>(gamma),
                                 static_cast<const float4*>(beta), static_cast<float>(eps), nullptr,
                                 static_cast<float*>(y), static_cast<float*>(mean),
                                 static_cast<float*>(rstd), s);
        check_launch("layer_norm");
        return;
    }
    const unsigned threads = cols <= 256 ? 64 : 256;
    if (cd == DType::F64)
        layer_norm_kernel<double><<<r, threads, 0, s>>>(
            cols, static_cast<const double*>(x), static_cast<const double*>(gamma),
            static_cast<const double*>(beta), eps, static_cast<double*>(y),
            static_cast<double*>(mean), static_cast<double*>(rstd));
    else
        layer_norm_kernel<float><<<r, threads, 0, s>>>(
            cols, static_cast<const float*>(x), static_cast<const float*>(gamma),
            static_cast<const float*>(beta), static_cast<float>(eps), static_cast<float*>(y),
            static_cast<float*>(mean), static_cast<float*>(rstd));
    check_launch("layer_norm");
}

bool add_layer_norm_fits(DType rd, DType yd, std::int64_t cols, const void* x, const void* res,
                         const void* gamma, const void* beta) {
    const auto narrow_or_f32 = [](DType d) {
        return d == DType::F32 || d == DType::BF16 || d == DType::F16;
    };
    const bool res_aligned = rd == DType::F32 ? aligned16(res) : aligned8(res);
    return narrow_or_f32(rd) && narrow_or_f32(yd) && cols > 0 && cols % 4 == 0 && cols <= 8192 &&
           aligned16(x) && res_aligned && (!gamma || aligned16(gamma)) &&
           (!beta || aligned16(beta));
}

void launch_add_layer_norm(DType rd, DType yd, std::int64_t rows, std::int64_t cols, const void* x,
                           const void* res, const void* gamma, const void* beta, double eps,
                           void* sum, void* y, void* mean, void* rstd, cudaStream_t s) {
    if (rows == 0 || cols == 0) return;
    const auto r = static_cast<unsigned>(rows);
    const int cols4 = static_cast<int>(cols / 4);
    const auto* xp = static_cast<const float*>(x);
    const auto* gp = static_cast<const float4*>(gamma);
    const auto* bp = static_cast<const float4*>(beta);
    auto* sp = static_cast<float*>(sum);
    auto* mp = static_cast<float*>(mean);
    auto* rp = static_cast<float*>(rstd);
    const auto e = static_cast<float>(eps);
    visit_float_storage(rd, [&]<typename R, typename>() {
        visit_float_storage(yd, [&]<typename Y, typename>() {
            if constexpr (!std::is_same_v<R, double> && !std::is_same_v<Y, double>)
                launch_vec<R, Y>(r, cols4, xp, static_cast<const R*>(res), gp, bp, e, sp,
                                 static_cast<Y*>(y), mp, rp, s);
        });
    });
    check_launch("add_layer_norm");
}

}  // namespace ember::detail::cuda
