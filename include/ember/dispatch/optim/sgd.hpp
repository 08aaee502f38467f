#pragma once
// SGD on ember::Dispatch: <ember/optim/sgd.hpp> with its Dispatch instances compiled once in
// ember_dispatch and declared extern here (EMBER_DISPATCH_PART_SGD).
#include "../../optim/sgd.hpp"
#include "../module.hpp"
#include "gradients_params.hpp"

namespace ember {
EMBER_DISPATCH_DECLARE_PART(EMBER_DISPATCH_PART_SGD)
}  // namespace ember
