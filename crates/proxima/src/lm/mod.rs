//! Language-model RL (issue 6, in progress): GRPO's numerics ([`grpo`]) and the tiny
//! transformer policy with a per-token value head ([`model`]). The task, SFT, the reward model
//! and the trainers are not built yet.

pub mod grpo;
pub mod model;
