#pragma once
// The compute pipelines of one device: shader modules (embedded SPIR-V, its cooperative-matrix
// variants, or run-time SPIR-V of fused kernels), descriptor-set and pipeline layouts, the
// pipelines by key, and the driver's pipeline cache persisted on disk.
//
// Lock discipline: every member takes this unit's own mutex and calls nothing outside it, so
// it can be called with any other lock of the backend held. Pipelines are never destroyed
// while the device lives, so a returned reference stays valid without the caller holding
// anything (a fused kernel's key is its source's hash: the same key is the same pipeline).
#include <volk.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "device_select.hpp"

namespace ember::detail::vk {

/// A compute pipeline and its layout (binding 0 = parameters, 1..n = data buffers).
struct Pipeline {
    VkPipeline pipeline = VK_NULL_HANDLE;
    VkPipelineLayout layout = VK_NULL_HANDLE;
    std::uint32_t bindings = 0;    ///< data buffers (binding 0 excluded)
    std::uint32_t local_size = 0;  ///< threads per workgroup (specialization constant 0)
    std::uint32_t push_bytes = 0;  ///< push-constant range (run-time kernels only)
    /// What the profiler reports it as: the shader's name with its specialization constants
    /// ("matmul (2,32,32,16,2,2,0,4,0)": a kernel variant, an op code), or "fused".
    std::string name;
};

class Pipelines {
  public:
    /// The pipelines of `dev`, its driver's cache read from (and later written to) `cache_path`.
    Pipelines(const OpenedDevice& dev, std::string cache_path);
    Pipelines(const Pipelines&) = delete;
    Pipelines& operator=(const Pipelines&) = delete;

    /// The pipeline of embedded shader `name` with specialization constants 1.. = `spec` and
    /// `local_size` threads (specialization constant 0), over `bindings` data buffers.
    const Pipeline& get(const char* name, std::span<const std::int32_t> spec,
                        std::uint32_t bindings, std::uint32_t local_size);
    /// The pipeline of run-time SPIR-V `spirv` (fused kernels), kept under `key`; its layout
    /// adds a `push_bytes` push-constant range to the usual bindings.
    const Pipeline& get_spirv(const std::string& key, std::span<const std::uint32_t> spirv,
                              std::uint32_t bindings, std::uint32_t local_size,
                              std::uint32_t push_bytes);
    /// Writes the driver's pipeline cache to its file if pipelines were created since the last
    /// write (to a temporary name, then renamed: readers never see half a file).
    void save();

  private:
    void save_locked();
    /// Creates the pipeline of `mod` (entry point "main") and keeps it under `key`.
    const Pipeline& make(const std::string& key, std::string name, VkShaderModule mod,
                         const VkSpecializationInfo& spi, VkPipelineLayout layout,
                         std::uint32_t bindings, std::uint32_t local_size,
                         std::uint32_t push_bytes);
    VkDescriptorSetLayout set_layout(std::uint32_t bindings);
    /// Prints the driver's statistics of `pipeline` (EMBER_VULKAN_PIPELINE_STATS=1).
    void print_stats(const std::string& key, VkPipeline pipeline) const;

    VkDevice device_;
    bool pipeline_stats_;
    std::string path_;
    std::mutex mu_;
    VkPipelineCache cache_ = VK_NULL_HANDLE;
    bool cache_dirty_ = false;
    std::map<std::uint32_t, VkDescriptorSetLayout> set_layouts_;
    std::map<std::uint32_t, VkPipelineLayout> layouts_;
    std::map<std::pair<std::uint32_t, std::uint32_t>, VkPipelineLayout> push_layouts_;
    std::map<std::string, VkShaderModule> modules_;
    std::map<std::string, std::unique_ptr<Pipeline>> pipelines_;
};

}  // namespace ember::detail::vk
