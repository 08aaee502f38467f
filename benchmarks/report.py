#!/usr/bin/python3
"""Turns the JSON lines of bench_cpu, bench_torch.py and compile_time.sh into RESULTS.md.

    report.py --out benchmarks/RESULTS.md --meta meta.json FILE.jsonl...

Every input line is one JSON object: {"workload", "impl", "threads", "unit", "value", ...},
optionally with "config" (a configuration of the same implementation, e.g. PyTorch's OpenMP
wait policy). Lines with a "meta" key describe the run; lines that are not JSON are ignored.
--meta names a JSON object with the run's date, machine, commit, load and notes.

Rounds: run.sh measures every workload several times, ember and its peers in turn. The k-th
figure of an (workload, impl, threads, config) in file order belongs to round k. A figure shown
is the median over rounds; a ratio is the median over rounds of the ratio within each round (so
that both sides of a ratio saw the same machine). Where an implementation ran in several
configurations, each round keeps its best: ember is held to its peer's best.
"""
import argparse
import collections
import json
import os
import re
import statistics
import sys

# What each workload is held to (ANCHORS.md and issue 2, deliverable 8).
#   kind "peer": ember / peer >= goal (peer measured in the same run; "ref_workload" when the
#                peer is another workload's figure)
#   kind "max":  ember value <= goal (absolute; lower is better)
GOAL_OPENBLAS = dict(kind="peer", peer="openblas", goal=0.95, text="≥ 0.95× OpenBLAS direct")
WORKLOADS = [
    ("matmul_256", "matmul 256³", GOAL_OPENBLAS),
    ("matmul_1024", "matmul 1024³", GOAL_OPENBLAS),
    ("matmul_2048", "matmul 2048³", GOAL_OPENBLAS),
    ("add_new_16M", "add 16M, into a new tensor",
     dict(kind="peer", peer="torch", goal=2.0, text="≥ 2× PyTorch")),
    ("add_inplace_16M", "add 16M, in place (moved tensor)",
     dict(kind="peer", peer="memcpy", ref_workload="memcpy_64M", goal=0.9, text="≥ 0.9× memcpy")),
    ("gelu_custom_16M", "gelu_custom 16M (5 ops, unfused)",
     dict(kind="peer", peer="torch", goal=1.0, text="≥ 1.0× PyTorch")),
    ("gelu_custom_16M_fused", "gelu_custom 16M, Fusion<Cpu> (one kernel) beside PyTorch's F.gelu",
     dict(kind="peer", peer="torch", goal=1.0, text="≥ 1.0× PyTorch's F.gelu")),
    ("gelu_custom_16M_fused", "gelu_custom 16M, Fusion<Cpu> beside ember's unfused chain",
     dict(kind="peer", peer="ember_unfused", goal=3.0, text="≥ 3× the unfused chain")),
    ("sum_16M", "sum 16M", dict(kind="peer", peer="torch", goal=1.0, text="≥ 1.0× PyTorch")),
    ("softmax_4096x1024", "softmax [4096, 1024], dim 1",
     dict(kind="peer", peer="torch", goal=1.5, text="≥ 1.5× PyTorch")),
    ("conv2d_64x1x28x28_32x3x3", "conv2d [64,1,28,28] × 32 3×3",
     dict(kind="peer", peer="torch", goal=1.0, text="≥ 1.0× PyTorch")),
    ("overhead_add_1", "per-op overhead, 1-element add",
     dict(kind="max", goal=0.25, text="≤ 0.25 µs/op")),
    ("mlp_fwd_bwd_784_512_512_10_b64", "MLP 784-512-512-10, batch 64: forward + backward (Autodiff)",
     dict(kind="peer", peer="torch", goal=1.25, text="time ≤ 0.8× PyTorch (≥ 1.25×)")),
    ("autograd_chain4_1", "autograd overhead: 4-op chain, 1 element, forward + backward",
     dict(kind="max", goal=5.0, text="≤ 5 µs")),
    ("memcpy_64M", "memcpy 64M f32 (reference)", None),
    ("compile_umbrella", "compile umbrella-header probe, -O2",
     dict(kind="max", goal=5.0, text="≤ 5 s")),
]
LOWER_IS_BETTER = {"us/op", "s", "ms/step", "us/iter"}
UNIT_SHOWN = {"us/op": "µs/op", "s": "s", "ms/step": "ms/step", "us/iter": "µs/iter"}
PEER_NAME = {"openblas": "OpenBLAS", "memcpy": "memcpy", "torch": "PyTorch",
             "ember_unfused": "unfused"}


def load(paths):
    rows, metas = [], []
    for p in paths:
        try:
            f = open(p, encoding="utf-8")
        except OSError as e:
            print(f"report.py: skipping {p}: {e}", file=sys.stderr)
            continue
        with f:
            for line in f:
                line = line.strip()
                if not line.startswith("{"):
                    continue
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError:
                    continue
                (metas if "meta" in obj else rows).append(obj)
    return rows, metas


def fmt(v, unit=None):
    if v is None:
        return "—"
    if abs(v) < 1:
        return f"{v:.3g}"
    if unit == "s":
        return f"{v:.2f}"
    return f"{v:.3g}" if v < 100 else f"{v:.0f}"


def fmt_ratio(r):
    return "—" if r is None else f"{r:.2f}×"


def speedup(ember, other, unit):
    """How many times better ember is (> 1: ember ahead), whatever the direction of the unit."""
    if ember is None or other is None or ember == 0 or other == 0:
        return None
    return other / ember if unit in LOWER_IS_BETTER else ember / other


class Series:
    """One implementation's figures for a workload, one per round (each round's best config)."""

    def __init__(self, unit):
        self.unit = unit
        self.rounds = []   # value per round
        self.configs = []  # config per round
        self.rows = []     # the row per round

    @property
    def value(self):
        return statistics.median(self.rounds) if self.rounds else None

    @property
    def config(self):
        c = collections.Counter(self.configs).most_common(1)
        return c[0][0] if c else ""

    @property
    def row(self):
        return self.rows[0] if self.rows else {}


class Table:
    def __init__(self, rows):
        per_config = collections.defaultdict(list)
        for r in rows:
            key = (r["workload"], r["impl"], int(r.get("threads", 1)), r.get("config", ""))
            per_config[key].append(r)
        grouped = collections.defaultdict(dict)
        for (wl, impl, th, cfg), rs in per_config.items():
            grouped[(wl, impl, th)][cfg] = rs
        self.series = {}
        for key, by_cfg in grouped.items():
            unit = next(iter(by_cfg.values()))[0]["unit"]
            s = Series(unit)
            for k in range(max(len(v) for v in by_cfg.values())):
                best = None
                for cfg, rs in by_cfg.items():
                    if k >= len(rs):
                        continue
                    if best is None or (speedup(float(rs[k]["value"]), float(best[1]["value"]), unit) or 0) > 1:
                        best = (cfg, rs[k])
                s.rounds.append(float(best[1]["value"]))
                s.configs.append(best[0])
                s.rows.append(best[1])
            self.series[key] = s

    def get(self, workload, impl, threads):
        return self.series.get((workload, impl, threads))

    def value(self, workload, impl, threads):
        s = self.get(workload, impl, threads)
        return None if s is None else s.value

    def ratio(self, a, b):
        """Median over rounds of a's speed-up over b (series a and b)."""
        if a is None or b is None:
            return None
        rs = [speedup(x, y, a.unit) for x, y in zip(a.rounds, b.rounds)]
        rs = [r for r in rs if r is not None]
        return statistics.median(rs) if rs else None

    def max_rounds(self):
        return max((len(s.rounds) for s in self.series.values()), default=0)


def status_text(ok):
    return {True: "**met**", False: "**not met**", None: "no figure"}[ok]


def main_table(t, threads, out):
    """The table of every workload at `threads`; returns the summary of its targets."""
    out.append("| workload | unit | ember | PyTorch | ember ÷ PyTorch | target | reference | "
               "ember ÷ reference | status |")
    out.append("| --- | --- | ---: | ---: | ---: | --- | ---: | ---: | --- |")
    summary = []
    for wl, label, target in WORKLOADS:
        th = 1 if wl == "compile_umbrella" else threads
        if wl == "memcpy_64M":
            e, p = t.get(wl, "memcpy", th), t.get(wl, "numpy", th)
            label = f"{label}: C++ memcpy / numpy copyto"
        elif wl == "compile_umbrella":
            e, p = t.get(wl, "ember", th), t.get(wl, "libtorch", th)
        else:
            e, p = t.get(wl, "ember", th), t.get(wl, "torch", th)
        if e is None and p is None:
            continue
        unit = (e or p).unit
        ev = None if e is None else e.value
        r_torch = t.ratio(e, p)

        ref, ref_s = None, "—"
        if target and target["kind"] == "peer" and target["peer"] != "torch":
            ref = t.get(target.get("ref_workload", wl), target["peer"], th)
            if ref is not None:
                ref_s = f"{PEER_NAME[target['peer']]} {fmt(ref.value, unit)}"
        r_ref = t.ratio(e, ref)

        if target is None:
            ok = None
        elif ev is None:
            ok = None
        elif target["kind"] == "max":
            ok = ev <= target["goal"]
        else:
            r = r_torch if target["peer"] == "torch" else r_ref
            ok = None if r is None else r >= target["goal"]

        if wl == "compile_umbrella":
            ev_s = "—" if e is None else (f"{fmt(ev, unit)} (CPU {fmt(float(e.row.get('cpu_s', 0)), 's')} s, "
                                          f"{e.row.get('peak_mb', '?')} MB)")
            pv_s = "—" if p is None else f"{fmt(p.value, unit)} (LibTorch, {p.row.get('peak_mb', '?')} MB)"
        else:
            ev_s = fmt(ev, unit)
            pv_s = "—" if p is None else fmt(p.value, unit) + (f" ({p.config})" if p.config else "")
        out.append(f"| {label} | {UNIT_SHOWN.get(unit, unit)} | {ev_s} | {pv_s} | "
                   f"{fmt_ratio(r_torch)} | {target['text'] if target else '—'} | {ref_s} | "
                   f"{fmt_ratio(r_ref)} | {status_text(ok) if target else '—'} |")
        if target is not None:
            shown = f"{fmt(ev, unit)} {UNIT_SHOWN.get(unit, unit)}" if target["kind"] == "max" else (
                fmt_ratio(r_torch if target["peer"] == "torch" else r_ref))
            summary.append((label, ok, target["text"], shown))
    return summary


def matmul_table(t, threads, out):
    out.append("| workload | ember GFLOP/s | OpenBLAS direct | ember ÷ OpenBLAS | PyTorch | "
               "ember ÷ PyTorch | status (≥ 0.95× OpenBLAS) |")
    out.append("| --- | ---: | ---: | ---: | ---: | ---: | --- |")
    summary = []
    for wl, label, target in WORKLOADS[:3]:
        e, o, p = (t.get(wl, i, threads) for i in ("ember", "openblas", "torch"))
        if e is None and p is None:
            continue
        r_o, r_p = t.ratio(e, o), t.ratio(e, p)
        ok = None if r_o is None else r_o >= target["goal"]
        pv_s = "—" if p is None else fmt(p.value) + (f" ({p.config})" if p.config else "")
        out.append(f"| {label} | {fmt(None if e is None else e.value)} | "
                   f"{fmt(None if o is None else o.value)} | {fmt_ratio(r_o)} | {pv_s} | "
                   f"{fmt_ratio(r_p)} | {status_text(ok)} |")
        summary.append((f"{label}, {threads} threads", ok, target["text"], fmt_ratio(r_o)))
    return summary or None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--meta", help="JSON file: date, machine, cores, commit, load, notes")
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()

    rows, metas = load(args.files)
    t = Table(rows)
    meta = {}
    if args.meta:
        with open(args.meta, encoding="utf-8") as f:
            meta = json.load(f)

    out = ["# ember CPU benchmarks", ""]
    out.append("Generated by `benchmarks/run.sh` (tables by `benchmarks/report.py`); do not edit "
               "by hand.")
    out.append("")
    for key, label in (("date", "Date"), ("machine", "Machine"), ("cores", "Cores"),
                       ("commit", "Commit"), ("compiler", "Compiler"), ("torch", "PyTorch"),
                       ("openblas", "OpenBLAS"), ("load", "Load average (1, 5, 15 min)")):
        if meta.get(key):
            out.append(f"- **{label}:** {meta[key]}")
    for m in metas:
        if m.get("meta") == "bench_cpu" and m.get("threads") == 1:
            out.append(f"- **OpenBLAS kernels in use:** {m.get('openblas_core')}")
            break
    out.append("")
    rounds = t.max_rounds()
    out.append(
        "Each figure is the median of ≥ 10 timed runs after warm-up (float32, same thread count "
        "for every implementation)"
        + (f", and the median of {rounds} rounds in which ember and its peers ran in turn; a "
           "ratio is the median of the ratios within each round" if rounds > 1 else
           "; ember and PyTorch ran back to back")
        + ". ember and OpenBLAS direct are timed alternately in one process. Higher is better "
        "except µs/op and s; *ember ÷ X* is ember's speed-up (> 1: ember faster, whatever the "
        "unit). Where PyTorch ran in two configurations, the better one stands and is named. "
        "GB/s count every byte read and written once: add 12 B, gelu_custom and softmax 8 B, "
        "sum 4 B per element; memcpy counts read + write.")
    out.append("")

    summary = []
    out.append("## 1 thread")
    out.append("")
    out.append("`EMBER_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1`, `torch.set_num_threads(1)`.")
    out.append("")
    summary += main_table(t, 1, out)
    out.append("")

    two = []
    mt = matmul_table(t, 2, two)
    if mt is not None:
        out.append("## 2 threads (matmul)")
        out.append("")
        out.append("`EMBER_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2`; PyTorch with "
                   "`torch.set_num_threads(2)`, run with OpenMP's default wait policy and with "
                   "`OMP_WAIT_POLICY=PASSIVE` (ANCHORS.md: spinning OpenMP and OpenBLAS pools "
                   "can oversubscribe two cores).")
        out.append("")
        out += two
        out.append("")
        summary += mt

    mlp = "mlp_fwd_bwd_784_512_512_10_b64"
    e2, p2 = t.get(mlp, "ember", 2), t.get(mlp, "torch", 2)
    if e2 is not None or p2 is not None:
        out.append("## 2 threads (MLP forward + backward)")
        out.append("")
        out.append("ember with `EMBER_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2`; PyTorch in its best "
                   "configuration on two cores of `torch.set_num_threads(2)` with "
                   "`OMP_WAIT_POLICY=PASSIVE` and `torch.set_num_threads(1)` with "
                   "`OPENBLAS_NUM_THREADS=2` (ANCHORS.md).")
        out.append("")
        out.append("| workload | ember ms/step | PyTorch ms/step | ember ÷ PyTorch | status "
                   "(time ≤ 0.8× PyTorch) |")
        out.append("| --- | ---: | ---: | ---: | --- |")
        r2 = t.ratio(e2, p2)
        ok2 = None if r2 is None else r2 >= 1.25
        pv = "—" if p2 is None else fmt(p2.value) + (f" ({p2.config})" if p2.config else "")
        out.append(f"| MLP 784-512-512-10, batch 64 | {fmt(None if e2 is None else e2.value)} | "
                   f"{pv} | {fmt_ratio(r2)} | {status_text(ok2)} |")
        out.append("")
        summary.append(("MLP forward + backward, 2 threads", ok2, "time ≤ 0.8× PyTorch (≥ 1.25×)",
                        fmt_ratio(r2)))

    out.append("## Targets")
    out.append("")
    met = [s for s in summary if s[1]]
    out.append(f"{len(met)} of {len(summary)} targets met.")
    out.append("")
    for label, ok, text, shown in summary:
        if ok is False:
            out.append(f"- not met: {label} — {shown}, target {text}")
        elif ok is None:
            out.append(f"- no figure: {label} (target {text})")
    fused = t.get("gelu_custom_16M", "torch_fused_gelu", 1)
    if fused is not None:
        out.append("")
        out.append(f"For reference, PyTorch's single-kernel `F.gelu` reaches {fmt(fused.value)} "
                   "GB/s on the same 16M elements: the goal of `Fusion<Cpu>` (ANCHORS.md), "
                   "outside this issue.")
    if meta.get("notes"):
        out.append("")
        out.append("## Notes")
        out.append("")
        for n in meta["notes"]:
            out.append(f"- {n}")
    out.append("")
    out.append("## Raw figures")
    out.append("")
    out.append("<details><summary>JSON lines, in the order measured</summary>")
    out.append("")
    out.append("```")
    for m in metas:
        out.append(json.dumps(m))
    for r in rows:
        out.append(json.dumps(r))
    out.append("```")
    out.append("")
    out.append("</details>")
    out.append("")
    # Sections with generators of their own (benchmarks/train.sh and the examples' checks)
    # sit between markers: keep them.
    if os.path.exists(args.out):
        old = open(args.out, encoding="utf-8").read()
        for name in re.findall(r"<!-- ([\w-]+):begin -->", old):
            begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
            if end in old:
                out += ["", old[old.index(begin):old.index(end) + len(end)], ""]
    with open(args.out, "w", encoding="utf-8") as f:
        f.write("\n".join(out))
    print(f"report.py: wrote {args.out} ({len(met)}/{len(summary)} targets met)", file=sys.stderr)


if __name__ == "__main__":
    main()
