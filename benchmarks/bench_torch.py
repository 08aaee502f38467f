#!/usr/bin/python3
"""The workloads of bench_cpu in PyTorch (Debian's python3-torch, CPU), same figures.

    /usr/bin/python3 benchmarks/bench_torch.py [--threads N] [--reps N] [--quick] [--only A,B]

Prints one JSON object per line, in bench_cpu's format:
    {"workload": "matmul_1024", "impl": "torch", "threads": 1, "unit": "GFLOP/s", ...}
Each figure is the median of --reps timed runs after warm-up. Run it with OPENBLAS_NUM_THREADS
equal to --threads (torch.set_num_threads does not reach OpenBLAS, which does its matmuls).
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

K16M = 1 << 24


def time_runs(f, warmup, reps):
    """Median and min seconds of `reps` timed calls of f after `warmup` untimed ones."""
    for _ in range(warmup):
        f()
    s = []
    for _ in range(reps):
        t0 = time.perf_counter()
        f()
        s.append(time.perf_counter() - t0)
    return statistics.median(s), min(s), reps


class Bench:
    def __init__(self, args):
        self.threads = args.threads
        self.reps = min(args.reps, 3) if args.quick else args.reps
        self.warmup = 1 if args.quick else 2
        self.quick = args.quick
        self.only = [o for o in (args.only or "").split(",") if o]
        self.sink = 0.0
        self.config = args.config

    def selected(self, name):
        return not self.only or any(o in name for o in self.only)

    def consume(self, t):
        # Reading one element keeps every result alive and used.
        self.sink += float(t.reshape(-1)[0])

    def report(self, workload, impl, unit, value, timing, **extra):
        med, mn, runs = timing
        line = {"workload": workload, "impl": impl, "threads": self.threads, "unit": unit,
                "value": float(f"{value:.6g}"), "median_s": float(f"{med:.6g}"),
                "min_s": float(f"{mn:.6g}"), "runs": runs}
        if self.config:
            line["config"] = self.config
        line.update(extra)
        print(json.dumps(line), flush=True)

    def rate(self, workload, impl, unit, work, scale, timing, **extra):
        self.report(workload, impl, unit, work / timing[0] / scale, timing, **extra)

    # ---- workloads --------------------------------------------------------------------------
    def matmul(self, n):
        name = f"matmul_{n}"
        if not self.selected(name):
            return
        a, b = torch.rand(n, n), torch.rand(n, n)
        reps = self.reps * 5 if n <= 256 else self.reps  # small: cheap, and noisier
        t = time_runs(lambda: self.consume(torch.matmul(a, b)), self.warmup, reps)
        self.rate(name, "torch", "GFLOP/s", 2.0 * n ** 3, 1e9, t)

    def add(self):
        n = K16M // 8 if self.quick else K16M
        a, b = torch.rand(n), torch.rand(n)
        if self.selected("add_new_16M"):
            t = time_runs(lambda: self.consume(a + b), self.warmup, self.reps)
            self.rate("add_new_16M", "torch", "GB/s", 12.0 * n, 1e9, t)
        if self.selected("add_inplace_16M"):
            # PyTorch's in-place form of `a = std::move(a) + b`.
            t = time_runs(lambda: self.consume(a.add_(b)), self.warmup, self.reps)
            self.rate("add_inplace_16M", "torch", "GB/s", 12.0 * n, 1e9, t)

    def gelu(self):
        if not self.selected("gelu_custom_16M"):
            return
        n = K16M // 8 if self.quick else K16M
        x = torch.randn(n)
        s2 = math.sqrt(2.0)
        t = time_runs(lambda: self.consume(x * ((x / s2).erf() + 1) / 2), 1, self.reps)
        self.rate("gelu_custom_16M", "torch", "GB/s", 8.0 * n, 1e9, t)
        # For context: PyTorch's own single-kernel gelu (the figure Fusion<Cpu> must reach).
        t = time_runs(lambda: self.consume(F.gelu(x)), 1, self.reps)
        self.rate("gelu_custom_16M", "torch_fused_gelu", "GB/s", 8.0 * n, 1e9, t)
        # The peer of Fusion<Cpu>'s gelu_custom: the same single-kernel gelu.
        self.rate("gelu_custom_16M_fused", "torch", "GB/s", 8.0 * n, 1e9, t)

    def sum(self):
        if not self.selected("sum_16M"):
            return
        n = K16M // 8 if self.quick else K16M
        x = torch.rand(n)
        t = time_runs(lambda: self.consume(x.sum()), self.warmup, self.reps)
        self.rate("sum_16M", "torch", "GB/s", 4.0 * n, 1e9, t)

    def softmax(self):
        if not self.selected("softmax_4096x1024"):
            return
        rows, cols = (1024 if self.quick else 8192), 2048
        x = torch.randn(rows, cols)
        t = time_runs(lambda: self.consume(torch.softmax(x, dim=1)), self.warmup, self.reps)
        self.rate("softmax_4096x1024", "torch", "GB/s", 8.0 * rows * cols, 1e9, t)

    def conv2d(self):
        name = "conv2d_64x1x28x28_32x3x3"
        if not self.selected(name):
            return
        N, Ci, H, W, Co, K = 64, 1, 28, 28, 32, 3
        x = torch.randn(N, Ci, H, W)
        w = torch.empty(Co, Ci, K, K).uniform_(-1 / 3, 1 / 3)
        bias = torch.empty(Co).uniform_(-1 / 3, 1 / 3)
        flops = 2.0 * N * Co * (H - K + 1) * (W - K + 1) * Ci * K * K
        per_run = 5 if self.quick else 20

        def run():
            for _ in range(per_run):
                self.consume(F.conv2d(x, w, bias))

        t = time_runs(run, self.warmup, self.reps)
        self.rate(name, "torch", "GFLOP/s", flops * per_run, 1e9, t)
        # PyTorch's other CPU path (im2col + BLAS): faster here than oneDNN's, whose fresh,
        # uncached output buffers are page-faulted on every call. report.py holds ember to the
        # better of the two.
        with torch.backends.mkldnn.flags(enabled=False):
            t = time_runs(run, self.warmup, self.reps)
        self.rate(name, "torch", "GFLOP/s", flops * per_run, 1e9, t, config="mkldnn off")

    def overhead(self):
        if not self.selected("overhead_add_1"):
            return
        a, b = torch.tensor([1.0]), torch.tensor([2.0])
        iters = 2000 if self.quick else 50000

        def run():
            c = None
            for _ in range(iters):
                c = a + b
            self.consume(c)

        t = time_runs(run, self.warmup, self.reps)
        self.report("overhead_add_1", "torch", "us/op", t[0] / iters * 1e6, t)

    def memcpy(self):
        if not self.selected("memcpy_64M"):
            return
        # 64M f32 elements (256 MiB); GB/s counts bytes read and written, as bench_cpu does.
        n = (64 << 20) // 8 if self.quick else 64 << 20
        src = np.random.rand(n).astype(np.float32)
        dst = np.empty_like(src)
        dst.fill(0)

        def run():
            np.copyto(dst, src)
            self.sink += float(dst[n // 2])

        t = time_runs(run, 1, self.reps)
        self.rate("memcpy_64M", "numpy", "GB/s", 8.0 * n, 1e9, t)
        ts, td = torch.from_numpy(src), torch.from_numpy(dst)
        t = time_runs(lambda: self.consume(td.copy_(ts)), 1, self.reps)
        self.rate("memcpy_64M", "torch_copy", "GB/s", 8.0 * n, 1e9, t)

    def mlp(self):
        name = "mlp_fwd_bwd_784_512_512_10_b64"
        if not self.selected(name):
            return
        torch.manual_seed(0)
        with torch.enable_grad():
            l1, l2, l3 = torch.nn.Linear(784, 512), torch.nn.Linear(512, 512), torch.nn.Linear(512, 10)
            params = [*l1.parameters(), *l2.parameters(), *l3.parameters()]
            x = torch.rand(64, 784)
            y = torch.randint(0, 10, (64,))
            per_run = 5 if self.quick else 20

            def run():
                for _ in range(per_run):
                    for p in params:
                        p.grad = None
                    h = torch.relu(l1(x))
                    h = torch.relu(l2(h))
                    loss = F.cross_entropy(l3(h), y)
                    loss.backward()
                    self.consume(l1.weight.grad)

            t = time_runs(run, self.warmup, self.reps)
        self.report(name, "torch", "ms/step", t[0] / per_run * 1e3, t)

    def autograd_overhead(self):
        name = "autograd_chain4_1"
        if not self.selected(name):
            return
        with torch.enable_grad():
            a = torch.tensor([0.5], requires_grad=True)
            b = torch.tensor([1.5], requires_grad=True)
            iters = 1000 if self.quick else 20000

            def run():
                for _ in range(iters):
                    y = ((a * b + a).exp() * b).sum()
                    ga, = torch.autograd.grad(y, [a])
                    self.consume(ga)

            t = time_runs(run, self.warmup, self.reps)
        self.report(name, "torch", "us/iter", t[0] / iters * 1e6, t)

    def reduce_chain(self):
        if not self.selected("reduce_chain_8192x2048"):
            return
        rows, cols = (1024 if self.quick else 8192), 2048
        n = rows * cols
        x = torch.randn(rows, cols)
        t = time_runs(lambda: self.consume(torch.exp(x * 2).sum(1, keepdim=True)), 1, self.reps)
        self.rate("rowsum_exp_8192x2048", "torch", "GB/s", 4.0 * n, 1e9, t)
        ln = torch.nn.LayerNorm(cols)
        with torch.no_grad():
            t = time_runs(lambda: self.consume(ln(x)), 1, self.reps)
        self.rate("layer_norm_8192x2048", "torch", "GB/s", 8.0 * n, 1e9, t)

    def run(self):
        for n in (256, 1024, 2048):
            self.matmul(n)
        self.add()
        self.gelu()
        self.reduce_chain()
        self.sum()
        self.softmax()
        self.conv2d()
        self.overhead()
        self.memcpy()
        self.mlp()
        self.autograd_overhead()
        print(f"bench_torch: done (sink {self.sink:g})", file=sys.stderr)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=int(os.environ.get("EMBER_NUM_THREADS", "1")))
    p.add_argument("--reps", type=int, default=11)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--only", default="")
    p.add_argument("--config", default="", help="label stored with each figure (e.g. the OpenMP wait policy)")
    p.add_argument("--torch-threads", type=int, default=0,
                   help="torch's own thread count when it differs from --threads (e.g. torch 1 + OpenBLAS 2)")
    args = p.parse_args()
    torch.set_num_threads(args.torch_threads or args.threads)
    torch.set_grad_enabled(False)
    print(json.dumps({"meta": "bench_torch", "threads": args.threads,
                      "torch": torch.__version__, "torch_threads": torch.get_num_threads(),
                      "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", ""),
                      "openblas_num_threads": os.environ.get("OPENBLAS_NUM_THREADS", ""),
                      "quick": args.quick}), flush=True)
    Bench(args).run()


if __name__ == "__main__":
    main()
