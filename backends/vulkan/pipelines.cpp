// The pipelines of one device (pipelines.hpp).
#include "pipelines.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>

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

Pipelines::Pipelines(const OpenedDevice& dev, std::string cache_path)
    : device_(dev.device), pipeline_stats_(dev.pipeline_stats), path_(std::move(cache_path)) {
    std::vector<char> blob;
    {
        std::ifstream f(path_, std::ios::binary);
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
}

void Pipelines::save() {
    std::lock_guard lock(mu_);
    save_locked();
}

void Pipelines::save_locked() {
    if (!cache_dirty_) return;
    std::size_t n = 0;
    if (vkGetPipelineCacheData(device_, cache_, &n, nullptr) != VK_SUCCESS || n == 0) return;
    std::vector<char> blob(n);
    if (vkGetPipelineCacheData(device_, cache_, &n, blob.data()) != VK_SUCCESS) return;
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(path_).parent_path(), ec);
    const std::string& path = path_;
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

VkDescriptorSetLayout Pipelines::set_layout(std::uint32_t bindings) {
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

const Pipeline& Pipelines::get_spirv(const std::string& key, std::span<const std::uint32_t> spirv,
                                     std::uint32_t bindings, std::uint32_t local_size,
                                     std::uint32_t push_bytes) {
    std::lock_guard lock(mu_);
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
    const VkSpecializationInfo spi{1, &entry, 4, &ls};
    // The pipeline keeps what it needs of the module, made or not.
    const std::unique_ptr<VkShaderModule_T, std::function<void(VkShaderModule)>> owned(
        mod, [this](VkShaderModule m) { vkDestroyShaderModule(device_, m, nullptr); });
    return make(key, "fused", mod, spi, layout, bindings, local_size, push_bytes);
}

const Pipeline& Pipelines::get(const char* name, std::span<const std::int32_t> spec,
                               std::uint32_t bindings, std::uint32_t local_size) {
    std::lock_guard lock(mu_);
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
    const VkSpecializationInfo spi{static_cast<std::uint32_t>(entries.size()), entries.data(),
                                   values.size() * 4, values.data()};
    // The profiler's name of it: the shader and its constants (a kernel variant or an op code).
    std::string label = name;
    for (std::size_t i = 0; i < spec.size(); ++i)
        label += (i == 0 ? " (" : ",") + std::to_string(spec[i]);
    if (!spec.empty()) label += ")";
    return make(key, std::move(label), mod, spi, layout, bindings, local_size, 0);
}

const Pipeline& Pipelines::make(const std::string& key, std::string name, VkShaderModule mod,
                                const VkSpecializationInfo& spi, VkPipelineLayout layout,
                                std::uint32_t bindings, std::uint32_t local_size,
                                std::uint32_t push_bytes) {
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
    if (pipeline_stats_) print_stats(key, p->pipeline);
    cache_dirty_ = true;
    p->layout = layout;
    p->bindings = bindings;
    p->local_size = local_size;
    p->push_bytes = push_bytes;
    p->name = std::move(name);
    return *(pipelines_[key] = std::move(p));
}

void Pipelines::print_stats(const std::string& key, VkPipeline pipeline) const {
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

}  // namespace ember::detail::vk
