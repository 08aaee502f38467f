#!/usr/bin/env bash
# Compile cost of a program on ember::Dispatch against the same program on a concrete stack
# (issue 36), each compiled to an object at -O2, ccache off, with /usr/bin/time -v: wall and CPU
# seconds and the compiler's peak memory. One JSON line a probe and implementation
# ("workload":"compile_dispatch"; "stack" names the concrete stack):
#   tensor_snippet  benchmarks/compile_probes/tensor_snippet.cpp, the README's tensor snippet
#                   (concrete: Cpu)
#   torch_snippet   benchmarks/compile_probes/torch_snippet.cpp, the same snippet in LibTorch
#                   (<torch/torch.h>, -std=c++17: LibTorch 1.13's standard), one line
#                   ("impl":"libtorch"); skipped, with a note on stderr, where Debian's
#                   libtorch-dev is not installed (TORCH_INCLUDE names another include dir)
#   model_training  benchmarks/compile_probes/model_training.cpp, mnist's models and a training
#                   loop (concrete: Autodiff<Fusion<Cpu>>)
#   mnist_example   examples/mnist/main.cpp, the model and the Learner as the example builds them
#                   (dispatch: the file as it is; concrete: the file of commit 49bce02, the last
#                   one on Autodiff<Cpu> and Cpu, put beside it for the run), with the flags of a
#                   CPU-only build (no EMBER_CUDA: the issue's "CPU stacks" figure)
#   transformer_lm  benchmarks/compile_probes/transformer_lm.cpp, the GPT example's model with a
#                   training step and a cached generation step (concrete: Autodiff<Fusion<Cuda>>
#                   where CUDA is built, else Autodiff<Fusion<Cpu>>; --cuda on|off overrides the
#                   detection, which looks for nvcc)
# The Dispatch probes include only what they use: the tensor snippet <ember/dispatch/tensor.hpp>
# (no concrete stack), the model files the Dispatch header of each module, loss and optimizer
# they use (<ember/dispatch/nn/linear.hpp>, ...), which declares its Dispatch instances extern
# (compiled in ember_dispatch); the mnist example includes <ember/dispatch/nn.hpp>, all of them.
#   benchmarks/compile_dispatch.sh [--runs N] [--probes "a b ..."] [--cuda on|off]
#                                  [--out FILE.jsonl]
# --out also appends the lines to FILE; benchmarks/compile_dispatch_report.py turns such a file
# into RESULTS.md's section. On a shared machine compare the CPU seconds (user + system): the
# wall time depends on the load, which each line records (1-minute load average).
set -euo pipefail
cd "$(dirname "$0")/.."
runs=1
probes="tensor_snippet torch_snippet model_training mnist_example transformer_lm"
out=""
cuda=auto
while [[ $# -gt 0 ]]; do
  case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --probes) probes="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --cuda) cuda="$2"; shift 2 ;;
    *) echo "usage: $0 [--runs N] [--probes \"a b ...\"] [--cuda on|off] [--out FILE.jsonl]" >&2
       exit 2 ;;
  esac
done
CXX="${CXX:-c++}"
export CCACHE_DISABLE=1
tmp="$(mktemp -d)"
before=examples/mnist/.compile_probe_before.cpp
trap 'rm -rf "$tmp" "$before"' EXIT
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
if [[ $cuda == auto ]]; then
  if command -v nvcc >/dev/null || [[ -x /usr/local/cuda/bin/nvcc ]]; then cuda=on; else cuda=off; fi
fi
torch_include="${TORCH_INCLUDE:-/usr/include/torch/csrc/api/include}"
for probe in $probes; do
  impls="concrete dispatch"
  if [[ $probe == torch_snippet ]]; then
    if [[ ! -f $torch_include/torch/torch.h ]]; then
      echo "torch_snippet skipped: no $torch_include/torch/torch.h (apt-get install libtorch-dev)" >&2
      continue
    fi
    impls=libtorch
    torch_version=$(dpkg-query -W -f '${Version}' libtorch-dev 2>/dev/null || echo unknown)
  fi
  for impl in $impls; do
    flags=(-std=c++20 -O2 -I include)
    stack=""
    case $probe in
      tensor_snippet) stack="Cpu" ;;
      torch_snippet) stack="LibTorch $torch_version" ;;
      model_training) stack="Autodiff<Fusion<Cpu>>" ;;
      mnist_example) stack="Autodiff<Cpu>, Cpu (49bce02)" ;;
      transformer_lm)
        if [[ $cuda == on ]]; then stack="Autodiff<Fusion<Cuda>>"; else stack="Autodiff<Fusion<Cpu>>"; fi ;;
    esac
    case $probe in
      torch_snippet)
        src=benchmarks/compile_probes/torch_snippet.cpp
        flags=(-std=c++17 -O2 -I "$torch_include") ;;
      transformer_lm)
        src=benchmarks/compile_probes/transformer_lm.cpp
        if [[ $impl == dispatch ]]; then
          flags+=(-DPROBE_DISPATCH)
        elif [[ $cuda == on ]]; then
          # ember's CUDA header needs no toolkit; EMBER_CUDA is what linking ember::cuda sets.
          flags+=(-DPROBE_CUDA -DEMBER_CUDA=1)
        fi ;;
      mnist_example)
        if [[ $impl == concrete ]]; then
          # The data loader's header first: the file had it through data.hpp, which now
          # includes only the dataset it uses.
          { echo '#include <ember/data.hpp>'; git show 49bce02:examples/mnist/main.cpp; } >"$before"
          src=$before
        else
          src=examples/mnist/main.cpp
        fi
        flags+=(-DEMBER_VERSION_STRING='"bench"') ;;
      *)
        src=benchmarks/compile_probes/$probe.cpp
        [[ $impl == dispatch ]] && flags+=(-DPROBE_DISPATCH) ;;
    esac
    best_wall=""; cpu=""; peak=0
    for ((i = 0; i < runs; i++)); do
      /usr/bin/time -v -o "$tmp/t.txt" "$CXX" "${flags[@]}" -c "$src" -o "$tmp/p.o"
      wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$tmp/t.txt" |
        awk '{ n = split($1, p, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + p[i]; print s }')
      c=$(awk '/User time/ { u = $4 } /System time/ { s = $4 } END { print u + s }' "$tmp/t.txt")
      kb=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$tmp/t.txt")
      # The run with the least CPU time: on a shared machine the others lost time to the load.
      if [[ -z $cpu ]] || awk -v a="$c" -v b="$cpu" 'BEGIN { exit !(a < b) }'; then
        best_wall=$wall; cpu=$c
      fi
      ((kb > peak)) && peak=$kb
    done
    line=$(printf '{"workload":"compile_dispatch","probe":"%s","impl":"%s","stack":"%s","unit":"s","value":%s,"cpu_s":%s,"peak_mb":%s,"runs":%s,"commit":"%s","date":"%s","machine":"%s","load":"%s","compiler":"%s","flags":"%s"}' \
      "$probe" "$impl" "$stack" "$best_wall" "$cpu" "$(awk -v k="$peak" 'BEGIN { printf "%.0f", k / 1024 }')" \
      "$runs" "$commit" "$(date -u +%Y-%m-%dT%H:%MZ)" "$(uname -m), $(nproc) cores" \
      "$(cut -d' ' -f1 /proc/loadavg)" "$("$CXX" --version | head -1)" "${flags[*]//\"/}")
    echo "$line"
    [[ -n $out ]] && echo "$line" >>"$out"
  done
done
