//! Language-model RL (issue 6, in progress): GRPO's numerics so far ([`grpo`]); the tiny
//! transformer policy, SFT, the reward model and the trainers are not built yet.

pub mod grpo;
