#pragma once
// Where the CPU backend's tensor buffers come from. Hosted builds take them from the heap
// through a caching allocator; firmware has no heap to spare and hands ember a fixed region
// instead: an Arena over a static array, installed with set_buffer_source.
#include <cstddef>
#include <span>

#include "../export.hpp"

namespace ember::cpu {

/// A provider of tensor buffers: `allocate(ctx, bytes, align)` returns an `align`-aligned block
/// of at least `bytes` bytes, or nullptr when it has none (the op then fails with an error
/// naming the size); `deallocate(ctx, p, bytes)` takes it back.
struct BufferSource {
    void* (*allocate)(void* ctx, std::size_t bytes, std::size_t align);  ///< a block or nullptr
    void (*deallocate)(void* ctx, void* p, std::size_t bytes);           ///< returns a block
    void* ctx;                                                           ///< passed to both
};

/// Makes `source` provide every tensor buffer allocated from now on (nullptr: back to the
/// default allocator). Buffers go back to the source that gave them, so tensors made before the
/// switch stay valid. `source` must outlive those buffers. Not thread-safe: install it before
/// any tensor is made.
EMBER_API void set_buffer_source(const BufferSource* source) noexcept;

/// A first-fit allocator over a fixed region, with neighbouring free blocks merged: what
/// firmware installs (a static array, no heap). Each block carries a 64-byte header, and
/// blocks are 64-byte aligned like the default allocator's.
class EMBER_API Arena {
  public:
    /// An arena over `region` (aligned up to 64 bytes; at least a few hundred bytes).
    explicit Arena(std::span<std::byte> region) noexcept;
    Arena(const Arena&) = delete;
    Arena& operator=(const Arena&) = delete;

    /// A block of at least `bytes` bytes aligned to `align` (at most 64), or nullptr.
    void* allocate(std::size_t bytes, std::size_t align = 64) noexcept;
    /// Returns a block from allocate (nullptr is ignored).
    void deallocate(void* p) noexcept;

    /// The arena as a BufferSource (it refers to this arena).
    const BufferSource& source() const noexcept { return source_; }
    /// Bytes of the region the arena manages.
    std::size_t capacity() const noexcept { return size_; }
    /// Bytes in allocated blocks now, headers included.
    std::size_t bytes_in_use() const noexcept { return in_use_; }
    /// The most bytes_in_use has been.
    std::size_t peak_bytes_in_use() const noexcept { return peak_; }
    /// The largest block allocate could return now.
    std::size_t largest_free_block() const noexcept;

  private:
    std::byte* base_ = nullptr;
    std::size_t size_ = 0, in_use_ = 0, peak_ = 0;
    BufferSource source_;
};

}  // namespace ember::cpu
