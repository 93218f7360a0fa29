//! The [`Config`] struct: every key a run takes, its type and its doc line; for a key added
//! after the first release, the value a config saved without it takes ([`super::legacy`]).
//! Also what the struct says by itself: its keys, its TOML, and the quantities it implies.

use super::legacy;
use super::{AdvantageNorm, AlgoName, Backend, EntCoef, Objective, OptimizerName};
use crate::policy::{Activation, PolicyKind};
use serde::{Deserialize, Serialize};

/// A full training configuration. Field names are Stable-Baselines3's where SB3 has the
/// hyperparameter; the paper's symbols are given in each doc line.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Algorithm: `ppo`, `a2c`, `a3c`, `trpo`, `reinforce`, `ppg`, `sac`, `td3` or `ddpg`.
    pub algo: AlgoName,
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
    /// Log d = mean KL[π_θold, π_θ] over the whole rollout after each PPO update (progress.csv's
    /// `kl_divergence`): one more forward pass over every observation of the rollout, which SB3
    /// and CleanRL do not make (small for an MLP, a tenth of the update for the Nature CNN, so
    /// the Atari presets turn it off and write NaN there). The adaptive-KL objective computes it
    /// either way: its β follows d.
    #[serde(default = "legacy::log_kl_divergence")]
    pub log_kl_divergence: bool,
    /// Invalid-action masking (sb3-contrib's `MaskablePPO`, `use_masking`): when the envs have an
    /// `action_masks()` method, PPO takes the masked actions' logits to −10⁸ before the softmax
    /// while collecting, in the loss, its entropy and its KL. `false` trains without the masks.
    /// Runs saved before this key trained without masks.
    #[serde(default)]
    pub use_masking: bool,
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
    /// `normalize_observation` over a `Dict`/`Tuple` observation: only the values of these
    /// top-level keys (a `Tuple`'s indices as text), the others passed through unchanged (SB3
    /// `VecNormalize(norm_obs_keys=...)`). Empty (the default): every value.
    #[serde(default)]
    pub norm_obs_keys: Vec<String>,
    /// Scale rewards by the running std of the discounted return (SB3 `VecNormalize(norm_reward=True)`).
    #[serde(default)]
    pub normalize_reward: bool,
    /// Clip of normalised observations (±).
    #[serde(default = "legacy::clip_obs")]
    pub clip_obs: f64,
    /// Clip of scaled rewards (±).
    #[serde(default = "legacy::clip_reward")]
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
    /// REINFORCE, on either backend. Recurrent PPO (sb3-contrib's names, candle only):
    /// `MlpLstmPolicy` (an LSTM or GRU stack before the MLPs) and `CnnLstmPolicy` (the Nature
    /// CNN's features into the stack, the heads on its outputs).
    #[serde(default)]
    pub policy: PolicyKind,
    /// `MlpLstmPolicy` and `CnnLstmPolicy` (recurrent PPO): hidden units of each recurrent
    /// layer (sb3-contrib's `lstm_hidden_size`).
    #[serde(default = "legacy::lstm_hidden_size")]
    pub lstm_hidden_size: usize,
    /// `MlpLstmPolicy`: stacked recurrent layers (`n_lstm_layers`).
    #[serde(default = "legacy::n_lstm_layers")]
    pub n_lstm_layers: usize,
    /// `MlpLstmPolicy`: the critic reads the actor's recurrent outputs, without their gradient
    /// (`shared_lstm`).
    #[serde(default)]
    pub shared_lstm: bool,
    /// `MlpLstmPolicy`: the critic has a recurrent stack of its own (`enable_critic_lstm`).
    #[serde(default = "legacy::enable_critic_lstm")]
    pub enable_critic_lstm: bool,
    /// `MlpLstmPolicy`: `lstm` (sb3-contrib's) or `gru` cells.
    #[serde(default)]
    pub recurrent_cell: crate::policy::recurrent::CellKind,
    /// Threads of one run: candle's tensor ops use them (1 is fastest there); the fused backend
    /// runs the actor and critic side by side from 2 (the one-thread result, bit for bit) and
    /// from 4 also splits each minibatch's rows into `threads / 2` shards (gradients added in a
    /// fixed order: bit-reproducible for a given value). Many seeds use `--jobs` instead.
    pub num_threads: usize,
    /// The policy network's implementation: `auto` (the fused CPU kernels for PPO, A2C, A3C,
    /// REINFORCE, SAC, TD3, DDPG and TQC; candle for TRPO and PPG), `fused` or `candle` (every result as
    /// before the fused backend, bit for bit). A saved config without the key was trained on
    /// candle, and resumes there.
    #[serde(default = "legacy::backend")]
    pub backend: Backend,
    /// How bridged `gym:` envs are stepped: `off` (default; Proxima steps each env object itself,
    /// one Python call per env per step, as SB3's `DummyVecEnv`), `sync`
    /// (`gymnasium.vector.SyncVectorEnv`: the N envs in one Python call per step) or `async`
    /// (`gymnasium.vector.AsyncVectorEnv`: one subprocess per env, stepped in parallel) or
    /// `subproc` (Proxima's own worker processes, one group of envs per core, raw bytes over
    /// spinning pipes: the parallel mode that pays off for envs as fast as MuJoCo's). All four
    /// give the same results; only the speed differs. `atari:` envs take `off` or `subproc` (the
    /// games of one group per core stepped in worker processes of the CLI: ALE keeps Python's
    /// lock while it emulates). Native envs always step in-process.
    #[serde(default)]
    pub vector_env: VectorEnv,
    /// Write a checkpoint every this many updates (0 = only the final model).
    pub checkpoint_freq: usize,
    /// Episodes for the deterministic evaluation at the end of training (0 = none).
    pub eval_episodes: usize,
    /// PPO's objective: `clip` (default), `adaptive_kl`, `fixed_kl` or `none`.
    #[serde(default = "legacy::objective")]
    pub objective: Objective,
    /// β: the KL-penalty coefficient (initial value for `adaptive_kl`; the paper's default 1).
    #[serde(default = "legacy::kl_coef")]
    pub kl_coef: f64,
    /// d_targ: the KL target of `adaptive_kl` (the paper's default 0.01).
    #[serde(default = "legacy::kl_target")]
    pub kl_target: f64,
    /// The optimiser: `adam` or `rmsprop`.
    #[serde(default = "legacy::optimizer")]
    pub optimizer: OptimizerName,
    /// RMSprop's smoothing constant α (SB3's A2C: 0.99).
    #[serde(default = "legacy::rms_prop_alpha")]
    pub rms_prop_alpha: f64,
    /// RMSprop's ε (SB3's A2C: 1e-5).
    #[serde(default = "legacy::rms_prop_eps")]
    pub rms_prop_eps: f64,
    /// A3C: asynchronous worker threads, each with its own `n_envs` envs and network copy.
    #[serde(default = "legacy::n_workers")]
    pub n_workers: usize,
    /// TRPO: conjugate-gradient iterations (sb3-contrib: 15).
    #[serde(default = "legacy::cg_max_steps")]
    pub cg_max_steps: usize,
    /// TRPO: damping added to the Fisher-vector product, F + λI (sb3-contrib: 0.1).
    #[serde(default = "legacy::cg_damping")]
    pub cg_damping: f64,
    /// TRPO: backtracking factor of the line search (sb3-contrib: 0.8).
    #[serde(default = "legacy::line_search_shrinking_factor")]
    pub line_search_shrinking_factor: f64,
    /// TRPO: most backtracking steps (sb3-contrib: 10).
    #[serde(default = "legacy::line_search_max_iter")]
    pub line_search_max_iter: usize,
    /// TRPO: epochs of minibatch (`batch_size`) Adam steps on the value function per rollout
    /// (sb3-contrib: 10). TRPO's KL bound δ is `target_kl`.
    #[serde(default = "legacy::n_critic_updates")]
    pub n_critic_updates: usize,
    /// REINFORCE: subtract a learned baseline V(s) from the Monte-Carlo return G_t (and train V
    /// on G_t), or weight ∇log π by G_t itself.
    #[serde(default = "legacy::baseline")]
    pub baseline: bool,
    /// SAC, TD3, DDPG: transitions the replay buffer holds (SB3: 1e6).
    #[serde(default = "legacy::buffer_size")]
    pub buffer_size: usize,
    /// SAC, TD3, DDPG: env steps (over all envs) of uniformly random actions before the first gradient
    /// step (SB3: 100).
    #[serde(default = "legacy::learning_starts")]
    pub learning_starts: u64,
    /// SAC, TD3, DDPG: τ of the target networks' Polyak averaging (SB3: 0.005).
    #[serde(default = "legacy::tau")]
    pub tau: f64,
    /// SAC, TD3, DDPG: env steps per env between trainings (SB3: 1).
    #[serde(default = "legacy::train_freq")]
    pub train_freq: usize,
    /// SAC, TD3, DDPG: gradient steps per training (SB3: 1).
    #[serde(default = "legacy::gradient_steps")]
    pub gradient_steps: usize,
    /// SAC: gradient steps between target updates (SB3: 1).
    #[serde(default = "legacy::target_update_interval")]
    pub target_update_interval: usize,
    /// SAC: the target entropy H̄ of the learned temperature: `"auto"` (−dim(A), SB3's) or a number.
    #[serde(default, with = "crate::algo::sac::target_entropy_serde")]
    pub target_entropy: Option<f64>,
    /// SAC, TD3, DDPG: checkpoints also write the replay buffer (`<checkpoint>.replay.safetensors`), so that
    /// `--resume` continues bit for bit (SB3's `save_replay_buffer`; without it a resumed run
    /// starts from an empty buffer).
    #[serde(default = "legacy::save_replay_buffer")]
    pub save_replay_buffer: bool,
    /// SAC, TD3, TQC: the number of Q critics (SB3's `n_critics`, 2; DDPG has 1).
    #[serde(default = "legacy::n_critics")]
    pub n_critics: usize,
    /// TQC: quantiles per critic (sb3-contrib's `n_quantiles`, 25).
    #[serde(default = "legacy::n_quantiles")]
    pub n_quantiles: usize,
    /// TQC: the top quantiles of each critic the pooled target leaves out (sb3-contrib's
    /// `top_quantiles_to_drop_per_net`, 2).
    #[serde(default = "legacy::top_quantiles_to_drop_per_net")]
    pub top_quantiles_to_drop_per_net: usize,
    /// TD3: gradient steps per actor and target update (SB3: 2).
    #[serde(default = "legacy::policy_delay")]
    pub policy_delay: usize,
    /// TD3: σ of the target policy smoothing noise (SB3: 0.2).
    #[serde(default = "legacy::target_policy_noise")]
    pub target_policy_noise: f64,
    /// TD3: the clip of the smoothing noise (SB3: 0.5).
    #[serde(default = "legacy::target_noise_clip")]
    pub target_noise_clip: f64,
    /// TD3, DDPG: σ of the Gaussian exploration noise on the actor's action in the scaled
    /// [−1, 1] space (rl-zoo's `noise_std` with `noise_type: normal`; 0 = none, SB3's default).
    #[serde(default = "legacy::noise_std")]
    pub noise_std: f64,
    /// PPG: N_π, policy-phase iterations (rollouts) per auxiliary phase (CleanRL's
    /// `n_iteration`, the paper's 32).
    #[serde(default = "legacy::n_iteration")]
    pub n_iteration: usize,
    /// PPG: E_π, PPO epochs over each policy-phase rollout, policy and value alike (CleanRL's
    /// `e_policy`, 1; PPG's counterpart of `n_epochs`).
    #[serde(default = "legacy::e_policy")]
    pub e_policy: usize,
    /// PPG: E_aux, epochs over the auxiliary buffer per auxiliary phase (`e_auxiliary`, 6).
    #[serde(default = "legacy::e_auxiliary")]
    pub e_auxiliary: usize,
    /// PPG: β_clone, the weight of the behavioural-cloning KL in the auxiliary loss (1.0).
    #[serde(default = "legacy::beta_clone")]
    pub beta_clone: f64,
    /// PPG: whole env rollouts (of `n_steps` steps) per auxiliary minibatch (`num_aux_rollouts`, 4).
    #[serde(default = "legacy::num_aux_rollouts")]
    pub num_aux_rollouts: usize,
}

/// Keys that may be absent (`--set key=none` clears them).
pub const OPTIONAL_KEYS: [&str; 3] = ["clip_range_vf", "max_grad_norm", "target_kl"];

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

impl VectorEnv {
    /// The config's spelling (`off`, `sync`, `async`, `subproc`).
    pub fn as_str(self) -> &'static str {
        match self {
            VectorEnv::Off => "off",
            VectorEnv::Sync => "sync",
            VectorEnv::Async => "async",
            VectorEnv::Subproc => "subproc",
        }
    }
}

impl std::str::FromStr for VectorEnv {
    type Err = crate::ProximaError;

    /// The config's spelling, as `--vector-env` takes it.
    ///
    /// # Errors
    /// `Config` naming the four for any other word.
    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        [VectorEnv::Off, VectorEnv::Sync, VectorEnv::Async, VectorEnv::Subproc]
            .into_iter()
            .find(|v| v.as_str() == s)
            .ok_or_else(|| {
                crate::ProximaError::Config(format!("unknown vector_env `{s}`: off, sync, async or subproc"))
            })
    }
}

impl Config {
    /// The keys a config file or `--set` may name: the struct's fields in declaration order,
    /// as its `Deserialize` reads them (so a new field is a new key, with nothing else to
    /// update).
    pub fn keys() -> Vec<&'static str> {
        field_names::<Config>().to_vec()
    }

    /// The config as TOML (what a run directory's `config.toml` holds): every key, in
    /// declaration order; an absent optional number is written `"none"`.
    pub fn to_toml(&self) -> String {
        toml::to_string(self).expect("a Config always serialises")
    }

    /// N·T / batch_size: minibatches per epoch.
    pub fn n_minibatches(&self) -> usize {
        self.n_steps * self.n_envs / self.batch_size
    }

    /// Whether `algo` is an off-policy algorithm (SAC, TD3, DDPG).
    pub fn is_off_policy(&self) -> bool {
        self.algo.is_off_policy()
    }

    /// The backend the run's policy is on: `backend`, with `auto` resolved (candle for TRPO, PPG,
    /// fused for the others; a recurrent policy on `fused` is the candle actor-critic with its
    /// recurrent layers on the fused kernels).
    pub fn resolved_backend(&self) -> Backend {
        match self.backend {
            Backend::Auto if matches!(self.algo, AlgoName::Trpo | AlgoName::Ppg) => Backend::Candle,
            Backend::Auto => Backend::Fused,
            b => b,
        }
    }
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

/// The field names `T`'s derived `Deserialize` asks for (serde hands them to
/// `deserialize_struct`); empty for a type that is not a struct.
fn field_names<'de, T: Deserialize<'de>>() -> &'static [&'static str] {
    use serde::de::{Error, Visitor};

    /// A deserializer that only records the field names it is asked for, then stops.
    struct FieldNames<'a>(&'a mut &'static [&'static str]);

    impl<'de> serde::Deserializer<'de> for FieldNames<'_> {
        type Error = serde::de::value::Error;

        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
            Err(Error::custom("not a struct"))
        }

        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Self::Error> {
            *self.0 = fields;
            Err(Error::custom("field names recorded"))
        }

        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
            option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
            ignored_any
        }
    }

    let mut fields: &'static [&'static str] = &[];
    let _ = T::deserialize(FieldNames(&mut fields));
    fields
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::PRESETS;

    #[test]
    fn keys_are_the_struct_fields_and_the_toml_writes_each_once() {
        let keys = Config::keys();
        assert_eq!(keys.len(), 77);
        assert_eq!((keys[0], keys[76]), ("algo", "num_aux_rollouts"), "declaration order");
        let mut unique = keys.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), keys.len(), "no key twice");
        for p in PRESETS {
            // Every key written, optional ones included ("none", "auto"), and nothing else.
            let table: toml::Table = Config::preset(p).unwrap().to_toml().parse().unwrap();
            let mut written: Vec<&str> = table.keys().map(String::as_str).collect();
            written.sort_unstable();
            assert_eq!(written, unique, "{p}");
        }
        for k in OPTIONAL_KEYS {
            assert!(keys.contains(&k), "{k}");
            let c = Config::resolve("cleanrl", None, &[format!("{k}=none")]).unwrap();
            assert!(c.to_toml().contains(&format!("{k} = \"none\"")), "{k}");
        }
    }
}
