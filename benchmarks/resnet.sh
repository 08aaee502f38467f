#!/usr/bin/env bash
# ResNet-18 (examples/resnet) beside its PyTorch peer (benchmarks/resnet_torch.py) on one GPU, from
# the same initial weights (PyTorch's initialisation, loaded by ember with --init-from):
#   bash benchmarks/resnet.sh [RESNET_BINARY] [BATCH]        (defaults: build/examples/resnet, 256)
# Environment: BACKENDS (ember's devices, default "cuda cuda+fusion"), TORCH_ARGS (extra arguments
# of `resnet_torch.py time`, e.g. "--precision bf16 --configs eager,cuda_graph"), PYTHON, OUT (a
# file the raw JSON lines are appended to). Prints every JSON line, then a table: each ember
# device's time per step (best of 5 rounds of 20 steps, as PyTorch's) against PyTorch's best f32
# configuration and its best overall.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
resnet="${1:-$here/../build/examples/resnet}"
batch="${2:-256}"
py="${PYTHON:-python3}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
out="$tmp/lines"
"$py" "$here/resnet_torch.py" weights "$tmp/resnet18.pt"
for b in ${BACKENDS:-cuda cuda+fusion}; do
  "$resnet" --synthetic --backend "$b" --batch "$batch" --warmup 5 --steps 20 --rounds 5 \
    --init-from "$tmp/resnet18.pt" | grep '"framework"' | tee -a "$out"
done
# shellcheck disable=SC2086  # TORCH_ARGS is a list of arguments
"$py" "$here/resnet_torch.py" time --batch "$batch" --weights "$tmp/resnet18.pt" \
  ${TORCH_ARGS:-} | tee -a "$out"
[[ -n ${OUT:-} ]] && cat "$out" >> "$OUT"
"$py" - "$out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
torch = [r for r in rows if r["framework"] == "torch" and not r["name"].endswith("_best")]
f32 = [r for r in torch if "_f32_" in r["name"]]
best_f32 = min(f32, key=lambda r: r["value"]) if f32 else None
best = min(torch, key=lambda r: r["value"]) if torch else None
print("\n| ember | ms/step | PyTorch best f32 (ms) | ratio | PyTorch best overall (ms) | ratio |")
print("| --- | --- | --- | --- | --- | --- |")
for e in (r for r in rows if r["framework"] == "ember"):
    cells = [e["name"], f"{e['value']:.3f}"]
    for t in (best_f32, best):
        cells += [f"{t['value']:.3f} ({t['name']})", f"{t['value'] / e['value']:.2f}x"] if t \
            else ["-", "-"]
    print("| " + " | ".join(cells) + " |")
print("\nratio: PyTorch's time / ember's (above 1: ember is faster)")
PY
