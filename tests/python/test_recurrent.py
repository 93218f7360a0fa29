"""``RecurrentPPO`` against sb3-contrib's: training on a memory task no memoryless policy can solve
(a cue shown once, asked for three steps later), ``predict`` with the hidden state in the user's
own loop exactly as sb3-contrib's docs write it, ``evaluate_policy`` carrying the state, save ->
load -> the same actions, and bad inputs as clear exceptions."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import proxima

DELAY = 3


class Cue(gym.Env):
    """The first observation shows a cue (+1 or -1) and a flag; the next DELAY show nothing; the last
    asks (flag -1), and the action then pays +1 if it names the cue (1 for +1, 0 for -1), else -1.
    Memoryless play scores 0 in expectation; remembering scores 1."""

    def __init__(self):
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(2)

    def _obs(self):
        if self.t == 0:
            return np.array([1.0 if self.cue else -1.0, 1.0], np.float32)
        return np.array([0.0, -1.0 if self.t == DELAY + 1 else 0.0], np.float32)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.cue, self.t = bool(self.np_random.integers(2)), 0
        return self._obs(), {}

    def step(self, action):
        answer = self.t == DELAY + 1
        reward = (1.0 if (int(action) == 1) == self.cue else -1.0) if answer else 0.0
        self.t += 1
        return self._obs(), reward, answer, False, {}


KW = dict(n_steps=32, batch_size=64, learning_rate=1e-3, ent_coef=0.01, seed=1,
          policy_kwargs=dict(lstm_hidden_size=16, net_arch=[16]))


@pytest.fixture(scope="module")
def trained():
    return proxima.RecurrentPPO("MlpLstmPolicy", [Cue() for _ in range(4)], **KW).learn(12_000)


def test_recurrent_ppo_remembers_the_cue(trained):
    mean, _ = proxima.evaluate_policy(trained, Cue(), n_eval_episodes=40)
    assert mean > 0.8, mean  # memoryless: 0 in expectation


def test_predict_with_states_in_the_users_loop_as_sb3_contribs_docs(trained):
    vec_env = trained.get_env()
    obs = vec_env.reset()
    lstm_states = None
    num_envs = vec_env.num_envs
    episode_starts = np.ones((num_envs,), dtype=bool)
    total, answers = 0.0, 0
    for _ in range(5 * (DELAY + 2)):
        action, lstm_states = trained.predict(obs, state=lstm_states, episode_start=episode_starts, deterministic=True)
        assert isinstance(lstm_states, tuple) and [s.shape for s in lstm_states] == [(1, num_envs, 16)] * 2
        obs, rewards, dones, info = vec_env.step(action)
        episode_starts = dones
        total += float(np.sum(rewards))
        answers += int(np.sum(dones))
    assert answers >= 4 * num_envs and total / answers > 0.8


def test_save_load_same_actions_and_states(trained, tmp_path):
    trained.save(tmp_path / "ppo_recurrent")
    loaded = proxima.RecurrentPPO.load(tmp_path / "ppo_recurrent")
    obs = np.array([[1.0, 1.0], [-1.0, 1.0]], np.float32)
    a, sa = trained.predict(obs, episode_start=np.ones(2, bool), deterministic=True)
    b, sb = loaded.predict(obs, episode_start=np.ones(2, bool), deterministic=True)
    assert (a == b).all() and all((x == y).all() for x, y in zip(sa, sb))


def test_gru_cells_and_the_states_shape():
    model = proxima.RecurrentPPO("MlpLstmPolicy", Cue(), n_steps=16, batch_size=16, seed=1,
                                 policy_kwargs=dict(recurrent_cell="gru", lstm_hidden_size=8, n_lstm_layers=2))
    model.learn(32)
    _, states = model.predict(np.zeros(2, np.float32))
    assert len(states) == 1 and states[0].shape == (2, 1, 8)


def test_bad_recurrent_inputs_are_clear_exceptions(trained):
    with pytest.raises(ValueError, match="minibatches of whole sequences"):
        proxima.RecurrentPPO("MlpLstmPolicy", [Cue() for _ in range(3)], n_steps=32, batch_size=64)
    with pytest.raises(ValueError, match="RecurrentPPO's policy"):
        proxima.PPO("MlpLstmPolicy", Cue())
    with pytest.raises(ValueError, match="RecurrentPPO takes 'MlpLstmPolicy'"):
        proxima.RecurrentPPO("MlpPolicy", Cue())
    with pytest.raises(ValueError, match=r"state: 2 array\(s\) of shape \(1, 1, 16\)"):
        trained.predict(np.zeros(2, np.float32), state=(np.zeros((1, 1, 8)), np.zeros((1, 1, 8))))
    nan = (np.full((1, 1, 16), np.nan), np.zeros((1, 1, 16)))
    with pytest.raises(ValueError, match=r"state holds NaN or infinite values for observation\(s\) \[0\]"):
        trained.predict(np.zeros(2, np.float32), state=nan)
    _, after_start = trained.predict(np.zeros(2, np.float32), state=nan, episode_start=np.ones(1, bool))
    assert all(np.isfinite(s).all() for s in after_start), "an episode start zeroes the state, NaN included"
    with pytest.raises(ValueError, match="episode_start of 3 values"):
        trained.predict(np.zeros(2, np.float32), episode_start=np.ones(3, bool))
    # Sizes that would take the machine's memory, and keyword values sb3-contrib would refuse, are refused.
    for size in (100_000, 2**62):
        with pytest.raises(ValueError, match="recurrent weights per stack exceed"):
            proxima.RecurrentPPO("MlpLstmPolicy", Cue(), policy_kwargs=dict(lstm_hidden_size=size))
    with pytest.raises(ValueError, match="lstm_hidden_size must be a whole number"):
        proxima.RecurrentPPO("MlpLstmPolicy", Cue(), policy_kwargs=dict(lstm_hidden_size=2.5))
    with pytest.raises(TypeError, match="shared_lstm must be a bool"):
        proxima.RecurrentPPO("MlpLstmPolicy", Cue(), policy_kwargs=dict(shared_lstm="false", enable_critic_lstm=False))
    with pytest.raises(TypeError, match="recurrent_cell must be a string"):
        proxima.RecurrentPPO("MlpLstmPolicy", Cue(), policy_kwargs=dict(recurrent_cell=1))


def test_loading_across_recurrent_and_feed_forward_classes_is_refused(trained, tmp_path):
    trained.save(tmp_path / "rec")
    with pytest.raises(ValueError, match="holds a recurrent policy; load it with proxima.RecurrentPPO.load"):
        proxima.PPO.load(tmp_path / "rec")
    proxima.PPO("MlpPolicy", Cue(), n_steps=16, batch_size=16).save(tmp_path / "ff")
    with pytest.raises(ValueError, match="holds a feed-forward policy"):
        proxima.RecurrentPPO.load(tmp_path / "ff")


class CueDict(Cue):
    """Cue with a Dict observation: the cue and the flag under their own keys."""

    def __init__(self):
        super().__init__()
        self.observation_space = gym.spaces.Dict({"cue": gym.spaces.Box(-1.0, 1.0, (1,), np.float32),
                                                  "flag": gym.spaces.Box(-1.0, 1.0, (1,), np.float32)})

    def _obs(self):
        cue, flag = super()._obs()
        return {"cue": np.array([cue], np.float32), "flag": np.array([flag], np.float32)}


def test_multi_input_lstm_policy_remembers_a_cue_under_a_dict_key():
    model = proxima.RecurrentPPO("MultiInputLstmPolicy", [CueDict() for _ in range(4)], **KW).learn(12_000)
    mean, _ = proxima.evaluate_policy(model, CueDict(), n_eval_episodes=40)
    assert mean > 0.8, mean
    action, states = model.predict({"cue": np.array([1.0], np.float32), "flag": np.array([1.0], np.float32)})
    assert np.shape(action) == () and [s.shape for s in states] == [(1, 1, 16)] * 2
    # sb3-contrib's predict loop on the model's own VecEnv, Dict observations batched as SB3 batches them.
    vec_env = model.get_env()
    obs = vec_env.reset()
    assert set(obs) == {"cue", "flag"} and obs["cue"].shape == (4, 1)
    lstm_states, episode_starts, total, answers = None, np.ones((vec_env.num_envs,), dtype=bool), 0.0, 0
    for _ in range(3 * (DELAY + 2)):
        action, lstm_states = model.predict(obs, state=lstm_states, episode_start=episode_starts, deterministic=True)
        obs, rewards, dones, info = vec_env.step(action)
        episode_starts = dones
        total, answers = total + float(np.sum(rewards)), answers + int(np.sum(dones))
    assert answers >= 2 * vec_env.num_envs and total / answers > 0.8
    with pytest.raises(ValueError, match="You must use `MultiInputLstmPolicy`"):
        proxima.RecurrentPPO("MlpLstmPolicy", CueDict())
    with pytest.raises(ValueError, match="use 'MlpLstmPolicy' or 'CnnLstmPolicy'"):
        proxima.RecurrentPPO("MultiInputLstmPolicy", Cue())


class CueImage(Cue):
    """Cue on 36 x 36 frames, channel-last as SB3's image envs: the first frame lights the left or
    the right half, the last one a bar across the bottom (the question)."""

    def __init__(self):
        self.observation_space = gym.spaces.Box(0, 255, (36, 36, 1), np.uint8)
        self.action_space = gym.spaces.Discrete(2)

    def _obs(self):
        frame = np.zeros((36, 36, 1), np.uint8)
        if self.t == 0:
            frame[12:24, 18:34] = 255 if self.cue else 0
            frame[12:24, 2:18] = 0 if self.cue else 255
        elif self.t == DELAY + 1:
            frame[30:34, :] = 255
        return frame


def test_cnn_lstm_policy_trains_predicts_with_states_and_reloads(tmp_path):
    model = proxima.RecurrentPPO("CnnLstmPolicy", [CueImage() for _ in range(2)], n_steps=16, batch_size=32,
                                 n_epochs=2, seed=1, policy_kwargs=dict(lstm_hidden_size=8)).learn(64)
    assert model.get_parameters()["lstm_actor.weight_ih_l0"].shape == (4 * 8, 512)  # the CNN's features in
    frames = np.stack([CueImage().reset(seed=s)[0] for s in (0, 1)])
    action, states = model.predict(frames, episode_start=np.ones(2, bool), deterministic=True)
    assert action.shape == (2,) and [s.shape for s in states] == [(1, 2, 8)] * 2
    model.save(tmp_path / "cnn_lstm")
    loaded = proxima.RecurrentPPO.load(tmp_path / "cnn_lstm")
    again, again_states = loaded.predict(frames, episode_start=np.ones(2, bool), deterministic=True)
    assert (again == action).all() and all((x == y).all() for x, y in zip(again_states, states))
    with pytest.raises(ValueError, match="CnnLstmPolicy.*needs image observations"):
        proxima.RecurrentPPO("CnnLstmPolicy", Cue())


@pytest.mark.parametrize("backend", ["candle", "auto"])
def test_a_loaded_model_acts_with_the_arithmetic_it_trained_with(backend, tmp_path):
    """Loaded without an env, a model runs its recurrent layers as it trained them (step by step on candle, or on
    the fused kernels): the same states, bit for bit, as the model that was saved."""
    model = proxima.RecurrentPPO("MlpLstmPolicy", [Cue() for _ in range(4)], backend=backend, **KW).learn(1024)
    model.save(tmp_path / "m")
    loaded = proxima.RecurrentPPO.load(tmp_path / "m")
    assert loaded.backend == backend
    rng = np.random.default_rng(0)
    state_a = state_b = None
    for t in range(20):
        obs = rng.normal(size=(4, 2)).astype(np.float32)
        start = np.full(4, t == 0)
        _, state_a = model.predict(obs, state=state_a, episode_start=start, deterministic=True)
        _, state_b = loaded.predict(obs, state=state_b, episode_start=start, deterministic=True)
        assert all(np.array_equal(a, b) for a, b in zip(state_a, state_b)), t
