#!/usr/bin/env bash
# The firmware's three steps, for people and for CTest (tests/CMakeLists.txt):
#
#   run.sh model MNIST WORK   train the tiny MLP on the host with the mnist example (one epoch)
#                             and export it with 100 test images to WORK/data
#   run.sh build WORK CPU     cross-compile the firmware for CPU (cortex-m4 or cortex-m33)
#                             into WORK/CPU (needs gcc-arm-none-eabi and its newlib)
#   run.sh qemu WORK CPU      run it on qemu's board for CPU (mps2-an386 or mps2-an505); the
#                             exit status is the firmware's: 0 when it agrees with the host
set -euo pipefail
src="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$src/../.." && pwd)"

board_of() {
  case "$1" in
    cortex-m4) echo mps2-an386 ;;
    cortex-m33) echo mps2-an505 ;;
    *) echo "run.sh: unknown CPU '$1' (cortex-m4 or cortex-m33)" >&2; exit 2 ;;
  esac
}

case "${1:-}" in
  model)
    mnist="$2" work="$3"
    rm -rf "$work/train"
    "$mnist" train --model tiny --epochs 1 --workers 0 --plain --seed 7 \
      --artifact-dir "$work/train" | tail -1
    "$mnist" export --artifact-dir "$work/train" --out "$work/data" --count 100
    ;;
  build)
    work="$2" cpu="$3"
    board_of "$cpu" >/dev/null
    launcher=()
    command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
    cmake -S "$src" -B "$work/$cpu" -G Ninja -DCMAKE_BUILD_TYPE=MinSizeRel \
      -DCMAKE_TOOLCHAIN_FILE="$root/cmake/arm-none-eabi.cmake" -DEMBER_ARM_CPU="$cpu" \
      -DEMBER_FIRMWARE_DATA="$work/data" "${launcher[@]}" >/dev/null
    cmake --build "$work/$cpu"
    ;;
  qemu)
    work="$2" cpu="$3"
    board=$(board_of "$cpu")
    qemu-system-arm -M "$board" -cpu "$cpu" -nographic -monitor none -serial null \
      -semihosting-config enable=on,target=native -kernel "$work/$cpu/firmware.elf"
    ;;
  *)
    sed -n '2,9p' "$0" >&2
    exit 2
    ;;
esac
