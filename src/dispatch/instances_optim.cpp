// The optimizers' per-tensor steps and cores on Dispatch compiled once
// (include/ember/dispatch/optim/*.hpp declare them extern).
#include "instances.hpp"

namespace ember {
EMBER_DISPATCH_OPTIM_PARTS(EMBER_DISPATCH_DEFINE_CLASS, EMBER_DISPATCH_DEFINE_STRUCT,
                           EMBER_DISPATCH_DEFINE_FUNCTION)
}  // namespace ember
