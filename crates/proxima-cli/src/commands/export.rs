//! `proxima export`: a checkpoint's policy as an ONNX model of `predict(deterministic=True)`.

use crate::rundirs::resolve_checkpoint;
use anyhow::Result;
use clap::Args;
use proxima::export::{export_onnx, OnnxOptions};
use proxima::policy::Backend;
use std::path::PathBuf;

#[derive(Args)]
pub struct ExportArgs {
    /// A run directory (uses its model.safetensors, else its latest checkpoint) or a checkpoint file.
    path: PathBuf,
    /// The ONNX file to write (its folder must exist; written atomically): input `obs`, outputs
    /// `action`, `logits` or `mean`, and `value` (docs/deploy.md).
    #[arg(long, value_name = "FILE")]
    onnx: PathBuf,
    /// Add the `action_masks` input (bool [batch, n], true = valid); the default for a policy
    /// the checkpoint records as trained under its env's action masks (sb3-contrib's MaskablePPO).
    #[arg(long)]
    action_masks: bool,
}

/// `proxima export`: writes the ONNX model and prints its inputs and outputs.
pub fn exec(a: ExportArgs) -> Result<()> {
    let ExportArgs { path, onnx, action_masks } = a;
    let file = resolve_checkpoint(&path)?;
    let ck = proxima::checkpoint::load(&file)?;
    let policy = ck.build_network(Backend::Auto)?;
    let norm = proxima::train::saved_normalizer(&ck)?;
    let trained_masked = ck.meta.extra.get(proxima::checkpoint::TRAINED_MASKED).is_some_and(|v| v == "true");
    let action_masks = action_masks || trained_masked;
    let io = export_onnx(&policy, norm.as_ref(), OnnxOptions { action_masks }, &onnx)?;
    println!("wrote {} from {}", onnx.display(), file.display());
    for (what, list) in [("input", &io.inputs), ("output", &io.outputs)] {
        for (name, ty) in list {
            println!("  {what} {name}: {ty}");
        }
    }
    Ok(())
}
