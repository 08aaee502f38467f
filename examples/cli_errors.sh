#!/usr/bin/env bash
# The examples' command lines: a bad value or an unknown option prints one line on stderr that
# names the program and the option, and exits with status 2; --help and --version exit 0.
#   cli_errors.sh PROGRAM ARGS...   (ARGS: a command line that must be refused)
set -uo pipefail
prog=$1; shift
name=$(basename "$prog")
err=$(mktemp); trap 'rm -f "$err"' EXIT
"$prog" "$@" >/dev/null 2>"$err"; status=$?
lines=$(wc -l <"$err")
if [[ $status -ne 2 || $lines -ne 1 ]] || ! grep -q "^$name: " "$err"; then
  echo "FAIL: '$name $*' exited $status with $lines line(s) on stderr (want 2 and one line):"
  cat "$err"; exit 1
fi
echo "ok: $name $* -> $(cat "$err")"
"$prog" --help >/dev/null || { echo "FAIL: $name --help exited $?"; exit 1; }
"$prog" --version | grep -q "$name (ember " || { echo "FAIL: $name --version"; exit 1; }
