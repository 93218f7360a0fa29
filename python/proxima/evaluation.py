"""``evaluate_policy`` with Stable-Baselines3's semantics: episodes of ``model.predict`` in an
env (an id, a Gymnasium env, or a vector env), returning the mean and std of their returns."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Optional, Union

import numpy as np

from ._envs import is_monitor_wrapped

if TYPE_CHECKING:
    import gymnasium as gym

    from ._envs import _SameStepView
    from .type_aliases import GymEnv, PolicyPredictor


def _as_vector_env(env: Union[GymEnv, str]) -> tuple[Union[gym.vector.VectorEnv, _SameStepView], bool]:
    """A Gymnasium vector env (same-step autoreset) for an id, an env, or a vector env."""
    import gymnasium
    from gymnasium.vector import AutoresetMode, SyncVectorEnv

    if isinstance(env, str):
        if env.startswith("atari:"):
            raise NotImplementedError(_ATARI_FOR_PROXIMA_MODELS.format(env=env))
        bare = env[4:] if env.startswith("gym:") else env
        return SyncVectorEnv([lambda: gymnasium.make(bare)], autoreset_mode=AutoresetMode.SAME_STEP), True
    if hasattr(env, "step_async"):  # an SB3 VecEnv
        from ._envs import SB3VecEnvAdapter

        return SB3VecEnvAdapter(env), False
    if isinstance(env, gymnasium.vector.VectorEnv):
        from ._envs import SameStepAdapter, _autoreset_mode

        return (env if _autoreset_mode(env) == "SAME_STEP" else SameStepAdapter(env)), False
    if isinstance(env, gymnasium.Env):
        return SyncVectorEnv([lambda: env], autoreset_mode=AutoresetMode.SAME_STEP), False
    raise TypeError(f"env must be an env id, a Gymnasium Env or VectorEnv, or an SB3 VecEnv; got {type(env).__name__}")


_ATARI_FOR_PROXIMA_MODELS = (
    "evaluate_policy on the id {env!r}: Proxima's Atari wrappers run in Rust only, and Proxima's models "
    "alone can be evaluated on them; evaluate another model on an env such as SB3's "
    "make_atari_env(...) + VecFrameStack"
)


def _episodes_in_rust(model: PolicyPredictor, env: str, n_eval_episodes: int, deterministic: bool,
                      callback: Optional[Callable[[dict[str, Any], dict[str, Any]], None]]
                      ) -> tuple[list[float], list[int]]:
    """A Proxima model's episodes on an id only Rust steps (``atari:``): each a whole game, its
    score over every life and its raw frames, as SB3's ``Monitor`` under ``AtariWrapper`` records
    them. Episode i starts from the reset seed ``model.seed + i`` (0 + i without a seed)."""
    rust = getattr(model, "_model", None)
    if rust is None or not hasattr(rust, "evaluate"):
        raise NotImplementedError(_ATARI_FOR_PROXIMA_MODELS.format(env=env))
    if callback is not None:
        raise NotImplementedError(f"evaluate_policy on the id {env!r} steps the games in Rust, which calls no "
                                  "callback; pass callback=None")
    seed = getattr(model, "seed", None)
    seed = 0 if seed is None else int(seed) % 2**64  # a negative seed as NumPy's uint64 reads it
    returns, lengths = rust.evaluate(env, int(n_eval_episodes), bool(deterministic), seed)
    return [float(r) for r in returns], [int(n) for n in lengths]


def _monitor_episode(info: dict[str, Any], i: int) -> Optional[tuple[float, int]]:
    """Env ``i``'s Monitor record ``(r, l)`` of an episode that ended at this step, or None: from an
    SB3 VecEnv's infos, or a Gymnasium vector env's ``info["episode"]`` (masked by ``_episode``)."""
    sb3 = info.get("sb3_infos")
    if sb3 is not None:
        ep = sb3[i].get("episode")
        return None if ep is None else (float(ep["r"]), int(ep["l"]))
    ep, mask = info.get("episode"), info.get("_episode")
    if ep is None or mask is None or not mask[i]:
        return None
    return float(ep["r"][i]), int(ep["l"][i])


def _action_masks(venv: Any) -> Optional[np.ndarray]:
    """Each env's ``action_masks()`` stacked ``(n_envs, mask_dim)`` (sb3-contrib's
    ``get_action_masks``), or None when the envs have none: a Gymnasium vector env's ``call``
    (through each env's wrappers), an SB3 ``VecEnv``'s ``env_method``."""
    inner = getattr(venv, "venv", venv)
    try:
        if hasattr(inner, "env_method"):
            masks = inner.env_method("action_masks")
        else:
            masks = inner.call("action_masks")
    except AttributeError:
        return None
    return np.stack([np.asarray(m).reshape(-1) for m in masks])


def evaluate_policy(
    model: PolicyPredictor,
    env: Union[GymEnv, str],
    n_eval_episodes: int = 10,
    deterministic: bool = True,
    render: bool = False,
    callback: Optional[Callable[[dict[str, Any], dict[str, Any]], None]] = None,
    reward_threshold: Optional[float] = None,
    return_episode_rewards: bool = False,
    warn: bool = True,
    use_masking: bool = True,
) -> Union[tuple[float, float], tuple[list[float], list[int]]]:
    """Runs policy for ``n_eval_episodes`` episodes and returns average reward (SB3's
    ``evaluate_policy``). The episodes are spread over a vector env's envs as SB3 spreads them;
    rewards and lengths are counted as ``env.step`` gives them (an env's own wrappers count).

    :param model: The RL agent you want to evaluate. This can be any object that implements a
        ``predict`` method, such as a Proxima or SB3 model.
    :param env: The gym environment or ``VecEnv`` environment: an env id, a Gymnasium env or vector
        env, or an SB3 ``VecEnv`` (``model.get_env()`` too); another kind raises ``TypeError``. An
        ``atari:`` id, whose wrappers run in Rust, takes a Proxima model alone (another raises
        ``NotImplementedError``): its games are played in Rust, episode i reset with seed
        ``model.seed + i``, each episode a whole game (its score over every life, its length in raw
        frames, as SB3's ``Monitor`` under ``make_atari_env`` records them), and ``callback`` must
        be None.
    :param n_eval_episodes: Number of episode to evaluate the agent (positive; ``ValueError`` otherwise)
    :param deterministic: Whether to use deterministic or stochastic actions
    :param render: Whether to render the environment or not. Proxima: ``True`` raises
        ``NotImplementedError`` (record with ``proxima eval --render``).
    :param callback: callback function to perform additional checks, called after each step of the
        vector env. Gets locals() and globals() passed as parameters.
    :param reward_threshold: Minimum expected reward per episode, this will raise an error
        (``AssertionError``, as SB3's) if the performance is not met
    :param return_episode_rewards: If True, a list of rewards and episode lengths per episode will be
        returned instead of the mean.
    :param warn: If True (default), SB3 warns about lack of a Monitor wrapper. Proxima: ignored.
        As in SB3, an env wrapped in SB3's ``Monitor`` (as ``make_atari_env`` wraps each game) has
        its episodes counted and measured by the Monitor's ``info["episode"]``, so an Atari episode
        is a whole game, not one life.
    :param use_masking: Whether or not to use invalid action masks during evaluation (sb3-contrib's
        ``evaluate_policy``): with a model whose ``predict`` takes ``action_masks`` (``MaskablePPO``)
        and envs with ``action_masks()``, each step's masks are passed to it; other models and envs
        are evaluated without.
    :return: Mean return per episode (sum of rewards), std of reward per episode. Returns
        (list[float], list[int]) when ``return_episode_rewards`` is True, first list containing per-episode
        return and second containing per-episode lengths (in number of steps).
    """
    if n_eval_episodes <= 0:
        raise ValueError(f"n_eval_episodes must be positive, got {n_eval_episodes}")
    if render:
        raise NotImplementedError("render=True is not supported; record with `proxima eval --render`")
    if isinstance(env, str) and env.startswith("atari:"):
        rewards, lengths = _episodes_in_rust(model, env, n_eval_episodes, deterministic, callback)
        return _summary(rewards, lengths, reward_threshold, return_episode_rewards)
    venv, owned = _as_vector_env(env)
    monitored = not isinstance(env, str) and is_monitor_wrapped(env)
    n = venv.num_envs
    targets = np.array([(n_eval_episodes + i) // n for i in range(n)], dtype=int)
    counts = np.zeros(n, dtype=int)
    rewards, lengths = [], []
    cur_r, cur_l = np.zeros(n), np.zeros(n, dtype=int)
    obs, _ = venv.reset()
    import inspect

    masked = use_masking and "action_masks" in inspect.signature(model.predict).parameters
    masked = masked and _action_masks(venv) is not None
    # As SB3's: the hidden state and episode starts go through predict (a recurrent policy's).
    states, episode_starts = None, np.ones(n, dtype=bool)
    while (counts < targets).any():
        masks = {"action_masks": _action_masks(venv)} if masked else {}
        actions, states = model.predict(obs, state=states, episode_start=episode_starts, deterministic=deterministic,
                                        **masks)
        obs, r, term, trunc, info = venv.step(actions)
        episode_starts = np.logical_or(term, trunc)
        cur_r += r
        cur_l += 1
        for i in range(n):
            if counts[i] < targets[i] and (term[i] or trunc[i]):
                # SB3's: with a Monitor only its whole episodes count (not each Atari life).
                record = _monitor_episode(info, i) if monitored else (float(cur_r[i]), int(cur_l[i]))
                if record is not None:
                    rewards.append(record[0])
                    lengths.append(record[1])
                    counts[i] += 1
            if term[i] or trunc[i]:
                cur_r[i], cur_l[i] = 0.0, 0
        if callback is not None:
            callback(locals(), globals())
    if owned:
        venv.close()
    return _summary(rewards, lengths, reward_threshold, return_episode_rewards)


def _summary(rewards: list[float], lengths: list[int], reward_threshold: Optional[float],
             return_episode_rewards: bool) -> Union[tuple[float, float], tuple[list[float], list[int]]]:
    """What ``evaluate_policy`` returns for these episodes (after SB3's threshold check)."""
    mean, std = float(np.mean(rewards)), float(np.std(rewards))
    if reward_threshold is not None:
        assert mean > reward_threshold, f"mean reward below threshold: {mean:.2f} < {reward_threshold:.2f}"
    if return_episode_rewards:
        return rewards, lengths
    return mean, std
