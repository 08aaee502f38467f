#pragma once
// The pooling and interpolation geometry of backends/common/pool_geometry.hpp, in the CPU backend's
// namespace.
#include "../common/pool_geometry.hpp"
#include "kernels.hpp"

namespace ember::detail::cpu {

using namespace ember::detail::pool;  // every name of the shared geometry

/// Grain (in planes) that gives each task about 64K elements of output.
inline std::size_t plane_grain(i64 plane_work) {
    return std::max<std::size_t>(1, std::size_t(65536 / std::max<i64>(plane_work, 1)));
}

}  // namespace ember::detail::cpu
