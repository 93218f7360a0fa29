"""Dict observations: ``MultiInputPolicy`` as SB3's (non-image keys flattened, Discrete one-hot,
concatenated in the space's order; nested Dict and Tuple keys too, which SB3 does not take) on
the bridge tests' KeyDecides game (crates/proxima-gym/tests/toy_envs.py: a ``cue`` key decides
which of three actions pays), ``predict`` on Dict observations one at a time and batched, save ->
load -> the same actions, and bad inputs as clear exceptions."""

from __future__ import annotations

import os
import sys

import gymnasium as gym
import numpy as np
import pytest

import proxima

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "crates", "proxima-gym", "tests"))
import toy_envs  # noqa: E402,F401  (registers toy/KeyDecides-v0)

SMALL = dict(n_steps=256, batch_size=64, learning_rate=1e-3, seed=1)


@pytest.fixture(scope="module")
def trained():
    return proxima.PPO("MultiInputPolicy", gym.make("toy/KeyDecides-v0"), **SMALL).learn(20_000)


def test_multi_input_ppo_learns_the_key_that_decides(trained):
    env = gym.make("toy/KeyDecides-v0")
    obs, _ = env.reset(seed=3)
    hits = 0
    for _ in range(200):
        action, _ = trained.predict(obs, deterministic=True)
        hits += int(action) == obs["cue"]
        obs, *_ = env.step(action)
    assert hits >= 190, f"{hits} of 200 right (random: 67)"
    mean, _ = proxima.evaluate_policy(trained, gym.make("toy/KeyDecides-v0"), n_eval_episodes=10)
    assert mean >= 9.5


def test_predict_takes_a_batch_of_dict_observations_from_a_vector_env(trained):
    vec = gym.make_vec("toy/KeyDecides-v0", num_envs=4, vectorization_mode="sync")
    obs, _ = vec.reset(seed=0)
    actions, _ = trained.predict(obs, deterministic=True)
    assert actions.shape == (4,) and (actions == obs["cue"]).all()
    single = gym.make("toy/KeyDecides-v0")
    o, _ = single.reset(seed=5)
    a_one, _ = trained.predict(o, deterministic=True)
    assert a_one.shape == () and int(a_one) == o["cue"]


def test_dict_model_save_load_same_actions(trained, tmp_path):
    """With its env, and without one: the model file keeps the Dict space (nested Dict and Tuple keys
    included), so a model loaded alone takes the same Dict observations and gives the same actions."""
    trained.save(tmp_path / "dict_model")
    env = gym.make("toy/KeyDecides-v0")
    loaded = proxima.PPO.load(tmp_path / "dict_model", env=env)
    alone = proxima.PPO.load(tmp_path / "dict_model")
    assert alone.observation_space == env.observation_space and list(alone.observation_space.spaces) == list(
        env.observation_space.spaces)
    obs, _ = env.reset(seed=11)
    for _ in range(20):
        a, _ = trained.predict(obs, deterministic=True)
        b, _ = loaded.predict(obs, deterministic=True)
        c, _ = alone.predict(obs, deterministic=True)
        assert int(a) == int(b) == int(c)
        obs, *_ = env.step(a)
    alone.save(tmp_path / "again")  # a loaded model saved again keeps the space
    assert proxima.PPO.load(tmp_path / "again").observation_space == env.observation_space


def test_sb3s_policy_rules_and_bad_dict_observations(trained):
    with pytest.raises(ValueError, match="You must use `MultiInputPolicy`"):
        proxima.PPO("MlpPolicy", gym.make("toy/KeyDecides-v0"))
    with pytest.raises(ValueError, match="MultiInputPolicy is for Dict"):
        proxima.PPO("MultiInputPolicy", "CartPole-v1")
    obs, _ = gym.make("toy/KeyDecides-v0").reset(seed=0)
    del obs["cue"]
    with pytest.raises(ValueError, match="does not fit the observation space"):
        trained.predict(obs)
    obs, _ = gym.make("toy/KeyDecides-v0").reset(seed=0)
    obs["extra"] = np.zeros(2, np.float32)  # SB3 refuses a key its space does not have, too
    with pytest.raises(ValueError, match=r"has keys \['extra'\] that the observation space"):
        trained.predict(obs)
    obs, _ = gym.make("toy/KeyDecides-v0").reset(seed=0)
    for bad in (-1, 3, 1.5):  # a negative index would pick the last one-hot silently
        obs["cue"] = bad
        with pytest.raises(ValueError, match=r"is not in Discrete\(3\)"):
            trained.predict(obs)


def test_sac_takes_dict_observations_too():
    class DictPendulum(gym.ObservationWrapper):
        def __init__(self, env):
            super().__init__(env)
            self.observation_space = gym.spaces.Dict({"state": env.observation_space,
                                                      "step": gym.spaces.Discrete(2)})

        def observation(self, o):
            return {"state": o, "step": 0}

    model = proxima.SAC("MultiInputPolicy", DictPendulum(gym.make("Pendulum-v1")), learning_starts=100, seed=1)
    model.learn(300)
    action, _ = model.predict({"state": np.zeros(3, np.float32), "step": 1}, deterministic=True)
    assert action.shape == (1,)


def test_dict_observations_from_an_sb3_vec_env():
    pytest.importorskip("stable_baselines3")
    from stable_baselines3.common.env_util import make_vec_env

    vec = make_vec_env("toy/KeyDecidesFlat-v0", n_envs=2, seed=0)
    model = proxima.PPO("MultiInputPolicy", vec, **SMALL).learn(1_024)
    obs = vec.reset()
    actions, _ = model.predict(obs, deterministic=True)
    assert actions.shape == (2,)


def test_dict_observations_from_a_next_step_gymnasium_vector_env():
    vec = gym.vector.SyncVectorEnv([lambda: gym.make("toy/KeyDecides-v0") for _ in range(2)])  # NEXT_STEP autoreset
    model = proxima.PPO("MultiInputPolicy", vec, **SMALL).learn(1_024)  # 10-step episodes: resets inside
    assert model.num_timesteps == 1_024


def test_an_env_missing_a_key_is_a_clear_error_in_learn():
    env = gym.make("toy/KeyMissing-v0")  # its observations lack the "cue" key its space declares
    with pytest.raises(RuntimeError, match="does not fit its observation_space Dict"):
        proxima.PPO("MultiInputPolicy", env, **SMALL).learn(256)


def test_norm_obs_keys_normalises_only_the_named_keys_and_predict_applies_it(tmp_path):
    """SB3's ``VecNormalize(norm_obs_keys=...)``: the ``cue`` key stays one-hot, so a model trained
    with only the noise keys normalised still reads the cue; save -> load keeps the selection."""
    model = proxima.PPO("MultiInputPolicy", gym.make("toy/KeyDecides-v0"), normalize_observation=True,
                        norm_obs_keys=["noise", "nested"], **SMALL).learn(20_000)
    mean, _ = proxima.evaluate_policy(model, gym.make("toy/KeyDecides-v0"), n_eval_episodes=10)
    assert mean >= 9.5, mean
    model.save(tmp_path / "norm_keys")
    loaded = proxima.PPO.load(tmp_path / "norm_keys")  # the file keeps the Dict space
    obs = [gym.make("toy/KeyDecides-v0").reset(seed=s)[0] for s in range(8)]
    assert all(model.predict(o, deterministic=True)[0] == loaded.predict(o, deterministic=True)[0] for o in obs)
    with pytest.raises(ValueError, match="no observation key `noize` .*did you mean `noise`"):
        proxima.PPO("MultiInputPolicy", gym.make("toy/KeyDecides-v0"), normalize_observation=True,
                    norm_obs_keys=["noize"])
    with pytest.raises(ValueError, match="norm_obs_keys selects keys of a Dict or Tuple observation"):
        proxima.PPO("MlpPolicy", "CartPole-v1", normalize_observation=True, norm_obs_keys=["x"])


def test_image_keys_go_through_a_cnn_each_as_sb3s_combined_extractor():
    """A Dict with an image key (channel-last uint8, 36 x 36) and a Box key: the image through its own
    Nature CNN (256 features), the Box as it is, side by side into the MLP; the image decides the action."""
    model = proxima.PPO("MultiInputPolicy", gym.make("toy/ImageDecides-v0"), **SMALL).learn(6_000)
    names = list(model.get_parameters())
    assert names[0] == "extractors.screen.cnn.0.weight" and model.get_parameters()["actor.0.weight"].shape == (64, 258)
    mean, _ = proxima.evaluate_policy(model, gym.make("toy/ImageDecides-v0"), n_eval_episodes=5)
    assert mean >= 9.0, mean  # random: 3.3
    recurrent = proxima.RecurrentPPO("MultiInputLstmPolicy", [gym.make("toy/ImageDecides-v0") for _ in range(2)],
                                     n_steps=16, batch_size=32, n_epochs=1, seed=1,
                                     policy_kwargs=dict(lstm_hidden_size=8)).learn(64)
    assert recurrent.get_parameters()["lstm_actor.weight_ih_l0"].shape == (32, 258)
    obs, _ = gym.make("toy/ImageDecides-v0").reset(seed=0)
    _, states = recurrent.predict(obs, episode_start=np.ones(1, bool))
    assert [s.shape for s in states] == [(1, 1, 8)] * 2
    with pytest.raises(ValueError, match=r"image keys \(screen\).*algo = `trpo` does not take them"):
        proxima.TRPO("MultiInputPolicy", gym.make("toy/ImageDecides-v0"))


@pytest.mark.parametrize("name", ["SAC", "TD3", "TQC"])
def test_off_policy_image_keys_have_sb3s_networks(name):
    """SAC, TD3 and TQC over a Dict with an image key: every network (actor, critics, targets) owns a
    CombinedExtractor, named and shaped exactly as SB3's / sb3-contrib's MultiInputPolicy state_dict; the model
    trains a few steps, and its actions follow the Box."""
    import sb3_contrib
    import stable_baselines3
    env = gym.make("toy/ImageSteer-v0")
    kwargs = dict(policy_kwargs=dict(net_arch=[16]), learning_starts=20, batch_size=8, seed=0)
    model = getattr(proxima, name)("MultiInputPolicy", env, **kwargs).learn(40)
    anchor = getattr(stable_baselines3, name, None) or getattr(sb3_contrib, name)
    theirs = anchor("MultiInputPolicy", env, buffer_size=100, **kwargs).policy.state_dict()
    ours = model.get_parameters()
    assert {k: tuple(v.shape) for k, v in ours.items()} == {k: tuple(v.shape) for k, v in theirs.items()}
    obs, _ = env.reset(seed=1)
    action, _ = model.predict(obs, deterministic=True)
    assert action.shape == (1,) and -1.0 <= float(action[0]) <= 1.0
