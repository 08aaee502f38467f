#!/usr/bin/env bash
# The AArch64 tests' steps, for people and for CTest (tests/aarch64/ctest.cmake):
#
#   run.sh kernels WORK          cross-compile neon_kernels.cpp (the NEON kernels on their own)
#                                and run it under qemu-aarch64, with NEON on and with
#                                EMBER_CPU_NEON=0 (the run-time switch)
#   run.sh build WORK            cross-build tests/aarch64 (ember's libraries, the CPU suites'
#                                test program, the mnist example) into WORK/build
#   run.sh suite WORK FILTER...  run the test program under qemu-aarch64 with Catch2's FILTER
#                                (EMBER_CPU_NEON=0 in the environment: the portable kernels)
#   run.sh mnist WORK MNIST      train the tiny MLP with the build machine's mnist example (MNIST),
#                                then classify the 10 000 test images with it there and, under
#                                qemu, with the AArch64 build: the predictions must agree
set -euo pipefail
src="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$src/../.." && pwd)"
triple=aarch64-linux-gnu
# The target's dynamic loader and C/C++ runtime come from the cross toolchain's packages
# (/usr/aarch64-linux-gnu/lib). Where Debian's arm64 multiarch libc6 is installed as well
# (zlib1g-dev:arm64 pulls it in), the loader would otherwise find that libc first in
# /lib/aarch64-linux-gnu: a different build of glibc than the loader's, with which
# std::thread's start hangs. LD_LIBRARY_PATH puts the toolchain's runtime first; zlib and
# SQLite still come from the multiarch directories.
qemu=(qemu-aarch64 -L "/usr/$triple" -E "LD_LIBRARY_PATH=/usr/$triple/lib")

case "${1:-}" in
  kernels)
    work="$2"
    mkdir -p "$work"
    "$triple-g++" -std=c++20 -O2 -fno-math-errno -Wall -Wextra -I"$root/include" \
      -I"$root/backends/cpu" "$src/neon_kernels.cpp" "$root/backends/cpu/neon.cpp" \
      -o "$work/neon_kernels"
    "${qemu[@]}" "$work/neon_kernels"
    EMBER_CPU_NEON=0 "${qemu[@]}" "$work/neon_kernels"
    ;;
  build)
    work="$2"
    launcher=()
    command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
    cmake -S "$src" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_TOOLCHAIN_FILE="$root/cmake/aarch64-linux-gnu.cmake" \
      -DEMBER_CPU_BLAS="${EMBER_AARCH64_BLAS:-OFF}" "${launcher[@]}" >/dev/null
    cmake --build "$work/build" --parallel "${EMBER_AARCH64_JOBS:-2}"
    ;;
  suite)
    work="$2"
    shift 2
    "${qemu[@]}" "$work/build/ember_tests_cpu" "$@"
    ;;
  mnist)
    work="$2" host="$3"
    arm="$work/build/mnist"
    rm -rf "$work/mnist"
    mkdir -p "$work/mnist"
    "$host" train --model tiny --epochs 1 --workers 0 --plain --seed 7 \
      --artifact-dir "$work/mnist/train" | tail -1
    "$host" infer --artifact-dir "$work/mnist/train" --count 10000 >"$work/mnist/host.txt"
    "${qemu[@]}" "$arm" infer --artifact-dir "$work/mnist/train" --count 10000 \
      >"$work/mnist/aarch64.txt"
    grep '^accuracy' "$work/mnist/host.txt" | sed 's/^/build machine: /'
    grep '^accuracy' "$work/mnist/aarch64.txt" | sed 's/^/aarch64 (qemu): /'
    # Same model, same images: the predictions may differ only where two classes' scores tie
    # to within the GEMMs' rounding (FMA and summation order differ between the kernels).
    total=$(grep -c '^image' "$work/mnist/host.txt")
    differ=$(diff <(grep '^image' "$work/mnist/host.txt") <(grep '^image' "$work/mnist/aarch64.txt") |
             grep -c '^<' || true)
    echo "predictions that differ: $differ of $total"
    if ((total != 10000)) || ((differ > 5)); then
      echo "run.sh mnist: the AArch64 build's predictions do not match the build machine's" >&2
      exit 1
    fi
    ;;
  *)
    sed -n '2,14p' "$0" >&2
    exit 2
    ;;
esac
