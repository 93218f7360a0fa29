"""Summarises bench/lm.sh's runs (bench-results/lm/<run>/progress.csv) as Markdown tables."""
import csv
import os
import sys

out = sys.argv[1]


def rows(name):
    path = os.path.join(out, name, "progress.csv")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [{k: float(v) for k, v in r.items()} for r in csv.DictReader(f)]


def f(x, nd=3):
    return "–" if x != x else f"{x:.{nd}f}"


print("| run | held-out greedy accuracy: start → end (best) | first step ≥ 0.90 | mean per-token KL to π_ref at end | wall (s) |")
print("|---|---|---|---|---|")
for name, kl_col in [("grpo", "kl_k3"), ("grpo-shuffled", "kl_k3"), ("grpo-beta1", "kl_k3"),
                     ("ppo", "kl_per_token"), ("ppo-adaptive-kl", "kl_per_token"),
                     ("ppo-verifiable", "kl_per_token")]:
    r = rows(name)
    if not r:
        continue
    acc = [x["held_out_accuracy"] for x in r]
    first = next((int(x["step"]) for x in r if x["held_out_accuracy"] >= 0.9), None)
    print(f"| {name} | {f(acc[0])} → {f(acc[-1])} ({f(max(acc))}) | {first if first is not None else 'never'} "
          f"| {f(r[-1][kl_col], 4)} ({kl_col}) | {r[-1]['seconds']:.0f} |")

print("\n(For ppo-verifiable the score is the exact-match reward itself.)")

for name in ["sft", "sft-full"]:
    r = rows(name)
    if r:
        print(f"\n{name}: {int(r[-1]['step'])} steps, held-out greedy accuracy {f(r[-1]['held_out_accuracy'])}, "
              f"sampled (temperature 1) {f(r[-1]['sampled_accuracy'])}, {r[-1]['seconds']:.0f} s")
r = rows("rm")
if r:
    x = r[-1]
    print(f"\nrm: {int(x['step'])} steps, held-out pairwise accuracy {f(x['held_out_pairwise_accuracy'])} "
          f"(train {f(x['train_pairwise_accuracy'])}), {x['seconds']:.0f} s")

for name in ["ppo", "ppo-adaptive-kl", "ppo-verifiable"]:
    r = rows(name)
    if not r:
        continue
    print(f"\n{name} curve (every 10th logged row):\n")
    print("| step | score of held-out samples | held-out sampled accuracy | held-out greedy accuracy | KL per token | KL per response | β |")
    print("|---|---|---|---|---|---|---|")
    for x in r[::max(1, len(r) // 10)] + ([r[-1]] if (len(r) - 1) % max(1, len(r) // 10) else []):
        print(f"| {int(x['step'])} | {f(x['held_out_score'])} | {f(x['held_out_sampled_accuracy'])} | {f(x['held_out_accuracy'])} "
              f"| {f(x['kl_per_token'], 4)} | {f(x['kl_per_response'], 4)} | {f(x['kl_coef'], 4)} |")
