"""sb3-contrib's RecurrentPPO (MlpLstmPolicy) on a toy memory task (crates/proxima-gym/tests/toy_envs.py):
CartPole-v1 with its velocities hidden (toy/CartPoleNoVel-v1) or a cue shown once and asked for three
steps later (toy/Cue-v0). The anchor of bench/recurrent_vs_sb3_contrib.sh, with the settings that script
gives Proxima (TASKS below). Deterministic evaluation carrying the LSTM state. One JSON line per seed."""
import os
import time

import gymnasium as gym
from sb3_contrib import RecurrentPPO
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy

from toy_anchor import arguments, report

#: Per task: the env id, RecurrentPPO's settings, evaluation episodes (bench/recurrent_vs_sb3_contrib.sh's).
TASKS = {
    "CartPoleNoVel": ("toy/CartPoleNoVel-v1", dict(gamma=0.98, gae_lambda=0.8, ent_coef=0.0,
                                                   policy_kwargs=dict(lstm_hidden_size=64, net_arch=[64])), 20),
    "Cue": ("toy/Cue-v0", dict(gamma=0.99, gae_lambda=0.95, ent_coef=0.01,
                               policy_kwargs=dict(lstm_hidden_size=32, net_arch=[32])), 100),
}
COMMON = dict(n_steps=32, batch_size=256, n_epochs=10, learning_rate=1e-3)

env_id, settings, episodes = TASKS[os.environ.get("TASK", "CartPoleNoVel")]
args = arguments(100_000)
for seed in args.seeds:
    env = make_vec_env(env_id, n_envs=8, seed=seed)
    model = RecurrentPPO("MlpLstmPolicy", env, seed=seed, device="cpu", **COMMON, **settings)
    t0 = time.perf_counter()
    model.learn(args.steps)
    seconds = time.perf_counter() - t0
    returns, _ = evaluate_policy(model, gym.make(env_id), n_eval_episodes=episodes, deterministic=True,
                                 return_episode_rewards=True, warn=False)
    report("sb3-contrib", seed, args.steps, seconds, returns)
