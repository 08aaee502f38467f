#pragma once
// The SPIR-V of shaders/*.comp, compiled by glslc at build time (cmake/EmberVulkan.cmake
// generates the table).
#include <cstddef>
#include <cstdint>

namespace ember::detail::vk {
/// One embedded shader.
struct ShaderBlob {
    const char* name;            ///< file name without .comp
    const std::uint32_t* words;  ///< SPIR-V
    std::size_t count;           ///< number of words
};
extern const ShaderBlob kShaders[];
extern const std::size_t kNumShaders;
}  // namespace ember::detail::vk
