"""Gymnasium spaces to JSON and back, so a model file keeps the ``Dict`` (or ``Tuple``) observation space
its policy reads and ``load`` without an env can take such observations (SB3 pickles the space; a JSON
description is enough for the spaces Proxima trains on and runs no code when read).

Covered: ``Box`` (bounds, shape, dtype), ``Discrete`` (``n``, ``start``), ``MultiDiscrete`` (``nvec``,
``start``), ``MultiBinary`` (``n``), and ``Dict`` / ``Tuple`` of them, nested; anything else is not
described (``space_to_json`` returns ``None``)."""

from __future__ import annotations

import json
from typing import Any, Optional

import gymnasium as gym
import numpy as np


def _describe(space: gym.spaces.Space) -> Optional[dict[str, Any]]:
    if isinstance(space, gym.spaces.Box):
        return {"type": "Box", "low": space.low.tolist(), "high": space.high.tolist(), "shape": list(space.shape),
                "dtype": str(space.dtype)}
    if isinstance(space, gym.spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, gym.spaces.MultiDiscrete):
        return {"type": "MultiDiscrete", "nvec": space.nvec.tolist(), "start": space.start.tolist()}
    if isinstance(space, gym.spaces.MultiBinary):
        return {"type": "MultiBinary", "n": np.asarray(space.n).tolist()}
    if isinstance(space, (gym.spaces.Dict, gym.spaces.Tuple)):
        items = space.spaces.items() if isinstance(space, gym.spaces.Dict) else enumerate(space.spaces)
        children = [(k, _describe(v)) for k, v in items]
        if any(c is None for _, c in children):
            return None
        if isinstance(space, gym.spaces.Dict):
            return {"type": "Dict", "spaces": [[k, c] for k, c in children]}
        return {"type": "Tuple", "spaces": [c for _, c in children]}
    return None


def space_to_json(space: gym.spaces.Space) -> Optional[str]:
    """The space as JSON text, or ``None`` for a space this module does not describe."""
    described = _describe(space)
    return None if described is None else json.dumps(described)


def _build(d: dict[str, Any]) -> gym.spaces.Space:
    kind = d["type"]
    if kind == "Box":
        dtype = np.dtype(d["dtype"])
        return gym.spaces.Box(np.asarray(d["low"], dtype), np.asarray(d["high"], dtype), tuple(d["shape"]), dtype)
    if kind == "Discrete":
        return gym.spaces.Discrete(d["n"], start=d["start"])
    if kind == "MultiDiscrete":
        return gym.spaces.MultiDiscrete(d["nvec"], start=d["start"])
    if kind == "MultiBinary":
        return gym.spaces.MultiBinary(d["n"])
    if kind == "Dict":
        # An ordered list of pairs (a dict given to gym.spaces.Dict would be sorted again by key).
        from collections import OrderedDict

        return gym.spaces.Dict(OrderedDict((k, _build(v)) for k, v in d["spaces"]))
    if kind == "Tuple":
        return gym.spaces.Tuple(tuple(_build(v) for v in d["spaces"]))
    raise ValueError(f"unknown space type {kind!r}")


def space_from_json(text: str) -> gym.spaces.Space:
    """The space ``space_to_json`` described.

    :raises ValueError: on text that is not such a description"""
    try:
        return _build(json.loads(text))
    except (KeyError, TypeError, json.JSONDecodeError) as e:
        raise ValueError(f"a malformed observation space description in the model file: {e}") from e
