#!/usr/bin/env bash
# The firmware's three steps, for people and for CTest (tests/CMakeLists.txt):
#
#   run.sh model MNIST WORK   train the tiny MLP on the host with the mnist example (one epoch)
#                             and export it with 100 test images to WORK/data
#   run.sh model-int8 MNIST_QUANTIZE WORK
#                             quantize that model to int8 (static activations, calibrated on
#                             1024 training images) and export it the same way to WORK/data-int8
#   run.sh build WORK CPU [int8]
#                             cross-compile the firmware for CPU (cortex-m4 or cortex-m33) into
#                             WORK/CPU, or with the int8 model into WORK/CPU-int8 (needs
#                             gcc-arm-none-eabi and its newlib)
#   run.sh qemu WORK CPU [int8]
#                             run it on qemu's board for CPU (mps2-an386 or mps2-an505); the
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
  model-int8)
    quantize="$2" work="$3"
    "$quantize" --artifact-dir "$work/train" --export "$work/data-int8" --count 100 | tail -3
    ;;
  build)
    work="$2" cpu="$3" data="$2/data" dir="$2/$3"
    [[ "${4:-}" == int8 ]] && data="$work/data-int8" dir="$work/$cpu-int8"
    board_of "$cpu" >/dev/null
    launcher=()
    command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
    cmake -S "$src" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=MinSizeRel \
      -DCMAKE_TOOLCHAIN_FILE="$root/cmake/arm-none-eabi.cmake" -DEMBER_ARM_CPU="$cpu" \
      -DEMBER_FIRMWARE_DATA="$data" "${launcher[@]}" >/dev/null
    cmake --build "$dir"
    ;;
  qemu)
    work="$2" cpu="$3" dir="$2/$3"
    [[ "${4:-}" == int8 ]] && dir="$work/$cpu-int8"
    board=$(board_of "$cpu")
    qemu-system-arm -M "$board" -cpu "$cpu" -nographic -monitor none -serial null \
      -semihosting-config enable=on,target=native -kernel "$dir/firmware.elf"
    ;;
  *)
    sed -n '2,16p' "$0" >&2
    exit 2
    ;;
esac
