//! Reading a Proxima checkpoint (`proxima-checkpoint/1`): a safetensors file of f32 tensors
//! named as the policy's parameters (`actor.0.weight`, …; optimiser moments beside them, unread
//! here), and string metadata — `policy_spec` (the network, JSON), `normalization` (the frozen
//! observation statistics, JSON; only for a run with `normalize_observation`). The structures
//! below read the fields acting needs and ignore the rest, so a checkpoint written by a later
//! Proxima with more fields still loads.

use crate::Error;
use safetensors::{Dtype, SafeTensors};
use serde::Deserialize;
use std::collections::HashMap;
use std::path::Path;

/// The format a checkpoint's `format` metadata names.
const FORMAT: &str = "proxima-checkpoint/1";

/// The network, as the checkpoint's `policy_spec` describes it.
#[derive(Clone, Debug, Deserialize)]
pub(crate) struct Spec {
    pub obs_dim: usize,
    pub action: Action,
    pub net_arch: Vec<usize>,
    pub activation: Activation,
    pub shared_trunk: bool,
    /// `CnnPolicy`'s image, channel-first.
    #[serde(default)]
    pub cnn: Option<Image>,
    /// A recurrent policy's layers (not run here).
    #[serde(default)]
    pub recurrent: Option<serde_json::Value>,
    /// A `Dict` observation's keys when one is an image (not run here).
    #[serde(default)]
    pub inputs: Vec<serde_json::Value>,
}

/// A `CnnPolicy`'s frames: `[channels, height, width]`.
#[derive(Clone, Copy, Debug, Deserialize)]
pub(crate) struct Image {
    pub channels: usize,
    pub height: usize,
    pub width: usize,
}

/// The action space.
#[derive(Clone, Debug, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum Action {
    Discrete { n: usize },
    MultiDiscrete { nvec: Vec<usize> },
    Continuous { low: Vec<f32>, high: Vec<f32> },
}

/// A hidden layer's activation.
#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Activation {
    Tanh,
    Relu,
}

/// The frozen observation statistics (`normalization`): ô = clip((o − μ)/√(σ² + 1e-8), ±clip_obs).
#[derive(Clone, Debug, Deserialize)]
pub(crate) struct Normalization {
    pub obs_rms: Option<RunningMeanStd>,
    pub clip_obs: f64,
    /// Columns passed through (keys outside `norm_obs_keys`, image pixels).
    #[serde(default)]
    pub obs_raw: Vec<bool>,
}

#[derive(Clone, Debug, Deserialize)]
pub(crate) struct RunningMeanStd {
    pub mean: Vec<f64>,
    pub var: Vec<f64>,
}

/// Tensors by name: shape and values.
pub(crate) type Tensors = HashMap<String, (Vec<usize>, Vec<f32>)>;

/// A layer's weight shape, weight and bias, borrowed from the [`Tensors`].
pub(crate) type LayerRef<'a> = (&'a [usize], &'a [f32], &'a [f32]);

/// The weight and bias of layer `name` (`name.weight`, `name.bias`), checked finite (as the
/// trainer checks a checkpoint's parameters).
///
/// # Errors
/// `Checkpoint` naming a missing tensor or one holding NaN or ±∞.
pub(crate) fn layer<'a>(tensors: &'a Tensors, name: &str, path: &Path) -> Result<LayerRef<'a>, Error> {
    let get = |t: &str| {
        let full = format!("{name}.{t}");
        let (shape, v) =
            tensors.get(&full).ok_or_else(|| Error::Checkpoint(format!("{}: no tensor `{full}`", path.display())))?;
        if v.iter().any(|x| !x.is_finite()) {
            return Err(Error::Checkpoint(format!("{}: parameter `{full}` holds non-finite values", path.display())));
        }
        Ok((shape.as_slice(), v.as_slice()))
    };
    let (ws, w) = get("weight")?;
    let (_, b) = get("bias")?;
    Ok((ws, w, b))
}

/// What a checkpoint holds for acting.
pub(crate) struct Contents {
    pub spec: Spec,
    pub norm: Option<Normalization>,
    pub tensors: Tensors,
}

/// Reads `path`.
///
/// # Errors
/// `Io`; `Checkpoint` for a file that is not a Proxima checkpoint or has malformed metadata.
pub(crate) fn read(path: &Path) -> Result<Contents, Error> {
    let shown = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|source| Error::Io { path: shown.clone(), source })?;
    let bad = |m: String| Error::Checkpoint(format!("{shown}: {m}"));
    let st = SafeTensors::deserialize(&bytes).map_err(|e| bad(format!("not a safetensors file ({e})")))?;
    let (_, header) = SafeTensors::read_metadata(&bytes).map_err(|e| bad(format!("unreadable header ({e})")))?;
    let meta = header.metadata().clone().unwrap_or_default();
    if meta.get("format").map(String::as_str) != Some(FORMAT) {
        return Err(bad(format!("not a Proxima checkpoint (no `format = {FORMAT}` in its metadata)")));
    }
    let spec_json = meta.get("policy_spec").ok_or_else(|| bad("no policy_spec in its metadata".into()))?;
    let spec: Spec = serde_json::from_str(spec_json).map_err(|e| bad(format!("malformed policy_spec ({e})")))?;
    let norm = match meta.get("normalization") {
        Some(j) => Some(serde_json::from_str(j).map_err(|e| bad(format!("malformed normalization ({e})")))?),
        None => None,
    };
    let config = meta.get("config").and_then(|c| c.parse::<toml::Table>().ok());
    let normalized = config.and_then(|c| c.get("normalize_observation").and_then(|v| v.as_bool())) == Some(true);
    if normalized && norm.is_none() {
        return Err(bad("trained with normalize_observation = true, but holds no normalization statistics".into()));
    }
    let mut tensors = HashMap::new();
    for (name, view) in st.tensors() {
        if view.dtype() != Dtype::F32 {
            return Err(bad(format!("tensor `{name}` has dtype {:?}, expected F32", view.dtype())));
        }
        let v = view.data().chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
        tensors.insert(name, (view.shape().to_vec(), v));
    }
    Ok(Contents { spec, norm, tensors })
}
