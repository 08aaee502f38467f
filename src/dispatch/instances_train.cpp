// The Learner's model-independent data-parallel pieces on Dispatch compiled once
// (include/ember/dispatch/train.hpp declares them extern). Only their headers, not the Learner's:
// what they call is Dispatch's ops and the collective's virtual functions, so ember_dispatch
// links no train or collective library for them.
#include "instances.hpp"

#include "ember/collective/gradients.hpp"
#include "ember/optim/accumulator.hpp"
#include "ember/train/output.hpp"

namespace ember {
EMBER_DISPATCH_PART_TRAIN(EMBER_DISPATCH_DEFINE_CLASS, EMBER_DISPATCH_DEFINE_STRUCT,
                          EMBER_DISPATCH_DEFINE_FUNCTION)
}  // namespace ember
