#!/usr/bin/env bash
# ember's CUDA backend beside PyTorch on the same GPU, in one run (ANCHORS.md, GPU table):
#   bash benchmarks/cuda.sh [BENCH_CUDA_BINARY]
# Runs bench_cuda and bench_cuda_torch.py workload by workload, alternating, and prints their
# JSON lines and a Markdown table with the ratios (higher is better for ember on every row:
# throughputs ember/torch, times torch/ember).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bench="${1:-$here/../build/benchmarks/bench_cuda}"
py="${PYTHON:-python3}"
out="$(mktemp)"
for w in gemm softmax overhead train fusion quant attention; do
  "$bench" "$w" | tee -a "$out"
  "$py" "$here/bench_cuda_torch.py" "$w" | tee -a "$out"
done
"$py" - "$out" <<'PY'
import json, sys
rows = {}
for line in open(sys.argv[1]):
    line = line.strip()
    if line.startswith("{"):
        r = json.loads(line)
        rows.setdefault(r["name"], {})[r["framework"]] = r
print("\n| workload | ember | PyTorch | ratio |\n| --- | --- | --- | --- |")
for name, r in rows.items():
    e, t = r.get("ember"), r.get("torch")
    if not e or not t:
        continue
    unit = e["unit"]
    better_high = unit in ("TFLOP/s", "GB/s")
    ratio = e["value"] / t["value"] if better_high else t["value"] / e["value"]
    print(f"| {name} | {e['value']:.3f} {unit} | {t['value']:.3f} {unit} | {ratio:.2f}x |")
PY
