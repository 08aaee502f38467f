// The command recorder of one device (recorder.hpp).
#include "recorder.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "ember/tensor/error.hpp"
#include "pool.hpp"

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

// Records into `c` a copy of `part` to `staging` at `at`.
void copy_to(VkCommandBuffer c, const Binding& part, VkBuffer staging, VkDeviceSize at) {
    VkBufferCopy region{part.offset, at, part.range};
    vkCmdCopyBuffer(c, part.buffer, staging, 1, &region);
}

// Makes the transfers recorded in `c` so far visible to the host's reads after the next wait.
void host_read_barrier(VkCommandBuffer c) {
    VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    mb.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
    vkCmdPipelineBarrier(c, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb,
                         0, nullptr, 0, nullptr);
}

}  // namespace

Recorder::Recorder(const OpenedDevice& dev, Pipelines& pipelines)
    : dev_(dev), pipelines_(pipelines) {
    VkCommandPoolCreateInfo pi{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
    pi.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
    pi.queueFamilyIndex = dev_.family;
    vkCreateCommandPool(dev_.device, &pi, nullptr, &cmd_pool_);
    frames_.resize(kFrames);
    for (auto& f : frames_) {
        VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
        ai.commandPool = cmd_pool_;
        ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
        ai.commandBufferCount = 1;
        vkAllocateCommandBuffers(dev_.device, &ai, &f.cmd);
        VkFenceCreateInfo fi{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
        vkCreateFence(dev_.device, &fi, nullptr, &f.fence);
    }
    make_ring(params_, kParamsRing);
    make_ring(staging_, kStagingRing);
    // EMBER_VULKAN_PROFILE=1: every dispatch timed from the start (Context prints the table
    // at exit).
    if (const char* v = std::getenv("EMBER_VULKAN_PROFILE"); v && std::string_view(v) == "1")
        set_profiling(true);
}

void Recorder::make_ring(HostRing& r, VkDeviceSize size) {
    VkBufferCreateInfo bi{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
    bi.size = size;
    bi.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
               VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    // Out of host or device memory here is an ember::Error naming the size, like the pool's.
    EMBER_CHECK(vkCreateBuffer(dev_.device, &bi, nullptr, &r.buffer) == VK_SUCCESS, Device,
                "vulkan: cannot create a staging ring of ", size, " bytes");
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(dev_.device, r.buffer, &req);
    VkPhysicalDeviceMemoryProperties mp;
    vkGetPhysicalDeviceMemoryProperties(dev_.phys, &mp);
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
                dev_.info.name);
    VkMemoryAllocateInfo ai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    ai.allocationSize = req.size;
    ai.memoryTypeIndex = type;
    if (vkAllocateMemory(dev_.device, &ai, nullptr, &r.memory) != VK_SUCCESS) {
        vkDestroyBuffer(dev_.device, r.buffer, nullptr);
        r.buffer = VK_NULL_HANDLE;
        EMBER_FAIL(Device, "vulkan: cannot allocate a staging ring of ", size, " bytes");
    }
    vkBindBufferMemory(dev_.device, r.buffer, r.memory, 0);
    void* p = nullptr;
    vkMapMemory(dev_.device, r.memory, 0, size, 0, &p);
    r.mapped = static_cast<std::byte*>(p);
    r.size = size;
}

VkDeviceSize Recorder::ring_alloc(HostRing& r, VkDeviceSize bytes, VkDeviceSize align) {
    VkDeviceSize at = (r.top + align - 1) / align * align;
    if (at + bytes > r.size) {
        // Wrap around: what the ring holds may still be read by recorded or running work.
        wait_idle();
        at = 0;
    }
    r.top = at + bytes;
    return at;
}

VkCommandBuffer Recorder::cmd() {
    if (cap_) return cap_->cmd;
    if (!recording_) begin_frame();
    return frames_[frame_].cmd;
}

void Recorder::retire(std::size_t i) {
    Frame& f = frames_[i];
    if (!f.pending) return;
    const VkResult r = vkWaitForFences(dev_.device, 1, &f.fence, VK_TRUE, UINT64_MAX);
    EMBER_CHECK(r == VK_SUCCESS, Device, "vulkan: waiting for the device failed (",
                static_cast<int>(r), ") on ", dev_.info.name);
    vkResetFences(dev_.device, 1, &f.fence);
    f.pending = false;
    if (!f.stamped) return;
    // Each dispatch is charged the time from the end of the work before it (the previous
    // dispatch, or the start of the command buffer) to its own end: its barrier and any copy
    // recorded between count as its own.
    const auto n = static_cast<std::uint32_t>(f.timed.size() + 1);
    std::vector<std::uint64_t> t(n);
    vkGetQueryPoolResults(dev_.device, queries_, static_cast<std::uint32_t>(i) * (kBatch + 1), n,
                          n * sizeof(std::uint64_t), t.data(), sizeof(std::uint64_t),
                          VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT);
    for (std::uint32_t k = 1; k < n; ++k) {
        KernelTotal& e = profile_[*f.timed[k - 1]];
        ++e.dispatches;
        e.ns += static_cast<double>(t[k] - t[k - 1]) * dev_.info.timestamp_period;
    }
    f.stamped = false;
    f.timed.clear();
}

void Recorder::begin_frame() {
    Frame& f = frames_[frame_];
    if (f.pending) {
        retire(frame_);
        ++stats_.waits;
    }
    vkResetCommandBuffer(f.cmd, 0);
    VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    vkBeginCommandBuffer(f.cmd, &bi);
    if (profiling_) {
        // At most kBatch dispatches a command buffer (dispatch flushes at that count), each
        // followed by a timestamp, after the one that marks the start.
        const auto base = static_cast<std::uint32_t>(frame_) * (kBatch + 1);
        vkCmdResetQueryPool(f.cmd, queries_, base, kBatch + 1);
        vkCmdWriteTimestamp(f.cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries_, base);
        f.stamped = true;
    }
    recording_ = true;
    recorded_ = 0;
    barrier();  // orders this batch after everything submitted before
}

void Recorder::barrier() {
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

void Recorder::track(std::span<const Binding> buffers) {
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

void Recorder::dispatch(const Pipeline& p, std::span<const Binding> buffers,
                       std::span<const std::int32_t> params, std::uint64_t groups,
                       std::span<const std::uint32_t> push) {
    std::lock_guard lock(mu_);
    if (groups == 0) return;
    EMBER_CHECK(buffers.size() == p.bindings, Generic, "vulkan: dispatch with ", buffers.size(),
                " buffers for a pipeline of ", p.bindings);
    const VkDeviceSize pbytes = std::max<VkDeviceSize>(params.size_bytes(), 4);
    HostRing* ring = &params_;
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
        ++cap_->dispatches;
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
    const std::uint64_t maxx = dev_.info.max_groups[0];
    const std::uint32_t gx = static_cast<std::uint32_t>(std::min<std::uint64_t>(groups, maxx));
    const std::uint64_t gy = (groups + gx - 1) / gx;
    EMBER_CHECK(gy <= dev_.info.max_groups[1], Argument, "vulkan: ", groups,
                " workgroups exceed the device's dispatch limits");
    vkCmdDispatch(c, gx, static_cast<std::uint32_t>(gy), 1);
    if (Frame& f = frames_[frame_]; !cap_ && f.stamped) {
        f.timed.push_back(&p.name);
        vkCmdWriteTimestamp(c, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries_,
                            static_cast<std::uint32_t>(frame_ * (kBatch + 1) + f.timed.size()));
    }
    ++stats_.dispatches;
    if (!cap_ && ++recorded_ >= kBatch) flush();
}

void Recorder::upload(const void* src, std::size_t bytes, const Binding& dst) {
    std::lock_guard lock(mu_);
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

void Recorder::download(const Binding& src, void* dst, std::size_t bytes) {
    std::lock_guard lock(mu_);
    EMBER_CHECK(!cap_, Device, "vulkan::capture: a read of device memory inside a captured step");
    auto* to = static_cast<std::byte*>(dst);
    std::size_t done = 0;
    while (done < bytes) {
        const std::size_t n = std::min<std::size_t>(bytes - done, staging_.size / 2);
        const VkDeviceSize at = ring_alloc(staging_, n, 16);
        VkCommandBuffer c = cmd();
        const Binding part{src.buffer, src.offset + done, n, false};
        track(std::span(&part, 1));
        copy_to(c, part, staging_.buffer, at);
        host_read_barrier(c);
        wait_idle();
        std::memcpy(to + done, staging_.mapped + at, n);
        done += n;
    }
}

void Recorder::download_many(std::span<const Binding> srcs, std::span<void* const> dsts) {
    std::lock_guard lock(mu_);
    EMBER_CHECK(!cap_, Device, "vulkan::capture: a read of device memory inside a captured step");
    const VkDeviceSize half = staging_.size / 2;
    std::size_t i = 0;
    while (i < srcs.size()) {
        if (srcs[i].range > half) {  // too big to share the ring: in parts, as download does
            download(srcs[i], dsts[i], srcs[i].range);
            ++i;
            continue;
        }
        // A batch of ranges that fits the ring from where it stands (wait first, resetting the
        // ring, when it does not): ring_alloc must not wrap inside a batch, since a wrap would
        // hand out staging space that an earlier copy of the batch has yet to be read from.
        std::size_t end = i;
        VkDeviceSize need = 0;
        while (end < srcs.size() && srcs[end].range <= half &&
               need + (srcs[end].range + 15) / 16 * 16 <= half) {
            need += (srcs[end].range + 15) / 16 * 16;
            ++end;
        }
        if ((staging_.top + 15) / 16 * 16 + need > staging_.size) wait_idle();
        std::vector<VkDeviceSize> at(end - i);
        VkCommandBuffer c = cmd();
        for (std::size_t j = i; j < end; ++j) {
            at[j - i] = ring_alloc(staging_, srcs[j].range, 16);
            const Binding part{srcs[j].buffer, srcs[j].offset, srcs[j].range, false};
            track(std::span(&part, 1));
            copy_to(c, part, staging_.buffer, at[j - i]);
        }
        host_read_barrier(c);
        // wait_idle resets the ring's top, not its contents: the copies stay readable.
        wait_idle();
        for (std::size_t j = i; j < end; ++j)
            std::memcpy(dsts[j], staging_.mapped + at[j - i], srcs[j].range);
        i = end;
    }
}

void Recorder::serialize() {
    std::lock_guard lock(mu_);
    cmd();  // a command buffer to record into
    barrier();
}

void Recorder::flush() {
    std::lock_guard lock(mu_);
    if (!recording_ || cap_) return;  // a capture's commands are submitted by its replays
    submit(VK_NULL_HANDLE);
}

void Recorder::submit(VkCommandBuffer extra) {
    if (!recording_) begin_frame();
    Frame& f = frames_[frame_];
    vkEndCommandBuffer(f.cmd);
    VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
    // A captured step goes in the batch of the frame that wrote its parameters: the frame's
    // fence then covers it, and wait_idle waits for it.
    const VkCommandBuffer both[] = {f.cmd, extra};
    si.commandBufferCount = extra ? 2 : 1;
    si.pCommandBuffers = both;
    const VkResult r = vkQueueSubmit(dev_.queue, 1, &si, f.fence);
    EMBER_CHECK(r == VK_SUCCESS, Device, "vulkan: vkQueueSubmit failed (", static_cast<int>(r),
                ") on ", dev_.info.name);
    f.pending = true;
    recording_ = false;
    ++stats_.submits;
    frame_ = (frame_ + 1) % frames_.size();
}

void Recorder::wait_idle() {
    std::lock_guard lock(mu_);
    EMBER_CHECK(!cap_, Device, "vulkan::capture: a wait for the device inside a captured step");
    flush();
    for (std::size_t i = 0; i < frames_.size(); ++i) retire(i);
    ++stats_.waits;
    params_.top = 0;
    staging_.top = 0;
    pipelines_.save();
}

void Recorder::free_ring(HostRing& r) {
    if (r.buffer) vkDestroyBuffer(dev_.device, r.buffer, nullptr);
    if (r.memory) {
        vkUnmapMemory(dev_.device, r.memory);
        vkFreeMemory(dev_.device, r.memory, nullptr);
    }
    r = HostRing{};
}

void Recorder::begin_capture() {
    std::unique_lock lock(mu_);
    EMBER_CHECK(!cap_, Device, "vulkan::capture: a step is already being captured");
    flush();  // work recorded before belongs before the step
    auto c = std::make_unique<CapturedCommands>();
    VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    ai.commandPool = cmd_pool_;
    ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    ai.commandBufferCount = 1;
    EMBER_CHECK(vkAllocateCommandBuffers(dev_.device, &ai, &c->cmd) == VK_SUCCESS, Device,
                "vulkan::capture: vkAllocateCommandBuffers failed on ", dev_.info.name);
    VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    // Replays are queued while earlier ones may still be pending.
    bi.flags = VK_COMMAND_BUFFER_USAGE_SIMULTANEOUS_USE_BIT;
    vkBeginCommandBuffer(c->cmd, &bi);
    cap_ = std::move(c);
    barrier();  // orders each run after everything submitted before it
    // Kept until the capture ends: other threads' work on the device waits (it would land
    // in the step).
    capture_hold_ = std::move(lock);
}

CapturedCommands Recorder::end_capture() {
    std::lock_guard lock(mu_);
    EMBER_CHECK(cap_, Generic, "vulkan::capture: no step is being captured");
    vkEndCommandBuffer(cap_->cmd);
    CapturedCommands out = std::move(*cap_);
    cap_.reset();
    reads_.clear();
    writes_.clear();
    if (capture_hold_.owns_lock()) capture_hold_.unlock();
    return out;
}

void Recorder::abort_capture() {
    std::lock_guard lock(mu_);
    if (!cap_) return;
    CapturedCommands c = end_capture();
    vkFreeCommandBuffers(dev_.device, cmd_pool_, 1, &c.cmd);  // never submitted
    for (HostRing& r : c.chunks) free_ring(r);
}

void Recorder::submit_captured(const CapturedCommands& c, std::span<const ParamPatch> patches) {
    std::lock_guard lock(mu_);
    VkCommandBuffer f = cmd();  // a frame: its leading barrier orders the writes after the
                                // earlier runs' reads of the same parameters
    for (const ParamPatch& p : patches)
        vkCmdUpdateBuffer(f, c.chunks[p.chunk].buffer, p.offset, p.words.size() * 4,
                          p.words.data());
    submit(c.cmd);  // the captured buffer begins with a barrier: it sees the writes
}

void Recorder::free_captured(CapturedCommands& c) {
    std::lock_guard lock(mu_);
    if (!c.cmd) return;
    wait_idle();
    vkFreeCommandBuffers(dev_.device, cmd_pool_, 1, &c.cmd);
    c.cmd = VK_NULL_HANDLE;
    for (HostRing& r : c.chunks) free_ring(r);
    c.chunks.clear();
}

bool Recorder::capturing() const {
    std::lock_guard lock(mu_);
    return cap_ != nullptr;
}

std::pair<std::size_t, VkDeviceSize> Recorder::last_params() const {
    std::lock_guard lock(mu_);
    return {last_chunk_, last_at_};
}

ember::vulkan::ExecutionStats Recorder::stats() const {
    ember::vulkan::ExecutionStats s;
    s.dispatches = stats_.dispatches.load(std::memory_order_relaxed);
    s.barriers = stats_.barriers.load(std::memory_order_relaxed);
    s.submits = stats_.submits.load(std::memory_order_relaxed);
    s.waits = stats_.waits.load(std::memory_order_relaxed);
    return s;
}

void Recorder::set_profiling(bool on) {
    std::lock_guard lock(mu_);
    if (on && !queries_) {
        EMBER_CHECK(dev_.info.timestamp_period > 0, Device, "vulkan: device ", dev_.info.name,
                    " has no timestamps on its compute queue: it cannot be profiled");
        VkQueryPoolCreateInfo qi{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
        qi.queryType = VK_QUERY_TYPE_TIMESTAMP;
        qi.queryCount = static_cast<std::uint32_t>(kFrames * (kBatch + 1));
        EMBER_CHECK(vkCreateQueryPool(dev_.device, &qi, nullptr, &queries_) == VK_SUCCESS, Device,
                    "vulkan: cannot create a timestamp query pool on ", dev_.info.name);
    }
    // The command buffer being recorded keeps its state: timed from the next one on.
    profiling_ = on;
}

std::vector<ember::vulkan::KernelTime> Recorder::kernel_times(bool reset) {
    std::lock_guard lock(mu_);
    if (!cap_) wait_idle();
    std::vector<ember::vulkan::KernelTime> out;
    for (const auto& [name, e] : profile_) out.push_back({name, e.dispatches, e.ns / 1000.0});
    std::sort(out.begin(), out.end(),
              [](const auto& a, const auto& b) { return a.microseconds > b.microseconds; });
    if (reset) profile_.clear();
    return out;
}

std::string Recorder::profile_report() {
    const auto times = kernel_times(false);
    double total = 0;
    for (const auto& k : times) total += k.microseconds;
    std::string out = "ember vulkan profile (" + dev_.info.name + "): kernel, dispatches, " +
                      "total us, us each, share\n";
    char line[256];
    for (const auto& k : times) {
        std::snprintf(line, sizeof line, "  %-44s %9zu %12.1f %9.2f %6.1f %%\n", k.kernel.c_str(),
                      k.dispatches, k.microseconds,
                      k.microseconds / static_cast<double>(std::max<std::size_t>(k.dispatches, 1)),
                      total > 0 ? 100.0 * k.microseconds / total : 0.0);
        out += line;
    }
    std::snprintf(line, sizeof line, "  %-44s %9s %12.1f\n", "total", "", total);
    return out + line;
}

}  // namespace ember::detail::vk
