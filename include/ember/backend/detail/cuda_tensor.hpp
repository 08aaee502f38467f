#pragma once
// The CUDA backend's tensor primitive: a strided view of a pooled device allocation, the same
// type for float, int and bool tensors (the dtype travels with it), as the CPU's CpuTensor.
// No CUDA header is needed to use it: users compile code against it with a plain C++ compiler.
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "../../export.hpp"
#include "../../tensor/dtype.hpp"
#include "../../tensor/shape.hpp"
#include "../../tensor/strided.hpp"

namespace ember::detail::cuda {

struct PrivatePool;  // a captured graph's blocks (backends/cuda/graph.hpp)

/// A device allocation from the caching pool; returned to the pool (not to the driver) when the
/// last view of it goes. Every kernel runs on the device's one stream, so a block handed back
/// here may be reused at once by later work on that stream.
struct Storage {
    void* data = nullptr;   ///< device pointer
    std::size_t bytes = 0;  ///< size of the block (rounded up to the pool's size class)
    int device = 0;         ///< the device that owns it
    /// For int64 data whose range is known on the host (uploaded from host data, or drawn
    /// uniformly), its bounds [lo, hi]; lo > hi when unknown. Index checks use them instead of
    /// reading the data back, so gathers by such indices never wait for the GPU. Cleared when
    /// an op writes into the buffer.
    std::int64_t lo = 1, hi = 0;
    /// The private pool of the CUDA graph whose capture allocated the block (null: the
    /// device's caching pool): the block goes back there, out of reach of other work.
    std::shared_ptr<PrivatePool> pool;
    Storage() = default;
    Storage(const Storage&) = delete;
    Storage& operator=(const Storage&) = delete;
    ~Storage();
};

/// Allocates at least `bytes` bytes on `device` from the caching pool.
EMBER_API std::shared_ptr<Storage> allocate(std::size_t bytes, int device);

using detail::contiguous_strides;  // include/ember/tensor/strided.hpp
using detail::Strides;

/// A strided view of a device buffer.
struct CudaTensor {
    std::shared_ptr<Storage> storage;  ///< the buffer (shared between views)
    Shape shape;                       ///< dims
    Strides strides{};                 ///< element strides per dim (0 for broadcast dims)
    std::int64_t offset = 0;           ///< first element, in elements
    DType dtype = DType::F32;          ///< element type

    /// Untyped device pointer to the first element.
    void* ptr() const {
        return static_cast<std::byte*>(storage->data) +
               offset * static_cast<std::int64_t>(dtype_size(dtype));
    }
    /// The device index.
    int device() const { return storage ? storage->device : 0; }
    /// Row-major with no gaps (dims of size 1 may have any stride).
    bool is_contiguous() const { return detail::is_contiguous(shape, strides); }
    /// True when this handle is the only reference to a contiguous buffer that it covers from
    /// its start, so an op may write its result in place.
    bool is_unique() const {
        return storage && storage.use_count() == 1 && offset == 0 && is_contiguous();
    }
    /// Number of elements.
    std::size_t num_elements() const { return shape.num_elements(); }
};

}  // namespace ember::detail::cuda
