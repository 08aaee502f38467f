#!/usr/bin/python3
"""Replaces one generated section of a Markdown file (RESULTS.md) with new text.

    results_section.py FILE NAME < text

A section lies between "<!-- NAME:begin -->" and "<!-- NAME:end -->" (the text carries both);
it is appended when the file has none. The file is written to a temporary name and renamed,
so an interrupted run leaves the old file whole. train_report.py imports replace_section.
"""
import json
import os
import sys


def replace_section(path, name, text):
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    if not text.endswith("\n"):
        text += "\n"
    old = open(path, encoding="utf-8").read() if os.path.exists(path) else ""
    if begin in old and end in old:
        new = old[:old.index(begin)] + text + old[old.index(end) + len(end):].lstrip("\n")
    else:
        new = old.rstrip("\n") + "\n\n" + text
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(new)
    os.replace(tmp, path)


def json_lines(path):
    """The JSON objects of a raw results file, one a line (other lines skipped)."""
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.startswith("{")]


def section_args(doc):
    """The five arguments the section writers take (RESULTS.md, the raw file, the section's
    name, its title and what the run was), or exit with the writer's usage."""
    if len(sys.argv) != 6:
        sys.exit(doc)
    return sys.argv[1:]


def pop_options(argv, names, doc):
    """Takes `--NAME VALUE` pairs for the given names out of argv (a list, changed in place) and
    returns {name: value} for those present; exits with `doc` when a flag lacks its value."""
    found = {}
    for name in names:
        flag = "--" + name
        if flag in argv:
            i = argv.index(flag)
            if i + 1 >= len(argv):
                sys.exit(doc)
            found[name] = argv[i + 1]
            del argv[i:i + 2]
    return found


def write_section(path, name, lines):
    """replace_section with the section's lines given without its begin/end markers."""
    replace_section(path, name, "\n".join([f"<!-- {name}:begin -->", *lines,
                                           f"<!-- {name}:end -->"]))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    replace_section(sys.argv[1], sys.argv[2], sys.stdin.read())
