// Fused elementwise programs on the CPU (the FusionBackend side of Fusion<Cpu>). A program runs
// in one pass over tiles of the iteration space: for each tile, strided inputs are gathered,
// every instruction runs as a tight (vectorised) loop over the tile, and outputs are written
// straight to their tensors. A tile is small enough that all the program's registers stay in
// the core's caches, so a chain of k ops reads and writes main memory once instead of k times.
// Each instruction is resolved to its loop once per launch (a Step), and the loops exist for
// the build's target and, on x86-64, for AVX-512, chosen at run time.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <limits>
#include <memory>
#include <new>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "elementwise_fns.hpp"
#include "ember/backend/cpu.hpp"
#include "ember/tensor/fusion_check.hpp"
#include "iter.hpp"
#include "kernels.hpp"
#include "parallel.hpp"

// x86-64 builds target AVX2; a second copy of the tile loops for AVX-512 is picked at run time.
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__AVX512F__) && !EMBER_FREESTANDING
#define EMBER_FUSION_AVX512 1
#define EMBER_FUSION_AVX512_TARGET __attribute__((target("avx512f,avx512vl,avx512dq,avx512bw")))
#include <immintrin.h>
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
    /// Runs of instructions [first, last] that can run as chains (see Chain below).
    std::vector<std::pair<std::size_t, std::size_t>> chains;
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

// One instruction of a program bound to its loop: resolved once per launch, so that each tile
// costs one indirect call per instruction rather than a walk through the op and type switches.
struct Chain;
struct Step {
    using Run = void (*)(const Step&, std::size_t n, const void* a, const void* b, const void* c,
                         void* d);
    using ChainRun = void (*)(const Chain&, std::size_t n, void* const* regs, void* d);
    Run run = nullptr;
    std::uint32_t a = 0, b = 0, c = 0;  // operand registers
    std::uint32_t dst = 0;              // the register written
    // A chain of instructions run as one (run is then unused).
    const Chain* chain = nullptr;
    ChainRun chain_run = nullptr;
    // The element functor (a lambda and the scalars it captured), trivially copyable.
    alignas(16) unsigned char fn[48] = {};

    template <typename Fn>
    const Fn& functor() const {
        return *std::launder(reinterpret_cast<const Fn*>(fn));
    }
};

// A chain: consecutive f32 instructions, each reading the one before it as its only use, run
// vector by vector with the value kept in registers; only the last result is stored. Each link
// is one IEEE operation, the same as the unfused kernel's, so the bits are the same; what goes
// is a store and a load of the tile per link (on Zen 4, a 64-byte store takes two cycles, as
// long as the arithmetic of a simple link).
struct ChainOp {
    enum Kind : std::uint8_t {
        AddS, SubS, RSubS, MulS, DivS, RDivS,  // with a scalar (RSub: s - v)
        AddR, SubR, RSubR, MulR, DivR, RDivR,  // with another register (RSub: r - v)
        Neg, Erf
    };
    Kind kind = AddS;
    float s = 0;          // the scalar
    std::uint32_t r = 0;  // the register
};
struct Chain {
    static constexpr std::size_t kMax = 32;
    std::uint32_t src = 0;  // the register the chain starts from
    std::size_t n = 0;
    ChainOp ops[kMax];
};

// The loops for the build's own target (AVX2 on x86-64 builds).
struct NativeLoops {
    template <typename A, typename R, typename Fn>
    static void loop1(const Step& s, std::size_t n, const void* a, const void*, const void*,
                      void* d) {
        map1<A, R>(n, a, d, s.functor<Fn>());
    }
    template <typename A, typename B, typename R, typename Fn>
    static void loop2(const Step& s, std::size_t n, const void* a, const void* b, const void*,
                      void* d) {
        map2<A, B, R>(n, a, b, d, s.functor<Fn>());
    }
    template <typename T>
    static void where(const Step&, std::size_t n, const void* m, const void* a, const void* b,
                      void* d) {
        map_where<T>(n, m, a, b, d);
    }
};

#if EMBER_FUSION_AVX512
// fast_erf on 16 floats: the same operations in the same order, so the same bits, but its
// clamps as min/max instructions where the compiler makes compare-and-blend pairs of the
// scalar selects (a sixth of erf's time). maxps/minps return their second operand when either
// is NaN, so x goes second and NaN flows through as in fast_erf.
EMBER_FUSION_AVX512_TARGET inline __m512 erf16(__m512 x) {
    const __m512 xc = _mm512_min_ps(_mm512_set1_ps(4.0f), _mm512_max_ps(_mm512_set1_ps(-4.0f), x));
    const __m512 t = _mm512_mul_ps(xc, xc);
    __m512 p = _mm512_set1_ps(kErfP[0]);
    for (std::size_t k = 1; k < std::size(kErfP); ++k)
        p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(kErfP[k]));
    __m512 q = _mm512_set1_ps(kErfQ[0]);
    for (std::size_t k = 1; k < std::size(kErfQ); ++k)
        q = _mm512_fmadd_ps(q, t, _mm512_set1_ps(kErfQ[k]));
    const __m512 y = _mm512_div_ps(_mm512_mul_ps(xc, p), q);
    return _mm512_min_ps(_mm512_set1_ps(1.0f), _mm512_max_ps(_mm512_set1_ps(-1.0f), y));
}

// The same loops compiled for AVX-512, picked at run time: twice the vector width of the
// build's AVX2, which halves the cost of compute-bound chains such as erf's polynomials.
struct Avx512Loops {
    // f32 erf, 16 lanes at a time; the tail under a mask.
    EMBER_FUSION_AVX512_TARGET static void erf_f32(const Step&, std::size_t n, const void* a,
                                                   const void*, const void*, void* d) {
        const float* x = static_cast<const float*>(a);
        float* y = static_cast<float*>(d);
        std::size_t i = 0;
        for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, erf16(_mm512_loadu_ps(x + i)));
        if (i < n) {
            const auto m = static_cast<__mmask16>((1u << (n - i)) - 1);
            _mm512_mask_storeu_ps(y + i, m, erf16(_mm512_maskz_loadu_ps(m, x + i)));
        }
    }
    // The other register's vector q of a link (under the mask for the tail).
    template <int W>
    EMBER_FUSION_AVX512_TARGET static EMBER_FUSION_INLINE __m512 other(const float* r, int q,
                                                                      __mmask16 m) {
        return W == 1 ? _mm512_maskz_loadu_ps(m, r) : _mm512_loadu_ps(r + 16 * q);
    }
    template <int W>
    EMBER_FUSION_AVX512_TARGET static EMBER_FUSION_INLINE void link(const ChainOp& op,
                                                                   __m512 (&v)[W],
                                                                   void* const* regs,
                                                                   std::size_t i, __mmask16 m) {
        const __m512 s = _mm512_set1_ps(op.s);
        const float* r = static_cast<const float*>(regs[op.r]) + i;
// One operation on each of the W vectors (no lambdas: they would lose the target attribute).
#define EMBER_CHAIN_EACH(expr)                          \
    for (int q = 0; q < W; ++q) v[q] = (expr); \
    break
        switch (op.kind) {
            case ChainOp::AddS: EMBER_CHAIN_EACH(_mm512_add_ps(v[q], s));
            case ChainOp::SubS: EMBER_CHAIN_EACH(_mm512_sub_ps(v[q], s));
            case ChainOp::RSubS: EMBER_CHAIN_EACH(_mm512_sub_ps(s, v[q]));
            case ChainOp::MulS: EMBER_CHAIN_EACH(_mm512_mul_ps(v[q], s));
            case ChainOp::DivS: EMBER_CHAIN_EACH(_mm512_div_ps(v[q], s));
            case ChainOp::RDivS: EMBER_CHAIN_EACH(_mm512_div_ps(s, v[q]));
            case ChainOp::AddR: EMBER_CHAIN_EACH(_mm512_add_ps(v[q], other<W>(r, q, m)));
            case ChainOp::SubR: EMBER_CHAIN_EACH(_mm512_sub_ps(v[q], other<W>(r, q, m)));
            case ChainOp::RSubR: EMBER_CHAIN_EACH(_mm512_sub_ps(other<W>(r, q, m), v[q]));
            case ChainOp::MulR: EMBER_CHAIN_EACH(_mm512_mul_ps(v[q], other<W>(r, q, m)));
            case ChainOp::DivR: EMBER_CHAIN_EACH(_mm512_div_ps(v[q], other<W>(r, q, m)));
            case ChainOp::RDivR: EMBER_CHAIN_EACH(_mm512_div_ps(other<W>(r, q, m), v[q]));
            case ChainOp::Neg: EMBER_CHAIN_EACH(_mm512_xor_ps(v[q], _mm512_set1_ps(-0.0f)));
            case ChainOp::Erf: EMBER_CHAIN_EACH(erf16(v[q]));
        }
#undef EMBER_CHAIN_EACH
    }
    // A chain, W = 4 vectors of 16 at a time (four independent streams of work in flight hide
    // the latencies of the divisions and erf's polynomials); the tail under a mask, one vector
    // at a time.
    EMBER_FUSION_AVX512_TARGET static void chain(const Chain& ch, std::size_t n,
                                                 void* const* regs, void* d) {
        const float* x = static_cast<const float*>(regs[ch.src]);
        float* y = static_cast<float*>(d);
        std::size_t i = 0;
        for (; i + 64 <= n; i += 64) {
            __m512 v[4];
            for (int q = 0; q < 4; ++q) v[q] = _mm512_loadu_ps(x + i + 16 * q);
            for (std::size_t k = 0; k < ch.n; ++k) link<4>(ch.ops[k], v, regs, i, 0xffff);
            for (int q = 0; q < 4; ++q) _mm512_storeu_ps(y + i + 16 * q, v[q]);
        }
        for (; i < n; i += 16) {
            const auto m = n - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - i)) - 1);
            __m512 v[1] = {_mm512_maskz_loadu_ps(m, x + i)};
            for (std::size_t k = 0; k < ch.n; ++k) link<1>(ch.ops[k], v, regs, i, m);
            _mm512_mask_storeu_ps(y + i, m, v[0]);
        }
    }
    template <typename A, typename R, typename Fn>
    EMBER_FUSION_AVX512_TARGET static void loop1(const Step& s, std::size_t n, const void* a,
                                                 const void*, const void*, void* d) {
        map1<A, R>(n, a, d, s.functor<Fn>());
    }
    template <typename A, typename B, typename R, typename Fn>
    EMBER_FUSION_AVX512_TARGET static void loop2(const Step& s, std::size_t n, const void* a,
                                                 const void* b, const void*, void* d) {
        map2<A, B, R>(n, a, b, d, s.functor<Fn>());
    }
    template <typename T>
    EMBER_FUSION_AVX512_TARGET static void where(const Step&, std::size_t n, const void* m,
                                                 const void* a, const void* b, void* d) {
        map_where<T>(n, m, a, b, d);
    }
};
#endif

// Binds `s` to loop L::loop1 or L::loop2 over functor f.
template <typename L, typename A, typename R, typename Fn>
void bind1(Step& s, Fn f) {
    static_assert(std::is_trivially_copyable_v<Fn> && sizeof(Fn) <= sizeof(s.fn) &&
                  alignof(Fn) <= alignof(Step));
    ::new (static_cast<void*>(s.fn)) Fn(f);
    s.run = &L::template loop1<A, R, Fn>;
}
template <typename L, typename A, typename B, typename R, typename Fn>
void bind2(Step& s, Fn f) {
    static_assert(std::is_trivially_copyable_v<Fn> && sizeof(Fn) <= sizeof(s.fn) &&
                  alignof(Fn) <= alignof(Step));
    ::new (static_cast<void*>(s.fn)) Fn(f);
    s.run = &L::template loop2<A, B, R, Fn>;
}

// L's own f32 erf loop, where it has one (else erf runs as the generic loop over fast_erf).
template <typename L>
constexpr Step::Run vector_erf_loop() {
    if constexpr (requires { &L::erf_f32; })
        return &L::erf_f32;
    else
        return nullptr;
}

// Binds `st` to the loop and element functor of one instruction.
template <typename L>
void bind_into(Step& st, const Program& p, const Instr& in, std::span<const Scalar> sc) {
    const DType da = p.reg_dtype(in.a);
    switch (in.kind) {
        case OpKind::Unary: {
            const auto op = static_cast<UnaryOp>(in.code);
            if (op == UnaryOp::Not && da == DType::Bool)  // logical; on int registers bitwise
                return bind1<L, std::uint8_t, std::uint8_t>(
                    st, [](std::uint8_t x) { return static_cast<std::uint8_t>(x == 0); });
            return visit_reg(da, [&]<typename T>(TypeTag<T>) {
                if constexpr (std::is_floating_point_v<T>) {
                    if (op == UnaryOp::IsNan)
                        return bind1<L, T, std::uint8_t>(
                            st, [](T x) { return static_cast<std::uint8_t>(x != x); });
                }
                if constexpr (std::is_same_v<T, float>) {
                    if (op == UnaryOp::Erf && vector_erf_loop<L>()) {
                        st.run = vector_erf_loop<L>();
                        return;
                    }
                }
                if constexpr (!std::is_same_v<T, std::uint8_t>)
                    with_unary_fn<T>(op, [&](auto f) { bind1<L, T, T>(st, f); });
            });
        }
        case OpKind::Binary: {
            const auto op = static_cast<BinaryOp>(in.code);
            if (da == DType::Bool) {
                using U = std::uint8_t;
                if (op == BinaryOp::And)
                    return bind2<L, U, U, U>(st, [](U x, U y) { return U(x & y); });
                if (op == BinaryOp::Or)
                    return bind2<L, U, U, U>(st, [](U x, U y) { return U(x | y); });
                return bind2<L, U, U, U>(st, [](U x, U y) { return U(x ^ y); });
            }
            return visit_reg(da, [&]<typename T>(TypeTag<T>) {
                if constexpr (!std::is_same_v<T, std::uint8_t>)
                    with_binary_fn<T>(op, [&](auto f) { bind2<L, T, T, T>(st, f); });
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
                            return bind1<L, T, T>(st, [r](T x) { return x * r; });
                        }
                    }
                    with_binary_fn<T>(
                        op, [&](auto f) { bind1<L, T, T>(st, [f, v](T x) { return f(x, v); }); });
                }
            });
        }
        case OpKind::Compare: {
            const auto op = static_cast<CompareOp>(in.code);
            return visit_reg(da, [&]<typename T>(TypeTag<T>) {
                with_compare_fn<T>(op, [&](auto f) {
                    bind2<L, T, T, std::uint8_t>(
                        st, [f](T x, T y) { return static_cast<std::uint8_t>(f(x, y)); });
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
                            bind1<L, float, std::uint8_t>(st, [f, vf](float x) {
                                return static_cast<std::uint8_t>(f(x, vf));
                            });
                        });
                    }
                    return with_compare_fn<double>(op, [&](auto f) {
                        bind1<L, float, std::uint8_t>(st, [f, v](float x) {
                            return static_cast<std::uint8_t>(f(static_cast<double>(x), v));
                        });
                    });
                } else {
                    const T v = scalar_as<T>(sc[in.s0]);
                    with_compare_fn<T>(op, [&](auto f) {
                        bind1<L, T, std::uint8_t>(
                            st, [f, v](T x) { return static_cast<std::uint8_t>(f(x, v)); });
                    });
                }
            });
        }
        case OpKind::Where:  // a: mask, b: where true, c: where false
            return visit_reg(p.reg_dtype(in.b),
                             [&]<typename T>(TypeTag<T>) { st.run = &L::template where<T>; });
        case OpKind::MaskFill:
            return visit_reg(da, [&]<typename T>(TypeTag<T>) {
                const T v = scalar_as<T>(sc[in.s0]);
                bind2<L, T, std::uint8_t, T>(
                    st, [v](T x, std::uint8_t m) { return select(m != 0, v, x); });
            });
        case OpKind::Clamp:
            return visit_reg(da, [&]<typename T>(TypeTag<T>) {
                const T lo = scalar_as<T>(sc[in.s0]), hi = scalar_as<T>(sc[in.s1]);
                bind1<L, T, T>(st, [lo, hi](T x) { return nan_min(nan_max(x, lo), hi); });
            });
        case OpKind::Cast:
            return visit_reg(da, [&]<typename S>(TypeTag<S>) {
                visit_reg(in.dtype, [&]<typename D>(TypeTag<D>) {
                    bind1<L, S, D>(st, [](S x) { return static_cast<D>(x); });
                });
            });
    }
}

// One instruction resolved to its loop, for one set of loops (one instruction set).
template <typename L>
Step bind(const Program& p, const Instr& in, std::span<const Scalar> sc) {
    Step st;
    st.a = in.a;
    st.b = in.b;
    st.c = in.c;
    st.dst = static_cast<std::uint32_t>(&in - p.instrs.data() + p.inputs.size());
    bind_into<L>(st, p, in, sc);
    EMBER_CHECK(st.run != nullptr, DType, "fused program: no CPU loop for op kind ",
                static_cast<int>(in.kind), " on ", dtype_name(p.reg_dtype(in.a)));
    return st;
}
using BindFn = Step (*)(const Program&, const Instr&, std::span<const Scalar>);

struct FusionKernel {
    std::string_view name;
    BindFn bind;
    bool (*available)();
    Step::ChainRun chain;  // null: chains run instruction by instruction
};

constexpr FusionKernel kKernels[] = {
#if EMBER_FUSION_AVX512
    {"avx512", bind<Avx512Loops>,
     [] {
         return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
                __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw");
     },
     &Avx512Loops::chain},
#endif
    {"native", bind<NativeLoops>, [] { return true; }, nullptr},
};

// ---- chains ----------------------------------------------------------------------------------

// Instruction `in` as a link of a chain whose value so far is register `flow`, if it can be one
// (the scalar of a scalar link is the caller's to fill in).
std::optional<ChainOp> link_of(const Program& p, const Instr& in, std::size_t flow) {
    if (in.dtype != DType::F32 || p.reg_dtype(in.a) != DType::F32) return std::nullopt;
    auto make = [](ChainOp::Kind k, std::uint32_t r = 0) { return ChainOp{k, 0.0f, r}; };
    switch (in.kind) {
        case OpKind::Unary:
            if (in.a != flow) return std::nullopt;
            if (static_cast<UnaryOp>(in.code) == UnaryOp::Erf) return make(ChainOp::Erf);
            if (static_cast<UnaryOp>(in.code) == UnaryOp::Neg) return make(ChainOp::Neg);
            return std::nullopt;
        case OpKind::BinaryScalar:
            if (in.a != flow) return std::nullopt;
            switch (static_cast<BinaryOp>(in.code)) {
                case BinaryOp::Add: return make(ChainOp::AddS);
                case BinaryOp::Sub: return make(ChainOp::SubS);
                case BinaryOp::RSub: return make(ChainOp::RSubS);
                case BinaryOp::Mul: return make(ChainOp::MulS);
                case BinaryOp::Div: return make(ChainOp::DivS);
                case BinaryOp::RDiv: return make(ChainOp::RDivS);
                default: return std::nullopt;
            }
        case OpKind::Binary: {
            if (p.reg_dtype(in.b) != DType::F32 || (in.a == flow) == (in.b == flow))
                return std::nullopt;
            const bool left = in.a == flow;  // the chain's value is the left operand
            const std::uint32_t r = left ? in.b : in.a;
            switch (static_cast<BinaryOp>(in.code)) {
                case BinaryOp::Add: return make(ChainOp::AddR, r);
                case BinaryOp::Mul: return make(ChainOp::MulR, r);
                case BinaryOp::Sub: return make(left ? ChainOp::SubR : ChainOp::RSubR, r);
                case BinaryOp::Div: return make(left ? ChainOp::DivR : ChainOp::RDivR, r);
                default: return std::nullopt;
            }
        }
        default:
            return std::nullopt;
    }
}

// The maximal chains of a program: runs of at least two consecutive linkable instructions where
// each result but the last is read only by the next instruction (not by another, not an output,
// not reduced), so that it never needs to exist.
std::vector<std::pair<std::size_t, std::size_t>> find_chains(const Program& p) {
    const std::size_t n_in = p.inputs.size(), n = p.instrs.size();
    std::vector<std::size_t> uses(n_in + n, 0);
    for (const Instr& in : p.instrs) {
        const std::uint16_t regs[] = {in.a, in.b, in.c};
        for (int k = 0; k < fusion::operand_count(in.kind); ++k) ++uses[regs[k]];
    }
    for (auto o : p.outputs) ++uses[o];
    if (p.reduce) ++uses[p.reduce->reg];
    std::vector<std::pair<std::size_t, std::size_t>> chains;
    for (std::size_t i = 0; i < n;) {
        if (!link_of(p, p.instrs[i], p.instrs[i].a)) {
            ++i;
            continue;
        }
        std::size_t j = i;
        while (j + 1 < n && j + 1 - i < Chain::kMax && uses[n_in + j] == 1 &&
               link_of(p, p.instrs[j + 1], n_in + j))
            ++j;
        if (j > i) chains.emplace_back(i, j);
        i = j + 1;
    }
    return chains;
}

// Chain [first, last] of `p` with its scalars.
Chain bind_chain(const Program& p, std::size_t first, std::size_t last,
                 std::span<const Scalar> sc) {
    Chain ch;
    ch.src = p.instrs[first].a;
    std::size_t flow = ch.src;
    for (std::size_t i = first; i <= last; ++i) {
        const Instr& in = p.instrs[i];
        ChainOp op = *link_of(p, in, flow);
        if (in.kind == OpKind::BinaryScalar) {
            op.s = scalar_as<float>(sc[in.s0]);
            if (op.kind == ChainOp::DivS && exact_reciprocal(op.s)) {  // as the unfused kernel
                op.kind = ChainOp::MulS;
                op.s = 1.0f / op.s;
            }
        }
        ch.ops[ch.n++] = op;
        flow = p.inputs.size() + i;
    }
    return ch;
}

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
        } else if (st == 0) {
            // Broadcast along the last dim (a per-row mean, a scale): one value, repeated.
            if (es == 4) {
                std::uint32_t v;
                std::memcpy(&v, src, 4);
                std::fill_n(reinterpret_cast<std::uint32_t*>(out + done * es), run, v);
            } else if (es == 8) {
                std::uint64_t v;
                std::memcpy(&v, src, 8);
                std::fill_n(reinterpret_cast<std::uint64_t*>(out + done * es), run, v);
            } else if (es == 1) {
                std::memset(out + done, *src, run);
            } else {
                for (std::size_t k = 0; k < run; ++k) std::memcpy(out + (done + k) * es, src, es);
            }
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

// A program's reduction along the last dim: tiles of the reduced register, in order, are folded
// into one accumulator a row (double for sums, so that a row of any length keeps f32's
// precision; NaN-propagating for max and min, as the unfused reduction) and each finished row
// written out.
class RowFold {
  public:
    /// Where a task is: its current row, and the elements of it folded so far.
    struct Cursor {
        std::size_t row = 0;
        std::size_t done = 0;
        double acc = std::numeric_limits<double>::quiet_NaN();  // NaN: the row not started
    };
    RowFold() = default;
    RowFold(fusion::RowReduce r, DType d, std::size_t cols, std::byte* out)
        : op_(r.op), f32_(d == DType::F32), cols_(cols), out_(out) {}

    /// Folds `len` values at `v` (the next ones of the task's rows).
    void add(Cursor& c, const void* v, std::size_t len) const {
        if (f32_)
            add_typed(c, static_cast<const float*>(v), len);
        else
            add_typed(c, static_cast<const double*>(v), len);
    }

  private:
    template <typename T>
    void add_typed(Cursor& c, const T* v, std::size_t len) const {
        for (std::size_t j = 0; j < len;) {
            const std::size_t take = std::min(len - j, cols_ - c.done);
            double acc = c.done == 0 ? init() : c.acc;
            if (op_ == ReduceOp::Sum || op_ == ReduceOp::Mean) {
                // Eight partial sums: independent adds the compiler vectorises (one chain of
                // dependent adds would cost an add's latency an element).
                double part[8] = {};
                std::size_t i = 0;
                for (; i + 8 <= take; i += 8)
                    for (std::size_t q = 0; q < 8; ++q)
                        part[q] += static_cast<double>(v[j + i + q]);
                for (; i < take; ++i) part[0] += static_cast<double>(v[j + i]);
                acc += ((part[0] + part[1]) + (part[2] + part[3])) +
                       ((part[4] + part[5]) + (part[6] + part[7]));
            } else {
                const bool mx = op_ == ReduceOp::Max;
                for (std::size_t i = 0; i < take; ++i) {
                    const double x = static_cast<double>(v[j + i]);
                    if (acc != acc) break;  // NaN wins
                    if (x != x || (mx ? x > acc : x < acc)) acc = x;
                }
            }
            j += take;
            c.done += take;
            c.acc = acc;
            if (c.done == cols_) {
                const double r = op_ == ReduceOp::Mean ? acc / static_cast<double>(cols_) : acc;
                if (f32_)
                    reinterpret_cast<float*>(out_)[c.row] = static_cast<float>(r);
                else
                    reinterpret_cast<double*>(out_)[c.row] = r;
                ++c.row;
                c.done = 0;
            }
        }
    }
    double init() const {
        if (op_ == ReduceOp::Max) return -std::numeric_limits<double>::infinity();
        if (op_ == ReduceOp::Min) return std::numeric_limits<double>::infinity();
        return 0.0;
    }

    ReduceOp op_ = ReduceOp::Sum;
    bool f32_ = true;
    std::size_t cols_ = 1;
    std::byte* out_ = nullptr;
};

}  // namespace

std::shared_ptr<const FusedPlan> fused_compile(const Program& p) {
    fusion::check_program(p, kMaxRank);
    auto plan = std::make_shared<FusedPlan>();
    plan->prog = p;
    plan->chains = find_chains(p);
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
    for (std::size_t k = 0; k < p.outputs.size(); ++k)
        outs.push_back(empty(shape, p.reg_dtype(p.outputs[k])));
    std::vector<bool> dense(n_in);
    for (std::size_t k = 0; k < n_in; ++k) dense[k] = inputs[k].is_contiguous();
    const std::size_t n = shape.num_elements();
    std::size_t cols = 0;
    if (p.reduce) {
        cols = shape[shape.rank() - 1];
        outs.push_back(empty(ember::fusion::reduced_shape(shape), p.reg_dtype(p.reduce->reg)));
    }
    if (n == 0) return outs;

    const FusionKernel& kernel = *current_kernel().load();
    std::vector<Step> steps;
    steps.reserve(p.instrs.size());
    std::vector<Chain> chains;
    chains.reserve(plan.chains.size());
    auto next_chain = plan.chains.begin();
    for (std::size_t i = 0; i < p.instrs.size(); ++i) {
        if (kernel.chain && next_chain != plan.chains.end() && next_chain->first == i) {
            const std::size_t last = next_chain->second;
            chains.push_back(bind_chain(p, i, last, sc));
            Step st;
            st.chain = &chains.back();
            st.chain_run = kernel.chain;
            st.dst = static_cast<std::uint32_t>(n_in + last);
            steps.push_back(st);
            i = last;
            ++next_chain;
            continue;
        }
        steps.push_back(kernel.bind(p, p.instrs[i], sc));
    }
    // Where each register's tile lives: dense inputs and the outputs in their tensors, the
    // rest (gathered inputs, intermediates) in per-task scratch.
    struct Home {
        std::byte* base = nullptr;  // null: scratch
        std::size_t elem = 0;
    };
    std::vector<Home> home(n_regs);
    for (std::size_t k = 0; k < n_in; ++k)
        if (dense[k])
            home[k] = {const_cast<std::byte*>(inputs[k].bytes()), dtype_size(inputs[k].dtype)};
    for (std::size_t k = 0; k < p.outputs.size(); ++k)
        if (p.outputs[k] >= n_in) home[p.outputs[k]] = {outs[k].bytes(), dtype_size(outs[k].dtype)};
    // With a reduction, tasks take whole rows, and each tile's reduced register is folded into
    // its rows' accumulators as soon as the tile is computed (it never leaves the cache).
    RowFold fold;
    if (p.reduce) fold = RowFold(*p.reduce, p.reg_dtype(p.reduce->reg), cols, outs.back().bytes());
    const std::size_t units = p.reduce ? n / cols : n;
    const std::size_t grain = p.reduce ? std::max<std::size_t>(1, kChunk / cols) : kChunk;
    parallel_for(units, grain, [&](std::size_t ub, std::size_t ue) {
        const std::size_t begin = p.reduce ? ub * cols : ub, end = p.reduce ? ue * cols : ue;
        RowFold::Cursor cur{ub};
        // Scratch registers, 8 bytes an element (enough for every register type), each
        // starting on a cache line so that vector loads and stores never straddle two.
        struct alignas(64) Line {
            std::uint64_t v[8];
        };
        constexpr std::size_t kLines = kTile * sizeof(std::uint64_t) / sizeof(Line);
        std::vector<Line> scratch(n_regs * kLines);
        std::vector<void*> r(n_regs);
        for (std::size_t k = 0; k < n_regs; ++k) r[k] = scratch.data() + k * kLines;
        for (std::size_t t0 = begin; t0 < end; t0 += kTile) {
            const std::size_t len = std::min(kTile, end - t0);
            for (std::size_t k = 0; k < n_regs; ++k) {
                if (home[k].base)
                    r[k] = home[k].base + t0 * home[k].elem;
                else if (k < n_in)
                    gather(inputs[k], shape, t0, len, r[k]);
            }
            for (const Step& st : steps) {
                if (st.chain)
                    st.chain_run(*st.chain, len, r.data(), r[st.dst]);
                else
                    st.run(st, len, r[st.a], r[st.b], r[st.c], r[st.dst]);
            }
            if (p.reduce) fold.add(cur, r[p.reduce->reg], len);
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
