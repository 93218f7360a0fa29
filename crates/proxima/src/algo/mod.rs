//! Algorithms. Each goes through the same policy seam ([`crate::policy::Policy`]), rollout buffer and
//! [`crate::collect::Collector`]; none has its own copy of the training loop ([`crate::train`]
//! owns it). Each takes its own parameters (`PpoParams`, `A2cParams`, `TrpoParams`, `ReinforceParams`, `PpgParams`, …), which the
//! trainer projects from the run's config once: no algorithm reads the config.

pub mod a2c;
pub mod a3c;
pub mod learner;
pub mod offpolicy;
pub mod ppg;
pub mod ppo;
pub mod reinforce;
pub mod sac;
pub mod td3;
pub mod tqc;
pub mod trpo;
pub mod update;

pub use self::update::{apply_gradients, apply_host_gradients, AdvantageNorm, AuxStats, UpdateStats};
pub use crate::loss::Objective;
