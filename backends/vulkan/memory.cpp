// The device memory pool (pool.hpp): size classes, per-class free lists, bump allocation in
// large blocks, dedicated blocks for large tensors, limits checked with clear errors.
#include <algorithm>
#include <bit>

#include "ember/tensor/error.hpp"
#include "pool.hpp"

// Vulkan structs are written `VkFoo info{VK_STRUCTURE_TYPE_FOO}`: the members not named are
// zero (pNext = nullptr, flags = 0), as Vulkan code means them to be; -Wextra would flag each.
#if defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#endif

namespace ember::detail::vk {

namespace {
// Blocks of 64 MiB: few enough device allocations (drivers cap their count; NVIDIA at 4096)
// and small enough that a lavapipe CI run reserves little.
constexpr VkDeviceSize kBlockSize = VkDeviceSize{64} << 20;
// Allocations of a quarter block or more get a block of their own: packing them would waste
// up to that much at the end of each block.
constexpr VkDeviceSize kDedicatedFrom = kBlockSize / 4;
}  // namespace

Buffer::~Buffer() {
    if (pool) pool->release(*this);
}

Pool::Pool(VkDevice device, VkPhysicalDevice phys, VkDeviceSize max_range, VkDeviceSize max_alloc,
           std::uint32_t max_alloc_count)
    : device_(device),
      max_range_(max_range),
      max_alloc_(max_alloc),
      max_alloc_count_(max_alloc_count) {
    VkPhysicalDeviceMemoryProperties mp;
    vkGetPhysicalDeviceMemoryProperties(phys, &mp);
    // Device-local memory of the largest heap (on lavapipe and integrated GPUs it is also
    // host-visible; staging is used regardless, so one code path serves every device).
    VkDeviceSize best = 0;
    bool found = false;
    for (std::uint32_t i = 0; i < mp.memoryTypeCount; ++i) {
        const auto& t = mp.memoryTypes[i];
        if (!(t.propertyFlags & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT)) continue;
        const VkDeviceSize heap = mp.memoryHeaps[t.heapIndex].size;
        if (!found || heap > best) {
            best = heap;
            memory_type_ = i;
            found = true;
        }
    }
    EMBER_CHECK(found, Device, "vulkan: the device has no device-local memory type");
    block_size_ = std::min(kBlockSize, max_alloc_);
}

VkDeviceSize Pool::size_class(std::size_t bytes) {
    // 256-byte granularity up to 4 KiB, then four classes per power of two (at most 25%
    // rounding waste, few enough classes for reuse to find a match).
    const VkDeviceSize b = std::max<VkDeviceSize>(bytes, 1);
    if (b <= 4096) return (b + kAllocAlign - 1) / kAllocAlign * kAllocAlign;
    const VkDeviceSize p = std::bit_floor(b);
    const VkDeviceSize step = p / 4;
    return (b + step - 1) / step * step;
}

std::uint64_t Pool::new_block(VkDeviceSize size, const char* op) {
    EMBER_CHECK(blocks_.size() < max_alloc_count_, Device, op,
                ": the Vulkan device's maxMemoryAllocationCount (", max_alloc_count_,
                ") is reached");
    Block b;
    b.size = size;
    VkBufferCreateInfo bi{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
    bi.size = size;
    bi.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
               VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    bi.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
    EMBER_CHECK(vkCreateBuffer(device_, &bi, nullptr, &b.buffer) == VK_SUCCESS, Device, op,
                ": vkCreateBuffer of ", size, " bytes failed");
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(device_, b.buffer, &req);
    VkMemoryAllocateInfo ai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    ai.allocationSize = req.size;
    ai.memoryTypeIndex = memory_type_;
    const VkResult r = vkAllocateMemory(device_, &ai, nullptr, &b.memory);
    if (r != VK_SUCCESS) {
        vkDestroyBuffer(device_, b.buffer, nullptr);
        EMBER_FAIL(Device, op, ": out of Vulkan device memory allocating ", size, " bytes (",
                   stats_.bytes_reserved, " bytes reserved by the pool, ", stats_.bytes_in_use,
                   " in use; ember::vulkan::empty_cache() returns free blocks)");
    }
    vkBindBufferMemory(device_, b.buffer, b.memory, 0);
    const std::uint64_t id = next_block_++;
    blocks_.emplace(id, b);
    stats_.bytes_reserved += size;
    stats_.num_blocks = blocks_.size();
    return id;
}

std::shared_ptr<Buffer> Pool::allocate(std::size_t bytes, const char* op) {
    EMBER_CHECK(bytes <= max_range_, Argument, op, ": a tensor of ", bytes,
                " bytes exceeds the Vulkan device's maxStorageBufferRange (", max_range_,
                " bytes)");
    const VkDeviceSize cls =
        std::min<VkDeviceSize>(size_class(bytes), std::max<VkDeviceSize>(bytes, max_range_));
    EMBER_CHECK(cls <= max_alloc_, Argument, op, ": a tensor of ", bytes,
                " bytes exceeds the Vulkan device's maxMemoryAllocationSize (", max_alloc_,
                " bytes)");
    std::lock_guard lock(mu_);
    PoolCapture* cap =
        capture_ && capture_->thread == std::this_thread::get_id() ? capture_ : nullptr;
    if (cap) {
        for (const auto& b : cap->kept[cls])
            if (b.use_count() == 1) {  // its tensors are gone: the capture reuses it
                b->lo = 1;
                b->hi = 0;
                return b;
            }
    }
    auto out = std::make_shared<Buffer>();
    Slot slot{};
    bool have = false;
    if (auto it = free_.find(cls); it != free_.end() && !it->second.empty()) {
        slot = it->second.back();
        it->second.pop_back();
        have = true;
        ++stats_.num_reused;
    }
    if (!have && cls >= kDedicatedFrom) {
        slot = {new_block(cls, op), 0};
        blocks_[slot.block].top = cls;
        have = true;
    }
    if (!have) {
        for (auto& [id, b] : blocks_) {
            if (b.size == block_size_ && b.top + cls <= b.size) {
                slot = {id, b.top};
                b.top += cls;
                have = true;
                break;
            }
        }
    }
    if (!have) {
        const std::uint64_t id = new_block(block_size_, op);
        slot = {id, 0};
        blocks_[id].top = cls;
    }
    Block& b = blocks_[slot.block];
    ++b.live;
    out->pool = this;
    out->buffer = b.buffer;
    out->offset = slot.offset;
    out->size = cls;
    out->block = slot.block;
    stats_.bytes_in_use += cls;
    stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
    ++stats_.num_allocs;
    if (cap) {
        cap->kept[cls].push_back(out);
        cap->bytes += cls;
    }
    return out;
}

void Pool::release(const Buffer& buf) {
    std::lock_guard lock(mu_);
    auto it = blocks_.find(buf.block);
    if (it == blocks_.end()) return;
    --it->second.live;
    stats_.bytes_in_use -= buf.size;
    if (capture_ && capture_->thread == std::this_thread::get_id()) {
        ++capture_->replaced;  // the capture's own allocations are kept: this one is older
        capture_->replaced_bytes += buf.size;
    }
    free_[buf.size].push_back({buf.block, buf.offset});
}

void Pool::destroy_block(Block& b) {
    vkDestroyBuffer(device_, b.buffer, nullptr);
    vkFreeMemory(device_, b.memory, nullptr);
    stats_.bytes_reserved -= b.size;
}

void Pool::empty_cache() {
    std::lock_guard lock(mu_);
    for (auto it = blocks_.begin(); it != blocks_.end();) {
        if (it->second.live == 0) {
            destroy_block(it->second);
            const std::uint64_t id = it->first;
            for (auto& [cls, slots] : free_)
                std::erase_if(slots, [id](const Slot& s) { return s.block == id; });
            it = blocks_.erase(it);
        } else {
            ++it;
        }
    }
    stats_.num_blocks = blocks_.size();
}

ember::vulkan::MemoryStats Pool::stats() const {
    std::lock_guard lock(mu_);
    return stats_;
}

}  // namespace ember::detail::vk
