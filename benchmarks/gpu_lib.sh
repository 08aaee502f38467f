# Shell functions the GPU training benchmarks share (sourced by gpu_train.sh and
# gpu_models_graph.sh, which set `py` and `out` first).

# Keeps a command's JSON lines: appended to $out and echoed.
keep() { grep '^{' | tee -a "$out"; }

# resnet's and resnet_torch.py's per-step loss lines as {"framework": $1, "name": "resnet_loss",
# "precision": $2, "step", "value"}; warm-up steps are left out unless $3 = 1 (--graph's eager
# steps and its capture are steps 1 and 2 of the 20).
resnet_losses() {
  "$py" -c 'import json, sys
for line in sys.stdin:
    if line.startswith("{"):
        r = json.loads(line)
        if "loss" in r and "step" in r and (sys.argv[3] == "1" or not r.get("warmup")):
            print(json.dumps({"framework": sys.argv[1], "name": "resnet_loss",
                              "precision": sys.argv[2], "step": r["step"], "value": r["loss"]}))
' "$1" "$2" "${3:-0}"
}
