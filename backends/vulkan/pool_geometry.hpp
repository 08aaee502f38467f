#pragma once
// The pooling and interpolation geometry of backends/common/pool_geometry.hpp, in the Vulkan
// backend's namespace.
#include "../common/pool_geometry.hpp"
#include "kernels.hpp"

namespace ember::detail::vk {

using namespace ember::detail::pool;  // every name of the shared geometry

}  // namespace ember::detail::vk
