#!/usr/bin/env python3
"""PyTorch's DistributedDataParallel on the GPT example's model (benchmarks/gpt_torch.py's Gpt,
layer for layer examples/gpt/model.hpp): the data-parallel peer of `gpt train --bench
--devices ...` (benchmarks/gpt_ddp.sh runs both). Launch with torchrun, one process per GPU:

    NCCL_NVLS_ENABLE=0 python3 -m torch.distributed.run --standalone --nproc_per_node=4 \\
        benchmarks/gpt_ddp_torch.py --batch 8 --seq 1024 --peak-tflops 989

Each rank trains on its --batch rows of one fixed batch of world x --batch rows (gpt_torch.py's
bench_tokens, the bytes ember's --bench uses), with the example's AdamW, fused (fused=True), at a
constant rate; the model is wrapped in DistributedDataParallel when there are several ranks
(gradients all-reduced in buckets during backward), and trained plainly on one. Each
precision of --precisions: f32 (exact, TF32 off, as ember's) and bf16 autocast (matmuls and
attention in bf16, f32 master weights; PyTorch's fastest single-GPU configuration short of a
CUDA graph). Rank 0 prints one JSON line per precision:
{"framework": "torch", "name": "gpt_train_step_b<batch>_s<seq>_<precision>_fused", "value": ms,
"unit": "ms", "tokens_per_s": (all ranks), "mfu": (per GPU), "peak_memory_mib": (rank 0),
"loss": (rank 0's), "world_size": N, "batch_per_gpu": batch, "device": ...}.
"""
import argparse
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt_torch import bench_tokens, best_time, fresh_model, make_adamw, model_flops  # noqa: E402


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--d-model", type=int, default=768)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--context", type=int, default=1024)
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--batch", type=int, default=8, help="sequences per GPU")
    p.add_argument("--seq", type=int, default=0, help="tokens per sequence (0: the context)")
    p.add_argument("--lr", type=float, default=6e-4)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--precisions", default="bf16,f32")
    p.add_argument("--peak-tflops", type=float, default=0.0)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--rounds", type=int, default=2)
    a = p.parse_args(argv)
    if a.seq == 0:
        a.seq = a.context
    return a


def main():
    args = parse()
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    dev = torch.device("cuda", local)
    if world > 1:
        dist.init_process_group("nccl", device_id=dev)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    x, y = bench_tokens(world * args.batch, args.seq, args.seed)
    rows = slice(rank * args.batch, (rank + 1) * args.batch)
    x = x[rows].contiguous().to(dev)
    y = y.view(world * args.batch, args.seq)[rows].reshape(-1).contiguous().to(dev)
    flops = model_flops(fresh_model(args, torch.device("cpu")), args)  # one GPU's share

    def sync():
        torch.cuda.synchronize()
        if world > 1:
            dist.barrier()

    for precision in args.precisions.split(","):
        model = fresh_model(args, dev).train()
        if world > 1:
            model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local])
        opt = make_adamw(model, args.lr, fused=True)
        loss_out = torch.zeros((), device=dev)

        def step():
            opt.zero_grad(set_to_none=True)
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=precision == "bf16"):
                loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            loss_out.copy_(loss.detach())

        torch.cuda.reset_peak_memory_stats()
        s = best_time(step, sync, args.reps, args.rounds, args.warmup)
        if rank == 0:
            line = {"framework": "torch",
                    "name": f"gpt_train_step_b{args.batch}_s{args.seq}_{precision}_fused",
                    "value": round(s * 1e3, 4), "unit": "ms",
                    "tokens_per_s": round(world * args.batch * args.seq / s, 1)}
            if args.peak_tflops:
                line["mfu"] = round(flops / s / (args.peak_tflops * 1e12), 4)
            line["peak_memory_mib"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
            line["loss"] = round(float(loss_out), 5)
            line["world_size"] = world
            line["batch_per_gpu"] = args.batch
            line["device"] = torch.cuda.get_device_name(dev)
            print(json.dumps(line), flush=True)
        del model, opt
        torch.cuda.empty_cache()
    if world > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
