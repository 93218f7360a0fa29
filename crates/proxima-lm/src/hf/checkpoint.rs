//! A Hugging Face model directory read and written: `config.json`, the weights in
//! `model.safetensors` or sharded (`model.safetensors.index.json` and its shards), any dtype
//! (f32, f16, bf16) read as f32 for training and written back in the dtype each tensor had, and
//! the tokenizer's files copied along, so `transformers`' `from_pretrained` loads the result.
//! Every file is written atomically.

use super::config::{Arch, HfConfig};
use candle_core::{DType, Device, Tensor};
use proxima::io::write_atomic;
use proxima::{ProximaError, Result};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

/// The tokenizer's and generation's files copied from the source directory when a model is saved.
pub const SIDE_FILES: [&str; 7] = [
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "generation_config.json",
    "vocab.json",
    "merges.txt",
    "chat_template.jinja",
];

/// A checkpoint's tensors, as f32 on the CPU, by `transformers`' names, with the dtype each had.
pub struct HfTensors {
    /// name → f32 tensor.
    pub tensors: HashMap<String, Tensor>,
    /// name → the dtype in the file.
    pub dtypes: HashMap<String, DType>,
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> ProximaError + '_ {
    move |err| ProximaError::Io { path: path.display().to_string(), err }
}

/// The weights of the model in `dir`, checked against `cfg`'s names and shapes.
///
/// # Errors
/// `Io` for a missing file; `Checkpoint` for an unreadable safetensors file, a shard index that
/// is not JSON, a tensor missing or of the wrong shape.
pub fn load_weights(dir: &Path, cfg: &HfConfig) -> Result<HfTensors> {
    let single = dir.join("model.safetensors");
    let index = dir.join("model.safetensors.index.json");
    let files: Vec<std::path::PathBuf> = if single.exists() {
        vec![single]
    } else if index.exists() {
        let text = std::fs::read_to_string(&index).map_err(io_err(&index))?;
        let v: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| ProximaError::Checkpoint(format!("{}: not JSON: {e}", index.display())))?;
        let map = v
            .get("weight_map")
            .and_then(|m| m.as_object())
            .ok_or_else(|| ProximaError::Checkpoint(format!("{}: no `weight_map`", index.display())))?;
        let shards: std::collections::BTreeSet<&str> = map.values().filter_map(|f| f.as_str()).collect();
        shards.into_iter().map(|f| dir.join(f)).collect()
    } else {
        return Err(ProximaError::Checkpoint(format!(
            "{}: neither model.safetensors nor model.safetensors.index.json (a Hugging Face model directory holds one)",
            dir.display()
        )));
    };
    let (mut tensors, mut dtypes) = (HashMap::new(), HashMap::new());
    for file in files {
        if !file.exists() {
            return Err(ProximaError::Io {
                path: file.display().to_string(),
                err: std::io::ErrorKind::NotFound.into(),
            });
        }
        let loaded = candle_core::safetensors::load(&file, &Device::Cpu)
            .map_err(|e| ProximaError::Checkpoint(format!("{}: {e}", file.display())))?;
        for (name, t) in loaded {
            let name = canonical_name(cfg, &name);
            dtypes.insert(name.clone(), t.dtype());
            tensors.insert(name, t.to_dtype(DType::F32)?);
        }
    }
    for (name, shape) in cfg.param_shapes() {
        match tensors.get(&name) {
            None => return Err(ProximaError::Checkpoint(format!("{}: no tensor `{name}`", dir.display()))),
            Some(t) if t.dims() != shape.as_slice() => {
                return Err(ProximaError::Checkpoint(format!(
                    "{}: `{name}` has shape {:?}, the config says {shape:?}",
                    dir.display(),
                    t.dims()
                )))
            }
            Some(_) => {}
        }
    }
    Ok(HfTensors { tensors, dtypes })
}

/// `transformers`' current name of a tensor: GPT-2 checkpoints saved from `GPT2Model` (the
/// original `gpt2` one among them) leave out the `transformer.` prefix.
fn canonical_name(cfg: &HfConfig, name: &str) -> String {
    if cfg.arch == Arch::Gpt2 && !name.starts_with("transformer.") && !name.starts_with("lm_head.") {
        format!("transformer.{name}")
    } else {
        name.to_string()
    }
}

/// Writes a model directory: `config.json` (the source's, as read), `model.safetensors` with
/// `params` in the dtypes of `dtypes` (f32 for names it lacks), and the [`SIDE_FILES`] found in
/// `source`.
///
/// # Errors
/// `Io` when a file cannot be written; `Checkpoint` when serialisation fails.
pub fn save_dir(
    dir: &Path,
    cfg: &HfConfig,
    params: &[(String, Tensor)],
    dtypes: &HashMap<String, DType>,
    source: Option<&Path>,
) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(io_err(dir))?;
    let mut out: BTreeMap<String, Tensor> = BTreeMap::new();
    for (name, t) in params {
        let dtype = dtypes.get(name).copied().unwrap_or(DType::F32);
        out.insert(name.clone(), t.to_dtype(dtype)?.contiguous()?);
    }
    let metadata: HashMap<String, String> = [("format".to_string(), "pt".to_string())].into();
    let bytes = safetensors::serialize(out.iter().map(|(n, t)| (n.as_str(), t)), Some(metadata))
        .map_err(|e| ProximaError::Checkpoint(format!("serialising the weights: {e}")))?;
    write_atomic(&dir.join("model.safetensors"), &bytes)?;
    let config = serde_json::to_string_pretty(&cfg.raw).expect("JSON values serialise");
    write_atomic(&dir.join("config.json"), config.as_bytes())?;
    if let Some(src) = source.filter(|s| s != &dir) {
        for name in SIDE_FILES {
            let from = src.join(name);
            if from.exists() {
                let bytes = std::fs::read(&from).map_err(io_err(&from))?;
                write_atomic(&dir.join(name), &bytes)?;
            }
        }
    }
    Ok(())
}
