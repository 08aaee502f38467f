#!/usr/bin/env bash
# Fuzzes every target for the same time, as many at once as there are cores:
#
#   tests/fuzz/run_all.sh SECONDS [BUILD] [JOBS]
#
# BUILD defaults to build/ of the checkout (the fuzz build goes to BUILD/fuzz, see run.sh), JOBS
# to the number of cores. Each target runs through tests/fuzz/run.sh, its corpus and log in
# BUILD/fuzz/run/<target>/. Prints one line per target (runs, coverage, result) and fails when any
# target found something; the inputs that did are in that target's directory (crash-*, leak-*,
# timeout-*, oom-*). The issue's bar before a release is `tests/fuzz/run_all.sh 600`.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
[[ $# -ge 1 ]] || { echo "usage: run_all.sh SECONDS [BUILD] [JOBS]" >&2; exit 2; }
seconds="$1" builddir="${2:-$here/../../build}" jobs="${3:-$(nproc)}"
mkdir -p "$builddir"
builddir="$(cd "$builddir" && pwd)"
bash "$here/run.sh" --build "$builddir"
mapfile -t targets < <(bash "$here/run.sh" --list)
echo "fuzzing ${#targets[@]} targets for $seconds s each, $jobs at a time"
printf '%s\n' "${targets[@]}" |
  EMBER_FUZZ_NO_BUILD=1 xargs -P "$jobs" -I{} \
    bash -c 'bash "$0" {} "$1" "$2" >/dev/null 2>&1 || true' "$here/run.sh" "$builddir" "$seconds"
failed=0
printf '%-14s %12s %8s  %s\n' target runs coverage result
for t in "${targets[@]}"; do
  log="$builddir/fuzz/run/$t/log.txt"
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" 2>/dev/null | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" 2>/dev/null | tail -1 | cut -d' ' -f2)
  found=$(grep -m1 -o 'SUMMARY: .*' "$log" 2>/dev/null || true)
  if [[ -n $found || -z $runs ]]; then
    failed=1
    result="FOUND: ${found:-no final statistics (see $log)}"
  else
    result=clean
  fi
  printf '%-14s %12s %8s  %s\n' "$t" "${runs:--}" "${cov:--}" "$result"
done
exit "$failed"
