#!/usr/bin/env bash
# Issue 16: PPO with the Nature CNN learning Atari games on this CPU, one seed per game, the
# `paper-atari` preset (Schulman et al. 2017, Table 5: 8 envs × 128 steps, 3 epochs of
# minibatches of 256, ε 0.1 fixed as CleanRL keeps it (the paper anneals it; `--set
# anneal_clip_range=true`), lr 2.5e-4 annealed over the run's budget), `atari:<Game>` =
# ALE/<Game>-v5 inside SB3's AtariWrapper (noop 30, frame skip 4 with the max of the last two
# frames, a lost life ends the learner's episode, FIRE on reset, 84×84 gray, reward sign, 4
# frames stacked). The games run concurrently, each with the preset's two threads and half its
# games stepped in a worker process (`num_threads = 2`, `vector_env = "subproc"`). The curves are the real game
# score (all lives), mean of the last 100 games, against env steps (agent steps; × 4 frames).
#
# Needs: a Python with gymnasium and ale-py in PROXIMA_PYTHON.
# Usage: bench/atari_learning.sh [GAME ...]  env: STEPS (500000), SEED (1)
# Writes bench-results/atari-learning/<Game>/ (seed_1/, summary.md, learning_curves.png, wall.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p proxima-cli --features gym
games=("$@"); [ ${#games[@]} -gt 0 ] || games=(Breakout Pong)
steps=${STEPS:-500000}; seed=${SEED:-1}
out=bench-results/atari-learning; mkdir -p "$out"
bin=$(mktemp -d)/proxima; cp "${CARGO_TARGET_DIR:-target}/release/proxima" "$bin"   # rebuilds during the runs do not touch it
echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg) before"; date
for game in "${games[@]}"; do
  dir="$out/$game"; rm -rf "$dir"
  (
    start=$(date +%s.%N)
    "$bin" train "atari:$game" --preset paper-atari --seeds "$seed" --total-timesteps "$steps" \
      --run-dir "$dir" --quiet > "$out/$game.log" 2>&1
    echo "$game: $steps steps, $(echo "$(date +%s.%N) - $start" | bc) s whole process, load $(cut -d' ' -f1-3 /proc/loadavg) at the end" | tee "$dir/wall.txt"
  ) &
done
wait
date
for game in "${games[@]}"; do cat "$out/$game/summary.md"; done
