#!/usr/bin/env bash
# MuJoCo through the Gymnasium bridge: --preset paper-mujoco (1 env, T 2048, 32 minibatches of
# 64, 10 epochs, lr 3e-4 annealed, obs + reward normalisation), 1M steps, deterministic
# evaluation over 10 episodes. CleanRL's published 1M-step means for ppo_continuous_action.py:
# HalfCheetah 1442, Hopper 2383, Walker2d 2288.
#
# Needs: cargo build --release -p proxima-cli --features gym; a Python with gymnasium[mujoco]
# in PROXIMA_PYTHON. Usage: SEEDS="1 2 3" STEPS=1000000 bench/mujoco.sh [ENV ...]
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p proxima-cli --features gym
envs=("$@"); [ ${#envs[@]} -gt 0 ] || envs=(HalfCheetah-v5 Hopper-v5 Walker2d-v5)
seeds=${SEEDS:-1 2 3}; steps=${STEPS:-1000000}
out=bench-results; mkdir -p "$out/runs"
for env in "${envs[@]}"; do
  for seed in $seeds; do
    dir="$out/runs/gym-${env}__paper-mujoco__${seed}"; rm -rf "$dir"
    "${CARGO_TARGET_DIR:-target}/release/proxima" train "gym:$env" --preset paper-mujoco --seed "$seed" --total-timesteps "$steps" \
      --run-dir "$dir" --quiet 2> >(grep -v -e '^WARNING' -e '^$' >&2)
  done
done
python3 - "$out" "${envs[@]}" <<'PY' | tee "$out/mujoco.md"
import json, sys, glob
out, envs = sys.argv[1], sys.argv[2:]
cleanrl = {"HalfCheetah-v5": 1442, "Hopper-v5": 2383, "Walker2d-v5": 2288}
print("| env | seed | Proxima return (10 det. episodes) | wall (s) | SPS | CleanRL 1M mean |")
print("|---|---|---|---|---|---|")
for env in envs:
    for p in sorted(glob.glob(f"{out}/runs/gym-{env}__paper-mujoco__*/eval.json")):
        e = json.load(open(p))
        print(f"| {env} | {e['seed']} | {e['mean_return']:.0f} ± {e['std_return']:.0f} | {e['train_seconds']:.0f} | {e['sps']:.0f} | {cleanrl.get(env, '-')} |")
PY
