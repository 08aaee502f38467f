#!/usr/bin/env bash
# ResNet-18's bf16 training step (batch 256) eager and replayed as one captured CUDA graph
# (`resnet --synthetic --graph`), with the images stored NCHW and channels-last, beside
# PyTorch's whole-step CUDA graph (both layouts), in one run on one GPU,
# from the same initial weights; the 20-step losses of PyTorch, ember eager and ember's captured
# step on one fixed batch; then the GPT's bf16 step (8 x 1024 tokens) eager and replayed
# (`gpt train --bench --graph`) beside PyTorch's CUDA graph. Raw JSON lines as gpu_train.sh's:
#   bash benchmarks/gpu_models_graph.sh BUILD OUT.jsonl
# BUILD holds examples/resnet and examples/gpt. gpu_models_report.py makes RESULTS.md's
# "gpu-models" section from OUT.jsonl (with earlier runs). Environment: PYTHON, COMMIT (for the
# meta line), GPT (0 leaves the GPT's rows out), PEAK_TFLOPS (989), RESNET_TORCH_CONFIGS (PyTorch's
# ResNet configurations, resnet_torch.py's --configs: cuda_graph; compile and compile_graph
# autotune for minutes).
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
build="$1"
out="$2"
py="${PYTHON:-python3}"
bash "$here/gpu_meta.sh" > "$out"
# keep, resnet_losses
source "$here/gpu_lib.sh"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

"$py" "$here/resnet_torch.py" weights "$tmp/resnet18.pt" >&2
# RESNET_BACKENDS (default "cuda+fusion cuda") and RESNET_EMBER_LAYOUTS ("nchw channels_last":
# the images stored channels-last with resnet --channels-last) choose ember's rows.
for b in ${RESNET_BACKENDS:-cuda+fusion cuda}; do
  for layout in ${RESNET_EMBER_LAYOUTS:-nchw channels_last}; do
    cl=""
    [[ $layout == channels_last ]] && cl=--channels-last
    for graph in "" --graph; do
      "$build/examples/resnet" --synthetic --backend "$b" --batch 256 --warmup 5 --steps 20 \
        --rounds 5 --init-from "$tmp/resnet18.pt" --bf16 $cl $graph 2>> "$out.stderr" |
        grep '"framework"' | sed 's/}$/, "cudnn": 1}/' | keep
    done
  done
done
# The loss check: 20 SGD steps (lr 0.05) from the same weights on one fixed batch of 256 under
# bf16 autocast: PyTorch, ember eager, and ember with steps 3-20 replayed from the capture
# (ember's images stored channels-last unless RESNET_LOSS_LAYOUT=nchw).
cl=--channels-last
[[ ${RESNET_LOSS_LAYOUT:-channels_last} == nchw ]] && cl=""
"$py" "$here/resnet_torch.py" weights "$tmp/rn_w.pt" --batch-file "$tmp/rn_b.pt" --batch 256 >&2
"$py" "$here/resnet_torch.py" losses "$tmp/rn_w.pt" "$tmp/rn_b.pt" --steps 20 --device cuda \
  --bf16 | resnet_losses torch bf16 | keep
"$build/examples/resnet" --synthetic --backend cuda --init-from "$tmp/rn_w.pt" \
  --batch-from "$tmp/rn_b.pt" --warmup 0 --steps 20 --bf16 $cl 2>> "$out.stderr" |
  resnet_losses ember bf16 | keep
"$build/examples/resnet" --synthetic --backend cuda --init-from "$tmp/rn_w.pt" \
  --batch-from "$tmp/rn_b.pt" --warmup 2 --steps 18 --bf16 --graph $cl 2>> "$out.stderr" |
  resnet_losses ember-graph bf16 1 | keep
"$py" "$here/resnet_torch.py" time --batch 256 --weights "$tmp/resnet18.pt" --precision bf16 \
  --configs "${RESNET_TORCH_CONFIGS:-cuda_graph}" --layout "${RESNET_LAYOUTS:-channels_last,nchw}" \
  --reps 20 2>> "$out.stderr" | keep

if [[ ${GPT:-1} != 0 ]]; then
  for graph in "" --graph; do
    "$build/examples/gpt" train --bench --backend cuda --batch 8 --seq 1024 --dropout 0 \
      --peak-tflops "${PEAK_TFLOPS:-989}" --bench-warmup 2 --bench-reps 5 --bench-rounds 2 \
      --bf16 $graph 2>> "$out.stderr" | keep
  done
  "$py" "$here/gpt_torch.py" --batch 8 --seq 1024 --peak-tflops "${PEAK_TFLOPS:-989}" \
    --precisions bf16 --configs cuda_graph --reps 5 --rounds 2 2>> "$out.stderr" | keep
fi
echo "raw lines: $out" >&2
