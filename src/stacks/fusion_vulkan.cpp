// Fusion over the Vulkan backend and autodiff over it, compiled once in ember_vulkan (see
// include/ember/stacks/vulkan_fusion.hpp).
#include "ember/stacks/vulkan_fusion.hpp"

namespace ember {
template struct Fusion<Vulkan>;
template struct Autodiff<Fusion<Vulkan>>;

static_assert(FusionBackend<Vulkan>);
static_assert(Backend<Fusion<Vulkan>>);
static_assert(AutodiffBackend<Autodiff<Fusion<Vulkan>>>);
}  // namespace ember
