#!/usr/bin/env bash
# The GPT example (GPT-2 small's shape over bytes, 8 x 1024 tokens per GPU) trained data-parallel
# on 1, 2 and 4 GPUs (as many of those as the machine has), ember beside PyTorch 2.11's
# DistributedDataParallel in one run; every raw JSON line kept (issue 30, item 5).
#
#   bash benchmarks/gpt_ddp.sh BUILD OUT.jsonl
#
# BUILD holds examples/gpt, built with CUDA and NCCL: a build folder, or the pack
# benchmarks/gpt_ddp_pack.sh makes to carry to a GPU machine. Rows, each the best of 2 rounds of 5 steps
# after 3 warm-up steps on one fixed batch of world x 8 rows (each GPU its own 8):
#   - ember, `gpt train --bench --devices 0,..,N-1` (a thread per GPU), in each precision of
#     GPT_DDP_PRECISIONS (default "bf16 f32": --bf16 is ember::Autocast, as PyTorch's autocast)
#     on each stack of GPT_DDP_BACKENDS (default "cuda"; "cuda cuda+fusion" adds the
#     Autodiff<Fusion<Cuda>> stack: six more runs on 4 GPUs); on 2+ GPUs also a process
#     per GPU (`--distributed`, TCP rendezvous) on the first stack; gradients averaged by
#     GradientReducer during backward;
#   - PyTorch, torchrun --nproc_per_node=N benchmarks/gpt_ddp_torch.py: fused AdamW, bf16
#     autocast (its best configuration that DDP runs as it is) and f32 (ember's precision);
#   - a check: the first 5 losses of ember on 2 GPUs x 4 rows against 1 GPU x 8 rows (the same
#     8 rows, the same weights): equal within float noise when the gradients are averaged right.
# Lines carry "world_size", "batch_per_gpu" and, for ember, "form" (threads, processes); the
# first line is the meta line (date, GPU, PyTorch, commit) with "gpus" and "machine" added.
# benchmarks/gpt_ddp_report.py turns the file into RESULTS.md's section. NVLink multicast is off
# (NCCL_NVLS_ENABLE=0), as in multi_gpu.sh. About 5 minutes on four H200s (my estimate).
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
build="$1"
out="$2"
py="${PYTHON:-python3}"
export NCCL_NVLS_ENABLE=0
gpt="$build/examples/gpt"
[[ -x $gpt ]] || { echo "gpt_ddp.sh: $gpt is missing (build target gpt)" >&2; exit 1; }
gpus="$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')"
sizes=()
for n in 1 2 4; do ((n <= gpus)) && sizes+=("$n"); done
((${#sizes[@]} > 0)) || { echo "gpt_ddp.sh: no GPU" >&2; exit 1; }
# A pack from gpt_ddp_pack.sh says which commit it was built from (the checkout may have no .git).
[[ -z ${COMMIT:-} && -f $build/COMMIT ]] && export COMMIT="$(cat "$build/COMMIT")"
bash "$here/gpu_meta.sh" | "$py" -c 'import json, sys
m = json.loads(sys.stdin.read())
m["meta"].update(gpus=int(sys.argv[1]), machine=sys.argv[2], nvls=0)
print(json.dumps(m))' "$gpus" "$(hostname)" > "$out"
keep() { grep '^{' | tee -a "$out"; }
tag() { sed "s/}\$/, \"form\": \"$1\"}/"; }
shape=(--batch 8 --seq 1024 --dropout 0)
timing=(--bench-warmup 3 --bench-reps 5 --bench-rounds 2 --peak-tflops "${PEAK_TFLOPS:-989}")
port=29631
# Every run is cut off after this many seconds (a hung rank must not eat the machine's time), and
# a rendezvous waits at most a minute for its peers.
limit=${GPT_DDP_TIMEOUT:-150}
export EMBER_RENDEZVOUS_TIMEOUT=60

for n in "${sizes[@]}"; do
  devices="$(seq -s, 0 $((n - 1)))"
  echo "== $n GPU(s): $devices" >&2
  for precision in ${GPT_DDP_PRECISIONS:-bf16 f32}; do
    flag=()
    [[ $precision == bf16 ]] && flag=(--bf16)
    first=1
    for backend in ${GPT_DDP_BACKENDS:-cuda}; do
      timeout "$limit" "$gpt" train --bench --backend "$backend" --devices "$devices" \
        "${shape[@]}" "${timing[@]}" "${flag[@]}" 2>> "$out.stderr" | tag threads | keep
      if ((n > 1 && first)); then
        # A process per GPU, rank 0's line kept; TCP rendezvous on a fresh port each time.
        port=$((port + 1))
        for ((r = n - 1; r >= 0; --r)); do
          EMBER_WORLD_SIZE=$n EMBER_RANK=$r EMBER_LOCAL_RANK=$r \
            EMBER_MASTER_ADDR=127.0.0.1:$port \
            timeout "$limit" "$gpt" train --bench --backend "$backend" --distributed \
            "${shape[@]}" "${timing[@]}" "${flag[@]}" > "$out.rank$r" 2>> "$out.stderr" &
        done
        wait
        tag processes < "$out.rank0" | keep
        rm -f "$out".rank*
      fi
      first=0
    done
  done
  timeout "$limit" "$py" -m torch.distributed.run --standalone --nproc_per_node="$n" \
    "$here/gpt_ddp_torch.py" --batch 8 --seq 1024 --peak-tflops "${PEAK_TFLOPS:-989}" \
    --precisions bf16,f32 --warmup 3 --reps 5 --rounds 2 2>> "$out.stderr" | keep
done

if ((gpus >= 2)); then
  echo "== loss check: 2 GPUs x 4 rows against 1 GPU x 8 rows" >&2
  check=(--bench --backend cuda --seq 1024 --dropout 0 --loss-steps 5 --bench-warmup 0
         --bench-reps 1 --bench-rounds 1)
  timeout "$limit" "$gpt" train "${check[@]}" --devices 0 --batch 8 2>> "$out.stderr" | grep gpt_loss |
    tag loss-check | keep
  timeout "$limit" "$gpt" train "${check[@]}" --devices 0,1 --batch 4 2>> "$out.stderr" | grep gpt_loss |
    tag loss-check | keep
fi
echo "raw lines: $out" >&2
