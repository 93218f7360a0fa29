"""A MultiDiscrete toy env for bench/same_results.sh (imported as `same_results_envs:same/Targets-v0`).

Observation: two targets scaled to [0, 1]; action: MultiDiscrete([3, 4]); reward: the number of
components that hit their target; new targets every step; 50 steps per episode. The same task as
the Rust test env in crates/proxima/tests/multidiscrete.rs, written in Python so that every
version of the CLI can train on it through the bridge.
"""
import gymnasium as gym
import numpy as np
from gymnasium import spaces


class Targets(gym.Env):
    def __init__(self):
        self.observation_space = spaces.Box(0.0, 1.0, (2,), np.float32)
        self.action_space = spaces.MultiDiscrete([3, 4])

    def _draw(self):
        self.t = (int(self.np_random.integers(3)), int(self.np_random.integers(4)))
        return np.array([self.t[0] / 2.0, self.t[1] / 3.0], np.float32)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        return self._draw(), {}

    def step(self, action):
        reward = float(int(action[0]) == self.t[0]) + float(int(action[1]) == self.t[1])
        return self._draw(), reward, False, False, {}


gym.register("same/Targets-v0", entry_point=Targets, max_episode_steps=50)
