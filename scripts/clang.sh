#!/usr/bin/env bash
# Builds ember with Clang 14 (Debian 12's clang++) and -Wall -Wextra: the libraries, ember-onnx,
# the examples and the whole test program ember_tests; any warning fails the script. Then runs
# the CPU op, module, loss and autodiff suites of that ember_tests (docs/platforms.md, "Clang
# for the whole build"). CI runs it after the sanitizer step (scripts/test.sh).
#
#   scripts/clang.sh [BUILD_DIR]      default build-clang
#
# EMBER_CLANG_CXX=clang++-16 (or another Clang) builds with that compiler instead;
# EMBER_CLANG_TESTS replaces the Catch2 test filter (an empty one runs every case; the cases carry
# their file's name as a tag, [#test_gemm]).
# EMBER_CLANG_BUILD_TYPE picks the CMake build type (default Release) and EMBER_CLANG_OPT_FLAGS
# replaces that type's compile flags: EMBER_CLANG_BUILD_TYPE=Debug EMBER_CLANG_OPT_FLAGS='-O0 -g0'
# checks the warnings of another Clang without the optimizer's CPU time (the warnings come from the
# front end; -O0 skips the optimizer, -g0 the debug information; ember_cpu's own -O3 still
# applies to the CPU backend's files), with asserts on.
# CUDA is off (nvcc compiles the kernels with GCC as its host compiler whatever compiles the C++
# files), and so are the benchmarks. Warnings are counted from the build's output rather than
# made errors with -Werror, so that one build lists them all (ccache replays a cached file's
# warnings); the third-party headers (Catch2, nlohmann-json, CLI11, Vulkan, ...) are system
# headers, whose warnings Clang does not show.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build="${1:-build-clang}"
cxx="${EMBER_CLANG_CXX:-clang++-14}"
type="${EMBER_CLANG_BUILD_TYPE:-Release}"
opt=()
[[ -n ${EMBER_CLANG_OPT_FLAGS:-} ]] && opt=("-DCMAKE_CXX_FLAGS_${type^^}=$EMBER_CLANG_OPT_FLAGS")
start=$SECONDS

export CCACHE_DIR="${CCACHE_DIR:-${HOME:-/root}/.cache/ccache}"
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S . -B "$build" -G Ninja "-DCMAKE_BUILD_TYPE=$type" "-DCMAKE_CXX_COMPILER=$cxx" \
  "-DCMAKE_CXX_FLAGS=-Wall -Wextra" "${opt[@]}" -DEMBER_CUDA=OFF -DEMBER_BUILD_BENCHMARKS=OFF \
  "${launcher[@]}" >/dev/null
log="$build/clang-build.log"
cmake --build "$build" --parallel "${EMBER_JOBS:-$(nproc)}" 2>&1 | tee "$log"
if warnings=$(grep -E '(warning|error):' "$log"); then
  echo "clang.sh: $cxx warns about ember's code ($(grep -c 'warning:' <<<"$warnings") warnings):" >&2
  grep -A3 -E '(warning|error):' "$log" >&2
  exit 1
fi
echo "clang.sh: built with $cxx, no warning, in $(( (SECONDS - start) / 60 )) min $(( (SECONDS - start) % 60 )) s"

# The suites of the AArch64 test program (tests/aarch64: CPU ops, GEMM, module ops, losses,
# kernels, autodiff) and the modules' gradients, on every stack of this build (Cpu,
# Fusion<Cpu>, Dispatch, the autodiff stacks; Vulkan on lavapipe), in one process. -# tags each
# case with its file's name. Run where CTest runs the cases (files they write land there).
suites=(test_basic_ops test_float_ops test_int_bool_ops test_numeric_ops test_activation test_gemm
        test_module_ops test_nn_loss test_cpu_kernels test_autodiff test_autodiff_ops
        test_autodiff_modules)
filter=$(printf '[#%s],' "${suites[@]}")
spec=("${EMBER_CLANG_TESTS-${filter%,}}")
[[ -n ${spec[0]} ]] || spec=()
(cd "$build/tests" && ./ember_tests -# "${spec[@]}")
echo "clang.sh: done in $(( (SECONDS - start) / 60 )) min $(( (SECONDS - start) % 60 )) s"
