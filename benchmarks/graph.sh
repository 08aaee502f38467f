#!/usr/bin/env bash
# Issue 31's figures in one run on a GPU machine: ember's training steps (MLP and guide CNN,
# batch 64 and 1024, Adam) eager and replayed as CUDA graphs, beside PyTorch's eager, fused-Adam
# and whole-step CUDA-graph steps, in alternating rounds; then the per-op overhead of a replayed
# chain of 1-element adds against eager. Raw JSON lines go to OUT; graph_report.py makes the
# RESULTS.md section from them.
#   bash benchmarks/graph.sh BENCH_CUDA_BINARY OUT.jsonl [ROUNDS]
# With BENCH_VULKAN=<bench_vulkan binary> in the environment, each round also times the same
# steps and chain on Vulkan (ember::vulkan::capture), recorded as framework "ember-vulkan".
# (bench_cuda's standard error, with each captured step's node count, goes to OUT.jsonl.stderr)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bench="$1"
out="$2"
rounds="${3:-2}"
py="${PYTHON:-python3}"
bash "$here/gpu_meta.sh" > "$out"
for r in $(seq "$rounds"); do
  "$bench" train 2>> "$out.stderr" | tee -a "$out"
  "$py" "$here/bench_cuda_torch.py" train_graph | tee -a "$out"
  "$bench" overhead | tee -a "$out"
  if [[ -n ${BENCH_VULKAN:-} ]]; then
    for what in train overhead; do
      "$BENCH_VULKAN" "$what" 2>> "$out.stderr" |
        sed 's/"framework": "ember"/"framework": "ember-vulkan"/' | tee -a "$out"
    done
  fi
  "$py" "$here/bench_cuda_torch.py" overhead | tee -a "$out"
done
"$py" "$here/graph_report.py" --jsonl "$out" --stderr "$out.stderr"
