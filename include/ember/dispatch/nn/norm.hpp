#pragma once
// BatchNorm, LayerNorm, GroupNorm and RmsNorm on ember::Dispatch: <ember/nn/norm.hpp> with its
// Dispatch instances compiled once in ember_dispatch and declared extern here
// (EMBER_DISPATCH_PART_NORM).
#include "../../nn/norm.hpp"
#include "../module.hpp"

namespace ember {
EMBER_DISPATCH_DECLARE_PART(EMBER_DISPATCH_PART_NORM)
}  // namespace ember
