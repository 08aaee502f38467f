// VulkanBackend's members that belong to no kernel file (name, sync, the device), and the
// vulkan:: queries. Each op's member is defined next to its kernel (elementwise.cpp, pool.cpp...).
#include "ember/backend/vulkan.hpp"

#include <cstdlib>
#include <string>

#include "graph.hpp"
#include "kernels.hpp"

namespace ember {
namespace k = detail::vk;

std::uint32_t VulkanDevice::resolved() const {
    if (index != kDefault) return index;
    const char* e = std::getenv("EMBER_VULKAN_DEVICE");
    if (!e || !*e) return 0;
    char* end = nullptr;
    const unsigned long v = std::strtoul(e, &end, 10);
    EMBER_CHECK(end && *end == '\0' && v < kDefault, Device,
                "vulkan: EMBER_VULKAN_DEVICE must be a device index, got '", e, "'");
    return static_cast<std::uint32_t>(v);
}

std::string VulkanDevice::to_string() const { return "Vulkan(" + std::to_string(resolved()) + ")"; }

std::string VulkanBackend::name() {
    return "vulkan";
}
void VulkanBackend::sync(const Device& d) {
    k::forbid_in_capture("sync");
    auto& cx = k::Context::get(d.resolved());
    cx.wait_idle();
}

namespace vulkan {
std::size_t device_count() {
    try {
        return k::Context::device_count();
    } catch (const Error&) {
        return 0;
    }
}
bool is_available() { return device_count() > 0; }
std::string device_name(const VulkanDevice& d) { return k::Context::get(d.resolved()).info().name; }
CooperativeMatrixInfo cooperative_matrix_info(const VulkanDevice& d) {
    const k::DeviceInfo& info = k::Context::get(d.resolved()).info();
    CooperativeMatrixInfo r;
    if (info.coop == k::DeviceInfo::Coop::Khr) r.extension = "VK_KHR_cooperative_matrix";
    if (info.coop == k::DeviceInfo::Coop::Nv) r.extension = "VK_NV_cooperative_matrix";
    r.f16 = info.cooperative_matrix;
    r.bf16 = info.coop_bf16;
    r.f16_16x16 = info.coop_f16_n16;
    r.workgroup_scope = !info.cm2.empty();
    return r;
}
MemoryStats memory_stats(const VulkanDevice& d) {
    return k::Context::get(d.resolved()).pool().stats();
}
void empty_cache(const VulkanDevice& d) {
    k::Context::get(d.resolved()).empty_cache();
}
ExecutionStats execution_stats(const VulkanDevice& d) {
    return k::Context::get(d.resolved()).exec_stats();
}
void set_profiling(bool on, const VulkanDevice& d) {
    k::Context::get(d.resolved()).recorder().set_profiling(on);
}
std::vector<KernelTime> kernel_times(const VulkanDevice& d, bool reset) {
    return k::Context::get(d.resolved()).recorder().kernel_times(reset);
}
}  // namespace vulkan

}  // namespace ember
