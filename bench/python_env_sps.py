"""Steps a Gymnasium env with `action_space.sample()` in plain Python and prints steps per second,
for comparison with `proxima bench-env ID` (native) and `proxima bench-env gym:ID` (the bridge).

Usage: python bench/python_env_sps.py ENV_ID [STEPS]
"""
import sys
import time

import gymnasium as gym

env_id, steps = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 100_000
env = gym.make(env_id)
env.action_space.seed(0)
env.reset(seed=0)
t = time.perf_counter()
episodes = 0
for _ in range(steps):
    _, _, terminated, truncated, _ = env.step(env.action_space.sample())
    if terminated or truncated:
        env.reset()
        episodes += 1
dt = time.perf_counter() - t
print(f"{env_id} (plain Python): {steps} random steps ({episodes} episodes) in {dt:.2f} s: {steps / dt:.0f} steps/s")
