#!/usr/bin/env bash
# Builds and runs a private test binary from a few test sources, against the libraries of an
# existing Release build (build/ by default): lets several people work on separate suites
# without rebuilding the backend or linking each other's half-written tests.
#   scripts/dev-test.sh NAME tests/test_a.cpp [src/x/y.cpp ...] [-- catch2 args]
# Sources of not-yet-built libraries may be listed too; EMBER_DEV_LDFLAGS adds link flags
# (e.g. "-lsqlite3"). EMBER_DEV_VULKAN=DIR links DIR/libember_vulkan.a and its shaderc/glslang
# libraries and defines EMBER_VULKAN (for the Vulkan suites; a build dir of your own branch).
set -euo pipefail
cd "$(dirname "$0")/.."
name=$1; shift
srcs=()
while [[ $# -gt 0 && $1 != "--" ]]; do srcs+=("$1"); shift; done
[[ ${1:-} == "--" ]] && shift
lib=${EMBER_DEV_LIBS:-build}
out=build-dev/$name
flags=(-std=c++20 -O1 -g0 -Iinclude -Itests -DEMBER_FIXTURE_DIR="\"$PWD/tests/fixtures\"")
if [[ -n ${EMBER_DEV_SANITIZE:-} ]]; then  # against build-asan's libraries
  lib=${EMBER_DEV_LIBS:-build-asan}
  out=$out-asan
  flags+=(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
fi
vk=()
if [[ -n ${EMBER_DEV_VULKAN:-} ]]; then
  flags+=(-DEMBER_VULKAN=1)
  out=$out-vulkan
  L=/usr/lib/x86_64-linux-gnu
  vk=("$EMBER_DEV_VULKAN/libember_vulkan.a" $L/libshaderc_combined.a $L/libSPIRV.a $L/libglslang.a
      $L/libMachineIndependent.a $L/libOGLCompiler.a $L/libOSDependent.a $L/libGenericCodeGen.a
      $L/libSPIRV-Tools-opt.a $L/libSPIRV-Tools.a -ldl)
fi
mkdir -p "$out"
objs=()
for s in tests/harness.cpp "${srcs[@]}"; do
  o=$out/$(basename "${s%.cpp}").o
  if [[ ! -f $o || $s -nt $o || -n $(find include tests -name '*.hpp' -newer "$o" -print -quit) ]]; then
    ccache g++ "${flags[@]}" -c "$s" -o "$o"
  fi
  objs+=("$o")
done
g++ "${flags[@]}" -o "$out/tests" "${objs[@]}" "${vk[@]}" "$lib/libember_cpu.a" "$lib/libember.a" /usr/lib/libCatch2WithMain.a \
  ${EMBER_DEV_LDFLAGS:-} -lopenblas -lz -lpthread
exec "$out/tests" "$@"
