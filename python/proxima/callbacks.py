"""Callbacks with Stable-Baselines3's names and hooks: ``BaseCallback`` (``_on_training_start``,
``_on_rollout_start``, ``_on_step``, ``_on_rollout_end``, ``_on_training_end``; ``self.model``,
``self.num_timesteps``, ``self.n_calls``, ``self.locals`` with ``new_obs``, ``rewards``, ``dones``
and ``infos``), ``CallbackList``, ``EvalCallback``, ``CheckpointCallback``,
``StopTrainingOnRewardThreshold``.

They are called as SB3 calls them: ``_on_step`` after every step of the envs (``False`` stops
training there, without an update on the partial rollout), ``_on_rollout_end`` before each
update. Inside them ``self.model.predict``, ``save`` and ``get_parameters`` work on the policy
collecting the rollout (its weights do not change until the update); a model saved there holds
the optimiser state and counters of the rollout's start (what it resumes from), and
``proxima`` adds one hook, ``_on_update_end``, after each update (``self.locals["report"]``:
SB3's logger keys such as ``train/approx_kl``). Training itself (``learn``, ``set_parameters``)
cannot be called from a callback: ``RuntimeError``.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Callable, Optional, Union

import numpy as np

if TYPE_CHECKING:
    from .algorithms import BaseAlgorithm
    from .type_aliases import GymEnv, MaybeCallback


class BaseCallback:
    """Base class for callback (SB3's ``BaseCallback``; see the module docs).

    :param verbose: Verbosity level: 0 for no output, 1 for info messages, 2 for debug messages
    """

    def __init__(self, verbose: int = 0):
        self.verbose = verbose
        self.model: Optional[BaseAlgorithm] = None
        self.n_calls = 0
        self.num_timesteps = 0
        self.locals: dict[str, Any] = {}
        self.globals: dict[str, Any] = {}
        self.parent: Optional[BaseCallback] = None

    def init_callback(self, model: BaseAlgorithm) -> None:
        self.model = model
        self._init_callback()

    def _init_callback(self) -> None:
        pass

    def on_training_start(self, locals_: dict[str, Any], globals_: dict[str, Any]) -> None:
        self.locals, self.globals = dict(locals_), globals_
        self.num_timesteps = self.model.num_timesteps
        self._on_training_start()

    def _on_training_start(self) -> None:
        pass

    def on_rollout_start(self) -> None:
        self._on_rollout_start()

    def _on_rollout_start(self) -> None:
        pass

    def on_step(self) -> bool:
        self.n_calls += 1
        self.num_timesteps = self.model.num_timesteps
        return self._on_step()

    def _on_step(self) -> bool:
        return True

    def on_rollout_end(self) -> None:
        self._on_rollout_end()

    def _on_rollout_end(self) -> None:
        pass

    def on_training_end(self) -> None:
        self._on_training_end()

    def _on_training_end(self) -> None:
        pass

    def update_locals(self, locals_: dict[str, Any]) -> None:
        self.locals.update(locals_)
        self.update_child_locals(locals_)

    def update_child_locals(self, locals_: dict[str, Any]) -> None:
        pass

    def on_update_end(self, report: dict[str, Any]) -> bool:
        """After each update (Proxima's hook); ``False`` stops."""
        self.update_locals({"report": report})
        return self._on_update_end() is not False

    def _on_update_end(self) -> bool:
        return True


class CallbackList(BaseCallback):
    """Class for chaining callbacks: called in order; training stops when any ``_on_step`` says so.

    :param callbacks: A list of callbacks that will be called sequentially.
    """

    def __init__(self, callbacks: list[BaseCallback]):
        super().__init__()
        self.callbacks = list(callbacks)

    def _init_callback(self) -> None:
        for c in self.callbacks:
            c.init_callback(self.model)
            c.parent = self.parent

    def _on_training_start(self) -> None:
        for c in self.callbacks:
            c.on_training_start(self.locals, self.globals)

    def _on_rollout_start(self) -> None:
        for c in self.callbacks:
            c.on_rollout_start()

    def _on_step(self) -> bool:
        results = [c.on_step() for c in self.callbacks]
        return all(bool(r) for r in results)  # as SB3: a falsy answer (None too) stops

    def _on_rollout_end(self) -> None:
        for c in self.callbacks:
            c.on_rollout_end()

    def _on_training_end(self) -> None:
        for c in self.callbacks:
            c.on_training_end()

    def _on_update_end(self) -> bool:
        results = [c.on_update_end(self.locals.get("report", {})) for c in self.callbacks]
        return all(results)

    def update_child_locals(self, locals_: dict[str, Any]) -> None:
        for c in self.callbacks:
            c.update_locals(locals_)


class ConvertCallback(BaseCallback):
    """Convert functional callback (old-style) to object (SB3's).

    :param callback: a function ``f(locals, globals) -> bool`` called at every step; a falsy answer
        (``None`` too, as in SB3) stops training
    :param verbose: Verbosity level: 0 for no output, 1 for info messages, 2 for debug messages
    """

    def __init__(self, callback: Callable[[dict[str, Any], dict[str, Any]], bool], verbose: int = 0):
        super().__init__(verbose)
        self.callback = callback

    def _on_step(self) -> bool:
        return bool(self.callback(self.locals, self.globals))  # as SB3: None stops


class _Every(BaseCallback):
    """Acts every ``freq`` calls of ``_on_step`` (steps of the vector env, as SB3 counts)."""

    def __init__(self, freq: int, verbose: int = 0):
        super().__init__(verbose)
        if int(freq) <= 0:
            raise ValueError(f"the frequency must be a positive number of steps, got {freq}")
        self.freq = int(freq)

    def _on_step(self) -> bool:
        if self.n_calls % self.freq == 0:
            return bool(self._act(self.num_timesteps))
        return True

    def _act(self, timesteps: int) -> bool:  # pragma: no cover - each subclass has its own
        raise NotImplementedError


class CheckpointCallback(_Every):
    """Save a checkpoint every ``save_freq`` calls of the callback (steps of the vector env, as SB3's:
    with ``n_envs`` envs each call is ``n_envs`` env steps) as
    ``{save_path}/{name_prefix}_{num_timesteps}_steps.safetensors``.

    :param save_freq: Save checkpoints every ``save_freq`` call of the callback (a positive int,
        ``ValueError`` otherwise).
    :param save_path: Path to the folder where the model will be saved (made when missing).
    :param name_prefix: Common prefix to the saved models
    :param save_replay_buffer: Save the model replay buffer. Proxima: not offered yet; ignored.
    :param save_vecnormalize: Save the ``VecNormalize`` statistics. Proxima: the normalisation statistics
        are in the model file already; ignored.
    :param verbose: Verbosity level: 0 for no output, 2 for indicating when saving model checkpoint
    """

    def __init__(self, save_freq: int, save_path: str, name_prefix: str = "rl_model", save_replay_buffer: bool = False,
                 save_vecnormalize: bool = False, verbose: int = 0):
        super().__init__(save_freq, verbose)
        self.save_path, self.name_prefix = save_path, name_prefix

    def _init_callback(self) -> None:
        os.makedirs(self.save_path, exist_ok=True)

    def _act(self, timesteps: int) -> bool:
        path = os.path.join(self.save_path, f"{self.name_prefix}_{timesteps}_steps.safetensors")
        self.model.save(path)
        if self.verbose >= 2:
            print(f"Saving model checkpoint to {path}")
        return True


class StopTrainingOnRewardThreshold(BaseCallback):
    """Stop the training once a threshold in episodic reward has been reached (i.e. when the model is
    good enough). It must be used with the ``EvalCallback`` (``callback_on_new_best=...``;
    ``ValueError`` otherwise).

    :param reward_threshold: Minimum expected reward per episode to stop training.
    :param verbose: Verbosity level: 0 for no output, 1 for indicating when training ended because
        episodic reward threshold reached
    """

    def __init__(self, reward_threshold: float, verbose: int = 0):
        super().__init__(verbose)
        self.reward_threshold = float(reward_threshold)

    def _on_step(self) -> bool:
        if self.parent is None:
            raise ValueError("StopTrainingOnRewardThreshold must be used as EvalCallback(callback_on_new_best=...)")
        keep_going = bool(self.parent.best_mean_reward < self.reward_threshold)
        if not keep_going and self.verbose >= 1:
            print(f"Stopping training: the mean reward {self.parent.best_mean_reward:.2f} reached {self.reward_threshold}")
        return keep_going


class EvalCallback(_Every):
    """Callback for evaluating an agent: every ``eval_freq`` calls (steps of the vector env) it runs
    ``proxima.evaluate_policy`` on ``eval_env``; writes ``{log_path}/evaluations.npz`` (``timesteps``,
    ``results``, ``ep_lengths``, as SB3's) and the best model to
    ``{best_model_save_path}/best_model.safetensors``.

    :param eval_env: The environment used for initialization: an env id, a Gymnasium env or vector env,
        or an SB3 ``VecEnv`` (another kind raises ``TypeError`` here, not at the first evaluation)
    :param callback_on_new_best: Callback to trigger when there is a new best model according to the
        ``mean_reward``
    :param callback_after_eval: Callback to trigger after every evaluation
    :param n_eval_episodes: The number of episodes to test the agent
    :param eval_freq: Evaluate the agent every ``eval_freq`` call of the callback.
    :param log_path: Path to a folder where the evaluations (``evaluations.npz``) will be saved. It will
        be updated at each evaluation.
    :param best_model_save_path: Path to a folder where the best model according to performance on the
        eval env will be saved.
    :param deterministic: Whether the evaluation should use a stochastic or deterministic actions.
    :param render: Whether to render or not the environment during evaluation. Proxima: not supported
        (``evaluate_policy`` raises ``NotImplementedError`` for ``render=True``); ignored here.
    :param verbose: Verbosity level: 0 for no output, 1 for indicating information about evaluation results
    :param warn: Passed to ``evaluate_policy`` in SB3 (warns if ``eval_env`` has not been wrapped with a
        Monitor wrapper). Proxima: counts rewards as ``env.step`` gives them; ignored.
    """

    def __init__(self, eval_env: Union[GymEnv, str], callback_on_new_best: Optional[BaseCallback] = None,
                 callback_after_eval: Optional[BaseCallback] = None, n_eval_episodes: int = 5, eval_freq: int = 10000,
                 log_path: Optional[str] = None, best_model_save_path: Optional[str] = None, deterministic: bool = True,
                 render: bool = False, verbose: int = 1, warn: bool = True):
        super().__init__(eval_freq, verbose)
        from .evaluation import _as_vector_env

        if not isinstance(eval_env, str):
            _as_vector_env(eval_env)  # a wrong kind of env fails here, not at the first evaluation
        self.eval_env, self.n_eval_episodes, self.deterministic = eval_env, int(n_eval_episodes), deterministic
        self.callback_on_new_best, self.callback_after_eval = callback_on_new_best, callback_after_eval
        self.log_path = os.path.join(log_path, "evaluations") if log_path else None
        self.best_model_save_path = best_model_save_path
        self.best_mean_reward, self.last_mean_reward = -np.inf, -np.inf
        self.evaluations_timesteps: list[int] = []
        self.evaluations_results: list[list[float]] = []
        self.evaluations_length: list[list[int]] = []

    def _init_callback(self) -> None:
        for c in (self.callback_on_new_best, self.callback_after_eval):
            if c is not None:
                c.init_callback(self.model)
                c.parent = self
        for d in (self.best_model_save_path, os.path.dirname(self.log_path) if self.log_path else None):
            if d:
                os.makedirs(d, exist_ok=True)

    def _act(self, timesteps: int) -> bool:
        from .evaluation import evaluate_policy

        rewards, lengths = evaluate_policy(self.model, self.eval_env, self.n_eval_episodes, self.deterministic,
                                           return_episode_rewards=True)
        self.evaluations_timesteps.append(timesteps)
        self.evaluations_results.append(rewards)
        self.evaluations_length.append(lengths)
        if self.log_path:
            np.savez(self.log_path, timesteps=self.evaluations_timesteps, results=self.evaluations_results,
                     ep_lengths=self.evaluations_length)
        mean = float(np.mean(rewards))
        self.last_mean_reward = mean
        if self.verbose >= 1:
            print(f"Eval num_timesteps={timesteps}, episode_reward={mean:.2f} +/- {np.std(rewards):.2f}")
        keep_going = True
        if mean > self.best_mean_reward:
            self.best_mean_reward = mean
            if self.best_model_save_path:
                self.model.save(os.path.join(self.best_model_save_path, "best_model.safetensors"))
            if self.callback_on_new_best is not None:
                keep_going = self.callback_on_new_best.on_step()
        if self.callback_after_eval is not None:
            keep_going = bool(self.callback_after_eval.on_step()) and keep_going
        return keep_going


class StopTrainingOnNoModelImprovement(BaseCallback):
    """Stop the training early if there is no new best model (new best mean reward) after more than N
    consecutive evaluations. It must be used with the ``EvalCallback`` (``callback_after_eval=...``).

    :param max_no_improvement_evals: Maximum number of consecutive evaluations without a new best model.
    :param min_evals: Number of evaluations before start to count evaluations without improvements.
    :param verbose: Verbosity level: 0 for no output, 1 for indicating when training ended because no
        new best model
    """

    def __init__(self, max_no_improvement_evals: int, min_evals: int = 0, verbose: int = 0):
        super().__init__(verbose)
        self.max_no_improvement_evals, self.min_evals = int(max_no_improvement_evals), int(min_evals)
        self.last_best_mean_reward, self.no_improvement_evals = -np.inf, 0

    def _on_step(self) -> bool:
        if self.parent is None:
            raise ValueError("StopTrainingOnNoModelImprovement must be used as EvalCallback(callback_after_eval=...)")
        keep_going = True
        if self.n_calls > self.min_evals:
            if self.parent.best_mean_reward > self.last_best_mean_reward:
                self.no_improvement_evals = 0
            else:
                self.no_improvement_evals += 1
                keep_going = self.no_improvement_evals <= self.max_no_improvement_evals
        self.last_best_mean_reward = self.parent.best_mean_reward
        if not keep_going and self.verbose >= 1:
            print(f"Stopping training: no new best model in the last {self.no_improvement_evals} evaluations")
        return keep_going


class EveryNTimesteps(BaseCallback):
    """Trigger a callback every ``n_steps`` timesteps (env steps over all envs).

    :param n_steps: Number of timesteps between two trigger (a positive int).
    :param callback: Callback that will be called when the event is triggered.
    """

    def __init__(self, n_steps: int, callback: BaseCallback):
        super().__init__()
        if int(n_steps) <= 0:
            raise ValueError(f"n_steps must be positive, got {n_steps}")
        self.n_steps, self.callback, self.last_time_trigger = int(n_steps), callback, 0

    def _init_callback(self) -> None:
        self.callback.init_callback(self.model)
        self.callback.parent = self

    def _on_step(self) -> bool:
        if self.num_timesteps - self.last_time_trigger >= self.n_steps:
            self.last_time_trigger = self.num_timesteps
            self.callback.update_locals(self.locals)
            return bool(self.callback.on_step())
        return True


def _as_callback(callback: MaybeCallback) -> BaseCallback:
    if callback is None:
        return CallbackList([])
    if isinstance(callback, BaseCallback):
        return callback
    if isinstance(callback, list):
        return CallbackList([_as_callback(c) for c in callback])
    sb3 = [c for c in type(callback).__mro__ if c.__module__.startswith(("stable_baselines3", "sb3_contrib"))]
    if sb3:
        name = type(callback).__name__
        if sb3[0] is type(callback):
            raise TypeError(f"callback is SB3's {name}: Proxima's callbacks have the same names and arguments — "
                            f"use proxima.callbacks.{name} (or subclass proxima.callbacks.BaseCallback)")
        raise TypeError(f"callback {name} subclasses SB3's {sb3[0].__name__}: subclass "
                        f"proxima.callbacks.{sb3[0].__name__} instead (the same hooks and attributes)")
    if callable(callback):
        return ConvertCallback(callback)
    raise TypeError(f"callback must be a BaseCallback, a list of them or a function; got {type(callback).__name__}")
