#!/usr/bin/env bash
# A change's effect on the compile cost of the Dispatch probes (issue 36): each round compiles
# every probe against the tree of commit BEFORE and against the working tree, one after the
# other, so that both sides of a round meet the same load on a shared machine. -O2, ccache off,
# one compile to an object each, with /usr/bin/time -v. One JSON line a compile
# ("workload":"compile_dispatch_ab"; "variant" before or after; "round"; "cpu_s" user + system,
# "value" wall seconds, "peak_mb", "text_bytes" the object's text size, "load" the 1-minute load
# average when it started). The probes are compile_dispatch.sh's, on Dispatch:
#   tensor_snippet  benchmarks/compile_probes/tensor_snippet.cpp -DPROBE_DISPATCH
#   model_training  benchmarks/compile_probes/model_training.cpp -DPROBE_DISPATCH
#   transformer_lm  benchmarks/compile_probes/transformer_lm.cpp -DPROBE_DISPATCH
#   mnist_example   examples/mnist/main.cpp (a CPU-only build's flags)
# BEFORE's side compiles BEFORE's headers, probes and examples (git archive into a temporary
# directory); the after side names HEAD's commit, with "+" when the working tree differs from it.
#   benchmarks/compile_dispatch_ab.sh BEFORE [--rounds N] [--probes "a b ..."] [--out FILE.jsonl]
# benchmarks/compile_dispatch_report.py summarises such files (medians of the rounds).
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ $# -lt 1 || $1 == -* ]]; then
  echo "usage: $0 BEFORE [--rounds N] [--probes \"a b ...\"] [--out FILE.jsonl]" >&2
  exit 2
fi
before_rev="$1"
shift
rounds=3
probes="model_training transformer_lm"
out=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --probes) probes="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    *) echo "usage: $0 BEFORE [--rounds N] [--probes \"a b ...\"] [--out FILE.jsonl]" >&2
       exit 2 ;;
  esac
done
CXX="${CXX:-c++}"
export CCACHE_DISABLE=1
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/before"
git archive "$before_rev" include benchmarks/compile_probes examples | tar -x -C "$tmp/before"
before_commit=$(git rev-parse --short "$before_rev")
after_commit=$(git rev-parse --short HEAD)
# Only what the probes compile decides whether the after side is HEAD itself.
git diff --quiet HEAD -- include benchmarks/compile_probes examples || after_commit+="+"
compiler=$("$CXX" --version | head -1)
machine="$(uname -m), $(nproc) cores"

measure() {  # variant root probe round
  local variant=$1 root=$2 probe=$3 round=$4 src
  local flags=(-std=c++20 -O2 -I "$root/include")
  case $probe in
    tensor_snippet | model_training | transformer_lm)
      src=$root/benchmarks/compile_probes/$probe.cpp
      flags+=(-DPROBE_DISPATCH) ;;
    mnist_example)
      src=$root/examples/mnist/main.cpp
      flags+=(-DEMBER_VERSION_STRING='"bench"') ;;
    *) echo "unknown probe $probe" >&2; exit 2 ;;
  esac
  local load commit
  load=$(cut -d' ' -f1 /proc/loadavg)
  commit=$after_commit
  [[ $variant == before ]] && commit=$before_commit
  /usr/bin/time -v -o "$tmp/t.txt" "$CXX" "${flags[@]}" -c "$src" -o "$tmp/p.o"
  local wall cpu kb text
  wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$tmp/t.txt" |
    awk '{ n = split($1, p, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + p[i]; print s }')
  cpu=$(awk '/User time/ { u = $4 } /System time/ { s = $4 } END { printf "%.2f", u + s }' "$tmp/t.txt")
  kb=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$tmp/t.txt")
  text=$(size "$tmp/p.o" | awk 'NR == 2 { print $1 }')
  local line
  line=$(printf '{"workload":"compile_dispatch_ab","probe":"%s","impl":"dispatch","variant":"%s","round":%s,"cpu_s":%s,"value":%s,"peak_mb":%s,"text_bytes":%s,"commit":"%s","load":"%s","date":"%s","machine":"%s","compiler":"%s"}' \
    "$probe" "$variant" "$round" "$cpu" "$wall" "$(awk -v k="$kb" 'BEGIN { printf "%.0f", k / 1024 }')" \
    "$text" "$commit" "$load" "$(date -u +%Y-%m-%dT%H:%MZ)" "$machine" "$compiler")
  echo "$line"
  [[ -n $out ]] && echo "$line" >>"$out"
  return 0
}

for ((r = 1; r <= rounds; r++)); do
  for probe in $probes; do
    # Alternate which side goes first, so neither always meets the other's tail of load.
    if ((r % 2)); then
      measure before "$tmp/before" "$probe" "$r"
      measure after . "$probe" "$r"
    else
      measure after . "$probe" "$r"
      measure before "$tmp/before" "$probe" "$r"
    fi
  done
done
