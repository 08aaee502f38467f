#pragma once
// The device memory pool: large VkDeviceMemory blocks, each bound to one VkBuffer, are
// sub-allocated in size classes; freed allocations go to per-class free lists and are reused
// by later allocations in stream order (like CUDA's caching allocator): the recorder's barrier
// rule orders the new writer after the old readers, so no host wait is needed to reuse memory.
#include <volk.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "ember/backend/detail/vulkan_tensor.hpp"
#include "ember/backend/vulkan.hpp"

namespace ember::detail::vk {

class Pool;

/// A sub-allocation: `size` bytes at `offset` in `buffer` (the block's VkBuffer).
struct Buffer {
    Pool* pool = nullptr;
    VkBuffer buffer = VK_NULL_HANDLE;
    VkDeviceSize offset = 0;  ///< within the block's buffer (256-byte aligned)
    VkDeviceSize size = 0;    ///< the size class (what a binding may cover)
    std::uint64_t block = 0;  ///< the owning block's id
    /// The range of the int64 values uploaded into it (lo > hi: unknown): index checks then
    /// need no readback (a captured step may not read back). Cleared when a kernel writes it.
    std::int64_t lo = 1, hi = 0;
    Buffer() = default;
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
    ~Buffer();
};

/// Alignment of every sub-allocation: at least any device's minStorageBufferOffsetAlignment
/// (the Vulkan spec caps that limit at 256).
inline constexpr VkDeviceSize kAllocAlign = 256;

/// The private pool of a step being captured (graph.cpp): allocations the capturing thread
/// makes are kept here besides in their tensors, so that nothing else is handed them while the
/// captured step lives; one whose tensors are all gone (only `kept` holds it) is reused by
/// later allocations of the capture.
struct PoolCapture {
    std::thread::id thread;
    std::unordered_map<VkDeviceSize, std::vector<std::shared_ptr<Buffer>>> kept;  ///< by class
    std::size_t bytes = 0;                                                        ///< bytes kept
    std::size_t replaced = 0;        ///< allocations from before the capture freed during it
    std::size_t replaced_bytes = 0;  ///< their bytes
};

class Pool {
  public:
    /// `max_range`: maxStorageBufferRange (a binding covers a whole allocation, so no
    /// allocation may exceed it); `max_alloc`: maxMemoryAllocationSize.
    Pool(VkDevice device, VkPhysicalDevice phys, VkDeviceSize max_range, VkDeviceSize max_alloc,
         std::uint32_t max_alloc_count);
    Pool(const Pool&) = delete;
    Pool& operator=(const Pool&) = delete;

    /// An allocation of at least `bytes` bytes (`op` names the caller in errors).
    std::shared_ptr<Buffer> allocate(std::size_t bytes, const char* op);
    /// Returns an allocation to its free list (called by ~Buffer).
    void release(const Buffer& b);
    /// Frees blocks with no live allocation (the caller has waited for the device).
    void empty_cache();
    /// Counters.
    ember::vulkan::MemoryStats stats() const;
    /// Routes the allocations of `c`'s thread through `c` (null: stops).
    void set_capture(PoolCapture* c) {
        std::lock_guard lock(mu_);
        capture_ = c;
    }
    /// The size class `bytes` is rounded up to.
    static VkDeviceSize size_class(std::size_t bytes);

  private:
    struct Block {
        VkDeviceMemory memory = VK_NULL_HANDLE;
        VkBuffer buffer = VK_NULL_HANDLE;
        VkDeviceSize size = 0, top = 0;
        std::size_t live = 0;
    };
    struct Slot {
        std::uint64_t block;
        VkDeviceSize offset;
    };
    std::uint64_t new_block(VkDeviceSize size, const char* op);
    void destroy_block(Block& b);

    VkDevice device_;
    VkDeviceSize max_range_, max_alloc_;
    std::uint32_t max_alloc_count_;
    std::uint32_t memory_type_ = 0;
    VkDeviceSize block_size_ = 0;
    mutable std::mutex mu_;
    std::map<std::uint64_t, Block> blocks_;
    std::unordered_map<VkDeviceSize, std::vector<Slot>> free_;
    std::uint64_t next_block_ = 1;
    ember::vulkan::MemoryStats stats_;
    PoolCapture* capture_ = nullptr;
};

}  // namespace ember::detail::vk
