#!/usr/bin/env bash
# Continuous control, native envs: Proxima against Stable-Baselines3's PPO with the same
# hyperparameters (the `paper-mujoco` preset = sb3_baseline.py's ppo/paper-mujoco: 1 env × 2048
# steps, 10 epochs, minibatch 64, lr 3e-4 annealed, obs + reward normalisation), same step
# budget, seeds 1-3, deterministic evaluation (Proxima: 100 episodes; SB3: 20, its script's).
#
# Usage: bench/continuous_vs_sb3.sh            env vars: STEPS (default 200000), SEEDS ("1 2 3"),
#        PYTHON (a python with stable-baselines3 + gymnasium; default python3), ENVS.
# Writes bench-results/continuous_vs_sb3.md.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p proxima-cli
steps=${STEPS:-200000}; seeds=${SEEDS:-1 2 3}; py=${PYTHON:-python3}
envs=${ENVS:-Pendulum-v1 MountainCarContinuous-v0}
out=bench-results; mkdir -p "$out/runs"; : > "$out/continuous.jsonl"
for env in $envs; do
  for seed in $seeds; do
    dir="$out/runs/${env}__paper-mujoco__${seed}"; rm -rf "$dir"
    "${CARGO_TARGET_DIR:-target}/release/proxima" train "$env" --preset paper-mujoco --seed "$seed" --total-timesteps "$steps" \
      --set eval_episodes=100 --run-dir "$dir" --quiet >&2
    python3 -c "import json,sys; e=json.load(open('$dir/eval.json')); print(json.dumps({'impl':'proxima','env':e['env_id'],'seed':e['seed'],'steps':e['global_step'],'train_seconds':e['train_seconds'],'sps':e['sps'],'eval_mean_return':e['mean_return'],'eval_std_return':e['std_return']}))" >> "$out/continuous.jsonl"
    "$py" ../shared/bench/sb3_baseline.py --algo ppo --config paper-mujoco --env "$env" --steps "$steps" --seeds "$seed" \
      | python3 -c "import json,sys; [print(json.dumps(dict(json.loads(l), impl='sb3'))) for l in sys.stdin if l.startswith('{')]" >> "$out/continuous.jsonl"
  done
done
python3 - "$out" <<'PY' | tee "$out/continuous_vs_sb3.md"
import json, sys
rows = [json.loads(l) for l in open(f"{sys.argv[1]}/continuous.jsonl")]
print("| env | seed | Proxima return | Proxima wall (s) / SPS | SB3 return | SB3 wall (s) / SPS |")
print("|---|---|---|---|---|---|")
for env in dict.fromkeys(r["env"] for r in rows):
    for seed in sorted({r["seed"] for r in rows if r["env"] == env}):
        p = next(r for r in rows if r["env"] == env and r["seed"] == seed and r["impl"] == "proxima")
        s = next((r for r in rows if r["env"] == env and r["seed"] == seed and r["impl"] == "sb3"), None)
        sb = f"{s['eval_mean_return']:.1f} ± {s['eval_std_return']:.1f} | {s['train_seconds']:.0f} / {s['sps']:.0f}" if s else "- | -"
        print(f"| {env} | {seed} | {p['eval_mean_return']:.1f} ± {p['eval_std_return']:.1f} | {p['train_seconds']:.0f} / {p['sps']:.0f} | {sb} |")
PY
