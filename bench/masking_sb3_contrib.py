"""sb3-contrib's MaskablePPO on the masking test game (toy/PickOfTwo-v0, the bridge tests'
crates/proxima-gym/tests/toy_envs.py), SB3's default hyperparameters, one env: the anchor of
bench/masking_vs_sb3_contrib.sh. Evaluates deterministically with masks on the strict variant,
which raises on any masked action, over 100 episodes. One JSON line per seed."""
import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "crates", "proxima-gym", "tests"))
import gymnasium as gym  # noqa: E402
import toy_envs  # noqa: E402,F401  (registers toy/PickOfTwo-v0)
from sb3_contrib import MaskablePPO  # noqa: E402
from sb3_contrib.common.maskable.evaluation import evaluate_policy  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=100_000)
    ap.add_argument("--seeds", type=int, nargs="+", default=[1])
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    for seed in args.seeds:
        model = MaskablePPO("MlpPolicy", gym.make("toy/PickOfTwo-v0"), seed=seed, device="cpu")
        t0 = time.perf_counter()
        model.learn(args.steps)
        seconds = time.perf_counter() - t0
        returns, _ = evaluate_policy(model, gym.make("toy/PickOfTwoStrict-v0"), n_eval_episodes=100,
                                     deterministic=True, use_masking=True, return_episode_rewards=True)
        mean = sum(returns) / len(returns)
        std = (sum((r - mean) ** 2 for r in returns) / len(returns)) ** 0.5
        print(json.dumps({"impl": "sb3-contrib", "seed": seed, "steps": args.steps, "train_seconds": seconds,
                          "sps": args.steps / seconds, "eval_mean_return": mean, "eval_std_return": std}), flush=True)


if __name__ == "__main__":
    main()
