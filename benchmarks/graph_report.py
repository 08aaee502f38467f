#!/usr/bin/python3
"""Turns benchmarks/graph.sh's JSON lines into the "CUDA graphs" section of RESULTS.md.

    graph_report.py --jsonl FILE [--stderr FILE] [--results RESULTS.md]

Without --results the section is printed; with it, the section replaces the text between the
cuda-graph markers of that file (appended when they are absent). The k-th figure of a
(framework, name) in file order belongs to round k. A figure shown is the median over rounds; a
ratio is the median over rounds of the ratio within each round (both sides of a ratio saw the
same machine at the same time). ember's replayed step is the faster of its two stacks
(Autodiff<Cuda>, Autodiff<Fusion<Cuda>>) in each round. --stderr names bench_cuda's standard
error of the same run, whose lines give each captured step's nodes, draws and updates.
"""
import argparse
import json
import re
import statistics

from results_section import replace_section

GOAL = 0.8  # ember's replayed step ≤ 0.8× PyTorch's whole-step CUDA graph, at batch 64
VULKAN_GOAL = 1.2  # ember's replayed Vulkan step ≤ 1.2× PyTorch's CUDA graph, at batch 64
MODELS = [("mlp", "MLP 784-512-512-10"), ("cnn", "guide CNN")]


def load(path):
    meta, runs = {}, {}
    for line in open(path, encoding="utf-8"):
        line = line.strip()
        if not line.startswith("{"):
            continue
        r = json.loads(line)
        if "meta" in r:
            meta = r["meta"]
            continue
        runs.setdefault((r["framework"], r["name"]), []).append(r["value"])
    return meta, runs


def median(v):
    return statistics.median(v) if v else None


def fmt(v, digits=3):
    return "—" if v is None else f"{v:.{digits}f}"


def graph_notes(path):
    """{row name: (nodes, draws, updates)} from bench_cuda's stderr (last run of each row)."""
    notes = {}
    pat = re.compile(r"bench_(cuda|vulkan): (\S+): (\d+) (?:graph nodes|dispatches), "
                     r"(\d+) random draws, (\d+) Adam")
    for line in open(path, encoding="utf-8"):
        m = pat.search(line)
        if m:  # a Vulkan step is named apart: the two backends time rows of the same names
            name = m.group(2) if m.group(1) == "cuda" else f"vulkan {m.group(2)}"
            notes[name] = tuple(int(x) for x in m.groups()[2:])
    return notes


def section(meta, runs, notes=None, source="`benchmarks/graph.sh`", rounds="rounds alternating"):
    def get(fw, name):
        return runs.get((fw, name), [])

    lines = ["<!-- cuda-graph:begin -->", "## Training steps replayed as CUDA graphs (issue 31)", ""]
    lines.append(
        f"{source}, {meta.get('date', '?')}, commit {meta.get('commit', '?')}, "
        f"{meta.get('gpu', '?')}, PyTorch {meta.get('torch', '?')} in the same run, {rounds}. "
        "A step is forward, backward and Adam on one random batch; each figure is "
        "the best of 5 timings of 50 steps after warm-up, the median over rounds. ember's "
        "graph: the step captured once with `ember::cuda::capture` and replayed; PyTorch's: "
        "the whole step in `torch.cuda.graphs` with the fused, capturable Adam. Ratio = ember's "
        "faster replayed stack / PyTorch's CUDA graph (lower is better).")
    def table(fw, goal_value, replay):
        rows = ["", f"| step | ember eager | ember eager, Fusion | ember {replay} | "
                f"ember {replay}, Fusion | PyTorch eager | PyTorch fused Adam | "
                "PyTorch CUDA graph | ratio | goal |",
                "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
        for batch in (64, 1024):
            for key, label in MODELS:
                base = f"train_step_{key}_b{batch}"
                e = get(fw, base)
                ef = get(fw, base + "_fusion")
                g = get(fw, base + "_graph")
                gf = get(fw, base + "_fusion_graph")
                t = get("torch", base)
                tf = get("torch", base + "_fused")
                tg = get("torch", base + "_graph")
                ratios = []
                for i in range(min(len(tg), max(len(g), len(gf)))):
                    best = min(x[i] for x in (g, gf) if i < len(x))
                    ratios.append(best / tg[i])
                ratio = median(ratios)
                goal = "—"
                if batch == 64 and ratio is not None:
                    goal = f"≤ {goal_value}× " + ("✓" if ratio <= goal_value else "✗")
                rows.append(
                    f"| {label}, batch {batch} | {fmt(median(e))} | {fmt(median(ef))} | "
                    f"{fmt(median(g))} | {fmt(median(gf))} | {fmt(median(t))} | "
                    f"{fmt(median(tf))} | {fmt(median(tg))} | "
                    f"{fmt(ratio, 2) + '×' if ratio is not None else '—'} | {goal} |")
        return rows

    lines += table("ember", GOAL, "graph")
    vulkan = any(fw == "ember-vulkan" for fw, _ in runs)
    if vulkan:
        lines += ["", "The same steps on ember's Vulkan backend (NVIDIA's Vulkan driver, same GPU, "
                  "same rounds): replayed = recorded once into a command buffer by "
                  "`ember::vulkan::capture` and resubmitted; the goal compares it with PyTorch's "
                  "CUDA graph."]
        lines += table("ember-vulkan", VULKAN_GOAL, "replayed")
    lines += ["", "Times in ms. Per-op overhead of a 1-element add, µs per op:", "",
              "| ember eager | ember eager, in place | ember replayed graph (1000 in-place adds) "
              "| PyTorch eager |", "| ---: | ---: | ---: | ---: |"]
    lines.append(
        f"| {fmt(median(get('ember', 'op_overhead_add_1')), 2)} | "
        f"{fmt(median(get('ember', 'op_overhead_add_1_in_place')), 2)} | "
        f"{fmt(median(get('ember', 'op_overhead_add_1_graph')), 2)} | "
        f"{fmt(median(get('torch', 'op_overhead_add_1')), 2)} |")
    if vulkan:
        lines.append(
            f"| Vulkan: {fmt(median(get('ember-vulkan', 'op_overhead_add_1')), 2)} | "
            f"{fmt(median(get('ember-vulkan', 'op_overhead_add_1_in_place')), 2)} | "
            f"{fmt(median(get('ember-vulkan', 'op_overhead_add_1_graph')), 2)} | — |")
    if notes:
        lines += ["", "Each captured step (from the same run): graph nodes (Vulkan: dispatches), "
                  "random draws, Adam updates rewritten per replay:", ""]
        lines.append("; ".join(f"`{k}` {v[0]} / {v[1]} / {v[2]}" for k, v in sorted(notes.items())) + ".")
    lines.append("<!-- cuda-graph:end -->")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--jsonl", required=True)
    ap.add_argument("--stderr")
    ap.add_argument("--results")
    ap.add_argument("--source", default="`benchmarks/graph.sh`", help="what made the lines")
    ap.add_argument("--rounds", default="rounds alternating", help="how many rounds, and how")
    a = ap.parse_args()
    text = section(*load(a.jsonl), graph_notes(a.stderr) if a.stderr else None, a.source,
                   a.rounds)
    if a.results:
        replace_section(a.results, "cuda-graph", text)
    else:
        print(text, end="")


if __name__ == "__main__":
    main()
