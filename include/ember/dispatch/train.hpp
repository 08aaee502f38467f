#pragma once
// The Learner on ember::Dispatch: <ember/train/learner.hpp> with the Dispatch instances of its
// model-independent data-parallel pieces (the gradient reducer's core, the merge of the
// replicas' outputs, the shards of a batch, the broadcast of parameters) compiled once in
// ember_dispatch and declared extern here (EMBER_DISPATCH_PART_TRAIN). The Learner's own
// model-independent part is compiled in ember_train (detail::LearnerCore).
#include "../collective/gradients.hpp"
#include "../train/learner.hpp"
#include "../train/output.hpp"
#include "module.hpp"

namespace ember {
EMBER_DISPATCH_DECLARE_PART(EMBER_DISPATCH_PART_TRAIN)
}  // namespace ember
