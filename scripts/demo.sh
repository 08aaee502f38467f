#!/usr/bin/env bash
# The main job: installs what is needed (scripts/setup.sh), builds the mnist example in build/,
# trains the guide CNN for one epoch on Fashion-MNIST with the Learner on the CPU backend (the
# live dashboard when stdout is a terminal, plain lines otherwise), then loads the saved model
# and prints predictions and the test accuracy.
#
#   bash scripts/demo.sh [extra options for `mnist train`, e.g. --model mlp or --epochs 3]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/setup.sh

export CCACHE_DIR="${CCACHE_DIR:-${HOME:-/root}/.cache/ccache}"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER_LAUNCHER=ccache
cmake --build build --target mnist --parallel "${EMBER_JOBS:-$(nproc)}"

artifacts=artifacts/mnist
# A fresh run each time: no checkpoints or metric logs left from an earlier one.
rm -rf "$artifacts"
./build/examples/mnist train --epochs 1 --artifact-dir "$artifacts" "$@"
./build/examples/mnist infer --artifact-dir "$artifacts"
