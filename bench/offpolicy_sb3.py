"""Stable-Baselines3's SAC / TD3 with rl-zoo's Pendulum-v1 hyperparameters, one torch thread (--threads N: N); prints one
JSON object per seed (train_seconds, sps, deterministic evaluation over 20 episodes).

  sac: n_timesteps 20000, lr 1e-3, the rest SB3's SAC defaults (rl-zoo hyperparams/sac.yml)
  td3: n_timesteps 20000, gamma 0.98, buffer_size 200000, learning_starts 10000, normal noise std 0.1,
       lr 1e-3, net_arch [400, 300], train_freq 1, gradient_steps 1 (rl-zoo hyperparams/td3.yml)

HalfCheetah-v5 with rl-zoo's HalfCheetah-v3 values:
  sac: learning_starts 10000, the rest SB3's SAC defaults
  td3: learning_starts 10000, normal noise std 0.1, lr 1e-3, batch_size 256, net_arch [400, 300],
       train_freq 1, gradient_steps 1, the rest SB3's TD3 defaults

tqc (sb3-contrib's TQC): its defaults with SAC's values above (Pendulum lr 1e-3; HalfCheetah 10k random steps).

Usage: python bench/offpolicy_sb3.py --algo sac|td3|tqc --env Pendulum-v1 --steps 20000 --seeds 1 2 3 [--threads 1]"""
import argparse, json, time

import numpy as np
import torch
import gymnasium as gym
from stable_baselines3 import SAC, TD3
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.noise import NormalActionNoise

ap = argparse.ArgumentParser()
ap.add_argument("--algo", choices=["sac", "td3", "tqc"], default="sac")
ap.add_argument("--env", default="Pendulum-v1")
ap.add_argument("--steps", type=int, default=20000)
ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
ap.add_argument("--threads", type=int, default=1)
a = ap.parse_args()
torch.set_num_threads(a.threads)
for seed in a.seeds:
    env = gym.make(a.env)
    n = env.action_space.shape[0]
    noise = NormalActionNoise(np.zeros(n), 0.1 * np.ones(n))
    if a.algo == "tqc":
        from sb3_contrib import TQC  # sb3-contrib's defaults; SAC's Pendulum/HalfCheetah values
        kw = dict(learning_rate=1e-3) if a.env == "Pendulum-v1" else dict(learning_starts=10000)
        model = TQC("MlpPolicy", env, seed=seed, device="cpu", **kw)
    elif a.env == "Pendulum-v1" and a.algo == "sac":
        model = SAC("MlpPolicy", env, learning_rate=1e-3, seed=seed, device="cpu")
    elif a.env == "Pendulum-v1":
        model = TD3("MlpPolicy", env, gamma=0.98, buffer_size=200000, learning_starts=10000,
                    action_noise=noise, learning_rate=1e-3, train_freq=1, gradient_steps=1,
                    policy_kwargs=dict(net_arch=[400, 300]), seed=seed, device="cpu")
    elif a.algo == "sac":
        model = SAC("MlpPolicy", env, learning_starts=10000, seed=seed, device="cpu")
    else:
        model = TD3("MlpPolicy", env, learning_starts=10000, action_noise=noise, learning_rate=1e-3,
                    batch_size=256, train_freq=1, gradient_steps=1, policy_kwargs=dict(net_arch=[400, 300]),
                    seed=seed, device="cpu")
    t0 = time.time()
    model.learn(a.steps)
    secs = time.time() - t0
    mean, std = evaluate_policy(model, gym.make(a.env), n_eval_episodes=20, deterministic=True)
    print(json.dumps({"impl": "sb3", "algo": a.algo, "env": a.env, "seed": seed, "steps": a.steps,
                      "train_seconds": secs, "sps": a.steps / secs, "eval_mean_return": float(mean),
                      "eval_std_return": float(std)}), flush=True)
