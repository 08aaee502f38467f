#pragma once
// The cross-entropy losses on ember::Dispatch: <ember/nn/loss.hpp> with its Dispatch instances
// compiled once in ember_dispatch and declared extern here (EMBER_DISPATCH_PART_LOSS).
#include "../../nn/loss.hpp"
#include "../module.hpp"

namespace ember {
EMBER_DISPATCH_DECLARE_PART(EMBER_DISPATCH_PART_LOSS)
}  // namespace ember
