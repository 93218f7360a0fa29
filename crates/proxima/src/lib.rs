//! # Proxima
//!
//! Proximal Policy Optimization (Schulman et al. 2017, arXiv:1707.06347) and its family,
//! written for speed and trust on one machine.
//!
//! The data flows one way: [`env`] → [`rollout`] (buffer and GAE) → [`algo::ppo`] (minibatch
//! updates of L^CLIP + c₁·L^VF − c₂·S) → [`train`] (the run: collect → GAE → K epochs).

pub mod algo;
pub mod checkpoint;
pub mod collect;
pub mod config;
pub mod distributed;
pub mod error;
pub mod export;
pub mod io;
pub mod log;
pub mod loss;
pub mod normalize;
pub mod optim;
pub mod policy;
pub mod replay;
pub mod rollout;
pub mod simd;
pub mod train;

pub use error::{ProximaError, Result};
/// The environments (the `proxima-env` crate): `proxima::env::make("CartPole-v1")`, …
pub use proxima_env as env;
/// "Did you mean …?" hints for misspelt names (the `proxima-env` crate's): edit distance.
pub use proxima_env::did_you_mean;
