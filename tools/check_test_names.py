#!/usr/bin/env python3
"""Fails when a test case's name would not survive CTest.

catch_discover_tests turns each Catch2 test name into a CTest entry that runs the binary with the
name as its filter. A name with ';' is split into two CMake list items (two entries, neither of
which runs the case), and a name starting with '-' is read by Catch2 as an option, so the case
fails with "Unrecognised token". Both slipped into CI once; this check keeps them out.

usage: check_test_names.py path/to/ember_tests
"""
import subprocess
import sys


def main() -> int:
    binary = sys.argv[1]
    # Catch2 2.x exits with the number of names listed, so the status says nothing here.
    names = subprocess.run([binary, "--list-test-names-only"], capture_output=True,
                           text=True).stdout.splitlines()
    bad = []
    for name in names:
        if not name:
            continue
        if ";" in name:
            bad.append(f"';' splits the CTest entry: {name}")
        if name[0] in "- \t" or name != name.rstrip():
            bad.append(f"leading '-' or surrounding blanks: {name!r}")
    if not any(names):
        bad.append("the binary listed no test names")
    for line in bad:
        print(line)
    print(f"{len(names)} names checked, {len(bad)} refused")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
