//! Exact resume of the Hugging Face trainers, in the checkpoint format of [`crate::resume`]: the
//! trainable parameters (`model.*`: every weight, or only the LoRA adapters, the base weights
//! being the model directory's), Adam's moments, step count and step size (`adam.*`), and as
//! JSON the trainer's RNG, its row sampler, the optimiser steps taken, the log history and the
//! fingerprint of the initial weights (a model directory changed since is refused).

use super::data::EpochSampler;
use super::model::CausalLm;
use super::optimize::TrainerOptim;
use crate::resume::{fingerprint, save_checkpoint, LmCheckpoint, Parameters};
use candle_core::Var;
use proxima::{ProximaError, Result};
use serde_json::Value;
use std::path::Path;

/// A model's base weights (with LoRA, not its adapters): what its fingerprint covers.
impl Parameters for CausalLm {
    fn parameters(&self) -> Vec<(String, Var)> {
        self.named_params().to_vec()
    }
}

/// The parameters a trainer changes: every weight, or the LoRA adapters.
struct Trainable<'a>(&'a CausalLm);

impl Parameters for Trainable<'_> {
    fn parameters(&self) -> Vec<(String, Var)> {
        self.0.trainable_params()
    }
}

/// A fingerprint of what a run starts from besides its code: `model`'s base weights
/// ([`crate::resume::fingerprint`]), the dataset's rows and the settings (their JSON), so that a
/// resume refuses a model directory, dataset or settings changed since.
///
/// # Errors
/// Tensor errors.
pub fn run_fingerprint(model: &CausalLm, rows: &[serde_json::Map<String, Value>], settings: &Value) -> Result<String> {
    let text = serde_json::to_string(&(rows, settings)).expect("JSON values serialise");
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    Ok(format!("{}-{h:016x}", initial_fingerprint(model)?))
}

/// The fingerprint of `model`'s base weights ([`crate::resume::fingerprint`]).
///
/// # Errors
/// Tensor errors.
pub fn initial_fingerprint(model: &CausalLm) -> Result<String> {
    fingerprint(&[model])
}

/// A trainer's state between optimiser steps, as saved and restored.
pub struct TrainerProgress<'a> {
    /// The model being trained.
    pub model: &'a CausalLm,
    /// Optimiser steps taken.
    pub global_step: u64,
    /// The row order and position.
    pub sampler: &'a EpochSampler,
    /// One row per logged step.
    pub log_history: &'a [Value],
    /// What the run started from ([`run_fingerprint`] or [`initial_fingerprint`]); a resume
    /// with other inputs is refused.
    pub inputs: &'a str,
}

/// Writes the checkpoint of `p` into `dir/checkpoints/step_<global_step>.safetensors` (atomically;
/// older ones removed).
///
/// # Errors
/// `Io`; tensor errors.
pub fn save(dir: &Path, p: &TrainerProgress<'_>, opt: &TrainerOptim) -> Result<()> {
    let state = serde_json::json!({
        "rng": opt.rng, "sampler": p.sampler, "global_step": p.global_step,
        "log_history": p.log_history, "inputs": p.inputs,
    });
    save_checkpoint(dir, p.global_step as usize, &[("model", &Trainable(p.model))], &[("adam", opt.adam())], &state)
}

/// Restores `model`'s trainable parameters and `opt` from `ck`; returns the sampler, the steps
/// taken and the log history to continue with.
///
/// # Errors
/// `Checkpoint` when the run started from other weights than `inputs` says (the model directory
/// changed), for LoRA settings other than the checkpoint's, or a damaged checkpoint.
pub fn restore(
    ck: &LmCheckpoint,
    model: &CausalLm,
    opt: &mut TrainerOptim,
    inputs: &str,
) -> Result<(EpochSampler, u64, Vec<Value>)> {
    let saved: String = ck.get("inputs")?;
    if saved != inputs {
        return Err(ProximaError::Checkpoint(
            "the model directory, the dataset or the settings this run started from differ now; resuming would not continue the same run"
                .into(),
        ));
    }
    ck.restore_model("model", &Trainable(model))?;
    ck.restore_optimizer("adam", opt.adam_mut())?;
    opt.rng = ck.get("rng")?;
    Ok((ck.get("sampler")?, ck.get("global_step")?, ck.get("log_history")?))
}
