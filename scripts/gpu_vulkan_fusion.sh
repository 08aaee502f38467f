#!/usr/bin/env bash
# Fusion<Vulkan> on a GPU machine, in one run:
#   bash scripts/gpu_vulkan_fusion.sh [BUILD_DIR]
# BUILD_DIR (default build-vkf) is built on the CPU machine, where shaderc and glslang are (the
# GPU machines have neither), and carried along with the Vulkan loader package in .gl/:
#   cmake -S . -B build-vkf -G Ninja -DCMAKE_BUILD_TYPE=Release -DEMBER_CUDA=OFF
#   ninja -C build-vkf ember_tests bench_vulkan
# Runs the fusion suite and Fusion<Vulkan>'s own tests, the backend suites on Fusion<Vulkan> and the gradient suites on
# Autodiff<Fusion<Vulkan>> (indices of a build without CUDA), prints the generated kernel of
# gelu_custom, then the benchmarks beside PyTorch. Success: every ember_tests line ends with
# "All tests passed"; bench_vulkan's gelu_custom_64M is at least 2600 GB/s.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$root/build-vkf}"
# NVIDIA's Vulkan driver is installed there, the loader is not: unpack the one carried along.
if ! ldconfig -p | grep -q 'libvulkan.so.1 '; then
  deb="$(ls "$root"/.gl/libvulkan1_*_amd64.deb | head -1)"
  dpkg -x "$deb" / && ldconfig
fi
if [[ -z "${VK_DRIVER_FILES:-}" ]]; then
  for f in /usr/share/vulkan/icd.d/nvidia_icd.json /etc/vulkan/icd.d/nvidia_icd.json; do
    if [[ -f "$f" ]]; then export VK_DRIVER_FILES="$f"; break; fi
  done
fi
# A fresh cache directory: the first run compiles every fused kernel (and shows it works).
export EMBER_CACHE_DIR="${EMBER_CACHE_DIR:-$(mktemp -d)}"
export EMBER_VULKAN_VERBOSE=1
tests="$build/tests/ember_tests"
"$tests" "[fusion][vulkan],*FusionStacks - 1"
"$tests" "*TestBackends - 3,*AutodiffBackends - 4"
EMBER_FUSION_DUMP=1 "$tests" \
  "fusion: gelu_custom is one kernel with the math's and the unfused values - FusionStacks - 1" 2>&1 |
  sed -n '/ember fusion (vulkan)/,$p' | head -90
bench="$build/benchmarks/bench_vulkan"
"$bench" fusion
"${PYTHON:-python3}" "$root/benchmarks/bench_cuda_torch.py" fusion
bash "$root/benchmarks/vulkan.sh" "$bench"
