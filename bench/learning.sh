#!/usr/bin/env bash
# Does the fused backend learn? The learning checks of issue "Faster than PureJaxRL on a CPU",
# each a multi-seed run (`proxima train ENV --seeds …`) whose summary.md is printed:
#   CartPole-v1  cleanrl, 500k, seeds 1-5, 100 deterministic episodes each  (want every seed 500)
#   Acrobot-v1   cleanrl, 500k, seeds 1-5, 100 deterministic episodes each  (want every seed ≥ −100)
#   Pendulum-v1  paper-mujoco, 200k, seeds 1-3 with 20 deterministic episodes (the issue's check:
#                want the fused seeds within the candle seeds' spread), and seeds 1-10 with 100
#                episodes each (the two distributions side by side: a 20-episode Pendulum score
#                moves by ±10 with the evaluation's start states), on the fused AND the candle
#                backend
#   HalfCheetah-v5 through the Gymnasium bridge, paper-mujoco, 1M, seed 1 (want ≥ 1,442, CleanRL's
#                mean): only with HALFCHEETAH=1 and PROXIMA_PYTHON naming a Python with
#                gymnasium[mujoco]; the binary is then built with --features gym.
# Writes everything under $OUT (default bench-results/learning) and the tables to $OUT/learning.md.
#
#   bench/learning.sh            # ≈ 3 minutes on 2 cores (+ ≈ 2 with HALFCHEETAH=1)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
case "${1:-}" in -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
out=${OUT:-$root/bench-results/learning}
rm -rf "$out"
mkdir -p "$out"
features=()
[ "${HALFCHEETAH:-0}" = 1 ] && features=(--features gym)
cargo build --release --locked -q -p proxima-cli "${features[@]}"
bin=$(cd "$root" && realpath -m "${CARGO_TARGET_DIR:-target}")/release/proxima
md=$out/learning.md
: >"$md"
run() { # NAME ENV ARGS... : one multi-seed run, its summary appended to the report
  local name=$1 env=$2
  shift 2
  echo "== $name" >&2
  "$bin" train "$env" --run-dir "$out/$name" --quiet "$@" | tee -a "$out/$name.log" >&2
  {
    echo "### $name: \`proxima train $env $*\`"
    echo
    tail -n +3 "$out/$name/summary.md"
    echo
  } >>"$md"
}
run cartpole CartPole-v1 --seeds 1-5 --set eval_episodes=100
run acrobot Acrobot-v1 --seeds 1-5 --set eval_episodes=100
run pendulum-fused Pendulum-v1 --preset paper-mujoco --total-timesteps 200000 --seeds 1-3 --backend fused \
  --set eval_episodes=20
run pendulum-candle Pendulum-v1 --preset paper-mujoco --total-timesteps 200000 --seeds 1-3 --backend candle \
  --set eval_episodes=20
run pendulum-fused-10 Pendulum-v1 --preset paper-mujoco --total-timesteps 200000 --seeds 1-10 --backend fused \
  --set eval_episodes=100
run pendulum-candle-10 Pendulum-v1 --preset paper-mujoco --total-timesteps 200000 --seeds 1-10 --backend candle \
  --set eval_episodes=100
if [ "${HALFCHEETAH:-0}" = 1 ]; then
  run halfcheetah gym:HalfCheetah-v5 --preset paper-mujoco --seeds 1 --set eval_episodes=10
fi
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$md"
cat "$md"
