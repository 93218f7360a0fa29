#!/usr/bin/env bash
# Issue 15's REINFORCE measurement: CartPole-v1, seeds 1-5, one budget (500k steps), REINFORCE
# with and without its baseline next to A2C and PPO (each with its own preset: reinforce, a2c,
# cleanrl), as one ablation (same seeds, learning curves of the mean in one PNG), plus both
# REINFORCE variants without return / advantage normalisation (`--seeds`, each seed's curve).
# Prints per setting: the last-100-episode training score per seed, mean ± std, min, max.
#
# Usage: bench/reinforce.sh     env: JOBS (default 2), STEPS (default 500000)
# Writes bench-results/reinforce/ (ablation/, raw_*/, table.md).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p proxima-cli
P="${CARGO_TARGET_DIR:-target}/release/proxima"
out=bench-results/reinforce; rm -rf "$out"; mkdir -p "$out"
jobs=${JOBS:-2}; steps=${STEPS:-500000}
uptime
/usr/bin/time -f "ablation: %e s wall" $P ablation --envs CartPole-v1 \
  --variants reinforce,reinforce_no_baseline,a2c,clip --preset cleanrl --seeds 1,2,3,4,5 \
  --total-timesteps "$steps" --jobs "$jobs" --out "$out/ablation" > "$out/ablation.log"
for b in true false; do
  /usr/bin/time -f "raw returns, baseline=$b: %e s wall" $P train CartPole-v1 --algo reinforce \
    --set baseline=$b --set normalize_advantage=off --seeds 1-5 --jobs "$jobs" \
    --total-timesteps "$steps" --quiet --run-dir "$out/raw_baseline_$b" > /dev/null
done
uptime
python3 - "$out" <<'PY'
import csv, statistics as st, sys, os
out = sys.argv[1]
rows = {}
for r in csv.DictReader(open(os.path.join(out, "ablation", "results.csv"))):
    rows.setdefault(r["variant"], []).append(float(r["score"]))
def ep_score(run):
    # The last 100 training episodes' mean return at the end, as the ablation scores a run.
    rows = list(csv.DictReader(open(os.path.join(run, "progress.csv"))))
    return float(rows[-1]["ep_return_mean"])
for b, label in [("true", "REINFORCE, raw returns (no normalisation)"), ("false", "REINFORCE without baseline, raw returns")]:
    d = os.path.join(out, f"raw_baseline_{b}")
    runs = sorted(x for x in os.listdir(d) if os.path.isdir(os.path.join(d, x)))
    rows[label] = [ep_score(os.path.join(d, x)) for x in runs]
lines = ["| setting (CartPole-v1, 500k steps, seeds 1-5) | score per seed | mean ± std | min | max |", "|---|---|---|---|---|"]
for k, v in rows.items():
    lines.append(f"| {k} | {', '.join(f'{x:.0f}' for x in v)} | {st.mean(v):.1f} ± {st.stdev(v):.1f} | {min(v):.0f} | {max(v):.0f} |")
open(os.path.join(out, "table.md"), "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
