#!/usr/bin/env bash
# Compile cost of a program on ember::Dispatch against the same program on a concrete stack
# (issue 36): benchmarks/compile_probes/tensor_snippet.cpp (the README's tensor snippet; Cpu)
# and model_training.cpp (mnist's models and a training loop; Autodiff<Fusion<Cpu>>), each
# compiled to an object at -O2, ccache off, with /usr/bin/time -v: wall and CPU seconds and the
# compiler's peak memory. One JSON line a probe ("workload":"compile_dispatch").
#   benchmarks/compile_dispatch.sh [--runs N]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=1
[[ ${1:-} == --runs ]] && runs=$2
CXX="${CXX:-c++}"
export CCACHE_DISABLE=1
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
for probe in tensor_snippet model_training; do
  for impl in concrete dispatch; do
    flags=(-std=c++20 -O2 -I include)
    [[ $impl == dispatch ]] && flags+=(-DPROBE_DISPATCH)
    best_wall=""; cpu=""; peak=0
    for ((i = 0; i < runs; i++)); do
      /usr/bin/time -v -o "$tmp/t.txt" "$CXX" "${flags[@]}" -c "benchmarks/compile_probes/$probe.cpp" -o "$tmp/p.o"
      wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$tmp/t.txt" |
        awk '{ n = split($1, p, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + p[i]; print s }')
      c=$(awk '/User time/ { u = $4 } /System time/ { s = $4 } END { print u + s }' "$tmp/t.txt")
      kb=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$tmp/t.txt")
      if [[ -z $best_wall ]] || awk -v a="$wall" -v b="$best_wall" 'BEGIN { exit !(a < b) }'; then
        best_wall=$wall; cpu=$c
      fi
      ((kb > peak)) && peak=$kb
    done
    printf '{"workload":"compile_dispatch","probe":"%s","impl":"%s","unit":"s","value":%s,"cpu_s":%s,"peak_mb":%s,"runs":%s,"flags":"%s"}\n' \
      "$probe" "$impl" "$best_wall" "$cpu" "$(awk -v k="$peak" 'BEGIN { printf "%.0f", k / 1024 }')" "$runs" "${flags[*]}"
  done
done
