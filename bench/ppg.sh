#!/usr/bin/env bash
# Issue 15: PPG against PPO on the same budget and seeds, on two continuous envs: Pendulum-v1
# (native) and HalfCheetah-v5 (through the Gymnasium bridge). Both start from the `paper-mujoco`
# preset (1 env × 2048 steps, lr 3e-4 annealed, γ .99, λ .95, ε .2, observation and reward
# normalisation); PPO runs its K = 10 epochs of minibatches of 64, PPG its own defaults on top
# (Cobbe et al. 2021 / CleanRL's ppg_procgen.py: N_π 32, E_aux 6, β_clone 1, 4 rollouts per
# auxiliary minibatch) twice: with E_π = 10 (PPO's K: the same policy-phase work, plus the
# auxiliary phases) and with the paper's E_π = 1 (tuned for Procgen's 64 envs × 256 steps; with
# one env it takes a tenth of PPO's gradient steps). Deterministic evaluation over 20 episodes.
# One multi-seed run per (env, variant) with --seeds, one job at a time (each run one thread).
#
# Needs: a Python with gymnasium[mujoco] in PROXIMA_PYTHON for HalfCheetah.
# Usage: bench/ppg.sh [ENV ...]   env: SEEDS ("1-3"), PENDULUM_STEPS (200000), MUJOCO_STEPS (300000)
# Writes bench-results/ppg/<env>__<variant>/ (summary.md, learning_curves.png) and bench-results/ppg/ppg.md
# (the table of every env run so far).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p proxima-cli --features gym
envs=("$@"); [ ${#envs[@]} -gt 0 ] || envs=(Pendulum-v1 HalfCheetah-v5)
seeds=${SEEDS:-1-3}
out=bench-results/ppg; mkdir -p "$out"
uptime
for env in "${envs[@]}"; do
  if [ "$env" = Pendulum-v1 ]; then id=$env; steps=${PENDULUM_STEPS:-200000}; else id=gym:$env; steps=${MUJOCO_STEPS:-300000}; fi
  for variant in ppo ppg_e10 ppg_e1; do
    case $variant in
      ppo) sets=(--algo ppo) ;;
      ppg_e10) sets=(--algo ppg --set e_policy=10) ;;
      ppg_e1) sets=(--algo ppg --set e_policy=1) ;;
    esac
    dir="$out/${env}__$variant"; rm -rf "$dir"
    start=$(date +%s.%N)
    "${CARGO_TARGET_DIR:-target}/release/proxima" train "$id" "${sets[@]}" --preset paper-mujoco --seeds "$seeds" --jobs 1 \
      --total-timesteps "$steps" --set eval_episodes=20 --run-dir "$dir" --quiet 2> >(grep -v -e '^WARNING' -e '^$' >&2) > /dev/null
    echo "$env $variant: $(echo "$(date +%s.%N) - $start" | bc) s whole process" | tee "$dir/wall.txt"
  done
done
uptime
python3 - "$out" Pendulum-v1 HalfCheetah-v5 <<'PY' | tee "$out/ppg.md"
import csv, glob, json, statistics as st, sys
out, envs = sys.argv[1], sys.argv[2:]
names = {"ppo": "PPO (K 10)", "ppg_e10": "PPG (E_π 10)", "ppg_e1": "PPG (E_π 1, paper)"}
print("| env | algorithm | steps | return per seed (20 det. episodes) | mean ± std | train s per run (SPS) |")
print("|---|---|---|---|---|---|")
for env in envs:
    for algo in names:
        evals = [json.load(open(p)) for p in sorted(glob.glob(f"{out}/{env}__{algo}/*/eval.json"))]
        if not evals:
            continue
        r = [e["mean_return"] for e in evals]
        secs = [e["train_seconds"] for e in evals]
        sps = [e["sps"] for e in evals]
        per = ", ".join(f"{x:.1f}" for x in r)
        sd = st.stdev(r) if len(r) > 1 else 0.0
        print(f"| {env} | {names[algo]} | {evals[0]['global_step']} | {per} | {st.mean(r):.1f} ± {sd:.1f} | {st.mean(secs):.0f} ({st.mean(sps):.0f}) |")
PY
