#!/usr/bin/env bash
# ONNX-imported inference (bench_scale infer, cpu_scale.sh's models) of several bench_scale
# binaries, one per commit, in alternating rounds on this machine: each round runs every binary
# on every row in turn, so that a change in the machine's load falls on all of them alike.
#
#   benchmarks/cpu_infer_ab.sh OUT.jsonl ROUNDS LABEL=BINARY [LABEL=BINARY ...]
#
# Rows: batch 1 of the GPT (64 tokens), ResNet-18, the guide CNN and the MLP, batch 64 of the
# MLP and the CNN, at one thread (EMBER_NUM_THREADS=1, OPENBLAS_NUM_THREADS=1; THREADS=N: at N,
# with OpenBLAS's own threads still 1, as bench_scale sets ember's pool per row). Each row is
# timed by bench_scale (--min-time 2 --max-reps 30 --warmup 2, MAXREPS=N: --max-reps N and 20
# warm-up passes, for the small models' rows of 0.1 ms: the median of its timed passes,
# "ms" wall and "cpu_ms" the process's CPU time a pass); the lines are written to OUT.jsonl
# tagged "cfg": "LABEL-rN" and "round": N, after a meta line. cpu_infer_ab_report.py turns
# them into a RESULTS.md section. The binaries must be built with the ONNX models compiled in
# (cpu_scale.sh build); ROWS="gpt:1 resnet:1" runs only those rows.
set -euo pipefail
[[ $# -ge 3 ]] || { sed -n '2,15p' "$0"; exit 2; }
out="$1"
rounds="$2"
shift 2
[[ -e $out ]] && { echo "cpu_infer_ab.sh: $out exists (results are never overwritten)" >&2; exit 2; }
threads="${THREADS:-1}"
export EMBER_NUM_THREADS="$threads" OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
rows="${ROWS:-gpt:1 resnet:1 cnn:1 mlp:1 mlp:64 cnn:64}"
labels=()
for spec in "$@"; do labels+=("${spec%%=*}"); done
printf '{"meta": "cpu_infer_ab", "date": "%s", "host": "%s", "cpu": "%s", "load": "%s", "configs": "%s", "rows": "%s", "threads": %s, "env": "%s"}\n' \
  "$(date -u '+%F %H:%M UTC')" "$(hostname -s)" \
  "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')" \
  "$(cut -d' ' -f1-3 /proc/loadavg)" "${labels[*]}" "$rows" "$threads" \
  "$(env | grep -E '^(OPENBLAS_CORETYPE|EMBER_CPU_[A-Z_]+)=' | sort | tr '\n' ' ' | sed 's/ $//')" >"$out"
for ((r = 1; r <= rounds; r++)); do
  for spec in "$@"; do
    label="${spec%%=*}" bin="${spec#*=}"
    for row in $rows; do
      m="${row%%:*}" b="${row#*:}" seqargs=()
      [[ $m == gpt ]] && seqargs=(--seq 64)
      "$bin" infer --model "$m" --batch "$b" "${seqargs[@]}" --threads "$threads" --min-time 2 \
        --max-reps "${MAXREPS:-30}" --warmup "$([[ -n ${MAXREPS:-} ]] && echo 20 || echo 2)" |
        grep '^{' |
        sed "s/^{/{\"cfg\": \"$label-r$r\", \"round\": $r, /" >>"$out"
    done
    echo "cpu_infer_ab.sh: round $r, $label done" >&2
  done
done
