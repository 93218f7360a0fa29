"""``CnnPolicy`` from Python: image envs in SB3's channel-last layout (seen channel-first, as SB3's
``VecTransposeImage`` shows them), ``predict`` in either layout, save/load, and ``atari:`` ids.

The Atari test needs ale-py; it skips (saying so) without it, unless PROXIMA_REQUIRE_ATARI=1
(``.ci/run`` sets it), which makes a missing ale-py a failure.
"""

from __future__ import annotations

import gc
import importlib.util
import os
import subprocess
import sys
import warnings
import weakref

import gymnasium as gym
import numpy as np
import pytest

import proxima
from proxima.callbacks import BaseCallback

H, W, C = 40, 44, 2  # the Nature CNN needs at least 36 × 36


class Pictures(gym.Env):
    """Channel-last uint8 images (H, W, C) of random noise; reward 1 when the action says whether
    the first channel's top-left pixel is above 127. Episodes of 5 steps (truncated)."""

    def __init__(self):
        self.observation_space = gym.spaces.Box(0, 255, (H, W, C), np.uint8)
        self.action_space = gym.spaces.Discrete(2)
        self.last = None

    def _draw(self):
        self.last = self.np_random.integers(0, 256, (H, W, C), dtype=np.uint8)
        return self.last

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._draw(), {}

    def step(self, action):
        reward = float(int(action) == int(self.last[0, 0, 0] > 127))
        self.t += 1
        return self._draw(), reward, False, self.t >= 5, {}


class SeesObservations(BaseCallback):
    """Checks at every step that the observations the learner saw are the envs' own, transposed."""

    def __init__(self, envs):
        super().__init__()
        self.envs, self.checked = envs, 0

    def _on_step(self) -> bool:
        seen = self.locals["new_obs"]
        assert seen.shape == (len(self.envs), C, H, W)
        for i, env in enumerate(self.envs):
            np.testing.assert_array_equal(seen[i], np.moveaxis(env.last, -1, 0))
        self.checked += 1
        return True


def test_cnn_policy_on_channel_last_env_objects_predict_save_and_load(tmp_path):
    envs = [Pictures(), Pictures()]
    model = proxima.PPO("CnnPolicy", envs, n_steps=8, batch_size=8, n_epochs=1, seed=2)
    assert model.observation_space == gym.spaces.Box(0, 255, (C, H, W), np.uint8), "channel-first, as SB3's"
    cb = SeesObservations(envs)
    model.learn(32, callback=cb)
    assert cb.checked == 16 and model.num_timesteps == 32
    params = model.get_parameters()
    assert params["network.0.weight"].shape == (32, C, 8, 8) and params["network.7.weight"].shape[0] == 512
    obs = np.random.default_rng(0).integers(0, 256, (3, H, W, C), dtype=np.uint8)
    a_last, _ = model.predict(obs, deterministic=True)
    a_first, _ = model.predict(np.moveaxis(obs, -1, 1), deterministic=True)
    np.testing.assert_array_equal(a_last, a_first)
    single, _ = model.predict(obs[1], deterministic=True)
    assert single == a_last[1]
    model.save(tmp_path / "cnn")
    loaded = proxima.PPO.load(tmp_path / "cnn")
    assert loaded.observation_space == model.observation_space
    assert (loaded.policy_class, loaded.learning_rate, loaded.clip_range) == ("CnnPolicy", 3e-4, 0.2), "SB3's attributes"
    np.testing.assert_array_equal(loaded.predict(obs, deterministic=True)[0], a_last)


def test_cnn_policy_on_an_sb3_vec_env_of_channel_last_images():
    from stable_baselines3.common.vec_env import DummyVecEnv

    pytest.importorskip("stable_baselines3")
    venv = DummyVecEnv([Pictures, Pictures])
    model = proxima.PPO("CnnPolicy", venv, n_steps=8, batch_size=8, n_epochs=1, seed=1)
    cb = SeesObservations([e for e in venv.envs])
    model.learn(16, callback=cb)  # episodes of 5: the ended ones' final_obs go through too
    assert cb.checked == 8 and model.observation_space.shape == (C, H, W)


def test_cnn_policy_bad_inputs():
    with pytest.raises(ValueError, match="CnnPolicy"):
        proxima.PPO("CnnPolicy", "CartPole-v1")
    with pytest.raises(ValueError, match="has no effect"):
        proxima.PPO("CnnPolicy", [Pictures()], policy_kwargs=dict(net_arch=[32]))
    with pytest.raises(ValueError, match="MultiInputPolicy is for Dict"):
        proxima.PPO("MultiInputPolicy", "CartPole-v1")
    model = proxima.PPO("CnnPolicy", [Pictures()], n_steps=8, batch_size=8, seed=1)
    with pytest.raises(ValueError, match="shape"):
        model.predict(np.zeros((H, W), np.uint8))
    if importlib.util.find_spec("ale_py") is not None:  # a policy for other frames than the game's
        with pytest.raises(ValueError, match="atari:Breakout"):
            proxima.evaluate_policy(model, "atari:Breakout")

    class Huge(Pictures):
        """Frames of 2000 × 2000: a dense layer of 64 · 247² · 512 ≈ 2·10⁹ weights (8 GB a copy)."""

        def __init__(self):
            super().__init__()
            self.observation_space = gym.spaces.Box(0, 255, (2000, 2000, 1), np.uint8)

        def _draw(self):
            self.last = np.zeros((2000, 2000, 1), np.uint8)
            return self.last

    # Named by the user's class, not the channel-first view Proxima puts over its frames.
    with pytest.raises(ValueError, match="on Huge: .*too large for the Nature CNN"):
        proxima.PPO("CnnPolicy", [Huge()], n_steps=8, batch_size=8)


def test_a_cli_atari_run_trains_on_from_python(tmp_path):
    """The CLI steps half an `atari:` run's games in a worker process (`vector_env = "subproc"` in
    its config); Python, which has none, loads the run directory and trains on with them all in
    process (the same results)."""
    cli = os.environ.get("PROXIMA_CLI")
    if importlib.util.find_spec("ale_py") is None or not cli:
        assert os.environ.get("PROXIMA_REQUIRE_ATARI") != "1", "PROXIMA_REQUIRE_ATARI=1 but ale-py or the CLI is missing"
        pytest.skip("ale-py or the proxima CLI (PROXIMA_CLI) is missing")
    game, run = "atari:Breakout?screen_size=36&frame_stack=2", tmp_path / "run"
    out = subprocess.run([cli, "train", game, "--preset", "paper-atari", "--total-timesteps", "32", "--set", "n_envs=2",
                          "--set", "n_steps=16", "--set", "batch_size=16", "--run-dir", str(run), "--quiet"],
                         capture_output=True, text=True, timeout=300, env={**os.environ, "PROXIMA_PYTHON": sys.executable})
    assert out.returncode == 0, out.stderr
    assert 'vector_env = "subproc"' in (run / "config.toml").read_text()
    model = proxima.PPO.load(run, env=game)
    model.learn(32, reset_num_timesteps=False)
    assert model.num_timesteps == 64


def test_cnn_policy_on_an_atari_id():
    if importlib.util.find_spec("ale_py") is None:
        assert os.environ.get("PROXIMA_REQUIRE_ATARI") != "1", "PROXIMA_REQUIRE_ATARI=1 but ale-py is missing"
        pytest.skip("ale-py is not installed")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the CNN on an Atari id: no note
        model = proxima.PPO("CnnPolicy", "atari:Breakout?screen_size=36&frame_stack=2", n_envs=2, n_steps=8,
                            batch_size=8, n_epochs=1, seed=1)
    with pytest.raises(ValueError, match="CartPole-v1 is not an Atari game .*give it as gym:CartPole-v1"):
        proxima.PPO("CnnPolicy", "atari:CartPole-v1", n_envs=1, n_steps=8, batch_size=8)
    with pytest.warns(UserWarning, match="MLP on the stacked frames.*policy='CnnPolicy'"):
        proxima.PPO("MlpPolicy", "atari:Breakout?screen_size=36&frame_stack=2", n_envs=1, n_steps=8, batch_size=8)
    assert model.observation_space == gym.spaces.Box(0, 255, (2, 36, 36), np.uint8)
    assert model.action_space == gym.spaces.Discrete(4)
    model.learn(16)
    obs = np.zeros((2, 36, 36), np.uint8)
    assert model.action_space.contains(int(model.predict(obs, deterministic=True)[0]))
    # evaluate_policy on the id plays whole games in Rust, the same ones for the same seed.
    game = "atari:Breakout?screen_size=36&frame_stack=2"
    returns, lengths = proxima.evaluate_policy(model, game, n_eval_episodes=2, return_episode_rewards=True)
    assert len(returns) == len(lengths) == 2 and all(n > 0 for n in lengths), (returns, lengths)
    assert all(float(r).is_integer() and r >= 0 for r in returns), "a game's score, unclipped"
    mean, std = proxima.evaluate_policy(model, game, n_eval_episodes=2)
    assert (mean, std) == (float(np.mean(returns)), float(np.std(returns)))

    class NotProxima:
        def predict(self, observation, state=None, episode_start=None, deterministic=False):
            return np.zeros(len(observation), int), None

    with pytest.raises(NotImplementedError, match="Proxima's models alone"):
        proxima.evaluate_policy(NotProxima(), game)
    with pytest.raises(NotImplementedError, match="callback=None"):
        proxima.evaluate_policy(model, game, callback=lambda *_: None)
    if importlib.util.find_spec("stable_baselines3") is not None:
        _get_env_is_sb3s_atari_stack(model)


def _get_env_is_sb3s_atari_stack(model):
    """``get_env()`` on an ``atari:`` id: SB3's ``make_atari_env`` + ``VecFrameStack`` with the id's settings, which
    SB3's loop and ``evaluate_policy`` step and ``predict`` reads (channel-last)."""
    from stable_baselines3.common.atari_wrappers import EpisodicLifeEnv, WarpFrame
    from stable_baselines3.common.evaluation import evaluate_policy as sb3_evaluate_policy
    from stable_baselines3.common.vec_env import VecFrameStack

    venv = model.get_env()
    assert model.get_env() is venv and isinstance(venv, VecFrameStack) and venv.num_envs == 2
    obs = venv.reset()
    assert obs.shape == (2, 36, 36, 2) and obs.dtype == np.uint8
    assert (obs[..., 0] == 0).all() and obs[..., 1].any(), "zero-padded stack, the game's frame last"
    layers = [venv.envs[0]]
    while hasattr(layers[-1], "env"):
        layers.append(layers[-1].env)
    assert any(isinstance(w, EpisodicLifeEnv) for w in layers) and any(isinstance(w, WarpFrame) for w in layers)
    ale = layers[-1].unwrapped.ale
    assert ale.getFloat("repeat_action_probability") == 0.0 and ale.getInt("frame_skip") == 1
    actions, _ = model.predict(obs, deterministic=True)
    obs, rewards, dones, infos = venv.step(actions)
    assert obs.shape == (2, 36, 36, 2) and len(infos) == 2
    mean, _ = sb3_evaluate_policy(model, venv, n_eval_episodes=1, warn=False)
    assert float(mean).is_integer() and mean >= 0, "a whole game's score, from SB3's Monitor"
    lives_kept = proxima.PPO("CnnPolicy", "atari:Breakout?terminal_on_life_loss=false&frame_stack=1", n_envs=1,
                             n_steps=8, batch_size=8).get_env()
    layers = [lives_kept.envs[0]]
    while hasattr(layers[-1], "env"):
        layers.append(layers[-1].env)
    assert not any(isinstance(w, EpisodicLifeEnv) for w in layers) and lives_kept.reset().shape == (1, 84, 84, 1)


def test_a_failed_atari_id_keeps_nothing_of_its_caller_alive():
    """Gymnasium's exception for an unknown game was kept on the thread after its message became a
    ``ValueError``; its traceback's frames held the caller's locals and, through ``f_back``, the
    script's globals, so a live model's games outlived the interpreter (ale-py's nanobind then
    printed "leaked instances" at exit)."""
    if importlib.util.find_spec("ale_py") is None:
        assert os.environ.get("PROXIMA_REQUIRE_ATARI") != "1", "PROXIMA_REQUIRE_ATARI=1 but ale-py is missing"
        pytest.skip("ale-py is not installed")

    class Held:
        pass

    def fail_to_make_a_game():
        held = Held()
        with pytest.raises(ValueError, match="NotAGame"):
            proxima.PPO("CnnPolicy", "atari:NotAGame", n_envs=1, n_steps=8, batch_size=8)
        return weakref.ref(held)

    held = fail_to_make_a_game()
    gc.collect()
    assert held() is None, "the failed make's exception still holds its caller's frame"
