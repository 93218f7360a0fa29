"""ONNX export (``model.export_onnx``): onnxruntime, given only the exported file, takes the same actions as
``predict(deterministic=True)`` on 1,000 observations for each policy kind (the same discrete actions, Box
actions to 1e-5), with the observation normalisation inside the graph; an exported CartPole policy plays a whole
episode driven by onnxruntime alone; bad inputs are clear exceptions and write nothing."""

from __future__ import annotations

import os
import sys

import gymnasium as gym
import numpy as np
import pytest

import proxima

import onnxruntime as ort  # noqa: E402
import onnx  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "crates", "proxima-gym", "tests"))
import toy_envs  # noqa: E402,F401  (registers toy/PickOfTwo-v0)

N = 1_000


def session(path):
    onnx.checker.check_model(onnx.load(str(path)), full_check=True)
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def observations(model, scale=1.0, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.normal(size=(N,) + model.observation_space.shape) * scale).astype(np.float32)


def same_actions(model, path, obs, masks=None):
    feed = {"obs": obs}
    if masks is not None:
        feed["action_masks"] = masks
    ours, _ = model.predict(obs, deterministic=True, **({} if masks is None else {"action_masks": masks}))
    theirs = session(path).run(["action"], feed)[0]
    if np.issubdtype(theirs.dtype, np.integer):
        np.testing.assert_array_equal(theirs, ours)
    else:
        np.testing.assert_allclose(theirs, ours, rtol=0, atol=1e-5)
    return ours


def test_discrete_mlp_with_normalisation(tmp_path):
    model = proxima.PPO("MlpPolicy", "CartPole-v1", n_steps=128, batch_size=64, normalize_observation=True,
                        seed=1).learn(2_048)
    io = model.export_onnx(tmp_path / "cartpole.onnx")
    assert io == {"inputs": {"obs": "float32 [batch, 4]"},
                  "outputs": {"action": "int64 [batch]", "logits": "float32 [batch, 2]", "value": "float32 [batch]"}}
    actions = same_actions(model, tmp_path / "cartpole.onnx", observations(model, scale=2.0))
    assert len(set(actions.tolist())) == 2, "both actions occur: the comparison is not vacuous"
    values = session(tmp_path / "cartpole.onnx").run(["value"], {"obs": observations(model)[:3]})[0]
    assert values.shape == (3,) and np.isfinite(values).all()


@pytest.mark.parametrize("shared", [False, True])
def test_gaussian_mlp_with_normalisation_and_clipping(tmp_path, shared):
    kwargs = dict(policy_kwargs=dict(net_arch=[32], activation_fn="relu", share_features_extractor=True)) if shared else {}
    model = proxima.PPO("MlpPolicy", "Pendulum-v1", n_steps=128, batch_size=64, normalize_observation=True,
                        seed=1, **kwargs).learn(1_024)
    # A head that reaches past the Box (±2) for some observations: the clip to the Box acts.
    params = model.get_parameters()
    head = "actor.0" if shared else "actor.4"
    params[f"{head}.weight"] = params[f"{head}.weight"] * 400.0
    model.set_parameters(params)
    model.export_onnx(tmp_path / "pendulum.onnx")
    # Far-off observations: the clip at ±clip_obs acts too.
    actions = same_actions(model, tmp_path / "pendulum.onnx", observations(model, scale=30.0))
    assert (np.abs(actions) == 2.0).any() and (np.abs(actions) < 2.0).any()


@pytest.mark.parametrize("name", ["SAC", "TD3", "TQC", "DDPG"])
def test_off_policy_actors(tmp_path, name):
    model = getattr(proxima, name)("MlpPolicy", "Pendulum-v1", learning_starts=50, batch_size=32,
                                   policy_kwargs=dict(net_arch=[32, 32]), seed=1).learn(200)
    io = model.export_onnx(tmp_path / "actor.onnx")
    assert list(io["outputs"]) == ["action", "mean"] and "value" not in io["outputs"]
    actions = same_actions(model, tmp_path / "actor.onnx", observations(model, scale=3.0))
    assert actions.min() >= -2.0 and actions.max() <= 2.0 and actions.std() > 0


def test_cnn_policy_on_uint8_frames(tmp_path):
    model = proxima.PPO("CnnPolicy", "atari:Breakout?screen_size=36&frame_stack=2", n_envs=2, n_steps=8,
                        batch_size=8, n_epochs=1, seed=1).learn(16)
    params = model.get_parameters()
    # A random head over the features: the argmax differs from frame to frame.
    params["actor.weight"] = np.random.default_rng(1).normal(size=params["actor.weight"].shape).astype(np.float32)
    model.set_parameters(params)
    io = model.export_onnx(tmp_path / "cnn.onnx")
    assert io["inputs"] == {"obs": "uint8 [batch, 2, 36, 36]"}
    rng = np.random.default_rng(0)
    # Frames of varied brightness and texture, so that the features (and the argmax) vary.
    scale = rng.random((N, 1, 1, 1)) * rng.random((N, 2, 1, 36))
    frames = (rng.integers(0, 256, size=(N, 2, 36, 36)) * scale).astype(np.uint8)
    ours, _ = model.predict(frames, deterministic=True)
    theirs = session(tmp_path / "cnn.onnx").run(["action"], {"obs": frames})[0]
    np.testing.assert_array_equal(theirs, ours)
    assert len(set(ours.tolist())) > 1


def test_masked_policy_takes_only_valid_actions(tmp_path):
    model = proxima.MaskablePPO("MlpPolicy", gym.make("toy/PickOfTwo-v0"), n_steps=256, batch_size=64,
                                seed=1).learn(2_048)
    io = model.export_onnx(tmp_path / "masked.onnx")
    assert io["inputs"] == {"obs": "float32 [batch, 1]", "action_masks": "bool [batch, 6]"}
    rng = np.random.default_rng(0)
    masks = np.zeros((N, 6), bool)
    for row in masks:
        row[rng.choice(6, size=2, replace=False)] = True
    obs = rng.choice([-1.0, 1.0], size=(N, 1)).astype(np.float32)
    actions = same_actions(model, tmp_path / "masked.onnx", obs, masks)
    assert masks[np.arange(N), actions].all(), "only valid actions"
    plain = model.export_onnx(tmp_path / "plain.onnx", action_masks=False)
    assert list(plain["inputs"]) == ["obs"]
    # The file records masked training: the CLI's export adds the masks input by default too.
    cli = os.environ.get("PROXIMA_CLI")
    if cli:
        import subprocess

        model.save(tmp_path / "masked.safetensors")
        out = subprocess.run([cli, "export", str(tmp_path / "masked.safetensors"), "--onnx", str(tmp_path / "cli.onnx")],
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0 and "input action_masks: bool [batch, 6]" in out.stdout, out.stdout + out.stderr


@pytest.mark.parametrize("cell,layers", [("lstm", 1), ("lstm", 2), ("gru", 2)])
def test_recurrent_policy_takes_and_gives_the_state(tmp_path, cell, layers):
    model = proxima.RecurrentPPO("MlpLstmPolicy", "CartPole-v1", n_steps=64, batch_size=64, n_epochs=2, seed=1,
                                 policy_kwargs=dict(recurrent_cell=cell, n_lstm_layers=layers,
                                                    lstm_hidden_size=16)).learn(512)
    io = model.export_onnx(tmp_path / "recurrent.onnx")
    states = ["state_h", "state_c"] if cell == "lstm" else ["state_h"]
    assert list(io["inputs"]) == ["obs", *states, "episode_start"]
    assert list(io["outputs"]) == ["action", "logits", *[f"next_{s}" for s in states]]
    sess = session(tmp_path / "recurrent.onnx")
    rng = np.random.default_rng(0)
    obs = observations(model, scale=2.0)
    state = tuple(rng.normal(size=(layers, N, 16)).astype(np.float32) for _ in states)
    starts = rng.random(N) < 0.3
    ours, ours_next = model.predict(obs, state=state, episode_start=starts, deterministic=True)
    out = sess.run(None, {"obs": obs, **dict(zip(states, state)), "episode_start": starts})
    np.testing.assert_array_equal(out[0], ours)
    for theirs, mine in zip(out[2:], ours_next):
        np.testing.assert_allclose(theirs, mine, rtol=0, atol=1e-5)
    assert len(set(ours.tolist())) == 2
    # Step by step over an episode: the state carried through onnxruntime alone gives predict's actions.
    env = gym.make("CartPole-v1")
    o, _ = env.reset(seed=3)
    s_ours, s_theirs, start = None, tuple(np.zeros((layers, 1, 16), np.float32) for _ in states), True
    for _ in range(50):
        a, s_ours = model.predict(o, state=s_ours, episode_start=np.array([start]), deterministic=True)
        out = sess.run(None, {"obs": o[None].astype(np.float32), **dict(zip(states, s_theirs)),
                              "episode_start": np.array([start])})
        assert int(out[0][0]) == int(a)
        s_theirs, start = tuple(out[2:]), False
        o, _, terminated, truncated, _ = env.step(int(a))
        if terminated or truncated:
            break


@pytest.mark.parametrize("name,env_id", [("PPO", "toy/ImageDecides-v0"), ("SAC", "toy/ImageSteer-v0")])
def test_dict_observation_with_an_image_key(tmp_path, name, env_id):
    """The flat observation in (gymnasium.spaces.flatten's order), the image key's CNN inside the graph."""
    env = gym.make(env_id)
    kwargs = dict(n_steps=64, batch_size=64) if name == "PPO" else dict(learning_starts=32, batch_size=16)
    model = getattr(proxima, name)("MultiInputPolicy", env, seed=1, **kwargs).learn(128)
    if name == "PPO":  # a random head over the features: the argmax differs from observation to observation
        params = model.get_parameters()
        params["actor.4.weight"] = np.random.default_rng(1).normal(size=params["actor.4.weight"].shape).astype(np.float32)
        model.set_parameters(params)
    io = model.export_onnx(tmp_path / "dict.onnx")
    assert io["inputs"] == {"obs": "float32 [batch, 1298]"}
    space = env.observation_space
    space.seed(0)
    samples = [space.sample() for _ in range(N)]
    flat = np.stack([gym.spaces.flatten(space, o) for o in samples]).astype(np.float32)
    batch = {k: np.stack([o[k] for o in samples]) for k in space.spaces}
    ours, _ = model.predict(batch, deterministic=True)
    theirs = session(tmp_path / "dict.onnx").run(["action"], {"obs": flat})[0]
    if name == "PPO":
        np.testing.assert_array_equal(theirs, ours)
        assert len(set(ours.tolist())) > 1
    else:
        np.testing.assert_allclose(theirs, ours, rtol=0, atol=1e-5)


def test_exported_cartpole_plays_a_full_episode_alone(tmp_path):
    model = proxima.PPO("MlpPolicy", "CartPole-v1", n_envs=4, n_steps=256, batch_size=256, learning_rate=1e-3,
                        seed=1).learn(40_000)
    model.export_onnx(tmp_path / "cartpole.onnx")
    del model
    sess = session(tmp_path / "cartpole.onnx")
    env = gym.make("CartPole-v1")
    obs, _ = env.reset(seed=0)
    total, done = 0.0, False
    while not done:
        action = sess.run(["action"], {"obs": obs[None].astype(np.float32)})[0][0]
        obs, reward, terminated, truncated, _ = env.step(int(action))
        total, done = total + reward, terminated or truncated
    assert total == 500.0, total


def test_bad_exports_are_clear_errors_and_write_nothing(tmp_path):
    model = proxima.PPO("MlpPolicy", "CartPole-v1", n_steps=64, batch_size=64, seed=1)
    with pytest.raises(ValueError, match="does not exist"):
        model.export_onnx(tmp_path / "no" / "such" / "folder" / "p.onnx")
    with pytest.raises(ValueError, match="the path is empty; give a file name, such as 'policy.onnx'"):
        model.export_onnx("")
    with pytest.raises(ValueError, match="names a directory"):
        model.export_onnx(tmp_path)
    with pytest.raises(ValueError, match="masks select among Discrete or MultiDiscrete"):
        proxima.PPO("MlpPolicy", "Pendulum-v1", n_steps=64, batch_size=64).export_onnx(tmp_path / "p.onnx",
                                                                                       action_masks=True)
    assert os.listdir(tmp_path) == []
    # An existing file is replaced whole, never left half-written.
    (tmp_path / "p.onnx").write_bytes(b"old")
    model.export_onnx(tmp_path / "p.onnx")
    assert session(tmp_path / "p.onnx") is not None and sorted(os.listdir(tmp_path)) == ["p.onnx"]
