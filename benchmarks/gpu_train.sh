#!/usr/bin/env bash
# Issue 30's training benchmark in one run on a GPU machine: ember beside PyTorch 2.11, each
# workload from the same initial weights where the models allow it, every raw JSON line kept.
#   bash benchmarks/gpu_train.sh BUILD OUT.jsonl
# BUILD holds benchmarks/bench_cuda, examples/resnet and examples/gpt. Rows:
#   - MLP (batch 64, 1024) and guide CNN (64, 1024, 4096), f32: ember's Autodiff<Cuda> and
#     Autodiff<Fusion<Cuda>>, eager and replayed as a CUDA graph (bench_cuda train, train_b4096);
#     PyTorch eager, fused Adam and the whole step in a CUDA graph (bench_cuda_torch.py train_best);
#   - ResNet-18 (CIFAR form) at batch 256: ember on cuda and cuda+fusion with cuDNN on and off,
#     in f32 and (cuDNN on) bf16 mixed precision (--bf16, ember::Autocast), PyTorch f32 and
#     bf16 autocast, NCHW and channels-last, eager / fused / CUDA graph (resnet.sh), and ember's
#     bf16 step replayed as one captured CUDA graph (--graph, `_graph` rows); the losses
#     of 20 SGD steps of both from the same weights on one fixed batch, f32 and bf16;
#   - GPT (examples/gpt, GPT-2 small's shape over bytes) at 8 x 1024 tokens: ember on cuda in f32
#     and bf16 (--bf16; bf16 also replayed as a CUDA graph, --graph) and PyTorch f32 and bf16
#     autocast, eager / fused / CUDA graph, the 20-step losses of both from the same weights in
#     each precision (gpt_torch.py --save-init, gpt --init-from).
#   - issue 31's rows as graph.sh has them, in the same run: the per-op overhead of eager and
#     replayed 1-element adds (bench_cuda overhead, PyTorch's eager add) and, with
#     BENCH_VULKAN=<bench_vulkan binary>, the Vulkan training steps and overhead.
# TORCH_CONFIGS adds "compile" (torch.compile, mode max-autotune) to PyTorch's configurations:
# left out by default, as it compiles for minutes. gpu_train_report.py makes RESULTS.md's table
# (graph_report.py --jsonl OUT.jsonl --stderr OUT.jsonl.stderr --source ... --rounds "one round"
# makes issue 31's from the same
# file).
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
build="$1"
out="$2"
py="${PYTHON:-python3}"
cfg="${TORCH_CONFIGS:-eager,fused,graph}"
bash "$here/gpu_meta.sh" > "$out"
# keep, resnet_losses
source "$here/gpu_lib.sh"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# GPU_TRAIN_MODELS_ONLY=1 leaves the MLP, guide-CNN and overhead rows out (ResNet and GPT only).
if [[ -z ${GPU_TRAIN_MODELS_ONLY:-} ]]; then
"$build/benchmarks/bench_cuda" train 2>> "$out.stderr" | keep
"$build/benchmarks/bench_cuda" train_b4096 2>> "$out.stderr" | keep
"$py" "$here/bench_cuda_torch.py" train_best "$cfg" 64 1024 4096 | keep
"$build/benchmarks/bench_cuda" overhead 2>> "$out.stderr" | keep
"$py" "$here/bench_cuda_torch.py" overhead | keep
fi
if [[ -n ${BENCH_VULKAN:-} ]]; then
  for what in train overhead; do
    "$BENCH_VULKAN" "$what" 2>> "$out.stderr" |
      sed 's/"framework": "ember"/"framework": "ember-vulkan"/' | keep
  done
fi

"$py" "$here/resnet_torch.py" weights "$tmp/resnet18.pt" >&2
for cudnn in 1 0; do
  for b in cuda cuda+fusion; do
    EMBER_CUDNN=$cudnn "$build/examples/resnet" --synthetic --backend "$b" --batch 256 --warmup 5 \
      --steps 20 --init-from "$tmp/resnet18.pt" | grep '"framework"' |
      sed "s/}\$/, \"cudnn\": $cudnn}/" | keep
  done
done
for b in cuda cuda+fusion; do
  for graph in "" --graph; do  # eager, and replayed as one captured CUDA graph
    "$build/examples/resnet" --synthetic --backend "$b" --batch 256 --warmup 5 --steps 20 \
      --init-from "$tmp/resnet18.pt" --bf16 $graph | grep '"framework"' |
      sed 's/}$/, "cudnn": 1}/' | keep
  done
done
# The loss check: 20 SGD steps (lr 0.05) from the same weights on one fixed batch of 256, both
# sides on the GPU, in f32 and under bf16 autocast.
"$py" "$here/resnet_torch.py" weights "$tmp/rn_w.pt" --batch-file "$tmp/rn_b.pt" --batch 256 >&2
for p in f32 bf16; do
  flag=(); [[ $p == bf16 ]] && flag=(--bf16)
  "$py" "$here/resnet_torch.py" losses "$tmp/rn_w.pt" "$tmp/rn_b.pt" --steps 20 --device cuda \
    "${flag[@]}" | resnet_losses torch "$p" | keep
  "$build/examples/resnet" --synthetic --backend cuda --init-from "$tmp/rn_w.pt" \
    --batch-from "$tmp/rn_b.pt" --warmup 0 --steps 20 "${flag[@]}" 2>> "$out.stderr" |
    resnet_losses ember "$p" | keep
done
"$py" "$here/resnet_torch.py" time --batch 256 --weights "$tmp/resnet18.pt" \
  --configs "${cfg/graph/cuda_graph}" --layout "${RESNET_LAYOUTS:-nchw,channels_last}" --reps 10 |
  keep

"$py" "$here/gpt_torch.py" --batch 8 --seq 1024 --peak-tflops "${PEAK_TFLOPS:-989}" \
  --save-init "$tmp/gpt.pt" --loss-steps 20 --loss-precisions f32,bf16 \
  --configs "${cfg/graph/cuda_graph}" --reps 5 \
  --rounds 2 2>/dev/null | keep
for p in f32 bf16; do
  flag=(); [[ $p == bf16 ]] && flag=(--bf16)
  "$build/examples/gpt" train --bench --backend cuda --batch 8 --seq 1024 --dropout 0 \
    --peak-tflops "${PEAK_TFLOPS:-989}" --init-from "$tmp/gpt.pt" --loss-steps 20 \
    --bench-warmup 2 --bench-reps 3 --bench-rounds 2 "${flag[@]}" | keep
done
# The bf16 step replayed as one captured CUDA graph (PyTorch's cuda_graph rows' peer).
"$build/examples/gpt" train --bench --backend cuda --batch 8 --seq 1024 --dropout 0 \
  --peak-tflops "${PEAK_TFLOPS:-989}" --init-from "$tmp/gpt.pt" --bench-warmup 2 \
  --bench-reps 3 --bench-rounds 2 --bf16 --graph | keep
echo "raw lines: $out" >&2
