#!/usr/bin/env python3
"""The house's edges, checked: no import circle between modules, no module of `proxima` importing
one on a layer above its own (the layer table of docs/architecture.md), and no function over 80
lines outside tests unless it is named below with its reason.

    python3 .ci/check_modules.py        # prints what it checked; exit 1 with each violation

A module is a source file (`a/b.rs` or `a/b/mod.rs` is `a::b`); it imports what its `crate::…`,
`super::…` and `self::…` paths name, in `use` lines and inline, outside `#[cfg(test)]` blocks.
`mod.rs` and `lib.rs` files only declare their children and re-export them, so they are skipped.
Standard library only.
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_LINES = 80
# Functions allowed over MAX_LINES, with the reason (file, function name).
LONG_FUNCTIONS = {
    ("crates/proxima/src/config/presets.rs", "cleanrl"):
        "the base preset: one struct literal with every config key's value, a table rather than logic",
}


def module_of(crate_src, path):
    rel = os.path.relpath(path, crate_src)[:-3].split(os.sep)
    if rel[-1] == "mod":
        rel = rel[:-1]
    return rel


def item_end(text, start):
    """The end of the braced body of the item whose header ends at `start` (its braces matched), or
    None when a `;` comes first (a declaration without a body)."""
    j, semi = text.find("{", start), text.find(";", start)
    if j < 0 or (0 <= semi < j):
        return None
    depth, k = 0, j
    while k < len(text):
        depth += {"{": 1, "}": -1}.get(text[k], 0)
        k += 1
        if depth == 0:
            break
    return k


def strip_tests(text):
    """The text without `#[cfg(test)]` items (their braces matched) and without comments."""
    text = re.sub(r"//[^\n]*", "", text)
    out, i = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]", text):
        if m.start() < i:
            continue
        out.append(text[i:m.start()])
        end = item_end(text, m.end())
        i = end if end is not None else text.find(";", m.end()) + 1
    out.append(text[i:])
    return "".join(out)


def imports(mod, text, modules):
    """The modules (as tuples) that `mod` names, resolved to the longest existing module path."""
    found = set()
    for m in re.finditer(r"\b(crate|super|self)((?:::\s*[A-Za-z_][A-Za-z0-9_]*)+)", text):
        head, rest = m.group(1), [p.strip() for p in m.group(2).split("::")[1:]]
        base = [] if head == "crate" else (mod[:-1] if head == "super" else list(mod))
        path = base + rest
        while path and tuple(path) not in modules:
            path = path[:-1]
        if path and tuple(path) != tuple(mod):
            found.add(tuple(path))
    # `use crate::x::{a, b::c}` groups: each name inside may be a module.
    for m in re.finditer(r"\buse\s+(crate|super|self)((?:::[A-Za-z_0-9]+)*)::\{([^;]*)\};", text, re.S):
        head, prefix = m.group(1), [p for p in m.group(2).split("::") if p]
        base = [] if head == "crate" else (mod[:-1] if head == "super" else list(mod))
        for item in re.split(r"[,\s{}]+", m.group(3)):
            for part in [item.split("::")]:
                path = base + prefix + [p for p in part if p and p != "self"]
                while path and tuple(path) not in modules:
                    path = path[:-1]
                if path and tuple(path) != tuple(mod):
                    found.add(tuple(path))
    return found


def cycles(graph):
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in list(graph):
        if v not in index:
            visit(v)
    return out


def layers():
    """Module path → layer, from docs/architecture.md's table of `proxima`'s modules."""
    text = open(os.path.join(ROOT, "docs", "architecture.md"), encoding="utf-8").read()
    table = text.split("## Modules of `proxima`", 1)[1].split("\n## ", 1)[0]
    out = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 2 or not cells[0].isdigit():
            continue
        cell = re.sub(r"\([^)]*\)", "", cells[1])  # the files in parentheses are not modules
        for name in re.findall(r"`([a-z_:]+)`", cell):
            out[tuple(name.split("::"))] = int(cells[0])
    return out


def layer_of(mod, table):
    for n in range(len(mod), 0, -1):
        if tuple(mod[:n]) in table:
            return table[tuple(mod[:n])]
    return None


def long_functions(path, text):
    """(name, lines) of every fn longer than MAX_LINES outside #[cfg(test)] blocks."""
    body = strip_tests(text)
    out = []
    for m in re.finditer(r"\bfn\s+([A-Za-z_][A-Za-z0-9_]*)", body):
        k = item_end(body, m.end())
        if k is None:
            continue
        n = body.count("\n", m.start(), k) + 1
        if n > MAX_LINES:
            out.append((m.group(1), n))
    return out


def main():
    problems, checked, fns = [], 0, 0
    table = layers()
    crates = os.path.join(ROOT, "crates")
    for crate in sorted(os.listdir(crates)):
        src = os.path.join(crates, crate, "src")
        if not os.path.isdir(src):
            continue
        files = {}
        for d, _, names in os.walk(src):
            for n in names:
                if n.endswith(".rs"):
                    p = os.path.join(d, n)
                    files[tuple(module_of(src, p))] = p
        modules = set(files)
        graph = {}
        for mod, p in files.items():
            text = open(p, encoding="utf-8").read()
            for name, n in long_functions(p, text):
                rel = os.path.relpath(p, ROOT)
                fns += 1
                if (rel, name) not in LONG_FUNCTIONS:
                    problems.append(f"{rel}: fn {name} is {n} lines (over {MAX_LINES}; split it, or name it in LONG_FUNCTIONS with its reason)")
            if os.path.basename(p) in ("mod.rs", "lib.rs", "main.rs"):
                continue
            deps = {d for d in imports(list(mod), strip_tests(text), modules) if files.get(d, "").endswith(".rs")}
            deps = {d for d in deps if os.path.basename(files[d]) not in ("mod.rs", "lib.rs")}
            graph[mod] = deps
            checked += 1
            if crate == "proxima":
                mine = layer_of(mod, table)
                if mine is None:
                    problems.append(f"{os.path.relpath(p, ROOT)}: module `{'::'.join(mod)}` has no layer in docs/architecture.md")
                    continue
                for d in sorted(deps):
                    theirs = layer_of(d, table)
                    if theirs is not None and theirs > mine:
                        problems.append(
                            f"{os.path.relpath(p, ROOT)}: `{'::'.join(mod)}` (layer {mine}) imports `{'::'.join(d)}` (layer {theirs}, above it)"
                        )
        for comp in cycles(graph):
            problems.append(f"crates/{crate}: import circle between " + ", ".join("`" + "::".join(c) + "`" for c in comp))
    for p in problems:
        print(p)
    print(f"check_modules: {checked} modules, {len(problems)} problem(s); functions over {MAX_LINES} lines allowed by name: {len(LONG_FUNCTIONS)}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
