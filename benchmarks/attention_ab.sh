#!/usr/bin/env bash
# The fused attention kernels, builds against each other on a GPU machine (issue 30): bench_cuda
# attention of each build in alternating rounds, PyTorch's SDPA once a round, ncu's kernel times
# of the bf16 causal forward and backward for each build and for PyTorch's cuDNN kernels, and the
# first forward launch's scheduler counters. Raw lines (date, GPU, commit, build, round) under
# OUT; results/attention-fwd-ab-2026-12-02-h200.jsonl holds two such runs, merged, with the
# kernel times as _kernel_ncu lines (before_after_report.py and pair_report.py --builds read it).
#
#   BUILDS="before:aee321c:/path/bench_cuda after:1cde6cd:/path/bench_cuda" \
#     OUT=/tmp/out bash benchmarks/attention_ab.sh
# Environment: BUILDS (name:commit:binary ...), OUT, ROUNDS (3), TORCH_BENCH (this folder's
# bench_cuda_torch.py), PYTHON (python3).
set -u
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
py="${PYTHON:-python3}"
rounds="${ROUNDS:-3}"
torch_bench="${TORCH_BENCH:-$here/bench_cuda_torch.py}"
gpu="$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"
raw="$OUT/raw.jsonl"
: >"$raw"
tag() { # build round commit < JSON lines
  "$py" -c 'import json, sys, time
b, r, c, g = sys.argv[1:5]
for line in sys.stdin:
    if line.startswith("{"):
        x = json.loads(line)
        x.update(date=time.strftime("%Y-%m-%d"), gpu=g, commit=c, build=b, round=int(r),
                 workload=x.get("name"), impl=x.get("framework"))
        print(json.dumps(x))' "$1" "$2" "$3" "$gpu"
}
for r in $(seq "$rounds"); do
  for spec in $BUILDS; do
    IFS=: read -r b c bin <<<"$spec"
    timeout 60 "$bin" attention 2>>"$OUT/bench_err.txt" | tag "$b" "$r" "$c" >>"$raw"
  done
  timeout 90 "$py" "$torch_bench" attention 2>>"$OUT/bench_err.txt" | tag torch "$r" torch >>"$raw"
done
# bench_cuda attention launches 209 bf16 non-causal kernels (forward 3 + 5 x 20, then forward and
# backward 3 + 5 x 10) before the causal ones: skip those and 97 causal forwards, then profile 6
# forwards and 3 forward/backward pairs.
for spec in $BUILDS; do
  IFS=: read -r b c bin <<<"$spec"
  timeout 90 ncu --clock-control none -k regex:'attention_(forward|backward)_mma' \
    --launch-skip 306 --launch-count 12 --metrics gpu__time_duration.sum "$bin" attention \
    >"$OUT/ncu_$b.txt" 2>&1
  timeout 60 ncu --clock-control none -k regex:'attention_forward_mma' --launch-skip 306 \
    --launch-count 1 --section SpeedOfLight --section WarpStateStats --section SchedulerStats \
    --section Occupancy --metrics sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum \
    "$bin" attention >"$OUT/ncu_counters_$b.txt" 2>&1
done
timeout 90 ncu --clock-control none --metrics gpu__time_duration.sum "$py" -c '
import torch, torch.nn.functional as F
q, k, v = (torch.randn(8, 12, 1024, 64, device="cuda", dtype=torch.bfloat16).requires_grad_()
           for _ in range(3))
for causal in (False, True):  # 3 forward + backward each
    for _ in range(3):
        F.scaled_dot_product_attention(q, k, v, is_causal=causal).sum().backward()
torch.cuda.synchronize()' >"$OUT/ncu_torch.txt" 2>&1
