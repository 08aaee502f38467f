// ember's modules and losses on Dispatch compiled once (include/ember/dispatch/nn.hpp declares
// them extern).
#include "instances.hpp"

namespace ember {
EMBER_DISPATCH_MODULE_TYPES(EMBER_DISPATCH_DEFINE_STRUCT)
EMBER_DISPATCH_NN_FUNCTIONS(EMBER_DISPATCH_DEFINE_FUNCTION)
EMBER_DISPATCH_WALK_FUNCTIONS(EMBER_DISPATCH_DEFINE_FUNCTION)
}  // namespace ember
