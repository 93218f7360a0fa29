#!/usr/bin/env bash
# Invalid-action masking against sb3-contrib's MaskablePPO, side by side in one run, on the masking
# test game toy/PickOfTwo-v0 (crates/proxima-gym/tests/toy_envs.py: two of six actions valid each
# step, unobserved; the observation says which of the two pays; a masked action pays -1 and ends
# the episode; best return 16, masked random play 8). SB3's default hyperparameters on both sides
# (Proxima's `sb3` preset), one env, one thread each, the two sides concurrently (2 cores).
# Both evaluate deterministically with masks over 100 episodes of the strict variant, which raises
# on any masked action: an evaluation that finishes took none.
# Usage: bench/masking_vs_sb3_contrib.sh    env: PYTHON (with sb3-contrib, gymnasium), SEEDS ("1 2 3"),
#        STEPS (100000)
# Writes bench-results/masking-PickOfTwo/{proxima,sb3_contrib}.jsonl and prints both.
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}; seeds=${SEEDS:-1 2 3}; steps=${STEPS:-100000}
export PROXIMA_PYTHON=${PROXIMA_PYTHON:-$py} PYTHONPATH=$PWD/crates/proxima-gym/tests${PYTHONPATH:+:$PYTHONPATH}
cargo build --release -q -p proxima-cli --features gym
# A copy of the binary: a build during the runs (another script, a test) does not swap it under them.
bin=$(mktemp -d)/proxima; cp "${CARGO_TARGET_DIR:-target}/release/proxima" "$bin"
out=bench-results/masking-PickOfTwo
mkdir -p "$out/runs"; : > "$out/proxima.jsonl"
uptime; date
$py bench/masking_sb3_contrib.py --steps "$steps" --seeds $seeds > "$out/sb3_contrib.jsonl" & other=$!
for s in $seeds; do
  d="$out/runs/seed$s"; rm -rf "$d"
  ( time "$bin" train gym:toy_envs:toy/PickOfTwo-v0 --preset sb3 --seed "$s" \
    --total-timesteps "$steps" --set eval_episodes=0 --run-dir "$d" --quiet > /dev/null )
  "$bin" eval "$d" --env gym:toy_envs:toy/PickOfTwoStrict-v0 --episodes 100 \
    --deterministic --json > "$d/eval_strict.json"
  python3 - "$d" "$s" "$steps" >> "$out/proxima.jsonl" <<'PY'
import csv, json, sys
d, seed, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
e = json.load(open(f"{d}/eval_strict.json"))
rows = list(csv.DictReader(open(f"{d}/progress.csv")))
secs = float(rows[-1]["time_elapsed"])
print(json.dumps({"impl": "proxima", "seed": seed, "steps": steps, "train_seconds": secs, "sps": steps / secs,
                  "eval_mean_return": e["mean_return"], "eval_std_return": e["std_return"]}))
PY
done
wait "$other"
uptime; date
cat "$out/proxima.jsonl" "$out/sb3_contrib.jsonl"
