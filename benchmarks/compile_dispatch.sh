#!/usr/bin/env bash
# Compile cost of a program on ember::Dispatch against the same program on a concrete stack
# (issue 36), each compiled to an object at -O2, ccache off, with /usr/bin/time -v: wall and CPU
# seconds and the compiler's peak memory. One JSON line a probe and implementation
# ("workload":"compile_dispatch"):
#   tensor_snippet  benchmarks/compile_probes/tensor_snippet.cpp, the README's tensor snippet
#                   (concrete: Cpu)
#   model_training  benchmarks/compile_probes/model_training.cpp, mnist's models and a training
#                   loop (concrete: Autodiff<Fusion<Cpu>>)
#   mnist_example   examples/mnist/main.cpp, the model and the Learner as the example builds them
#                   (dispatch: the file as it is; concrete: the file of commit 49bce02, the last
#                   one on Autodiff<Cpu> and Cpu, put beside it for the run), with the flags of a
#                   CPU-only build (no EMBER_CUDA: the issue's "CPU stacks" figure)
#   benchmarks/compile_dispatch.sh [--runs N] [--probes "a b ..."] [--out FILE.jsonl]
# --out also appends the lines to FILE; benchmarks/compile_dispatch_report.py turns such a file
# into RESULTS.md's section.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=1
probes="tensor_snippet model_training mnist_example"
out=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --probes) probes="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    *) echo "usage: $0 [--runs N] [--probes \"a b ...\"] [--out FILE.jsonl]" >&2; exit 2 ;;
  esac
done
CXX="${CXX:-c++}"
export CCACHE_DISABLE=1
tmp="$(mktemp -d)"
before=examples/mnist/.compile_probe_before.cpp
trap 'rm -rf "$tmp" "$before"' EXIT
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
for probe in $probes; do
  for impl in concrete dispatch; do
    flags=(-std=c++20 -O2 -I include)
    case $probe in
      mnist_example)
        if [[ $impl == concrete ]]; then
          git show 49bce02:examples/mnist/main.cpp >"$before"
          src=$before
        else
          src=examples/mnist/main.cpp
        fi
        flags+=(-DEMBER_VERSION_STRING='"bench"') ;;
      *)
        src=benchmarks/compile_probes/$probe.cpp
        [[ $impl == dispatch ]] && flags+=(-DPROBE_DISPATCH) ;;
    esac
    best_wall=""; cpu=""; peak=0
    for ((i = 0; i < runs; i++)); do
      /usr/bin/time -v -o "$tmp/t.txt" "$CXX" "${flags[@]}" -c "$src" -o "$tmp/p.o"
      wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$tmp/t.txt" |
        awk '{ n = split($1, p, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + p[i]; print s }')
      c=$(awk '/User time/ { u = $4 } /System time/ { s = $4 } END { print u + s }' "$tmp/t.txt")
      kb=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$tmp/t.txt")
      if [[ -z $best_wall ]] || awk -v a="$wall" -v b="$best_wall" 'BEGIN { exit !(a < b) }'; then
        best_wall=$wall; cpu=$c
      fi
      ((kb > peak)) && peak=$kb
    done
    line=$(printf '{"workload":"compile_dispatch","probe":"%s","impl":"%s","unit":"s","value":%s,"cpu_s":%s,"peak_mb":%s,"runs":%s,"commit":"%s","load":"%s","flags":"%s"}' \
      "$probe" "$impl" "$best_wall" "$cpu" "$(awk -v k="$peak" 'BEGIN { printf "%.0f", k / 1024 }')" \
      "$runs" "$commit" "$(cut -d' ' -f1 /proc/loadavg)" "${flags[*]//\"/}")
    echo "$line"
    [[ -n $out ]] && echo "$line" >>"$out"
  done
done
