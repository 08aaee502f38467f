#!/usr/bin/env bash
# CTest checks of the gpt example (registered in examples/CMakeLists.txt), on a tiny model:
#   check.sh cache GPT DIR    sampling from the checkpoint in DIR with and without the KV cache
#                             gives the same text (the cache changes the cost, not the result)
#   check.sh resume GPT DIR   a run stopped at step 20 and resumed from its checkpoint ends with
#                             the validation loss of the same run left uninterrupted
#   check.sh bench GPT DIR [--bf16]
#                             train --bench prints the loss of each --loss-steps step (falling
#                             on its one batch) and a timing line with step time, tokens/s, MFU
#                             (with --bf16: under bf16 mixed precision, named so)
#   check.sh devices GPT DIR  --devices on a backend other than CUDA is refused: exit status 1
#                             and one line on stderr that names the option and what it needs
set -euo pipefail
mode=$1 gpt=$2 dir=$3
extra=("${@:4}")
tiny=(--layers 2 --d-model 32 --heads 2 --context 32 --batch-size 8 --dropout 0 --lr 3e-3
      --eval-batches 4 --log-every 10 --threads 2 --steps 40)
case "$mode" in
  cache)
    mkdir -p "$dir/cache-check"
    for c in cache no-cache; do
      flag=(); [[ $c == no-cache ]] && flag=(--no-cache)
      # The text without the last two lines (the "---" and the timing).
      "$gpt" generate --artifact-dir "$dir" --length 200 --top-k 20 --threads 2 "${flag[@]}" |
        head -n -2 >"$dir/cache-check/$c.txt"
    done
    cmp "$dir/cache-check/cache.txt" "$dir/cache-check/no-cache.txt"
    echo "check.sh cache: the same $(wc -c <"$dir/cache-check/cache.txt") bytes with and without the cache"
    ;;
  resume)
    rm -rf "$dir/full" "$dir/split"
    mkdir -p "$dir"
    "$gpt" train "${tiny[@]}" --artifact-dir "$dir/full" >"$dir/full.log"
    "$gpt" train "${tiny[@]}" --artifact-dir "$dir/split" --stop-at 20 >"$dir/split1.log"
    "$gpt" train "${tiny[@]}" --artifact-dir "$dir/split" --resume >"$dir/split2.log"
    grep -q "resuming at step 20" "$dir/split2.log"
    # The training loss of steps 31..40 and the validation loss after step 40.
    full=$(grep -E "^step    40  (loss|validation)" "$dir/full.log" | sed 's/  [0-9.]* ms.*//')
    resumed=$(grep -E "^step    40  (loss|validation)" "$dir/split2.log" | sed 's/  [0-9.]* ms.*//')
    printf 'uninterrupted:\n%s\nresumed:\n%s\n' "$full" "$resumed"
    [[ -n $full && $full == "$resumed" ]]
    ;;
  bench)
    mkdir -p "$dir"
    "$gpt" train --bench --layers 2 --d-model 32 --heads 2 --context 32 --batch 4 --seq 32 \
      --dropout 0 --lr 3e-3 --loss-steps 5 --bench-warmup 1 --bench-reps 2 --bench-rounds 2 \
      --peak-tflops 1 --threads 2 "${extra[@]}" >"$dir/bench.jsonl"
    precision=f32
    [[ " ${extra[*]} " == *" --bf16 "* ]] && precision=bf16
    cat "$dir/bench.jsonl"
    [[ $(grep -c '"name": "gpt_loss"' "$dir/bench.jsonl") == 5 ]]
    # Each loss below the one before.
    grep '"name": "gpt_loss"' "$dir/bench.jsonl" | sed 's/.*"value": \([0-9.e+-]*\).*/\1/' |
      awk 'NR > 1 && $1 >= prev { exit 1 } { prev = $1 }'
    grep -E '"name": "gpt_train_step_b4_s32_'"$precision"'", "value": [0-9.e+-]+, "unit": "ms", "tokens_per_s": [0-9.e+-]+, "mfu": [0-9.e+-]+' "$dir/bench.jsonl" >/dev/null
    ;;
  devices)
    mkdir -p "$dir"
    status=0
    "$gpt" train "${tiny[@]}" --backend cpu --devices 0,1 --artifact-dir "$dir" \
      >"$dir/devices.out" 2>"$dir/devices.err" || status=$?
    cat "$dir/devices.err"
    [[ $status == 1 && $(wc -l <"$dir/devices.err") == 1 ]]
    # With CUDA built: it needs --backend cuda; without: the build has no CUDA backend.
    grep -Eq '^gpt: --devices and --distributed train on CUDA devices' "$dir/devices.err"
    [[ ! -e "$dir/config.json" ]]  # refused before anything was written
    ;;
  *) echo "check.sh: unknown mode $mode" >&2; exit 2 ;;
esac
