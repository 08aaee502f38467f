#!/usr/bin/python3
"""Writes RESULTS.md's section on issue 30's training benchmark from the raw lines of
benchmarks/gpu_train.sh (one file a run).

    gpu_train_report.py RESULTS.md FILE.jsonl

Each row compares ember's fastest stack for a workload with PyTorch's fastest configuration of
the same run (the minimum over what the run measured: eager, fused optimizer, CUDA graph, and
torch.compile when the run included it). Ratio = ember / PyTorch (lower is better); the goal is
ember ≤ 0.9× PyTorch's best.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from results_section import write_section  # noqa: E402

GOAL = 0.9
# The loss check: after the same steps from the same weights, each step's loss within this
# fraction of PyTorch's in the same precision (bf16 rounds to 8 significant bits; the two sides
# sum in different orders, so their trajectories part slowly).
LOSS_RTOL = 0.02


def fmt(x, digits=3):
    return f"{x:.{digits}f}" if x is not None else "—"


def best(rows, pred):
    rows = [r for r in rows if pred(r)]
    return min(rows, key=lambda r: r["value"]) if rows else None


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    path = sys.argv[2]
    meta, rows = {}, []
    for line in open(path, encoding="utf-8"):
        if not line.startswith("{"):
            continue
        r = json.loads(line)
        if "meta" in r:
            meta = r["meta"]
        elif "value" in r and "name" in r:
            rows.append(r)
    ember = [r for r in rows if r.get("framework") == "ember"]
    torch = [r for r in rows if r.get("framework") == "torch" and not r["name"].endswith("_best")]
    table = []

    def row(label, e, t, extra=""):
        ratio = e["value"] / t["value"] if e and t else None
        verdict = ("**met**" if ratio <= GOAL else "**missed**") if ratio else "—"
        table.append(f"| {label} | {fmt(e and e['value'])} (`{e['name'] if e else '—'}`) | "
                     f"{fmt(t and t['value'])} (`{t['name'] if t else '—'}`) | "
                     f"{fmt(ratio, 2) + '×' if ratio else '—'} | ≤ {GOAL}×: {verdict} | {extra} |")

    for model in ("mlp", "cnn"):
        for batch in (64, 1024, 4096):
            stem = f"train_step_{model}_b{batch}"
            ok = lambda r, s=stem: r["name"] == s or r["name"].startswith(s + "_")
            e, t = best(ember, ok), best(torch, ok)
            if e or t:
                row(f"{'MLP' if model == 'mlp' else 'guide CNN'}, batch {batch}, f32", e, t)
    def loss_check(name, precision):
        """'largest |ember - PyTorch| (relative), verdict' of the `name` lines in `precision`."""
        losses = {}
        for r in rows:
            if r["name"] == name:
                key = (r["framework"], r.get("precision", "f32"))
                losses.setdefault(key, {})[r["step"]] = r["value"]
        e, t = losses.get(("ember", precision), {}), losses.get(("torch", precision), {})
        common = sorted(set(e) & set(t))
        if not common:
            return "—"
        diff = max(abs(e[s] - t[s]) for s in common)
        rel = max(abs(e[s] - t[s]) / abs(t[s]) for s in common)
        ok = "within" if rel <= LOSS_RTOL else "NOT within"
        return (f"{len(common)} steps, largest difference {diff:.1e} ({100 * rel:.2f} %, {ok} "
                f"{100 * LOSS_RTOL:.0f} %)")

    prec = lambda r, p: f"_{p}_" in r["name"] + "_"
    rn = lambda r: r["name"].startswith("resnet18_b256")
    # A side's fastest line of a model: in any precision, in f32, in bf16.
    def fastest(side, pred):
        return (best(side, pred), best(side, lambda r: pred(r) and prec(r, "f32")),
                best(side, lambda r: pred(r) and prec(r, "bf16")))

    def model_rows(title, short, loss_name, e_pred, t_pred, notes):
        """A model's three rows: each side's best precision, both bf16, both f32 (`title` and
        `short` name the model); notes(e, t, precision) are a row's first notes (precision None
        for the best row), the bf16 and f32 rows' followed by their loss check."""
        e, e32, e16 = fastest(ember, e_pred)
        t, t32, t16 = fastest(torch, t_pred)
        if not (e or t):
            return
        row(f"{title} (each side's best precision)", e, t, notes(e, t, None))
        for p, ep, tp, what in (("bf16", e16, t16, "both bf16 mixed precision"),
                                ("f32", e32, t32, "both f32")):
            row(f"{short}, {what}", ep, tp, f"{notes(ep, tp, p)}; losses from the same weights: "
                f"{loss_check(loss_name, p)}")

    mem = lambda r: f"{r['peak_memory_mib']:.0f} MiB" if r and "peak_memory_mib" in r else "—"
    memory = lambda e, t: f"peak memory ember {mem(e)}, PyTorch {mem(t)}"
    e0 = best(ember, lambda r: rn(r) and r.get("cudnn") == 0)
    resnet_notes = {
        None: lambda e, t: f"without cuDNN: {fmt(e0 and e0['value'])} ms (f32); {memory(e, t)}",
        "bf16": memory,
        "f32": lambda e, t: f"PyTorch f32 peak memory {mem(t)}",
    }
    model_rows("ResNet-18, batch 256", "ResNet-18, batch 256", "resnet_loss",
               lambda r: rn(r) and r.get("cudnn", 1) == 1, rn,
               lambda e, t, p: resnet_notes[p](e, t))
    g = lambda r: r["name"].startswith("gpt_train_step_b8_s1024")
    mfu = lambda r: f"{100 * r['mfu']:.1f} %" if r and "mfu" in r else "—"
    model_rows("GPT (12 × 768, bytes), 8 × 1024 tokens", "GPT, 8 × 1024 tokens", "gpt_loss", g, g,
               lambda e, t, p: f"MFU ember {mfu(e)}, PyTorch {mfu(t)}"
               + ("" if p == "f32" else f"; {memory(e, t)}"))
    rel = os.path.relpath(path, os.path.dirname(sys.argv[1]))
    write_section(sys.argv[1], "gpu-train", [
        "## Training on the GPU: issue 30's benchmark",
        "",
        f"Generated by `benchmarks/gpu_train_report.py` from `{rel}` (`benchmarks/gpu_train.sh`, "
        f"{meta.get('date', '?')}, commit {meta.get('commit', '?')}, {meta.get('gpu', '?')}, "
        f"PyTorch {meta.get('torch', '?')} in the same run). Times in ms a step (forward, backward, "
        "optimizer). ember's figure is its fastest stack (`Autodiff<Cuda>` or "
        "`Autodiff<Fusion<Cuda>>`, eager or replayed as a CUDA graph); PyTorch's the fastest of "
        "what the run measured (eager, fused optimizer, whole step in a CUDA graph; "
        "`torch.compile` only where the row's name says so). bf16 rows: ember's `--bf16` "
        "(`ember::Autocast`) against PyTorch's `torch.autocast(dtype=torch.bfloat16)`, f32 "
        "weights on both sides. The loss check: each step's loss within "
        f"{100 * LOSS_RTOL:.0f} % of PyTorch's in the same precision (runs without the "
        "bf16 lines predate ember's mixed precision).",
        "",
        "| workload | ember | PyTorch best | ratio | goal | notes |",
        "| --- | ---: | ---: | ---: | --- | --- |",
        *table,
    ])


if __name__ == "__main__":
    main()
