"""PPO, A2C, TRPO, SAC, TD3 and DDPG with Stable-Baselines3's constructors, ``learn``,
``predict``, ``save`` and ``load``. The keyword arguments, their defaults and their meaning are
SB3's (sb3-contrib's for TRPO); the work happens in Rust (``proxima._proxima.Model``) with the GIL released.

Keyword arguments beyond SB3's are Proxima's own config keys (``anneal_lr=True``,
``normalize_observation=True``, ``backend="candle"``, ...: ``proxima.CONFIG_KEYS``).
"""

from __future__ import annotations

import difflib
import os
import random
import sys
import time
import warnings
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Iterable, NoReturn, Optional, TypeVar, Union

import numpy as np
import numpy.typing as npt

from . import _docs, _proxima
from ._envs import channels_first_observation, env_source
from ._spaces import space_from_json, space_to_json
from .type_aliases import ActionNoise, EnvLike, MaybeCallback, PolicyType, Schedule, TrainFreq, VecEnvLike

if TYPE_CHECKING:
    import gymnasium as gym

    from .callbacks import BaseCallback

#: SB3's ``SelfBaseAlgorithm``: ``learn`` and ``load`` return the class they are called on.
SelfBaseAlgorithm = TypeVar("SelfBaseAlgorithm", bound="BaseAlgorithm")
#: A config value as ``model.n_steps`` etc. read it back.
ConfigValue = Union[int, float, bool, str, list[int], None]

# SB3's names, and sb3-contrib's MaskablePPO classes of the same policies (a class is read by its __name__).
_SB3_POLICIES = {"MlpPolicy", "ActorCriticPolicy", "MaskableActorCriticPolicy"}
_CNN_POLICIES = {"CnnPolicy", "ActorCriticCnnPolicy", "MaskableActorCriticCnnPolicy"}
# SB3's policy for Dict observations: each key flattened (Discrete one-hot) and concatenated, as its
# CombinedExtractor does for non-image keys; the bridge flattens them (Gymnasium's spaces.flatten).
_MULTI_INPUT_POLICIES = {"MultiInputPolicy", "MultiInputActorCriticPolicy", "MaskableMultiInputActorCriticPolicy"}
# sb3-contrib's recurrent policies (RecurrentPPO): the LSTM between the observation (the Nature CNN's
# features of it; the flattened Dict) and the MLPs.
_MLP_LSTM_POLICIES = {"MlpLstmPolicy", "RecurrentActorCriticPolicy"}
_CNN_LSTM_POLICIES = {"CnnLstmPolicy", "RecurrentActorCriticCnnPolicy"}
_MULTI_INPUT_LSTM_POLICIES = {"MultiInputLstmPolicy", "RecurrentMultiInputActorCriticPolicy"}
_LSTM_POLICIES = _MLP_LSTM_POLICIES | _CNN_LSTM_POLICIES | _MULTI_INPUT_LSTM_POLICIES
# policy_kwargs of the recurrent policy, and the config key each sets.
_LSTM_KWARGS = {"lstm_hidden_size": int, "n_lstm_layers": int, "shared_lstm": bool, "enable_critic_lstm": bool,
                "recurrent_cell": str}
_SAFETENSORS = ".safetensors"
# The model file's note holding a Dict (or Tuple) observation space (_spaces.space_to_json).
_SPACE_NOTE = "gymnasium.observation_space"


#: What the config takes: one setting's value as it crosses to Rust (``_proxima.Model.create``).
Setting = Union[int, float, bool, str, None, list]


def _setting(v: object) -> Setting:
    """``v`` as a setting's typed value: numpy scalars as the Python number they print as (the config
    took their printed text before settings were typed), lists element by element; others as they
    are (Rust names the key of a value of another type)."""
    if isinstance(v, np.generic) and not isinstance(v, (bool, int, float)):
        if isinstance(v, np.bool_):
            return bool(v)
        if isinstance(v, np.integer):
            return int(v)
        if isinstance(v, np.floating):
            return float(str(v))
    if isinstance(v, (list, tuple)):
        return [_setting(x) for x in v]
    return v  # type: ignore[return-value]


def _policy_name(policy: PolicyType) -> str:
    return policy if isinstance(policy, str) else getattr(policy, "__name__", repr(policy))


def _activation_name(fn: Union[str, type, Callable[..., object]]) -> str:
    if isinstance(fn, str) and fn.lower() in ("tanh", "relu"):
        return fn.lower()
    name = getattr(fn, "__name__", type(fn).__name__).lower()
    if name in ("tanh", "relu"):
        return name
    raise NotImplementedError(f"activation_fn {fn!r}: supported are torch.nn.Tanh, torch.nn.ReLU, 'tanh', 'relu'")


# Every key SB3's and sb3-contrib's policies take (ActorCriticPolicy, SACPolicy, TD3Policy, TQCPolicy,
# RecurrentActorCriticPolicy): one of these that Proxima lacks is NotImplementedError; any other key is
# a TypeError, as SB3's policy constructor raises for an unexpected keyword argument.
_SB3_POLICY_KWARGS = frozenset({
    "net_arch", "activation_fn", "ortho_init", "use_sde", "log_std_init", "full_std", "use_expln", "squash_output",
    "features_extractor_class", "features_extractor_kwargs", "share_features_extractor", "normalize_images",
    "optimizer_class", "optimizer_kwargs", "clip_mean", "n_critics", "n_quantiles", "lstm_hidden_size",
    "n_lstm_layers", "shared_lstm", "enable_critic_lstm", "lstm_kwargs"})


def _refuse_policy_kwarg(key: str, supported: Iterable[str]) -> NoReturn:
    """Raises for ``policy_kwargs[key]`` outside ``supported``: ``NotImplementedError`` for a key SB3's
    policies take, ``TypeError`` (naming the nearest supported key) for one they do not."""
    everything = sorted(supported)
    if key in _SB3_POLICY_KWARGS:
        raise NotImplementedError(f"policy_kwargs[{key!r}] is not supported yet; supported: {everything}")
    hint = difflib.get_close_matches(key, everything, n=1)
    more = f" (did you mean {hint[0]!r}?)" if hint else ""
    raise TypeError(f"policy_kwargs got an unexpected key {key!r}{more}; supported: {everything}")


def _policy_settings(policy_kwargs: Optional[dict[str, Any]], also: Iterable[str] = ()) -> dict[str, Setting]:
    """``policy_kwargs`` (SB3's MlpPolicy arguments) as config settings; ``also``: the caller's own
    keys, named in the error for an unknown one."""
    known = {"net_arch", "activation_fn", "ortho_init", "log_std_init", "share_features_extractor", "shared_trunk"}
    sets: dict[str, Setting] = {}
    for key, value in (policy_kwargs or {}).items():
        if key not in known:
            _refuse_policy_kwarg(key, known | set(also))
        if key == "net_arch":
            sets["net_arch"] = _net_arch(value)
        elif key == "activation_fn":
            sets["activation"] = _activation_name(value)
        elif key == "ortho_init":
            sets["ortho_init"] = bool(value)
        elif key == "log_std_init":
            sets["log_std_init"] = float(value)
        elif key == "shared_trunk":
            sets["shared_trunk"] = bool(value)
        # share_features_extractor: an MlpPolicy's features extractor is a Flatten with no
        # parameters, so sharing it or not changes nothing; either value is SB3's network.
    return sets


def _net_arch(value: Union[list[int], tuple[int, ...], dict[str, list[int]]]) -> list[int]:
    if isinstance(value, dict):
        pi, vf = list(value.get("pi", [])), list(value.get("vf", []))
        if set(value) - {"pi", "vf"}:
            raise ValueError(f"net_arch dict keys are 'pi' and 'vf'; got {sorted(value)}")
        if pi != vf:
            raise NotImplementedError(f"net_arch with different pi {pi} and vf {vf} is not supported yet")
        value = pi
    if not isinstance(value, (list, tuple)) or not all(isinstance(h, (int, np.integer)) and h > 0 for h in value):
        raise ValueError(f"net_arch must be a list of positive layer widths (or dict(pi=..., vf=...)); got {value!r}")
    return [int(h) for h in value]


class BaseAlgorithm:
    """What every algorithm shares (SB3's ``BaseAlgorithm`` surface; ``OnPolicyAlgorithm``'s for
    PPO, A2C and TRPO, ``OffPolicyAlgorithm``'s for SAC, TD3 and DDPG)."""

    _algo: ClassVar[str]
    _preset: ClassVar[str]
    _recurrent: ClassVar[bool] = False
    # The algorithm's own MLP policy class names in SB3 (``SACPolicy`` is SAC's ``MlpPolicy``), and
    # whether it trains the Nature CNN (the off-policy algorithms do not).
    _own_mlp_policies: ClassVar[frozenset[str]] = frozenset()
    _trains_cnn: ClassVar[bool] = True

    def __init__(self, policy: PolicyType, env: Optional[EnvLike], hyper: dict[str, Any], extra: dict[str, Any]):
        self._check_policy(policy)
        self.policy_class = policy
        self.verbose = int(hyper.pop("verbose", 0))
        self.seed = hyper.pop("seed", None)
        if self.seed is not None and (isinstance(self.seed, bool) or not isinstance(self.seed, (int, np.integer))):
            raise TypeError(f"seed must be an int or None, got {self.seed!r}")
        self._check_unsupported(hyper)
        self.learning_rate = hyper.get("learning_rate")
        self.clip_range = hyper.get("clip_range")
        settings = self._settings(hyper)
        policy_sets = self._policy_settings(hyper.get("policy_kwargs"))
        extra_sets = self._extra_settings(extra)
        for key in set(policy_sets) & set(extra_sets):
            if policy_sets[key] != extra_sets[key]:
                raise ValueError(f"{key} is given twice, {extra[key]!r} as a keyword and "
                                 f"{hyper['policy_kwargs'][key]!r} in policy_kwargs: give it once")
        sets = {**settings, **policy_sets, **extra_sets}
        if _policy_name(policy) in _CNN_POLICIES:
            sets["policy"] = "CnnPolicy"
        # Chosen beyond SB3's signature, and the network's shape: refused where it has no effect
        # (another algorithm's keys; net_arch with CnnPolicy, whose Nature CNN has its own).
        self._chosen = list(extra) + list(policy_sets)
        if self.seed is None:
            self.seed = random.SystemRandom().randrange(2**31)
        sets["seed"] = int(self.seed)
        self._sets = sets
        self.policy_kwargs = hyper.get("policy_kwargs") or {}
        self.tensorboard_log = hyper.get("tensorboard_log")
        self._hyper = hyper
        self._env_given, self._vec_env = env, None
        self._model: Optional[_proxima.Model] = None
        self.observation_space: Optional[gym.spaces.Space] = None
        self.action_space: Optional[gym.spaces.Space] = None
        if env is not None:
            self._build(env)

    # --- construction -----------------------------------------------------------------------
    def _check_policy(self, policy: PolicyType) -> None:
        name = _policy_name(policy)
        known = (_SB3_POLICIES | self._own_mlp_policies | _CNN_POLICIES | _MULTI_INPUT_POLICIES
                 | (_LSTM_POLICIES if self._recurrent else set()))
        if name in _LSTM_POLICIES and not self._recurrent:
            raise ValueError(f"{name} is RecurrentPPO's policy: use proxima.RecurrentPPO({name!r}, env)")
        if self._recurrent and name not in _LSTM_POLICIES:
            raise ValueError(f"RecurrentPPO takes 'MlpLstmPolicy', 'CnnLstmPolicy' or 'MultiInputLstmPolicy', not {name!r}")
        if name not in known:
            names = known if self._trains_cnn else known - _CNN_POLICIES
            offered = [p for p in ("MlpPolicy", "CnnPolicy", "MultiInputPolicy") if p in names]
            hint = difflib.get_close_matches(str(name), sorted(names), n=1)
            more = f" (did you mean {hint[0]!r}?)" if hint else ""
            raise ValueError(f"unknown policy {name!r}{more}; supported: {', '.join(map(repr, offered))}")

    def _check_observation_space(self) -> None:
        """SB3's rule: Dict observations take ``MultiInputPolicy``, and only they do (Proxima: Tuple
        observations too, which SB3 does not take)."""
        structured = _is_structured(self.observation_space)
        name = _policy_name(self.policy_class)
        multi = name in _MULTI_INPUT_POLICIES | _MULTI_INPUT_LSTM_POLICIES
        wanted = "MultiInputLstmPolicy" if self._recurrent else "MultiInputPolicy"
        if structured and not multi:
            raise ValueError(f"You must use `{wanted}` when working with {type(self.observation_space).__name__} "
                             f"observation spaces, not {name!r}")
        if multi and self.observation_space is not None and not structured:
            use = "'MlpLstmPolicy' or 'CnnLstmPolicy'" if self._recurrent else "'MlpPolicy' or 'CnnPolicy'"
            raise ValueError(f"{name} is for Dict (and Tuple) observation spaces; this env's is "
                             f"{self.observation_space}: use {use}")

    def _check_unsupported(self, hyper: dict[str, Any]) -> None:
        if hyper.pop("use_sde", False):
            raise NotImplementedError("use_sde=True (generalized state-dependent exploration) is not supported yet")
        if hyper.pop("sde_sample_freq", -1) != -1:
            raise NotImplementedError("sde_sample_freq needs use_sde, which is not supported yet")
        for key in ("rollout_buffer_class", "rollout_buffer_kwargs"):
            if hyper.pop(key, None) is not None:
                raise NotImplementedError(f"{key} is not supported: Proxima's rollout buffer is built in")
        if hyper.pop("stats_window_size", 100) != 100:
            raise NotImplementedError("stats_window_size other than 100 is not supported yet")
        device = hyper.pop("device", "auto")
        if str(device) not in ("auto", "cpu"):
            raise NotImplementedError(f"device={device!r}: Proxima trains on the CPU ('auto' or 'cpu')")
        if not hyper.pop("_init_setup_model", True):
            raise NotImplementedError("_init_setup_model=False is not supported")

    def _extra_settings(self, extra: dict[str, Any]) -> dict[str, Setting]:
        keys = set(_proxima.CONFIG_KEYS) - {"algo", "preset", "seed", "total_timesteps"}
        sets: dict[str, Setting] = {}
        for key, value in extra.items():
            if key not in keys:
                names = sorted(set(self._signature_names()) | keys)
                hint = difflib.get_close_matches(key, names, n=1)
                more = f"; did you mean {hint[0]!r}?" if hint else ""
                raise TypeError(f"{type(self).__name__}() got an unexpected keyword argument {key!r}{more}")
            sets[key] = _setting(value)
        return sets

    @classmethod
    def _signature_names(cls) -> list[str]:
        import inspect

        return [p for p in inspect.signature(cls.__init__).parameters if p not in ("self", "kwargs")]

    def _settings(self, hyper: dict[str, Any]) -> dict[str, Setting]:  # pragma: no cover - each algorithm has its own
        raise NotImplementedError

    def _policy_settings(self, policy_kwargs: Optional[dict[str, Any]]) -> dict[str, Setting]:
        """``policy_kwargs`` as config settings (an actor-critic's; the off-policy classes have theirs)."""
        return _policy_settings(policy_kwargs)

    def _build(self, env: EnvLike, load_from: Optional[str] = None) -> None:
        if not isinstance(env, str) and "n_envs" in self._sets:
            raise ValueError("n_envs is for an env id; with env objects, their number is the number of envs")
        source, spaces = env_source(env)
        self.observation_space, self.action_space = spaces or (None, None)
        if spaces is not None and load_from is None:
            self._check_observation_space()
        if load_from is not None and _is_structured(self.observation_space):
            self.policy_class = "MultiInputPolicy"  # a loaded model's policy is named after its env's space
        if load_from is None:
            self._check_noise_dim()
            self._model = _proxima.Model.create(source, self._preset, self._sets, self._chosen)
        else:
            self._model = _proxima.Model.load(load_from, source, self._sets)
        if spaces is None:  # an id only Rust makes (atari:...): the spaces its envs have
            self.observation_space, self.action_space = _spaces_of_model(self._model)
            if _policy_name(self.policy_class) in _MULTI_INPUT_POLICIES and isinstance(env, str):
                self.observation_space = _gym_observation_space(env) or self.observation_space
            if load_from is None:
                self._check_observation_space()
        self._keep_observation_space()
        self._cache()
        if load_from is None:
            self._note_mlp_on_atari(env)

    def _keep_observation_space(self) -> None:
        """A Dict (or Tuple) observation space goes into the model file, so that ``load`` without an
        env takes such observations (``_spaces.space_to_json``)."""
        if _is_structured(self.observation_space):
            text = space_to_json(self.observation_space)
            if text is not None:
                self._model.set_note(_SPACE_NOTE, text)

    def _check_noise_dim(self) -> None:
        """An ``action_noise`` of another size than the action space is refused (TD3, DDPG)."""
        dim = getattr(self, "_noise_dim", None)
        want = int(np.prod(getattr(self.action_space, "shape", ()) or (1,)))
        if dim is not None and dim != want:
            raise ValueError(f"action_noise has {dim} dimensions; the action space {self.action_space} has {want}")

    def _cache(self) -> None:
        """What ``predict`` needs, read once (the model is busy while a rollout runs)."""
        self.n_envs = self._model.n_envs
        self._obs_dim = self._model.obs_dim
        self._action_kind = self._model.action_space[0]
        self._config_toml = self._model.config_toml
        self._recurrent_shape = self._model.recurrent

    @classmethod
    def _blank(cls: type[SelfBaseAlgorithm], env: Optional[EnvLike]) -> SelfBaseAlgorithm:
        """An instance with the attributes ``__init__`` sets, at their defaults (for
        ``from_preset`` and ``load``, which build the model their own way)."""
        self = cls.__new__(cls)
        self.policy_class, self.verbose, self.seed = "MlpPolicy", 0, None
        self.learning_rate = self.clip_range = self.tensorboard_log = None
        self.policy_kwargs, self._hyper, self._sets, self._model = {}, {}, {}, None
        self._custom_objects: set[str] = set()  # load()'s custom_objects keys
        self._env_given, self._vec_env = env, None
        self._chosen: list[str] = []
        self.observation_space = self.action_space = None
        return self

    @classmethod
    def from_preset(cls: type[SelfBaseAlgorithm], preset: str, env: EnvLike, **overrides: Any) -> SelfBaseAlgorithm:
        """The CLI's preset (``proxima.PRESETS``: ``cleanrl``, ``sb3``, ``paper-mujoco``, ...) on
        ``env``, with ``overrides`` in the config's names (SB3's, e.g. ``n_steps=256``)."""
        if preset not in _proxima.PRESETS:
            hint = difflib.get_close_matches(preset, list(_proxima.PRESETS), n=1)
            more = f" (did you mean {hint[0]!r}?)" if hint else ""
            raise ValueError(f"unknown preset {preset!r}{more}; presets: {', '.join(_proxima.PRESETS)}")
        self = cls._blank(env)
        self.verbose, self.seed = int(overrides.pop("verbose", 0)), overrides.pop("seed", 1)
        self.learning_rate, self.clip_range = overrides.get("learning_rate"), overrides.get("clip_range")
        self._sets = {"algo": cls._algo, **self._extra_settings(overrides), "seed": int(self.seed)}
        source, spaces = env_source(env)
        self._model = _proxima.Model.create(source, preset, self._sets, sorted(overrides))
        unread = _proxima.preset_keys_unread(preset, cls._algo)
        if unread:
            warnings.warn(f"preset {preset!r} holds another algorithm's values; {cls.__name__} does not read its "
                          f"{', '.join(unread)}", UserWarning, stacklevel=2)
        self.observation_space, self.action_space = spaces or _spaces_of_model(self._model)
        self._cache()
        self._attributes_from_config()
        self._note_mlp_on_atari(env)
        return self

    def _note_mlp_on_atari(self, env: EnvLike) -> None:
        """A ``UserWarning`` when an ``atari:`` id is trained with an MLP (as the CLI notes it): the
        Atari presets train the Nature CNN."""
        policy = _config_value(self._config_toml, "policy")
        if isinstance(env, str) and env.startswith("atari:") and policy == "MlpPolicy":
            warnings.warn(
                f"{env} with MlpPolicy: an MLP on the stacked frames; the Nature CNN is policy='CnnPolicy' "
                f"(or {type(self).__name__}.from_preset('paper-atari', {env!r}))",
                UserWarning,
                stacklevel=3,
            )

    def _attributes_from_config(self) -> None:
        """SB3's attributes of a model built from a preset or loaded: ``learning_rate`` and (PPO's)
        ``clip_range`` where not given, and ``policy_class`` (``CnnPolicy`` for a CNN), from the run's
        config."""
        if self.learning_rate is None:
            self.learning_rate = _config_value(self._config_toml, "learning_rate")
        if self.clip_range is None and self._algo in ("ppo", "ppg"):
            self.clip_range = _config_value(self._config_toml, "clip_range")
        policy = _config_value(self._config_toml, "policy")
        if _policy_name(self.policy_class) == "MlpPolicy" and isinstance(policy, str) and policy != "MlpPolicy":
            self.policy_class = policy

    # --- training ---------------------------------------------------------------------------
    def learn(
        self: SelfBaseAlgorithm,
        total_timesteps: int,
        callback: MaybeCallback = None,
        log_interval: int = 1,
        tb_log_name: str = "",
        reset_num_timesteps: bool = True,
        progress_bar: bool = False,
    ) -> SelfBaseAlgorithm:
        """Return a trained model.

        Trains for ``total_timesteps`` env steps (more from where it is with
        ``reset_num_timesteps=False``) in Rust, with the GIL released. Callbacks are called as SB3
        calls them (``_on_step`` after every step of the envs; ``False`` stops). Ctrl-C raises
        ``KeyboardInterrupt`` with the model intact and savable (at the end of the current update;
        within a step when a callback is given)."""
        total_timesteps = _int({"total_timesteps": total_timesteps}, "total_timesteps")  # 1e6 too, as SB3 takes it
        if total_timesteps <= 0:
            raise ValueError(f"total_timesteps must be positive, got {total_timesteps}")
        if self._model is None or not self._model.has_env:
            raise ValueError("this model has no env: pass env= to the constructor or to load() to train it")
        if reset_num_timesteps:
            self._model.reset_num_timesteps()
        total = int(total_timesteps) + (0 if reset_num_timesteps else self.num_timesteps)
        from .callbacks import _as_callback

        cb = None if callback is None else _as_callback(callback)
        logger = _Logger(self, log_interval, progress_bar, total)
        self._live_timesteps = self.num_timesteps
        hooks = self._hooks(cb, logger)
        if cb is not None:
            cb.init_callback(self)
            cb.on_training_start(locals(), globals())
        try:
            self._model.learn(total, *hooks, tensorboard_dir=self._tensorboard_dir(tb_log_name, reset_num_timesteps))
        finally:
            self._live_timesteps = None
            logger.close()
            if cb is not None:
                cb.on_training_end()
        return self

    def _tensorboard_dir(self, tb_log_name: str, reset_num_timesteps: bool) -> Optional[str]:
        """SB3's layout: ``{tensorboard_log}/{tb_log_name}_{i}``, a new ``i`` per ``learn`` unless it
        continues (``reset_num_timesteps=False``) the latest one."""
        root = getattr(self, "tensorboard_log", None)
        if root is None:
            return None
        name = tb_log_name or type(self).__name__
        os.makedirs(root, exist_ok=True)
        ids = [int(d.rsplit("_", 1)[1]) for d in os.listdir(root)
               if d.startswith(name + "_") and d.rsplit("_", 1)[1].isdigit()]
        latest = max(ids, default=0)
        run = latest if (not reset_num_timesteps and latest > 0) else latest + 1
        path = os.path.join(root, f"{name}_{run}")
        os.makedirs(path, exist_ok=True)
        return path

    def _hooks(self, cb: Optional[BaseCallback], logger: _Logger) -> tuple[Optional[Callable[..., object]], ...]:
        """``_proxima.Model.learn``'s hooks: before each rollout, per step, before the update,
        after it (per-step ones only with a callback)."""
        schedule = self._schedule()
        space = self.observation_space  # a Dict/Tuple one (shape None): callbacks see the flattened rows
        shape = tuple(space.shape) if space is not None and space.shape is not None else None

        def before(progress: float):
            if cb is not None:
                cb.on_rollout_start()
            return schedule(progress) if schedule else (None, None)

        def on_step(step, new_obs, rewards, dones, infos) -> bool:
            self._live_timesteps = int(step)
            if shape is not None:
                new_obs = new_obs.reshape((new_obs.shape[0],) + shape)
            cb.update_locals({"new_obs": new_obs, "rewards": rewards, "dones": dones, "infos": infos})
            return bool(cb.on_step())  # as SB3: a falsy answer (None too) stops

        def rollout_end() -> None:
            cb.on_rollout_end()

        def after(report: dict) -> bool:
            self._live_timesteps = int(report["time/total_timesteps"])
            logger.record(report)
            return cb.on_update_end(report) if cb is not None else True

        return (before, on_step if cb else None, rollout_end if cb else None, after)

    def _schedule(self) -> Optional[Callable[[float], tuple[Optional[float], Optional[float]]]]:
        def given(key: str) -> Optional[Schedule]:
            """The schedule of ``key`` given in Python: a callable, or load()'s custom number."""
            value = getattr(self, key, None)
            if callable(value):
                return value  # type: ignore[no-any-return]
            if value is not None and key in self.__dict__.get("_custom_objects", ()):
                return lambda _progress, v=float(value): v  # type: ignore[misc]
            return None

        lr, clip = given("learning_rate"), given("clip_range")
        if lr is None and clip is None:
            return None
        return lambda progress: (
            float(lr(progress)) if lr else None,
            float(clip(progress)) if clip else None,
        )

    # --- inference --------------------------------------------------------------------------
    def predict(
        self,
        observation: npt.ArrayLike,
        state: Optional[tuple[np.ndarray, ...]] = None,
        episode_start: Optional[np.ndarray] = None,
        deterministic: bool = False,
    ) -> tuple[np.ndarray, Optional[tuple[np.ndarray, ...]]]:
        """Get the policy action from an observation (and optional hidden state).

        Actions for one observation or a batch, as SB3's: Box actions clipped to the space (SB3:
        the same), discrete ones as int64; observations normalised when training normalised them."""
        return self._predict(observation, state, deterministic, None)

    def _predict(
        self,
        observation: npt.ArrayLike,
        state: Optional[tuple[np.ndarray, ...]],
        deterministic: bool,
        action_masks: Optional[npt.ArrayLike],
        episode_start: Optional[npt.ArrayLike] = None,
    ) -> tuple[np.ndarray, Optional[tuple[np.ndarray, ...]]]:
        """``predict``, with sb3-contrib's ``action_masks`` when given, and a recurrent policy's
        ``state`` and ``episode_start`` (sb3-contrib's ``RecurrentPPO.predict``)."""
        if self._model is None:
            raise ValueError("this model has no policy yet")
        if isinstance(observation, tuple) and len(observation) == 2 and isinstance(observation[1], dict):
            raise TypeError("predict got (observation, info), what env.reset() returns: pass the observation alone")
        obs = _flat_observation(observation, self.observation_space, self._obs_dim)
        if obs.dtype == object or not (np.issubdtype(obs.dtype, np.number) or obs.dtype == np.bool_):
            raise TypeError(f"observation must be numeric, got dtype {obs.dtype}")
        obs = channels_first_observation(obs, self.observation_space)
        space = self.observation_space
        shape = tuple(space.shape) if space is not None and space.shape is not None else (self._obs_dim,)
        if obs.shape == shape:
            single, batch = True, obs.reshape(1, -1)
        elif obs.ndim == len(shape) + 1 and obs.shape[1:] == shape:
            single, batch = False, obs.reshape(obs.shape[0], int(np.prod(shape)))
        else:
            raise ValueError(f"observation of shape {obs.shape}; this policy takes {shape} or (n, *{shape})")
        if batch.shape[0] == 0:
            raise ValueError(f"an empty batch of observations (shape {obs.shape}): give at least one")
        masks = None if action_masks is None else _mask_rows(action_masks, batch.shape[0])
        hidden = self._hidden_in(state, episode_start, batch.shape[0])
        acts, next_state = self._model.predict(np.ascontiguousarray(batch, dtype=np.float32), bool(deterministic),
                                               masks, *hidden)
        if next_state is not None:
            state = self._hidden_out(next_state)
        kind = self._action_kind
        if kind == "discrete":
            out = acts[:, 0].astype(np.int64)
        elif kind == "multidiscrete":
            out = acts.astype(np.int64)
        else:
            ashape = tuple(getattr(self.action_space, "shape", (acts.shape[1],)))
            dtype = getattr(self.action_space, "dtype", np.float32)
            out = acts.reshape((acts.shape[0],) + ashape).astype(dtype)
        return (out.squeeze(axis=0) if single else out), state

    def _hidden_in(self, state: Optional[tuple[np.ndarray, ...]], episode_start: Optional[npt.ArrayLike],
                   n: int) -> tuple[Optional[np.ndarray], Optional[np.ndarray]]:
        """A recurrent policy's ``state`` (sb3-contrib's ``(h, c)``, each ``(n_layers, n_envs,
        hidden)``; None: zeros) and ``episode_start`` (None: no start) as the model takes them:
        ``[n, state_dim]`` (the critic's part zeros: acting does not read it) and ``[n]``;
        ``(None, None)`` for a feed-forward policy."""
        rec = self._recurrent_shape
        if rec is None:
            return None, None
        cell, hidden, layers, state_dim = rec
        per = 2 if cell == "lstm" else 1
        full = np.zeros((n, state_dim), np.float32)
        if state is not None:
            parts = [np.asarray(s, dtype=np.float32) for s in state]
            if len(parts) != per or any(p.shape != (layers, n, hidden) for p in parts):
                raise ValueError(f"state: {per} array(s) of shape ({layers}, {n}, {hidden}) (the {cell.upper()}'s "
                                 f"{'(h, c)' if per == 2 else '(h,)'} for {n} observation(s)); got "
                                 f"{[p.shape for p in parts]}")
            for k in range(layers):
                for s_i, p in enumerate(parts):
                    full[:, (k * per + s_i) * hidden:(k * per + s_i + 1) * hidden] = p[k]
        starts = np.zeros(n, dtype=bool) if episode_start is None else np.asarray(episode_start, dtype=bool).reshape(-1)
        if starts.shape != (n,):
            raise ValueError(f"episode_start of {starts.size} values for {n} observation(s)")
        carried = ~starts
        full[starts] = 0.0  # an episode start zeroes its row's state: what it held (even NaN) is not read
        if not np.isfinite(full[carried]).all():
            rows = sorted({int(r) for r in np.nonzero(~np.isfinite(full) & carried[:, None])[0]})
            raise ValueError(f"state holds NaN or infinite values for observation(s) {rows} (not at an episode "
                             "start): pass the state the last predict returned, or None with episode_start=True")
        return full, starts

    def _hidden_out(self, full: np.ndarray) -> tuple[np.ndarray, ...]:
        """The model's next hidden state ``[n, state_dim]`` as sb3-contrib returns the actor's:
        ``(h, c)`` (a GRU: ``(h,)``), each ``(n_layers, n_envs, hidden)``."""
        cell, hidden, layers, _ = self._recurrent_shape
        per = 2 if cell == "lstm" else 1
        return tuple(np.stack([full[:, (k * per + s_i) * hidden:(k * per + s_i + 1) * hidden] for k in range(layers)])
                     for s_i in range(per))

    # --- persistence ------------------------------------------------------------------------
    def save(self, path: Union[str, os.PathLike[str]], exclude: Optional[Iterable[str]] = None,
             include: Optional[Iterable[str]] = None) -> None:
        """Save all the attributes of the object and the model parameters in a file.

        One safetensors file: parameters, optimiser state, config and counters; ``proxima eval``
        reads it, and so does ``load``."""
        if exclude or include:
            raise NotImplementedError("save(exclude=..., include=...) is not supported: the file always holds the whole model")
        path = _checked_path("save", path)
        if os.path.isdir(path) or path.endswith(("/", os.sep)):
            raise ValueError(f"save: {path!r} names a directory; give a file path, such as "
                             f"{os.path.join(path, 'model.safetensors')!r}")
        if not os.path.splitext(path)[1]:
            path += _SAFETENSORS
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)  # as SB3
        self._model.save(path)

    def export_onnx(self, path: Union[str, os.PathLike[str]], action_masks: Optional[bool] = None) -> dict[str, dict[str, str]]:
        """Write the policy as an ONNX model of ``predict(observation, deterministic=True)``, to run it without
        Proxima (onnxruntime, a game engine, a robot). Everything ``predict`` does is inside the graph: the
        observation normalisation with its frozen statistics, the network, the deterministic action (the argmax
        of the logits, the Gaussian mean clipped to the Box, SAC's/TD3's tanh rescaled to the Box).

        Inputs: ``obs``, ``float32 [batch, obs_dim]`` (a Dict or Tuple observation flattened by
        ``gymnasium.spaces.flatten``; image keys' CNNs are inside the graph), or for ``CnnPolicy`` ``uint8 [batch, C, H, W]`` (channel-first, as
        ``VecTransposeImage`` gives them); with ``action_masks``, ``action_masks`` ``bool [batch, n]``.
        Outputs: ``action`` (``int64 [batch]`` for Discrete, ``int64 [batch, k]`` for MultiDiscrete,
        ``float32 [batch, dim]`` for Box), ``logits`` (discrete) or ``mean`` (Box), and ``value``
        (``float32 [batch]``, on-policy algorithms). A recurrent policy also takes ``state_h`` (and for an LSTM
        ``state_c``), ``float32 [n_layers, batch, hidden]`` as ``predict``'s ``state``, and ``episode_start``
        ``bool [batch]``, and gives ``next_state_h`` (``next_state_c``). ONNX opset 17; written atomically.

        :param path: the file to write (such as ``"policy.onnx"``); its folder must exist
        :param action_masks: add the ``action_masks`` input (sb3-contrib's masks, True = valid); default: True for
            ``MaskablePPO``, else False
        :return: ``{"inputs": {name: "dtype [dims]"}, "outputs": {...}}``
        :raises ValueError: an empty path, a directory, a folder that does not exist, or ``action_masks=True`` for a
            Box action space
        """
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"export_onnx: path must be a str or os.PathLike, got {type(path).__name__}")
        path = os.fspath(path)
        if not isinstance(path, str) or not path.strip():
            raise ValueError("export_onnx: the path is empty; give a file name, such as 'policy.onnx'")
        if os.path.isdir(path) or path.endswith(("/", os.sep)):
            raise ValueError(f"export_onnx: {path!r} names a directory; give a file path, such as "
                             f"{os.path.join(path, 'policy.onnx')!r}")
        if action_masks is None:
            action_masks = isinstance(self, MaskablePPO)
        if self._model is None:
            raise ValueError("this model has no policy yet")
        inputs, outputs = self._model.export_onnx(path, bool(action_masks))
        return {"inputs": dict(inputs), "outputs": dict(outputs)}

    @classmethod
    def load(cls: type[SelfBaseAlgorithm], path: Union[str, os.PathLike[str]], env: Optional[EnvLike] = None,
             device: str = "auto", custom_objects: Optional[dict[str, Union[float, Schedule]]] = None,
             print_system_info: bool = False, force_reset: bool = True, **kwargs: Any) -> SelfBaseAlgorithm:
        """Load the model from a file.

        A saved model (a file from ``save``, a CLI checkpoint, or a CLI run directory), ready to
        ``predict``; with ``env``, ready to ``learn`` on from where it was (its weights, Adam state,
        counters and normalisation statistics; the envs start new episodes). A schedule is not
        stored in the file: without ``custom_objects`` a model trained with one goes on at the
        schedule's starting value (``schedule(1.0)``, the config's); pass the schedule again to
        continue it."""
        attrs = {k: kwargs.pop(k) for k in ("verbose", "tensorboard_log") if k in kwargs}
        config_keys = set(_proxima.CONFIG_KEYS) - {"algo", "preset", "seed", "total_timesteps"}
        for key in kwargs:
            if key in config_keys:
                continue
            names = ["env", "path", "custom_objects", "print_system_info", "force_reset", "device", "verbose",
                     "tensorboard_log", *sorted(config_keys)]
            hint = difflib.get_close_matches(key, names, n=1)
            more = f"; did you mean {hint[0]!r}?" if hint else ""
            raise TypeError(f"{cls.__name__}.load() got an unexpected keyword argument {key!r}{more}")
        if kwargs and env is None:
            raise ValueError(f"{sorted(kwargs)}: changing hyperparameters at load needs env= (a model to train)")
        if str(device) not in ("auto", "cpu"):
            raise NotImplementedError(f"device={device!r}: Proxima runs on the CPU ('auto' or 'cpu')")
        if not force_reset:
            raise NotImplementedError("force_reset=False: the envs given to load() always start new episodes")
        unknown = set(custom_objects or {}) - {"learning_rate", "clip_range"}
        if unknown:
            raise NotImplementedError(f"custom_objects {sorted(unknown)}: only learning_rate and clip_range are supported")
        file = _resolve_model_file("load", path)
        if print_system_info:
            import platform

            print(f"proxima {_proxima.__version__}, Python {platform.python_version()}, {platform.platform()}")
        self = cls._blank(env)
        for key, value in (custom_objects or {}).items():
            # A number stays a number (SB3's model.learning_rate is then that float) and holds
            # over the saved schedule at learn (_schedule).
            setattr(self, key, value if callable(value) else float(value))
            self._custom_objects.add(key)
        self._sets = {k: _setting(v) for k, v in kwargs.items()}
        self.tensorboard_log = attrs.get("tensorboard_log")
        self.verbose = int(attrs.get("verbose", 0))
        if env is None:
            self._model = _proxima.Model.load(file, None, {})
            self.observation_space, self.action_space = _spaces_of_loaded(self._model)
            kept = self._model.note(_SPACE_NOTE)
            if kept is not None:  # the Dict (or Tuple) space the model was trained on
                self.observation_space = space_from_json(kept)
                self.policy_class = "MultiInputLstmPolicy" if cls._recurrent else "MultiInputPolicy"
            self._cache()
        else:
            self._build(env, load_from=file)
        algo = _algo_of(self._model.config_toml)
        if algo != cls._algo:
            cls_name = {"ppo": "PPO", "a2c": "A2C", "trpo": "TRPO", "sac": "SAC", "td3": "TD3", "ddpg": "DDPG", "tqc": "TQC"}.get(algo)
            how = (f"load it with proxima.{cls_name}.load" if cls_name else
                   "the Python package has no class for it: evaluate it with `proxima eval` or train on with `proxima train --resume`")
            raise ValueError(f"{file} holds a {algo.upper()} model; {how}")
        recurrent = self._recurrent_shape is not None
        if recurrent != cls._recurrent:
            right = "proxima.RecurrentPPO.load" if recurrent else "proxima.PPO.load (or MaskablePPO.load)"
            raise ValueError(f"{file} holds a {'recurrent' if recurrent else 'feed-forward'} policy; load it with {right}")
        self._attributes_from_config()
        return self

    def get_parameters(self) -> dict[str, np.ndarray]:
        """The policy's parameters by name (Proxima's names, as in the checkpoint), as numpy arrays.

        :return: the parameters, ``{name: float32 array}``"""
        return {n: np.asarray(v, dtype=np.float32).reshape(s) for n, s, v in self._model.get_parameters()}

    def set_parameters(self, load_path_or_dict: Union[str, os.PathLike[str], dict[str, npt.ArrayLike]],
                       exact_match: bool = True, device: str = "auto") -> None:
        """Load parameters from a given file or a dictionary as ``get_parameters`` returns it.
        Nothing changes when one is wrong.

        :param load_path_or_dict: Location of the saved data (path, see ``save``), or a dictionary
            ``{name: array}`` as ``get_parameters`` returns it (not SB3's nested ``state_dict``
            form: ``TypeError``)
        :param exact_match: If True, the given parameters should include parameters for each
            module and each of their parameters, otherwise raises a ``ValueError``. If set to
            False, this can be used to update only specific parameters: names the policy does not
            have are skipped (as PyTorch's ``strict=False``), but not all of them (``ValueError``)
        :param device: Device on which the code should run (``"auto"`` or ``"cpu"``)."""
        if isinstance(load_path_or_dict, dict) and any(isinstance(v, dict) for v in load_path_or_dict.values()):
            raise TypeError("set_parameters takes {name: array} as get_parameters() returns it (names such as "
                            "'actor.0.weight'), not SB3's {'policy': state_dict} form")
        if isinstance(load_path_or_dict, (str, os.PathLike)):
            other = _proxima.Model.load(_resolve_model_file("set_parameters", load_path_or_dict), None, {})
            params = {n: np.asarray(v, dtype=np.float32).reshape(s) for n, s, v in other.get_parameters()}
        elif isinstance(load_path_or_dict, dict):
            params = load_path_or_dict
        else:
            raise TypeError(f"set_parameters takes a dict or a path, got {type(load_path_or_dict).__name__}")
        current = {n: tuple(s) for n, s, _ in self._model.get_parameters()}
        if not exact_match:
            known = {n: v for n, v in params.items() if n in current}
            if params and not known:
                raise ValueError(f"none of the {len(params)} parameters given is one of this policy's "
                                 f"(e.g. {next(iter(params))!r}; the policy's: {', '.join(list(current)[:4])}, ...)")
            params = known
        flat = []
        for name, value in params.items():
            arr = np.asarray(value, dtype=np.float32)
            if name in current and arr.shape != current[name]:
                raise ValueError(f"parameter {name!r} has shape {arr.shape}; the policy's is {current[name]}")
            flat.append((str(name), arr.ravel().tolist()))
        self._model.set_parameters(flat, bool(exact_match))

    # --- SB3's attributes -------------------------------------------------------------------
    @property
    def num_timesteps(self) -> int:
        """Env steps taken so far (over all envs)."""
        live = getattr(self, "_live_timesteps", None)
        if live is not None:  # during learn: as the last step reported it
            return live
        return int(self._model.num_timesteps) if self._model is not None else 0

    def __getattr__(self, name: str) -> ConfigValue:
        """SB3's hyperparameter attributes (``model.n_steps``, ``model.gamma``, ...): the run's
        config values. SB3's ``model.policy`` (a torch module) has no counterpart: its
        ``AttributeError`` names the ways to the networks, which live in Rust."""
        if name == "policy":
            raise AttributeError(
                f"{type(self).__name__!r} object has no attribute 'policy': Proxima's networks live in Rust, not in a "
                "torch module; get_parameters() gives the weights by name, set_parameters() sets them (also from an SB3 "
                "model's policy.state_dict()), predict() runs the policy, and policy_class is the policy name given")
        if name.startswith("_") or name not in _proxima.CONFIG_KEYS or "_config_toml" not in self.__dict__:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        config_toml, ignored = self.__dict__["_config_toml"], self.__dict__.get("_ignored_keys")
        # Another algorithm's hyperparameter (TD3's ent_coef) is no attribute, as in SB3. Read from
        # the config's text (once per text), so that a callback may ask while learn() runs.
        if ignored is None or ignored[0] is not config_toml:
            ignored = self.__dict__["_ignored_keys"] = (config_toml, _proxima.ignored_keys(config_toml))
        why = ignored[1].get(name)
        if why is None and any(line.partition("=")[0].strip() == name for line in config_toml.splitlines()):
            return _config_value(config_toml, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}" + (f": {why}" if why else ""))

    @property
    def env(self) -> Optional[VecEnvLike]:
        """SB3's ``model.env``: the vector env ``get_env()`` returns."""
        return self.get_env()

    def set_env(self, env: EnvLike, force_reset: bool = True) -> None:
        """SB3's ``set_env`` is not supported yet: the envs are fixed when the model is made. Load the
        saved model with the new env instead: ``Algo.load(path, env=new_env)``.

        :param env: The environment for learning a policy
        :param force_reset: Force call to ``reset()`` before training
        """
        raise NotImplementedError("set_env is not supported yet: save the model, then load(path, env=new_env)")

    def set_logger(self, logger: object) -> None:
        """SB3's ``set_logger`` is not supported: Proxima logs with ``verbose`` (SB3's table and keys)
        and ``tensorboard_log`` (CleanRL's tags).

        :param logger: Logger object
        """
        raise NotImplementedError("set_logger is not supported: use verbose=1, tensorboard_log=DIR or a callback")

    def get_vec_normalize_env(self) -> None:
        """SB3's ``VecNormalize`` wrapper of the training env: Proxima normalises inside the model
        (``normalize_observation``/``normalize_reward`` in the config, saved with it), so there is
        none; returns ``None``, as SB3 does for an env without one.

        :return: None
        """
        return None

    def get_env(self) -> Optional[VecEnvLike]:
        """Returns the current environment (can be None if not defined), as a vector env with SB3's
        ``VecEnv`` API: ``reset()`` returns the observations alone, ``step(actions)`` returns
        ``(obs, rewards, dones, infos)`` and resets an env whose episode ended (its last observation in
        ``infos[i]["terminal_observation"]``, ``infos[i]["TimeLimit.truncated"]``), as in SB3's README::

            vec_env = model.get_env()
            obs = vec_env.reset()
            for i in range(1000):
                action, _states = model.predict(obs, deterministic=True)
                obs, reward, done, info = vec_env.step(action)
                vec_env.render()

        What it is, by the ``env`` the model was given (made on the first call, then the same object):

        * an SB3 ``VecEnv``: that very object;
        * a Gymnasium vector env: that env behind SB3's API (``proxima.vec_env.GymnasiumVecEnv``);
        * a Gymnasium ``Env`` or a list of them: ``proxima.vec_env.DummyVecEnv`` over those env objects
          (the ones training steps);
        * env factories: a ``DummyVecEnv`` over new envs from the factories (training steps its own);
        * an env id: a ``DummyVecEnv`` of ``n_envs`` new ``gymnasium.make(id)`` envs. For a native id
          (``proxima.NATIVE_ENV_IDS``) that is Gymnasium's Python env of the same id, as training
          stepped Proxima's copy in Rust, which Python cannot step; for an ``atari:`` id, SB3's
          ``VecFrameStack(make_atari_env(game, n_envs), frame_stack)`` with the id's settings (the
          wrappers Proxima's Rust ones equal frame by frame; needs stable-baselines3 and ale-py),
          channel-last, each env under SB3's ``Monitor``.

        Envs that are not an SB3 ``VecEnv`` are wrapped in Gymnasium's ``RecordEpisodeStatistics``
        (``infos[i]["episode"]`` with ``r``, ``l``, ``t``, as SB3's ``Monitor``). Channel-last images stay
        channel-last (``predict`` takes either layout). ``None`` for a model made or loaded without env.
        Stepping the envs training steps moves them: a later ``learn`` goes on from its own last
        observation (SB3 resets them when ``learn`` starts). ``proxima.evaluate_policy`` takes the
        returned env; SB3's ``evaluate_policy`` takes only SB3's own ``VecEnv`` classes.

        :return: The current environment
        """
        if self._vec_env is None and self._env_given is not None:
            from .vec_env import for_model

            self._vec_env = for_model(self._env_given, self.n_envs)
        return self._vec_env

    def set_random_seed(self, seed: Optional[int] = None) -> None:
        """Seeds ``predict``'s sampling (a training run's seed is fixed when it is built)."""
        if seed is not None:
            self._model.seed_predict(int(seed))

    def __repr__(self) -> str:
        env = self._model.env_id if self._model is not None else None
        return f"{type(self).__name__}(env={env!r}, num_timesteps={self.num_timesteps})"


def _is_structured(space: Optional[gym.spaces.Space]) -> bool:
    """Whether ``space`` is a Dict or Tuple space (``MultiInputPolicy``'s)."""
    import gymnasium

    return isinstance(space, (gymnasium.spaces.Dict, gymnasium.spaces.Tuple))


def _gym_observation_space(env_id: str) -> Optional[gym.spaces.Space]:
    """The observation space of a Gymnasium id (``gym:`` prefix or not), made once in Python; None
    for an id Gymnasium does not know (a native or ``atari:`` one)."""
    import gymnasium

    try:
        env = gymnasium.make(env_id[4:] if env_id.startswith("gym:") else env_id)
    except Exception:  # noqa: BLE001 - not a Gymnasium id: the Rust model's space stands
        return None
    space = env.observation_space
    env.close()
    return space


def _flat_observation(observation: Any, space: Optional[gym.spaces.Space], obs_dim: int) -> np.ndarray:
    """A Dict/Tuple observation (or a batch of them, as a vector env returns them) flattened as the
    bridge flattens training's (Gymnasium's ``spaces.flatten``: Discrete keys one-hot, keys in the
    space's order), ``[flatdim]`` or ``[n, flatdim]``; any other observation as an array."""
    import gymnasium

    structured = isinstance(space, (gymnasium.spaces.Dict, gymnasium.spaces.Tuple))
    if structured and not isinstance(observation, (dict, tuple)):
        raise TypeError(f"this policy (MultiInputPolicy) takes {type(space).__name__} observations of {space}; "
                        f"got {type(observation).__name__}")
    if not isinstance(observation, (dict, tuple)) or (isinstance(observation, tuple) and not structured):
        return np.asarray(observation)
    if not structured:
        raise TypeError(f"a {type(observation).__name__} observation for a policy of observation space {space}: "
                        "Dict observations need the model's Dict space (pass env= to load)")
    if isinstance(space, gymnasium.spaces.Dict) and isinstance(observation, dict):
        extra = sorted(set(observation) - set(space.spaces), key=str)
        if extra:
            raise ValueError(f"the observation has keys {extra} that the observation space {space} does not; "
                             f"its keys: {list(space.spaces)}")

    def flat(row: Any) -> np.ndarray:
        _check_discrete_keys(space, row)
        return np.asarray(gymnasium.spaces.flatten(space, row), dtype=np.float32)

    try:
        n = _batch_size(space, observation)
        if n is None:
            return flat(observation)
        rows = gymnasium.vector.utils.iterate(gymnasium.vector.utils.batch_space(space, n), observation)
        return np.stack([flat(row) for row in rows])
    except (KeyError, ValueError, TypeError, IndexError, AssertionError) as e:
        raise ValueError(f"an observation that does not fit the observation space {space}: "
                         f"{type(e).__name__}: {e}") from e


def _check_discrete_keys(space: gym.spaces.Space, observation: Any) -> None:
    """A Discrete (MultiDiscrete) key's value must lie in its space: the one-hot of a value out of
    range would be silently wrong (a negative index counts from the end)."""
    import gymnasium

    if isinstance(space, gymnasium.spaces.Dict):
        for k, sub in space.spaces.items():
            _check_discrete_keys(sub, observation[k])
    elif isinstance(space, gymnasium.spaces.Tuple):
        for sub, v in zip(space.spaces, observation):
            _check_discrete_keys(sub, v)
    elif isinstance(space, (gymnasium.spaces.Discrete, gymnasium.spaces.MultiDiscrete)) and not space.contains(
            np.asarray(observation, dtype=space.dtype) if np.all(np.mod(observation, 1) == 0) else None):
        raise ValueError(f"the value {observation!r} is not in {space}")


def _batch_size(space: gym.spaces.Space, observation: Any) -> Optional[int]:
    """None for one observation of the Dict/Tuple ``space``; n for a batch of n (every leaf with a
    leading axis of n, as a vector env returns them), told by the first leaf's shape."""
    import gymnasium

    while isinstance(space, (gymnasium.spaces.Dict, gymnasium.spaces.Tuple)):
        if isinstance(space, gymnasium.spaces.Dict):
            key = next(iter(space.spaces))
            space, observation = space.spaces[key], observation[key]
        else:
            space, observation = space.spaces[0], observation[0]
    shape = np.shape(observation)
    own = () if space.shape is None else tuple(space.shape)
    if shape == own:
        return None
    if shape[1:] == own and len(shape) >= 1:
        return int(shape[0])
    raise ValueError(f"a value of shape {shape} for a key of space {space}")


def _leaves(observation: Any) -> Iterable[Any]:
    """The arrays of a nested dict/tuple observation, in order."""
    if isinstance(observation, dict):
        for v in observation.values():
            yield from _leaves(v)
    elif isinstance(observation, tuple):
        for v in observation:
            yield from _leaves(v)
    else:
        yield observation


def _mask_rows(action_masks: npt.ArrayLike, rows: int) -> np.ndarray:
    """sb3-contrib's ``action_masks`` (booleans, True = valid, or numbers that are all 0 or 1;
    one row per observation, or one mask for a single observation) as ``[rows, mask_dim]``
    uint8."""
    masks = np.asarray(action_masks)
    if masks.dtype != np.bool_:
        numeric = np.issubdtype(masks.dtype, np.integer) or np.issubdtype(masks.dtype, np.floating)
        if not numeric or not np.isin(masks, (0, 1)).all():
            raise TypeError(f"action_masks of dtype {masks.dtype}: a mask is boolean (True = valid), "
                            "or numbers that are all 0 or 1")
    if masks.size % max(rows, 1) != 0 or masks.size == 0:
        raise ValueError(f"action_masks of shape {masks.shape} for {rows} observation(s): "
                         "give one mask (one entry per action) per observation")
    return np.ascontiguousarray(masks.reshape(rows, -1), dtype=np.uint8)


def _toml_value(text: str) -> ConfigValue:
    """One value of the config's TOML (numbers, booleans, strings, lists of numbers)."""
    if text in ("true", "false"):
        return text == "true"
    if text.startswith('"'):
        value = text.strip('"')
        return None if value == "none" else value
    if text.startswith("["):
        return [int(x) for x in text.strip("[]").split(",") if x.strip()]
    try:
        return int(text)
    except ValueError:
        return float(text)


def _checked_path(what: str, path: Union[str, os.PathLike[str]]) -> str:
    """``path`` as a str; an empty one is a ``ValueError`` (it would name ``./.safetensors``)."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{what}: path must be a str or os.PathLike, got {type(path).__name__}")
    text = os.fspath(path)
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"{what}: the path is empty; give a file name, such as 'ppo_cartpole' (.safetensors is added)")
    return text


def _resolve_model_file(what: str, path: Union[str, os.PathLike[str]]) -> str:
    """The model file ``path`` names: itself, with ``.safetensors`` added, or a run directory's."""
    path = _checked_path(what, path)
    if os.path.isdir(path):
        candidate = os.path.join(path, "model.safetensors")
        if os.path.isfile(candidate):
            return candidate
        raise FileNotFoundError(f"{path} is a directory without model.safetensors (not a Proxima run directory)")
    if os.path.isfile(path):
        return path
    if os.path.isfile(path + _SAFETENSORS):
        return path + _SAFETENSORS
    raise FileNotFoundError(f"no model at {path} (nor {path}{_SAFETENSORS})")


def _algo_of(config_toml: str) -> str:
    algo = _config_value(config_toml, "algo")
    return algo if isinstance(algo, str) else "ppo"


def _config_value(config_toml: str, key: str) -> ConfigValue:
    """``key``'s value in the run's config TOML (one ``key = value`` line each; ``None`` when absent).
    Read by line, not with ``tomllib``, which Python 3.9 and 3.10 lack."""
    for line in config_toml.splitlines():
        name, _, value = line.partition("=")
        if name.strip() == key:
            return _toml_value(value.strip())
    return None


def _spaces_of_loaded(model: _proxima.Model) -> tuple[gym.spaces.Space, gym.spaces.Space]:
    import gymnasium

    env_id = model.env_id
    try:
        probe = gymnasium.make(env_id[4:] if env_id.startswith("gym:") else env_id)
        spaces = (probe.observation_space, probe.action_space)
        probe.close()
        if int(np.prod(spaces[0].shape)) == model.obs_dim:
            return spaces
    except Exception:  # an env only the user (or Rust: atari:...) can make: spaces from the file
        pass
    return _spaces_of_model(model)


def _spaces_of_model(model: _proxima.Model) -> tuple[gym.spaces.Space, gym.spaces.Space]:
    """The (observation, action) spaces as the Rust model describes them."""
    import gymnasium

    shape, dtype = model.observation_space
    if dtype == "uint8":
        obs = gymnasium.spaces.Box(0, 255, tuple(shape), np.uint8)
    else:
        obs = gymnasium.spaces.Box(-np.inf, np.inf, tuple(shape), np.float32)
    kind = model.action_space
    if kind[0] == "discrete":
        act = gymnasium.spaces.Discrete(kind[1])
    elif kind[0] == "multidiscrete":
        act = gymnasium.spaces.MultiDiscrete(kind[1])
    else:
        act = gymnasium.spaces.Box(np.array(kind[1], np.float32), np.array(kind[2], np.float32))
    return obs, act


class _Logger:
    """``verbose=1``: SB3's table every ``log_interval`` iterations (the off-policy algorithms: after
    an iteration in which the count of finished episodes reached a multiple of ``log_interval``, as
    SB3 dumps them at every ``log_interval``-th episode); ``progress_bar``: a bar."""

    def __init__(self, algo: BaseAlgorithm, log_interval: int, progress_bar: bool, total: int):
        self.algo, self.every, self.total = algo, max(int(log_interval or 1), 1), total
        self.bar = _ProgressBar(total, algo.num_timesteps) if progress_bar else None
        self.start, self.start_step = time.time(), algo.num_timesteps
        self.by_episodes, self.episodes = isinstance(algo, _OffPolicyAlgorithm), 0

    def _due(self, r: dict) -> bool:
        if not self.by_episodes:
            return r["time/iterations"] % self.every == 0
        before, self.episodes = self.episodes, self.episodes + len(r["episodes"])
        return self.episodes // self.every > before // self.every

    def record(self, r: dict) -> None:
        if self.bar:
            self.bar.update(r["time/total_timesteps"])
        if self._due(r) and self.algo.verbose >= 1:
            elapsed = max(time.time() - self.start, 1e-9)
            rows = {k: v for k, v in r.items() if k != "episodes"}
            rows["time/fps"] = int((r["time/total_timesteps"] - self.start_step) / elapsed)
            rows["time/time_elapsed"] = int(elapsed)
            width = max(len(k) for k in rows) + 2
            lines = [f"| {k:<{width}}| {v:<12.4g}|" if isinstance(v, float) else f"| {k:<{width}}| {v:<12}|" for k, v in sorted(rows.items())]
            bar = "-" * len(lines[0])
            print("\n".join([bar, *lines, bar]), file=sys.stdout, flush=True)

    def close(self) -> None:
        if self.bar:
            self.bar.close()


class _ProgressBar:
    """tqdm when it is installed (as SB3's progress bar), else a plain one on stderr."""

    def __init__(self, total: int, start: int):
        self.last = start
        try:
            from tqdm import tqdm

            self.tqdm = tqdm(total=total, initial=start, unit="steps")
        except ImportError:
            self.tqdm, self.total = None, total

    def update(self, step: int) -> None:
        if self.tqdm is not None:
            self.tqdm.update(step - self.last)
        else:
            done = int(30 * min(step / max(self.total, 1), 1.0))
            print(f"\r[{'#' * done}{'.' * (30 - done)}] {step}/{self.total}", end="", file=sys.stderr, flush=True)
        self.last = step

    def close(self) -> None:
        if self.tqdm is not None:
            self.tqdm.close()
        else:
            print(file=sys.stderr)


def _lr_settings(learning_rate: Union[float, Schedule]) -> dict[str, Setting]:
    lr = learning_rate(1.0) if callable(learning_rate) else learning_rate
    if isinstance(lr, bool) or not isinstance(lr, (int, float, np.number)):
        raise TypeError(f"learning_rate must be a float or a schedule (progress_remaining -> float), got {lr!r}")
    return {"learning_rate": float(lr), "anneal_lr": False}


def _int(h: dict[str, Any], key: str) -> int:
    """Keyword `key` of `h` as an int: an int or a numpy integer (a whole float too); a bool, a
    string or anything else is a TypeError naming the key, a fractional float a ValueError."""
    v = h[key]
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise TypeError(f"{key} must be an integer, got {v!r} ({type(v).__name__})")
    if isinstance(v, (float, np.floating)) and not float(v).is_integer():
        raise ValueError(f"{key} must be a whole number, got {v!r}")
    return int(v)


def _lstm_kwarg(h: dict[str, Any], key: str) -> Setting:
    """A recurrent policy's keyword of `h` as its config value, checked as sb3-contrib's constructor would take it: a
    whole number for the sizes, a bool (or numpy bool) for the switches, a string for the cell; anything else a
    TypeError (or ValueError) naming the key, never a silent cast (``bool("false")`` is True)."""
    kind = _LSTM_KWARGS[key]
    if kind is int:
        return _int(h, key)
    v = h[key]
    if kind is bool:
        if not isinstance(v, (bool, np.bool_)):
            raise TypeError(f"{key} must be a bool, got {v!r} ({type(v).__name__})")
        return bool(v)
    if not isinstance(v, str):
        raise TypeError(f"{key} must be a string, got {v!r} ({type(v).__name__})")
    return v


def _float(h: dict[str, Any], key: str) -> float:
    """Keyword `key` of `h` as a float: an int, a float or a numpy number; a bool, a string or
    anything else is a TypeError naming the key."""
    v = h[key]
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise TypeError(f"{key} must be a number, got {v!r} ({type(v).__name__})")
    return float(v)


def _common_settings(h: dict[str, Any]) -> dict[str, Setting]:
    return {
        **_lr_settings(h["learning_rate"]),
        "n_steps": _int(h, "n_steps"),
        "gamma": _float(h, "gamma"),
        "gae_lambda": _float(h, "gae_lambda"),
    }


class PPO(BaseAlgorithm):
    """Proximal Policy Optimization (Schulman et al. 2017, arXiv:1707.06347): L^CLIP with
    value loss c₁ and entropy bonus c₂, K epochs of minibatch Adam steps per rollout —
    Stable-Baselines3's ``PPO``, with its keyword arguments and defaults."""

    _algo = "ppo"
    _preset = "sb3"

    def __init__(
        self,
        policy: PolicyType,
        env: Optional[EnvLike],
        learning_rate: Union[float, Schedule] = 3e-4,
        n_steps: int = 2048,
        batch_size: int = 64,
        n_epochs: int = 10,
        gamma: float = 0.99,
        gae_lambda: float = 0.95,
        clip_range: Union[float, Schedule] = 0.2,
        clip_range_vf: Union[None, float, Schedule] = None,
        normalize_advantage: bool = True,
        ent_coef: float = 0.0,
        vf_coef: float = 0.5,
        max_grad_norm: float = 0.5,
        use_sde: bool = False,
        sde_sample_freq: int = -1,
        rollout_buffer_class: Optional[type] = None,
        rollout_buffer_kwargs: Optional[dict[str, Any]] = None,
        target_kl: Optional[float] = None,
        stats_window_size: int = 100,
        tensorboard_log: Optional[str] = None,
        policy_kwargs: Optional[dict[str, Any]] = None,
        verbose: int = 0,
        seed: Optional[int] = None,
        device: str = "auto",
        _init_setup_model: bool = True,
        **kwargs: Any,
    ):
        hyper = {k: v for k, v in locals().items() if k not in ("self", "policy", "env", "kwargs", "__class__")}
        super().__init__(policy, env, hyper, kwargs)

    def _settings(self, h: dict[str, Any]) -> dict[str, Setting]:
        if callable(h["clip_range_vf"]):
            raise NotImplementedError("a callable clip_range_vf is not supported yet (a float or None is)")
        clip = h["clip_range"](1.0) if callable(h["clip_range"]) else h["clip_range"]
        return {
            **_common_settings(h),
            "algo": "ppo",
            "batch_size": _int(h, "batch_size"),
            "n_epochs": _int(h, "n_epochs"),
            "clip_range": float(clip),
            "clip_range_vf": _setting(h["clip_range_vf"]),
            "normalize_advantage": "minibatch" if h["normalize_advantage"] else "off",
            "ent_coef": _float(h, "ent_coef"),
            "vf_coef": _float(h, "vf_coef"),
            "max_grad_norm": _setting(h["max_grad_norm"]),
            "target_kl": _setting(h["target_kl"]),
            # SB3's PPO ignores an env's action_masks(); sb3-contrib's MaskablePPO uses them.
            "use_masking": False,
        }

    def learn(self, total_timesteps: int, callback: MaybeCallback = None, log_interval: int = 1,
              tb_log_name: str = "PPO", reset_num_timesteps: bool = True, progress_bar: bool = False) -> PPO:
        """(SB3's ``PPO.learn``: see ``BaseAlgorithm.learn``.)"""
        return super().learn(total_timesteps, callback, log_interval, tb_log_name, reset_num_timesteps, progress_bar)


class MaskablePPO(PPO):
    """PPO with invalid-action masking (Huang & Ontañón 2022, "A Closer Look at Invalid Action
    Masking in Policy Gradient Algorithms") — sb3-contrib's ``MaskablePPO``, with its keyword
    arguments and defaults. The env's ``action_masks()`` method (found through its wrappers, so
    sb3-contrib's ``ActionMasker`` works unchanged) is read before every step; the masked actions'
    logits are set to -1e8 before the softmax in acting, the loss, the entropy and the KL.
    ``Discrete`` and ``MultiDiscrete`` action spaces."""

    def __init__(
        self,
        policy: PolicyType,
        env: Optional[EnvLike],
        learning_rate: Union[float, Schedule] = 3e-4,
        n_steps: int = 2048,
        batch_size: Optional[int] = 64,
        n_epochs: int = 10,
        gamma: float = 0.99,
        gae_lambda: float = 0.95,
        clip_range: Union[float, Schedule] = 0.2,
        clip_range_vf: Union[None, float, Schedule] = None,
        normalize_advantage: bool = True,
        ent_coef: float = 0.0,
        vf_coef: float = 0.5,
        max_grad_norm: float = 0.5,
        rollout_buffer_class: Optional[type] = None,
        rollout_buffer_kwargs: Optional[dict[str, Any]] = None,
        target_kl: Optional[float] = None,
        stats_window_size: int = 100,
        tensorboard_log: Optional[str] = None,
        policy_kwargs: Optional[dict[str, Any]] = None,
        verbose: int = 0,
        seed: Optional[int] = None,
        device: str = "auto",
        _init_setup_model: bool = True,
        **kwargs: Any,
    ):
        super().__init__(policy, env, learning_rate=learning_rate, n_steps=n_steps, batch_size=batch_size,
                         n_epochs=n_epochs, gamma=gamma, gae_lambda=gae_lambda, clip_range=clip_range,
                         clip_range_vf=clip_range_vf, normalize_advantage=normalize_advantage, ent_coef=ent_coef,
                         vf_coef=vf_coef, max_grad_norm=max_grad_norm, rollout_buffer_class=rollout_buffer_class,
                         rollout_buffer_kwargs=rollout_buffer_kwargs, target_kl=target_kl,
                         stats_window_size=stats_window_size, tensorboard_log=tensorboard_log,
                         policy_kwargs=policy_kwargs, verbose=verbose, seed=seed, device=device,
                         _init_setup_model=_init_setup_model, **kwargs)
        import gymnasium

        if isinstance(self.action_space, gymnasium.spaces.Box):
            raise ValueError(f"MaskablePPO masks Discrete and MultiDiscrete actions; this env's action space is "
                             f"{self.action_space} (continuous): use PPO")

    def _settings(self, h: dict[str, Any]) -> dict[str, Setting]:
        return {**super()._settings(h), "use_masking": True}

    def learn(self, total_timesteps: int, callback: MaybeCallback = None, log_interval: int = 1,
              tb_log_name: str = "MaskablePPO", reset_num_timesteps: bool = True, use_masking: bool = True,
              progress_bar: bool = False) -> MaskablePPO:
        """(sb3-contrib's ``MaskablePPO.learn``.) With ``use_masking=False`` this call's rollouts take every
        action as valid (the rollout stores all-valid masks, as sb3-contrib's buffer does). With
        ``use_masking=True`` an env without ``action_masks()`` is a ``ValueError``, as sb3-contrib's."""
        if use_masking and self._model is not None and self._model.has_env and not self._model.trains_masked:
            raise ValueError("Environment does not support action masking: it has no action_masks() method "
                             "(give the env one, or wrap it in sb3-contrib's ActionMasker; or learn(use_masking=False))")
        if self._model is not None:
            self._model.set_use_masking(bool(use_masking))
        try:
            super().learn(total_timesteps, callback, log_interval, tb_log_name, reset_num_timesteps, progress_bar)
        finally:
            if self._model is not None:
                self._model.set_use_masking(True)
        return self

    def predict(
        self,
        observation: npt.ArrayLike,
        state: Optional[tuple[np.ndarray, ...]] = None,
        episode_start: Optional[np.ndarray] = None,
        deterministic: bool = False,
        action_masks: Optional[np.ndarray] = None,
    ) -> tuple[np.ndarray, Optional[tuple[np.ndarray, ...]]]:
        """Get the policy action from an observation, never one that ``action_masks`` masks.

        :param observation: the input observation (one, or a batch)
        :param state: the last hidden state (unused: not a recurrent policy)
        :param episode_start: the last masks (unused: not a recurrent policy)
        :param deterministic: whether to return deterministic actions
        :param action_masks: the action masks (True = valid) for the observation(s), e.g.
            ``get_action_masks(env)``; ``None``: every action valid
        :return: the model's action and the next hidden state (``state``)"""
        return self._predict(observation, state, deterministic, action_masks)


class RecurrentPPO(PPO):
    """PPO with a recurrent policy — sb3-contrib's ``RecurrentPPO`` with its keyword arguments and
    defaults: an LSTM (or, with ``policy_kwargs=dict(recurrent_cell="gru")``, a GRU) between the
    observation and the MLPs (``MlpLstmPolicy``; ``MultiInputLstmPolicy`` for Dict observations,
    flattened), or between the Nature CNN's features and the heads (``CnnLstmPolicy``, image
    observations), its hidden state carried from step to step and
    zeroed at episode starts, learned from minibatches of whole sequences (``batch_size`` must be
    ``n_steps`` times a number of envs that divides ``n_envs``). ``predict`` takes and returns the
    state as sb3-contrib's."""

    _recurrent = True

    def __init__(
        self,
        policy: PolicyType,
        env: Optional[EnvLike],
        learning_rate: Union[float, Schedule] = 3e-4,
        n_steps: int = 128,
        batch_size: Optional[int] = 128,
        n_epochs: int = 10,
        gamma: float = 0.99,
        gae_lambda: float = 0.95,
        clip_range: Union[float, Schedule] = 0.2,
        clip_range_vf: Union[None, float, Schedule] = None,
        normalize_advantage: bool = True,
        ent_coef: float = 0.0,
        vf_coef: float = 0.5,
        max_grad_norm: float = 0.5,
        use_sde: bool = False,
        sde_sample_freq: int = -1,
        target_kl: Optional[float] = None,
        stats_window_size: int = 100,
        tensorboard_log: Optional[str] = None,
        policy_kwargs: Optional[dict[str, Any]] = None,
        verbose: int = 0,
        seed: Optional[int] = None,
        device: str = "auto",
        _init_setup_model: bool = True,
        **kwargs: Any,
    ):
        super().__init__(policy, env, learning_rate=learning_rate, n_steps=n_steps, batch_size=batch_size,
                         n_epochs=n_epochs, gamma=gamma, gae_lambda=gae_lambda, clip_range=clip_range,
                         clip_range_vf=clip_range_vf, normalize_advantage=normalize_advantage, ent_coef=ent_coef,
                         vf_coef=vf_coef, max_grad_norm=max_grad_norm, use_sde=use_sde, sde_sample_freq=sde_sample_freq,
                         target_kl=target_kl, stats_window_size=stats_window_size, tensorboard_log=tensorboard_log,
                         policy_kwargs=policy_kwargs, verbose=verbose, seed=seed, device=device,
                         _init_setup_model=_init_setup_model, **kwargs)

    def _settings(self, h: dict[str, Any]) -> dict[str, Setting]:
        cnn = _policy_name(self.policy_class) in _CNN_LSTM_POLICIES
        return {**super()._settings(h), "policy": "CnnLstmPolicy" if cnn else "MlpLstmPolicy"}

    def _policy_settings(self, policy_kwargs: Optional[dict[str, Any]]) -> dict[str, Setting]:
        kwargs = dict(policy_kwargs or {})
        lstm = {k: _lstm_kwarg(kwargs, k) for k in list(kwargs) if k in _LSTM_KWARGS}
        for k in lstm:
            kwargs.pop(k)
        return {**_policy_settings(kwargs, also=_LSTM_KWARGS), **lstm}

    def learn(self, total_timesteps: int, callback: MaybeCallback = None, log_interval: int = 1,
              tb_log_name: str = "RecurrentPPO", reset_num_timesteps: bool = True,
              progress_bar: bool = False) -> RecurrentPPO:
        """(sb3-contrib's ``RecurrentPPO.learn``: see ``BaseAlgorithm.learn``.)"""
        super().learn(total_timesteps, callback, log_interval, tb_log_name, reset_num_timesteps, progress_bar)
        return self

    def predict(
        self,
        observation: npt.ArrayLike,
        state: Optional[tuple[np.ndarray, ...]] = None,
        episode_start: Optional[np.ndarray] = None,
        deterministic: bool = False,
    ) -> tuple[np.ndarray, Optional[tuple[np.ndarray, ...]]]:
        """Get the policy action from an observation and the hidden state (sb3-contrib's).

        :param observation: the input observation (one, or one per env)
        :param state: the last hidden state, ``(h, c)`` each ``(n_lstm_layers, n_envs, lstm_hidden_size)``
            (a GRU: ``(h,)``); ``None`` at the start (zeros)
        :param episode_start: whether each observation starts an episode (its state is zeroed first);
            ``None``: none does
        :param deterministic: whether to return deterministic actions
        :return: the model's action and the next hidden state"""
        return self._predict(observation, state, deterministic, None, episode_start)


class A2C(BaseAlgorithm):
    """Advantage Actor-Critic (Mnih et al. 2016, synchronous): one RMSprop step per rollout of
    n-step returns — Stable-Baselines3's ``A2C``, with its keyword arguments and defaults."""

    _algo = "a2c"
    _preset = "a2c"

    def __init__(
        self,
        policy: PolicyType,
        env: Optional[EnvLike],
        learning_rate: Union[float, Schedule] = 7e-4,
        n_steps: int = 5,
        gamma: float = 0.99,
        gae_lambda: float = 1.0,
        ent_coef: float = 0.0,
        vf_coef: float = 0.5,
        max_grad_norm: float = 0.5,
        rms_prop_eps: float = 1e-5,
        use_rms_prop: bool = True,
        use_sde: bool = False,
        sde_sample_freq: int = -1,
        rollout_buffer_class: Optional[type] = None,
        rollout_buffer_kwargs: Optional[dict[str, Any]] = None,
        normalize_advantage: bool = False,
        stats_window_size: int = 100,
        tensorboard_log: Optional[str] = None,
        policy_kwargs: Optional[dict[str, Any]] = None,
        verbose: int = 0,
        seed: Optional[int] = None,
        device: str = "auto",
        _init_setup_model: bool = True,
        **kwargs: Any,
    ):
        hyper = {k: v for k, v in locals().items() if k not in ("self", "policy", "env", "kwargs", "__class__")}
        super().__init__(policy, env, hyper, kwargs)

    def _settings(self, h: dict[str, Any]) -> dict[str, Setting]:
        return {
            **_common_settings(h),
            "algo": "a2c",
            "ent_coef": _float(h, "ent_coef"),
            "vf_coef": _float(h, "vf_coef"),
            "max_grad_norm": _setting(h["max_grad_norm"]),
            "rms_prop_eps": _float(h, "rms_prop_eps"),
            "optimizer": "rmsprop" if h["use_rms_prop"] else "adam",
            "normalize_advantage": "batch" if h["normalize_advantage"] else "off",
        }

    def learn(self, total_timesteps: int, callback: MaybeCallback = None, log_interval: int = 100,
              tb_log_name: str = "A2C", reset_num_timesteps: bool = True, progress_bar: bool = False) -> A2C:
        """(SB3's ``A2C.learn``: see ``BaseAlgorithm.learn``.)"""
        return super().learn(total_timesteps, callback, log_interval, tb_log_name, reset_num_timesteps, progress_bar)


class TRPO(BaseAlgorithm):
    """Trust Region Policy Optimization (Schulman et al. 2015): the natural-gradient step by
    conjugate gradients and a line search within KL δ, then the critic's epochs —
    sb3-contrib's ``TRPO``, with its keyword arguments and defaults."""

    _algo = "trpo"
    _preset = "trpo"

    def __init__(
        self,
        policy: PolicyType,
        env: Optional[EnvLike],
        learning_rate: Union[float, Schedule] = 1e-3,
        n_steps: int = 2048,
        batch_size: int = 128,
        gamma: float = 0.99,
        cg_max_steps: int = 15,
        cg_damping: float = 0.1,
        line_search_shrinking_factor: float = 0.8,
        line_search_max_iter: int = 10,
        n_critic_updates: int = 10,
        gae_lambda: float = 0.95,
        use_sde: bool = False,
        sde_sample_freq: int = -1,
        rollout_buffer_class: Optional[type] = None,
        rollout_buffer_kwargs: Optional[dict[str, Any]] = None,
        normalize_advantage: bool = True,
        target_kl: float = 0.01,
        sub_sampling_factor: int = 1,
        stats_window_size: int = 100,
        tensorboard_log: Optional[str] = None,
        policy_kwargs: Optional[dict[str, Any]] = None,
        verbose: int = 0,
        seed: Optional[int] = None,
        device: str = "auto",
        _init_setup_model: bool = True,
        **kwargs: Any,
    ):
        hyper = {k: v for k, v in locals().items() if k not in ("self", "policy", "env", "kwargs", "__class__")}
        super().__init__(policy, env, hyper, kwargs)

    def _settings(self, h: dict[str, Any]) -> dict[str, Setting]:
        if _int(h, "sub_sampling_factor") != 1:
            raise NotImplementedError("sub_sampling_factor other than 1 is not supported yet")
        return {
            **_common_settings(h),
            "algo": "trpo",
            "batch_size": _int(h, "batch_size"),
            "cg_max_steps": _int(h, "cg_max_steps"),
            "cg_damping": _float(h, "cg_damping"),
            "line_search_shrinking_factor": _float(h, "line_search_shrinking_factor"),
            "line_search_max_iter": _int(h, "line_search_max_iter"),
            "n_critic_updates": _int(h, "n_critic_updates"),
            "normalize_advantage": "batch" if h["normalize_advantage"] else "off",
            "target_kl": _float(h, "target_kl"),
        }

    def learn(self, total_timesteps: int, callback: MaybeCallback = None, log_interval: int = 1,
              tb_log_name: str = "TRPO", reset_num_timesteps: bool = True, progress_bar: bool = False) -> TRPO:
        """(SB3's ``TRPO.learn``: see ``BaseAlgorithm.learn``.)"""
        return super().learn(total_timesteps, callback, log_interval, tb_log_name, reset_num_timesteps, progress_bar)


def _train_freq(value: TrainFreq) -> int:
    if isinstance(value, tuple):
        if len(value) != 2 or str(value[1]) not in ("step", "episode"):
            raise ValueError(f"train_freq must be an int or (n, 'step' | 'episode'); got {value!r}")
        if str(value[1]) == "episode":
            raise NotImplementedError("train_freq in episodes is not supported yet; give it in steps")
        value = value[0]
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"train_freq must be a positive int; got {value!r}")
    return int(value)


def _off_policy_policy_settings(policy_kwargs: Optional[dict[str, Any]], also: frozenset[str] = frozenset()
                                ) -> dict[str, Setting]:
    """``policy_kwargs`` (SB3's SACPolicy/TD3Policy arguments) as config settings; ``also``: the
    caller's own keys, named in the error for an unknown one."""
    sets: dict[str, Setting] = {}
    for key, value in (policy_kwargs or {}).items():
        if key == "net_arch":
            if isinstance(value, dict):
                if set(value) - {"pi", "qf"} or list(value.get("pi", [])) != list(value.get("qf", [])):
                    raise NotImplementedError(f"net_arch {value!r}: a dict needs equal 'pi' and 'qf' (other shapes are not supported yet)")
                value = list(value["pi"])
            sets["net_arch"] = _net_arch(value)
        elif key == "n_critics":
            sets["n_critics"] = _int(policy_kwargs, "n_critics")  # type: ignore[arg-type]
        elif key == "activation_fn":
            name = getattr(value, "__name__", value)
            if not (isinstance(name, str) and name.lower() == "relu"):
                raise NotImplementedError(
                    f"activation_fn {value!r}: the off-policy networks are SB3's ReLU MLPs; "
                    "only torch.nn.ReLU (or 'relu') is supported for SAC, TQC, TD3 and DDPG")
        elif key == "share_features_extractor":
            pass  # a Flatten without parameters: shared or not, the same network
        else:
            _refuse_policy_kwarg(key, also | {"net_arch", "n_critics", "activation_fn", "share_features_extractor"})
    return sets


def _auto_or_float(name: str, value: Union[str, float], is_auto: Callable[[str], bool]) -> Union[str, float]:
    """SAC's ``ent_coef`` / ``target_entropy``: an ``auto`` word as it is, else a float (as SB3 reads a
    string such as ``"0.1"``)."""
    if isinstance(value, str) and is_auto(value):
        return value
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a float, 'auto' or 'auto_<initial value>' (e.g. 'auto_0.1'), got {value!r}") from None


def _noise_std(action_noise: Optional[ActionNoise]) -> float:
    """A ``NormalActionNoise``'s σ (zero mean, one σ for every dimension), or 0 for ``None``."""
    if action_noise is None:
        return 0.0
    mu, sigma = getattr(action_noise, "_mu", None), getattr(action_noise, "_sigma", None)
    if type(action_noise).__name__ != "NormalActionNoise" or mu is None or sigma is None:
        raise NotImplementedError(f"action_noise {type(action_noise).__name__}: only NormalActionNoise is supported")
    mu, sigma = np.asarray(mu, dtype=float).ravel(), np.asarray(sigma, dtype=float).ravel()
    if mu.size != sigma.size or sigma.size == 0:
        raise ValueError(f"NormalActionNoise with a mean of {mu.size} and a sigma of {sigma.size} values")
    if np.any(mu != 0) or np.any(sigma != sigma[0]) or not np.isfinite(sigma[0]) or sigma[0] < 0:
        raise NotImplementedError("NormalActionNoise needs mean 0 and one finite σ ≥ 0 for every dimension")
    return float(sigma[0])


# The off-policy presets' total_timesteps (sac, td3, ddpg: 1M), the model's length until learn().
_OFF_POLICY_DEFAULT_STEPS = 1_000_000


class _OffPolicyAlgorithm(BaseAlgorithm):
    """What SAC, TD3 and DDPG share (SB3's ``OffPolicyAlgorithm`` arguments)."""

    _trains_cnn = False

    def _check_unsupported(self, hyper: dict[str, Any]) -> None:
        for key in ("replay_buffer_class", "replay_buffer_kwargs"):
            if hyper.pop(key, None) is not None:
                raise NotImplementedError(f"{key} is not supported: Proxima's replay buffer is built in")
        if hyper.pop("optimize_memory_usage", False):
            raise NotImplementedError("optimize_memory_usage=True is not supported yet")
        if hyper.pop("n_steps", 1) != 1:
            raise NotImplementedError("n_steps > 1 (n-step returns) is not supported yet: the targets are one-step")
        if hyper.pop("use_sde_at_warmup", False):
            raise NotImplementedError("use_sde_at_warmup needs use_sde, which is not supported yet")
        super()._check_unsupported(hyper)

    def _off_policy_settings(self, h: dict[str, Any]) -> dict[str, Setting]:
        steps = _int(h, "gradient_steps")
        if steps == -1:
            raise NotImplementedError("gradient_steps=-1 (as many as env steps) is not supported yet: give the number")
        if steps < 0:
            raise ValueError(f"gradient_steps must be an int ≥ 1 (SB3's -1, as many as env steps, is not supported yet), "
                             f"got {steps}")
        size = _int(h, "buffer_size")  # 1e6 too, as SB3's
        if not 1 <= size < 2**63:
            raise ValueError(f"buffer_size must be a positive int (transitions), got {h['buffer_size']!r}")
        return {
            **_lr_settings(h["learning_rate"]),
            "algo": self._algo,
            "buffer_size": _int(h, "buffer_size"),
            "learning_starts": _int(h, "learning_starts"),
            "batch_size": _int(h, "batch_size"),
            "tau": _float(h, "tau"),
            "gamma": _float(h, "gamma"),
            "train_freq": _train_freq(h["train_freq"]),
            "gradient_steps": steps,
            # The run's length is learn()'s to say (SB3 checks learning_starts there, not here):
            # until then a length past learning_starts, so that the model can be built.
            "total_timesteps": max(_OFF_POLICY_DEFAULT_STEPS, _int(h, "learning_starts") + 1),
        }

    def _policy_settings(self, policy_kwargs: Optional[dict[str, Any]]) -> dict[str, Setting]:
        return _off_policy_policy_settings(policy_kwargs)

    def _noise(self, action_noise: Optional[ActionNoise]) -> float:
        """σ of ``action_noise`` (`_noise_std`); its size is checked against the env's actions."""
        std = _noise_std(action_noise)
        if action_noise is not None:
            self._noise_dim = int(np.asarray(action_noise._sigma).size)
        return std

    def save_replay_buffer(self, path: Union[str, os.PathLike[str]]) -> None:
        """Save the replay buffer as a safetensors file (SB3 pickles it; this file is the one a run
        directory's checkpoints keep beside them, and ``load_replay_buffer`` and ``proxima train
        --resume`` read it).

        :param path: Path to the file where the replay buffer should be saved (written whole or
            not at all; no suffix is added).
        """
        self._model.save_replay_buffer(_checked_path("save_replay_buffer", path))

    def load_replay_buffer(self, path: Union[str, os.PathLike[str]], truncate_last_traj: bool = True) -> None:
        """Load a replay buffer saved by ``save_replay_buffer`` (or beside a run's checkpoint) into this
        model, replacing its own; it must have been saved with the same ``buffer_size``, number of
        envs and observation and action sizes (a ``ValueError`` otherwise, and nothing changes).

        :param path: Path to the saved replay buffer.
        :param truncate_last_traj: Accepted for SB3's signature; each stored transition holds its own
            next observation and end flags, so no trajectory is left half-stored to truncate.
        """
        self._model.load_replay_buffer(_checked_path("load_replay_buffer", path))

    def _settings(self, hyper: dict[str, Any]) -> dict[str, Setting]:  # pragma: no cover - each algorithm has its own
        raise NotImplementedError


class SAC(_OffPolicyAlgorithm):
    """Soft Actor-Critic (Haarnoja et al. 2018, arXiv:1812.05905): a squashed-Gaussian actor, twin
    Q critics with Polyak-averaged targets and a learned temperature α, one gradient step per
    env step from a replay buffer — Stable-Baselines3's ``SAC``, with its keyword arguments and
    defaults."""

    _algo = "sac"
    _own_mlp_policies = frozenset({"SACPolicy"})
    _preset = "sac"

    def __init__(
        self,
        policy: PolicyType,
        env: Optional[EnvLike],
        learning_rate: Union[float, Schedule] = 3e-4,
        buffer_size: int = 1_000_000,
        learning_starts: int = 100,
        batch_size: int = 256,
        tau: float = 0.005,
        gamma: float = 0.99,
        train_freq: TrainFreq = 1,
        gradient_steps: int = 1,
        action_noise: Optional[ActionNoise] = None,
        replay_buffer_class: Optional[type] = None,
        replay_buffer_kwargs: Optional[dict[str, Any]] = None,
        optimize_memory_usage: bool = False,
        n_steps: int = 1,
        ent_coef: Union[str, float] = "auto",
        target_update_interval: int = 1,
        target_entropy: Union[str, float] = "auto",
        use_sde: bool = False,
        sde_sample_freq: int = -1,
        use_sde_at_warmup: bool = False,
        stats_window_size: int = 100,
        tensorboard_log: Optional[str] = None,
        policy_kwargs: Optional[dict[str, Any]] = None,
        verbose: int = 0,
        seed: Optional[int] = None,
        device: str = "auto",
        _init_setup_model: bool = True,
        **kwargs: Any,
    ):
        hyper = {k: v for k, v in locals().items() if k not in ("self", "policy", "env", "kwargs", "__class__")}
        super().__init__(policy, env, hyper, kwargs)

    def _settings(self, h: dict[str, Any]) -> dict[str, Setting]:
        if h["action_noise"] is not None:
            raise NotImplementedError("action_noise with SAC is not supported yet (SAC explores by sampling π)")
        return {
            **self._off_policy_settings(h),
            "ent_coef": _auto_or_float("ent_coef", h["ent_coef"], lambda s: s.startswith("auto")),
            "target_update_interval": _int(h, "target_update_interval"),
            "target_entropy": _auto_or_float("target_entropy", h["target_entropy"], lambda s: s == "auto"),
        }

    @property
    def target_entropy(self) -> float:
        """The entropy target H̄ of α's loss (Haarnoja et al. 2018), as SB3 sets
        ``model.target_entropy``: the float given, or for ``"auto"`` −dim(A) (``-1.0`` on
        Pendulum-v1)."""
        value = _config_value(self.__dict__.get("_config_toml", ""), "target_entropy")
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        return -float(np.prod(self.action_space.shape))

    def learn(self, total_timesteps: int, callback: MaybeCallback = None, log_interval: int = 4,
              tb_log_name: str = "SAC", reset_num_timesteps: bool = True, progress_bar: bool = False) -> SAC:
        """(SB3's ``SAC.learn``: see ``BaseAlgorithm.learn``.)"""
        return super().learn(total_timesteps, callback, log_interval, tb_log_name, reset_num_timesteps, progress_bar)


class TQC(SAC):
    """Truncated Quantile Critics (Kuznetsov et al. 2020, arXiv:2005.04269): SAC's squashed-Gaussian
    actor and learned temperature, with critics of quantiles, the target truncated by dropping the
    top quantiles of each critic, and the quantile Huber loss — sb3-contrib's ``TQC``, with its
    keyword arguments and defaults (``n_quantiles`` and ``n_critics`` in ``policy_kwargs``)."""

    _algo = "tqc"
    _own_mlp_policies = frozenset({"TQCPolicy"})
    _preset = "tqc"

    def __init__(
        self,
        policy: PolicyType,
        env: Optional[EnvLike],
        learning_rate: Union[float, Schedule] = 3e-4,
        buffer_size: int = 1_000_000,
        learning_starts: int = 100,
        batch_size: int = 256,
        tau: float = 0.005,
        gamma: float = 0.99,
        train_freq: TrainFreq = 1,
        gradient_steps: int = 1,
        action_noise: Optional[ActionNoise] = None,
        replay_buffer_class: Optional[type] = None,
        replay_buffer_kwargs: Optional[dict[str, Any]] = None,
        optimize_memory_usage: bool = False,
        n_steps: int = 1,
        ent_coef: Union[str, float] = "auto",
        target_update_interval: int = 1,
        target_entropy: Union[str, float] = "auto",
        top_quantiles_to_drop_per_net: int = 2,
        use_sde: bool = False,
        sde_sample_freq: int = -1,
        use_sde_at_warmup: bool = False,
        stats_window_size: int = 100,
        tensorboard_log: Optional[str] = None,
        policy_kwargs: Optional[dict[str, Any]] = None,
        verbose: int = 0,
        seed: Optional[int] = None,
        device: str = "auto",
        _init_setup_model: bool = True,
        **kwargs: Any,
    ):
        hyper = {k: v for k, v in locals().items() if k not in ("self", "policy", "env", "kwargs", "__class__")}
        _OffPolicyAlgorithm.__init__(self, policy, env, hyper, kwargs)

    def _settings(self, h: dict[str, Any]) -> dict[str, Setting]:
        return {**super()._settings(h), "top_quantiles_to_drop_per_net": _int(h, "top_quantiles_to_drop_per_net")}

    def _policy_settings(self, policy_kwargs: Optional[dict[str, Any]]) -> dict[str, Setting]:
        kwargs = dict(policy_kwargs or {})
        sets: dict[str, Setting] = {}
        if "n_quantiles" in kwargs:
            sets["n_quantiles"] = _int(kwargs, "n_quantiles")
            del kwargs["n_quantiles"]
        return {**_off_policy_policy_settings(kwargs, also=frozenset({"n_quantiles"})), **sets}

    def learn(self, total_timesteps: int, callback: MaybeCallback = None, log_interval: int = 4,
              tb_log_name: str = "TQC", reset_num_timesteps: bool = True, progress_bar: bool = False) -> TQC:
        """(sb3-contrib's ``TQC.learn``: see ``BaseAlgorithm.learn``.)"""
        return super().learn(total_timesteps, callback, log_interval, tb_log_name, reset_num_timesteps, progress_bar)


class TD3(_OffPolicyAlgorithm):
    """Twin Delayed DDPG (Fujimoto et al. 2018, arXiv:1802.09477): a deterministic actor,
    clipped double Q, target policy smoothing and delayed actor and target updates —
    Stable-Baselines3's ``TD3``, with its keyword arguments and defaults (no exploration noise
    unless ``action_noise`` is given, as SB3)."""

    _algo = "td3"
    _own_mlp_policies = frozenset({"TD3Policy"})
    _preset = "td3"

    def __init__(
        self,
        policy: PolicyType,
        env: Optional[EnvLike],
        learning_rate: Union[float, Schedule] = 1e-3,
        buffer_size: int = 1_000_000,
        learning_starts: int = 100,
        batch_size: int = 256,
        tau: float = 0.005,
        gamma: float = 0.99,
        train_freq: TrainFreq = 1,
        gradient_steps: int = 1,
        action_noise: Optional[ActionNoise] = None,
        replay_buffer_class: Optional[type] = None,
        replay_buffer_kwargs: Optional[dict[str, Any]] = None,
        optimize_memory_usage: bool = False,
        n_steps: int = 1,
        policy_delay: int = 2,
        target_policy_noise: float = 0.2,
        target_noise_clip: float = 0.5,
        stats_window_size: int = 100,
        tensorboard_log: Optional[str] = None,
        policy_kwargs: Optional[dict[str, Any]] = None,
        verbose: int = 0,
        seed: Optional[int] = None,
        device: str = "auto",
        _init_setup_model: bool = True,
        **kwargs: Any,
    ):
        hyper = {k: v for k, v in locals().items() if k not in ("self", "policy", "env", "kwargs", "__class__")}
        super().__init__(policy, env, hyper, kwargs)

    def _settings(self, h: dict[str, Any]) -> dict[str, Setting]:
        return {
            **self._off_policy_settings(h),
            "noise_std": self._noise(h["action_noise"]),
            "policy_delay": _int(h, "policy_delay"),
            "target_policy_noise": _float(h, "target_policy_noise"),
            "target_noise_clip": _float(h, "target_noise_clip"),
        }

    def learn(self, total_timesteps: int, callback: MaybeCallback = None, log_interval: int = 4,
              tb_log_name: str = "TD3", reset_num_timesteps: bool = True, progress_bar: bool = False) -> TD3:
        """(SB3's ``TD3.learn``: see ``BaseAlgorithm.learn``.)"""
        return super().learn(total_timesteps, callback, log_interval, tb_log_name, reset_num_timesteps, progress_bar)


class DDPG(_OffPolicyAlgorithm):
    """Deep Deterministic Policy Gradient (Lillicrap et al. 2016): TD3 with one critic, no
    target smoothing and no delay — Stable-Baselines3's ``DDPG``, with its keyword arguments
    and defaults."""

    _algo = "ddpg"
    _own_mlp_policies = frozenset({"TD3Policy"})
    _preset = "ddpg"

    def __init__(
        self,
        policy: PolicyType,
        env: Optional[EnvLike],
        learning_rate: Union[float, Schedule] = 1e-3,
        buffer_size: int = 1_000_000,
        learning_starts: int = 100,
        batch_size: int = 256,
        tau: float = 0.005,
        gamma: float = 0.99,
        train_freq: TrainFreq = 1,
        gradient_steps: int = 1,
        action_noise: Optional[ActionNoise] = None,
        replay_buffer_class: Optional[type] = None,
        replay_buffer_kwargs: Optional[dict[str, Any]] = None,
        optimize_memory_usage: bool = False,
        n_steps: int = 1,
        tensorboard_log: Optional[str] = None,
        policy_kwargs: Optional[dict[str, Any]] = None,
        verbose: int = 0,
        seed: Optional[int] = None,
        device: str = "auto",
        _init_setup_model: bool = True,
        **kwargs: Any,
    ):
        hyper = {k: v for k, v in locals().items() if k not in ("self", "policy", "env", "kwargs", "__class__")}
        super().__init__(policy, env, hyper, kwargs)

    def _settings(self, h: dict[str, Any]) -> dict[str, Setting]:
        return {**self._off_policy_settings(h), "noise_std": self._noise(h["action_noise"])}

    def learn(self, total_timesteps: int, callback: MaybeCallback = None, log_interval: int = 4,
              tb_log_name: str = "DDPG", reset_num_timesteps: bool = True, progress_bar: bool = False) -> DDPG:
        """(SB3's ``DDPG.learn``: see ``BaseAlgorithm.learn``.)"""
        return super().learn(total_timesteps, callback, log_interval, tb_log_name, reset_num_timesteps, progress_bar)


def _document() -> None:
    """Each class's parameters (SB3's ``:param name: ...``, see ``proxima._docs``) and its methods'."""
    tables = {
        PPO: (_docs.ON_POLICY, _docs.COMMON),
        MaskablePPO: (_docs.ON_POLICY, _docs.COMMON),
        RecurrentPPO: (_docs.ON_POLICY, _docs.COMMON),
        A2C: (_docs.A2C, _docs.ON_POLICY, _docs.COMMON),
        TRPO: (_docs.TRPO, _docs.ON_POLICY, _docs.COMMON),
        SAC: (_docs.SAC, _docs.OFF_POLICY, _docs.COMMON),
        TD3: (_docs.TD3, _docs.OFF_POLICY, _docs.COMMON),
        DDPG: (_docs.OFF_POLICY, _docs.COMMON),
        TQC: (_docs.TQC, _docs.SAC, _docs.OFF_POLICY, _docs.COMMON),
    }
    base = BaseAlgorithm
    base.learn.__doc__ = _docs.with_params(base.learn.__doc__, base.learn, _docs.LEARN, returns="the trained model")
    base.predict.__doc__ = _docs.with_params(base.predict.__doc__, base.predict, _docs.PREDICT,
                                             returns="the model's action and the next hidden state (``state``)")
    base.save.__doc__ = _docs.with_params(base.save.__doc__, base.save, _docs.SAVE)
    base.load.__func__.__doc__ = _docs.with_params(base.load.__doc__, base.load, _docs.LOAD,
                                                   returns="new model instance with loaded parameters")
    for cls, cls_tables in tables.items():
        notes = _docs.OFF_POLICY_NOTES if cls in (SAC, TD3, DDPG, TQC) else _docs.ON_POLICY_NOTES
        cls.__doc__ = _docs.with_params(cls.__doc__ or "", cls.__init__, *cls_tables, notes=notes)
        cls.learn.__doc__ = base.learn.__doc__
    use_masking = {"use_masking": "Whether or not to use invalid action masks during training. With ``False`` this call's "
                                  "rollouts take every action as valid."}
    MaskablePPO.learn.__doc__ = _docs.with_params("(sb3-contrib's ``MaskablePPO.learn``.)", MaskablePPO.learn,
                                                  _docs.LEARN, use_masking, returns="the trained model")


_document()
