// The entry points of the kernel files compiled once per instruction set (isa.hpp): each calls
// the AVX2 copy on a processor with x86-64-v3's features, the baseline copy elsewhere. The
// choice is made once; EMBER_CPU_ISA=baseline forces the baseline copy (tests, comparisons).
#include "kernels.hpp"

#if defined(EMBER_CPU_ISA_DISPATCH)
#include <cstdlib>
#include <cstring>

namespace ember::detail::cpu {
namespace {

bool use_avx2() {
    static const bool yes = [] {
        if (const char* e = std::getenv("EMBER_CPU_ISA"); e && std::strcmp(e, "baseline") == 0)
            return false;
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
               __builtin_cpu_supports("f16c") && __builtin_cpu_supports("bmi") &&
               __builtin_cpu_supports("bmi2") && __builtin_cpu_supports("popcnt") &&
               __builtin_cpu_supports("movbe");
    }();
    return yes;
}

using Tensors3 = std::array<CpuTensor, 3>;
using TensorPair = std::pair<CpuTensor, CpuTensor>;
using Tensors2 = std::array<CpuTensor, 2>;
using Tensors4 = std::array<CpuTensor, 4>;

}  // namespace

// Declares `name` in both copies and defines the entry point that picks one.
#define EMBER_CPU_DISPATCH(ret, name, params, args)                        \
    namespace isa_baseline {                                               \
    ret name params;                                                       \
    }                                                                      \
    namespace isa_avx2 {                                                   \
    ret name params;                                                       \
    }                                                                      \
    ret name params {                                                      \
        return use_avx2() ? isa_avx2::name args : isa_baseline::name args; \
    }

// elementwise.cpp
EMBER_CPU_DISPATCH(CpuTensor, unary, (UnaryOp op, CpuTensor t), (op, std::move(t)))
EMBER_CPU_DISPATCH(CpuTensor, binary, (BinaryOp op, CpuTensor a, CpuTensor b),
                   (op, std::move(a), std::move(b)))
EMBER_CPU_DISPATCH(CpuTensor, binary_scalar, (BinaryOp op, CpuTensor a, Scalar s),
                   (op, std::move(a), s))
EMBER_CPU_DISPATCH(CpuTensor, compare, (CompareOp op, CpuTensor a, CpuTensor b),
                   (op, std::move(a), std::move(b)))
EMBER_CPU_DISPATCH(CpuTensor, compare_scalar, (CompareOp op, CpuTensor a, Scalar s),
                   (op, std::move(a), s))
EMBER_CPU_DISPATCH(CpuTensor, where, (CpuTensor mask, CpuTensor a, CpuTensor b),
                   (std::move(mask), std::move(a), std::move(b)))
EMBER_CPU_DISPATCH(CpuTensor, mask_fill, (CpuTensor t, CpuTensor mask, Scalar value),
                   (std::move(t), std::move(mask), value))
EMBER_CPU_DISPATCH(CpuTensor, clamp, (CpuTensor t, Scalar lo, Scalar hi), (std::move(t), lo, hi))
EMBER_CPU_DISPATCH(CpuTensor, powf_scalar, (CpuTensor t, double p), (std::move(t), p))

// reduce.cpp
EMBER_CPU_DISPATCH(CpuTensor, reduce_all, (ReduceOp op, CpuTensor t), (op, std::move(t)))
EMBER_CPU_DISPATCH(CpuTensor, reduce_dim, (ReduceOp op, CpuTensor t, std::size_t dim),
                   (op, std::move(t), dim))
EMBER_CPU_DISPATCH(CpuTensor, arg_reduce, (ArgReduceOp op, CpuTensor t, std::size_t dim),
                   (op, std::move(t), dim))
EMBER_CPU_DISPATCH(CpuTensor, softmax, (CpuTensor t, std::size_t dim), (std::move(t), dim))
EMBER_CPU_DISPATCH(CpuTensor, log_softmax, (CpuTensor t, std::size_t dim), (std::move(t), dim))

// norm.cpp
EMBER_CPU_DISPATCH(Tensors3, layer_norm,
                   (CpuTensor x, std::optional<CpuTensor> gamma, std::optional<CpuTensor> beta,
                    double eps),
                   (std::move(x), std::move(gamma), std::move(beta), eps))
EMBER_CPU_DISPATCH(std::optional<Tensors3>, layer_norm_backward,
                   (CpuTensor x, CpuTensor grad, std::optional<CpuTensor> gamma, CpuTensor mean,
                    CpuTensor rstd, std::optional<CpuTensor> acc),
                   (std::move(x), std::move(grad), std::move(gamma), std::move(mean),
                    std::move(rstd), std::move(acc)))
EMBER_CPU_DISPATCH(std::optional<Tensors4>, add_layer_norm,
                   (CpuTensor x, CpuTensor residual, std::optional<CpuTensor> gamma,
                    std::optional<CpuTensor> beta, double eps),
                   (std::move(x), std::move(residual), std::move(gamma), std::move(beta), eps))

// attention.cpp
EMBER_CPU_DISPATCH(Tensors2, attention_forward,
                   (CpuTensor q, CpuTensor k, CpuTensor v, bool causal, double scale),
                   (std::move(q), std::move(k), std::move(v), causal, scale))
EMBER_CPU_DISPATCH(Tensors3, attention_backward,
                   (CpuTensor q, CpuTensor k, CpuTensor v, CpuTensor out, const CpuTensor& lse,
                    CpuTensor dout, bool causal, double scale),
                   (std::move(q), std::move(k), std::move(v), std::move(out), lse, std::move(dout),
                    causal, scale))
EMBER_CPU_DISPATCH(Tensors2, attention_forward_packed,
                   (CpuTensor qkv, std::size_t heads, bool causal, double scale),
                   (std::move(qkv), heads, causal, scale))
EMBER_CPU_DISPATCH(CpuTensor, attention_backward_packed,
                   (CpuTensor qkv, CpuTensor out, const CpuTensor& lse, CpuTensor dout,
                    std::size_t heads, bool causal, double scale),
                   (std::move(qkv), std::move(out), lse, std::move(dout), heads, causal, scale))

// optim.cpp
EMBER_CPU_DISPATCH(Tensors3, adam_step,
                   (CpuTensor param, CpuTensor grad, CpuTensor m, CpuTensor v,
                    const AdamStepScalars& s),
                   (std::move(param), std::move(grad), std::move(m), std::move(v), s))

// pool.cpp
EMBER_CPU_DISPATCH(CpuTensor, avg_pool, (CpuTensor x, const PoolParams& p), (std::move(x), p))
EMBER_CPU_DISPATCH(TensorPair, max_pool_with_indices, (CpuTensor x, const PoolParams& p),
                   (std::move(x), p))
EMBER_CPU_DISPATCH(CpuTensor, adaptive_avg_pool,
                   (CpuTensor x, std::span<const std::size_t> output_size),
                   (std::move(x), output_size))
EMBER_CPU_DISPATCH(CpuTensor, interpolate,
                   (CpuTensor x, std::span<const std::size_t> output_size,
                    const InterpolateOptions& o),
                   (std::move(x), output_size, o))

#undef EMBER_CPU_DISPATCH

}  // namespace ember::detail::cpu
#endif
