#pragma once
// Autodiff over the Vulkan backend, instantiated once in ember_vulkan
// (src/stacks/autodiff_vulkan.cpp): declaring it extern keeps users from compiling it again.
#include "../autodiff/autodiff.hpp"
#include "../backend/vulkan.hpp"

namespace ember {
extern template struct Autodiff<Vulkan>;
extern template struct Autodiff<Vulkan, BalancedCheckpointing>;
}  // namespace ember
