"""``help()`` explains every parameter in SB3's ``:param name:`` style, and the public signatures use
SB3's type aliases (``GymEnv``, ``MaybeCallback``, ``Schedule``, ...) rather than ``Any`` (issue 35)."""

from __future__ import annotations

import inspect
import pydoc
import re

import numpy as np
import pytest

import proxima
from proxima import callbacks, type_aliases
from proxima.vec_env import DummyVecEnv, GymnasiumVecEnv

ALGORITHMS = [proxima.PPO, proxima.A2C, proxima.TRPO, proxima.SAC, proxima.TD3, proxima.DDPG]
CALLBACKS = [callbacks.BaseCallback, callbacks.CallbackList, callbacks.ConvertCallback, callbacks.CheckpointCallback,
             callbacks.EvalCallback, callbacks.StopTrainingOnRewardThreshold,
             callbacks.StopTrainingOnNoModelImprovement, callbacks.EveryNTimesteps]


def parameters(fn) -> list[str]:
    return [p for p in inspect.signature(fn).parameters if p not in ("self", "cls")]


def documented(text: str) -> dict[str, str]:
    """``{name: description}`` of each ``:param name: description`` in ``text``."""
    found = re.findall(r":param (\w+):(.*?)(?=\n\s*:param |\n\s*:return:|\Z)", text, flags=re.S)
    return {name: " ".join(desc.split()) for name, desc in found}


@pytest.mark.parametrize("cls", ALGORITHMS, ids=lambda c: c.__name__)
def test_help_of_each_algorithm_explains_every_constructor_parameter(cls):
    text = pydoc.render_doc(cls, renderer=pydoc.plaintext)
    params = documented(cls.__doc__)
    names = parameters(cls.__init__)
    assert len(names) >= 20
    missing = [n for n in names if n not in params]
    assert not missing, f"{cls.__name__}: no :param for {missing}"
    assert all(len(params[n]) >= 15 for n in names), {n: params[n] for n in names if len(params[n]) < 15}
    assert all(f":param {n}:" in text for n in names)
    assert list(params)[: len(names)] == names, "in the signature's order"


def test_the_wording_is_sb3s_and_differences_are_said():
    ppo, sac = documented(proxima.PPO.__doc__), documented(proxima.SAC.__doc__)
    assert ppo["n_steps"].startswith("The number of steps to run for each environment per update")
    assert ppo["gae_lambda"] == "Factor for trade-off of bias vs variance for Generalized Advantage Estimator"
    assert "NotImplementedError" in ppo["use_sde"] and "NotImplementedError" in ppo["device"]
    assert "must divide" in ppo["batch_size"]
    assert sac["ent_coef"].startswith("Entropy regularization coefficient")
    assert "episode" in sac["train_freq"] and "NotImplementedError" in sac["train_freq"]
    assert documented(proxima.TRPO.__doc__)["target_kl"].startswith("Target Kullback-Leibler divergence")


@pytest.mark.parametrize("method,extra", [("learn", []), ("predict", []), ("save", []), ("load", []),
                                          ("set_parameters", ["load_path_or_dict"])])
def test_the_methods_document_every_parameter(method, extra):
    for cls in [proxima.BaseAlgorithm, *ALGORITHMS]:
        fn = getattr(cls, method)
        params = documented(fn.__doc__ or "")
        missing = [n for n in parameters(fn) if n not in params]
        assert not missing, f"{cls.__name__}.{method}: no :param for {missing}"
    assert ":return:" in (getattr(proxima.PPO, method).__doc__ or "") or method in ("save", "set_parameters")


@pytest.mark.parametrize("fn", [proxima.evaluate_policy, *CALLBACKS, DummyVecEnv, GymnasiumVecEnv],
                         ids=lambda f: f.__name__)
def test_evaluate_policy_callbacks_and_vec_envs_document_every_parameter(fn):
    params = documented(fn.__doc__ or "")
    init = fn if inspect.isfunction(fn) else fn.__init__
    missing = [n for n in parameters(init) if n not in params]
    assert not missing, f"{fn.__name__}: no :param for {missing}"


def public_functions():
    """Every public function and method of the package, with where it is."""
    out = [("evaluate_policy", proxima.evaluate_policy)]
    for cls in [proxima.BaseAlgorithm, *ALGORITHMS, *CALLBACKS, DummyVecEnv, GymnasiumVecEnv]:
        for name, member in vars(cls).items():
            fn = member.__func__ if isinstance(member, (classmethod, staticmethod)) else member
            if inspect.isfunction(fn) and (not name.startswith("_") or name == "__init__"):
                out.append((f"{cls.__name__}.{name}", fn))
    return out


def test_public_signatures_have_real_types_not_any():
    """``Any`` only where anything goes: ``**kwargs``, ``*args``, and values of dicts/lists of mixed content."""
    offenders = []
    for where, fn in public_functions():
        for p in inspect.signature(fn).parameters.values():
            if p.name in ("self", "cls") or p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL) or p.name == "value":
                continue
            if p.annotation is inspect.Parameter.empty:
                offenders.append(f"{where}({p.name}): no annotation")
            elif str(p.annotation) in ("Any", "typing.Any") or re.fullmatch(r"(Optional\[)?Any\]?", str(p.annotation)):
                offenders.append(f"{where}({p.name}): Any")
    assert len(public_functions()) > 60
    assert not offenders, offenders


def test_sb3s_type_aliases_are_used_in_the_signatures():
    sig = inspect.signature(proxima.PPO.__init__).parameters
    assert sig["learning_rate"].annotation == "Union[float, Schedule]"
    assert sig["env"].annotation == "Optional[EnvLike]" and sig["policy"].annotation == "PolicyType"
    assert inspect.signature(proxima.PPO.learn).parameters["callback"].annotation == "MaybeCallback"
    assert inspect.signature(proxima.TD3.__init__).parameters["action_noise"].annotation == "Optional[ActionNoise]"
    assert inspect.signature(proxima.evaluate_policy).parameters["model"].annotation == "PolicyPredictor"
    assert type_aliases.Schedule == type_aliases.Callable[[float], float]
    assert set(type_aliases.__all__) >= {"GymEnv", "GymObs", "MaybeCallback", "Schedule", "PolicyPredictor"}


def test_the_protocols_recognise_what_they_describe():
    model = proxima.PPO("MlpPolicy", "CartPole-v1", n_steps=8, batch_size=8, seed=1)
    assert isinstance(model, type_aliases.PolicyPredictor)
    assert isinstance(model.get_env(), type_aliases.VecEnvLike)
    assert not isinstance(object(), type_aliases.VecEnvLike)
    noise = pytest.importorskip("stable_baselines3.common.noise").NormalActionNoise(np.zeros(1), np.ones(1))
    assert isinstance(noise, type_aliases.ActionNoise)
