#!/usr/bin/env bash
# Fusion<Cuda>, the small-op launch path and the int8 Linear on a GPU machine (one run):
#   bash scripts/gpu_cuda_fusion.sh [BUILD_DIR]
# Builds ember_tests and bench_cuda (CUDA on, Vulkan off, sm_90), runs the CUDA test cases
# (test_cuda*.cpp and the shared suites on Cuda, Fusion<Cuda>, Autodiff<Cuda> and
# Autodiff<Fusion<Cuda>>, the fusion suite on Fusion<Cuda>), then the benchmarks. Success: Catch2 prints "All tests passed";
# gelu_custom_fusion_64M >= 2600 GB/s; op_overhead_add_1 <= 3 us/op.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$root/build-cuf}"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DEMBER_VULKAN=OFF \
  -DEMBER_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null
ninja -C "$build" -j"$(nproc)" ember_tests bench_cuda
tests="$build/tests/ember_tests"
# Index order in a CPU + CUDA build: TestBackends Cpu, Fusion<Cpu>, Cuda, Fusion<Cuda>;
# AutodiffBackends Autodiff<Cpu>, <Cpu, Balanced>, <Fusion<Cpu>>, <Cuda>, <Fusion<Cuda>>;
# FusionStacks Fusion<Cpu>, Fusion<Cuda>.
"$tests" "[cuda]"
"$tests" "*TestBackends - 2,*TestBackends - 3,*AutodiffBackends - 3,*AutodiffBackends - 4"
"$tests" "*FusionStacks - 1"
EMBER_FUSION_DUMP=1 "$tests" \
  "fusion: gelu_custom is one kernel with the math's and the unfused values - FusionStacks - 1" \
  2>&1 | head -60
bench="$build/benchmarks/bench_cuda"
"$bench" fusion
"$bench" quant
"$bench" overhead
echo "# the same small ops launched through cudaLaunchKernel, for comparison:"
EMBER_CUDA_LAUNCH=runtime "$bench" overhead
bash "$root/benchmarks/cuda.sh" "$bench"
