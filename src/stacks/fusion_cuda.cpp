// Fusion over the CUDA backend and autodiff over it, compiled once for the library (see
// include/ember/stacks.hpp).
#include "ember/stacks.hpp"

namespace ember {
template struct Fusion<Cuda>;
template struct Autodiff<Fusion<Cuda>>;

static_assert(FusionBackend<Cuda>);
static_assert(Backend<Fusion<Cuda>>);
static_assert(AutodiffBackend<Autodiff<Fusion<Cuda>>>);
}  // namespace ember
