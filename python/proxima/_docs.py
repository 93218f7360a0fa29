"""The parameter documentation of the algorithms, in SB3's ``:param name: ...`` style and wording
(sb3-contrib's for TRPO), with what Proxima accepts, refuses or does differently after "Proxima:".

``class_doc`` builds a class's docstring from its signature: every parameter of ``__init__`` must have
an entry here (a missing one is a ``KeyError`` at import), so ``help(proxima.PPO)`` explains each.
"""

from __future__ import annotations

import inspect
import textwrap
from typing import Callable

_NOT_YET = "Proxima: only the default is supported yet; another value raises ``NotImplementedError``."

#: What every algorithm shares.
COMMON = {
    "policy": """The policy model to use (MlpPolicy, CnnPolicy, ...). Proxima: ``"MlpPolicy"`` (or
        ``"ActorCriticPolicy"``); ``"CnnPolicy"`` (or ``"ActorCriticCnnPolicy"``, PPO and A2C): the Nature
        CNN shared by both heads, for image observations (channel-last images are transposed, as SB3's
        ``VecTransposeImage`` does); ``"MultiInputPolicy"``: Dict (and Tuple) observations, each key flattened
        and an image key through a Nature CNN of its own (SB3's ``CombinedExtractor``).
        ``RecurrentPPO`` takes sb3-contrib's ``"MlpLstmPolicy"``, ``"CnnLstmPolicy"`` and
        ``"MultiInputLstmPolicy"``. A class is read by its ``__name__``; an unknown name is a
        ``ValueError``.""",
    "env": """The environment to learn from (if registered in Gym, can be str). Proxima: a native id
        (``proxima.NATIVE_ENV_IDS``, stepped in Rust with no Python in the loop), any other Gymnasium id
        (``"gym:ID"`` makes Gymnasium's env even for a native id), an ``"atari:GAME"`` id (Proxima's Atari
        wrappers in Rust), a Gymnasium ``Env``, a list of envs or of env factories, a Gymnasium vector env,
        or an SB3 ``VecEnv`` (not ``VecNormalize``: use ``normalize_observation=True``). ``get_env()``
        returns it as a vector env with SB3's ``VecEnv`` API. ``None``: no model is built.""",
    "learning_rate": """The learning rate, it can be a function of the current progress remaining (from
        1 to 0). Proxima: a schedule is evaluated before each rollout; a saved model keeps its current
        value, not the function (pass it again to ``load`` in ``custom_objects``).""",
    "gamma": "Discount factor",
    "use_sde": "Whether to use generalized State Dependent Exploration (gSDE) instead of action noise "
               "exploration (default: False). " + _NOT_YET,
    "sde_sample_freq": "Sample a new noise matrix every n steps when using gSDE. Default: -1 (only sample at "
                       "the beginning of the rollout). " + _NOT_YET,
    "stats_window_size": "Window size for the rollout logging, specifying the number of episodes to average "
                         "the reported success rate, mean episode length, and mean reward over. " + _NOT_YET,
    "tensorboard_log": """the log location for tensorboard (if None, no logging). Proxima: each ``learn``
        writes ``{tensorboard_log}/{tb_log_name}_{i}`` (SB3's layout) with the CLI's scalar tags; no
        tensorboard package is needed.""",
    "verbose": """Verbosity level: 0 for no output, 1 for info messages (SB3's table of the logger's
        keys every ``log_interval`` iterations), 2 for debug messages (Proxima: as 1)""",
    "seed": """Seed for the pseudo random generators. Proxima: the one seed of the run (envs, network
        initialisation, sampling); the same seed and settings give the same run bit for bit. ``None``: a
        random seed, kept in ``model.seed``. An int (``TypeError`` otherwise).""",
    "device": """Device (cpu, cuda, ...) on which the code should be run. Proxima: trains on the CPU;
        ``"auto"`` and ``"cpu"`` are accepted, another device raises ``NotImplementedError``.""",
    "_init_setup_model": "Whether or not to build the network at the creation of the instance. " + _NOT_YET,
    "kwargs": """Proxima's own config keys (``proxima.CONFIG_KEYS``), e.g. ``n_envs=8`` (for an env id;
        with env objects their number is the number of envs), ``normalize_observation=True``,
        ``normalize_reward=True``, ``anneal_lr=True``, ``backend="candle"``, ``num_threads=2``. A key
        another algorithm reads, or one the settings make unused, raises ``ValueError``; an unknown one
        ``TypeError`` (with the closest name).""",
}

#: PPO, A2C and TRPO (SB3's ``OnPolicyAlgorithm``).
ON_POLICY = {
    "n_steps": """The number of steps to run for each environment per update (i.e. rollout buffer size is
        n_steps * n_envs where n_envs is number of environment copies running in parallel)""",
    "batch_size": """Minibatch size. Proxima: it must divide ``n_steps * n_envs`` (``ValueError``
        otherwise; SB3 warns and uses a smaller last minibatch).""",
    "n_epochs": "Number of epoch when optimizing the surrogate loss",
    "gae_lambda": "Factor for trade-off of bias vs variance for Generalized Advantage Estimator",
    "clip_range": """Clipping parameter, it can be a function of the current progress remaining (from 1
        to 0).""",
    "clip_range_vf": """Clipping parameter for the value function, it can be a function of the current
        progress remaining (from 1 to 0). This is a parameter specific to the OpenAI implementation. If
        None is passed (default), no clipping will be done on the value function. Proxima: a float or
        None; a function raises ``NotImplementedError``.""",
    "normalize_advantage": "Whether to normalize or not the advantage",
    "ent_coef": "Entropy coefficient for the loss calculation",
    "vf_coef": "Value function coefficient for the loss calculation",
    "max_grad_norm": "The maximum value for the gradient clipping. Proxima: ``None`` turns clipping off.",
    "rollout_buffer_class": "Rollout buffer class to use. If ``None``, it will be automatically selected. "
                            "Proxima: its rollout buffer is built in; a class raises ``NotImplementedError``.",
    "rollout_buffer_kwargs": "Keyword arguments to pass to the rollout buffer on creation. Proxima: "
                             "``NotImplementedError`` unless ``None``.",
    "target_kl": """Limit the KL divergence between updates, because the clipping is not enough to prevent
        large update (see https://github.com/hill-a/stable-baselines/issues/213). By default, there is no
        limit on the kl div. Proxima: as SB3, the epochs stop early at a minibatch whose approximate KL
        exceeds ``1.5 * target_kl``.""",
    "policy_kwargs": """additional arguments to be passed to the policy on creation. Proxima:
        ``net_arch`` (a list of hidden widths, or ``dict(pi=..., vf=...)`` with equal ``pi`` and ``vf``),
        ``activation_fn`` (``torch.nn.Tanh``/``torch.nn.ReLU`` or ``"tanh"``/``"relu"``), ``ortho_init``,
        ``log_std_init``, ``share_features_extractor`` (either value gives SB3's MLP) and Proxima's
        ``shared_trunk`` (one trunk for both heads). Another key of SB3's policies raises
        ``NotImplementedError``; a key they lack raises ``TypeError``, as SB3's policy does.""",
}

A2C = {
    "n_steps": """The number of steps to run for each environment per update (i.e. batch size is
        n_steps * n_env where n_env is number of environment copies running in parallel)""",
    "gae_lambda": """Factor for trade-off of bias vs variance for Generalized Advantage Estimator.
        Equivalent to classic advantage when set to 1.""",
    "rms_prop_eps": "RMSProp epsilon. It stabilizes square root computation in denominator of RMSProp update",
    "use_rms_prop": "Whether to use RMSprop (default) or Adam as optimizer",
}

TRPO = {
    "learning_rate": """The learning rate for the value function, it can be a function of the current
        progress remaining (from 1 to 0). Proxima: a schedule is evaluated before each rollout.""",
    "batch_size": """Minibatch size for the value function. Proxima: it must divide ``n_steps * n_envs``.""",
    "cg_max_steps": "maximum number of steps in the Conjugate Gradient algorithm for computing the Hessian "
                    "vector product",
    "cg_damping": "damping in the Hessian vector product computation",
    "line_search_shrinking_factor": "step-size reduction factor for the line-search (i.e., "
                                    "``theta_new = theta + alpha^i * step``)",
    "line_search_max_iter": "maximum number of iteration for the backtracking line-search",
    "n_critic_updates": "number of critic updates per policy update",
    "target_kl": "Target Kullback-Leibler divergence between updates. Should be small for stability. "
                 "Values like 0.01, 0.05.",
    "sub_sampling_factor": "Sub-sample the batch to make computation faster, see p40-42 of John Schulman "
                           "thesis http://joschu.net/docs/thesis.pdf. " + _NOT_YET,
}

#: SAC, TD3 and DDPG (SB3's ``OffPolicyAlgorithm``).
OFF_POLICY = {
    "policy": """The policy model to use (MlpPolicy, CnnPolicy, ...). Proxima: ``"MlpPolicy"``; the
        networks are SB3's ReLU MLPs with PyTorch's default initialisation.""",
    "env": COMMON["env"] + " Proxima: the action space must be a ``Box``.",
    "learning_rate": """learning rate for adam optimizer, the same learning rate will be used for all
        networks (Q-Values, Actor and Value function) it can be a function of the current progress
        remaining (from 1 to 0). Proxima: a schedule is evaluated every logged iteration.""",
    "buffer_size": "size of the replay buffer (transitions; a positive int, ``ValueError`` otherwise)",
    "learning_starts": "how many steps of the model to collect transitions for before learning starts",
    "batch_size": "Minibatch size for each gradient update",
    "tau": 'the soft update coefficient ("Polyak update", between 0 and 1)',
    "gamma": "the discount factor",
    "train_freq": """Update the model every ``train_freq`` steps. Alternatively pass a tuple of frequency
        and unit like ``(5, "step")`` or ``(2, "episode")``. Proxima: episodes raise
        ``NotImplementedError``.""",
    "gradient_steps": """How many gradient steps to do after each rollout (see ``train_freq``). Set to
        ``-1`` means to do as many gradient steps as steps done in the environment during the rollout.
        Proxima: ``-1`` raises ``NotImplementedError``; give the number.""",
    "action_noise": """the action noise type (None by default), this can help for hard exploration
        problem. Cf common.noise for the different action noise type. Proxima: ``None`` or SB3's
        ``NormalActionNoise`` with zero mean and one sigma for every dimension (added in the [-1, 1]-scaled
        action space, as SB3 adds it); other noises raise ``NotImplementedError``. Not for SAC.""",
    "replay_buffer_class": "Replay buffer class to use (for instance ``HerReplayBuffer``). If ``None``, it "
                           "will be automatically selected. Proxima: the replay buffer is built in; a class "
                           "raises ``NotImplementedError``.",
    "replay_buffer_kwargs": "Keyword arguments to pass to the replay buffer on creation. Proxima: "
                            "``NotImplementedError`` unless ``None``.",
    "optimize_memory_usage": "Enable a memory efficient variant of the replay buffer at a cost of more "
                             "complexity. " + _NOT_YET,
    "n_steps": """When n_step > 1, uses n-step return when updating the Q-value network. Proxima: only 1
        (one-step targets); another value raises ``NotImplementedError``. (The CLI's ``n_steps`` key of
        these algorithms is another thing: the env steps of one logged iteration.)""",
    "policy_kwargs": """additional arguments to be passed to the policy on creation. Proxima:
        ``net_arch`` (a list, or ``dict(pi=..., qf=...)`` with equal ``pi`` and ``qf``), ``n_critics``,
        ``activation_fn`` (ReLU only) and ``share_features_extractor``. Another key of SB3's policies
        raises ``NotImplementedError``; a key they lack raises ``TypeError``.""",
}

SAC = {
    "ent_coef": """Entropy regularization coefficient. (Equivalent to inverse of reward scale in the
        original SAC paper.) Controlling exploration/exploitation trade-off. Set it to 'auto' to learn it
        automatically (and 'auto_0.1' for using 0.1 as initial value)""",
    "target_update_interval": "update the target network every ``target_network_update_freq`` gradient steps.",
    "target_entropy": "target entropy when learning ``ent_coef`` (``ent_coef = 'auto'``)",
    "use_sde_at_warmup": "Whether to use gSDE instead of uniform sampling during the warm up phase (before "
                         "learning starts). " + _NOT_YET,
}

TQC = {
    "top_quantiles_to_drop_per_net": """Number of quantiles to drop per network. Proxima: below the
        ``n_quantiles`` of ``policy_kwargs`` (25), else ``ValueError``.""",
    "policy_kwargs": """additional arguments to be passed to the policy on creation. Proxima: SAC's
        (``net_arch``, ``n_critics``, ``activation_fn`` ReLU only, ``share_features_extractor``) and
        ``n_quantiles``, the quantiles per critic (25). Another key of SB3's policies raises
        ``NotImplementedError``; a key they lack raises ``TypeError``.""",
}

TD3 = {
    "policy_delay": """Policy and target networks will only be updated once every policy_delay steps per
        training steps. The Q values will be updated policy_delay more often (update every training
        step).""",
    "target_policy_noise": "Standard deviation of Gaussian noise added to target policy (smoothing noise)",
    "target_noise_clip": "Limit for absolute value of target policy smoothing noise.",
}

#: ``learn`` (SB3's ``BaseAlgorithm.learn``).
LEARN = {
    "total_timesteps": """The total number of samples (env steps) to train on. Proxima: a positive int
        (``TypeError``/``ValueError`` otherwise); training stops at the first whole iteration
        (``n_steps * n_envs`` steps) at or beyond it.""",
    "callback": """callback(s) called at every step with state of the algorithm: a
        ``proxima.callbacks.BaseCallback``, a list of them, or a function ``f(locals, globals) -> bool``.
        SB3's own callback classes raise ``TypeError`` (use ``proxima.callbacks``'s, same names). Without
        a callback no Python runs per step.""",
    "log_interval": """for on-policy algos (e.g., PPO, A2C, ...) this is the number of training iterations
        (i.e., log_interval * n_steps * n_envs timesteps) before logging; for off-policy algos (e.g.,
        TD3, SAC, ...) this is the number of episodes before logging. Proxima: iterations for both (an
        off-policy iteration is 100 env steps).""",
    "tb_log_name": "the name of the run for TensorBoard logging",
    "reset_num_timesteps": "whether or not to reset the current timestep number (used in logging)",
    "progress_bar": "Display a progress bar (tqdm when installed, else a plain bar on stderr).",
}

PREDICT = {
    "observation": """the input observation: one observation or a batch ``(n, *shape)``; an image in
        either channel layout. Proxima: what ``env.reset()`` returns as a pair (observation, info) raises
        ``TypeError``, a wrong shape or a non-numeric array ``ValueError``/``TypeError``.""",
    "state": "The last hidden states (can be None, used in recurrent policies). Returned unchanged.",
    "episode_start": "The last masks (can be None, used in recurrent policies). Not used.",
    "deterministic": "Whether or not to return deterministic actions.",
}

SAVE = {
    "path": """path to the file where the rl agent should be saved. Proxima: a safetensors file, written
        atomically (a file already there is replaced whole or not at all); ``.safetensors`` is added to a
        path without a suffix, missing folders are made. An empty path or an existing directory raises
        ``ValueError``.""",
    "exclude": "name of parameters that should be excluded in addition to the default ones. Proxima: the "
               "file always holds the whole model; a value raises ``NotImplementedError``.",
    "include": "name of parameters that might be excluded but should be included anyway. Proxima: as "
               "``exclude``.",
}

LOAD = {
    "path": """path to the file where to load the agent from: a file ``save`` wrote (with or without its
        ``.safetensors``), a CLI checkpoint, or a CLI run directory. An empty path raises ``ValueError``,
        a missing file ``FileNotFoundError``, another algorithm's file ``ValueError``.""",
    "env": """the new environment to run the loaded model on (can be None if you only need prediction
        from a trained model). Proxima: as the constructor's ``env``; training goes on from the file's
        weights, optimiser state, counters and normalisation statistics, with new episodes.""",
    "device": "Device on which the code should run. Proxima: ``\"auto\"`` or ``\"cpu\"``.",
    "custom_objects": """Dictionary of objects to replace upon loading. Proxima: ``learning_rate`` and
        ``clip_range`` (floats or schedules) replace the saved values; other keys raise
        ``NotImplementedError``.""",
    "print_system_info": "Whether to print system info (Proxima's version, Python's, the platform).",
    "force_reset": "Force call to ``reset()`` before training to avoid unexpected behavior. Proxima: the "
                   "envs always start new episodes; ``False`` raises ``NotImplementedError``.",
    "kwargs": """extra arguments to change the model when loading: ``verbose``, ``tensorboard_log`` and
        Proxima's config keys (e.g. ``n_envs=8``, ``ent_coef=0.01``; these need ``env``).""",
}


def _entry(name: str, text: str) -> str:
    body = textwrap.dedent("        " + text.strip()).strip()
    lines = textwrap.wrap(f":param {name}: {body}", width=100, subsequent_indent="    ")
    return "\n".join(lines)


def params_doc(fn: Callable, *tables: dict[str, str]) -> str:
    """``:param name: ...`` for each parameter of ``fn`` but ``self``/``cls`` (the first table that
    has it wins; none: ``KeyError``)."""
    out = []
    for name in inspect.signature(fn).parameters:
        if name in ("self", "cls"):
            continue
        table = next((t for t in tables if name in t), None)
        if table is None:
            raise KeyError(f"{fn.__qualname__}: parameter {name!r} has no documentation in proxima._docs")
        out.append(_entry(name, table[name]))
    return "\n".join(out)


def with_params(doc: str, fn: Callable, *tables: dict[str, str], returns: str = "", notes: str = "") -> str:
    """``doc`` (a summary) and ``notes``, then the parameters of ``fn`` and, when given, ``:return:``."""
    text = "\n\n".join(p for p in (inspect.cleandoc(doc), notes, params_doc(fn, *tables)) if p)
    return text + (f"\n:return: {returns}" if returns else "")


ON_POLICY_NOTES = """The training runs in Rust with the GIL released. Keyword arguments beyond SB3's are
Proxima's config keys (``**kwargs``). ``get_env()`` returns the env as SB3's ``VecEnv``."""

OFF_POLICY_NOTES = ON_POLICY_NOTES + """

Proxima: ``learn``'s ``callback`` has ``_on_step`` after every env step, as SB3's; ``on_rollout_start``
/ ``on_rollout_end`` run around each logged iteration of 100 env steps (SB3: every ``train_freq``
steps). A ``save`` from inside a callback writes the current weights with the optimiser state and
counters of that iteration's start; between ``learn`` calls it is exact. The replay buffer is not in
the saved file (``proxima train`` checkpoints keep it beside them; ``save_replay_buffer`` is not
offered yet)."""
