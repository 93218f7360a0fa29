#!/usr/bin/env python3
"""Checks the documentation's references (Python 3 standard library only).

In README.md, CHANGELOG.md and docs/**/*.md:
- every relative Markdown link or image, `[text](path)` or `[text](path#anchor)`, names a file or
  folder that exists, and an anchor names a heading of the target Markdown file (GitHub's slugs);
- every repository path named in inline code (or as a word of a fenced code block), such as
  `crates/proxima/tests/golden.rs`, `bench/perf.sh` or `.ci/run`, exists. A path counts when it
  starts with one of the top-level folders below or is a top-level file; placeholders, globs and
  paths outside the checkout (`runs/…`, `../shared/…`, `bench-results/…`) are not checked.

Prints each broken reference as `FILE:LINE: …` and exits 1, else prints one summary line.
Run from anywhere: `python3 .ci/check_docs.py`.
"""
import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
TOP_DIRS = ("crates/", "bench/", "docs/", "python/", "tests/", ".ci/")
TOP_FILES = {"Cargo.toml", "Cargo.lock", "pyproject.toml", "README.md", "CHANGELOG.md", "rustfmt.toml"}
PLACEHOLDER = re.compile(r"[*?<>{}$…\[\]|]|NNN|\.\.\.")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^\s*(```|~~~)")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")


def doc_files():
    files = [f for f in ("README.md", "CHANGELOG.md") if os.path.exists(os.path.join(ROOT, f))]
    for d, _, names in os.walk(os.path.join(ROOT, "docs")):
        for n in sorted(names):
            if n.endswith(".md"):
                files.append(os.path.relpath(os.path.join(d, n), ROOT))
    return sorted(files)


def slug(text):
    """GitHub's anchor for a heading: inline markup dropped, lower case, punctuation removed,
    spaces to hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # [t](u) -> t
    text = text.replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        seen, out, fenced = {}, set(), False
        with open(path, encoding="utf-8") as f:
            for line in f:
                if FENCE.match(line):
                    fenced = not fenced
                    continue
                m = None if fenced else re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line)
                if m:
                    s = slug(m.group(2))
                    n = seen.get(s, 0)
                    seen[s] = n + 1
                    out.add(s if n == 0 else f"{s}-{n}")
        cache[path] = out
    return cache[path]


def repo_path(token):
    """The repository path a word of inline code names, or None if it names none we check."""
    token = token.lstrip("\"'(").rstrip("\"'),;.:")
    token = re.sub(r":\d[\d\-]*$", "", token)  # file.rs:10-20
    if not token or "://" in token or PLACEHOLDER.search(token):
        return None
    if token in TOP_FILES or (token.startswith(TOP_DIRS) and "/" in token):
        return token
    return None


def check(rel, problems, counts):
    path = os.path.join(ROOT, rel)
    base = os.path.dirname(path)
    fenced = False
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    for no, line in enumerate(lines, 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            words = re.split(r"(?:^|\s)#", line, maxsplit=1)[0].split()  # a shell comment's words are prose
            for w in words:
                p = repo_path(w)
                if p:
                    counts["paths"] += 1
                    if not os.path.exists(os.path.join(ROOT, p)):
                        problems.append(f"{rel}:{no}: code block names `{p}`, which does not exist")
            continue
        spans = [m.group(2) for m in CODE_SPAN.finditer(line)]
        bare = CODE_SPAN.sub("", line)
        for m in LINK.finditer(bare):
            target = m.group(1)
            if re.match(r"^[a-z][a-z0-9+.\-]*:", target, re.I):  # http:, https:, mailto:
                continue
            counts["links"] += 1
            file_part, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(base, file_part)) if file_part else path
            if not os.path.exists(dest):
                problems.append(f"{rel}:{no}: link to `{target}`: no such file")
                continue
            if anchor and dest.endswith(".md") and anchor not in anchors(dest):
                problems.append(f"{rel}:{no}: link to `{target}`: no heading with anchor #{anchor} in {os.path.relpath(dest, ROOT)}")
        for span in spans:
            for w in span.split():
                p = repo_path(w)
                if p:
                    counts["paths"] += 1
                    if not os.path.exists(os.path.join(ROOT, p)):
                        problems.append(f"{rel}:{no}: `{p}` does not exist")


def main():
    problems, counts = [], {"links": 0, "paths": 0}
    files = doc_files()
    for rel in files:
        check(rel, problems, counts)
    for p in problems:
        print(p)
    if problems:
        print(f"check_docs: {len(problems)} broken reference(s)")
        return 1
    print(f"check_docs: {len(files)} files, {counts['links']} links and {counts['paths']} repository paths, all found")
    return 0


if __name__ == "__main__":
    sys.exit(main())
