#!/usr/bin/env bash
# Multi-device training (issue 12) on a machine with 2 GPUs, in one run:
#   bash scripts/gpu_multi.sh [BUILD_DIR]
# Builds ember_tests, mnist and bench_multi (CUDA on, Vulkan off, sm_90; NCCL is found under the
# CUDA prefix and loaded at run time), then runs
#   1. the collective and data-parallel cases on the CPU and the NCCL cases on 2 GPUs
#      (success: both Catch2 runs print "All tests passed" and the [nccl] run skips nothing:
#      no "skipped: NCCL needs" warning);
#   2. one epoch of mnist on 1 GPU and data-parallel on GPUs 0 and 1 (success: both print
#      "test accuracy" above 80 %, the second after "data-parallel training on 2 replicas");
#   3. benchmarks/multi_gpu.sh: throughput on 1 and 2 GPUs, threads and processes, beside
#      PyTorch DDP (success: the "scaling" lines; the target is >= 1.8x on 2 GPUs).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$root/build-md}"
export NCCL_NVLS_ENABLE=0
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DEMBER_VULKAN=OFF \
  -DEMBER_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null
ninja -C "$build" -j"$(nproc)" ember_tests mnist bench_multi
tests="$build/tests/ember_tests"
"$tests" "[collective]"
"$tests" "[nccl]"
data="${EMBER_DATA_DIR:-/usr/share/datasets/fashion-mnist}"
if [ -d "$data" ]; then
  "$build/examples/mnist" train --backend cuda --epochs 1 --plain --data "$data" \
    --artifact-dir /tmp/mnist-1gpu | tail -1
  "$build/examples/mnist" train --backend cuda --devices 0,1 --batch-size 32 --epochs 1 --plain \
    --data "$data" --artifact-dir /tmp/mnist-2gpu | grep -E "data-parallel|test accuracy"
else
  echo "gpu_multi.sh: no Fashion-MNIST in $data (set EMBER_DATA_DIR): mnist skipped"
fi
bash "$root/benchmarks/multi_gpu.sh" "$build"  # runs "[nccl]" once more at its end
