// What one kernel launch costs the host on this machine, to read the per-op overhead of
// bench_cuda against: 500 launches queued without waiting (below the launch queue's depth), for
// an empty kernel, one with a 272-byte parameter (an elementwise op's iteration plan), and the
// same followed by cudaGetLastError as ember checks each launch. One JSON line per figure.
//   nvcc -O2 -arch=sm_90 -o launch_probe benchmarks/launch_probe.cu
#include <chrono>
#include <cstdio>

#include <cuda_runtime.h>

struct Plan {
    long long v[34];
};
__global__ void empty_kernel() {}
__global__ void plan_kernel(Plan p, float* out) {
    if (threadIdx.x == 1000) out[0] = static_cast<float>(p.v[0]);
}

template <typename F>
double host_us(F&& f, cudaStream_t s) {
    double best = 1e30;
    for (int r = 0; r < 5; ++r) {
        cudaStreamSynchronize(s);
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < 500; ++i) f();
        const double us =
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
                .count();
        best = us / 500 < best ? us / 500 : best;
    }
    cudaStreamSynchronize(s);
    return best;
}

int main() {
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    float* out;
    cudaMalloc(&out, 4);
    Plan p{};
    empty_kernel<<<1, 1, 0, s>>>();
    cudaStreamSynchronize(s);
    std::printf("{\"name\": \"launch_empty_host\", \"value\": %.3f, \"unit\": \"us\"}\n",
                host_us([&] { empty_kernel<<<1, 1, 0, s>>>(); }, s));
    std::printf("{\"name\": \"launch_272B_param_host\", \"value\": %.3f, \"unit\": \"us\"}\n",
                host_us([&] { plan_kernel<<<1, 256, 0, s>>>(p, out); }, s));
    std::printf(
        "{\"name\": \"launch_272B_param_and_check_host\", \"value\": %.3f, \"unit\": \"us\"}\n",
        host_us(
            [&] {
                plan_kernel<<<1, 256, 0, s>>>(p, out);
                (void)cudaGetLastError();
            },
            s));
    return 0;
}
