#!/usr/bin/env python3
"""Compares two result trees of bench/same_results.sh, file by file (standard library only).

    same_results.py REF_DIR CUR_DIR      # prints one row per case, exits 1 if any result differs

Each case is a sub-directory present in both trees. In it:
  * every `*.safetensors` file: the same tensor names, dtypes and shapes, and the same bytes, tensor
    by tensor (weights and optimiser moments). The metadata is compared too (the trainer state
    without its wall-clock `time_elapsed`), but reported on its own: a changed layout of the
    metadata is not a changed result.
  * every `*.csv` (progress.csv, the ablation's results.csv): the same header and every column
    equal, except wall-clock columns (`time_elapsed`, `sps`, `seconds`); a cell not measured yet
    (`NaN` before issue 14, empty since) equals either spelling; a column the reference predates
    (`ent_coef`, issue 15) may follow the reference's columns when every cell of it is empty.
  * every `*.json` (eval.json, `eval --json` output, ...): the same keys and values, except wall-clock
    keys (`train_seconds`, `time_elapsed`, `sps`, `collect_seconds`, `update_seconds`, `seconds`) and `checkpoint`;
    the tree's own path inside strings (a run directory named in an lm config) reads `<tree>`.
  * every other file named `*.md`, `*.txt` or `*.toml` (config.toml): byte-equal.
The lines `backend = "candle"` and `vector_env = "off"`, and the lines of keys the reference's config does not
set at all (keys of later issues: `baseline`, `buffer_size`, `tau`, …), are dropped from configs (config.toml, a
checkpoint's `config` metadata) before comparing: keys a reference from before them cannot write (the
current binary runs with the first, bench/same_results.sh; the second is the default: bridged envs
stepped one by one, as before).
A case that holds a file named `SKIPPED` is reported as skipped with its reason.
"""
import csv
import json
import os
import struct
import sys

TIME_COLUMNS = {"time_elapsed", "sps", "seconds"}
NEW_COLUMNS = {"ent_coef"}
IGNORED_JSON_KEYS = {"checkpoint", "train_seconds", "time_elapsed", "sps", "collect_seconds", "update_seconds", "seconds"}


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    meta = header.pop("__metadata__", {}) or {}
    body = data[8 + n :]
    tensors = {}
    for name, t in header.items():
        a, b = t["data_offsets"]
        tensors[name] = (t["dtype"], tuple(t["shape"]), body[a:b])
    return tensors, meta


def max_abs_diff(dtype, x, y):
    if dtype not in ("F32", "F64") or len(x) != len(y):
        return None
    fmt, size = ("f", 4) if dtype == "F32" else ("d", 8)
    k = len(x) // size
    xs, ys = struct.unpack(f"<{k}{fmt}", x), struct.unpack(f"<{k}{fmt}", y)
    return max((abs(a - b) for a, b in zip(xs, ys)), default=0.0)


# Config lines a reference from before these keys cannot write: the backend the current binary is
# run with here and the default vector-env mode (bridged envs stepped one by one, as before).
NEW_KEY_LINES = {'backend = "candle"', 'vector_env = "off"'}


def key_of(line):
    """The key a config line sets (`tau = 0.005` → `tau`), or None."""
    k, eq, _ = line.partition(" = ")
    return k.strip() if eq and not line.startswith((" ", "#", "[")) else None


def without_keys_of_later_issues(ref_text, cur_text):
    """`cur_text` without the lines of keys `ref_text` does not set: keys added after the
    reference (REINFORCE's `baseline`, the off-policy algorithms' `buffer_size`, `tau`, …, issue
    15) hold their defaults in every configuration the reference could run, and read by no
    algorithm the reference has."""
    known = {key_of(l) for l in ref_text.splitlines()} - {None}
    lines = cur_text.splitlines(keepends=True)
    return "".join(l for l in lines if key_of(l) is None or key_of(l) in known)


def without_backend(text):
    """A config's text without the lines of keys the reference predates (NEW_KEY_LINES), and
    without `checkpoint_freq` (where checkpoints are written changes no result; the ablation's
    runs checkpoint every 10 updates since issue 14, so that an interrupted grid continues)."""
    lines = text.splitlines(keepends=True)
    return "".join(l for l in lines if l.strip() not in NEW_KEY_LINES and not l.startswith("checkpoint_freq = "))


def normalised_meta(meta):
    out = dict(meta)
    for key in ("config", "config_toml"):
        if key in out:
            out[key] = without_backend(out[key])
    if "trainer_state" in out:
        try:
            state = json.loads(out["trainer_state"])
            state.pop("time_elapsed", None)
            out["trainer_state"] = state
        except ValueError:
            pass
    return out


def compare_safetensors(a, b):
    """Returns (result differences, metadata differences)."""
    (ta, ma), (tb, mb) = read_safetensors(a), read_safetensors(b)
    diffs = []
    if set(ta) != set(tb):
        diffs.append(f"tensor names differ: only in ref {sorted(set(ta) - set(tb))}, only in new {sorted(set(tb) - set(ta))}")
    for name in sorted(set(ta) & set(tb)):
        (da, sa, xa), (db, sb, xb) = ta[name], tb[name]
        if (da, sa) != (db, sb):
            diffs.append(f"{name}: {da}{list(sa)} vs {db}{list(sb)}")
        elif xa != xb:
            d = max_abs_diff(da, xa, xb)
            diffs.append(f"{name}: max |diff| {d:.3g}" if d is not None else f"{name}: bytes differ")
    na, nb = normalised_meta(ma), normalised_meta(mb)
    for key in ("config", "config_toml"):
        if key in na and key in nb:
            nb[key] = without_keys_of_later_issues(na[key], nb[key])
    meta = [k for k in sorted(set(na) | set(nb)) if na.get(k) != nb.get(k)]
    return diffs, meta


def read_csv(path):
    with open(path, newline="") as f:
        rows = [r for r in csv.reader(f) if r]
    return rows[0], rows[1:]


def compare_csv(a, b):
    (ha, ra), (hb, rb) = read_csv(a), read_csv(b)
    # Columns the reference predates, appended at the end (progress.csv's `ent_coef`, SAC's α,
    # issue 15), count as the same result only when every cell of theirs is empty.
    extra = len(hb) - len(ha)
    if extra > 0 and hb[: len(ha)] == ha and all(h in NEW_COLUMNS for h in hb[len(ha) :]):
        if any(cell != "" for row in rb for cell in row[len(ha) :]):
            return [f"new columns {hb[len(ha):]} hold values"]
        hb, rb = hb[: len(ha)], [row[: len(ha)] for row in rb]
    if ha != hb:
        return [f"header differs: {ha} vs {hb}"]
    if len(ra) != len(rb):
        return [f"{len(ra)} rows vs {len(rb)}"]
    keep = [i for i, h in enumerate(ha) if h not in TIME_COLUMNS]
    diffs = []
    # "Not measured yet": the string NaN before issue 14, an empty cell since.
    missing = {"NaN", ""}
    for r, (x, y) in enumerate(zip(ra, rb)):
        for i in keep:
            if x[i] != y[i] and not (x[i] in missing and y[i] in missing):
                diffs.append(f"row {r + 1} `{ha[i]}`: {x[i]} vs {y[i]}")
    return diffs[:5] + ([f"... {len(diffs) - 5} more"] if len(diffs) > 5 else [])


def strip_json(v, root):
    """`v` without wall-clock keys, with the tree's own path `root` in strings replaced by `<tree>`."""
    if isinstance(v, dict):
        return {k: strip_json(x, root) for k, x in v.items() if k not in IGNORED_JSON_KEYS}
    if isinstance(v, list):
        return [strip_json(x, root) for x in v]
    if isinstance(v, str):
        return v.replace(root, "<tree>")
    return v


def compare_json(a, b, roots):
    with open(a) as f:
        ja = strip_json(json.load(f), roots[0])
    with open(b) as f:
        jb = strip_json(json.load(f), roots[1])
    if ja == jb:
        return []
    if isinstance(ja, dict) and isinstance(jb, dict):
        keys = [k for k in sorted(set(ja) | set(jb)) if ja.get(k) != jb.get(k)]
        return [f"`{k}`: {json.dumps(ja.get(k))[:80]} vs {json.dumps(jb.get(k))[:80]}" for k in keys]
    return ["contents differ"]


def compare_case(ref, cur, roots):
    """(verdict, details) for one case directory."""
    if os.path.exists(os.path.join(cur, "SKIPPED")) or os.path.exists(os.path.join(ref, "SKIPPED")):
        for d in (cur, ref):
            p = os.path.join(d, "SKIPPED")
            if os.path.exists(p):
                return "SKIPPED", [open(p).read().strip()], 0
    details, meta_notes, files = [], [], 0
    for root, _, names in os.walk(ref):
        for name in sorted(names):
            pa = os.path.join(root, name)
            rel = os.path.relpath(pa, ref)
            pb = os.path.join(cur, rel)
            kind = name.rsplit(".", 1)[-1]
            if kind not in ("safetensors", "csv", "json", "md", "txt", "toml"):
                continue
            if not os.path.exists(pb):
                details.append(f"{rel}: missing in the new tree")
                continue
            files += 1
            if kind == "safetensors":
                d, m = compare_safetensors(pa, pb)
                details += [f"{rel}: {x}" for x in d]
                meta_notes += [f"{rel}: metadata `{k}` differs" for k in m]
            elif kind == "csv":
                details += [f"{rel}: {x}" for x in compare_csv(pa, pb)]
            elif kind == "json":
                details += [f"{rel}: {x}" for x in compare_json(pa, pb, roots)]
            elif kind == "toml":
                ta, tb = open(pa).read(), open(pb).read()
                if without_backend(ta) != without_backend(without_keys_of_later_issues(ta, tb)):
                    details.append(f"{rel}: contents differ")
            elif open(pa, "rb").read() != open(pb, "rb").read():
                details.append(f"{rel}: contents differ")
    if files == 0:
        return "EMPTY", ["no result files in the reference"], 0
    return ("identical" if not details else "DIFFERENT"), details + meta_notes, files


def main():
    ref, cur = sys.argv[1], sys.argv[2]
    cases = sorted(d for d in os.listdir(ref) if os.path.isdir(os.path.join(ref, d)))
    missing = sorted(d for d in os.listdir(cur) if os.path.isdir(os.path.join(cur, d)) and d not in cases)
    counts = {}
    print(f"{'case':<44} {'files':>5}  result")
    for case in cases:
        verdict, details, files = compare_case(os.path.join(ref, case), os.path.join(cur, case), (ref, cur))
        counts[verdict] = counts.get(verdict, 0) + 1
        print(f"{case:<44} {files:>5}  {verdict}")
        for d in details[:8]:
            print(f"    {d}")
    for case in missing:
        print(f"{case:<44}     -  only in the new tree")
    bad = len(cases) - counts.get("identical", 0) - counts.get("SKIPPED", 0)
    print(f"\n{counts.get('identical', 0)} identical, {bad} different, {counts.get('SKIPPED', 0)} skipped, of {len(cases)} cases")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
