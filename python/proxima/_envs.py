"""What the `env` argument of an algorithm may be, and how it reaches Rust.

* a native id (``"CartPole-v1"``, see ``proxima.NATIVE_ENV_IDS``): stepped in Rust, no Python
  in the loop;
* any other Gymnasium id (``"Pendulum-v1"``, ``"gym:HalfCheetah-v5"``): ``gymnasium.make``;
* a Gymnasium ``Env`` instance, a list of them, or a list of env factories (callables);
* a ``gymnasium.vector.VectorEnv`` in any autoreset mode (next-step and disabled ones are
  translated: the envs that ended are reset at once with ``reset(options={"reset_mask": ...})``,
  so every transition is real and the ended episode's last observation bootstraps it);
* a Stable-Baselines3 ``VecEnv`` (``DummyVecEnv``, ``SubprocVecEnv``, ``make_vec_env``): its
  ``terminal_observation`` and ``TimeLimit.truncated`` infos become Gymnasium's ``final_obs`` and
  ``truncated``, so truncated episodes are bootstrapped exactly;
* an ``atari:GAME`` id (Proxima's Atari wrappers in Rust around ``ALE/GAME-v5``).

Channel-last images (``Box(0, 255, (H, W, C), uint8)``, e.g. SB3's ``make_atari_env`` +
``VecFrameStack``) are seen channel-first, ``(C, H, W)``, as SB3's ``VecTransposeImage`` shows them
to its ``CnnPolicy``; ``predict`` takes either layout, as SB3's does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Optional

import numpy as np

from . import _proxima

if TYPE_CHECKING:
    import gymnasium as gym

    from .type_aliases import EnvLike, VecEnvLike

#: What ``_proxima.Model`` takes as its env: ``("id", env_id)`` or ``(kind, name, [objects])``.
EnvSource = tuple
#: The (observation, action) spaces the model sees; ``None`` where only Rust makes the envs.
Spaces = Optional[tuple["gym.spaces.Space", "gym.spaces.Space"]]


def _is_sb3_vec_env(env: object) -> bool:
    return all(hasattr(env, a) for a in ("num_envs", "step_async", "step_wait", "env_method"))


def _is_vector_env(env: object) -> bool:
    try:
        import gymnasium

        return isinstance(env, gymnasium.vector.VectorEnv)
    except ImportError:  # pragma: no cover - gymnasium is a dependency
        return False


def _is_env(env: object) -> bool:
    return all(hasattr(env, a) for a in ("reset", "step", "observation_space", "action_space"))


def _name(env: object) -> str:
    """The env's Gymnasium id when it has one (so a saved model names the env, and ``proxima
    eval`` can make it), else its class name."""
    spec = getattr(env, "spec", None)
    if getattr(spec, "id", None):
        return spec.id
    for get in (lambda: env.get_attr("spec", [0])[0], lambda: env.get_attr("spec")[0], lambda: env.envs[0].spec):
        try:
            inner = get()
        except Exception:  # not a vector env, or one without the attribute
            continue
        if getattr(inner, "id", None):
            return inner.id
    return type(env).__name__


def _refuse_vec_normalize(venv: VecEnvLike) -> None:
    """SB3's ``VecNormalize`` anywhere in a VecEnv stack: its statistics would not be saved with
    the model, so a saved model would act on unnormalised observations. Refused by name."""
    layer = venv
    while layer is not None:
        if hasattr(layer, "obs_rms") or type(layer).__name__ == "VecNormalize":
            raise NotImplementedError(
                "SB3's VecNormalize is not supported: its statistics would not be saved with the model; "
                "use Proxima's own normalisation (normalize_observation=True, normalize_reward=True), "
                "which is saved and applied by predict"
            )
        layer = getattr(layer, "venv", None)


def check_spaces(observation_space: gym.spaces.Space, action_space: gym.spaces.Space) -> None:
    """Raises a clear error for spaces Proxima does not train on yet (before any Rust call)."""
    import gymnasium.spaces as S

    if isinstance(observation_space, (S.Discrete, S.MultiDiscrete)):
        raise NotImplementedError(
            "discrete observation spaces are not supported yet (one-hot them with a wrapper)"
        )
    if not isinstance(action_space, (S.Discrete, S.Box, S.MultiDiscrete)):
        raise NotImplementedError(
            f"action space {action_space!r} is not supported; supported: Discrete, Box, MultiDiscrete"
        )


def _is_image(space: Optional[gym.spaces.Space]) -> bool:
    """SB3's ``is_image_space``: a 3-d ``Box`` of uint8 in [0, 255]."""
    import gymnasium.spaces as S

    return (isinstance(space, S.Box) and space.dtype == np.uint8 and len(space.shape) == 3
            and bool(np.all(space.low == 0)) and bool(np.all(space.high == 255)))


def _channels_last(space: Optional[gym.spaces.Space]) -> bool:
    """An image whose smallest axis is not the first: channel-last, as SB3 decides it
    (``is_image_space_channels_first``)."""
    return _is_image(space) and int(np.argmin(space.shape)) != 0


def _channels_first_space(space: gym.spaces.Box) -> gym.spaces.Box:
    import gymnasium.spaces as S

    return S.Box(np.transpose(space.low, (2, 0, 1)), np.transpose(space.high, (2, 0, 1)), dtype=space.dtype)


def channels_first_observation(obs: np.ndarray, space: Optional[gym.spaces.Space]) -> np.ndarray:
    """``obs`` (one or a batch) in the ``(C, H, W)`` layout of the image space ``space`` when it
    comes ``(H, W, C)``, as SB3's ``maybe_transpose``; anything else unchanged."""
    if space is None or not _is_image(space) or obs.ndim < 3:
        return obs
    c, h, w = space.shape
    if obs.shape[-3:] == (h, w, c) and (h, w, c) != (c, h, w):
        return np.moveaxis(obs, -1, -3)
    return obs


class _SameStepView:
    """What both adapters below show the bridge: a vector env with same-step autoreset over the
    user's ``venv`` (theirs to close), with its single spaces."""

    metadata = {"autoreset_mode": "SAME_STEP"}

    def __init__(self, venv: VecEnvLike | gym.vector.VectorEnv | _SameStepView,
                 observation_space: gym.spaces.Space, action_space: gym.spaces.Space):
        self.venv, self.num_envs, self.spec = venv, venv.num_envs, getattr(venv, "spec", None)
        self.single_observation_space, self.single_action_space = observation_space, action_space

    @property
    def observation_space(self) -> gym.spaces.Space:
        """The batched observation space, as a Gymnasium vector env's (the bridge reads a batch of
        Dict observations through it)."""
        from gymnasium.vector.utils import batch_space

        return batch_space(self.single_observation_space, self.num_envs)

    def has_action_masks(self) -> bool:
        """Whether the envs have sb3-contrib's ``action_masks()`` (its ``is_masking_supported``),
        asked without calling into subprocess workers (where a missing attribute ends them)."""
        venv = self.venv
        if isinstance(venv, _SameStepView):
            return venv.has_action_masks()
        if hasattr(venv, "has_attr"):  # an SB3 VecEnv
            return bool(venv.has_attr("action_masks"))
        envs = getattr(venv, "envs", None)
        fns = getattr(venv, "env_fns", None)
        probe = envs[0] if envs else (fns[0]() if fns else None)  # a fresh env of an AsyncVectorEnv's
        if probe is None:
            return False
        try:
            return callable(probe.get_wrapper_attr("action_masks"))
        except AttributeError:
            return False
        finally:
            if not envs:
                probe.close()

    def call(self, name: str) -> tuple[Any, ...]:
        """Each env's method ``name`` called (a Gymnasium vector env's ``call``; an SB3 VecEnv's
        ``env_method``)."""
        venv = self.venv
        return tuple(venv.env_method(name) if hasattr(venv, "env_method") else venv.call(name))

    def close(self) -> None:
        pass


def is_monitor_wrapped(env: Any) -> bool:
    """Whether SB3's ``Monitor`` (or ``VecMonitor``) records ``env``'s whole episodes (SB3's
    ``evaluate_policy`` then counts an episode where the Monitor's ``info["episode"]`` appears, not at
    every done: Atari's ``EpisodicLifeEnv`` ends one at each lost life)."""
    try:
        from stable_baselines3.common.monitor import Monitor
        from stable_baselines3.common.vec_env import VecMonitor, is_vecenv_wrapped
    except ImportError:
        return False
    if hasattr(env, "step_async"):
        return bool(is_vecenv_wrapped(env, VecMonitor) or env.env_is_wrapped(Monitor)[0])
    layer = env
    while layer is not None:
        if isinstance(layer, Monitor):
            return True
        layer = getattr(layer, "env", None)
    return False


class SB3VecEnvAdapter(_SameStepView):
    """A Stable-Baselines3 ``VecEnv`` seen as a Gymnasium vector env with same-step autoreset. With a
    ``Monitor`` under the envs, ``info["games"]`` says how each ended episode ended for the learner's
    logs, as SB3 reads its Monitor: ``(r, l)`` where the Monitor recorded a whole episode, ``False``
    where only the learner's episode ended (a lost Atari life), ``None`` where nothing ended."""

    def __init__(self, venv: VecEnvLike):
        super().__init__(venv, venv.observation_space, venv.action_space)
        self._monitored = is_monitor_wrapped(venv)

    def reset(self, seed: Optional[int] = None, options: Optional[dict[str, Any]] = None) -> tuple[np.ndarray, dict]:
        if seed is not None:
            self.venv.seed(seed)
        return self.venv.reset(), {}

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        obs, rewards, dones, infos = self.venv.step(actions)
        dones = np.asarray(dones, dtype=bool)
        truncated = np.array([bool(i.get("TimeLimit.truncated", False)) for i in infos]) & dones
        terminated = dones & ~truncated
        final_obs = np.empty(self.num_envs, dtype=object)
        for i in np.flatnonzero(dones):
            final_obs[i] = infos[i]["terminal_observation"]
        info = {"final_obs": final_obs, "_final_obs": dones.copy(), "sb3_infos": infos}
        if self._monitored:
            info["games"] = [None if not d else (float(i["episode"]["r"]), int(i["episode"]["l"])) if "episode" in i
                             else False for d, i in zip(dones, infos)]
        return obs, np.asarray(rewards, dtype=np.float64), terminated, truncated, info


def _obs_row(obs: Any, i: int) -> Any:
    """Env ``i``'s observation of a batch (a Dict/Tuple one as a dict/tuple of its rows), copied."""
    if isinstance(obs, dict):
        return {k: _obs_row(v, i) for k, v in obs.items()}
    if isinstance(obs, tuple):
        return tuple(_obs_row(v, i) for v in obs)
    return np.array(obs[i], copy=True)


def _obs_copy(obs: Any) -> Any:
    """A copy of a batch of observations (arrays, or dicts/tuples of them)."""
    if isinstance(obs, dict):
        return {k: _obs_copy(v) for k, v in obs.items()}
    if isinstance(obs, tuple):
        return tuple(_obs_copy(v) for v in obs)
    return np.array(obs, copy=True)


def _same_rows(a: Any, b: Any, rows: np.ndarray) -> bool:
    """Whether two batches of observations agree on ``rows`` (a boolean mask over the envs)."""
    if isinstance(a, dict):
        return all(_same_rows(a[k], b[k], rows) for k in a)
    if isinstance(a, tuple):
        return all(_same_rows(x, y, rows) for x, y in zip(a, b))
    return bool(np.array_equal(np.asarray(a)[rows], np.asarray(b)[rows]))


class SameStepAdapter(_SameStepView):
    """A Gymnasium vector env in next-step (or disabled) autoreset mode seen with same-step
    autoreset: after a step, the envs whose episode ended are reset there and then (their last
    observation goes to ``info["final_obs"]``)."""

    def __init__(self, venv: gym.vector.VectorEnv):
        super().__init__(venv, venv.single_observation_space, venv.single_action_space)

    def reset(self, seed: Optional[int] = None, options: Optional[dict[str, Any]] = None) -> tuple[np.ndarray, dict[str, Any]]:
        return self.venv.reset(seed=seed, options=options)

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        obs, rewards, terminated, truncated, info = self.venv.step(actions)
        ended = np.logical_or(terminated, truncated)
        final_obs = np.empty(self.num_envs, dtype=object)
        if ended.any():
            for i in np.flatnonzero(ended):
                final_obs[i] = _obs_row(obs, i)
            kept = _obs_copy(obs)
            obs, _ = self.venv.reset(options={"reset_mask": ended})
            if not _same_rows(obs, kept, ~ended):
                raise NotImplementedError(
                    f"{type(self.venv).__name__} reset envs whose episode had not ended when asked to reset only "
                    "the ended ones (options={'reset_mask': ...}), so it cannot train without cutting episodes: "
                    "use gymnasium.make_vec(id, n, vectorization_mode='sync') (or 'async'), or a "
                    "gymnasium.vector.SyncVectorEnv / AsyncVectorEnv"
                )
        info = dict(info)
        info["final_obs"], info["_final_obs"] = final_obs, ended
        return obs, rewards, terminated, truncated, info


class ChannelsFirstVector(_SameStepView):
    """A same-step vector env of channel-last images seen channel-first (SB3's
    ``VecTransposeImage``): observations ``[N, H, W, C]`` → ``[N, C, H, W]``, and the ended
    episodes' ``final_obs`` the same way."""

    def __init__(self, venv: gym.vector.VectorEnv | _SameStepView):
        super().__init__(venv, _channels_first_space(venv.single_observation_space), venv.single_action_space)

    def reset(self, seed: Optional[int] = None, options: Optional[dict[str, Any]] = None) -> tuple[np.ndarray, dict[str, Any]]:
        obs, info = self.venv.reset(seed=seed, options=options)
        return np.ascontiguousarray(np.moveaxis(np.asarray(obs), -1, 1)), info

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        obs, rewards, terminated, truncated, info = self.venv.step(actions)
        if "final_obs" in info:
            final_obs = np.empty(self.num_envs, dtype=object)
            for i, o in enumerate(info["final_obs"]):
                final_obs[i] = None if o is None else np.ascontiguousarray(np.moveaxis(np.asarray(o), -1, 0))
            info = {**info, "final_obs": final_obs}
        return np.ascontiguousarray(np.moveaxis(np.asarray(obs), -1, 1)), rewards, terminated, truncated, info


def _channels_first_env(env: gym.Env) -> gym.Env:
    """A Gymnasium ``Env`` of channel-last images seen channel-first."""
    from gymnasium.wrappers import TransformObservation

    space = _channels_first_space(env.observation_space)
    return TransformObservation(env, lambda o: np.ascontiguousarray(np.moveaxis(o, -1, 0)), space)


def _vector_source(env: object, view: gym.vector.VectorEnv | _SameStepView, spaces: tuple[gym.spaces.Space, gym.spaces.Space]) -> tuple[EnvSource, Spaces]:
    """The ``("vector", ...)`` source of a same-step view, channel-first when its images are not."""
    if _channels_last(spaces[0]):
        view = ChannelsFirstVector(view)
        spaces = (view.single_observation_space, spaces[1])
    return ("vector", _name(env), [view]), spaces


def _objects_source(kind: str, name: str, objects: list[gym.Env | Callable[[], gym.Env]], spaces: tuple[gym.spaces.Space, gym.spaces.Space]) -> tuple[EnvSource, Spaces]:
    """The ``("objects" | "factories", ...)`` source, each env channel-first when its images are not."""
    if _channels_last(spaces[0]):
        if kind == "objects":
            objects = [_channels_first_env(e) for e in objects]
        else:
            objects = [(lambda f: lambda: _channels_first_env(f()))(f) for f in objects]
        spaces = (_channels_first_space(spaces[0]), spaces[1])
    return (kind, name, objects), spaces


def _autoreset_mode(venv: object) -> str:
    mode = getattr(venv, "metadata", {}).get("autoreset_mode", "NEXT_STEP")
    return getattr(mode, "name", str(mode)).upper().replace("AUTORESETMODE.", "")


def env_source(env: EnvLike) -> tuple[EnvSource, Spaces]:
    """The tagged tuple ``_proxima.Model`` takes, and the (observation, action) spaces the model
    sees (channel-first images; None for an ``atari:`` id, whose envs only Rust makes)."""
    if isinstance(env, str):
        return _id_source(env)
    if _is_sb3_vec_env(env):
        _refuse_vec_normalize(env)
        check_spaces(env.observation_space, env.action_space)
        return _vector_source(env, SB3VecEnvAdapter(env), (env.observation_space, env.action_space))
    if _is_vector_env(env):
        check_spaces(env.single_observation_space, env.single_action_space)
        spaces = (env.single_observation_space, env.single_action_space)
        same_step = env if _autoreset_mode(env) == "SAME_STEP" else SameStepAdapter(env)
        return _vector_source(env, same_step, spaces)
    if _is_env(env):
        check_spaces(env.observation_space, env.action_space)
        return _objects_source("objects", _name(env), [env], (env.observation_space, env.action_space))
    if isinstance(env, (list, tuple)) and not env:
        raise ValueError("env is an empty list: give at least one env or env factory")
    if isinstance(env, type):
        raise TypeError(f"env is the class {env.__name__}, not an env: pass an instance ({env.__name__}()) "
                        f"or a factory (lambda: {env.__name__}())")
    if isinstance(env, (list, tuple)) and env:
        if all(_is_env(e) for e in env):
            if len({id(e) for e in env}) != len(env):
                raise ValueError("the same env object appears more than once: each env must be its own instance "
                                 "(as SB3's DummyVecEnv requires); pass env factories or distinct envs")
            check_spaces(env[0].observation_space, env[0].action_space)
            return _objects_source("objects", _name(env[0]), list(env), (env[0].observation_space, env[0].action_space))
        if all(callable(f) for f in env):
            probe = env[0]()
            if not _is_env(probe):
                raise TypeError(f"env factory {env[0]!r} returned {type(probe).__name__}, not a Gymnasium Env")
            check_spaces(probe.observation_space, probe.action_space)
            spaces = (probe.observation_space, probe.action_space)
            probe.close()
            return _objects_source("factories", _name(probe), list(env), spaces)
    if callable(env) and not isinstance(env, type):
        return env_source([env])
    raise TypeError(
        f"env must be an env id (str), a Gymnasium Env, a list of Envs or env factories, a Gymnasium "
        f"VectorEnv or a Stable-Baselines3 VecEnv; got {type(env).__name__}"
    )


def _id_source(env_id: str) -> tuple[EnvSource, Spaces]:
    import gymnasium

    if env_id.startswith("atari:"):  # made in Rust: the spaces come from the model (None here)
        return ("id", env_id), None
    bare = env_id[4:] if env_id.startswith("gym:") else env_id
    if not env_id.startswith("gym:") and env_id in _proxima.NATIVE_ENV_IDS:
        probe = gymnasium.make(env_id)
        spaces = (probe.observation_space, probe.action_space)
        probe.close()
        return ("id", env_id), spaces
    try:
        probe = gymnasium.make(bare)
    except gymnasium.error.Error as e:
        native = ", ".join(_proxima.NATIVE_ENV_IDS)
        raise ValueError(f"unknown env id {env_id!r}: {e} (native ids: {native})") from None
    spaces = (probe.observation_space, probe.action_space)
    probe.close()
    check_spaces(*spaces)
    return ("id", "gym:" + bare), spaces
