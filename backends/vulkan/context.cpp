// The Vulkan runtime of one device (context.hpp): the four units composed, created on first
// use and kept until the process ends.
#include "context.hpp"

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

namespace ember::detail::vk {

namespace {

std::string default_cache_dir() {
    if (const char* e = std::getenv("EMBER_CACHE_DIR"); e && *e) return e;
    if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/ember";
    if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/ember";
    return "/tmp/ember-cache";
}

}  // namespace

std::size_t Context::device_count() {
    return compute_device_count();
}

Context& Context::get(std::uint32_t index) {
    static std::mutex mu;
    static std::vector<std::unique_ptr<Context>> contexts;
    std::lock_guard lock(mu);
    check_device_index(index);
    if (contexts.size() <= index) contexts.resize(index + 1);
    // Contexts live until the process ends on purpose: tensors held in static objects may
    // outlive any destruction order we could choose, and the driver's own static state may
    // be gone by then. At exit only the pipeline cache is written (see ContextExit).
    if (!contexts[index]) contexts[index].reset(new Context(index));
    return *contexts[index];
}

struct ContextExit {
    static void at_exit(Context* c) {
        c->pipelines_->save();
        if (const char* v = std::getenv("EMBER_VULKAN_PROFILE"); v && std::string(v) == "1")
            std::fputs(c->recorder_->profile_report().c_str(), stderr);
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

Context::Context(std::uint32_t index)
    : index_(index), dev_(open_device(index)), cache_dir_(default_cache_dir()) {
    pool_ = std::make_unique<Pool>(dev_.device, dev_.phys, dev_.info.max_storage_range,
                                   dev_.info.max_alloc_size, dev_.info.max_alloc_count);
    // The pipeline cache, persisted per device and driver.
    pipelines_ = std::make_unique<Pipelines>(dev_, cache_file("pipelines.bin"));
    recorder_ = std::make_unique<Recorder>(dev_, *pipelines_);
    // EMBER_VULKAN_VERBOSE=1: what was found, once per device (which kernels can run).
    if (const char* v = std::getenv("EMBER_VULKAN_VERBOSE"); v && std::string(v) == "1")
        std::fprintf(stderr,
                     "ember vulkan: device %u '%s', subgroup %u, shared memory %u B, "
                     "maxStorageBufferRange %llu B, cooperative matrix %s (f16%s%s), "
                     "workgroup-scope shapes %zu (max dim %u, max workgroup %u, reserved shared "
                     "%u B), cache %s\n",
                     index_, dev_.info.name.c_str(), dev_.info.subgroup_size, dev_.info.max_shared_memory,
                     static_cast<unsigned long long>(dev_.info.max_storage_range),
                     dev_.info.coop == DeviceInfo::Coop::Khr  ? "KHR"
                     : dev_.info.coop == DeviceInfo::Coop::Nv ? "NV"
                                                          : "off",
                     dev_.info.coop_f16_n16 ? " 16x8x16 and 16x16x16" : " 16x8x16",
                     dev_.info.coop_bf16 ? ", bf16 16x16x16" : "", dev_.info.cm2.size(), dev_.info.cm2_max_dim,
                     dev_.info.cm2_max_invocations, dev_.info.cm2_reserved_shared, cache_dir_.c_str());
    if (const char* v = std::getenv("EMBER_VULKAN_VERBOSE"); v && std::string(v) == "1")
        for (const auto& c : dev_.info.cm2)
            std::fprintf(stderr,
                         "ember vulkan:   workgroup scope %s: granularity %u x %u x %u, %u "
                         "invocations\n",
                         c.bf16 ? "bf16" : "f16", c.mg, c.ng, c.kg, c.invocations);
    if (exit_list().empty()) std::atexit(run_exit);
    exit_list().push_back(this);
}

std::string Context::cache_file(const std::string& what) const {
    std::ostringstream s;
    s << cache_dir_ << "/vulkan-" << std::hex << dev_.info.vendor_id << "-" << dev_.info.device_id << "-"
      << dev_.info.driver_version << "-" << what;
    return s.str();
}

}  // namespace ember::detail::vk
