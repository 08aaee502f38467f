#pragma once
// LeakyRelu and the other activation layers on ember::Dispatch:
// <ember/nn/activations.hpp> with its Dispatch instances compiled once in ember_dispatch and
// declared extern here (EMBER_DISPATCH_PART_ACTIVATIONS).
#include "../../nn/activations.hpp"
#include "../module.hpp"
#include "linear.hpp"

namespace ember {
EMBER_DISPATCH_DECLARE_PART(EMBER_DISPATCH_PART_ACTIVATIONS)
}  // namespace ember
