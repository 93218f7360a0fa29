"""Type aliases of the public API, with Stable-Baselines3's names (``stable_baselines3.common.type_aliases``)
where SB3 has one: ``GymEnv``, ``GymObs``, ``MaybeCallback``, ``Schedule``, ``PolicyPredictor``.

Proxima's own: ``EnvLike`` (everything an algorithm's ``env`` may be: SB3's ``Union[GymEnv, str]`` and
lists of envs or env factories), ``EnvFactory``, ``VecEnvLike`` (the structural type of an SB3 ``VecEnv``:
SB3's own class needs torch to import, so any object with its methods is one here), ``ActionNoise`` (SB3's
``NormalActionNoise`` and anything shaped like it) and ``TrainFreq`` (``train_freq``'s int or tuple).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable, Optional, Protocol, Sequence, Union, runtime_checkable

import gymnasium as gym
import numpy as np

if TYPE_CHECKING:  # the callbacks module imports nothing from here, but keep the import graph one-way
    from .callbacks import BaseCallback

__all__ = [
    "ActionNoise",
    "EnvFactory",
    "EnvLike",
    "GymEnv",
    "GymObs",
    "MaybeCallback",
    "PolicyPredictor",
    "PolicyType",
    "Schedule",
    "TrainFreq",
    "VecEnvIndices",
    "VecEnvLike",
    "VecEnvObs",
    "VecEnvStepReturn",
]

#: SB3's: which envs of a vector env a call is for (``None``: all).
VecEnvIndices = Union[None, int, Iterable[int]]
#: SB3's: the observations of all envs, as ``VecEnv.reset`` and ``step`` return them.
VecEnvObs = Union[np.ndarray, dict[str, np.ndarray], tuple[np.ndarray, ...]]
#: SB3's: what ``VecEnv.step`` returns: ``(obs, rewards, dones, infos)``.
VecEnvStepReturn = tuple[VecEnvObs, np.ndarray, np.ndarray, list[dict[str, Any]]]


@runtime_checkable
class VecEnvLike(Protocol):
    """What an SB3 ``VecEnv`` offers (``DummyVecEnv``, ``SubprocVecEnv``, ``proxima.vec_env.DummyVecEnv``):
    ``reset() -> obs``, ``step(actions) -> (obs, rewards, dones, infos)``, ``step_async``/``step_wait``,
    ``env_method``, ``get_attr``, ``close``, and ``num_envs``, ``observation_space``, ``action_space``."""

    num_envs: int
    observation_space: gym.spaces.Space
    action_space: gym.spaces.Space

    def reset(self) -> VecEnvObs: ...
    def step_async(self, actions: np.ndarray) -> None: ...
    def step_wait(self) -> VecEnvStepReturn: ...
    def step(self, actions: np.ndarray) -> VecEnvStepReturn: ...
    def env_method(self, method_name: str, *method_args: Any, indices: VecEnvIndices = None,
                   **method_kwargs: Any) -> list[Any]: ...
    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]: ...
    def close(self) -> None: ...


# SB3's GymEnv is Union[gym.Env, VecEnv]; Proxima trains on a Gymnasium vector env as well.
GymEnv = Union[gym.Env, gym.vector.VectorEnv, VecEnvLike]
#: A function that makes a new env each call (SB3's ``env_fns``, ``make_vec_env``'s ``env_id`` callable).
EnvFactory = Callable[[], gym.Env]
#: What an algorithm's ``env`` may be: an id (native, Gymnasium, ``gym:ID``, ``atari:GAME``), an env, a
#: vector env, an env factory, or a list of envs or factories.
EnvLike = Union[GymEnv, str, EnvFactory, Sequence[Union[gym.Env, EnvFactory]]]
#: SB3's: an observation as an env returns it.
GymObs = Union[tuple, dict[str, Any], np.ndarray, int]
#: SB3's: a callback, a list of them, or a function ``f(locals, globals) -> bool``.
MaybeCallback = Union[None, Callable[[dict[str, Any], dict[str, Any]], bool], list["BaseCallback"], "BaseCallback"]
#: SB3's: a schedule takes the remaining progress (1 at the start of ``learn``, 0 at its end) and gives a
#: value (learning rate, clip range).
Schedule = Callable[[float], float]
#: ``policy``: a name (``"MlpPolicy"``, ``"CnnPolicy"``) or a class whose ``__name__`` is one.
PolicyType = Union[str, type]
#: ``train_freq``: a number of steps, or SB3's ``(n, "step")`` / ``(n, "episode")``.
TrainFreq = Union[int, tuple[int, str]]


@runtime_checkable
class ActionNoise(Protocol):
    """SB3's ``ActionNoise`` (``NormalActionNoise(mean, sigma)``): called for one noise sample."""

    def __call__(self) -> np.ndarray: ...
    def reset(self) -> None: ...


@runtime_checkable
class PolicyPredictor(Protocol):
    """SB3's: anything with ``predict`` (a Proxima or SB3 model), as ``evaluate_policy`` takes it."""

    def predict(
        self,
        observation: Union[np.ndarray, dict[str, np.ndarray]],
        state: Optional[tuple[np.ndarray, ...]] = None,
        episode_start: Optional[np.ndarray] = None,
        deterministic: bool = False,
    ) -> tuple[np.ndarray, Optional[tuple[np.ndarray, ...]]]: ...
