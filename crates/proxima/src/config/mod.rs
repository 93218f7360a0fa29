//! Hyperparameters (SB3's names), named presets, and the layering that resolves a run's config:
//! preset → `--config FILE.toml` → `--set key=value` → explicit CLI flags.
//!
//! Configs are data: every key has a default, a doc line and a source. Unknown keys are errors
//! with a "did you mean" suggestion; values are type-checked by serde and range-checked once by
//! [`Config::validate`], which gives the [`ValidConfig`] a run takes.
//!
//! One job per file: `schema` (the [`Config`] struct, its keys and TOML), `algo_name` (the
//! `algo` key's [`AlgoName`]), `presets` (the named presets), `resolve` (the layering),
//! `validate` (the checks and [`ValidConfig`]), `legacy` (values for keys that configs saved
//! before them lack), `ignored` (keys the chosen algorithm would not read).

pub use crate::algo::sac::EntCoef;
pub use crate::algo::{AdvantageNorm, Objective};
pub use crate::optim::OptimizerName;
pub use crate::policy::Backend;
pub use algo_name::{AlgoName, ALGOS};
pub use presets::PRESETS;
pub use resolve::CPU_ONLY;
pub use schema::{Config, VectorEnv, OPTIONAL_KEYS};
pub use validate::{IntoValidConfig, ValidConfig, MAX_ENVS, MAX_HIDDEN_WEIGHTS, MAX_ROLLOUT, MAX_THREADS, MAX_WIDTH};

mod algo_name;
mod ignored;
mod legacy;
mod presets;
mod resolve;
mod schema;
mod validate;
