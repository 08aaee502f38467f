#pragma once
// The decorator stacks the ember libraries instantiate once (src/stacks/): declaring them
// extern here keeps every user of them from compiling the decorator's ops again.
#include "autodiff/autodiff.hpp"
#include "backend/cpu.hpp"
#include "fusion/fusion.hpp"
#if defined(EMBER_CUDA)
#include "backend/cuda.hpp"
#endif

namespace ember {
extern template struct Autodiff<Cpu>;
extern template struct Autodiff<CpuF64>;
extern template struct Autodiff<Cpu, BalancedCheckpointing>;
extern template struct Autodiff<CpuF64, BalancedCheckpointing>;
extern template struct Fusion<Cpu>;
extern template struct Fusion<CpuF64>;
extern template struct Autodiff<Fusion<Cpu>>;
#if defined(EMBER_CUDA)  // set by linking ember::cuda
extern template struct Autodiff<Cuda>;
extern template struct Fusion<Cuda>;
extern template struct Autodiff<Fusion<Cuda>>;
#endif
}  // namespace ember
