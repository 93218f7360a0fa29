#!/usr/bin/env bash
# The PPO paper's seven MuJoCo tasks (Figure 3: HalfCheetah, Hopper, Walker2d, Swimmer, Reacher,
# InvertedPendulum, InvertedDoublePendulum; v5 through the Gymnasium bridge) and Humanoid, with the
# paper-mujoco preset, 1M steps, SEEDS (default 1-5), one seed at a time (bridged envs share one
# embedded Python). Each env is one multi-seed parent directory under ROOT; running the script again
# continues: a finished env is skipped, a started one resumes (`proxima train --resume PARENT`).
# Then bench/mujoco_summary.py writes ROOT/mujoco.md (each env's mean ± std, IQM, min, wall time per
# run, CleanRL's 1M-step means) and ROOT/mujoco_curves.png (training return, mean ± std over seeds).
#
# Needs: cargo build --release -p proxima-cli --features gym; PROXIMA_PYTHON = a Python with
# gymnasium[mujoco] (and matplotlib for the figure). Usage:
#   PROXIMA_PYTHON=... ROOT=/somewhere/outside/the/repo bench/mujoco_set.sh [ENV ...]
set -uo pipefail
cd "$(dirname "$0")/.."
root=${ROOT:?set ROOT to a directory outside the repository}; seeds=${SEEDS:-1-5}
bin=${PROXIMA_BIN:-./target/release/proxima}
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
  echo "== $env end $(date +%T) rc=$?, load $(cut -d' ' -f1-3 /proc/loadavg)"
done
"${PROXIMA_PYTHON:-python3}" bench/mujoco_summary.py "$root" "${envs[@]}"
