//! Causal language models from Hugging Face checkpoints (a directory with `config.json`,
//! safetensors weights, `tokenizer.json`): read ([`config`], [`checkpoint`]), built as trainable
//! candle variables ([`model`], on the differentiable pieces of [`layers`]), and written back in
//! the same format.

pub mod checkpoint;
pub mod config;
pub mod generate;
pub mod layers;
pub mod model;
pub mod tokenizer;

pub use config::{Arch, HfConfig};
pub use generate::{generate, Completions, SamplingConfig};
pub use model::{CausalLm, KvCache};
pub use tokenizer::HfTokenizer;
