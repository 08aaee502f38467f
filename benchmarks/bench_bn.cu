// bench_bn: the channels-last batch-norm launches (backends/cuda/batch_norm.cu, compiled into
// this program) at ResNet-18's four shapes (batch 256: C 64 at 32×32, 128 at 16×16, 256 at 8×8,
// 512 at 4×4), each variant the training step uses: the forward (statistics + normalise) plain,
// with the ReLU, with residual + ReLU; the backward plain, with the ReLU's mask read from the
// output or recomputed, with the residual's gradient. Each launch is replayed from a CUDA graph
// of `--reps` launches (as the captured training step runs them) and timed with events, the
// data hot (one set of buffers, L2-resident where it fits) or cold (rotating through sets of
// buffers larger than L2). The same program runs the earlier kernels (--tiled 0) and the tiled
// ones (--tiled 1), and checks that both give the same results. One JSON line a measurement:
//   bench_bn [--dtype bf16|f32] [--tiled 0|1] [--reps N] [--rounds N] [--round R]
//            [--bps N] [--min-rows N] [--max-splits N] [--ew-bps N] [--min-tiles N] [--check]
//            [--label S]
// Build: nvcc -O3 -std=c++20 -arch=sm_90 -Iinclude -Ibackends/cuda benchmarks/bench_bn.cu
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "batch_norm.cu"

namespace ember::detail::cuda {
void check_launch(const char* kernel) {
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) {
        std::fprintf(stderr, "bench_bn: %s: %s\n", kernel, cudaGetErrorString(e));
        std::exit(1);
    }
}
}  // namespace ember::detail::cuda

namespace {
namespace k = ember::detail::cuda;

#define CK(x)                                                                                \
    do {                                                                                     \
        cudaError_t e_ = (x);                                                                \
        if (e_ != cudaSuccess) {                                                             \
            std::fprintf(stderr, "bench_bn: %s: %s (line %d)\n", #x, cudaGetErrorString(e_), \
                         __LINE__);                                                          \
            std::exit(1);                                                                    \
        }                                                                                    \
    } while (0)

__global__ void fill_kernel(float* out, std::int64_t n, unsigned seed, float mean, float sd) {
    for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<std::int64_t>(blockDim.x) * gridDim.x) {
        unsigned h = static_cast<unsigned>(i) * 2654435761u ^ seed * 0x9e3779b9u;
        h ^= h >> 15;
        h *= 0x85ebca6bu;
        h ^= h >> 13;
        const float u = (h & 0xffffff) / 16777216.0f;
        out[i] = mean + sd * (u - 0.5f) * 3.4641f;
    }
}
template <typename T>
__global__ void convert_kernel(const float* in, T* out, std::int64_t n) {
    for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<std::int64_t>(blockDim.x) * gridDim.x)
        out[i] = T(in[i]);
}
template <typename T>
__global__ void to_float_kernel(const T* in, float* out, std::int64_t n) {
    for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<std::int64_t>(blockDim.x) * gridDim.x)
        out[i] = static_cast<float>(in[i]);
}

struct Shape {
    int c, hw;
    const char* name;
};
const Shape kShapes[] = {{64, 1024, "C=64 32x32"},
                         {128, 256, "C=128 16x16"},
                         {256, 64, "C=256 8x8"},
                         {512, 16, "C=512 4x4"}};
constexpr int kN = 256;

enum class Op { Fwd, FwdRelu, FwdAddRelu, Bwd, BwdRelu, BwdReluRecompute, BwdAddRelu };
const char* op_name(Op o) {
    switch (o) {
        case Op::Fwd:
            return "forward";
        case Op::FwdRelu:
            return "forward relu";
        case Op::FwdAddRelu:
            return "forward add+relu";
        case Op::Bwd:
            return "backward";
        case Op::BwdRelu:
            return "backward relu";
        case Op::BwdReluRecompute:
            return "backward relu (mask recomputed)";
        default:
            return "backward add+relu";
    }
}

/// One set of buffers of a shape (elements of type T; per-channel vectors f32).
struct Set {
    void *x, *y, *res, *dy, *out, *dx, *dres;
    float *gamma, *beta, *rm, *rv, *mean, *rstd, *rm_out, *rv_out, *dgamma, *dbeta, *coef, *part;
};

template <typename T>
struct Bench {
    Shape sh;
    std::int64_t elems;
    std::vector<Set> sets;
    int splits = 1;

    void alloc(int nsets) {
        elems = static_cast<std::int64_t>(kN) * sh.c * sh.hw;
        const std::size_t bytes = elems * sizeof(T);
        float* tmp;
        CK(cudaMalloc(&tmp, elems * sizeof(float)));
        const std::int64_t c = sh.c;
        for (int i = 0; i < nsets; ++i) {
            Set s{};
            void** big[] = {&s.x, &s.y, &s.res, &s.dy, &s.out, &s.dx, &s.dres};
            for (void** p : big) CK(cudaMalloc(p, bytes));
            float** small[] = {&s.gamma, &s.beta,   &s.rm,     &s.rv,     &s.mean,
                               &s.rstd,  &s.rm_out, &s.rv_out, &s.dgamma, &s.dbeta};
            for (float** p : small) CK(cudaMalloc(p, c * sizeof(float)));
            CK(cudaMalloc(&s.coef, 3 * c * sizeof(float)));
            CK(cudaMalloc(&s.part, 2 * c * 1024 * sizeof(float)));
            auto fill = [&](void* dst, unsigned seed, float mean, float sd) {
                fill_kernel<<<1024, 256>>>(tmp, elems, seed, mean, sd);
                convert_kernel<T><<<1024, 256>>>(tmp, static_cast<T*>(dst), elems);
            };
            fill(s.x, 1 + i, 0.5f, 2.f);
            fill(s.res, 2 + i, 0.f, 1.f);
            fill(s.dy, 3 + i, 0.f, 1.f);
            fill(s.out, 4 + i, 0.f, 1.f);  // the forward's output: half of it positive
            fill_kernel<<<4, 256>>>(s.gamma, c, 5, 1.f, 0.3f);
            fill_kernel<<<4, 256>>>(s.beta, c, 6, 0.f, 0.3f);
            fill_kernel<<<4, 256>>>(s.rm, c, 7, 0.f, 0.1f);
            fill_kernel<<<4, 256>>>(s.rv, c, 8, 1.f, 0.1f);
            fill_kernel<<<4, 256>>>(s.mean, c, 9, 0.5f, 0.1f);
            fill_kernel<<<4, 256>>>(s.rstd, c, 10, 0.5f, 0.05f);
            sets.push_back(s);
        }
        CK(cudaDeviceSynchronize());
        CK(cudaFree(tmp));
    }

    k::BatchNormShape geometry(Op o, const Set& s) const {
        k::BatchNormShape g;
        g.n = kN;
        g.c = sh.c;
        g.hw = sh.hw;
        g.channels_last = true;
        g.vec4 = sh.hw % 4 == 0;
        g.splits = k::batch_norm_splits(g.n, g.c, g.hw, true, sizeof(T));
        if (o == Op::FwdRelu || o == Op::FwdAddRelu) g.relu = true;
        if (o == Op::FwdAddRelu) g.residual = s.res;
        if (o == Op::BwdRelu || o == Op::BwdReluRecompute || o == Op::BwdAddRelu) {
            g.relu = true;
            g.out = s.out;
        }
        if (o == Op::BwdReluRecompute) g.beta = s.beta;
        if (o == Op::BwdAddRelu) g.dresidual = s.dres;
        return g;
    }

    void launch(Op o, const Set& s, cudaStream_t st) {
        const k::BatchNormShape g = geometry(o, s);
        splits = g.splits;
        const ember::DType t = sizeof(T) == 2 ? ember::DType::BF16 : ember::DType::F32;
        if (o == Op::Fwd || o == Op::FwdRelu || o == Op::FwdAddRelu)
            k::launch_batch_norm_forward(t, g, s.x, s.gamma, s.beta, s.rm, s.rv, 1e-5, 0.1, s.part,
                                         s.mean, s.rstd, s.rm_out, s.rv_out, s.y, st);
        else
            k::launch_batch_norm_backward(t, g, s.x, s.dy, s.gamma, s.mean, s.rstd, s.part, s.coef,
                                          s.dgamma, s.dbeta, s.dx, st);
    }

    /// Microseconds a launch, replayed from a graph of `reps` launches (cycling through the
    /// first `use` sets), the best of 5 replays.
    double time(Op o, int reps, int use, cudaStream_t st) {
        cudaGraph_t graph;
        cudaGraphExec_t exec;
        CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
        for (int r = 0; r < reps; ++r) launch(o, sets[r % use], st);
        CK(cudaStreamEndCapture(st, &graph));
        CK(cudaGraphInstantiate(&exec, graph, 0));
        cudaEvent_t a, b;
        CK(cudaEventCreate(&a));
        CK(cudaEventCreate(&b));
        CK(cudaGraphLaunch(exec, st));
        double best = 1e30;
        for (int i = 0; i < 5; ++i) {
            CK(cudaEventRecord(a, st));
            CK(cudaGraphLaunch(exec, st));
            CK(cudaEventRecord(b, st));
            CK(cudaEventSynchronize(b));
            float ms = 0;
            CK(cudaEventElapsedTime(&ms, a, b));
            best = std::min(best, 1000.0 * ms / reps);
        }
        CK(cudaGraphExecDestroy(exec));
        CK(cudaGraphDestroy(graph));
        CK(cudaEventDestroy(a));
        CK(cudaEventDestroy(b));
        return best;
    }

    std::vector<float> host(const void* p, std::int64_t n, bool typed) {
        std::vector<float> out(n);
        float* tmp;
        CK(cudaMalloc(&tmp, n * sizeof(float)));
        if (typed)
            to_float_kernel<T><<<1024, 256>>>(static_cast<const T*>(p), tmp, n);
        else
            CK(cudaMemcpy(tmp, p, n * sizeof(float), cudaMemcpyDeviceToDevice));
        CK(cudaMemcpy(out.data(), tmp, n * sizeof(float), cudaMemcpyDeviceToHost));
        CK(cudaFree(tmp));
        return out;
    }
};

double max_rel(const std::vector<float>& a, const std::vector<float>& b) {
    double m = 0, scale = 1e-6;
    for (std::size_t i = 0; i < a.size(); ++i) scale = std::max(scale, std::fabs((double)b[i]));
    for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs((double)a[i] - b[i]));
    return m / scale;
}

template <typename T>
int run(int argc, char** argv) {
    int reps = 50, rounds = 1, round0 = 1;
    bool check = false;
    std::string label = "";
    const char* dtype = sizeof(T) == 2 ? "bf16" : "f32";
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string a = argv[i];
        const char* v = argv[i + 1];
        if (a == "--tiled")
            k::g_cl_tuning.tiled = std::atoi(v) != 0;
        else if (a == "--reps")
            reps = std::atoi(v);
        else if (a == "--rounds")
            rounds = std::atoi(v);
        else if (a == "--round")
            round0 = std::atoi(v);
        else if (a == "--bps")
            k::g_cl_tuning.blocks_per_sm = std::atoi(v);
        else if (a == "--min-rows")
            k::g_cl_tuning.min_rows = std::atoi(v);
        else if (a == "--max-splits")
            k::g_cl_tuning.max_splits = std::atoi(v);
        else if (a == "--ew-bps")
            k::g_cl_tuning.ew_blocks_per_sm = std::atoi(v);
        else if (a == "--min-tiles")
            k::g_cl_tuning.min_tiles = std::atoi(v);
        else if (a == "--check")
            check = std::atoi(v) != 0;
        else if (a == "--label")
            label = v;
    }
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    const Op ops[] = {Op::Fwd,     Op::FwdRelu,          Op::FwdAddRelu, Op::Bwd,
                      Op::BwdRelu, Op::BwdReluRecompute, Op::BwdAddRelu};
    const bool tiled = k::g_cl_tuning.tiled;
    for (const Shape& sh : kShapes) {
        Bench<T> b{sh};
        const std::size_t set_bytes = 7 * static_cast<std::size_t>(kN) * sh.c * sh.hw * sizeof(T);
        const int nsets = static_cast<int>(std::max<std::size_t>(2, (400u << 20) / set_bytes + 1));
        b.alloc(nsets);
        if (check) {
            // The tiled kernels against the earlier ones, on the same data.
            for (const Op o : ops) {
                const bool fwd = o == Op::Fwd || o == Op::FwdRelu || o == Op::FwdAddRelu;
                std::vector<std::vector<float>> got[2];
                for (int tl = 0; tl < 2; ++tl) {
                    k::g_cl_tuning.tiled = tl != 0;
                    b.launch(o, b.sets[0], st);
                    b.launch(o, b.sets[0], st);  // twice: the tickets were reset
                    CK(cudaStreamSynchronize(st));
                    const Set& s = b.sets[0];
                    if (fwd)
                        got[tl] = {b.host(s.y, b.elems, true), b.host(s.mean, sh.c, false),
                                   b.host(s.rstd, sh.c, false), b.host(s.rm_out, sh.c, false),
                                   b.host(s.rv_out, sh.c, false)};
                    else
                        got[tl] = {b.host(s.dx, b.elems, true), b.host(s.dgamma, sh.c, false),
                                   b.host(s.dbeta, sh.c, false)};
                    if (o == Op::BwdAddRelu) got[tl].push_back(b.host(s.dres, b.elems, true));
                }
                k::g_cl_tuning.tiled = tiled;
                std::printf("{\"check\": \"%s %s %s\", \"max_rel_diff\": [", op_name(o), sh.name,
                            dtype);
                for (std::size_t i = 0; i < got[0].size(); ++i)
                    std::printf("%s%.3g", i ? ", " : "", max_rel(got[1][i], got[0][i]));
                std::printf("]}\n");
            }
        }
        for (int r = 0; r < rounds; ++r)
            for (const char* cache : {"hot", "cold"})
                for (const Op o : ops) {
                    const double us = b.time(o, reps, cache[0] == 'h' ? 1 : nsets, st);
                    std::printf(
                        "{\"workload\": \"bn %s %s %s %s\", \"impl\": \"ember\", \"unit\": \"us\", "
                        "\"value\": %.3f, \"build\": \"%s\", \"round\": %d, \"splits\": %d, "
                        "\"gpu\": \"%s\", \"bps\": %d, \"min_rows\": %d, \"max_splits\": %d, "
                        "\"ew_bps\": %d, \"label\": \"%s\"}\n",
                        op_name(o), sh.name, dtype, cache, us, tiled ? "after" : "before",
                        round0 + r, b.splits, prop.name, k::g_cl_tuning.blocks_per_sm,
                        k::g_cl_tuning.min_rows, k::g_cl_tuning.max_splits,
                        k::g_cl_tuning.ew_blocks_per_sm, label.c_str());
                    std::fflush(stdout);
                }
        for (Set& s : b.sets) {
            void* ps[] = {s.x,      s.y,      s.res,   s.dy,   s.out,  s.dx,   s.dres,
                          s.gamma,  s.beta,   s.rm,    s.rv,   s.mean, s.rstd, s.rm_out,
                          s.rv_out, s.dgamma, s.dbeta, s.coef, s.part};
            for (void* p : ps) CK(cudaFree(p));
        }
    }
    return 0;
}
}  // namespace

int main(int argc, char** argv) {
    for (int i = 1; i + 1 < argc; i += 2)
        if (std::strcmp(argv[i], "--dtype") == 0 && std::strcmp(argv[i + 1], "f32") == 0)
            return run<float>(argc, argv);
    return run<__nv_bfloat16>(argc, argv);
}
