"""SB3's PPO with MultiInputPolicy on the Dict-observation test game (toy/KeyDecidesFlat-v0, the bridge
tests' crates/proxima-gym/tests/toy_envs.py: a `cue` key decides which of three actions pays; a Box
of noise and one of levels say nothing), SB3's default hyperparameters, one env: the anchor
of bench/dict_obs_vs_sb3.sh. Deterministic evaluation over 100 episodes. One JSON line per seed."""
import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "crates", "proxima-gym", "tests"))
import gymnasium as gym  # noqa: E402
import toy_envs  # noqa: E402,F401  (registers toy/KeyDecidesFlat-v0)
from stable_baselines3 import PPO  # noqa: E402
from stable_baselines3.common.evaluation import evaluate_policy  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=50_000)
    ap.add_argument("--seeds", type=int, nargs="+", default=[1])
    args = ap.parse_args()
    torch.set_num_threads(1)
    for seed in args.seeds:
        model = PPO("MultiInputPolicy", gym.make("toy/KeyDecidesFlat-v0"), seed=seed, device="cpu")
        t0 = time.perf_counter()
        model.learn(args.steps)
        seconds = time.perf_counter() - t0
        returns, _ = evaluate_policy(model, gym.make("toy/KeyDecidesFlat-v0"), n_eval_episodes=100, deterministic=True,
                                     return_episode_rewards=True, warn=False)
        mean = sum(returns) / len(returns)
        std = (sum((r - mean) ** 2 for r in returns) / len(returns)) ** 0.5
        print(json.dumps({"impl": "sb3", "seed": seed, "steps": args.steps, "train_seconds": seconds,
                          "sps": args.steps / seconds, "eval_mean_return": mean, "eval_std_return": std}), flush=True)


if __name__ == "__main__":
    main()
