#!/usr/bin/env bash
# Dict observations against SB3's PPO with MultiInputPolicy, side by side in one run, on the test game
# toy/KeyDecidesFlat-v0 (crates/proxima-gym/tests/toy_envs.py: a `cue` key, Discrete(3), says which of three
# actions pays 1; a Box of noise and a Box of levels say nothing; 10 steps, best return 10,
# random play 3.3). SB3's defaults on both sides (Proxima's `sb3` preset through the Gymnasium bridge),
# one env, one thread each, the two sides concurrently (2 cores); deterministic evaluation over 100
# episodes on both.
# Usage: bench/dict_obs_vs_sb3.sh    env: PYTHON (with stable-baselines3, gymnasium), SEEDS ("1 2 3"),
#        STEPS (50000)
# Writes bench-results/dict-KeyDecidesFlat/{proxima,sb3}.jsonl and prints both.
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}; seeds=${SEEDS:-1 2 3}; steps=${STEPS:-50000}
export PROXIMA_PYTHON=${PROXIMA_PYTHON:-$py} PYTHONPATH=$PWD/crates/proxima-gym/tests${PYTHONPATH:+:$PYTHONPATH}
cargo build --release -q -p proxima-cli --features gym
# A copy of the binary: a build during the runs (another script, a test) does not swap it under them.
bin=$(mktemp -d)/proxima; cp "${CARGO_TARGET_DIR:-target}/release/proxima" "$bin"
out=bench-results/dict-KeyDecidesFlat
mkdir -p "$out/runs"; : > "$out/proxima.jsonl"
uptime; date
$py bench/dict_obs_sb3.py --steps "$steps" --seeds $seeds > "$out/sb3.jsonl" & other=$!
for s in $seeds; do
  d="$out/runs/seed$s"; rm -rf "$d"
  ( time "$bin" train gym:toy_envs:toy/KeyDecidesFlat-v0 --preset sb3 --seed "$s" \
    --total-timesteps "$steps" --set eval_episodes=100 --run-dir "$d" --quiet > /dev/null )
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
cat "$out/proxima.jsonl" "$out/sb3.jsonl"
