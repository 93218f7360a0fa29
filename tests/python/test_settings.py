"""The settings a constructor, ``from_preset`` and ``load`` hand to Rust (a dict of typed values since
issue 35; ``"key=value"`` strings re-read as TOML before) give the very config they gave before: the
golden file holds each case's resolved config as the string path produced it (written by running this
file as a script against that build), and every key recorded there must come out equal, floats bit for
bit. Keys added to the config later are not in the file and are not compared."""

from __future__ import annotations

import json
import os
import sys
import tomllib

import numpy as np
import pytest

import proxima

GOLDEN = os.path.join(os.path.dirname(__file__), "data", "config_golden.json")


class NormalActionNoise:
    """Shaped as SB3's (``_mu``, ``_sigma``), without importing torch."""

    def __init__(self, mean, sigma):
        self._mu, self._sigma = np.asarray(mean, dtype=float), np.asarray(sigma, dtype=float)

    def __call__(self):
        return np.random.normal(self._mu, self._sigma)

    def reset(self):
        pass


def _ppo_everything():
    return proxima.PPO(
        "MlpPolicy", "CartPole-v1", learning_rate=1e-3, n_steps=128, batch_size=32, n_epochs=3, gamma=0.98,
        gae_lambda=0.9, clip_range=0.1, clip_range_vf=0.2, normalize_advantage=False, ent_coef=0.01, vf_coef=0.4,
        max_grad_norm=None, target_kl=0.015, seed=7,
        policy_kwargs=dict(net_arch=[32, 16], activation_fn="relu", ortho_init=False, log_std_init=-0.5),
        normalize_observation=True, anneal_lr=True, n_envs=4, clip_obs=5.0, num_threads=2,
    )


CASES = {
    "ppo_defaults": lambda: proxima.PPO("MlpPolicy", "CartPole-v1", seed=1),
    "ppo_everything": _ppo_everything,
    "ppo_schedules_and_odd_floats": lambda: proxima.PPO(
        "MlpPolicy", "Pendulum-v1", learning_rate=lambda p: p / 3, clip_range=lambda p: 0.1 + 0.2 * p,
        gamma=0.1 + 0.2, gae_lambda=1 / 3, ent_coef=1e-300, vf_coef=np.float64(0.7), seed=2**31 - 1,
        policy_kwargs=dict(net_arch=dict(pi=[8], vf=[8])), backend="candle", normalize_reward=True,
        clip_reward=1e300,
    ),
    "ppo_adaptive_kl": lambda: proxima.PPO("MlpPolicy", "CartPole-v1", seed=3, objective="adaptive_kl",
                                           kl_target=0.02, target_kl=None),
    "a2c_defaults": lambda: proxima.A2C("MlpPolicy", "CartPole-v1", seed=1),
    "a2c_adam": lambda: proxima.A2C("MlpPolicy", "Acrobot-v1", seed=2, use_rms_prop=False, normalize_advantage=True,
                                    rms_prop_eps=1e-4, max_grad_norm=1.5, n_steps=8, n_envs=2),
    "trpo_defaults": lambda: proxima.TRPO("MlpPolicy", "CartPole-v1", seed=1),
    "trpo_tuned": lambda: proxima.TRPO("MlpPolicy", "Pendulum-v1", seed=4, target_kl=0.02, cg_damping=0.05,
                                       cg_max_steps=10, line_search_shrinking_factor=0.5, line_search_max_iter=5,
                                       n_critic_updates=3, batch_size=64, normalize_advantage=False),
    "sac_defaults": lambda: proxima.SAC("MlpPolicy", "Pendulum-v1", seed=1),
    "sac_tuned": lambda: proxima.SAC("MlpPolicy", "Pendulum-v1", seed=5, ent_coef="auto_0.1", target_entropy=-1.0,
                                     train_freq=(2, "step"), gradient_steps=2, learning_starts=50, buffer_size=10_000,
                                     tau=0.01, policy_kwargs=dict(net_arch=[64, 64])),
    "sac_fixed_alpha": lambda: proxima.SAC("MlpPolicy", "Pendulum-v1", seed=6, ent_coef=0.2,
                                           target_update_interval=2),
    "td3_defaults": lambda: proxima.TD3("MlpPolicy", "Pendulum-v1", seed=1),
    "td3_noise": lambda: proxima.TD3("MlpPolicy", "Pendulum-v1", seed=7, action_noise=NormalActionNoise([0.0], [0.1]),
                                     policy_delay=3, target_policy_noise=0.3, target_noise_clip=0.4),
    "ddpg_defaults": lambda: proxima.DDPG("MlpPolicy", "MountainCarContinuous-v0", seed=1),
    "preset_cleanrl": lambda: proxima.PPO.from_preset("cleanrl", "CartPole-v1", n_steps=256, seed=3),
    "preset_sac_lr": lambda: proxima.SAC.from_preset("sac", "Pendulum-v1", learning_rate=1e-3, seed=2),
}


def _load_case(tmp: str):
    path = os.path.join(tmp, "ppo_for_load")
    proxima.PPO("MlpPolicy", "CartPole-v1", seed=9, n_steps=32, batch_size=16, gamma=0.97).save(path)
    return proxima.PPO.load(path, env="CartPole-v1", n_envs=2, ent_coef=0.01, normalize_observation=True)


def _config(model) -> dict:
    return tomllib.loads(model._model.config_toml)


def _floats_exact(value):
    """Floats as their exact hex (JSON would keep them too, but ``inf`` is not JSON)."""
    if isinstance(value, float):
        return {"float": value.hex()}
    if isinstance(value, list):
        return [_floats_exact(v) for v in value]
    return value


@pytest.mark.parametrize("name", sorted(CASES) + ["load_with_settings"])
def test_typed_settings_give_the_config_the_strings_gave(name, tmp_path):
    with open(GOLDEN, encoding="utf-8") as f:
        golden = json.load(f)[name]
    model = _load_case(str(tmp_path)) if name == "load_with_settings" else CASES[name]()
    config = {k: _floats_exact(v) for k, v in _config(model).items()}
    assert len(golden) > 30
    differ = {k: (v, config.get(k, "<missing>")) for k, v in golden.items() if config.get(k, "<missing>") != v}
    assert not differ, f"config keys that differ from the string path's (golden, now): {differ}"


@pytest.mark.parametrize("value,exc,text", [
    (object(), TypeError, "setting 'normalize_observation': a value of type object"),
    ({"a": 1}, TypeError, "setting 'normalize_observation': a value of type dict"),
    ([1, None], TypeError, "setting 'normalize_observation': a list of NoneType"),
    ([[1]], TypeError, "setting 'normalize_observation': a list of list"),
])
def test_a_setting_of_a_type_the_config_has_not_names_its_key(value, exc, text):
    with pytest.raises(exc, match=text):
        proxima.PPO("MlpPolicy", "CartPole-v1", normalize_observation=value)


@pytest.mark.parametrize("cls,kwargs,exc,text", [
    (proxima.PPO, {"n_steps": "64"}, TypeError, "n_steps must be an integer, got '64'"),
    (proxima.PPO, {"n_steps": 64.7}, ValueError, "n_steps must be a whole number"),
    (proxima.PPO, {"n_epochs": True}, TypeError, "n_epochs must be an integer, got True"),
    (proxima.PPO, {"gamma": "0.9"}, TypeError, "gamma must be a number, got '0.9'"),
    (proxima.PPO, {"ent_coef": "0.5"}, TypeError, "ent_coef must be a number"),
    (proxima.A2C, {"n_steps": "5"}, TypeError, "n_steps must be an integer"),
    (proxima.TRPO, {"cg_max_steps": None}, TypeError, "cg_max_steps must be an integer, got None"),
    (proxima.SAC, {"batch_size": "128"}, TypeError, "batch_size must be an integer"),
    (proxima.SAC, {"tau": "0.5"}, TypeError, "tau must be a number"),
    (proxima.TD3, {"policy_delay": 2.5}, ValueError, "policy_delay must be a whole number"),
])
def test_sb3s_numeric_keywords_of_another_type_name_the_key(cls, kwargs, exc, text):
    env = "Pendulum-v1" if cls in (proxima.SAC, proxima.TD3) else "CartPole-v1"
    with pytest.raises(exc, match=text):
        cls("MlpPolicy", env, **kwargs)


def test_sb3s_numeric_keywords_take_numpy_numbers_and_whole_floats():
    model = proxima.PPO("MlpPolicy", "CartPole-v1", n_steps=np.int64(64), batch_size=32.0, gamma=np.float32(0.5))
    config = _config(model)
    assert config["n_steps"] == 64 and config["batch_size"] == 32 and config["gamma"] == 0.5


def test_the_extension_checks_the_settings_it_is_given():
    from proxima import _proxima

    env = ("id", "CartPole-v1")
    with pytest.raises(ValueError, match="setting 'seed': .* out of range"):
        _proxima.Model.create(env, "sb3", {"seed": 2**70})
    with pytest.raises(TypeError, match="a setting's key must be a str"):
        _proxima.Model.create(env, "sb3", {3: 1})
    with pytest.raises(ValueError, match="n_steps"):  # the config's own check, on a str for an int
        _proxima.Model.create(env, "sb3", {"n_steps": "64"})
    assert _config_of(_proxima.Model.create(env, "sb3", {}))["max_grad_norm"] == 0.5
    model = _proxima.Model.create(env, "sb3", {"n_steps": 64, "batch_size": 32, "max_grad_norm": None,
                                              "net_arch": (8, 8), "learning_rate": 1 / 3, "anneal_lr": True})
    config = _config_of(model)
    assert config["n_steps"] == 64 and config["net_arch"] == [8, 8] and config["anneal_lr"] is True
    assert config["max_grad_norm"] == "none" and config["learning_rate"] == 1 / 3  # None cleared it


def test_numpy_scalars_are_the_numbers_they_print_as():
    model = proxima.PPO("MlpPolicy", "CartPole-v1", seed=np.int64(3), n_envs=np.int64(2),
                        clip_obs=np.float32(0.1), normalize_observation=np.bool_(True))
    config = _config(model)
    assert config["n_envs"] == 2 and config["seed"] == 3 and config["clip_obs"] == 0.1
    assert config["normalize_observation"] is True


def _config_of(model) -> dict:
    return tomllib.loads(model.config_toml)


if __name__ == "__main__":  # writes the golden file from the build installed in this interpreter
    import tempfile

    out = {name: {k: _floats_exact(v) for k, v in _config(make()).items()} for name, make in CASES.items()}
    with tempfile.TemporaryDirectory() as tmp:
        out["load_with_settings"] = {k: _floats_exact(v) for k, v in _config(_load_case(tmp)).items()}
    with open(sys.argv[1] if len(sys.argv) > 1 else GOLDEN, "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")
