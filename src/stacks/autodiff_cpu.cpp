// Autodiff over the CPU backend, compiled once for the library (see include/ember/stacks.hpp).
#include "ember/stacks.hpp"

namespace ember {
template struct Autodiff<Cpu>;
template struct Autodiff<CpuF64>;
template struct Autodiff<Cpu, BalancedCheckpointing>;
template struct Autodiff<CpuF64, BalancedCheckpointing>;

static_assert(AutodiffBackend<Autodiff<Cpu>>);
static_assert(!AutodiffBackend<Cpu>);
}  // namespace ember
