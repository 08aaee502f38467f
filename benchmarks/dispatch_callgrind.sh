#!/bin/sh
# Counts, with callgrind, the instructions of bench_dispatch's chain (add, mul, exp, sum_dim on
# [16, 16]) on each CPU stack and on Dispatch with the device naming it: one process a stack,
# `ITERS` chains each (default 1000), only the two timing functions counted (inclusive, so the
# tensors' creation and the one read-back at the end are in, spread over the chains). Prints one
# JSON line a stack. Deterministic (unlike the timed rows), so a change to Dispatch can be judged
# on a loaded machine: build bench_dispatch before and after, run this on both binaries.
#   benchmarks/dispatch_callgrind.sh BENCH_DISPATCH [STACK ...]
set -eu
bench=$1
shift
[ $# -gt 0 ] || set -- cpu cpu+fusion cpu+autodiff
iters=${ITERS:-1000}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for stack in "$@"; do
    valgrind --tool=callgrind --collect-atstart=no --toggle-collect='*time_chain<*' \
        --callgrind-out-file="$tmp/cg.out" "$bench" --stacks "$stack" --rounds 1 \
        --iters "$iters" --train-steps 0 >/dev/null 2>"$tmp/log"
    callgrind_annotate --inclusive=yes "$tmp/cg.out" 2>/dev/null | grep 'time_chain<' |
        awk -v stack="$stack" -v iters="$iters" '
            { gsub(",", "", $1); if ($0 ~ /time_chain<ember::Dispatch>/) d = $1; else c = $1 }
            END {
                printf "{\"workload\":\"dispatch_callgrind\",\"stack\":\"%s\",", stack
                printf "\"unit\":\"instructions_per_chain\",\"concrete\":%.0f,", c / iters
                printf "\"dispatch\":%.0f,\"added_per_op\":%.0f,", d / iters, (d - c) / iters / 4
                printf "\"ops_per_chain\":4,\"iters\":%d}\n", iters
            }'
done
