// Dispatch's Vulkan stacks: Vulkan, Autodiff<Vulkan>, Fusion<Vulkan> and
// Autodiff<Fusion<Vulkan>>, whose op tables are instantiated here, once (built where
// ember_vulkan is).
#include "ember/backend/vulkan.hpp"
#include "ember/stacks/vulkan_autodiff.hpp"
#include "ember/stacks/vulkan_fusion.hpp"
#include "table.hpp"

namespace ember::detail::dispatch {

template <>
struct DeviceOf<VulkanDevice> {
    static VulkanDevice make(const DispatchDevice& d) { return VulkanDevice{d.index()}; }
};

namespace {
template <typename S>
StackEntry make_entry(const char* name) {
    static const OpTable ops = make_op_table<S>();
    table_of<S> = &ops;
    static const CoreTable core = make_core_table<S>(name);
    return {&ops, &core};
}
}  // namespace

BackendEntry vulkan_backend() {
    static const StackEntry stacks[4] = {
        make_entry<Vulkan>("vulkan"), make_entry<Autodiff<Vulkan>>("autodiff<vulkan>"),
        make_entry<Fusion<Vulkan>>("fusion<vulkan>"),
        make_entry<Autodiff<Fusion<Vulkan>>>("autodiff<fusion<vulkan>>")};
    return {stacks, [](std::uint64_t s) { Vulkan::seed(s); }};
}

}  // namespace ember::detail::dispatch
