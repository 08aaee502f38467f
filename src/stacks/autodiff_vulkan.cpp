// Autodiff over the Vulkan backend, compiled once in ember_vulkan (see include/ember/stacks.hpp).
#include "ember/autodiff/autodiff.hpp"
#include "ember/backend/vulkan.hpp"

namespace ember {
template struct Autodiff<Vulkan>;
template struct Autodiff<Vulkan, BalancedCheckpointing>;

static_assert(AutodiffBackend<Autodiff<Vulkan>>);
}  // namespace ember
