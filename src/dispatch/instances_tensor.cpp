// Tensor<Dispatch, D, K> compiled once (include/ember/dispatch/nn.hpp declares them extern).
#include "instances.hpp"

namespace ember {
EMBER_DISPATCH_TENSOR_TYPES(EMBER_DISPATCH_DEFINE_CLASS)
}  // namespace ember
