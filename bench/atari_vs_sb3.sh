#!/usr/bin/env bash
# PPO with the Nature CNN on an Atari game against Stable-Baselines3's CnnPolicy PPO, side by
# side in one run, the paper-atari values on both sides (bench/atari_sb3.py lists SB3's): Proxima
# `proxima train atari:<Game> --preset paper-atari`, SB3 make_atari_env + VecFrameStack(4) on
# <Game>NoFrameskip-v4 (the same wrappers, checked frame by frame in crates/proxima-gym/tests/
# atari.rs). One run at a time, in two settings (THREADS): `whole` — each side given the whole
# machine with its defaults (Proxima with no extra flags: two threads, half the games in a worker
# process; SB3 with torch's own threads) — and `one` — one thread each (Proxima --set
# num_threads=1 --set vector_env=off, torch.set_num_threads(1)). Reports
# whole-process wall time and SPS.
# Usage: bench/atari_vs_sb3.sh [Breakout] ; env: PYTHON (with stable-baselines3, ale-py,
#        opencv-python-headless; also the bridge's Python), STEPS (100000), SEED (1),
#        THREADS ("whole one")
# Writes bench-results/atari-<Game>/{proxima,sb3}-<threads>.json and prints them.
set -euo pipefail
cd "$(dirname "$0")/.."
game=${1:-Breakout}; steps=${STEPS:-100000}; seed=${SEED:-1}
py=${PYTHON:-python3}; export PROXIMA_PYTHON=${PROXIMA_PYTHON:-$py}
cargo build --release -q -p proxima-cli --features gym
out=bench-results/atari-$game; mkdir -p "$out"; d="$out/run"
echo "machine: $(nproc) cores"; date
for mode in ${THREADS:-whole one}; do
  case $mode in
    whole) flags=(); torch_threads=default ;;
    one) flags=(--set num_threads=1 --set vector_env=off); torch_threads=1 ;;
    *) echo "THREADS: whole or one, not $mode" >&2; exit 2 ;;
  esac
  rm -rf "$d"
  echo "== $mode: load $(cut -d' ' -f1-3 /proc/loadavg) before Proxima"
  t0=$(date +%s.%N)
  "${CARGO_TARGET_DIR:-target}/release/proxima" train "atari:$game" --preset paper-atari --seed "$seed" --total-timesteps "$steps" \
    --set eval_episodes=0 "${flags[@]}" --run-dir "$d" --quiet
  t1=$(date +%s.%N)
  python3 - "$d" "$t0" "$t1" "$mode" > "$out/proxima-$mode.json" <<'PY'
import csv, json, sys
d, t0, t1, mode = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
rows = list(csv.DictReader(open(f"{d}/progress.csv")))
last = rows[-1]
score = float(last["ep_return_mean"]) if last["ep_return_mean"] else None
print(json.dumps({"impl": "proxima", "threads": mode, "steps": int(last["global_step"]), "wall_seconds": t1 - t0,
                  "train_seconds": float(last["time_elapsed"]), "sps": int(last["global_step"]) / float(last["time_elapsed"]),
                  "last100_game_score": score, "games": sum(int(r["episodes"]) for r in rows)}))
PY
  echo "== $mode: load $(cut -d' ' -f1-3 /proc/loadavg) after Proxima"
  t0=$(date +%s.%N)
  TORCH_THREADS=$torch_threads $py bench/atari_sb3.py --game "$game" --steps "$steps" --seed "$seed" > "$out/sb3-$mode.json"
  t1=$(date +%s.%N)
  python3 -c "import json; j=json.load(open('$out/sb3-$mode.json')); j['wall_seconds']=$t1-$t0; j['threads']='$mode'; json.dump(j, open('$out/sb3-$mode.json','w'))"
  echo "== $mode: load $(cut -d' ' -f1-3 /proc/loadavg) after SB3"
  cat "$out/proxima-$mode.json"; echo; cat "$out/sb3-$mode.json"; echo
done
