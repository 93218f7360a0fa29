"""RecurrentPPO with every default (sb3-contrib's docs example: ``MlpLstmPolicy`` on CartPole-v1, a 256-unit LSTM,
n_steps 128, batch 128, 10 epochs, one env), Proxima's and sb3-contrib's one after the other in this process's
machine, one thread each: whole-``learn`` wall time and SPS, and the deterministic return over 10 episodes.

    python bench/recurrent_defaults.py [STEPS]   # 5000 by default

Prints one JSON line per library."""

from __future__ import annotations

import json
import sys
import time

import gymnasium as gym
import numpy as np


def evaluate(model, episodes: int = 10) -> float:
    env = gym.make("CartPole-v1")
    returns = []
    for i in range(episodes):
        obs, _ = env.reset(seed=100 + i)
        state, start, total, done = None, np.ones((1,), bool), 0.0, False
        while not done:
            action, state = model.predict(obs, state=state, episode_start=start, deterministic=True)
            obs, reward, terminated, truncated, _ = env.step(int(action))
            total, start, done = total + reward, np.zeros((1,), bool), terminated or truncated
        returns.append(total)
    return float(np.mean(returns))


def main() -> None:
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
    import torch

    torch.set_num_threads(1)
    import proxima
    import sb3_contrib

    for name, cls in (("proxima", proxima.RecurrentPPO), ("sb3-contrib", sb3_contrib.RecurrentPPO)):
        model = cls("MlpLstmPolicy", "CartPole-v1", seed=1)
        start = time.perf_counter()
        model.learn(steps)
        seconds = time.perf_counter() - start
        print(json.dumps({"impl": name, "steps": steps, "seconds": round(seconds, 2), "sps": round(steps / seconds, 1),
                          "eval_mean_return": evaluate(model)}), flush=True)


if __name__ == "__main__":
    main()
