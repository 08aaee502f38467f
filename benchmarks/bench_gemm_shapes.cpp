// bench_gemm_shapes: the CPU GEMM on the products of the ONNX-imported models' inference at
// batch 1, one thread: ember's blocked GEMM packing B at each call ("ember"), the same GEMM from
// B packed once and kept ("ember_kept", what the CPU backend does for a model's weights from
// the third pass), and OpenBLAS called directly ("openblas", with its own packing). B is cold, as
// a model's weights are at inference: each figure cycles through as many distinct B matrices
// as make up --pool-mb (default 256) of weights.
//
//   bench_gemm_shapes [--reps N] [--pool-mb M] [--only M,K,N]
//
// One JSON object per line: {"shape": "m64_k768_n3072", "impl": "ember_kept", "width": 64,
// "ms": 1.71, "gflops": 176.5, "reps": 5}; "width" is the kernels' vector width in bytes
// (64: AVX-512, 32: AVX2) as the kept packing records it. The shapes: the GPT's Linear layers
// at 64 tokens (768 × 768, 768 × 3072, 3072 × 768, the 768 × 256 head), ResNet-18's
// convolutions at batch 1 as the CPU backend runs them transposed from kept weights
// (positions × channels × taps: 16 × 512 × 4608, 64 × 256 × 2304, 256 × 128 × 1152), and
// 1024³ for scale.
#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <vector>

#include <cblas.h>

#include "../backends/cpu/gemm.hpp"
#include "ember/backend/detail/cpu_tensor.hpp"

namespace {

using ember::detail::cpu::PackedB;

double cpu_seconds() {
    timespec t{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

}  // namespace

int main(int argc, char** argv) {
    std::size_t reps = 5, pool_mb = 256;
    std::vector<std::array<std::size_t, 3>> shapes = {
        {64, 768, 768},  {64, 768, 3072}, {64, 3072, 768},  {64, 768, 256},
        {16, 4608, 512}, {64, 2304, 256}, {256, 1152, 128}, {1024, 1024, 1024}};
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--reps" && i + 1 < argc) {
            reps = std::strtoull(argv[++i], nullptr, 10);
        } else if (a == "--pool-mb" && i + 1 < argc) {
            pool_mb = std::strtoull(argv[++i], nullptr, 10);
        } else if (a == "--only" && i + 1 < argc) {
            std::size_t m = 0, k = 0, n = 0;
            if (std::sscanf(argv[++i], "%zu,%zu,%zu", &m, &k, &n) != 3 || !m || !k || !n) {
                std::fprintf(stderr, "bench_gemm_shapes: --only takes M,K,N\n");
                return 2;
            }
            shapes = {{m, k, n}};
        } else {
            std::fprintf(stderr,
                         "usage: bench_gemm_shapes [--reps N] [--pool-mb M] [--only M,K,N]\n");
            return 2;
        }
    }
    reps = std::max<std::size_t>(reps, 1);
    openblas_set_num_threads(1);
    for (const auto& [m, k, n] : shapes) {
        const std::size_t count =
            std::max<std::size_t>(1, pool_mb * (std::size_t{1} << 20) / (4 * k * n));
        std::vector<float> a(m * k), c(m * n);
        for (std::size_t i = 0; i < a.size(); ++i) a[i] = float(i % 17) / 17.0f - 0.5f;
        std::vector<std::vector<float>> bs(count, std::vector<float>(k * n));
        for (std::size_t q = 0; q < count; ++q)
            for (std::size_t i = 0; i < k * n; ++i) bs[q][i] = float((i + q) % 13) / 13.0f - 0.5f;
        std::vector<PackedB> kept;
        for (const auto& b : bs)
            kept.push_back(ember::detail::cpu::gemm_prepack_b(false, k, n, b.data(), n));
        const std::string shape =
            "m" + std::to_string(m) + "_k" + std::to_string(k) + "_n" + std::to_string(n);
        for (const char* impl : {"ember", "ember_kept", "openblas"}) {
            const std::string which = impl;
            std::vector<double> times;
            for (std::size_t r = 0; r < reps + 1; ++r) {  // the first round warms up
                const double t0 = cpu_seconds();
                for (std::size_t q = 0; q < count; ++q) {
                    if (which == "ember")
                        ember::detail::cpu::gemm_portable(false, false, m, n, k, 1.0f, a.data(), k,
                                                          bs[q].data(), n, 0.0f, c.data(), n,
                                                          false);
                    else if (which == "ember_kept")
                        ember::detail::cpu::gemm_prepacked(false, m, n, k, 1.0f, a.data(), k,
                                                           kept[q], 0.0f, c.data(), n, false);
                    else
                        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(m), int(n),
                                    int(k), 1.0f, a.data(), int(k), bs[q].data(), int(n), 0.0f,
                                    c.data(), int(n));
                }
                if (r > 0) times.push_back((cpu_seconds() - t0) / double(count));
            }
            std::sort(times.begin(), times.end());
            const double med = times[times.size() / 2];
            std::printf(
                "{\"shape\": \"%s\", \"impl\": \"%s\", \"width\": %zu, \"ms\": %.4f, "
                "\"gflops\": %.1f, \"reps\": %zu, \"matrices\": %zu}\n",
                shape.c_str(), impl, kept.front().width, med * 1e3,
                2.0 * double(m) * double(n) * double(k) / med * 1e-9, reps, count);
            std::fflush(stdout);
        }
    }
    return 0;
}
