//! Language-model RL (issue 6) on a task small enough for a CPU: two-digit addition ([`task`])
//! with a tiny decoder-only transformer ([`model`]).
//!
//! * [`sampling`]: responses (sampled or greedy), greedy accuracy, log π of a response;
//! * [`sft`]: supervised pre-training (SFT);
//! * [`grpo_step`]: the GRPO step (sampling a group per prompt, micro-batched gradients);
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
pub mod grpo_step;
pub mod hf;
pub mod logs;
pub mod model;
pub mod ppo;
pub mod resume;
pub mod reward;
pub mod rlhf;
pub mod run;
pub mod sampling;
pub mod sft;
pub mod task;
pub mod weights;

/// The global gradient-norm clip of every language-model update (SFT, reward model, GRPO,
/// RLHF-PPO's policy and critic): TRL's and OpenRLHF's default `max_grad_norm = 1.0`.
pub const MAX_GRAD_NORM: f64 = 1.0;
