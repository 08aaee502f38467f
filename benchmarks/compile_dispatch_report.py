#!/usr/bin/python3
"""Writes RESULTS.md's section on the compile cost of ember::Dispatch from the JSON lines of
benchmarks/compile_dispatch.sh (each file a run of the script with --out), and the size of its
CPU-only runtime from those of benchmarks/dispatch_size.sh where a file has them.

    compile_dispatch_report.py RESULTS.md FILE.jsonl [FILE.jsonl ...]

One table row per probe and file: the concrete stack's and Dispatch's CPU seconds (user +
system, what compares on a shared machine), wall seconds and peak compiler memory, and the
issue's goals for Dispatch; LibTorch's row (beside (a)) has one side and no goal. One size row
per dispatch_size line: the stripped bytes against the goal of 10 MB (10,000,000 bytes). Files
of benchmarks/compile_dispatch_ab.sh (alternating rounds of a change, "before" and "after")
give one row per probe and file: the rounds' median and least CPU seconds of each side, the
change of the medians, and the load the rounds met.
"""
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from results_section import write_section  # noqa: E402

PROBES = {
    "tensor_snippet": ("(a) README tensor snippet", "`Cpu`", 2.0, None),
    "torch_snippet": ("(a) the same snippet in LibTorch (`<torch/torch.h>`)", "LibTorch", None,
                      None),
    "model_training": ("(b) mnist's models + a training loop (`model_training.cpp`)",
                       "`Autodiff<Fusion<Cpu>>`", 5.0, 1024),
    "mnist_example": ("(b) `examples/mnist/main.cpp`: the models + the Learner",
                      "`Autodiff<Cpu>`, `Cpu` (49bce02)", 5.0, 1024),
    "transformer_lm": ("(c) the GPT example's transformer LM + training and generation steps "
                       "(`transformer_lm.cpp`)", "`Autodiff<Fusion<Cpu>>`", 5.0, 1024),
}


def verdict(cpu, peak, goal_s, goal_mb):
    parts = [f"≤ {goal_s:g} s: " + ("**met**" if cpu <= goal_s else "**missed**")]
    if goal_mb:
        parts.append(f"≤ {goal_mb / 1024:g} GB: " + ("**met**" if peak <= goal_mb else "**missed**"))
    return "; ".join(parts)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    rows = []
    sizes = []
    ab_rows = []
    for path in sys.argv[2:]:
        runs = {}
        ab = {}
        for line in open(path, encoding="utf-8"):
            if line.strip():
                r = json.loads(line)
                if r.get("workload") == "dispatch_size":
                    sizes.append((r, path))
                    continue
                if r.get("workload") == "compile_dispatch_ab":
                    ab.setdefault(r["probe"], {}).setdefault(r["variant"], []).append(r)
                    continue
                runs[(r["probe"], r["impl"])] = r
        for probe, sides in ab.items():
            b, a = sides.get("before"), sides.get("after")
            if not b or not a or probe not in PROBES:
                continue
            mb = statistics.median(x["cpu_s"] for x in b)
            ma = statistics.median(x["cpu_s"] for x in a)
            loads = [float(x["load"]) for x in b + a if "load" in x]
            ab_rows.append(
                f"| {PROBES[probe][0]} | {b[0].get('commit', '—')} → {a[0].get('commit', '—')} "
                f"| {min(len(b), len(a))} | {mb:.2f} | {min(x['cpu_s'] for x in b):.2f} "
                f"| {ma:.2f} | {min(x['cpu_s'] for x in a):.2f} | {100 * (ma - mb) / mb:+.0f} % "
                f"| {statistics.median(x['peak_mb'] for x in b):.0f} → "
                f"{statistics.median(x['peak_mb'] for x in a):.0f} "
                f"| {min(loads):.1f}–{max(loads):.1f} | `{os.path.basename(path)}` |"
                if loads else "")
        for probe, (label, concrete, goal_s, goal_mb) in PROBES.items():
            t = runs.get((probe, "libtorch"))
            if t:  # LibTorch beside (a): no Dispatch side, no goal
                rows.append(
                    f"| {label} | {t.get('stack') or concrete} | {t['cpu_s']:.2f} | {t['value']:.1f} "
                    f"| {t['peak_mb']} | — | — | — | (reference) "
                    f"| {t.get('commit', '—')}, load {t.get('load', '—')} "
                    f"| `{os.path.basename(path)}` |")
                continue
            c, d = runs.get((probe, "concrete")), runs.get((probe, "dispatch"))
            if not c or not d:
                continue
            if c.get("stack") and probe == "transformer_lm":
                concrete = f"`{c['stack']}`"
            rows.append(
                f"| {label} | {concrete} | {c['cpu_s']:.2f} | {c['value']:.1f} | {c['peak_mb']} "
                f"| {d['cpu_s']:.2f} | {d['value']:.1f} | {d['peak_mb']} "
                f"| {verdict(d['cpu_s'], d['peak_mb'], goal_s, goal_mb)} "
                f"| {d.get('commit', '—')}, load {d.get('load', '—')} | `{os.path.basename(path)}` |")
    size_rows = []
    for r, path in sizes:
        mb = r["value"] / 1e6
        size_rows.append(
            f"| {r['link']} (`{r.get('link_flags') or 'no flags'}`) | {r['value']:,} "
            f"| {mb:.2f} MB ({r['value'] / 2**20:.2f} MiB) | {r['unstripped']:,} "
            f"| ≤ 10 MB: {'**met**' if r['value'] <= 10_000_000 else '**missed**'} "
            f"| {r.get('commit', '—')}, {r.get('date', '—')}, {r.get('machine', '—')} "
            f"| `{os.path.basename(path)}` |")
    size_table = []
    if size_rows:
        size_table = [
            "",
            "Size of the CPU-only runtime (`benchmarks/dispatch_size.sh`): the README's tensor",
            "snippet on Dispatch, -O2, linked statically against a CPU-only build's",
            "`ember_dispatch`, `ember_cpu` and `ember` (OpenBLAS and the C++ runtime shared, not",
            "counted), stripped.",
            "",
            "| link | stripped bytes | stripped | unstripped bytes | goal | commit, date, machine "
            "| raw lines |",
            "| --- | ---: | ---: | ---: | --- | --- | --- |",
            *size_rows,
        ]
    ab_table = []
    if ab_rows:
        ab_table = [
            "",
            "Changes measured in alternating rounds (`benchmarks/compile_dispatch_ab.sh`: each round",
            "compiles a probe on Dispatch against the commit before and after, one after the other,",
            "so both meet the same load; CPU seconds, medians and least of the rounds):",
            "",
            "| probe | commits | rounds | before: median | least | after: median | least "
            "| change of the medians | peak MB (medians) | load | raw lines |",
            "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | --- |",
            *[r for r in ab_rows if r],
        ]
    write_section(sys.argv[1], "compile-dispatch", [
        "Generated by `benchmarks/compile_dispatch_report.py` from the raw lines of",
        "`benchmarks/compile_dispatch.sh` (-O2, ccache off, one compile to an object each; CPU",
        "seconds are user + system of the compiler, wall seconds depend on the machine's load).",
        "",
        "| probe | concrete stack | CPU s | wall s | peak MB | on `Dispatch`: CPU s | wall s "
        "| peak MB | goal on Dispatch (CPU time) | commit, load | raw lines |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | --- |",
        *rows,
        *size_table,
        *ab_table,
    ])


if __name__ == "__main__":
    main()
