#pragma once
// The strided layout every backend's primitive shares (CPU, Vulkan, CUDA): strides in elements,
// one per dim (0 for broadcast dims, negative for flipped ones), over a flat buffer. The views
// built on it are in backends/common/view.hpp.
#include <array>
#include <cstddef>
#include <cstdint>

#include "shape.hpp"

namespace ember::detail {

/// Strides in elements, one per dim.
using Strides = std::array<std::int64_t, kMaxRank>;

/// Row-major strides of a shape.
inline Strides contiguous_strides(const Shape& s) {
    Strides st{};
    std::int64_t acc = 1;
    for (std::size_t i = s.rank(); i-- > 0;) {
        st[i] = acc;
        acc *= static_cast<std::int64_t>(s[i]);
    }
    return st;
}

/// Row-major with no gaps (dims of size 1 may have any stride).
inline bool is_contiguous(const Shape& shape, const Strides& strides) {
    std::int64_t acc = 1;
    for (std::size_t i = shape.rank(); i-- > 0;) {
        if (shape[i] != 1 && strides[i] != acc) return false;
        acc *= static_cast<std::int64_t>(shape[i]);
    }
    return true;
}

}  // namespace ember::detail
