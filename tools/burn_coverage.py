#!/usr/bin/env python3
"""Writes docs/burn-coverage.md: each public name of Burn's API beside ember's equivalent.

Inputs (all committed):
  docs/coverage/burn-<version>-<category>.txt  Burn's names (tools/burn_names.py wrote them)
  docs/coverage/ember-map.tsv                  one row per name: category, Burn name, ember's
                                               equivalent (or `-`), and a note; tab-separated

A row is *covered* when it names an equivalent, *missing* when it does not and its note starts
with "not yet implemented" (ember means to have it), and *left out* when it does not and its
note says why the name has no place in ember.

usage: burn_coverage.py [--repo ROOT]           rewrites docs/burn-coverage.md
       burn_coverage.py [--repo ROOT] --check   fails (exit 1) when
         (a) a listed Burn name has no row in the map (or a row names no listed name),
         (b) a row has neither an equivalent nor a reason,
         (c) an equivalent names an identifier that does not occur in include/ember,
         (d) docs/burn-coverage.md is not what this script would write now;
       it also prints a hint (not a failure) for a row marked missing whose name ember now
       declares, so the map can follow ops that land elsewhere.
"""
import argparse
import pathlib
import re
import sys

VERSION = "0.21"
CATEGORIES = [
    ("tensor", "Tensor methods", "the methods of Burn's `Tensor` (`burn::tensor::Tensor`)"),
    ("tensor-fn", "Tensor functions and types", "the free functions of `burn::tensor` and of its "
     "`linalg`, `signal`, `grid`, `stats` and `loss` modules, and the types and traits beside "
     "`Tensor`"),
    ("activation", "Activation functions", "`burn::tensor::activation`"),
    ("module-op", "Module ops", "`burn::tensor::module`"),
    ("nn", "Layers", "the modules (and helper functions) of `burn::nn`"),
    ("loss", "Losses", "the loss modules of `burn::nn::loss` and its `Reduction`"),
    ("optimizer", "Optimizers", "`burn::optim`: optimizers, their configs, clipping, "
     "accumulation, weight decay and momentum"),
    ("lr-scheduler", "Learning-rate schedulers", "`burn::lr_scheduler`"),
    ("metric", "Metrics", "the metrics of `burn::train::metric`, with the perceptual ones "
     "(FID, LPIPS, DISTS)"),
]
MISSING = "not yet implemented"


def read_names(root, cat):
    path = root / "docs" / "coverage" / f"burn-{VERSION}-{cat}.txt"
    lines = path.read_text().splitlines()
    return [l.strip() for l in lines if l.strip() and not l.startswith("#")]


def read_map(root):
    """{(category, name): (equivalent, note, line number)} plus the problems found reading it."""
    rows, problems = {}, []
    path = root / "docs" / "coverage" / "ember-map.tsv"
    for no, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        cells = line.split("\t")
        if len(cells) != 4:
            problems.append(f"ember-map.tsv:{no}: {len(cells)} tab-separated cells, not 4")
            continue
        cat, name, eq, note = (c.strip() for c in cells)
        if (cat, name) in rows:
            problems.append(f"ember-map.tsv:{no}: a second row for {cat} {name}")
        rows[(cat, name)] = (eq, note, no)
    return rows, problems


def macro_names(text):
    """Identifiers token pasting makes: for `#define M(a, ...) ... a##_x ...`, every `M(n, ...)`
    call declares `n_x` too."""
    out = set()
    for m in re.finditer(r"#define\s+(\w+)\(([^)]*)\)((?:[^\n]*\\\n)*[^\n]*)", text):
        macro, params, body = m.group(1), [p.strip() for p in m.group(2).split(",")], m.group(3)
        pastes = re.findall(r"\b(\w+)\s*##\s*(\w+)", body)
        for call in re.finditer(rf"\b{macro}\(\s*(\w+)", text[m.end():]):
            for p, suffix in pastes:
                if params and p == params[0]:
                    out.add(call.group(1) + suffix)
    return out


def ember_identifiers(root):
    words, text_all = set(), []
    for f in sorted((root / "include" / "ember").rglob("*.hpp")):
        # Comments do not count: a name only mentioned there is not ember's API.
        text = re.sub(r"/\*.*?\*/", " ", f.read_text(errors="replace"), flags=re.S)
        text = re.sub(r"//[^\n]*", "", text)
        text_all.append(text)
        words.update(re.findall(r"[A-Za-z_]\w*", text))
    joined = "\n".join(text_all)
    return words | macro_names(joined)


def ember_declarations(root, sub=""):
    """Names include/ember/<sub> declares with a `///` doc comment (every public member has
    one): the function, type or macro-made method on the line after the comment."""
    out = set()
    for f in sorted((root / "include" / "ember" / sub).rglob("*.hpp")):
        lines = f.read_text(errors="replace").splitlines()
        for i, line in enumerate(lines[:-1]):
            if not line.strip().startswith("///") or lines[i + 1].strip().startswith("///"):
                continue
            j = i + 1
            while j < len(lines) and lines[j].strip().startswith(("template", "requires")):
                j += 1
            decl = lines[j] if j < len(lines) else ""
            m = (re.search(r"EMBER_\w+\(\s*([a-z_]\w*)\s*,", decl)
                 or re.search(r"(?:struct|class|concept|enum class|using)\s+([A-Za-z_]\w*)", decl)
                 or re.search(r"([A-Za-z_]\w*)\s*\(", decl))
            if m:
                out.add(m.group(1))
    return out


def symbols(eq):
    """The identifiers an equivalent names: `Tensor::sum_dim, nn::Linear` ->
    ['Tensor', 'sum_dim', 'nn', 'Linear']. Template arguments, call parentheses and operators
    are not checked."""
    out = []
    for part in eq.split(","):
        part = re.sub(r"<[^<>]*>", "", re.sub(r"<[^<>]*>", "", part))
        part = re.sub(r"\(.*", "", part).strip()
        part = part.split(" ")[0]
        out += [w for w in part.split("::") if w and not w.startswith("operator")]
    return [w for w in out if re.fullmatch(r"[A-Za-z_]\w*", w)]


def status(eq, note):
    if eq != "-":
        return "covered"
    if note.lower().startswith(MISSING):
        return "missing"
    return "left out"


def cell(s):
    return s.replace("|", "\\|")


def render(root, names, rows):
    out = [
        "# Burn coverage",
        "",
        f"Every public name of Burn v{VERSION}'s tensor, activation, module-op, layer, loss,",
        "optimizer, scheduler and metric API, with ember's equivalent or the reason there is none.",
        "A name is *covered* when ember has an equivalent (spelled as you write it in C++; Burn's",
        "snake-case names are kept wherever C++ allows), *left out* when it has no place in ember",
        "(the reason says why: mostly Rust-only mechanics), and *missing* when ember means to have",
        "it but does not yet.",
        "",
        "This page is generated: `python3 tools/burn_coverage.py` writes it from Burn's names in",
        f"`docs/coverage/burn-{VERSION}-*.txt` (extracted from Burn's sources by",
        "`tools/burn_names.py`; each file's header says from which revision and how) and from",
        "ember's side in `docs/coverage/ember-map.tsv`. The CTest entry `docs.burn_coverage` runs",
        "`tools/burn_coverage.py --check`, which fails when a Burn name has no row, a row has",
        "neither an equivalent nor a reason, an equivalent names an identifier that is not in",
        "`include/ember`, or this page is stale. To change a row, edit the map and rerun the",
        "script; when ember gains a missing name, its row changes with it (the check prints a hint",
        "for a row still marked missing whose name `include/ember` now declares).",
        "",
        "## Summary",
        "",
        "| Category | Burn names | Covered | Left out (with reason) | Missing |",
        "|---|---:|---:|---:|---:|",
    ]
    body, total = [], [0, 0, 0, 0]
    for cat, title, what in CATEGORIES:
        counts = {"covered": 0, "left out": 0, "missing": 0}
        table = [f"## {title}", "", f"Burn's names: {what}.", "", "| Burn | ember | Note |", "|---|---|---|"]
        for n in names[cat]:
            eq, note, _ = rows.get((cat, n), ("-", "", 0))
            st = status(eq, note)
            counts[st] += 1
            shown = f"`{cell(eq)}`" if eq != "-" else ("*missing*" if st == "missing" else "—")
            table.append(f"| `{cell(n)}` | {shown} | {cell(note)} |")
        c = [len(names[cat]), counts["covered"], counts["left out"], counts["missing"]]
        total = [a + b for a, b in zip(total, c)]
        out.append(f"| [{title}](#{title.lower().replace(' ', '-')}) | {c[0]} | {c[1]} | {c[2]} | {c[3]} |")
        body += table + [""]
    out.append(f"| **All** | {total[0]} | {total[1]} | {total[2]} | {total[3]} |")
    out.append("")
    return "\n".join(out + body).rstrip("\n") + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repo", type=pathlib.Path,
                    default=pathlib.Path(__file__).resolve().parent.parent)
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    root = a.repo
    names = {cat: read_names(root, cat) for cat, _, _ in CATEGORIES}
    rows, problems = read_map(root)
    page = root / "docs" / "burn-coverage.md"
    text = render(root, names, rows)
    if not a.check:
        tmp = page.with_suffix(".md.tmp")
        tmp.write_text(text)
        tmp.replace(page)
        print(f"wrote {page}")
        return 0

    listed = {(cat, n) for cat in names for n in names[cat]}
    for key in sorted(listed - rows.keys()):
        problems.append(f"(a) Burn's {key[0]} name {key[1]} has no row in ember-map.tsv")
    for key in sorted(rows.keys() - listed):
        problems.append(f"(a) ember-map.tsv:{rows[key][2]}: {key[0]} {key[1]} is not a listed Burn name")
    known = ember_identifiers(root)
    for (cat, n), (eq, note, no) in sorted(rows.items(), key=lambda kv: kv[1][2]):
        if eq in ("", "-") and not note:
            problems.append(f"(b) ember-map.tsv:{no}: {cat} {n} has neither an equivalent nor a reason")
        if eq not in ("", "-"):
            for w in symbols(eq):
                if w not in known:
                    problems.append(f"(c) ember-map.tsv:{no}: {cat} {n}: `{w}` (in `{eq}`) "
                                    "does not occur in include/ember")
        if eq == "":
            problems.append(f"(b) ember-map.tsv:{no}: {cat} {n}: write `-` for no equivalent")
    # Not a failure (other work lands ops without touching this map), but worth a look: a row
    # still marked missing whose name ember now declares (a call or a type of that name).
    decl = {"all": ember_declarations(root), "tensor": ember_declarations(root, "tensor")}
    for (cat, n), (eq, note, no) in sorted(rows.items(), key=lambda kv: kv[1][2]):
        where = decl["tensor" if cat.startswith("tensor") else "all"]
        if status(eq, note) == "missing" and n.split("::")[-1] in where:
            print(f"hint: ember-map.tsv:{no}: {cat} {n} is marked missing, but include/ember "
                  f"now declares `{n.split('::')[-1]}`: is it covered?")
    if not page.exists() or page.read_text() != text:
        problems.append("(d) docs/burn-coverage.md is stale: run python3 tools/burn_coverage.py")
    for p in problems:
        print(p)
    counted = sum(len(v) for v in names.values())
    print(f"burn_coverage: {counted} Burn names, {len(rows)} rows, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
