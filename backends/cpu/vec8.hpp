#pragma once
// 8-wide float vectors (GCC/Clang vector types) for the hot float loops of the reductions and
// the norms: explicit 8-wide math that lowers to AVX2 here and to narrower or scalar code
// elsewhere, where the auto-vectoriser gives up (exp + store + sum, NaN-aware max).
#include <cstdint>
#include <cstring>

#include <ember/detail/bit.hpp>

// Builds without AVX warn that 32-byte vectors change the calling convention; these helpers
// are internal and inlined, so no call ever passes one across an ABI boundary.
#if defined(__clang__)
#pragma clang diagnostic ignored "-Wpsabi"
#elif defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

namespace ember::detail::cpu {

typedef float f32x8 __attribute__((vector_size(32)));
typedef std::int32_t i32x8 __attribute__((vector_size(32)));
inline constexpr std::size_t kW = 8;

inline f32x8 load8(const float* p) {
    f32x8 v;
    std::memcpy(&v, p, sizeof v);
    return v;
}
inline void store8(float* p, const f32x8& v) {
    std::memcpy(p, &v, sizeof v);
}
inline f32x8 splat8(float x) {
    return f32x8{} + x;
}

/// exp(x) for x <= 0 or NaN (softmax and attention only ever need x - max), for float or a
/// vector type V with int lanes I (f32x8 and i32x8); libm's expf does not vectorise without
/// -ffast-math. Cody-Waite reduction to [-ln2/2, ln2/2] and Cephes' polynomial: about 1 ulp.
/// Results below FLT_MIN flush to 0 (so -inf gives exactly 0); NaN propagates. Staying at or
/// below 0 keeps the exponent n in [-126, 0], so one scale suffices.
/// The result goes to `out` rather than being returned: reduce.cpp's AVX-512 softmax row calls this
/// from a target("avx512f") function, and Clang rejects passing or returning a 512-bit vector by
/// value to or from a function compiled without AVX-512 (it would change the ABI); inlined, the
/// body takes the caller's instruction set.
template <typename V, typename I>
[[gnu::always_inline]] inline void exp_nonpos_to(const V& x, V& out) {
    constexpr float kLog2e = 1.44269504088896341f;
    constexpr float kLn2Hi = 0.693359375f;
    constexpr float kLn2Lo = -2.12194440e-4f;
    constexpr float kShift = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
    const V lo = V{} + -87.33654f;         // ln(FLT_MIN)
    const V xc = x < lo ? lo : x;
    const V t = xc * kLog2e + kShift;
    const V fn = t - kShift;
    // The builtin itself on vectors: a function returning one would change the ABI (-Wpsabi).
    const I ni = __builtin_bit_cast(I, t) - ember::detail::bit_cast<std::int32_t>(kShift);
    V r = xc - fn * kLn2Hi;
    r = r - fn * kLn2Lo;
    V q = V{} + 1.9875691500e-4f;
    q = q * r + 1.3981999507e-3f;
    q = q * r + 8.3334519073e-3f;
    q = q * r + 4.1665795894e-2f;
    q = q * r + 1.6666665459e-1f;
    q = q * r + 5.0000001201e-1f;
    const V poly = (q * r) * r + r + 1.0f;
    const V y = poly * __builtin_bit_cast(V, (ni + 127) << 23);
    out = x < lo ? V{} : y;
}

}  // namespace ember::detail::cpu
