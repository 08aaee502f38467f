#pragma once
// The transformer encoder, its layer and PositionWiseFeedForward on ember::Dispatch:
// <ember/nn/transformer.hpp> with its Dispatch instances compiled once in ember_dispatch and
// declared extern here (EMBER_DISPATCH_PART_TRANSFORMER).
#include "../../nn/transformer.hpp"
#include "../module.hpp"
#include "attention.hpp"
#include "dropout.hpp"
#include "linear.hpp"
#include "norm.hpp"

namespace ember {
EMBER_DISPATCH_DECLARE_PART(EMBER_DISPATCH_PART_TRANSFORMER)
}  // namespace ember
