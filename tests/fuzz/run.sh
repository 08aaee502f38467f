#!/usr/bin/env bash
# Builds and runs ember's libFuzzer targets (tests/fuzz/fuzz_<target>.cpp), for people and for CTest:
#
#   tests/fuzz/run.sh --list                        the targets
#   tests/fuzz/run.sh --build BUILD                 configure and build every target in BUILD/fuzz
#   tests/fuzz/run.sh TARGET BUILD SECONDS [WORK]   build TARGET, then fuzz it for SECONDS
#
# BUILD is any directory to build in (CTest passes ember's build directory; the fuzz build lives
# in BUILD/fuzz, a project of its own compiled with clang: tests/fuzz/CMakeLists.txt). The run starts
# from the committed seeds in tests/fuzz/corpus/TARGET and the reproducers in tests/fuzz/crashes/TARGET,
# grows a working corpus in WORK (default BUILD/fuzz/run/TARGET), keeps libFuzzer's output in
# WORK/log.txt, and fails when libFuzzer finds a crash, a sanitizer report, a leak, a timeout or
# an allocation over the memory limit: the input that caused it is left in WORK/ (crash-*,
# leak-*, timeout-*, oom-*). Once the bug is fixed, copy it to tests/fuzz/crashes/TARGET, where
# tests/test_fuzz_regressions.cpp replays it with the normal suite. tests/fuzz/run_all.sh runs every
# target at once.
#
# Environment: EMBER_FUZZ_CXX (the clang++ to use), EMBER_FUZZ_NO_BUILD=1 (the targets are built
# already: CTest builds them once in the fuzz.build test), EMBER_FUZZ_ARGS (more libFuzzer flags).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

targets() {
  for f in "$here"/fuzz_*.cpp; do
    f="${f##*/fuzz_}"
    echo "${f%.cpp}"
  done
}

build() {  # build BUILD [TARGET]
  local dir="$1/fuzz"
  if [[ ! -f $dir/build.ninja ]]; then
    local cxx="${EMBER_FUZZ_CXX:-$(command -v clang++ || command -v clang++-14 || true)}"
    [[ -n $cxx ]] || { echo "run.sh: clang++ not found (Debian: clang libclang-rt-14-dev)" >&2; exit 2; }
    local launcher=()
    command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
    cmake -S "$here" -B "$dir" -G Ninja -DCMAKE_CXX_COMPILER="$cxx" "${launcher[@]}" >/dev/null
  fi
  cmake --build "$dir" ${2:+--target "fuzz_$2"}
}

case "${1:-}" in
  --list) targets; exit 0 ;;
  --build) [[ $# -eq 2 ]] || { echo "usage: run.sh --build BUILD" >&2; exit 2; }
           build "$2"; exit 0 ;;
esac
[[ $# -ge 3 ]] || { echo "usage: run.sh TARGET BUILD SECONDS [WORK] (or --list, --build BUILD)" >&2; exit 2; }
target="$1" builddir="$2" seconds="$3" work="${4:-$2/fuzz/run/$1}"
[[ -f $here/fuzz_$target.cpp ]] ||
  { echo "run.sh: unknown target '$target' (tests/fuzz/run.sh --list)" >&2; exit 2; }
[[ ${EMBER_FUZZ_NO_BUILD:-0} == 1 ]] || build "$builddir" "$target"

mkdir -p "$work/corpus" "$here/corpus/$target" "$here/crashes/$target"
seeds=("$here/corpus/$target" "$here/crashes/$target")
# More seeds where Debian's libonnx-testdata is installed: ONNX's node test models and tensors.
# Only for runs of a minute or more: libFuzzer runs every seed before it looks at the clock, and
# the ~900 models, each checked in a forked child, outlast CTest's short runs on a loaded machine.
[[ $target == onnx && $seconds -ge 60 && -d /usr/share/libonnx-testdata/data/node ]] &&
  seeds+=(/usr/share/libonnx-testdata/data/node)
dict=()
[[ -f $here/dict/$target.dict ]] && dict=(-dict="$here/dict/$target.dict")
# -rss_limit_mb also bounds a single allocation (libFuzzer's malloc limit defaults to it): a
# parser that believes a hostile size asks for more and is reported.
# shellcheck disable=SC2086
"$builddir/fuzz/fuzz_$target" -max_total_time="$seconds" -max_len=65536 -rss_limit_mb=2048 \
  -timeout=10 -artifact_prefix="$work/" -print_final_stats=1 "${dict[@]}" ${EMBER_FUZZ_ARGS:-} \
  "$work/corpus" "${seeds[@]}" >"$work/log.txt" 2>&1 || { tail -60 "$work/log.txt"; exit 1; }
grep -E '^(Done|stat::)' "$work/log.txt"
grep -o 'cov: [0-9]* ft: [0-9]*' "$work/log.txt" | tail -1
