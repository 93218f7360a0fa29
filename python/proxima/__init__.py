"""Proxima: the PPO family in Rust, with Stable-Baselines3's API.

    import proxima
    model = proxima.PPO("MlpPolicy", "CartPole-v1", verbose=1).learn(100_000)
    action, _ = model.predict(obs, deterministic=True)
    model.save("ppo_cartpole")          # ppo_cartpole.safetensors; `proxima eval` reads it too

``PPO``, ``MaskablePPO``, ``RecurrentPPO``, ``A2C``, ``TRPO``, ``SAC``, ``TD3``, ``DDPG`` and ``TQC`` take SB3's (sb3-contrib's) keyword
arguments and defaults; the env
may be a native id (stepped in Rust), any Gymnasium id, env object, list of env factories,
Gymnasium vector env or SB3 VecEnv. See ``help(proxima.PPO)``. ``model.get_env()`` returns it as a
vector env with SB3's ``VecEnv`` API (``proxima.vec_env``); ``proxima.type_aliases`` has SB3's type
aliases (``GymEnv``, ``MaybeCallback``, ``Schedule``, ...).
"""

import os as _os

# candle's matrix products (TRPO, PPG; anything with backend="candle") run on rayon's thread pool, which takes as
# many threads as cores unless told: one, as the CLI's default (num_threads = 1), so that a run is
# reproducible and a busy machine is not oversubscribed (measured: 7.7x slower SAC at load 4
# without it). Set RAYON_NUM_THREADS before importing proxima to choose another number.
_os.environ.setdefault("RAYON_NUM_THREADS", "1")

from ._proxima import CONFIG_KEYS, NATIVE_ENV_IDS, PRESETS, __version__
from .algorithms import A2C, DDPG, PPO, SAC, TD3, TQC, TRPO, BaseAlgorithm, MaskablePPO, RecurrentPPO
from .evaluation import evaluate_policy
from . import callbacks, type_aliases, vec_env

__all__ = [
    "PPO",
    "MaskablePPO",
    "RecurrentPPO",
    "A2C",
    "TRPO",
    "SAC",
    "TD3",
    "DDPG",
    "TQC",
    "BaseAlgorithm",
    "evaluate_policy",
    "callbacks",
    "type_aliases",
    "vec_env",
    "NATIVE_ENV_IDS",
    "PRESETS",
    "CONFIG_KEYS",
    "__version__",
]
