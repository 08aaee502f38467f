// Elementwise kernels: one strided kernel per family and compute type (f32, f64, i64, bool as a
// byte), the op chosen by a switch that is uniform across the grid. f16/bf16 unary, binary and
// scalar ops have kernels of their own that load 16 bits, compute in f32 and round once on the
// store: the same values as casting the operands to f32 tensors and the result back (PyTorch's
// rule for half types), without those three extra passes over memory. The other families (compare,
// where, clamp...) get f16/bf16 operands cast to f32 by the host code.
#include <cmath>
#include <cstdint>
#include <optional>

#include "device.cuh"
#include "launch.hpp"
#include "rounding.cuh"

namespace ember::detail::cuda {
namespace {

// ---- casts ---------------------------------------------------------------------------------
/// A loaded element: floats as double, ints (and bools) as int64, so that conversions between
/// any pair of dtypes follow C++ (float → int truncates, → bool is != 0).
struct Value {
    double f;
    std::int64_t i;
    bool is_float;
};

__device__ __forceinline__ Value load(const void* p, DType d, std::int64_t o) {
    switch (d) {
        case DType::F32:
            return {static_cast<const float*>(p)[o], 0, true};
        case DType::F64:
            return {static_cast<const double*>(p)[o], 0, true};
        case DType::F16:
            return {__half2float(static_cast<const __half*>(p)[o]), 0, true};
        case DType::BF16:
            return {__bfloat162float(static_cast<const __nv_bfloat16*>(p)[o]), 0, true};
        case DType::I64:
            return {0, static_cast<const std::int64_t*>(p)[o], false};
        case DType::I32:
            return {0, static_cast<const std::int32_t*>(p)[o], false};
        case DType::I16:
            return {0, static_cast<const std::int16_t*>(p)[o], false};
        case DType::I8:
            return {0, static_cast<const std::int8_t*>(p)[o], false};
        default:
            return {0, static_cast<const std::uint8_t*>(p)[o], false};
    }
}

__device__ __forceinline__ void store(void* p, DType d, std::int64_t o, Value v) {
    switch (d) {
        case DType::F32:
            static_cast<float*>(p)[o] =
                v.is_float ? static_cast<float>(v.f) : static_cast<float>(v.i);
            break;
        case DType::F64:
            static_cast<double*>(p)[o] = v.is_float ? v.f : static_cast<double>(v.i);
            break;
        case DType::F16:
            static_cast<__half*>(p)[o] =
                __float2half_rn(v.is_float ? static_cast<float>(v.f) : static_cast<float>(v.i));
            break;
        case DType::BF16:
            static_cast<__nv_bfloat16*>(p)[o] =
                __float2bfloat16_rn(v.is_float ? static_cast<float>(v.f) : static_cast<float>(v.i));
            break;
        case DType::Bool:
            static_cast<std::uint8_t*>(p)[o] = v.is_float ? (v.f != 0.0) : (v.i != 0);
            break;
        default: {
            const std::int64_t x = v.is_float ? static_cast<std::int64_t>(v.f) : v.i;
            switch (d) {
                case DType::I64:
                    static_cast<std::int64_t*>(p)[o] = x;
                    break;
                case DType::I32:
                    static_cast<std::int32_t*>(p)[o] = static_cast<std::int32_t>(x);
                    break;
                case DType::I16:
                    static_cast<std::int16_t*>(p)[o] = static_cast<std::int16_t>(x);
                    break;
                case DType::I8:
                    static_cast<std::int8_t*>(p)[o] = static_cast<std::int8_t>(x);
                    break;
                default:
                    static_cast<std::uint8_t*>(p)[o] = static_cast<std::uint8_t>(x);
                    break;
            }
        }
    }
}

__global__ void convert_kernel(Iter<2> it, void* dst, DType dd, const void* src, DType sd) {
    EMBER_GRID_LOOP(i, it.n) {
        std::int64_t off[2];
        offsets(it, i, off);
        store(dst, dd, off[0], load(src, sd, off[1]));
    }
}

/// Same-dtype copies move raw words of the element's size.
template <typename U>
__global__ void copy_kernel(Iter<2> it, U* dst, const U* src) {
    EMBER_GRID_LOOP(i, it.n) {
        std::int64_t off[2];
        offsets(it, i, off);
        dst[off[0]] = src[off[1]];
    }
}

// ---- scalar functions ----------------------------------------------------------------------
template <typename T>
__device__ __forceinline__ T floor_div(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
        return a / b;  // float division is true division (PyTorch's `/`)
    } else {
        T q = a / b;
        if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
        return q;
    }
}
template <typename T>
__device__ __forceinline__ T py_rem(T a, T b) {
    T r;
    if constexpr (std::is_floating_point_v<T>)
        r = fmod(a, b);
    else
        r = a % b;
    if (r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
}
template <typename T>
__device__ __forceinline__ T int_pow(T base, T exp) {
    if (exp < 0) return (base == 1) ? 1 : (base == -1 ? ((exp & 1) ? -1 : 1) : 0);
    T r = 1;
    while (exp) {
        if (exp & 1) r = static_cast<T>(r * base);
        base = static_cast<T>(base * base);
        exp >>= 1;
    }
    return r;
}

// Shifts by any amount (C++ leaves a shift by a negative amount or by the bit width or more
// undefined): 0 for a left shift, the sign fill for the arithmetic right shift, as the CPU's.
template <typename T>
__device__ __forceinline__ T ember_shl(T a, T b) {
    constexpr T bits = static_cast<T>(sizeof(T) * 8);
    return (b < 0 || b >= bits) ? T{0}
                                : static_cast<T>(static_cast<std::make_unsigned_t<T>>(a) << b);
}
template <typename T>
__device__ __forceinline__ T ember_shr(T a, T b) {
    constexpr T bits = static_cast<T>(sizeof(T) * 8);
    return (b < 0 || b >= bits) ? (a < 0 ? T{-1} : T{0}) : static_cast<T>(a >> b);
}

template <typename T>
__device__ __forceinline__ T apply_binary(BinaryOp op, T a, T b) {
    if constexpr (std::is_same_v<T, std::uint8_t>) {
        switch (op) {
            case BinaryOp::And:
            case BinaryOp::Mul:
            case BinaryOp::Min:
                return a && b;
            case BinaryOp::Xor:
                return a != b;
            default:
                return a || b;  // Or, Add, Max
        }
    } else {
        using U = std::conditional_t<std::is_integral_v<T>, std::uint64_t, T>;
        switch (op) {
            // Integer add/sub/mul wrap (two's complement), as the CPU backend's.
            case BinaryOp::Add:
                return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
            case BinaryOp::Sub:
                return static_cast<T>(static_cast<U>(a) - static_cast<U>(b));
            case BinaryOp::RSub:
                return static_cast<T>(static_cast<U>(b) - static_cast<U>(a));
            case BinaryOp::Mul:
                return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
            case BinaryOp::Div:
                return floor_div(a, b);
            case BinaryOp::RDiv:
                return floor_div(b, a);
            case BinaryOp::Rem:
                return py_rem(a, b);
            case BinaryOp::RRem:
                return py_rem(b, a);
            case BinaryOp::Pow:
                if constexpr (std::is_floating_point_v<T>)
                    return pow(a, b);
                else
                    return int_pow(a, b);
            case BinaryOp::RPow:
                if constexpr (std::is_floating_point_v<T>)
                    return pow(b, a);
                else
                    return int_pow(b, a);
            case BinaryOp::Max:
                return nan_max(a, b);
            case BinaryOp::Min:
                return nan_min(a, b);
            default:
                if constexpr (std::is_integral_v<T>) {
                    switch (op) {
                        case BinaryOp::And:
                            return a & b;
                        case BinaryOp::Or:
                            return a | b;
                        case BinaryOp::Xor:
                            return a ^ b;
                        case BinaryOp::Shl:
                            return ember_shl(a, b);
                        case BinaryOp::Shr:
                            return ember_shr(a, b);
                        default:
                            break;
                    }
                }
                return a;  // bitwise ops are rejected on the host for float tensors
        }
    }
}

template <typename T>
__device__ __forceinline__ bool apply_compare(CompareOp op, T a, T b) {
    switch (op) {
        case CompareOp::Eq:
            return a == b;
        case CompareOp::Ne:
            return a != b;
        case CompareOp::Gt:
            return a > b;
        case CompareOp::Ge:
            return a >= b;
        case CompareOp::Lt:
            return a < b;
        default:
            return a <= b;
    }
}

template <typename T>
__device__ __forceinline__ T apply_unary(UnaryOp op, T x) {
    if constexpr (std::is_same_v<T, std::uint8_t>) {
        return !x;  // Not: the only op on bools
    } else if constexpr (std::is_integral_v<T>) {
        switch (op) {
            case UnaryOp::Neg:
                return static_cast<T>(0ull - static_cast<std::uint64_t>(x));
            case UnaryOp::Abs:
                return x < 0 ? static_cast<T>(0ull - static_cast<std::uint64_t>(x)) : x;
            case UnaryOp::Sign:
                return static_cast<T>((x > 0) - (x < 0));
            case UnaryOp::Not:
                return static_cast<T>(~x);  // bitwise on ints
            default:
                return x > 0 ? x : T{0};  // Relu
        }
    } else {
        switch (op) {
            case UnaryOp::Neg:
                return -x;
            case UnaryOp::Abs:
                return fabs(x);
            case UnaryOp::Exp:
                return exp(x);
            case UnaryOp::Log:
                return log(x);
            case UnaryOp::Log1p:
                return log1p(x);
            case UnaryOp::Sqrt:
                return sqrt(x);
            case UnaryOp::Sin:
                return sin(x);
            case UnaryOp::Cos:
                return cos(x);
            case UnaryOp::Tanh:
                return tanh(x);
            case UnaryOp::Erf:
                return erf(x);
            case UnaryOp::Recip:
                return T{1} / x;
            case UnaryOp::Floor:
                return floor(x);
            case UnaryOp::Ceil:
                return ceil(x);
            case UnaryOp::Round:
                return rint(x);  // half to even, as nearbyint
            case UnaryOp::Sign:
                return static_cast<T>((x > 0) - (x < 0));
            case UnaryOp::Sigmoid:
                // Written so that neither branch overflows exp.
                if (x >= 0)
                    return T{1} / (T{1} + exp(-x));
                else {
                    const T e = exp(x);
                    return e / (T{1} + e);
                }
            case UnaryOp::Relu:
                return x > 0 ? x : (x != x ? x : T{0});
            case UnaryOp::Gelu:
                return x * T(0.5) * (T{1} + erf(x * T(0.70710678118654752440)));
            default:
                return x;
        }
    }
}

template <typename T>
__global__ void unary_kernel(UnaryOp op, Iter<2> it, T* out, const T* in) {
    EMBER_GRID_LOOP(i, it.n) {
        std::int64_t off[2];
        offsets(it, i, off);
        out[off[0]] = apply_unary(op, in[off[1]]);
    }
}
template <typename T>
__global__ void isnan_kernel(Iter<2> it, std::uint8_t* out, const T* in) {
    EMBER_GRID_LOOP(i, it.n) {
        std::int64_t off[2];
        offsets(it, i, off);
        out[off[0]] = is_nan(in[off[1]]);
    }
}
template <typename T>
__global__ void binary_kernel(BinaryOp op, Iter<3> it, T* out, const T* a, const T* b) {
    EMBER_GRID_LOOP(i, it.n) {
        std::int64_t off[3];
        offsets(it, i, off);
        out[off[0]] = apply_binary(op, a[off[1]], b[off[2]]);
    }
}
/// The contiguous same-shape f32 case (most of a model's elementwise work), four at a time.
__global__ void binary_f32x4_kernel(BinaryOp op, std::int64_t n4, float4* out, const float4* a,
                                    const float4* b) {
    EMBER_GRID_LOOP(i, n4) {
        const float4 x = a[i], y = b[i];
        out[i] = make_float4(apply_binary(op, x.x, y.x), apply_binary(op, x.y, y.y),
                             apply_binary(op, x.z, y.z), apply_binary(op, x.w, y.w));
    }
}
/// Contiguous same-shape f32 operands of any length: small parameters (a launch copies fewer
/// bytes than with an Iter) and no index arithmetic. The per-op cost of small tensors.
__global__ void binary_f32_kernel(BinaryOp op, std::int64_t n, float* out, const float* a,
                                  const float* b) {
    EMBER_GRID_LOOP(i, n) out[i] = apply_binary(op, a[i], b[i]);
}
__global__ void binary_scalar_f32_kernel(BinaryOp op, std::int64_t n, float* out, const float* a,
                                         float v) {
    EMBER_GRID_LOOP(i, n) out[i] = apply_binary(op, a[i], v);
}
__global__ void unary_f32_kernel(UnaryOp op, std::int64_t n, float* out, const float* in) {
    EMBER_GRID_LOOP(i, n) out[i] = apply_unary(op, in[i]);
}
template <typename T>
__global__ void compare_kernel(CompareOp op, Iter<3> it, std::uint8_t* out, const T* a,
                               const T* b) {
    EMBER_GRID_LOOP(i, it.n) {
        std::int64_t off[3];
        offsets(it, i, off);
        out[off[0]] = apply_compare(op, a[off[1]], b[off[2]]);
    }
}
template <typename T>
__global__ void binary_scalar_kernel(BinaryOp op, Iter<2> it, T* out, const T* a, T v) {
    EMBER_GRID_LOOP(i, it.n) {
        std::int64_t off[2];
        offsets(it, i, off);
        out[off[0]] = apply_binary(op, a[off[1]], v);
    }
}
template <typename T, typename C>
__global__ void compare_scalar_kernel(CompareOp op, Iter<2> it, std::uint8_t* out, const T* a,
                                      C v) {
    EMBER_GRID_LOOP(i, it.n) {
        std::int64_t off[2];
        offsets(it, i, off);
        out[off[0]] = apply_compare(op, static_cast<C>(a[off[1]]), v);
    }
}
template <typename T>
__global__ void clamp_kernel(Iter<2> it, T* out, const T* a, T lo, T hi) {
    EMBER_GRID_LOOP(i, it.n) {
        std::int64_t off[2];
        offsets(it, i, off);
        out[off[0]] = nan_min(nan_max(a[off[1]], lo), hi);
    }
}
template <typename T>
__global__ void where_kernel(Iter<4> it, T* out, const std::uint8_t* m, const T* a, const T* b) {
    EMBER_GRID_LOOP(i, it.n) {
        std::int64_t off[4];
        offsets(it, i, off);
        out[off[0]] = m[off[1]] ? a[off[2]] : b[off[3]];
    }
}
template <typename U>
__global__ void fill_kernel(U* out, std::int64_t n, U v) {
    EMBER_GRID_LOOP(i, n) out[i] = v;
}
__global__ void arange_kernel(std::int64_t* out, std::int64_t n, std::int64_t start,
                              std::int64_t step) {
    EMBER_GRID_LOOP(i, n) out[i] = start + i * step;
}

// ---- random --------------------------------------------------------------------------------
/// SplitMix64 finaliser: a good 64-bit mix, so hash(seed, counter, i) is a counter-based
/// generator (each element independent of the launch shape).
__device__ __forceinline__ std::uint64_t mix(std::uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
__device__ __forceinline__ double uniform01(std::uint64_t key, std::uint64_t i) {
    return static_cast<double>(mix(key + 0x9e3779b97f4a7c15ull * (i + 1)) >> 11) * 0x1.0p-53;
}
/// The key of draw `counter` under `seed`. Inside a captured graph `state` holds the device's
/// {seed, offset}: the draw is then the offset plus its index within the step, so that every
/// replay draws anew, exactly as the same step run eagerly at that point would.
__device__ __forceinline__ std::uint64_t draw_key(std::uint64_t seed, std::uint64_t counter,
                                                  const std::uint64_t* state) {
    if (state != nullptr) {
        seed = state[0];
        counter += state[1];
    }
    return seed * 0xd1342543de82ef95ull + counter * 0x9e3779b97f4a7c15ull;
}
template <typename T>
__global__ void random_kernel(T* out, std::int64_t n, Distribution d, std::uint64_t seed,
                              std::uint64_t counter, const std::uint64_t* state) {
    const std::uint64_t key = draw_key(seed, counter, state);
    EMBER_GRID_LOOP(i, n) {
        double v;
        switch (d.kind) {
            case Distribution::Kind::Normal: {
                // Box-Muller on two draws of this element's own stream.
                const double u1 = 1.0 - uniform01(key, 2 * i), u2 = uniform01(key, 2 * i + 1);
                v = d.a + d.b * sqrt(-2.0 * log(u1)) * cospi(2.0 * u2);
                break;
            }
            case Distribution::Kind::Bernoulli:
                v = uniform01(key, i) < d.a ? 1.0 : 0.0;
                break;
            case Distribution::Kind::Uniform:
                v = d.a + (d.b - d.a) * uniform01(key, i);
                if constexpr (std::is_integral_v<T>) v = floor(v);
                break;
            default:
                v = uniform01(key, i);
                break;
        }
        out[i] = static_cast<T>(v);
    }
}

// ---- Adam ----------------------------------------------------------------------------------
template <typename T>
__global__ void adam_kernel(std::int64_t n, T* po, T* mo, T* vo, const T* p, const T* g, const T* m,
                            const T* v, AdamStepScalars s, const double* replayed) {
    // In a captured graph the learning rate and both corrections change from replay to replay:
    // they come from device memory that the graph's first node writes (graph.cpp).
    if (replayed != nullptr) {
        s.lr = replayed[0];
        s.correction_1 = replayed[1];
        s.correction_2 = replayed[2];
    }
    const T b1 = T(s.beta_1), b2 = T(s.beta_2), eps = T(s.epsilon);
    const T inv_sqrt_c2 = T(1.0 / std::sqrt(s.correction_2));
    const T step = T(s.lr / s.correction_1);
    EMBER_GRID_LOOP(i, n) {
        const T gi = g[i];
        const T mk = b1 * m[i] + (T(1) - b1) * gi;
        const T vk = b2 * v[i] + (T(1) - b2) * gi * gi;
        const T denom = sqrt(vk) * inv_sqrt_c2 + eps;
        po[i] = p[i] - step * mk / denom;
        mo[i] = mk;
        vo[i] = vk;
    }
}

// ---- SGD with momentum -----------------------------------------------------------------------
// Each operation rounded on its own (rounding.cuh), as Sgd's composed tensor ops round them one
// kernel each: the fused step gives their values bit for bit.
template <typename T>
__global__ void sgd_kernel(std::int64_t n, T* po, T* vo, const T* p, const T* g, const T* v,
                           SgdStepScalars s, const double* replayed) {
    // In a captured graph the learning rate comes from device memory that the graph's first
    // node writes at each replay (graph.cpp), so a schedule can change it.
    if (replayed != nullptr) s.lr = replayed[0];
    const T lr = T(s.lr), mu = T(s.momentum), keep = T(1.0 - s.dampening), wd = T(s.weight_decay);
    const bool decay = s.weight_decay != 0.0;
    EMBER_GRID_LOOP(i, n) {
        const T pi = p[i];
        T gi = g[i];
        if (decay) gi = add_rn(gi, mul_rn(pi, wd));
        const T vk = add_rn(mul_rn(v[i], mu), mul_rn(gi, keep));
        const T d = s.nesterov ? add_rn(gi, mul_rn(vk, mu)) : vk;
        po[i] = sub_rn(pi, mul_rn(d, lr));
        vo[i] = vk;
    }
}

__global__ void check_range_kernel(Iter<1> it, const std::int64_t* v, std::int64_t limit, int mode,
                                   int* flag) {
    EMBER_GRID_LOOP(i, it.n) {
        std::int64_t off[1];
        offsets(it, i, off);
        const std::int64_t x = v[off[0]];
        const bool bad = mode == 0 ? (x < 0 || x >= limit) : (mode == 1 ? x == 0 : x < 0);
        if (bad) *flag = 1;
    }
}

// ---- f16 / bf16 storage, f32 arithmetic ---------------------------------------------------
__device__ __forceinline__ float widen(__half x) {
    return __half2float(x);
}
__device__ __forceinline__ float widen(__nv_bfloat16 x) {
    return __bfloat162float(x);
}
/// f32 to the half type H, rounded to nearest even (one rounding per result).
template <typename H>
__device__ __forceinline__ H narrow(float x) {
    if constexpr (std::is_same_v<H, __half>)
        return __float2half_rn(x);
    else
        return __float2bfloat16_rn(x);
}
template <typename H>
__global__ void unary_half_kernel(UnaryOp op, Iter<2> it, H* out, const H* in) {
    EMBER_GRID_LOOP(i, it.n) {
        std::int64_t off[2];
        offsets(it, i, off);
        out[off[0]] = narrow<H>(apply_unary(op, widen(in[off[1]])));
    }
}
template <typename H>
__global__ void binary_half_kernel(BinaryOp op, Iter<3> it, H* out, const H* a, const H* b) {
    EMBER_GRID_LOOP(i, it.n) {
        std::int64_t off[3];
        offsets(it, i, off);
        out[off[0]] = narrow<H>(apply_binary(op, widen(a[off[1]]), widen(b[off[2]])));
    }
}
template <typename H>
__global__ void binary_scalar_half_kernel(BinaryOp op, Iter<2> it, H* out, const H* a, float v) {
    EMBER_GRID_LOOP(i, it.n) {
        std::int64_t off[2];
        offsets(it, i, off);
        out[off[0]] = narrow<H>(apply_binary(op, widen(a[off[1]]), v));
    }
}
/// out[i] = f(a[i], b[i]) over dense halves, one a thread (b null: f ignores it).
template <typename H, typename F>
__global__ void half_dense_kernel(F f, std::int64_t n, H* out, const H* a, const H* b) {
    EMBER_GRID_LOOP(i, n) out[i] = narrow<H>(f(widen(a[i]), b ? widen(b[i]) : 0.f));
}
/// Dense f32 <-> f16/bf16 conversions (autocast's casts), without convert_kernel's per-element
/// dtype switches and offsets.
template <typename From, typename To>
__global__ void convert_dense_kernel(std::int64_t n, To* dst, const From* src) {
    EMBER_GRID_LOOP(i, n) {
        if constexpr (std::is_same_v<From, float>)
            dst[i] = narrow<To>(src[i]);
        else
            dst[i] = widen(src[i]);
    }
}

// ---- 16-byte vectors of halves ------------------------------------------------------------
// Eight f16/bf16 values a load and a store: a dense half op is memory-bound, and 2-byte accesses
// leave much of the bandwidth unused. The element functions below run in f32 registers.

/// f(a) of a unary op.
struct UnaryF {
    UnaryOp op;
    __device__ float operator()(float a, float) const { return apply_unary(op, a); }
};
/// f(a) for an op known at compile time: the switch folds away. With the op a run-time value,
/// each of a vector's eight elements went through apply_unary's jump table, and GELU over a bf16
/// [8192, 3072] took twice its memory time.
template <UnaryOp Op>
struct FixedUnaryF {
    __device__ float operator()(float a, float) const { return apply_unary(Op, a); }
};
/// a op b.
struct BinaryF {
    BinaryOp op;
    __device__ float operator()(float a, float b) const { return apply_binary(op, a, b); }
};
/// a op scalar.
struct ScalarF {
    BinaryOp op;
    float v;
    __device__ float operator()(float a, float) const { return apply_binary(op, a, v); }
};

/// out[i] = f(a[i], b[i]) over n8 vectors of eight halves (b null: f ignores its second operand).
template <typename H, typename F>
__global__ void half_vec_kernel(F f, std::int64_t n8, uint4* out, const uint4* a, const uint4* b) {
    EMBER_GRID_LOOP(i, n8) {
        const uint4 ua = a[i];
        const uint4 ub = b ? b[i] : ua;
        uint4 r;
        const H* ha = reinterpret_cast<const H*>(&ua);
        const H* hb = reinterpret_cast<const H*>(&ub);
        H* hr = reinterpret_cast<H*>(&r);
#pragma unroll
        for (int k = 0; k < 8; ++k) hr[k] = narrow<H>(f(widen(ha[k]), widen(hb[k])));
        out[i] = r;
    }
}

/// Whether n elements of 2 bytes at every pointer can go as 16-byte vectors.
inline bool vec8(std::int64_t n, const void* out, const void* a, const void* b = nullptr) {
    const auto al = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
    return n % 8 == 0 && al(out) && al(a) && (b == nullptr || al(b));
}

/// f over dense halves: 16-byte vectors where sizes and addresses allow, else one a thread.
template <typename H, typename F>
void launch_half_dense(F f, std::int64_t n, void* out, const void* a, const void* b,
                       cudaStream_t s) {
    if (vec8(n, out, a, b)) {
        half_vec_kernel<H><<<blocks_for(n / 8), kThreads, 0, s>>>(
            f, n / 8, static_cast<uint4*>(out), static_cast<const uint4*>(a),
            static_cast<const uint4*>(b));
        return;
    }
    half_dense_kernel<H><<<blocks_for(n), kThreads, 0, s>>>(
        f, n, static_cast<H*>(out), static_cast<const H*>(a), static_cast<const H*>(b));
}

/// Dense f32 -> half, eight elements (two float4 loads, one 16-byte store) a thread.
template <typename H>
__global__ void narrow_vec_kernel(std::int64_t n8, uint4* dst, const float4* src) {
    EMBER_GRID_LOOP(i, n8) {
        const float4 x = src[2 * i], y = src[2 * i + 1];
        uint4 r;
        H* h = reinterpret_cast<H*>(&r);
        h[0] = narrow<H>(x.x), h[1] = narrow<H>(x.y), h[2] = narrow<H>(x.z), h[3] = narrow<H>(x.w);
        h[4] = narrow<H>(y.x), h[5] = narrow<H>(y.y), h[6] = narrow<H>(y.z), h[7] = narrow<H>(y.w);
        dst[i] = r;
    }
}
/// Dense half -> f32, eight elements a thread.
template <typename H>
__global__ void widen_vec_kernel(std::int64_t n8, float4* dst, const uint4* src) {
    EMBER_GRID_LOOP(i, n8) {
        const uint4 u = src[i];
        const H* h = reinterpret_cast<const H*>(&u);
        dst[2 * i] = make_float4(widen(h[0]), widen(h[1]), widen(h[2]), widen(h[3]));
        dst[2 * i + 1] = make_float4(widen(h[4]), widen(h[5]), widen(h[6]), widen(h[7]));
    }
}

/// Rows of 8-element vectors between f32 and f16/bf16 at any row strides (counted in 8-element
/// vectors): a view's columns — the query part of a packed projection's gradient, a slice of a
/// weight's gradient — converted at a dense tensor's speed rather than an element a thread
/// with its offsets computed per dim.
template <typename From, typename To>
__global__ void convert_rows_vec_kernel(std::int64_t rows, std::int64_t cols8, To* dst,
                                        std::int64_t drs8, const From* src, std::int64_t srs8) {
    EMBER_GRID_LOOP(i, rows * cols8) {
        const std::int64_t r = i / cols8, c = i - r * cols8;
        const std::int64_t si = r * srs8 + c, di = r * drs8 + c;
        if constexpr (std::is_same_v<From, float>) {
            const float4* s4 = reinterpret_cast<const float4*>(src);
            const float4 x = s4[2 * si], y = s4[2 * si + 1];
            uint4 u;
            To* h = reinterpret_cast<To*>(&u);
            h[0] = narrow<To>(x.x), h[1] = narrow<To>(x.y), h[2] = narrow<To>(x.z);
            h[3] = narrow<To>(x.w), h[4] = narrow<To>(y.x), h[5] = narrow<To>(y.y);
            h[6] = narrow<To>(y.z), h[7] = narrow<To>(y.w);
            reinterpret_cast<uint4*>(dst)[di] = u;
        } else {
            const uint4 u = reinterpret_cast<const uint4*>(src)[si];
            const From* h = reinterpret_cast<const From*>(&u);
            float4* d4 = reinterpret_cast<float4*>(dst);
            d4[2 * di] = make_float4(widen(h[0]), widen(h[1]), widen(h[2]), widen(h[3]));
            d4[2 * di + 1] = make_float4(widen(h[4]), widen(h[5]), widen(h[6]), widen(h[7]));
        }
    }
}

// ---- f32 with f16/bf16 operands -----------------------------------------------------------
/// An element as f32: halves widen, f32 stays.
__device__ __forceinline__ float as_f32(float x) {
    return x;
}
template <typename H>
__device__ __forceinline__ float as_f32(H x) {
    return widen(x);
}
/// Four neighbours of a dense operand (16 bytes of f32, 8 of halves) as f32.
__device__ __forceinline__ float4 load4_f32(const float* p, std::int64_t i) {
    return reinterpret_cast<const float4*>(p)[i];
}
template <typename H>
__device__ __forceinline__ float4 load4_f32(const H* p, std::int64_t i) {
    const uint2 u = reinterpret_cast<const uint2*>(p)[i];
    const H* h = reinterpret_cast<const H*>(&u);
    return make_float4(widen(h[0]), widen(h[1]), widen(h[2]), widen(h[3]));
}
/// Dense f32 out = a op b where one operand is f16/bf16, read as it is: autocast's bf16 branch
/// added to the f32 residual stream, without an f32 copy of the branch first. Four elements a
/// thread where the sizes and addresses allow (`n4`), else one (`n`).
template <typename A, typename B>
__global__ void binary_mixed_kernel(BinaryOp op, std::int64_t n, std::int64_t n4, float* out,
                                    const A* a, const B* b) {
    if (n4 > 0) {
        EMBER_GRID_LOOP(i, n4) {
            const float4 x = load4_f32(a, i), y = load4_f32(b, i);
            reinterpret_cast<float4*>(out)[i] =
                make_float4(apply_binary(op, x.x, y.x), apply_binary(op, x.y, y.y),
                            apply_binary(op, x.z, y.z), apply_binary(op, x.w, y.w));
        }
        return;
    }
    EMBER_GRID_LOOP(i, n) out[i] = apply_binary(op, as_f32(a[i]), as_f32(b[i]));
}

// ---- fused backward of unary functions --------------------------------------------------
/// f'(x) of the unary op f from v, the operand Autodiff saves: the input for Gelu and Erf, the
/// output for Tanh and Sigmoid (unary_uses_output). Gelu is the exact (erf) form.
template <typename T>
__device__ __forceinline__ T unary_derivative(UnaryOp op, T v) {
    switch (op) {
        case UnaryOp::Gelu: {  // Φ(x) + x·φ(x)
            const T cdf = T(0.5) * (T(1) + erf(v * T(0.70710678118654752440)));
            return cdf + v * (exp(T(-0.5) * v * v) * T(0.39894228040143267794));
        }
        case UnaryOp::Erf:  // 2/√π · exp(−x²)
            return T(1.12837916709551257390) * exp(-v * v);
        case UnaryOp::Tanh:  // 1 − y²
            return T(1) - v * v;
        default:  // Sigmoid: y·(1 − y)
            return v * (T(1) - v);
    }
}
/// dL/dx from g = dL/dy and v: g · f'(v); for Relu (v its output) g where v > 0, else 0 — a
/// select, as the composed backward's zero_where, so an infinite g stays out of the zeros.
template <typename T>
__device__ __forceinline__ T unary_grad_of(UnaryOp op, T g, T v) {
    if (op == UnaryOp::Relu) return v <= T(0) ? T(0) : g;
    return g * unary_derivative(op, v);
}
struct UnaryGradF {
    UnaryOp op;
    __device__ float operator()(float g, float v) const { return unary_grad_of(op, g, v); }
};
/// g · f'(v) for an op known at compile time (as FixedUnaryF).
template <UnaryOp Op>
struct FixedUnaryGradF {
    __device__ float operator()(float g, float v) const { return unary_grad_of(Op, g, v); }
};
template <typename T>
__global__ void unary_backward_kernel(UnaryOp op, std::int64_t n, T* out, const T* g, const T* v) {
    EMBER_GRID_LOOP(i, n) out[i] = unary_grad_of(op, g[i], v[i]);
}

/// Every operand of `it` (K of them) runs over contiguous memory in order: one dim of unit
/// strides after make_iter merged what it could.
template <int K>
bool dense(const Iter<K>& it) {
    if (it.rank == 0) return true;
    if (it.rank != 1) return false;
    for (int k = 0; k < K; ++k)
        if (it.strides[k][0] != 1) return false;
    return true;
}

/// `it` (a copy of `elem`-byte elements) as a copy of 16-byte vectors, where both operands' last
/// dim is contiguous and every size, stride and address allows: a permuted copy whose rows are
/// contiguous (heads merged back into [B, L, H·E], a transposed batch of rows) then moves 16
/// bytes a thread instead of 2 or 4.
std::optional<Iter<2>> as_vectors(const Iter<2>& it, int elem, const void* dst, const void* src) {
    const int v = 16 / elem;
    if (it.rank == 0 || v <= 1) return std::nullopt;
    const int last = it.rank - 1;
    if (reinterpret_cast<std::uintptr_t>(dst) % 16 != 0 ||
        reinterpret_cast<std::uintptr_t>(src) % 16 != 0 || it.strides[0][last] != 1 ||
        it.strides[1][last] != 1 || it.shape[last] % v != 0)
        return std::nullopt;
    Iter<2> w = it;
    for (int k = 0; k < 2; ++k)
        for (int d = 0; d < last; ++d) {
            if (it.strides[k][d] % v != 0) return std::nullopt;
            w.strides[k][d] = it.strides[k][d] / v;
        }
    w.shape[last] = it.shape[last] / v;
    w.n = it.n / v;
    return w;
}

/// A bias on halves: out = a op b with `out` and one operand dense [rows, C] and the other a
/// [C] row broadcast over the rows (a Linear's bias add), eight neighbours a thread, so that the
/// generic kernel's per-element index division and 2-byte accesses are avoided.
template <typename H>
__global__ void half_lastdim_vec_kernel(BinaryOp op, std::int64_t n8, uint4* out,
                                        const uint4* dense, const uint4* row, std::int64_t c8,
                                        bool row_first) {
    EMBER_GRID_LOOP(i, n8) {
        const uint4 ud = dense[i], ur = row[i % c8];
        uint4 r;
        const H* hd = reinterpret_cast<const H*>(&ud);
        const H* hr = reinterpret_cast<const H*>(&ur);
        H* ho = reinterpret_cast<H*>(&r);
#pragma unroll
        for (int k = 0; k < 8; ++k) {
            const float x = widen(hd[k]), y = widen(hr[k]);
            ho[k] = narrow<H>(row_first ? apply_binary(op, y, x) : apply_binary(op, x, y));
        }
        out[i] = r;
    }
}

/// Runs half_lastdim_vec_kernel where `it` has its shape (rank 2; out and one operand row-major,
/// the other stride 0 over the rows and 1 along them; C a multiple of 8; 16-byte addresses).
template <typename H>
bool launch_lastdim_half(BinaryOp op, const Iter<3>& it, void* out, const void* a, const void* b,
                         cudaStream_t s) {
    if (it.rank != 2) return false;
    const std::int64_t c = it.shape[1];
    const auto row_major = [&](int k) { return it.strides[k][0] == c && it.strides[k][1] == 1; };
    const auto bias = [&](int k) { return it.strides[k][0] == 0 && it.strides[k][1] == 1; };
    if (c % 8 != 0 || !row_major(0)) return false;
    int r = 0;  // the broadcast operand
    if (row_major(1) && bias(2))
        r = 2;
    else if (bias(1) && row_major(2))
        r = 1;
    else
        return false;
    const void* dense = r == 2 ? a : b;
    const void* row = r == 2 ? b : a;
    const auto al = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
    if (!al(out) || !al(dense) || !al(row)) return false;
    half_lastdim_vec_kernel<H><<<blocks_for(it.n / 8), kThreads, 0, s>>>(
        op, it.n / 8, static_cast<uint4*>(out), static_cast<const uint4*>(dense),
        static_cast<const uint4*>(row), c / 8, r == 1);
    return true;
}

/// f(H{}) with H the storage type of `hd` (F16 or BF16).
template <typename F>
void visit_half(DType hd, F&& f) {
    if (hd == DType::F16)
        f(__half{});
    else
        f(__nv_bfloat16{});
}

/// The dense f32 <-> f16/bf16 conversion, if `it`, `dd` and `sd` are one; false otherwise.
/// f32 <-> f16/bf16 over rows of a plan of rank 2 whose inner dim is contiguous on both sides,
/// a multiple of 8 long, with row strides and addresses that keep every 8 elements 16-byte
/// aligned (convert_rows_vec_kernel); false where the plan is not such.
bool launch_convert_rows(const Iter<2>& it, void* dst, DType dd, const void* src, DType sd,
                         cudaStream_t s) {
    const auto half = [](DType d) { return d == DType::F16 || d == DType::BF16; };
    if (it.rank != 2 || it.strides[0][1] != 1 || it.strides[1][1] != 1 || it.shape[1] % 8 != 0 ||
        it.strides[0][0] % 8 != 0 || it.strides[1][0] % 8 != 0 || it.strides[0][0] < 0 ||
        it.strides[1][0] < 0)
        return false;
    const auto al = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
    if (!al(dst) || !al(src)) return false;
    const std::int64_t rows = it.shape[0], cols8 = it.shape[1] / 8;
    const std::int64_t drs8 = it.strides[0][0] / 8, srs8 = it.strides[1][0] / 8;
    if (sd == DType::F32 && half(dd)) {
        visit_half(dd, [&]<typename H>(H) {
            convert_rows_vec_kernel<float, H><<<blocks_for(rows * cols8), kThreads, 0, s>>>(
                rows, cols8, static_cast<H*>(dst), drs8, static_cast<const float*>(src), srs8);
        });
        return true;
    }
    if (dd == DType::F32 && half(sd)) {
        visit_half(sd, [&]<typename H>(H) {
            convert_rows_vec_kernel<H, float><<<blocks_for(rows * cols8), kThreads, 0, s>>>(
                rows, cols8, static_cast<float*>(dst), drs8, static_cast<const H*>(src), srs8);
        });
        return true;
    }
    return false;
}

bool launch_convert_dense(const Iter<2>& it, void* dst, DType dd, const void* src, DType sd,
                          cudaStream_t s) {
    const auto half = [](DType d) { return d == DType::F16 || d == DType::BF16; };
    if (!dense(it)) return launch_convert_rows(it, dst, dd, src, sd, s);
    // 16-byte vectors where sizes and addresses allow.
    const bool vec = vec8(it.n, dst, src);
    if (sd == DType::F32 && half(dd)) {
        visit_half(dd, [&]<typename H>(H) {
            if (vec)
                narrow_vec_kernel<H><<<blocks_for(it.n / 8), kThreads, 0, s>>>(
                    it.n / 8, static_cast<uint4*>(dst), static_cast<const float4*>(src));
            else
                convert_dense_kernel<float, H><<<blocks_for(it.n), kThreads, 0, s>>>(
                    it.n, static_cast<H*>(dst), static_cast<const float*>(src));
        });
        return true;
    }
    if (dd == DType::F32 && half(sd)) {
        visit_half(sd, [&]<typename H>(H) {
            if (vec)
                widen_vec_kernel<H><<<blocks_for(it.n / 8), kThreads, 0, s>>>(
                    it.n / 8, static_cast<float4*>(dst), static_cast<const uint4*>(src));
            else
                convert_dense_kernel<H, float><<<blocks_for(it.n), kThreads, 0, s>>>(
                    it.n, static_cast<float*>(dst), static_cast<const H*>(src));
        });
        return true;
    }
    return false;
}

}  // namespace

void launch_copy(const Iter<2>& it, void* dst, DType dd, const void* src, DType sd,
                 cudaStream_t s) {
    if (it.n == 0) return;
    if (dd == sd ||
        (dtype_size(dd) == 1 && dtype_size(sd) == 1 && dd != DType::Bool && sd != DType::Bool)) {
        if (const auto wide = as_vectors(it, static_cast<int>(dtype_size(dd)), dst, src)) {
            copy_kernel<<<blocks_for(wide->n), kThreads, 0, s>>>(*wide, static_cast<uint4*>(dst),
                                                                 static_cast<const uint4*>(src));
            check_launch("copy");
            return;
        }
        switch (dtype_size(dd)) {
            case 8:
                copy_kernel<<<blocks_for(it.n), kThreads, 0, s>>>(
                    it, static_cast<std::uint64_t*>(dst), static_cast<const std::uint64_t*>(src));
                break;
            case 4:
                copy_kernel<<<blocks_for(it.n), kThreads, 0, s>>>(
                    it, static_cast<std::uint32_t*>(dst), static_cast<const std::uint32_t*>(src));
                break;
            case 2:
                copy_kernel<<<blocks_for(it.n), kThreads, 0, s>>>(
                    it, static_cast<std::uint16_t*>(dst), static_cast<const std::uint16_t*>(src));
                break;
            default:
                copy_kernel<<<blocks_for(it.n), kThreads, 0, s>>>(
                    it, static_cast<std::uint8_t*>(dst), static_cast<const std::uint8_t*>(src));
        }
    } else if (!launch_convert_dense(it, dst, dd, src, sd, s)) {
        convert_kernel<<<blocks_for(it.n), kThreads, 0, s>>>(it, dst, dd, src, sd);
    }
    check_launch("copy");
}

void launch_unary(UnaryOp op, DType cd, const Iter<2>& it, void* out, const void* in,
                  cudaStream_t s) {
    if (it.n == 0) return;
    // rank 0: every dim has size 1 (a single element).
    if (cd == DType::F32 && op != UnaryOp::IsNan &&
        (it.rank == 0 || (it.rank == 1 && it.strides[0][0] == 1 && it.strides[1][0] == 1))) {
        static KernelHandle h;
        std::int64_t n = it.n;
        void* args[] = {&op, &n, &out, const_cast<void**>(&in)};
        launch_fast(reinterpret_cast<const void*>(&unary_f32_kernel), h, current_device(),
                    blocks_for(n), kThreads, args, s, "unary");
        return;
    }
    visit_compute(cd, [&]<typename T>(T) {
        if (op == UnaryOp::IsNan)
            isnan_kernel<<<blocks_for(it.n), kThreads, 0, s>>>(it, static_cast<std::uint8_t*>(out),
                                                               static_cast<const T*>(in));
        else
            unary_kernel<<<blocks_for(it.n), kThreads, 0, s>>>(op, it, static_cast<T*>(out),
                                                               static_cast<const T*>(in));
    });
    check_launch("unary");
}

/// f32 `out = a op b` where `out` and one operand (`dense`) are dense over the iteration and the
/// other (`chan`) varies along one dim only: a per-channel [1, C, 1, 1] against [N, C, H, W]
/// (BatchNorm, conv bias) or a bias [C] against [N, C] (Linear). The generic strided kernel
/// spends most of its time in 64-bit index arithmetic for these; here a thread takes four
/// neighbours, which share a channel when `inner` (the elements a channel value covers in a row)
/// is a multiple of four, and 32-bit indices where the tensor allows. `chan_first`: chan is a.
template <typename I>
__global__ void binary_channel_f32x4_kernel(BinaryOp op, I n4, float4* out, const float4* dense,
                                            const float* chan, I inner4, I channels,
                                            std::int64_t chan_stride, bool chan_first) {
    for (I i = blockIdx.x * I(blockDim.x) + threadIdx.x; i < n4; i += I(blockDim.x) * gridDim.x) {
        const float y = chan[std::int64_t((i / inner4) % channels) * chan_stride];
        const float4 x = dense[i];
        out[i] = chan_first ? make_float4(apply_binary(op, y, x.x), apply_binary(op, y, x.y),
                                          apply_binary(op, y, x.z), apply_binary(op, y, x.w))
                            : make_float4(apply_binary(op, x.x, y), apply_binary(op, x.y, y),
                                          apply_binary(op, x.z, y), apply_binary(op, x.w, y));
    }
}
/// The bias case, `inner` = 1 and a dense `chan` of C = 4·c4 values: four neighbours take four
/// neighbouring channels.
template <typename I>
__global__ void binary_lastdim_f32x4_kernel(BinaryOp op, I n4, float4* out, const float4* dense,
                                            const float4* chan, I channels4, bool chan_first) {
    for (I i = blockIdx.x * I(blockDim.x) + threadIdx.x; i < n4; i += I(blockDim.x) * gridDim.x) {
        const float4 y = chan[i % channels4];
        const float4 x = dense[i];
        out[i] = chan_first ? make_float4(apply_binary(op, y.x, x.x), apply_binary(op, y.y, x.y),
                                          apply_binary(op, y.z, x.z), apply_binary(op, y.w, x.w))
                            : make_float4(apply_binary(op, x.x, y.x), apply_binary(op, x.y, y.y),
                                          apply_binary(op, x.z, y.z), apply_binary(op, x.w, y.w));
    }
}

/// Launches the kernels above when the iteration has their shape (see binary_channel_f32x4);
/// false leaves the op to the generic kernel.
bool launch_binary_channel_f32(BinaryOp op, const Iter<3>& it, void* out, const void* a,
                               const void* b, cudaStream_t s) {
    if (it.rank < 2 || it.rank > 3) return false;
    const auto row_major = [&](int k) {
        std::int64_t stride = 1;
        for (int d = it.rank - 1; d >= 0; --d) {
            if (it.strides[k][d] != stride) return false;
            stride *= it.shape[d];
        }
        return true;
    };
    if (!row_major(0)) return false;
    const int c = row_major(1) ? 2 : row_major(2) ? 1 : 0;  // the operand that broadcasts
    if (c == 0) return false;
    int dim = -1;
    for (int d = 0; d < it.rank; ++d) {
        if (it.strides[c][d] == 0) continue;
        if (dim >= 0) return false;  // varies along two dims
        dim = d;
    }
    if (dim < 0) return false;
    std::int64_t inner = 1;
    for (int d = dim + 1; d < it.rank; ++d) inner *= it.shape[d];
    const std::int64_t channels = it.shape[dim], chan_stride = it.strides[c][dim];
    const void* dense = c == 2 ? a : b;
    const void* chan = c == 2 ? b : a;
    const bool chan_first = c == 1;
    const auto aligned = [](const void* p) {
        return reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
    };
    if (!aligned(out) || !aligned(dense)) return false;
    const std::int64_t n4 = it.n / 4;
    const bool small = n4 < (std::int64_t{1} << 31);
    auto* o4 = static_cast<float4*>(out);
    const auto* d4 = static_cast<const float4*>(dense);
    if (inner % 4 == 0) {
        if (small)
            binary_channel_f32x4_kernel<std::uint32_t><<<blocks_for(n4), kThreads, 0, s>>>(
                op, std::uint32_t(n4), o4, d4, static_cast<const float*>(chan),
                std::uint32_t(inner / 4), std::uint32_t(channels), chan_stride, chan_first);
        else
            binary_channel_f32x4_kernel<std::int64_t><<<blocks_for(n4), kThreads, 0, s>>>(
                op, n4, o4, d4, static_cast<const float*>(chan), inner / 4, channels, chan_stride,
                chan_first);
    } else if (inner == 1 && chan_stride == 1 && channels % 4 == 0 && aligned(chan)) {
        const auto* c4 = static_cast<const float4*>(chan);
        if (small)
            binary_lastdim_f32x4_kernel<std::uint32_t><<<blocks_for(n4), kThreads, 0, s>>>(
                op, std::uint32_t(n4), o4, d4, c4, std::uint32_t(channels / 4), chan_first);
        else
            binary_lastdim_f32x4_kernel<std::int64_t>
                <<<blocks_for(n4), kThreads, 0, s>>>(op, n4, o4, d4, c4, channels / 4, chan_first);
    } else {
        return false;
    }
    check_launch("binary");
    return true;
}

void launch_binary(BinaryOp op, DType cd, const Iter<3>& it, void* out, const void* a,
                   const void* b, cudaStream_t s) {
    if (it.n == 0) return;
    const auto aligned = [](const void* p) {
        return reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
    };
    const bool dense = it.rank == 0 || (it.rank == 1 && it.strides[0][0] == 1 &&
                                        it.strides[1][0] == 1 && it.strides[2][0] == 1);
    if (cd == DType::F32 && dense) {
        const bool x4 = it.n % 4 == 0 && aligned(out) && aligned(a) && aligned(b);
        static KernelHandle h4, h1;
        std::int64_t n = x4 ? it.n / 4 : it.n;
        void* args[] = {&op, &n, &out, const_cast<void**>(&a), const_cast<void**>(&b)};
        if (x4)
            launch_fast(reinterpret_cast<const void*>(&binary_f32x4_kernel), h4, current_device(),
                        blocks_for(n), kThreads, args, s, "binary");
        else
            launch_fast(reinterpret_cast<const void*>(&binary_f32_kernel), h1, current_device(),
                        blocks_for(n), kThreads, args, s, "binary");
        return;
    } else if (cd == DType::F32 && launch_binary_channel_f32(op, it, out, a, b, s)) {
        return;
    } else {
        visit_compute(cd, [&]<typename T>(T) {
            binary_kernel<<<blocks_for(it.n), kThreads, 0, s>>>(
                op, it, static_cast<T*>(out), static_cast<const T*>(a), static_cast<const T*>(b));
        });
    }
    check_launch("binary");
}

void launch_compare(CompareOp op, DType cd, const Iter<3>& it, void* out, const void* a,
                    const void* b, cudaStream_t s) {
    if (it.n == 0) return;
    visit_compute(cd, [&]<typename T>(T) {
        compare_kernel<<<blocks_for(it.n), kThreads, 0, s>>>(
            op, it, static_cast<std::uint8_t*>(out), static_cast<const T*>(a),
            static_cast<const T*>(b));
    });
    check_launch("compare");
}

void launch_binary_scalar(BinaryOp op, DType cd, const Iter<2>& it, void* out, const void* a,
                          Scalar v, cudaStream_t s) {
    if (it.n == 0) return;
    if (cd == DType::F32 &&
        (it.rank == 0 || (it.rank == 1 && it.strides[0][0] == 1 && it.strides[1][0] == 1))) {
        static KernelHandle h;
        std::int64_t n = it.n;
        float x = static_cast<float>(v.f);
        void* args[] = {&op, &n, &out, const_cast<void**>(&a), &x};
        launch_fast(reinterpret_cast<const void*>(&binary_scalar_f32_kernel), h, current_device(),
                    blocks_for(n), kThreads, args, s, "binary_scalar");
        return;
    }
    visit_compute(cd, [&]<typename T>(T) {
        const T x = std::is_floating_point_v<T> ? static_cast<T>(v.f) : static_cast<T>(v.i);
        binary_scalar_kernel<<<blocks_for(it.n), kThreads, 0, s>>>(op, it, static_cast<T*>(out),
                                                                   static_cast<const T*>(a), x);
    });
    check_launch("binary_scalar");
}

void launch_compare_scalar(CompareOp op, DType cd, const Iter<2>& it, void* out, const void* a,
                           Scalar v, cudaStream_t s) {
    if (it.n == 0) return;
    visit_compute(cd, [&]<typename T>(T) {
        auto* o = static_cast<std::uint8_t*>(out);
        const T* x = static_cast<const T*>(a);
        if constexpr (std::is_same_v<T, float>) {
            // Compare in f64 so that `x > 0.1` means what it says, unless the scalar is exactly
            // a float (then f32 gives the same answer, cheaper).
            if (static_cast<double>(static_cast<float>(v.f)) == v.f)
                compare_scalar_kernel<<<blocks_for(it.n), kThreads, 0, s>>>(
                    op, it, o, x, static_cast<float>(v.f));
            else
                compare_scalar_kernel<<<blocks_for(it.n), kThreads, 0, s>>>(op, it, o, x, v.f);
        } else if constexpr (std::is_same_v<T, double>) {
            compare_scalar_kernel<<<blocks_for(it.n), kThreads, 0, s>>>(op, it, o, x, v.f);
        } else {
            compare_scalar_kernel<<<blocks_for(it.n), kThreads, 0, s>>>(op, it, o, x,
                                                                        static_cast<T>(v.i));
        }
    });
    check_launch("compare_scalar");
}

void launch_clamp(DType cd, const Iter<2>& it, void* out, const void* a, Scalar lo, Scalar hi,
                  cudaStream_t s) {
    if (it.n == 0) return;
    visit_compute(cd, [&]<typename T>(T) {
        const bool f = std::is_floating_point_v<T>;
        clamp_kernel<<<blocks_for(it.n), kThreads, 0, s>>>(
            it, static_cast<T*>(out), static_cast<const T*>(a),
            f ? static_cast<T>(lo.f) : static_cast<T>(lo.i),
            f ? static_cast<T>(hi.f) : static_cast<T>(hi.i));
    });
    check_launch("clamp");
}

void launch_where(DType cd, const Iter<4>& it, void* out, const void* mask, const void* a,
                  const void* b, cudaStream_t s) {
    if (it.n == 0) return;
    visit_compute(cd, [&]<typename T>(T) {
        where_kernel<<<blocks_for(it.n), kThreads, 0, s>>>(
            it, static_cast<T*>(out), static_cast<const std::uint8_t*>(mask),
            static_cast<const T*>(a), static_cast<const T*>(b));
    });
    check_launch("mask_where");
}

void launch_fill(void* out, DType dt, std::int64_t n, Scalar v, cudaStream_t s) {
    if (n == 0) return;
    const unsigned g = blocks_for(n);
    switch (dt) {
        case DType::F32:
            fill_kernel<<<g, kThreads, 0, s>>>(static_cast<float*>(out), n,
                                               static_cast<float>(v.f));
            break;
        case DType::F64:
            fill_kernel<<<g, kThreads, 0, s>>>(static_cast<double*>(out), n, v.f);
            break;
        case DType::F16:
            fill_kernel<<<g, kThreads, 0, s>>>(static_cast<__half*>(out), n,
                                               __float2half_rn(static_cast<float>(v.f)));
            break;
        case DType::BF16:
            fill_kernel<<<g, kThreads, 0, s>>>(static_cast<__nv_bfloat16*>(out), n,
                                               __float2bfloat16_rn(static_cast<float>(v.f)));
            break;
        case DType::I64:
            fill_kernel<<<g, kThreads, 0, s>>>(static_cast<std::int64_t*>(out), n, v.i);
            break;
        case DType::I32:
            fill_kernel<<<g, kThreads, 0, s>>>(static_cast<std::int32_t*>(out), n,
                                               static_cast<std::int32_t>(v.i));
            break;
        case DType::I16:
            fill_kernel<<<g, kThreads, 0, s>>>(static_cast<std::int16_t*>(out), n,
                                               static_cast<std::int16_t>(v.i));
            break;
        case DType::Bool:
            fill_kernel<<<g, kThreads, 0, s>>>(static_cast<std::uint8_t*>(out), n,
                                               std::uint8_t(v.i != 0 || v.f != 0));
            break;
        default:
            fill_kernel<<<g, kThreads, 0, s>>>(static_cast<std::uint8_t*>(out), n,
                                               static_cast<std::uint8_t>(v.i));
            break;
    }
    check_launch("fill");
}

void launch_arange(std::int64_t* out, std::int64_t n, std::int64_t start, std::int64_t step,
                   cudaStream_t s) {
    if (n == 0) return;
    arange_kernel<<<blocks_for(n), kThreads, 0, s>>>(out, n, start, step);
    check_launch("arange");
}

void launch_random(void* out, DType dt, std::int64_t n, const Distribution& d, std::uint64_t seed,
                   std::uint64_t counter, cudaStream_t s, const std::uint64_t* state) {
    if (n == 0) return;
    switch (dt) {
        case DType::F64:
            random_kernel<<<blocks_for(n), kThreads, 0, s>>>(static_cast<double*>(out), n, d, seed,
                                                             counter, state);
            break;
        case DType::I64:
            random_kernel<<<blocks_for(n), kThreads, 0, s>>>(static_cast<std::int64_t*>(out), n, d,
                                                             seed, counter, state);
            break;
        default:
            random_kernel<<<blocks_for(n), kThreads, 0, s>>>(static_cast<float*>(out), n, d, seed,
                                                             counter, state);
            break;
    }
    check_launch("random");
}

void launch_adam(DType cd, std::int64_t n, void* p_out, void* m_out, void* v_out, const void* p,
                 const void* g, const void* m, const void* v, const AdamStepScalars& sc,
                 cudaStream_t s, const double* replayed) {
    if (n == 0) return;
    if (cd == DType::F64)
        adam_kernel<<<blocks_for(n), kThreads, 0, s>>>(
            n, static_cast<double*>(p_out), static_cast<double*>(m_out),
            static_cast<double*>(v_out), static_cast<const double*>(p),
            static_cast<const double*>(g), static_cast<const double*>(m),
            static_cast<const double*>(v), sc, replayed);
    else
        adam_kernel<<<blocks_for(n), kThreads, 0, s>>>(
            n, static_cast<float*>(p_out), static_cast<float*>(m_out), static_cast<float*>(v_out),
            static_cast<const float*>(p), static_cast<const float*>(g),
            static_cast<const float*>(m), static_cast<const float*>(v), sc, replayed);
    check_launch("adam_step");
}

void launch_sgd(DType cd, std::int64_t n, void* p_out, void* v_out, const void* p, const void* g,
                const void* v, const SgdStepScalars& sc, cudaStream_t s, const double* replayed) {
    if (n == 0) return;
    if (cd == DType::F64)
        sgd_kernel<<<blocks_for(n), kThreads, 0, s>>>(
            n, static_cast<double*>(p_out), static_cast<double*>(v_out),
            static_cast<const double*>(p), static_cast<const double*>(g),
            static_cast<const double*>(v), sc, replayed);
    else
        sgd_kernel<<<blocks_for(n), kThreads, 0, s>>>(
            n, static_cast<float*>(p_out), static_cast<float*>(v_out), static_cast<const float*>(p),
            static_cast<const float*>(g), static_cast<const float*>(v), sc, replayed);
    check_launch("sgd_step");
}

void launch_check_range(const Iter<1>& it, const std::int64_t* v, std::int64_t limit, int mode,
                        int* flag, cudaStream_t s) {
    if (it.n == 0) return;
    check_range_kernel<<<blocks_for(it.n), kThreads, 0, s>>>(it, v, limit, mode, flag);
    check_launch("check_indices");
}

void launch_unary_half(UnaryOp op, DType hd, const Iter<2>& it, void* out, const void* in,
                       cudaStream_t s) {
    if (it.n == 0) return;
    visit_half(hd, [&]<typename H>(H) {
        if (dense(it)) {
            switch (op) {  // the activations of real models, each with its own kernel
                case UnaryOp::Gelu:
                    launch_half_dense<H>(FixedUnaryF<UnaryOp::Gelu>{}, it.n, out, in, nullptr, s);
                    break;
                case UnaryOp::Relu:
                    launch_half_dense<H>(FixedUnaryF<UnaryOp::Relu>{}, it.n, out, in, nullptr, s);
                    break;
                case UnaryOp::Tanh:
                    launch_half_dense<H>(FixedUnaryF<UnaryOp::Tanh>{}, it.n, out, in, nullptr, s);
                    break;
                case UnaryOp::Sigmoid:
                    launch_half_dense<H>(FixedUnaryF<UnaryOp::Sigmoid>{}, it.n, out, in, nullptr,
                                         s);
                    break;
                default:
                    launch_half_dense<H>(UnaryF{op}, it.n, out, in, nullptr, s);
            }
        } else
            unary_half_kernel<<<blocks_for(it.n), kThreads, 0, s>>>(op, it, static_cast<H*>(out),
                                                                    static_cast<const H*>(in));
    });
    check_launch("unary");
}

void launch_binary_half(BinaryOp op, DType hd, const Iter<3>& it, void* out, const void* a,
                        const void* b, cudaStream_t s) {
    if (it.n == 0) return;
    visit_half(hd, [&]<typename H>(H) {
        if (launch_lastdim_half<H>(op, it, out, a, b, s)) return;
        if (dense(it))
            launch_half_dense<H>(BinaryF{op}, it.n, out, a, b, s);
        else
            binary_half_kernel<<<blocks_for(it.n), kThreads, 0, s>>>(
                op, it, static_cast<H*>(out), static_cast<const H*>(a), static_cast<const H*>(b));
    });
    check_launch("binary");
}

void launch_binary_scalar_half(BinaryOp op, DType hd, const Iter<2>& it, void* out, const void* a,
                               Scalar v, cudaStream_t s) {
    if (it.n == 0) return;
    const float x = static_cast<float>(v.f);
    visit_half(hd, [&]<typename H>(H) {
        if (dense(it))
            launch_half_dense<H>(ScalarF{op, x}, it.n, out, a, nullptr, s);
        else
            binary_scalar_half_kernel<<<blocks_for(it.n), kThreads, 0, s>>>(
                op, it, static_cast<H*>(out), static_cast<const H*>(a), x);
    });
    check_launch("binary_scalar");
}

bool launch_binary_mixed(BinaryOp op, const Iter<3>& it, void* out, const void* a, DType ad,
                         const void* b, DType bd, cudaStream_t s) {
    const auto half = [](DType d) { return d == DType::F16 || d == DType::BF16; };
    if (!dense(it) || !((ad == DType::F32 && half(bd)) || (half(ad) && bd == DType::F32)))
        return false;
    if (it.n == 0) return true;
    const auto al = [](const void* p, int bytes) {
        return reinterpret_cast<std::uintptr_t>(p) % bytes == 0;
    };
    const bool x4 = it.n % 4 == 0 && al(out, 16) && al(a, ad == DType::F32 ? 16 : 8) &&
                    al(b, bd == DType::F32 ? 16 : 8);
    const std::int64_t n4 = x4 ? it.n / 4 : 0;
    const unsigned blocks = blocks_for(x4 ? n4 : it.n);
    auto* o = static_cast<float*>(out);
    visit_half(half(ad) ? ad : bd, [&]<typename H>(H) {
        if (ad == DType::F32)
            binary_mixed_kernel<float, H><<<blocks, kThreads, 0, s>>>(
                op, it.n, n4, o, static_cast<const float*>(a), static_cast<const H*>(b));
        else
            binary_mixed_kernel<H, float><<<blocks, kThreads, 0, s>>>(
                op, it.n, n4, o, static_cast<const H*>(a), static_cast<const float*>(b));
    });
    check_launch("binary");
    return true;
}

bool launch_unary_backward(UnaryOp op, DType dt, std::int64_t n, void* out, const void* g,
                           const void* v, cudaStream_t s) {
    if (op != UnaryOp::Gelu && op != UnaryOp::Erf && op != UnaryOp::Tanh &&
        op != UnaryOp::Sigmoid && op != UnaryOp::Relu)
        return false;
    if (n == 0) return true;
    switch (dt) {
        case DType::F32:
            unary_backward_kernel<<<blocks_for(n), kThreads, 0, s>>>(
                op, n, static_cast<float*>(out), static_cast<const float*>(g),
                static_cast<const float*>(v));
            break;
        case DType::F64:
            unary_backward_kernel<<<blocks_for(n), kThreads, 0, s>>>(
                op, n, static_cast<double*>(out), static_cast<const double*>(g),
                static_cast<const double*>(v));
            break;
        case DType::F16:
        case DType::BF16:
            visit_half(dt, [&]<typename H>(H) {
                switch (op) {
                    case UnaryOp::Gelu:
                        launch_half_dense<H>(FixedUnaryGradF<UnaryOp::Gelu>{}, n, out, g, v, s);
                        break;
                    case UnaryOp::Relu:
                        launch_half_dense<H>(FixedUnaryGradF<UnaryOp::Relu>{}, n, out, g, v, s);
                        break;
                    default:
                        launch_half_dense<H>(UnaryGradF{op}, n, out, g, v, s);
                }
            });
            break;
        default:
            return false;
    }
    check_launch("unary_backward");
    return true;
}

}  // namespace ember::detail::cuda
