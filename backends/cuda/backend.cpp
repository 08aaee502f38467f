// CudaBackend's members that belong to no op file (name, sync, lending memory). Each op's member
// is defined next to the dtype-generic function it runs (tensor_ops.cpp, reduce_ops.cpp, ...),
// which checks its inputs as the CPU backend's do and queues kernels on the device's stream.
#include "ember/backend/cuda.hpp"

#include "ops.hpp"

namespace ember {
namespace k = detail::cuda;

std::string CudaBackend::name() {
    return "cuda";
}
void CudaBackend::sync(const Device& d) {
    k::synchronize(k::ordinal(d));
}
std::optional<LentMemory> CudaBackend::lend_memory(FT& t) {
    if (!t.is_unique()) t = k::fresh_copy(t);
    return LentMemory{t.ptr(), MemorySpace::Cuda, t.device()};
}

}  // namespace ember
