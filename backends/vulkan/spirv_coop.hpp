#pragma once
// SPIR-V rewriting for the cooperative-matrix matmul: Debian 12's glslang compiles only
// GL_NV_cooperative_matrix, while VK_KHR_cooperative_matrix (and its bf16 types, through
// VK_KHR_shader_bfloat16) is what current drivers offer for every shape. The NV and KHR
// instructions carry the same information, so a compiled module can be moved from one to the
// other word by word.
#include <cstdint>
#include <span>
#include <vector>

namespace ember::detail::vk {

/// The 16-bit float type the rewritten module's matrices hold.
enum class CoopElement { F16, BF16 };

/// Rewrites a module written against SPV_NV_cooperative_matrix into one against
/// SPV_KHR_cooperative_matrix: each matrix type gets its use (A, B or accumulator, from the
/// multiply-adds that read it), loads and stores get a row- or column-major layout constant in
/// place of their bool, and the capability and extension are renamed. With BF16 the module's
/// 16-bit float type becomes bf16 (SPV_KHR_bfloat16), which is only valid where nothing computes
/// on it (the shader moves its halves as integers). With `nv2` the module is for
/// VK_NV_cooperative_matrix2's workgroup-scope matrices: it declares SPV_NV_cooperative_matrix2
/// and SPV_NV_tensor_addressing, becomes SPIR-V 1.6, and each load becomes a tensor load of the
/// same rows x columns block through a 2-d tensor layout whose row stride is the load's.
/// Throws ember::FormatError on a malformed module, a matrix type used in two roles, 16-bit
/// float arithmetic under BF16, and under `nv2` a column-major load or a module without an
/// unsigned 32-bit integer type.
std::vector<std::uint32_t> coop_nv_to_khr(std::span<const std::uint32_t> words, CoopElement elem,
                                          bool nv2 = false);

}  // namespace ember::detail::vk
