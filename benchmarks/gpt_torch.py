#!/usr/bin/env python3
"""PyTorch's side of the GPT example (examples/gpt): the identical byte-level GPT-2-shaped model,
and a training step timed at PyTorch's best on this machine.

The model is examples/gpt/model.hpp's, layer for layer: token and learned position embeddings,
pre-LayerNorm blocks of causal self-attention (separate query/key/value/output Linear layers, as
ember's nn::MultiHeadAttention) and a 4x exact-GELU MLP, a final LayerNorm, scores from the tied
token embedding; GPT-2's initialisation (normal std 0.02, biases 0). Attention is
F.scaled_dot_product_attention(is_causal=True) where this torch has it (2.0 on), else the same
function composed (matmul, causal mask, softmax, matmul). The optimizer is the example's AdamW
(betas 0.9/0.95, eps 1e-8, weight decay 0.1 on every parameter) at a constant rate.

A step is timed in every configuration this torch and device can run, each printed as one JSON
line {"framework": "torch", "name": ..., "value": ms, "unit": "ms", "tokens_per_s": ...,
"mfu": ... (with --peak-tflops), "peak_memory_mib": ... (CUDA: max_memory_allocated),
"peak_reserved_mib": ... (CUDA: max_memory_reserved), "loss": ...}; a configuration
this torch lacks is skipped with a line on stderr. The minimum is PyTorch's best:
  eager       the model as written, AdamW with foreach (torch's default)
  fused       the same with fused=True AdamW
  compile     torch.compile(model, mode="max-autotune") (CUDA graphs included; --compile-mode
              picks another) + fused AdamW
  cuda_graph  the whole step (zero_grad, forward, backward, fused capturable AdamW) captured
              in one CUDA graph and replayed
  compile_graph  torch.compile(model, mode="max-autotune-no-cudagraphs") inside the whole step
              captured in one CUDA graph (inductor's own CUDA graphs cannot be captured inside
              another), fused capturable AdamW
each in f32 (exact, TF32 off, as ember's default) and under bf16 autocast (matmuls and attention
in bf16, reductions and LayerNorm in f32, f32 master weights).

Batches: fixed windows of bytes from splitmix64 (bench_tokens), the same formula as the ember
example's --bench, so both sides train on the same data. Model FLOPs per step (both sides):
tokens * (6 * N + 12 * layers * d_model * seq), N = parameters without the position embedding
(PaLM's convention; the causal half of attention is counted).

  # on the GPU machine (PyTorch 2.11): GPT-2 small's shape, 8 x 1024 tokens, H200's bf16 peak
  python3 benchmarks/gpt_torch.py --batch 8 --seq 1024 --peak-tflops 989
  # here (Debian's torch 1.13, CPU): a tiny model, whatever this torch can do
  /usr/bin/python3 benchmarks/gpt_torch.py --device cpu --layers 2 --d-model 64 --heads 2 \\
      --context 64 --batch 4 --seq 64
  # the same initial weights for ember: gpt train --init-from /tmp/gpt_init.pt ...
  python3 benchmarks/gpt_torch.py ... --save-init /tmp/gpt_init.pt --configs none
  # losses of N steps of the eager f32 step, one JSON line each (the loss-agreement check);
  # --loss-precisions f32,bf16 prints them under bf16 autocast too (ember's gpt --bf16)
  python3 benchmarks/gpt_torch.py ... --loss-steps 20 --configs none
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

MASK64 = (1 << 64) - 1


def splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK64
    return x ^ (x >> 31)


def bench_tokens(batch, seq, seed):
    """The benchmark's batch: byte i of the batch's batch * (seq + 1) bytes is
    splitmix64(seed * 2^32 + i) mod 256 (examples/gpt/data.hpp's bench_batch); inputs are each
    row's first seq bytes, targets the next byte of each, flattened."""
    base = (seed << 32) & MASK64
    flat = [splitmix64((base + i) & MASK64) & 255 for i in range(batch * (seq + 1))]
    w = torch.tensor(flat, dtype=torch.long).view(batch, seq + 1)
    return w[:, :seq].contiguous(), w[:, 1:].reshape(-1).contiguous()


def attention(q, k, v, dropout):
    """Causal attention of q, k, v [N, heads, S, dk]."""
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout, is_causal=True)
    s = q.shape[-2]
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    future = torch.triu(torch.ones(s, s, dtype=torch.bool, device=q.device), 1)
    w = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
    return F.dropout(w, dropout, training=dropout > 0) @ v


class Block(nn.Module):
    """Pre-LayerNorm: x + drop(o(attn(ln1(x)))), then x + drop(fc2(drop(gelu(fc1(ln2(x))))))."""

    def __init__(self, d, heads, dropout):
        super().__init__()
        self.heads, self.dropout = heads, dropout
        self.ln1 = nn.LayerNorm(d)
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        n, s, d = x.shape
        split = lambda t: t.view(n, s, self.heads, d // self.heads).transpose(1, 2)
        a = self.ln1(x)
        y = attention(split(self.q(a)), split(self.k(a)), split(self.v(a)),
                      self.dropout if self.training else 0.0)
        x = x + self.drop(self.o(y.transpose(1, 2).reshape(n, s, d)))
        return x + self.drop(self.fc2(self.drop(F.gelu(self.fc1(self.ln2(x))))))


class Gpt(nn.Module):
    def __init__(self, vocab=256, context=1024, d=768, heads=12, layers=12, dropout=0.0):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(context, d)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList([Block(d, heads, dropout) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(d)
        for name, p in self.named_parameters():  # GPT-2's initialisation, as GptConfig::init
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif ".ln" in name or name.startswith("ln_f"):
                nn.init.ones_(p)
            else:
                nn.init.normal_(p, 0.0, 0.02)

    def forward(self, tokens):
        """Scores [N * S, vocab] of tokens [N, S]."""
        n, s = tokens.shape
        pos = torch.arange(s, device=tokens.device)
        x = self.drop(self.wte(tokens) + self.wpe(pos).unsqueeze(0))
        for b in self.blocks:
            x = b(x)
        return (self.ln_f(x) @ self.wte.weight.t()).reshape(n * s, -1)


def model_flops(model, args):
    """Model FLOPs of one training step (forward and backward)."""
    n = sum(p.numel() for p in model.parameters()) - model.wpe.weight.numel()
    tokens = args.batch * args.seq
    return tokens * (6 * n + 12 * args.layers * args.d_model * args.seq)


def make_adamw(model, lr, **kw):
    return torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), eps=1e-8,
                             weight_decay=0.1, **kw)


def best_time(f, sync, reps, rounds, warm):
    for _ in range(warm):
        f()
    sync()
    best = 1e30
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(reps):
            f()
        sync()
        best = min(best, (time.perf_counter() - t0) / reps)
    return best


def fresh_model(args, dev):
    torch.manual_seed(args.seed)
    return Gpt(256, args.context, args.d_model, args.heads, args.layers, args.dropout).to(dev)


def run_config(args, dev, precision, cfg, x, y, flops):
    cuda = dev.type == "cuda"
    graphed = cfg in ("cuda_graph", "compile_graph")
    compiled = cfg in ("compile", "compile_graph")
    if graphed and not cuda:
        raise RuntimeError("a CUDA graph needs a CUDA device")
    if compiled and not hasattr(torch, "compile"):
        raise RuntimeError(f"torch {torch.__version__} has no torch.compile")
    model = fresh_model(args, dev).train()
    kw = {}
    if cfg != "eager":
        kw["fused"] = True
    if graphed:
        kw["capturable"] = True
    opt = make_adamw(model, args.lr, **kw)  # TypeError where this torch lacks fused/capturable
    mode = args.compile_mode if cfg == "compile" else "max-autotune-no-cudagraphs"
    fwd = torch.compile(model, mode=mode) if compiled else model
    # No autocast weight cache: a captured graph must not hold casts made outside it.
    amp = lambda: torch.autocast(dev.type, dtype=torch.bfloat16, enabled=precision == "bf16",
                                 cache_enabled=False)
    loss_out = torch.zeros((), device=dev)
    # max-autotune replays CUDA graphs of its own: each step must tell it a new one begins, or
    # the next replay overwrites outputs the previous step still reads.
    compiler = getattr(torch, "compiler", None)
    mark_step = getattr(compiler, "cudagraph_mark_step_begin", None) if cfg == "compile" else None

    def step():
        if mark_step is not None:
            mark_step()
        opt.zero_grad(set_to_none=False)
        with amp():
            loss = F.cross_entropy(fwd(x), y)
        loss.backward()
        opt.step()
        loss_out.copy_(loss.detach())

    sync = torch.cuda.synchronize if cuda else (lambda: None)
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    run = step
    if graphed:
        run = capture_step(step)
    s = best_time(run, sync, args.reps, args.rounds, args.warmup)
    line = {"framework": "torch", "name": f"gpt_train_step_b{args.batch}_s{args.seq}_{precision}_{cfg}",
            "value": round(s * 1e3, 4), "unit": "ms",
            "tokens_per_s": round(args.batch * args.seq / s, 1)}
    if args.peak_tflops:
        line["mfu"] = round(flops / s / (args.peak_tflops * 1e12), 4)
    if cuda:
        line["peak_memory_mib"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
        # What its caching allocator held from the driver (fragmentation and the graph's
        # private pool included): the figure comparable to ember's reserved bytes.
        line["peak_reserved_mib"] = round(torch.cuda.max_memory_reserved() / 2**20, 1)
    line["loss"] = round(float(loss_out), 5)
    line["device"] = torch.cuda.get_device_name(dev) if cuda else "cpu"
    print(json.dumps(line), flush=True)


def loss_steps(args, dev, x, y, precision):
    """The losses of args.loss_steps eager steps from the seed's initial weights, in f32 or
    under bf16 autocast."""
    model = fresh_model(args, dev).train()
    opt = make_adamw(model, args.lr)
    for k in range(args.loss_steps):
        opt.zero_grad()
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=precision == "bf16"):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        print(json.dumps({"framework": "torch", "name": "gpt_loss", "precision": precision,
                          "step": k, "value": round(float(loss), 6)}), flush=True)


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--d-model", type=int, default=768)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--context", type=int, default=1024)
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=0, help="tokens per sequence (0: the context)")
    p.add_argument("--lr", type=float, default=6e-4)
    p.add_argument("--seed", type=int, default=42, help="initial weights and the batch")
    p.add_argument("--precisions", default="f32,bf16")
    p.add_argument("--configs", default="eager,fused,compile,cuda_graph",
                   help="comma-separated, or none")
    p.add_argument("--peak-tflops", type=float, default=0.0,
                   help="the device's peak (e.g. 989 for an H100/H200's bf16 dense) for MFU")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--compile-mode", default="max-autotune",
                   help="torch.compile's mode (max-autotune autotunes every GEMM: minutes)")
    p.add_argument("--save-init", help="write the initial weights (state_dict) to this .pt")
    p.add_argument("--loss-steps", type=int, default=0)
    p.add_argument("--loss-precisions", default="f32",
                   help="the precisions of --loss-steps' runs (f32, bf16: comma-separated)")
    a = p.parse_args(argv)
    if a.seq == 0:
        a.seq = a.context
    if a.seq > a.context or a.d_model % a.heads:
        p.error("need --seq <= --context and --heads dividing --d-model")
    return a


def main():
    args = parse()
    dev = torch.device(args.device)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    print("torch", torch.__version__, torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu",
          file=sys.stderr)
    if args.save_init:
        torch.save(fresh_model(args, torch.device("cpu")).state_dict(), args.save_init)
    x, y = (t.to(dev) for t in bench_tokens(args.batch, args.seq, args.seed))
    if args.loss_steps:
        for precision in args.loss_precisions.split(","):
            loss_steps(args, dev, x, y, precision)
    flops = model_flops(fresh_model(args, torch.device("cpu")), args)
    configs = [] if args.configs == "none" else args.configs.split(",")
    for precision in args.precisions.split(","):
        for cfg in configs:
            try:
                run_config(args, dev, precision, cfg, x, y, flops)
            except Exception as e:  # what this torch or device lacks: say so, go on
                print(f"gpt_torch: {precision} {cfg} skipped: {type(e).__name__}: {str(e)[:200]}",
                      file=sys.stderr)
            if cfg in ("compile", "compile_graph") and hasattr(torch, "_dynamo"):
                torch._dynamo.reset()  # its graphs and CUDA graph pools go with it
            if dev.type == "cuda":
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
