#pragma once
// Device selection: the process's Vulkan instance, the physical devices with a compute queue,
// what each can do (DeviceInfo) and its logical device with only what the kernels use enabled.
// Everything here is decided once per device, before any work: the result is immutable, so
// this unit needs no lock of its own beyond the instance's one-time initialisation.
#include <volk.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ember::detail::vk {

/// Device limits and features the backend uses.
struct DeviceInfo {
    std::string name;
    std::uint32_t vendor_id = 0, device_id = 0, driver_version = 0;
    VkDeviceSize max_storage_range = 0;
    VkDeviceSize max_alloc_size = 0;
    std::uint32_t max_alloc_count = 0;
    std::uint32_t max_shared_memory = 0;
    std::uint32_t max_invocations = 0;
    std::array<std::uint32_t, 3> max_groups{};
    std::uint32_t subgroup_size = 0;
    float timestamp_period = 0;       ///< ns a timestamp tick (0: the queue has none)
    bool cooperative_matrix = false;  ///< f16 matmuls on cooperative matrices (coop != None)
    /// The cooperative-matrix extension the matmul uses: VK_NV_cooperative_matrix (f16 16x8x16)
    /// or VK_KHR_cooperative_matrix (its SPIR-V rewritten from the NV form, spirv_coop.hpp).
    enum class Coop { None, Nv, Khr } coop = Coop::None;
    bool coop_f16_n16 = false;        ///< KHR: f16 16x16x16 listed besides 16x8x16
    bool coop_bf16 = false;           ///< KHR: bf16 16x16x16 listed, VK_KHR_shader_bfloat16 on
    bool float16 = false;             ///< shaderFloat16 + 16-bit storage
    /// A workgroup-scope matrix shape of VK_NV_cooperative_matrix2 with f32 accumulation: its
    /// M, N and K granularities and the workgroup size it needs (shaders/matmul_cm2.comp).
    struct Cm2Shape {
        std::uint32_t mg = 0, ng = 0, kg = 0, invocations = 0;
        bool bf16 = false;  ///< bf16 (else f16) A and B
    };
    /// VK_NV_cooperative_matrix2's workgroup scope and flexible dimensions, on (with the KHR
    /// extension) where the device has them and EMBER_VULKAN_COOPMAT2 is not 0.
    std::vector<Cm2Shape> cm2;
    std::uint32_t cm2_max_dim = 0;          ///< largest matrix dimension
    std::uint32_t cm2_max_invocations = 0;  ///< largest workgroup with workgroup-scope matrices
    std::uint32_t cm2_reserved_shared = 0;  ///< shared bytes the driver keeps for its staging
};

/// The Vulkan objects of one opened device, and what it can do.
struct OpenedDevice {
    VkInstance instance = VK_NULL_HANDLE;
    VkPhysicalDevice phys = VK_NULL_HANDLE;
    VkDevice device = VK_NULL_HANDLE;
    VkQueue queue = VK_NULL_HANDLE;
    std::uint32_t family = 0;     ///< the compute queue's family
    DeviceInfo info;
    bool pipeline_stats = false;  ///< EMBER_VULKAN_PIPELINE_STATS=1 and the extension is there
};

/// Number of physical devices with a compute queue (0 without a loader or a driver).
std::size_t compute_device_count();
/// Throws DeviceError unless device `index` exists (naming why there is none, or how many).
void check_device_index(std::uint32_t index);
/// Creates the logical device of physical device `index` with one compute queue and the
/// features DeviceInfo lists (DeviceError when it cannot).
OpenedDevice open_device(std::uint32_t index);

}  // namespace ember::detail::vk
