"""Type stubs of the extension module ``proxima._proxima`` (Rust, crates/proxima-py).

``tests/python/test_stub.py`` holds these equal to the compiled module: every public name, and each
function's parameters (names, order, which have defaults) as its ``__text_signature__`` gives them.
"""

from typing import Any, Callable, Optional, Sequence, Union

import numpy as np
import numpy.typing as npt

__version__: str
NATIVE_ENV_IDS: list[str]
PRESETS: list[str]
CONFIG_KEYS: list[str]

def ignored_keys(config_toml: str) -> dict[str, str]:
    """Each key the run of ``config_toml`` does not read, with why (``train --set``'s words); from the text
    alone, so a callback may ask while the model trains."""

def preset_keys_unread(preset: str, algo: str) -> list[str]:
    """The keys ``preset`` gives its own on-policy algorithm that ``algo`` does not read (``paper-atari``'s
    ``n_epochs``, ``batch_size``, ``clip_range`` for ``a2c``); empty for the algorithm's own preset."""

def parse_atari_id(env_id: str) -> tuple[str, dict[str, Union[int, float, bool]]]:
    """``(game_id, options)`` of an ``atari:`` id, read by training's parser: the Gymnasium id of the game and the
    wrappers' settings by SB3's names, defaults filled in. ``ValueError`` for an id training refuses."""

# ("id", env_id) | ("objects" | "factories" | "vector", name, [objects])
_EnvSource = Union[tuple[str, str], tuple[str, str, list[object]]]
# A setting's value: the config's keys to these (None clears an optional key).
_Setting = Union[int, float, bool, str, None, list[Union[int, float, bool, str]]]
# What `learn`'s `after` hook gets: SB3's logger keys to numbers, and "episodes".
_Report = dict[str, Union[int, float, list[tuple[int, float, int]]]]

class Model:
    """A training run or a policy loaded for inference."""

    @staticmethod
    def create(env: _EnvSource, preset: str, settings: Optional[dict[str, _Setting]],
               chosen: Sequence[str] = ...) -> "Model": ...
    @staticmethod
    def load(path: str, env: Optional[_EnvSource] = None, settings: Optional[dict[str, _Setting]] = None) -> "Model": ...
    def learn(
        self,
        total_timesteps: int,
        before: Optional[Callable[[float], tuple[Optional[float], Optional[float]]]] = None,
        on_step: Optional[Callable[[int, np.ndarray, np.ndarray, np.ndarray, list[dict[str, object]]], bool]] = None,
        rollout_end: Optional[Callable[[], None]] = None,
        after: Optional[Callable[[_Report], bool]] = None,
        tensorboard_dir: Optional[str] = None,
    ) -> None: ...
    def predict(self, observations: npt.NDArray[np.float32], deterministic: bool,
                action_masks: Optional[npt.NDArray[np.uint8]] = None,
                state: Optional[npt.NDArray[np.float32]] = None,
                episode_starts: Optional[npt.NDArray[np.bool_]] = None,
                ) -> tuple[npt.NDArray[np.float32], Optional[npt.NDArray[np.float32]]]: ...
    def save(self, path: str) -> None: ...
    def save_replay_buffer(self, path: str) -> None: ...
    def load_replay_buffer(self, path: str) -> None: ...
    def export_onnx(self, path: str, action_masks: bool = False) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]: ...
    def get_parameters(self) -> list[tuple[str, list[int], list[float]]]: ...
    def set_parameters(self, params: Sequence[tuple[str, Sequence[float]]], exact_match: bool) -> None: ...
    def reset_num_timesteps(self) -> None: ...
    def seed_predict(self, seed: int) -> None: ...
    def evaluate(self, env_id: str, n_episodes: int, deterministic: bool, seed: int,
                 masked: bool = False) -> tuple[list[float], list[int]]: ...
    def set_use_masking(self, use_masking: bool) -> None: ...
    def set_note(self, key: str, value: str) -> None: ...
    def note(self, key: str) -> Optional[str]: ...
    @property
    def num_timesteps(self) -> int: ...
    @property
    def env_id(self) -> str: ...
    @property
    def n_envs(self) -> int: ...
    @property
    def obs_dim(self) -> int: ...
    @property
    def recurrent(self) -> Optional[tuple[str, int, int, int]]: ...  # (cell, hidden_size, n_layers, state_dim)
    @property
    def trains_masked(self) -> bool: ...
    @property
    def observation_space(self) -> tuple[list[int], str]: ...  # (shape, "uint8" | "float32")
    @property
    def action_space(self) -> Union[tuple[str, int], tuple[str, list[int]], tuple[str, list[float], list[float]]]: ...
    @property
    def config_toml(self) -> str: ...
    @property
    def has_env(self) -> bool: ...

class _RewardedTrainer:
    """GRPO or RLHF-PPO on a Hugging Face model directory (the engine of ``proxima.lm.GRPOTrainer`` and
    ``PPOTrainer``)."""

    def __init__(
        self,
        kind: str,
        model_dir: str,
        args_json: str,
        rows: list[str],
        reward_funcs: list[tuple[str, Callable[..., Any]]],
    ) -> None: ...
    def step(self) -> str: ...
    def is_done(self) -> bool: ...
    @property
    def global_step(self) -> int: ...
    def save_model(self, dir: str) -> None: ...

class _Trainer:
    """SFT or DPO on a Hugging Face model directory (the engine of ``proxima.lm.SFTTrainer`` and ``DPOTrainer``)."""

    def __init__(self, kind: str, model_dir: str, args_json: str, rows: list[str]) -> None: ...
    def step(self) -> str: ...
    def is_done(self) -> bool: ...
    def save_model(self, dir: str) -> None: ...

class _CausalLm:
    """A Hugging Face model for generation (the engine of ``proxima.lm.CausalLM``)."""

    def __init__(self, model_dir: str) -> None: ...
    def generate(self, prompts: list[list[int]], sampling_json: str, seed: int) -> tuple[list[list[int]], list[bool]]: ...
