#!/usr/bin/env bash
# The benchmarks on two-digit addition (docs/benchmarks.md, "Language models"):
#  1. SFT stopped early (the starting policy and pi_ref), and a fully trained SFT (only used to
#     initialise the reward model);
#  2. GRPO with the verifiable reward, and its two controls: rewards shuffled across samples, and
#     a large beta;
#  3. a Bradley-Terry reward model on scripted preferences (held-out pairwise accuracy), then
#     RLHF-PPO against it, and RLHF-PPO with the verifiable reward as a control.
# Every run is seeded (seed 1) and single-threaded, so the numbers are reproducible on one machine.
#
# Usage: bench/lm.sh    (about 25 minutes on 2 cores; runs two jobs at a time)
#        (ppo-adaptive-kl: beta adapted towards a KL of 1 nat per response)
# Writes bench-results/lm/<run>/ (config.json, progress.csv, TensorBoard events, weights) and
# bench-results/lm/summary.md.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p proxima-cli
P="${CARGO_TARGET_DIR:-target}/release/proxima"
out=bench-results/lm; mkdir -p "$out"
run() { local name=$1; shift; rm -rf "$out/$name"; $P lm "$@" --run-dir "$out/$name" -q > "$out/$name.txt"; cat "$out/$name.txt"; }

run sft sft
run sft-full sft --steps 600 --eval-every 50 &
run grpo grpo --sft "$out/sft" &
wait
run grpo-shuffled grpo --sft "$out/sft" --shuffle-rewards &
run grpo-beta1 grpo --sft "$out/sft" --beta 1 &
wait
run rm rm --sft "$out/sft" --init "$out/sft-full" &
run ppo-verifiable ppo --sft "$out/sft" --verifiable-reward &
wait
run ppo ppo --sft "$out/sft" --rm "$out/rm" &
run ppo-adaptive-kl ppo --sft "$out/sft" --rm "$out/rm" --kl-target 1 &
wait
python3 bench/lm_summary.py "$out" > "$out/summary.md"
cat "$out/summary.md"
