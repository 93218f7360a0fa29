//! Hyperparameters (SB3's names), named presets, and the layering that resolves a run's config:
//! preset → `--config FILE.toml` → `--set key=value` → explicit CLI flags.
//!
//! Configs are data: every key has a default, a doc line and a source. Unknown keys are errors
//! with a "did you mean" suggestion; values are type-checked by serde and range-checked by
//! [`Config::validate`].

pub use crate::algo::sac::EntCoef;
pub use crate::algo::{AdvantageNorm, Objective};
use crate::error::{ProximaError, Result};
pub use crate::optim::OptimizerName;
pub use crate::policy::Backend;
use crate::policy::{Activation, PolicyKind};
use serde::{Deserialize, Serialize};

mod ignored;

/// The algorithms `algo` may name.
pub const ALGOS: [&str; 9] = ["ppo", "a2c", "a3c", "trpo", "reinforce", "ppg", "sac", "td3", "ddpg"];

/// A full training configuration. Field names are Stable-Baselines3's where SB3 has the
/// hyperparameter; the paper's symbols are given in each doc line.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Algorithm: `ppo`, `a2c`, `a3c`, `trpo`, `reinforce`, `ppg`, `sac`, `td3` or `ddpg`.
    pub algo: String,
    /// Name of the preset the config started from (informational).
    pub preset: String,
    /// Seed for network init, action sampling, minibatch shuffling and env resets.
    pub seed: u64,
    /// Environment steps to train for, over all envs (the run ends on the first whole rollout
    /// that reaches it).
    pub total_timesteps: u64,
    /// N: parallel environments.
    pub n_envs: usize,
    /// T: steps per env per rollout. The rollout batch is N·T.
    pub n_steps: usize,
    /// Minibatch size; must divide N·T (SB3's name; CleanRL gives `num_minibatches` instead).
    pub batch_size: usize,
    /// K: epochs over each rollout.
    pub n_epochs: usize,
    /// Adam step size (initial value when annealed).
    pub learning_rate: f64,
    /// Anneal the learning rate linearly to 0 over the run, once per rollout (CleanRL `anneal_lr`).
    pub anneal_lr: bool,
    /// Anneal PPO's ε the same way, ε·α with α from 1 to 0 (the PPO paper's Atari setting,
    /// Table 5: "ε = 0.1 × α"; CleanRL and SB3 keep ε fixed).
    #[serde(default)]
    pub anneal_clip_range: bool,
    /// γ: discount.
    pub gamma: f64,
    /// λ: GAE parameter.
    pub gae_lambda: f64,
    /// ε: clip range of the probability ratio r_t(θ) in L^CLIP.
    pub clip_range: f64,
    /// Clip range of the value prediction around V_old; absent = no value clipping.
    #[serde(default, with = "optional_f64")]
    pub clip_range_vf: Option<f64>,
    /// Where Â is normalised: `minibatch` (default), `batch` or `off`.
    pub normalize_advantage: AdvantageNorm,
    /// c₂: entropy bonus coefficient; for SAC its temperature α: a number (fixed), `"auto"`
    /// (learned from 1) or `"auto_<initial value>"`, as SB3 spells them.
    pub ent_coef: EntCoef,
    /// c₁: value-loss coefficient (the value loss carries a 0.5 factor, as CleanRL/SB3).
    pub vf_coef: f64,
    /// Global gradient-norm clip; absent = none.
    #[serde(default, with = "optional_f64")]
    pub max_grad_norm: Option<f64>,
    /// Stop an update's epochs early when approx KL exceeds 1.5·target_kl (SB3's rule); absent = never.
    #[serde(default, with = "optional_f64")]
    pub target_kl: Option<f64>,
    /// Adam ε (1e-5 for PPO, detail 3 of Huang et al. 2022).
    pub adam_eps: f64,
    /// Normalise observations by running mean/std (SB3 `VecNormalize(norm_obs=True)`).
    #[serde(default)]
    pub normalize_observation: bool,
    /// Scale rewards by the running std of the discounted return (SB3 `VecNormalize(norm_reward=True)`).
    #[serde(default)]
    pub normalize_reward: bool,
    /// Clip of normalised observations (±).
    #[serde(default = "ten")]
    pub clip_obs: f64,
    /// Clip of scaled rewards (±).
    #[serde(default = "ten")]
    pub clip_reward: f64,
    /// Hidden layer widths of each MLP.
    pub net_arch: Vec<usize>,
    /// Hidden activation: `tanh` or `relu`.
    pub activation: Activation,
    /// Share the hidden layers between policy and value heads.
    pub shared_trunk: bool,
    /// Orthogonal initialisation (gains √2 / 0.01 / 1.0).
    pub ortho_init: bool,
    /// Initial Gaussian log-std (continuous actions), in [-20, 20].
    pub log_std_init: f32,
    /// The network, SB3's names: `MlpPolicy` (the MLPs above) or `CnnPolicy` (the Nature CNN
    /// shared by the policy and value heads, for image observations: a uint8 Box `[channels,
    /// height, width]` of at least 36 × 36, pixels scaled by 1/255; `net_arch`, `activation`
    /// and `shared_trunk` are then not used). CnnPolicy trains with PPO, A2C, A3C and
    /// REINFORCE, on candle.
    #[serde(default)]
    pub policy: PolicyKind,
    /// Threads of one run: candle's tensor ops use them (1 is fastest there); the fused backend
    /// runs the actor and critic side by side from 2 (the one-thread result, bit for bit) and
    /// from 4 also splits each minibatch's rows into `threads / 2` shards (gradients added in a
    /// fixed order: bit-reproducible for a given value). Many seeds use `--jobs` instead.
    pub num_threads: usize,
    /// The policy network's implementation: `auto` (the fused CPU kernels for PPO, A2C, A3C and
    /// REINFORCE, candle for TRPO, PPG, SAC, TD3 and DDPG), `fused` or `candle` (every result as
    /// before the fused backend, bit for bit). A saved config without the key was trained on
    /// candle, and resumes there.
    #[serde(default = "candle_backend")]
    pub backend: Backend,
    /// How bridged `gym:` envs are stepped: `off` (default; Proxima steps each env object itself,
    /// one Python call per env per step, as SB3's `DummyVecEnv`), `sync`
    /// (`gymnasium.vector.SyncVectorEnv`: the N envs in one Python call per step) or `async`
    /// (`gymnasium.vector.AsyncVectorEnv`: one subprocess per env, stepped in parallel) or
    /// `subproc` (Proxima's own worker processes, one group of envs per core, raw bytes over
    /// spinning pipes: the parallel mode that pays off for envs as fast as MuJoCo's). All four
    /// give the same results; only the speed differs. Native envs always step in-process.
    #[serde(default)]
    pub vector_env: VectorEnv,
    /// Write a checkpoint every this many updates (0 = only the final model).
    pub checkpoint_freq: usize,
    /// Episodes for the deterministic evaluation at the end of training (0 = none).
    pub eval_episodes: usize,
    /// PPO's objective: `clip` (default), `adaptive_kl`, `fixed_kl` or `none`.
    #[serde(default = "clip")]
    pub objective: Objective,
    /// β: the KL-penalty coefficient (initial value for `adaptive_kl`; the paper's default 1).
    #[serde(default = "one")]
    pub kl_coef: f64,
    /// d_targ: the KL target of `adaptive_kl` (the paper's default 0.01).
    #[serde(default = "kl_target")]
    pub kl_target: f64,
    /// The optimiser: `adam` or `rmsprop`.
    #[serde(default = "adam")]
    pub optimizer: OptimizerName,
    /// RMSprop's smoothing constant α (SB3's A2C: 0.99).
    #[serde(default = "alpha")]
    pub rms_prop_alpha: f64,
    /// RMSprop's ε (SB3's A2C: 1e-5).
    #[serde(default = "eps5")]
    pub rms_prop_eps: f64,
    /// A3C: asynchronous worker threads, each with its own `n_envs` envs and network copy.
    #[serde(default = "two")]
    pub n_workers: usize,
    /// TRPO: conjugate-gradient iterations (sb3-contrib: 15).
    #[serde(default = "fifteen")]
    pub cg_max_steps: usize,
    /// TRPO: damping added to the Fisher-vector product, F + λI (sb3-contrib: 0.1).
    #[serde(default = "damping")]
    pub cg_damping: f64,
    /// TRPO: backtracking factor of the line search (sb3-contrib: 0.8).
    #[serde(default = "shrink")]
    pub line_search_shrinking_factor: f64,
    /// TRPO: most backtracking steps (sb3-contrib: 10).
    #[serde(default = "ten_usize")]
    pub line_search_max_iter: usize,
    /// TRPO: epochs of minibatch (`batch_size`) Adam steps on the value function per rollout
    /// (sb3-contrib: 10). TRPO's KL bound δ is `target_kl`.
    #[serde(default = "ten_usize")]
    pub n_critic_updates: usize,
    /// REINFORCE: subtract a learned baseline V(s) from the Monte-Carlo return G_t (and train V
    /// on G_t), or weight ∇log π by G_t itself.
    #[serde(default = "yes")]
    pub baseline: bool,
    /// SAC, TD3, DDPG: transitions the replay buffer holds (SB3: 1e6).
    #[serde(default = "million")]
    pub buffer_size: usize,
    /// SAC, TD3, DDPG: env steps (over all envs) of uniformly random actions before the first gradient
    /// step (SB3: 100).
    #[serde(default = "hundred")]
    pub learning_starts: u64,
    /// SAC, TD3, DDPG: τ of the target networks' Polyak averaging (SB3: 0.005).
    #[serde(default = "tau")]
    pub tau: f64,
    /// SAC, TD3, DDPG: env steps per env between trainings (SB3: 1).
    #[serde(default = "one_usize")]
    pub train_freq: usize,
    /// SAC, TD3, DDPG: gradient steps per training (SB3: 1).
    #[serde(default = "one_usize")]
    pub gradient_steps: usize,
    /// SAC: gradient steps between target updates (SB3: 1).
    #[serde(default = "one_usize")]
    pub target_update_interval: usize,
    /// SAC: the target entropy H̄ of the learned temperature: `"auto"` (−dim(A), SB3's) or a number.
    #[serde(default, with = "crate::algo::sac::target_entropy_serde")]
    pub target_entropy: Option<f64>,
    /// SAC, TD3, DDPG: checkpoints also write the replay buffer (`<checkpoint>.replay.safetensors`), so that
    /// `--resume` continues bit for bit (SB3's `save_replay_buffer`; without it a resumed run
    /// starts from an empty buffer).
    #[serde(default = "yes")]
    pub save_replay_buffer: bool,
    /// SAC, TD3: the number of Q critics (SB3's `n_critics`, 2; DDPG has 1).
    #[serde(default = "two")]
    pub n_critics: usize,
    /// TD3: gradient steps per actor and target update (SB3: 2).
    #[serde(default = "two")]
    pub policy_delay: usize,
    /// TD3: σ of the target policy smoothing noise (SB3: 0.2).
    #[serde(default = "point_two")]
    pub target_policy_noise: f64,
    /// TD3: the clip of the smoothing noise (SB3: 0.5).
    #[serde(default = "half")]
    pub target_noise_clip: f64,
    /// TD3, DDPG: σ of the Gaussian exploration noise on the actor's action in the scaled
    /// [−1, 1] space (rl-zoo's `noise_std` with `noise_type: normal`; 0 = none, SB3's default).
    #[serde(default = "point_one")]
    pub noise_std: f64,
    /// PPG: N_π, policy-phase iterations (rollouts) per auxiliary phase (CleanRL's
    /// `n_iteration`, the paper's 32).
    #[serde(default = "thirty_two")]
    pub n_iteration: usize,
    /// PPG: E_π, PPO epochs over each policy-phase rollout, policy and value alike (CleanRL's
    /// `e_policy`, 1; PPG's counterpart of `n_epochs`).
    #[serde(default = "one_usize")]
    pub e_policy: usize,
    /// PPG: E_aux, epochs over the auxiliary buffer per auxiliary phase (`e_auxiliary`, 6).
    #[serde(default = "six")]
    pub e_auxiliary: usize,
    /// PPG: β_clone, the weight of the behavioural-cloning KL in the auxiliary loss (1.0).
    #[serde(default = "one")]
    pub beta_clone: f64,
    /// PPG: whole env rollouts (of `n_steps` steps) per auxiliary minibatch (`num_aux_rollouts`, 4).
    #[serde(default = "four")]
    pub num_aux_rollouts: usize,
}

/// Keys that may be absent (`--set key=none` clears them).
pub const OPTIONAL_KEYS: [&str; 3] = ["clip_range_vf", "max_grad_norm", "target_kl"];

/// Largest rollout N·T accepted (transitions held in memory at once).
pub const MAX_ROLLOUT: usize = 1 << 24;
/// Largest number of parallel envs accepted.
pub const MAX_ENVS: usize = 1 << 16;
/// Largest `num_threads` accepted: it sizes rayon's pool (one OS thread each, started at once), so
/// a typo of 100000 would start 100000 threads.
pub const MAX_THREADS: usize = 1024;
/// Most weights between consecutive hidden layers of one network (Σ wᵢ·wᵢ₊₁): 2²⁶ f32 are 256 MiB,
/// and θ, ∇θ, Adam's two moments and the step's scratch are five such copies per network; a
/// width under [`MAX_WIDTH`] alone does not keep `[65536, 65536]` (16 GiB per copy) out.
pub const MAX_HIDDEN_WEIGHTS: usize = 1 << 26;
/// Largest hidden-layer width accepted.
pub const MAX_WIDTH: usize = 1 << 16;

/// Names of the presets, in the order `--help` lists them.
pub const PRESETS: [&str; 13] = [
    "cleanrl",
    "sb3",
    "paper-mujoco",
    "paper-atari",
    "cleanrl-atari",
    "a2c",
    "a3c",
    "trpo",
    "reinforce",
    "ppg",
    "sac",
    "td3",
    "ddpg",
];

/// An integer key given a whole number written as a float (`buffer_size=1e6`, as rl-zoo's YAML
/// and SB3's docs write it) takes its integer value; other floats stay and fail serde's check.
fn whole_floats_as_integers(table: &mut toml::Table, preset: &toml::Table) {
    for (k, v) in table.iter_mut() {
        if let (Some(toml::Value::Integer(_)), toml::Value::Float(f)) = (preset.get(k), &*v) {
            if f.is_finite() && f.fract() == 0.0 && f.abs() < 9.0e15 {
                *v = toml::Value::Integer(*f as i64);
            }
        }
    }
}

impl Config {
    /// The keys a config file or `--set` may name.
    pub fn keys() -> Vec<&'static str> {
        vec![
            "algo",
            "preset",
            "seed",
            "total_timesteps",
            "n_envs",
            "n_steps",
            "batch_size",
            "n_epochs",
            "learning_rate",
            "anneal_lr",
            "anneal_clip_range",
            "gamma",
            "gae_lambda",
            "clip_range",
            "clip_range_vf",
            "normalize_advantage",
            "ent_coef",
            "vf_coef",
            "max_grad_norm",
            "target_kl",
            "adam_eps",
            "normalize_observation",
            "normalize_reward",
            "clip_obs",
            "clip_reward",
            "net_arch",
            "activation",
            "shared_trunk",
            "ortho_init",
            "log_std_init",
            "policy",
            "num_threads",
            "backend",
            "vector_env",
            "checkpoint_freq",
            "eval_episodes",
            "objective",
            "kl_coef",
            "kl_target",
            "optimizer",
            "rms_prop_alpha",
            "rms_prop_eps",
            "n_workers",
            "cg_max_steps",
            "cg_damping",
            "line_search_shrinking_factor",
            "line_search_max_iter",
            "n_critic_updates",
            "baseline",
            "buffer_size",
            "learning_starts",
            "tau",
            "train_freq",
            "gradient_steps",
            "target_update_interval",
            "target_entropy",
            "save_replay_buffer",
            "n_critics",
            "policy_delay",
            "target_policy_noise",
            "target_noise_clip",
            "noise_std",
            "n_iteration",
            "e_policy",
            "e_auxiliary",
            "beta_clone",
            "num_aux_rollouts",
        ]
    }

    /// A named preset. Sources:
    /// * `cleanrl`: CleanRL `ppo.py` defaults (Huang et al. 2022): 4 envs × 128 steps, 4 minibatches,
    ///   4 epochs, lr 2.5e-4 annealed, γ .99, λ .95, ε .2, c₂ .01, c₁ .5, value clipping .2,
    ///   max_grad_norm .5, 500k steps.
    /// * `sb3`: Stable-Baselines3 `PPO` defaults: 1 env × 2048 steps, batch 64, 10 epochs,
    ///   lr 3e-4 constant, ε .2, no value clipping, c₂ 0, c₁ .5, max_grad_norm .5; 1M steps.
    /// * `paper-mujoco`: Schulman et al. 2017, Table 3: T 2048, Adam 3e-4, K 10, minibatch 64,
    ///   γ .99, λ .95, ε .2, 1 env, 1M steps (lr annealed as in CleanRL's continuous PPO).
    /// * `paper-atari`: Schulman et al. 2017, Table 5: 8 actors, T 128, K 3, minibatch 32·8 = 256,
    ///   ε .1, lr 2.5e-4 annealed, c₁ 1.0, c₂ .01, γ .99, λ .95, 10M steps, `CnnPolicy` (the paper
    ///   also anneals ε with α: `anneal_clip_range = true`; kept fixed by default, as CleanRL).
    /// * `cleanrl-atari`: CleanRL `ppo_atari.py`: 8 envs × 128 steps, 4 minibatches (256), 4
    ///   epochs, lr 2.5e-4 annealed, ε .1, value clipping .1, c₁ .5, c₂ .01, max_grad_norm .5,
    ///   10M steps, `CnnPolicy`.
    /// * `a2c`: Stable-Baselines3 `A2C` defaults: 1 env × 5 steps, one gradient step per rollout,
    ///   RMSprop (α .99, ε 1e-5) lr 7e-4 constant, γ .99, λ 1 (n-step returns), c₂ 0, c₁ .5,
    ///   max_grad_norm .5, no advantage normalisation; 1M steps.
    /// * `a3c`: the `a2c` values with `algo = "a3c"` and 2 asynchronous workers (Mnih et al. 2016
    ///   use t_max 5 and a shared RMSprop as here).
    /// * `trpo`: sb3-contrib `TRPO` defaults: 1 env × 2048 steps, δ (`target_kl`) .01, 15 CG
    ///   iterations, damping .1, line search 10 × 0.8, critic: 10 epochs of Adam lr 1e-3 on
    ///   minibatches of 128, γ .99, λ .95, Â normalised over the rollout; 1M steps.
    ///
    /// * `reinforce`: REINFORCE with a learned baseline (Williams 1992; Sutton & Barto 2018,
    ///   §13.4; no library ships one to copy, so these are the textbook's choices at CleanRL's
    ///   scale): 1 env × 2048 steps (well above CartPole's 500-step episodes: only finished
    ///   episodes train), one Adam step per rollout at lr 1e-3 constant, γ .99, weights
    ///   G − V normalised over the rollout, c₁ .5, c₂ 0, no gradient clipping; 500k steps.
    /// * `ppg`: CleanRL's `ppg_procgen.py` defaults (Cobbe et al. 2021's values): 64 envs × 256
    ///   steps, 8 minibatches (2048), lr 5e-4 constant (Adam ε 1e-8), γ .999, λ .95, Â normalised
    ///   over the rollout, ε .2, value clipping .2, c₂ .01, c₁ .5, max_grad_norm .5, reward
    ///   normalisation (clip 10); N_π 32, E_π 1, E_aux 6, β_clone 1, 4 rollouts per auxiliary
    ///   minibatch; 25M steps. The networks are the MLPs of the other presets (CleanRL's is an
    ///   IMPALA CNN for Procgen).
    /// * `sac`: Stable-Baselines3's `SAC` defaults: 1 env, Adam lr 3e-4 (ε 1e-8, PyTorch's), buffer
    ///   1e6, 100 random steps first, batch 256, τ .005, γ .99, one gradient step per env step,
    ///   α learned (`ent_coef = "auto"`, H̄ = −dim(A)), 2×256 ReLU actor and twin critics; 1M steps.
    ///   `n_steps` (100) is only how many env steps one logged iteration takes (and how often a
    ///   Ctrl-C is looked at); a checkpoint every 250 iterations (25k steps).
    /// * `td3`: Stable-Baselines3's `TD3` defaults (lr 1e-3, buffer 1e6, 100 random steps, batch
    ///   256, τ .005, γ .99, `policy_delay` 2, smoothing noise .2 clipped at .5, 400×300 ReLU
    ///   networks) with Gaussian exploration noise σ .1 (SB3 has none by default; rl-zoo and the
    ///   paper add it); 1M steps.
    /// * `ddpg`: Stable-Baselines3's `DDPG`: the `td3` values with one critic, no smoothing noise
    ///   and no delay.
    ///
    /// # Errors
    /// `Config` naming the unknown preset and the known ones.
    //
    // Longer than a screen on purpose: it is the one table of every preset's values, read
    // (and checked against its source) top to bottom; split, it would be harder to compare.
    pub fn preset(name: &str) -> Result<Config> {
        let cleanrl = Config {
            algo: "ppo".into(),
            preset: "cleanrl".into(),
            seed: 1,
            total_timesteps: 500_000,
            n_envs: 4,
            n_steps: 128,
            batch_size: 128,
            n_epochs: 4,
            learning_rate: 2.5e-4,
            anneal_lr: true,
            anneal_clip_range: false,
            gamma: 0.99,
            gae_lambda: 0.95,
            clip_range: 0.2,
            clip_range_vf: Some(0.2),
            normalize_advantage: AdvantageNorm::Minibatch,
            ent_coef: EntCoef::Fixed(0.01),
            vf_coef: 0.5,
            max_grad_norm: Some(0.5),
            target_kl: None,
            adam_eps: 1e-5,
            normalize_observation: false,
            normalize_reward: false,
            clip_obs: 10.0,
            clip_reward: 10.0,
            net_arch: vec![64, 64],
            activation: Activation::Tanh,
            shared_trunk: false,
            ortho_init: true,
            log_std_init: 0.0,
            policy: PolicyKind::MlpPolicy,
            num_threads: 1,
            backend: Backend::Auto,
            vector_env: VectorEnv::Off,
            checkpoint_freq: 100,
            eval_episodes: 10,
            objective: Objective::Clip,
            kl_coef: 1.0,
            kl_target: 0.01,
            optimizer: OptimizerName::Adam,
            rms_prop_alpha: 0.99,
            rms_prop_eps: 1e-5,
            n_workers: 2,
            cg_max_steps: 15,
            cg_damping: 0.1,
            line_search_shrinking_factor: 0.8,
            line_search_max_iter: 10,
            n_critic_updates: 10,
            baseline: true,
            buffer_size: 1_000_000,
            learning_starts: 100,
            tau: 0.005,
            train_freq: 1,
            gradient_steps: 1,
            target_update_interval: 1,
            target_entropy: None,
            save_replay_buffer: true,
            n_critics: 2,
            policy_delay: 2,
            target_policy_noise: 0.2,
            target_noise_clip: 0.5,
            noise_std: 0.1,
            n_iteration: 32,
            e_policy: 1,
            e_auxiliary: 6,
            beta_clone: 1.0,
            num_aux_rollouts: 4,
        };
        Ok(match name {
            "cleanrl" => cleanrl,
            "sb3" => Config {
                preset: "sb3".into(),
                total_timesteps: 1_000_000,
                n_envs: 1,
                n_steps: 2048,
                batch_size: 64,
                n_epochs: 10,
                learning_rate: 3e-4,
                anneal_lr: false,
                clip_range_vf: None,
                ent_coef: EntCoef::Fixed(0.0),
                ..cleanrl
            },
            "paper-mujoco" => Config {
                preset: "paper-mujoco".into(),
                total_timesteps: 1_000_000,
                n_envs: 1,
                n_steps: 2048,
                batch_size: 64,
                n_epochs: 10,
                learning_rate: 3e-4,
                anneal_lr: true,
                clip_range_vf: None,
                ent_coef: EntCoef::Fixed(0.0),
                normalize_observation: true,
                normalize_reward: true,
                ..cleanrl
            },
            "a2c" | "a3c" => Config {
                algo: name.into(),
                preset: name.into(),
                total_timesteps: 1_000_000,
                n_envs: 1,
                n_steps: 5,
                batch_size: 5,
                n_epochs: 1,
                learning_rate: 7e-4,
                anneal_lr: false,
                gae_lambda: 1.0,
                clip_range_vf: None,
                normalize_advantage: AdvantageNorm::Off,
                ent_coef: EntCoef::Fixed(0.0),
                optimizer: OptimizerName::Rmsprop,
                ..cleanrl
            },
            "trpo" => Config {
                algo: "trpo".into(),
                preset: "trpo".into(),
                total_timesteps: 1_000_000,
                n_envs: 1,
                n_steps: 2048,
                batch_size: 128,
                n_epochs: 1,
                learning_rate: 1e-3,
                anneal_lr: false,
                clip_range_vf: None,
                normalize_advantage: AdvantageNorm::Batch,
                ent_coef: EntCoef::Fixed(0.0),
                max_grad_norm: None,
                target_kl: Some(0.01),
                ..cleanrl
            },
            "reinforce" => Config {
                algo: "reinforce".into(),
                preset: "reinforce".into(),
                n_envs: 1,
                n_steps: 2048,
                batch_size: 2048,
                n_epochs: 1,
                learning_rate: 1e-3,
                anneal_lr: false,
                clip_range_vf: None,
                normalize_advantage: AdvantageNorm::Batch,
                ent_coef: EntCoef::Fixed(0.0),
                max_grad_norm: None,
                ..cleanrl
            },
            "ppg" => Config {
                algo: "ppg".into(),
                preset: "ppg".into(),
                total_timesteps: 25_000_000,
                n_envs: 64,
                n_steps: 256,
                batch_size: 2048,
                learning_rate: 5e-4,
                anneal_lr: false,
                gamma: 0.999,
                normalize_advantage: AdvantageNorm::Batch,
                adam_eps: 1e-8,
                normalize_reward: true,
                ..cleanrl
            },
            "sac" => Config {
                algo: "sac".into(),
                preset: "sac".into(),
                total_timesteps: 1_000_000,
                n_envs: 1,
                n_steps: 100,
                batch_size: 256,
                n_epochs: 1,
                learning_rate: 3e-4,
                anneal_lr: false,
                clip_range_vf: None,
                ent_coef: EntCoef::Auto(1.0),
                max_grad_norm: None,
                adam_eps: 1e-8,
                net_arch: vec![256, 256],
                activation: Activation::Relu,
                ortho_init: false,
                checkpoint_freq: 250,
                ..cleanrl
            },
            "td3" | "ddpg" => Config {
                algo: name.into(),
                preset: name.into(),
                total_timesteps: 1_000_000,
                n_envs: 1,
                n_steps: 100,
                batch_size: 256,
                n_epochs: 1,
                learning_rate: 1e-3,
                anneal_lr: false,
                clip_range_vf: None,
                ent_coef: EntCoef::Fixed(0.0),
                max_grad_norm: None,
                adam_eps: 1e-8,
                net_arch: vec![400, 300],
                activation: Activation::Relu,
                ortho_init: false,
                checkpoint_freq: 250,
                policy_delay: if name == "td3" { 2 } else { 1 },
                target_policy_noise: if name == "td3" { 0.2 } else { 0.0 },
                target_noise_clip: if name == "td3" { 0.5 } else { 0.0 },
                n_critics: if name == "td3" { 2 } else { 1 },
                ..cleanrl
            },
            "paper-atari" => Config {
                preset: "paper-atari".into(),
                total_timesteps: 10_000_000,
                n_envs: 8,
                n_steps: 128,
                batch_size: 256,
                n_epochs: 3,
                learning_rate: 2.5e-4,
                anneal_lr: true,
                clip_range: 0.1,
                clip_range_vf: None,
                ent_coef: EntCoef::Fixed(0.01),
                vf_coef: 1.0,
                policy: PolicyKind::CnnPolicy,
                ..cleanrl
            },
            "cleanrl-atari" => Config {
                preset: "cleanrl-atari".into(),
                total_timesteps: 10_000_000,
                n_envs: 8,
                n_steps: 128,
                batch_size: 256,
                n_epochs: 4,
                clip_range: 0.1,
                clip_range_vf: Some(0.1),
                policy: PolicyKind::CnnPolicy,
                ..cleanrl
            },
            other => {
                let hint = crate::did_you_mean::closest(other, &PRESETS)
                    .map(|s| format!(" (did you mean `{s}`?)"))
                    .unwrap_or_default();
                return Err(ProximaError::Config(format!(
                    "unknown preset `{other}`{hint}; presets: {}",
                    PRESETS.join(", ")
                )));
            }
        })
    }

    /// Resolves a config: `preset`, then the TOML text of a config file (if any; an `env_id`
    /// key there, as a run's `config.toml` records it, is ignored), then
    /// `key=value` overrides (values in TOML syntax; a bare word is taken as a string, and
    /// `none` clears an optional key), then validation.
    ///
    /// # Errors
    /// `Config` for an unknown preset or key (with a suggestion), malformed TOML, a value of
    /// the wrong type, or a value out of range.
    pub fn resolve(preset: &str, file_toml: Option<&str>, sets: &[String]) -> Result<Config> {
        Self::resolve_over(preset, file_toml, sets, 1)
    }

    /// [`Config::resolve`] for a run over `ranks` processes ([`Config::validate_over`]).
    ///
    /// # Errors
    /// As [`Config::resolve`].
    pub fn resolve_over(preset: &str, file_toml: Option<&str>, sets: &[String], ranks: usize) -> Result<Config> {
        let base = Config::preset(preset)?;
        let mut table = toml::Table::try_from(&base).map_err(|e| ProximaError::Config(e.to_string()))?;
        let preset_table = table.clone();
        if let Some(text) = file_toml {
            let file: toml::Table = text.parse().map_err(|e: toml::de::Error| {
                let at = e.span().map(|r| {
                    let before = &text[..r.start.min(text.len())];
                    format!(
                        " at line {}, column {}",
                        before.matches('\n').count() + 1,
                        before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1
                    )
                });
                ProximaError::Config(format!(
                    "malformed TOML{}: {}",
                    at.unwrap_or_default(),
                    e.message().trim().replace('\n', "; ")
                ))
            })?;
            for (k, v) in file {
                if k == "env_id" {
                    continue; // recorded in a run's config.toml for reference; the command line names the env
                }
                check_key(&k)?;
                table.insert(k, v);
            }
        }
        for s in sets {
            let (k, v) =
                s.split_once('=').ok_or_else(|| ProximaError::Config(format!("`--set {s}`: expected key=value")))?;
            let (k, v) = (k.trim(), v.trim());
            check_key(k)?;
            // `none` clears an optional key; elsewhere it is a value (`objective=none`).
            if OPTIONAL_KEYS.contains(&k) && (v.eq_ignore_ascii_case("none") || v.is_empty()) {
                table.remove(k);
                continue;
            }
            let value = match format!("x = {v}").parse::<toml::Table>() {
                Ok(mut t) => t.remove("x").expect("parsed key"),
                Err(_) => toml::Value::String(v.to_string()),
            };
            table.insert(k.to_string(), value);
        }
        whole_floats_as_integers(&mut table, &preset_table);
        let cfg: Config = toml::Value::Table(table)
            .try_into()
            .map_err(|e: toml::de::Error| ProximaError::Config(e.to_string().trim().replace('\n', " ")))?;
        cfg.validate_over(ranks)?;
        Ok(cfg)
    }

    /// The keys a resolve of `preset`, `file_toml` and `sets` sets by the user's choice (the
    /// input of [`Config::check_keys_used`]): every `--set` key, and a file's keys whose value
    /// differs from the preset's (a run's own `config.toml` lists every key; those at the
    /// preset's value are no choice). Unreadable input gives no keys: [`Config::resolve`]
    /// reports it.
    pub fn chosen_keys(preset: &str, file_toml: Option<&str>, sets: &[String]) -> Vec<String> {
        let mut keys: Vec<String> =
            sets.iter().filter_map(|s| s.split_once('=')).map(|(k, _)| k.trim().to_string()).collect();
        let base = Config::preset(preset).ok().and_then(|c| toml::Table::try_from(&c).ok()).unwrap_or_default();
        if let Some(file) = file_toml.and_then(|t| t.parse::<toml::Table>().ok()) {
            keys.extend(file.into_iter().filter(|(k, v)| k != "env_id" && base.get(k) != Some(v)).map(|(k, _)| k));
        }
        keys
    }

    /// The backend the run's policy is on: `backend`, with `auto` resolved (candle for TRPO, PPG,
    /// fused for the others).
    pub fn resolved_backend(&self) -> Backend {
        match self.backend {
            Backend::Auto
                if matches!(self.algo.as_str(), "trpo" | "ppg")
                    || self.is_off_policy()
                    || self.policy == PolicyKind::CnnPolicy =>
            {
                Backend::Candle
            }
            Backend::Auto => Backend::Fused,
            b => b,
        }
    }

    /// Range checks that serde cannot express.
    ///
    /// # Errors
    /// `Config` naming the first offending key, its value, and what is allowed.
    pub fn validate(&self) -> Result<()> {
        self.validate_over(1)
    }

    /// [`Config::validate`] for a run over `ranks` processes, each stepping `n_envs` envs (a
    /// distributed run, [`crate::distributed`]): `batch_size` is the global minibatch, so it must divide
    /// the whole rollout `n_steps × n_envs × ranks`, not each rank's.
    ///
    /// # Errors
    /// As [`Config::validate`].
    pub fn validate_over(&self, ranks: usize) -> Result<()> {
        self.validate_algo()?;
        self.validate_sizes(ranks.max(1))?;
        self.validate_coefficients()?;
        self.validate_counters()
    }

    /// The algorithm and its own settings.
    fn validate_algo(&self) -> Result<()> {
        let bad = |m: String| Err(ProximaError::Config(m));
        if !ALGOS.contains(&self.algo.as_str()) {
            let hint = crate::did_you_mean::closest(&self.algo, &ALGOS)
                .map(|s| format!(" (did you mean `{s}`?)"))
                .unwrap_or_default();
            return bad(format!("algo = `{}`{hint}: known algorithms are {}", self.algo, ALGOS.join(", ")));
        }
        if self.policy == PolicyKind::CnnPolicy {
            if !matches!(self.algo.as_str(), "ppo" | "a2c" | "a3c" | "reinforce") {
                return bad(format!(
                    "policy = `CnnPolicy` trains with ppo, a2c, a3c and reinforce; algo = `{}` has MLP networks only",
                    self.algo
                ));
            }
            if self.backend == Backend::Fused {
                return bad("backend = `fused` covers MLP policies; policy = `CnnPolicy` runs on candle: use backend = `auto` or `candle`".into());
            }
        }
        if self.algo == "trpo" && self.target_kl.is_none() {
            return bad("algo = `trpo` needs target_kl (its KL bound δ; sb3-contrib uses 0.01)".into());
        }
        if self.algo == "trpo" && self.backend == Backend::Fused {
            return bad("backend = `fused` does not cover algo = `trpo` (its Fisher-vector products need candle's forward-mode derivatives): use backend = `auto` or `candle`".into());
        }
        if self.algo == "trpo" && self.shared_trunk {
            return bad("algo = `trpo` needs separate policy and value networks (shared_trunk = false): the natural-gradient step must not move the critic".into());
        }
        if self.algo == "a3c" && self.vector_env != VectorEnv::Off {
            return bad("algo = `a3c` does not support vector_env = `sync` / `async` / `subproc` (each worker makes one env object per env): use vector_env = `off`".into());
        }
        if self.algo == "a3c" && (self.normalize_observation || self.normalize_reward) {
            return bad("algo = `a3c` does not support normalize_observation / normalize_reward (each worker would keep its own statistics)".into());
        }
        if self.is_off_policy() {
            self.validate_off_policy()?;
        }
        if self.algo == "ppg" {
            self.validate_ppg()?;
        }
        if self.n_workers == 0 || self.n_workers > 256 {
            return bad(format!("n_workers = {}: must be between 1 and 256", self.n_workers));
        }
        for (k, v) in [
            ("cg_max_steps", self.cg_max_steps),
            ("line_search_max_iter", self.line_search_max_iter),
            ("n_critic_updates", self.n_critic_updates),
        ] {
            if v == 0 {
                return bad(format!("{k} = 0: must be at least 1"));
            }
        }
        Ok(())
    }

    /// PPG's own settings, and what it does not support.
    fn validate_ppg(&self) -> Result<()> {
        let bad = |m: String| Err(ProximaError::Config(m));
        if self.backend == Backend::Fused {
            return bad("backend = `fused` does not cover algo = `ppg` (its auxiliary value head and loss are on candle): use backend = `auto` or `candle`".into());
        }
        if self.shared_trunk {
            return bad("algo = `ppg` trains separate policy and value networks (shared_trunk = false): the auxiliary phase distils the value into the policy network's own head".into());
        }
        for (k, v) in [
            ("n_iteration", self.n_iteration),
            ("e_policy", self.e_policy),
            ("e_auxiliary", self.e_auxiliary),
            ("num_aux_rollouts", self.num_aux_rollouts),
        ] {
            if v == 0 || v > 1 << 20 {
                return bad(format!("{k} = {v}: must be between 1 and {}", 1 << 20));
            }
        }
        if !(self.beta_clone.is_finite() && self.beta_clone >= 0.0) {
            return bad(format!("beta_clone = {}: must be a finite number ≥ 0", self.beta_clone));
        }
        let held = (self.n_steps * self.n_envs).checked_mul(self.n_iteration).filter(|&r| r <= MAX_ROLLOUT);
        if held.is_none() {
            return bad(format!(
                "n_iteration × n_steps × n_envs = {} × {} × {}: the auxiliary buffer would exceed {MAX_ROLLOUT} transitions",
                self.n_iteration, self.n_steps, self.n_envs
            ));
        }
        let rollouts = self.n_iteration * self.n_envs;
        if self.num_aux_rollouts > rollouts {
            return bad(format!(
                "num_aux_rollouts = {}: the auxiliary buffer holds n_iteration × n_envs = {} × {} = {rollouts} env rollouts, so a minibatch cannot take more",
                self.num_aux_rollouts, self.n_iteration, self.n_envs
            ));
        }
        Ok(())
    }

    /// Whether `algo` is an off-policy algorithm (SAC, TD3, DDPG).
    pub fn is_off_policy(&self) -> bool {
        matches!(self.algo.as_str(), "sac" | "td3" | "ddpg")
    }

    /// The off-policy algorithms' own settings, and what they do not support.
    fn validate_off_policy(&self) -> Result<()> {
        let bad = |m: String| Err(ProximaError::Config(m));
        let algo = &self.algo;
        if self.backend == Backend::Fused {
            return bad(format!("backend = `fused` does not cover algo = `{algo}` (its networks are on candle): use backend = `auto` or `candle`"));
        }
        if self.normalize_observation || self.normalize_reward {
            return bad(format!("algo = `{algo}` does not support normalize_observation / normalize_reward yet (the replay buffer would hold observations normalised by changing statistics)"));
        }
        if self.optimizer != OptimizerName::Adam {
            return bad(format!("algo = `{algo}` trains with Adam (optimizer = `adam`)"));
        }
        if self.activation != Activation::Relu || self.ortho_init || self.shared_trunk {
            return bad(format!("algo = `{algo}` builds SB3's networks: ReLU layers (activation = `relu`), PyTorch's default initialisation (ortho_init = false), separate actor and critics (shared_trunk = false); this config asks otherwise (an on-policy preset?): use --preset {algo}"));
        }
        if self.n_critics == 0 || self.n_critics > 16 {
            return bad(format!("n_critics = {}: must be between 1 and 16", self.n_critics));
        }
        if self.policy_delay == 0 {
            return bad("policy_delay = 0: must be at least 1".into());
        }
        for (k, v) in [
            ("target_policy_noise", self.target_policy_noise),
            ("target_noise_clip", self.target_noise_clip),
            ("noise_std", self.noise_std),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return bad(format!("{k} = {v}: must be a finite number ≥ 0"));
            }
        }
        if !(self.tau > 0.0 && self.tau <= 1.0) {
            return bad(format!("tau = {}: must lie in (0, 1]", self.tau));
        }
        for (k, v) in [
            ("buffer_size", self.buffer_size),
            ("train_freq", self.train_freq),
            ("gradient_steps", self.gradient_steps),
            ("target_update_interval", self.target_update_interval),
            ("batch_size", self.batch_size),
        ] {
            if v == 0 {
                return bad(format!("{k} = 0: must be at least 1"));
            }
        }
        if self.learning_starts >= self.total_timesteps {
            return bad(format!(
                "learning_starts = {} is not below total_timesteps = {}: the run would end before its first gradient step",
                self.learning_starts, self.total_timesteps
            ));
        }
        match self.ent_coef {
            EntCoef::Auto(a) if !(a.is_finite() && a > 0.0) => {
                return bad(format!("ent_coef = `auto_{a}`: the initial α must be a finite number > 0"))
            }
            _ => {}
        }
        if self.target_entropy.is_some_and(|h| !h.is_finite()) {
            return bad("target_entropy must be finite (or `auto`)".into());
        }
        Ok(())
    }

    /// Counts, widths and the rollout's shape, with the bounds that keep a typo from turning
    /// into an out-of-memory abort.
    fn validate_sizes(&self, ranks: usize) -> Result<()> {
        let bad = |m: String| Err(ProximaError::Config(m));
        for (k, v) in [
            ("n_envs", self.n_envs),
            ("n_steps", self.n_steps),
            ("batch_size", self.batch_size),
            ("n_epochs", self.n_epochs),
            ("num_threads", self.num_threads),
        ] {
            if v == 0 {
                return bad(format!("{k} = 0: must be at least 1"));
            }
        }
        if self.net_arch.is_empty() || self.net_arch.contains(&0) {
            return bad(format!("net_arch = {:?}: needs at least one hidden layer, all widths ≥ 1", self.net_arch));
        }
        if self.n_envs > MAX_ENVS {
            return bad(format!("n_envs = {}: at most {MAX_ENVS}", self.n_envs));
        }
        if self.num_threads > MAX_THREADS {
            return bad(format!("num_threads = {}: at most {MAX_THREADS}", self.num_threads));
        }
        if let Some(w) = self.net_arch.iter().find(|w| **w > MAX_WIDTH) {
            return bad(format!("net_arch = {:?}: layer width {w} exceeds {MAX_WIDTH}", self.net_arch));
        }
        let hidden_weights: usize = self.net_arch.windows(2).map(|w| w[0] * w[1]).sum();
        if hidden_weights > MAX_HIDDEN_WEIGHTS {
            return bad(format!(
                "net_arch = {:?}: {hidden_weights} weights between hidden layers per network exceed {MAX_HIDDEN_WEIGHTS}",
                self.net_arch
            ));
        }
        let rollout = match self.n_steps.checked_mul(self.n_envs) {
            Some(r) if r <= MAX_ROLLOUT => r,
            _ => {
                return bad(format!(
                    "n_steps × n_envs = {} × {} exceeds {MAX_ROLLOUT} transitions per rollout",
                    self.n_steps, self.n_envs
                ))
            }
        };
        // A2C, A3C and REINFORCE take one step on the whole rollout: no minibatch size to check.
        // SAC draws its batches from the replay buffer.
        let one_batch = matches!(self.algo.as_str(), "a2c" | "a3c" | "reinforce") || self.is_off_policy();
        let whole = rollout * ranks;
        if !one_batch && (!whole.is_multiple_of(self.batch_size) || self.batch_size > whole) {
            return bad(match ranks {
                1 => format!(
                    "batch_size = {} does not divide the rollout n_steps × n_envs = {} × {} = {rollout}",
                    self.batch_size, self.n_steps, self.n_envs
                ),
                _ => format!(
                    "batch_size = {} does not divide the whole rollout n_steps × n_envs × ranks = {} × {} × {ranks} = {whole} (in a distributed run batch_size is the global minibatch)",
                    self.batch_size, self.n_steps, self.n_envs
                ),
            });
        }
        Ok(())
    }

    /// Learning rates, clip ranges, coefficients and the other real-valued settings.
    fn validate_coefficients(&self) -> Result<()> {
        let bad = |m: String| Err(ProximaError::Config(m));
        let finite_pos = |k: &str, v: f64| {
            if v.is_finite() && v > 0.0 {
                Ok(())
            } else {
                bad(format!("{k} = {v}: must be a finite number > 0"))
            }
        };
        finite_pos("learning_rate", self.learning_rate)?;
        finite_pos("clip_range", self.clip_range)?;
        finite_pos("adam_eps", self.adam_eps)?;
        finite_pos("clip_obs", self.clip_obs)?;
        finite_pos("clip_reward", self.clip_reward)?;
        finite_pos("kl_coef", self.kl_coef)?;
        finite_pos("kl_target", self.kl_target)?;
        finite_pos("rms_prop_eps", self.rms_prop_eps)?;
        finite_pos("cg_damping", self.cg_damping)?;
        for (k, v) in [
            ("rms_prop_alpha", self.rms_prop_alpha),
            ("line_search_shrinking_factor", self.line_search_shrinking_factor),
        ] {
            if !(v > 0.0 && v < 1.0) {
                return bad(format!("{k} = {v}: must lie in (0, 1)"));
            }
        }
        for (k, v) in [
            ("clip_range_vf", self.clip_range_vf),
            ("max_grad_norm", self.max_grad_norm),
            ("target_kl", self.target_kl),
        ] {
            if let Some(v) = v {
                finite_pos(k, v)?;
            }
        }
        for (k, v) in [("gamma", self.gamma), ("gae_lambda", self.gae_lambda)] {
            if !(0.0..=1.0).contains(&v) {
                return bad(format!("{k} = {v}: must lie in [0, 1]"));
            }
        }
        if self.algo != "sac" && matches!(self.ent_coef, EntCoef::Auto(_)) {
            return bad(
                "ent_coef = `auto` is SAC's learned temperature; the other algorithms take a number (c₂)".into()
            );
        }
        for (k, v) in [("ent_coef", self.ent_coef.value()), ("vf_coef", self.vf_coef)] {
            if !v.is_finite() || v < 0.0 {
                return bad(format!("{k} = {v}: must be a finite number ≥ 0"));
            }
        }
        if !(-LOG_STD_LIMIT..=LOG_STD_LIMIT).contains(&self.log_std_init) {
            return bad(format!(
                "log_std_init = {}: must lie in [-{LOG_STD_LIMIT}, {LOG_STD_LIMIT}] (σ from 2e-9 to 5e8; beyond it σ² leaves f32's range in the Gaussian's log-probability — SB3's SAC clamps log σ to [-20, 2])",
                self.log_std_init
            ));
        }
        Ok(())
    }

    /// The seed and the step budget.
    fn validate_counters(&self) -> Result<()> {
        let bad = |m: String| Err(ProximaError::Config(m));
        for (k, v) in [("seed", self.seed), ("total_timesteps", self.total_timesteps)] {
            if v > i64::MAX as u64 {
                return bad(format!("{k} = {v}: must be below 2^63 (TOML integers are signed 64-bit)"));
            }
        }
        if self.total_timesteps == 0 {
            return bad("total_timesteps = 0: must be at least 1".into());
        }
        Ok(())
    }

    /// The config as TOML (what a run directory's `config.toml` holds).
    pub fn to_toml(&self) -> String {
        toml::to_string(self).expect("a Config always serialises")
    }

    /// N·T / batch_size: minibatches per epoch.
    pub fn n_minibatches(&self) -> usize {
        self.n_steps * self.n_envs / self.batch_size
    }
}

fn ten() -> f64 {
    10.0
}

/// Optional numbers are written as a number or the string `"none"`, so a run's `config.toml`
/// records "off" explicitly instead of leaving the key out (a missing key would take the
/// preset's value again when the file is fed back or resumed).
mod optional_f64 {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &Option<f64>, s: S) -> std::result::Result<S::Ok, S::Error> {
        match v {
            Some(x) => s.serialize_f64(*x),
            None => s.serialize_str("none"),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<f64>, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum V {
            F(f64),
            I(i64),
            S(String),
        }
        match V::deserialize(d)? {
            V::F(x) => Ok(Some(x)),
            V::I(i) => Ok(Some(i as f64)),
            V::S(s) if s.eq_ignore_ascii_case("none") => Ok(None),
            V::S(s) => Err(serde::de::Error::custom(format!("expected a number or \"none\", got {s:?}"))),
        }
    }
}
fn clip() -> Objective {
    Objective::Clip
}
/// The largest |log_std_init| accepted: σ = e^±20 keeps σ² (≈ 2e17, or its reciprocal) inside
/// f32's range in the Gaussian's log-probability and its gradient.
const LOG_STD_LIMIT: f32 = 20.0;

/// The config's `vector_env` key (see [`Config::vector_env`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VectorEnv {
    /// Each bridged env stepped by Proxima, one call per env.
    #[default]
    Off,
    /// `gymnasium.vector.SyncVectorEnv` for bridged envs.
    Sync,
    /// `gymnasium.vector.AsyncVectorEnv` for bridged envs.
    Async,
    /// Proxima's own subprocess workers for bridged envs (`proxima_gym::SubprocVectorEnv`).
    Subproc,
}

/// What trained a run whose saved config predates the `backend` key.
fn candle_backend() -> Backend {
    Backend::Candle
}

fn million() -> usize {
    1_000_000
}

fn hundred() -> u64 {
    100
}

fn tau() -> f64 {
    0.005
}

fn one_usize() -> usize {
    1
}

fn point_two() -> f64 {
    0.2
}

fn half() -> f64 {
    0.5
}

fn point_one() -> f64 {
    0.1
}

fn yes() -> bool {
    true
}

fn one() -> f64 {
    1.0
}
fn kl_target() -> f64 {
    0.01
}
fn adam() -> OptimizerName {
    OptimizerName::Adam
}
fn alpha() -> f64 {
    0.99
}
fn eps5() -> f64 {
    1e-5
}
fn two() -> usize {
    2
}
fn four() -> usize {
    4
}
fn six() -> usize {
    6
}
fn thirty_two() -> usize {
    32
}
fn fifteen() -> usize {
    15
}
fn damping() -> f64 {
    0.1
}
fn shrink() -> f64 {
    0.8
}
fn ten_usize() -> usize {
    10
}

fn check_key(k: &str) -> Result<()> {
    let keys = Config::keys();
    if keys.contains(&k) {
        return Ok(());
    }
    let hint = crate::did_you_mean::closest(k, &keys).map(|s| format!(" (did you mean `{s}`?)")).unwrap_or_default();
    Err(ProximaError::Config(format!("unknown key `{k}`{hint}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_are_valid_and_round_trip_through_toml() {
        for p in PRESETS {
            let c = Config::preset(p).unwrap();
            c.validate().unwrap();
            let back = Config::resolve(p, Some(&c.to_toml()), &[]).unwrap();
            assert_eq!(back, c, "{p}");
        }
        // A run's config.toml is complete: fed back on top of *another* preset it gives the same
        // config, optional keys that are off included (they are written as "none").
        for p in PRESETS {
            let c = Config::preset(p).unwrap();
            assert_eq!(Config::resolve("cleanrl", Some(&c.to_toml()), &[]).unwrap(), c, "{p} over cleanrl");
        }
        assert!(Config::preset("trpo").unwrap().to_toml().contains("max_grad_norm = \"none\""));
        let e = Config::resolve("cleanrl", Some("max_grad_norm = \"off\""), &[]).unwrap_err().to_string();
        assert!(e.contains("expected a number or \"none\""), "{e}");
        let c = Config::preset("cleanrl").unwrap();
        assert_eq!((c.n_envs, c.n_steps, c.n_minibatches(), c.n_epochs), (4, 128, 4, 4));
        assert_eq!(Config::preset("paper-atari").unwrap().n_minibatches(), 4);
        assert_eq!(Config::preset("paper-mujoco").unwrap().n_minibatches(), 32);
    }

    #[test]
    fn layering_and_errors() {
        let c = Config::resolve(
            "cleanrl",
            Some("n_epochs = 7\nclip_range = 0.1"),
            &["n_epochs=9".into(), "clip_range_vf=none".into()],
        )
        .unwrap();
        assert_eq!((c.n_epochs, c.clip_range, c.clip_range_vf), (9, 0.1, None));
        let e = Config::resolve("cleanrl", None, &["n_step=5".into()]).unwrap_err().to_string();
        assert!(e.contains("n_step") && e.contains("did you mean `n_steps`"), "{e}");
        let e = Config::resolve("cleanrl", None, &["batch_size=100".into()]).unwrap_err().to_string();
        assert!(e.contains("batch_size = 100"), "{e}");
        let c = Config::resolve("sac", Some("learning_starts = 1e3"), &["buffer_size=1e6".into()]).unwrap();
        assert_eq!((c.buffer_size, c.learning_starts), (1_000_000, 1000), "whole floats for integer keys");
        let e = Config::resolve("sac", None, &["buffer_size=1000.5".into()]).unwrap_err().to_string();
        assert!(e.contains("buffer_size"), "not a whole number: refused: {e}");
        let e = Config::resolve("cleanrl", None, &["learning_rate=fast".into()]).unwrap_err().to_string();
        assert!(e.contains("learning_rate"), "{e}");
        let e = Config::resolve("cleanrl", Some("gamma = ["), &[]).unwrap_err().to_string();
        assert!(e.contains("malformed TOML"), "{e}");
        let e = Config::resolve("cleanrl", None, &["gamma=1.5".into()]).unwrap_err().to_string();
        assert!(e.contains("gamma"), "{e}");
        assert!(Config::resolve("clenrl", None, &[]).unwrap_err().to_string().contains("did you mean `cleanrl`"));
        for v in ["50", "-20.5", "nan", "inf"] {
            let e = Config::resolve("cleanrl", None, &[format!("log_std_init={v}")]).unwrap_err().to_string();
            assert!(e.contains("log_std_init") && e.contains("[-20, 20]"), "log_std_init = {v}: {e}");
        }
        for v in ["20", "-20", "-0.5"] {
            assert!(Config::resolve("cleanrl", None, &[format!("log_std_init={v}")]).is_ok(), "log_std_init = {v}");
        }
    }
}
