//! Algorithms. Each goes through the same [`crate::policy::ActorCritic`], rollout buffer and
//! logging; none has its own copy of the training loop ([`crate::train`] owns it).

pub mod a2c;
pub mod a3c;
pub mod optim;
pub mod ppo;
pub mod trpo;
