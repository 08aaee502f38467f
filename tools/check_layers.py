#!/usr/bin/env python3
"""Checks every #include in the library against DESIGN.md's layers (run by CTest as `layers`).

DESIGN.md ("Layout") lists ember's layers in order, each depending only on those before it:

    1. tensor (...) 2. backends · 3. decorators (autodiff, fusion) · 4. module/config/record, ...

This script reads that list (the layer names and their order) and fails on any include of a
file in a later layer than the including file's. Which folders and files form each named layer
is the table LAYER_OF below; a name the table uses that DESIGN.md no longer lists is an error,
so the two cannot drift apart silently.

The list is read from the first of: $EMBER_DESIGN_MD, ../shared/DESIGN.md beside the checkout
(CI and the main checkout), ../shared beside the main checkout of a git worktree, and the
committed copy tools/layers.md (kept for checkouts without the shared docs).

Usage: check_layers.py [--repo DIR] [--design FILE] [--list]
"""
import argparse
import os
import re
import subprocess
import sys

# Files and folders (relative to the repository) → the DESIGN.md layer name they belong to.
# Longest match wins. Umbrella headers (ember.hpp, nn.hpp, ...) gather layers for users and are
# not checked; nor are tests, examples, benchmarks and fuzz targets, which sit above everything.
LAYER_OF = {
    "include/ember/tensor/": "tensor",
    "include/ember/detail/": "tensor",
    # The quantized tensor API over the quantized primitive (tensor/quant_primitive.hpp).
    "include/ember/quant/tensor.hpp": "tensor",
    "src/autocast.cpp": "tensor",
    "src/error.cpp": "tensor",
    "src/shape.cpp": "tensor",
    "src/check.cpp": "tensor",
    "src/data.cpp": "tensor",
    "src/display.cpp": "tensor",
    "src/fusion_program.cpp": "tensor",
    "include/ember/backend/": "backends",
    "backends/": "backends",
    "include/ember/autodiff/": "decorators",
    "include/ember/fusion/": "decorators",
    # The decorator stacks the libraries instantiate once (extern templates).
    "include/ember/stacks.hpp": "decorators",
    "include/ember/stacks/": "decorators",
    "src/stacks/": "decorators",
    # Whole-step CUDA graph capture over the CUDA stacks (include/ember/stacks/cuda_graph.hpp),
    # compiled into ember_cuda beside the backend's private stream code.
    "backends/cuda/graph.cpp": "decorators",
    # The same for Vulkan (include/ember/stacks/vulkan_graph.hpp), compiled into ember_vulkan.
    "backends/vulkan/graph.cpp": "decorators",
    # The members of the CapturedStep both graph.cpp files instantiate (stacks/step_graph.hpp).
    "backends/common/captured_step.hpp": "decorators",
    "include/ember/module/": "module",
    # Quantized parameters and the quantized layers' forwards, beside the other parameters.
    "include/ember/quant/param.hpp": "module",
    "include/ember/record/": "record",
    "src/record/": "record",
    "src/module/": "config",
    "include/ember/nn/": "nn",
    "include/ember/optim/": "optim",
    "include/ember/data/": "data",
    "src/data/": "data",
    "include/ember/train/": "train",
    "src/train/": "train",
    "include/ember/collective/": "collective",
    "src/collective/": "collective",
    # The collective layer's NCCL endpoint, built beside the CUDA backend for its runtime.
    "backends/cuda/nccl/": "collective",
    "include/ember/import/": "import",
    "tools/onnx/": "import",
    "include/ember/quant/module.hpp": "module quantization",
}
UMBRELLAS = {"include/ember/ember.hpp", "include/ember/nn.hpp", "include/ember/optim.hpp",
             "include/ember/record.hpp", "include/ember/data.hpp"}
SOURCE_ENDINGS = (".hpp", ".h", ".cpp", ".cc", ".cu", ".cuh", ".inl")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)
START = "Layers, each depending only on those before it:"


def find_design(repo, explicit):
    """The file holding the layer list, and a note of where it came from."""
    candidates = []
    if explicit:
        candidates.append(explicit)
    if os.environ.get("EMBER_DESIGN_MD"):
        candidates.append(os.environ["EMBER_DESIGN_MD"])
    candidates.append(os.path.join(repo, "..", "shared", "DESIGN.md"))
    try:  # a git worktree: the shared docs sit beside the main checkout
        common = subprocess.run(["git", "-C", repo, "rev-parse", "--git-common-dir"],
                                capture_output=True, text=True, check=True).stdout.strip()
        common = os.path.join(repo, common) if not os.path.isabs(common) else common
        candidates.append(os.path.join(os.path.dirname(os.path.abspath(common)), "..", "shared",
                                       "DESIGN.md"))
    except (OSError, subprocess.CalledProcessError):
        pass
    for c in candidates:
        if os.path.isfile(c):
            text = open(c, encoding="utf-8").read()
            if START in text:
                return text, os.path.normpath(c)
    copy = os.path.join(repo, "tools", "layers.md")
    return open(copy, encoding="utf-8").read(), copy + " (the committed copy)"


def parse_layers(text):
    """DESIGN.md's layer list → {name: position}, positions from 1."""
    start = text.index(START) + len(START)
    block = []
    for line in text[start:].splitlines()[1:]:
        if not line.strip() or line.startswith("A tools script") or line.startswith("#"):
            break
        block.append(line.strip())
    body = " ".join(block)
    while True:  # drop parenthesised remarks, innermost first
        stripped = re.sub(r"\([^()]*\)", "", body)
        if stripped == body:
            break
        body = stripped
    layers = {}
    for number, names in re.findall(r"(\d+)\.\s+(.*?)(?=\s*(?:·\s*)?\d+\.\s|$)", body):
        for name in re.split(r"[,/]", names):
            name = name.strip(" .·")
            if name:
                layers[name] = int(number)
    if not layers:
        raise SystemExit("check_layers: no layers found after '%s'" % START)
    return layers


def layer_of(path):
    """The layer name of a repository path (None: not checked)."""
    if path in UMBRELLAS:
        return None
    best = None
    for prefix, name in LAYER_OF.items():
        if path == prefix or (prefix.endswith("/") and path.startswith(prefix)):
            if best is None or len(prefix) > len(best[0]):
                best = (prefix, name)
    return best[1] if best else None


def tracked_files(repo):
    try:
        out = subprocess.run(["git", "-C", repo, "ls-files", "-co", "--exclude-standard"],
                             capture_output=True, text=True, check=True).stdout.split("\n")
        return [f for f in out if f.endswith(SOURCE_ENDINGS) and os.path.isfile(os.path.join(repo, f))]
    except (OSError, subprocess.CalledProcessError):
        files = []
        for top in ("include", "src", "backends", "tools"):
            for d, _, names in os.walk(os.path.join(repo, top)):
                files += [os.path.relpath(os.path.join(d, n), repo) for n in names
                          if n.endswith(SOURCE_ENDINGS)]
        return files


def resolve(repo, src, kind, target):
    """The repository path an include names, or None for headers outside the repository."""
    tries = []
    if kind == '"':
        tries.append(os.path.join(os.path.dirname(src), target))
    tries.append(os.path.join("include", target))
    if src.startswith("backends/"):  # the backends' include paths: their own folder
        tries.append(os.path.join("/".join(src.split("/")[:2]), target))
    for t in tries:
        p = os.path.normpath(t)
        if not p.startswith("..") and os.path.isfile(os.path.join(repo, p)):
            return p
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repo", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    ap.add_argument("--design", help="the DESIGN.md to read the layer list from")
    ap.add_argument("--list", action="store_true", help="print the layers and each file's layer")
    args = ap.parse_args()
    repo = os.path.normpath(args.repo)
    text, source = find_design(repo, args.design)
    layers = parse_layers(text)
    missing = sorted({n for n in LAYER_OF.values() if n not in layers})
    if missing:
        print("check_layers: DESIGN.md (%s) no longer lists %s; update LAYER_OF in %s" %
              (source, ", ".join(missing), os.path.relpath(__file__, repo)))
        return 1
    print("check_layers: layers from %s: %s" %
          (source, " · ".join("%d %s" % (v, k) for k, v in sorted(layers.items(), key=lambda x: x[1]))))
    errors = []
    checked = 0
    for src in sorted(tracked_files(repo)):
        own = layer_of(src)
        if own is None:
            continue
        checked += 1
        if args.list:
            print("  %-60s %d %s" % (src, layers[own], own))
        text = open(os.path.join(repo, src), encoding="utf-8", errors="replace").read()
        for m in INCLUDE.finditer(text):
            dst = resolve(repo, src, m.group(1), m.group(2))
            other = layer_of(dst) if dst else None
            if other is None:
                continue
            if layers[other] > layers[own]:
                line = text.count("\n", 0, m.start()) + 1
                errors.append("%s:%d: %s (layer %d %s) includes %s (layer %d %s)" %
                              (src, line, src, layers[own], own, dst, layers[other], other))
    for e in errors:
        print(e)
    print("check_layers: %d files checked, %d forbidden includes" % (checked, len(errors)))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
