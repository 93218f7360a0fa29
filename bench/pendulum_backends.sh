#!/usr/bin/env bash
# Do the fused and candle backends learn Pendulum alike? Issue "Faster than PureJaxRL on a CPU"
# asks for three fused seeds within the candle seeds' spread; a 20-episode Pendulum score moves by
# ±10 with the evaluation's start states, so this compares many seeds on the SAME start states:
# `paper-mujoco`, 200k steps, seeds 1-$SEEDS (default 60) per backend, every model evaluated with
# `proxima eval --deterministic --episodes 100 --seed 1000`. Prints mean ± std, median, range,
# how many fused seeds fall inside candle's range, Welch's t and the Mann-Whitney z of the two
# samples; writes everything under $OUT (default bench-results/pendulum-backends).
#
#   bench/pendulum_backends.sh        # ≈ 8 minutes on 2 cores (candle's 60 runs are most of it)
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
out=${OUT:-$PWD/bench-results/pendulum-backends}
seeds=${SEEDS:-60}
case "$seeds" in '' | *[!0-9]*) echo "error: SEEDS must be a number, got '$seeds'" >&2; exit 2 ;; esac
[ "$seeds" -ge 2 ] || { echo "error: SEEDS must be at least 2 (a spread needs two seeds)" >&2; exit 2; }
# $OUT is replaced: only an earlier output of this script (or a new or empty directory).
if [ -d "$out" ] && [ -n "$(ls -A "$out")" ] && [ ! -f "$out/returns.txt" ]; then
  echo "error: OUT=$out holds files this script did not write; choose a new or empty directory" >&2
  exit 2
fi
rm -rf "$out"
mkdir -p "$out"
cargo build --release --locked -q -p proxima-cli
bin=$(realpath -m "${CARGO_TARGET_DIR:-target}")/release/proxima
for backend in fused candle; do
  echo "== $backend: seeds 1-$seeds" >&2
  "$bin" train Pendulum-v1 --preset paper-mujoco --total-timesteps 200000 --seeds "1-$seeds" \
    --backend "$backend" --set eval_episodes=5 --run-dir "$out/$backend" --quiet >"$out/$backend.log" 2>&1
  for s in $(seq 1 "$seeds"); do
    printf '%s %s ' "$backend" "$s"
    "$bin" eval "$out/$backend/seed_$s" --episodes 100 --deterministic --seed 1000 --json |
      python3 -c 'import json, sys; print(json.load(sys.stdin)["mean_return"])'
  done >>"$out/returns.txt"
done
python3 - "$out/returns.txt" <<'EOF' | tee "$out/summary.md"
import math, statistics as st, sys
r = {"fused": [], "candle": []}
for line in open(sys.argv[1]):
    backend, _, ret = line.split()
    r[backend].append(float(ret))
f, c = r["fused"], r["candle"]
print("| backend | seeds | mean ± std | median | min | max |")
print("|---|---|---|---|---|---|")
for name, v in r.items():
    print(f"| {name} | {len(v)} | {st.mean(v):.2f} ± {st.stdev(v):.2f} | {st.median(v):.2f} | {min(v):.2f} | {max(v):.2f} |")
welch = (st.mean(f) - st.mean(c)) / math.sqrt(st.variance(f) / len(f) + st.variance(c) / len(c))
ranked = sorted([(x, 0) for x in f] + [(x, 1) for x in c])
u = sum(i + 1 for i, (_, who) in enumerate(ranked) if who == 0) - len(f) * (len(f) + 1) / 2
z = (u - len(f) * len(c) / 2) / math.sqrt(len(f) * len(c) * (len(f) + len(c) + 1) / 12)
inside = sum(min(c) <= x <= max(c) for x in f)
print()
print(f"fused seeds inside candle's range: {inside} of {len(f)}; Welch t = {welch:.2f}; Mann-Whitney z = {z:.2f}")
print("(|t|, |z| < 1.96: no difference at the 5% level)")
EOF
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/summary.md"
