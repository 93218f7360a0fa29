//! Hyperparameters (SB3's names), named presets, and the layering that resolves a run's config:
//! preset → `--config FILE.toml` → `--set key=value` → explicit CLI flags.
//!
//! Configs are data: every key has a default, a doc line and a source. Unknown keys are errors
//! with a "did you mean" suggestion; values are type-checked by serde and range-checked by
//! [`Config::validate`].

use crate::error::{ProximaError, Result};
use crate::policy::Activation;
use serde::{Deserialize, Serialize};

/// Where advantages are normalised.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AdvantageNorm {
    /// Per minibatch (SB3, CleanRL, openai/baselines): the default.
    Minibatch,
    /// Once over the whole rollout batch.
    Batch,
    /// Not at all.
    Off,
}

/// A full training configuration. Field names are Stable-Baselines3's where SB3 has the
/// hyperparameter; the paper's symbols are given in each doc line.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Algorithm (`ppo`).
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
    /// γ: discount.
    pub gamma: f64,
    /// λ: GAE parameter.
    pub gae_lambda: f64,
    /// ε: clip range of the probability ratio r_t(θ) in L^CLIP.
    pub clip_range: f64,
    /// Clip range of the value prediction around V_old; absent = no value clipping.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clip_range_vf: Option<f64>,
    /// Where Â is normalised: `minibatch` (default), `batch` or `off`.
    pub normalize_advantage: AdvantageNorm,
    /// c₂: entropy bonus coefficient.
    pub ent_coef: f64,
    /// c₁: value-loss coefficient (the value loss carries a 0.5 factor, as CleanRL/SB3).
    pub vf_coef: f64,
    /// Global gradient-norm clip; absent = none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_grad_norm: Option<f64>,
    /// Stop an update's epochs early when approx KL exceeds 1.5·target_kl (SB3's rule); absent = never.
    #[serde(default, skip_serializing_if = "Option::is_none")]
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
    /// Initial Gaussian log-std (continuous actions).
    pub log_std_init: f32,
    /// Threads for tensor ops (1 is fastest at these network sizes; also keeps runs bit-reproducible).
    pub num_threads: usize,
    /// Write a checkpoint every this many updates (0 = only the final model).
    pub checkpoint_freq: usize,
    /// Episodes for the deterministic evaluation at the end of training (0 = none).
    pub eval_episodes: usize,
}

/// Largest rollout N·T accepted (transitions held in memory at once).
pub const MAX_ROLLOUT: usize = 1 << 24;
/// Largest number of parallel envs accepted.
pub const MAX_ENVS: usize = 1 << 16;
/// Largest hidden-layer width accepted.
pub const MAX_WIDTH: usize = 1 << 16;

/// Names of the presets, in the order `--help` lists them.
pub const PRESETS: [&str; 4] = ["cleanrl", "sb3", "paper-mujoco", "paper-atari"];

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
            "num_threads",
            "checkpoint_freq",
            "eval_episodes",
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
    ///   ε .1, lr 2.5e-4 annealed, c₁ 1.0, c₂ .01, γ .99, λ .95, 10M steps (the paper also anneals
    ///   ε with α; we keep ε fixed).
    ///
    /// # Errors
    /// `Config` naming the unknown preset and the known ones.
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
            gamma: 0.99,
            gae_lambda: 0.95,
            clip_range: 0.2,
            clip_range_vf: Some(0.2),
            normalize_advantage: AdvantageNorm::Minibatch,
            ent_coef: 0.01,
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
            num_threads: 1,
            checkpoint_freq: 100,
            eval_episodes: 10,
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
                ent_coef: 0.0,
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
                ent_coef: 0.0,
                normalize_observation: true,
                normalize_reward: true,
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
                ent_coef: 0.01,
                vf_coef: 1.0,
                ..cleanrl
            },
            other => {
                let hint = crate::util::closest(other, &PRESETS)
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
        let base = Config::preset(preset)?;
        let mut table = toml::Table::try_from(&base).map_err(|e| ProximaError::Config(e.to_string()))?;
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
            if v.eq_ignore_ascii_case("none") || v.is_empty() {
                table.remove(k);
                continue;
            }
            let value = match format!("x = {v}").parse::<toml::Table>() {
                Ok(mut t) => t.remove("x").expect("parsed key"),
                Err(_) => toml::Value::String(v.to_string()),
            };
            table.insert(k.to_string(), value);
        }
        let cfg: Config = toml::Value::Table(table)
            .try_into()
            .map_err(|e: toml::de::Error| ProximaError::Config(e.to_string().trim().replace('\n', " ")))?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// Range checks that serde cannot express.
    ///
    /// # Errors
    /// `Config` naming the first offending key, its value, and what is allowed.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(ProximaError::Config(m));
        if self.algo != "ppo" {
            return bad(format!("algo = `{}`: only `ppo` is implemented", self.algo));
        }
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
        // Bounds that keep a typo from turning into an out-of-memory abort.
        if self.n_envs > MAX_ENVS {
            return bad(format!("n_envs = {}: at most {MAX_ENVS}", self.n_envs));
        }
        if let Some(w) = self.net_arch.iter().find(|w| **w > MAX_WIDTH) {
            return bad(format!("net_arch = {:?}: layer width {w} exceeds {MAX_WIDTH}", self.net_arch));
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
        if rollout % self.batch_size != 0 || self.batch_size > rollout {
            return bad(format!(
                "batch_size = {} does not divide the rollout n_steps × n_envs = {} × {} = {rollout}",
                self.batch_size, self.n_steps, self.n_envs
            ));
        }
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
        for (k, v) in [("ent_coef", self.ent_coef), ("vf_coef", self.vf_coef)] {
            if !v.is_finite() || v < 0.0 {
                return bad(format!("{k} = {v}: must be a finite number ≥ 0"));
            }
        }
        if !self.log_std_init.is_finite() {
            return bad(format!("log_std_init = {}: must be finite", self.log_std_init));
        }
        if self.seed > i64::MAX as u64 || self.total_timesteps > i64::MAX as u64 {
            return bad(format!(
                "seed = {} / total_timesteps = {}: must be below 2^63 (TOML integers are signed 64-bit)",
                self.seed, self.total_timesteps
            ));
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

fn check_key(k: &str) -> Result<()> {
    let keys = Config::keys();
    if keys.contains(&k) {
        return Ok(());
    }
    let hint = crate::util::closest(k, &keys).map(|s| format!(" (did you mean `{s}`?)")).unwrap_or_default();
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
        let e = Config::resolve("cleanrl", None, &["learning_rate=fast".into()]).unwrap_err().to_string();
        assert!(e.contains("learning_rate"), "{e}");
        let e = Config::resolve("cleanrl", Some("gamma = ["), &[]).unwrap_err().to_string();
        assert!(e.contains("malformed TOML"), "{e}");
        let e = Config::resolve("cleanrl", None, &["gamma=1.5".into()]).unwrap_err().to_string();
        assert!(e.contains("gamma"), "{e}");
        assert!(Config::resolve("clenrl", None, &[]).unwrap_err().to_string().contains("did you mean `cleanrl`"));
    }
}
