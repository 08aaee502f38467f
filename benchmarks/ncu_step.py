#!/usr/bin/env python3
"""GPU time of one training step, kernel by kernel, from an Nsight Compute CSV.

Take the CSV on the GPU machine with the kernel durations only (no cache flush, clocks as they
are, so each kernel's time is close to its time inside the step):

    ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum \\
        --csv --page raw ./examples/gpt train --bench --backend cuda --bf16 --layers 2 \\
        --bench-warmup 1 --bench-reps 1 --bench-rounds 1 > gpt.csv

then here:

    benchmarks/ncu_step.py gpt.csv [--end REGEX] [--sequence] [--top N]

A step is the kernels after one run of the optimizer's kernels up to and including the next
(`--end`, default "adam|sgd": the last step of the run, after warm-up steps whose first kernels
include one-off work such as autotuning). Without two optimizer runs in the file, every kernel
counts. Prints the step's total, then its kernels summed by name (time, share, launches), or with
--sequence every launch in order with its grid: where the same kernel runs for different ops,
the order and the grid tell them apart. Kernel names are cut at their argument lists.
"""
import argparse
import collections
import csv
import re
import sys


def read(path):
    """[(name, microseconds, grid)] of the file's kernels, in launch order."""
    with open(path, newline="") as f:
        rows = list(csv.reader(line for line in f if line.startswith('"')))
    if len(rows) < 2:
        sys.exit(f"ncu_step.py: {path} holds no ncu --csv --page raw table")
    head, units, data = rows[0], rows[1], rows[2:]
    try:
        name_at, time_at = head.index("Kernel Name"), head.index("gpu__time_duration.sum")
    except ValueError:
        sys.exit(f"ncu_step.py: {path} lacks the Kernel Name or gpu__time_duration.sum column")
    grid_at = head.index("Grid Size") if "Grid Size" in head else None
    scale = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3,
             "ms": 1e3}.get(units[time_at].strip())
    if scale is None:
        sys.exit(f"ncu_step.py: unknown time unit '{units[time_at]}'")
    return [(re.sub(r"\(.*", "", r[name_at]).strip(),
             float(r[time_at].replace(",", "")) * scale,
             r[grid_at] if grid_at is not None else "") for r in data]


def last_step(kernels, end):
    """The kernels after the second-to-last group of optimizer kernels up to the end of the
    last one (all of them when there are fewer than two groups)."""
    groups = []
    for i, (name, _, _) in enumerate(kernels):
        if end.search(name):
            if groups and groups[-1][-1] == i - 1:
                groups[-1].append(i)
            else:
                groups.append([i])
    if len(groups) < 2:
        return kernels
    return kernels[groups[-2][-1] + 1: groups[-1][-1] + 1]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("csv")
    p.add_argument("--end", default="adam|sgd", help="regex of the optimizer's kernel names")
    p.add_argument("--sequence", action="store_true", help="every launch in order")
    p.add_argument("--top", type=int, default=40, help="kernels to list by total time")
    a = p.parse_args()
    step = last_step(read(a.csv), re.compile(a.end, re.I))
    total = sum(t for _, t, _ in step)
    print(f"{len(step)} kernels, {total / 1000:.3f} ms of GPU time")
    if a.sequence:
        for i, (name, t, grid) in enumerate(step):
            print(f"{i:5d} {t:9.1f} us  {name[:70]:70s} {grid}")
        return
    by = collections.defaultdict(lambda: [0.0, 0])
    for name, t, _ in step:
        by[name][0] += t
        by[name][1] += 1
    for name, (t, n) in sorted(by.items(), key=lambda kv: -kv[1][0])[:a.top]:
        print(f"{t:10.1f} us {100 * t / total:5.1f} % {n:5d}x  {name[:90]}")


if __name__ == "__main__":
    main()
