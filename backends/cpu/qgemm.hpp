#pragma once
// The CPU's int8 GEMM: u8 activations × s8 weights → s32, with the processor's dot-product
// instructions (AVX-512 VNNI, AVX-VNNI) chosen at run time and a portable loop everywhere else.
//
// Weights are packed once into panels of 16 output channels × 4 consecutive k: one 64-byte
// row of a panel is what vpdpbusd multiplies against a broadcast of 4 activation bytes, so the
// inner loop loads weights contiguously and needs no horizontal sums.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

namespace ember::detail::cpu {

/// Weights [K, N] (int8, zero points per column) packed for the int8 GEMM.
struct PackedQWeights {
    std::size_t k = 0;                  ///< inner dim
    std::size_t n = 0;                  ///< output channels
    std::size_t kp = 0;                 ///< k rounded up to a multiple of 4
    std::size_t blocks = 0;             ///< panels of 16 channels: ceil(n / 16)
    std::vector<std::int8_t> storage;   ///< holds `data` (with room to align it)
    const std::int8_t* data = nullptr;  ///< blocks × kp/4 × 16 × 4 bytes, 64-byte aligned
    std::vector<std::int32_t> col_sum;  ///< Σ_k w[k][n]
    std::vector<std::int32_t> zero;     ///< weight zero point per channel
    std::vector<float> scale;           ///< weight scale per channel
    bool has_zero = false;              ///< some zero point is not 0
};

/// Packs row-major int8 weights w[k][n] with their scales and zero points (`scales` and
/// `zeros` of size 1 or n).
std::shared_ptr<const PackedQWeights> pack_qweights(const std::int8_t* w, std::size_t k,
                                                    std::size_t n, const std::vector<float>& scales,
                                                    const std::vector<std::int32_t>& zeros);

/// y[m][n] = Σ_k (a[m][k] - a_zero)(w[k][n] - w_zero[n]) · a_scale · w_scale[n] + bias[n], for
/// u8 activations `a` (rows of `lda` ≥ kp bytes, zero past k) and packed weights; `bias` may be
/// null. y[m][n] is at y[m · ldy + n · ldn] (ldn = 1: row-major; a convolution writes its
/// [channels, positions] output directly with ldy = 1, ldn = positions).
void qgemm_u8s8(const std::uint8_t* a, std::size_t lda, std::size_t m, std::int32_t a_zero,
                float a_scale, const PackedQWeights& w, const float* bias, float* y,
                std::size_t ldy, std::size_t ldn = 1);

/// out[i] = clamp(round(x[i] · inv) + zero, -128, 127) + 128 for i < n: int8 quantization
/// (round half to even, as PyTorch) shifted to u8 for the GEMM.
void quantize_u8(const float* x, std::size_t n, float inv, std::int32_t zero, std::uint8_t* out);
/// min(0, smallest) and max(0, largest) of x[0..n): the range quantization needs (NaN skipped).
void min_max(const float* x, std::size_t n, float& lo, float& hi);

/// The kernel in use: "avx512vnni", "avxvnni" or "portable".
std::string_view qgemm_kernel();
/// Chooses the kernel ("avx512vnni", "avxvnni", "portable" or "auto": the best this processor
/// has); returns false when the processor lacks it (nothing changes then).
bool set_qgemm_kernel(std::string_view name);

}  // namespace ember::detail::cpu
