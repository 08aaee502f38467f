#pragma once
// Adam and AdamW on ember::Dispatch: <ember/optim/adam.hpp> with its Dispatch instances compiled
// once in ember_dispatch and declared extern here (EMBER_DISPATCH_PART_ADAM).
#include "../../optim/adam.hpp"
#include "../module.hpp"
#include "gradients_params.hpp"

namespace ember {
EMBER_DISPATCH_DECLARE_PART(EMBER_DISPATCH_PART_ADAM)
}  // namespace ember
