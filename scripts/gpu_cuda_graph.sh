#!/usr/bin/env bash
# Captured steps (CUDA graphs, issue 31) on a GPU machine, in one run:
#   bash scripts/gpu_cuda_graph.sh BUILD_DIR OUT_DIR [STEP...]
# Steps (default: build graph suites bench mnist sanitize; timeouts from the *_TIMEOUT variables):
#   build     ember_tests, bench_cuda and the mnist example (CUDA on, Vulkan off, sm_90); extra
#             CMake flags from EMBER_GPU_CMAKE_FLAGS (a prefix for Catch2 and friends, say)
#   graph     the captured-step cases, tests/test_graph.cpp ("[graph]")
#   suites    every [cuda] case and the shared suites on Cuda, Fusion<Cuda>, Autodiff<Cuda> and
#             Autodiff<Fusion<Cuda>>
#   bench     benchmarks/graph.sh: training steps eager and replayed beside PyTorch's CUDA graph,
#             the per-op overhead of a replayed chain (raw JSON lines: OUT_DIR/graph.jsonl)
#   mnist     one epoch of the MLP and of the guide CNN with --capture, and the MLP without
#             (EMBER_DATA_DIR: the Fashion-MNIST IDX files)
#   sanitize  compute-sanitizer memcheck over the [cuda] cases, racecheck over [graph]
#   profile   ncu: the kernels of the first eager steps of the guide CNN at batch 64 (Fusion),
#             time per kernel (OUT_DIR/profile.csv)
# Logs go to OUT_DIR; the summary lines are printed at the end.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$1"
out="$2"
shift 2
steps=("$@")
[[ ${#steps[@]} -eq 0 ]] && steps=(build graph suites bench mnist sanitize)
mkdir -p "$out"
tests="$build/tests/ember_tests"
cuda_suites="*TestBackends - 2,*TestBackends - 3,*AutodiffBackends - 3,*AutodiffBackends - 4"
summary=()
note() { summary+=("$1"); echo "== $1"; }
for step in "${steps[@]}"; do
  case "$step" in
    build)
      # shellcheck disable=SC2086
      cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DEMBER_VULKAN=OFF \
        -DEMBER_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 ${EMBER_GPU_CMAKE_FLAGS:-} \
        > "$out/cmake.log" 2>&1 || { note "cmake failed"; tail -30 "$out/cmake.log"; exit 1; }
      # shellcheck disable=SC2086
      ninja -C "$build" -j"$(nproc)" ${BUILD_TARGETS:-bench_cuda ember_tests mnist} > "$out/build.log" 2>&1 ||
        { note "build failed"; grep -B2 -A12 -E "error|FAILED" "$out/build.log" | head -80; exit 1; }
      note "built"
      ;;
    graph)
      "$tests" "[graph]" > "$out/graph.log" 2>&1
      note "[graph] rc=$? $(tail -3 "$out/graph.log" | grep -E 'passed|failed' | tail -1)"
      ;;
    suites)
      timeout "${SUITE_TIMEOUT:-200}" "$tests" "[cuda]" > "$out/cuda.log" 2>&1
      note "[cuda] rc=$? $(grep -E 'test cases|All tests' "$out/cuda.log" | tail -1)"
      timeout "${SUITE_TIMEOUT:-200}" "$tests" "$cuda_suites" > "$out/stacks.log" 2>&1
      note "CUDA stacks rc=$? $(grep -E 'test cases|All tests' "$out/stacks.log" | tail -1)"
      ;;
    bench)
      bash "$root/benchmarks/graph.sh" "$build/benchmarks/bench_cuda" "$out/graph.jsonl" \
        "${GRAPH_ROUNDS:-2}" > "$out/bench.log" 2> "$out/bench.err"
      note "bench rc=$?"
      python3 "$root/benchmarks/graph_report.py" --jsonl "$out/graph.jsonl" \
        --stderr "$out/graph.jsonl.stderr" > "$out/graph.md"
      ;;
    mnist)
      data="${EMBER_DATA_DIR:-/usr/share/datasets/fashion-mnist}"
      mn="$build/examples/mnist"
      for run in "mlp --capture" "cnn --capture" "mlp"; do
        set -- $run
        dir="$out/mnist-$1${2:+-capture}"
        "$mn" train --model "$1" ${2:-} --backend cuda --epochs 1 --plain --data "$data" \
          --artifact-dir "/tmp/mnist-$1${2:+-capture}" > "$dir.log" 2>&1
        note "mnist $run rc=$? $(grep -iE 'accuracy|took|seconds' "$dir.log" | tail -2 | tr '\n' ' ')"
        grep -h "capture_steps" "/tmp/mnist-$1${2:+-capture}/experiment.log" 2>/dev/null | head -5
      done
      ;;
    sanitize)
      cs=/usr/local/cuda/bin/compute-sanitizer
      timeout "${MEMCHECK_TIMEOUT:-200}" "$cs" --tool memcheck --error-exitcode 9 "$tests" "[cuda]" \
        > "$out/memcheck.log" 2>&1
      note "memcheck [cuda] rc=$? $(grep -E 'ERROR SUMMARY|test cases|All tests' "$out/memcheck.log" | tail -2 | tr '\n' ' ')"
      timeout "${RACECHECK_TIMEOUT:-90}" "$cs" --tool racecheck --error-exitcode 9 "$tests" "[graph]" \
        > "$out/racecheck.log" 2>&1
      note "racecheck [graph] rc=$? $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY|test cases|All tests' "$out/racecheck.log" | tail -2 | tr '\n' ' ')"
      ;;
    profile)
      /usr/local/cuda/bin/ncu --clock-control none --metrics gpu__time_duration.sum \
        --launch-count "${PROFILE_KERNELS:-400}" --csv --page raw \
        "$build/benchmarks/bench_cuda" train_step_cnn_b64_fusion > "$out/profile.csv" 2> "$out/profile.err"
      note "profile rc=$? $(wc -l < "$out/profile.csv") lines"
      ;;
    *) echo "unknown step $step"; exit 2 ;;
  esac
done
printf '%s\n' "${summary[@]}"
