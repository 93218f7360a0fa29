#!/usr/bin/env python3
"""Learning parity from one script (issue "A Python package with Stable-Baselines3's API"):
Stable-Baselines3's PPO and Proxima's PPO built with the same keyword arguments, 3 seeds each,
both evaluated with SB3's own ``evaluate_policy`` (deterministic, 20 episodes, fresh eval env).

    python bench/python_vs_sb3.py                  # CartPole-v1 100k and Pendulum-v1 200k, seeds 1-3
    python bench/python_vs_sb3.py --envs CartPole-v1 --seeds 1 --out bench-results/py

Needs ``pip install . stable-baselines3`` in the running Python. The hyperparameters are
rl-baselines3-zoo's tuned PPO ones for each env (hyperparams/ppo.yml), except that Pendulum's
``use_sde: True, sde_sample_freq: 4`` are left out on both sides (Proxima has no gSDE yet).
SB3 trains on ``make_vec_env(env, n_envs)``; Proxima on the native env id with ``n_envs``
(stepped in Rust). Prints a Markdown table (returns, wall time of ``learn``, the ratio) and
writes it with the raw numbers to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time


def linear(v: float):
    return lambda progress: progress * v


# rl-baselines3-zoo, hyperparams/ppo.yml ("Tuned"); n_envs and n_timesteps are set per run.
ZOO = {
    "CartPole-v1": dict(n_envs=8, steps=100_000, kwargs=dict(
        n_steps=32, batch_size=256, gae_lambda=0.8, gamma=0.98, n_epochs=20, ent_coef=0.0,
        learning_rate=linear(1e-3), clip_range=linear(0.2))),
    "Pendulum-v1": dict(n_envs=4, steps=200_000, kwargs=dict(
        n_steps=1024, gae_lambda=0.95, gamma=0.9, n_epochs=10, ent_coef=0.0, learning_rate=1e-3,
        clip_range=0.2)),
}


def run(lib: str, env_id: str, seed: int) -> dict:
    import torch
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.evaluation import evaluate_policy

    torch.set_num_threads(1)
    cfg = ZOO[env_id]
    if lib == "sb3":
        from stable_baselines3 import PPO

        model = PPO("MlpPolicy", make_vec_env(env_id, n_envs=cfg["n_envs"], seed=seed), seed=seed, **cfg["kwargs"])
    else:
        import proxima

        model = proxima.PPO("MlpPolicy", env_id, n_envs=cfg["n_envs"], seed=seed, **cfg["kwargs"])
    t0 = time.perf_counter()
    model.learn(cfg["steps"])
    wall = time.perf_counter() - t0
    eval_env = make_vec_env(env_id, n_envs=1, seed=10_000 + seed)
    mean, std = evaluate_policy(model, eval_env, n_eval_episodes=20, deterministic=True)
    return dict(lib=lib, env=env_id, seed=seed, mean=float(mean), std=float(std), learn_s=wall,
                steps=int(model.num_timesteps))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--envs", nargs="+", default=list(ZOO))
    ap.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3])
    ap.add_argument("--out", default="bench-results/python_vs_sb3")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    rows = []
    for env_id in a.envs:
        for seed in a.seeds:
            for lib in ("proxima", "sb3"):  # alternating, so load drifts hit both alike
                r = run(lib, env_id, seed)
                print(json.dumps(r), flush=True)
                rows.append(r)
    load = os.getloadavg()
    lines = [
        f"python_vs_sb3.py on {platform.node()}, {os.cpu_count()} cores, load after {load[0]:.2f}; "
        "SB3 with 1 torch thread; returns: SB3's evaluate_policy, 20 deterministic episodes",
        "",
        "| env | seed | Proxima return | SB3 return | Proxima learn (s) | SB3 learn (s) | SB3 ÷ Proxima |",
        "|---|---|---|---|---|---|---|",
    ]
    for env_id in a.envs:
        for seed in a.seeds:
            p = next(r for r in rows if r["lib"] == "proxima" and r["env"] == env_id and r["seed"] == seed)
            s = next(r for r in rows if r["lib"] == "sb3" and r["env"] == env_id and r["seed"] == seed)
            lines.append(f"| {env_id} | {seed} | {p['mean']:.1f} ± {p['std']:.1f} | {s['mean']:.1f} ± {s['std']:.1f} "
                         f"| {p['learn_s']:.2f} | {s['learn_s']:.1f} | {s['learn_s'] / p['learn_s']:.0f}× |")
        ps = [r["mean"] for r in rows if r["lib"] == "proxima" and r["env"] == env_id]
        ss = [r["mean"] for r in rows if r["lib"] == "sb3" and r["env"] == env_id]
        lines.append(f"| {env_id} | mean | {sum(ps) / len(ps):.1f} | {sum(ss) / len(ss):.1f} | | | |")
    table = "\n".join(lines)
    print(table)
    with open(os.path.join(a.out, "python_vs_sb3.md"), "w") as f:
        f.write(table + "\n")
    with open(os.path.join(a.out, "python_vs_sb3.json"), "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
