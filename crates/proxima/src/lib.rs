//! # Proxima
//!
//! Proximal Policy Optimization (Schulman et al. 2017, arXiv:1707.06347) and its family,
//! written for speed and trust on one machine.
//!
//! The data flows one way: [`env`] → [`rollout`] (buffer and GAE) → [`algo::ppo`] (minibatch
//! updates of L^CLIP + c₁·L^VF − c₂·S) → [`train`] (the run: collect → GAE → K epochs).

pub mod ablation;
pub mod algo;
pub mod checkpoint;
pub mod config;
pub mod env;
pub mod error;
pub mod lm;
pub mod log;
pub mod normalize;
pub mod policy;
pub mod rollout;
pub mod train;
pub mod util;

pub use error::{ProximaError, Result};
