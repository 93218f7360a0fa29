#!/usr/bin/env bash
# Recurrent PPO against sb3-contrib's RecurrentPPO, side by side in one run, on CartPole-v1 with its
# velocities hidden (toy/CartPoleNoVel-v1, crates/proxima-gym/tests/toy_envs.py; rl-zoo's
# CartPoleNoVel-v1), the same settings on both sides: MlpLstmPolicy with a 64-unit LSTM and a
# 64-unit MLP, 8 envs, n_steps 32, one minibatch of 256 (all 8 sequences), 10 epochs, lr 1e-3,
# gamma 0.98, gae_lambda 0.8, no entropy bonus; one thread each, the two sides concurrently
# (2 cores); deterministic evaluation over 20 episodes carrying the state.
# Usage: bench/recurrent_vs_sb3_contrib.sh    env: PYTHON (with sb3-contrib, gymnasium), SEEDS ("1 2 3"),
#        STEPS (100000)
# Writes bench-results/recurrent-CartPoleNoVel/{proxima,sb3_contrib}.jsonl and prints both.
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}; seeds=${SEEDS:-1 2 3}; steps=${STEPS:-100000}
export PROXIMA_PYTHON=${PROXIMA_PYTHON:-$py} PYTHONPATH=$PWD/crates/proxima-gym/tests${PYTHONPATH:+:$PYTHONPATH}
cargo build --release -q -p proxima-cli --features gym
out=bench-results/recurrent-CartPoleNoVel
mkdir -p "$out/runs"; : > "$out/proxima.jsonl"
uptime; date
$py bench/recurrent_sb3_contrib.py --steps "$steps" --seeds $seeds > "$out/sb3_contrib.jsonl" & other=$!
for s in $seeds; do
  d="$out/runs/seed$s"; rm -rf "$d"
  ( time ./target/release/proxima train gym:toy_envs:toy/CartPoleNoVel-v1 --preset sb3 --seed "$s" \
    --total-timesteps "$steps" --set policy=MlpLstmPolicy --set n_envs=8 --set n_steps=32 --set batch_size=256 \
    --set learning_rate=1e-3 --set gamma=0.98 --set gae_lambda=0.8 --set lstm_hidden_size=64 \
    --set "net_arch=[64]" --set eval_episodes=20 --run-dir "$d" --quiet > /dev/null )
  python3 - "$d" "$s" "$steps" >> "$out/proxima.jsonl" <<'PY'
import json, sys
d, seed, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
e = json.load(open(f"{d}/eval.json"))
print(json.dumps({"impl": "proxima", "seed": seed, "steps": steps, "train_seconds": e["train_seconds"],
                  "sps": e["sps"], "eval_mean_return": e["mean_return"], "eval_std_return": e["std_return"]}))
PY
done
wait "$other"
uptime; date
cat "$out/proxima.jsonl" "$out/sb3_contrib.jsonl"
