#!/usr/bin/env bash
# Issue 16: PPO with the Nature CNN on an Atari game against Stable-Baselines3's CnnPolicy PPO,
# side by side in one run, the paper-atari values on both sides (bench/atari_sb3.py lists SB3's):
# Proxima `proxima train atari:<Game> --preset paper-atari`, SB3 make_atari_env + VecFrameStack(4)
# on <Game>NoFrameskip-v4 (the same wrappers, checked frame by frame in crates/proxima-gym/tests/
# atari.rs). One run at a time, one thread each. Reports whole-process wall time and SPS.
# Usage: bench/atari_vs_sb3.sh [Breakout] ; env: PYTHON (with stable-baselines3, ale-py,
#        opencv-python-headless; also the bridge's Python), STEPS (100000), SEED (1)
# Writes bench-results/atari-<Game>/{proxima,sb3}.json and prints both.
set -euo pipefail
cd "$(dirname "$0")/.."
game=${1:-Breakout}; steps=${STEPS:-100000}; seed=${SEED:-1}
py=${PYTHON:-python3}; export PROXIMA_PYTHON=${PROXIMA_PYTHON:-$py}
cargo build --release -q -p proxima-cli --features gym
out=bench-results/atari-$game; mkdir -p "$out"; d="$out/run"; rm -rf "$d"
echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg) before"; date
t0=$(date +%s.%N)
./target/release/proxima train "atari:$game" --preset paper-atari --seed "$seed" --total-timesteps "$steps" \
  --set eval_episodes=0 --run-dir "$d" --quiet
t1=$(date +%s.%N)
python3 - "$d" "$t0" "$t1" > "$out/proxima.json" <<'PY'
import csv, json, sys
d, t0, t1 = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
rows = list(csv.DictReader(open(f"{d}/progress.csv")))
last = rows[-1]
print(json.dumps({"impl": "proxima", "steps": int(last["global_step"]), "wall_seconds": t1 - t0,
                  "train_seconds": float(last["time_elapsed"]), "sps": int(last["global_step"]) / float(last["time_elapsed"]),
                  "last100_game_score": float(last["ep_return_mean"]),
                  "games": sum(int(r["episodes"]) for r in rows)}))
PY
echo "load $(cut -d' ' -f1-3 /proc/loadavg) after Proxima"
t0=$(date +%s.%N)
$py bench/atari_sb3.py --game "$game" --steps "$steps" --seed "$seed" > "$out/sb3.json"
t1=$(date +%s.%N)
python3 -c "import json,sys; j=json.load(open('$out/sb3.json')); j['wall_seconds']=$t1-$t0; json.dump(j, open('$out/sb3.json','w'))"
echo "load $(cut -d' ' -f1-3 /proc/loadavg) after SB3"
cat "$out/proxima.json"; echo; cat "$out/sb3.json"; echo
