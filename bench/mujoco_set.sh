#!/usr/bin/env bash
# The PPO paper's seven MuJoCo tasks (Figure 3: HalfCheetah, Hopper, Walker2d, Swimmer, Reacher,
# InvertedPendulum, InvertedDoublePendulum; v5 through the Gymnasium bridge) and Humanoid, with the
# paper-mujoco preset, 1M steps, SEEDS (default 1-5), one seed at a time (bridged envs share one
# embedded Python). Each env is one multi-seed parent directory under ROOT; running the script again
# continues: a finished env is skipped, a started one resumes (`proxima train --resume PARENT`).
# Then bench/mujoco_summary.py writes ROOT/mujoco.md (each env's mean ± std, IQM, min, wall time per
# run, CleanRL's 1M-step means) and ROOT/mujoco_curves.png (training return, mean ± std over seeds).
#
# Builds target/release/proxima with --features gym, unless PROXIMA_BIN names a proxima binary to
# use. Needs PROXIMA_PYTHON = a Python with gymnasium[mujoco] (and matplotlib for the figure).
# ROOT must lie outside the repository (a relative ROOT is taken from the current directory).
# Usage:
#   PROXIMA_PYTHON=... ROOT=/somewhere/outside/the/repo [SEEDS=1-5] bench/mujoco_set.sh [ENV ...]
# Exits 1 when a training failed (the summary is still written for the envs that finished).
set -uo pipefail
case "${1:-}" in -h | --help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
root=${ROOT:?set ROOT to a directory outside the repository}
root=$(realpath -m -- "$root")   # a relative ROOT is the caller's, not the repository's
repo=$(realpath -m -- "$(dirname "$0")/..")
case $root/ in "$repo"/*) echo "ROOT=$root is inside the repository ($repo): choose a directory outside it" >&2; exit 2 ;; esac
cd "$(dirname "$0")/.."
seeds=${SEEDS:-1-5}; failed=0
bin=${PROXIMA_BIN:-${CARGO_TARGET_DIR:-target}/release/proxima}
[ -n "${PROXIMA_BIN:-}" ] || cargo build --release -q -p proxima-cli --features gym || exit 1
envs=("$@")
[ ${#envs[@]} -gt 0 ] || envs=(HalfCheetah-v5 Hopper-v5 Walker2d-v5 Swimmer-v5 Reacher-v5 InvertedPendulum-v5
  InvertedDoublePendulum-v5 Humanoid-v5)
mkdir -p "$root"
for env in "${envs[@]}"; do
  dir=$root/$env
  if [ -f "$dir/summary.md" ]; then echo "== $env done"; continue; fi
  echo "== $env start $(date +%T), load $(cut -d' ' -f1-3 /proc/loadavg)"
  if [ -f "$dir/seeds.toml" ]; then
    "$bin" train --resume "$dir" --quiet
  else
    "$bin" train "gym:$env" --preset paper-mujoco --seeds "$seeds" --run-dir "$dir" --quiet
  fi
  rc=$?; [ $rc -eq 0 ] || failed=1
  echo "== $env end $(date +%T) rc=$rc, load $(cut -d' ' -f1-3 /proc/loadavg)"
done
"${PROXIMA_PYTHON:-python3}" bench/mujoco_summary.py "$root" "${envs[@]}" || failed=1
exit $failed
