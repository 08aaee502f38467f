#!/usr/bin/env bash
# Issue 37: ember's CPU backend at 1..16 threads beside PyTorch (its best configuration at each
# count: eager, and torch.compile where asked) and ONNX Runtime, in one run on one machine.
#
#   benchmarks/cpu_scale.sh build [BUILD_DIR]            (here: Debian's torch 1.13, ember-onnx)
#       exports the four models to ONNX (cpu_scale_torch.py export), configures BUILD_DIR
#       (default build-cpuscale) with BENCH_SCALE_ONNX_DIR so that ember-onnx's generated C++ is
#       compiled into bench_scale, builds bench_scale, bench_cpu and bench_scale_ops (the
#       ResNet's layers one by one), checks each import against PyTorch's output (the largest
#       difference, printed), and copies the three binaries (and nothing else) to
#       BUILD_DIR/pack: the folder to carry to the GPU machine.
#   benchmarks/cpu_scale.sh run [--bin DIR] [--out FILE.jsonl] [--threads "1 2 4 8 16"]
#                               [--quick] [--budget SECONDS] [--no-compile]
#       runs every row, writing raw JSON lines (meta line first) to FILE (default
#       benchmarks/results/cpu-scale-<date>-<host>.jsonl) and their stderr beside it:
#       - training steps: MLP and guide CNN at batch 64 and 256, ResNet-18 (CIFAR) at batch 64,
#         the GPT example's model at 4 x 256 tokens; ember (bench_scale train) and PyTorch
#         (cpu_scale_torch.py train, eager at every count, torch.compile at the highest count),
#         the same initial weights and batch on both sides, losses of the first steps printed;
#       - inference (forward only): batch 1 (latency) at 1 thread and at the highest count, batch
#         64 (throughput) at the highest count; ember on the ONNX-imported models, ONNX Runtime
#         (CPU EP, ORT_ENABLE_ALL, intra-op threads = the count), PyTorch inference_mode eager
#         and compiled. The GPT's graph reads 64-token sequences (BENCH_SCALE_GPT_SEQ);
#       - kernels: matmul 1024 and 4096 and two conv2d at 1 thread and the highest count, ember and
#         OpenBLAS called directly (bench_cpu, in one process) and PyTorch (MKL/oneDNN).
#       --quick: tiny repeat counts (a smoke test; with --threads "1 2" it runs here in a few
#       minutes). --budget (default 530 s): the compile rows, last in the run, stop by then (each
#       is cut off, or skipped with a JSON line saying so, when the run would pass it), so the
#       whole run fits one 9-minute call. Missing peers (no onnxruntime, a torch
#       without torch.compile) are skipped with a JSON line {"skipped": why}.
#
# Threads: ember's pool is set per count by bench_scale (ember::cpu::set_num_threads; OpenBLAS's
# own pool follows it, see docs/backend.md); the environment pins OPENBLAS_NUM_THREADS and
# OMP_NUM_THREADS to the highest count so that no library starts more threads than cores.
# cpu_scale_report.py turns the raw lines into RESULTS.md's section.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
log() { echo "cpu_scale.sh: $*" >&2; }

cmd="${1:-}"
shift || true

if [[ $cmd == build ]]; then
  set -e
  build="${1:-build-cpuscale}"
  cd "$root"
  py=/usr/bin/python3
  [[ $build == /* ]] || build="$root/$build"
  onnx="$build/cpu_scale_onnx"
  mkdir -p "$onnx"
  if [[ ! -s $onnx/gpt.onnx || $here/cpu_scale_torch.py -nt $onnx/gpt.onnx ]]; then
    log "exporting the models to $onnx (torch $($py -c 'import torch; print(torch.__version__)'))"
    "$py" "$here/cpu_scale_torch.py" export "$onnx" --gpt-seq 64
  fi
  export CCACHE_DIR="${CCACHE_DIR:-/root/.cache/ccache}" CCACHE_BASEDIR="${CCACHE_BASEDIR:-/work}"
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache \
    -DBENCH_SCALE_ONNX_DIR="$onnx" -DBENCH_SCALE_GPT_SEQ=64 >/dev/null
  ninja -C "$build" -j "${JOBS:-2}" bench_scale bench_cpu bench_scale_ops >&2
  # The imports checked against PyTorch: the exported weights (ember-onnx's records) on the
  # export's own input, the largest difference from PyTorch's output.
  for m in mlp cnn resnet gpt; do
    if [[ -f $onnx/$m.check.pt ]]; then
      seqargs=()
      [[ $m == gpt ]] && seqargs=(--seq 64)
      "$build/benchmarks/bench_scale" infer --model "$m" "${seqargs[@]}" \
        --init-from "$build/benchmarks/scale_onnx/onnx_$m.mpk" --batch-from "$onnx/$m.check.pt" >&2
    fi
  done
  mkdir -p "$build/pack"
  cp "$build/benchmarks/bench_scale" "$build/benchmarks/bench_cpu" \
    "$build/benchmarks/bench_scale_ops" "$build/pack/"
  strip "$build/pack/bench_scale" "$build/pack/bench_cpu" "$build/pack/bench_scale_ops"
  # The commit the binaries were built from (the GPU machine's copy has no .git).
  commit="$(git rev-parse --short HEAD)"
  git diff --quiet HEAD -- include backends src benchmarks tools 2>/dev/null ||
    commit="$commit (with uncommitted changes)"
  echo "$commit" >"$build/pack/COMMIT"
  log "carry $build/pack ($(du -sh "$build/pack" | cut -f1)); it needs: $(ldd "$build/pack/bench_scale" |
    awk '/=>/ { print $1 }' | tr '\n' ' ')"
  exit 0
fi

if [[ $cmd != run ]]; then
  sed -n '2,31p' "$0"
  exit 2
fi

bin="$root/build-cpuscale/pack"
out=""
counts="1 2 4 8 16"
quick=0
budget=530
compile=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --bin) bin="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --threads) counts="$2"; shift 2 ;;
    --quick) quick=1; shift ;;
    --budget) budget="$2"; shift 2 ;;
    --no-compile) compile=0; shift ;;
    *) log "unknown argument $1"; exit 2 ;;
  esac
done
py="${PYTHON:-python3}"
[[ -n $out ]] || out="$root/benchmarks/results/cpu-scale-$(date -u +%F)-$(hostname -s).jsonl"
mkdir -p "$(dirname "$out")"
err="$out.stderr"
: >"$out"
: >"$err"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
start=$SECONDS
tlist="$(echo $counts | tr ' ' ',')"
top="${counts##* }"
export OPENBLAS_NUM_THREADS="$top" OMP_NUM_THREADS="$top"

# Timing per figure: runs until this many seconds have passed (bench_scale and the Python side).
if [[ $quick -eq 1 ]]; then
  mt=(--min-time 0.05 --max-reps 3 --warmup 1)
else
  mt=(--min-time 0.6 --max-reps 30 --warmup 1)
fi
# The slow rows (ResNet, GPT): one warm-up and two timed steps at most.
slow=(--min-time 0 --max-reps 2 --warmup 1)

keep() { grep '^{' >>"$out"; }
# keep, with the rows tagged as ember's threading variant $1 (see the variants below).
variant() { sed "s/^{/{\"variant\": \"$1\", /" | keep; }
# Runs a command under the run's time budget: cut off when the budget is spent (a line on stderr
# and a JSON line {"skipped": "time budget"} say so); not started with less than 5 s left.
lim() {
  local left=$((budget - SECONDS + start))
  if ((left < 5)); then
    log "skipped, the budget is spent: $*"
    echo "{\"skipped\": \"time budget\", \"command\": \"${*##*/}\"}" | cut -c1-300 >>"$out"
    return 124
  fi
  timeout "$left" "$@"
  local rc=$?
  if ((rc == 124)); then
    log "cut off by the budget: $*"
    echo "{\"skipped\": \"cut off by the time budget\", \"command\": \"${*##*/}\"}" |
      cut -c1-300 >>"$out"
  fi
  return $rc
}
step() { log "[$((SECONDS - start)) s] $*"; }

# The meta line: where and what.
cpu="$(lscpu | sed -n 's/^Model name: *//p' | head -1)"
commit="$(cat "$bin/COMMIT" 2>/dev/null || git -C "$root" rev-parse --short HEAD 2>/dev/null ||
  echo unknown)"
META_CPU="$cpu" META_COMMIT="$commit" META_COUNTS="$tlist" META_QUICK="$quick" "$py" - >>"$out" <<'PY'
import datetime, json, os, platform, socket
import torch
try:
    import onnxruntime
    ort = onnxruntime.__version__
except ImportError:
    ort = None
print(json.dumps({"meta": "cpu_scale", "date": datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M UTC"),
                  "host": socket.gethostname(), "cpu": os.environ["META_CPU"],
                  "cores": os.cpu_count(), "commit": os.environ["META_COMMIT"],
                  "threads": os.environ["META_COUNTS"], "quick": os.environ["META_QUICK"] == "1",
                  "torch": torch.__version__, "onnxruntime": ort,
                  "torch_config": torch.__config__.parallel_info().splitlines()[:8]}))
PY

# Sizes: the issue's; --quick shrinks the two big models' batches (a smoke test).
rb=64 gpt_batch=4 gpt_seq=256 ib=64
[[ $quick -eq 1 ]] && rb=4 gpt_batch=1 gpt_seq=32 ib=4
step "prepare: initial weights and batches"
"$py" "$here/cpu_scale_torch.py" prepare "$tmp" --batches 64,256 --resnet-batch "$rb" 2>>"$err"
if "$py" -c 'import onnxruntime' 2>/dev/null; then
  step "export: ONNX graphs for ONNX Runtime"
  "$py" "$here/cpu_scale_torch.py" export "$tmp" --gpt-seq 64 2>>"$err" ||
    log "export failed (see $err): the ONNX Runtime rows will say so"
else
  log "no onnxruntime in $py: the ONNX Runtime rows are skipped (each says so in the JSON)"
fi

# --- training steps -----------------------------------------------------------------------
# model batch weights batch-file loss-steps timing
train_row() {
  local m="$1" b="$2" seqargs=() bf=() ls="$3" tm
  if [[ $m == gpt ]]; then seqargs=(--seq "$gpt_seq"); else bf=(--batch-from "$tmp/${m}_b$b.pt"); fi
  if [[ $m == resnet || $m == gpt ]]; then tm=("${slow[@]}"); else tm=("${mt[@]}"); fi
  [[ $quick -eq 1 ]] && tm=("${mt[@]}")
  step "train $m batch $b: ember"
  lim "$bin/bench_scale" train --model "$m" --batch "$b" "${seqargs[@]}" --threads "$tlist" \
    --init-from "$tmp/$m.pt" "${bf[@]}" --loss-steps "$ls" "${tm[@]}" 2>>"$err" | keep
  step "train $m batch $b: PyTorch eager"
  local tbf=()
  [[ ${#bf[@]} -gt 0 ]] && tbf=(--batch-file "$tmp/${m}_b$b.pt")
  lim "$py" "$here/cpu_scale_torch.py" train --model "$m" --batch "$b" "${seqargs[@]}" \
    --threads "$tlist" --configs eager --weights "$tmp/$m.pt" "${tbf[@]}" --loss-steps "$ls" \
    "${tm[@]}" 2>>"$err" | keep
}
train_row mlp 64 3
train_row mlp 256 0
train_row cnn 64 0
train_row cnn 256 0
train_row resnet "$rb" 2
train_row gpt "$gpt_batch" 2

# --- kernels ------------------------------------------------------------------------------
kernels="matmul_1024,matmul_4096,conv2d_64x1x28x28_32x3x3,conv2d_64x64x32x32_64x3x3"
sizes=1024,4096
[[ $quick -eq 1 ]] && kernels="matmul_1024,conv2d_64x1x28x28_32x3x3" sizes=1024
kcounts="1"
[[ $top != 1 ]] && kcounts="1 $top"
for t in $kcounts; do
  step "kernels at $t threads: ember and OpenBLAS (bench_cpu)"
  # bench_cpu: 2 warm-up runs, then --reps timed ones, ember and OpenBLAS alternating.
  reps=3
  [[ $quick -eq 1 ]] && reps=1
  EMBER_NUM_THREADS=$t OPENBLAS_NUM_THREADS=$t lim "$bin/bench_cpu" --threads "$t" --reps "$reps" \
    --only "$kernels" 2>>"$err" | sed "s/^{/{\"kind\": \"kernel\", /" | keep
  if [[ $t == "$top" ]]; then
    step "kernels at $t threads: ember with its own GEMM (EMBER_CPU_GEMM=portable)"
    EMBER_CPU_GEMM=portable EMBER_NUM_THREADS=$t OPENBLAS_NUM_THREADS=$t lim "$bin/bench_cpu" \
      --threads "$t" --reps "$reps" --only "$kernels" 2>>"$err" | grep '"impl":"ember"' |
      sed "s/^{/{\"kind\": \"kernel\", /" | variant portable-gemm
  fi
done
step "kernels: PyTorch"
lim "$py" "$here/cpu_scale_torch.py" kernels --threads "$(echo $kcounts | tr ' ' ',')" \
  --sizes "$sizes" "${mt[@]}" 2>>"$err" | keep

# --- inference ----------------------------------------------------------------------------
# batch 1 at 1 thread and at the top count, batch 64 at the top count.
infer_row() {
  local m="$1" b="$2" ts="$3" cfgs="$4" seqargs=()
  [[ $m == gpt ]] && seqargs=(--seq 64)
  step "infer $m batch $b at $ts threads: ember"
  lim "$bin/bench_scale" infer --model "$m" --batch "$b" "${seqargs[@]}" --threads "$ts" \
    "${mt[@]}" 2>>"$err" | keep
  step "infer $m batch $b at $ts threads: $cfgs"
  lim "$py" "$here/cpu_scale_torch.py" infer --model "$m" --batch "$b" --threads "$ts" \
    --configs "$cfgs" --onnx "$tmp" --compile-threads "$top" "${mt[@]}" 2>>"$err" | keep
}
ilat="1"
[[ $top != 1 ]] && ilat="1,$top"
for m in mlp cnn resnet gpt; do
  infer_row "$m" 1 "$ilat" eager,ort
  infer_row "$m" "$ib" "$top" eager,ort
done

# --- ember's threading variants ------------------------------------------------------------
# By default OpenBLAS runs single-threaded, each product split into tiles on ember's pool, and
# the pool's threads spin 50 µs for the next region (from 4 threads on) before they sleep.
# "openblas-threads": EMBER_CPU_BLAS_THREADS=openblas, OpenBLAS's own pool threading each product
# (sized like ember's; its threads spin for a while after each call and compete with ember's),
# the default before 2026-11-30; "portable-gemm": EMBER_CPU_GEMM=portable, ember's blocked GEMM
# instead of OpenBLAS; "pool-tiles": EMBER_CPU_BLAS_THREADED_DIM=0, the large square products
# (every side 1024 or more, which OpenBLAS threads by default) in tiles on ember's pool as well
# (run 2026-11-30b set EMBER_CPU_BLAS_THREADED_MACS=0, the rule then: products of 2^29
# multiply-adds or more); "no-spin": EMBER_CPU_SPIN_US=0, the pool's threads sleep at once (the
# default until 2026-12-01; runs before then had "spin" and "portable-gemm-spin" variants with
# EMBER_CPU_SPIN_US=50 instead, and the variants above ran with EMBER_CPU_SPIN_US=0).
# Rows tagged "variant": "openblas-threads" / "pool-tiles" / "portable-gemm" / "no-spin" (and
# "composed-bn-relu", below).
vcounts="1"
[[ $top != 1 ]] && vcounts="1,$top"
# blas:gemm:spin:dim, "def" for a variable left unset (the default)
for v in openblas:auto:def:def auto:auto:def:0 auto:portable:def:def auto:auto:0:def; do
  IFS=: read -r blas gemm spin dim <<<"$v"  # dim: EMBER_CPU_BLAS_THREADED_DIM
  name=portable-gemm
  [[ $spin == 0 ]] && name=no-spin
  [[ $blas == openblas ]] && name=openblas-threads
  [[ $dim == 0 ]] && name=pool-tiles
  specs=("mlp 64" "mlp 256" "cnn 64" "cnn 256" "resnet $rb")
  [[ $blas == openblas || $dim != def ]] && specs+=("gpt $gpt_batch")
  for spec in "${specs[@]}"; do
    set -- $spec
    ts="$vcounts"
    [[ $1 == resnet || $1 == gpt || $name == no-spin ]] && ts="$top"
    bf=(--batch-from "$tmp/${1}_b$2.pt") tm=("${mt[@]}")
    [[ $1 == gpt ]] && bf=(--seq "$gpt_seq")
    [[ $1 == gpt && $quick -eq 0 ]] && tm=("${slow[@]}")
    step "train $1 batch $2 at $ts threads: ember, $name"
    (
      [[ $dim != def ]] && export EMBER_CPU_BLAS_THREADED_DIM="$dim"
      [[ $spin != def ]] && export EMBER_CPU_SPIN_US="$spin"
      EMBER_CPU_BLAS_THREADS=$blas EMBER_CPU_GEMM=$gemm lim \
        "$bin/bench_scale" train --model "$1" --batch "$2" --threads "$ts" \
        --init-from "$tmp/$1.pt" "${bf[@]}" "${tm[@]}" 2>>"$err"
    ) | variant "$name"
  done
done

# "composed-bn-relu": the ResNet with EMBER_CPU_BATCH_NORM_RELU=0 (its BatchNorm, residual
# addition and ReLU as separate ops, not the fused CPU kernels float_batch_norm_relu), at the
# highest count: what the fusion gives where passes over memory weigh most.
step "train resnet batch $rb at $top threads: ember, composed-bn-relu"
EMBER_CPU_BATCH_NORM_RELU=0 lim "$bin/bench_scale" train --model resnet --batch "$rb" \
  --threads "$top" --init-from "$tmp/resnet.pt" --batch-from "$tmp/resnet_b$rb.pt" "${mt[@]}" \
  2>>"$err" | variant composed-bn-relu

# --- torch.compile, last: it compiles for tens of seconds per model -------------------------
compile_rows() {
  local kind="$1" m="$2" b="$3" extra=() left=$((budget - SECONDS + start)) rc=0
  if (( left < 40 )); then
    log "compile $kind $m batch $b: skipped (the run has used $((SECONDS - start)) s of $budget)"
    echo "{\"framework\": \"torch\", \"kind\": \"$kind\", \"model\": \"$m\", \"batch\": $b, \"config\": \"compile\", \"skipped\": \"time budget\"}" >>"$out"
    return
  fi
  step "$kind $m batch $b: PyTorch torch.compile at $top threads"
  if [[ $kind == train ]]; then
    [[ $m == gpt ]] && extra=(--seq "$gpt_seq") || extra=()
    [[ $m == mlp || $m == cnn ]] && extra=(--batch-file "$tmp/${m}_b$b.pt")
    timeout "$left" "$py" "$here/cpu_scale_torch.py" train --model "$m" --batch "$b" "${extra[@]}" \
      --threads "$top" --configs compile --compile-threads "$top" --weights "$tmp/$m.pt" \
      "${mt[@]}" 2>>"$err" | keep
    rc=${PIPESTATUS[0]}
  else
    timeout "$left" "$py" "$here/cpu_scale_torch.py" infer --model "$m" --batch "$b" \
      --threads "$top" --configs compile --compile-threads "$top" "${mt[@]}" 2>>"$err" | keep
    rc=${PIPESTATUS[0]}
  fi
  if [[ $rc == 124 ]]; then
    log "compile $kind $m batch $b: cut off after $left s (the run's budget)"
    echo "{\"framework\": \"torch\", \"kind\": \"$kind\", \"model\": \"$m\", \"batch\": $b, \"config\": \"compile\", \"skipped\": \"cut off by the time budget\"}" >>"$out"
  fi
}
if [[ $compile -eq 1 ]]; then
  compile_rows infer mlp 1
  compile_rows infer resnet 1
  compile_rows infer resnet "$ib"
  compile_rows infer gpt 1
  compile_rows train mlp 256
  compile_rows train cnn 256
  compile_rows infer cnn "$ib"
  compile_rows infer gpt "$ib"
  compile_rows train resnet "$rb"
fi

step "done: $(grep -c '^{' "$out") lines in $out"
