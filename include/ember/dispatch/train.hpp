#pragma once
// The Learner on ember::Dispatch: <ember/train/learner.hpp> with the Dispatch instances of its
// model-independent data-parallel pieces (the gradient reducer's core, the merge of the
// replicas' outputs, the shards of a batch, the broadcast of parameters) compiled once in
// ember_dispatch and declared extern here (EMBER_DISPATCH_PART_TRAIN). The Learner's own
// model-independent part is compiled in ember_train (detail::LearnerCore), and the Learner of a
// Dispatch model (the one of its train::detail::ErasedModel, whatever the model) in ember_dispatch
// for the usual step outputs and optimizers at a constant learning rate
// (EMBER_DISPATCH_PART_LEARNER): a model's file compiles its model's steps and walks behind an
// interface, and a call.
#include "../collective/gradients.hpp"
#include "../train/learner.hpp"
#include "../train/output.hpp"
#include "module.hpp"

namespace ember::optim {
struct Adam;
struct AdamW;
struct Sgd;
}  // namespace ember::optim

namespace ember {
EMBER_DISPATCH_DECLARE_PART(EMBER_DISPATCH_PART_TRAIN)
EMBER_DISPATCH_DECLARE_PART(EMBER_DISPATCH_PART_LEARNER)
}  // namespace ember
