#pragma once
// Embedding on ember::Dispatch: <ember/nn/embedding.hpp> with its Dispatch instances compiled once
// in ember_dispatch and declared extern here (EMBER_DISPATCH_PART_EMBEDDING).
#include "../../nn/embedding.hpp"
#include "../module.hpp"

namespace ember {
EMBER_DISPATCH_DECLARE_PART(EMBER_DISPATCH_PART_EMBEDDING)
}  // namespace ember
