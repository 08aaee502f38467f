#!/usr/bin/env bash
# Runs part of the CPU test suite under AddressSanitizer and UndefinedBehaviorSanitizer, with
# ember's own libraries instrumented too (docs/security.md, "Sanitizers"). CI runs it after the
# main suite (scripts/test.sh).
#
#   scripts/sanitize.sh [BUILD_DIR]      default build-asan
#
# It configures BUILD_DIR with -DEMBER_SANITIZE=ON (which adds the sanitizer flags to every
# target: libember.a, libember_cpu.a and libember_data.a as much as the tests), builds only
# what the test binary ember_sanitize_tests needs (its sources: EMBER_SANITIZE_TEST_SOURCES in
# tests/CMakeLists.txt), checks that the static libraries really are instrumented, and runs the
# CTest label "sanitize".
# Any leak, out-of-bounds access or undefined behaviour fails the test that triggers it.
# The GPU backends are off: their drivers are not built with the sanitizers.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build="${1:-build-asan}"
start=$SECONDS

export CCACHE_DIR="${CCACHE_DIR:-${HOME:-/root}/.cache/ccache}"
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
# -O0: the suite's cases are small, so the build is nearly all of this step, and it takes about a
# third less CPU time at -O0 than at -O1 (docs/security.md, "Sanitizers"); no load or store is
# optimised away before the sanitizers check it. -g1: line tables for the reports' stack traces
# without full debug info's link time.
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS_DEBUG=-O0 -g1" \
  -DEMBER_SANITIZE=ON -DEMBER_VULKAN=OFF -DEMBER_CUDA=OFF -DEMBER_ONNX=OFF \
  -DEMBER_BUILD_EXAMPLES=OFF -DEMBER_BUILD_BENCHMARKS=OFF "${launcher[@]}" >/dev/null
cmake --build "$build" --target ember_sanitize_tests --parallel "${EMBER_JOBS:-$(nproc)}"

# The libraries must carry ASan's instrumentation, not just the test binary (an uninstrumented
# libember.a hides out-of-bounds accesses inside ember).
for lib in "$build/libember.a" "$build/libember_cpu.a" "$build/libember_data.a"; do
  # grep -c reads all of nm's output: grep -q would stop early and, under pipefail, nm's
  # SIGPIPE would fail the check on an instrumented library.
  if ! nm "$lib" 2>/dev/null | grep -c '__asan_report' >/dev/null; then
    echo "sanitize.sh: $lib is not instrumented with AddressSanitizer" >&2
    exit 1
  fi
done

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
ctest --test-dir "$build" -L sanitize --output-on-failure -j"${EMBER_JOBS:-$(nproc)}"
echo "sanitize.sh: done in $(( (SECONDS - start) / 60 )) min $(( (SECONDS - start) % 60 )) s"
