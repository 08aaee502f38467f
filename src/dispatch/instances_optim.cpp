// The optimizers' per-tensor steps on Dispatch compiled once (include/ember/dispatch/nn.hpp
// declares them extern).
#include "instances.hpp"

namespace ember {
EMBER_DISPATCH_OPTIM_FUNCTIONS(EMBER_DISPATCH_DEFINE_FUNCTION)
EMBER_DISPATCH_OPTIM_CLASSES(EMBER_DISPATCH_DEFINE_CLASS)
}  // namespace ember
