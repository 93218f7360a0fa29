#!/usr/bin/env bash
# The one table of the language-model methods on two-digit addition (docs/benchmarks.md, "SFT, DPO,
# RLHF-PPO and GRPO side by side"): one SFT start (seed 1, also pi_ref), one reward model and its
# preference pairs; then DPO on those very pairs (--pairs), RLHF-PPO against the reward model and
# GRPO on the exact-match reward, 3 seeds each. Every run is measured the same way afterwards:
# `lm eval RUN --reference SFT --seed 7 --json` (held-out greedy accuracy; one sampled response per
# held-out prompt: sampled accuracy and KL(pi || pi_ref) per response, the k1 estimate), and its
# training wall time (progress.csv's last `seconds`; two runs share the 2 cores).
#
# Usage: bench/lm_methods.sh [OUT]     (about 20 minutes on 2 cores)
# Writes OUT (default bench-results/lm_methods)/<run>/ and OUT/table.md.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p proxima-cli
P=$(realpath -m "${CARGO_TARGET_DIR:-target}")/release/proxima
out=${1:-bench-results/lm_methods}; mkdir -p "$out"
run() { local name=$1; shift; rm -rf "$out/$name"; $P lm "$@" --run-dir "$out/$name" -q > "$out/$name.txt"; }

run sft sft
run sft-full sft --steps 600 --eval-every 50 &
wait
run rm rm --sft "$out/sft" --init "$out/sft-full"
for s in 1 2 3; do
  run "dpo-beta1-$s" dpo --sft "$out/sft" --pairs "$out/rm" --beta 1 --seed "$s" &
  run "dpo-beta0.1-$s" dpo --sft "$out/sft" --pairs "$out/rm" --seed "$s" &
  wait
done
for s in 1 2 3; do
  run "grpo-$s" grpo --sft "$out/sft" --seed "$s" &
  run "ppo-$s" ppo --sft "$out/sft" --rm "$out/rm" --seed "$s" &
  wait
done
for d in "$out"/sft "$out"/dpo-* "$out"/grpo-* "$out"/ppo-*; do
  [ -d "$d" ] && $P lm eval "$d" --reference "$out/sft" --seed 7 --json > "$d/eval_vs_ref.json"
done
python3 bench/lm_methods_table.py "$out" > "$out/table.md"
cat "$out/table.md"
