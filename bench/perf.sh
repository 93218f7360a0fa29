#!/usr/bin/env bash
# Speed side by side, in one run on this machine (issue "Faster than PureJaxRL on a CPU"):
# CartPole-v1 PPO with CleanRL's config (4 envs × 128 steps, 4 epochs × 4 minibatches of 128,
# 500k steps) as a whole process — Proxima on the fused backend (1 and 2 threads) and on the
# candle backend, PureJaxRL's ppo.py (one seed, and 8 seeds vmapped), Stable-Baselines3 (one
# torch thread) — and many seeds at once; then µs per minibatch update next to the arithmetic floor
# (`cargo bench -p proxima --bench update`). Prints one Markdown table per part, with the load
# average before each row, and writes them to $OUT/perf.md (default bench-results/perf).
#
#   bench/perf.sh                 # everything (≈ 4 minutes on 2 cores, plus set-ups)
#   bench/perf.sh --no-sb3        # without SB3 (its 500k steps take ≈ 2 minutes alone)
#
# Anchors, set up locally and never committed:
#   PureJaxRL: PUREJAXRL_MIRROR = the git directory that `fetch github:luchris429/purejaxrl`
#     returns; ../shared/bench/purejaxrl_setup.sh makes its venv (jax[cpu], flax, …) under
#     $ANCHORS (default target/anchors). Without the mirror its rows say so and are left empty.
#   SB3: SB3_PYTHON = a python with stable-baselines3 and gymnasium, else a venv made under
#     $ANCHORS/sb3 with pip (torch from PyPI). ../shared/bench/sb3_baseline.py runs it.
# Run it on a quiet machine: every row is wall-clock time, and the load average is printed.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
case "${1:-}" in -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
with_sb3=1
[ "${1:-}" = --no-sb3 ] && with_sb3=0
out=${OUT:-$root/bench-results/perf}
anchors=${ANCHORS:-$root/target/anchors}
shared=$root/../shared/bench
mkdir -p "$out" "$anchors"
md=$out/perf.md
: >"$md"
say() { echo "$*" | tee -a "$md"; }
load() { cut -d' ' -f1 /proc/loadavg; }
now() { date +%s.%N; }
secs() { python3 -c "print(f'{$2 - $1:.2f}')"; }

echo "building proxima (release) ..." >&2
cargo build --release --locked -q -p proxima-cli
bin=$(cd "$root" && realpath -m "${CARGO_TARGET_DIR:-target}")/release/proxima

say "bench/perf.sh at $(git rev-parse --short HEAD), $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs))"
say ""
say "### 500k CartPole-v1 steps, CleanRL's PPO config, whole process"
say ""
say "| run | wall (whole process) | SPS | of which training | final return | load before |"
say "|---|---|---|---|---|---|"

proxima_row() { # LABEL ARGS... : one `proxima train` run, timed as a whole process
  local label=$1
  shift
  local l t0 t1 dir=$out/runs/$label
  rm -rf "$dir"
  l=$(load)
  t0=$(now)
  "$bin" train CartPole-v1 --quiet --run-dir "$dir" "$@" >"$out/$label.log" 2>&1
  t1=$(now)
  local w sps line
  w=$(secs "$t0" "$t1")
  sps=$(python3 -c "print(round(500224 / $w))")
  line=$(head -1 "$out/$label.log")
  local train eval
  train=$(sed -n 's/.* steps in \([0-9.]*\) s .*/\1 s/p' <<<"$line")
  eval=$(sed -n 's/.*deterministic eval over \([0-9]*\) episodes: \([0-9.]*\) .*/\2 (\1 episodes)/p' <<<"$line")
  say "| Proxima \`$label\` | $w s | $sps | $train | $eval | $l |"
}
proxima_row fused --backend fused
proxima_row fused-2-threads --backend fused --set num_threads=2
proxima_row candle --backend candle

seeds_row() { # N : N seeds at once on every core, one parent directory
  local l t0 t1 dir=$out/runs/seeds-$1
  rm -rf "$dir"
  l=$(load)
  t0=$(now)
  "$bin" train CartPole-v1 --quiet --seeds "1-$1" --run-dir "$dir" >"$out/seeds-$1.log" 2>&1
  t1=$(now)
  local w
  w=$(secs "$t0" "$t1")
  local agg
  agg=$(sed -n 's/.*final deterministic return \(.*\)$/\1/p' "$out/seeds-$1.log")
  say "| Proxima \`--seeds 1-$1\` ($(nproc) jobs) | $w s | $(python3 -c "print(round(500224 * $1 / $w))") | | $agg | $l |"
}
seeds_row 8
seeds_row 16

# --- PureJaxRL ----------------------------------------------------------------------------------
pjx_row() { # SEEDS
  local l t0 t1 json
  l=$(load)
  t0=$(now)
  json=$("$pjx_py" "$pjx_run" 500000 "$1" 2>"$out/purejaxrl-$1.log" | tail -1)
  t1=$(now)
  echo "$json" >"$out/purejaxrl-$1.json"
  local w
  w=$(secs "$t0" "$t1")
  python3 - "$json" "$w" "$1" "$l" <<'PY' | tee -a "$md"
import json, sys
j, w, seeds, load = json.loads(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
sps = round(500000 * seeds / w)
label = "PureJaxRL `ppo.py`" + (f", {seeds} seeds vmapped" if seeds > 1 else "")
print(f"| {label} | {w:.2f} s | {sps} | {j['train_s']} s (import {j['import_s']} s, compile {j['compile_s']} s) "
      f"| {j['final_return']} (last 10 rollouts) | {load} |")
PY
}
if [ -n "${PUREJAXRL_MIRROR:-}" ] && [ -d "$PUREJAXRL_MIRROR" ]; then
  echo "setting up PureJaxRL ..." >&2
  pjx_run=$(bash "$shared/purejaxrl_setup.sh" "$PUREJAXRL_MIRROR" "$anchors" | tail -1)
  pjx_py=$(dirname "$pjx_run")/venv/bin/python
  pjx_row 1
  pjx_row 8
else
  say "| PureJaxRL | not run: set PUREJAXRL_MIRROR to the git dir of \`fetch github:luchris429/purejaxrl\` | | | | |"
fi

# --- Stable-Baselines3 --------------------------------------------------------------------------
if [ $with_sb3 -eq 1 ]; then
  sb3_py=${SB3_PYTHON:-$anchors/sb3/bin/python}
  if ! "$sb3_py" -c "import stable_baselines3, gymnasium" 2>/dev/null; then
    echo "setting up SB3 in $anchors/sb3 ..." >&2
    python3 -m venv "$anchors/sb3"
    "$anchors/sb3/bin/pip" install -q --disable-pip-version-check stable-baselines3 gymnasium >&2
    sb3_py=$anchors/sb3/bin/python
  fi
  l=$(load)
  t0=$(now)
  json=$("$sb3_py" "$shared/sb3_baseline.py" --algo ppo --config cleanrl --env CartPole-v1 --steps 500000 --seeds 1 \
    2>"$out/sb3.log" | tail -1)
  t1=$(now)
  echo "$json" >"$out/sb3.json"
  python3 - "$json" "$(secs "$t0" "$t1")" "$l" <<'PY' | tee -a "$md"
import json, sys
j, w, load = json.loads(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
print(f"| Stable-Baselines3, 1 torch thread | {w:.2f} s | {round(500000 / w)} | {j['train_seconds']:.1f} s "
      f"| {j['eval_mean_return']:.1f} (20 episodes) | {load} |")
PY
fi

# --- µs per minibatch update --------------------------------------------------------------------
say ""
say "### One PPO minibatch update (loss, backward, clipping, Adam) of the 4 → 64 → 64 → 2 | 1 tanh network"
say ""
cargo bench -q -p proxima --bench update 2>/dev/null | tee -a "$md"
say ""
say "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "wrote $md" >&2
