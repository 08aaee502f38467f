#pragma once
// Launchers of the kernels a captured graph adds around its step (graph_kernels.cu).
#include <cuda_runtime.h>

#include <cstdint>

#include "graph.hpp"

namespace ember::detail::cuda {

/// The scalars of up to kAdamSlotsPerNode optimizer updates, passed by value: the node's
/// parameters are what a replay rewrites (cudaGraphExecKernelNodeSetParams).
struct AdamScalarBlock {
    double* dst = nullptr;                 ///< device doubles, 3 a slot
    int n = 0;                             ///< slots used
    double v[3 * kAdamSlotsPerNode] = {};  ///< {lr, correction_1, correction_2} a slot
};

/// The kernel behind launch_adam_scalars (for the graph node's parameters).
const void* adam_scalars_function();
/// dst[0 .. 3n) = v.
void launch_adam_scalars(const AdamScalarBlock& b, cudaStream_t s);
/// state = {seed, offset}.
void launch_rng_set(std::uint64_t* state, std::uint64_t seed, std::uint64_t offset, cudaStream_t s);
/// state[1] += draws.
void launch_rng_advance(std::uint64_t* state, std::uint64_t draws, cudaStream_t s);

}  // namespace ember::detail::cuda
