"""``MaskablePPO`` against sb3-contrib's: its signature, training masked on a game where ignoring
the masks cannot succeed (the bridge tests' PickOfTwo, crates/proxima-gym/tests/toy_envs.py),
``predict`` with ``action_masks`` in the user's own loop exactly as sb3-contrib's docs write it,
save -> load -> the same actions, and bad inputs as clear exceptions."""

from __future__ import annotations

import os
import sys

import gymnasium as gym
import numpy as np
import pytest

import proxima

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "crates", "proxima-gym", "tests"))
import toy_envs  # noqa: E402,F401  (registers toy/PickOfTwo-v0 and its variants)

SMALL = dict(n_steps=256, batch_size=64, learning_rate=1e-3, seed=1)


@pytest.fixture(scope="module")
def trained():
    model = proxima.MaskablePPO("MlpPolicy", gym.make("toy/PickOfTwoStrict-v0"), **SMALL)
    return model.learn(20_000)  # the strict game raises on a masked action: learning is the proof


def play(model, env, steps, deterministic=True):
    """sb3-contrib's documented loop; returns the actions taken and the episodes' returns."""
    from sb3_contrib.common.maskable.utils import get_action_masks

    obs, _ = env.reset(seed=7)
    actions, returns, total = [], [], 0.0
    for _ in range(steps):
        action_masks = get_action_masks(env)
        action, _states = model.predict(obs, action_masks=action_masks, deterministic=deterministic)
        obs, reward, terminated, truncated, info = env.step(action)
        actions.append(int(action))
        total += reward
        if terminated or truncated:
            returns.append(total)
            obs, total = env.reset()[0], 0.0
    return actions, returns


def test_maskable_ppo_learns_and_predicts_only_valid_actions(trained):
    pytest.importorskip("sb3_contrib")
    actions, returns = play(trained, gym.make("toy/PickOfTwoStrict-v0"), 320)
    assert len(returns) == 20 and min(returns) >= 14, returns  # masked random play: 8; best: 16
    play(trained, gym.make("toy/PickOfTwoMasker-v0"), 64, deterministic=False)  # through ActionMasker


def test_maskable_ppo_save_load_same_actions(trained, tmp_path):
    pytest.importorskip("sb3_contrib")
    trained.save(tmp_path / "ppo_mask")
    loaded = proxima.MaskablePPO.load(tmp_path / "ppo_mask")
    assert isinstance(loaded, proxima.MaskablePPO)
    env = gym.make("toy/PickOfTwoStrict-v0")
    assert play(loaded, env, 64)[0] == play(trained, env, 64)[0]


def test_predict_with_masks_never_picks_a_masked_action(trained):
    rng = np.random.default_rng(0)
    obs = rng.choice([-1.0, 1.0], size=(500, 1)).astype(np.float32)
    masks = rng.random((500, 6)) < 0.3
    masks[np.arange(500), rng.integers(0, 6, 500)] = True
    for deterministic in (True, False):
        actions, _ = trained.predict(obs, action_masks=masks, deterministic=deterministic)
        assert masks[np.arange(500), actions].all()
    actions, _ = trained.predict(obs[:3], action_masks=masks[:3].astype(np.int64))  # 0/1 numbers
    assert masks[np.arange(3), actions].all()


def test_bad_masks_are_clear_exceptions(trained):
    obs = np.array([1.0], np.float32)
    with pytest.raises(ValueError, match="expected 1 × 6"):
        trained.predict(obs, action_masks=np.ones(5, bool))
    with pytest.raises(ValueError, match="allows no action"):
        trained.predict(obs, action_masks=np.zeros(6, bool))
    with pytest.raises(TypeError, match="dtype <U1"):
        trained.predict(obs, action_masks=np.array(list("101010")))
    with pytest.raises(TypeError, match="all 0 or 1"):
        trained.predict(obs, action_masks=np.full(6, 2))


def test_maskable_ppo_refuses_a_box_action_space_and_an_env_without_masks():
    with pytest.raises(ValueError, match="MaskablePPO masks Discrete and MultiDiscrete"):
        proxima.MaskablePPO("MlpPolicy", "Pendulum-v1")
    # As sb3-contrib: an env without action_masks() builds, and learn refuses it unless use_masking=False.
    model = proxima.MaskablePPO("MlpPolicy", "CartPole-v1", n_steps=64, batch_size=64)
    with pytest.raises(ValueError, match="does not support action masking"):
        model.learn(64)
    assert model.learn(64, use_masking=False).num_timesteps == 64


def test_sb3_contribs_maskable_policy_classes_are_read_by_name():
    from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy, MaskableMultiInputActorCriticPolicy

    proxima.MaskablePPO(MaskableActorCriticPolicy, gym.make("toy/PickOfTwo-v0"), **SMALL).learn(256)
    with pytest.raises(ValueError, match="is for Dict"):
        proxima.MaskablePPO(MaskableMultiInputActorCriticPolicy, gym.make("toy/PickOfTwo-v0"), **SMALL)


def test_learn_with_use_masking_false_takes_every_action_as_valid_for_that_call():
    """sb3-contrib's ``learn(use_masking=False)``: the strict game (which raises on a masked action) is
    soon played into a masked action; the next ``learn()`` masks again and takes none."""
    strict = proxima.MaskablePPO("MlpPolicy", gym.make("toy/PickOfTwoStrict-v0"), **SMALL)
    with pytest.raises(Exception, match="masked action"):
        strict.learn(2_048, use_masking=False)
    strict = proxima.MaskablePPO("MlpPolicy", gym.make("toy/PickOfTwoStrict-v0"), **SMALL)
    strict.learn(512, use_masking=True)
    strict.learn(512)


def test_ppo_ignores_the_masks_as_sb3s_ppo():
    model = proxima.PPO("MlpPolicy", gym.make("toy/PickOfTwo-v0"), **SMALL)
    assert "use_masking = false" in model._model.config_toml
    masked = proxima.MaskablePPO("MlpPolicy", gym.make("toy/PickOfTwo-v0"), **SMALL)
    assert "use_masking = true" in masked._model.config_toml


def test_evaluate_policy_uses_the_masks_as_sb3_contribs(trained):
    pytest.importorskip("sb3_contrib")
    from sb3_contrib.common.maskable.evaluation import evaluate_policy as theirs

    ours = proxima.evaluate_policy(trained, gym.make("toy/PickOfTwoStrict-v0"), n_eval_episodes=20)
    assert ours[0] >= 14, ours  # the strict game raises on a masked action
    assert theirs(trained, gym.make("toy/PickOfTwoStrict-v0"), n_eval_episodes=20)[0] >= 14
    vec = gym.make_vec("toy/PickOfTwoStrict-v0", num_envs=2, vectorization_mode="sync")
    assert proxima.evaluate_policy(trained, vec, n_eval_episodes=4)[0] >= 14
    with pytest.raises(ValueError, match="masked action"):  # without the masks it takes masked actions
        proxima.evaluate_policy(trained, gym.make("toy/PickOfTwoStrict-v0"), n_eval_episodes=20, use_masking=False)


def test_maskable_ppo_on_sb3_and_next_step_gymnasium_vector_envs():
    pytest.importorskip("stable_baselines3")
    from stable_baselines3.common.env_util import make_vec_env

    vec = make_vec_env("toy/PickOfTwoStrict-v0", n_envs=2, seed=0)  # an SB3 DummyVecEnv
    model = proxima.MaskablePPO("MlpPolicy", vec, **SMALL).learn(1_024)  # strict: no masked action taken
    assert model.num_timesteps == 1_024
    gvec = gym.make_vec("toy/PickOfTwoStrict-v0", num_envs=2, vectorization_mode="async")  # next-step autoreset
    proxima.MaskablePPO("MlpPolicy", gvec, **SMALL).learn(1_024)
    gvec.close()
