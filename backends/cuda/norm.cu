// Layer norm over contiguous rows: one block a row. Wide f32 rows whose length is a multiple of 4
// are read once into registers as float4s, and their mean, centered variance and normalised
// values all come from those registers (one read and one write of the row, as PyTorch's
// kernel); other rows loop over global memory three times, which L1/L2 mostly serve.
#include <cstdint>

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

template <int N>
__global__ void layer_norm_vec_kernel(int cols4, const float4* in, const float4* gamma,
                                      const float4* beta, float eps, float4* out, float* mean,
                                      float* rstd) {
    const float4* x = in + static_cast<std::int64_t>(blockIdx.x) * cols4;
    float4* y = out + static_cast<std::int64_t>(blockIdx.x) * cols4;
    __shared__ float red[32];
    float4 v[N];
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < N; ++i) {
        const int j = threadIdx.x + i * blockDim.x;
        v[i] = j < cols4 ? x[j] : make_float4(0.f, 0.f, 0.f, 0.f);
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
        y[j] = o;
    }
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

}  // namespace

void launch_layer_norm(DType cd, std::int64_t rows, std::int64_t cols, const void* x,
                       const void* gamma, const void* beta, double eps, void* y, void* mean,
                       void* rstd, cudaStream_t s) {
    if (rows == 0 || cols == 0) return;
    const auto r = static_cast<unsigned>(rows);
    const bool vec = cd == DType::F32 && cols % 4 == 0 && cols <= 4 * 256 * 8 && aligned16(x) &&
                     aligned16(y) && (!gamma || aligned16(gamma)) && (!beta || aligned16(beta));
    if (vec) {
        const int cols4 = static_cast<int>(cols / 4);
        const auto* xv = static_cast<const float4*>(x);
        const auto* gv = static_cast<const float4*>(gamma);
        const auto* bv = static_cast<const float4*>(beta);
        auto* yv = static_cast<float4*>(y);
        auto* mp = static_cast<float*>(mean);
        auto* rp = static_cast<float*>(rstd);
        const auto e = static_cast<float>(eps);
        // Rows of up to 512 floats take 128 threads, so that few threads sit idle.
        if (cols4 <= 128)
            layer_norm_vec_kernel<1><<<r, 128, 0, s>>>(cols4, xv, gv, bv, e, yv, mp, rp);
        else if (cols4 <= 256)
            layer_norm_vec_kernel<1><<<r, 256, 0, s>>>(cols4, xv, gv, bv, e, yv, mp, rp);
        else if (cols4 <= 512)
            layer_norm_vec_kernel<2><<<r, 256, 0, s>>>(cols4, xv, gv, bv, e, yv, mp, rp);
        else if (cols4 <= 1024)
            layer_norm_vec_kernel<4><<<r, 256, 0, s>>>(cols4, xv, gv, bv, e, yv, mp, rp);
        else
            layer_norm_vec_kernel<8><<<r, 256, 0, s>>>(cols4, xv, gv, bv, e, yv, mp, rp);
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

}  // namespace ember::detail::cuda
