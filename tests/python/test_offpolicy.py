"""``proxima.SAC``, ``TD3`` and ``DDPG`` against Stable-Baselines3's API: their constructor and
``learn`` defaults, the settings reaching the config, learn/save/load/predict, SB3's callbacks
through the off-policy loop, and bad inputs."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import proxima
from proxima.callbacks import BaseCallback

from test_api import defaults, source_defaults

def _noise(n):
    from stable_baselines3.common.noise import NormalActionNoise

    return NormalActionNoise(np.zeros(n), 0.1 * np.ones(n))


# Tiny networks and an early first gradient step: seconds, not minutes.
TINY = dict(learning_starts=50, policy_kwargs=dict(net_arch=[16, 16]), seed=2)


@pytest.mark.parametrize("module,cls", [("sac.sac", "SAC"), ("td3.td3", "TD3"), ("ddpg.ddpg", "DDPG")])
def test_constructor_and_learn_defaults_equal_sb3s(module, cls):
    theirs = source_defaults("stable_baselines3", module, cls)
    assert len(theirs) >= 18, "read SB3's signature"
    assert defaults(getattr(proxima, cls).__init__) == theirs
    assert defaults(getattr(proxima, cls).learn) == source_defaults("stable_baselines3", module, cls, "learn")


def test_tqc_constructor_and_learn_defaults_equal_sb3_contribs():
    theirs = source_defaults("sb3_contrib", "tqc.tqc", "TQC")
    assert len(theirs) >= 18 and theirs["top_quantiles_to_drop_per_net"] == 2, "read sb3-contrib's signature"
    assert defaults(proxima.TQC.__init__) == theirs
    assert defaults(proxima.TQC.learn) == source_defaults("sb3_contrib", "tqc.tqc", "TQC", "learn")


def test_tqc_trains_predicts_and_evaluates_with_sb3s_evaluate_policy(tmp_path):
    """TQC with n_quantiles and n_critics from policy_kwargs (sb3-contrib's place for them): its
    critics have that many outputs; it learns a few steps, predicts in the box, saves and loads to the
    same actions, and SB3's own evaluate_policy runs it."""
    import gymnasium
    from stable_baselines3.common.evaluation import evaluate_policy

    model = proxima.TQC("MlpPolicy", "Pendulum-v1", top_quantiles_to_drop_per_net=1,
                        policy_kwargs=dict(n_quantiles=5, n_critics=3, net_arch=[16, 16]), learning_starts=50, seed=2)
    toml = model._model.config_toml
    for line in ['algo = "tqc"', "n_quantiles = 5", "n_critics = 3", "top_quantiles_to_drop_per_net = 1"]:
        assert line in toml, line
    params = model.get_parameters()
    assert params["critic.qf2.4.weight"].shape == (5, 16)
    model.learn(200)
    obs = np.zeros((4, 3), dtype=np.float32)
    actions, _ = model.predict(obs, deterministic=True)
    assert actions.shape == (4, 1) and np.all(np.abs(actions) <= 2.0)
    model.save(tmp_path / "tqc")
    loaded = proxima.TQC.load(tmp_path / "tqc")
    np.testing.assert_array_equal(loaded.predict(obs, deterministic=True)[0], actions)
    env = gymnasium.make("Pendulum-v1")
    mean, std = evaluate_policy(model, env, n_eval_episodes=2)
    assert np.isfinite(mean) and np.isfinite(std)


def test_settings_reach_the_config():
    sac = proxima.SAC("MlpPolicy", "Pendulum-v1", learning_rate=1e-3, buffer_size=5000, tau=0.01,
                      ent_coef="auto_0.5", target_entropy=-0.5, train_freq=(2, "step"), seed=1)
    toml = sac._model.config_toml
    for line in ['algo = "sac"', "learning_rate = 0.001", "buffer_size = 5000", "tau = 0.01",
                 'ent_coef = "auto_0.5"', "target_entropy = -0.5", "train_freq = 2", "learning_starts = 100"]:
        assert line in toml, line
    from stable_baselines3.common.noise import NormalActionNoise

    td3 = proxima.TD3("MlpPolicy", "Pendulum-v1", action_noise=NormalActionNoise(np.zeros(1), 0.3 * np.ones(1)))
    assert "noise_std = 0.3" in td3._model.config_toml
    # SB3's TD3 explores with no noise unless given some.
    assert "noise_std = 0.0" in proxima.TD3("MlpPolicy", "Pendulum-v1")._model.config_toml
    assert 'algo = "ddpg"' in proxima.DDPG("MlpPolicy", "Pendulum-v1")._model.config_toml


@pytest.mark.parametrize("cls", [proxima.SAC, proxima.TD3])
def test_the_off_policy_policy_kwargs_reach_the_networks(cls):
    """``n_critics``, ``net_arch=dict(pi=..., qf=...)`` and ``activation_fn=ReLU`` (the documented
    off-policy policy_kwargs) were refused by the actor-critic's check before issue 35."""
    model = cls("MlpPolicy", "Pendulum-v1", seed=1,
                policy_kwargs=dict(n_critics=3, net_arch=dict(pi=[16], qf=[16]), activation_fn="relu"))
    assert model.n_critics == 3 and model.net_arch == [16]
    names = model.get_parameters()
    assert {n.split(".")[1] for n in names if n.startswith("critic.")} == {"qf0", "qf1", "qf2"}
    with pytest.raises(NotImplementedError, match="ReLU"):
        cls("MlpPolicy", "Pendulum-v1", policy_kwargs=dict(activation_fn="tanh"))
    with pytest.raises(ValueError, match="algo = `ddpg`"):
        proxima.DDPG("MlpPolicy", "Pendulum-v1", policy_kwargs=dict(n_critics=2))


@pytest.mark.parametrize("cls", [proxima.SAC, proxima.TD3])
def test_learn_save_load_predict(cls, tmp_path):
    model = cls("MlpPolicy", "Pendulum-v1", **TINY).learn(300)
    assert model.num_timesteps == 300
    obs = np.random.default_rng(0).normal(size=(8, 3)).astype(np.float32)
    before, _ = model.predict(obs, deterministic=True)
    assert before.shape == (8, 1) and np.all(np.abs(before) <= 2.0), "actions within Pendulum's Box"
    model.save(tmp_path / "m")
    loaded = cls.load(tmp_path / "m")
    np.testing.assert_array_equal(before, loaded.predict(obs, deterministic=True)[0])
    with pytest.raises(ValueError, match="holds a"):
        (proxima.TD3 if cls is proxima.SAC else proxima.SAC).load(tmp_path / "m")
    again = cls.load(tmp_path / "m", env="Pendulum-v1")
    assert again.num_timesteps == 300
    again.learn(100, reset_num_timesteps=False)
    assert again.num_timesteps == 400


@pytest.mark.parametrize("cls", [proxima.SAC, proxima.TD3])
def test_get_and_set_parameters_round_trip_the_off_policy_networks(cls, tmp_path):
    model = cls("MlpPolicy", "Pendulum-v1", **TINY).learn(120)
    params = model.get_parameters()
    first = "actor.latent_pi.0.weight" if cls is proxima.SAC else "actor.mu.0.weight"  # SB3's names
    assert params[first].shape == (16, 3)
    assert params["critic.qf1.0.weight"].shape == (16, 4) and "critic_target.qf0.0.bias" in params
    other = cls("MlpPolicy", "Pendulum-v1", **dict(TINY, seed=7))
    obs = np.random.default_rng(1).normal(size=(5, 3)).astype(np.float32)
    assert not np.array_equal(other.predict(obs, deterministic=True)[0], model.predict(obs, deterministic=True)[0])
    other.set_parameters(params)
    np.testing.assert_array_equal(other.predict(obs, deterministic=True)[0], model.predict(obs, deterministic=True)[0])
    for name, value in other.get_parameters().items():
        np.testing.assert_array_equal(value, params[name], err_msg=name)
    model.save(tmp_path / "m")
    fresh = cls("MlpPolicy", "Pendulum-v1", **dict(TINY, seed=9))
    fresh.set_parameters(str(tmp_path / "m"))
    np.testing.assert_array_equal(fresh.predict(obs, deterministic=True)[0], model.predict(obs, deterministic=True)[0])


def test_rayon_runs_on_one_thread_unless_told():
    import os

    assert os.environ.get("RAYON_NUM_THREADS"), "set by `import proxima` (the CLI's num_threads = 1)"


class Steps(BaseCallback):
    def __init__(self, stop_after=None):
        super().__init__()
        self.stop_after, self.steps, self.rollouts = stop_after, [], 0

    def _on_rollout_start(self):
        self.rollouts += 1

    def _on_step(self):
        self.steps.append(self.num_timesteps)
        assert self.locals["new_obs"].shape == (1, 3) and self.locals["rewards"].shape == (1,)
        return self.stop_after is None or self.n_calls < self.stop_after


def test_sb3_callbacks_see_every_env_step_and_false_stops():
    rec = Steps()
    proxima.SAC("MlpPolicy", "Pendulum-v1", **TINY).learn(250, callback=rec)
    assert rec.steps == list(range(1, 251)), "_on_step after every env step"
    assert rec.rollouts == 3, "one rollout per logged iteration of n_steps (100) env steps"
    stop = Steps(stop_after=120)
    model = proxima.TD3("MlpPolicy", "Pendulum-v1", **TINY).learn(1000, callback=stop)
    assert model.num_timesteps == 120 and stop.steps[-1] == 120


BAD = [
    (lambda: proxima.SAC("MlpPolicy", "CartPole-v1"), NotImplementedError, "continuous .Box. action space"),
    (lambda: proxima.SAC("MlpPolicy", "Pendulum-v1", n_steps=3), NotImplementedError, "n-step returns"),
    (lambda: proxima.SAC("MlpPolicy", "Pendulum-v1", train_freq=(1, "episode")), NotImplementedError, "episodes"),
    (lambda: proxima.SAC("MlpPolicy", "Pendulum-v1", gradient_steps=-1), NotImplementedError, "gradient_steps=-1"),
    (lambda: proxima.SAC("MlpPolicy", "Pendulum-v1", optimize_memory_usage=True), NotImplementedError, "optimize_memory_usage"),
    (lambda: proxima.SAC("MlpPolicy", "Pendulum-v1", buffer_size=10**12), ValueError, "memory"),
    (lambda: proxima.SAC("MlpPolicy", "Pendulum-v1", ent_coef="autox"), ValueError, "ent_coef"),
    (lambda: proxima.SAC("MlpPolicy", "Pendulum-v1", policy_kwargs=dict(activation_fn="tanh")), NotImplementedError, "ReLU"),
    (lambda: proxima.SAC("MlpPolicy", "Pendulum-v1", policy_kwargs=dict(net_arch=dict(pi=[8], qf=[16]))), NotImplementedError, "equal 'pi' and 'qf'"),
    (lambda: proxima.TD3("MlpPolicy", "Pendulum-v1", action_noise="lots"), NotImplementedError, "NormalActionNoise"),
    (lambda: proxima.SAC("MlpPolicy", "Pendulum-v1", learning_starts=10**9).learn(100), ValueError, "learning_starts"),
    # Another algorithm's key is refused, as the CLI refuses it (SB3 raises TypeError for them).
    (lambda: proxima.SAC("MlpPolicy", "Pendulum-v1", gae_lambda=0.9), ValueError, "algo = `sac`"),
    (lambda: proxima.TD3("MlpPolicy", "Pendulum-v1", target_entropy=-2.0), ValueError, "algo = `td3`"),
    (lambda: proxima.DDPG("MlpPolicy", "Pendulum-v1", n_critics=2), ValueError, "algo = `ddpg`"),
    (lambda: proxima.PPO("MlpPolicy", "CartPole-v1", tau=0.5), ValueError, "algo = `ppo`"),
    (lambda: proxima.PPO("MlpPolicy", "CartPole-v1", e_auxiliary=3), ValueError, "algo = `ppo`"),
    (lambda: proxima.TD3("MlpPolicy", "Pendulum-v1", action_noise=_noise(2)), ValueError, "2 dimensions"),
    (lambda: proxima.SAC("MlpPolicy", "Pendulum-v1", gradient_steps=0), ValueError, "gradient_steps"),
    (lambda: proxima.SAC("MlpPolicy", "Pendulum-v1", gradient_steps=-2), ValueError, "gradient_steps must be .*got -2"),
    (lambda: proxima.SAC("MlpPolicy", "Pendulum-v1", batch_size=10**9), ValueError, "batch_size = 1000000000: .* needs"),
    (lambda: proxima.SAC("MlpPolicy", "Pendulum-v1", learning_rate="abc"), TypeError, "learning_rate must be"),
    (lambda: proxima.SAC("MlpPolicy", "Pendulum-v1", buffer_size=2**70), ValueError, "buffer_size must be"),
    (lambda: proxima.SAC("MlpPolicy", "Pendulum-v1").predict(np.zeros((0, 3))), ValueError, "empty batch"),
    (lambda: proxima.TQC("MlpPolicy", "Pendulum-v1", top_quantiles_to_drop_per_net=25), ValueError, "top_quantiles_to_drop_per_net = 25"),
    (lambda: proxima.TQC("MlpPolicy", "Pendulum-v1", policy_kwargs=dict(n_critics=0)), ValueError, "n_critics = 0"),
    (lambda: proxima.TQC("MlpPolicy", "CartPole-v1"), NotImplementedError, "TQC needs a continuous .Box. action space"),
    (lambda: proxima.TD3("MlpPolicy", "Pendulum-v1", policy_kwargs=dict(activation_fn=torch.nn.Tanh)), NotImplementedError,
     "only torch.nn.ReLU .* is supported for SAC"),
    (lambda: proxima.SAC("MlpPolicy", "Pendulum-v1", policy_kwargs=dict(n_critics=2.5)), ValueError, "n_critics must be a whole"),
    (lambda: proxima.SAC("MlpPolicy", "Pendulum-v1", learning_starts=-1), ValueError, "`learning_starts` = -1: must be a whole number"),
    (lambda: proxima.TQC("MlpPolicy", "Pendulum-v1", top_quantiles_to_drop_per_net=-1), ValueError,
     "`top_quantiles_to_drop_per_net` = -1: must be a whole number"),
    (lambda: proxima.SAC("MlpPolicy", "Pendulum-v1", policy_kwargs=dict(n_quantiles=5)), NotImplementedError, "n_quantiles"),
    (lambda: proxima.SAC("MlpPolicy", "Pendulum-v1", policy_kwargs=dict(n_critic=3)), TypeError, "did you mean 'n_critics'"),
    (lambda: proxima.TQC("MlpPolicy", "Pendulum-v1", policy_kwargs=dict(n_quantile=3)), TypeError,
     "did you mean 'n_quantiles'"),
]


def test_learning_starts_is_checked_at_learn_as_sb3_does():
    """A learning_starts past the preset's 1M steps builds (SB3 takes it); learn(n) refuses an n that
    would end before the first gradient step, naming both."""
    model = proxima.SAC("MlpPolicy", "Pendulum-v1", learning_starts=2_000_000)
    assert model.learning_starts == 2_000_000
    with pytest.raises(ValueError, match="learning_starts = 2000000 is not below total_timesteps = 1000"):
        model.learn(1000)


def test_predict_on_many_rows_equals_predict_on_their_parts():
    """predict hands the policy a few thousand rows at a time: 10,000 rows at once give the actions
    of their parts, deterministic and sampled (the samples drawn in row order either way)."""
    model = proxima.SAC("MlpPolicy", "Pendulum-v1", seed=3)
    obs = np.random.default_rng(0).uniform(-1, 1, size=(10_000, 3)).astype(np.float32)
    whole, _ = model.predict(obs, deterministic=True)
    parts = np.vstack([model.predict(obs[i : i + 1000], deterministic=True)[0] for i in range(0, 10_000, 1000)])
    np.testing.assert_array_equal(whole, parts)
    assert whole.shape == (10_000, 1) and np.all(np.abs(whole) <= 2.0)


@pytest.mark.parametrize("make,exc,text", BAD, ids=[b[2] for b in BAD])
def test_bad_input_raises_a_clear_exception(make, exc, text):
    with pytest.raises(exc, match=text):
        make()


def test_ctrl_c_stops_a_long_burst_of_gradient_steps_and_learning_goes_on():
    """SIGINT during a burst of 10⁶ gradient steps (≈ 40 minutes) raises KeyboardInterrupt between
    two of them, not after the burst; a later ``learn`` takes the steps still owed. In a child
    process, so that a Ctrl-C acted on late fails this test by its 120-second bound rather than
    hanging the suite."""
    import subprocess
    import sys
    import textwrap

    # SIGINT's handler installed as an interactive Python has it: a test run launched in the
    # background (`.ci/run &`) starts with SIGINT ignored, and Python then installs none.
    child = textwrap.dedent("""
        import os, signal, threading
        signal.signal(signal.SIGINT, signal.default_int_handler)
        import proxima
        model = proxima.SAC("MlpPolicy", "Pendulum-v1", learning_starts=10, train_freq=1,
                            gradient_steps=10**6, policy_kwargs=dict(net_arch=[16, 16]), seed=1)
        threading.Timer(2.0, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
        try:
            model.learn(12)
        except KeyboardInterrupt:
            print("interrupted at", model.num_timesteps, flush=True)
        model.gradient_steps  # the model is usable after it
    """)
    out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "interrupted at 11" in out.stdout, out.stdout + out.stderr


def test_a_setting_given_twice_differently_is_refused():
    with pytest.raises(ValueError, match="n_quantiles is given twice, 10 as a keyword and 7 in policy_kwargs"):
        proxima.TQC("MlpPolicy", "Pendulum-v1", n_quantiles=10, policy_kwargs=dict(n_quantiles=7))
    with pytest.raises(ValueError, match="n_critics is given twice"):
        proxima.TQC("MlpPolicy", "Pendulum-v1", n_critics=3, policy_kwargs=dict(n_critics=2))
    proxima.TQC("MlpPolicy", "Pendulum-v1", n_quantiles=7, policy_kwargs=dict(n_quantiles=7))


def test_save_and_load_replay_buffer_round_trip_the_transitions(tmp_path):
    """SB3's ``save_replay_buffer``/``load_replay_buffer``: the file holds every stored transition and where the
    next goes, so a fresh model that loads it saves the same file; a buffer of another size is refused whole."""
    model = proxima.SAC("MlpPolicy", "Pendulum-v1", buffer_size=1000, **TINY).learn(150)
    model.save_replay_buffer(tmp_path / "buffer")
    fresh = proxima.SAC("MlpPolicy", "Pendulum-v1", buffer_size=1000, **dict(TINY, seed=5))
    fresh.save_replay_buffer(str(tmp_path / "empty"))
    assert (tmp_path / "empty").read_bytes() != (tmp_path / "buffer").read_bytes()
    fresh.load_replay_buffer(tmp_path / "buffer")
    fresh.save_replay_buffer(tmp_path / "again")
    assert (tmp_path / "again").read_bytes() == (tmp_path / "buffer").read_bytes()
    fresh.learn(60)  # trains from the loaded transitions (150 stored ≥ learning_starts)
    other = proxima.SAC("MlpPolicy", "Pendulum-v1", buffer_size=500, **TINY)
    with pytest.raises(ValueError, match="capacity 1000.*this run's are 500"):
        other.load_replay_buffer(tmp_path / "buffer")
    with pytest.raises(ValueError, match="not a replay buffer|not a valid safetensors"):
        model.save(tmp_path / "m")
        other.load_replay_buffer(tmp_path / "m.safetensors")
    with pytest.raises(ValueError, match="loaded without an env"):
        proxima.SAC.load(tmp_path / "m").save_replay_buffer(tmp_path / "x")
    with pytest.raises(ValueError, match="the path is empty"):
        model.save_replay_buffer("")


def test_off_policy_logs_use_sb3s_off_policy_keys(capsys, tmp_path):
    proxima.SAC("MlpPolicy", "Pendulum-v1", verbose=1, tensorboard_log=str(tmp_path), **TINY).learn(200, log_interval=1)
    out = capsys.readouterr().out
    for key in ("train/actor_loss", "train/critic_loss", "train/ent_coef", "train/n_updates", "train/learning_rate"):
        assert key in out, key
    assert "approx_kl" not in out and "policy_gradient_loss" not in out and "explained_variance" not in out
    n_updates = [line for line in out.splitlines() if "train/n_updates" in line][-1]
    assert int(n_updates.split("|")[2]) == 150, "gradient steps taken (200 steps, the first 50 random)"
    events = b"".join(p.read_bytes() for p in tmp_path.rglob("events*"))
    assert b"losses/qf_loss" in events and b"losses/actor_loss" in events and b"losses/alpha" in events
    assert b"losses/approx_kl" not in events and b"losses/clipfrac" not in events
    proxima.TD3("MlpPolicy", "Pendulum-v1", verbose=1, **TINY).learn(200, log_interval=1)
    out = capsys.readouterr().out
    assert "train/actor_loss" in out and "train/ent_coef" not in out and "entropy_loss" not in out
    # log_interval counts episodes, as SB3's off-policy algorithms do: Pendulum's end every 200 steps.
    proxima.TD3("MlpPolicy", "Pendulum-v1", verbose=1, **TINY).learn(1000, log_interval=2)
    assert capsys.readouterr().out.count("train/n_updates") == 2, "after episodes 2 and 4 of 5"


def test_sb3_methods_without_a_counterpart_say_so():
    model = proxima.TD3("MlpPolicy", "Pendulum-v1", **TINY)
    with pytest.raises(AttributeError, match="networks live in Rust.*get_parameters"):
        model.policy
    assert not hasattr(model, "policy") and model.policy_class == "MlpPolicy"
    with pytest.raises(NotImplementedError, match="load\\(path, env=new_env\\)"):
        model.set_env("Pendulum-v1")
    with pytest.raises(NotImplementedError, match="set_logger is not supported"):
        model.set_logger(None)
    assert model.get_vec_normalize_env() is None


def test_whole_floats_count_as_sb3_takes_them():
    model = proxima.SAC("MlpPolicy", "Pendulum-v1", buffer_size=1e3, **TINY).learn(100.0)
    assert model.buffer_size == 1000 and model.num_timesteps == 100
    with pytest.raises(ValueError, match="total_timesteps must be a whole number"):
        model.learn(1.5)
    with pytest.raises(TypeError, match="total_timesteps must be an integer"):
        model.learn("100")
    with pytest.raises(ValueError, match="buffer_size must be a whole number"):
        proxima.SAC("MlpPolicy", "Pendulum-v1", buffer_size=10.5)


def test_sb3s_policy_class_names_are_the_mlp_policy_and_hints_leave_out_the_cnn():
    from stable_baselines3.sac.policies import SACPolicy
    from stable_baselines3.td3.policies import TD3Policy

    assert proxima.SAC(SACPolicy, "Pendulum-v1", **TINY).policy_class is SACPolicy
    proxima.SAC("SACPolicy", "Pendulum-v1", **TINY)
    proxima.TD3(TD3Policy, "Pendulum-v1", **TINY)
    proxima.DDPG("TD3Policy", "Pendulum-v1", **TINY)  # SB3's DDPG is TD3's policy
    with pytest.raises(ValueError, match="unknown policy 'CnnPolcy'.*supported: 'MlpPolicy', 'MultiInputPolicy'$"):
        proxima.SAC("CnnPolcy", "Pendulum-v1")
    with pytest.raises(ValueError, match="unknown policy 'TD3Policy'"):
        proxima.SAC("TD3Policy", "Pendulum-v1")


def test_hyperparameter_attributes_are_the_algorithms_own(tmp_path):
    """SB3's attributes: SAC's target_entropy resolved as SB3 resolves "auto" (−dim(A)); TD3 and
    DDPG have no entropy attributes, and no attribute of another algorithm answers."""
    sac = proxima.SAC("MlpPolicy", "Pendulum-v1", **TINY)
    assert sac.target_entropy == -1.0 and sac.ent_coef == "auto" and sac.tau == 0.005
    assert proxima.SAC("MlpPolicy", "Pendulum-v1", target_entropy=-0.5, **TINY).target_entropy == -0.5
    sac.save(tmp_path / "sac")
    assert proxima.SAC.load(tmp_path / "sac").target_entropy == -1.0
    td3 = proxima.TD3("MlpPolicy", "Pendulum-v1", **TINY)
    assert td3.tau == 0.005 and td3.policy_delay == 2
    for name in ("ent_coef", "target_entropy", "n_epochs", "gae_lambda"):
        with pytest.raises(AttributeError, match=f"no attribute '{name}': `{name}` .*has no effect with algo = `td3`"):
            getattr(td3, name)
    with pytest.raises(AttributeError, match="no attribute 'n_epochs'"):
        proxima.SAC.load(tmp_path / "sac").n_epochs
    assert not hasattr(proxima.DDPG("MlpPolicy", "Pendulum-v1", **TINY), "ent_coef")

    class ReadsAttributes(BaseCallback):
        """A callback reads them while learn() runs (the model's lock is held then)."""

        def _on_step(self):
            self.seen = (self.model.tau, self.model.gamma, hasattr(self.model, "ent_coef"))
            return True

    reads = ReadsAttributes()
    td3.learn(60, callback=reads)
    assert reads.seen == (0.005, 0.99, False)
