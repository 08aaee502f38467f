#!/usr/bin/env python3
"""Fails when an environment variable ember reads is missing from docs/environment.md.

What counts as read: every string literal that is exactly an `EMBER_*` name in the C++/CUDA
sources (getenv calls and the tables of names passed to it), and every `$EMBER_*` /
`${EMBER_*}` in the shell scripts. The page must name each in backquotes.
usage: check_env_docs.py [REPO_ROOT]
"""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent.parent)
code_dirs = ["include", "src", "backends", "tools", "examples", "benchmarks", "tests"]
code_ext = {".cpp", ".hpp", ".cu", ".cuh", ".h"}
literal = re.compile(r'"(EMBER_[A-Z0-9_]+)"')
shell = re.compile(r"\$\{?(EMBER_[A-Z0-9_]+)")

found = {}
for d in code_dirs:
    for f in (root / d).rglob("*"):
        if f.suffix in code_ext and f.is_file():
            for m in literal.finditer(f.read_text(errors="replace")):
                found.setdefault(m.group(1), f.relative_to(root))
for f in root.rglob("*.sh"):
    if "build" in f.parts[len(root.parts):][:1] or "node_modules" in f.parts:
        continue
    for m in shell.finditer(f.read_text(errors="replace")):
        found.setdefault(m.group(1), f.relative_to(root))

page = (root / "docs" / "environment.md").read_text()
documented = set(re.findall(r"`(EMBER_[A-Z0-9_]+)`", page))
missing = sorted(v for v in found if v not in documented)
for v in missing:
    print(f"docs/environment.md does not list {v} (read in {found[v]})")
print(f"check_env_docs: {len(found)} variables read, {len(missing)} missing from the page")
sys.exit(1 if missing else 0)
