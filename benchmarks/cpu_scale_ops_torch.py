#!/usr/bin/env python3
"""PyTorch's side of `bench_scale_ops` (issue 37): the ops of one ResNet-18 (CIFAR form) training
step at batch 64, timed one class at a time on the CPU, so that ember's per-op costs can be put
next to PyTorch's on the same shapes.

  cpu_scale_ops_torch.py [--threads 1] [--batch 64] [--min-time 0.3] [--only conv_fwd,...]

Prints one JSON line per row: {"framework": "torch", "op": class, "shape": ..., "count": how many
times one step runs it, "cpu_ms": median process CPU time of one call (the machine may be shared),
"wall_ms": the fastest call's wall time, "threads"}, then one line per class with the totals
(sum of count x ms). Classes: conv_fwd (F.conv2d, no bias), conv_bwd_data and
conv_bwd_weight (aten.convolution_backward with only that output), bn_fwd (training-mode
F.batch_norm with running statistics), bn_bwd (the backward of bn_fwd), relu_fwd, relu_bwd
(threshold_backward), add (the residual sum), bn_bwd = (forward + backward of sum(y * g)) -
forward, step (only with --only step: a whole training step, cross-entropy and Adam, NCHW and
channels_last), adam (torch.optim.Adam, foreach, on the 62 tensors of
ResNet-18's 11.17 M parameters, with gradients in place).
"""
import argparse
import json
import statistics
import time

import torch
import torch.nn.functional as F

# (cin, cout, k, stride, input side, times a step runs it): ResNet-18 in CIFAR form.
CONVS = [(3, 64, 3, 1, 32, 1), (64, 64, 3, 1, 32, 4), (64, 128, 3, 2, 32, 1),
         (128, 128, 3, 1, 16, 3), (64, 128, 1, 2, 32, 1), (128, 256, 3, 2, 16, 1),
         (256, 256, 3, 1, 8, 3), (128, 256, 1, 2, 16, 1), (256, 512, 3, 2, 8, 1),
         (512, 512, 3, 1, 4, 3), (256, 512, 1, 2, 8, 1)]
# (channels, side, BatchNorms of that shape, ReLUs, residual adds)
ACTS = [(64, 32, 5, 5, 2), (128, 16, 5, 4, 2), (256, 8, 5, 4, 2), (512, 4, 5, 4, 2)]


def timed(f, min_time):
    """(median process CPU ms, fastest wall ms) of one call: the machine may be shared."""
    f()
    cpu, wall = [], []
    t_end = time.perf_counter() + min_time
    while len(cpu) < 3 or (time.perf_counter() < t_end and len(cpu) < 50):
        c0, t0 = time.process_time(), time.perf_counter()
        f()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return statistics.median(cpu) * 1e3, min(wall) * 1e3


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--min-time", type=float, default=0.3)
    p.add_argument("--only", default="")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    only = set(a.only.split(",")) if a.only else None
    n = a.batch
    totals = {}

    def emit(op, shape, count, t):
        print(json.dumps({"framework": "torch", "version": torch.__version__, "op": op,
                          "shape": shape, "count": count, "cpu_ms": round(t[0], 4),
                          "wall_ms": round(t[1], 4), "threads": a.threads}), flush=True)
        c, w = totals.get(op, (0.0, 0.0))
        totals[op] = (c + count * t[0], w + count * t[1])

    for cin, cout, k, s, side, count in CONVS:
        x = torch.randn(n, cin, side, side)
        w = torch.randn(cout, cin, k, k) * 0.05
        pad = k // 2
        y = F.conv2d(x, w, None, s, pad)
        g = torch.randn_like(y)
        shape = f"{n}x{cin}x{side}x{side}_{cout}x{k}x{k}_s{s}"
        conv_bwd = torch.ops.aten.convolution_backward
        if not only or "conv_fwd" in only:
            emit("conv_fwd", shape, count, timed(lambda: F.conv2d(x, w, None, s, pad), a.min_time))
        if not only or "conv_bwd_data" in only:
            emit("conv_bwd_data", shape, count, timed(
                lambda: conv_bwd(g, x, w, None, [s, s], [pad, pad], [1, 1], False, [0, 0], 1,
                                 [True, False, False]), a.min_time))
        if not only or "conv_bwd_weight" in only:
            emit("conv_bwd_weight", shape, count, timed(
                lambda: conv_bwd(g, x, w, None, [s, s], [pad, pad], [1, 1], False, [0, 0], 1,
                                 [False, True, False]), a.min_time))

    for c, side, bns, relus, adds in ACTS:
        shape = f"{n}x{c}x{side}x{side}"
        x = torch.randn(n, c, side, side)
        gamma = torch.ones(c, requires_grad=True)
        beta = torch.zeros(c, requires_grad=True)
        rm, rv = torch.zeros(c), torch.ones(c)
        xg = x.clone().requires_grad_(True)
        g = torch.randn_like(x)
        if not only or "bn_fwd" in only:
            with torch.no_grad():
                emit("bn_fwd", shape, bns, timed(
                    lambda: F.batch_norm(x, rm, rv, gamma, beta, True, 0.1, 1e-5), a.min_time))
        if not only or "bn_bwd" in only:
            def bn_bwd():  # as bench_scale_ops: backward of sum(y * g)
                y = F.batch_norm(xg, rm, rv, gamma, beta, True, 0.1, 1e-5)
                (y * g).sum().backward()
            with torch.no_grad():
                fwd = timed(lambda: F.batch_norm(x, rm, rv, gamma, beta, True, 0.1, 1e-5),
                            a.min_time)
            both = timed(bn_bwd, a.min_time)
            emit("bn_bwd", shape, bns, (max(both[0] - fwd[0], 0.0), max(both[1] - fwd[1], 0.0)))
        if not only or "relu_fwd" in only:
            emit("relu_fwd", shape, relus, timed(lambda: torch.relu(x), a.min_time))
        if not only or "relu_bwd" in only:
            y = torch.relu(x)
            emit("relu_bwd", shape, relus, timed(
                lambda: torch.ops.aten.threshold_backward(g, y, 0), a.min_time))
        if not only or "add" in only:
            emit("add", shape, adds, timed(lambda: x + g, a.min_time))

    if not only or "adam" in only:
        import resnet_torch
        m = resnet_torch.make_model(64, seed=0)
        params = list(m.parameters())
        for q in params:
            q.grad = torch.randn_like(q) * 1e-3
        opt = torch.optim.Adam(params, lr=1e-3, foreach=True)
        emit("adam", f"{sum(q.numel() for q in params)}_params_{len(params)}_tensors", 1,
             timed(opt.step, a.min_time))

    if only and "step" in only:  # whole steps, only when asked: they take seconds each
        import resnet_torch
        for layout in ("nchw", "channels_last"):
            fmt = torch.channels_last if layout == "channels_last" else torch.contiguous_format
            m = resnet_torch.make_model(64, seed=0).to(memory_format=fmt)
            x = torch.randn(n, 3, 32, 32).to(memory_format=fmt)
            y = torch.randint(0, 10, (n,))
            opt = torch.optim.Adam(m.parameters(), lr=1e-3, foreach=True)

            def step():
                opt.zero_grad(set_to_none=False)
                F.cross_entropy(m(x), y).backward()
                opt.step()
            emit("step", f"resnet18_b{n}_adam_{layout}", 1, timed(step, a.min_time))

    for op, (c, w) in totals.items():
        print(json.dumps({"framework": "torch", "version": torch.__version__, "op": op,
                          "total_cpu_ms": round(c, 3), "total_wall_ms": round(w, 3),
                          "threads": a.threads}), flush=True)


if __name__ == "__main__":
    main()
