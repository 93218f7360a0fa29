//! Validation: the range and combination checks serde cannot express, run once, giving a
//! [`ValidConfig`] that a run's constructors take as it is (`Trainer::new` and the others
//! accept a [`Config`] too, and validate it on the way in).

use super::{AlgoName, Backend, Config, EntCoef, OptimizerName, VectorEnv};
use crate::error::{ProximaError, Result};
use crate::policy::{Activation, PolicyKind};
use std::ops::Deref;

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
/// Most stacked recurrent layers accepted (`n_lstm_layers`).
pub const MAX_RECURRENT_LAYERS: usize = 256;
/// The whole-number keys that must be at least 1 (a count or a size), so that a negative value's
/// message says ≥ 1 as a zero's does.
pub(super) const COUNTS_FROM_ONE: [&str; 16] = [
    "n_envs",
    "n_steps",
    "batch_size",
    "n_epochs",
    "num_threads",
    "n_workers",
    "cg_max_steps",
    "line_search_max_iter",
    "n_critic_updates",
    "n_critics",
    "policy_delay",
    "buffer_size",
    "train_freq",
    "gradient_steps",
    "target_update_interval",
    "total_timesteps",
];

/// The largest |log_std_init| accepted: σ = e^±20 keeps σ² (≈ 2e17, or its reciprocal) inside
/// f32's range in the Gaussian's log-probability and its gradient.
const LOG_STD_LIMIT: f32 = 20.0;

/// A [`Config`] that passed [`Config::validate_over`] for a run over [`ValidConfig::ranks`]
/// processes. It reads as the config (`Deref`) and cannot be changed in place: a changed config
/// is validated again ([`ValidConfig::into_config`], edit, [`Config::validate`]).
#[derive(Clone, Debug, PartialEq)]
pub struct ValidConfig {
    config: Config,
    ranks: usize,
}

impl ValidConfig {
    /// The config, to change (then validate again) or to store.
    pub fn into_config(self) -> Config {
        self.config
    }

    /// The processes of the run it was validated for (1 unless distributed).
    pub fn ranks(&self) -> usize {
        self.ranks
    }
}

impl Deref for ValidConfig {
    type Target = Config;

    fn deref(&self) -> &Config {
        &self.config
    }
}

/// What a run's constructors take: a [`ValidConfig`], used as it is, or a [`Config`], validated
/// on the way in; so a run's config is validated once wherever it was resolved.
pub trait IntoValidConfig {
    /// The config, valid for a run over `ranks` processes.
    ///
    /// # Errors
    /// As [`Config::validate_over`], for a [`Config`], or a [`ValidConfig`] validated for
    /// another number of processes (it is validated again).
    fn into_valid_config(self, ranks: usize) -> Result<ValidConfig>;
}

impl IntoValidConfig for Config {
    fn into_valid_config(self, ranks: usize) -> Result<ValidConfig> {
        self.validate_over(ranks)
    }
}

impl IntoValidConfig for ValidConfig {
    fn into_valid_config(self, ranks: usize) -> Result<ValidConfig> {
        match self.ranks == ranks.max(1) {
            true => Ok(self),
            false => self.config.validate_over(ranks),
        }
    }
}

impl Config {
    /// Checks the ranges and combinations serde cannot express, for a run of one process.
    ///
    /// # Errors
    /// `Config` naming the first offending key, its value, and what is allowed.
    pub fn validate(self) -> Result<ValidConfig> {
        self.validate_over(1)
    }

    /// [`Config::validate`] for a run over `ranks` processes, each stepping `n_envs` envs (a
    /// distributed run, [`crate::distributed`]): `batch_size` is the global minibatch, so it must divide
    /// the whole rollout `n_steps × n_envs × ranks`, not each rank's. `ranks` 0 counts as 1.
    ///
    /// # Errors
    /// As [`Config::validate`].
    pub fn validate_over(self, ranks: usize) -> Result<ValidConfig> {
        let ranks = ranks.max(1);
        self.check_algo()?;
        self.check_recurrent(ranks)?;
        self.check_sizes(ranks)?;
        self.check_coefficients()?;
        self.check_counters()?;
        Ok(ValidConfig { config: self, ranks })
    }

    /// Recurrent PPO's settings (`policy = "MlpLstmPolicy"` or `"CnnLstmPolicy"`): PPO, in one process,
    /// minibatches of whole sequences (`batch_size / n_steps` envs' rollouts each, a number that
    /// divides `n_envs`), and sb3-contrib's rule for the critic's LSTM.
    fn check_recurrent(&self, ranks: usize) -> Result<()> {
        if !self.policy.is_recurrent() {
            return Ok(());
        }
        let policy = self.policy;
        let bad = |m: String| Err(ProximaError::Config(m));
        if self.algo != AlgoName::Ppo {
            return bad(format!(
                "policy = `{policy:?}` trains with algo = `ppo` (recurrent PPO, sb3-contrib's RecurrentPPO); algo = `{}` has feed-forward networks only",
                self.algo
            ));
        }
        if ranks > 1 {
            return bad(format!("policy = `{policy:?}` trains in one process (not under mpirun) for now"));
        }
        if self.shared_lstm && self.enable_critic_lstm {
            return bad("shared_lstm = true with enable_critic_lstm = true: the critic either shares the actor's LSTM or has its own (sb3-contrib's rule); set one of them false".into());
        }
        if !self.shared_lstm && !self.enable_critic_lstm {
            return bad("shared_lstm = false with enable_critic_lstm = false (sb3-contrib's linear critic without an LSTM) is not supported yet".into());
        }
        if self.lstm_hidden_size == 0 || self.n_lstm_layers == 0 {
            return bad(format!(
                "lstm_hidden_size = {} and n_lstm_layers = {}: both must be positive",
                self.lstm_hidden_size, self.n_lstm_layers
            ));
        }
        // The hidden-to-hidden weights of one stack: G·H·H per layer and G·H·H from the layer below
        // (G = 4 gates at most), held with their gradient and Adam's moments like a hidden layer's.
        let (h, layers) = (self.lstm_hidden_size as u128, self.n_lstm_layers as u128);
        let weights = 4 * h * h * (2 * layers - 1);
        if self.lstm_hidden_size > MAX_WIDTH
            || self.n_lstm_layers > MAX_RECURRENT_LAYERS
            || weights > MAX_HIDDEN_WEIGHTS as u128
        {
            return bad(format!(
                "lstm_hidden_size = {} with n_lstm_layers = {}: {weights} recurrent weights per stack exceed {MAX_HIDDEN_WEIGHTS} (lstm_hidden_size ≤ {MAX_WIDTH}, n_lstm_layers ≤ {MAX_RECURRENT_LAYERS})",
                self.lstm_hidden_size, self.n_lstm_layers
            ));
        }
        let per_batch = self.batch_size / self.n_steps.max(1);
        if !self.batch_size.is_multiple_of(self.n_steps.max(1))
            || per_batch == 0
            || !self.n_envs.is_multiple_of(per_batch)
        {
            return bad(format!(
                "policy = `{policy:?}` learns from minibatches of whole sequences (each env's rollout of n_steps = {}): batch_size = {} must be n_steps times a number of envs that divides n_envs = {} (e.g. batch_size = {})",
                self.n_steps,
                self.batch_size,
                self.n_envs,
                self.n_steps * self.n_envs
            ));
        }
        Ok(())
    }

    /// The algorithm's own settings, and what it does not support.
    fn check_algo(&self) -> Result<()> {
        let bad = |m: String| Err(ProximaError::Config(m));
        if self.policy == PolicyKind::CnnPolicy {
            if !matches!(self.algo, AlgoName::Ppo | AlgoName::A2c | AlgoName::A3c | AlgoName::Reinforce) {
                let what = if self.is_off_policy() {
                    "reads images only as keys of a Dict observation (policy = `MlpPolicy`, SB3's MultiInputPolicy: a Gymnasium Dict wrapper around the image)"
                } else {
                    "has MLP networks only"
                };
                return bad(format!(
                    "policy = `CnnPolicy` trains with ppo, a2c, a3c and reinforce; algo = `{}` {what}",
                    self.algo
                ));
            }
        }
        if self.algo == AlgoName::Trpo && self.target_kl.is_none() {
            return bad("algo = `trpo` needs target_kl (its KL bound δ; sb3-contrib uses 0.01)".into());
        }
        if self.algo == AlgoName::Trpo && self.backend == Backend::Fused {
            return bad("backend = `fused` does not cover algo = `trpo` (its Fisher-vector products need candle's forward-mode derivatives): use backend = `auto` or `candle`".into());
        }
        if self.algo == AlgoName::Trpo && self.shared_trunk {
            return bad("algo = `trpo` needs separate policy and value networks (shared_trunk = false): the natural-gradient step must not move the critic".into());
        }
        if self.algo == AlgoName::A3c && self.vector_env != VectorEnv::Off {
            return bad("algo = `a3c` does not support vector_env = `sync` / `async` / `subproc` (each worker makes one env object per env): use vector_env = `off`".into());
        }
        if self.algo == AlgoName::A3c && (self.normalize_observation || self.normalize_reward) {
            return bad("algo = `a3c` does not support normalize_observation / normalize_reward (each worker would keep its own statistics)".into());
        }
        if self.is_off_policy() {
            self.check_off_policy()?;
        }
        if self.algo == AlgoName::Ppg {
            self.check_ppg()?;
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
    fn check_ppg(&self) -> Result<()> {
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

    /// TQC's quantiles: at least one per critic, at most 1,000, and fewer dropped than each
    /// critic has (sb3-contrib would pool an empty target).
    fn check_tqc(&self) -> Result<()> {
        let bad = |m: String| Err(ProximaError::Config(m));
        let (m, drop) = (self.n_quantiles, self.top_quantiles_to_drop_per_net);
        if m == 0 || m > 1000 {
            return bad(format!("n_quantiles = {m}: must be between 1 and 1000"));
        }
        if drop >= m {
            return bad(format!(
                "top_quantiles_to_drop_per_net = {drop} drops every one of the n_quantiles = {m} quantiles of each critic: the target would be empty; it must be below n_quantiles"
            ));
        }
        Ok(())
    }

    /// The off-policy algorithms' own settings, and what they do not support.
    fn check_off_policy(&self) -> Result<()> {
        let bad = |m: String| Err(ProximaError::Config(m));
        let algo = &self.algo;
        if self.normalize_observation || self.normalize_reward {
            return bad(format!("algo = `{algo}` does not support normalize_observation / normalize_reward yet (the replay buffer would hold observations normalised by changing statistics)"));
        }
        if self.optimizer != OptimizerName::Adam {
            return bad(format!("algo = `{algo}` trains with Adam (optimizer = `adam`)"));
        }
        if self.activation != Activation::Relu || self.ortho_init || self.shared_trunk {
            let mut asked = Vec::new();
            if self.activation != Activation::Relu {
                asked.push("activation = `tanh`".to_string());
            }
            if self.ortho_init {
                asked.push("ortho_init = true".to_string());
            }
            if self.shared_trunk {
                asked.push("shared_trunk = true".to_string());
            }
            return bad(format!("algo = `{algo}` builds SB3's networks: ReLU layers (activation = `relu`), PyTorch's default initialisation (ortho_init = false), separate actor and critics (shared_trunk = false); this config sets {}: leave {} out (the `{algo}` preset, its default, has SB3's)", asked.join(", "), if asked.len() == 1 { "it" } else { "them" }));
        }
        if self.algo == AlgoName::Tqc {
            self.check_tqc()?;
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
    fn check_sizes(&self, ranks: usize) -> Result<()> {
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
        let one_batch = self.algo.steps_on_whole_rollout() || self.is_off_policy();
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
    fn check_coefficients(&self) -> Result<()> {
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
        if !self.algo.has_temperature() && matches!(self.ent_coef, EntCoef::Auto(_)) {
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
    fn check_counters(&self) -> Result<()> {
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_valid_config_is_validated_again_only_for_another_number_of_ranks() {
        // cleanrl's rollout is 4 × 128 = 512: a global minibatch of 1024 needs 2 ranks.
        let sets = ["batch_size=1024".to_string()];
        let two = Config::resolve_over("cleanrl", None, &sets, 2).unwrap();
        assert_eq!(two.ranks(), 2);
        assert_eq!(two.clone().into_valid_config(2).unwrap(), two);
        let e = two.clone().into_valid_config(1).unwrap_err().to_string();
        assert!(e.contains("batch_size = 1024 does not divide the rollout"), "{e}");
        assert!(Config::layered("cleanrl", None, &sets).unwrap().validate().is_err());
        let one = Config::resolve_over("cleanrl", None, &[], 0).unwrap();
        assert_eq!(one.ranks(), 1, "0 ranks count as 1");
        let config = one.clone().into_config();
        assert_eq!(config.into_valid_config(1).unwrap(), one);
    }
}
