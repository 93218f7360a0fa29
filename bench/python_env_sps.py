"""Steps a Gymnasium env with `action_space.sample()` in plain Python and prints steps per second,
for comparison with `proxima bench-env ID` (native) and `proxima bench-env gym:ID` (the bridge).
With `--vector sync|async N`, steps N copies as one `SyncVectorEnv` / `AsyncVectorEnv` (same-step
autoreset, as Proxima's `vector_env` modes use them) and counts every env's steps: how fast
Gymnasium's own vector envs can go on this machine, with no policy and no bridge.

Usage: python bench/python_env_sps.py ENV_ID [STEPS] [--vector sync|async N]
"""
import argparse
import time

import gymnasium as gym

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("env_id")
parser.add_argument("steps", nargs="?", type=int, default=100_000, help="env steps in all (default 100000)")
parser.add_argument("--vector", nargs=2, metavar=("MODE", "N"), help="sync or async, and the number of envs")
args = parser.parse_args()
if args.steps < 1:
    parser.error("STEPS must be at least 1")


MAX_ENVS = 64  # each AsyncVectorEnv env is a process of its own


def make(env_id):
    """gym.make, its errors (an unknown id, a missing extra) as a one-line exit instead of a traceback."""
    try:
        return gym.make(env_id)
    except (gym.error.Error, ImportError, ModuleNotFoundError) as e:
        raise SystemExit(f"error: cannot make {env_id!r}: {e}")


def single(env_id, steps):
    env = make(env_id)
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
    env.close()
    print(f"{env_id} (plain Python): {steps} random steps ({episodes} episodes) in {dt:.2f} s: {steps / dt:.0f} steps/s")


def vector(env_id, steps, mode, n):
    kinds = {"sync": gym.vector.SyncVectorEnv, "async": gym.vector.AsyncVectorEnv}
    if mode not in kinds or not 1 <= n <= MAX_ENVS:
        parser.error(f"--vector takes sync or async and a number of envs from 1 to {MAX_ENVS}, got {mode} {n}")
    if steps < n:
        parser.error(f"STEPS ({steps}) must be at least the number of envs ({n}): each vector step steps them all")
    make(env_id).close()  # a bad id fails here, once, not in every worker
    same_step = gym.vector.AutoresetMode.SAME_STEP
    envs = kinds[mode]([lambda: gym.make(env_id) for _ in range(n)], autoreset_mode=same_step)
    envs.action_space.seed(0)
    envs.reset(seed=0)
    calls = steps // n
    t = time.perf_counter()
    for _ in range(calls):
        envs.step(envs.action_space.sample())
    dt = time.perf_counter() - t
    envs.close()
    print(
        f"{env_id} ({mode} vector env of {n}, plain Python): {calls * n} random steps in {dt:.2f} s: "
        f"{calls * n / dt:.0f} steps/s, {dt / calls * 1e6:.0f} µs per step of all {n}"
    )


if args.vector:
    mode, n = args.vector[0], args.vector[1]
    if not n.isdigit():
        parser.error(f"--vector N must be a number of envs, got {n!r}")
    vector(args.env_id, args.steps, mode, int(n))
else:
    single(args.env_id, args.steps)
