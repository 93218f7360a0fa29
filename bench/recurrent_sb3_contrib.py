"""sb3-contrib's RecurrentPPO (MlpLstmPolicy) on CartPole-v1 with its velocities hidden
(toy/CartPoleNoVel-v1, crates/proxima-gym/tests/toy_envs.py): the anchor of
bench/recurrent_vs_sb3_contrib.sh, with the settings that script gives Proxima. Deterministic
evaluation over 20 episodes carrying the LSTM state. One JSON line per seed."""
import time

import gymnasium as gym
from sb3_contrib import RecurrentPPO
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy

from toy_anchor import arguments, report

SETTINGS = dict(n_steps=32, batch_size=256, n_epochs=10, learning_rate=1e-3, gamma=0.98, gae_lambda=0.8,
                ent_coef=0.0, policy_kwargs=dict(lstm_hidden_size=64, net_arch=[64]))

args = arguments(100_000)
for seed in args.seeds:
    env = make_vec_env("toy/CartPoleNoVel-v1", n_envs=8, seed=seed)
    model = RecurrentPPO("MlpLstmPolicy", env, seed=seed, device="cpu", **SETTINGS)
    t0 = time.perf_counter()
    model.learn(args.steps)
    seconds = time.perf_counter() - t0
    returns, _ = evaluate_policy(model, gym.make("toy/CartPoleNoVel-v1"), n_eval_episodes=20, deterministic=True,
                                 return_episode_rewards=True, warn=False)
    report("sb3-contrib", seed, args.steps, seconds, returns)
