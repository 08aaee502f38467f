#!/usr/bin/python3
"""Turns benchmarks/gpt_ddp.sh's JSON lines into RESULTS.md's section on the GPT example trained
data-parallel (issue 30, item 5).

    gpt_ddp_report.py --jsonl FILE [--results RESULTS.md]

Without --results the section is printed; with it, it replaces the text between the gpt-ddp
markers of that file (appended when they are absent). Scaling is a row's tokens/s on N GPUs
divided by its tokens/s on one GPU (for ember's process-per-GPU form: by the same stack's
one-GPU figure, where no process group is made). The goals of issue 30: scaling >= 1.9x on 2
GPUs and >= 3.7x on 4, and ember's tokens/s >= PyTorch DDP's (its faster precision) on the same
GPUs, both judged on ember's fastest row at that size.
"""
import argparse

from results_section import json_lines, write_section

GOAL_SCALING = {2: 1.9, 4: 3.7}


def load(path):
    meta, rows, losses = {}, {}, {}
    for r in json_lines(path):
        if "meta" in r:
            meta = r["meta"]
            continue
        n = r.get("world_size", 1)
        if r["name"] == "gpt_loss":
            if r.get("precision", "f32") != "f32":
                continue
            losses.setdefault(n, {})[r["step"]] = r["value"]
            continue
        if r["framework"] == "ember":
            precision = r.get("precision", "f32")
            label = f"ember {precision}, {r.get('backend', '?')}, {r.get('form', 'threads')}"
            base = f"ember {precision}, {r.get('backend', '?')}, threads"
        else:
            precision = r["name"].split("_")[-2]
            label = f"PyTorch {precision}, fused AdamW (DDP on 2+ GPUs)"
            base = label
        rows.setdefault(label, {"framework": r["framework"], "base": base, "by_n": {},
                                "precision": precision})
        rows[label]["by_n"][n] = r
    return meta, rows, losses


def fmt(v, digits=0):
    return "—" if v is None else f"{v:,.{digits}f}"


def scaling(rows, label, n):
    row = rows[label]
    here = row["by_n"].get(n)
    one = rows.get(row["base"], {}).get("by_n", {}).get(1)
    if here is None or one is None:
        return None
    return here["tokens_per_s"] / one["tokens_per_s"]


def best(rows, framework, n, precision=None):
    """The label of `framework`'s row with the most tokens/s on n GPUs (of `precision`)."""
    have = [(r["by_n"][n]["tokens_per_s"], label) for label, r in rows.items()
            if r["framework"] == framework and n in r["by_n"]
            and precision in (None, r["precision"])]
    return max(have)[1] if have else None


def section(meta, rows, losses):
    sizes = sorted({n for r in rows.values() for n in r["by_n"]})
    out = ["<!-- gpt-ddp:begin -->",
           "## The GPT example data-parallel on several GPUs (issue 30)", ""]
    out.append(
        f"`benchmarks/gpt_ddp.sh`, {meta.get('date', '?')}, commit {meta.get('commit', '?')}, "
        f"{meta.get('gpus', '?')} × {meta.get('gpu', '?')} (NVLink multicast off: "
        f"`NCCL_NVLS_ENABLE=0`), PyTorch {meta.get('torch', '?')} in the same run. The GPT "
        "example's model (GPT-2 small's shape over bytes, 86.0 M parameters), 8 sequences of "
        "1024 tokens per GPU, AdamW (bf16: autocast, f32 weights; ember's `--bf16` is "
        "`ember::Autocast`); each GPU trains on its own 8 rows of one fixed batch and the "
        "gradients are averaged during backward (ember: `GradientReducer` over NCCL; PyTorch: "
        "DistributedDataParallel). Each figure is the best of 2 rounds of 5 steps after 3 "
        "warm-up steps. ember's \"threads\" rows are one process with a thread per GPU "
        "(`gpt train --bench --devices 0,1,..`), \"processes\" one process per GPU "
        "(`--distributed`); `cuda+fusion` is the `Autodiff<Fusion<Cuda>>` stack. Tokens/s are "
        "over all GPUs; scaling = tokens/s on N GPUs ÷ tokens/s on one.")
    out.append("")
    head = "| configuration | " + " | ".join(f"{n} GPU{'s' if n > 1 else ''}" for n in sizes)
    head += "".join(f" | scaling {n}" for n in sizes if n > 1) + " |"
    out += [head, "| --- |" + " ---: |" * (len(sizes) + len([n for n in sizes if n > 1]))]
    # ember first, each stack's threads row before its processes row.
    order = sorted(rows, key=lambda l: (rows[l]["framework"] != "ember",
                                        l.replace("+fusion", "~fusion").replace("processes", "~")))
    for label in order:
        by_n = rows[label]["by_n"]
        cells = [fmt(by_n[n]["tokens_per_s"]) if n in by_n else "—" for n in sizes]
        cells += [fmt(scaling(rows, label, n), 2) + "×" if scaling(rows, label, n) else "—"
                  for n in sizes if n > 1]
        out.append(f"| {label} | " + " | ".join(cells) + " |")
    out.append("")
    out.append("Step time in ms, and the model FLOPs utilisation per GPU against the H200's "
               "989 TFLOP/s of dense bf16 (f32 rows are a fraction of a bf16 peak too), and "
               "rank 0's peak memory in MiB:")
    out.append("")
    out += ["| configuration | " + " | ".join(f"{n} GPU{'s' if n > 1 else ''}" for n in sizes)
            + " |", "| --- |" + " ---: |" * len(sizes)]
    for label in order:
        by_n = rows[label]["by_n"]
        cells = []
        for n in sizes:
            r = by_n.get(n)
            if r is None:
                cells.append("—")
                continue
            mfu = f", {100 * r['mfu']:.1f} %" if "mfu" in r else ""
            mem = f", {r['peak_memory_mib']:,.0f} MiB" if "peak_memory_mib" in r else ""
            cells.append(f"{r['value']:.1f}{mfu}{mem}")
        out.append(f"| {label} | " + " | ".join(cells) + " |")
    out.append("")
    goals = ["| goal | figure | met |", "| --- | --- | --- |"]
    for n in sizes:
        if n == 1:
            continue
        e, t = best(rows, "ember", n), best(rows, "torch", n)
        if e and n in GOAL_SCALING:
            s = scaling(rows, e, n)
            goals.append(f"| ember's scaling on {n} GPUs ≥ {GOAL_SCALING[n]}× | {s:.2f}× ({e}) | "
                         f"{'✓' if s >= GOAL_SCALING[n] else '✗ missed'} |")
        if e and t:
            ratio = rows[e]["by_n"][n]["tokens_per_s"] / rows[t]["by_n"][n]["tokens_per_s"]
            goals.append(f"| ember's tokens/s ≥ PyTorch DDP's on {n} GPUs | {ratio:.2f}× "
                         f"({e} against {t}) | {'✓' if ratio >= 1 else '✗ missed'} |")
        for precision in ("bf16", "f32"):  # like for like, for information
            ep, tp = best(rows, "ember", n, precision), best(rows, "torch", n, precision)
            if ep and tp and (ep, tp) != (e, t):
                ratio = rows[ep]["by_n"][n]["tokens_per_s"] / rows[tp]["by_n"][n]["tokens_per_s"]
                goals.append(f"| (like for like) ember {precision} against PyTorch DDP "
                             f"{precision} on {n} GPUs | {ratio:.2f}× ({ep}) | — |")
    if len(goals) > 2:
        out += goals + [""]
    # A run that timed out (gpt_ddp.sh's GPT_DDP_TIMEOUT) or failed writes no line: say which
    # rows of ember's multi-GPU forms are absent rather than leave a bare dash unexplained.
    absent = [f"{label} on {n} GPUs" for label in order for n in sizes
              if n > 1 and rows[label]["framework"] == "ember" and n not in rows[label]["by_n"]
              and label.endswith("threads")]
    if 2 in sizes and 2 not in losses:
        absent.append("the loss check's 2-GPU run")
    if absent:
        out.append("Not measured in this run (the run wrote no line: cut off by the script's "
                   "per-run time limit, or failed; its stderr is kept beside the JSON lines): "
                   + "; ".join(absent) + ".")
        out.append("")
    if 1 in losses and 2 in losses:
        steps = sorted(set(losses[1]) & set(losses[2]))
        worst = max(abs(losses[1][k] - losses[2][k]) for k in steps)
        out.append(
            f"Loss check (the same 8 rows and weights, f32, `cuda`): the first {len(steps)} "
            f"losses of 2 GPUs × 4 rows ({', '.join(f'{losses[2][k]:.5f}' for k in steps)}) "
            f"against 1 GPU × 8 rows differ by at most {worst:.1e}.")
        out.append("")
    out.append("<!-- gpt-ddp:end -->")
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--jsonl", required=True)
    p.add_argument("--results")
    a = p.parse_args()
    meta, rows, losses = load(a.jsonl)
    lines = section(meta, rows, losses)
    if a.results:
        write_section(a.results, "gpt-ddp", lines[1:-1])
    else:
        print("\n".join(lines))


if __name__ == "__main__":
    main()
