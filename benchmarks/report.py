#!/usr/bin/python3
"""Turns the JSON lines of bench_cpu, bench_torch.py and compile_time.sh into RESULTS.md.

    report.py --out benchmarks/RESULTS.md --meta meta.json FILE.jsonl...

Every input line is one JSON object: {"workload", "impl", "threads", "unit", "value", ...};
lines with a "meta" key describe the run (OpenBLAS core, torch version) and lines that are not
JSON are ignored. --meta names a JSON object with the run's date, machine, commit, load, notes.
"""
import argparse
import json
import sys

# What each workload is held to (ANCHORS.md and issue 2, deliverable 8).
#   kind "peer":  ember / peer  >= goal   (peer = an impl measured in the same run)
#   kind "max":   ember value   <= goal   (absolute, lower is better)
WORKLOADS = [
    ("matmul_256", "matmul 256³", dict(kind="peer", peer="openblas", goal=0.95,
                                       text="≥ 0.95× OpenBLAS direct")),
    ("matmul_1024", "matmul 1024³", dict(kind="peer", peer="openblas", goal=0.95,
                                         text="≥ 0.95× OpenBLAS direct")),
    ("matmul_2048", "matmul 2048³", dict(kind="peer", peer="openblas", goal=0.95,
                                         text="≥ 0.95× OpenBLAS direct")),
    ("add_new_16M", "add 16M, into a new tensor", dict(kind="peer", peer="torch", goal=2.0,
                                                       text="≥ 2× PyTorch")),
    ("add_inplace_16M", "add 16M, in place (moved tensor)",
     dict(kind="peer", peer="memcpy", goal=0.9, text="≥ 0.9× memcpy")),
    ("gelu_custom_16M", "gelu_custom 16M (5 ops, unfused)",
     dict(kind="peer", peer="torch", goal=1.0, text="≥ 1.0× PyTorch")),
    ("sum_16M", "sum 16M", dict(kind="peer", peer="torch", goal=1.0, text="≥ 1.0× PyTorch")),
    ("softmax_4096x1024", "softmax [4096, 1024], dim 1",
     dict(kind="peer", peer="torch", goal=1.5, text="≥ 1.5× PyTorch")),
    ("conv2d_64x1x28x28_32x3x3", "conv2d [64,1,28,28] × 32 3×3",
     dict(kind="peer", peer="torch", goal=1.0, text="≥ 1.0× PyTorch")),
    ("overhead_add_1", "per-op overhead, 1-element add",
     dict(kind="max", goal=0.25, text="≤ 0.25 µs/op")),
    ("memcpy_64M", "memcpy 64M f32 (reference)", None),
    ("compile_umbrella", "compile umbrella-header probe, -O2",
     dict(kind="max", goal=5.0, text="≤ 5 s")),
]
LOWER_IS_BETTER = {"us/op", "s"}
UNIT_SHOWN = {"us/op": "µs/op", "s": "s"}


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
    if unit == "s" or abs(v) < 1:
        return f"{v:.3g}" if abs(v) < 1 else f"{v:.2f}"
    return f"{v:.3g}" if v < 100 else f"{v:.0f}"


def speedup(ember, other, unit):
    """How many times better ember is (> 1: ember ahead), whatever the direction of the unit."""
    if ember is None or other is None or ember == 0 or other == 0:
        return None
    return other / ember if unit in LOWER_IS_BETTER else ember / other


class Table:
    def __init__(self, rows):
        # Rounds: one (workload, impl, threads, config) measured several times gives the median
        # of its figures. Configurations: where one (workload, impl, threads) was measured in
        # several (PyTorch's OpenMP wait policies), the best one stands: ember meets its peer's
        # best.
        groups = {}
        for r in rows:
            key = (r["workload"], r["impl"], int(r.get("threads", 1)), r.get("config", ""))
            groups.setdefault(key, []).append(r)
        self.by = {}
        for (wl, impl, threads, _), rs in groups.items():
            rs = sorted(rs, key=lambda r: float(r["value"]))
            n = len(rs)
            med = dict(rs[n // 2])
            if n % 2 == 0:
                med["value"] = (float(rs[n // 2 - 1]["value"]) + float(rs[n // 2]["value"])) / 2
            med["rounds"] = n
            med["round_values"] = [float(r["value"]) for r in rs]
            key = (wl, impl, threads)
            old = self.by.get(key)
            if old is None or (speedup(float(med["value"]), float(old["value"]), med["unit"]) or 0) > 1:
                self.by[key] = med

    def get(self, workload, impl, threads):
        return self.by.get((workload, impl, threads))

    def value(self, workload, impl, threads):
        r = self.get(workload, impl, threads)
        return None if r is None else float(r["value"])


def verdict(target, ember_v, peer_v, unit):
    if target is None:
        return None, "—"
    if ember_v is None:
        return None, "no figure"
    if target["kind"] == "max":
        ok = ember_v <= target["goal"]
        return ok, "**met**" if ok else "**not met**"
    s = speedup(ember_v, peer_v, unit)
    if s is None:
        return None, "no peer figure"
    ok = s >= target["goal"]
    return ok, "**met**" if ok else "**not met**"


def main_table(t, threads, out):
    out.append(f"| workload | unit | ember | PyTorch | ember ÷ PyTorch | target | "
               f"reference | ember ÷ reference | status |")
    out.append("| --- | --- | ---: | ---: | ---: | --- | ---: | ---: | --- |")
    summary = []
    for wl, label, target in WORKLOADS:
        threads_here = 1 if wl == "compile_umbrella" else threads
        e = t.get(wl, "ember", threads_here)
        if wl == "memcpy_64M":
            e = t.get(wl, "memcpy", threads_here)
        torch_r = t.get(wl, "torch", threads_here)
        if wl == "memcpy_64M":
            torch_r = t.get(wl, "numpy", threads_here)
        if wl == "compile_umbrella":
            torch_r = t.get(wl, "libtorch", 1)
        if e is None and torch_r is None:
            continue
        unit = (e or torch_r)["unit"]
        ev = None if e is None else float(e["value"])
        tv = None if torch_r is None else float(torch_r["value"])
        ratio = speedup(ev, tv, unit)
        ref_name, ref_v = "", None
        if target and target["kind"] == "peer" and target["peer"] != "torch":
            ref_name = {"openblas": "OpenBLAS", "memcpy": "memcpy"}[target["peer"]]
            ref_impl = target["peer"]
            ref_wl = "memcpy_64M" if ref_impl == "memcpy" else wl
            ref_v = t.value(ref_wl, ref_impl, threads_here)
        peer_v = ref_v if (target and target["kind"] == "peer" and target["peer"] != "torch") else tv
        ok, status = verdict(target, ev, peer_v, unit)
        ref_ratio = speedup(ev, ref_v, unit) if ref_v is not None else None
        if wl == "memcpy_64M":
            lab = f"{label}: C++ memcpy / numpy copyto"
        else:
            lab = label
        if wl == "compile_umbrella" and e is not None:
            ev_s = f"{fmt(ev, unit)} (CPU {fmt(float(e.get('cpu_s', 0)), 's')} s, {e.get('peak_mb', '?')} MB)"
        else:
            ev_s = fmt(ev, unit)
        if wl == "compile_umbrella" and torch_r is not None:
            tv_s = f"{fmt(tv, unit)} (LibTorch, {torch_r.get('peak_mb', '?')} MB)"
        else:
            tv_s = fmt(tv, unit)
        out.append(
            f"| {lab} | {UNIT_SHOWN.get(unit, unit)} | {ev_s} | {tv_s} | "
            f"{'—' if ratio is None else f'{ratio:.2f}×'} | {target['text'] if target else '—'} | "
            f"{(ref_name + ' ' + fmt(ref_v, unit)) if ref_v is not None else '—'} | "
            f"{'—' if ref_ratio is None else f'{ref_ratio:.2f}×'} | {status} |")
        if target is not None:
            summary.append((label, ok, target["text"], ev, peer_v, unit))
    return summary


def matmul_table(t, threads, out):
    out.append("| workload | ember GFLOP/s | OpenBLAS direct | ember ÷ OpenBLAS | PyTorch | "
               "ember ÷ PyTorch | status (≥ 0.95× OpenBLAS) |")
    out.append("| --- | ---: | ---: | ---: | ---: | ---: | --- |")
    summary = []
    any_row = False
    for wl, label, target in WORKLOADS[:3]:
        ev, ov, tv = (t.value(wl, i, threads) for i in ("ember", "openblas", "torch"))
        if ev is None and tv is None:
            continue
        any_row = True
        ok, status = verdict(target, ev, ov, "GFLOP/s")
        r_o, r_t = speedup(ev, ov, "GFLOP/s"), speedup(ev, tv, "GFLOP/s")
        tr = t.get(wl, "torch", threads)
        tv_s = fmt(tv) + (f" ({tr['config']})" if tr is not None and tr.get("config") else "")
        out.append(f"| {label} | {fmt(ev)} | {fmt(ov)} | {'—' if r_o is None else f'{r_o:.2f}×'} | "
                   f"{tv_s} | {'—' if r_t is None else f'{r_t:.2f}×'} | {status} |")
        summary.append((f"{label}, {threads} threads", ok, target["text"], ev, ov, "GFLOP/s"))
    return summary if any_row else None


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
    out.append("Generated by `benchmarks/run.sh` (tables by `benchmarks/report.py`); do not edit by hand.")
    out.append("")
    for key, label in (("date", "Date"), ("machine", "Machine"), ("cores", "Cores"),
                       ("commit", "Commit"), ("compiler", "Compiler"), ("torch", "PyTorch"),
                       ("openblas", "OpenBLAS"), ("load", "Load average (1 min)")):
        if meta.get(key):
            out.append(f"- **{label}:** {meta[key]}")
    for m in metas:
        if m.get("meta") == "bench_cpu" and m.get("threads") == 1:
            out.append(f"- **OpenBLAS kernels in use:** {m.get('openblas_core')}")
            break
    out.append("")
    rounds = max((r.get("rounds", 1) for r in t.by.values()), default=1)
    out.append("Each figure is the median of ≥ 10 timed runs after warm-up, ember and PyTorch run "
               "back to back per workload (same thread count, float32)"
               + (f", and the median of {rounds} such rounds taken in turn" if rounds > 1 else "")
               + ". Higher is better except "
               "µs/op and s. *ember ÷ PyTorch* is ember's speed-up (> 1: ember faster, whatever "
               "the unit). Elementwise GB/s count every byte read and written once: add 12 B, "
               "gelu_custom and softmax 8 B, sum 4 B per element; memcpy counts read + write.")
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
                   "can oversubscribe two cores); the better of the two is shown. ember and "
                   "OpenBLAS direct are timed alternately in one process.")
        out.append("")
        out += two
        out.append("")
        summary += mt

    extra = t.get("gelu_custom_16M", "torch_fused_gelu", 1)
    out.append("## Targets")
    out.append("")
    met = [s for s in summary if s[1]]
    missed = [s for s in summary if s[1] is False]
    unknown = [s for s in summary if s[1] is None]
    out.append(f"{len(met)} of {len(summary)} targets met.")
    out.append("")
    for label, ok, text, ev, pv, unit in summary:
        if ok is False:
            if unit in LOWER_IS_BETTER and pv is None:
                out.append(f"- not met: {label} — {fmt(ev, unit)} {UNIT_SHOWN.get(unit, unit)}, "
                           f"target {text}")
            else:
                s = speedup(ev, pv, unit)
                out.append(f"- not met: {label} — {'—' if s is None else f'{s:.2f}×'}, target {text}")
    for label, ok, text, *_ in unknown:
        out.append(f"- no figure: {label} (target {text})")
    if extra is not None:
        out.append("")
        out.append(f"For reference, PyTorch's single-kernel `F.gelu` reaches {fmt(float(extra['value']))} "
                   f"GB/s on the same 16M elements: the goal `Fusion<Cpu>` has to meet (ANCHORS.md), "
                   f"outside this issue.")
    if meta.get("notes"):
        out.append("")
        out.append("## Notes")
        out.append("")
        for n in meta["notes"]:
            out.append(f"- {n}")
    out.append("")
    out.append("## Raw figures")
    out.append("")
    out.append("<details><summary>JSON lines</summary>")
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
    with open(args.out, "w", encoding="utf-8") as f:
        f.write("\n".join(out))
    print(f"report.py: wrote {args.out} ({len(met)}/{len(summary)} targets met)", file=sys.stderr)


if __name__ == "__main__":
    main()
