#!/usr/bin/python3
"""PyTorch's side of benchmarks/quant.sh: nn.Linear in f32 and torch.ao's dynamic-quantized
Linear (qint8 weights per channel, activations quantized per batch) on the layers bench_quant
times, at batch 1 and 64, one thread. Prints JSON lines as bench_quant does:
  {"workload":"linear_784x512_b1","impl":"torch_int8_dynamic","us":12.3,"runs":15}
Each figure is the median of --reps timed runs of enough forwards to last about 2 ms.
"""
import argparse
import json
import statistics
import time

import torch


def time_us(f, reps):
    for _ in range(20):
        f()
    t0, calls = time.perf_counter(), 0
    while time.perf_counter() - t0 < 2e-3:
        f()
        calls += 1
    inner = max(1, calls)
    s = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(inner):
            f()
        s.append((time.perf_counter() - t0) / inner)
    return statistics.median(s) * 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=15)
    a = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(7)
    for d_in, d_out in ((784, 512), (1024, 512), (512, 512)):
        lin = torch.nn.Sequential(torch.nn.Linear(d_in, d_out)).eval()
        qlin = torch.ao.quantization.quantize_dynamic(
            lin, {torch.nn.Linear: torch.ao.quantization.per_channel_dynamic_qconfig},
            dtype=torch.qint8)
        for batch in (1, 64):
            x = torch.randn(batch, d_in)
            w = "linear_%dx%d_b%d" % (d_in, d_out, batch)
            with torch.no_grad():
                for impl, m in (("torch_f32", lin), ("torch_int8_dynamic", qlin)):
                    us = time_us(lambda: m(x), a.reps)
                    print(json.dumps({"workload": w, "impl": impl, "us": float("%.4g" % us),
                                      "runs": a.reps}), flush=True)
    print(json.dumps({"torch_engine": torch.backends.quantized.engine}))


if __name__ == "__main__":
    main()
