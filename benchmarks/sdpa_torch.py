#!/usr/bin/env python3
"""PyTorch's scaled_dot_product_attention on the GPT example's attention shape (8 sequences,
12 heads, 1024 positions, head dim 64, causal, bf16), timed per SDPA backend PyTorch offers
(flash, cuDNN, memory-efficient): the forward alone and forward + backward, one JSON line each
{"framework": "torch", "name", "fwd_us", "fwd_bwd_us", "bwd_us"}. For comparison with ember's
fused attention kernels (their times come from an ncu profile of the GPT step: docs/cuda.md).

    python3 benchmarks/sdpa_torch.py      # on the GPU machine (PyTorch 2.11)
"""
import json

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def time_us(f, n=50):
    """Mean microseconds a call of `f` over `n` calls after 5 warm-up calls (CUDA events)."""
    for _ in range(5):
        f()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(n):
        f()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / n * 1e3


def main():
    shape = (8, 12, 1024, 64)
    q, k, v = (torch.randn(*shape, device="cuda", dtype=torch.bfloat16, requires_grad=True)
               for _ in range(3))
    dout = torch.randn(*shape, device="cuda", dtype=torch.bfloat16)
    for name, backend in [("flash", SDPBackend.FLASH_ATTENTION),
                          ("cudnn", SDPBackend.CUDNN_ATTENTION),
                          ("efficient", SDPBackend.EFFICIENT_ATTENTION)]:
        try:
            with sdpa_kernel(backend):
                fwd = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)
                t_fwd = time_us(fwd)
                t_both = time_us(lambda: fwd().backward(dout))
            print(json.dumps({"framework": "torch",
                              "name": f"sdpa_{name}_b8_h12_s1024_d64_causal_bf16",
                              "fwd_us": round(t_fwd, 1), "fwd_bwd_us": round(t_both, 1),
                              "bwd_us": round(t_both - t_fwd, 1)}), flush=True)
        except Exception as e:  # a backend this torch or GPU lacks: say so, go on
            print(f"sdpa_torch: {name} skipped: {str(e)[:200]}", flush=True)


if __name__ == "__main__":
    main()
