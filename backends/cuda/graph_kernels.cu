// The few kernels a captured graph adds around the step it replays (graph.cpp): the first node
// writes the optimizer scalars of this replay, the last moves the generator's device offset on.
#include "device.cuh"
#include "graph_kernels.hpp"
#include "launch.hpp"

namespace ember::detail::cuda {
namespace {

__global__ void adam_scalars_kernel(AdamScalarBlock b) {
    for (int i = static_cast<int>(threadIdx.x); i < 3 * b.n; i += static_cast<int>(blockDim.x))
        b.dst[i] = b.v[i];
}
__global__ void rng_set_kernel(std::uint64_t* state, std::uint64_t seed, std::uint64_t offset) {
    state[0] = seed;
    state[1] = offset;
}
__global__ void rng_advance_kernel(std::uint64_t* state, std::uint64_t draws) {
    state[1] += draws;
}

}  // namespace

const void* adam_scalars_function() {
    return reinterpret_cast<const void*>(&adam_scalars_kernel);
}

void launch_adam_scalars(const AdamScalarBlock& b, cudaStream_t s) {
    adam_scalars_kernel<<<1, 128, 0, s>>>(b);
    check_launch("graph_scalars");
}

void launch_rng_set(std::uint64_t* state, std::uint64_t seed, std::uint64_t offset,
                    cudaStream_t s) {
    rng_set_kernel<<<1, 1, 0, s>>>(state, seed, offset);
    check_launch("rng_set");
}

void launch_rng_advance(std::uint64_t* state, std::uint64_t draws, cudaStream_t s) {
    rng_advance_kernel<<<1, 1, 0, s>>>(state, draws);
    check_launch("rng_advance");
}

}  // namespace ember::detail::cuda
