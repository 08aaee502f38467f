#!/usr/bin/env bash
# The main job: installs the build dependencies, builds ember in build/ and runs the tensor demo.
# For now that is examples/tensor_demo; the MNIST training takes its place once it lands.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/setup.sh

export CCACHE_DIR="${CCACHE_DIR:-${HOME:-/root}/.cache/ccache}"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER_LAUNCHER=ccache
cmake --build build --target tensor_demo --parallel "${EMBER_JOBS:-$(nproc)}"
./build/examples/tensor_demo
