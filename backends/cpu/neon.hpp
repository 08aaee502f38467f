#pragma once
// NEON (Arm AdvSIMD) kernels of the CPU backend for 64-bit Arm: the float GEMM micro-kernel,
// exp and erf over contiguous floats (the elementwise ops whose scalar code is a polynomial),
// the contiguous float sum, max and min, and the softmax row. Callers pick them at run time
// through neon_enabled(), as the x86-64 build picks its AVX-512 kernels; on AArch64 NEON is part
// of the base architecture, so the check only fails where EMBER_CPU_NEON=0 asks for the portable
// kernels (the tests run both).
//
// exp and erf perform the scalar functions' operations (elementwise_fns.hpp) in the same order
// without fused multiply-adds, so they give the same bits; the softmax exp follows reduce.cpp's
// exp_nonpos the same way. The GEMM and the sums use fused multiply-adds and their own order of
// summation, as the x86 kernels do.
#include <cstddef>
#include <cstdint>

#if defined(__aarch64__) && defined(__ARM_NEON) && defined(__GNUC__)
#define EMBER_CPU_NEON 1
#include <arm_neon.h>
#else
#define EMBER_CPU_NEON 0
#endif

namespace ember::detail::cpu {

/// Whether the NEON kernels run: built for AArch64, the processor reports AdvSIMD (every
/// AArch64 Linux system does), and EMBER_CPU_NEON is not 0/off. Read once.
bool neon_enabled();

#if EMBER_CPU_NEON
namespace neon {

#define EMBER_NEON_INLINE inline __attribute__((always_inline))

// ---- GEMM micro-kernel ------------------------------------------------------------------------
/// Rows and columns of the float micro-tile: 8×12 takes 24 of the 32 vector registers for
/// accumulators, 3 for a row of B and 2 for the column of A, whose lanes the FMAs broadcast.
inline constexpr std::size_t kGemmMR = 8, kGemmNR = 12;

template <int I>
EMBER_NEON_INLINE void gemm_row(float32x4_t (&c)[kGemmMR][3], const float32x4_t (&b)[3],
                                float32x4_t a) {
    c[I][0] = vfmaq_laneq_f32(c[I][0], b[0], a, I % 4);
    c[I][1] = vfmaq_laneq_f32(c[I][1], b[1], a, I % 4);
    c[I][2] = vfmaq_laneq_f32(c[I][2], b[2], a, I % 4);
}

/// out[8×12] = A panel (k-major, 8 rows) · B panel (k-major, 12 columns) over depth kc; `pf`,
/// when set, is the next B panel, pulled towards the cache as this one is read.
EMBER_NEON_INLINE void gemm_8x12(std::size_t kc, const float* __restrict ap,
                                 const float* __restrict bp, float* __restrict out,
                                 const float* pf) {
    float32x4_t c[kGemmMR][3];
    for (std::size_t i = 0; i < kGemmMR; ++i)
        for (std::size_t v = 0; v < 3; ++v) c[i][v] = vdupq_n_f32(0.0f);
    for (std::size_t p = 0; p < kc; ++p, ap += kGemmMR, bp += kGemmNR) {
        const float32x4_t b[3] = {vld1q_f32(bp), vld1q_f32(bp + 4), vld1q_f32(bp + 8)};
        const float32x4_t a0 = vld1q_f32(ap), a1 = vld1q_f32(ap + 4);
        if (pf) __builtin_prefetch(pf + p * kGemmNR, 0, 2);
        gemm_row<0>(c, b, a0);
        gemm_row<1>(c, b, a0);
        gemm_row<2>(c, b, a0);
        gemm_row<3>(c, b, a0);
        gemm_row<4>(c, b, a1);
        gemm_row<5>(c, b, a1);
        gemm_row<6>(c, b, a1);
        gemm_row<7>(c, b, a1);
    }
    for (std::size_t i = 0; i < kGemmMR; ++i)
        for (std::size_t v = 0; v < 3; ++v) vst1q_f32(out + i * kGemmNR + v * 4, c[i][v]);
}

// ---- elementwise exp and erf ------------------------------------------------------------------
EMBER_NEON_INLINE float32x4_t mul_add(float32x4_t a, float32x4_t b, float c) {
    return vaddq_f32(vmulq_f32(a, b), vdupq_n_f32(c));  // not fused: the scalar code's rounding
}

/// fast_exp (elementwise_fns.hpp) on four floats.
EMBER_NEON_INLINE float32x4_t exp4(float32x4_t x) {
    const float32x4_t shift = vdupq_n_f32(12582912.0f);
    const float32x4_t shifted = vaddq_f32(vmulq_f32(x, vdupq_n_f32(1.44269504088896341f)), shift);
    const float32x4_t n = vsubq_f32(shifted, shift);
    const int32x4_t ni =
        vreinterpretq_s32_u32(vsubq_u32(vreinterpretq_u32_f32(shifted), vdupq_n_u32(0x4B400000u)));
    float32x4_t r = vsubq_f32(x, vmulq_f32(n, vdupq_n_f32(0.693359375f)));
    r = vsubq_f32(r, vmulq_f32(n, vdupq_n_f32(-2.12194440e-4f)));
    float32x4_t p = vdupq_n_f32(1.9875691500e-4f);
    p = mul_add(p, r, 1.3981999507e-3f);
    p = mul_add(p, r, 8.3334519073e-3f);
    p = mul_add(p, r, 4.1665795894e-2f);
    p = mul_add(p, r, 1.6666665459e-1f);
    p = mul_add(p, r, 5.0000001201e-1f);
    const float32x4_t e = vaddq_f32(vaddq_f32(vmulq_f32(vmulq_f32(p, r), r), r), vdupq_n_f32(1.0f));
    // n1 = ni / 2 rounded toward zero, as C++ divides: add the sign bit before the shift.
    const int32x4_t n1 = vshrq_n_s32(
        vaddq_s32(ni, vreinterpretq_s32_u32(vshrq_n_u32(vreinterpretq_u32_s32(ni), 31))), 1);
    const int32x4_t n2 = vsubq_s32(ni, n1);
    const int32x4_t bias = vdupq_n_s32(127);
    const float32x4_t s1 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(n1, bias), 23));
    const float32x4_t s2 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(n2, bias), 23));
    const float32x4_t y = vmulq_f32(vmulq_f32(e, s1), s2);
    const float32x4_t under =
        vbslq_f32(vcltq_f32(x, vdupq_n_f32(-103.972084f)), vdupq_n_f32(0.0f), y);
    return vbslq_f32(vcgtq_f32(x, vdupq_n_f32(88.7228394f)), vdupq_n_f32(__builtin_inff()), under);
}

/// fast_erf (elementwise_fns.hpp) on four floats, with its coefficients `p` (7) and `q` (6).
EMBER_NEON_INLINE float32x4_t erf4(float32x4_t x, const float* pc, const float* qc) {
    const float32x4_t four = vdupq_n_f32(4.0f), mfour = vdupq_n_f32(-4.0f);
    const float32x4_t xc =
        vbslq_f32(vcgtq_f32(x, four), four, vbslq_f32(vcltq_f32(x, mfour), mfour, x));
    const float32x4_t t = vmulq_f32(xc, xc);
    float32x4_t p = vdupq_n_f32(pc[0]);
    for (int k = 1; k < 7; ++k) p = mul_add(p, t, pc[k]);
    float32x4_t q = vdupq_n_f32(qc[0]);
    for (int k = 1; k < 6; ++k) q = mul_add(q, t, qc[k]);
    const float32x4_t y = vdivq_f32(vmulq_f32(xc, p), q);
    const float32x4_t one = vdupq_n_f32(1.0f), mone = vdupq_n_f32(-1.0f);
    return vbslq_f32(vcgtq_f32(y, one), one, vbslq_f32(vcltq_f32(y, mone), mone, y));
}

/// y[i] = exp(x[i]) for i < n, as fast_exp; the last n % 4 through `tail` (the scalar function).
template <typename Tail>
inline void exp_f32(const float* x, float* y, std::size_t n, Tail tail) {
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const float32x4_t a = exp4(vld1q_f32(x + i)), b = exp4(vld1q_f32(x + i + 4));
        vst1q_f32(y + i, a);
        vst1q_f32(y + i + 4, b);
    }
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, exp4(vld1q_f32(x + i)));
    for (; i < n; ++i) y[i] = tail(x[i]);
}

/// y[i] = erf(x[i]) for i < n, as fast_erf with its coefficients; the rest through `tail`.
template <typename Tail>
inline void erf_f32(const float* x, float* y, std::size_t n, const float* pc, const float* qc,
                    Tail tail) {
    std::size_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, erf4(vld1q_f32(x + i), pc, qc));
    for (; i < n; ++i) y[i] = tail(x[i]);
}

// ---- reductions -------------------------------------------------------------------------------
/// Sum of n contiguous floats: sixteen independent lanes, folded into a double every 2048
/// elements so that the error grows with the block, not with n (as the AVX-512 sum).
inline double sum_f32(const float* p, std::size_t n) {
    double total = 0.0;
    std::size_t i = 0;
    for (; i + 2048 <= n; i += 2048) {
        float32x4_t a0 = vdupq_n_f32(0.0f), a1 = a0, a2 = a0, a3 = a0;
        for (std::size_t j = i; j < i + 2048; j += 16) {
            a0 = vaddq_f32(a0, vld1q_f32(p + j));
            a1 = vaddq_f32(a1, vld1q_f32(p + j + 4));
            a2 = vaddq_f32(a2, vld1q_f32(p + j + 8));
            a3 = vaddq_f32(a3, vld1q_f32(p + j + 12));
        }
        total += vaddvq_f32(vaddq_f32(vaddq_f32(a0, a1), vaddq_f32(a2, a3)));
    }
    float32x4_t a = vdupq_n_f32(0.0f);
    for (; i + 4 <= n; i += 4) a = vaddq_f32(a, vld1q_f32(p + i));
    float rest = vaddvq_f32(a);
    for (; i < n; ++i) rest += p[i];
    return total + rest;
}

/// Max (or min) of n > 0 contiguous floats, NaN if any is NaN: NEON's FMAX/FMIN return NaN
/// when either operand is NaN, so no separate NaN check is needed.
template <bool IsMax>
inline float extreme_f32(const float* p, std::size_t n) {
    const auto pick = [](float32x4_t a, float32x4_t b) {
        return IsMax ? vmaxq_f32(a, b) : vminq_f32(a, b);
    };
    const float id = IsMax ? -__builtin_inff() : __builtin_inff();
    float32x4_t m0 = vdupq_n_f32(id), m1 = m0, m2 = m0, m3 = m0;
    std::size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        m0 = pick(m0, vld1q_f32(p + i));
        m1 = pick(m1, vld1q_f32(p + i + 4));
        m2 = pick(m2, vld1q_f32(p + i + 8));
        m3 = pick(m3, vld1q_f32(p + i + 12));
    }
    for (; i + 4 <= n; i += 4) m0 = pick(m0, vld1q_f32(p + i));
    const float32x4_t m = pick(pick(m0, m1), pick(m2, m3));
    float r = IsMax ? vmaxvq_f32(m) : vminvq_f32(m);
    bool nan = r != r;
    for (; i < n; ++i) {
        nan |= p[i] != p[i];
        r = IsMax ? (p[i] > r ? p[i] : r) : (p[i] < r ? p[i] : r);
    }
    return nan ? __builtin_nanf("") : r;
}

// ---- softmax ----------------------------------------------------------------------------------
/// exp(x) for x <= 0 or NaN, reduce.cpp's exp_nonpos on four floats (the same operations).
EMBER_NEON_INLINE float32x4_t exp_nonpos4(float32x4_t x) {
    const float32x4_t lo = vdupq_n_f32(-87.33654f);  // ln(FLT_MIN)
    const uint32x4_t below = vcltq_f32(x, lo);
    const float32x4_t xc = vbslq_f32(below, lo, x);
    const float32x4_t shift = vdupq_n_f32(12582912.0f);
    const float32x4_t t = vaddq_f32(vmulq_f32(xc, vdupq_n_f32(1.44269504088896341f)), shift);
    const float32x4_t fn = vsubq_f32(t, shift);
    const int32x4_t ni = vsubq_s32(vreinterpretq_s32_f32(t), vdupq_n_s32(0x4B400000));
    float32x4_t r = vsubq_f32(xc, vmulq_f32(fn, vdupq_n_f32(0.693359375f)));
    r = vsubq_f32(r, vmulq_f32(fn, vdupq_n_f32(-2.12194440e-4f)));
    float32x4_t q = vdupq_n_f32(1.9875691500e-4f);
    q = mul_add(q, r, 1.3981999507e-3f);
    q = mul_add(q, r, 8.3334519073e-3f);
    q = mul_add(q, r, 4.1665795894e-2f);
    q = mul_add(q, r, 1.6666665459e-1f);
    q = mul_add(q, r, 5.0000001201e-1f);
    const float32x4_t poly =
        vaddq_f32(vaddq_f32(vmulq_f32(vmulq_f32(q, r), r), r), vdupq_n_f32(1.0f));
    const float32x4_t y =
        vmulq_f32(poly, vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(ni, vdupq_n_s32(127)), 23)));
    return vbslq_f32(below, vdupq_n_f32(0.0f), y);
}

/// Softmax (or log-softmax) of one row of n > 0 contiguous floats: max, exp and sum, scale.
/// A NaN in the row makes the max NaN and with it every output, as the portable row gives.
/// `exp1` and `log1` are the scalar exp_nonpos and log for the last n % 4 elements.
template <bool Log, typename Exp1, typename Log1>
inline void softmax_row_f32(const float* p, float* o, std::size_t n, Exp1 exp1, Log1 log1) {
    float32x4_t m0 = vdupq_n_f32(-__builtin_inff()), m1 = m0;
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        m0 = vmaxq_f32(m0, vld1q_f32(p + i));
        m1 = vmaxq_f32(m1, vld1q_f32(p + i + 4));
    }
    for (; i + 4 <= n; i += 4) m0 = vmaxq_f32(m0, vld1q_f32(p + i));
    float mx = vmaxvq_f32(vmaxq_f32(m0, m1));
    for (; i < n; ++i) mx = (p[i] > mx || p[i] != p[i]) ? p[i] : mx;

    const float32x4_t vmx = vdupq_n_f32(mx);
    float32x4_t s0 = vdupq_n_f32(0.0f), s1 = s0;
    i = 0;
    for (; i + 8 <= n; i += 8) {
        const float32x4_t e0 = exp_nonpos4(vsubq_f32(vld1q_f32(p + i), vmx));
        const float32x4_t e1 = exp_nonpos4(vsubq_f32(vld1q_f32(p + i + 4), vmx));
        if constexpr (!Log) {
            vst1q_f32(o + i, e0);
            vst1q_f32(o + i + 4, e1);
        }
        s0 = vaddq_f32(s0, e0);
        s1 = vaddq_f32(s1, e1);
    }
    for (; i + 4 <= n; i += 4) {
        const float32x4_t e = exp_nonpos4(vsubq_f32(vld1q_f32(p + i), vmx));
        if constexpr (!Log) vst1q_f32(o + i, e);
        s0 = vaddq_f32(s0, e);
    }
    float sum = vaddvq_f32(vaddq_f32(s0, s1));
    for (; i < n; ++i) {
        const float e = exp1(p[i] - mx);
        if constexpr (!Log) o[i] = e;
        sum += e;
    }

    i = 0;
    if constexpr (Log) {
        const float ls = log1(sum);
        const float32x4_t vls = vdupq_n_f32(ls);
        for (; i + 4 <= n; i += 4)
            vst1q_f32(o + i, vsubq_f32(vsubq_f32(vld1q_f32(p + i), vmx), vls));
        for (; i < n; ++i) o[i] = (p[i] - mx) - ls;
    } else {
        const float inv = 1.0f / sum;
        const float32x4_t vinv = vdupq_n_f32(inv);
        for (; i + 4 <= n; i += 4) vst1q_f32(o + i, vmulq_f32(vld1q_f32(o + i), vinv));
        for (; i < n; ++i) o[i] *= inv;
    }
}

#undef EMBER_NEON_INLINE

}  // namespace neon
#endif

}  // namespace ember::detail::cpu
