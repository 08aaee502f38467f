// Autodiff over the CUDA backend, compiled once for the library (see include/ember/stacks.hpp).
#include "ember/stacks.hpp"

namespace ember {
template struct Autodiff<Cuda>;

static_assert(AutodiffBackend<Autodiff<Cuda>>);
}  // namespace ember
