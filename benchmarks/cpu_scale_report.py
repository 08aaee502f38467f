#!/usr/bin/python3
"""Writes RESULTS.md's section on issue 37's CPU scaling benchmark from the raw lines of
benchmarks/cpu_scale.sh run (one file a run).

    cpu_scale_report.py RESULTS.md FILE.jsonl [--stdout] [--name NAME --title TITLE]

Tables: training steps (ms) at each thread count, ember beside PyTorch's best configuration at
that count (the fastest of eager and torch.compile where the run compiled), the ratio and
ember's parallel efficiency from 1 thread to the highest (t1 / (tN * N)); inference (ms per
forward pass) beside ONNX Runtime and PyTorch; kernels (GFLOP/s) beside OpenBLAS called directly
and PyTorch. The issue's goals are quoted beside each table; every figure is shown, met or not.
--stdout prints the section instead of writing it; --name and --title write it as another
section (a second run shown beside the first), under that marker name and heading.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from results_section import pop_options, write_section  # noqa: E402

NAME = "cpu-scale"
MODELS = {"mlp": "MLP 784-512-512-10", "cnn": "guide CNN", "resnet": "ResNet-18 (CIFAR)",
          "gpt": "GPT (12 x 768, bytes)"}


def fmt(x, digits=2):
    if x is None:
        return "—"
    if x >= 100:
        return f"{x:.0f}"
    return f"{x:.{digits}f}" if x >= 1 else f"{x:.3f}"


def load(path):
    meta, rows = {}, []
    for line in open(path, encoding="utf-8"):
        if line.startswith("{"):
            r = json.loads(line)
            if r.get("meta") == "cpu_scale":
                meta = {**r, **{k: v for k, v in meta.items() if k == "openblas_core"}}
            elif r.get("meta") == "bench_cpu":
                meta.setdefault("openblas_core", r.get("openblas_core"))
            elif "meta" not in r:
                rows.append(r)
    return meta, rows


def best_torch(rows, kind, model, batch, threads):
    """PyTorch's fastest configuration for this row, or None."""
    c = [r for r in rows if r.get("framework") == "torch" and r.get("kind") == kind and
         "variant" not in r and
         r.get("model") == model and r.get("batch") == batch and r.get("threads") == threads and
         "ms" in r]
    return min(c, key=lambda r: r["ms"]) if c else None


def one(rows, variant=None, **kw):
    """The first timed row with these fields (and this variant: None for the main rows)."""
    for r in rows:
        if r.get("variant") == variant and all(r.get(k) == v for k, v in kw.items()) and \
                "ms" in r:
            return r
    return None


def train_table(rows, counts):
    out = ["### Training steps", "",
           "ms a step (forward, loss, backward, Adam; the GPT AdamW), same initial weights and "
           "batch both sides. PyTorch: its faster configuration at that count (eager, or "
           "`torch.compile` where the run compiled: marked *c*). Ratio = ember ÷ PyTorch (lower "
           "is better; goal at the highest count ≤ 0.8). Efficiency = ember's t1 ÷ (tN · N) "
           "(goal ≥ 70% on the batch-256 rows).", ""]
    head = "| model | batch | " + " | ".join(f"{t} thr ember / PyTorch (ratio)" for t in counts)
    out += [head + " | ember efficiency 1→" + str(counts[-1]) + " | PyTorch efficiency |",
            "| --- | ---: | " + " | ".join("---:" for _ in counts) + " | ---: | ---: |"]
    keys = sorted({(r["model"], r["batch"]) for r in rows if r.get("kind") == "train"},
                  key=lambda k: (list(MODELS).index(k[0]), k[1]))
    for model, batch in keys:
        cells = []
        first = {}
        for t in counts:
            e = one(rows, framework="ember", kind="train", model=model, batch=batch, threads=t)
            p = best_torch(rows, "train", model, batch, t)
            if e:
                first.setdefault("e", (t, e["ms"]))
                first["e_last"] = (t, e["ms"])
            if p:
                first.setdefault("p", (t, p["ms"]))
                first["p_last"] = (t, p["ms"])
            ratio = f" ({e['ms'] / p['ms']:.2f})" if e and p else ""
            mark = " *c*" if p and p.get("config") == "compile" else ""
            cells.append(f"{fmt(e['ms'] if e else None)} / {fmt(p['ms'] if p else None)}{mark}"
                         f"{ratio}")

        def eff(a, b):
            if a not in first or b not in first or first[a][0] != 1 or first[b][0] == 1:
                return "—"
            return f"{first[a][1] / (first[b][1] * first[b][0]) * 100:.0f}%"
        label = MODELS.get(model, model)
        if model == "gpt":
            seq = next((r.get("seq") for r in rows if r.get("model") == "gpt" and
                        r.get("kind") == "train" and r.get("seq")), "?")
            label += f", {batch} × {seq} tokens"
        out.append(f"| {label} | {batch} | " + " | ".join(cells) +
                   f" | {eff('e', 'e_last')} | {eff('p', 'p_last')} |")
    losses = {}
    for r in rows:
        if r.get("kind") == "loss":
            losses.setdefault((r["model"], r["batch"]), {}).setdefault(r["framework"], []).append(
                (r["step"], r["loss"]))
    if losses:
        out += ["", "Losses of the first steps from the same weights and batch (ember / PyTorch): " +
                "; ".join(f"{MODELS.get(m, m)} b{b}: " + ", ".join(
                    f"{e:.5g} / {p:.5g}" for (_, e), (_, p) in
                    zip(sorted(v.get("ember", [])), sorted(v.get("torch", []))))
                    for (m, b), v in sorted(losses.items()))]
    return out


VARIANTS = (("openblas-threads", "`EMBER_CPU_BLAS_THREADS=openblas`"),
            ("pool-tiles", "`EMBER_CPU_BLAS_THREADED_DIM=0` (`EMBER_CPU_BLAS_THREADED_MACS=0` in "
                           "the runs of 2026-11-30)"),
            ("portable-gemm", "`EMBER_CPU_GEMM=portable`"),
            ("portable-gemm-spin", "`EMBER_CPU_GEMM=portable EMBER_CPU_SPIN_US=50`"),
            ("spin", "`EMBER_CPU_SPIN_US=50` (OpenBLAS as by default)"),
            ("no-spin", "`EMBER_CPU_SPIN_US=0` (the pool's threads sleep at once; the default "
             "spins 50 µs from 4 threads since 2026-12-01)"),
            ("composed-bn-relu", "`EMBER_CPU_BATCH_NORM_RELU=0` (the ResNet's BatchNorm, "
                                 "residual addition and ReLU composed, not fused)"))


def variant_table(rows, counts):
    """ember's threading variants beside its default configuration."""
    keys = sorted({(r["model"], r["batch"], r["threads"]) for r in rows
                   if r.get("variant") and r.get("kind") == "train"},
                  key=lambda k: (list(MODELS).index(k[0]), k[1], k[2]))
    if not keys:
        return []
    # Runs before EMBER_CPU_BLAS_THREADS existed had OpenBLAS thread the products by default.
    names = {r.get("variant") for r in rows}
    variants = [v for v in VARIANTS if v[0] in names]
    if "pool-tiles" in names:
        default = ("OpenBLAS for the large products, single-threaded, each product split into "
                   "tiles on ember's pool, but the largest threaded by OpenBLAS's own pool (in "
                   "the 2026-11-30b run products of 2^29 multiply-adds or more; from then on "
                   "products whose sides are all 1024 or more; *pool-tiles*: those in tiles too; "
                   "*openblas-threads*: every product one call, threaded by OpenBLAS's own pool "
                   "sized like ember's)")
    elif "openblas-threads" in names:
        default = ("OpenBLAS for the large products, single-threaded, each product split into "
                   "tiles on ember's pool (*openblas-threads*: one call, threaded by OpenBLAS's "
                   "own pool sized like ember's)")
    else:
        default = "OpenBLAS for the large products, its pool sized like ember's"
    out = ["", "ember's training steps in other threading configurations, ms (ratio to the "
           "default in brackets; below 1: faster): " + "; ".join(
               f"*{name}* = {what}" for name, what in variants) +
           " (*portable*: ember's blocked GEMM on its own pool, OpenBLAS not called; *spin*: the "
           "pool's threads spin 50 µs for the next op before they sleep). Default: " + default +
           (", ember's pool spinning 50 µs between regions (from 4 threads on)." if "no-spin" in names
            else ", ember's pool waiting passively."), "",
           "| model | batch | threads | default | " +
           " | ".join(name for name, _ in variants) + " |",
           "| --- | ---: | ---: | ---: | " + " | ".join("---:" for _ in variants) + " |"]
    for m, b, t in keys:
        d = one(rows, framework="ember", kind="train", model=m, batch=b, threads=t)
        cells = []
        for name, _ in variants:
            v = one(rows, name, framework="ember", kind="train", model=m, batch=b, threads=t)
            cells.append(f"{fmt(v['ms'])} ({v['ms'] / d['ms']:.2f})" if v and d else
                         fmt(v["ms"] if v else None))
        out.append(f"| {MODELS.get(m, m)} | {b} | {t} | {fmt(d['ms'] if d else None)} | " +
                   " | ".join(cells) + " |")
    return out


def infer_table(rows):
    out = ["", "### Inference", "",
           "ms a forward pass; ember runs the ONNX graph as `ember-onnx` imported it (generated "
           "C++, plain `Cpu`), ONNX Runtime the same model's ONNX export (CPU execution provider, "
           "ORT_ENABLE_ALL, `intra_op_num_threads` = the count), PyTorch `inference_mode` eager "
           "and `torch.compile`. The GPT reads 64-token sequences. Ratio = ember ÷ ONNX Runtime "
           "(goal ≤ 1 everywhere).", "",
           "| model | batch | threads | ember | ONNX Runtime | PyTorch eager | PyTorch compile | "
           "ember ÷ ORT | items/s ember |",
           "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    keys = sorted({(r["model"], r["batch"], r["threads"]) for r in rows
                   if r.get("kind") == "infer" and "ms" in r},
                  key=lambda k: (list(MODELS).index(k[0]), k[1], k[2]))
    for m, b, t in keys:
        e = one(rows, framework="ember", kind="infer", model=m, batch=b, threads=t)
        o = one(rows, framework="onnxruntime", kind="infer", model=m, batch=b, threads=t)
        pe = one(rows, framework="torch", kind="infer", model=m, batch=b, threads=t, config="eager")
        pc = one(rows, framework="torch", kind="infer", model=m, batch=b, threads=t,
                 config="compile")
        ratio = f"{e['ms'] / o['ms']:.2f}" if e and o else "—"
        ips = f"{b / e['ms'] * 1e3:.0f}" if e else "—"
        out.append(f"| {MODELS.get(m, m)} | {b} | {t} | " + " | ".join(
            fmt(x["ms"] if x else None) for x in (e, o, pe, pc)) + f" | {ratio} | {ips} |")
    return out


def kernel_table(rows):
    out = ["", "### Kernels", "",
           "GFLOP/s; ember and OpenBLAS called directly (`cblas_sgemm`) in one process "
           "(`bench_cpu`, alternating runs), PyTorch in its own (MKL for matmul, oneDNN for "
           "convolutions in the pip build). Goal: matmul ≥ 0.95× OpenBLAS at every count.", "",
           "| workload | threads | ember | OpenBLAS | PyTorch | ember ÷ OpenBLAS | ember, portable "
           "GEMM |",
           "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    ks = sorted({(r["workload"], r["threads"]) for r in rows
                 if r.get("kind") == "kernel" and "workload" in r})
    for w, t in ks:
        def val(pred, variant=None):
            for r in rows:
                if r.get("kind") == "kernel" and r.get("workload") == w and \
                        r.get("threads") == t and r.get("variant") == variant and pred(r):
                    return r.get("gflops", r.get("value"))
            return None
        e = val(lambda r: r.get("impl") == "ember")
        o = val(lambda r: r.get("impl") == "openblas")
        p = val(lambda r: r.get("framework") == "torch")
        v = val(lambda r: r.get("impl") == "ember", "portable-gemm")
        ratio = f"{e / o:.2f}" if e and o else "—"
        out.append(f"| {w} | {t} | {fmt(e, 1)} | {fmt(o, 1)} | {fmt(p, 1)} | {ratio} | "
                   f"{fmt(v, 1)} |")
    return out


def section(meta, rows, source):
    counts = sorted({r["threads"] for r in rows if r.get("kind") == "train" and "ms" in r})
    skipped = sorted({(f"`{r['command']}`" if "command" in r else
                       f"{r.get('framework')} {r.get('kind')} {r.get('model', '')} "
                       f"{r.get('config', '')}".replace("  ", " ").strip()) +
                      f": {r['skipped']}" for r in rows if "skipped" in r and
                      ("command" in r or "framework" in r)})
    core = meta.get("openblas_core")
    lines = ["## The CPU at scale (issue 37)", "",
             f"Generated by `benchmarks/cpu_scale_report.py` from `{source}` "
             f"(`benchmarks/cpu_scale.sh run`, {meta.get('date', '?')}, commit "
             f"{meta.get('commit', '?')}, {meta.get('cpu', '?')}, {meta.get('cores', '?')} "
             f"CPUs, PyTorch {meta.get('torch', '?')}, ONNX Runtime "
             f"{meta.get('onnxruntime') or 'absent'}"
             f"{f', OpenBLAS core {core}' if core else ''}"
             f"{', quick run' if meta.get('quick') else ''})."
             " ember's pool is sized per count with `ember::cpu::set_num_threads` (OpenBLAS's "
             "follows it), PyTorch's with `torch.set_num_threads`; one process per framework "
             "and row sweeps the counts. Median of the timed runs after one warm-up.", ""]
    lines += train_table(rows, counts) + variant_table(rows, counts) + infer_table(rows) + \
        kernel_table(rows)
    if skipped:
        lines += ["", "Not measured in this run: " + "; ".join(skipped) + "."]
    return lines


def main():
    argv = sys.argv[1:]
    options = pop_options(argv, ("name", "title"), __doc__)
    name, title = options.get("name", NAME), options.get("title")
    args = [a for a in argv if a != "--stdout"]
    if len(args) != 2:
        sys.exit(__doc__)
    meta, rows = load(args[1])
    root = os.path.dirname(os.path.abspath(args[0]))
    source = os.path.relpath(os.path.abspath(args[1]), root)
    lines = section(meta, rows, source)
    if title:
        lines[0] = "## " + title
    if "--stdout" in sys.argv:
        print("\n".join(lines))
    else:
        write_section(args[0], name, lines)


if __name__ == "__main__":
    main()
