"""SB3's PPO with MultiInputPolicy on the Dict-observation test game (toy/KeyDecidesFlat-v0, the bridge
tests' crates/proxima-gym/tests/toy_envs.py: a `cue` key decides which of three actions pays; a Box of
noise and one of levels say nothing), SB3's default hyperparameters, one env: the anchor of
bench/dict_obs_vs_sb3.sh. Deterministic evaluation over 100 episodes. One JSON line per seed."""
import time

import gymnasium as gym
from stable_baselines3 import PPO
from stable_baselines3.common.evaluation import evaluate_policy

from toy_anchor import arguments, report

args = arguments(50_000)
for seed in args.seeds:
    model = PPO("MultiInputPolicy", gym.make("toy/KeyDecidesFlat-v0"), seed=seed, device="cpu")
    t0 = time.perf_counter()
    model.learn(args.steps)
    seconds = time.perf_counter() - t0
    returns, _ = evaluate_policy(model, gym.make("toy/KeyDecidesFlat-v0"), n_eval_episodes=100, deterministic=True,
                                 return_episode_rewards=True, warn=False)
    report("sb3", seed, args.steps, seconds, returns)
