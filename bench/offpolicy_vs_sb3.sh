#!/usr/bin/env bash
# Issue 15: SAC and TD3 against Stable-Baselines3, side by side in one run, on Pendulum-v1 with
# rl-zoo's hyperparameters (bench/offpolicy_sb3.py lists them; the same values on our side), seeds
# 1-3, deterministic evaluation over 20 episodes on both sides, one thread each; the two sides run
# concurrently (2 cores), each one run at a time. THREADS=2: each side given the whole machine
# instead (Proxima `num_threads = 2`, torch 2 threads), one side after the other.
# Usage: bench/offpolicy_vs_sb3.sh [sac|td3|tqc] [Pendulum-v1|HalfCheetah-v5] (tqc: sb3-contrib's TQC)
#        env: PYTHON (with stable-baselines3, gymnasium[mujoco]; also the bridge's Python for a
#        MuJoCo env), SEEDS ("1 2 3"; "1" for HalfCheetah), STEPS (20000; 200000 for HalfCheetah),
#        THREADS (1)
# HalfCheetah-v5 goes through the Gymnasium bridge (`gym:HalfCheetah-v5`) with rl-zoo's
# HalfCheetah-v3 hyperparameters (the -v5 env is the same task on current MuJoCo bindings).
# Writes bench-results/<algo>-<env>/{proxima,sb3}.jsonl and prints both.
set -euo pipefail
cd "$(dirname "$0")/.."
algo=${1:-sac}; env=${2:-Pendulum-v1}
py=${PYTHON:-python3}
case $algo/$env in
  sac/Pendulum-v1 | tqc/Pendulum-v1) sets=(--set learning_rate=1e-3) ;;
  td3/Pendulum-v1) sets=(--set gamma=0.98 --set buffer_size=200000 --set learning_starts=10000 --set noise_std=0.1
             --set learning_rate=1e-3 --set "net_arch=[400, 300]") ;;
  sac/HalfCheetah-v5 | tqc/HalfCheetah-v5) sets=(--set learning_starts=10000) ;;
  td3/HalfCheetah-v5) sets=(--set learning_starts=10000 --set noise_std=0.1 --set learning_rate=1e-3
             --set "net_arch=[400, 300]") ;;
  *) echo "usage: $0 [sac|td3|tqc] [Pendulum-v1|HalfCheetah-v5]" >&2; exit 2 ;;
esac
if [ "$env" = Pendulum-v1 ]; then
  id=$env; seeds=${SEEDS:-1 2 3}; steps=${STEPS:-20000}
  cargo build --release -q -p proxima-cli
else
  id=gym:$env; seeds=${SEEDS:-1}; steps=${STEPS:-200000}; export PROXIMA_PYTHON=${PROXIMA_PYTHON:-$py}
  cargo build --release -q -p proxima-cli --features gym
fi
threads=${THREADS:-1}
out=bench-results/$algo-$env; [ "$threads" = 1 ] || out=$out-threads$threads
mkdir -p "$out/runs"; : > "$out/proxima.jsonl"
uptime; date
sb3_run() { $py bench/offpolicy_sb3.py --algo "$algo" --env "$env" --steps "$steps" --seeds $seeds --threads "$threads" > "$out/sb3.jsonl"; }
if [ "$threads" = 1 ]; then sb3_run & sb3=$!; else ( time sb3_run ); sb3=; fi
sets+=(--set "num_threads=$threads")
for s in $seeds; do
  d="$out/runs/${env}__${algo}__$s"; rm -rf "$d"
  ( time "${CARGO_TARGET_DIR:-target}/release/proxima" train "$id" --algo "$algo" --seed "$s" --total-timesteps "$steps" \
    "${sets[@]}" --set eval_episodes=20 --run-dir "$d" --quiet > /dev/null ) 2> >(grep -v -e '^WARNING' -e '^$' >&2)
  python3 -c "import json; e=json.load(open('$d/eval.json')); print(json.dumps({'impl':'proxima','algo':'$algo','env':e['env_id'],'seed':e['seed'],'steps':e['global_step'],'train_seconds':e['train_seconds'],'sps':e['sps'],'eval_mean_return':e['mean_return'],'eval_std_return':e['std_return']}))" >> "$out/proxima.jsonl"
done
[ -z "$sb3" ] || wait "$sb3"
uptime; date
cat "$out/proxima.jsonl" "$out/sb3.jsonl"
