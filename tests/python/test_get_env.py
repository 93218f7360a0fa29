"""``model.get_env()`` as SB3's: a vector env with the ``VecEnv`` API (issue 35, item 7), so that SB3's
README example runs unchanged, and step for step the same as SB3's ``DummyVecEnv`` on the same envs
and seeds (observations, rewards, dones, ``terminal_observation``, ``TimeLimit.truncated``)."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest

import proxima
from proxima.type_aliases import VecEnvLike
from proxima.vec_env import DummyVecEnv, GymnasiumVecEnv, for_model


def sb3_vec_env():
    return pytest.importorskip("stable_baselines3.common.vec_env")


def short_cartpole():
    return gym.make("CartPole-v1", max_episode_steps=5)


def readme_loop(model) -> tuple:
    """SB3's README example after ``learn``, unchanged but for returning what it saw."""
    vec_env = model.get_env()
    obs = vec_env.reset()
    dones = 0
    for i in range(1000):
        action, _states = model.predict(obs, deterministic=True)
        obs, reward, done, info = vec_env.step(action)
        vec_env.render()
        dones += int(np.sum(done))
    return vec_env, obs, reward, done, info, dones


def make_readme_env(kind: str):
    if kind == "native id":
        return "CartPole-v1"
    if kind == "gymnasium env":
        return gym.make("CartPole-v1")
    return sb3_vec_env().DummyVecEnv([lambda: gym.make("CartPole-v1")] * 2)


@pytest.mark.parametrize("kind", ["native id", "gymnasium env", "sb3 vec env"])
def test_sb3s_readme_example_runs_unchanged(kind):
    env = make_readme_env(kind)
    model = proxima.PPO("MlpPolicy", env, seed=0)
    model.learn(1000)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        vec_env, obs, reward, done, info, dones = readme_loop(model)
    n = 2 if kind == "sb3 vec env" else 1
    assert vec_env.num_envs == n and obs.shape == (n, 4) and obs.dtype == np.float32
    assert reward.shape == (n,) and done.shape == (n,) and done.dtype == bool
    assert isinstance(info, list) and len(info) == n and all("TimeLimit.truncated" in i for i in info)
    assert dones >= 2, "1000 steps of CartPole end episodes, and the env went on after each (auto reset)"
    # No render_mode was given: SB3 warns on render() and draws nothing; so does Proxima's.
    assert any("render_mode" in str(w.message) for w in caught)
    if kind == "sb3 vec env":
        assert vec_env is env
    else:
        assert isinstance(vec_env, DummyVecEnv) and vec_env is model.get_env() is model.env


def compare_with_sb3(ours, theirs, n_steps: int, seed: int) -> int:
    """Seeds both, resets, steps both with the same actions; asserts every output equal. Returns how
    many episodes ended by the time limit."""
    ours.seed(seed)
    theirs.seed(seed)
    np.testing.assert_array_equal(ours.reset(), theirs.reset())
    truncations = 0
    for t in range(n_steps):
        actions = np.array([(t + i) % 2 for i in range(ours.num_envs)])
        o_obs, o_rew, o_done, o_info = ours.step(actions)
        t_obs, t_rew, t_done, t_info = theirs.step(actions)
        np.testing.assert_array_equal(o_obs, t_obs)
        assert o_rew.dtype == t_rew.dtype == np.float32
        np.testing.assert_array_equal(o_rew, t_rew)
        np.testing.assert_array_equal(o_done, t_done)
        for o, th in zip(o_info, t_info):
            assert o["TimeLimit.truncated"] == th["TimeLimit.truncated"]
            assert ("terminal_observation" in o) == ("terminal_observation" in th)
            if "terminal_observation" in th:
                np.testing.assert_array_equal(o["terminal_observation"], th["terminal_observation"])
            truncations += int(th["TimeLimit.truncated"])
    return truncations


def test_env_factories_step_as_sb3s_dummy_vec_env_through_a_truncation():
    sb3 = sb3_vec_env()
    model = proxima.PPO("MlpPolicy", [short_cartpole, short_cartpole], n_steps=8, batch_size=8, seed=1)
    ours = model.get_env()
    assert ours.num_envs == 2 and ours.observation_space == gym.make("CartPole-v1").observation_space
    theirs = sb3.DummyVecEnv([short_cartpole, short_cartpole])
    assert compare_with_sb3(ours, theirs, 12, seed=11) >= 2
    obs, _, done, info = ours.step(np.array([0, 1]))
    ended = [i for i in info if "episode" in i]  # SB3's Monitor keys, from RecordEpisodeStatistics
    assert all(set(e["episode"]) >= {"r", "l", "t"} for e in ended)


def test_a_native_id_gives_n_envs_gymnasium_envs_that_reset_as_sb3s():
    sb3 = sb3_vec_env()
    model = proxima.PPO("MlpPolicy", "CartPole-v1", n_envs=3, n_steps=8, batch_size=8, seed=2)
    ours = model.get_env()
    assert ours.num_envs == model.n_envs == 3
    theirs = sb3.DummyVecEnv([lambda: gym.make("CartPole-v1")] * 3)
    compare_with_sb3(ours, theirs, 30, seed=4)


@pytest.mark.parametrize("mode", ["NEXT_STEP", "SAME_STEP"])
def test_a_gymnasium_vector_env_in_either_autoreset_mode_steps_as_sb3s(mode):
    sb3 = sb3_vec_env()
    venv = gym.vector.SyncVectorEnv([short_cartpole, short_cartpole],
                                    autoreset_mode=getattr(gym.vector.AutoresetMode, mode))
    model = proxima.PPO("MlpPolicy", venv, n_steps=8, batch_size=8, seed=3)
    ours = model.get_env()
    assert isinstance(ours, GymnasiumVecEnv) and ours.venv is venv
    theirs = sb3.DummyVecEnv([short_cartpole, short_cartpole])
    assert compare_with_sb3(ours, theirs, 12, seed=5) >= 2


def test_an_sb3_vec_env_is_returned_as_it_is_and_a_model_without_env_has_none(tmp_path):
    sb3 = sb3_vec_env()
    venv = sb3.DummyVecEnv([lambda: gym.make("CartPole-v1")])
    model = proxima.PPO("MlpPolicy", venv, n_steps=8, batch_size=8, seed=4)
    assert model.get_env() is venv and model.env is venv
    model.save(tmp_path / "m")
    loaded = proxima.PPO.load(tmp_path / "m")
    assert loaded.get_env() is None and loaded.env is None
    assert proxima.PPO("MlpPolicy", None).get_env() is None
    assert proxima.PPO.load(tmp_path / "m", env="CartPole-v1").get_env().num_envs == 1


def test_the_vec_env_api_beyond_reset_and_step():
    sb3 = sb3_vec_env()
    envs = [gym.make("CartPole-v1"), gym.make("CartPole-v1")]
    model = proxima.PPO("MlpPolicy", envs, n_steps=8, batch_size=8, seed=5)
    venv = model.get_env()
    assert isinstance(venv, VecEnvLike) and isinstance(sb3.DummyVecEnv([lambda: envs[0]]), VecEnvLike)
    assert [e.unwrapped for e in venv.envs] == [e.unwrapped for e in envs], "the training envs themselves"
    assert venv.get_attr("spec", indices=1)[0].id == "CartPole-v1"
    venv.set_attr("marker", 7, indices=[0])
    assert venv.get_attr("marker", indices=0) == [7] and not venv.has_attr("marker")
    assert venv.env_method("get_wrapper_attr", "spec", indices=[0, 1])[1].id == "CartPole-v1"
    assert venv.env_is_wrapped(gym.wrappers.RecordEpisodeStatistics) == [True, True]
    assert venv.env_is_wrapped(gym.wrappers.TimeLimit) == [True, True]
    assert venv.seed(3) == [3, 4]
    first = venv.reset()
    venv.seed(3)
    np.testing.assert_array_equal(venv.reset(), first)  # the seeds apply at the next reset, once
    assert not np.array_equal(venv.reset(), first)
    venv.step_async(np.array([0, 1]))
    obs, rewards, dones, infos = venv.step_wait()
    assert obs.shape == (2, 4) and rewards.tolist() == [1.0, 1.0] and len(infos) == 2
    rewards, lengths = proxima.evaluate_policy(model, venv, n_eval_episodes=3, return_episode_rewards=True)
    assert len(rewards) == 3 and all(r == n for r, n in zip(rewards, lengths))  # CartPole: 1 per step
    venv.close()


class Frames(gym.Env):
    """An env whose ``rgb_array`` frame is its step count (no pygame needed)."""

    metadata = {"render_modes": ["rgb_array"]}

    def __init__(self, render_mode="rgb_array"):
        self.render_mode, self.t = render_mode, 0
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(2)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(2, np.float32), {}

    def step(self, action):
        self.t += 1
        return np.full(2, self.t / 10, np.float32), 1.0, self.t >= 4, False, {"t": self.t}

    def render(self):
        return np.full((2, 3, 3), self.t, np.uint8)


def test_render_tiles_rgb_array_frames_as_sb3s():
    sb3 = sb3_vec_env()
    model = proxima.PPO("MlpPolicy", [lambda: Frames()] * 3, n_steps=8, batch_size=8, seed=6)
    ours, theirs = model.get_env(), sb3.DummyVecEnv([lambda: Frames()] * 3)
    assert ours.render_mode == theirs.render_mode == "rgb_array"
    for venv in (ours, theirs):
        venv.reset()
        venv.step(np.array([0, 0, 0]))
    image = ours.render()
    assert image.shape == (4, 6, 3)
    np.testing.assert_array_equal(image, theirs.render())
    assert ours.render("rgb_array") is not None


def test_a_terminated_episode_is_not_truncated_and_infos_keep_the_envs_own_keys():
    model = proxima.PPO("MlpPolicy", [lambda: Frames()], n_steps=8, batch_size=8, seed=7)
    venv = model.get_env()
    venv.reset()
    for _ in range(3):
        venv.step(np.array([0]))
    obs, _, done, info = venv.step(np.array([0]))
    assert done.tolist() == [True] and info[0]["TimeLimit.truncated"] is False and info[0]["t"] == 4
    np.testing.assert_array_equal(info[0]["terminal_observation"], np.full(2, 0.4, np.float32))
    np.testing.assert_array_equal(obs, np.zeros((1, 2), np.float32))  # the new episode's first
    assert info[0]["episode"]["l"] == 4 and info[0]["episode"]["r"] == 4.0


def test_get_env_of_ids_python_cannot_step_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown option `nop_max` .did you mean `noop_max`"):
        for_model("atari:Pong?nop_max=3", 1)  # training's parser, training's message
    with pytest.raises(ValueError, match="get_env"):
        for_model("gym:NoSuchEnv-v0", 1)


def test_a_dummy_vec_env_refuses_one_env_twice():
    env = gym.make("CartPole-v1")
    with pytest.raises(ValueError, match="same env instance"):
        DummyVecEnv([lambda: env, lambda: env])


def test_sb3s_own_evaluate_policy_takes_get_env():
    """SB3's ``evaluate_policy(model, model.get_env())``, as SB3's docs write it: Proxima's vector env counts as SB3's
    ``VecEnv`` once SB3 is imported, so SB3 steps it as a vector env (it wrapped it as one env and failed before)."""
    import warnings

    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.vec_env import VecEnv as SB3VecEnv

    model = proxima.PPO("MlpPolicy", "CartPole-v1", n_steps=64, batch_size=64, seed=1)
    venv = model.get_env()
    assert isinstance(venv, SB3VecEnv)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SB3 notes the env is not Monitor-wrapped
        mean, std = evaluate_policy(model, venv, n_eval_episodes=3)
    assert mean > 0 and np.isfinite(std)
