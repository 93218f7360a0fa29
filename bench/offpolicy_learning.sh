#!/usr/bin/env bash
# SAC, TD3 and TQC at 1M steps on MuJoCo (v5 through the Gymnasium bridge) with rl-zoo's
# hyperparameters, against rl-zoo's benchmark figures (SAC HalfCheetah 9,535, Hopper 2,326, Walker2d
# 3,863; TD3 HalfCheetah 9,656; TQC HalfCheetah 12,090, Hopper 3,754, Walker2d 4,381). One multi-seed parent directory per algorithm and env under ROOT, one seed at a
# time (bridged envs share one embedded Python); running the script again continues: a finished one
# is skipped, a started one resumes exactly (`proxima train --resume PARENT`, the replay buffer kept
# beside each checkpoint).
#
# rl-zoo's values (hyperparams/sac.yml, td3.yml, tqc.yml for the -v3 envs): all 10k random steps
# first; SAC and TQC the rest of their defaults (our `sac`, `tqc` presets); TD3 normal action noise
# σ 0.1, the rest SB3's TD3 defaults (our `td3` preset: lr 1e-3, 400×300, batch 256).
#
# Needs: cargo build --release -p proxima-cli --features gym; PROXIMA_PYTHON = a Python with
# gymnasium[mujoco]. Usage:
#   PROXIMA_PYTHON=... ROOT=/somewhere/outside/the/repo [SEEDS=1] [ALGOS="sac td3 tqc"] \
#     bench/offpolicy_learning.sh [ENV ...]        (default HalfCheetah-v5 Hopper-v5 Walker2d-v5)
# Each parent directory ends with summary.md (the deterministic return per seed, mean ± std) and
# learning_curves.png.
set -uo pipefail
case "${1:-}" in -h | --help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
root=${ROOT:?set ROOT to a directory outside the repository}
root=$(realpath -m -- "$root")   # a relative ROOT is the caller's, not the repository's
repo=$(realpath -m -- "$(dirname "$0")/..")
case $root/ in "$repo"/*) echo "ROOT=$root is inside the repository ($repo): choose a directory outside it" >&2; exit 2 ;; esac
cd "$(dirname "$0")/.."
seeds=${SEEDS:-1}; failed=0
bin=${PROXIMA_BIN:-${CARGO_TARGET_DIR:-target}/release/proxima}
[ -n "${PROXIMA_BIN:-}" ] || cargo build --release -q -p proxima-cli --features gym || exit 1
envs=("$@")
[ ${#envs[@]} -gt 0 ] || envs=(HalfCheetah-v5 Hopper-v5 Walker2d-v5)
mkdir -p "$root"
for algo in ${ALGOS:-sac td3 tqc}; do
  case $algo in
    sac | tqc) sets=(--set learning_starts=10000) ;;
    td3) sets=(--set learning_starts=10000 --set noise_std=0.1) ;;
    *) echo "unknown algorithm $algo (sac, td3 or tqc)" >&2; exit 2 ;;
  esac
  for env in "${envs[@]}"; do
    dir=$root/$algo-$env
    if [ -f "$dir/summary.md" ]; then echo "== $algo $env done"; continue; fi
    echo "== $algo $env start $(date +%T), load $(cut -d' ' -f1-3 /proc/loadavg)"
    if [ -f "$dir/seeds.toml" ]; then
      "$bin" train --resume "$dir" --quiet
    else
      "$bin" train "gym:$env" --algo "$algo" --seeds "$seeds" --total-timesteps 1000000 "${sets[@]}" \
        --set eval_episodes=10 --run-dir "$dir" --quiet
    fi
    rc=$?; [ $rc -eq 0 ] || failed=1
    echo "== $algo $env end $(date +%T) rc=$rc, load $(cut -d' ' -f1-3 /proc/loadavg)"
  done
done
exit $failed
