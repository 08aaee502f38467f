#pragma once
// The Vulkan runtime of one device: instance and device creation through volk, the memory
// pool, pipelines (embedded SPIR-V, specialization constants, an on-disk pipeline cache) and
// the command recorder.
//
// Execution model: dispatches are recorded into the current command buffer and submitted in
// batches; a global memory barrier is recorded before a dispatch only when it reads a range
// written, or writes a range read or written, since the last barrier. Each command buffer
// starts with a barrier, which orders it after everything submitted before on the one queue.
// The host waits only in download() (data reads) and wait_idle() (sync, ring wrap-around).
// Small kernel parameters (shapes, strides, scalars) go through a host-visible ring bound as
// binding 0; uploads and readbacks go through a host-visible staging ring.
#include <volk.h>

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "pool.hpp"

namespace ember::detail::vk {

/// What a kernel binds: a range of a device buffer, read or written.
struct Binding {
    VkBuffer buffer = VK_NULL_HANDLE;
    VkDeviceSize offset = 0;
    VkDeviceSize range = 0;
    bool write = false;
};

/// A compute pipeline and its layout (binding 0 = parameters, 1..n = data buffers).
struct Pipeline {
    VkPipeline pipeline = VK_NULL_HANDLE;
    VkPipelineLayout layout = VK_NULL_HANDLE;
    std::uint32_t bindings = 0;    ///< data buffers (binding 0 excluded)
    std::uint32_t local_size = 0;  ///< threads per workgroup (specialization constant 0)
    std::uint32_t push_bytes = 0;  ///< push-constant range (run-time kernels only)
};

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
};

/// Words of a captured step's parameters rewritten before a resubmission (random keys, the
/// optimizer's scalars).
struct ParamPatch {
    std::size_t chunk = 0;
    VkDeviceSize offset = 0;  ///< bytes, a multiple of 4
    std::vector<std::uint32_t> words;
};

class Context {
  public:
    /// The context of physical device `index` (created on first use; throws DeviceError when
    /// no loader, no device, or the index is out of range).
    static Context& get(std::uint32_t index);
    /// Number of devices with a compute queue (0 without a loader).
    static std::size_t device_count();

    Context(const Context&) = delete;
    Context& operator=(const Context&) = delete;

    const DeviceInfo& info() const { return info_; }
    Pool& pool() { return *pool_; }
    std::uint32_t index() const { return index_; }

    /// The pipeline of shader `name` with specialization constants 1.. = `spec` and
    /// `local_size` threads (specialization constant 0), over `bindings` data buffers.
    const Pipeline& pipeline(const char* name, std::span<const std::int32_t> spec,
                             std::uint32_t bindings, std::uint32_t local_size);

    /// The pipeline of run-time SPIR-V `spirv` (fused kernels), kept under `key`; its layout
    /// adds a `push_bytes` push-constant range to the usual bindings.
    const Pipeline& pipeline_spirv(const std::string& key, std::span<const std::uint32_t> spirv,
                                   std::uint32_t bindings, std::uint32_t local_size,
                                   std::uint32_t push_bytes);
    /// Waits for the device, then destroys the pipelines whose key starts with `prefix`.
    void drop_pipelines(const std::string& prefix);

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
    /// Submits what is recorded (no wait).
    void flush();
    /// Submits and waits until the device is idle.
    void wait_idle();
    /// Counters.
    ember::vulkan::ExecutionStats exec_stats() const;

    // ---- captured steps (graph.cpp; the caller holds `mu` throughout) ----
    /// Submits what is recorded, then records into a command buffer of its own, which is not
    /// submitted; kernel parameters go to chunks it owns.
    void begin_capture();
    /// Ends the recording begun by begin_capture and hands its command buffer over.
    CapturedCommands end_capture();
    /// Ends and drops the recording begun by begin_capture (nothing of it ran).
    void abort_capture();
    /// Whether begin_capture's recording is open.
    bool capturing() const { return cap_ != nullptr; }
    /// Where the last dispatch's parameters went while capturing: {chunk, byte offset}.
    std::pair<std::size_t, VkDeviceSize> last_params() const { return {last_chunk_, last_at_}; }
    /// Queues `c` again after writing `patches` into its parameter chunks (one submission).
    void submit_captured(const CapturedCommands& c, std::span<const ParamPatch> patches);
    /// Waits for the device, then frees `c`'s command buffer and chunks.
    void free_captured(CapturedCommands& c);
    /// The directory of the on-disk caches (pipeline cache, autotune results).
    const std::string& cache_dir() const { return cache_dir_; }
    /// A file name unique to this device and driver, for on-disk caches.
    std::string cache_file(const std::string& what) const;

    /// Serialises recording: ops from several threads may share a device.
    std::recursive_mutex mu;

  private:
    explicit Context(std::uint32_t index);
    struct Frame {
        VkCommandBuffer cmd = VK_NULL_HANDLE;
        VkFence fence = VK_NULL_HANDLE;
        bool pending = false;  ///< submitted, fence not yet waited
    };
    struct Range {
        VkBuffer buffer;
        VkDeviceSize begin, end;
    };
    using Ring = HostRing;
    VkCommandBuffer cmd();
    void begin_frame();
    void track(std::span<const Binding> buffers);
    void barrier();
    VkDeviceSize ring_alloc(Ring& r, VkDeviceSize bytes, VkDeviceSize align);
    void make_ring(Ring& r, VkDeviceSize size);
    void free_ring(Ring& r);
    VkCommandBuffer target() const { return cap_ ? cap_->cmd : frames_[frame_].cmd; }
    void submit(VkCommandBuffer extra);
    void save_pipeline_cache();
    /// Prints the driver's statistics of `pipeline` (EMBER_VULKAN_PIPELINE_STATS=1).
    void print_pipeline_stats(const std::string& key, VkPipeline pipeline) const;
    VkDescriptorSetLayout set_layout(std::uint32_t bindings);

    std::uint32_t index_;
    DeviceInfo info_;
    VkInstance instance_ = VK_NULL_HANDLE;
    VkPhysicalDevice phys_ = VK_NULL_HANDLE;
    VkDevice device_ = VK_NULL_HANDLE;
    VkQueue queue_ = VK_NULL_HANDLE;
    std::uint32_t family_ = 0;
    std::unique_ptr<Pool> pool_;
    VkCommandPool cmd_pool_ = VK_NULL_HANDLE;
    std::vector<Frame> frames_;
    std::size_t frame_ = 0;
    bool recording_ = false;
    std::size_t recorded_ = 0;  ///< dispatches in the current command buffer
    std::vector<Range> reads_, writes_;
    std::unique_ptr<CapturedCommands> cap_;  ///< the recording of begin_capture
    std::size_t last_chunk_ = 0;
    VkDeviceSize last_at_ = 0;
    Ring params_, staging_;
    VkPipelineCache cache_ = VK_NULL_HANDLE;
    bool cache_dirty_ = false;
    bool pipeline_stats_ = false;  // EMBER_VULKAN_PIPELINE_STATS=1 and the extension is there
    std::string cache_dir_;
    std::map<std::uint32_t, VkDescriptorSetLayout> set_layouts_;
    std::map<std::uint32_t, VkPipelineLayout> layouts_;
    std::map<std::pair<std::uint32_t, std::uint32_t>, VkPipelineLayout> push_layouts_;
    std::map<std::string, VkShaderModule> modules_;
    std::map<std::string, std::unique_ptr<Pipeline>> pipelines_;
    ember::vulkan::ExecutionStats stats_;
    friend struct ContextExit;
};

}  // namespace ember::detail::vk
