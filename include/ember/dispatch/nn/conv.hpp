#pragma once
// Conv1d, Conv2d and ConvTranspose2d on ember::Dispatch: <ember/nn/conv.hpp> with its Dispatch
// instances compiled once in ember_dispatch and declared extern here (EMBER_DISPATCH_PART_CONV).
#include "../../nn/conv.hpp"
#include "../module.hpp"

namespace ember {
EMBER_DISPATCH_DECLARE_PART(EMBER_DISPATCH_PART_CONV)
}  // namespace ember
