#!/usr/bin/env bash
# Recurrent PPO against sb3-contrib's RecurrentPPO, side by side in one run, on a toy task of
# crates/proxima-gym/tests/toy_envs.py, the same settings on both sides: MlpLstmPolicy, 8 envs,
# n_steps 32, one minibatch of 256 (all 8 sequences), 10 epochs, lr 1e-3, no rollout-KL pass (SB3
# makes none); one thread each, the two
# sides concurrently (2 cores); deterministic evaluation carrying the state. TASK:
#   CartPoleNoVel  CartPole-v1 with its velocities hidden (rl-zoo's CartPoleNoVel-v1): a 64-unit LSTM
#                  and MLP, gamma 0.98, gae_lambda 0.8, no entropy bonus; 20 evaluation episodes
#   Cue            a cue shown once, asked for three steps later (no memoryless policy can do better
#                  than 0; best 1): a 32-unit LSTM and MLP, gamma 0.99, gae_lambda 0.95, ent_coef
#                  0.01; 100 evaluation episodes
# Usage: bench/recurrent_vs_sb3_contrib.sh    env: PYTHON (with sb3-contrib, gymnasium), TASK
#        (CartPoleNoVel), SEEDS ("1 2 3"), STEPS (100000)
# Writes bench-results/recurrent-$TASK/{proxima,sb3_contrib}.jsonl and prints both.
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}; seeds=${SEEDS:-1 2 3}; steps=${STEPS:-100000}; task=${TASK:-CartPoleNoVel}
case "$task" in
  CartPoleNoVel) env=toy/CartPoleNoVel-v1; episodes=20
    sets=(--set gamma=0.98 --set gae_lambda=0.8 --set lstm_hidden_size=64 --set "net_arch=[64]") ;;
  Cue) env=toy/Cue-v0; episodes=100
    sets=(--set gamma=0.99 --set gae_lambda=0.95 --set ent_coef=0.01 --set lstm_hidden_size=32 --set "net_arch=[32]") ;;
  *) echo "TASK must be CartPoleNoVel or Cue, not '$task'" >&2; exit 2 ;;
esac
export TASK=$task
export PROXIMA_PYTHON=${PROXIMA_PYTHON:-$py} PYTHONPATH=$PWD/crates/proxima-gym/tests${PYTHONPATH:+:$PYTHONPATH}
cargo build --release -q -p proxima-cli --features gym
# A copy of the binary: a build during the runs (another script, a test) does not swap it under them.
bin=$(mktemp -d)/proxima; cp "${CARGO_TARGET_DIR:-target}/release/proxima" "$bin"
out=bench-results/recurrent-$task
mkdir -p "$out/runs"; : > "$out/proxima.jsonl"
uptime; date
$py bench/recurrent_sb3_contrib.py --steps "$steps" --seeds $seeds > "$out/sb3_contrib.jsonl" & other=$!
for s in $seeds; do
  d="$out/runs/seed$s"; rm -rf "$d"
  ( time "$bin" train "gym:toy_envs:$env" --preset sb3 --seed "$s" \
    --total-timesteps "$steps" --set policy=MlpLstmPolicy --set n_envs=8 --set n_steps=32 --set batch_size=256 \
    --set learning_rate=1e-3 --set log_kl_divergence=false "${sets[@]}" --set eval_episodes=$episodes \
    --run-dir "$d" --quiet > /dev/null )
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
