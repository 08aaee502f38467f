#!/usr/bin/env bash
# Builds the API reference (docs/Doxyfile) into OUT and counts the public members of
# include/ember that have no `///` comment. Fails when the count rises above the ceiling in
# docs/api-undocumented.txt; when the count falls below it, says so, so that the ceiling is
# lowered with the change and the count only goes down.
#   tools/check_api_docs.sh OUT_DIR
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:?usage: check_api_docs.sh OUT_DIR}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
cd "$root"
EMBER_API_OUT="$out" doxygen docs/Doxyfile
count=$(sort -u "$out/warnings.txt" | grep -c "is not documented" || true)
ceiling=$(tr -dc 0-9 <docs/api-undocumented.txt)
echo "check_api_docs: $count undocumented public members (ceiling $ceiling); reference in $out/html"
if ((count > ceiling)); then
  sort -u "$out/warnings.txt" | grep "is not documented" | sed "s|$root/||" | head -50
  echo "check_api_docs: more undocumented members than the ceiling: document the new ones" >&2
  exit 1
fi
if ((count < ceiling)); then
  echo "check_api_docs: fewer than the ceiling: lower docs/api-undocumented.txt to $count"
fi
