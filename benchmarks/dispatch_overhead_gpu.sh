#!/usr/bin/env bash
# Dispatch's training-step overhead on a GPU machine (issue 36, item 3): bench_dispatch's
# training-step rows (the mnist MLP and CNN, batch 64, Adam; concrete stack and Dispatch
# alternating round by round in one process) for every autodiff stack, in PROCESSES separate
# processes, so that a difference one process's heap layout or placement gives a stack shows as
# a difference between processes. Each JSON line gets process_round, date, machine, load and
# commit added; they are printed and appended to OUT when set.
#   bash benchmarks/dispatch_overhead_gpu.sh BENCH_DISPATCH [COMMIT]
# Environment: PROCESSES (default 3), ROUNDS (default 31), STEPS (timed steps a round, default
# 40), STACKS (default cpu+autodiff,cpu+fusion+autodiff,cuda+autodiff,cuda+fusion+autodiff),
# MACHINE (a description of the machine for the lines), OUT.
set -euo pipefail
bench=$1
commit=${2:-unknown}
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1 || true)
machine=${MACHINE:-"${gpu:-no GPU}, $(nproc)-core host"}
stacks=${STACKS:-cpu+autodiff,cpu+fusion+autodiff,cuda+autodiff,cuda+fusion+autodiff}
for ((p = 1; p <= ${PROCESSES:-3}; ++p)); do
    "$bench" --stacks "$stacks" --iters 0 --rounds "${ROUNDS:-31}" --train-steps "${STEPS:-40}" |
        grep '^{' |
        python3 -c 'import json, sys
p, date, machine, commit = sys.argv[1:5]
for line in sys.stdin:
    r = {"process_round": int(p), **json.loads(line)}
    r.update(date=date, machine=machine, load="idle", commit=commit)
    print(json.dumps(r), flush=True)' "$p" "$(date -u +%F)" "$machine" "$commit" |
        tee -a "${OUT:-/dev/null}"
done
