"""What the SB3 / sb3-contrib anchors of the toy-env benchmarks share (bench/masking_vs_sb3_contrib.sh,
bench/dict_obs_vs_sb3.sh, bench/recurrent_vs_sb3_contrib.sh): the bridge tests' toy envs on the path,
the command line (--steps, --seeds), one thread for torch, and one JSON line per seed."""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "crates", "proxima-gym", "tests"))
import toy_envs  # noqa: E402,F401  (registers the toy/... ids)


def arguments(default_steps: int) -> argparse.Namespace:
    """`--steps` and `--seeds`; torch on one thread (the other side gets the other core)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=default_steps)
    ap.add_argument("--seeds", type=int, nargs="+", default=[1])
    torch.set_num_threads(1)
    return ap.parse_args()


def report(impl: str, seed: int, steps: int, seconds: float, returns: list[float]) -> None:
    """One JSON line: training time, steps per second, the evaluation's mean and std."""
    mean = sum(returns) / len(returns)
    std = (sum((r - mean) ** 2 for r in returns) / len(returns)) ** 0.5
    print(json.dumps({"impl": impl, "seed": seed, "steps": steps, "train_seconds": seconds, "sps": steps / seconds,
                      "eval_mean_return": mean, "eval_std_return": std}), flush=True)
