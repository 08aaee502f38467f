#!/usr/bin/python3
"""ONNX's backend node tests against ember, through ember-onnx.

    tests/onnx_conformance/run.py BUILD [--filter REGEX] [--out DIR] [--batch N]

The node tests are those Debian's libonnx-testdata ships (written by python3-onnx 1.12): one
model per operator case, with inputs and expected outputs. For each test whose operators
ember-onnx lists as supported, ember-onnx generates C++ (a Model<B> and its record); the
generated models are compiled into runners (N tests per program, linked against BUILD's
libraries) that run every test data set and compare with ONNX's outputs (|got - want| <=
1e-5 + 1e-3·|want|, integers exactly). Writes OUT/results.json and prints the totals: all
tests, and those of opsets 13 to 17 (the acceptance figure), per operator.
"""
import argparse
import collections
import glob
import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import onnx

DATA = "/usr/share/libonnx-testdata/data/node"
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--filter", default="")
    ap.add_argument("--out", default=None)
    ap.add_argument("--batch", type=int, default=40)
    ap.add_argument("--jobs", type=int, default=os.cpu_count())
    ap.add_argument("--doc", default=None, help="Markdown file whose 'onnx-ops' section gets the table")
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    out = os.path.abspath(a.out or os.path.join(build, "onnx-conformance"))
    gen = os.path.join(out, "gen")
    os.makedirs(gen, exist_ok=True)
    tool = os.path.join(build, "ember-onnx")
    supported = set(subprocess.run([tool, "--list-ops"], capture_output=True, text=True,
                                   check=True).stdout.split())

    results = {}
    todo = []
    for d in sorted(glob.glob(os.path.join(DATA, "test_*"))):
        name = os.path.basename(d)
        if a.filter and not re.search(a.filter, name):
            continue
        m = onnx.load(os.path.join(d, "model.onnx"))
        opset = next((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")), 0)
        ops = sorted({n.op_type for n in m.graph.node})
        r = {"opset": opset, "ops": ops, "status": None, "why": ""}
        results[name] = r
        missing = [op for op in ops if op not in supported]
        if missing:
            r["status"] = "unsupported"
            r["why"] = "ops " + " ".join(missing)
            continue
        ident = "t_" + re.sub(r"\W", "_", name[5:])
        cmd = [tool, os.path.join(d, "model.onnx"), "--out", gen, "--name", ident, "--record-type",
               "Bin", "--meta"]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0 and re.search(r"must be (known|a constant|constants)", p.stderr):
            # Shapes, axes, index lists or bounds the test feeds as graph inputs: ember needs
            # them when it imports, so they are bound to the test's values (one data set only).
            sets = sorted(glob.glob(os.path.join(d, "test_data_set_*")))
            inputs = [i.name for i in m.graph.input
                      if i.name not in {t.name for t in m.graph.initializer}]
            # The first input too when binding the others is not enough (a window's size).
            for first in (1, 0):
                if len(sets) != 1:
                    break
                bind = []
                for k, iname in enumerate(inputs[first:], start=first):
                    bind += ["--bind", f"{iname}={sets[0]}/input_{k}.pb"]
                p = subprocess.run(cmd + bind, capture_output=True, text=True)
                if p.returncode == 0:
                    r["bound"] = True
                    break
        if p.returncode != 0:
            r["status"] = "import error"
            r["why"] = p.stderr.strip().splitlines()[-1] if p.stderr.strip() else "?"
            continue
        todo.append((name, ident, d))

    # Runners: N generated models per program.
    def runner_source(batch):
        lines = ['#include "runner.hpp"']
        for name, ident, d in batch:
            lines.append(f'#include "{ident}.hpp"')
        lines.append("namespace {\nusing namespace conformance;\nconst bool registered = [] {")
        for name, ident, d in batch:
            meta = [l.split() for l in open(os.path.join(gen, ident + ".meta"))]
            ins = [m for m in meta if m[0] == "input"]
            outs = [m for m in meta if m[0] == "output"]
            kinds = {"F": "ember::Float", "I": "ember::Int", "B": "ember::Bool"}
            body = [f'auto model = {ident}::Model<Cpu>::from_file("{gen}/{ident}.bin");',
                    'std::string why;']
            sets = sorted(glob.glob(os.path.join(d, "test_data_set_*")))
            for s in sets:
                args = ", ".join(f'input<{m[3]}, {kinds[m[2]]}>("{s}/input_{m[5]}.pb")'
                                 for m in ins)
                body.append("{")
                body.append(f"auto y = model.forward({args});")
                for k, mo in enumerate(outs):
                    got = "y" if len(outs) == 1 else f"std::get<{k}>(y)"
                    body.append(f'if (why.empty()) {{ why = compare({got}, "{s}/output_{mo[5]}.pb");'
                                f' if (!why.empty()) why = "output {k}: " + why; }}')
                body.append("}")
            body.append("return why;")
            lines.append(f'tests().emplace_back("{name}", [] {{ {" ".join(body)} }});')
        lines.append("return true;\n}();\n}  // namespace")
        lines.append("int main() { (void)registered; return conformance::run_all(); }")
        return "\n".join(lines) + "\n"

    batches = [todo[i:i + a.batch] for i in range(0, len(todo), a.batch)]
    libs = [os.path.join(build, f) for f in ("libember_onnx_import.a", "libember_cpu.a",
                                              "libember.a")]

    def build_and_run(k):
        batch = batches[k]
        src = os.path.join(out, f"runner_{k}.cpp")
        exe = os.path.join(out, f"runner_{k}")
        with open(src, "w") as f:
            f.write(runner_source(batch))
        cmd = ["ccache", "c++", "-std=c++20", "-O1", "-w", f"-I{ROOT}/include", f"-I{ROOT}/tools/onnx",
               f"-I{HERE}", f"-I{gen}", src, *libs, "-lonnx", "-lonnx_proto", "-lprotobuf", "-lopenblas", "-lz", "-lpthread", "-o", exe]
        c = subprocess.run(cmd, capture_output=True, text=True)
        if c.returncode != 0:
            # One model that does not compile must not sink the others: bisect.
            if len(batch) == 1:
                err = next((l for l in c.stderr.splitlines() if "error" in l), c.stderr[:300])
                return {batch[0][0]: ("compile error", err.strip())}
            mid = len(batch) // 2
            batches.append(batch[:mid])
            batches.append(batch[mid:])
            res = {}
            for part in (len(batches) - 2, len(batches) - 1):
                res.update(build_and_run(part))
            return res
        run = subprocess.run([exe], capture_output=True, text=True, timeout=600)
        res = {}
        for line in run.stdout.splitlines():
            status, _, rest = line.partition(" ")
            name, _, why = rest.partition(": ")
            res[name] = ("pass" if status == "PASS" else "fail", why)
        for name, _, _ in batch:
            res.setdefault(name, ("crash", run.stderr.strip()[-300:]))
        return res

    n = len(batches)
    with ThreadPoolExecutor(max_workers=a.jobs) as pool:
        for res in pool.map(build_and_run, range(n)):
            for name, (status, why) in res.items():
                results[name]["status"] = status
                results[name]["why"] = why

    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(results, f, indent=1, sort_keys=True)
    def totals(sel):
        c = collections.Counter(r["status"] for r in sel)
        return c
    all_ = list(results.values())
    target = [r for r in all_ if 13 <= r["opset"] <= 17]
    listed = [r for r in target if r["status"] != "unsupported"]
    print(f"node tests: {len(all_)}; opsets 13-17: {len(target)}")
    print(f"all: {dict(totals(all_))}")
    print(f"opsets 13-17 with supported ops: {len(listed)}: {dict(totals(listed))}")
    passed = sum(r["status"] == "pass" for r in listed)
    if listed:
        print(f"pass rate (opsets 13-17, supported ops): {passed}/{len(listed)} = "
              f"{100.0 * passed / len(listed):.1f}%")
    per_op = collections.defaultdict(collections.Counter)
    for r in all_:
        for op in r["ops"]:
            per_op[op][r["status"]] += 1
    with open(os.path.join(out, "per_op.json"), "w") as f:
        json.dump({k: dict(v) for k, v in sorted(per_op.items())}, f, indent=1)
    if a.doc:
        write_doc(a.doc, supported, per_op, all_, listed, passed)


def write_doc(path, supported, per_op, all_, listed, passed):
    """The operator table of docs/onnx-import.md, between its onnx-ops markers."""
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    from results_section import replace_section
    lines = ["<!-- onnx-ops:begin -->",
             f"Generated by `tests/onnx_conformance/run.py` from ONNX's node tests (libonnx-testdata,"
             f" ONNX 1.12). Of the {len(listed)} node tests of opsets 13–17 whose operators are all"
             f" supported, **{passed} pass** ({100.0 * passed / max(1, len(listed)):.1f}%). A test counts"
             f" for every operator its model uses.",
             "",
             "| operator | status | node tests passed |",
             "| --- | --- | ---: |"]
    ops = sorted(set(per_op) | supported)
    for op in ops:
        c = per_op.get(op, {})
        total = sum(v for k, v in c.items() if k != "unsupported")
        status = "supported" if op in supported else "not supported"
        shown = f"{c.get('pass', 0)} / {total}" if op in supported and total else "–"
        lines.append(f"| {op} | {status} | {shown} |")
    lines.append("<!-- onnx-ops:end -->")
    replace_section(path, "onnx-ops", "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
