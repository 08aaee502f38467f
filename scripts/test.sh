#!/usr/bin/env bash
# Installs the build dependencies, builds ember and its tests in build/ and runs them with CTest
# (the AArch64 cross build's suites under qemu among them), then runs part of the CPU suite under
# the sanitizers (scripts/sanitize.sh, in build-asan); with EMBER_CLANG_FULL=1 it then builds ember
# and its test suite again with Clang 14 and runs part of it (scripts/clang.sh, in build-clang).
# This is the README's test command and what CI (.ci/run) runs.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# Each step's wall time, printed as it ends, so that a CI log shows where CI's minutes go.
step() { echo "test.sh: $1 done at $((SECONDS / 60)) min $((SECONDS % 60)) s"; }

# --aarch64: the Arm target's zlib and SQLite, for the AArch64 suites under qemu
# (EMBER_TEST_AARCH64, tests/aarch64; docs/platforms.md).
bash scripts/setup.sh --aarch64
step setup

export CCACHE_DIR="${CCACHE_DIR:-${HOME:-/root}/.cache/ccache}"
# ccache's depend mode: on a miss it takes a file's headers from the compiler's dependency file
# (-MD, which every build here passes) instead of running the preprocessor a second time. CI
# starts with an empty cache, so its ~500 compiles (this build, the cross, firmware, web, fuzz,
# consumer and sanitizer builds) are misses, each about 0.25 CPU s dearer without it (em++ 1.2);
# hits are the same (the consumer tests still take the main build's objects). docs/platforms.md.
export CCACHE_DEPEND="${CCACHE_DEPEND:-1}"
# Without the benchmarks: no CTest entry runs them, and they cost CI some 220 CPU seconds of
# compiles (docs/platforms.md, "Where CI's time goes"); benchmarks/run.sh and its siblings build
# them in their own folders. The examples at -O1: their work runs in ember's libraries (Release),
# and their tests check results, not speed (examples/CMakeLists.txt).
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
      -DEMBER_TEST_AARCH64=ON -DEMBER_BUILD_BENCHMARKS=OFF -DEMBER_EXAMPLES_COMPILE_OPTIONS=-O1
cmake --build build --parallel "${EMBER_JOBS:-$(nproc)}"
step build
# The web classifier's WebAssembly module (CTest's web.build) at -O1 for the same reason
# (examples/web-classifier/run.sh).
export EMBER_WEB_OPT_FLAGS="${EMBER_WEB_OPT_FLAGS:--O1}"
# Most of the ~1500 CTest entries are one Catch2 case each, a process start apiece: run four at
# once where there are the cores (EMBER_TEST_JOBS overrides).
ctest --test-dir build --output-on-failure -j"${EMBER_TEST_JOBS:-$(($(nproc) >= 8 ? 4 : 2))}"
step ctest
# Then part of the CPU suite again under AddressSanitizer and UndefinedBehaviorSanitizer, with
# ember's libraries instrumented too, in build-asan (docs/security.md, "Sanitizers"). Any report
# fails its test and this script. EMBER_SKIP_SANITIZE=1 leaves it out (local runs only).
[[ ${EMBER_SKIP_SANITIZE:-0} == 1 ]] || bash scripts/sanitize.sh build-asan
step sanitize
# EMBER_CLANG_FULL=1 then builds the libraries, examples and test suite with Clang 14, warnings
# failing the step, and runs the CPU op, module, loss and autodiff suites on that build
# (scripts/clang.sh, docs/platforms.md). CI leaves it out: on CI's 2 cores it takes about 27
# minutes, more than CI's time allows; CTest's consumer_clang14/15/16 check every public header
# with each Clang instead.
[[ ${EMBER_CLANG_FULL:-0} != 1 ]] || bash scripts/clang.sh build-clang
