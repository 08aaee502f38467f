"""PyTorch's side of benchmarks/bench_cuda.cpp: the same workloads, timed the same way (best of
5 timings after warm-up, torch.cuda.synchronize around each). One JSON line per result."""
import json
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from torch_graph import capture_step  # noqa: E402 (benchmarks/ is the script's folder)


def time_per_call(f, reps, warm=3):
    for _ in range(warm):
        f()
    torch.cuda.synchronize()
    best = 1e30
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(reps):
            f()
        torch.cuda.synchronize()
        best = min(best, (time.perf_counter() - t0) / reps)
    return best


def emit(name, value, unit):
    print(json.dumps({"framework": "torch", "name": name, "value": round(value, 4), "unit": unit}),
          flush=True)


def gemm(name, dtype, tf32):
    torch.backends.cuda.matmul.allow_tf32 = tf32
    n = 8192
    a = torch.rand(n, n, device="cuda").to(dtype)
    b = torch.rand(n, n, device="cuda").to(dtype)
    s = time_per_call(lambda: a @ b, 10)
    emit(name, 2 * n**3 / s / 1e12, "TFLOP/s")
    torch.backends.cuda.matmul.allow_tf32 = False


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1, self.l2, self.l3 = nn.Linear(784, 512), nn.Linear(512, 512), nn.Linear(512, 10)

    def forward(self, x):
        x = F.relu(self.l1(x.reshape(x.shape[0], 784)))
        return self.l3(F.relu(self.l2(x)))


class Cnn(nn.Module):
    """Burn's guide CNN, as examples/mnist/common.hpp."""

    def __init__(self):
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(1, 8, 3), nn.Conv2d(8, 16, 3)
        self.pool = nn.AdaptiveAvgPool2d((8, 8))
        self.dropout = nn.Dropout(0.5)
        self.linear1, self.linear2 = nn.Linear(16 * 8 * 8, 512), nn.Linear(512, 10)

    def forward(self, x):
        x = x.reshape(x.shape[0], 1, 28, 28)
        x = self.dropout(self.conv1(x))
        x = F.relu(self.dropout(self.conv2(x)))
        x = self.pool(x).flatten(1)
        x = F.relu(self.dropout(self.linear1(x)))
        return self.linear2(x)


def train_step(name, model):
    model = model.cuda()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-8)
    x = torch.rand(64, 28, 28, device="cuda")
    y = torch.randint(0, 10, (64,), device="cuda")

    def step():
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        opt.step()

    emit(name, time_per_call(step, 50, 10) * 1e3, "ms")


def train_graph(name, make, batch, configs=("eager", "fused", "graph")):
    """The same step at its fastest in PyTorch (as ../shared/peer/torch_best_step.py measured the
    figures to beat): eager with the default (foreach) Adam, with the fused Adam, torch.compile of
    the model with the fused Adam ("compile", mode $EMBER_TORCH_COMPILE_MODE, default
    max-autotune; only when asked for: it compiles for minutes), the whole step captured in
    one CUDA graph with the fused, capturable Adam, replayed ("graph"), and both: the model
    under torch.compile(mode="max-autotune-no-cudagraphs") inside the captured step
    ("compile_graph", also only when asked for; PyTorch's fastest configuration of the guide
    CNN at batch 4096 on an H200)."""
    torch.backends.cudnn.benchmark = True
    x = torch.rand(batch, 28, 28, device="cuda")
    y = torch.randint(0, 10, (batch,), device="cuda")
    for cfg in configs:
        torch.manual_seed(0)
        model = make().cuda()
        graph = cfg in ("graph", "compile_graph")
        opt = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-8, fused=cfg != "eager",
                               capturable=graph)
        if cfg == "compile":
            model = torch.compile(model, mode=os.environ.get("EMBER_TORCH_COMPILE_MODE",
                                                             "max-autotune"))
        if cfg == "compile_graph":
            model = torch.compile(model, mode="max-autotune-no-cudagraphs")

        def step():
            opt.zero_grad(set_to_none=False)
            F.cross_entropy(model(x), y).backward()
            opt.step()

        label = f"{name}_b{batch}" + ("" if cfg == "eager" else "_" + cfg)
        if not graph:
            emit(label, time_per_call(step, 50, 10) * 1e3, "ms")
            continue
        emit(label, time_per_call(capture_step(step), 50, 10) * 1e3, "ms")


def gelu_custom(x):
    """The hand-written GELU of ember's fusion benchmark: five elementwise ops."""
    y = x * (torch.erf(x / math.sqrt(2)) + 1)
    return y / 2


def fusion():
    """gelu_custom over 64M floats: eager (five kernels), F.gelu (one), torch.compile of the
    chain where it works here; effective bandwidth = 4 bytes read + 4 written an element."""
    n = 64 << 20
    x = torch.randn(n, device="cuda")
    gbs = lambda s: 8 * n / s / 1e9
    emit("gelu_custom_eager_64M", gbs(time_per_call(lambda: gelu_custom(x), 20)), "GB/s")
    emit("F_gelu_64M", gbs(time_per_call(lambda: F.gelu(x), 20)), "GB/s")
    try:
        compiled = torch.compile(gelu_custom)
        compiled(x)
        emit("gelu_custom_compile_64M", gbs(time_per_call(lambda: compiled(x), 20)), "GB/s")
    except Exception as e:  # no triton or no compiler on this machine: say so, go on
        print(f"bench_cuda_torch: torch.compile unavailable: {str(e)[:200]}", file=sys.stderr)


def reduce_chain():
    """A row sum of exp(2x) (4 bytes read an element) and LayerNorm over the last dim (4 read +
    4 written) on [8192, 4096] f32, eager."""
    rows, cols = 8192, 4096
    n = rows * cols
    x = torch.randn(rows, cols, device="cuda")
    s = time_per_call(lambda: torch.exp(x * 2).sum(1, keepdim=True), 20)
    emit("rowsum_exp_8192x4096_eager", 4 * n / s / 1e9, "GB/s")
    ln = torch.nn.LayerNorm(cols, device="cuda")
    with torch.no_grad():
        s = time_per_call(lambda: ln(x), 20)
    emit("layer_norm_8192x4096_eager", 8 * n / s / 1e9, "GB/s")


def attention():
    """As bench_cuda's `attention`: F.scaled_dot_product_attention (PyTorch's fused kernels) and
    the composed matmul-softmax-matmul, forward and forward+backward."""
    b, h, l, e = 8, 12, 1024, 64
    for dtype, dname in ((torch.float32, "f32"), (torch.bfloat16, "bf16")):
        q, k, v = (torch.randn(b, h, l, e, device="cuda").to(dtype).requires_grad_()
                   for _ in range(3))
        mask = torch.ones(l, l, device="cuda", dtype=torch.bool).tril()
        for causal in (False, True):
            def fused():
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

            def composed():
                s = q @ k.transpose(-2, -1) / math.sqrt(e)
                if causal:
                    s = s.masked_fill(~mask, float("-inf"))
                return torch.softmax(s, -1) @ v

            w = "attention_%s%s_b8h12l1024d64" % (dname, "_causal" if causal else "")
            for path, f in (("fused", fused), ("composed", composed)):
                with torch.no_grad():
                    fwd = time_per_call(f, 20)
                emit("%s_fwd_%s" % (w, path), fwd * 1e3, "ms")
                both = time_per_call(lambda: f().sum().backward(), 10)
                emit("%s_fwdbwd_%s" % (w, path), both * 1e3, "ms")


def main():
    only = sys.argv[1] if len(sys.argv) > 1 else ""
    want = lambda w: not only or only == w
    if want("gemm"):
        gemm("sgemm_f32_8192", torch.float32, False)
        gemm("gemm_tf32_8192", torch.float32, True)
        gemm("gemm_bf16_8192", torch.bfloat16, False)
    if want("softmax"):
        x = torch.rand(4096, 4096, device="cuda")
        s = time_per_call(lambda: torch.softmax(x, 1), 50)
        emit("softmax_4096x4096", 2 * 4096 * 4096 * 4 / s / 1e9, "GB/s")
    if want("overhead"):
        a = torch.ones(1, device="cuda")
        b = torch.ones(1, device="cuda")
        s = time_per_call(lambda: a + b, 10000)
        emit("op_overhead_add_1", s * 1e6, "us/op")
    if want("train"):
        train_step("train_step_mlp_b64", Mlp())
        train_step("train_step_cnn_b64", Cnn())
    if only == "train_graph":
        for batch in (64, 1024):
            train_graph("train_step_mlp", Mlp, batch)
            train_graph("train_step_cnn", Cnn, batch)
    if only == "train_best":  # benchmarks/gpu_train.sh: train_best [CONFIGS [BATCHES...]]
        configs = tuple(sys.argv[2].split(",")) if len(sys.argv) > 2 else ("eager", "fused",
                                                                             "graph")
        for batch in [int(b) for b in sys.argv[3:]] or [64, 1024, 4096]:
            if batch <= 1024:
                train_graph("train_step_mlp", Mlp, batch, configs)
            train_graph("train_step_cnn", Cnn, batch, configs)
    if want("fusion"):
        fusion()
    if want("reduce"):
        reduce_chain()
    if want("attention"):
        attention()


if __name__ == "__main__":
    main()
