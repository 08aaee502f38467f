#pragma once
// The pooling and interpolation geometry of backends/common/pool_geometry.hpp, in the CPU backend's
// namespace.
#include "../common/pool_geometry.hpp"
#include "kernels.hpp"

namespace ember::detail::cpu {

using pool::i64;
using pool::Dims3;
using pool::div_floor;
using pool::pool_out_size;
using pool::pool_geometry;
using pool::Window3;
using pool::window3;
using pool::AxisWindows;
using pool::avg_windows;
using pool::adaptive_start;
using pool::adaptive_end;
using pool::nearest_index;
using pool::pixel_scale;
using pool::source_index;
using pool::AxisWeights;
using pool::linear_weights;
using pool::cubic_weights;

/// Grain (in planes) that gives each task about 64K elements of output.
inline std::size_t plane_grain(i64 plane_work) {
    return std::max<std::size_t>(1, std::size_t(65536 / std::max<i64>(plane_work, 1)));
}

}  // namespace ember::detail::cpu
