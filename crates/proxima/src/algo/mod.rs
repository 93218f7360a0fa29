//! Algorithms. Each goes through the same [`crate::policy::ActorCritic`], rollout buffer and
//! logging; none has its own copy of the training loop ([`crate::train`] owns it).

pub mod optim;
pub mod ppo;
