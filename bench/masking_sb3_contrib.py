"""sb3-contrib's MaskablePPO on the masking test game (toy/PickOfTwo-v0, the bridge tests'
crates/proxima-gym/tests/toy_envs.py), SB3's default hyperparameters, one env: the anchor of
bench/masking_vs_sb3_contrib.sh. Evaluates deterministically with masks on the strict variant,
which raises on any masked action, over 100 episodes. One JSON line per seed."""
import time

import gymnasium as gym
from sb3_contrib import MaskablePPO
from sb3_contrib.common.maskable.evaluation import evaluate_policy

from toy_anchor import arguments, report

args = arguments(100_000)
for seed in args.seeds:
    model = MaskablePPO("MlpPolicy", gym.make("toy/PickOfTwo-v0"), seed=seed, device="cpu")
    t0 = time.perf_counter()
    model.learn(args.steps)
    seconds = time.perf_counter() - t0
    returns, _ = evaluate_policy(model, gym.make("toy/PickOfTwoStrict-v0"), n_eval_episodes=100, deterministic=True,
                                 use_masking=True, return_episode_rewards=True, warn=False)
    report("sb3-contrib", seed, args.steps, seconds, returns)
