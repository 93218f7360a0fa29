//! Language-model RL (issue 6, in progress): GRPO's numerics ([`grpo`]), the tiny transformer
//! policy with a per-token value head ([`model`]) and the verifiable addition task ([`task`]).
//! SFT, the reward model, the trainers and the `proxima lm` commands are not built yet.

pub mod grpo;
pub mod model;
pub mod task;
pub mod train;
