#pragma once
// MultiHeadAttention on ember::Dispatch: <ember/nn/attention.hpp> with its Dispatch instances
// compiled once in ember_dispatch and declared extern here (EMBER_DISPATCH_PART_ATTENTION).
#include "../../nn/attention.hpp"
#include "../module.hpp"
#include "dropout.hpp"
#include "linear.hpp"

namespace ember {
EMBER_DISPATCH_DECLARE_PART(EMBER_DISPATCH_PART_ATTENTION)
}  // namespace ember
