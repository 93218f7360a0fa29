#!/usr/bin/env bash
# Data-parallel PPO over MPI on this machine: 1, 2 and 4 ranks (4 oversubscribed on 2
# cores), each with the same work per rank (weak scaling: 4 envs × 128 steps and 128 rows of
# every minibatch per rank, so the global minibatch is 128 × ranks), CartPole-v1 for STEPS
# (default 500k) steps in all; and, with MUJOCO=1 and PROXIMA_PYTHON naming a Python with
# gymnasium[mujoco], HalfCheetah-v5 through the bridge (paper-mujoco without its normalisation, as
# docs/benchmarks.md's table was measured; 1 env per rank, minibatch 64 per rank, MUJOCO_STEPS, default
# 100k). Prints per run: whole-process wall time, SPS in all
# and per rank, the gradient all-reduces (calls, µs each) and the share of the wall time spent
# in all-reduces (waiting for the slowest rank included), as each rank reports it; and the
# machine's load. Builds with --features mpi (and gym with MUJOCO=1). Needs Open MPI (mpirun).
#
#   bench/mpi_scaling.sh            # ≈ 2 minutes on 2 cores
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
steps=${STEPS:-500000}
features=mpi
[ "${MUJOCO:-0}" = 1 ] && features=mpi,gym
cargo build --release --locked -q -p proxima-cli --features "$features"
bin=$(realpath -m "${CARGO_TARGET_DIR:-target}")/release/proxima
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "$(nproc) cores; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| env | ranks | envs per rank | wall | SPS in all | SPS per rank | gradient all-reduce (calls × µs, rank 0) | time in all-reduces (rank 0 / slowest rank) |"
echo "|---|---|---|---|---|---|---|---|"
run() { # ENV RANKS ENVS_PER_RANK STEPS BATCH_PER_RANK ARGS...
  local env=$1 np=$2 n=$3 total=$4 mb=$5
  shift 5
  local log=$out/$np.log
  local t0 t1
  t0=$(date +%s.%N)
  PROXIMA_MPI_TIMING=1 mpirun --oversubscribe -np "$np" -x PROXIMA_MPI_TIMING -x PROXIMA_PYTHON "$bin" train "$env" --quiet \
    --total-timesteps "$total" --run-dir "$out/run-$env-$np" --set "n_envs=$n" --set "batch_size=$((mb * np))" \
    --set eval_episodes=0 "$@" >"$log" 2>&1
  t1=$(date +%s.%N)
  local wall sps grads share worst
  wall=$(echo "$t1 - $t0" | bc -l)
  sps=$(echo "$total / $wall" | bc -l)
  grads=$(grep "^MPI rank 0 " "$log" | sed -E 's/.*gradient all-reduces ([0-9]+) × ([0-9.]+) µs.*/\1 × \2/')
  share=$(grep "^MPI rank 0 " "$log" | sed -E 's/.*\(([0-9.]+)% of the wall.*/\1/')
  worst=$(grep "^MPI rank " "$log" | sed -E 's/.*\(([0-9.]+)% of the wall.*/\1/' | sort -n | tail -1)
  printf "| %s | %d | %d | %.2f s | %.0f | %.0f | %s | %s%% / %s%% |\n" "$env" "$np" "$n" "$wall" "$sps" \
    "$(echo "$sps / $np" | bc -l)" "$grads" "$share" "$worst"
  rm -rf "$out/run-$env-$np"
}
for np in 1 2 4; do
  run CartPole-v1 "$np" 4 "$steps" 128
done
if [ "${MUJOCO:-0}" = 1 ]; then
  for np in 1 2 4; do
    # Without the preset's observation/return normalisation (as docs/benchmarks.md's table was measured).
    run gym:HalfCheetah-v5 "$np" 1 "${MUJOCO_STEPS:-100000}" 64 --preset paper-mujoco \
      --set normalize_observation=false --set normalize_reward=false
  done
fi
echo
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
