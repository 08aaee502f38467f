#!/usr/bin/env bash
# Installs the build dependencies, builds ember and its tests in build/ and runs them with CTest,
# then runs part of the CPU suite under the sanitizers (scripts/sanitize.sh, in build-asan).
# This is the README's test command and what CI (.ci/run) runs.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/setup.sh

export CCACHE_DIR="${CCACHE_DIR:-${HOME:-/root}/.cache/ccache}"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER_LAUNCHER=ccache
cmake --build build --parallel "${EMBER_JOBS:-$(nproc)}"
# Most of the ~1500 CTest entries are one Catch2 case each, a process start apiece: run four at
# once where there are the cores (EMBER_TEST_JOBS overrides).
ctest --test-dir build --output-on-failure -j"${EMBER_TEST_JOBS:-$(($(nproc) >= 8 ? 4 : 2))}"
# Then part of the CPU suite again under AddressSanitizer and UndefinedBehaviorSanitizer, with
# ember's libraries instrumented too, in build-asan (docs/security.md, "Sanitizers"). Any report
# fails its test and this script. EMBER_SKIP_SANITIZE=1 leaves it out (local runs only).
[[ ${EMBER_SKIP_SANITIZE:-0} == 1 ]] || bash scripts/sanitize.sh build-asan
