#pragma once
// The command recorder of one device: dispatches and copies recorded into command buffers
// and submitted in batches on its one queue, the barriers between dependent ones, the
// host-visible rings for kernel parameters and transfers, and captured steps.
//
// Execution model: dispatches are recorded into the current command buffer and submitted in
// batches; a global memory barrier is recorded before a dispatch only when it reads a range
// written, or writes a range read or written, since the last barrier. Each command buffer
// starts with a barrier, which orders it after everything submitted before on the one queue.
// The host waits only in download() (data reads) and wait_idle() (sync, ring wrap-around).
// Small kernel parameters (shapes, strides, scalars) go through a host-visible ring bound as
// binding 0; uploads and readbacks go through a host-visible staging ring.
//
// Lock discipline: every public member takes the recorder's own (recursive) mutex, so ops on
// several threads may share a device without locking anything themselves. A capture holds
// that mutex from begin_capture to end_capture/abort_capture: other threads' work on the
// device waits for the capture to end (it would otherwise land in the step). Under the mutex
// the recorder calls only into Pipelines (save at wait_idle), whose lock is a leaf.
#include <volk.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "ember/backend/vulkan.hpp"
#include "device_select.hpp"
#include "pipelines.hpp"

namespace ember::detail::vk {

/// What a kernel binds: a range of a device buffer, read or written.
struct Binding {
    VkBuffer buffer = VK_NULL_HANDLE;
    VkDeviceSize offset = 0;
    VkDeviceSize range = 0;
    bool write = false;
};

/// Host-visible memory a kernel's parameters are written to: the context's ring, or a chunk
/// that a captured step owns (its parameters must stay where the command buffer reads them).
struct HostRing {
    VkBuffer buffer = VK_NULL_HANDLE;
    VkDeviceMemory memory = VK_NULL_HANDLE;
    std::byte* mapped = nullptr;
    VkDeviceSize size = 0, top = 0;
};

/// A step recorded once for resubmission (graph.cpp): its command buffer and the chunks that
/// hold its kernels' parameters.
struct CapturedCommands {
    VkCommandBuffer cmd = VK_NULL_HANDLE;
    std::vector<HostRing> chunks;
    std::size_t dispatches = 0;  ///< recorded into `cmd`
};

/// Words of a captured step's parameters rewritten before a resubmission (random keys, the
/// optimizer's scalars).
struct ParamPatch {
    std::size_t chunk = 0;
    VkDeviceSize offset = 0;  ///< bytes, a multiple of 4
    std::vector<std::uint32_t> words;
};

class Recorder {
  public:
    /// The recorder of `dev` (which outlives it); the pipeline cache of `pipelines` is saved
    /// at each wait_idle.
    Recorder(const OpenedDevice& dev, Pipelines& pipelines);
    Recorder(const Recorder&) = delete;
    Recorder& operator=(const Recorder&) = delete;

    /// Records `groups` workgroups of `p` (split over a 2-d grid past maxComputeWorkGroupCount;
    /// shaders linearise the group id) with `params` (int32 words) at binding 0 and `push`
    /// as push constants (pipelines with a push-constant range).
    void dispatch(const Pipeline& p, std::span<const Binding> buffers,
                  std::span<const std::int32_t> params, std::uint64_t groups,
                  std::span<const std::uint32_t> push = {});
    /// Copies `bytes` from host memory into a device range (through the staging ring).
    void upload(const void* src, std::size_t bytes, const Binding& dst);
    /// Copies `bytes` of a device range into host memory; waits for the device.
    void download(const Binding& src, void* dst, std::size_t bytes);
    /// Copies each device range `srcs[i]` (`srcs[i].range` bytes) to `dsts[i]` with one wait
    /// for the device: every copy goes into the staging ring before the wait (more waits only
    /// when the ranges together outgrow half the ring, or one of them does).
    void download_many(std::span<const Binding> srcs, std::span<void* const> dsts);
    /// Records a barrier now: work recorded after it waits for all work before (the
    /// matmul tuner's calls, timed as the dependent ops of a real step run).
    void serialize();
    /// Submits what is recorded (no wait).
    void flush();
    /// Submits and waits until the device is idle, then saves the pipeline cache.
    void wait_idle();
    /// Waits until the device is idle, then runs `f` before anything more is recorded: for
    /// freeing memory that queued work may have used.
    template <class F>
    void when_idle(F&& f) {
        std::lock_guard lock(mu_);
        wait_idle();
        f();
    }
    /// Counters (read without the lock: they are atomics).
    ember::vulkan::ExecutionStats stats() const;

    /// Submits what is recorded, then records into a command buffer of its own, which is not
    /// submitted; kernel parameters go to chunks it owns. This thread keeps the recorder until
    /// end_capture or abort_capture.
    void begin_capture();
    /// Ends the recording begun by begin_capture and hands its command buffer over.
    CapturedCommands end_capture();
    /// Ends and drops the recording begun by begin_capture (nothing of it ran).
    void abort_capture();
    /// Whether begin_capture's recording is open.
    bool capturing() const;
    /// Where the last dispatch's parameters went while capturing: {chunk, byte offset}.
    std::pair<std::size_t, VkDeviceSize> last_params() const;
    /// Queues `c` again after writing `patches` into its parameter chunks (one submission).
    void submit_captured(const CapturedCommands& c, std::span<const ParamPatch> patches);
    /// Waits for the device, then frees `c`'s command buffer and chunks.
    void free_captured(CapturedCommands& c);

    /// Times each dispatch recorded from now on (true) or stops (false): a timestamp after
    /// every dispatch of a command buffer, read when its fence is waited. Throws DeviceError
    /// where the queue has no timestamps.
    void set_profiling(bool on);
    /// Whether dispatches are being timed (set_profiling).
    bool profiling() const { return profiling_; }
    /// The GPU time of each kernel timed so far, most first, after waiting for the device; the
    /// table starts again empty with `reset`.
    std::vector<ember::vulkan::KernelTime> kernel_times(bool reset);
    /// The table of kernel_times as text (EMBER_VULKAN_PROFILE=1 prints it at exit).
    std::string profile_report();

  private:
    struct Frame {
        VkCommandBuffer cmd = VK_NULL_HANDLE;
        VkFence fence = VK_NULL_HANDLE;
        bool pending = false;  ///< submitted, fence not yet waited
        /// Profiling: the command buffer starts with a timestamp, and `timed` names the
        /// dispatches followed by one, in order.
        bool stamped = false;
        std::vector<const std::string*> timed;
    };
    /// Per-kernel totals of the profiler: dispatches and nanoseconds.
    struct KernelTotal {
        std::size_t dispatches = 0;
        double ns = 0;
    };
    struct Range {
        VkBuffer buffer;
        VkDeviceSize begin, end;
    };
    struct Counters {
        std::atomic<std::size_t> dispatches{0}, barriers{0}, submits{0}, waits{0};
    };
    VkCommandBuffer cmd();
    void begin_frame();
    void track(std::span<const Binding> buffers);
    void barrier();
    VkDeviceSize ring_alloc(HostRing& r, VkDeviceSize bytes, VkDeviceSize align);
    void make_ring(HostRing& r, VkDeviceSize size);
    void free_ring(HostRing& r);
    VkCommandBuffer target() const { return cap_ ? cap_->cmd : frames_[frame_].cmd; }
    void submit(VkCommandBuffer extra);
    /// Waits for frame `i`'s fence (when pending) and adds its timestamps to the profile.
    void retire(std::size_t i);

    const OpenedDevice& dev_;
    Pipelines& pipelines_;
    mutable std::recursive_mutex mu_;
    std::unique_lock<std::recursive_mutex> capture_hold_;  ///< begin_capture's hold on mu_
    VkCommandPool cmd_pool_ = VK_NULL_HANDLE;
    std::vector<Frame> frames_;
    std::size_t frame_ = 0;
    bool recording_ = false;
    std::size_t recorded_ = 0;  ///< dispatches in the current command buffer
    std::vector<Range> reads_, writes_;
    std::unique_ptr<CapturedCommands> cap_;  ///< the recording of begin_capture
    std::size_t last_chunk_ = 0;
    VkDeviceSize last_at_ = 0;
    HostRing params_, staging_;
    Counters stats_;
    bool profiling_ = false;
    VkQueryPool queries_ = VK_NULL_HANDLE;  ///< kFrames × (kBatch + 1) timestamps
    std::map<std::string, KernelTotal> profile_;
};

}  // namespace ember::detail::vk
