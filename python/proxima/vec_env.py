"""Vector envs with Stable-Baselines3's ``VecEnv`` API, for ``model.get_env()`` (SB3 is not needed).

* ``VecEnv``: SB3's base class: ``reset() -> obs`` (batched), ``step(actions) -> (obs, rewards, dones,
  infos)`` with automatic reset (``infos[i]["terminal_observation"]``, ``infos[i]["TimeLimit.truncated"]``),
  ``seed`` (applied at the next ``reset``), ``set_options``, ``render``, ``get_attr``, ``set_attr``,
  ``env_method``, ``env_is_wrapped``, ``step_async``/``step_wait``, ``close``.
* ``DummyVecEnv(env_fns)``: SB3's, over Gymnasium envs stepped one after another in this process.
* ``GymnasiumVecEnv(venv)``: a Gymnasium ``VectorEnv`` (any autoreset mode) behind SB3's API.

These follow ``stable_baselines3/common/vec_env/base_vec_env.py`` and ``dummy_vec_env.py`` (SB3 2.x);
given the same envs and seeds they return the same observations, rewards, dones and infos.
"""

from __future__ import annotations

import sys
import warnings
from copy import deepcopy
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence, Union

import gymnasium as gym
import numpy as np

from .type_aliases import VecEnvIndices, VecEnvObs, VecEnvStepReturn

if TYPE_CHECKING:
    from .type_aliases import EnvLike, VecEnvLike

__all__ = ["VecEnv", "DummyVecEnv", "GymnasiumVecEnv", "VecEnvIndices", "VecEnvObs", "VecEnvStepReturn"]


def tile_images(images_nhwc: Sequence[np.ndarray]) -> np.ndarray:
    """N images ``(H, W, C)`` tiled into one as close to square as may be (SB3's ``tile_images``)."""
    img_nhwc = np.asarray(images_nhwc)
    n_images, height, width, n_channels = img_nhwc.shape
    new_height = int(np.ceil(np.sqrt(n_images)))
    new_width = int(np.ceil(float(n_images) / new_height))
    img_nhwc = np.array(list(img_nhwc) + [img_nhwc[0] * 0 for _ in range(n_images, new_height * new_width)])
    out = img_nhwc.reshape((new_height, new_width, height, width, n_channels)).transpose(0, 2, 1, 3, 4)
    return out.reshape((new_height * height, new_width * width, n_channels))


def is_wrapped(env: gym.Env, wrapper_class: type) -> bool:
    """Whether ``env`` is wrapped, at any depth, in ``wrapper_class`` (SB3's ``env_util.is_wrapped``)."""
    layer = env
    while isinstance(layer, gym.Wrapper):
        if isinstance(layer, wrapper_class):
            return True
        layer = layer.env
    return False


class VecEnv:
    """SB3's abstract vector env: ``num_envs`` envs stepped together (see the module docs).

    :param num_envs: Number of environments
    :param observation_space: Observation space (of one env)
    :param action_space: Action space (of one env)
    """

    def __init__(self, num_envs: int, observation_space: gym.spaces.Space, action_space: gym.spaces.Space):
        _register_with_sb3()
        self.num_envs = num_envs
        self.observation_space = observation_space
        self.action_space = action_space
        self.reset_infos: list[dict[str, Any]] = [{} for _ in range(num_envs)]
        self._seeds: list[Optional[int]] = [None for _ in range(num_envs)]
        self._options: list[dict[str, Any]] = [{} for _ in range(num_envs)]
        try:
            render_modes = self.get_attr("render_mode")
        except AttributeError:
            render_modes = [None for _ in range(num_envs)]
        if any(mode != render_modes[0] for mode in render_modes):
            raise ValueError(f"the envs' render_mode differ ({render_modes}): it must be the same for all")
        self.render_mode: Optional[str] = render_modes[0]
        modes = ["human", "rgb_array"] if self.render_mode == "rgb_array" else [self.render_mode] if self.render_mode else []
        self.metadata: dict[str, Any] = {"render_modes": modes}

    # --- what each kind implements -----------------------------------------------------------
    def reset(self) -> VecEnvObs:
        """Resets every env (with the seeds and options set since the last reset) and returns the
        batched observations (no infos: they are in ``reset_infos``)."""
        raise NotImplementedError

    def step_async(self, actions: np.ndarray) -> None:
        """Tells the envs to take a step with ``actions`` (one per env); ``step_wait`` gives the result."""
        raise NotImplementedError

    def step_wait(self) -> VecEnvStepReturn:
        """The result of the step started by ``step_async``: ``(obs, rewards, dones, infos)``."""
        raise NotImplementedError

    def close(self) -> None:
        """Closes the envs."""
        raise NotImplementedError

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        """The attribute ``attr_name`` of each env in ``indices`` (all when ``None``)."""
        raise NotImplementedError

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        """Sets the attribute ``attr_name`` of each env in ``indices`` to ``value``."""
        raise NotImplementedError

    def env_method(self, method_name: str, *method_args: Any, indices: VecEnvIndices = None,
                   **method_kwargs: Any) -> list[Any]:
        """Calls the method ``method_name`` of each env in ``indices``; the results in a list."""
        raise NotImplementedError

    def env_is_wrapped(self, wrapper_class: type, indices: VecEnvIndices = None) -> list[bool]:
        """For each env in ``indices``: whether it is wrapped in ``wrapper_class``."""
        raise NotImplementedError

    def get_images(self) -> Sequence[Optional[np.ndarray]]:
        """Each env's ``render()`` image (``render_mode="rgb_array"``)."""
        raise NotImplementedError

    # --- shared -----------------------------------------------------------------------------
    def step(self, actions: np.ndarray) -> VecEnvStepReturn:
        """Steps every env with its action: ``(obs, rewards, dones, infos)``. An env whose episode
        ended is reset at once: ``obs`` holds its new episode's first observation, and
        ``infos[i]["terminal_observation"]`` the last one of the ended episode;
        ``infos[i]["TimeLimit.truncated"]`` says whether it ended by a time limit (truncated and not
        terminated)."""
        self.step_async(actions)
        return self.step_wait()

    def seed(self, seed: Optional[int] = None) -> Sequence[Optional[int]]:
        """Seeds env ``i`` with ``seed + i`` at the next ``reset`` (as SB3 since Gymnasium: not at once);
        ``None``: a random seed. Returns the seeds."""
        if seed is None:
            seed = int(np.random.randint(0, np.iinfo(np.uint32).max, dtype=np.uint32))
        self._seeds = [seed + i for i in range(self.num_envs)]
        return self._seeds

    def set_options(self, options: Union[list[dict], dict, None] = None) -> None:
        """Options for each env's next ``reset`` (one dict for all, or one per env)."""
        options = {} if options is None else options
        self._options = deepcopy([options] * self.num_envs if isinstance(options, dict) else list(options))

    def has_attr(self, attr_name: str) -> bool:
        """Whether every env has the attribute ``attr_name``."""
        try:
            self.get_attr(attr_name)
            return True
        except AttributeError:
            return False

    def render(self, mode: Optional[str] = None) -> Optional[np.ndarray]:
        """Renders the envs as SB3 does: with ``render_mode="rgb_array"`` the images tiled into one
        (returned; ``mode="human"`` shows it with OpenCV), with ``"human"`` each env's own window."""
        if mode == "human" and self.render_mode != mode and self.render_mode != "rgb_array":
            warnings.warn(f"render(mode='human') needs envs made with render_mode 'human' or 'rgb_array', "
                          f"not {self.render_mode!r}")
            return None
        if mode and mode != "human" and self.render_mode != mode:
            warnings.warn(f"render(mode={mode!r}): the envs were made with render_mode={self.render_mode!r}; "
                          "Gymnasium fixes the render mode when an env is made")
            return None
        mode = mode or self.render_mode
        if mode is None:
            warnings.warn("You tried to call render() but no `render_mode` was passed to the env constructor.")
            return None
        if self.render_mode == "human" or mode not in ("human", "rgb_array"):
            self.env_method("render")
            return None
        image = tile_images(self.get_images())  # type: ignore[arg-type]
        if mode == "rgb_array":
            return image
        import cv2  # as SB3: opencv shows an rgb_array env's frames in "human" mode

        cv2.imshow("vecenv", image[:, :, ::-1])
        cv2.waitKey(1)
        return None

    @property
    def unwrapped(self) -> "VecEnv":
        return self

    def _reset_seeds(self) -> None:
        self._seeds = [None for _ in range(self.num_envs)]

    def _reset_options(self) -> None:
        self._options = [{} for _ in range(self.num_envs)]

    def _get_indices(self, indices: VecEnvIndices) -> list[int]:
        if indices is None:
            return list(range(self.num_envs))
        if isinstance(indices, (int, np.integer)):
            return [int(indices)]
        return [int(i) for i in indices]

    def __repr__(self) -> str:
        return f"<{type(self).__name__} num_envs={self.num_envs} observation_space={self.observation_space}>"


def _register_with_sb3() -> None:
    """Makes Proxima's vector envs count as SB3's ``VecEnv`` (``isinstance``, an ABC's virtual subclass), so SB3's
    own helpers — ``evaluate_policy(model, model.get_env())`` — take them as vector envs: they have its API. Only
    when SB3 is already imported (importing it here would load torch for users who have no use for it)."""
    base = sys.modules.get("stable_baselines3.common.vec_env.base_vec_env")
    if base is not None and not issubclass(VecEnv, base.VecEnv):
        base.VecEnv.register(VecEnv)


class _StructuredBuffer:
    """SB3's ``DummyVecEnv`` buffers of a ``Dict`` (or ``Tuple``) observation: one ``[n, *shape]`` array per
    key, nested as the space is; ``copy()`` gives the batch as SB3's VecEnvs return it (a dict of arrays,
    or a tuple)."""

    def __init__(self, space: gym.spaces.Space, n: int):
        items = space.spaces.items() if isinstance(space, gym.spaces.Dict) else enumerate(space.spaces)
        self.parts = {k: _obs_buffer(s, n) for k, s in items}
        self.is_dict = isinstance(space, gym.spaces.Dict)

    def __setitem__(self, i: int, obs: Any) -> None:
        for k, part in self.parts.items():
            part[i] = obs[k]

    def copy(self) -> Any:
        parts = {k: part.copy() for k, part in self.parts.items()}
        return parts if self.is_dict else tuple(parts.values())


def _obs_buffer(space: gym.spaces.Space, n: int) -> Any:
    if isinstance(space, (gym.spaces.Dict, gym.spaces.Tuple)):
        return _StructuredBuffer(space, n)
    return np.zeros((n, *tuple(space.shape or ())), dtype=space.dtype)


class DummyVecEnv(VecEnv):
    """SB3's ``DummyVecEnv``: the envs made by ``env_fns`` (one call each), stepped one after another in
    this process.

    :param env_fns: functions that each return a new Gymnasium env
    :raises ValueError: if two of them return the same env instance
    """

    def __init__(self, env_fns: list[Callable[[], gym.Env]]):
        self.envs = [fn() for fn in env_fns]
        if not self.envs:
            raise ValueError("DummyVecEnv needs at least one env function")
        if len({id(getattr(e, "unwrapped", e)) for e in self.envs}) != len(self.envs):
            raise ValueError("the env functions returned the same env instance more than once: each must make "
                             "a new env (e.g. lambda: gym.make(env_id)), as SB3's DummyVecEnv requires")
        env = self.envs[0]
        super().__init__(len(self.envs), env.observation_space, env.action_space)
        self.buf_obs = _obs_buffer(self.observation_space, self.num_envs)
        self.buf_dones = np.zeros((self.num_envs,), dtype=bool)
        self.buf_rews = np.zeros((self.num_envs,), dtype=np.float32)
        self.buf_infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        self.actions: Optional[np.ndarray] = None
        self.metadata = env.metadata

    def step_async(self, actions: np.ndarray) -> None:
        self.actions = actions

    def step_wait(self) -> VecEnvStepReturn:
        if self.actions is None:
            raise RuntimeError("step_wait() without step_async(actions) before it")
        for i, env in enumerate(self.envs):
            obs, reward, terminated, truncated, self.buf_infos[i] = env.step(self.actions[i])
            self.buf_rews[i] = reward
            self.buf_dones[i] = terminated or truncated
            self.buf_infos[i]["TimeLimit.truncated"] = truncated and not terminated
            if self.buf_dones[i]:
                self.buf_infos[i]["terminal_observation"] = obs
                obs, self.reset_infos[i] = env.reset()
            self.buf_obs[i] = obs
        return self.buf_obs.copy(), np.copy(self.buf_rews), np.copy(self.buf_dones), deepcopy(self.buf_infos)

    def reset(self) -> VecEnvObs:
        for i, env in enumerate(self.envs):
            options = {"options": self._options[i]} if self._options[i] else {}
            self.buf_obs[i], self.reset_infos[i] = env.reset(seed=self._seeds[i], **options)
        self._reset_seeds()
        self._reset_options()
        return self.buf_obs.copy()

    def close(self) -> None:
        for env in self.envs:
            env.close()

    def get_images(self) -> Sequence[Optional[np.ndarray]]:
        if self.render_mode != "rgb_array":
            warnings.warn(f"The render mode is {self.render_mode}, but this method assumes it is `rgb_array`.")
            return [None for _ in self.envs]
        return [env.render() for env in self.envs]  # type: ignore[misc]

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        return [self.envs[i].get_wrapper_attr(attr_name) for i in self._get_indices(indices)]

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        for i in self._get_indices(indices):
            setattr(self.envs[i], attr_name, value)

    def env_method(self, method_name: str, *method_args: Any, indices: VecEnvIndices = None,
                   **method_kwargs: Any) -> list[Any]:
        return [self.envs[i].get_wrapper_attr(method_name)(*method_args, **method_kwargs)
                for i in self._get_indices(indices)]

    def env_is_wrapped(self, wrapper_class: type, indices: VecEnvIndices = None) -> list[bool]:
        return [is_wrapped(self.envs[i], wrapper_class) for i in self._get_indices(indices)]


def _unbatch(info: dict[str, Any], n: int) -> list[dict[str, Any]]:
    """A Gymnasium vector env's info (``{key: values, "_key": mask}``) as one dict per env."""
    out: list[dict[str, Any]] = [{} for _ in range(n)]
    for key, value in info.items():
        if key.startswith("_") or key in ("final_obs", "final_info"):
            continue
        mask = info.get("_" + key)
        per_env = _unbatch(value, n) if isinstance(value, dict) else value
        for i in range(n):
            if mask is None or bool(mask[i]):
                out[i][key] = per_env[i]
    return out


class GymnasiumVecEnv(VecEnv):
    """A Gymnasium ``VectorEnv`` (``SyncVectorEnv``, ``AsyncVectorEnv``, ``gymnasium.make_vec``; any
    autoreset mode) with SB3's ``VecEnv`` API. Its info dicts become one dict per env.

    :param venv: the Gymnasium vector env (closed by ``close``)
    """

    def __init__(self, venv: gym.vector.VectorEnv):
        from ._envs import SameStepAdapter, _autoreset_mode

        self.venv = venv
        self._same_step = _autoreset_mode(venv) == "SAME_STEP"
        self._stepper = venv if self._same_step else SameStepAdapter(venv)
        self._actions: Optional[np.ndarray] = None
        super().__init__(venv.num_envs, venv.single_observation_space, venv.single_action_space)
        self.metadata = dict(getattr(venv, "metadata", {}), render_modes=self.metadata["render_modes"])

    def reset(self) -> VecEnvObs:
        seeds = None if all(s is None for s in self._seeds) else list(self._seeds)
        if any(o != self._options[0] for o in self._options):
            raise NotImplementedError("a Gymnasium vector env takes one options dict for all its envs")
        obs, info = self.venv.reset(seed=seeds, options=self._options[0] or None)
        self.reset_infos = _unbatch(info, self.num_envs)
        self._reset_seeds()
        self._reset_options()
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = np.asarray(actions)

    def step_wait(self) -> VecEnvStepReturn:
        if self._actions is None:
            raise RuntimeError("step_wait() without step_async(actions) before it")
        obs, rewards, terminated, truncated, info = self._stepper.step(self._actions)
        terminated, truncated = np.asarray(terminated, dtype=bool), np.asarray(truncated, dtype=bool)
        dones = terminated | truncated
        infos = _unbatch(info, self.num_envs)
        final_infos = _unbatch(info["final_info"], self.num_envs) if "final_info" in info else None
        for i in np.flatnonzero(dones):
            if final_infos is not None:  # same-step autoreset: info[i] is the new episode's reset info
                self.reset_infos[i], infos[i] = infos[i], final_infos[i]
            infos[i]["terminal_observation"] = info["final_obs"][i]
        for i in range(self.num_envs):
            infos[i]["TimeLimit.truncated"] = bool(truncated[i] and not terminated[i])
        return obs, np.asarray(rewards, dtype=np.float32), dones, infos

    def close(self) -> None:
        self.venv.close()

    def _envs(self, what: str) -> list[gym.Env]:
        envs = getattr(self.venv, "envs", None)
        if envs is None:
            raise NotImplementedError(f"{what} for some envs of a {type(self.venv).__name__} (only a "
                                      "SyncVectorEnv shows its envs): leave indices=None")
        return list(envs)

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        values = self.venv.get_attr(attr_name)
        return [values[i] for i in self._get_indices(indices)]

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        if indices is None:
            self.venv.set_attr(attr_name, value)
            return
        values = list(self.venv.get_attr(attr_name))
        for i in self._get_indices(indices):
            values[i] = value
        self.venv.set_attr(attr_name, values)

    def env_method(self, method_name: str, *method_args: Any, indices: VecEnvIndices = None,
                   **method_kwargs: Any) -> list[Any]:
        if indices is None:
            return list(self.venv.call(method_name, *method_args, **method_kwargs))
        envs = self._envs(f"env_method({method_name!r}, indices=...)")
        return [envs[i].get_wrapper_attr(method_name)(*method_args, **method_kwargs) for i in self._get_indices(indices)]

    def env_is_wrapped(self, wrapper_class: type, indices: VecEnvIndices = None) -> list[bool]:
        envs = self._envs("env_is_wrapped")
        return [is_wrapped(envs[i], wrapper_class) for i in self._get_indices(indices)]

    def get_images(self) -> Sequence[Optional[np.ndarray]]:
        if self.render_mode != "rgb_array":
            warnings.warn(f"The render mode is {self.render_mode}, but this method assumes it is `rgb_array`.")
            return [None] * self.num_envs
        return list(self.venv.render())  # type: ignore[arg-type]


def _monitored(env: gym.Env) -> gym.Env:
    """``env`` with episode statistics in its infos (``info["episode"]``: ``r``, ``l``, ``t``, the keys
    of SB3's ``Monitor``, which SB3 wraps around the envs it is given), unless it has them already."""
    if is_wrapped(env, gym.wrappers.RecordEpisodeStatistics) or any(
        type(layer).__name__ == "Monitor" for layer in _layers(env)
    ):
        return env
    return gym.wrappers.RecordEpisodeStatistics(env)


def _layers(env: gym.Env) -> list[gym.Env]:
    layers = [env]
    while isinstance(layers[-1], gym.Wrapper):
        layers.append(layers[-1].env)
    return layers


def _id_factory(env_id: str) -> Callable[[], gym.Env]:
    """A factory of Gymnasium's env for an id the model was given (native ids included)."""
    from . import _proxima

    bare = env_id[4:] if env_id.startswith("gym:") else env_id
    native = env_id in _proxima.NATIVE_ENV_IDS
    try:
        gym.spec(bare)
    except gym.error.Error as e:
        why = (f"{env_id!r} is one of Proxima's native envs, stepped in Rust during training, which Python cannot "
               f"step; get_env() makes Gymnasium's env of the same id, and Gymnasium has none: {e}") if native else str(e)
        raise ValueError(f"get_env(): {why}") from None
    return lambda: _monitored(gym.make(bare))


def _atari_vec_env(env_id: str, n_envs: int) -> Any:
    """SB3's ``VecFrameStack(make_atari_env(game, n_envs), frame_stack)`` with the wrappers' settings an
    ``atari:`` id gives (Proxima's Rust wrappers equal these frame by frame): ALE's game made as Proxima
    makes it (``frameskip=1``, the id's ``repeat_action_probability``, the minimal action set), each env
    under SB3's ``Monitor`` (whole games, their real scores), observations channel-last."""
    from . import _proxima

    game_id, options = _proxima.parse_atari_id(env_id)
    try:
        import ale_py  # noqa: F401  (registers the ALE ids with Gymnasium)
        from stable_baselines3.common.env_util import make_atari_env
        from stable_baselines3.common.vec_env import VecFrameStack
    except ImportError as e:
        raise ImportError(
            f"get_env() on {env_id!r} steps SB3's Atari wrappers in Python, which Proxima's equal frame by "
            f"frame; they need stable-baselines3, ale-py and OpenCV: pip install stable-baselines3 ale-py "
            f"opencv-python-headless ({e})"
        ) from e
    wrapper_kwargs = {key: options[key] for key in
                      ("noop_max", "frame_skip", "screen_size", "terminal_on_life_loss", "clip_reward")}
    env_kwargs = dict(frameskip=1, repeat_action_probability=options["repeat_action_probability"],
                      full_action_space=False)
    venv = make_atari_env(game_id, n_envs=n_envs, wrapper_kwargs=wrapper_kwargs, env_kwargs=env_kwargs)
    return VecFrameStack(venv, options["frame_stack"]) if options["frame_stack"] > 1 else venv


def for_model(env: Optional[EnvLike], n_envs: int) -> Optional[VecEnvLike]:
    """What ``model.get_env()`` returns for the ``env`` a model was given (``n_envs``: how many envs it
    trains on): an SB3 ``VecEnv`` as it is; anything else behind SB3's API (see ``BaseAlgorithm.get_env``)."""
    from ._envs import _is_env, _is_sb3_vec_env, _is_vector_env

    if env is None or _is_sb3_vec_env(env):
        return env
    if _is_vector_env(env):
        return GymnasiumVecEnv(env)
    if isinstance(env, str) and env.startswith("atari:"):
        return _atari_vec_env(env, max(int(n_envs), 1))
    if isinstance(env, str):
        return DummyVecEnv([_id_factory(env)] * max(int(n_envs), 1))
    if _is_env(env):
        return DummyVecEnv([lambda: _monitored(env)])
    if isinstance(env, (list, tuple)) and env and all(_is_env(e) for e in env):
        return DummyVecEnv([(lambda e: lambda: _monitored(e))(e) for e in env])
    factories = list(env) if isinstance(env, (list, tuple)) else [env]
    if factories and all(callable(f) for f in factories):
        return DummyVecEnv([(lambda f: lambda: _monitored(f()))(f) for f in factories])
    raise TypeError(f"no vector env for an env of type {type(env).__name__}")
