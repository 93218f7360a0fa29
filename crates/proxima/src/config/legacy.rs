//! What a key holds in a config saved before the key existed, so that the `config.toml` of an
//! older run directory, its checkpoints and an older multi-seed manifest still load: each
//! missing key takes the value the old run had in effect. These matter only where a whole
//! [`Config`](super::Config) is deserialised from such a file (a multi-seed manifest);
//! [`Config::resolve`](super::Config::resolve) starts from a preset, which has every key.
//!
//! Keys added as `false`, absent (`Option`) or their enum's default variant use serde's plain
//! `#[serde(default)]` instead (see [`super::schema`]).

use super::{Backend, Objective, OptimizerName};

/// One function per key, `fn key() -> type { value }`, for `#[serde(default = "legacy::key")]`.
macro_rules! legacy_defaults {
    ($($(#[$doc:meta])* $key:ident: $ty:ty = $value:expr;)*) => {
        $(
            $(#[$doc])*
            pub(super) fn $key() -> $ty {
                $value
            }
        )*
    };
}

legacy_defaults! {
    clip_obs: f64 = 10.0;
    log_kl_divergence: bool = true;
    clip_reward: f64 = 10.0;
    /// Runs saved before the `backend` key trained on candle (the fused kernels came later), and
    /// resume there.
    backend: Backend = Backend::Candle;
    objective: Objective = Objective::Clip;
    kl_coef: f64 = 1.0;
    kl_target: f64 = 0.01;
    optimizer: OptimizerName = OptimizerName::Adam;
    rms_prop_alpha: f64 = 0.99;
    rms_prop_eps: f64 = 1e-5;
    n_workers: usize = 2;
    cg_max_steps: usize = 15;
    cg_damping: f64 = 0.1;
    line_search_shrinking_factor: f64 = 0.8;
    line_search_max_iter: usize = 10;
    n_critic_updates: usize = 10;
    baseline: bool = true;
    buffer_size: usize = 1_000_000;
    learning_starts: u64 = 100;
    tau: f64 = 0.005;
    train_freq: usize = 1;
    gradient_steps: usize = 1;
    target_update_interval: usize = 1;
    save_replay_buffer: bool = true;
    n_critics: usize = 2;
    policy_delay: usize = 2;
    target_policy_noise: f64 = 0.2;
    target_noise_clip: f64 = 0.5;
    noise_std: f64 = 0.1;
    n_iteration: usize = 32;
    e_policy: usize = 1;
    e_auxiliary: usize = 6;
    beta_clone: f64 = 1.0;
    num_aux_rollouts: usize = 4;
    n_quantiles: usize = 25;
    lstm_hidden_size: usize = 256;
    n_lstm_layers: usize = 1;
    enable_critic_lstm: bool = true;
    top_quantiles_to_drop_per_net: usize = 2;
}

#[cfg(test)]
mod tests {
    use crate::config::{Backend, Config};

    /// Keys added after the first release: a saved config without them still loads.
    const LEGACY_KEYS: [&str; 52] = [
        "anneal_clip_range",
        "norm_obs_keys",
        "lstm_hidden_size",
        "n_lstm_layers",
        "shared_lstm",
        "enable_critic_lstm",
        "recurrent_cell",
        "use_masking",
        "log_kl_divergence",
        "clip_range_vf",
        "max_grad_norm",
        "target_kl",
        "normalize_observation",
        "normalize_reward",
        "clip_obs",
        "clip_reward",
        "policy",
        "backend",
        "vector_env",
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
        "n_quantiles",
        "top_quantiles_to_drop_per_net",
        "policy_delay",
        "target_policy_noise",
        "target_noise_clip",
        "noise_std",
        "n_iteration",
        "e_policy",
        "e_auxiliary",
        "beta_clone",
        "num_aux_rollouts",
    ];

    #[test]
    fn a_config_saved_before_the_legacy_keys_loads_with_their_old_values() {
        let full: toml::Table = Config::preset("cleanrl").unwrap().to_toml().parse().unwrap();
        let old: toml::Table = full
            .iter()
            .filter(|(k, _)| !LEGACY_KEYS.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let loaded: Config = toml::Value::Table(old.clone()).try_into().unwrap();
        // Every legacy value is cleanrl's (the values the first runs had), except the backend:
        // those runs trained on candle, and without action masks. Absent optional numbers read
        // as absent.
        let expected = Config {
            backend: Backend::Candle,
            use_masking: false,
            clip_range_vf: None,
            max_grad_norm: None,
            ..Config::preset("cleanrl").unwrap()
        };
        assert_eq!(loaded, expected);
        for k in old.keys() {
            let mut without = old.clone();
            without.remove(k);
            let e = toml::Value::Table(without).try_into::<Config>().unwrap_err().to_string();
            assert!(e.contains(&format!("missing field `{k}`")), "{k} is required: {e}");
        }
    }
}
