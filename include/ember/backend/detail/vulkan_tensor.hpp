#pragma once
// The Vulkan backend's tensor primitive: a strided view of a pooled device buffer, like the
// CPU's CpuTensor, so that reshape/permute/expand/slice/flip are free and kernels take strides.
// It is the same type for float, int and bool tensors; the dtype travels with it.
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "../../tensor/dtype.hpp"
#include "../../tensor/shape.hpp"
#include "../../tensor/strided.hpp"

namespace ember::detail::vk {

/// A sub-allocation of the device memory pool (defined in backends/vulkan/pool.hpp). It goes
/// back to the pool when the last view of it dies; the pool reuses it in stream order.
struct Buffer;

using detail::contiguous_strides;  // include/ember/tensor/strided.hpp
using detail::Strides;

/// A strided view of a device buffer. Element storage on the device: float dtypes are f32
/// words, int dtypes int64 (two words), bool one u32 word per element (see docs/vulkan.md).
struct VulkanTensor {
    std::shared_ptr<Buffer> buffer;  ///< the device allocation (shared between views)
    Shape shape;                     ///< dims
    Strides strides{};               ///< element strides per dim
    std::int64_t offset = 0;         ///< first element, in elements
    DType dtype = DType::F32;        ///< element type (the tag; see the storage note above)
    std::uint32_t device = 0;        ///< index of the Vulkan device holding the buffer

    /// Row-major with no gaps (dims of size 1 may have any stride).
    bool is_contiguous() const { return detail::is_contiguous(shape, strides); }
    /// The only handle on a contiguous buffer it covers from its start: an op may write its
    /// result in place (a moved-in tensor is reused, as on the CPU).
    bool is_unique() const {
        return buffer && buffer.use_count() == 1 && offset == 0 && is_contiguous();
    }
    /// Number of elements.
    std::size_t num_elements() const { return shape.num_elements(); }
};

}  // namespace ember::detail::vk
