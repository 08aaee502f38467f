#!/usr/bin/env bash
# ember's Vulkan backend beside PyTorch (CUDA) on the same GPU, in one run (issue 6):
#   bash benchmarks/vulkan.sh [BENCH_VULKAN_BINARY]
# Runs bench_vulkan and bench_cuda_torch.py workload by workload, alternating, plus PyTorch's
# device copy and add (the elementwise roof), and prints the JSON lines and a table of ratios
# (throughputs ember/torch, times torch/ember).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bench="${1:-$here/../build/benchmarks/bench_vulkan}"
py="${PYTHON:-python3}"
out="$(mktemp)"
"$bench" elementwise | tee -a "$out"
"$py" - <<'PY' | tee -a "$out"
import json, time, torch
def per_call(f, reps=20):
    for _ in range(3): f()
    torch.cuda.synchronize(); best = 1e30
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(reps): f()
        torch.cuda.synchronize(); best = min(best, (time.perf_counter() - t0) / reps)
    return best
n = 64 << 20
a, b = torch.rand(n, device="cuda"), torch.rand(n, device="cuda")
c = torch.empty_like(a)
s = per_call(lambda: c.copy_(a))
print(json.dumps({"framework": "torch", "name": "copy_64M", "value": round(8 * n / s / 1e9, 2), "unit": "GB/s"}))
s = per_call(lambda: a + b)
print(json.dumps({"framework": "torch", "name": "add_64M", "value": round(12 * n / s / 1e9, 2), "unit": "GB/s"}))
PY
for w in gemm softmax train fusion; do
  "$bench" "$w" | tee -a "$out"
  "$py" "$here/bench_cuda_torch.py" "$w" | tee -a "$out"
done
"$py" - "$out" <<'PY'
import json, sys
rows = {}
for line in open(sys.argv[1]):
    line = line.strip()
    if line.startswith("{"):
        r = json.loads(line)
        rows.setdefault(r["name"], {})[r["framework"]] = r
# Peers by name: the f16 gemm against PyTorch's bf16, ember's add against the device copy too.
peer = {"gemm_f16_8192": "gemm_bf16_8192",
        "train_step_mlp_b64_fusion": "train_step_mlp_b64",
        "train_step_cnn_b64_fusion": "train_step_cnn_b64",
        "gelu_custom_64M": "gelu_custom_eager_64M",
        "gelu_custom_unfused_64M": "gelu_custom_eager_64M"}
print("\n| workload | ember | PyTorch | ratio |\n| --- | --- | --- | --- |")
for name, r in rows.items():
    e = r.get("ember")
    t = rows.get(peer.get(name, name), {}).get("torch")
    if not e or not t:
        continue
    unit = e["unit"]
    better_high = unit in ("TFLOP/s", "GB/s")
    ratio = e["value"] / t["value"] if better_high else t["value"] / e["value"]
    print(f"| {name} (torch: {peer.get(name, name)}) | {e['value']:.3f} {unit} | {t['value']:.3f} {unit} | {ratio:.2f}x |")
copy = rows.get("copy_64M", {}).get("torch")
# Fusion<Vulkan>'s gelu_custom beside PyTorch's single-kernel forms and ember's unfused chain.
fused = rows.get("gelu_custom_64M", {}).get("ember")
for name in ("F_gelu_64M", "gelu_custom_compile_64M"):
    t = rows.get(name, {}).get("torch")
    if fused and t:
        print(f"| gelu_custom_64M (torch: {name}) | {fused['value']:.1f} GB/s | {t['value']:.1f} GB/s | {fused['value'] / t['value']:.2f}x |")
unfused = rows.get("gelu_custom_unfused_64M", {}).get("ember")
if fused and unfused:
    print(f"| gelu_custom_64M fused ÷ unfused | {fused['value']:.1f} GB/s | unfused {unfused['value']:.1f} GB/s | {fused['value'] / unfused['value']:.2f}x |")
if fused and copy:
    print(f"| gelu_custom_64M ÷ device copy | {fused['value']:.1f} GB/s | copy {copy['value']:.1f} GB/s | {fused['value'] / copy['value']:.2f}x |")
for name in ("add_64M", "scale_64M"):
    e = rows.get(name, {}).get("ember")
    if e and copy:
        print(f"| {name} ÷ device copy | {e['value']:.1f} GB/s | copy {copy['value']:.1f} GB/s | {e['value'] / copy['value']:.2f}x |")
PY
