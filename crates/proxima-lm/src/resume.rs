//! Resumable language-model runs: with every evaluation row (`--eval-every N` steps) a command
//! writes `checkpoints/step_<n>.safetensors` atomically (and then removes the one before) holding
//! everything the rest of the run depends on: the weights of every model being trained, each
//! optimiser's moments, step count and step size, and as JSON the RNG streams, the KL
//! controller's β and the numbers carried between evaluation rows. `proxima lm resume RUN_DIR`
//! rebuilds the run's start from its `config.json` (the frozen models, the preference pairs),
//! restores this state, keeps `progress.csv`'s rows up to the checkpoint and continues: the run
//! ends with the files of an uninterrupted one.

use crate::model::TinyLm;
use candle_core::{Device, Tensor, Var};
use proxima::io::{read_f32_safetensors, write_f32_safetensors, F32Tensors, NamedTensor};
use proxima::optim::Optimizer;
use proxima::{ProximaError, Result};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The `format` of LM checkpoints.
pub const CHECKPOINT_FORMAT: &str = "proxima-lm-checkpoint/1";

/// What a checkpoint holds besides tensors: the step and a JSON object of the command's own
/// state (RNGs, β, carried numbers).
pub struct LmCheckpoint {
    /// Steps completed.
    pub step: usize,
    /// The command's state, as it saved it.
    pub state: serde_json::Value,
    file: F32Tensors,
    meta: HashMap<String, String>,
}

fn checkpoint_path(dir: &Path, step: usize) -> PathBuf {
    dir.join("checkpoints").join(format!("step_{step:06}.safetensors"))
}

/// What a checkpoint stores of a model: its named parameters, in a fixed order.
pub trait Parameters {
    /// (name, variable) pairs.
    fn parameters(&self) -> Vec<(String, Var)>;
}

impl Parameters for TinyLm {
    fn parameters(&self) -> Vec<(String, Var)> {
        self.named_params()
    }
}

/// A fingerprint of models' weights (64-bit FNV-1a over their f32 bits, hex): equal weights, equal
/// fingerprint; what a checkpoint records of the frozen models a run reads.
///
/// # Errors
/// Tensor errors.
pub fn fingerprint<P: Parameters + ?Sized>(models: &[&P]) -> Result<String> {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for m in models {
        for (_, var) in m.parameters() {
            for x in var.as_tensor().flatten_all()?.to_dtype(candle_core::DType::F32)?.to_vec1::<f32>()? {
                for b in x.to_bits().to_le_bytes() {
                    h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
                }
            }
        }
    }
    Ok(format!("{h:016x}"))
}

/// The step of a checkpoint file named `step_<n>.safetensors`.
fn checkpoint_step(path: &Path) -> Option<usize> {
    let name = path.file_name()?.to_str()?;
    name.strip_prefix("step_")?.strip_suffix(".safetensors")?.parse().ok()
}

/// Writes the checkpoint of step `step` into `dir/checkpoints/`, then removes older ones.
///
/// # Errors
/// `Io`; tensor errors reading the weights.
pub fn save_checkpoint<P: Parameters + ?Sized>(
    dir: &Path,
    step: usize,
    models: &[(&str, &P)],
    optimizers: &[(&str, &Optimizer)],
    state: &serde_json::Value,
) -> Result<()> {
    let ckpts = dir.join("checkpoints");
    std::fs::create_dir_all(&ckpts).map_err(|e| ProximaError::io(&ckpts, e))?;
    let mut owned: Vec<(String, Vec<usize>, Vec<f32>)> = Vec::new();
    for (m, model) in models {
        for (name, var) in model.parameters() {
            let v = var.as_tensor().flatten_all()?.to_dtype(candle_core::DType::F32)?.to_vec1::<f32>()?;
            owned.push((format!("{m}.{name}"), var.dims().to_vec(), v));
        }
    }
    let mut md: HashMap<String, String> = HashMap::new();
    for (o, opt) in optimizers {
        for (i, (m, v)) in opt.m.iter().zip(&opt.v).enumerate() {
            owned.push((format!("{o}.m.{i:03}"), vec![m.len()], m.clone()));
            owned.push((format!("{o}.v.{i:03}"), vec![v.len()], v.clone()));
        }
        md.insert(format!("{o}.t"), opt.t.to_string());
        md.insert(format!("{o}.lr"), serde_json::to_string(&opt.lr).expect("f64 serialises"));
    }
    md.insert("format".into(), CHECKPOINT_FORMAT.into());
    md.insert("step".into(), step.to_string());
    md.insert("state".into(), state.to_string());
    let data: Vec<NamedTensor<'_>> = owned.iter().map(|(n, s, v)| (n.clone(), s.clone(), v.as_slice())).collect();
    let path = checkpoint_path(dir, step);
    write_f32_safetensors(&path, &data, md)?;
    for e in std::fs::read_dir(&ckpts).map_err(|e| ProximaError::io(&ckpts, e))?.flatten() {
        let p = e.path();
        if checkpoint_step(&p).is_some_and(|s| s < step) {
            let _ = std::fs::remove_file(&p); // the newer checkpoint is on disk already
        }
    }
    Ok(())
}

/// The latest checkpoint in `dir/checkpoints/`, if any.
///
/// # Errors
/// `Checkpoint` for a file that is not an LM checkpoint or is damaged; `Io`.
pub fn latest_checkpoint(dir: &Path) -> Result<Option<LmCheckpoint>> {
    latest_checkpoint_file(dir).map(|path| read_checkpoint(&path)).transpose()
}

/// The file of the latest checkpoint in `dir/checkpoints/` (by its name's step), if any.
pub fn latest_checkpoint_file(dir: &Path) -> Option<PathBuf> {
    let entries = std::fs::read_dir(dir.join("checkpoints")).ok()?;
    let mut best: Option<(usize, PathBuf)> = None;
    for e in entries.flatten() {
        let p = e.path();
        if let Some(s) = checkpoint_step(&p) {
            if best.as_ref().is_none_or(|(b, _)| s > *b) {
                best = Some((s, p));
            }
        }
    }
    best.map(|(_, p)| p)
}

/// Whether `path` is an LM checkpoint file (a safetensors file whose `format` is
/// [`CHECKPOINT_FORMAT`]).
pub fn is_checkpoint_file(path: &Path) -> bool {
    let format = read_f32_safetensors(path, |md, _| Ok(md.get("format").cloned()));
    format.is_ok_and(|(f, _)| f.as_deref() == Some(CHECKPOINT_FORMAT))
}

/// Reads the checkpoint file `path` (`checkpoints/step_<n>.safetensors` of an LM run).
///
/// # Errors
/// `Checkpoint` for a file that is not an LM checkpoint or is damaged; `Io`.
pub fn read_checkpoint(path: &Path) -> Result<LmCheckpoint> {
    let (meta, file) = read_f32_safetensors(path, |md, bad| {
        if md.get("format").map(String::as_str) != Some(CHECKPOINT_FORMAT) {
            return Err(bad(format!("not a Proxima language-model checkpoint (format is not `{CHECKPOINT_FORMAT}`)")));
        }
        Ok(md.clone())
    })?;
    let step = meta.get("step").and_then(|s| s.parse().ok()).ok_or_else(|| file.error("malformed `step`"))?;
    let state =
        meta.get("state").and_then(|s| serde_json::from_str(s).ok()).ok_or_else(|| file.error("malformed `state`"))?;
    Ok(LmCheckpoint { step, state, file, meta })
}

impl LmCheckpoint {
    /// Whether the checkpoint holds the weights of a model saved as `name` (`policy`, `rm`, …).
    pub fn holds(&self, name: &str) -> bool {
        let prefix = format!("{name}.");
        self.file.names().any(|n| n.starts_with(&prefix))
    }

    /// Sets `model`'s weights to the checkpoint's `name`.
    ///
    /// # Errors
    /// `Checkpoint` for a missing tensor or one of another shape.
    pub fn restore_model<P: Parameters + ?Sized>(&self, name: &str, model: &P) -> Result<()> {
        for (p, var) in model.parameters() {
            let key = format!("{name}.{p}");
            let (shape, v) = self.file.get(&key).ok_or_else(|| self.file.error(format!("missing tensor `{key}`")))?;
            if shape != var.dims() {
                return Err(self.file.error(format!("tensor `{key}` is {shape:?}, expected {:?}", var.dims())));
            }
            var.set(&Tensor::from_slice(v, var.shape(), &Device::Cpu)?.to_dtype(var.dtype())?)?;
        }
        Ok(())
    }

    /// Sets `opt`'s moments, step count and step size to the checkpoint's `name`.
    ///
    /// # Errors
    /// `Checkpoint` for missing or mis-sized moments.
    pub fn restore_optimizer(&self, name: &str, opt: &mut Optimizer) -> Result<()> {
        for i in 0..opt.m.len() {
            for (buf, target) in [("m", &mut opt.m[i]), ("v", &mut opt.v[i])] {
                let key = format!("{name}.{buf}.{i:03}");
                let (_, v) = self.file.get(&key).ok_or_else(|| self.file.error(format!("missing tensor `{key}`")))?;
                if v.len() != target.len() {
                    return Err(self.file.error(format!("`{key}` has {} values, expected {}", v.len(), target.len())));
                }
                target.copy_from_slice(v);
            }
        }
        let get = |k: &str| {
            self.meta.get(&format!("{name}.{k}")).ok_or_else(|| self.file.error(format!("missing `{name}.{k}`")))
        };
        opt.t = get("t")?.parse().map_err(|_| self.file.error(format!("malformed `{name}.t`")))?;
        opt.lr = serde_json::from_str(get("lr")?).map_err(|_| self.file.error(format!("malformed `{name}.lr`")))?;
        Ok(())
    }

    /// The state's `key`, deserialised.
    ///
    /// # Errors
    /// `Checkpoint` when it is missing or of another type.
    pub fn get<T: serde::de::DeserializeOwned>(&self, key: &str) -> Result<T> {
        let v = self.state.get(key).cloned().ok_or_else(|| self.file.error(format!("state lacks `{key}`")))?;
        serde_json::from_value(v).map_err(|e| self.file.error(format!("state `{key}`: {e}")))
    }
}
