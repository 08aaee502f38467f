#!/usr/bin/env bash
# Builds and runs one libFuzzer target for a bounded time, for people and for CTest:
#
#   fuzz/run.sh TARGET LIBDIR SECONDS [WORK]
#
# TARGET: onnx, safetensors or pytorch (fuzz/fuzz_TARGET.cpp). LIBDIR: a build directory holding
# libember.a (the parsers' own sources are compiled here with coverage and sanitizers; the rest
# of ember links from the library). The run starts from the committed seeds in
# fuzz/corpus/TARGET and the crashes kept in fuzz/crashes/TARGET, grows a working corpus in
# WORK (default LIBDIR/fuzz/TARGET) and fails when libFuzzer finds a crash, a sanitizer report
# or a leak; the input that caused it is left in WORK/crash-* — copy it to fuzz/crashes/TARGET
# once fixed, where tests/test_onnx.cpp and test_safetensors.cpp replay it.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
target="$1" libdir="$2" seconds="$3" work="${4:-$2/fuzz/$1}"
case "$target" in
  onnx) sources=("$root"/tools/onnx/protobuf.cpp "$root"/tools/onnx/model.cpp) ;;
  safetensors) sources=("$root"/src/record/safetensors.cpp) ;;
  pytorch) sources=("$root"/src/record/pytorch/*.cpp) ;;
  *) echo "run.sh: unknown target '$target' (onnx, safetensors or pytorch)" >&2; exit 2 ;;
esac
cxx="${EMBER_FUZZ_CXX:-$(command -v clang++ || command -v clang++-14)}"
mkdir -p "$work/corpus" "$root/fuzz/crashes/$target"
json=$(dirname "$(find /usr/include -name json.hpp -path '*nlohmann*' | head -1)")/..
"$cxx" -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  -I"$root/include" -I"$root/src/record" -I"$root/src/record/pytorch" -I"$json" \
  "$here/fuzz_$target.cpp" "${sources[@]}" "$libdir/libember.a" -lz -o "$work/fuzz_$target"
# More seeds where Debian's libonnx-testdata is installed: ONNX's node test models and tensors.
seeds=("$here/corpus/$target" "$here/crashes/$target")
[[ $target == onnx && -d /usr/share/libonnx-testdata/data/node ]] &&
  seeds+=(/usr/share/libonnx-testdata/data/node)
"$work/fuzz_$target" -max_total_time="$seconds" -max_len=65536 -rss_limit_mb=2048 \
  -timeout=10 -artifact_prefix="$work/" -print_final_stats=1 "$work/corpus" "${seeds[@]}" \
  >"$work/log.txt" 2>&1 || { tail -40 "$work/log.txt"; exit 1; }
tail -12 "$work/log.txt"
