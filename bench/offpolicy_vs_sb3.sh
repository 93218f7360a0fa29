#!/usr/bin/env bash
# Issue 15: SAC and TD3 against Stable-Baselines3, side by side in one run, on Pendulum-v1 with
# rl-zoo's hyperparameters (bench/offpolicy_sb3.py lists them; the same values on our side), seeds
# 1-3, deterministic evaluation over 20 episodes on both sides, one thread each; the two sides run
# concurrently (2 cores), each one run at a time.
# Usage: bench/offpolicy_vs_sb3.sh [sac|td3]   env: PYTHON (with stable-baselines3, gymnasium),
#        SEEDS ("1 2 3"), STEPS (20000)
# Writes bench-results/<algo>/{proxima,sb3}.jsonl and prints both.
set -euo pipefail
cd "$(dirname "$0")/.."
algo=${1:-sac}
cargo build --release -q -p proxima-cli
py=${PYTHON:-python3}; seeds=${SEEDS:-1 2 3}; steps=${STEPS:-20000}
case $algo in
  sac) sets=(--set learning_rate=1e-3) ;;
  td3) sets=(--set gamma=0.98 --set buffer_size=200000 --set learning_starts=10000 --set noise_std=0.1
             --set learning_rate=1e-3 --set "net_arch=[400, 300]") ;;
  *) echo "usage: $0 [sac|td3]" >&2; exit 2 ;;
esac
out=bench-results/$algo; mkdir -p "$out/runs"; : > "$out/proxima.jsonl"
uptime
$py bench/offpolicy_sb3.py --algo "$algo" --env Pendulum-v1 --steps "$steps" --seeds $seeds > "$out/sb3.jsonl" &
sb3=$!
for s in $seeds; do
  d="$out/runs/Pendulum-v1__${algo}__$s"; rm -rf "$d"
  ./target/release/proxima train Pendulum-v1 --algo "$algo" --seed "$s" --total-timesteps "$steps" \
    "${sets[@]}" --set eval_episodes=20 --run-dir "$d" --quiet > /dev/null
  python3 -c "import json; e=json.load(open('$d/eval.json')); print(json.dumps({'impl':'proxima','algo':'$algo','env':e['env_id'],'seed':e['seed'],'steps':e['global_step'],'train_seconds':e['train_seconds'],'sps':e['sps'],'eval_mean_return':e['mean_return'],'eval_std_return':e['std_return']}))" >> "$out/proxima.jsonl"
done
wait $sb3
uptime
cat "$out/proxima.jsonl" "$out/sb3.jsonl"
