"""Episodes of an exported ONNX policy driven by onnxruntime alone (no Proxima): the returns that
`proxima eval RUN --deterministic --seed S --episodes N` gives for the same policy, env and seeds.

    python bench/onnx_episodes.py policy.onnx HalfCheetah-v5 --episodes 5 --seed 0

Episode i resets the env with seed S + i, as `proxima eval` does. Prints one JSON object."""

from __future__ import annotations

import argparse
import json

import gymnasium as gym
import numpy as np
import onnxruntime as ort


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("onnx")
    p.add_argument("env_id")
    p.add_argument("--episodes", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    session = ort.InferenceSession(a.onnx, providers=["CPUExecutionProvider"])
    env = gym.make(a.env_id)
    returns = []
    for i in range(a.episodes):
        obs, _ = env.reset(seed=a.seed + i)
        total, done = 0.0, False
        while not done:
            action = session.run(["action"], {"obs": np.asarray(obs, np.float32)[None]})[0][0]
            obs, reward, terminated, truncated, _ = env.step(action)
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
    print(json.dumps({"env_id": a.env_id, "episodes": a.episodes, "seed": a.seed, "returns": returns,
                      "mean_return": float(np.mean(returns))}))


if __name__ == "__main__":
    main()
