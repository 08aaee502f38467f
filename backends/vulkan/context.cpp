// The Vulkan runtime (context.hpp): device selection, pipelines, the recorder and the rings.
#include "context.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>

#include <unistd.h>

#include "ember/tensor/error.hpp"
#include "shader_registry.hpp"
#include "spirv_coop.hpp"

// Vulkan structs are written `VkFoo info{VK_STRUCTURE_TYPE_FOO}`: the members not named are
// zero (pNext = nullptr, flags = 0), as Vulkan code means them to be; -Wextra would flag each.
#if defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#endif

namespace ember::detail::vk {

namespace {

// Dispatches per command buffer before it is submitted: the device starts working while the
// host records the next batch, and a long op chain never piles up unbounded state.
constexpr std::size_t kBatch = 64;
constexpr std::size_t kFrames = 4;
constexpr VkDeviceSize kParamsRing = VkDeviceSize{8} << 20;
constexpr VkDeviceSize kStagingRing = VkDeviceSize{32} << 20;

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

std::string default_cache_dir() {
    if (const char* e = std::getenv("EMBER_CACHE_DIR"); e && *e) return e;
    if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/ember";
    if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/ember";
    return "/tmp/ember-cache";
}

}  // namespace

std::size_t Context::device_count() {
    Instance& inst = instance();
    return inst.devices.size();
}

Context& Context::get(std::uint32_t index) {
    static std::mutex mu;
    static std::vector<std::unique_ptr<Context>> contexts;
    std::lock_guard lock(mu);
    Instance& inst = instance();
    EMBER_CHECK(!inst.devices.empty(), Device, "vulkan: no Vulkan device: ", inst.error);
    EMBER_CHECK(index < inst.devices.size(), Device, "vulkan: device index ", index,
                " is out of range (EMBER_VULKAN_DEVICE or VulkanDevice{index}): ",
                inst.devices.size(), " device(s) present");
    if (contexts.size() <= index) contexts.resize(index + 1);
    // Contexts live until the process ends on purpose: tensors held in static objects may
    // outlive any destruction order we could choose, and the driver's own static state may
    // be gone by then. At exit only the pipeline cache is written (see ContextExit).
    if (!contexts[index]) contexts[index].reset(new Context(index));
    return *contexts[index];
}

struct ContextExit {
    static void at_exit(Context* c) {
        std::lock_guard lock(c->mu);
        c->save_pipeline_cache();
    }
};

namespace {
std::vector<Context*>& exit_list() {
    static std::vector<Context*> l;
    return l;
}
void run_exit() {
    for (Context* c : exit_list()) ContextExit::at_exit(c);
}
}  // namespace

Context::Context(std::uint32_t index) : index_(index) {
    Instance& inst = instance();
    instance_ = inst.instance;
    phys_ = inst.devices[index];
    bool ok = false;
    family_ = compute_family(phys_, &ok);

    VkPhysicalDeviceSubgroupProperties sub{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
    VkPhysicalDeviceMaintenance3Properties m3{
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES};
    sub.pNext = &m3;
    VkPhysicalDeviceProperties2 props{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
    props.pNext = &sub;
    vkGetPhysicalDeviceProperties2(phys_, &props);
    const auto& lim = props.properties.limits;
    info_.name = props.properties.deviceName;
    info_.vendor_id = props.properties.vendorID;
    info_.device_id = props.properties.deviceID;
    info_.driver_version = props.properties.driverVersion;
    info_.max_storage_range = lim.maxStorageBufferRange;
    info_.max_alloc_size = m3.maxMemoryAllocationSize;
    info_.max_alloc_count = lim.maxMemoryAllocationCount;
    info_.max_shared_memory = lim.maxComputeSharedMemorySize;
    info_.max_invocations = lim.maxComputeWorkGroupInvocations;
    for (int i = 0; i < 3; ++i) info_.max_groups[i] = lim.maxComputeWorkGroupCount[i];
    info_.subgroup_size = sub.subgroupSize;

    VkPhysicalDeviceFeatures feats;
    vkGetPhysicalDeviceFeatures(phys_, &feats);
    EMBER_CHECK(feats.shaderInt64, Device, "vulkan: device ", info_.name,
                " lacks shaderInt64 (int tensors are int64 on the device)");
    EMBER_CHECK(has_extension(phys_, VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME), Device,
                "vulkan: device ", info_.name, " lacks VK_KHR_push_descriptor");

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
        const bool has_nv = has_extension(phys_, VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME);
        const bool has_khr = mode != "nv" && has_extension(phys_, kKhrCoopExtension);
        const bool has_bf16 = has_khr && has_extension(phys_, kBf16Extension);
        const char* env2 = std::getenv("EMBER_VULKAN_COOPMAT2");
        const bool has_coop2 =
            has_khr && !(env2 && std::string(env2) == "0") && has_extension(phys_, kCoop2Extension);
        if (mode != "0" && props.properties.apiVersion >= VK_API_VERSION_1_2 &&
            (has_nv || has_khr) && info_.subgroup_size == 32 &&
            info_.max_shared_memory >= 24 * 1024) {
            feats12.pNext = has_khr ? static_cast<void*>(&khr_feats) : &coop_feats;
            if (has_bf16) khr_feats.pNext = &bf16_feats;
            if (has_coop2) coop2_feats.pNext = std::exchange(khr_feats.pNext, &coop2_feats);
            VkPhysicalDeviceFeatures2 f2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
            // 16-bit storage buffers: matmul_cm2.comp reads its operands as 16-bit words.
            s16.pNext = &feats12;
            f2.pNext = &s16;
            vkGetPhysicalDeviceFeatures2(phys_, &f2);
            if (has_khr && khr_feats.cooperativeMatrix && feats12.shaderFloat16) {
                const auto list = khr_coop_shapes(instance_, phys_);
                auto lists = [&](std::uint32_t n, std::int32_t ab) {
                    for (const auto& c : list)
                        if (c.m == 16 && c.n == n && c.k == 16 && c.AType == ab && c.BType == ab &&
                            c.CType == kComponentF32 && c.ResultType == kComponentF32 &&
                            c.scope == kScopeSubgroup)
                            return true;
                    return false;
                };
                if (lists(8, kComponentF16)) {
                    info_.coop = DeviceInfo::Coop::Khr;
                    info_.coop_f16_n16 = lists(16, kComponentF16);
                    info_.coop_bf16 = has_bf16 && bf16_feats.shaderBFloat16Type &&
                                      bf16_feats.shaderBFloat16CooperativeMatrix &&
                                      lists(16, kComponentBf16);
                }
                // Workgroup-scope matrices with tensor loads (shaders/matmul_cm2.comp).
                if (info_.coop == DeviceInfo::Coop::Khr && has_coop2 &&
                    coop2_feats.cooperativeMatrixWorkgroupScope &&
                    coop2_feats.cooperativeMatrixFlexibleDimensions &&
                    coop2_feats.cooperativeMatrixTensorAddressing && feats12.vulkanMemoryModel &&
                    props.properties.apiVersion >= VK_API_VERSION_1_3 &&
                    instance().api_version >= VK_API_VERSION_1_3 && s16.storageBuffer16BitAccess &&
                    f2.features.shaderInt16) {
                    for (const auto& f :
                         device_list<Coop2Flexible>(instance_, phys_,
                                                    "vkGetPhysicalDeviceCooperativeMatrixFlexibleDi"
                                                    "mensionsPropertiesNV")) {
                        const bool f16 = f.AType == kComponentF16 && f.BType == kComponentF16,
                                   bf16 = info_.coop_bf16 && f.AType == kComponentBf16 &&
                                          f.BType == kComponentBf16;
                        if ((f16 || bf16) && f.CType == kComponentF32 &&
                            f.ResultType == kComponentF32 && f.scope == kScopeWorkgroup &&
                            !f.saturatingAccumulation && f.invocations > 0)
                            info_.cm2.push_back({f.m, f.n, f.k, f.invocations, bf16});
                    }
                    Coop2Props p2{kSTypeCoop2Props};
                    VkPhysicalDeviceProperties2 pp{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
                    pp.pNext = &p2;
                    vkGetPhysicalDeviceProperties2(phys_, &pp);
                    info_.cm2_max_dim = p2.cooperativeMatrixFlexibleDimensionsMaxDimension;
                    info_.cm2_max_invocations = p2.cooperativeMatrixWorkgroupScopeMaxWorkgroupSize;
                    info_.cm2_reserved_shared =
                        p2.cooperativeMatrixWorkgroupScopeReservedSharedMemory;
                    if (info_.cm2_max_dim == 0 || info_.cm2_max_invocations == 0) info_.cm2.clear();
                }
            }
            if (info_.coop == DeviceInfo::Coop::None && has_nv) {
                feats12.pNext = &coop_feats;
                vkGetPhysicalDeviceFeatures2(phys_, &f2);
                bool shape = false;
                if (coop_feats.cooperativeMatrix && feats12.shaderFloat16) {
                    std::uint32_t n = 0;
                    vkGetPhysicalDeviceCooperativeMatrixPropertiesNV(phys_, &n, nullptr);
                    std::vector<VkCooperativeMatrixPropertiesNV> cm(
                        n, {VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV});
                    vkGetPhysicalDeviceCooperativeMatrixPropertiesNV(phys_, &n, cm.data());
                    for (const auto& c : cm)
                        shape = shape || (c.MSize == 16 && c.NSize == 8 && c.KSize == 16 &&
                                          c.AType == VK_COMPONENT_TYPE_FLOAT16_NV &&
                                          c.BType == VK_COMPONENT_TYPE_FLOAT16_NV &&
                                          c.CType == VK_COMPONENT_TYPE_FLOAT32_NV &&
                                          c.DType == VK_COMPONENT_TYPE_FLOAT32_NV &&
                                          c.scope == VK_SCOPE_SUBGROUP_NV);
                }
                if (shape) info_.coop = DeviceInfo::Coop::Nv;
            }
            info_.cooperative_matrix = info_.coop != DeviceInfo::Coop::None;
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
    if (info_.coop == DeviceInfo::Coop::Khr) {
        exts.push_back(kKhrCoopExtension);
        f12_on.pNext = &khr_on;
        if (info_.coop_bf16) {
            exts.push_back(kBf16Extension);
            khr_on.pNext = &bf16_on;
        }
        if (!info_.cm2.empty()) {
            exts.push_back(kCoop2Extension);
            coop2_on.pNext = std::exchange(khr_on.pNext, &coop2_on);
            s16_on.pNext = std::exchange(coop2_on.pNext, &s16_on);
        }
    } else if (info_.coop == DeviceInfo::Coop::Nv) {
        exts.push_back(VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME);
        f12_on.pNext = &coop_on;
    }
    if (info_.cooperative_matrix) info_.float16 = true;
    const float priority = 1.0f;
    VkDeviceQueueCreateInfo qi{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
    qi.queueFamilyIndex = family_;
    qi.queueCount = 1;
    qi.pQueuePriorities = &priority;
    VkPhysicalDeviceFeatures enable{};
    enable.shaderInt64 = VK_TRUE;
    enable.shaderInt16 = info_.cm2.empty() ? VK_FALSE : VK_TRUE;
    // EMBER_VULKAN_PIPELINE_STATS=1: the driver's statistics of each pipeline it compiles
    // (NVIDIA: registers, binary size, shared memory), through
    // VK_KHR_pipeline_executable_properties, printed to stderr as each pipeline is created.
    VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR stats_on{
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR};
    stats_on.pipelineExecutableInfo = VK_TRUE;
    if (const char* v = std::getenv("EMBER_VULKAN_PIPELINE_STATS"); v && std::string(v) == "1") {
        if (has_extension(phys_, VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME)) {
            exts.push_back(VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME);
            pipeline_stats_ = true;
        } else {
            std::fprintf(stderr,
                         "ember vulkan: EMBER_VULKAN_PIPELINE_STATS=1 ignored: device '%s' lacks "
                         "VK_KHR_pipeline_executable_properties\n",
                         info_.name.c_str());
        }
    }
    VkDeviceCreateInfo di{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
    di.queueCreateInfoCount = 1;
    di.pQueueCreateInfos = &qi;
    di.enabledExtensionCount = static_cast<std::uint32_t>(exts.size());
    di.ppEnabledExtensionNames = exts.data();
    di.pEnabledFeatures = &enable;
    if (info_.cooperative_matrix) di.pNext = &f12_on;
    if (pipeline_stats_) stats_on.pNext = const_cast<void*>(std::exchange(di.pNext, &stats_on));
    EMBER_CHECK(vkCreateDevice(phys_, &di, nullptr, &device_) == VK_SUCCESS, Device,
                "vulkan: vkCreateDevice failed for ", info_.name);
    vkGetDeviceQueue(device_, family_, 0, &queue_);

    pool_ = std::make_unique<Pool>(device_, phys_, info_.max_storage_range, info_.max_alloc_size,
                                   info_.max_alloc_count);

    VkCommandPoolCreateInfo pi{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
    pi.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
    pi.queueFamilyIndex = family_;
    vkCreateCommandPool(device_, &pi, nullptr, &cmd_pool_);
    frames_.resize(kFrames);
    for (auto& f : frames_) {
        VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
        ai.commandPool = cmd_pool_;
        ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
        ai.commandBufferCount = 1;
        vkAllocateCommandBuffers(device_, &ai, &f.cmd);
        VkFenceCreateInfo fi{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
        vkCreateFence(device_, &fi, nullptr, &f.fence);
    }
    make_ring(params_, kParamsRing);
    make_ring(staging_, kStagingRing);

    // The pipeline cache, persisted per device and driver.
    cache_dir_ = default_cache_dir();
    std::vector<char> blob;
    {
        std::ifstream f(cache_file("pipelines.bin"), std::ios::binary);
        if (f) blob.assign(std::istreambuf_iterator<char>(f), {});
    }
    VkPipelineCacheCreateInfo ci{VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
    ci.initialDataSize = blob.size();
    ci.pInitialData = blob.empty() ? nullptr : blob.data();
    if (vkCreatePipelineCache(device_, &ci, nullptr, &cache_) != VK_SUCCESS) {
        ci.initialDataSize = 0;  // a stale or foreign blob: start empty
        ci.pInitialData = nullptr;
        vkCreatePipelineCache(device_, &ci, nullptr, &cache_);
    }
    // EMBER_VULKAN_VERBOSE=1: what was found, once per device (which kernels can run).
    if (const char* v = std::getenv("EMBER_VULKAN_VERBOSE"); v && std::string(v) == "1")
        std::fprintf(stderr,
                     "ember vulkan: device %u '%s', subgroup %u, shared memory %u B, "
                     "maxStorageBufferRange %llu B, cooperative matrix %s (f16%s%s), "
                     "workgroup-scope shapes %zu (max dim %u, max workgroup %u, reserved shared "
                     "%u B), cache %s\n",
                     index_, info_.name.c_str(), info_.subgroup_size, info_.max_shared_memory,
                     static_cast<unsigned long long>(info_.max_storage_range),
                     info_.coop == DeviceInfo::Coop::Khr  ? "KHR"
                     : info_.coop == DeviceInfo::Coop::Nv ? "NV"
                                                          : "off",
                     info_.coop_f16_n16 ? " 16x8x16 and 16x16x16" : " 16x8x16",
                     info_.coop_bf16 ? ", bf16 16x16x16" : "", info_.cm2.size(), info_.cm2_max_dim,
                     info_.cm2_max_invocations, info_.cm2_reserved_shared, cache_dir_.c_str());
    if (const char* v = std::getenv("EMBER_VULKAN_VERBOSE"); v && std::string(v) == "1")
        for (const auto& c : info_.cm2)
            std::fprintf(stderr,
                         "ember vulkan:   workgroup scope %s: granularity %u x %u x %u, %u "
                         "invocations\n",
                         c.bf16 ? "bf16" : "f16", c.mg, c.ng, c.kg, c.invocations);
    if (exit_list().empty()) std::atexit(run_exit);
    exit_list().push_back(this);
}

std::string Context::cache_file(const std::string& what) const {
    std::ostringstream s;
    s << cache_dir_ << "/vulkan-" << std::hex << info_.vendor_id << "-" << info_.device_id << "-"
      << info_.driver_version << "-" << what;
    return s.str();
}

void Context::save_pipeline_cache() {
    if (!cache_dirty_) return;
    std::size_t n = 0;
    if (vkGetPipelineCacheData(device_, cache_, &n, nullptr) != VK_SUCCESS || n == 0) return;
    std::vector<char> blob(n);
    if (vkGetPipelineCacheData(device_, cache_, &n, blob.data()) != VK_SUCCESS) return;
    std::error_code ec;
    std::filesystem::create_directories(cache_dir_, ec);
    const std::string path = cache_file("pipelines.bin");
    const std::string tmp = path + ".tmp" + std::to_string(::getpid());
    {
        std::ofstream f(tmp, std::ios::binary);
        if (!f) return;  // an unwritable cache directory only costs compile time
        f.write(blob.data(), static_cast<std::streamsize>(n));
        if (!f) return;
    }
    std::filesystem::rename(tmp, path, ec);  // atomic: readers never see half a file
    cache_dirty_ = false;
}

void Context::make_ring(Ring& r, VkDeviceSize size) {
    VkBufferCreateInfo bi{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
    bi.size = size;
    bi.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
               VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    // Out of host or device memory here is an ember::Error naming the size, like the pool's.
    EMBER_CHECK(vkCreateBuffer(device_, &bi, nullptr, &r.buffer) == VK_SUCCESS, Device,
                "vulkan: cannot create a staging ring of ", size, " bytes");
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(device_, r.buffer, &req);
    VkPhysicalDeviceMemoryProperties mp;
    vkGetPhysicalDeviceMemoryProperties(phys_, &mp);
    const VkMemoryPropertyFlags want =
        VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    std::uint32_t type = UINT32_MAX;
    // Prefer cached host memory: readbacks read it.
    for (int pass = 0; pass < 2 && type == UINT32_MAX; ++pass)
        for (std::uint32_t i = 0; i < mp.memoryTypeCount; ++i) {
            const auto f = mp.memoryTypes[i].propertyFlags;
            const bool cached = f & VK_MEMORY_PROPERTY_HOST_CACHED_BIT;
            if ((req.memoryTypeBits & (1u << i)) && (f & want) == want && (pass == 1 || cached)) {
                type = i;
                break;
            }
        }
    EMBER_CHECK(type != UINT32_MAX, Device, "vulkan: no host-visible coherent memory on ",
                info_.name);
    VkMemoryAllocateInfo ai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    ai.allocationSize = req.size;
    ai.memoryTypeIndex = type;
    if (vkAllocateMemory(device_, &ai, nullptr, &r.memory) != VK_SUCCESS) {
        vkDestroyBuffer(device_, r.buffer, nullptr);
        r.buffer = VK_NULL_HANDLE;
        EMBER_FAIL(Device, "vulkan: cannot allocate a staging ring of ", size, " bytes");
    }
    vkBindBufferMemory(device_, r.buffer, r.memory, 0);
    void* p = nullptr;
    vkMapMemory(device_, r.memory, 0, size, 0, &p);
    r.mapped = static_cast<std::byte*>(p);
    r.size = size;
}

VkDeviceSize Context::ring_alloc(Ring& r, VkDeviceSize bytes, VkDeviceSize align) {
    VkDeviceSize at = (r.top + align - 1) / align * align;
    if (at + bytes > r.size) {
        // Wrap around: what the ring holds may still be read by recorded or running work.
        wait_idle();
        at = 0;
    }
    r.top = at + bytes;
    return at;
}

VkCommandBuffer Context::cmd() {
    if (cap_) return cap_->cmd;
    if (!recording_) begin_frame();
    return frames_[frame_].cmd;
}

void Context::begin_frame() {
    Frame& f = frames_[frame_];
    if (f.pending) {
        vkWaitForFences(device_, 1, &f.fence, VK_TRUE, UINT64_MAX);
        vkResetFences(device_, 1, &f.fence);
        f.pending = false;
        ++stats_.waits;
    }
    vkResetCommandBuffer(f.cmd, 0);
    VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    vkBeginCommandBuffer(f.cmd, &bi);
    recording_ = true;
    recorded_ = 0;
    barrier();  // orders this batch after everything submitted before
}

void Context::barrier() {
    VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT |
                       VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_TRANSFER_READ_BIT;
    mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                       VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
    const VkPipelineStageFlags stages =
        VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
    vkCmdPipelineBarrier(target(), stages, stages, 0, 1, &mb, 0, nullptr, 0, nullptr);
    reads_.clear();
    writes_.clear();
    ++stats_.barriers;
}

void Context::track(std::span<const Binding> buffers) {
    auto overlaps = [](const std::vector<Range>& set, const Binding& b) {
        for (const Range& r : set)
            if (r.buffer == b.buffer && r.begin < b.offset + b.range && b.offset < r.end)
                return true;
        return false;
    };
    bool hazard = reads_.size() + writes_.size() > 512;  // keep the check cheap
    for (const Binding& b : buffers) {
        if (hazard) break;
        hazard = overlaps(writes_, b) || (b.write && overlaps(reads_, b));
    }
    if (hazard) barrier();
    for (const Binding& b : buffers)
        (b.write ? writes_ : reads_).push_back({b.buffer, b.offset, b.offset + b.range});
}

VkDescriptorSetLayout Context::set_layout(std::uint32_t bindings) {
    VkDescriptorSetLayout& dsl = set_layouts_[bindings];
    if (!dsl) {
        std::vector<VkDescriptorSetLayoutBinding> b(bindings + 1);
        for (std::uint32_t i = 0; i <= bindings; ++i) {
            b[i].binding = i;
            b[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
            b[i].descriptorCount = 1;
            b[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
        }
        VkDescriptorSetLayoutCreateInfo li{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
        li.flags = VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR;
        li.bindingCount = bindings + 1;
        li.pBindings = b.data();
        vkCreateDescriptorSetLayout(device_, &li, nullptr, &dsl);
    }
    return dsl;
}

const Pipeline& Context::pipeline_spirv(const std::string& key,
                                        std::span<const std::uint32_t> spirv,
                                        std::uint32_t bindings, std::uint32_t local_size,
                                        std::uint32_t push_bytes) {
    if (auto it = pipelines_.find(key); it != pipelines_.end()) return *it->second;
    VkDescriptorSetLayout dsl = set_layout(bindings);
    VkPipelineLayout& layout = push_layouts_[{bindings, push_bytes}];
    if (!layout) {
        VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes};
        VkPipelineLayoutCreateInfo li{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
        li.setLayoutCount = 1;
        li.pSetLayouts = &dsl;
        li.pushConstantRangeCount = push_bytes ? 1 : 0;
        li.pPushConstantRanges = &range;
        vkCreatePipelineLayout(device_, &li, nullptr, &layout);
    }
    VkShaderModuleCreateInfo si{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
    si.codeSize = spirv.size_bytes();
    si.pCode = spirv.data();
    VkShaderModule mod = VK_NULL_HANDLE;
    EMBER_CHECK(vkCreateShaderModule(device_, &si, nullptr, &mod) == VK_SUCCESS, Device,
                "vulkan: vkCreateShaderModule failed for fused kernel ", key);
    const std::int32_t ls = static_cast<std::int32_t>(local_size);
    VkSpecializationMapEntry entry{0, 0, 4};
    VkSpecializationInfo spi{1, &entry, 4, &ls};
    VkComputePipelineCreateInfo ci{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
    ci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
    ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
    ci.stage.module = mod;
    ci.stage.pName = "main";
    ci.stage.pSpecializationInfo = &spi;
    ci.layout = layout;
    if (pipeline_stats_) ci.flags |= VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR;
    auto p = std::make_unique<Pipeline>();
    const VkResult r = vkCreateComputePipelines(device_, cache_, 1, &ci, nullptr, &p->pipeline);
    vkDestroyShaderModule(device_, mod, nullptr);  // the pipeline keeps what it needs
    EMBER_CHECK(r == VK_SUCCESS, Device, "vulkan: vkCreateComputePipelines failed (",
                static_cast<int>(r), ") for fused kernel ", key);
    if (pipeline_stats_) print_pipeline_stats(key, p->pipeline);
    cache_dirty_ = true;
    p->layout = layout;
    p->bindings = bindings;
    p->local_size = local_size;
    p->push_bytes = push_bytes;
    return *(pipelines_[key] = std::move(p));
}

void Context::drop_pipelines(const std::string& prefix) {
    wait_idle();  // recorded work may still use them
    for (auto it = pipelines_.begin(); it != pipelines_.end();) {
        if (it->first.compare(0, prefix.size(), prefix) == 0) {
            vkDestroyPipeline(device_, it->second->pipeline, nullptr);
            it = pipelines_.erase(it);
        } else {
            ++it;
        }
    }
}

const Pipeline& Context::pipeline(const char* name, std::span<const std::int32_t> spec,
                                  std::uint32_t bindings, std::uint32_t local_size) {
    std::string key = name;
    key += ":" + std::to_string(local_size) + ":" + std::to_string(bindings);
    for (auto v : spec) key += ":" + std::to_string(v);
    if (auto it = pipelines_.find(key); it != pipelines_.end()) return *it->second;

    VkShaderModule& mod = modules_[name];
    if (!mod) {
        // "shader@khr" and "shader@khr_bf16": the embedded NV cooperative-matrix module moved
        // to VK_KHR_cooperative_matrix, with f16 or bf16 matrices (spirv_coop.hpp); "@cm2" and
        // "@cm2_bf16" also declare VK_NV_cooperative_matrix2 (workgroup-scope matrices).
        const std::string full = name;
        const std::size_t at = full.find('@');
        const std::string base = full.substr(0, at),
                          variant = at == full.npos ? "" : full.substr(at + 1);
        const ShaderBlob* blob = nullptr;
        for (std::size_t i = 0; i < kNumShaders; ++i)
            if (base == kShaders[i].name) blob = &kShaders[i];
        EMBER_CHECK(blob && (variant.empty() || variant == "khr" || variant == "khr_bf16" ||
                             variant == "cm2" || variant == "cm2_bf16"),
                    Generic, "vulkan: no embedded shader named ", name);
        std::span<const std::uint32_t> words(blob->words, blob->count);
        std::vector<std::uint32_t> rewritten;
        if (!variant.empty()) {
            const bool bf16 = variant.ends_with("bf16");
            rewritten = coop_nv_to_khr(words, bf16 ? CoopElement::BF16 : CoopElement::F16,
                                       variant.starts_with("cm2"));
            words = rewritten;
        }
        VkShaderModuleCreateInfo si{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
        si.codeSize = words.size() * 4;
        si.pCode = words.data();
        EMBER_CHECK(vkCreateShaderModule(device_, &si, nullptr, &mod) == VK_SUCCESS, Device,
                    "vulkan: vkCreateShaderModule failed for ", name);
    }
    VkDescriptorSetLayout dsl = set_layout(bindings);
    VkPipelineLayout& layout = layouts_[bindings];
    if (!layout) {
        VkPipelineLayoutCreateInfo li{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
        li.setLayoutCount = 1;
        li.pSetLayouts = &dsl;
        vkCreatePipelineLayout(device_, &li, nullptr, &layout);
    }
    std::vector<std::int32_t> values{static_cast<std::int32_t>(local_size)};
    values.insert(values.end(), spec.begin(), spec.end());
    std::vector<VkSpecializationMapEntry> entries(values.size());
    for (std::uint32_t i = 0; i < values.size(); ++i) entries[i] = {i, i * 4, 4};
    VkSpecializationInfo spi{static_cast<std::uint32_t>(entries.size()), entries.data(),
                             values.size() * 4, values.data()};
    VkComputePipelineCreateInfo ci{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
    ci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
    ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
    ci.stage.module = mod;
    ci.stage.pName = "main";
    ci.stage.pSpecializationInfo = &spi;
    ci.layout = layout;
    if (pipeline_stats_) ci.flags |= VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR;
    auto p = std::make_unique<Pipeline>();
    const VkResult made = vkCreateComputePipelines(device_, cache_, 1, &ci, nullptr, &p->pipeline);
    EMBER_CHECK(made == VK_SUCCESS, Device, "vulkan: vkCreateComputePipelines failed for ", key,
                " (VkResult ", static_cast<int>(made), ")");
    if (pipeline_stats_) print_pipeline_stats(key, p->pipeline);
    cache_dirty_ = true;
    p->layout = layout;
    p->bindings = bindings;
    p->local_size = local_size;
    return *(pipelines_[key] = std::move(p));
}

void Context::print_pipeline_stats(const std::string& key, VkPipeline pipeline) const {
    VkPipelineInfoKHR pi{VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR};
    pi.pipeline = pipeline;
    std::uint32_t n = 0;
    vkGetPipelineExecutablePropertiesKHR(device_, &pi, &n, nullptr);
    for (std::uint32_t e = 0; e < n; ++e) {
        VkPipelineExecutableInfoKHR ei{VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR};
        ei.pipeline = pipeline;
        ei.executableIndex = e;
        std::uint32_t ns = 0;
        vkGetPipelineExecutableStatisticsKHR(device_, &ei, &ns, nullptr);
        std::vector<VkPipelineExecutableStatisticKHR> st(
            ns, {VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR});
        vkGetPipelineExecutableStatisticsKHR(device_, &ei, &ns, st.data());
        std::string line;
        for (const auto& s : st) {
            line += std::string(line.empty() ? "" : ", ") + s.name + " ";
            switch (s.format) {
                case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR:
                    line += s.value.b32 ? "yes" : "no";
                    break;
                case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR:
                    line += std::to_string(s.value.i64);
                    break;
                case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR:
                    line += std::to_string(s.value.u64);
                    break;
                default:
                    line += std::to_string(s.value.f64);
            }
        }
        std::fprintf(stderr, "ember vulkan: pipeline %s: %s\n", key.c_str(), line.c_str());
    }
}

void Context::dispatch(const Pipeline& p, std::span<const Binding> buffers,
                       std::span<const std::int32_t> params, std::uint64_t groups,
                       std::span<const std::uint32_t> push) {
    if (groups == 0) return;
    EMBER_CHECK(buffers.size() == p.bindings, Generic, "vulkan: dispatch with ", buffers.size(),
                " buffers for a pipeline of ", p.bindings);
    const VkDeviceSize pbytes = std::max<VkDeviceSize>(params.size_bytes(), 4);
    Ring* ring = &params_;
    VkDeviceSize at = 0;
    if (cap_) {
        // A captured step's parameters stay where its command buffer reads them: chunks it
        // owns, never reused by later work.
        auto& ch = cap_->chunks;
        at = ch.empty() ? 0 : (ch.back().top + kAllocAlign - 1) / kAllocAlign * kAllocAlign;
        if (ch.empty() || at + pbytes > ch.back().size) {
            ch.emplace_back();
            make_ring(ch.back(), std::max<VkDeviceSize>(VkDeviceSize{1} << 20, pbytes));
            at = 0;
        }
        ch.back().top = at + pbytes;
        ring = &ch.back();
        last_chunk_ = ch.size() - 1;
        last_at_ = at;
    } else {
        at = ring_alloc(params_, pbytes, kAllocAlign);
    }
    std::memcpy(ring->mapped + at, params.data(), params.size_bytes());
    VkCommandBuffer c = cmd();
    track(buffers);
    std::vector<VkDescriptorBufferInfo> infos(buffers.size() + 1);
    std::vector<VkWriteDescriptorSet> writes(buffers.size() + 1);
    infos[0] = {ring->buffer, at, pbytes};
    for (std::size_t i = 0; i < buffers.size(); ++i)
        infos[i + 1] = {buffers[i].buffer, buffers[i].offset, buffers[i].range};
    for (std::size_t i = 0; i < infos.size(); ++i) {
        writes[i] = {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
        writes[i].dstBinding = static_cast<std::uint32_t>(i);
        writes[i].descriptorCount = 1;
        writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
        writes[i].pBufferInfo = &infos[i];
    }
    vkCmdBindPipeline(c, VK_PIPELINE_BIND_POINT_COMPUTE, p.pipeline);
    vkCmdPushDescriptorSetKHR(c, VK_PIPELINE_BIND_POINT_COMPUTE, p.layout, 0,
                              static_cast<std::uint32_t>(writes.size()), writes.data());
    if (p.push_bytes)
        vkCmdPushConstants(
            c, p.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0,
            std::min<std::uint32_t>(p.push_bytes, static_cast<std::uint32_t>(push.size_bytes())),
            push.data());
    const std::uint64_t maxx = info_.max_groups[0];
    const std::uint32_t gx = static_cast<std::uint32_t>(std::min<std::uint64_t>(groups, maxx));
    const std::uint64_t gy = (groups + gx - 1) / gx;
    EMBER_CHECK(gy <= info_.max_groups[1], Argument, "vulkan: ", groups,
                " workgroups exceed the device's dispatch limits");
    vkCmdDispatch(c, gx, static_cast<std::uint32_t>(gy), 1);
    ++stats_.dispatches;
    if (!cap_ && ++recorded_ >= kBatch) flush();
}

void Context::upload(const void* src, std::size_t bytes, const Binding& dst) {
    EMBER_CHECK(!cap_, Device, "vulkan::capture: a copy from host memory inside a captured step");
    const auto* from = static_cast<const std::byte*>(src);
    std::size_t done = 0;
    while (done < bytes) {
        const std::size_t n = std::min<std::size_t>(bytes - done, staging_.size / 2);
        const VkDeviceSize at = ring_alloc(staging_, n, 16);
        std::memcpy(staging_.mapped + at, from + done, n);
        VkCommandBuffer c = cmd();
        const Binding part{dst.buffer, dst.offset + done, n, true};
        track(std::span(&part, 1));
        VkBufferCopy region{at, dst.offset + done, n};
        vkCmdCopyBuffer(c, staging_.buffer, dst.buffer, 1, &region);
        done += n;
    }
}

void Context::download(const Binding& src, void* dst, std::size_t bytes) {
    EMBER_CHECK(!cap_, Device, "vulkan::capture: a read of device memory inside a captured step");
    auto* to = static_cast<std::byte*>(dst);
    std::size_t done = 0;
    while (done < bytes) {
        const std::size_t n = std::min<std::size_t>(bytes - done, staging_.size / 2);
        const VkDeviceSize at = ring_alloc(staging_, n, 16);
        VkCommandBuffer c = cmd();
        const Binding part{src.buffer, src.offset + done, n, false};
        track(std::span(&part, 1));
        VkBufferCopy region{src.offset + done, at, n};
        vkCmdCopyBuffer(c, src.buffer, staging_.buffer, 1, &region);
        VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
        mb.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
        mb.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
        vkCmdPipelineBarrier(c, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1,
                             &mb, 0, nullptr, 0, nullptr);
        wait_idle();
        std::memcpy(to + done, staging_.mapped + at, n);
        done += n;
    }
}

void Context::flush() {
    if (!recording_ || cap_) return;  // a capture's commands are submitted by its replays
    submit(VK_NULL_HANDLE);
}

void Context::submit(VkCommandBuffer extra) {
    if (!recording_) begin_frame();
    Frame& f = frames_[frame_];
    vkEndCommandBuffer(f.cmd);
    VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
    // A captured step goes in the batch of the frame that wrote its parameters: the frame's
    // fence then covers it, and wait_idle waits for it.
    const VkCommandBuffer both[] = {f.cmd, extra};
    si.commandBufferCount = extra ? 2 : 1;
    si.pCommandBuffers = both;
    const VkResult r = vkQueueSubmit(queue_, 1, &si, f.fence);
    EMBER_CHECK(r == VK_SUCCESS, Device, "vulkan: vkQueueSubmit failed (", static_cast<int>(r),
                ") on ", info_.name);
    f.pending = true;
    recording_ = false;
    ++stats_.submits;
    frame_ = (frame_ + 1) % frames_.size();
}

void Context::wait_idle() {
    EMBER_CHECK(!cap_, Device, "vulkan::capture: a wait for the device inside a captured step");
    flush();
    for (Frame& f : frames_) {
        if (!f.pending) continue;
        const VkResult r = vkWaitForFences(device_, 1, &f.fence, VK_TRUE, UINT64_MAX);
        EMBER_CHECK(r == VK_SUCCESS, Device, "vulkan: waiting for the device failed (",
                    static_cast<int>(r), ") on ", info_.name);
        vkResetFences(device_, 1, &f.fence);
        f.pending = false;
    }
    ++stats_.waits;
    params_.top = 0;
    staging_.top = 0;
    save_pipeline_cache();
}

void Context::free_ring(Ring& r) {
    if (r.buffer) vkDestroyBuffer(device_, r.buffer, nullptr);
    if (r.memory) {
        vkUnmapMemory(device_, r.memory);
        vkFreeMemory(device_, r.memory, nullptr);
    }
    r = Ring{};
}

void Context::begin_capture() {
    EMBER_CHECK(!cap_, Device, "vulkan::capture: a step is already being captured");
    flush();  // work recorded before belongs before the step
    auto c = std::make_unique<CapturedCommands>();
    VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    ai.commandPool = cmd_pool_;
    ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    ai.commandBufferCount = 1;
    EMBER_CHECK(vkAllocateCommandBuffers(device_, &ai, &c->cmd) == VK_SUCCESS, Device,
                "vulkan::capture: vkAllocateCommandBuffers failed on ", info_.name);
    VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    // Replays are queued while earlier ones may still be pending.
    bi.flags = VK_COMMAND_BUFFER_USAGE_SIMULTANEOUS_USE_BIT;
    vkBeginCommandBuffer(c->cmd, &bi);
    cap_ = std::move(c);
    barrier();  // orders each run after everything submitted before it
}

CapturedCommands Context::end_capture() {
    vkEndCommandBuffer(cap_->cmd);
    CapturedCommands out = std::move(*cap_);
    cap_.reset();
    reads_.clear();
    writes_.clear();
    return out;
}

void Context::abort_capture() {
    if (!cap_) return;
    CapturedCommands c = end_capture();
    vkFreeCommandBuffers(device_, cmd_pool_, 1, &c.cmd);  // never submitted
    for (Ring& r : c.chunks) free_ring(r);
}

void Context::submit_captured(const CapturedCommands& c, std::span<const ParamPatch> patches) {
    VkCommandBuffer f = cmd();  // a frame: its leading barrier orders the writes after the
                                // earlier runs' reads of the same parameters
    for (const ParamPatch& p : patches)
        vkCmdUpdateBuffer(f, c.chunks[p.chunk].buffer, p.offset, p.words.size() * 4,
                          p.words.data());
    submit(c.cmd);  // the captured buffer begins with a barrier: it sees the writes
}

void Context::free_captured(CapturedCommands& c) {
    if (!c.cmd) return;
    wait_idle();
    vkFreeCommandBuffers(device_, cmd_pool_, 1, &c.cmd);
    c.cmd = VK_NULL_HANDLE;
    for (Ring& r : c.chunks) free_ring(r);
    c.chunks.clear();
}

ember::vulkan::ExecutionStats Context::exec_stats() const {
    return stats_;
}

}  // namespace ember::detail::vk
