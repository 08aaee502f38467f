#pragma once
// Dropout, Relu and Gelu on ember::Dispatch: <ember/nn/dropout.hpp> with its Dispatch instances
// compiled once in ember_dispatch and declared extern here (EMBER_DISPATCH_PART_DROPOUT).
#include "../../nn/dropout.hpp"
#include "../module.hpp"

namespace ember {
EMBER_DISPATCH_DECLARE_PART(EMBER_DISPATCH_PART_DROPOUT)
}  // namespace ember
