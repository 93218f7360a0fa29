"""The Python package against Stable-Baselines3's API: defaults, learn/save/load/predict,
parameters, envs of every kind, callbacks, evaluation, and bad inputs.

SB3 is a test-only dependency: the tests that need it import it with ``pytest.importorskip``
(so a run without it says which were skipped); ``.ci/run`` installs it.
"""

from __future__ import annotations

import inspect
import os
import re
import warnings

import gymnasium as gym
import numpy as np
import pytest

import proxima
from proxima.callbacks import (
    BaseCallback,
    CallbackList,
    CheckpointCallback,
    EvalCallback,
    StopTrainingOnRewardThreshold,
)

SMALL = dict(n_steps=64, batch_size=32, n_epochs=2, seed=3)


def defaults(fn) -> dict:
    return {
        k: p.default
        for k, p in inspect.signature(fn).parameters.items()
        if p.default is not inspect.Parameter.empty and p.kind is not p.VAR_KEYWORD
    }


def source_defaults(package: str, module: str, cls: str, method: str = "__init__") -> dict:
    """``cls.method``'s defaults read from the installed package's source (its signature as
    written), without importing it: SB3 imports torch, which the test venv need not have."""
    import ast
    import importlib.util

    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        pytest.skip(f"{package} is not installed (pip install {package.replace('_', '-')})")
    path = os.path.join(spec.submodule_search_locations[0], *module.split(".")) + ".py"
    tree = ast.parse(open(path, encoding="utf-8").read())
    init = next(n for c in ast.walk(tree) if isinstance(c, ast.ClassDef) and c.name == cls
                for n in c.body if isinstance(n, ast.FunctionDef) and n.name == method)
    args = init.args.args[-len(init.args.defaults):] if init.args.defaults else []
    return {a.arg: ast.literal_eval(d) for a, d in zip(args, init.args.defaults)}


@pytest.mark.parametrize("package,module,cls", [
    ("stable_baselines3", "ppo.ppo", "PPO"),
    ("stable_baselines3", "a2c.a2c", "A2C"),
    ("sb3_contrib", "trpo.trpo", "TRPO"),
    ("sb3_contrib", "ppo_mask.ppo_mask", "MaskablePPO"),
    ("sb3_contrib", "ppo_recurrent.ppo_recurrent", "RecurrentPPO"),
])
def test_every_constructor_default_equals_sb3s(package, module, cls):
    theirs = source_defaults(package, module, cls)
    assert len(theirs) >= 20, "read SB3's signature"
    assert defaults(getattr(proxima, cls).__init__) == theirs


@pytest.mark.parametrize("package,module,cls", [
    ("stable_baselines3", "ppo.ppo", "PPO"),
    ("stable_baselines3", "a2c.a2c", "A2C"),
    ("sb3_contrib", "trpo.trpo", "TRPO"),
    ("sb3_contrib", "ppo_mask.ppo_mask", "MaskablePPO"),
    ("sb3_contrib", "ppo_recurrent.ppo_recurrent", "RecurrentPPO"),
])
def test_learn_defaults_equal_sb3s(package, module, cls):
    theirs = source_defaults(package, module, cls, "learn")
    assert theirs["tb_log_name"] == cls
    assert defaults(getattr(proxima, cls).learn) == theirs


def test_defaults_reach_the_config():
    m = proxima.PPO("MlpPolicy", "CartPole-v1", seed=1)
    toml = m._model.config_toml
    for line in ["n_steps = 2048", "batch_size = 64", "n_epochs = 10", "learning_rate = 0.0003", "ent_coef = 0.0",
                 'normalize_advantage = "minibatch"', "max_grad_norm = 0.5", "anneal_lr = false", "n_envs = 1"]:
        assert line in toml, line


# --- learn, save, load, predict --------------------------------------------------------------------
def test_learn_save_load_predict_gives_identical_actions(tmp_path):
    model = proxima.PPO("MlpPolicy", "CartPole-v1", **SMALL).learn(256)
    assert model.num_timesteps == 256
    obs = np.random.default_rng(0).normal(size=(16, 4)).astype(np.float32)
    before, _ = model.predict(obs, deterministic=True)
    model.save(tmp_path / "ppo_cartpole")
    assert (tmp_path / "ppo_cartpole.safetensors").is_file()
    loaded = proxima.PPO.load(tmp_path / "ppo_cartpole")
    after, _ = loaded.predict(obs, deterministic=True)
    assert before.dtype == np.int64 and before.shape == (16,)
    np.testing.assert_array_equal(before, after)
    single, state = loaded.predict(obs[0], deterministic=True)
    assert state is None and single.shape == () and single == before[0]


def test_load_with_env_continues_counters_and_trains(tmp_path):
    model = proxima.PPO("MlpPolicy", "CartPole-v1", **SMALL).learn(128)
    model.save(tmp_path / "m.safetensors")
    again = proxima.PPO.load(tmp_path / "m.safetensors", env="CartPole-v1")
    assert again.num_timesteps == 128
    params = again.get_parameters()
    again.learn(128, reset_num_timesteps=False)
    assert again.num_timesteps == 256
    assert any(not np.array_equal(params[k], v) for k, v in again.get_parameters().items())


def test_same_seed_same_weights():
    a = proxima.PPO("MlpPolicy", "CartPole-v1", **SMALL).learn(256).get_parameters()
    b = proxima.PPO("MlpPolicy", "CartPole-v1", **SMALL).learn(256).get_parameters()
    assert all(np.array_equal(a[k], b[k]) for k in a)


def test_load_takes_sb3s_custom_objects_for_the_schedules(tmp_path):
    proxima.PPO("MlpPolicy", "CartPole-v1", **SMALL).learn(64).save(tmp_path / "m")
    seen = []
    m = proxima.PPO.load(tmp_path / "m", env="CartPole-v1", custom_objects={"learning_rate": lambda p: seen.append(p) or 1e-4})
    m.learn(128, reset_num_timesteps=False)
    assert len(seen) == 2 and m.num_timesteps == 192
    with pytest.raises(NotImplementedError, match="custom_objects"):
        proxima.PPO.load(tmp_path / "m", custom_objects={"policy_class": None})


def test_get_set_parameters_round_trip():
    src = proxima.PPO("MlpPolicy", "CartPole-v1", **SMALL).learn(128)
    dst = proxima.PPO("MlpPolicy", "CartPole-v1", **{**SMALL, "seed": 9})
    params = src.get_parameters()
    assert params["actor.0.weight"].shape == (64, 4) and params["actor.0.weight"].dtype == np.float32
    dst.set_parameters(params)
    got = dst.get_parameters()
    assert all(np.array_equal(params[k], got[k]) for k in params)
    obs = np.zeros((4, 4), np.float32)
    np.testing.assert_array_equal(src.predict(obs, deterministic=True)[0], dst.predict(obs, deterministic=True)[0])


def test_set_parameters_without_exact_match_skips_names_the_policy_lacks():
    """PyTorch's ``strict=False``: a partial dict sets what it names, extra names are skipped; a dict
    naming none of the policy's parameters is an error, not a silent no-op."""
    src = proxima.PPO("MlpPolicy", "CartPole-v1", **SMALL)
    dst = proxima.PPO("MlpPolicy", "CartPole-v1", **{**SMALL, "seed": 9})
    before = dst.get_parameters()
    w = src.get_parameters()["actor.0.weight"]
    dst.set_parameters({"actor.0.weight": w, "features_extractor.extra": np.zeros(3)}, exact_match=False)
    after = dst.get_parameters()
    np.testing.assert_array_equal(after["actor.0.weight"], w)
    assert not np.array_equal(before["actor.0.weight"], w)
    assert all(np.array_equal(before[k], after[k]) for k in before if k != "actor.0.weight")
    with pytest.raises(ValueError, match="unknown parameter"):
        dst.set_parameters({"actor.0.weight": w, "features_extractor.extra": np.zeros(3)})
    with pytest.raises(ValueError, match="none of the 1 parameters given"):
        dst.set_parameters({"nope": np.zeros(1)}, exact_match=False)


def test_a_python_model_evaluates_with_the_cli_and_a_cli_run_directory_loads_in_python(tmp_path):
    import shutil
    import subprocess

    cli = os.environ.get("PROXIMA_CLI") or shutil.which("proxima")
    if not cli or not os.path.exists(cli):
        pytest.skip("the proxima CLI is not built here (set PROXIMA_CLI to target/…/proxima)")
    model = proxima.PPO("MlpPolicy", "CartPole-v1", **SMALL).learn(128)
    model.save(tmp_path / "m.safetensors")
    out = subprocess.run([cli, "eval", str(tmp_path / "m.safetensors"), "--episodes", "2", "--deterministic", "--json"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    import json

    ours = proxima.evaluate_policy(model, "CartPole-v1", n_eval_episodes=2, return_episode_rewards=True)[0]
    assert len(json.loads(out.stdout)["returns"]) == 2 and all(r > 0 for r in ours)
    run = tmp_path / "run"
    out = subprocess.run([cli, "train", "CartPole-v1", "--total-timesteps", "2048", "--run-dir", str(run), "--quiet"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    loaded = proxima.PPO.load(run)
    assert loaded.num_timesteps == 2048 and loaded.predict(np.zeros(4))[0] in (0, 1)
    again = proxima.PPO.load(run, env="CartPole-v1")  # the CLI's run, trained on from Python
    again.learn(512, reset_num_timesteps=False)
    assert again.num_timesteps == 2048 + 512


def test_continuous_actions_are_clipped_to_the_box():
    model = proxima.PPO("MlpPolicy", "Pendulum-v1", n_steps=64, batch_size=32, seed=1,
                        policy_kwargs=dict(log_std_init=3.0))
    acts, _ = model.predict(np.zeros((256, 3), np.float32))
    assert acts.shape == (256, 1) and acts.dtype == np.float32
    assert acts.min() >= -2.0 and acts.max() <= 2.0 and np.abs(acts).max() == 2.0


def test_callable_learning_rate_and_clip_range_are_schedules():
    seen = []
    model = proxima.PPO("MlpPolicy", "CartPole-v1", learning_rate=lambda p: seen.append(p) or 1e-3 * p,
                        clip_range=lambda p: 0.1 + 0.1 * p, **SMALL)
    model.learn(256)
    assert seen[0] == 1.0  # the initial value, at construction
    assert seen[1:] == pytest.approx([0.75, 0.5, 0.25, 0.0])  # progress after each rollout, as SB3


def test_policy_kwargs_reach_the_network():
    m = proxima.PPO("MlpPolicy", "CartPole-v1", seed=1,
                    policy_kwargs=dict(net_arch=dict(pi=[32], vf=[32]), activation_fn="relu", ortho_init=False))
    assert m.get_parameters()["actor.0.weight"].shape == (32, 4)
    assert 'activation = "relu"' in m._model.config_toml and "ortho_init = false" in m._model.config_toml


def test_torch_activation_classes_are_accepted():
    torch = pytest.importorskip("torch")
    m = proxima.PPO("MlpPolicy", "CartPole-v1", seed=1, policy_kwargs=dict(activation_fn=torch.nn.ReLU))
    assert 'activation = "relu"' in m._model.config_toml


def test_tensorboard_log_writes_the_clis_tags_in_sb3s_layout(tmp_path):
    model = proxima.PPO("MlpPolicy", "CartPole-v1", tensorboard_log=str(tmp_path), **SMALL)
    model.learn(128)
    model.learn(64, reset_num_timesteps=False)  # continues PPO_1
    model.learn(64)  # a new run: PPO_2
    assert sorted(os.listdir(tmp_path)) == ["PPO_1", "PPO_2"]
    files = os.listdir(tmp_path / "PPO_1")
    assert len(files) == 2 and all(f.startswith("events.out.tfevents.") for f in files)
    data = b"".join((tmp_path / "PPO_1" / f).read_bytes() for f in files)
    assert b"losses/approx_kl" in data and b"charts/episodic_return" in data


def test_from_preset_is_the_clis_preset():
    m = proxima.PPO.from_preset("cleanrl", "CartPole-v1", n_steps=32)
    toml = m._model.config_toml
    assert "n_envs = 4" in toml and "n_steps = 32" in toml and "anneal_lr = true" in toml
    with pytest.raises(ValueError, match="preset `td3` holds TD3's hyperparameters, which would run algo `sac`"):
        proxima.SAC.from_preset("td3", "Pendulum-v1")  # it trained SAC with α fixed at 0
    with pytest.raises(ValueError, match="preset `cleanrl` holds PPO's hyperparameters, which do not fit algo `ddpg`"):
        proxima.DDPG.from_preset("cleanrl", "Pendulum-v1")
    assert "n_quantiles = 25" in proxima.TQC.from_preset("tqc", "Pendulum-v1")._model.config_toml
    # Another on-policy algorithm's preset is taken, and what it leaves unread is said.
    with pytest.warns(UserWarning, match="preset 'cleanrl' holds another algorithm's values; A2C does not read its .*n_epochs"):
        proxima.A2C.from_preset("cleanrl", "CartPole-v1")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        proxima.A2C.from_preset("a2c", "CartPole-v1")


# --- envs of every kind ------------------------------------------------------------------------------
class Corridor(gym.Env):
    """A user-defined env: walk right to the end of a corridor of 5 cells."""

    def __init__(self):
        self.observation_space = gym.spaces.Box(0.0, 4.0, (1,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.pos = 0

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.pos = 0
        return np.array([self.pos], np.float32), {}

    def step(self, action):
        self.pos = max(0, min(4, self.pos + (1 if action == 1 else -1)))
        done = self.pos == 4
        return np.array([self.pos], np.float32), (1.0 if done else -0.1), done, False, {}


class Wide(Corridor):
    """Corridor's walk seen through 100,000 observation values (400 kB a step)."""

    def __init__(self):
        super().__init__()
        self.observation_space = gym.spaces.Box(0.0, 4.0, (100_000,), np.float32)

    def reset(self, seed=None, options=None):
        obs, info = super().reset(seed=seed)
        return np.full(100_000, obs[0], np.float32), info

    def step(self, action):
        obs, *rest = super().step(action)
        return (np.full(100_000, obs[0], np.float32), *rest)


def test_a_rollout_larger_than_memory_is_refused_before_it_is_allocated():
    """n_steps × n_envs under the transition bound, but 2²⁰ steps of 400 kB observations are 420 GB:
    refused with what it needs, not an out-of-memory abort (Atari frames are the real case)."""
    with pytest.raises(ValueError, match=r"n_steps × n_envs = 1048576 × 1: .* needs 39\d\.\d\d GB, more than"):
        proxima.PPO("MlpPolicy", Wide(), n_steps=2**20, batch_size=64, policy_kwargs=dict(net_arch=[8]))
    proxima.PPO("MlpPolicy", Wide(), n_steps=64, batch_size=64, policy_kwargs=dict(net_arch=[8])).learn(64)


def test_a_user_defined_env_class_trains():
    model = proxima.PPO("MlpPolicy", Corridor(), n_steps=128, batch_size=64, learning_rate=3e-3, seed=1)
    model.learn(4096)
    mean, _ = proxima.evaluate_policy(model, Corridor(), n_eval_episodes=3)
    assert mean == pytest.approx(0.7)  # 4 steps right: −0.1·3 + 1


def test_env_factories_and_a_sync_vector_env_train():
    model = proxima.PPO("MlpPolicy", [lambda: gym.make("CartPole-v1")] * 2, **SMALL).learn(256)
    assert model.n_envs == 2 and model.num_timesteps == 256
    venv = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1")] * 3,
                                    autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    model = proxima.PPO("MlpPolicy", venv, **SMALL).learn(384)
    assert model.n_envs == 3 and model.num_timesteps == 384


@pytest.mark.parametrize("mode", ["NEXT_STEP", "SAME_STEP"])
def test_a_gymnasium_vector_env_in_either_autoreset_mode_gives_real_transitions(mode):
    """Both modes train, and in both the steps seen are real transitions: every episode of
    CartPole ends with a terminal observation and no dummy step (a reward-0 reset step) follows."""
    venv = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1")] * 2,
                                    autoreset_mode=getattr(gym.vector.AutoresetMode, mode))

    class Check(BaseCallback):
        def __init__(self):
            super().__init__()
            self.rewards, self.ends = [], 0

        def _on_step(self):
            self.rewards.extend(self.locals["rewards"].tolist())
            self.ends += sum("terminal_observation" in i for i in self.locals["infos"])
            return True

    check = Check()
    proxima.PPO("MlpPolicy", venv, **SMALL).learn(1024, callback=check)
    assert check.ends > 5 and all(r == 1.0 for r in check.rewards), "no dummy reward-0 steps"


def test_sb3_make_vec_env_trains_and_sb3_evaluate_policy_runs_a_proxima_model():
    pytest.importorskip("stable_baselines3")
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.evaluation import evaluate_policy

    venv = make_vec_env("CartPole-v1", n_envs=2, seed=0)
    model = proxima.PPO("MlpPolicy", venv, n_steps=128, batch_size=64, seed=1).learn(2048)
    assert model.n_envs == 2
    mean, std = evaluate_policy(model, venv, n_eval_episodes=4)
    assert np.isfinite(mean) and mean > 9


class _Lives(gym.Wrapper):
    """Ends an episode every 4 steps, as Atari's ``EpisodicLifeEnv`` ends one at each lost life, and
    resets the game underneath only when it really ended (outside SB3's ``Monitor``, as in
    ``make_atari_env``)."""

    def __init__(self, env):
        super().__init__(env)
        self.t, self.real_done, self.last = 0, True, None

    def step(self, action):
        obs, r, term, trunc, info = self.env.step(action)
        self.t += 1
        self.real_done, self.last = term or trunc, obs
        return obs, r, term or self.t % 4 == 0, trunc, info

    def reset(self, **kwargs):
        if self.real_done:
            self.last, _ = self.env.reset(**kwargs)
        return self.last, {}


def test_evaluate_policy_counts_a_monitors_whole_episodes_as_sb3s():
    """With SB3's Monitor inside a life-ending wrapper, an episode is the Monitor's (the whole game):
    the same returns and lengths as SB3's evaluate_policy, not one per "life"."""
    from stable_baselines3.common.evaluation import evaluate_policy as sb3_evaluate
    from stable_baselines3.common.monitor import Monitor
    from stable_baselines3.common.vec_env import DummyVecEnv

    model = proxima.PPO("MlpPolicy", "CartPole-v1", **SMALL)
    def venv():
        v = DummyVecEnv([lambda: _Lives(Monitor(gym.make("CartPole-v1"))) for _ in range(2)])
        v.seed(3)
        return v

    ours = proxima.evaluate_policy(model, venv(), n_eval_episodes=4, return_episode_rewards=True)
    theirs = sb3_evaluate(model, venv(), n_eval_episodes=4, return_episode_rewards=True, warn=False)
    assert ours == theirs
    assert min(ours[1]) > 4, "whole games, not lives of 4 steps"


def test_training_records_a_monitors_whole_episodes_as_sb3s():
    """With SB3's Monitor inside a life-ending wrapper, the episodes a callback sees in
    ``infos[i]["episode"]`` (and the log's ep_rew_mean) are the Monitor's whole ones, as SB3 reads
    them, not one per "life"."""
    from stable_baselines3.common.monitor import Monitor
    from stable_baselines3.common.vec_env import DummyVecEnv

    class Episodes(BaseCallback):
        def __init__(self):
            super().__init__()
            self.lengths = []

        def _on_step(self):
            self.lengths += [info["episode"]["l"] for info in self.locals["infos"] if "episode" in info]
            return True

    venv = DummyVecEnv([lambda: _Lives(Monitor(gym.make("CartPole-v1")))])
    seen = Episodes()
    proxima.PPO("MlpPolicy", venv, **SMALL).learn(256, callback=seen)
    monitor = venv.envs[0].env
    assert seen.lengths == monitor.get_episode_lengths()
    assert len(seen.lengths) >= 3 and min(seen.lengths) > 4, "whole episodes, not lives of 4 steps"


def test_an_exception_in_the_users_env_propagates_with_its_type():
    class Broken(Corridor):
        def step(self, action):
            raise KeyError("the user's bug")

    with pytest.raises(KeyError, match="the user's bug"):
        proxima.PPO("MlpPolicy", Broken(), **SMALL).learn(64)


# --- callbacks -----------------------------------------------------------------------------------------
class Recorder(BaseCallback):
    def __init__(self, stop_after=None):
        super().__init__()
        self.calls, self.stop_after = [], stop_after

    def _on_training_start(self):
        self.calls.append("training_start")

    def _on_rollout_start(self):
        self.calls.append("rollout_start")

    def _on_step(self):
        self.calls.append(("step", self.num_timesteps))
        return self.stop_after is None or self.n_calls < self.stop_after

    def _on_rollout_end(self):
        self.calls.append("rollout_end")

    def _on_training_end(self):
        self.calls.append("training_end")


def test_callback_hooks_run_in_order_and_false_stops():
    rec = Recorder()
    proxima.PPO("MlpPolicy", "CartPole-v1", **SMALL).learn(128, callback=rec)
    rollout = lambda start: ["rollout_start", *[("step", start + k) for k in range(1, 65)], "rollout_end"]
    assert rec.calls == ["training_start", *rollout(0), *rollout(64), "training_end"]
    assert rec.n_calls == 128
    assert set(rec.locals) >= {"new_obs", "rewards", "dones", "infos"} and rec.locals["new_obs"].shape == (1, 4)
    stop = Recorder(stop_after=70)
    model = proxima.PPO("MlpPolicy", "CartPole-v1", **SMALL).learn(640, callback=stop)
    assert model.num_timesteps == 70, "stopped at the step whose _on_step said False"
    assert stop.calls[-1] == "training_end" and stop.calls.count("rollout_end") == 1
    # False at a rollout's last step: no update on it either (SB3's collect_rollouts returns False).
    fresh = proxima.PPO("MlpPolicy", "CartPole-v1", **SMALL)
    before = fresh.get_parameters()
    fresh.learn(640, callback=Recorder(stop_after=64))
    assert fresh.num_timesteps == 64
    assert all(np.array_equal(before[k], v) for k, v in fresh.get_parameters().items())


def test_infos_carry_sb3s_episode_and_terminal_observation():
    class Episodes(BaseCallback):
        def __init__(self):
            super().__init__()
            self.ends = []

        def _on_step(self):
            for i, (done, info) in enumerate(zip(self.locals["dones"], self.locals["infos"])):
                if done:
                    self.ends.append((info["episode"]["l"], info["terminal_observation"].shape,
                                      info["TimeLimit.truncated"]))
            return True

    cb = Episodes()
    proxima.PPO("MlpPolicy", "CartPole-v1", **SMALL).learn(640, callback=cb)
    assert cb.ends and all(shape == (4,) and not trunc for _, shape, trunc in cb.ends)
    assert sum(length for length, _, _ in cb.ends) <= 640


def test_predict_and_save_inside_on_step_use_the_rollouts_policy(tmp_path):
    class Acts(BaseCallback):
        def _on_step(self):
            if self.n_calls == 1:
                self.action = self.model.predict(np.ones((3, 4), np.float32), deterministic=True)[0]
                self.params = self.model.get_parameters()
                self.model.save(tmp_path / "mid")
            return True

    fresh = proxima.PPO("MlpPolicy", "CartPole-v1", **SMALL)
    want, params = fresh.predict(np.ones((3, 4), np.float32), deterministic=True)[0], fresh.get_parameters()
    cb = Acts()
    proxima.PPO("MlpPolicy", "CartPole-v1", **SMALL).learn(128, callback=cb)
    np.testing.assert_array_equal(cb.action, want)  # step 1: before any update, the initial weights
    assert all(np.array_equal(params[k], v) for k, v in cb.params.items())
    mid = proxima.PPO.load(tmp_path / "mid")
    assert all(np.array_equal(params[k], v) for k, v in mid.get_parameters().items())


def test_learn_inside_a_callback_is_a_clear_error():
    class Recurses(BaseCallback):
        def _on_step(self):
            self.model.learn(64)
            return True

    with pytest.raises(RuntimeError, match="busy"):
        proxima.PPO("MlpPolicy", "CartPole-v1", **SMALL).learn(64, callback=Recurses())


def test_eval_and_checkpoint_callbacks_write_their_files(tmp_path):
    eval_cb = EvalCallback("CartPole-v1", n_eval_episodes=2, eval_freq=128, log_path=str(tmp_path / "eval"),
                           best_model_save_path=str(tmp_path / "best"), verbose=0)
    ckpt = CheckpointCallback(save_freq=128, save_path=str(tmp_path / "ckpt"), name_prefix="cp")
    proxima.PPO("MlpPolicy", "CartPole-v1", **SMALL).learn(256, callback=CallbackList([eval_cb, ckpt]))
    data = np.load(tmp_path / "eval" / "evaluations.npz")
    assert list(data["timesteps"]) == [128, 256] and data["results"].shape == (2, 2)
    assert (tmp_path / "best" / "best_model.safetensors").is_file()
    files = sorted(os.listdir(tmp_path / "ckpt"))
    assert files == ["cp_128_steps.safetensors", "cp_256_steps.safetensors"]
    proxima.PPO.load(tmp_path / "ckpt" / files[0]).predict(np.zeros(4))


def test_stop_training_on_reward_threshold():
    stop = StopTrainingOnRewardThreshold(reward_threshold=-1e9)
    eval_cb = EvalCallback("CartPole-v1", callback_on_new_best=stop, n_eval_episodes=1, eval_freq=64, verbose=0)
    model = proxima.PPO("MlpPolicy", "CartPole-v1", **SMALL).learn(64 * 10, callback=eval_cb)
    assert model.num_timesteps == 64, "stopped after the first evaluation"


# --- bad inputs: a clear Python exception each ------------------------------------------------------------
BAD = [
    (lambda: proxima.PPO("MlpPolicyy", "CartPole-v1"), ValueError, "did you mean 'MlpPolicy'"),
    (lambda: proxima.PPO("MultiInputPolicy", "CartPole-v1"), ValueError, "MultiInputPolicy is for Dict"),
    (lambda: proxima.PPO("MlpPolicy", "CartPole-v1", n_step=128), TypeError, "did you mean 'n_steps'"),
    (lambda: proxima.PPO("MlpPolicy", "CartPole-v1", use_sde=True), NotImplementedError, "use_sde"),
    (lambda: proxima.PPO("MlpPolicy", "NoSuchEnv-v0"), ValueError, "unknown env id"),
    (lambda: proxima.PPO("MlpPolicy", 42), TypeError, "env must be"),
    (lambda: proxima.PPO("MlpPolicy", "CartPole-v1", n_steps=0), ValueError, "n_steps"),
    (lambda: proxima.PPO("MlpPolicy", "CartPole-v1", batch_size=4096), ValueError, "batch_size"),
    (lambda: proxima.PPO("MlpPolicy", "CartPole-v1", device="cuda"), NotImplementedError, "CPU"),
    (lambda: proxima.PPO("MlpPolicy", "CartPole-v1", policy_kwargs=dict(net_arch=[-1])), ValueError, "net_arch"),
    (lambda: proxima.PPO("MlpPolicy", "CartPole-v1", policy_kwargs=dict(activation_fn="gelu")), NotImplementedError, "activation_fn"),
    (lambda: proxima.PPO("MlpPolicy", "CartPole-v1", policy_kwargs=dict(net_arc=[8])), TypeError, "did you mean 'net_arch'"),
    (lambda: proxima.PPO("MlpPolicy", "CartPole-v1", policy_kwargs=dict(optimizer_class=None)), NotImplementedError,
     "optimizer_class"),
    (lambda: proxima.PPO.from_preset("clean", "CartPole-v1"), ValueError, "did you mean 'cleanrl'"),
    (lambda: proxima.PPO("MlpPolicy", "CartPole-v1", **SMALL).learn(-5), ValueError, "positive"),
    (lambda: proxima.PPO("MlpPolicy", "CartPole-v1", **SMALL).learn(10.5), ValueError, "total_timesteps must be a whole number"),
    (lambda: proxima.PPO("MlpPolicy", "CartPole-v1", **SMALL).predict(np.zeros(5)), ValueError, "shape"),
    (lambda: proxima.PPO("MlpPolicy", "CartPole-v1", **SMALL).predict(np.array(["a"] * 4)), TypeError, "numeric"),
    (lambda: proxima.PPO("MlpPolicy", "CartPole-v1", **SMALL).predict(np.full(4, np.nan)), ValueError, "non-finite"),
    (lambda: proxima.PPO.load("/nonexistent/model"), FileNotFoundError, "no model"),
    (lambda: proxima.PPO("MlpPolicy", Corridor(), n_envs=2), ValueError, "n_envs is for an env id"),
    (lambda: proxima.PPO("MlpPolicy", [lambda: 3]), TypeError, "not a Gymnasium Env"),
    (lambda: proxima.PPO("MlpPolicy", "CartPole-v1", **SMALL).set_parameters({"nope": np.zeros(1)}), ValueError, "unknown parameter"),
    (lambda: proxima.PPO("MlpPolicy", "CartPole-v1", **SMALL).set_parameters({"actor.0.weight": np.zeros((2, 2))}), ValueError, "shape"),
]


@pytest.mark.parametrize("make,exc,text", BAD, ids=[b[2] for b in BAD])
def test_bad_input_raises_a_clear_exception(make, exc, text):
    with pytest.raises(exc, match=text.replace("(", r"\(").replace(")", r"\)")):
        make()


def test_a_dict_observation_space_needs_multi_input_policy_as_in_sb3():
    class DictObs(Corridor):
        def __init__(self):
            super().__init__()
            self.observation_space = gym.spaces.Dict({"pos": gym.spaces.Box(0, 4, (1,))})

    with pytest.raises(ValueError, match="You must use `MultiInputPolicy`"):
        proxima.PPO("MlpPolicy", DictObs())


def test_non_finite_observations_from_an_env_raise_the_clis_error():
    class NaNEnv(Corridor):
        def step(self, action):
            obs, r, te, tr, info = super().step(action)
            return np.array([np.nan], np.float32), r, te, tr, info

    with pytest.raises(ValueError, match="non-finite"):
        proxima.PPO("MlpPolicy", NaNEnv(), **SMALL).learn(64)


def test_a_checkpoint_of_another_env_or_algorithm_is_refused_at_load(tmp_path):
    proxima.PPO("MlpPolicy", "CartPole-v1", **SMALL).save(tmp_path / "cp")
    with pytest.raises(ValueError, match=r"action Discrete\(2\)\) does not fit .*action Box\(-2, 2, \[1\]\)"):
        proxima.PPO.load(tmp_path / "cp", env="Pendulum-v1")
    with pytest.raises(ValueError, match="A2C.load|PPO model"):
        proxima.A2C.load(tmp_path / "cp")


# --- behaviour a Python user expects -----------------------------------------------------------------------
@pytest.mark.parametrize("env", ["native", "python"])
def test_ctrl_c_raises_keyboard_interrupt_promptly_and_the_model_stays_savable(tmp_path, env):
    """Ctrl-C during learn: KeyboardInterrupt, promptly, whether it lands in Proxima's own loop (a native env) or
    inside the user's Python env's step (an env that spends its steps in Python), never a RuntimeError."""
    import subprocess
    import sys

    saved = str(tmp_path / "after")
    make = ('"CartPole-v1"' if env == "native" else
            '__import__("gymnasium").wrappers.TransformObservation(__import__("gymnasium").make("CartPole-v1"), '
            'lambda o: (time.sleep(0.002), o)[1], None)')
    # Python installs its KeyboardInterrupt handler only when SIGINT is not ignored at start, and
    # a test run launched in the background (`.ci/run &`) starts with SIGINT ignored: install it,
    # as an interactive Python has it. A hang dumps every thread's stack after 90 s and exits.
    code = f"""
import faulthandler, os, signal, threading, time
signal.signal(signal.SIGINT, signal.default_int_handler)
faulthandler.dump_traceback_later(90, exit=True)
import proxima
m = proxima.PPO("MlpPolicy", {make}, seed=1)
print("built", flush=True)
threading.Timer(1.0, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
t = time.time()
try:
    m.learn(50_000_000)
    print("not interrupted")
except KeyboardInterrupt:
    print("interrupted after", round(time.time() - t, 2), "s at", m.num_timesteps, "steps")
    m.save({saved!r})
    print("action", int(proxima.PPO.load({saved!r}).predict([0.0, 0.0, 0.0, 0.0])[0]))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "interrupted after" in out.stdout, out.stdout + out.stderr
    seconds = float(out.stdout.split("interrupted after ")[1].split(" s")[0])
    assert seconds < 5.0, f"KeyboardInterrupt after {seconds} s"
    assert "action 0" in out.stdout or "action 1" in out.stdout


def test_the_gil_is_released_while_rust_trains():
    import threading

    count, stop = [0], threading.Event()

    def spin():
        while not stop.is_set():
            count[0] += 1

    t = threading.Thread(target=spin)
    t.start()
    try:
        proxima.PPO("MlpPolicy", "CartPole-v1", seed=1).learn(8192)
    finally:
        stop.set()
        t.join()
    assert count[0] > 100_000, f"a Python thread ran only {count[0]} loops during learn"


# --- found by a fresh user's try (each was silent or wrong before) --------------------------------------------
def test_a_schedule_that_ends_at_zero_saves_loads_and_trains_on(tmp_path, capsys):
    m = proxima.PPO("MlpPolicy", "CartPole-v1", learning_rate=lambda p: 1e-3 * p, clip_range=lambda p: 0.2 * p,
                    **SMALL).learn(256)
    m.save(tmp_path / "lin")
    m.learn(128, reset_num_timesteps=False)
    again = proxima.PPO.load(tmp_path / "lin", env="CartPole-v1", custom_objects={"learning_rate": 1e-4})
    assert again.learning_rate == 1e-4  # a float, as SB3's model.learning_rate is
    again.verbose = 1
    capsys.readouterr()
    again.learn(128, reset_num_timesteps=False)
    assert again.num_timesteps == 384
    assert re.search(r"\| train/learning_rate +\| 0\.0001 ", capsys.readouterr().out)  # held over the saved schedule


@pytest.mark.parametrize("cls,env,kw", [
    ("PPO", "CartPole-v1", SMALL),
    ("A2C", "CartPole-v1", {}),
    ("SAC", "Pendulum-v1", dict(learning_starts=50, policy_kwargs=dict(net_arch=[16, 16]))),
])
def test_a_loaded_model_learns_with_sb3s_default_reset_num_timesteps(tmp_path, cls, env, kw):
    """SB3's load(path, env=...) then learn(n): the counters start again from 0 (it panicked on an
    unsigned underflow of the steps this process took)."""
    algo = getattr(proxima, cls)
    first = algo("MlpPolicy", env, **{"seed": 1, **kw}).learn(256)
    first.save(tmp_path / "m")
    m = algo.load(tmp_path / "m", env=env)
    assert m.num_timesteps == first.num_timesteps >= 256
    m.learn(128)
    assert 128 <= m.num_timesteps < 256


def test_loaded_into_more_envs_learn_continues_by_steps(tmp_path):
    proxima.PPO("MlpPolicy", "Pendulum-v1", n_steps=128, batch_size=64, seed=1).learn(1024).save(tmp_path / "p")
    m = proxima.PPO.load(tmp_path / "p", env=[lambda: gym.make("Pendulum-v1")] * 2)
    before = m.get_parameters()
    m.learn(512, reset_num_timesteps=False)
    assert m.num_timesteps == 1024 + 512
    assert any(not np.array_equal(before[k], v) for k, v in m.get_parameters().items())


def test_a_vector_env_that_ignores_reset_mask_is_refused_not_trained_on():
    venv = gym.make_vec("CartPole-v1", num_envs=2)  # Gymnasium's CartPoleVectorEnv: resets all on a partial reset
    with pytest.raises(NotImplementedError, match="reset_mask"):
        proxima.PPO("MlpPolicy", venv, **SMALL).learn(256)
    ok = gym.make_vec("CartPole-v1", num_envs=2, vectorization_mode="sync")
    assert proxima.PPO("MlpPolicy", ok, **SMALL).learn(256).num_timesteps == 256
    assert proxima.evaluate_policy(proxima.PPO("MlpPolicy", "CartPole-v1", **SMALL), ok, n_eval_episodes=2)[0] > 0


class OldApi(Corridor):
    def step(self, action):
        obs, r, te, tr, info = super().step(action)
        return obs, r, te or tr, {"lives": 3}


class OldReset(Corridor):
    def reset(self, seed=None, options=None):
        return super().reset(seed=seed)[0]


@pytest.mark.parametrize("env,text", [(OldApi, "returns \\(observation, reward, terminated, truncated, info\\)"),
                                      (OldReset, "returns \\(observation, info\\)")])
def test_the_old_gym_api_is_a_clear_error(env, text):
    with pytest.raises(RuntimeError, match=text):
        proxima.PPO("MlpPolicy", env(), **SMALL).learn(64)


def test_one_env_object_twice_is_refused():
    env = Corridor()
    with pytest.raises(ValueError, match="more than once"):
        proxima.PPO("MlpPolicy", [env, env], **SMALL)
    with pytest.raises(ValueError, match="returned an env object it returned before"):
        proxima.PPO("MlpPolicy", [lambda: env, lambda: env], **SMALL)


def test_float64_observations_and_one_element_rewards_are_taken_as_sb3_takes_them():
    class Loose(Corridor):
        def step(self, action):
            obs, r, te, tr, info = super().step(action)
            return obs.astype(np.float64), np.array([r]), te, tr, info

    assert proxima.PPO("MlpPolicy", Loose(), **SMALL).learn(64).num_timesteps == 64

    class Wordy(Corridor):
        def step(self, action):
            obs, r, te, tr, info = super().step(action)
            return obs, "one", te, tr, info

    with pytest.raises(RuntimeError, match="reward 'one', which is not one number"):
        proxima.PPO("MlpPolicy", Wordy(), **SMALL).learn(64)


def test_on_step_returning_none_stops_as_in_sb3():
    class Forgets(BaseCallback):
        def _on_step(self):
            pass

    assert proxima.PPO("MlpPolicy", "CartPole-v1", **SMALL).learn(640, callback=Forgets()).num_timesteps == 1


def test_load_takes_hyperparameters_and_save_makes_folders(tmp_path):
    proxima.PPO("MlpPolicy", "CartPole-v1", **SMALL).learn(64).save(tmp_path / "a" / "b" / "m")
    m = proxima.PPO.load(tmp_path / "a" / "b" / "m", env="CartPole-v1", verbose=1, n_steps=32, tensorboard_log=None)
    assert m.verbose == 1 and "n_steps = 32" in m._model.config_toml
    with pytest.raises(TypeError, match="did you mean 'n_steps'"):
        proxima.PPO.load(tmp_path / "a" / "b" / "m", env="CartPole-v1", n_step=32)


def test_sb3s_vec_normalize_and_sb3s_callbacks_are_refused_by_name():
    pytest.importorskip("stable_baselines3")
    from stable_baselines3.common.callbacks import CheckpointCallback as SB3Checkpoint
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    with pytest.raises(NotImplementedError, match="normalize_observation=True"):
        proxima.PPO("MlpPolicy", VecNormalize(make_vec_env("Pendulum-v1", n_envs=2)))
    venv = make_vec_env("CartPole-v1", n_envs=2)
    model = proxima.PPO("MlpPolicy", venv, **SMALL)
    assert model._model.env_id == "CartPole-v1", "a VecEnv is saved under its env's id"
    with pytest.raises(TypeError, match="proxima.callbacks.CheckpointCallback"):
        model.learn(128, callback=SB3Checkpoint(64, "/tmp/never"))


def test_second_fresh_user_findings():
    """SB3's attributes, and clear errors for: an SB3 BaseCallback subclass, SB3's set_parameters
    form, an env class, an empty env list, a non-int seed, (obs, info) to predict, a None reward."""
    m = proxima.PPO("MlpPolicy", "CartPole-v1", **SMALL)
    assert (m.n_steps, m.gamma, m.clip_range_vf, m.net_arch) == (64, 0.99, None, [64, 64])
    with pytest.raises(TypeError, match="not SB3's"):
        m.set_parameters({"policy": {}})
    with pytest.raises(TypeError, match="pass an instance"):
        proxima.PPO("MlpPolicy", Corridor)
    with pytest.raises(ValueError, match="empty list"):
        proxima.PPO("MlpPolicy", [])
    with pytest.raises(TypeError, match="seed must be an int"):
        proxima.PPO("MlpPolicy", "CartPole-v1", seed=1.5)
    with pytest.raises(TypeError, match="observation alone"):
        m.predict(gym.make("CartPole-v1").reset(seed=0))

    class NoReward(Corridor):
        def step(self, action):
            obs, r, te, tr, info = super().step(action)
            return obs, None, te, tr, info

    with pytest.raises(RuntimeError, match="reward None"):
        proxima.PPO("MlpPolicy", NoReward(), **SMALL).learn(64)
    sb3 = pytest.importorskip("stable_baselines3.common.callbacks")

    class Mine(sb3.BaseCallback):
        def _on_step(self):
            return True

    with pytest.raises(TypeError, match="subclass proxima.callbacks.BaseCallback"):
        m.learn(64, callback=Mine())


def test_from_preset_reads_the_presets_learning_rate_and_clip_range():
    m = proxima.PPO.from_preset("cleanrl", "CartPole-v1")
    assert (m.learning_rate, m.clip_range) == (2.5e-4, 0.2)
    m = proxima.PPO.from_preset("cleanrl", "CartPole-v1", learning_rate=1e-3)
    assert m.learning_rate == 1e-3
