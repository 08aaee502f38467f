#!/usr/bin/env bash
# Issue 11's acceptance: int8 quantization after training.
#  1. Fashion-MNIST: the guide's MLP and CNN, trained in f32, quantized by mnist-quantize
#     (per-channel symmetric int8 weights; dynamic and static activations): test accuracy beside
#     f32, file sizes. Models are trained first when their artifact directory has none.
#  2. Linear layers of those models at batch 1 and 64, one thread: ember's f32 and int8 Linear
#     (bench_quant) beside PyTorch's f32 and dynamic-quantized Linear (bench_quant_torch.py), in
#     alternating rounds.
# Writes the "Quantization" section of benchmarks/RESULTS.md (between its markers).
#
#   benchmarks/quant.sh [--rounds R] [--no-write] [--no-build]
#
# Environment: BUILD_DIR (default build-q), JOBS (default 2), MLP_DIR / CNN_DIR (artifact
# directories; default artifacts/quant-mlp and artifacts/quant-cnn).
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=3
write=1
build_first=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --no-write) write=0; shift ;;
    --no-build) build_first=0; shift ;;  # use the binaries already in BUILD_DIR
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "quant.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
build="${BUILD_DIR:-build-q}"
py=/usr/bin/python3
mlp_dir="${MLP_DIR:-artifacts/quant-mlp}"
cnn_dir="${CNN_DIR:-artifacts/quant-cnn}"
log() { echo "quant.sh: $*" >&2; }

if [[ $build_first == 1 ]]; then
  log "building mnist, mnist-quantize and bench_quant in $build"
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DEMBER_BUILD_BENCHMARKS=ON >/dev/null
  cmake --build "$build" --target mnist mnist-quantize bench_quant -j "${JOBS:-2}" >&2
fi
out="$build/results"
mkdir -p "$out"

# As run.sh: on an AVX-512 CPU OpenBLAS 0.3.21 does not recognise, name its kernels.
if [[ -z "${OPENBLAS_CORETYPE:-}" ]] && grep -qw avx512f /proc/cpuinfo; then
  export OPENBLAS_CORETYPE=SkylakeX
fi

# 1. Accuracy and size after training (the MLP 3 epochs at 1e-3, the CNN 1 epoch at 1e-4).
train() {  # dir model epochs lr
  if [[ ! -f "$1/model.mpk" ]]; then
    log "training the $2 ($3 epochs) into $1"
    "$build/examples/mnist" train --model "$2" --epochs "$3" --lr "$4" \
      --artifact-dir "$1" --plain >&2
  fi
}
train "$mlp_dir" mlp 3 1e-3
train "$cnn_dir" cnn 1 1e-4
for m in mlp cnn; do
  dir=$mlp_dir; [[ $m == cnn ]] && dir=$cnn_dir
  log "quantizing the $m"
  EMBER_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 "$build/examples/mnist-quantize" \
    --artifact-dir "$dir" --json "$out/quant_$m.json" >&2
done

# 2. Linear layers, ember and PyTorch in turn.
: >"$out/quant_linear.jsonl"
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
for ((r = 1; r <= rounds; r++)); do
  log "round $r/$rounds"
  EMBER_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 "$build/benchmarks/bench_quant" |
    sed "s/^{/{\"round\":$r,/" >>"$out/quant_linear.jsonl"
  OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 "$py" benchmarks/bench_quant_torch.py |
    sed "s/^{/{\"round\":$r,/" >>"$out/quant_linear.jsonl"
done
load_end=$(cut -d' ' -f1-3 /proc/loadavg)

report=$("$py" benchmarks/quant_report.py "$out" "$load_start" "$load_end")
echo "$report"
if [[ $write == 1 ]]; then
  echo "$report" | "$py" benchmarks/results_section.py benchmarks/RESULTS.md quant
  log "wrote the Quantization section of benchmarks/RESULTS.md"
fi
