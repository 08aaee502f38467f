#!/usr/bin/env bash
# The training acceptance of issue 5: one epoch of the guide CNN and of the MLP (ANCHORS.md) on
# Fashion-MNIST, ember's plain training loop (bench_train) beside PyTorch's (train_torch.py) with
# the same model, batch size 64, Adam and thread count, in alternating rounds. Writes the
# "Training" section of benchmarks/RESULTS.md (between its markers; the rest is left alone).
#
#   benchmarks/train.sh [--rounds R] [--models "mlp cnn"] [--threads "1 2"] [--no-write]
#
# Environment: BUILD_DIR (default build-bench), JOBS (default 2). On an AVX-512 CPU that
# OpenBLAS 0.3.21 does not recognise, every process runs with OPENBLAS_CORETYPE=SkylakeX (as in
# run.sh): PyTorch's convolutions and linears go through OpenBLAS.
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=2
models="mlp cnn"
thread_counts="1 2"
write=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --models) models="$2"; shift 2 ;;
    --threads) thread_counts="$2"; shift 2 ;;
    --no-write) write=0; shift ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "train.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
build="${BUILD_DIR:-build-bench}"
py=/usr/bin/python3
log() { echo "train.sh: $*" >&2; }

log "building bench_train in $build"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DEMBER_BUILD_BENCHMARKS=ON \
  -DEMBER_BUILD_TESTS=OFF -DEMBER_BUILD_EXAMPLES=OFF -DEMBER_INSTALL=OFF >/dev/null
cmake --build "$build" --target bench_train -j "${JOBS:-2}" >&2
bench="$build/benchmarks/bench_train"
out="$build/results/train.jsonl"
mkdir -p "$(dirname "$out")"
: >"$out"

openblas_core() {
  "$py" -c 'import ctypes, ctypes.util
lib = ctypes.CDLL(ctypes.util.find_library("openblas") or "libopenblas.so.0")
lib.openblas_get_corename.restype = ctypes.c_char_p
print(lib.openblas_get_corename().decode())' 2>/dev/null || echo unknown
}
if [[ -z "${OPENBLAS_CORETYPE:-}" ]] && grep -qw avx512f /proc/cpuinfo &&
   [[ "$(openblas_core)" == "Prescott" ]]; then
  export OPENBLAS_CORETYPE=SkylakeX
fi
log "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-<unset>}"

load_start=$(cut -d' ' -f1-3 /proc/loadavg)
for ((r = 1; r <= rounds; r++)); do
  for t in $thread_counts; do
    for m in $models; do
      log "round $r/$rounds, $t thread(s): $m"
      EMBER_NUM_THREADS=$t OPENBLAS_NUM_THREADS=$t \
        "$bench" --model "$m" --threads "$t" | tail -1 >>"$out"
      if [[ $t -eq 1 ]]; then
        OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 \
          "$py" benchmarks/train_torch.py --model "$m" --threads 1 | tail -1 >>"$out"
      else
        # PyTorch's two configurations on two cores (ANCHORS.md); the report keeps the faster.
        OPENBLAS_NUM_THREADS=$t OMP_NUM_THREADS=$t OMP_WAIT_POLICY=PASSIVE \
          "$py" benchmarks/train_torch.py --model "$m" --threads "$t" \
          --config "OMP_WAIT_POLICY=PASSIVE" | tail -1 >>"$out"
        OPENBLAS_NUM_THREADS=$t OMP_NUM_THREADS=1 \
          "$py" benchmarks/train_torch.py --model "$m" --threads 1 --report-threads "$t" \
          --config "torch 1 thread + OpenBLAS $t" | tail -1 >>"$out"
      fi
    done
  done
done
load_end=$(cut -d' ' -f1-3 /proc/loadavg)

commit=$(git rev-parse --short HEAD)
git diff --quiet HEAD -- include backends src benchmarks 2>/dev/null || commit="$commit (with uncommitted changes)"
export META_DATE="$(date -u '+%Y-%m-%d %H:%M UTC')"
export META_MACHINE="$(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) CPUs, $(awk '/MemTotal/ { printf "%.0f GiB RAM", $2 / 1048576 }' /proc/meminfo)"
export META_COMMIT="$commit" META_LOAD="$load_start at start, $load_end at end"
export META_TORCH="$("$py" -c 'import torch; print(torch.__version__)')"
export META_CORETYPE="${OPENBLAS_CORETYPE:-unset}"
args=(--jsonl "$out")
[[ $write -eq 1 ]] && args+=(--results benchmarks/RESULTS.md)
"$py" benchmarks/train_report.py "${args[@]}"
