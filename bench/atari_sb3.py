"""Stable-Baselines3's PPO with CnnPolicy on an Atari game, the paper-atari values (Schulman et al.
2017, Table 5, as Proxima's `paper-atari` preset): SB3's make_atari_env (AtariWrapper) on
`<Game>NoFrameskip-v4`, 8 envs in a DummyVecEnv, VecFrameStack(4), T 128, K 3, minibatch 256,
lr 2.5e-4 annealed, eps 0.1, c1 1, c2 0.01, max_grad_norm 0.5. One torch thread unless
TORCH_THREADS says otherwise (`default`: torch's own choice, every core). Prints one JSON line: steps, seconds of learn(), SPS, and the mean
game score of the last 100 finished games (Monitor under AtariWrapper: the real score) and the
number of games finished."""
import argparse, json, os, time

import gymnasium as gym
import ale_py
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_atari_env
from stable_baselines3.common.vec_env import VecFrameStack

gym.register_envs(ale_py)
ap = argparse.ArgumentParser()
ap.add_argument("--game", default="Breakout")
ap.add_argument("--steps", type=int, default=100_000)
ap.add_argument("--seed", type=int, default=1)
a = ap.parse_args()
threads = os.environ.get("TORCH_THREADS", "1")
if threads != "default":
    torch.set_num_threads(int(threads))
env = VecFrameStack(make_atari_env(f"{a.game}NoFrameskip-v4", n_envs=8, seed=a.seed), n_stack=4)
lin = lambda v: (lambda f: f * v)
model = PPO("CnnPolicy", env, n_steps=128, batch_size=256, n_epochs=3, learning_rate=lin(2.5e-4),
            clip_range=0.1, vf_coef=1.0, ent_coef=0.01, max_grad_norm=0.5, seed=a.seed, device="cpu", verbose=0)
t0 = time.time()
model.learn(a.steps)
dt = time.time() - t0
scores = [e["r"] for e in model.ep_info_buffer]
games = sum(len(r) for r in env.env_method("get_episode_rewards"))  # every Monitor's, not the last 100
print(json.dumps({"impl": "sb3", "game": a.game, "steps": model.num_timesteps, "train_seconds": dt,
                  "sps": model.num_timesteps / dt, "torch_threads": torch.get_num_threads(),
                  "last100_game_score": sum(scores) / max(len(scores), 1), "games": games}))
