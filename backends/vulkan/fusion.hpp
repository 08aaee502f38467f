#pragma once
// Fusion<Vulkan>'s kernels: a fused program becomes one GLSL compute shader (fusion_codegen.cpp),
// compiled to SPIR-V by shaderc at its first launch on a device, cached in memory and on disk
// (fusion.cpp).
//
// The generated shader's interface:
//   binding 0        int32 parameter words (the ring): per input its element offset, then the
//                    iteration shape and the strides of each strided input, then the scalars
//                    when they do not fit in push constants;
//   bindings 1..     the outputs (contiguous, fresh), then the inputs, as arrays of 32-bit words
//                    (docs/vulkan.md's storage: f32 words, int64 as two words, bool one word);
//   push constants   n (elements), the vector flag, then the scalar words.
// Programs whose inputs are all dense read and write 16 bytes at a time (four elements a
// thread, grid-stride) when their offsets allow; the others index each strided input through
// its strides.
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "context.hpp"
#include "ember/detail/hash.hpp"
#include "ember/tensor/fusion_program.hpp"

namespace ember::detail::vk {

/// How a scalar slot is stored: one f32 word, an int64 (two words) or a bool word.
enum class ScalarKind : std::uint8_t { F32, I64, Bool };

/// The generated shader and where its launch puts each value.
struct FusedLayout {
    std::vector<bool> strided;               ///< per input: indexed through strides
    std::vector<ScalarKind> scalar_kinds;    ///< per scalar slot
    std::vector<std::uint32_t> scalar_word;  ///< per slot: first word (push or params)
    std::uint32_t scalar_words = 0;          ///< words all scalars take
    bool scalars_in_push = true;             ///< else after the strides in the params block
    bool all_dense = true;                   ///< the vector path exists
    std::size_t rank = 0;                    ///< of the iteration shape
    std::uint32_t shape_word = 0;            ///< params: first dim of the iteration shape
    std::vector<std::uint32_t> stride_word;  ///< params: per strided input, its first stride
    std::uint32_t params_words = 0;          ///< params block size
    std::uint32_t push_words = 2;            ///< n, the vector flag, scalars in push
};

/// The push-constant budget every Vulkan device has (maxPushConstantsSize is at least 128).
inline constexpr std::uint32_t kPushBudgetWords = 32;
/// Storage buffers a fused kernel may bind besides its parameters (VK_KHR_push_descriptor's
/// maxPushDescriptors is at least 32); bigger programs run op by op on the unfused kernels.
inline constexpr std::size_t kMaxFusedBuffers = 31;
/// Threads per workgroup of fused kernels.
inline constexpr std::uint32_t kFusedLocal = 256;

/// Generates the compute shader of program `p` (checked) and fills `layout`.
std::string generate_glsl(const fusion::Program& p, FusedLayout& layout);

/// A fused program ready to launch: its shader source, and per device its pipeline, made at
/// the first launch there.
struct FusedPlan {
    fusion::Program program;
    FusedLayout layout;
    std::string source;        ///< GLSL (empty when the program runs op by op)
    std::uint64_t hash = 0;    ///< of the source: names its SPIR-V in the caches
    bool interpreted = false;  ///< too many buffers for one kernel: unfused ops instead
    mutable std::mutex mu;
    /// Per device index: the pipeline and the cache generation it belongs to.
    mutable std::vector<std::pair<const Pipeline*, std::uint64_t>> pipelines;
};

using detail::fnv1a;  // include/ember/detail/hash.hpp

}  // namespace ember::detail::vk
