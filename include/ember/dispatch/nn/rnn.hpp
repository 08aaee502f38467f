#pragma once
// Lstm and Gru on ember::Dispatch: <ember/nn/rnn.hpp> with its Dispatch instances compiled once in
// ember_dispatch and declared extern here (EMBER_DISPATCH_PART_RNN).
#include "../../nn/rnn.hpp"
#include "../module.hpp"
#include "linear.hpp"

namespace ember {
EMBER_DISPATCH_DECLARE_PART(EMBER_DISPATCH_PART_RNN)
}  // namespace ember
