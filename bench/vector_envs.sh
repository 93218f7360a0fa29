#!/usr/bin/env bash
# Bridged envs stepped each way, side by side in one run (issue 12: "training wall within 1.3× of
# stepping the same env alone, and faster still in parallel on 2 cores"): HalfCheetah-v5,
# `paper-mujoco`, 1M steps, seed 1, whole process, for
#   bench-env alone (random actions, no policy) · off 1 × 2048 (the preset) · off 2 × 1024 ·
#   subproc 2 × 1024 · subproc 4 × 512 · async 2 × 1024 (Gymnasium's AsyncVectorEnv; ASYNC=0 skips
#   it, ≈ 4 minutes) · sync 2 × 1024 (SYNC=1 adds it)
# Runs with the same envs × steps train bit for bit alike (the table shows the final return).
# Needs PROXIMA_PYTHON naming a Python with gymnasium[mujoco]; builds with --features gym.
# Writes under $OUT (default bench-results/vector_envs); the table goes to $OUT/vector_envs.md.
#
#   PROXIMA_PYTHON=.venv/bin/python bench/vector_envs.sh    # ≈ 9 minutes on 2 cores
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
case "${1:-}" in -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
out=${OUT:-$root/bench-results/vector_envs}
steps=${STEPS:-1000000}
if [ -e "$out" ] && [ ! -f "$out/vector_envs.md" ]; then
  echo "error: $out exists and was not written by this script; set OUT to a new directory" >&2
  exit 2
fi
rm -rf "$out"
mkdir -p "$out"
cargo build --release --locked -q -p proxima-cli --features gym
bin=$(cd "$root" && realpath -m "${CARGO_TARGET_DIR:-target}")/release/proxima
md=$out/vector_envs.md
{
  echo "HalfCheetah-v5, paper-mujoco, $steps steps, seed 1, $(nproc) cores; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo
  echo "| how | envs × steps | wall (whole process) | rollout | update | final return (10 det. episodes) |"
  echo "|---|---|---|---|---|---|"
} >"$md"
wall() { # LOG: the wall seconds /usr/bin/time wrote
  grep -o '^WALL [0-9.]*' "$1" | cut -d' ' -f2
}
/usr/bin/time -f "WALL %e" "$bin" bench-env gym:HalfCheetah-v5 --steps "$steps" >"$out/bench-env.log" 2>&1
echo "| bench-env alone | 1 | $(wall "$out/bench-env.log") s | | | |" >>"$md"
train() { # MODE N_ENVS N_STEPS
  local name=$1-$2x$3
  echo "== $name" >&2
  /usr/bin/time -f "WALL %e" "$bin" train gym:HalfCheetah-v5 --preset paper-mujoco --seed 1 --quiet \
    --total-timesteps "$steps" --run-dir "$out/$name" --set "vector_env=$1" --set "n_envs=$2" --set "n_steps=$3" \
    >"$out/$name.log" 2>&1
  local line
  line=$(grep '^trained' "$out/$name.log")
  local rollout update ret
  rollout=$(sed -E 's/.*rollout ([0-9.]+ s).*/\1/' <<<"$line")
  update=$(sed -E 's/.*update ([0-9.]+ s).*/\1/' <<<"$line")
  ret=$(sed -E 's/.*episodes: (.*)$/\1/' <<<"$line")
  echo "| $1 | $2 × $3 | $(wall "$out/$name.log") s | $rollout | $update | $ret |" >>"$md"
}
train off 1 2048
train off 2 1024
train subproc 2 1024
train subproc 4 512
train off 4 512
[ "${SYNC:-0}" = 1 ] && train sync 2 1024
[ "${ASYNC:-1}" = 1 ] && train async 2 1024
echo >>"$md"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$md"
cat "$md"
