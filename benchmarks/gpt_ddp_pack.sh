#!/usr/bin/env bash
# Builds, on the build machine, what benchmarks/gpt_ddp.sh and the GPT data-parallel tests need
# on a GPU machine that has no Catch2 (nothing to build there), into one small folder to carry:
#   PACK/examples/gpt              the example (stripped)
#   PACK/tests/gpt_parallel_tests  tests/test_gpt_parallel.cpp alone (Catch2 linked in, stripped):
#                                  run it with "[gpt]" (its NCCL case needs 2 GPUs)
#   PACK/COMMIT                    the commit built
#
#   bash benchmarks/gpt_ddp_pack.sh BUILD PACK
#
# BUILD is a Release build configured with CUDA and NCCL (EMBER_CUDA, EMBER_NCCL). The test binary
# links only the libraries the test uses (not ember_tests' ONNX, SQLite and Vulkan ones).
set -euo pipefail
cd "$(dirname "$0")/.."
build=$1
pack=$2
obj=tests/CMakeFiles/ember_tests.dir
ninja -C "$build" -j"${JOBS:-2}" gpt "$obj/harness.cpp.o" "$obj/test_gpt_parallel.cpp.o" \
  ember_nccl ember_cuda ember_collective ember_cpu ember
mkdir -p "$pack/examples" "$pack/tests"
strip -o "$pack/examples/gpt" "$build/examples/gpt"
cuda=${CUDA_LIB:-/usr/local/cuda/lib}
g++ -o "$pack/tests/gpt_parallel_tests" "$build/$obj/harness.cpp.o" \
  "$build/$obj/test_gpt_parallel.cpp.o" "$build/libember_nccl.a" "$build/libember_cuda.a" \
  "$build/libember_collective.a" "$build/libember_cpu.a" "$build/libember.a" \
  /usr/lib/libCatch2WithMain.a -Wl,-rpath,"$cuda" "$cuda/libnvrtc.so" \
  "$cuda/libcudart.so" "$cuda/libcublas.so" "$cuda/libcublasLt.so" "$cuda/libculibos.a" \
  -L/usr/lib/x86_64-linux-gnu/openblas-pthread -lopenblas -lz -ldl -lpthread -lrt
strip "$pack/tests/gpt_parallel_tests"
git rev-parse --short HEAD > "$pack/COMMIT"
du -sh "$pack"
