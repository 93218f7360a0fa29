"""Type stubs of the extension module ``proxima._proxima`` (Rust, crates/proxima-py).

``tests/python/test_stub.py`` holds these equal to the compiled module: every public name, and each
function's parameters (names, order, which have defaults) as its ``__text_signature__`` gives them.
"""

from typing import Callable, Optional, Sequence, Union

import numpy as np
import numpy.typing as npt

__version__: str
NATIVE_ENV_IDS: list[str]
PRESETS: list[str]
CONFIG_KEYS: list[str]

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
    def export_onnx(self, path: str, action_masks: bool = False) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]: ...
    def get_parameters(self) -> list[tuple[str, list[int], list[float]]]: ...
    def set_parameters(self, params: Sequence[tuple[str, Sequence[float]]], exact_match: bool) -> None: ...
    def reset_num_timesteps(self) -> None: ...
    def seed_predict(self, seed: int) -> None: ...
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
