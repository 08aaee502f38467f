#!/usr/bin/env bash
# Installs the build dependencies, builds ember and its tests in build/ and runs them with CTest
# (the AArch64 cross build's suites under qemu among them), then runs part of the CPU suite under
# the sanitizers (scripts/sanitize.sh, in build-asan), then builds ember and its test suite again
# with Clang 14 and runs part of it (scripts/clang.sh, in build-clang).
# This is the README's test command and what CI (.ci/run) runs.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# --aarch64: the Arm target's zlib and SQLite, for the AArch64 suites under qemu
# (EMBER_TEST_AARCH64, tests/aarch64; docs/platforms.md).
bash scripts/setup.sh --aarch64

export CCACHE_DIR="${CCACHE_DIR:-${HOME:-/root}/.cache/ccache}"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
      -DEMBER_TEST_AARCH64=ON
cmake --build build --parallel "${EMBER_JOBS:-$(nproc)}"
# Most of the ~1500 CTest entries are one Catch2 case each, a process start apiece: run four at
# once where there are the cores (EMBER_TEST_JOBS overrides).
ctest --test-dir build --output-on-failure -j"${EMBER_TEST_JOBS:-$(($(nproc) >= 8 ? 4 : 2))}"
# Then part of the CPU suite again under AddressSanitizer and UndefinedBehaviorSanitizer, with
# ember's libraries instrumented too, in build-asan (docs/security.md, "Sanitizers"). Any report
# fails its test and this script. EMBER_SKIP_SANITIZE=1 leaves it out (local runs only).
[[ ${EMBER_SKIP_SANITIZE:-0} == 1 ]] || bash scripts/sanitize.sh build-asan
# Then the libraries, examples and test suite built with Clang 14, warnings failing the step, and
# the CPU op, module, loss and autodiff suites run on that build (docs/platforms.md).
# EMBER_SKIP_CLANG=1 leaves it out (local runs only).
[[ ${EMBER_SKIP_CLANG:-0} == 1 ]] || bash scripts/clang.sh build-clang
