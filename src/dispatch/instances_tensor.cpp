// Tensor<Dispatch, D, K> compiled once (include/ember/dispatch/nn.hpp declares them extern).
#include "instances.hpp"

// Not with Clang 14 (EMBER_DISPATCH_CLASS_INSTANCES, include/ember/dispatch/nn.hpp).
#if EMBER_DISPATCH_CLASS_INSTANCES
namespace ember {
EMBER_DISPATCH_TENSOR_TYPES(EMBER_DISPATCH_DEFINE_CLASS)
}  // namespace ember
#endif
