#!/usr/bin/env bash
# The main-job benchmark: PPO with `--preset cleanrl` (500k steps) on CartPole-v1 and
# Acrobot-v1, seeds 1-5, one run at a time (one learner thread), each followed by a
# deterministic evaluation over 100 episodes. Prints a Markdown table
# (env, seed, mean return, wall time, SPS) and writes it to bench-results/classic_control.md.
#
# Usage: bench/classic_control.sh [ENV_ID ...]      (default: CartPole-v1 Acrobot-v1)
# Env vars: SEEDS="1 2 3 4 5", STEPS=500000.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
cargo build --release -q -p proxima-cli
envs=("$@"); [ ${#envs[@]} -gt 0 ] || envs=(CartPole-v1 Acrobot-v1)
seeds=${SEEDS:-1 2 3 4 5}
steps=${STEPS:-500000}
out=bench-results; mkdir -p "$out"
for env in "${envs[@]}"; do
  for seed in $seeds; do
    dir="$out/runs/${env}__cleanrl__${seed}"
    rm -rf "$dir"
    "${CARGO_TARGET_DIR:-target}/release/proxima" train "$env" --preset cleanrl --seed "$seed" --total-timesteps "$steps" \
      --set eval_episodes=100 --run-dir "$dir" --quiet >&2
  done
done
python3 - "$out" "${envs[@]}" <<'PY' | tee "$out/classic_control.md"
import json, sys, glob, os
out, envs = sys.argv[1], sys.argv[2:]
print("| env | seed | mean return (100 det. episodes) | wall time (s) | SPS |")
print("|---|---|---|---|---|")
for env in envs:
    for path in sorted(glob.glob(f"{out}/runs/{env}__cleanrl__*/eval.json"), key=lambda p: int(p.split("__")[-1].split("/")[0])):
        e = json.load(open(path))
        print(f"| {env} | {e['seed']} | {e['mean_return']:.1f} ± {e['std_return']:.1f} | {e['train_seconds']:.1f} | {e['sps']:.0f} |")
PY
