#!/usr/bin/env bash
# Data-parallel scaling on the GPU machine (2 GPUs): ember's bench_multi on 1 GPU, on 2 GPUs with a
# thread per GPU, and on 2 GPUs with a process per GPU (TCP rendezvous), beside PyTorch's DDP
# (torchrun) on the same GPUs; then the NCCL test cases of ember_tests. NVLink multicast off.
# The 2-GPU runs reduce gradients during backward (GradientReducer), the default; one run with
# --overlap off reduces them after backward, for comparison.
#
#   benchmarks/multi_gpu.sh [BUILD_DIR]     (default build-md; built with -DEMBER_CUDA=ON)
#
# Success: every line below prints, the "scaling" lines show ember's 2-GPU / 1-GPU throughput
# (target >= 1.8), and the last line of ember_tests says "All tests passed".
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build-md}
export NCCL_NVLS_ENABLE=0
BIN=$BUILD/benchmarks/bench_multi
PY=${PYTHON:-python3}
[ -x "$BIN" ] || { echo "multi_gpu.sh: $BIN is missing (build target bench_multi)"; exit 1; }
nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader || true

rate() { sed -n 's/.*samples_per_s=\([0-9.]*\).*/\1/p' | tail -1; }

for model in cnn transformer; do
    echo "== $model"
    one=$("$BIN" --model $model --devices 0 | tee /dev/stderr | rate)
    late=$("$BIN" --model $model --devices 0,1 --overlap off | tee /dev/stderr | rate)
    two=$("$BIN" --model $model --devices 0,1 | tee /dev/stderr | rate)
    for r in 0 1; do
        EMBER_WORLD_SIZE=2 EMBER_RANK=$r EMBER_LOCAL_RANK=$r EMBER_MASTER_ADDR=127.0.0.1:29511 \
            "$BIN" --model $model > /tmp/bench_multi_proc$r.txt 2>&1 &
    done
    wait
    cat /tmp/bench_multi_proc0.txt /tmp/bench_multi_proc1.txt
    procs=$(rate < /tmp/bench_multi_proc0.txt)
    tone=$($PY benchmarks/bench_multi_torch.py --model $model | tee /dev/stderr | rate)
    ttwo=$($PY -m torch.distributed.run --standalone --nproc_per_node=2 \
           benchmarks/bench_multi_torch.py --model $model \
           2>/dev/null | tee /dev/stderr | rate)
    $PY - "$model" "$one" "$late" "$two" "$procs" "$tone" "$ttwo" <<'PY'
import sys
m, one, late, two, procs, tone, ttwo = sys.argv[1], *map(float, sys.argv[2:])
print(f"scaling {m}: ember threads {two / one:.2f}x (all-reduce after backward "
      f"{late / one:.2f}x), ember processes {procs / one:.2f}x, "
      f"torch DDP {ttwo / tone:.2f}x; ember/torch on 2 GPUs {two / ttwo:.2f}")
PY
done

echo "== NCCL test cases"
"$BUILD/tests/ember_tests" "[nccl]"
