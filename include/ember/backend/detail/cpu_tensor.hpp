#pragma once
// The CPU backend's tensor primitive: a strided view of a shared, aligned buffer. It is the
// same type for float, int and bool tensors; the dtype travels with it.
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "../../export.hpp"
#include "../../tensor/dtype.hpp"
#include "../../tensor/shape.hpp"
#include "../../tensor/strided.hpp"

namespace ember::cpu {
struct BufferSource;
}

namespace ember::detail::cpu {

/// An aligned host buffer, returned on destruction to the allocator or source it came from.
struct Storage {
    void* data = nullptr;   ///< 64-byte aligned
    std::size_t bytes = 0;  ///< usable size
    const ember::cpu::BufferSource* source = nullptr;  ///< set_buffer_source's, or the default
    Storage() = default;
    Storage(const Storage&) = delete;
    Storage& operator=(const Storage&) = delete;
    ~Storage();
};

/// Bytes of tensor memory in use now and at most since the last reset.
struct MemoryStats {
    std::size_t bytes_in_use = 0;       ///< held by live tensors (the allocator's cache excluded)
    std::size_t peak_bytes_in_use = 0;  ///< the high-water mark of bytes_in_use
};
/// The CPU backend's memory counters.
EMBER_API MemoryStats memory_stats();
/// Restarts the high-water mark at the current use.
EMBER_API void reset_peak_memory();

/// Allocates a buffer of at least `bytes` bytes (from the cache when one fits).
std::shared_ptr<Storage> allocate(std::size_t bytes);

using detail::contiguous_strides;  // include/ember/tensor/strided.hpp
using detail::Strides;

/// A strided view of a buffer.
struct CpuTensor {
    std::shared_ptr<Storage> storage;  ///< the buffer (shared between views)
    Shape shape;                       ///< dims
    Strides strides{};                 ///< element strides per dim (0 for broadcast dims)
    std::int64_t offset = 0;           ///< first element, in elements
    DType dtype = DType::F32;          ///< element type

    /// Typed pointer to the first element.
    template <typename T>
    T* data() const {
        return static_cast<T*>(storage->data) + offset;
    }
    /// Untyped pointer to the first element.
    std::byte* bytes() const {
        return static_cast<std::byte*>(storage->data) +
               offset * static_cast<std::int64_t>(dtype_size(dtype));
    }
    /// Row-major with no gaps (dims of size 1 may have any stride).
    bool is_contiguous() const { return detail::is_contiguous(shape, strides); }
    /// True when this handle is the only reference to a contiguous buffer that it covers
    /// exactly, so an op may write its result in place.
    bool is_unique() const {
        return storage && storage.use_count() == 1 && offset == 0 && is_contiguous();
    }
    std::size_t num_elements() const { return shape.num_elements(); }
};

}  // namespace ember::detail::cpu
