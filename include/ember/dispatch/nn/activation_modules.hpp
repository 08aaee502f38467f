#pragma once
// Sigmoid, Tanh, SiLU and the other parameter-free activation modules on ember::Dispatch:
// <ember/nn/activation_modules.hpp> with its Dispatch instances compiled once in ember_dispatch and
// declared extern here (EMBER_DISPATCH_PART_ACTIVATION_MODULES).
#include "../../nn/activation_modules.hpp"
#include "../module.hpp"

namespace ember {
EMBER_DISPATCH_DECLARE_PART(EMBER_DISPATCH_PART_ACTIVATION_MODULES)
}  // namespace ember
