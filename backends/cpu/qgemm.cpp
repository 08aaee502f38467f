// The int8 GEMM (see qgemm.hpp): packing, the three kernels and their run-time dispatch.
//
// vpdpbusd multiplies unsigned bytes by signed bytes, four pairs per 32-bit lane, and adds the
// sums to the lane without saturating — the exact s32 sums, unlike pmaddubsw's s16 pairs that
// saturate (why fbgemm quantizes activations to 7 bits on plain AVX2). Activations therefore
// enter as u8 (int8 + 128) and the zero points are taken out after the sums:
//   Σ (a - za)(w - zw) = Σ a·w - za·Σ w - zw·Σ a + k·za·zw.
#include "qgemm.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "parallel.hpp"

#if defined(__x86_64__) && !EMBER_FREESTANDING
#include <cpuid.h>
#include <immintrin.h>
#define EMBER_QGEMM_X86 1
#else
#define EMBER_QGEMM_X86 0
#endif

namespace ember::detail::cpu {
namespace {

constexpr std::size_t kLanes = 16;     // output channels per panel
constexpr std::size_t kPanelRow = 64;  // bytes of one panel row (16 channels × 4 k)
constexpr std::size_t kMaxRows = 4;    // activation rows per kernel call

inline std::int32_t load4(const std::uint8_t* p) {
    std::int32_t v;
    std::memcpy(&v, p, 4);
    return v;
}

// Each kernel computes acc[i][c] = Σ_k a[i][k]·w[k][c] for `rows` ≤ 4 rows and the `nb` panels
// starting at `panel` (the 16·nb channels they hold), into acc rows of `ldc` int32.
using Kernel = void (*)(const std::uint8_t* a, std::size_t lda, std::size_t rows,
                        const std::int8_t* panel, std::size_t panel_bytes, std::size_t nb,
                        std::size_t kp, std::int32_t* acc, std::size_t ldc);

void kernel_portable(const std::uint8_t* a, std::size_t lda, std::size_t rows,
                     const std::int8_t* panel, std::size_t panel_bytes, std::size_t nb,
                     std::size_t kp, std::int32_t* acc, std::size_t ldc) {
    for (std::size_t i = 0; i < rows; ++i) {
        for (std::size_t b = 0; b < nb; ++b) {
            std::int32_t sum[kLanes] = {};
            const std::int8_t* p = panel + b * panel_bytes;
            for (std::size_t k = 0; k < kp; k += 4, p += kPanelRow)
                for (std::size_t c = 0; c < kLanes; ++c)
                    for (std::size_t j = 0; j < 4; ++j)
                        sum[c] += std::int32_t(a[i * lda + k + j]) * std::int32_t(p[c * 4 + j]);
            std::memcpy(acc + i * ldc + b * kLanes, sum, sizeof sum);
        }
    }
}

#if EMBER_QGEMM_X86
// MR rows × NB panels of accumulators in zmm registers (4 × 4 = 16 of 32).
template <std::size_t MR, std::size_t NB>
__attribute__((target("avx512f,avx512bw,avx512vnni"))) void tile_512(
    const std::uint8_t* a, std::size_t lda, const std::int8_t* panel, std::size_t panel_bytes,
    std::size_t kp, std::int32_t* acc, std::size_t ldc) {
    __m512i c[MR][NB];
    for (std::size_t i = 0; i < MR; ++i)
        for (std::size_t j = 0; j < NB; ++j) c[i][j] = _mm512_setzero_si512();
    for (std::size_t k = 0; k < kp; k += 4) {
        __m512i w[NB];
        for (std::size_t j = 0; j < NB; ++j)
            w[j] = _mm512_load_si512(panel + j * panel_bytes + k * kLanes);
        for (std::size_t i = 0; i < MR; ++i) {
            const __m512i x = _mm512_set1_epi32(load4(a + i * lda + k));
            for (std::size_t j = 0; j < NB; ++j) c[i][j] = _mm512_dpbusd_epi32(c[i][j], x, w[j]);
        }
    }
    for (std::size_t i = 0; i < MR; ++i)
        for (std::size_t j = 0; j < NB; ++j)
            _mm512_storeu_si512(acc + i * ldc + j * kLanes, c[i][j]);
}

template <std::size_t MR>
__attribute__((target("avx512f,avx512bw,avx512vnni"))) void rows_512(
    const std::uint8_t* a, std::size_t lda, const std::int8_t* panel, std::size_t panel_bytes,
    std::size_t nb, std::size_t kp, std::int32_t* acc, std::size_t ldc) {
    std::size_t b = 0;
    for (; b + 4 <= nb; b += 4)
        tile_512<MR, 4>(a, lda, panel + b * panel_bytes, panel_bytes, kp, acc + b * kLanes, ldc);
    switch (nb - b) {
        case 3:
            tile_512<MR, 3>(a, lda, panel + b * panel_bytes, panel_bytes, kp, acc + b * kLanes,
                            ldc);
            break;
        case 2:
            tile_512<MR, 2>(a, lda, panel + b * panel_bytes, panel_bytes, kp, acc + b * kLanes,
                            ldc);
            break;
        case 1:
            tile_512<MR, 1>(a, lda, panel + b * panel_bytes, panel_bytes, kp, acc + b * kLanes,
                            ldc);
            break;
        default:
            break;
    }
}

void kernel_avx512vnni(const std::uint8_t* a, std::size_t lda, std::size_t rows,
                       const std::int8_t* panel, std::size_t panel_bytes, std::size_t nb,
                       std::size_t kp, std::int32_t* acc, std::size_t ldc) {
    switch (rows) {
        case 4:
            rows_512<4>(a, lda, panel, panel_bytes, nb, kp, acc, ldc);
            break;
        case 3:
            rows_512<3>(a, lda, panel, panel_bytes, nb, kp, acc, ldc);
            break;
        case 2:
            rows_512<2>(a, lda, panel, panel_bytes, nb, kp, acc, ldc);
            break;
        default:
            rows_512<1>(a, lda, panel, panel_bytes, nb, kp, acc, ldc);
            break;
    }
}

// AVX-VNNI: the same on ymm halves of a panel (16 registers: 4 rows × 2 halves of accumulators).
template <std::size_t MR>
__attribute__((target("avx2,avxvnni"))) void rows_256(const std::uint8_t* a, std::size_t lda,
                                                      const std::int8_t* panel,
                                                      std::size_t panel_bytes, std::size_t nb,
                                                      std::size_t kp, std::int32_t* acc,
                                                      std::size_t ldc) {
    for (std::size_t b = 0; b < nb; ++b) {
        const std::int8_t* p = panel + b * panel_bytes;
        __m256i c[MR][2];
        for (std::size_t i = 0; i < MR; ++i) c[i][0] = c[i][1] = _mm256_setzero_si256();
        for (std::size_t k = 0; k < kp; k += 4) {
            const __m256i w0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(p + k * kLanes));
            const __m256i w1 =
                _mm256_load_si256(reinterpret_cast<const __m256i*>(p + k * kLanes + 32));
            for (std::size_t i = 0; i < MR; ++i) {
                const __m256i x = _mm256_set1_epi32(load4(a + i * lda + k));
                c[i][0] = _mm256_dpbusd_avx_epi32(c[i][0], x, w0);
                c[i][1] = _mm256_dpbusd_avx_epi32(c[i][1], x, w1);
            }
        }
        for (std::size_t i = 0; i < MR; ++i) {
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(acc + i * ldc + b * kLanes), c[i][0]);
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(acc + i * ldc + b * kLanes + 8),
                                c[i][1]);
        }
    }
}

void kernel_avxvnni(const std::uint8_t* a, std::size_t lda, std::size_t rows,
                    const std::int8_t* panel, std::size_t panel_bytes, std::size_t nb,
                    std::size_t kp, std::int32_t* acc, std::size_t ldc) {
    switch (rows) {
        case 4:
            rows_256<4>(a, lda, panel, panel_bytes, nb, kp, acc, ldc);
            break;
        case 3:
            rows_256<3>(a, lda, panel, panel_bytes, nb, kp, acc, ldc);
            break;
        case 2:
            rows_256<2>(a, lda, panel, panel_bytes, nb, kp, acc, ldc);
            break;
        default:
            rows_256<1>(a, lda, panel, panel_bytes, nb, kp, acc, ldc);
            break;
    }
}
#endif

#if EMBER_QGEMM_X86
/// AVX-VNNI, read from CPUID (leaf 7, sub-leaf 1, EAX bit 4): Clang's __builtin_cpu_supports
/// does not know the feature's name. The OS's saving of ymm state is implied by the AVX2 check.
bool has_avx_vnni() {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) && (eax & (1u << 4)) != 0;
}
#endif

struct KernelInfo {
    std::string_view name;
    Kernel fn;
    bool (*available)();
};

const KernelInfo kKernels[] = {
#if EMBER_QGEMM_X86
    {"avx512vnni", kernel_avx512vnni,
     [] {
         return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                __builtin_cpu_supports("avx512vnni");
     }},
    {"avxvnni", kernel_avxvnni, [] { return __builtin_cpu_supports("avx2") && has_avx_vnni(); }},
#endif
    {"portable", kernel_portable, [] { return true; }},
};

// The best kernel this processor has, unless EMBER_QGEMM names another it has.
const KernelInfo* choose(std::string_view wanted) {
    for (const auto& k : kKernels)
        if ((wanted == "auto" || wanted == k.name) && k.available()) return &k;
    return nullptr;
}

std::atomic<const KernelInfo*>& current() {
    static std::atomic<const KernelInfo*> k{[] {
        const char* env = std::getenv("EMBER_QGEMM");
        const KernelInfo* chosen = env ? choose(env) : nullptr;
        return chosen ? chosen : choose("auto");
    }()};
    return k;
}

}  // namespace

std::string_view qgemm_kernel() {
    return current().load()->name;
}

bool set_qgemm_kernel(std::string_view name) {
    const KernelInfo* k = choose(name);
    if (!k) return false;
    current().store(k);
    return true;
}

#if EMBER_QGEMM_X86
namespace {
// The AVX2 loops, compiled for AVX2 whatever the build's target and called only where the
// processor has it (EMBER_CPU_ARCH=portable builds for the x86-64 baseline).
bool has_avx2() {
    static const bool yes = [] {
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx2") != 0;
    }();
    return yes;
}

/// Eight floats scaled, clamped, rounded and offset by the zero point, as int32.
__attribute__((target("avx2"))) inline __m256i quantize8(const float* x, __m256 vinv,
                                                         __m256i vzero) {
    const __m256 big = _mm256_set1_ps(1e9f), small = _mm256_set1_ps(-1e9f);
    __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x), vinv);
    v = _mm256_min_ps(_mm256_max_ps(v, small), big);
    return _mm256_add_epi32(_mm256_cvtps_epi32(v), vzero);
}

/// quantize_u8 over whole blocks of 16; returns how many elements it did.
__attribute__((target("avx2"))) std::size_t quantize_u8_avx2(const float* x, std::size_t n,
                                                             float inv, std::int32_t zero,
                                                             std::uint8_t* out) {
    // cvtps rounds half to even (the default MXCSR mode), as nearbyint; the float is clamped
    // first so that no value leaves int32, and packs saturate to int8 as the clamp does.
    const __m256 vinv = _mm256_set1_ps(inv);
    const __m256i vzero = _mm256_set1_epi32(zero), perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    const __m128i bias = _mm_set1_epi8(static_cast<char>(0x80));
    std::size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256i w16 = _mm256_packs_epi32(quantize8(x + i, vinv, vzero),
                                               quantize8(x + i + 8, vinv, vzero));  // interleaved
        const __m256i b8 = _mm256_packs_epi16(w16, w16);  // saturate to int8
        const __m256i ordered = _mm256_permutevar8x32_epi32(b8, perm);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                         _mm_xor_si128(_mm256_castsi256_si128(ordered), bias));  // + 128
    }
    return i;
}

/// min_max over whole blocks of 8, folded into lo and hi; returns how many elements it did.
__attribute__((target("avx2"))) std::size_t min_max_avx2(const float* x, std::size_t n, float& lo,
                                                         float& hi) {
    __m256 vl = _mm256_setzero_ps(), vh = _mm256_setzero_ps();
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        vl = _mm256_min_ps(v, vl);  // NaN in v yields the second operand: skipped
        vh = _mm256_max_ps(v, vh);
    }
    alignas(32) float l[8], h[8];
    _mm256_store_ps(l, vl);
    _mm256_store_ps(h, vh);
    for (int k = 0; k < 8; ++k) {
        lo = std::min(lo, l[k]);
        hi = std::max(hi, h[k]);
    }
    return i;
}
}  // namespace
#endif

void quantize_u8(const float* x, std::size_t n, float inv, std::int32_t zero, std::uint8_t* out) {
    std::size_t i = 0;
#if EMBER_QGEMM_X86
    if (has_avx2()) i = quantize_u8_avx2(x, n, inv, zero, out);
#endif
    for (; i < n; ++i) {
        const float q = std::clamp(std::nearbyint(x[i] * inv) + float(zero), -128.0f, 127.0f);
        out[i] = static_cast<std::uint8_t>(static_cast<std::int32_t>(q) + 128);
    }
}

void min_max(const float* x, std::size_t n, float& lo, float& hi) {
    lo = 0.0f;  // the range always contains 0 for quantization; starting there is harmless
    hi = 0.0f;
    std::size_t i = 0;
#if EMBER_QGEMM_X86
    if (has_avx2()) i = min_max_avx2(x, n, lo, hi);
#endif
    for (; i < n; ++i) {
        if (x[i] < lo) lo = x[i];
        if (x[i] > hi) hi = x[i];
    }
}

std::shared_ptr<const PackedQWeights> pack_qweights(const std::int8_t* w, std::size_t k,
                                                    std::size_t n, const std::vector<float>& scales,
                                                    const std::vector<std::int32_t>& zeros) {
    auto p = std::make_shared<PackedQWeights>();
    p->k = k;
    p->n = n;
    p->kp = (k + 3) / 4 * 4;
    p->blocks = (n + kLanes - 1) / kLanes;
    const std::size_t bytes = p->blocks * p->kp * kLanes;
    // 64-byte aligned rows: the kernels use aligned loads.
    p->storage.assign(bytes + 64, 0);
    auto* base = p->storage.data();
    auto* data = base + (64 - reinterpret_cast<std::uintptr_t>(base) % 64) % 64;
    p->data = data;
    for (std::size_t kk = 0; kk < k; ++kk)
        for (std::size_t c = 0; c < n; ++c) {
            const std::size_t b = c / kLanes, lane = c % kLanes;
            data[b * p->kp * kLanes + (kk / 4) * kPanelRow + lane * 4 + kk % 4] = w[kk * n + c];
        }
    p->col_sum.assign(n, 0);
    for (std::size_t kk = 0; kk < k; ++kk)
        for (std::size_t c = 0; c < n; ++c) p->col_sum[c] += w[kk * n + c];
    p->scale.resize(n);
    p->zero.resize(n);
    for (std::size_t c = 0; c < n; ++c) {
        p->scale[c] = scales.size() == 1 ? scales[0] : scales[c];
        p->zero[c] = zeros.empty() ? 0 : zeros.size() == 1 ? zeros[0] : zeros[c];
        p->has_zero = p->has_zero || p->zero[c] != 0;
    }
    return p;
}

void qgemm_u8s8(const std::uint8_t* a, std::size_t lda, std::size_t m, std::int32_t a_zero,
                float a_scale, const PackedQWeights& w, const float* bias, float* y,
                std::size_t ldy, std::size_t ldn) {
    const Kernel kernel = current().load()->fn;
    const std::size_t panel_bytes = w.kp * kLanes;
    const std::size_t row_blocks = (m + kMaxRows - 1) / kMaxRows;
    // Work items: (row block, group of 4 panels); about 64k MACs each before splitting.
    const std::size_t groups = (w.blocks + 3) / 4;
    const std::size_t grain = std::max<std::size_t>(1, (1u << 18) / (w.kp * 64 * kMaxRows + 1));
    parallel_for(row_blocks * groups, grain, [&](std::size_t begin, std::size_t end) {
        std::int32_t acc[kMaxRows * 64];
        for (std::size_t t = begin; t < end; ++t) {
            const std::size_t rb = t / groups, g = t % groups;
            const std::size_t i0 = rb * kMaxRows, rows = std::min(kMaxRows, m - i0);
            const std::size_t b0 = g * 4, nb = std::min<std::size_t>(4, w.blocks - b0);
            kernel(a + i0 * lda, lda, rows, w.data + b0 * panel_bytes, panel_bytes, nb, w.kp, acc,
                   64);
            const std::size_t c0 = b0 * kLanes, c1 = std::min(w.n, c0 + nb * kLanes);
            // Per channel: the a_zero correction and the combined scale, once per tile.
            float scale[64];
            std::int32_t corr[64];
            for (std::size_t c = c0; c < c1; ++c) {
                scale[c - c0] = a_scale * w.scale[c];
                corr[c - c0] = a_zero * w.col_sum[c] - std::int32_t(w.k) * a_zero * w.zero[c];
            }
            std::int32_t row_sum[kMaxRows] = {};
            if (w.has_zero)
                for (std::size_t i = 0; i < rows; ++i)
                    for (std::size_t kk = 0; kk < w.k; ++kk) row_sum[i] += a[(i0 + i) * lda + kk];
            // Channel by channel, row by row: with ldn > 1 (convolutions) the rows of one
            // channel are neighbours in memory.
            for (std::size_t c = c0; c < c1; ++c) {
                const float bc = bias ? bias[c] : 0.0f;
                for (std::size_t i = 0; i < rows; ++i) {
                    const std::int32_t v =
                        acc[i * 64 + (c - c0)] - corr[c - c0] - w.zero[c] * row_sum[i];
                    y[(i0 + i) * ldy + c * ldn] = float(v) * scale[c - c0] + bc;
                }
            }
        }
    });
}

}  // namespace ember::detail::cpu
