//! Causal language models from Hugging Face checkpoints (a directory with `config.json`,
//! safetensors weights, `tokenizer.json`): read ([`config`], [`checkpoint`]), built as trainable
//! candle variables ([`model`], on the differentiable pieces of [`layers`]), and written back in
//! the same format; trained by SFT ([`sft`]), DPO ([`dpo`]), GRPO ([`grpo_trainer`]) and RLHF-PPO ([`ppo_trainer`]).

pub mod checkpoint;
pub mod config;
pub mod data;
pub mod dpo;
pub mod generate;
pub mod grpo;
pub mod grpo_trainer;
pub mod layers;
pub mod lora;
pub mod model;
pub mod optimize;
pub mod ppo;
pub mod ppo_trainer;
pub mod resume;
pub mod rollout;
pub mod sft;
pub mod tokenizer;

pub use config::{Arch, HfConfig, RopeScaling};
pub use dpo::{DpoArgs, DpoLossType, DpoTrainer};
pub use generate::{generate, Completions, SamplingConfig};
pub use grpo::{GrpoArgs, LossType, RewardFunction, ScaleRewards};
pub use grpo_trainer::GrpoTrainer;
pub use lora::LoraConfig;
pub use model::{CausalLm, KvCache};
pub use ppo::{KlEstimator, PpoArgs};
pub use ppo_trainer::PpoTrainer;
pub use sft::{SftArgs, SftTrainer};
pub use tokenizer::HfTokenizer;
