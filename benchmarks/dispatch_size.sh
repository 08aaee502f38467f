#!/usr/bin/env bash
# Size of the CPU-only runtime of a program on ember::Dispatch (issue 36 item 5): the README's
# tensor snippet (benchmarks/compile_probes/tensor_snippet.cpp, -DPROBE_DISPATCH, -O2) linked
# statically against a CPU-only build's ember_dispatch, ember_cpu and ember (OpenBLAS and the
# C++ runtime as shared libraries, not counted), then stripped. Two links, one JSON line each
# ("workload":"dispatch_size"): "plain" as a bare `c++ snippet.o libs` link, and "gc" with
# -Wl,--gc-sections (what a size-minded program passes: the template instances in ember's
# objects sit in sections of their own, and it drops those that nothing calls).
#   benchmarks/dispatch_size.sh BUILD_DIR [--out FILE.jsonl]
# BUILD_DIR: a build configured with -DEMBER_VULKAN=OFF -DEMBER_CUDA=OFF (the script builds
# its three libraries there with ninja); benchmarks/compile_dispatch_report.py puts the lines
# in RESULTS.md's section.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ $# -lt 1 ]]; then
  echo "usage: $0 BUILD_DIR [--out FILE.jsonl]" >&2
  exit 2
fi
build="$1"; shift
out=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) out="$2"; shift 2 ;;
    *) echo "usage: $0 BUILD_DIR [--out FILE.jsonl]" >&2; exit 2 ;;
  esac
done
if grep -q '^EMBER_\(VULKAN\|CUDA\):BOOL=ON' "$build/CMakeCache.txt"; then
  echo "$build has a GPU backend: configure it with -DEMBER_VULKAN=OFF -DEMBER_CUDA=OFF" >&2
  exit 2
fi
ninja -C "$build" ember_dispatch ember_cpu ember >/dev/null
CXX="${CXX:-c++}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
"$CXX" -std=c++20 -O2 -I include -DPROBE_DISPATCH -c benchmarks/compile_probes/tensor_snippet.cpp \
  -o "$tmp/snippet.o"
libs=("$build/libember_dispatch.a" "$build/libember_cpu.a" "$build/libember.a")
for link in plain gc; do
  flags=()
  [[ $link == gc ]] && flags=(-Wl,--gc-sections)
  "$CXX" "$tmp/snippet.o" -o "$tmp/snippet" "${flags[@]}" "${libs[@]}" -lopenblas -pthread
  "$tmp/snippet" >/dev/null  # it runs
  strip -o "$tmp/snippet.stripped" "$tmp/snippet"
  bytes=$(stat -c %s "$tmp/snippet.stripped")
  unstripped=$(stat -c %s "$tmp/snippet")
  line=$(printf '{"workload":"dispatch_size","link":"%s","unit":"bytes","value":%s,"unstripped":%s,"commit":"%s","date":"%s","machine":"%s","compiler":"%s","link_flags":"%s"}' \
    "$link" "$bytes" "$unstripped" "$commit" "$(date -u +%Y-%m-%dT%H:%MZ)" \
    "$(uname -m), $(nproc) cores" "$("$CXX" --version | head -1)" "${flags[*]:-}")
  echo "$line"
  [[ -n $out ]] && echo "$line" >>"$out"
done
