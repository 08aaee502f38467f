"""PyTorch's DistributedDataParallel on the workloads of bench_multi.cpp (same models, Adam,
synthetic data resident on each GPU). One GPU: plain training; several: launch with torchrun,
    NCCL_NVLS_ENABLE=0 python3 -m torch.distributed.run --standalone --nproc_per_node=2 \
        bench_multi_torch.py --model cnn
Prints the line bench_multi prints, with "torch" in front."""
import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


class Cnn(nn.Module):
    """The guide's CNN (examples/mnist/common.hpp)."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3)
        self.conv2 = nn.Conv2d(8, 16, 3)
        self.pool = nn.AdaptiveAvgPool2d((8, 8))
        self.dropout = nn.Dropout(0.5)
        self.linear1 = nn.Linear(16 * 8 * 8, 512)
        self.linear2 = nn.Linear(512, 10)

    def forward(self, images):
        x = images.unsqueeze(1)
        x = self.dropout(self.conv1(x))
        x = F.relu(self.dropout(self.conv2(x)))
        x = self.pool(x).flatten(1)
        x = F.relu(self.dropout(self.linear1(x)))
        return self.linear2(x)


class Transformer(nn.Module):
    """6 encoder layers, d_model 512, 8 heads, d_ff 2048, mean-pooled into 10 classes."""

    def __init__(self):
        super().__init__()
        layer = nn.TransformerEncoderLayer(512, 8, 2048, dropout=0.0, activation="gelu",
                                           batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 6)
        self.head = nn.Linear(512, 10)

    def forward(self, x):
        return self.head(self.encoder(x).mean(1))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="cnn", choices=["cnn", "transformer"])
    p.add_argument("--batch", type=int, default=0)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    a = p.parse_args()
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    if world > 1:
        dist.init_process_group("nccl")
    torch.backends.cuda.matmul.allow_tf32 = False  # ember's default
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(1234)
    batch = a.batch or (4096 if a.model == "cnn" else 32)
    model = (Cnn() if a.model == "cnn" else Transformer()).cuda()
    if world > 1:
        model = nn.parallel.DistributedDataParallel(model, device_ids=[local])
    shape = (batch, 28, 28) if a.model == "cnn" else (batch, 128, 512)
    x = torch.randn(shape, device="cuda")
    y = torch.randint(0, 10, (batch,), device="cuda")
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)

    def step():
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        opt.step()

    for _ in range(a.warmup):
        step()
    torch.cuda.synchronize()
    if world > 1:
        dist.barrier()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        step()
    torch.cuda.synchronize()
    if world > 1:
        dist.barrier()
    s = time.perf_counter() - t0
    if rank == 0:
        print(f"torch model={a.model} world={world} batch_per_device={batch} "
              f"samples_per_s={world * batch * a.steps / s:.1f} ms_per_step={1000 * s / a.steps:.3f}",
              flush=True)
    if world > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
