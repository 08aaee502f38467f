#pragma once
// 8-wide float vectors (GCC/Clang vector types) for the hot float loops of the reductions and
// the norms: explicit 8-wide math that lowers to AVX2 here and to narrower or scalar code
// elsewhere, where the auto-vectoriser gives up (exp + store + sum, NaN-aware max).
#include <cstdint>
#include <cstring>

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

}  // namespace ember::detail::cpu
