#pragma once
// The 1-d and 2-d pools on ember::Dispatch: <ember/nn/pool.hpp> with its Dispatch instances
// compiled once in ember_dispatch and declared extern here (EMBER_DISPATCH_PART_POOL).
#include "../../nn/pool.hpp"
#include "../module.hpp"

namespace ember {
EMBER_DISPATCH_DECLARE_PART(EMBER_DISPATCH_PART_POOL)
}  // namespace ember
