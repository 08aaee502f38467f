// Device selection (device_select.hpp): the Vulkan instance, the devices with a compute queue,
// the features the kernels can use on each, and the logical device with only those enabled.
#include "device_select.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "ember/tensor/error.hpp"

// Vulkan structs are written `VkFoo info{VK_STRUCTURE_TYPE_FOO}`: the members not named are
// zero (pNext = nullptr, flags = 0), as Vulkan code means them to be; -Wextra would flag each.
#if defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#endif

namespace ember::detail::vk {

namespace {

struct Instance {
    bool loaded = false;
    VkInstance instance = VK_NULL_HANDLE;
    std::vector<VkPhysicalDevice> devices;  ///< those with a compute queue
    std::string error;                      ///< why there is none
    std::uint32_t api_version = 0;          ///< the version the instance was created for
};

std::uint32_t compute_family(VkPhysicalDevice d, bool* found) {
    std::uint32_t n = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(d, &n, nullptr);
    std::vector<VkQueueFamilyProperties> q(n);
    vkGetPhysicalDeviceQueueFamilyProperties(d, &n, q.data());
    // Prefer a compute queue family without graphics (NVIDIA's async compute family).
    for (int pass = 0; pass < 2; ++pass)
        for (std::uint32_t i = 0; i < n; ++i) {
            const bool compute = q[i].queueFlags & VK_QUEUE_COMPUTE_BIT;
            const bool graphics = q[i].queueFlags & VK_QUEUE_GRAPHICS_BIT;
            if (compute && (pass == 1 || !graphics)) {
                *found = true;
                return i;
            }
        }
    *found = false;
    return 0;
}

// VK_KHR_cooperative_matrix and VK_KHR_shader_bfloat16 postdate Debian 12's Vulkan headers
// (1.3.239): their structures, as the registry defines them.
constexpr const char* kKhrCoopExtension = "VK_KHR_cooperative_matrix";
constexpr const char* kBf16Extension = "VK_KHR_shader_bfloat16";
constexpr auto kSTypeKhrCoopFeatures = static_cast<VkStructureType>(1000506000);
constexpr auto kSTypeKhrCoopProps = static_cast<VkStructureType>(1000506001);
constexpr auto kSTypeBf16Features = static_cast<VkStructureType>(1000141000);
constexpr std::int32_t kComponentF16 = 0, kComponentF32 = 1, kComponentBf16 = 1000141000;
constexpr std::int32_t kScopeSubgroup = 3;
struct KhrCoopFeatures {
    VkStructureType sType;
    void* pNext = nullptr;
    VkBool32 cooperativeMatrix = VK_FALSE, cooperativeMatrixRobustBufferAccess = VK_FALSE;
};
/// One entry of vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR's list (S = its sType) or of
/// VK_NV_cooperative_matrix2's flexible-dimensions list: the same fields (sizes or
/// granularities m, n, k), the latter with the workgroup size after them. Both structures are
/// 56 bytes, so the KHR list's entries leave `invocations` in their tail padding, unread.
template <VkStructureType S>
struct CoopShape {
    VkStructureType sType = S;
    void* pNext = nullptr;
    std::uint32_t m = 0, n = 0, k = 0;
    std::int32_t AType = 0, BType = 0, CType = 0, ResultType = 0;
    VkBool32 saturatingAccumulation = VK_FALSE;
    std::int32_t scope = 0;
    std::uint32_t invocations = 0;  ///< flexible dimensions: workgroupInvocations
};
static_assert(sizeof(CoopShape<kSTypeKhrCoopProps>) == 56);
using KhrCoopShape = CoopShape<kSTypeKhrCoopProps>;
struct Bf16Features {
    VkStructureType sType;
    void* pNext = nullptr;
    VkBool32 shaderBFloat16Type = VK_FALSE, shaderBFloat16DotProduct = VK_FALSE,
             shaderBFloat16CooperativeMatrix = VK_FALSE;
};

// VK_NV_cooperative_matrix2 (also newer than those headers).
constexpr const char* kCoop2Extension = "VK_NV_cooperative_matrix2";
constexpr auto kSTypeCoop2Features = static_cast<VkStructureType>(1000593000);
constexpr auto kSTypeCoop2Flexible = static_cast<VkStructureType>(1000593001);
constexpr auto kSTypeCoop2Props = static_cast<VkStructureType>(1000593002);
constexpr std::int32_t kScopeWorkgroup = 2;
struct Coop2Features {
    VkStructureType sType;
    void* pNext = nullptr;
    VkBool32 cooperativeMatrixWorkgroupScope = VK_FALSE,
             cooperativeMatrixFlexibleDimensions = VK_FALSE, cooperativeMatrixReductions = VK_FALSE,
             cooperativeMatrixConversions = VK_FALSE,
             cooperativeMatrixPerElementOperations = VK_FALSE,
             cooperativeMatrixTensorAddressing = VK_FALSE, cooperativeMatrixBlockLoads = VK_FALSE;
};
struct Coop2Props {
    VkStructureType sType;
    void* pNext = nullptr;
    std::uint32_t cooperativeMatrixWorkgroupScopeMaxWorkgroupSize = 0,
                  cooperativeMatrixFlexibleDimensionsMaxDimension = 0,
                  cooperativeMatrixWorkgroupScopeReservedSharedMemory = 0;
};
using Coop2Flexible = CoopShape<kSTypeCoop2Flexible>;

/// A vkGetPhysicalDevice...Properties list of `T` through the instance entry point `fn_name`
/// (empty if the loader lacks it).
template <class T>
std::vector<T> device_list(VkInstance inst, VkPhysicalDevice d, const char* fn_name) {
    using Fn = VkResult(VKAPI_PTR*)(VkPhysicalDevice, std::uint32_t*, T*);
    const auto fn = reinterpret_cast<Fn>(vkGetInstanceProcAddr(inst, fn_name));
    std::uint32_t n = 0;
    if (!fn || fn(d, &n, nullptr) != VK_SUCCESS) return {};
    std::vector<T> list(n);
    if (fn(d, &n, list.data()) != VK_SUCCESS) return {};
    list.resize(n);
    return list;
}

/// vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR's list (empty if the loader lacks it).
std::vector<KhrCoopShape> khr_coop_shapes(VkInstance inst, VkPhysicalDevice d) {
    return device_list<KhrCoopShape>(inst, d, "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR");
}

Instance& instance() {
    static Instance inst = [] {
        Instance r;
        if (volkInitialize() != VK_SUCCESS) {
            r.error = "no Vulkan loader (libvulkan.so.1) could be opened";
            return r;
        }
        VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
        app.pApplicationName = "ember";
        app.pEngineName = "ember";
        // 1.3 where the loader has it: the workgroup-scope matmul's tensor loads are SPIR-V 1.6,
        // which a device accepts only under Vulkan 1.3 (drivers of 1.2 clamp it back).
        std::uint32_t loader = VK_API_VERSION_1_0;
        if (vkEnumerateInstanceVersion) vkEnumerateInstanceVersion(&loader);
        app.apiVersion = loader >= VK_API_VERSION_1_3 ? VK_API_VERSION_1_3 : VK_API_VERSION_1_2;
        VkInstanceCreateInfo ci{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
        ci.pApplicationInfo = &app;
        r.api_version = app.apiVersion;
        if (vkCreateInstance(&ci, nullptr, &r.instance) != VK_SUCCESS) {
            r.error = "vkCreateInstance failed (no Vulkan 1.2 driver?)";
            return r;
        }
        // Instance-level entry points only: device functions then go through the loader's
        // trampolines, which dispatch to the right driver when devices of several drivers
        // (an NVIDIA GPU and lavapipe) are used in one process.
        volkLoadInstance(r.instance);
        std::uint32_t n = 0;
        vkEnumeratePhysicalDevices(r.instance, &n, nullptr);
        std::vector<VkPhysicalDevice> all(n);
        vkEnumeratePhysicalDevices(r.instance, &n, all.data());
        for (auto d : all) {
            bool ok = false;
            compute_family(d, &ok);
            if (ok) r.devices.push_back(d);
        }
        if (r.devices.empty()) r.error = "the Vulkan loader reports no device with a compute queue";
        r.loaded = true;
        return r;
    }();
    return inst;
}

bool has_extension(VkPhysicalDevice d, const char* name) {
    std::uint32_t n = 0;
    vkEnumerateDeviceExtensionProperties(d, nullptr, &n, nullptr);
    std::vector<VkExtensionProperties> ext(n);
    vkEnumerateDeviceExtensionProperties(d, nullptr, &n, ext.data());
    for (auto& e : ext)
        if (std::strcmp(e.extensionName, name) == 0) return true;
    return false;
}

}  // namespace

std::size_t compute_device_count() {
    return instance().devices.size();
}

void check_device_index(std::uint32_t index) {
    Instance& inst = instance();
    EMBER_CHECK(!inst.devices.empty(), Device, "vulkan: no Vulkan device: ", inst.error);
    EMBER_CHECK(index < inst.devices.size(), Device, "vulkan: device index ", index,
                " is out of range (EMBER_VULKAN_DEVICE or VulkanDevice{index}): ",
                inst.devices.size(), " device(s) present");
}

OpenedDevice open_device(std::uint32_t index) {
    check_device_index(index);
    Instance& inst = instance();
    OpenedDevice d;
    d.instance = inst.instance;
    d.phys = inst.devices[index];
    bool ok = false;
    d.family = compute_family(d.phys, &ok);

    VkPhysicalDeviceSubgroupProperties sub{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
    VkPhysicalDeviceMaintenance3Properties m3{
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES};
    sub.pNext = &m3;
    VkPhysicalDeviceProperties2 props{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
    props.pNext = &sub;
    vkGetPhysicalDeviceProperties2(d.phys, &props);
    const auto& lim = props.properties.limits;
    d.info.name = props.properties.deviceName;
    d.info.vendor_id = props.properties.vendorID;
    d.info.device_id = props.properties.deviceID;
    d.info.driver_version = props.properties.driverVersion;
    d.info.max_storage_range = lim.maxStorageBufferRange;
    d.info.max_alloc_size = m3.maxMemoryAllocationSize;
    d.info.max_alloc_count = lim.maxMemoryAllocationCount;
    d.info.max_shared_memory = lim.maxComputeSharedMemorySize;
    d.info.max_invocations = lim.maxComputeWorkGroupInvocations;
    for (int i = 0; i < 3; ++i) d.info.max_groups[i] = lim.maxComputeWorkGroupCount[i];
    d.info.subgroup_size = sub.subgroupSize;
    d.info.timestamp_period = lim.timestampComputeAndGraphics ? lim.timestampPeriod : 0.0f;

    VkPhysicalDeviceFeatures feats;
    vkGetPhysicalDeviceFeatures(d.phys, &feats);
    EMBER_CHECK(feats.shaderInt64, Device, "vulkan: device ", d.info.name,
                " lacks shaderInt64 (int tensors are int64 on the device)");
    EMBER_CHECK(has_extension(d.phys, VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME), Device,
                "vulkan: device ", d.info.name, " lacks VK_KHR_push_descriptor");

    std::vector<const char*> exts{VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME};
    // Tensor cores for 16-bit matmuls (shaders/matmul_coop.comp): cooperative matrices at
    // subgroup scope with f16 x f16 + f32 16x8x16 (NVIDIA's drivers list 16x8x16 and 16x8x8
    // under the NV extension), f16 arithmetic, and 32-wide subgroups (the kernel's workgroups
    // are whole subgroups of 32). VK_KHR_cooperative_matrix is preferred where the device has
    // it (its SPIR-V rewritten from the NV form, spirv_coop.hpp), with bf16 where it also lists
    // bf16 16x16x16 and VK_KHR_shader_bfloat16. EMBER_VULKAN_COOPMAT=0 turns them off, =nv
    // keeps the NV extension.
    VkPhysicalDeviceCooperativeMatrixFeaturesNV coop_feats{
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV};
    KhrCoopFeatures khr_feats{kSTypeKhrCoopFeatures};
    Bf16Features bf16_feats{kSTypeBf16Features};
    Coop2Features coop2_feats{kSTypeCoop2Features};
    VkPhysicalDevice16BitStorageFeatures s16{
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
    VkPhysicalDeviceVulkan12Features feats12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
    {
        const char* env = std::getenv("EMBER_VULKAN_COOPMAT");
        const std::string mode = env ? env : "";
        const bool has_nv = has_extension(d.phys, VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME);
        const bool has_khr = mode != "nv" && has_extension(d.phys, kKhrCoopExtension);
        const bool has_bf16 = has_khr && has_extension(d.phys, kBf16Extension);
        const char* env2 = std::getenv("EMBER_VULKAN_COOPMAT2");
        const bool has_coop2 =
            has_khr && !(env2 && std::string(env2) == "0") && has_extension(d.phys, kCoop2Extension);
        if (mode != "0" && props.properties.apiVersion >= VK_API_VERSION_1_2 &&
            (has_nv || has_khr) && d.info.subgroup_size == 32 &&
            d.info.max_shared_memory >= 24 * 1024) {
            feats12.pNext = has_khr ? static_cast<void*>(&khr_feats) : &coop_feats;
            if (has_bf16) khr_feats.pNext = &bf16_feats;
            if (has_coop2) coop2_feats.pNext = std::exchange(khr_feats.pNext, &coop2_feats);
            VkPhysicalDeviceFeatures2 f2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
            // 16-bit storage buffers: matmul_cm2.comp reads its operands as 16-bit words.
            s16.pNext = &feats12;
            f2.pNext = &s16;
            vkGetPhysicalDeviceFeatures2(d.phys, &f2);
            if (has_khr && khr_feats.cooperativeMatrix && feats12.shaderFloat16) {
                const auto list = khr_coop_shapes(d.instance, d.phys);
                auto lists = [&](std::uint32_t n, std::int32_t ab) {
                    for (const auto& c : list)
                        if (c.m == 16 && c.n == n && c.k == 16 && c.AType == ab && c.BType == ab &&
                            c.CType == kComponentF32 && c.ResultType == kComponentF32 &&
                            c.scope == kScopeSubgroup)
                            return true;
                    return false;
                };
                if (lists(8, kComponentF16)) {
                    d.info.coop = DeviceInfo::Coop::Khr;
                    d.info.coop_f16_n16 = lists(16, kComponentF16);
                    d.info.coop_bf16 = has_bf16 && bf16_feats.shaderBFloat16Type &&
                                      bf16_feats.shaderBFloat16CooperativeMatrix &&
                                      lists(16, kComponentBf16);
                }
                // Workgroup-scope matrices with tensor loads (shaders/matmul_cm2.comp).
                if (d.info.coop == DeviceInfo::Coop::Khr && has_coop2 &&
                    coop2_feats.cooperativeMatrixWorkgroupScope &&
                    coop2_feats.cooperativeMatrixFlexibleDimensions &&
                    coop2_feats.cooperativeMatrixTensorAddressing && feats12.vulkanMemoryModel &&
                    props.properties.apiVersion >= VK_API_VERSION_1_3 &&
                    instance().api_version >= VK_API_VERSION_1_3 && s16.storageBuffer16BitAccess &&
                    f2.features.shaderInt16) {
                    for (const auto& f :
                         device_list<Coop2Flexible>(d.instance, d.phys,
                                                    "vkGetPhysicalDeviceCooperativeMatrixFlexibleDi"
                                                    "mensionsPropertiesNV")) {
                        const bool f16 = f.AType == kComponentF16 && f.BType == kComponentF16,
                                   bf16 = d.info.coop_bf16 && f.AType == kComponentBf16 &&
                                          f.BType == kComponentBf16;
                        if ((f16 || bf16) && f.CType == kComponentF32 &&
                            f.ResultType == kComponentF32 && f.scope == kScopeWorkgroup &&
                            !f.saturatingAccumulation && f.invocations > 0)
                            d.info.cm2.push_back({f.m, f.n, f.k, f.invocations, bf16});
                    }
                    Coop2Props p2{kSTypeCoop2Props};
                    VkPhysicalDeviceProperties2 pp{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
                    pp.pNext = &p2;
                    vkGetPhysicalDeviceProperties2(d.phys, &pp);
                    d.info.cm2_max_dim = p2.cooperativeMatrixFlexibleDimensionsMaxDimension;
                    d.info.cm2_max_invocations = p2.cooperativeMatrixWorkgroupScopeMaxWorkgroupSize;
                    d.info.cm2_reserved_shared =
                        p2.cooperativeMatrixWorkgroupScopeReservedSharedMemory;
                    if (d.info.cm2_max_dim == 0 || d.info.cm2_max_invocations == 0) d.info.cm2.clear();
                }
            }
            if (d.info.coop == DeviceInfo::Coop::None && has_nv) {
                feats12.pNext = &coop_feats;
                vkGetPhysicalDeviceFeatures2(d.phys, &f2);
                bool shape = false;
                if (coop_feats.cooperativeMatrix && feats12.shaderFloat16) {
                    std::uint32_t n = 0;
                    vkGetPhysicalDeviceCooperativeMatrixPropertiesNV(d.phys, &n, nullptr);
                    std::vector<VkCooperativeMatrixPropertiesNV> cm(
                        n, {VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV});
                    vkGetPhysicalDeviceCooperativeMatrixPropertiesNV(d.phys, &n, cm.data());
                    for (const auto& c : cm)
                        shape = shape || (c.MSize == 16 && c.NSize == 8 && c.KSize == 16 &&
                                          c.AType == VK_COMPONENT_TYPE_FLOAT16_NV &&
                                          c.BType == VK_COMPONENT_TYPE_FLOAT16_NV &&
                                          c.CType == VK_COMPONENT_TYPE_FLOAT32_NV &&
                                          c.DType == VK_COMPONENT_TYPE_FLOAT32_NV &&
                                          c.scope == VK_SCOPE_SUBGROUP_NV);
                }
                if (shape) d.info.coop = DeviceInfo::Coop::Nv;
            }
            d.info.cooperative_matrix = d.info.coop != DeviceInfo::Coop::None;
        }
    }
    // Only what is used is enabled.
    VkPhysicalDeviceCooperativeMatrixFeaturesNV coop_on{
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV};
    coop_on.cooperativeMatrix = VK_TRUE;
    KhrCoopFeatures khr_on{kSTypeKhrCoopFeatures};
    khr_on.cooperativeMatrix = VK_TRUE;
    Bf16Features bf16_on{kSTypeBf16Features};
    bf16_on.shaderBFloat16Type = VK_TRUE;
    bf16_on.shaderBFloat16CooperativeMatrix = VK_TRUE;
    Coop2Features coop2_on{kSTypeCoop2Features};
    coop2_on.cooperativeMatrixWorkgroupScope = VK_TRUE;
    coop2_on.cooperativeMatrixFlexibleDimensions = VK_TRUE;
    coop2_on.cooperativeMatrixTensorAddressing = VK_TRUE;
    VkPhysicalDevice16BitStorageFeatures s16_on{
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
    s16_on.storageBuffer16BitAccess = VK_TRUE;
    VkPhysicalDeviceVulkan12Features f12_on{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
    f12_on.shaderFloat16 = VK_TRUE;
    // The matmul's SPIR-V declares the Vulkan memory model (both extensions require it).
    f12_on.vulkanMemoryModel = feats12.vulkanMemoryModel;
    if (d.info.coop == DeviceInfo::Coop::Khr) {
        exts.push_back(kKhrCoopExtension);
        f12_on.pNext = &khr_on;
        if (d.info.coop_bf16) {
            exts.push_back(kBf16Extension);
            khr_on.pNext = &bf16_on;
        }
        if (!d.info.cm2.empty()) {
            exts.push_back(kCoop2Extension);
            coop2_on.pNext = std::exchange(khr_on.pNext, &coop2_on);
            s16_on.pNext = std::exchange(coop2_on.pNext, &s16_on);
        }
    } else if (d.info.coop == DeviceInfo::Coop::Nv) {
        exts.push_back(VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME);
        f12_on.pNext = &coop_on;
    }
    if (d.info.cooperative_matrix) d.info.float16 = true;
    const float priority = 1.0f;
    VkDeviceQueueCreateInfo qi{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
    qi.queueFamilyIndex = d.family;
    qi.queueCount = 1;
    qi.pQueuePriorities = &priority;
    VkPhysicalDeviceFeatures enable{};
    enable.shaderInt64 = VK_TRUE;
    enable.shaderInt16 = d.info.cm2.empty() ? VK_FALSE : VK_TRUE;
    // EMBER_VULKAN_PIPELINE_STATS=1: the driver's statistics of each pipeline it compiles
    // (NVIDIA: registers, binary size, shared memory), through
    // VK_KHR_pipeline_executable_properties, printed to stderr as each pipeline is created.
    VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR stats_on{
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR};
    stats_on.pipelineExecutableInfo = VK_TRUE;
    if (const char* v = std::getenv("EMBER_VULKAN_PIPELINE_STATS"); v && std::string(v) == "1") {
        if (has_extension(d.phys, VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME)) {
            exts.push_back(VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME);
            d.pipeline_stats = true;
        } else {
            std::fprintf(stderr,
                         "ember vulkan: EMBER_VULKAN_PIPELINE_STATS=1 ignored: device '%s' lacks "
                         "VK_KHR_pipeline_executable_properties\n",
                         d.info.name.c_str());
        }
    }
    VkDeviceCreateInfo di{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
    di.queueCreateInfoCount = 1;
    di.pQueueCreateInfos = &qi;
    di.enabledExtensionCount = static_cast<std::uint32_t>(exts.size());
    di.ppEnabledExtensionNames = exts.data();
    di.pEnabledFeatures = &enable;
    if (d.info.cooperative_matrix) di.pNext = &f12_on;
    if (d.pipeline_stats) stats_on.pNext = const_cast<void*>(std::exchange(di.pNext, &stats_on));
    EMBER_CHECK(vkCreateDevice(d.phys, &di, nullptr, &d.device) == VK_SUCCESS, Device,
                "vulkan: vkCreateDevice failed for ", d.info.name);
    vkGetDeviceQueue(d.device, d.family, 0, &d.queue);
    return d;
}

}  // namespace ember::detail::vk
