#!/usr/bin/env bash
# Every result unchanged, bit for bit: builds a reference commit (default 7897f9d, the last commit
# before the house was rearranged by job: config, CLI, trainer) in a git worktree and the current
# tree, runs the same short runs with both binaries on one backend, BACKEND (candle by default:
# `--backend B` on train and eval, `--set backend=B` on the ablation; a reference from before the
# fused backend has no flag and is compared on candle only), and compares what they leave behind
# (bench/same_results.py): final weights and optimiser moments tensor by tensor, progress.csv
# without its wall-clock columns, eval.json / `eval --json` without wall-clock keys, config.toml,
# the ablation's tables.
#
#   bench/same_results.sh [REF]                  # OUT=bench-results/same_results by default
#   BACKEND=auto OUT=bench-results/same_results_auto bench/same_results.sh [REF]   # the fused kernels where they cover a run
#
# Prints (and writes to $OUT/report.txt) one row per case — its name, the number of files compared
# and `identical`, `DIFFERENT` (with the first differences: tensor and max |diff|, CSV row and
# column, JSON key) or `SKIPPED` (with the reason) — then `N identical, M different, K skipped, of
# T cases`. Exits 0 when no case differs, 1 otherwise or when a case failed to run (its logs are
# $OUT/ref.<case>.log and $OUT/new.<case>.log).
#
# Cases: each native env × each preset (A3C with one worker: with two, the workers' interleaving
# is not reproducible); PPO's four objectives on a discrete and a continuous env; a shared trunk
# with ReLU; target_kl early stopping; batch advantage normalisation; observation and reward
# normalisation; a MultiDiscrete toy env through the Gymnasium bridge; runs resumed mid-way; eval
# --json (sampled and deterministic) of every run; the ablation; lm sft, rm, grpo, ppo and eval.
# Cross-version cases: the current binary evaluates and resumes run directories written by REF.
#
# Needs cargo and python3 (with its shared library, for the bridge). The bridged case uses
# $PROXIMA_PYTHON, else .venv-ci/bin/python, else a venv made here with `pip install gymnasium`;
# without gymnasium that case is reported as SKIPPED. The runs take 1-2 minutes on 2 cores; each
# build ~1-2 minutes, except the first of a target directory, which compiles candle (~6). The
# current tree builds into $CARGO_TARGET_DIR (default target/), the references into their own
# target/same-results/ref-target (never share one target directory between two checkouts of this
# workspace: cargo would take one's build for the other's).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
case "${1:-}" in -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
target=${CARGO_TARGET_DIR:-$root/target}
ref=${1:-7897f9d}
ref_sha=$(git rev-parse --verify "$ref^{commit}")
work=$target/same-results
out=${OUT:-$root/bench-results/same_results}
mkdir -p "$work"

# --- the two binaries ---------------------------------------------------------------------------
build() { # $1 = source tree, $2 = its target directory, $3 = where the binary goes
  # Cargo fingerprints a workspace member by its path relative to the workspace root, so a target
  # directory that last built another checkout of this workspace would be taken as up to date:
  # clean the workspace's own packages first (the dependencies stay built).
  (
    cd "$1"
    for pkg in $(ls crates); do CARGO_TARGET_DIR="$2" cargo clean -q --release -p "$pkg" 2>/dev/null || true; done
    CARGO_TARGET_DIR="$2" cargo build --release --locked -q -p proxima-cli --features gym
  )
  cp "$2/release/proxima" "$3"
}
ref_bin=$work/proxima-${ref_sha:0:12}
if [ ! -x "$ref_bin" ]; then
  src=$work/src-${ref_sha:0:12}
  [ -d "$src" ] || git worktree add --detach "$src" "$ref_sha" >/dev/null
  echo "building the reference ${ref_sha:0:12} ..."
  build "$src" "$work/ref-target" "$ref_bin"
fi
cur_bin=$work/proxima-current
echo "building the current tree ($(git rev-parse --short HEAD)$([ -n "$(git status --porcelain -- crates Cargo.toml Cargo.lock)" ] && echo ', with uncommitted changes')) ..."
build "$root" "$target" "$cur_bin"
# Both binaries on one backend, BACKEND (default candle): a wrapper adds `--backend B` to train and
# eval and `--set backend=B` to the ablation. A reference from before the fused backend knows no
# other backend nor the flag: it runs as it is, and only candle can be compared with it.
backend=${BACKEND:-candle}
case $backend in candle | fused | auto) ;; *) echo "BACKEND must be candle, fused or auto, not $backend" >&2; exit 2 ;; esac
on_backend() { # $1 = binary, $2 = the wrapper to write
  cat >"$2" <<EOF
#!/usr/bin/env bash
case "\$1" in
  train | eval) exec "$1" "\$@" --backend $backend ;;
  ablation) exec "$1" "\$@" --set backend=$backend ;;
  *) exec "$1" "\$@" ;;
esac
EOF
  chmod +x "$2"
}
on_backend "$cur_bin" "$work/proxima-current-on-backend"
if "$ref_bin" train --help | grep -q -- "--backend"; then
  on_backend "$ref_bin" "$work/proxima-ref-on-backend"
  ref_bin=$work/proxima-ref-on-backend
elif [ "$backend" != candle ]; then
  echo "the reference ${ref_sha:0:12} has no --backend: it can be compared on BACKEND=candle only" >&2
  exit 2
fi

# --- a Python with gymnasium for the bridged case -----------------------------------------------
py=${PROXIMA_PYTHON:-}
if [ -z "$py" ] && [ -x .venv-ci/bin/python ]; then py=$root/.venv-ci/bin/python; fi
if [ -z "$py" ] || ! "$py" -c "import gymnasium" 2>/dev/null; then
  py=$work/venv/bin/python
  if ! "$py" -c "import gymnasium" 2>/dev/null; then
    python3 -m venv "$work/venv" && "$py" -m pip install -q --disable-pip-version-check gymnasium || true
  fi
fi
have_gym=0
"$py" -c "import gymnasium" 2>/dev/null && have_gym=1
export PROXIMA_PYTHON=$py PYTHONPATH=$root/bench${PYTHONPATH:+:$PYTHONPATH}

rm -rf "$out"
mkdir -p "$out/ref" "$out/new"

# --- the cases ----------------------------------------------------------------------------------
# Each case runs once per side, the two sides in parallel; $bin and $side name the side.
both() { # $1 = case function, $2 = case name, rest = its arguments
  local fn=$1 name=$2
  shift 2
  (bin=$ref_bin side=ref dir=$out/ref/$name "$fn" "$@") >"$out/ref.$name.log" 2>&1 &
  local p1=$!
  (bin=$work/proxima-current-on-backend side=new dir=$out/new/$name "$fn" "$@") >"$out/new.$name.log" 2>&1 &
  local p2=$!
  local ok=0
  wait $p1 || ok=1
  wait $p2 || ok=1
  if [ $ok -ne 0 ]; then
    failed=1
    echo "case $name failed; see $out/ref.$name.log and $out/new.$name.log" >&2
    tail -n 5 "$out/ref.$name.log" "$out/new.$name.log" >&2
  fi
}

evals() { # eval --json of run directory $1, sampled and deterministic, into $dir
  "$bin" eval "$1" --episodes 3 --json >"$dir/eval_sampled.json"
  "$bin" eval "$1" --episodes 3 --deterministic --json >"$dir/eval_deterministic.json"
}

train_case() { # ENV ARGS... : one training run and its evaluations ($new_args: the new binary's, and
  # REF's too when REF already has the Nature CNN, whose presets then need the same arguments;
  # $new_only_args: the new binary's alone, keys REF does not know)
  mkdir -p "$dir"
  local extra=() only=()
  if [ -n "${new_args:-}" ] && { [ "$side" = new ] || [ "$ref_has_cnn" -eq 1 ]; }; then
    read -ra extra <<<"$new_args"
  fi
  if [ -n "${new_only_args:-}" ] && [ "$side" = new ]; then
    read -ra only <<<"$new_only_args"
  fi
  "$bin" train "$@" "${extra[@]}" "${only[@]}" --run-dir "$dir/run" --quiet
  evals "$dir/run"
}

bridged_case() {
  mkdir -p "$dir"
  if [ $have_gym -eq 0 ]; then
    echo "no Python with gymnasium ($py): the bridged MultiDiscrete case did not run" >"$dir/SKIPPED"
    return
  fi
  train_case "$@"
}

resume_case() { # ENV PRESET STEPS FREQ KEEP: a full run, and the same run resumed from update KEEP
  local env=$1 preset=$2 steps=$3 freq=$4 keep=$5
  mkdir -p "$dir"
  "$bin" train "$env" --preset "$preset" --total-timesteps "$steps" --set checkpoint_freq="$freq" \
    --run-dir "$dir/full" --quiet
  cp -r "$dir/full" "$dir/start"
  rm -f "$dir/start/model.safetensors" "$dir/start/eval.json" "$dir/start"/events.out.tfevents.*
  for f in "$dir/start/checkpoints"/update_*.safetensors; do
    n=$(basename "$f" .safetensors)
    n=$((10#${n#update_}))
    [ "$n" -le "$keep" ] || rm -f "$f"
  done
  cp -r "$dir/start" "$dir/resumed"
  "$bin" train --resume "$dir/resumed" --quiet
  evals "$dir/resumed"
}

old_run_case() { # TRAIN_CASE RESUME_CASE: each binary evaluates REF's run of TRAIN_CASE and resumes
  mkdir -p "$dir"                # REF's interrupted run of RESUME_CASE
  evals "$out/ref/$1/run"
  cp -r "$out/ref/$2/start" "$dir/resumed"
  "$bin" train --resume "$dir/resumed" --quiet
  evals "$dir/resumed"
}

ablation_case() {
  mkdir -p "$dir"
  "$bin" ablation --envs CartPole-v1,Pendulum-v1 --variants none,clip=0.2,adaptive_kl=0.01,fixed_kl=1 \
    --seeds 1 --total-timesteps 4096 --jobs 1 --out "$dir/ablation"
  rm -f "$dir/ablation"/*.png
}

lm_case() {
  mkdir -p "$dir"
  "$bin" lm sft --steps 20 --eval-every 10 --run-dir "$dir/sft" -q
  "$bin" lm rm --sft "$dir/sft" --steps 10 --run-dir "$dir/rm" -q
  "$bin" lm grpo --sft "$dir/sft" --steps 3 --prompts 4 --group-size 4 --eval-every 3 --run-dir "$dir/grpo" -q
  "$bin" lm ppo --sft "$dir/sft" --rm "$dir/rm" --steps 3 --prompts 8 --batch-size 4 --freezing-actor-steps 1 \
    --eval-every 3 --run-dir "$dir/ppo" -q
  "$bin" lm ppo --sft "$dir/sft" --rm "$dir/rm" --steps 3 --prompts 8 --batch-size 4 --freezing-actor-steps 1 \
    --kl-target 1 --eval-every 3 --run-dir "$dir/ppo-adaptive" -q
  "$bin" lm eval "$dir/grpo" --prompt 47+85= --prompt 09+91= --json >"$dir/lm_eval_grpo.json"
  "$bin" lm eval "$dir/ppo" --prompt 47+85= --json >"$dir/lm_eval_ppo.json"
}

steps_of() { # a few updates of each preset
  case $1 in
    cleanrl) echo 1536 ;; sb3 | paper-mujoco | trpo) echo 4096 ;; paper-atari) echo 2048 ;; a2c) echo 500 ;; a3c) echo 400 ;;
  esac
}

failed=0
# Since the Nature CNN, paper-atari's policy is CnnPolicy: a REF that has it takes --set policy=MlpPolicy too.
ref_has_cnn=0
git grep -q "PolicyKind::CnnPolicy" "$ref_sha" -- crates/proxima/src 2>/dev/null && ref_has_cnn=1
# A REF whose paper-atari already stops measuring the rollout KL compares with the preset as it is.
ref_has_log_kl=0
git grep -q "log_kl_divergence" "$ref_sha" -- crates/proxima/src 2>/dev/null && ref_has_log_kl=1
t0=$(date +%s)
envs="CartPole-v1 Acrobot-v1 MountainCar-v0 MountainCarContinuous-v0 Pendulum-v1"
for env in $envs; do
  for preset in cleanrl sb3 paper-mujoco paper-atari a2c a3c trpo; do
    extra=()
    [ "$preset" = a3c ] && extra=(--set n_workers=1)
    # paper-atari's network is the Nature CNN; its MLP on these envs is the case compared, with the
    # preset's values of before it took two threads and stopped measuring the rollout KL.
    new_args="" new_only_args=""
    [ "$preset" = paper-atari ] && new_args="--set policy=MlpPolicy --set num_threads=1" \
      && [ "$ref_has_log_kl" = 0 ] && new_only_args="--set log_kl_divergence=true"
    echo "  $env / $preset"
    new_args=$new_args new_only_args=$new_only_args both train_case "$env-$preset" "$env" --preset "$preset" --total-timesteps "$(steps_of $preset)" "${extra[@]}"
  done
done
for obj in adaptive_kl fixed_kl none; do
  echo "  objective $obj"
  both train_case "CartPole-v1-cleanrl-$obj" CartPole-v1 --set objective=$obj --total-timesteps 1536
  both train_case "Pendulum-v1-paper-mujoco-$obj" Pendulum-v1 --preset paper-mujoco --set objective=$obj \
    --total-timesteps 4096
done
echo "  network and normalisation variants"
both train_case CartPole-v1-shared-relu CartPole-v1 --set shared_trunk=true --set activation=relu --total-timesteps 1536
both train_case Pendulum-v1-shared-relu Pendulum-v1 --preset paper-mujoco --set shared_trunk=true \
  --set activation=relu --set ortho_init=false --total-timesteps 4096
both train_case CartPole-v1-target-kl CartPole-v1 --set target_kl=0.002 --set normalize_advantage=batch \
  --total-timesteps 1536
both train_case Acrobot-v1-normalize Acrobot-v1 --set normalize_observation=true --set normalize_reward=true \
  --set anneal_lr=false --seed 7 --total-timesteps 1536
echo "  MultiDiscrete through the bridge"
both bridged_case gym-Targets-multidiscrete gym:same_results_envs:same/Targets-v0 --total-timesteps 1536
echo "  resume"
both resume_case resume-CartPole-v1 CartPole-v1 cleanrl 4096 2 4
both resume_case resume-Pendulum-v1 Pendulum-v1 paper-mujoco 8192 1 2
both resume_case resume-Acrobot-v1-trpo Acrobot-v1 trpo 8192 1 2
echo "  run directories written by the reference, read by each binary"
both old_run_case old-run-CartPole-v1 CartPole-v1-cleanrl resume-CartPole-v1
both old_run_case old-run-Pendulum-v1 Pendulum-v1-paper-mujoco resume-Pendulum-v1
echo "  ablation"
both ablation_case ablation
echo "  lm"
both lm_case lm
t1=$(date +%s)

set +e
{
  echo "bench/same_results.sh (BACKEND=$backend): reference ${ref_sha:0:12} vs current $(git rev-parse --short HEAD)$([ -n "$(git status --porcelain -- crates)" ] && echo ' (+ uncommitted changes)')"
  echo "$(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), runs took $((t1 - t0)) s"
  echo
  python3 bench/same_results.py "$out/ref" "$out/new"
} | tee "$out/report.txt"
status=${PIPESTATUS[0]}
[ $failed -eq 0 ] || { echo "some cases failed to run (see the logs in $out)"; exit 1; }
exit "$status"
