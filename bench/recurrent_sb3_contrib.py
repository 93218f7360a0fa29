"""sb3-contrib's RecurrentPPO (MlpLstmPolicy) on CartPole-v1 with its velocities hidden
(toy/CartPoleNoVel-v1, crates/proxima-gym/tests/toy_envs.py): the anchor of
bench/recurrent_vs_sb3_contrib.sh, with the settings that script gives Proxima. Deterministic
evaluation over 20 episodes carrying the LSTM state. One JSON line per seed."""
import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "crates", "proxima-gym", "tests"))
import gymnasium as gym  # noqa: E402
import toy_envs  # noqa: E402,F401  (registers toy/CartPoleNoVel-v1)
from sb3_contrib import RecurrentPPO  # noqa: E402
from stable_baselines3.common.env_util import make_vec_env  # noqa: E402
from stable_baselines3.common.evaluation import evaluate_policy  # noqa: E402

SETTINGS = dict(n_steps=32, batch_size=256, n_epochs=10, learning_rate=1e-3, gamma=0.98, gae_lambda=0.8,
                ent_coef=0.0, policy_kwargs=dict(lstm_hidden_size=64, net_arch=[64]))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=100_000)
    ap.add_argument("--seeds", type=int, nargs="+", default=[1])
    args = ap.parse_args()
    torch.set_num_threads(1)
    for seed in args.seeds:
        env = make_vec_env("toy/CartPoleNoVel-v1", n_envs=8, seed=seed)
        model = RecurrentPPO("MlpLstmPolicy", env, seed=seed, device="cpu", **SETTINGS)
        t0 = time.perf_counter()
        model.learn(args.steps)
        seconds = time.perf_counter() - t0
        returns, _ = evaluate_policy(model, gym.make("toy/CartPoleNoVel-v1"), n_eval_episodes=20, deterministic=True,
                                     return_episode_rewards=True, warn=False)
        mean = sum(returns) / len(returns)
        std = (sum((r - mean) ** 2 for r in returns) / len(returns)) ** 0.5
        print(json.dumps({"impl": "sb3-contrib", "seed": seed, "steps": args.steps, "train_seconds": seconds,
                          "sps": args.steps / seconds, "eval_mean_return": mean, "eval_std_return": std}), flush=True)


if __name__ == "__main__":
    main()
