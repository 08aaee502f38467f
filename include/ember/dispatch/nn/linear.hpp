#pragma once
// Linear on ember::Dispatch: <ember/nn/linear.hpp> with its Dispatch instances compiled once in
// ember_dispatch and declared extern here (EMBER_DISPATCH_PART_LINEAR).
#include "../../nn/linear.hpp"
#include "../module.hpp"

namespace ember {
EMBER_DISPATCH_DECLARE_PART(EMBER_DISPATCH_PART_LINEAR)
}  // namespace ember
