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
}
