#pragma once
// Fusion over the Vulkan backend (elementwise chains become one generated SPIR-V kernel;
// docs/fusion.md) and autodiff over that, instantiated once in ember_vulkan
// (src/stacks/fusion_vulkan.cpp): declaring them extern keeps users from compiling them again.
//
//     using B = ember::Autodiff<ember::Fusion<ember::Vulkan>>;
#include "../autodiff/autodiff.hpp"
#include "../backend/vulkan.hpp"
#include "../fusion/fusion.hpp"

namespace ember {
extern template struct Fusion<Vulkan>;
extern template struct Autodiff<Fusion<Vulkan>>;
}  // namespace ember
