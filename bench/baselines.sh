#!/usr/bin/env bash
# Issue 5's benchmarks, Proxima side and SB3 side:
#  1. every algorithm on CartPole-v1, seeds 1-3, deterministic evaluation over 100 episodes
#     (solved = mean return >= 475), with the step budget of each;
#  2. A2C and TRPO against Stable-Baselines3's A2C and sb3-contrib's TRPO with the same
#     hyperparameters (presets a2c / trpo = sb3_baseline.py's a2c/sb3, trpo/sb3), CartPole-v1 and
#     Pendulum-v1, seeds 1-3, STEPS_SB3 steps (default 100000), deterministic evaluation over 20
#     episodes on both sides (the SB3 script's).
#
# Usage: bench/baselines.sh        env vars: PYTHON (a python with stable-baselines3, sb3-contrib,
#        gymnasium; default python3), STEPS_SB3, SEEDS ("1 2 3"),
#        SB3_JSONL (reuse SB3 results already run, one JSON object per line, instead of running SB3).
# Writes bench-results/baselines_cartpole.md and bench-results/baselines_vs_sb3.md.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p proxima-cli
py=${PYTHON:-python3}; seeds=${SEEDS:-1 2 3}; steps_sb3=${STEPS_SB3:-100000}
out=bench-results; mkdir -p "$out/runs"
P="${CARGO_TARGET_DIR:-target}/release/proxima"
row() { python3 -c "import json,sys; e=json.load(open('$1/eval.json')); print(json.dumps({'name':'$2','impl':'proxima','env':e['env_id'],'seed':e['seed'],'steps':e['global_step'],'train_seconds':e['train_seconds'],'sps':e['sps'],'eval_mean_return':e['mean_return'],'eval_std_return':e['std_return']}))"; }

: > "$out/baselines_cartpole.jsonl"
# name | args | steps
while IFS='|' read -r name args steps; do
  for seed in $seeds; do
    dir="$out/runs/CartPole-v1__${name}__${seed}"; rm -rf "$dir"
    $P train CartPole-v1 $args --seed "$seed" --total-timesteps "$steps" --set eval_episodes=100 --run-dir "$dir" --quiet >&2
    row "$dir" "$name" >> "$out/baselines_cartpole.jsonl"
  done
done <<'LIST'
ppo-clip|--preset cleanrl|300000
ppo-adaptive_kl|--preset cleanrl --set objective=adaptive_kl|300000
ppo-fixed_kl|--preset cleanrl --set objective=fixed_kl|300000
ppo-none|--preset cleanrl --set objective=none|300000
a2c|--algo a2c|300000
a3c|--algo a3c --workers 2|300000
trpo|--algo trpo|200000
LIST

: > "$out/baselines_vs_sb3.jsonl"
for env in CartPole-v1 Pendulum-v1; do
  for algo in a2c trpo; do
    for seed in $seeds; do
      dir="$out/runs/${env}__${algo}-vs-sb3__${seed}"; rm -rf "$dir"
      $P train "$env" --algo "$algo" --seed "$seed" --total-timesteps "$steps_sb3" --set eval_episodes=20 --run-dir "$dir" --quiet >&2
      row "$dir" "$algo" >> "$out/baselines_vs_sb3.jsonl"
      if [ -z "${SB3_JSONL:-}" ]; then
        "$py" ../shared/bench/sb3_baseline.py --algo "$algo" --config sb3 --env "$env" --steps "$steps_sb3" --seeds "$seed" \
          | python3 -c "import json,sys; [print(json.dumps(dict(json.loads(l), impl='sb3', name=json.loads(l)['algo']))) for l in sys.stdin if l.startswith('{')]" >> "$out/baselines_vs_sb3.jsonl"
      fi
    done
  done
done
if [ -n "${SB3_JSONL:-}" ]; then
  python3 -c "import json,sys; [print(json.dumps(dict(json.loads(l), impl='sb3', name=json.loads(l)['algo']))) for l in open(sys.argv[1]) if l.startswith('{')]" "$SB3_JSONL" >> "$out/baselines_vs_sb3.jsonl"
fi

python3 - "$out" <<'PY'
import json, sys, statistics as st
out = sys.argv[1]
rows = [json.loads(l) for l in open(f"{out}/baselines_cartpole.jsonl")]
with open(f"{out}/baselines_cartpole.md", "w") as f:
    import csv
    def first_solved(name, seed):
        for row in csv.DictReader(open(f"{out}/runs/CartPole-v1__{name}__{seed}/progress.csv")):
            m = row["ep_return_mean"]
            if m and m != "NaN" and float(m) >= 475:
                return int(row["global_step"])
        return None
    f.write("| algorithm | budget (steps) | final eval, seeds 1 / 2 / 3 | final mean | final ≥ 475 | first step with a 100-episode training mean ≥ 475, seeds 1 / 2 / 3 | wall (s) per run |\n|---|---|---|---|---|---|---|\n")
    for name in dict.fromkeys(r["name"] for r in rows):
        rs = sorted((r for r in rows if r["name"] == name), key=lambda r: r["seed"])
        m = st.mean(r["eval_mean_return"] for r in rs)
        cells = " / ".join(f"{r['eval_mean_return']:.1f}" for r in rs)
        solved = sum(r["eval_mean_return"] >= 475 for r in rs)
        firsts = " / ".join(f"{x // 1000}k" if (x := first_solved(name, r["seed"])) else "never" for r in rs)
        f.write(f"| {name} | {rs[0]['steps']} | {cells} | {m:.1f} | {solved} of {len(rs)} | {firsts} | {st.mean(r['train_seconds'] for r in rs):.0f} |\n")
rows = [json.loads(l) for l in open(f"{out}/baselines_vs_sb3.jsonl")]
with open(f"{out}/baselines_vs_sb3.md", "w") as f:
    f.write("| env | algorithm | seed | Proxima return | Proxima wall (s) / SPS | SB3 return | SB3 wall (s) / SPS |\n|---|---|---|---|---|---|---|\n")
    for env in dict.fromkeys(r["env"] for r in rows if r["impl"] == "proxima"):
        for name in ("a2c", "trpo"):
            for seed in sorted({r["seed"] for r in rows if r["env"] == env}):
                p = next((r for r in rows if r["impl"] == "proxima" and r["env"] == env and r["name"] == name and r["seed"] == seed), None)
                s = next((r for r in rows if r["impl"] == "sb3" and r["env"] == env and r["name"] == name and r["seed"] == seed), None)
                if p is None:
                    continue
                sb = f"{s['eval_mean_return']:.1f} ± {s['eval_std_return']:.1f} | {s['train_seconds']:.0f} / {s['sps']:.0f}" if s else "not run | -"
                f.write(f"| {env} | {name.upper()} | {seed} | {p['eval_mean_return']:.1f} ± {p['eval_std_return']:.1f} | {p['train_seconds']:.0f} / {p['sps']:.0f} | {sb} |\n")
print(open(f"{out}/baselines_cartpole.md").read()); print(open(f"{out}/baselines_vs_sb3.md").read())
PY
