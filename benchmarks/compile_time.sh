#!/usr/bin/env bash
# Times compiling benchmarks/compile_probe.cpp (the umbrella header plus a few ops on
# Tensor<Cpu, 2>) at -O2 with the flags the build uses: median wall and CPU seconds of 3 runs
# with ccache disabled, and the compiler's peak memory (/usr/bin/time -v).
#
#   benchmarks/compile_time.sh [--runs N] [--torch]
#
# Prints one JSON line per probe in bench_cpu's format ("workload":"compile_umbrella").
# --torch also times the LibTorch peer of ANCHORS.md (a small file including <torch/torch.h>),
# once: it takes about half a minute.
# Environment: CXX (default c++, CMake's default compiler), CXXFLAGS_EXTRA.
set -euo pipefail
cd "$(dirname "$0")/.."

runs=3
torch=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --torch) torch=1; shift ;;
    *) echo "usage: $0 [--runs N] [--torch]" >&2; exit 2 ;;
  esac
done

if [[ ! -x /usr/bin/time ]]; then
  echo "compile_time.sh: installing GNU time" >&2
  if [[ $(id -u) -eq 0 ]]; then apt-get install -y -qq time >&2; else sudo apt-get install -y -qq time >&2; fi
fi

CXX="${CXX:-c++}"
export CCACHE_DISABLE=1
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# time_probe NAME SOURCE RUNS FLAGS...: compiles SOURCE to an object RUNS times.
time_probe() {
  local name="$1" src="$2" n="$3"
  shift 3
  local walls=() cpus=() peak_kb=0
  for ((i = 0; i < n; i++)); do
    /usr/bin/time -v -o "$tmp/time.txt" "$CXX" "$@" -c "$src" -o "$tmp/probe.o"
    local wall user sys kb
    wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$tmp/time.txt")
    user=$(sed -n 's/.*User time (seconds): //p' "$tmp/time.txt")
    sys=$(sed -n 's/.*System time (seconds): //p' "$tmp/time.txt")
    kb=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$tmp/time.txt")
    walls+=("$(awk -v t="$wall" 'BEGIN { n = split(t, p, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + p[i]; print s }')")
    cpus+=("$(awk -v u="$user" -v s="$sys" 'BEGIN { print u + s }')")
    ((kb > peak_kb)) && peak_kb=$kb
  done
  local med_wall med_cpu min_wall
  med_wall=$(printf '%s\n' "${walls[@]}" | sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }')
  min_wall=$(printf '%s\n' "${walls[@]}" | sort -g | head -1)
  med_cpu=$(printf '%s\n' "${cpus[@]}" | sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }')
  printf '{"workload":"compile_umbrella","impl":"%s","threads":1,"unit":"s","value":%s,"median_s":%s,"min_s":%s,"cpu_s":%s,"peak_mb":%s,"runs":%s,"flags":"%s"}\n' \
    "$name" "$med_wall" "$med_wall" "$min_wall" "$med_cpu" "$(awk -v k="$peak_kb" 'BEGIN { printf "%.0f", k / 1024 }')" \
    "$n" "$*"
}

time_probe ember benchmarks/compile_probe.cpp "$runs" -std=c++20 -O2 -I include ${CXXFLAGS_EXTRA:-}

if [[ $torch -eq 1 ]]; then
  cat > "$tmp/torch_probe.cpp" <<'CPP'
#include <torch/torch.h>
#include <iostream>
int main() {
    auto x = torch::rand({32, 64});
    auto w = torch::randn({64, 16}) * 0.1;
    auto h = x.matmul(w) + 1;
    auto g = h * ((h / std::sqrt(2.0)).erf() + 1) / 2;
    auto p = torch::softmax(g, 1);
    std::cout << (p.sum(1) - 1).abs().max() << '\n';
}
CPP
  time_probe libtorch "$tmp/torch_probe.cpp" 1 -std=c++17 -O2 -I/usr/include/torch/csrc/api/include
fi
