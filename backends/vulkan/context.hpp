#pragma once
// The Vulkan runtime of one device, as the kernels see it: one object per device that
// composes four units, each with its own lock discipline and none locked by callers —
//   device_select.hpp  the instance, the device and what it can do (immutable once made);
//   pool.hpp           device memory (its own mutex);
//   pipelines.hpp      shader modules, layouts, pipelines, the on-disk pipeline cache (a leaf
//                      lock: it calls nothing else);
//   recorder.hpp       command buffers, barriers, the rings and captured steps (a recursive
//                      mutex that a capture holds from begin to end).
// Lock order, where one is taken inside another: recorder → pipelines, recorder → pool.
// Kernels call the members below from any thread without holding anything.
#include <volk.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>

#include "device_select.hpp"
#include "pipelines.hpp"
#include "pool.hpp"
#include "recorder.hpp"

namespace ember::detail::vk {

class Context {
  public:
    /// The context of physical device `index` (created on first use; throws DeviceError when
    /// no loader, no device, or the index is out of range).
    static Context& get(std::uint32_t index);
    /// Number of devices with a compute queue (0 without a loader).
    static std::size_t device_count();

    Context(const Context&) = delete;
    Context& operator=(const Context&) = delete;

    const DeviceInfo& info() const { return dev_.info; }
    Pool& pool() { return *pool_; }
    std::uint32_t index() const { return index_; }

    /// The pipeline of shader `name` with specialization constants 1.. = `spec` and
    /// `local_size` threads (specialization constant 0), over `bindings` data buffers.
    const Pipeline& pipeline(const char* name, std::span<const std::int32_t> spec,
                             std::uint32_t bindings, std::uint32_t local_size) {
        return pipelines_->get(name, spec, bindings, local_size);
    }
    /// The pipeline of run-time SPIR-V `spirv` (fused kernels), kept under `key`; its layout
    /// adds a `push_bytes` push-constant range to the usual bindings.
    const Pipeline& pipeline_spirv(const std::string& key, std::span<const std::uint32_t> spirv,
                                   std::uint32_t bindings, std::uint32_t local_size,
                                   std::uint32_t push_bytes) {
        return pipelines_->get_spirv(key, spirv, bindings, local_size, push_bytes);
    }
    /// Records `groups` workgroups of `p` (Recorder::dispatch).
    void dispatch(const Pipeline& p, std::span<const Binding> buffers,
                  std::span<const std::int32_t> params, std::uint64_t groups,
                  std::span<const std::uint32_t> push = {}) {
        recorder_->dispatch(p, buffers, params, groups, push);
    }
    /// Copies `bytes` from host memory into a device range (through the staging ring).
    void upload(const void* src, std::size_t bytes, const Binding& dst) {
        recorder_->upload(src, bytes, dst);
    }
    /// Copies `bytes` of a device range into host memory; waits for the device.
    void download(const Binding& src, void* dst, std::size_t bytes) {
        recorder_->download(src, dst, bytes);
    }
    /// Copies several device ranges into host memory with one wait (Recorder::download_many).
    void download_many(std::span<const Binding> srcs, std::span<void* const> dsts) {
        recorder_->download_many(srcs, dsts);
    }
    /// Submits what is recorded (no wait).
    void flush() { recorder_->flush(); }
    /// Submits and waits until the device is idle.
    void wait_idle() { recorder_->wait_idle(); }
    /// Waits for the device, then frees the pool's cached blocks before more is recorded.
    void empty_cache() {
        recorder_->when_idle([this] { pool_->empty_cache(); });
    }
    /// Counters.
    ember::vulkan::ExecutionStats exec_stats() const { return recorder_->stats(); }

    /// The recorder, for captured steps (graph.cpp: begin/end/abort_capture, last_params,
    /// submit_captured, free_captured).
    Recorder& recorder() { return *recorder_; }

    /// The directory of the on-disk caches (pipeline cache, autotune results).
    const std::string& cache_dir() const { return cache_dir_; }
    /// A file name unique to this device and driver, for on-disk caches.
    std::string cache_file(const std::string& what) const;

  private:
    explicit Context(std::uint32_t index);

    std::uint32_t index_;
    OpenedDevice dev_;
    std::string cache_dir_;
    std::unique_ptr<Pool> pool_;
    std::unique_ptr<Pipelines> pipelines_;
    std::unique_ptr<Recorder> recorder_;
    friend struct ContextExit;
};

}  // namespace ember::detail::vk
