#pragma once
// The scalar functions behind the CPU's elementwise ops, shared by the op-at-a-time kernels
// (elementwise.cpp) and the fused programs (fusion.cpp) so that both compute exactly the same
// values. Each with_*_fn hands the caller the functor of an op code; callers put their loop
// inside, so the switch runs once per call, not per element.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "ember/detail/bit.hpp"
#include "ember/tensor/check.hpp"
#include "ember/tensor/error.hpp"
#include "ember/tensor/ops.hpp"

namespace ember::detail::cpu {
namespace {

// m ? a : b through bit masks. Written as a conditional, GCC turns an in-place select into a
// conditional store and branches per element (5 ns each on a random mask); this vectorizes.
template <typename T>
inline T select(bool m, T a, T b) {
    using U = std::conditional_t<sizeof(T) == 8, std::uint64_t,
              std::conditional_t<sizeof(T) == 4, std::uint32_t,
              std::conditional_t<sizeof(T) == 2, std::uint16_t, std::uint8_t>>>;
    static_assert(sizeof(T) == sizeof(U));
    const U mask = static_cast<U>(U{0} - static_cast<U>(m));
    return ember::detail::bit_cast<T>(static_cast<U>((ember::detail::bit_cast<U>(a) & mask) |
                                           (ember::detail::bit_cast<U>(b) & static_cast<U>(~mask))));
}

// ---- scalar functions -----------------------------------------------------------------------
// Integer +, - and * wrap around in two's complement, as PyTorch's do (and without the
// undefined behaviour of signed overflow in C++): computed in an unsigned type of at least
// int's width (narrower unsigned types would promote to signed int and could overflow there).
template <typename T>
using WrapT = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;
template <typename T>
T wrap_add(T a, T b) {
    if constexpr (std::is_integral_v<T>)
        return static_cast<T>(static_cast<WrapT<T>>(a) + static_cast<WrapT<T>>(b));
    else
        return a + b;
}
template <typename T>
T wrap_sub(T a, T b) {
    if constexpr (std::is_integral_v<T>)
        return static_cast<T>(static_cast<WrapT<T>>(a) - static_cast<WrapT<T>>(b));
    else
        return a - b;
}
template <typename T>
T wrap_mul(T a, T b) {
    if constexpr (std::is_integral_v<T>)
        return static_cast<T>(static_cast<WrapT<T>>(a) * static_cast<WrapT<T>>(b));
    else
        return a * b;
}

template <typename T>
T floor_div(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
        return std::floor(a / b);
    } else {
        // The lowest value over -1 overflows (a trap on x86): it wraps, as PyTorch's.
        if constexpr (std::is_signed_v<T>)
            if (b == -1) return wrap_sub(T{0}, a);
        T q = a / b;
        if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
        return q;
    }
}
template <typename T>
T py_rem(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
        T r = std::fmod(a, b);
        if (r != 0 && ((r < 0) != (b < 0))) r += b;
        return r;
    } else {
        if constexpr (std::is_signed_v<T>)
            if (b == -1) return T{0};  // the lowest value % -1 would trap
        T r = a % b;
        if (r != 0 && ((r < 0) != (b < 0))) r += b;
        return r;
    }
}
template <typename T>
T int_pow(T base, T exp) {
    if (exp < 0) return (base == 1) ? 1 : (base == -1 ? ((exp & 1) ? -1 : 1) : 0);
    T r = 1;
    while (exp) {
        if (exp & 1) r = wrap_mul(r, base);
        base = wrap_mul(base, base);
        exp >>= 1;
    }
    return r;
}
template <typename T>
T nan_max(T a, T b) {
    if constexpr (std::is_floating_point_v<T>)
        if (a != a || b != b) return a != a ? a : b;
    return a > b ? a : b;
}
template <typename T>
T nan_min(T a, T b) {
    if constexpr (std::is_floating_point_v<T>)
        if (a != a || b != b) return a != a ? a : b;
    return a < b ? a : b;
}

// Shifts of two's-complement integers by any amount: C++ leaves a shift by a negative amount
// or by the bit width or more undefined (x86 shifts by the amount mod the width, which is what
// PyTorch 1.13 returns there), so such shifts are given PyTorch 2's result instead: 0 for a
// left shift, the sign fill (0 or -1) for the arithmetic right shift.
template <typename T>
bool shift_in_range(T b) {
    if constexpr (std::is_signed_v<T>)
        if (b < 0) return false;
    return b < static_cast<T>(sizeof(T) * 8);
}
template <typename T>
T shift_left(T a, T b) {
    return shift_in_range(b) ? static_cast<T>(static_cast<WrapT<T>>(a) << b) : T{0};
}
template <typename T>
T shift_right(T a, T b) {
    if (shift_in_range(b)) return static_cast<T>(a >> b);  // arithmetic for signed T (C++20)
    if constexpr (std::is_signed_v<T>) return a < 0 ? T{-1} : T{0};
    return T{0};
}

inline const char* binary_name(BinaryOp op) {
    return check::binary_op_name(op);
}

// Calls f(functor) with the functor for `op` on element type T (the scalar forms pass the
// scalar as the right operand; the R* ops swap operands).
template <typename T, typename F>
void with_binary_fn(BinaryOp op, F&& f) {
    if constexpr (std::is_same_v<T, bool>) {
        switch (op) {
            case BinaryOp::And: return f([](bool a, bool b) { return a && b; });
            case BinaryOp::Or:
            case BinaryOp::Add:
            case BinaryOp::Max: return f([](bool a, bool b) { return a || b; });
            case BinaryOp::Xor: return f([](bool a, bool b) { return a != b; });
            case BinaryOp::Mul:
            case BinaryOp::Min: return f([](bool a, bool b) { return a && b; });
            default:
                EMBER_FAIL(DType, binary_name(op), ": not defined for bool tensors");
        }
    } else {
        switch (op) {
            case BinaryOp::Add: return f([](T a, T b) { return wrap_add(a, b); });
            case BinaryOp::Sub: return f([](T a, T b) { return wrap_sub(a, b); });
            case BinaryOp::RSub: return f([](T a, T b) { return wrap_sub(b, a); });
            case BinaryOp::Mul: return f([](T a, T b) { return wrap_mul(a, b); });
            case BinaryOp::Div:
                if constexpr (std::is_floating_point_v<T>) return f([](T a, T b) { return a / b; });
                else return f([](T a, T b) { return floor_div(a, b); });
            case BinaryOp::RDiv:
                if constexpr (std::is_floating_point_v<T>) return f([](T a, T b) { return b / a; });
                else return f([](T a, T b) { return floor_div(b, a); });
            case BinaryOp::Rem: return f([](T a, T b) { return py_rem(a, b); });
            case BinaryOp::RRem: return f([](T a, T b) { return py_rem(b, a); });
            case BinaryOp::Pow:
                if constexpr (std::is_floating_point_v<T>)
                    return f([](T a, T b) { return static_cast<T>(std::pow(a, b)); });
                else return f([](T a, T b) { return int_pow(a, b); });
            case BinaryOp::RPow:
                if constexpr (std::is_floating_point_v<T>)
                    return f([](T a, T b) { return static_cast<T>(std::pow(b, a)); });
                else return f([](T a, T b) { return int_pow(b, a); });
            case BinaryOp::Max: return f([](T a, T b) { return nan_max(a, b); });
            case BinaryOp::Min: return f([](T a, T b) { return nan_min(a, b); });
            default:
                if constexpr (std::is_integral_v<T>) {
                    switch (op) {
                        case BinaryOp::And:
                            return f([](T a, T b) { return static_cast<T>(a & b); });
                        case BinaryOp::Or:
                            return f([](T a, T b) { return static_cast<T>(a | b); });
                        case BinaryOp::Xor:
                            return f([](T a, T b) { return static_cast<T>(a ^ b); });
                        case BinaryOp::Shl:
                            return f([](T a, T b) { return shift_left(a, b); });
                        case BinaryOp::Shr:
                            return f([](T a, T b) { return shift_right(a, b); });
                        default:
                            break;
                    }
                }
                // The kernels check check::binary_dtype first; this is the backstop.
                EMBER_FAIL(DType, binary_name(op), ": not defined for float tensors");
        }
    }
}

template <typename T, typename F>
void with_compare_fn(CompareOp op, F&& f) {
    switch (op) {
        case CompareOp::Eq: return f([](T a, T b) { return a == b; });
        case CompareOp::Ne: return f([](T a, T b) { return a != b; });
        case CompareOp::Gt: return f([](T a, T b) { return a > b; });
        case CompareOp::Ge: return f([](T a, T b) { return a >= b; });
        case CompareOp::Lt: return f([](T a, T b) { return a < b; });
        case CompareOp::Le: return f([](T a, T b) { return a <= b; });
    }
}
inline const char* compare_name(CompareOp op) {
    return check::compare_op_name(op);
}
// ---- f32 exp and erf written so that loops over them vectorize ------------------------------
// libm's expf/erff are calls the compiler cannot vectorize; these are branch-free (selects
// only) with errors of about 1 ulp (exp) and 2e-7 absolute (erf), and keep NaN and ±inf.
inline float fast_exp(float x) {
    // Out of range (|x| large, ±inf) the steps below give garbage that the selects at the end
    // replace; NaN flows through every step and comes out NaN. (Clamping x first reads better,
    // but GCC then specialises the constant path and no longer vectorizes loops over this.)
    const float xc = x;
    // n = round(x / ln2) by the 1.5·2^23 trick, which also leaves n in the low mantissa bits
    // (no float → int conversion, which would be undefined for NaN).
    const float shifted = xc * 1.44269504088896341f + 12582912.0f;
    const float n = shifted - 12582912.0f;
    const std::int32_t ni =
        static_cast<std::int32_t>(ember::detail::bit_cast<std::uint32_t>(shifted) - 0x4B400000u);
    // x - n·ln2 in two steps (Cody-Waite), then exp on [-ln2/2, ln2/2] by a degree-6 polynomial.
    float r = xc - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    const float e = p * r * r + r + 1.0f;
    // 2^n in two factors, so that n in [-150, 128] needs no exponent outside the normal range
    // (overflow gives inf and deep underflow 0, through the multiplications' rounding).
    const std::int32_t n1 = ni / 2, n2 = ni - n1;
    const float s1 = ember::detail::bit_cast<float>(static_cast<std::uint32_t>(n1 + 127) << 23);
    const float s2 = ember::detail::bit_cast<float>(static_cast<std::uint32_t>(n2 + 127) << 23);
    const float y = e * s1 * s2;
    // Bit-mask selects: with ?: GCC moves the polynomial into a branch and stops vectorizing.
    return select(x > 88.7228394f, INFINITY, select(x < -103.972084f, 0.0f, y));
}

// fast_erf's P and Q, highest power first (fusion.cpp's AVX-512 erf uses them too).
constexpr float kErfP[] = {-1.320067522e-08f, 4.684475698e-06f, 3.795979428e-04f,
                           3.849590896e-03f,  5.431669205e-02f, 1.852035075e-01f,
                           1.128379226e+00f};
constexpr float kErfQ[] = {6.310773460e-05f, 1.307551051e-03f, 1.546200924e-02f,
                           1.139583066e-01f, 4.974657595e-01f, 1.0f};

inline float fast_erf(float x) {
    // erf(x) = x * P(x^2) / Q(x^2) on [-4, 4], a rational minimax fit of erf(x)/x (coefficients
    // from tools/approx/fit_erf.py; f32 error below 3e-7, relative and absolute). Past |x| = 4
    // erf rounds to ±1 in f32, so x is clamped there; one division, no exp, no branches.
    // NaN fails both comparisons and flows through.
    const float xc = select(x > 4.0f, 4.0f, select(x < -4.0f, -4.0f, x));
    const float t = xc * xc;
    float p = kErfP[0];
    p = p * t + kErfP[1];
    p = p * t + kErfP[2];
    p = p * t + kErfP[3];
    p = p * t + kErfP[4];
    p = p * t + kErfP[5];
    p = p * t + kErfP[6];
    float q = kErfQ[0];
    q = q * t + kErfQ[1];
    q = q * t + kErfQ[2];
    q = q * t + kErfQ[3];
    q = q * t + kErfQ[4];
    q = q * t + kErfQ[5];
    const float y = xc * p / q;
    // The fit overshoots 1 by an ulp or two near |x| = 4.
    return select(y > 1.0f, 1.0f, select(y < -1.0f, -1.0f, y));
}

/// Whether x / v equals x * (1 / v) for every x: v is a power of two whose reciprocal is a
/// normal number (both are then one rounding of the same real number). Scalar divisions by such
/// v (x / 2) run as multiplications, which cost a fraction of a division.
template <typename T>
bool exact_reciprocal(T v) {
    if (!std::isfinite(v) || v == T(0)) return false;
    int e = 0;
    return std::fabs(std::frexp(v, &e)) == T(0.5) && std::isnormal(T(1) / v);
}

template <typename T>
inline T exp_fn(T x) {
    if constexpr (std::is_same_v<T, float>) return fast_exp(x);
    else return std::exp(x);
}
template <typename T>
inline T erf_fn(T x) {
    if constexpr (std::is_same_v<T, float>) return fast_erf(x);
    else return std::erf(x);
}

/// Calls f(functor) with the functor for unary `op` on element type T (bool: Not only;
/// integers: Neg, Abs, Sign, Relu). IsNan and Not on other types are the caller's business.
template <typename T, typename F>
void with_unary_fn(UnaryOp op, F&& f) {
    if constexpr (std::is_same_v<T, bool>) {
        EMBER_CHECK(op == UnaryOp::Not, DType, "unary op ", static_cast<int>(op),
                    " is not defined for bool tensors");
        return f([](bool x) { return !x; });
    } else if constexpr (std::is_integral_v<T>) {
        switch (op) {
            case UnaryOp::Neg: return f([](T x) { return wrap_sub(T{0}, x); });
            case UnaryOp::Abs: return f([](T x) { return x < 0 ? wrap_sub(T{0}, x) : x; });
            case UnaryOp::Sign: return f([](T x) { return static_cast<T>((x > 0) - (x < 0)); });
            case UnaryOp::Relu: return f([](T x) { return x > 0 ? x : T{0}; });
            case UnaryOp::Not:
                return f([](T x) { return static_cast<T>(~x); });
            default:
                EMBER_FAIL(DType, "unary op ", static_cast<int>(op),
                           " is not defined for integer tensors");
        }
    } else {
        switch (op) {
            case UnaryOp::Neg: return f([](T x) { return -x; });
            case UnaryOp::Abs: return f([](T x) { return std::fabs(x); });
            case UnaryOp::Exp: return f([](T x) { return exp_fn(x); });
            case UnaryOp::Log: return f([](T x) { return std::log(x); });
            case UnaryOp::Log1p: return f([](T x) { return std::log1p(x); });
            case UnaryOp::Sqrt: return f([](T x) { return std::sqrt(x); });
            case UnaryOp::Sin: return f([](T x) { return std::sin(x); });
            case UnaryOp::Cos: return f([](T x) { return std::cos(x); });
            case UnaryOp::Tanh: return f([](T x) { return std::tanh(x); });
            case UnaryOp::Erf: return f([](T x) { return erf_fn(x); });
            case UnaryOp::Recip: return f([](T x) { return T{1} / x; });
            case UnaryOp::Floor: return f([](T x) { return std::floor(x); });
            case UnaryOp::Ceil: return f([](T x) { return std::ceil(x); });
            case UnaryOp::Round: return f([](T x) { return std::nearbyint(x); });
            case UnaryOp::Sign: return f([](T x) { return static_cast<T>((x > 0) - (x < 0)); });
            case UnaryOp::Sigmoid:
                return f([](T x) {
                    // Written so that neither branch overflows exp.
                    const T e = exp_fn(-std::fabs(x));
                    return select(x >= 0, T{1}, e) / (T{1} + e);
                });
            case UnaryOp::Relu: return f([](T x) { return x > 0 ? x : (x != x ? x : T{0}); });
            case UnaryOp::Gelu:
                return f([](T x) {
                    return x * T(0.5) * (T{1} + erf_fn(x * T(0.70710678118654752440)));
                });
            case UnaryOp::IsNan:
            case UnaryOp::Not:
                EMBER_FAIL(DType, "unary op ", static_cast<int>(op),
                           " is not a float → float function");
        }
    }
}

}  // namespace
}  // namespace ember::detail::cpu
