#!/usr/bin/env python3
"""The table of bench/lm_methods.sh: per method, mean ± std over its seeds of the held-out greedy
accuracy, sampled accuracy, KL(pi || pi_ref) per response (from each run's eval_vs_ref.json) and
training wall time (progress.csv's last `seconds`). Standard library only.

    lm_methods_table.py OUT_DIR
"""
import csv
import json
import os
import statistics
import sys

METHODS = [
    ("SFT, 160 steps (the start, pi_ref)", "sft"),
    ("DPO, beta 1 (600 steps of 64 pairs, Adam 3e-5)", "dpo-beta1-"),
    ("DPO, beta 0.1 (the paper's; same steps)", "dpo-beta0.1-"),
    ("RLHF-PPO against the reward model (200 steps x 256 responses, beta 0.1)", "ppo-"),
    ("GRPO on the exact-match reward (300 steps, 32 prompts x G=8, beta 0.04)", "grpo-"),
]


def measure(d):
    with open(os.path.join(d, "eval_vs_ref.json")) as f:
        e = json.load(f)
    with open(os.path.join(d, "progress.csv")) as f:
        rows = list(csv.DictReader(f))
    return e["held_out_accuracy"], e["held_out_sampled_accuracy"], e["kl_to_reference"], float(rows[-1]["seconds"])


def cell(xs, pct):
    m = statistics.mean(xs)
    s = statistics.pstdev(xs) if len(xs) > 1 else 0.0
    return f"{100 * m:.1f}% ± {100 * s:.1f}" if pct else f"{m:.3f} ± {s:.3f}"


def main(out):
    print("| method | seeds | held-out greedy accuracy | held-out sampled accuracy | KL to pi_ref per response (nats) | wall (s) |")
    print("|---|---|---|---|---|---|")
    for label, prefix in METHODS:
        dirs = sorted(d for d in os.listdir(out) if os.path.isdir(os.path.join(out, d)) and (d == prefix or (prefix.endswith("-") and d.startswith(prefix))))
        if not dirs:
            continue
        ms = [measure(os.path.join(out, d)) for d in dirs]
        cols = list(zip(*ms))
        print(f"| {label} | {len(dirs)} | {cell(cols[0], True)} | {cell(cols[1], True)} | {cell(cols[2], False)} | {statistics.mean(cols[3]):.0f} |")
    with open(os.path.join(out, "rm", "progress.csv")) as f:
        rm = list(csv.DictReader(f))[-1]
    print(f"\nThe reward model (and the pairs DPO trains on): held-out pairwise accuracy {100 * float(rm['held_out_pairwise_accuracy']):.1f}%.")
    print(f"Per-seed numbers: `{out}/<run>/eval_vs_ref.json`; curves: `{out}/<run>/progress.csv`.")


if __name__ == "__main__":
    main(sys.argv[1])
