// The Learner of a Dispatch model behind train::detail::ErasedModel, compiled once for the usual
// step outputs and optimizers (include/ember/dispatch/train.hpp declares them extern): a model's
// file compiles its steps and walks behind the interface and calls this. The one part of
// ember_dispatch that links ember_train (the Learner's core).
#include "instances.hpp"

#include "ember/dispatch/train.hpp"
#include "ember/optim/adam.hpp"
#include "ember/optim/sgd.hpp"

namespace ember {
EMBER_DISPATCH_PART_LEARNER(EMBER_DISPATCH_DEFINE_CLASS, EMBER_DISPATCH_DEFINE_STRUCT,
                            EMBER_DISPATCH_DEFINE_FUNCTION)
}  // namespace ember
