#!/usr/bin/env bash
# Issue 37, the Winograd path for 3×3 stride-1 convolutions (backends/cpu/winograd.cpp) on the
# GPU machine's Xeon: ONNX-imported ResNet-18 inference (bench_scale infer) of the commit before
# (BIN/base/bench_scale) and of the Winograd commit (BIN/wino/bench_scale: *wino*, its default,
# and *wino-off*, EMBER_CPU_WINOGRAD=0) in alternating rounds, ONNX Runtime in the same call.
#
#   benchmarks/cpu_winograd_h200.sh BIN OUT.jsonl [ROUNDS]     (default 2 rounds)
#
# Rows: batch 1 and batch 64 at one thread pinned to core 3 (taskset: unpinned one-thread runs
# on that machine spread by up to 40 % between rounds, section cpu-infer-pinned), batch 1 and
# 64 at 16 threads. Each timed by bench_scale (--min-time 1, three warm-up passes: the second
# keeps the weights packed and transformed); ONNX Runtime (cpu_scale_torch.py infer --configs
# ort, CPU provider, ORT_ENABLE_ALL) on the model exported there by cpu_scale_torch.py export,
# pinned the same way for one thread. The lines go to OUT.jsonl tagged "cfg": "CONFIG-rN" (ONNX
# Runtime's "peer") after a meta line; cpu_ab_report.py turns them into a RESULTS.md section.
# The binaries: cpu_scale.sh build's bench_scale of each commit (stripped), with BIN/*/COMMIT.
set -uo pipefail
bin="$1"
out="$2"
rounds="${3:-2}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
torch_py="${TORCH_PY:-$here/cpu_scale_torch.py}"
py="${PYTHON:-python3}"
tmp="$(mktemp -d)"
export OPENBLAS_NUM_THREADS=16 OMP_NUM_THREADS=16
"$py" "$torch_py" export "$tmp" --models resnet >&2 || echo "export failed" >&2
printf '{"meta": true, "date": "%s", "machine": "%s, %s CPUs", "before": "%s", "after": "%s", "torch": "%s", "peers": "ONNX Runtime %s, intra-op = the row'"'"'s threads, pinned like ember at one thread, same call"}\n' \
  "$(date -u '+%FT%H:%MZ')" "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')" \
  "$(nproc)" "$(cat "$bin/base/COMMIT")" "$(cat "$bin/wino/COMMIT")" \
  "$("$py" -c 'import torch; print(torch.__version__)' 2>/dev/null)" \
  "$("$py" -c 'import onnxruntime; print(onnxruntime.__version__)' 2>/dev/null)" >"$out"
row() {  # row CFG ENV... -- COMMAND...
  local cfg="$1"
  shift
  local envs=()
  while [[ $1 != -- ]]; do envs+=("$1"); shift; done
  shift
  env "${envs[@]}" "$@" | grep '^{' | sed "s/^{/{\"cfg\": \"$cfg\", /" >>"$out"
}
for ((r = 1; r <= rounds; r++)); do
  for cfg in base wino wino-off; do
    b="$bin/wino/bench_scale"
    [[ $cfg == base ]] && b="$bin/base/bench_scale"
    e=(EMBER_CPU_WINOGRAD=auto)
    [[ $cfg == wino-off ]] && e=(EMBER_CPU_WINOGRAD=0)
    c="$cfg-r$r"
    row "$c" "${e[@]}" -- taskset -c 3 "$b" infer --model resnet --batch 1 --threads 1 \
      --min-time 1 --max-reps 200 --warmup 3
    row "$c" "${e[@]}" -- "$b" infer --model resnet --batch 1 --threads 16 --min-time 1 \
      --max-reps 400 --warmup 3
    row "$c" "${e[@]}" -- "$b" infer --model resnet --batch 64 --threads 16 --min-time 1 \
      --max-reps 40 --warmup 3
    row "$c" "${e[@]}" -- taskset -c 3 "$b" infer --model resnet --batch 64 --threads 1 \
      --min-time 1 --max-reps 4 --warmup 3
    echo "cpu_winograd_h200.sh: round $r, $cfg done" >&2
  done
done
for spec in "1 1 taskset -c 3" "1 16" "64 16" "64 1 taskset -c 3"; do
  set -- $spec
  batch="$1" threads="$2"
  shift 2
  "$@" "$py" "$torch_py" infer --model resnet --batch "$batch" --threads "$threads" \
    --configs ort --onnx "$tmp" --min-time 1 --max-reps 200 | grep '^{' |
    sed 's/^{/{"cfg": "peer", /' >>"$out"
done
echo "cpu_winograd_h200.sh: done ($(grep -c cfg "$out") lines)" >&2
