#!/usr/bin/env python3
"""PyTorch's side of examples/resnet: the same CIFAR ResNet-18 (3x32x32 images, 10 classes), with
parameter names equal to ember's paths (conv1, bn1, blocks.<i>.conv1/bn1/conv2/bn2/
downsample_conv/downsample_bn, fc), so ember's PyTorchFileRecorder loads its state_dict as it is
(`resnet --init-from FILE.pt`).

  resnet_torch.py weights OUT.pt [--seed S] [--width W] [--batch-file B.pt --batch N]
      torchvision's initialisation (He-normal fan-out convolutions, BatchNorm 1/0, nn.Linear's
      default), saved with torch.save(state_dict); with --batch-file, a fixed batch of standard-
      normal images and uniform labels ({"images", "targets"}) for `resnet --batch-from`.
  resnet_torch.py losses WEIGHTS.pt BATCH.pt [--steps 5] [--optimizer sgd|adam] [--lr X]
      [--dtype float32|float64] [--width W] [--device cpu|cuda] [--bf16]
      Trains from those weights on that one batch (training-mode BatchNorm, no dropout; on the
      CPU unless --device says otherwise) and prints one JSON line per step with the loss: the
      figures ember's
      `resnet --synthetic --init-from WEIGHTS.pt --batch-from BATCH.pt --warmup 0 --steps 5`
      prints, to within f32 rounding. --bf16: under bf16 autocast (ember's --bf16), float32
      weights; on CUDA TF32 stays off, as ember's f32.
  resnet_torch.py time [--batch 256] [--optimizer sgd|adam] [--device cuda|cpu]
      [--precision f32,tf32,bf16] [--layout nchw,channels_last]
      [--configs eager,fused,compile,cuda_graph,compile_graph] [--weights W.pt] [--reps N]
      [--profile PREFIX]
      Times one training step (forward, backward, optimizer step) on random data, at PyTorch's
      best: eager (foreach optimizer), the fused optimizer, torch.compile(mode="max-autotune")
      with the fused optimizer, the whole step captured in a CUDA graph (fused optimizer), and
      (compile_graph) the model compiled with mode "max-autotune-no-cudagraphs" inside a whole
      step captured in a CUDA graph, each in every precision and layout asked for
      (cudnn.benchmark on); --profile writes each configuration's GPU kernels of a step
      (torch.profiler) to PREFIX.<precision>_<layout>_<config>.txt. Precisions: f32 (TF32
      off for matmuls and cuDNN, as ember's f32; PyTorch's own default lets cuDNN use TF32),
      tf32 (both on), bf16 (autocast to bfloat16, f32 master weights). One JSON line per
      configuration, {"framework": "torch", "name", "value" (ms), "unit": "ms",
      "peak_memory_mib"},
      then the minimum as "resnet18_b<N>_best". Configurations this PyTorch lacks (Debian's 1.13
      has no torch.compile; fused optimizers and CUDA graphs need CUDA) are skipped with a line on
      stderr. Times are the best of 5 rounds of --reps steps after warm-up, synchronised.
      max-autotune autotunes for minutes per configuration on the GPU: --compile-mode default
      (or reduce-overhead) is quicker, and --configs leaves compile out.

The optimizer is the example's: SGD with momentum 0.9 and weight decay 5e-4 (lr 0.05), or Adam
(lr 1e-3, eps 1e-8).
"""
import argparse
import json
import math
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from torch_graph import capture_step  # noqa: E402 (benchmarks/ is the script's folder)


class BasicBlock(nn.Module):
    """relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x)); the shortcut a strided 1x1
    convolution with BatchNorm where the shape changes."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.project = stride != 1 or cin != cout
        if self.project:
            self.downsample_conv = nn.Conv2d(cin, cout, 1, stride, 0, bias=False)
            self.downsample_bn = nn.BatchNorm2d(cout)

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        s = self.downsample_bn(self.downsample_conv(x)) if self.project else x
        return F.relu(y + s)


class ResNet(nn.Module):
    """CIFAR ResNet: 3x3 stem + BatchNorm + ReLU (no max-pool), stages of BasicBlocks (stride 2
    at the start of every stage after the first), global average pooling, a linear layer.
    widths (64, 128, 256, 512) and blocks (2, 2, 2, 2) are ResNet-18: 11,173,962 parameters."""

    def __init__(self, widths=(64, 128, 256, 512), blocks=(2, 2, 2, 2), cin=3, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, widths[0], 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(widths[0])
        layers, c = [], widths[0]
        for s, (w, n) in enumerate(zip(widths, blocks)):
            for b in range(n):
                layers.append(BasicBlock(c, w, 2 if s > 0 and b == 0 else 1))
                c = w
        self.blocks = nn.ModuleList(layers)
        self.fc = nn.Linear(c, classes)
        # torchvision's ResNet initialisation, as ember's ResNetConfig draws it.
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        for b in self.blocks:
            x = b(x)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def widths_of(width):
    return (width, 2 * width, 4 * width, 8 * width)


def make_model(width=64, seed=None):
    if seed is not None:
        torch.manual_seed(seed)
    return ResNet(widths_of(width))


def make_optimizer(params, name, lr, fused=False, capturable=False):
    extra = {}
    if fused:
        extra["fused"] = True
    if name == "adam":
        if capturable:
            extra["capturable"] = True
        return torch.optim.Adam(params, lr=lr if lr else 1e-3, eps=1e-8, **extra)
    return torch.optim.SGD(params, lr=lr if lr else 0.05, momentum=0.9, dampening=0,
                           weight_decay=5e-4, **extra)


def emit(obj):
    print(json.dumps(obj), flush=True)


# ---- weights, losses -----------------------------------------------------------------------

def cmd_weights(a):
    m = make_model(a.width, a.seed)
    torch.save(m.state_dict(), a.out)
    n = sum(p.numel() for p in m.parameters())
    print(f"wrote {a.out}: ResNet width {a.width}, {n} parameters (seed {a.seed})", file=sys.stderr)
    if a.batch_file:
        g = torch.Generator().manual_seed(a.seed + 1)
        images = torch.randn(a.batch, 3, 32, 32, generator=g)
        targets = torch.randint(0, 10, (a.batch,), generator=g)
        torch.save({"images": images, "targets": targets}, a.batch_file)
        print(f"wrote {a.batch_file}: {a.batch} images and labels", file=sys.stderr)


def train_losses(model, images, targets, steps, optimizer, lr, bf16=False):
    """The losses of `steps` training steps on one batch (the loss before each update), under
    bf16 autocast with `bf16`."""
    opt = make_optimizer(model.parameters(), optimizer, lr)
    model.train()
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        with torch.autocast(images.device.type, dtype=torch.bfloat16, enabled=bf16):
            loss = F.cross_entropy(model(images), targets)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def cmd_losses(a):
    dtype = getattr(torch, a.dtype)
    if a.device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    m = make_model(a.width)
    m.load_state_dict(torch.load(a.weights_file))
    m = m.to(dtype).to(a.device)
    batch = torch.load(a.batch_file)
    losses = train_losses(m, batch["images"].to(dtype).to(a.device),
                          batch["targets"].to(a.device), a.steps, a.optimizer, a.lr, a.bf16)
    for i, loss in enumerate(losses):
        emit({"framework": "torch", "step": i + 1, "loss": loss, "dtype": a.dtype,
              "precision": "bf16" if a.bf16 else a.dtype, "device": a.device})


# ---- timing --------------------------------------------------------------------------------

def synchronize(device):
    if device == "cuda":
        torch.cuda.synchronize()


def per_step(f, device, reps, warm=5):
    for _ in range(warm):
        f()
    synchronize(device)
    best = 1e30
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(reps):
            f()
        synchronize(device)
        best = min(best, (time.perf_counter() - t0) / reps)
    return best


def time_one(a, precision, layout, cfg):
    """Seconds per training step of one configuration."""
    dev = a.device
    torch.manual_seed(0)
    m = make_model(64)
    if a.weights:
        m.load_state_dict(torch.load(a.weights))
    fmt = torch.channels_last if layout == "channels_last" else torch.contiguous_format
    m = m.to(dev).to(memory_format=fmt)
    x = torch.randn(a.batch, 3, 32, 32, device=dev).to(memory_format=fmt)
    y = torch.randint(0, 10, (a.batch,), device=dev)
    fused = cfg != "eager"
    graphed = cfg in ("cuda_graph", "compile_graph")
    opt = make_optimizer(m.parameters(), a.optimizer, None, fused=fused, capturable=graphed)
    # compile_graph: inductor's own CUDA graphs cannot be captured inside the step's graph.
    mode = a.compile_mode if cfg == "compile" else "max-autotune-no-cudagraphs"
    fwd = torch.compile(m, mode=mode) if cfg in ("compile", "compile_graph") else m
    tf32 = precision == "tf32"
    if dev == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
    bf16 = precision == "bf16"
    # The autocast cache must be off inside a captured graph (its casts would not be replayed).
    autocast = (lambda: torch.autocast(dev, dtype=torch.bfloat16, cache_enabled=False)) if bf16 \
        else None

    # max-autotune replays CUDA graphs of its own: each step must tell it a new one begins, or
    # the next replay overwrites outputs the previous step still reads.
    compiler = getattr(torch, "compiler", None)
    mark_step = getattr(compiler, "cudagraph_mark_step_begin", None) if cfg == "compile" else None

    def step():
        if mark_step is not None:
            mark_step()
        opt.zero_grad(set_to_none=False)
        if autocast:
            with autocast():
                loss = F.cross_entropy(fwd(x), y)
        else:
            loss = F.cross_entropy(fwd(x), y)
        loss.backward()
        opt.step()

    if dev == "cuda":
        torch.cuda.reset_peak_memory_stats()
    run = capture_step(step) if graphed else step
    seconds = per_step(run, dev, a.reps)
    peak = torch.cuda.max_memory_allocated() / 2**20 if dev == "cuda" else None
    if a.profile and dev == "cuda":
        profile_steps(run, f"{a.profile}.{precision}_{layout}_{cfg}.txt")
    return seconds, peak


def profile_steps(run, path, steps=3):
    """Writes the GPU kernels of `steps` steps (CUPTI, through torch.profiler: kernels inside a
    replayed CUDA graph included) to `path`, the costliest first, times per step."""
    from torch.profiler import ProfilerActivity, profile
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            run()
        torch.cuda.synchronize()
    kernels = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            k = kernels.setdefault(e.name, [0.0, 0])
            k[0] += e.device_time / steps if hasattr(e, "device_time") else e.cuda_time / steps
            k[1] += 1
    total = sum(v[0] for v in kernels.values())
    with open(path, "w") as f:
        f.write(f"{sum(v[1] for v in kernels.values()) // steps} kernels, {total:.1f} us a step\n")
        for name, (us, n) in sorted(kernels.items(), key=lambda kv: -kv[1][0]):
            f.write(f"{us:10.1f} us {100 * us / total:5.1f} % {n // steps:4d}x  {name[:150]}\n")


def lacks(cfg, device):
    """Why this PyTorch cannot run `cfg` on `device`, or None."""
    if cfg in ("fused", "cuda_graph", "compile", "compile_graph") and device != "cuda":
        return "needs CUDA"
    if cfg in ("compile", "compile_graph") and not hasattr(torch, "compile"):
        return f"torch {torch.__version__} has no torch.compile"
    return None


def cmd_time(a):
    dev = a.device
    if dev == "cuda":
        torch.backends.cudnn.benchmark = True
        print("torch", torch.__version__, torch.cuda.get_device_name(0), file=sys.stderr)
    elif a.threads:
        torch.set_num_threads(a.threads)
    best = None
    for precision in a.precision.split(","):
        for layout in a.layout.split(","):
            for cfg in a.configs.split(","):
                name = f"resnet18_b{a.batch}_{a.optimizer}_{precision}_{layout}_{cfg}"
                why = lacks(cfg, dev)
                if why:
                    print(f"{name}: skipped ({why})", file=sys.stderr)
                    continue
                try:
                    seconds, peak = time_one(a, precision, layout, cfg)
                except Exception as e:  # one configuration failing must not stop the others
                    print(f"{name} failed: {type(e).__name__}: {str(e)[:300]}", file=sys.stderr)
                    continue
                finally:
                    if cfg in ("compile", "compile_graph") and hasattr(torch, "_dynamo"):
                        torch._dynamo.reset()  # its graphs and CUDA graph pools go with it
                ms = seconds * 1e3
                out = {"framework": "torch", "name": name, "value": round(ms, 4), "unit": "ms",
                       "images_per_s": round(a.batch / seconds, 1), "device": dev}
                if peak is not None:
                    out["peak_memory_mib"] = round(peak, 1)
                emit(out)
                if best is None or ms < best[1]:
                    best = (name, ms)
    if best:
        emit({"framework": "torch", "name": f"resnet18_b{a.batch}_best", "value": round(best[1], 4),
              "unit": "ms", "config": best[0]})


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("weights", help="write PyTorch-initialised weights (and a fixed batch)")
    w.add_argument("out")
    w.add_argument("--seed", type=int, default=42)
    w.add_argument("--width", type=int, default=64, help="first stage's width (64: ResNet-18)")
    w.add_argument("--batch-file")
    w.add_argument("--batch", type=int, default=8)
    ls = sub.add_parser("losses", help="losses of training steps on the CPU from saved weights")
    ls.add_argument("weights_file")
    ls.add_argument("batch_file")
    ls.add_argument("--steps", type=int, default=5)
    ls.add_argument("--optimizer", choices=("sgd", "adam"), default="sgd")
    ls.add_argument("--lr", type=float, default=None)
    ls.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    ls.add_argument("--width", type=int, default=64)
    ls.add_argument("--device", default="cpu")
    ls.add_argument("--bf16", action="store_true", help="under bf16 autocast")
    t = sub.add_parser("time", help="time a training step in every configuration")
    t.add_argument("--batch", type=int, default=256)
    t.add_argument("--optimizer", choices=("sgd", "adam"), default="sgd")
    t.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    t.add_argument("--precision", default="f32,bf16", help="any of f32, tf32, bf16")
    t.add_argument("--layout", default="nchw,channels_last")
    t.add_argument("--configs", default="eager,fused,compile,cuda_graph")
    t.add_argument("--weights", help="start from these weights (resnet_torch.py weights)")
    t.add_argument("--reps", type=int, default=20, help="steps per timing round")
    t.add_argument("--compile-mode", default="max-autotune",
                   help="torch.compile's mode for the compile configuration")
    t.add_argument("--threads", type=int, default=None, help="CPU threads (cpu only)")
    t.add_argument("--profile", metavar="PREFIX",
                   help="also write each configuration's GPU kernels per step to PREFIX.<config>.txt")
    a = p.parse_args()
    {"weights": cmd_weights, "losses": cmd_losses, "time": cmd_time}[a.cmd](a)


if __name__ == "__main__":
    main()
