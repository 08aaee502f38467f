#!/usr/bin/env bash
# Installs the build dependencies, builds ember and its tests in build/ and runs them with CTest.
# This is the README's test command and what CI (.ci/run) runs.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/setup.sh

export CCACHE_DIR="${CCACHE_DIR:-${HOME:-/root}/.cache/ccache}"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER_LAUNCHER=ccache
cmake --build build --parallel "${EMBER_JOBS:-$(nproc)}"
ctest --test-dir build --output-on-failure -j2
