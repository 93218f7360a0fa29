//! The language models' weights files: safetensors (through [`proxima::io`]) whose header says
//! what they hold (`format` `proxima-lm/1`, `kind` sft|rm|grpo|ppo|dpo|critic, the network spec),
//! so a reward model cannot be passed where a policy is expected; and [`Weights`], which reads
//! each file once per command however many models start from it.

use crate::model::{LmSpec, TinyLm};
use crate::task::VOCAB;
use candle_core::{Device, Tensor};
use proxima::io::{read_f32_safetensors, write_f32_safetensors, NamedTensor};
use proxima::{ProximaError, Result};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The `format` of LM weight files.
pub const LM_FORMAT: &str = "proxima-lm/1";

/// The network every `proxima lm` command builds: the 2 layers, d_model 64, 4 heads,
/// context 16, over the task's 13-token vocabulary (~100k parameters).
pub fn default_spec() -> LmSpec {
    LmSpec { vocab: VOCAB, ..LmSpec::default() }
}

/// Saves `model`'s parameters to `path` atomically, tagged with `kind`.
///
/// # Errors
/// `Io`; `Checkpoint` if serialisation fails.
pub fn save_model(path: &Path, model: &TinyLm, kind: &str) -> Result<()> {
    let mut values = Vec::new();
    for (name, var) in model.named_params() {
        let v = var.as_tensor().flatten_all()?.to_dtype(candle_core::DType::F32)?.to_vec1::<f32>()?;
        values.push((name, var.dims().to_vec(), v));
    }
    let data: Vec<NamedTensor<'_>> = values.iter().map(|(n, s, v)| (n.clone(), s.clone(), v.as_slice())).collect();
    let md: HashMap<String, String> = [
        ("format".to_string(), LM_FORMAT.to_string()),
        ("kind".to_string(), kind.to_string()),
        ("spec".to_string(), serde_json::to_string(model.spec()).expect("spec serialises")),
    ]
    .into();
    write_f32_safetensors(path, &data, md)
}

/// `path` itself when a file, else `path/model.safetensors`.
pub fn model_file(path: &Path) -> PathBuf {
    if path.is_dir() {
        path.join("model.safetensors")
    } else {
        path.to_path_buf()
    }
}

/// Loads a model saved by [`save_model`] from a file or run directory, checking that its kind
/// is one of `kinds` (empty: any) and every tensor matches the network.
///
/// # Errors
/// `Io` if missing/unreadable; `Checkpoint` for a non-Proxima-LM file, a wrong kind (e.g. a
/// reward model where a policy is expected), or a tensor of the wrong name/shape/dtype.
pub fn load_model(path: &Path, kinds: &[&str]) -> Result<(TinyLm, String)> {
    let ((kind, spec), f) = read_f32_safetensors(&model_file(path), |md, bad| {
        match md.get("format").map(String::as_str) {
            Some(LM_FORMAT) => {}
            Some(proxima::checkpoint::FORMAT) => {
                return Err(bad(
                    "a reinforcement-learning checkpoint (`proxima train`'s), not a language model: evaluate it with `proxima eval`".into(),
                ))
            }
            Some(crate::resume::CHECKPOINT_FORMAT) => {
                return Err(bad(
                    "a checkpoint of an unfinished language-model run, not its model: `proxima lm eval` reads it; `proxima lm resume RUN_DIR` finishes the run, which writes its model.safetensors".into(),
                ))
            }
            _ => return Err(bad(format!("not a Proxima language-model file (format is not `{LM_FORMAT}`)"))),
        }
        let kind = md.get("kind").cloned().unwrap_or_default();
        if !kinds.is_empty() && !kinds.contains(&kind.as_str()) {
            return Err(bad(format!("holds a model of kind `{kind}`; expected {}", kinds.join(" or "))));
        }
        let spec: LmSpec = md
            .get("spec")
            .and_then(|s| serde_json::from_str(s).ok())
            .ok_or_else(|| bad("malformed or missing `spec`".into()))?;
        if spec != default_spec() {
            return Err(bad(format!("holds a network of shape {spec:?}; the addition task's is {:?}", default_spec())));
        }
        Ok((kind, spec))
    })?;
    let model = TinyLm::new(spec, 0, &Device::Cpu).map_err(|e| f.error(e))?;
    let params = model.named_params();
    if f.len() != params.len() {
        let missing = params.iter().map(|(n, _)| n.as_str()).find(|n| f.get(n).is_none());
        let mut names: Vec<&str> = f.names().collect();
        names.sort_unstable();
        let extra = names.into_iter().find(|n| !params.iter().any(|(p, _)| p == n));
        let which = match (missing, extra) {
            (Some(m), _) => format!("; missing tensor `{m}`"),
            (None, Some(x)) => format!("; `{x}` is not one of the network's"),
            _ => String::new(),
        };
        return Err(f.error(format!("{} tensors, the network has {}{which}", f.len(), params.len())));
    }
    for (name, var) in params {
        let (shape, v) = f.get(&name).ok_or_else(|| f.error(format!("missing tensor `{name}`")))?;
        if shape != var.dims() {
            return Err(f.error(format!("tensor `{name}` is F32 {shape:?}, expected F32 {:?}", var.dims())));
        }
        if v.iter().any(|x| !x.is_finite()) {
            return Err(f.error(format!("tensor `{name}` holds NaN/inf")));
        }
        var.set(&Tensor::from_slice(v, var.shape(), &Device::Cpu)?)?;
    }
    Ok((model, kind))
}

/// The weights files a command reads, each read (and checked) once: [`Weights::model`] hands out
/// a fresh copy of a file's network every time it is asked for one (the policy, π_ref and the
/// critic of `lm ppo` may all start from one file).
#[derive(Default)]
pub struct Weights {
    loaded: Vec<(PathBuf, TinyLm, String)>,
}

impl Weights {
    /// A copy of the network in `path` (a file or a run directory), whose kind must be one of
    /// `kinds`.
    ///
    /// # Errors
    /// As [`load_model`], the first time a file is asked for; a wrong kind every time.
    pub fn model(&mut self, path: &Path, kinds: &[&str]) -> Result<TinyLm> {
        let file = model_file(path);
        let i = match self.loaded.iter().position(|(p, _, _)| *p == file) {
            Some(i) => i,
            None => {
                let (m, kind) = load_model(&file, &[])?;
                self.loaded.push((file, m, kind));
                self.loaded.len() - 1
            }
        };
        let (file, model, kind) = &self.loaded[i];
        check_kind(file, kind, kinds)?;
        let copy = TinyLm::new(model.spec().clone(), 0, &Device::Cpu)?;
        for ((_, dst), (_, src)) in copy.named_params().iter().zip(model.named_params()) {
            dst.set(&src.as_tensor().copy()?)?;
        }
        Ok(copy)
    }
}

/// The error of a file whose model is of `kind`, where one of `kinds` was expected (none = any).
fn check_kind(file: &Path, kind: &str, kinds: &[&str]) -> Result<()> {
    if kinds.is_empty() || kinds.contains(&kind) {
        return Ok(());
    }
    Err(ProximaError::Checkpoint(format!(
        "{}: holds a model of kind `{kind}`; expected {}",
        file.display(),
        kinds.join(" or ")
    )))
}
