#pragma once
// GradientsParams (a model's gradients by parameter) on ember::Dispatch:
// <ember/optim/gradients_params.hpp> with its Dispatch instances compiled once in ember_dispatch
// and declared extern here (EMBER_DISPATCH_PART_GRADIENTS).
#include "../../optim/gradients_params.hpp"
#include "../module.hpp"

namespace ember {
EMBER_DISPATCH_DECLARE_PART(EMBER_DISPATCH_PART_GRADIENTS)
}  // namespace ember
