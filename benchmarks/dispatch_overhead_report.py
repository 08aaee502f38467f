#!/usr/bin/python3
"""Writes RESULTS.md's section on the per-op overhead of ember::Dispatch from the JSON lines of
benchmarks/bench_dispatch (one file a run: `bench_dispatch > FILE.jsonl`, each line then given
the run's commit, date, machine and load).

    dispatch_overhead_report.py RESULTS.md FILE.jsonl [FILE.jsonl ...]

One table row per stack and file: the chain's median time on the concrete stack and on Dispatch
(the device naming that stack), their ratio, what Dispatch adds per op, and the issue's goal
(Dispatch ≤ 1.05× the concrete stack). The training-step lines (`dispatch_train_step`) and the
instruction counts of benchmarks/dispatch_callgrind.sh (`dispatch_callgrind`) found in the same
files get tables of their own.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from results_section import write_section  # noqa: E402

GOAL = 1.05
STACKS = {"cpu": "`Cpu`", "cpu+fusion": "`Fusion<Cpu>`", "cpu+autodiff": "`Autodiff<Cpu>`",
          "cuda": "`Cuda`", "cuda+fusion": "`Fusion<Cuda>`", "cuda+autodiff": "`Autodiff<Cuda>`",
          "vulkan": "`Vulkan`", "vulkan+fusion": "`Fusion<Vulkan>`",
          "vulkan+autodiff": "`Autodiff<Vulkan>`", "cpu+fusion+autodiff": "`Autodiff<Fusion<Cpu>>`",
          "cuda+fusion+autodiff": "`Autodiff<Fusion<Cuda>>`",
          "vulkan+fusion+autodiff": "`Autodiff<Fusion<Vulkan>>`"}
TRAIN_GOAL = 1.02


def paired(r):
    """The rounds' own ratios: median [first quartile, third quartile], where the line has them."""
    if "paired_ratio" not in r:
        return "—"
    return f"{r['paired_ratio']:.3f} [{r['paired_q1']:.3f}, {r['paired_q3']:.3f}]"


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    rows, train_rows, cg_rows, host_rows, step_cg_rows = [], [], [], [], []
    for path in sys.argv[2:]:
        for line in open(path, encoding="utf-8"):
            if not line.strip():
                continue
            r = json.loads(line)
            if r.get("workload") == "dispatch_step_callgrind":
                step_cg_rows.append(
                    f"| {STACKS.get(r['stack'], r['stack'])} | {r['concrete']:,} | "
                    f"{r['dispatch']:,} | {r['dispatch'] / r['concrete']:.4f} | "
                    f"{r['largest_difference']} | {r.get('commit', '?')} "
                    f"| `{os.path.relpath(path, os.path.dirname(sys.argv[1]))}` |")
                continue
            if r.get("workload") == "dispatch_train_step" and "concrete_phases" in r:
                model = r["model"].split(",")[0]
                phases = " / ".join(f"{c * 1000:.1f} → {d * 1000:.1f}" for c, d in
                                    zip(r["concrete_phases"], r["dispatch_phases"]))
                host_rows.append(
                    f"| {model} | {STACKS.get(r['stack'], r['stack'])} | "
                    f"{r['concrete_host'] / r['concrete']:.3f} / "
                    f"{r['dispatch_host'] / r['dispatch']:.3f} | {phases} | {r.get('commit', '?')} | "
                    f"`{os.path.relpath(path, os.path.dirname(sys.argv[1]))}` |")
            if r.get("workload") == "dispatch_train_step":
                verdict = "**met**" if r["ratio"] <= TRAIN_GOAL else "**missed**"
                model = r.get("model", "mnist mlp, batch 64, adam").split(",")[0]
                train_rows.append(
                    f"| {model} | {STACKS.get(r['stack'], r['stack'])} | {r['concrete']:.3f} | "
                    f"{r['dispatch']:.3f} | {r['ratio']:.3f} | {paired(r)} | "
                    f"≤ {TRAIN_GOAL}: {verdict} | "
                    f"{r.get('commit', '?')}, {r.get('machine', '?')} "
                    f"| `{os.path.relpath(path, os.path.dirname(sys.argv[1]))}` |")
                continue
            if r.get("workload") == "dispatch_callgrind":
                ratio = r["dispatch"] / r["concrete"]
                cg_rows.append(
                    f"| {STACKS.get(r['stack'], r['stack'])} | {r['concrete']:,} | "
                    f"{r['dispatch']:,} | {ratio:.3f} | {r['added_per_op']:+} | "
                    f"{'yes' if ratio <= GOAL else 'no'} | {r.get('commit', '?')} "
                    f"| `{os.path.relpath(path, os.path.dirname(sys.argv[1]))}` |")
                continue
            if r.get("workload") != "dispatch_overhead":
                continue
            per_op_ns = (r["dispatch"] - r["concrete"]) / r["ops_per_chain"] * 1000
            verdict = "**met**" if r["ratio"] <= GOAL else "**missed**"
            where = ", ".join(str(r[k]) for k in ("commit", "machine") if k in r) or "first run"
            load = f"load {r['load']}" if "load" in r else "load 6–9"
            rows.append(
                f"| {STACKS.get(r['stack'], r['stack'])} | {r['concrete']:.3f} | {r['dispatch']:.3f} "
                f"| {r['ratio']:.3f} | {paired(r)} | {per_op_ns:+.0f} | ≤ {GOAL}: {verdict} "
                f"| {where}, {load} "
                f"| `{os.path.relpath(path, os.path.dirname(sys.argv[1]))}` |")
    write_section(sys.argv[1], "dispatch-overhead", [
        "Generated by `benchmarks/dispatch_overhead_report.py` from the raw lines of",
        "`bench_dispatch`: a chain of four ops (add, mul, exp, sum_dim) on [16, 16], one CPU thread,",
        "medians of rounds alternating between the concrete stack and Dispatch on the device naming",
        "it. Only the idle machines' lines say much: on the loaded one the concrete stack's own time",
        "moved by 2× between runs. On CUDA and Vulkan the chain is launch-bound (the kernels run",
        "asynchronously; one read-back ends the run), so the figure is the host's cost of issuing",
        "four ops; there the same chain's run-to-run spread (±10%) is larger than what Dispatch adds.",
        "",
        "`paired`: the median and quartiles of the rounds' own ratios (the two runs of a round side",
        "by side; lines since 2026-12-01 07:26 UTC), which a drift of the machine between rounds",
        "moves less than the ratio of the medians. The goal's verdict reads the ratio of the medians.",
        "",
        "| stack | concrete µs/chain | Dispatch µs/chain | ratio | paired | added ns/op | goal | run | raw lines |",
        "| --- | ---: | ---: | ---: | --- | ---: | --- | --- | --- |",
        *rows,
        *([
            "",
            "A whole training step (forward, backward, Adam) of the mnist example's MLP (and, since",
            "2026-12-01, its CNN) at batch 64, the same way: ms a step, medians of alternating rounds",
            "(the issue's goal: ≤ 2 % added).",
            "",
            "| model | stack | concrete ms/step | Dispatch ms/step | ratio | paired | goal | run | raw lines |",
            "| --- | --- | ---: | ---: | ---: | --- | --- | --- | --- |",
            *train_rows,
        ] if train_rows else []),
        *([
            "",
            "Instructions of the same chain counted with callgrind (`benchmarks/dispatch_callgrind.sh`:",
            "1000 chains, one stack a process, only the two timing functions counted; deterministic,",
            "so it judges a change on a loaded machine): instructions a chain, and what Dispatch adds",
            "an op.",
            "",
            f"| stack | concrete | Dispatch | ratio | added an op | ratio ≤ {GOAL} | commit | raw lines |",
            "| --- | ---: | ---: | ---: | ---: | --- | --- | --- |",
            *cg_rows,
        ] if cg_rows else []),
        *([
            "",
            "Where a CUDA step's time goes (lines since 2026-12-02 10:00 UTC): *host share* is the",
            "time until the last step was issued over the whole time (1.000: the host is the",
            "bottleneck and the device waits for it), concrete / Dispatch; then the host's µs a step",
            "in each phase, concrete → Dispatch: forward with the loss / backward / collecting the",
            "gradients / the optimizer's step.",
            "",
            "| model | stack | host share | forward / backward / grads / step, µs | commit | raw lines |",
            "| --- | --- | --- | --- | --- | --- |",
            *host_rows,
        ] if host_rows else []),
        *([
            "",
            "The host's instructions of whole CUDA training steps, counted with callgrind on the GPU",
            "machine (one side a process, `--side`, only `time_train` counted: the MLP's and the",
            "CNN's 3 untimed and 10 timed steps each), and where the two sides differ most:",
            "",
            "| stack | concrete | Dispatch | ratio | largest difference | commit | raw lines |",
            "| --- | ---: | ---: | ---: | --- | --- | --- |",
            *step_cg_rows,
        ] if step_cg_rows else []),
    ])


if __name__ == "__main__":
    main()
