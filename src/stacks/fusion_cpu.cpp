// Fusion over the CPU backend and autodiff over it, compiled once for the library (see
// include/ember/stacks.hpp).
#include "ember/stacks.hpp"

namespace ember {
template struct Fusion<Cpu>;
template struct Fusion<CpuF64>;
template struct Autodiff<Fusion<Cpu>>;

static_assert(FusionBackend<Cpu>);
static_assert(Backend<Fusion<Cpu>>);
static_assert(AutodiffBackend<Autodiff<Fusion<Cpu>>>);
}  // namespace ember
