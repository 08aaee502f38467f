#!/usr/bin/env bash
# Builds bench_cpu (Release, build-bench/), runs ember and PyTorch back to back on every
# workload at 1 thread and on matmul at 2 threads, times the compile probe, and writes
# benchmarks/RESULTS.md through benchmarks/report.py.
#
#   benchmarks/run.sh [--quick] [--reps N] [--rounds R] [--no-wait] [--max-load L] [--wait S]
#                     [--torch-compile]
#
#   --quick          short runs to check the pipeline; writes build-bench/RESULTS.quick.md
#   --reps N         timed runs per figure (default 11; the median is reported)
#   --rounds R       rounds of (ember, PyTorch) per workload, alternating (default 3); the
#                    report takes the median of the rounds' figures
#   --no-wait        do not wait for the machine to be quiet
#   --max-load L     wait until the 1-minute load average is below L (default 1.0) ...
#   --wait S         ... for at most S seconds (default 900), then run anyway and say so
#   --torch-compile  also time the LibTorch compile peer (about 30 s more)
#
# Environment: BUILD_DIR (default build-bench), JOBS (default 2), OPENBLAS_CORETYPE.
# OpenBLAS 0.3.21 does not know recent Xeons (e.g. family 6 model 207) and falls back to its
# Prescott (SSE3) kernels, ten times slower; when that happens on an AVX-512 machine, this script
# sets OPENBLAS_CORETYPE=SkylakeX for every process (ember, OpenBLAS direct, PyTorch alike) and
# says so in RESULTS.md. Set OPENBLAS_CORETYPE yourself to choose otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"

quick=0
reps=11
rounds=
wait_quiet=1
max_load=1.0
max_wait=900
torch_compile=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) quick=1; shift ;;
    --reps) reps="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --no-wait) wait_quiet=0; shift ;;
    --max-load) max_load="$2"; shift 2 ;;
    --wait) max_wait="$2"; shift 2 ;;
    --torch-compile) torch_compile=1; shift ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

build="${BUILD_DIR:-build-bench}"
jobs="${JOBS:-2}"
py=/usr/bin/python3
out_dir="$build/results"
if [[ $quick -eq 1 ]]; then
  results_md="$build/RESULTS.quick.md"
  bench_args=(--quick)
  rounds="${rounds:-1}"
else
  results_md="benchmarks/RESULTS.md"
  bench_args=(--reps "$reps")
  rounds="${rounds:-3}"
fi

log() { echo "run.sh: $*" >&2; }
load1() { cut -d' ' -f1 /proc/loadavg; }

# ---- build -----------------------------------------------------------------------------------
log "building bench_cpu in $build (Release, -j$jobs)"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DEMBER_BUILD_BENCHMARKS=ON \
  -DEMBER_BUILD_TESTS=OFF -DEMBER_BUILD_EXAMPLES=OFF -DEMBER_INSTALL=OFF >/dev/null
cmake --build "$build" --target bench_cpu -j "$jobs" >&2
bench="$build/benchmarks/bench_cpu"
rm -rf "$out_dir"
mkdir -p "$out_dir"

# ---- OpenBLAS kernels --------------------------------------------------------------------------
notes=()
core=$(EMBER_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 "$bench" --only none |
  sed -n 's/.*"openblas_core":"\([^"]*\)".*/\1/p')
if [[ -z "${OPENBLAS_CORETYPE:-}" && "$core" == "Prescott" ]] && grep -qw avx512f /proc/cpuinfo; then
  export OPENBLAS_CORETYPE=SkylakeX
  notes+=("OpenBLAS 0.3.21 does not recognise this CPU ($(grep -m1 'cpu family' /proc/cpuinfo | tr -s '\t ' ' ' | cut -d: -f2 | xargs), model $(grep -m1 '^model\s' /proc/cpuinfo | cut -d: -f2 | xargs)) and falls back to its Prescott (SSE3) kernels; every process here ran with OPENBLAS_CORETYPE=SkylakeX (ember, OpenBLAS direct and PyTorch alike). With the fallback, sgemm runs at about 10 GFLOP/s for all three.")
  log "OpenBLAS picked Prescott kernels on an AVX-512 CPU: using OPENBLAS_CORETYPE=SkylakeX"
elif [[ -n "${OPENBLAS_CORETYPE:-}" ]]; then
  notes+=("OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE was set for every process.")
fi

# ---- wait for a quiet machine ----------------------------------------------------------------
if [[ $wait_quiet -eq 1 && $quick -eq 0 ]]; then
  waited=0
  while awk -v l="$(load1)" -v m="$max_load" 'BEGIN { exit !(l >= m) }'; do
    if ((waited >= max_wait)); then
      log "load average still $(load1) after ${waited}s: measuring anyway"
      notes+=("The machine was busy: the 1-minute load average was still $(load1) after waiting ${waited} s for it to drop below $max_load. Memory-bound figures vary most.")
      break
    fi
    log "load average $(load1) >= $max_load: waiting (${waited}s of ${max_wait}s)"
    sleep 20
    waited=$((waited + 20))
  done
fi
load_start=$(cut -d' ' -f1-3 /proc/loadavg)

# ---- 1 thread: every workload, ember then PyTorch, in rounds ---------------------------------
workloads=(matmul_256 matmul_1024 matmul_2048 add_new_16M add_inplace_16M gelu_custom_16M sum_16M
           softmax_4096x1024 conv2d_64x1x28x28_32x3x3 overhead_add_1 memcpy_64M
           mlp_fwd_bwd_784_512_512_10_b64 autograd_chain4_1)
for ((r = 1; r <= rounds; r++)); do
  for w in "${workloads[@]}"; do
    log "1 thread, round $r/$rounds: $w"
    EMBER_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 \
      "$bench" --threads 1 --only "$w" "${bench_args[@]}" >>"$out_dir/t1.jsonl"
    EMBER_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 \
      "$py" benchmarks/bench_torch.py --threads 1 --only "$w" "${bench_args[@]}" >>"$out_dir/t1.jsonl"
  done
done

# ---- 2 threads: matmul -----------------------------------------------------------------------
for ((r = 1; r <= rounds; r++)); do
  for w in matmul_256 matmul_1024 matmul_2048; do
    log "2 threads, round $r/$rounds: $w"
    EMBER_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 \
      "$bench" --threads 2 --only "$w" "${bench_args[@]}" >>"$out_dir/t2.jsonl"
    # PyTorch's best of two configurations: OpenMP's default (spinning) wait and passive
    # waiting (ANCHORS.md: spinning pools can oversubscribe the two cores); report.py keeps the
    # faster.
    EMBER_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 OMP_NUM_THREADS=2 \
      "$py" benchmarks/bench_torch.py --threads 2 --only "$w" --config "OMP default wait" \
      "${bench_args[@]}" >>"$out_dir/t2.jsonl"
    EMBER_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 OMP_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE \
      "$py" benchmarks/bench_torch.py --threads 2 --only "$w" --config "OMP_WAIT_POLICY=PASSIVE" \
      "${bench_args[@]}" >>"$out_dir/t2.jsonl"
  done
done

# ---- 2 threads: the MLP training step -----------------------------------------------------------
for ((r = 1; r <= rounds; r++)); do
  w=mlp_fwd_bwd_784_512_512_10_b64
  log "2 threads, round $r/$rounds: $w"
  EMBER_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 \
    "$bench" --threads 2 --only "$w" "${bench_args[@]}" >>"$out_dir/t2.jsonl"
  # PyTorch's configurations on two cores (ANCHORS.md: its best here is torch 1 thread with
  # OpenBLAS 2); report.py keeps the fastest.
  EMBER_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 OMP_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE \
    "$py" benchmarks/bench_torch.py --threads 2 --only "$w" --config "OMP_WAIT_POLICY=PASSIVE" \
    "${bench_args[@]}" >>"$out_dir/t2.jsonl"
  OPENBLAS_NUM_THREADS=2 OMP_NUM_THREADS=1 \
    "$py" benchmarks/bench_torch.py --threads 2 --torch-threads 1 --only "$w" \
    --config "torch 1 thread + OpenBLAS 2" "${bench_args[@]}" >>"$out_dir/t2.jsonl"
done

# ---- compile time ----------------------------------------------------------------------------
log "compile time"
compile_args=()
[[ $quick -eq 1 ]] && compile_args+=(--runs 1)
[[ $torch_compile -eq 1 ]] && compile_args+=(--torch)
benchmarks/compile_time.sh "${compile_args[@]}" >"$out_dir/compile.jsonl"
load_end=$(cut -d' ' -f1-3 /proc/loadavg)

# ---- report ----------------------------------------------------------------------------------
commit=$(git rev-parse --short HEAD)
if ! git diff --quiet HEAD -- include backends src CMakeLists.txt 2>/dev/null ||
   [[ -n "$(git ls-files --others --exclude-standard -- include backends src)" ]]; then
  commit="$commit (with uncommitted changes in include/, backends/ or src/)"
fi
cores="$(nproc) online CPUs; $(lscpu | sed -n 's/^Core(s) per socket: *//p') cores per socket, $(lscpu | sed -n 's/^Thread(s) per core: *//p') thread(s) per core, $(lscpu | sed -n 's/^Socket(s): *//p') socket(s)"
[[ $quick -eq 1 ]] && notes+=("QUICK RUN (smaller sizes, 3 runs): for checking the pipeline only; figures are not comparable.")

export META_DATE="$(date -u '+%Y-%m-%d %H:%M UTC')"
export META_MACHINE="$(lscpu | sed -n 's/^Model name: *//p' | head -1), $(awk '/MemTotal/ { printf "%.0f GiB RAM", $2 / 1048576 }' /proc/meminfo)"
export META_CORES="$cores" META_COMMIT="$commit" META_COMPILER="$(c++ --version | head -1)"
export META_TORCH="$("$py" -c 'import torch; print(torch.__version__)')"
export META_OPENBLAS="$(pkg-config --modversion openblas)${OPENBLAS_CORETYPE:+, OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE}"
export META_LOAD="$load_start at start, $load_end at end"
printf '%s\n' "${notes[@]+"${notes[@]}"}" | "$py" -c '
import json, os, sys
keys = ("date", "machine", "cores", "commit", "compiler", "torch", "openblas", "load")
meta = {k: os.environ["META_" + k.upper()] for k in keys}
meta["notes"] = [l for l in sys.stdin.read().splitlines() if l]
json.dump(meta, open(sys.argv[1], "w"), indent=1)
' "$out_dir/meta.json"
"$py" benchmarks/report.py --out "$results_md" --meta "$out_dir/meta.json" \
  "$out_dir/t1.jsonl" "$out_dir/t2.jsonl" "$out_dir/compile.jsonl"
log "wrote $results_md"
