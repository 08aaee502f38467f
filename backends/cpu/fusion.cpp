// Fused elementwise programs on the CPU (the FusionBackend side of Fusion<Cpu>). A program runs
// in one pass over tiles of the iteration space: for each tile, strided inputs are gathered,
// every instruction runs as a tight (vectorised) loop over the tile, and outputs are written
// straight to their tensors. A tile is small enough that all the program's registers stay in
// the core's caches, so a chain of k ops reads and writes main memory once instead of k times.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string_view>
#include <vector>

#include "elementwise_fns.hpp"
#include "ember/backend/cpu.hpp"
#include "ember/fusion/check.hpp"
#include "iter.hpp"
#include "kernels.hpp"
#include "parallel.hpp"

// x86-64 builds target AVX2; a second copy of the tile loops for AVX-512 is picked at run time.
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__AVX512F__) && !EMBER_FREESTANDING
#define EMBER_FUSION_AVX512 1
#define EMBER_FUSION_AVX512_TARGET __attribute__((target("avx512f,avx512vl,avx512dq,avx512bw")))
#else
#define EMBER_FUSION_AVX512 0
#endif
#if defined(__GNUC__)
#define EMBER_FUSION_INLINE inline __attribute__((always_inline))
#else
#define EMBER_FUSION_INLINE inline
#endif

namespace ember::detail::cpu {

/// A checked program, ready to launch.
struct FusedPlan {
    fusion::Program prog;
};

namespace {

using fusion::Instr;
using fusion::OpKind;
using fusion::Program;

constexpr std::size_t kTile = 512;          // elements per tile: 2-4 KiB a register
constexpr std::size_t kChunk = 64 * kTile;  // elements per parallel task

// Registers hold f32 (float), f64 (double), i64 (int64) or bool (uint8 0/1).
template <typename F>
decltype(auto) visit_reg(DType d, F&& f) {
    switch (d) {
        case DType::F32:
            return f(TypeTag<float>{});
        case DType::F64:
            return f(TypeTag<double>{});
        case DType::I64:
            return f(TypeTag<std::int64_t>{});
        default:
            return f(TypeTag<std::uint8_t>{});
    }
}

template <typename T>
T scalar_as(const Scalar& s) {
    if constexpr (std::is_floating_point_v<T>)
        return static_cast<T>(s.f);
    else
        return static_cast<T>(s.i);
}

// The tile loops. Each runs through a per-ISA entry point (Loops below) carrying the target
// attribute, into which the loop body and the element functor are inlined and vectorised.
template <typename A, typename R, typename Fn>
EMBER_FUSION_INLINE void map1(std::size_t n, const void* a, void* d, Fn f) {
    const A* __restrict x = static_cast<const A*>(a);
    R* __restrict y = static_cast<R*>(d);
    for (std::size_t i = 0; i < n; ++i) y[i] = f(x[i]);
}
template <typename A, typename B, typename R, typename Fn>
EMBER_FUSION_INLINE void map2(std::size_t n, const void* a, const void* b, void* d, Fn f) {
    const A* __restrict x = static_cast<const A*>(a);
    const B* __restrict z = static_cast<const B*>(b);
    R* __restrict y = static_cast<R*>(d);
    for (std::size_t i = 0; i < n; ++i) y[i] = f(x[i], z[i]);
}
template <typename T>
EMBER_FUSION_INLINE void map_where(std::size_t n, const void* m, const void* a, const void* b,
                                   void* d) {
    const std::uint8_t* __restrict c = static_cast<const std::uint8_t*>(m);
    const T* __restrict x = static_cast<const T*>(a);
    const T* __restrict z = static_cast<const T*>(b);
    T* __restrict y = static_cast<T*>(d);
    for (std::size_t i = 0; i < n; ++i) y[i] = select(c[i] != 0, x[i], z[i]);
}

// The loops for the build's own target (AVX2 on x86-64 builds).
struct NativeLoops {
    template <typename A, typename R, typename Fn>
    static void loop1(std::size_t n, const void* a, void* d, Fn f) {
        map1<A, R>(n, a, d, f);
    }
    template <typename A, typename B, typename R, typename Fn>
    static void loop2(std::size_t n, const void* a, const void* b, void* d, Fn f) {
        map2<A, B, R>(n, a, b, d, f);
    }
    template <typename T>
    static void where(std::size_t n, const void* m, const void* a, const void* b, void* d) {
        map_where<T>(n, m, a, b, d);
    }
};

#if EMBER_FUSION_AVX512
// The same loops compiled for AVX-512, picked at run time: twice the vector width of the
// build's AVX2, which halves the cost of compute-bound chains such as erf's polynomials.
struct Avx512Loops {
    template <typename A, typename R, typename Fn>
    EMBER_FUSION_AVX512_TARGET static void loop1(std::size_t n, const void* a, void* d, Fn f) {
        map1<A, R>(n, a, d, f);
    }
    template <typename A, typename B, typename R, typename Fn>
    EMBER_FUSION_AVX512_TARGET static void loop2(std::size_t n, const void* a, const void* b,
                                                 void* d, Fn f) {
        map2<A, B, R>(n, a, b, d, f);
    }
    template <typename T>
    EMBER_FUSION_AVX512_TARGET static void where(std::size_t n, const void* m, const void* a,
                                                 const void* b, void* d) {
        map_where<T>(n, m, a, b, d);
    }
};
#endif

// One instruction over one tile of n elements; `r` holds every register's tile pointer.
template <typename L>
void exec(const Program& p, const Instr& in, std::size_t n, void* const* r, void* dst,
          std::span<const Scalar> sc) {
    const void* a = r[in.a];
    const void* b = r[in.b];
    const void* c = r[in.c];
    const DType da = p.reg_dtype(in.a);
    switch (in.kind) {
        case OpKind::Unary: {
            const auto op = static_cast<UnaryOp>(in.code);
            if (op == UnaryOp::Not)
                return L::template loop1<std::uint8_t, std::uint8_t>(
                    n, a, dst, [](std::uint8_t x) { return static_cast<std::uint8_t>(x == 0); });
            return visit_reg(da, [&]<typename T>(TypeTag<T>) {
                if constexpr (std::is_floating_point_v<T>) {
                    if (op == UnaryOp::IsNan)
                        return L::template loop1<T, std::uint8_t>(
                            n, a, dst, [](T x) { return static_cast<std::uint8_t>(x != x); });
                }
                if constexpr (!std::is_same_v<T, std::uint8_t>)
                    with_unary_fn<T>(op, [&](auto f) { L::template loop1<T, T>(n, a, dst, f); });
            });
        }
        case OpKind::Binary: {
            const auto op = static_cast<BinaryOp>(in.code);
            if (da == DType::Bool) {
                using U = std::uint8_t;
                if (op == BinaryOp::And)
                    return L::template loop2<U, U, U>(n, a, b, dst,
                                                      [](U x, U y) { return U(x & y); });
                if (op == BinaryOp::Or)
                    return L::template loop2<U, U, U>(n, a, b, dst,
                                                      [](U x, U y) { return U(x | y); });
                return L::template loop2<U, U, U>(n, a, b, dst, [](U x, U y) { return U(x ^ y); });
            }
            return visit_reg(da, [&]<typename T>(TypeTag<T>) {
                if constexpr (!std::is_same_v<T, std::uint8_t>)
                    with_binary_fn<T>(op,
                                      [&](auto f) { L::template loop2<T, T, T>(n, a, b, dst, f); });
            });
        }
        case OpKind::BinaryScalar: {
            const auto op = static_cast<BinaryOp>(in.code);
            return visit_reg(da, [&]<typename T>(TypeTag<T>) {
                if constexpr (!std::is_same_v<T, std::uint8_t>) {
                    const T v = scalar_as<T>(sc[in.s0]);
                    if constexpr (std::is_floating_point_v<T>) {
                        if (op == BinaryOp::Div && exact_reciprocal(v)) {  // as the unfused kernel
                            const T r = T(1) / v;
                            return L::template loop1<T, T>(n, a, dst, [r](T x) { return x * r; });
                        }
                    }
                    with_binary_fn<T>(op, [&](auto f) {
                        L::template loop1<T, T>(n, a, dst, [f, v](T x) { return f(x, v); });
                    });
                }
            });
        }
        case OpKind::Compare: {
            const auto op = static_cast<CompareOp>(in.code);
            return visit_reg(da, [&]<typename T>(TypeTag<T>) {
                with_compare_fn<T>(op, [&](auto f) {
                    L::template loop2<T, T, std::uint8_t>(
                        n, a, b, dst, [f](T x, T y) { return static_cast<std::uint8_t>(f(x, y)); });
                });
            });
        }
        case OpKind::CompareScalar: {
            const auto op = static_cast<CompareOp>(in.code);
            return visit_reg(da, [&]<typename T>(TypeTag<T>) {
                // As the unfused kernel: floats compare in double unless the scalar is exactly
                // a float, so that `x > 0.1` means what it says.
                if constexpr (std::is_same_v<T, float>) {
                    const double v = sc[in.s0].f;
                    if (static_cast<double>(static_cast<float>(v)) == v) {
                        const float vf = static_cast<float>(v);
                        return with_compare_fn<float>(op, [&](auto f) {
                            L::template loop1<float, std::uint8_t>(n, a, dst, [f, vf](float x) {
                                return static_cast<std::uint8_t>(f(x, vf));
                            });
                        });
                    }
                    return with_compare_fn<double>(op, [&](auto f) {
                        L::template loop1<float, std::uint8_t>(n, a, dst, [f, v](float x) {
                            return static_cast<std::uint8_t>(f(static_cast<double>(x), v));
                        });
                    });
                } else {
                    const T v = scalar_as<T>(sc[in.s0]);
                    with_compare_fn<T>(op, [&](auto f) {
                        L::template loop1<T, std::uint8_t>(
                            n, a, dst, [f, v](T x) { return static_cast<std::uint8_t>(f(x, v)); });
                    });
                }
            });
        }
        case OpKind::Where:  // a: mask, b: where true, c: where false
            return visit_reg(p.reg_dtype(in.b), [&]<typename T>(TypeTag<T>) {
                L::template where<T>(n, a, b, c, dst);
            });
        case OpKind::MaskFill:
            return visit_reg(da, [&]<typename T>(TypeTag<T>) {
                const T v = scalar_as<T>(sc[in.s0]);
                L::template loop2<T, std::uint8_t, T>(
                    n, a, b, dst, [v](T x, std::uint8_t m) { return select(m != 0, v, x); });
            });
        case OpKind::Clamp:
            return visit_reg(da, [&]<typename T>(TypeTag<T>) {
                const T lo = scalar_as<T>(sc[in.s0]), hi = scalar_as<T>(sc[in.s1]);
                L::template loop1<T, T>(n, a, dst,
                                        [lo, hi](T x) { return nan_min(nan_max(x, lo), hi); });
            });
        case OpKind::Cast:
            return visit_reg(da, [&]<typename S>(TypeTag<S>) {
                visit_reg(in.dtype, [&]<typename D>(TypeTag<D>) {
                    L::template loop1<S, D>(n, a, dst, [](S x) { return static_cast<D>(x); });
                });
            });
    }
}

// One instruction over one tile, for one set of loops (one instruction set).
using ExecFn = void (*)(const Program&, const Instr&, std::size_t, void* const*, void*,
                        std::span<const Scalar>);

struct FusionKernel {
    std::string_view name;
    ExecFn exec;
    bool (*available)();
};

constexpr FusionKernel kKernels[] = {
#if EMBER_FUSION_AVX512
    {"avx512", exec<Avx512Loops>,
     [] {
         return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
                __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw");
     }},
#endif
    {"native", exec<NativeLoops>, [] { return true; }},
};

// The first kernel this processor has, among those `wanted` names ("auto": any).
const FusionKernel* choose_kernel(std::string_view wanted) {
    for (const auto& k : kKernels)
        if ((wanted == "auto" || wanted == k.name) && k.available()) return &k;
    return nullptr;
}

std::atomic<const FusionKernel*>& current_kernel() {
    static std::atomic<const FusionKernel*> k{[] {
        const char* env = std::getenv("EMBER_FUSION_KERNEL");
        const FusionKernel* chosen = env ? choose_kernel(env) : nullptr;
        return chosen ? chosen : choose_kernel("auto");
    }()};
    return k;
}

// Copies elements [begin, begin + n) of `t` (row-major over `shape`, t's strides) into dst.
void gather(const CpuTensor& t, const Shape& shape, std::size_t begin, std::size_t n, void* dst) {
    const std::size_t es = dtype_size(t.dtype), rank = shape.rank();
    const auto* base = static_cast<const unsigned char*>(t.storage->data) +
                       t.offset * static_cast<std::int64_t>(es);
    auto* out = static_cast<unsigned char*>(dst);
    if (rank == 0) {
        for (std::size_t i = 0; i < n; ++i) std::memcpy(out + i * es, base, es);
        return;
    }
    std::array<std::size_t, kMaxRank> idx{};
    std::size_t rest = begin;
    std::int64_t off = 0;
    for (std::size_t d = rank; d-- > 0;) {
        idx[d] = rest % shape[d];
        rest /= shape[d];
        off += static_cast<std::int64_t>(idx[d]) * t.strides[d];
    }
    const std::size_t last = rank - 1, inner = shape[last];
    const std::int64_t st = t.strides[last];
    std::size_t done = 0;
    while (done < n) {
        const std::size_t run = std::min(n - done, inner - idx[last]);
        const unsigned char* src = base + off * static_cast<std::int64_t>(es);
        if (st == 1) {
            std::memcpy(out + done * es, src, run * es);
        } else {
            for (std::size_t k = 0; k < run; ++k)
                std::memcpy(out + (done + k) * es,
                            src + static_cast<std::int64_t>(k) * st * static_cast<std::int64_t>(es),
                            es);
        }
        done += run;
        off += static_cast<std::int64_t>(run) * st;
        idx[last] += run;
        // Carry into the outer dims.
        for (std::size_t d = last; d > 0 && idx[d] == shape[d]; --d) {
            off -= static_cast<std::int64_t>(idx[d]) * t.strides[d];
            idx[d] = 0;
            ++idx[d - 1];
            off += t.strides[d - 1];
        }
    }
}

}  // namespace

std::shared_ptr<const FusedPlan> fused_compile(const Program& p) {
    fusion::check_program(p, kMaxRank);
    auto plan = std::make_shared<FusedPlan>();
    plan->prog = p;
    return plan;
}

std::vector<CpuTensor> fused_launch(const FusedPlan& plan, std::vector<CpuTensor> inputs,
                                    std::span<const Scalar> sc, const Shape& shape) {
    const Program& p = plan.prog;
    const std::size_t n_in = p.inputs.size(), n_regs = n_in + p.instrs.size();
    EMBER_CHECK(inputs.size() == n_in, Argument, "fused program: ", n_in, " inputs expected, got ",
                inputs.size());
    for (std::size_t k = 0; k < n_in; ++k)
        EMBER_CHECK(inputs[k].shape == shape && inputs[k].dtype == p.inputs[k].dtype, Shape,
                    "fused program: input ", k, " is ", inputs[k].shape.to_string(), " ",
                    dtype_name(inputs[k].dtype), ", expected ", shape.to_string(), " ",
                    dtype_name(p.inputs[k].dtype));
    std::vector<CpuTensor> outs;
    std::vector<int> out_of(n_regs, -1);
    for (std::size_t k = 0; k < p.outputs.size(); ++k) {
        out_of[p.outputs[k]] = static_cast<int>(k);
        outs.push_back(empty(shape, p.reg_dtype(p.outputs[k])));
    }
    std::vector<bool> dense(n_in);
    for (std::size_t k = 0; k < n_in; ++k) dense[k] = inputs[k].is_contiguous();
    const std::size_t n = shape.num_elements();
    if (n == 0) return outs;

    const ExecFn exec_fn = current_kernel().load()->exec;
    parallel_for(n, kChunk, [&](std::size_t begin, std::size_t end) {
        // Scratch for the registers that are neither dense inputs nor outputs: 8 bytes an
        // element covers every register type.
        std::vector<std::uint64_t> scratch(n_regs * kTile);
        std::vector<void*> r(n_regs);
        for (std::size_t t0 = begin; t0 < end; t0 += kTile) {
            const std::size_t len = std::min(kTile, end - t0);
            for (std::size_t k = 0; k < n_regs; ++k) {
                void* own = scratch.data() + k * kTile;
                if (k < n_in) {
                    const CpuTensor& in = inputs[k];
                    if (dense[k]) {
                        r[k] = const_cast<std::byte*>(in.bytes()) + t0 * dtype_size(in.dtype);
                    } else {
                        gather(in, shape, t0, len, own);
                        r[k] = own;
                    }
                } else if (out_of[k] >= 0) {
                    const CpuTensor& o = outs[static_cast<std::size_t>(out_of[k])];
                    r[k] = o.bytes() + t0 * dtype_size(o.dtype);
                } else {
                    r[k] = own;
                }
            }
            for (std::size_t i = 0; i < p.instrs.size(); ++i)
                exec_fn(p, p.instrs[i], len, r.data(), r[n_in + i], sc);
        }
    });
    return outs;
}

}  // namespace ember::detail::cpu

std::string_view ember::cpu::fusion_kernel() {
    return detail::cpu::current_kernel().load()->name;
}

bool ember::cpu::set_fusion_kernel(std::string_view name) {
    const detail::cpu::FusionKernel* k = detail::cpu::choose_kernel(name);
    if (!k) return false;
    detail::cpu::current_kernel().store(k);
    return true;
}
