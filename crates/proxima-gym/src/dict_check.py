"""Gymnasium's `spaces.flatten` of a Dict or Tuple observation, after checking that every Box,
MultiDiscrete and MultiBinary value in it has its space's shape: `spaces.flatten` only ravels each
value, so one of another shape would silently shift the next keys' values. Loaded by the bridge
(dict_obs.rs) and prepended to the subproc worker (subproc_worker.py)."""

import numpy as _np
from gymnasium import spaces as _spaces


def _check_shapes(space, obs, path):
    if isinstance(space, _spaces.Dict):
        for key, sub in space.spaces.items():
            _check_shapes(sub, obs[key], f"{path}[{key!r}]")
    elif isinstance(space, _spaces.Tuple):
        if len(obs) != len(space.spaces):
            raise ValueError(f"{path or 'the observation'} has {len(obs)} entries; its Tuple space has {len(space.spaces)}")
        for i, sub in enumerate(space.spaces):
            _check_shapes(sub, obs[i], f"{path}[{i}]")
    elif isinstance(space, (_spaces.Box, _spaces.MultiDiscrete, _spaces.MultiBinary)):
        shape = _np.shape(obs)
        if shape != space.shape:
            raise ValueError(f"the key {path} holds a value of shape {shape}; its space {space} has shape {space.shape}")


def flatten_checked(space, obs):
    """`spaces.flatten(space, obs)` after the shape check (ValueError naming the key)."""
    _check_shapes(space, obs, "")
    return _spaces.flatten(space, obs)
