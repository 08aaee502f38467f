// Tensor<Dispatch, D> and the parameters compiled once (include/ember/dispatch/tensor.hpp and
// module.hpp declare them extern).
#include "instances.hpp"

// Not with Clang 14 (EMBER_DISPATCH_CLASS_INSTANCES, include/ember/dispatch/instance_lists.hpp).
#if EMBER_DISPATCH_CLASS_INSTANCES
namespace ember {
EMBER_DISPATCH_TENSOR_TYPES(EMBER_DISPATCH_DEFINE_CLASS)
}  // namespace ember
#endif
