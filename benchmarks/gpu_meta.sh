#!/usr/bin/env bash
# Prints the meta line a GPU benchmark's raw JSON file starts with: the date, the GPU and its
# driver, PyTorch's version and ember's commit (COMMIT, else the checkout's HEAD).
#   bash benchmarks/gpu_meta.sh > OUT.jsonl
# Environment: PYTHON (default python3), COMMIT.
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
py="${PYTHON:-python3}"
gpu="$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"
torch_version="$("$py" -c 'import torch; print(torch.__version__)' 2>/dev/null)"
commit="${COMMIT:-$(git -C "$here" rev-parse --short HEAD 2>/dev/null)}"
"$py" -c 'import json, sys, time
print(json.dumps({"meta": {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                           "gpu": sys.argv[1], "torch": sys.argv[2], "commit": sys.argv[3]}}))' \
  "${gpu:-unknown}" "${torch_version:-unknown}" "${commit:-unknown}"
