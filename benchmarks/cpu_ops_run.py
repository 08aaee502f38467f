#!/usr/bin/python3
"""Issue 37 on a small machine: a ResNet-18 (CIFAR form, batch 64) training step of two ember
builds ("before" and "after") and of PyTorch, one op class at a time and as whole steps, at
each thread count, in one run. Raw JSON lines to OUT (cpu_ops_report.py makes RESULTS.md's
section from them).

    cpu_ops_run.py OUT.jsonl --before BENCH_SCALE_OPS --after BENCH_SCALE_OPS
        [--before-resnet RESNET --after-resnet RESNET] [--threads 1,2] [--rounds 2]
        [--machine TEXT] [--commit HASH] [--only conv_fwd,...] [--batch 64]
        [--env-before K=V,... --env-after K=V,...]
        [--before-infer BENCH_SCALE --after-infer BENCH_SCALE] [--infer-batch 1]

--only limits the op classes (both sides), --batch sets the batch of the op rows (the whole
steps stay at 64), --env-before/--env-after set environment variables for one side's op rows
(e.g. EMBER_CPU_CONV=im2col against =packed in one build). --before-infer/--after-infer (the
bench_scale binaries of builds with the ONNX graphs compiled in) add the whole ResNet-18's
inference at --infer-batch (ember: `bench_scale infer`, the median wall time of a pass; PyTorch:
cpu_scale_torch.py infer, eager inference_mode), lines of kind "infer".

bench_scale_ops (the ember builds) and cpu_scale_ops_torch.py (PyTorch, the `python3` running
this script) time each op class; examples/resnet --synthetic (ember, Adam; its process CPU time
over the timed steps) and cpu_scale_ops_torch.py --only step (PyTorch eager, Adam, NCHW and
channels_last) whole steps. The rounds alternate the
variants, so that load from other users of a shared machine falls on all of them alike; the
report takes each row's best round. Every line carries "variant" (before | after | torch),
"threads" and "round"; the first line is a meta line (date, machine, commit, torch version).
"""
import argparse
import datetime
import json
import os
import platform
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def run_lines(cmd, env=None):
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        print(f"{' '.join(cmd)} failed ({out.returncode}): {out.stderr[-2000:]}", file=sys.stderr)
    return [json.loads(l) for l in out.stdout.splitlines() if l.startswith("{")]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out")
    p.add_argument("--before", required=True)
    p.add_argument("--after", required=True)
    p.add_argument("--before-resnet")
    p.add_argument("--after-resnet")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--min-time", default="0.3")
    p.add_argument("--steps", default="3")
    p.add_argument("--machine", default=platform.processor() or platform.machine())
    p.add_argument("--commit", default="")
    p.add_argument("--only", default="")
    p.add_argument("--batch", default="64")
    p.add_argument("--env-before", default="")
    p.add_argument("--env-after", default="")
    p.add_argument("--before-infer")
    p.add_argument("--after-infer")
    p.add_argument("--infer-batch", default="1")
    a = p.parse_args()
    side_env = {v: dict(kv.split("=", 1) for kv in e.split(",") if kv)
                for v, e in (("before", a.env_before), ("after", a.env_after))}
    only = ["--only", a.only] if a.only else []
    import torch
    threads = [int(t) for t in a.threads.split(",")]
    tmp = a.out + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        def emit(d):
            f.write(json.dumps(d) + "\n")
            f.flush()

        emit({"meta": "cpu_ops", "date": datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M UTC"),
              "machine": a.machine, "cpus": os.cpu_count(), "commit": a.commit,
              "torch": torch.__version__, "batch": int(a.batch), "only": a.only,
              "env_before": a.env_before, "env_after": a.env_after})
        for r in range(a.rounds):
            for t in threads:
                env = dict(os.environ, OMP_NUM_THREADS=str(t))
                common = ["--threads", str(t), "--min-time", a.min_time, "--batch", a.batch] + only
                for variant, cmd in (
                        ("before", [a.before] + common),
                        ("after", [a.after] + common),
                        ("torch", [sys.executable, os.path.join(HERE, "cpu_scale_ops_torch.py")] +
                         common)):
                    for d in run_lines(cmd, dict(env, **side_env.get(variant, {}))):
                        emit({**d, "variant": variant, "round": r, "kind": "op"})
                # Whole steps: ember's example (its process CPU time over the timed steps, and
                # its best round's wall time), PyTorch's step in cpu_scale_ops_torch.py.
                for variant, exe in (("before", a.before_resnet), ("after", a.after_resnet)):
                    if not exe:
                        continue
                    for d in run_lines([exe, "--synthetic", "--backend", "cpu", "--batch", "64",
                                        "--optimizer", "adam", "--threads", str(t), "--warmup",
                                        "1", "--steps", a.steps, "--rounds", "2"],
                                       dict(env, **side_env[variant])):
                        if "cpu_s" in d:
                            n = 2 * int(a.steps)
                            emit({"framework": "ember", "op": "step", "shape": d["name"],
                                  "count": 1, "cpu_ms": d["cpu_s"] * 1e3 / n,
                                  "wall_ms": d["value"], "threads": t, "variant": variant,
                                  "round": r, "kind": "step"})
                if a.before_resnet or a.after_resnet:
                    for d in run_lines([sys.executable,
                                        os.path.join(HERE, "cpu_scale_ops_torch.py"), "--threads",
                                        str(t), "--only", "step", "--min-time", "1"], env):
                        if "shape" in d:
                            emit({**d, "variant": "torch", "round": r, "kind": "step"})
                # Whole inference passes of the ONNX-imported ResNet-18, and PyTorch's eager one.
                for variant, exe in (("before", a.before_infer), ("after", a.after_infer)):
                    if not exe:
                        continue
                    for d in run_lines([exe, "infer", "--model", "resnet", "--batch",
                                        a.infer_batch, "--threads", str(t), "--min-time", "1",
                                        "--max-reps", "200", "--warmup", "2"],
                                       dict(env, **side_env[variant])):
                        if "ms" in d:
                            emit({**d, "variant": variant, "round": r, "kind": "infer"})
                if a.before_infer or a.after_infer:
                    for d in run_lines([sys.executable, os.path.join(HERE, "cpu_scale_torch.py"),
                                        "infer", "--model", "resnet", "--batch", a.infer_batch,
                                        "--threads", str(t), "--configs", "eager", "--min-time",
                                        "1", "--max-reps", "200", "--warmup", "2"], env):
                        if "ms" in d:
                            emit({**d, "variant": "torch", "round": r, "kind": "infer"})
    os.replace(tmp, a.out)


if __name__ == "__main__":
    main()
