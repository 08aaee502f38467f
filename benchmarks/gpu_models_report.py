#!/usr/bin/python3
"""Writes RESULTS.md's "gpu-models" section: ember's ResNet-18 and GPT training steps from one or
more runs (NEW, in order: a workload several runs measured is shown from the last of them),
beside ember's figures of an earlier run (EARLIER: the "before" column) and PyTorch's fastest
configuration of the same run when that run has PyTorch's rows (benchmarks/gpu_train.sh with
GPU_TRAIN_MODELS_ONLY=1, or a subset of its commands: same run, same weights), else of EARLIER
(which the section then says).

    gpu_models_report.py RESULTS.md NEW.jsonl[,NEWER.jsonl...] EARLIER.jsonl \
        [--section NAME --title TITLE]

(--section writes the section NAME instead of "gpu-models", headed TITLE: a table of a few
runs beside the main one, e.g. one change's runs that did not time every PyTorch configuration.)

Rows: every ember timing line of the NEW runs (`gpt_train_step_*`, `resnet18_*`), matched by
name and backend with EARLIER's ember line. Ratios are ember / PyTorch (lower is better; the
issue's goal is ≤ 0.9). Where the run has both sides' per-step losses from the same weights, the
largest relative difference is given; a row of a step replayed as a CUDA graph (`"graph": true`,
a name ending in `_graph`) compares the losses of that mode (framework "ember-graph") where the
run has them.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from results_section import json_lines, write_section  # noqa: E402


def load(path):
    meta, rows, losses = {}, [], []
    for r in json_lines(path):
        if "meta" in r:
            meta = r["meta"]
        elif r.get("name") in ("gpt_loss", "resnet_loss"):
            losses.append(r)
        elif "value" in r and "name" in r:
            rows.append(r)
    return meta, rows, losses


def loss_gap(losses, model, p, side="ember"):
    """Largest |ember − PyTorch| / |PyTorch| over the steps both logged, or None; `side` names
    ember's lines ("ember", or "ember-graph" for the replayed step's)."""
    by = {}
    for r in losses:
        if r["name"] == f"{model}_loss" and r.get("precision") == p:
            by.setdefault(r["step"], {})[r["framework"]] = r["value"]
    gaps = [abs(v[side] - v["torch"]) / abs(v["torch"]) for v in by.values()
            if side in v and "torch" in v and v["torch"] != 0]
    return (max(gaps), len(gaps)) if gaps else None


def precision(row):
    name = row["name"]
    return row.get("precision") or ("bf16" if "_bf16" in name else "f32")


def model_prefix(row):
    """The name every configuration of the row's model and precision starts with."""
    name, p = row["name"], precision(row)
    if name.startswith("gpt_train_step_"):
        return name.split(f"_{p}")[0] + f"_{p}"
    return name.split(f"_{p}_")[0] + f"_{p}_"


def main():
    args = sys.argv[1:]
    section, title = "gpu-models", "Training on the GPU: ember's examples against PyTorch's best (issue 30)"
    for flag in ("--section", "--title"):
        if flag in args:
            at = args.index(flag)
            if at + 1 >= len(args):
                sys.exit(__doc__)
            if flag == "--section":
                section = args[at + 1]
            else:
                title = args[at + 1]
            del args[at:at + 2]
    if len(args) != 3:
        sys.exit(__doc__)
    results, new_arg, old_path = args
    runs = [(path, *load(path)) for path in new_arg.split(",")]
    old_meta, old, _ = load(old_path)
    ember_old = [r for r in old if r.get("framework") == "ember"]
    # Each ember workload from the last run that has it, with that run's PyTorch rows and
    # losses (or, for a run without PyTorch's rows, the earlier run's PyTorch figures).
    latest = {}
    for i, (_, _, rows, _) in enumerate(runs):
        for r in rows:
            if r.get("framework") == "ember" and r.get("cudnn") != 0:
                latest[(r["name"], r.get("backend") or r["name"].rsplit("_", 1)[-1])] = (r, i)
    described = []
    for path, meta, rows, _ in runs:
        same_run = any(r.get("framework") == "torch" for r in rows)
        described.append(
            f"`results/{os.path.basename(path)}` ({meta.get('date', '?')}, commit "
            f"{meta.get('commit', '?')}, {meta.get('gpu', '?')}, PyTorch "
            f"{(meta if same_run else old_meta).get('torch', '?')}: "
            + ("PyTorch's rows of the same run" if same_run else
               "**ember alone**, PyTorch's figures from the earlier run") + ")")
    compiled = sorted({t["name"] for _, _, rows, _ in runs for t in rows
                       if t.get("framework") == "torch" and "_compile" in t["name"]})
    compiled_note = ("`torch.compile` was in none of them" if not compiled else
                     "the runs' `torch.compile` rows: " + ", ".join(f"`{n}`" for n in compiled) +
                     " (`_compile`: mode max-autotune; `_compile_graph`: max-autotune-no-cudagraphs "
                     "inside a whole-step CUDA graph)")
    lines = [
        "## " + title,
        "",
        "Generated by `benchmarks/gpu_models_report.py` from " + "; ".join(described) +
        f" and, for ember's earlier figures, `results/{os.path.basename(old_path)}` "
        f"({old_meta.get('date', '?')}, commit {old_meta.get('commit', '?')}). Each row is the "
        "last of these runs that measured it; PyTorch's rows are of that run (`gpu_train.sh` "
        "with `GPU_TRAIN_MODELS_ONLY=1`, or a subset of its commands: the configurations each "
        "run timed are named in the PyTorch column; " + compiled_note + "), from "
        "the same initial weights. Times in ms a step; ratio = ember / PyTorch's fastest "
        "configuration in that run (lower is better; the goal is ≤ 0.9×).",
        "",
        "| workload | backend | ember before | ember now | speed-up | PyTorch best | now / PyTorch "
        "| peak MiB ember / PyTorch | losses (same weights) | run |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (name, backend), (r, i) in latest.items():
        path, meta, rows, losses = runs[i]
        same_run = any(t.get("framework") == "torch" for t in rows)
        torch_rows = [t for t in (rows if same_run else old)
                      if t.get("framework") == "torch" and not t["name"].endswith("_best")]
        before = next((o for o in ember_old if o["name"] == name and
                       (o.get("backend") or o["name"].rsplit("_", 1)[-1]) == backend), None)
        prefix = model_prefix(r)
        peers = [t for t in torch_rows if t["name"].startswith(prefix)]
        peer = min(peers, key=lambda t: t["value"]) if peers else None
        model = "gpt" if name.startswith("gpt") else "resnet"
        graph = r.get("graph") is True or name.endswith("_graph")
        gap = (graph and loss_gap(losses, model, precision(r), "ember-graph")) or \
            loss_gap(losses, model, precision(r))
        # A replayed step's buffers are its graph's private pool, which the examples' peak
        # includes where the line has graph_pool_mib (before that, the pool was left out).
        counted = not graph or "graph_pool_mib" in r
        mem = (f"{r['peak_memory_mib']:.0f} / {peer['peak_memory_mib']:.0f}"
               if counted and peer and "peak_memory_mib" in r and "peak_memory_mib" in peer
               else "—")
        cells = [
            f"`{name}`", backend,
            f"{before['value']:.1f}" if before else "—",
            f"{r['value']:.1f}",
            f"{before['value'] / r['value']:.2f}×" if before else "—",
            f"{peer['value']:.1f} (`{peer['name']}`)" if peer else "—",
            f"{r['value'] / peer['value']:.2f}×" if peer else "—",
            mem,
            f"{gap[1]} steps, largest difference {100 * gap[0]:.2f} %" if gap else "—",
            f"{meta.get('commit', '?')}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    write_section(results, section, lines)


if __name__ == "__main__":
    main()
