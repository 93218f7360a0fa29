//! Algorithms. Each goes through the same [`crate::policy::ActorCritic`], rollout buffer and
//! [`crate::collect::Collector`]; none has its own copy of the training loop ([`crate::train`]
//! owns it). Each takes its own parameters (`PpoParams`, `A2cParams`, `TrpoParams`), which the
//! trainer projects from the run's config once: no algorithm reads the config.

pub mod a2c;
pub mod a3c;
pub mod optim;
pub mod ppo;
pub mod trpo;

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

/// The PPO objective (Schulman et al. 2017, Sec. 3–4 and Table 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Objective {
    /// L^CLIP: min(r·Â, clip(r, 1−ε, 1+ε)·Â) (Eq. 7), the default.
    Clip,
    /// L^KLPEN with an adaptive β (Eq. 8): after each update, β ← 2β if d > 1.5·d_targ,
    /// β ← β/2 if d < d_targ/1.5.
    AdaptiveKl,
    /// L^KLPEN with a constant β.
    FixedKl,
    /// The plain surrogate r·Â (Eq. 6, "no clipping or penalty").
    None,
}
