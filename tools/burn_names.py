#!/usr/bin/env python3
"""Lists the public names of Burn's API that docs/burn-coverage.md maps to ember.

Reads a Burn source tree (a checkout or `git archive` of tracel-ai/burn) and writes one plain
list per category under OUT_DIR (`burn-<version>-<category>.txt`, one name a line, a `#` header
saying where the names came from). Only names are taken, never code or doc text.

Categories and what counts:
  tensor      `pub fn` of the inherent `impl ... Tensor<...>` blocks in crates/burn-tensor/src/tensor
  tensor-fn   top-level `pub fn` of burn-tensor's linalg, signal, grid, stats and loss modules and
              of tensor/api (written `module::name`; api's are `burn::tensor::` functions), and
              the `pub struct`/`enum`/`trait` of tensor/api (Tensor, Transaction, ...)
  activation  top-level `pub fn` of burn-tensor's tensor/activation (burn::tensor::activation)
  module-op   top-level `pub fn` of burn-tensor's tensor/module.rs (burn::tensor::module)
  nn          `#[derive(Module)]` types of burn-nn's modules/ and activation/, and burn-nn's
              top-level `pub fn`
  loss        `#[derive(Module)]` types and top-level `pub fn` of burn-nn's loss/, and `Reduction`
  optimizer   `pub struct`/`enum`/`trait` of burn-optim's optim/ and grad_clipping/, except the
              per-parameter `*State` and the `*Record*` types (serialised optimizer state)
  lr-scheduler  the same for burn-optim's lr_scheduler/
  metric      every type with an `impl Metric for` in burn-train's metric/, and the perceptual
              metrics (the type beside its `<Name>Config` in a metric.rs: Fid, Lpips, Dists)

Code inside `mod tests` (or any `#[cfg(test)]` item) is skipped.

usage: burn_names.py BURN_TREE --rev LABEL [--version 0.21] [--out docs/coverage]
A tree from a clone: git -C burn archive v0.21.0 crates | tar -x -C /tmp/burn-0.21
(the committed lists came from tag v0.21.0, commit 546cacb55fe00168854d19bdf0a5d79bd8060e03).
"""
import argparse
import pathlib
import re
import sys

KEYWORD_FN = re.compile(r"\bfn\s+(\w+)")
PUB_FN = re.compile(r"(?:^|[\s}])pub\s+(?:const\s+)?(?:async\s+)?(?:unsafe\s+)?fn\s+(\w+)")
TYPE_DECL = re.compile(r"(?:^|\s)pub\s+(struct|enum|trait)\s+(\w+)")
TYPE_SEMI = re.compile(r"(?:^|\s)pub\s+struct\s+(\w+)\s*(?:<[^;]*>)?\s*(?:\(.*\))?\s*$", re.S)


def strip(text):
    """Blanks comments, string and char literals (keeping newlines) so braces can be counted."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "br" and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")) \
                and re.match(r'b?r#*"', text[i:i + 40]):
            m = re.match(r'b?r(#*)"', text[i:])
            end = text.find('"' + m.group(1), i + m.end())
            end = n if end < 0 else end + 1 + len(m.group(1))
            out.append('""' + re.sub(r"[^\n]", " ", text[i + 2:end]))
            i = end
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('""' + re.sub(r"[^\n]", " ", text[i + 1:j - 1] if j > i + 1 else ""))
            i = j + 1
        elif c == "'":
            m = re.match(r"'(\\u\{[0-9a-fA-F]+\}|\\x..|\\.|[^\\'])'", text[i:])
            if m:
                out.append("' '" + " " * (m.end() - 3))
                i += m.end()
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


ATTR = re.compile(r"#!?\[")


def split_attrs(header):
    """(attributes, rest) of an item header: the `#[...]` prefixes, bracket-balanced."""
    attrs = []
    rest = header.strip()
    while True:
        m = ATTR.match(rest)
        if not m:
            return attrs, rest
        depth, j = 0, m.end() - 1
        while j < len(rest):
            if rest[j] == "[":
                depth += 1
            elif rest[j] == "]":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        attrs.append(rest[:j + 1])
        rest = rest[j + 1:].strip()


def skip_generics(s):
    """s without a leading balanced `<...>`."""
    s = s.lstrip()
    if not s.startswith("<"):
        return s
    depth = 0
    for j, c in enumerate(s):
        if c == "<":
            depth += 1
        elif c == ">" and s[j - 1] != "-":
            depth -= 1
            if depth == 0:
                return s[j + 1:]
    return ""


def impl_target(rest):
    """(trait name or None, self type name) of an `impl` header."""
    body = skip_generics(rest[len("impl"):])
    body = re.split(r"\bwhere\b", body)[0]
    # A top-level ` for ` (outside <>) separates the trait from the self type.
    depth, cut = 0, None
    for m in re.finditer(r"[<>]|\bfor\b", body):
        t = m.group(0)
        if t == "<":
            depth += 1
        elif t == ">" and body[m.start() - 1] != "-":
            depth -= 1
        elif t == "for" and depth == 0:
            cut = m
            break
    last = lambda s: (re.findall(r"[A-Za-z_]\w*", re.split(r"<", s.strip())[0]) or [""])[-1]
    if cut is None:
        return None, last(body)
    return last(body[:cut.start()]), last(body[cut.end():])


def items(path):
    """Yields (kind, name, parents, attrs) for every fn/type/impl item of a Rust file.

    parents: the chain of enclosing frames, each ('impl', trait, type) / ('mod', name) /
    ('fn', name) / ('other',).
    """
    text = strip(path.read_text(encoding="utf-8", errors="replace"))
    stack = []
    start = 0
    paren = 0
    for i, c in enumerate(text):
        if c in "([":
            paren += 1
        elif c in ")]":
            paren -= 1
        elif c == ";" and paren == 0:
            attrs, rest = split_attrs(text[start:i])
            m = TYPE_SEMI.match(" " + rest)
            if m:
                yield "struct", m.group(1), list(stack), attrs
            start = i + 1
        elif c == "{" and paren == 0:
            attrs, rest = split_attrs(text[start:i])
            frame = ("other",)
            if re.match(r"(?:pub(?:\([^)]*\))?\s+)?(?:unsafe\s+)?impl\b", rest):
                trait, ty = impl_target(re.sub(r"^.*?\bimpl\b", "impl", rest, count=1, flags=re.S))
                frame = ("impl", trait, ty)
                yield "impl", ty, list(stack), attrs
            elif re.match(r"(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*$", rest):
                frame = ("mod", re.search(r"mod\s+(\w+)", rest).group(1))
            elif KEYWORD_FN.search(rest) and not re.search(r"=\s*|\bmacro_rules\b", rest.split("fn", 1)[0]):
                name = KEYWORD_FN.search(rest).group(1)
                frame = ("fn", name)
                if PUB_FN.search(" " + rest):
                    yield "fn", name, list(stack), attrs
            else:
                m = TYPE_DECL.search(" " + rest)
                if m and not rest.startswith(("let", "match", "if", "for", "while")):
                    yield m.group(1), m.group(2), list(stack), attrs
            if any("cfg(test)" in a for a in attrs):
                frame = ("mod", "tests")
            stack.append(frame)
            start = i + 1
        elif c == "}" and paren == 0:
            if stack:
                stack.pop()
            start = i + 1
    if stack:
        sys.exit(f"burn_names: unbalanced braces in {path}")


def in_tests(parents):
    return any(p[0] == "mod" and p[1] == "tests" for p in parents)


def rs_files(root, *parts):
    base = root.joinpath(*parts)
    if base.is_file():
        return [base]
    return sorted(p for p in base.rglob("*.rs") if "tests" not in p.relative_to(base).parts)


def top_fns(files):
    names = []
    for f in files:
        for kind, name, parents, _ in items(f):
            if kind == "fn" and not parents:
                names.append((f, name))
    return names


def module_types(files):
    """Types with #[derive(Module ...)] (structs and enums) at the top level."""
    out = []
    for f in files:
        for kind, name, parents, attrs in items(f):
            if kind in ("struct", "enum") and not parents:
                if any(re.search(r"derive\([^)]*\bModule\b", a) for a in attrs):
                    out.append(name)
    return out


def public_types(files, drop):
    out = []
    for f in files:
        for kind, name, parents, _ in items(f):
            if kind in ("struct", "enum", "trait") and not parents and not drop(name):
                out.append(name)
    return out


def collect(root):
    bt = root / "crates" / "burn-tensor" / "src" / "tensor"
    nn = root / "crates" / "burn-nn" / "src"
    opt = root / "crates" / "burn-optim" / "src"
    metric = root / "crates" / "burn-train" / "src" / "metric"
    cats = {}

    tensor = []
    for f in rs_files(bt):
        for kind, name, parents, _ in items(f):
            if kind == "fn" and len(parents) == 1 and parents[0][0] == "impl":
                _, trait, ty = parents[0]
                if trait is None and ty == "Tensor":
                    tensor.append(name)
    cats["tensor"] = tensor

    fns = []
    for sub in ("linalg", "signal", "grid", "stats", "loss"):
        fns += [f"{sub}::{n}" for _, n in top_fns(rs_files(bt, sub))]
    fns += [n for _, n in top_fns(rs_files(bt, "api"))]
    fns += public_types(rs_files(bt, "api"), lambda n: False)
    cats["tensor-fn"] = fns
    cats["activation"] = [n for _, n in top_fns(rs_files(bt, "activation"))]
    cats["module-op"] = [n for _, n in top_fns(rs_files(bt, "module.rs"))]

    layer_files = rs_files(nn, "modules") + rs_files(nn, "activation")
    cats["nn"] = module_types(layer_files) + [n for _, n in top_fns(layer_files + rs_files(nn, "padding.rs"))]
    loss_files = rs_files(nn, "loss")
    cats["loss"] = (module_types(loss_files) + [n for _, n in top_fns(loss_files)]
                    + [n for n in public_types(loss_files, lambda n: False) if n == "Reduction"])

    state = lambda n: n.endswith("State") or "Record" in n
    cats["optimizer"] = public_types(rs_files(opt, "optim") + rs_files(opt, "grad_clipping"), state)
    cats["lr-scheduler"] = public_types(rs_files(opt, "lr_scheduler"), state)

    metrics = []
    for f in rs_files(metric):
        text = strip(f.read_text(encoding="utf-8", errors="replace"))
        for m in re.finditer(r"\bimpl\b", text):
            header = text[m.start():text.find("{", m.start())]
            trait, ty = impl_target(header)
            if trait == "Metric":
                metrics.append(ty)
        # The perceptual metrics (FID, LPIPS, DISTS) are modules, not `Metric`s: the type beside
        # its `<Name>Config` in a metric.rs.
        if f.name == "metric.rs":
            types = public_types([f], lambda n: False)
            metrics += [t for t in types if t + "Config" in types]
    cats["metric"] = metrics
    return {k: sorted(set(v)) for k, v in cats.items()}


HOW = {
    "tensor": "pub fn of the inherent impl blocks of Tensor in crates/burn-tensor/src/tensor",
    "tensor-fn": "top-level pub fn of burn-tensor's tensor/{linalg,signal,grid,stats,loss} "
                 "(as module::name) and tensor/api (bare name); pub types of tensor/api",
    "activation": "top-level pub fn of crates/burn-tensor/src/tensor/activation (burn::tensor::activation)",
    "module-op": "top-level pub fn of crates/burn-tensor/src/tensor/module.rs (burn::tensor::module)",
    "nn": "#[derive(Module)] types of crates/burn-nn/src/{modules,activation} and burn-nn's top-level pub fn",
    "loss": "#[derive(Module)] types, top-level pub fn and the Reduction enum of crates/burn-nn/src/loss",
    "optimizer": "pub struct/enum/trait of crates/burn-optim/src/{optim,grad_clipping}, "
                 "without the *State and *Record* types (serialised per-parameter state)",
    "lr-scheduler": "pub struct/enum/trait of crates/burn-optim/src/lr_scheduler, without *State/*Record*",
    "metric": "types with `impl Metric for` in crates/burn-train/src/metric, and the types "
              "beside a <Name>Config in its metric.rs files (Fid, Lpips, Dists)",
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("tree", type=pathlib.Path, help="root of a Burn source tree")
    ap.add_argument("--rev", required=True, help="the tag and commit the tree is (for the header)")
    ap.add_argument("--version", default="0.21")
    ap.add_argument("--out", type=pathlib.Path,
                    default=pathlib.Path(__file__).resolve().parent.parent / "docs" / "coverage")
    a = ap.parse_args()
    cats = collect(a.tree)
    a.out.mkdir(parents=True, exist_ok=True)
    for cat, names in cats.items():
        if not names:
            sys.exit(f"burn_names: no names found for {cat}: is {a.tree} a Burn tree?")
        lines = [
            f"# Burn v{a.version} public names, category {cat}: {HOW[cat]}.",
            f"# Source: github.com/tracel-ai/burn at {a.rev}.",
            f"# Extracted by: python3 tools/burn_names.py BURN_TREE --rev '{a.rev}' --version {a.version}",
            "# Names only, sorted, one a line; ember's equivalents are in docs/coverage/ember-map.tsv.",
        ]
        path = a.out / f"burn-{a.version}-{cat}.txt"
        tmp = path.with_suffix(".tmp")
        tmp.write_text("\n".join(lines + names) + "\n")
        tmp.replace(path)
        print(f"{path}: {len(names)} names")


if __name__ == "__main__":
    main()
