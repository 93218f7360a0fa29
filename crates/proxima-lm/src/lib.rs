//! Language-model RL (issue 6) on a task small enough for a CPU: two-digit addition ([`task`])
//! with a tiny decoder-only transformer ([`model`]).
//!
//! * [`train`]: sampling, greedy accuracy, supervised pre-training (SFT) and the GRPO step;
//! * [`grpo`]: GRPO's numerics (group advantages, k3, the clipped loss and its aggregations);
//! * [`reward`]: the Bradley–Terry reward model on scripted preference pairs;
//! * [`rlhf`]: RLHF-PPO's numerics over tokens (KL-penalised rewards, GAE, clipped losses, the
//!   adaptive KL controller);
//! * [`ppo`]: the RLHF-PPO step (policy, per-token critic, reference, reward model);
//! * [`dpo`]: DPO (Rafailov et al. 2023): its loss, step, implicit-reward accuracy and KL to π_ref;
//! * [`resume`]: the checkpoints that make every command resumable (issue 14);
//! * [`run`]: the drivers behind `proxima lm sft|rm|grpo|ppo|dpo|eval`, with their settings in
//!   [`args`], the weights files in [`weights`] and the logs in [`logs`].

pub mod args;
pub mod dpo;
pub mod grpo;
pub mod logs;
pub mod model;
pub mod ppo;
pub mod resume;
pub mod reward;
pub mod rlhf;
pub mod run;
pub mod task;
pub mod train;
pub mod weights;

pub use train::MAX_GRAD_NORM;
