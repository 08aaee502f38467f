// ember's modules and losses on Dispatch compiled once (include/ember/dispatch/nn/*.hpp and
// module.hpp declare them extern).
#include "instances.hpp"

namespace ember {
EMBER_DISPATCH_NN_PARTS(EMBER_DISPATCH_DEFINE_CLASS, EMBER_DISPATCH_DEFINE_STRUCT,
                        EMBER_DISPATCH_DEFINE_FUNCTION)
}  // namespace ember
