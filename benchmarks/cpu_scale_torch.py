#!/usr/bin/env python3
"""PyTorch's and ONNX Runtime's side of issue 37's CPU scaling benchmark (benchmarks/cpu_scale.sh,
beside ember's bench_scale). The models are the ones the other peers define: train_torch.py's MLP
and guide CNN, resnet_torch.py's CIFAR ResNet-18, gpt_torch.py's GPT (dropout 0).

  cpu_scale_torch.py prepare DIR [--batches 64,256] [--resnet-batch 64]
      Initial weights (seeded) as state dicts DIR/{mlp,cnn,resnet,gpt}.pt for ember's --init-from,
      and fixed batches DIR/{mlp,cnn}_b<N>.pt, DIR/resnet_b<N>.pt ({"images", "targets"}).
  cpu_scale_torch.py export DIR [--gpt-seq 64] [--opset 17]
      The four models as ONNX (DIR/<model>.onnx, batch dimension dynamic): ember-onnx imports
      them (cpu_scale.sh build, Debian's torch 1.13), ONNX Runtime runs them (on the GPU machine,
      exported there by its torch). The GPT is exported through ExportGpt: the same function with
      the token lookup on a flat index list and the causal mask as a buffer.
  cpu_scale_torch.py train --model M --batch N [--seq S] [--threads 1,2,4] [--configs eager,compile]
      [--compile-threads 16] [--weights W.pt] [--batch-file B.pt] [--loss-steps K]
      [--min-time S] [--max-reps N]
      Training steps (forward, loss, backward, Adam; the GPT AdamW as its example), one process
      for all thread counts (torch.set_num_threads before each). eager: the model as written,
      Adam with foreach (torch's default for CPU tensors). compile: torch.compile(model) (inductor
      generates OpenMP C++ for the CPU), recompiled at each count of --compile-threads only, as
      its kernels keep the thread count they were generated for.
  cpu_scale_torch.py infer --model M --batch N [--threads 1,16] [--configs eager,compile,ort]
      [--onnx DIR] [--gpt-seq 64] [--compile-threads 16]
      Forward passes under torch.inference_mode (eager and compiled), and ONNX Runtime on
      DIR/<model>.onnx (CPU execution provider, ORT_ENABLE_ALL, intra_op_num_threads = the
      count, inter_op 1). A peer that is missing (no onnxruntime, no torch.compile) is skipped
      with a JSON line {"skipped": why} and a line on stderr.
  cpu_scale_torch.py kernels [--threads 1,16] [--sizes 1024,4096]
      matmul N^3 (MKL or OpenBLAS, whichever this torch uses) and two conv2d (oneDNN where this
      torch has it): the ANCHORS.md one and a ResNet-18 stage-1 3x3 convolution.

Each timed figure is the median over runs after warm-up: runs continue until --min-time seconds
have passed (at least 2, at most --max-reps), as bench_scale times them. One JSON line per
figure: {"framework": "torch"|"onnxruntime", "kind", "model", "batch", "threads", "config",
"ms", "ms_mean", "reps", "version", ...}.
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt_torch import Gpt, bench_tokens, make_adamw  # noqa: E402
from resnet_torch import make_model as make_resnet  # noqa: E402
from train_torch import Cnn, Mlp  # noqa: E402

GPT_SHAPE = dict(vocab=256, context=1024, d=768, heads=12, layers=12, dropout=0.0)


def emit(obj):
    print(json.dumps(obj), flush=True)


def say(msg):
    print(f"cpu_scale_torch: {msg}", file=sys.stderr, flush=True)


def make(name, seed=42):
    torch.manual_seed(seed)
    if name == "mlp":
        return Mlp()
    if name == "cnn":
        return Cnn()
    if name == "resnet":
        return make_resnet(64)
    return Gpt(**GPT_SHAPE)


def threads_list(s):
    return [int(t) for t in str(s).split(",") if t]


def timed(f, min_time, max_reps, warmup=1):
    """Median and mean seconds of f() after warm-up, run until min_time has passed."""
    for _ in range(warmup):
        f()
    runs, start = [], time.perf_counter()
    while len(runs) < 2 or (len(runs) < max_reps and time.perf_counter() - start < min_time):
        t0 = time.perf_counter()
        f()
        runs.append(time.perf_counter() - t0)
    return statistics.median(runs), sum(runs) / len(runs), len(runs)


def has_compile():
    return hasattr(torch, "compile") and int(torch.__version__.split(".")[0]) >= 2


# ---- prepare, export -----------------------------------------------------------------------

def cmd_prepare(a):
    os.makedirs(a.dir, exist_ok=True)
    for name in ("mlp", "cnn", "resnet", "gpt"):
        torch.save(make(name).state_dict(), os.path.join(a.dir, f"{name}.pt"))
    g = torch.Generator().manual_seed(43)
    for name in ("mlp", "cnn"):
        for b in threads_list(a.batches):
            torch.save({"images": torch.randn(b, 28, 28, generator=g),
                        "targets": torch.randint(0, 10, (b,), generator=g)},
                       os.path.join(a.dir, f"{name}_b{b}.pt"))
    for b in threads_list(a.resnet_batch):
        torch.save({"images": torch.randn(b, 3, 32, 32, generator=g),
                    "targets": torch.randint(0, 10, (b,), generator=g)},
                   os.path.join(a.dir, f"resnet_b{b}.pt"))
    say(f"wrote weights and batches to {a.dir}")


class ExportGpt(nn.Module):
    """gpt_torch.Gpt's forward for a fixed sequence length, in ops ember-onnx imports: the token
    lookup on the flattened tokens (ONNX Gather on a list), the causal mask an additive buffer.
    Same function as Gpt.forward (checked by cmd_export)."""

    def __init__(self, gpt, seq):
        super().__init__()
        self.gpt, self.seq = gpt, seq
        mask = torch.triu(torch.full((seq, seq), float("-inf")), 1)
        self.register_buffer("mask", mask)

    def block(self, b, x):
        n, s, d = x.shape
        split = lambda t: t.reshape(n, s, b.heads, d // b.heads).transpose(1, 2)
        a = b.ln1(x)
        q, k, v = split(b.q(a)), split(b.k(a)), split(b.v(a))
        w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d // b.heads) + self.mask, dim=-1)
        x = x + b.o((w @ v).transpose(1, 2).reshape(n, s, d))
        return x + b.fc2(F.gelu(b.fc1(b.ln2(x))))

    def forward(self, tokens):
        g, n = self.gpt, tokens.shape[0]
        x = g.wte(tokens.reshape(-1)).reshape(n, self.seq, -1) + g.wpe.weight[:self.seq]
        for b in g.blocks:
            x = self.block(b, x)
        return (g.ln_f(x) @ g.wte.weight.t()).reshape(n * self.seq, -1)


def example_input(name, batch, gpt_seq, seed=0):
    g = torch.Generator().manual_seed(seed)
    if name in ("mlp", "cnn"):
        return torch.randn(batch, 28, 28, generator=g)
    if name == "resnet":
        return torch.randn(batch, 3, 32, 32, generator=g)
    return torch.randint(0, 256, (batch, gpt_seq), generator=g)


def export_model(name, path, gpt_seq, opset):
    model = make(name, seed=0).eval()
    x = example_input(name, 2, gpt_seq)
    if name == "gpt":
        wrapped = ExportGpt(model, gpt_seq).eval()
        with torch.no_grad():
            diff = float((wrapped(x) - model(x)).abs().max())
        if diff > 1e-4:
            raise RuntimeError(f"ExportGpt differs from Gpt by {diff}")
        model = wrapped
    kw = dict(input_names=["x"], output_names=["y"], opset_version=opset,
              dynamic_axes={"x": {0: "batch"}, "y": {0: "rows"}})
    tmp = path + ".tmp"
    with torch.no_grad():
        try:  # torch >= 2.9 exports through dynamo by default; the TorchScript exporter is asked for
            torch.onnx.export(model, (x,), tmp, dynamo=False, **kw)
        except TypeError:  # a torch before 2.5 (no dynamo argument): its only exporter
            torch.onnx.export(model, (x,), tmp, **kw)
        except Exception as e:  # a torch without the TorchScript exporter: dynamo's
            say(f"export {name}: the TorchScript exporter failed ({type(e).__name__}: "
                f"{str(e)[:200]}); trying dynamo's")
            kw["opset_version"] = max(opset, 18)
            torch.onnx.export(model, (x,), tmp, dynamo=True, **kw)
    os.replace(tmp, path)
    # The import's check (bench_scale infer --batch-from): an input and this model's output.
    with torch.no_grad():
        torch.save({"x": x, "y": model(x)}, path[:-len(".onnx")] + ".check.pt")


def cmd_export(a):
    os.makedirs(a.dir, exist_ok=True)
    failed = []
    for name in a.models.split(","):
        try:  # one model failing must not cost the others
            export_model(name, os.path.join(a.dir, f"{name}.onnx"), a.gpt_seq, a.opset)
            say(f"exported {name} to {a.dir}/{name}.onnx")
        except Exception as e:
            say(f"export {name} failed: {type(e).__name__}: {str(e)[:300]}")
            failed.append(name)
    if failed:
        sys.exit(f"cpu_scale_torch: export failed for {', '.join(failed)}")


# ---- training ------------------------------------------------------------------------------

def train_step_fn(a, cfg):
    """A step function returning the loss tensor, for this model and configuration."""
    name = a.model
    model = make(name)
    if a.weights:
        model.load_state_dict(torch.load(a.weights))
    model.train()
    if name == "gpt":
        x, y = bench_tokens(a.batch, a.seq, 42)
        opt = make_adamw(model, 6e-4)
        lr = None
    else:
        if a.batch_file:
            data = torch.load(a.batch_file)
            x, y = data["images"], data["targets"]
        else:
            g = torch.Generator().manual_seed(43)
            shape = (a.batch, 3, 32, 32) if name == "resnet" else (a.batch, 28, 28)
            x, y = torch.randn(*shape, generator=g), torch.randint(0, 10, (a.batch,), generator=g)
        lr = {"mlp": 1e-3, "cnn": 1e-4, "resnet": 1e-3}[name]
        opt = torch.optim.Adam(model.parameters(), lr=lr, eps=1e-8)
    fwd = torch.compile(model) if cfg == "compile" else model

    def step():
        opt.zero_grad(set_to_none=False)
        loss = F.cross_entropy(fwd(x), y)
        loss.backward()
        opt.step()
        return loss
    return step


def base_line(a, kind, cfg, threads):
    line = {"framework": "torch", "kind": kind, "model": a.model, "batch": a.batch,
            "seq": a.seq if a.model == "gpt" else 0, "threads": threads, "config": cfg,
            "version": torch.__version__}
    return line


def cmd_train(a):
    threads = threads_list(a.threads)
    for cfg in a.configs.split(","):
        if cfg == "compile" and not has_compile():
            say(f"train {a.model}: compile skipped (torch {torch.__version__} has no torch.compile)")
            emit({**base_line(a, "train", cfg, 0), "skipped": "no torch.compile"})
            continue
        counts = threads if cfg == "eager" else \
            [t for t in threads_list(a.compile_threads) if t in threads]
        step = None
        for t in counts:
            torch.set_num_threads(t)
            if step is None or cfg == "compile":
                if cfg == "compile":
                    torch._dynamo.reset()
                step = train_step_fn(a, cfg)
                if a.loss_steps and cfg == "eager":
                    # At the highest count, as bench_scale: at one thread they are the slow part.
                    torch.set_num_threads(max(threads))
                    for k in range(a.loss_steps):
                        emit({"framework": "torch", "kind": "loss", "model": a.model,
                              "batch": a.batch, "step": k, "loss": round(float(step()), 7)})
                    torch.set_num_threads(t)
            try:
                t0 = time.perf_counter()
                step()  # compiles, for cfg == "compile"
                first = time.perf_counter() - t0
                med, mean, reps = timed(step, a.min_time, a.max_reps, warmup=a.warmup)
            except Exception as e:  # a configuration this torch cannot run: say so, go on
                say(f"train {a.model} {cfg} at {t} threads failed: {type(e).__name__}: {e}"[:400])
                emit({**base_line(a, "train", cfg, t), "skipped": f"{type(e).__name__}"})
                continue
            emit({**base_line(a, "train", cfg, t), "ms": round(med * 1e3, 4),
                  "ms_mean": round(mean * 1e3, 4), "reps": reps, "first_s": round(first, 3),
                  "loss": round(float(step()), 7)})


# ---- inference -----------------------------------------------------------------------------

def ort_session(path, threads):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]), ort.__version__


def cmd_infer(a):
    threads = threads_list(a.threads)
    x = example_input(a.model, a.batch, a.gpt_seq, seed=1)
    a.seq = a.gpt_seq
    model = make(a.model, seed=0).eval()
    if a.model == "gpt":
        model = ExportGpt(model, a.gpt_seq).eval()
    for cfg in a.configs.split(","):
        line = lambda t: {**base_line(a, "infer", cfg, t),
                          "framework": "onnxruntime" if cfg == "ort" else "torch"}
        if cfg == "compile" and not has_compile():
            say(f"infer {a.model}: compile skipped (torch {torch.__version__} has no torch.compile)")
            emit({**line(0), "skipped": "no torch.compile"})
            continue
        if cfg == "ort":
            try:
                import onnxruntime  # noqa: F401
            except ImportError:
                say(f"infer {a.model}: ONNX Runtime skipped (the module onnxruntime is missing)")
                emit({**line(0), "skipped": "onnxruntime missing"})
                continue
            path = os.path.join(a.onnx, f"{a.model}.onnx")
            if not os.path.exists(path):
                say(f"infer {a.model}: ONNX Runtime skipped ({path} missing)")
                emit({**line(0), "skipped": f"{path} missing"})
                continue
        counts = threads if cfg != "compile" else \
            [t for t in threads_list(a.compile_threads) if t in threads]
        for t in counts:
            torch.set_num_threads(t)
            try:
                version = torch.__version__
                if cfg == "ort":
                    sess, version = ort_session(path, t)
                    feed = {"x": x.numpy()}
                    f = lambda: sess.run(None, feed)
                else:
                    if cfg == "compile":
                        torch._dynamo.reset()
                    fwd = torch.compile(model) if cfg == "compile" else model

                    def f():
                        with torch.inference_mode():
                            return fwd(x)
                t0 = time.perf_counter()
                f()
                first = time.perf_counter() - t0
                med, mean, reps = timed(f, a.min_time, a.max_reps, warmup=a.warmup)
            except Exception as e:
                say(f"infer {a.model} {cfg} at {t} threads failed: {type(e).__name__}: {e}"[:400])
                emit({**line(t), "skipped": type(e).__name__})
                continue
            emit({**line(t), "version": version, "ms": round(med * 1e3, 4),
                  "ms_mean": round(mean * 1e3, 4), "reps": reps, "first_s": round(first, 3)})


# ---- kernels -------------------------------------------------------------------------------

def cmd_kernels(a):
    g = torch.Generator().manual_seed(0)
    work = []
    for n in threads_list(a.sizes):
        x, w = torch.randn(n, n, generator=g), torch.randn(n, n, generator=g)
        work.append((f"matmul_{n}", 2.0 * n ** 3, lambda x=x, w=w: torch.mm(x, w)))
    for name, (nb, ci, hw, co) in (("conv2d_64x1x28x28_32x3x3", (64, 1, 28, 32)),
                                   ("conv2d_64x64x32x32_64x3x3", (64, 64, 32, 64))):
        x = torch.randn(nb, ci, hw, hw, generator=g)
        w = torch.randn(co, ci, 3, 3, generator=g)
        b = torch.randn(co, generator=g)
        pad = 1 if ci > 1 else 0
        out = hw + 2 * pad - 2
        flops = 2.0 * nb * co * out * out * ci * 9
        work.append((name, flops, lambda x=x, w=w, b=b, pad=pad: F.conv2d(x, w, b, padding=pad)))
    cfg = torch.__config__.show()
    blas = "mkl" if "BLAS_INFO=mkl" in cfg else ("openblas" if "openblas" in cfg.lower() else "?")
    mkldnn = torch.backends.mkldnn.is_available()
    for t in threads_list(a.threads):
        torch.set_num_threads(t)
        for name, flops, f in work:
            with torch.inference_mode():
                med, mean, reps = timed(f, a.min_time, a.max_reps, warmup=2)
            emit({"framework": "torch", "kind": "kernel", "workload": name, "threads": t,
                  "gflops": round(flops / med / 1e9, 2), "ms": round(med * 1e3, 4), "reps": reps,
                  "version": torch.__version__, "blas": blas, "mkldnn": mkldnn})


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    pr = sub.add_parser("prepare")
    pr.add_argument("dir")
    pr.add_argument("--batches", default="64,256")
    pr.add_argument("--resnet-batch", default="64")
    ex = sub.add_parser("export")
    ex.add_argument("dir")
    ex.add_argument("--models", default="mlp,cnn,resnet,gpt")
    ex.add_argument("--gpt-seq", type=int, default=64)
    ex.add_argument("--opset", type=int, default=17)
    for name in ("train", "infer", "kernels"):
        s = sub.add_parser(name)
        s.add_argument("--threads", default="1")
        s.add_argument("--min-time", type=float, default=1.0)
        s.add_argument("--max-reps", type=int, default=50)
        s.add_argument("--warmup", type=int, default=1)
        if name == "kernels":
            s.add_argument("--sizes", default="1024,4096")
            continue
        s.add_argument("--model", choices=("mlp", "cnn", "resnet", "gpt"), required=True)
        s.add_argument("--batch", type=int, default=64)
        s.add_argument("--compile-threads", default="16")
        if name == "train":
            s.add_argument("--seq", type=int, default=256)
            s.add_argument("--configs", default="eager,compile")
            s.add_argument("--weights")
            s.add_argument("--batch-file")
            s.add_argument("--loss-steps", type=int, default=0)
        else:
            s.add_argument("--configs", default="eager,compile,ort")
            s.add_argument("--onnx", default=".")
            s.add_argument("--gpt-seq", type=int, default=64)
    a = p.parse_args()
    {"prepare": cmd_prepare, "export": cmd_export, "train": cmd_train, "infer": cmd_infer,
     "kernels": cmd_kernels}[a.cmd](a)


if __name__ == "__main__":
    main()
