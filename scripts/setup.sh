#!/usr/bin/env bash
# Installs what building and testing ember needs on Debian 12, with apt-get.
# Run as root (or as a user with sudo). Idempotent and quiet: when every package is already
# installed it does nothing; otherwise it prints one line and apt's log only on failure.
#
#   bash scripts/setup.sh            build + test dependencies
#   bash scripts/setup.sh --bench    also PyTorch, NumPy and Python's msgpack (benchmarks, regenerating fixtures)
#   bash scripts/setup.sh --aarch64  also the Arm target's zlib and SQLite (the AArch64 suites; test.sh passes it)
set -euo pipefail

packages=(
  build-essential   # g++ 12, make, libc headers
  cmake             # 3.25
  ninja-build
  ccache
  pkg-config        # finds OpenBLAS
  libopenblas-dev   # CPU matmul
  catch2            # tests (v2, prebuilt main)
  nlohmann-json3-dev  # JSON records; tests read their JSON fixtures
  libmsgpack-cxx-dev  # NamedMpk records (MessagePack)
  libcli11-dev      # the examples' and ember-onnx's command lines
  zlib1g-dev        # gzip-compressed records
  libonnx-dev libprotobuf-dev  # ember-onnx: ONNX's protobuf classes, checker, shape inference
  libsqlite3-dev    # SqliteDataset
  libstb-dev        # stb_image: ImageFolderDataset
  dataset-fashion-mnist  # the mnist example's data (/usr/share/datasets/fashion-mnist)
  fortunes          # the text examples' corpus (/usr/share/games/fortunes)
  tmux              # the dashboard test drives the Learner in a terminal
  doxygen           # the API reference (docs/Doxyfile), built and checked by CTest
  gcc-arm-none-eabi libnewlib-arm-none-eabi libstdc++-arm-none-eabi-newlib  # firmware
  qemu-system-arm   # runs the firmware on emulated Cortex-M boards (tests)
  emscripten        # the WebAssembly build of the web classifier
  nodejs chromium   # its end-to-end test (Playwright drives headless Chromium)
  clang libclang-rt-14-dev  # libFuzzer: the parsers' fuzz tests (tests/fuzz/); Clang 14 for the consumer tests
  clang-15 clang-16  # the consumer tests compile ember's headers with each of Debian's Clangs (14, 15, 16)
  g++-aarch64-linux-gnu qemu-user  # the NEON kernels cross-compiled, run under qemu-aarch64
  libvulkan-dev libvulkan-volk-dev glslc  # the Vulkan backend (loaded through volk at run time)
  libshaderc-dev glslang-dev spirv-tools  # Fusion<Vulkan>: GLSL compiled to SPIR-V at run time
  glslang-tools     # glslang-dev's CMake package names /usr/bin/glslangValidator and fails without it
  spirv-headers     # spirv.hpp: the cooperative-matrix SPIR-V rewrite (backends/vulkan/spirv_coop.cpp)
  mesa-vulkan-drivers  # lavapipe: the Vulkan tests run on the CPU
)
# npm: Debian's package, unless a Node.js from elsewhere already brought its own (the two conflict).
command -v npm >/dev/null 2>&1 || packages+=(npm)
for arg in "$@"; do
  case "$arg" in
    --bench) packages+=(python3 python3-numpy python3-torch python3-msgpack) ;;
    # The target's libraries for the AArch64 cross build's suites (-DEMBER_TEST_AARCH64=ON),
    # from Debian's multiarch archive.
    --aarch64) packages+=(zlib1g-dev:arm64 libsqlite3-dev:arm64) ;;
    *) echo "setup.sh: unknown argument '$arg' (known: --bench, --aarch64)" >&2; exit 2 ;;
  esac
done

missing=()
# One status line per installed architecture of a package (where arm64 ones were added for
# the AArch64 cross build: docs/platforms.md).
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
    missing+=("$p")
  fi
done
if ((${#missing[@]} == 0)); then
  exit 0
fi

sudo=()
if [[ $(id -u) -ne 0 ]]; then
  if command -v sudo >/dev/null 2>&1; then
    sudo=(sudo)
  else
    echo "setup.sh: missing packages (${missing[*]}); run as root to install them" >&2
    exit 1
  fi
fi

echo "setup.sh: installing ${missing[*]}"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
export DEBIAN_FRONTEND=noninteractive
# The arm64 packages (the AArch64 cross build's target libraries) come from Debian's multiarch
# archive, which apt reads only once dpkg knows the architecture.
if [[ " ${missing[*]} " == *":arm64 "* ]] && ! dpkg --print-foreign-architectures | grep -qx arm64; then
  "${sudo[@]}" dpkg --add-architecture arm64
fi
if ! { "${sudo[@]}" apt-get update -qq &&
       "${sudo[@]}" apt-get install -y -qq --no-install-recommends -o Dpkg::Use-Pty=0 \
         "${missing[@]}"; } >"$log" 2>&1; then
  cat "$log" >&2
  echo "setup.sh: apt-get failed" >&2
  exit 1
fi
