//! Checkpoints: safetensors files holding the network's parameters (by name), the Adam moments
//! (`optim.m.<name>`, `optim.v.<name>`), and metadata (format, env id, network spec, resolved
//! config, counters) in the safetensors header.
//!
//! Writes are atomic: the bytes go to a temporary file in the same directory, which is synced
//! and renamed over the target, so a crash at any moment leaves either the old file or the new
//! one, never a torn one. Loading parses only safetensors (no code execution) and checks every
//! tensor's name, dtype and shape against the network before touching it.

use crate::algo::optim::Adam;
use crate::error::{ProximaError, Result};
use crate::policy::{ActorCritic, PolicySpec};
use candle_core::{Device, Tensor};
use safetensors::tensor::TensorView;
use safetensors::{Dtype, SafeTensors};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

/// The `format` metadata value of files this version writes.
pub const FORMAT: &str = "proxima-checkpoint/1";

/// What a checkpoint says about itself.
#[derive(Clone, Debug, PartialEq)]
pub struct CheckpointMeta {
    /// The environment the policy was trained on, e.g. `CartPole-v1`.
    pub env_id: String,
    /// The network's spec (rebuilds the architecture).
    pub policy: PolicySpec,
    /// The resolved training config, TOML.
    pub config_toml: String,
    /// Environment steps taken when saved.
    pub global_step: u64,
    /// Updates (rollouts) completed when saved.
    pub update: u64,
    /// Further string entries (trainer state for exact resume, …).
    pub extra: BTreeMap<String, String>,
}

/// Writes `bytes` to `path` atomically: temp file in the same directory, fsync, rename, fsync
/// of the directory.
///
/// # Errors
/// `Io` naming the path (the target is untouched on error and the temp file removed).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = path.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp.{}", std::process::id()));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    })();
    result.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        ProximaError::io(path, e)
    })
}

pub(crate) fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Saves `policy` (and `opt`'s moments, when given) with `meta` to `path`, atomically.
///
/// # Errors
/// `Io`; `Checkpoint` if serialisation fails.
pub fn save(path: &Path, policy: &ActorCritic, opt: Option<&Adam>, meta: &CheckpointMeta) -> Result<()> {
    let mut data: Vec<(String, Vec<usize>, Vec<u8>)> = Vec::new();
    for (i, (name, var)) in policy.named_params().iter().enumerate() {
        let shape = var.dims().to_vec();
        data.push((name.clone(), shape.clone(), f32_bytes(&var.as_tensor().flatten_all()?.to_vec1::<f32>()?)));
        if let Some(o) = opt {
            data.push((format!("optim.m.{name}"), shape.clone(), f32_bytes(&o.m[i])));
            data.push((format!("optim.v.{name}"), shape, f32_bytes(&o.v[i])));
        }
    }
    let mut md: HashMap<String, String> = meta.extra.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    md.insert("format".into(), FORMAT.into());
    md.insert("env_id".into(), meta.env_id.clone());
    md.insert("policy_spec".into(), serde_json::to_string(&meta.policy).expect("spec serialises"));
    md.insert("config".into(), meta.config_toml.clone());
    md.insert("global_step".into(), meta.global_step.to_string());
    md.insert("update".into(), meta.update.to_string());
    if let Some(o) = opt {
        md.insert("optim.t".into(), o.t.to_string());
    }
    write_f32_safetensors(path, &data, md)
}

/// Writes `(name, shape, little-endian f32 bytes)` tensors and `metadata` as one safetensors
/// file, atomically ([`write_atomic`]).
///
/// # Errors
/// `Checkpoint` if serialisation fails (a shape that does not match its bytes); `Io`.
pub(crate) fn write_f32_safetensors(
    path: &Path,
    data: &[(String, Vec<usize>, Vec<u8>)],
    metadata: HashMap<String, String>,
) -> Result<()> {
    let views = data
        .iter()
        .map(|(n, s, b)| {
            Ok((
                n.clone(),
                TensorView::new(Dtype::F32, s.clone(), b).map_err(|e| ProximaError::Checkpoint(e.to_string()))?,
            ))
        })
        .collect::<Result<Vec<_>>>()?;
    let bytes = safetensors::serialize(views, Some(metadata)).map_err(|e| ProximaError::Checkpoint(e.to_string()))?;
    write_atomic(path, &bytes)
}

/// A loaded checkpoint: metadata and f32 tensors by name.
#[derive(Clone, Debug)]
pub struct Checkpoint {
    /// Parsed metadata.
    pub meta: CheckpointMeta,
    /// Adam's step count, if moments were saved.
    pub optim_t: Option<u64>,
    tensors: HashMap<String, (Vec<usize>, Vec<f32>)>,
    path: String,
}

/// Loads and validates a checkpoint file.
///
/// # Errors
/// `Io` if unreadable; `Checkpoint` if it is not a safetensors file, not a Proxima checkpoint,
/// has malformed metadata, or holds a tensor that is not f32.
pub fn load(path: &Path) -> Result<Checkpoint> {
    let shown = path.display().to_string();
    let bad = |m: String| ProximaError::Checkpoint(format!("{shown}: {m}"));
    let bytes = std::fs::read(path).map_err(|e| ProximaError::io(path, e))?;
    let st = SafeTensors::deserialize(&bytes).map_err(|e| bad(format!("not a valid safetensors file ({e})")))?;
    let (_, header) = SafeTensors::read_metadata(&bytes).map_err(|e| bad(format!("unreadable header ({e})")))?;
    let md = header.metadata().clone().unwrap_or_default();
    let get =
        |k: &str| md.get(k).cloned().ok_or_else(|| bad(format!("metadata lacks `{k}` (not a Proxima checkpoint?)")));
    let format = get("format")?;
    if format != FORMAT {
        return Err(bad(format!("format `{format}` is not `{FORMAT}`")));
    }
    let policy: PolicySpec =
        serde_json::from_str(&get("policy_spec")?).map_err(|e| bad(format!("malformed policy_spec ({e})")))?;
    let num = |k: &str| -> Result<u64> { get(k)?.parse().map_err(|_| bad(format!("`{k}` is not a number"))) };
    let meta = CheckpointMeta {
        env_id: get("env_id")?,
        policy,
        config_toml: get("config")?,
        global_step: num("global_step")?,
        update: num("update")?,
        extra: md
            .iter()
            .filter(|(k, _)| {
                !["format", "env_id", "policy_spec", "config", "global_step", "update", "optim.t"].contains(&k.as_str())
            })
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    };
    let optim_t = if md.contains_key("optim.t") { Some(num("optim.t")?) } else { None };
    let mut tensors = HashMap::new();
    for (name, view) in st.tensors() {
        if view.dtype() != Dtype::F32 {
            return Err(bad(format!("tensor `{name}` has dtype {:?}, expected F32", view.dtype())));
        }
        let v: Vec<f32> =
            view.data().chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes"))).collect();
        tensors.insert(name, (view.shape().to_vec(), v));
    }
    Ok(Checkpoint { meta, optim_t, tensors, path: shown })
}

impl Checkpoint {
    /// Builds the network the checkpoint describes and loads its parameters.
    ///
    /// # Errors
    /// `Checkpoint` when the tensors do not match the spec in the metadata.
    pub fn build_policy(&self, device: &Device) -> Result<ActorCritic> {
        // Check the claimed architecture against the tensors actually in the file first, so a
        // corrupt or hostile spec cannot make us allocate a network larger than the file.
        for (name, shape) in self.meta.policy.param_shapes() {
            match self.tensors.get(&name) {
                Some((s, _)) if *s == shape => {}
                Some((s, _)) => {
                    return Err(ProximaError::Checkpoint(format!(
                        "{}: `{name}` has shape {s:?}, its policy_spec says {shape:?}",
                        self.path
                    )))
                }
                None => {
                    return Err(ProximaError::Checkpoint(format!(
                        "{}: policy_spec needs `{name}`, which the file lacks",
                        self.path
                    )))
                }
            }
        }
        let mut rng = <rand_chacha::ChaCha8Rng as rand::SeedableRng>::seed_from_u64(0); // overwritten by the file
        let policy = ActorCritic::new(self.meta.policy.clone(), device, &mut rng)
            .map_err(|e| ProximaError::Checkpoint(format!("{}: {e}", self.path)))?;
        self.load_into(&policy)?;
        Ok(policy)
    }

    /// Copies the parameters into an existing network, after checking that every parameter is
    /// present with the right shape and that the checkpoint holds no parameter the network lacks.
    ///
    /// # Errors
    /// `Checkpoint` naming the first missing, extra or mis-shaped tensor; nothing is changed then.
    pub fn load_into(&self, policy: &ActorCritic) -> Result<()> {
        let bad = |m: String| Err(ProximaError::Checkpoint(format!("{}: does not match the network: {m}", self.path)));
        let names: Vec<&str> = policy.named_params().iter().map(|(n, _)| n.as_str()).collect();
        for (name, var) in policy.named_params() {
            match self.tensors.get(name) {
                None => return bad(format!("parameter `{name}` is missing")),
                Some((shape, _)) if shape.as_slice() != var.dims() => {
                    return bad(format!("`{name}` has shape {shape:?} in the file, {:?} in the network", var.dims()))
                }
                _ => {}
            }
        }
        if let Some(extra) = self.tensors.keys().find(|k| !k.starts_with("optim.") && !names.contains(&k.as_str())) {
            return bad(format!("the file holds `{extra}`, which the network lacks"));
        }
        for name in &names {
            if self.tensors[*name].1.iter().any(|x| !x.is_finite()) {
                return Err(ProximaError::Checkpoint(format!(
                    "{}: parameter `{name}` holds non-finite values",
                    self.path
                )));
            }
        }
        for (name, var) in policy.named_params() {
            let (shape, v) = &self.tensors[name];
            var.set(&Tensor::from_slice(v, shape.as_slice(), var.device())?)?;
        }
        Ok(())
    }

    /// Restores Adam's moments and step count (exact resume).
    ///
    /// # Errors
    /// `Checkpoint` when the file holds no optimiser state or it does not match.
    pub fn restore_optimizer(&self, policy: &ActorCritic, opt: &mut Adam) -> Result<()> {
        let t =
            self.optim_t.ok_or_else(|| ProximaError::Checkpoint(format!("{}: holds no optimiser state", self.path)))?;
        let mut m = Vec::new();
        let mut v = Vec::new();
        for (name, var) in policy.named_params() {
            for (key, out) in [(format!("optim.m.{name}"), &mut m), (format!("optim.v.{name}"), &mut v)] {
                match self.tensors.get(&key) {
                    Some((_, data)) if data.len() == var.elem_count() => out.push(data.clone()),
                    _ => {
                        return Err(ProximaError::Checkpoint(format!(
                            "{}: optimiser state `{key}` missing or mis-sized",
                            self.path
                        )))
                    }
                }
            }
        }
        opt.m = m;
        opt.v = v;
        opt.t = t;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{ActionKind, Activation};
    use rand::SeedableRng;

    fn spec(width: usize) -> PolicySpec {
        PolicySpec {
            obs_dim: 4,
            action: ActionKind::Discrete { n: 2 },
            net_arch: vec![width, width],
            activation: Activation::Tanh,
            shared_trunk: false,
            log_std_init: 0.0,
            ortho_init: true,
        }
    }
    fn meta(width: usize) -> CheckpointMeta {
        CheckpointMeta {
            env_id: "CartPole-v1".into(),
            policy: spec(width),
            config_toml: String::new(),
            global_step: 512,
            update: 1,
            extra: BTreeMap::new(),
        }
    }

    #[test]
    fn round_trip_and_mismatch_errors() {
        let dir = std::env::temp_dir().join(format!("proxima-ckpt-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("a.safetensors");
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
        let net = ActorCritic::new(spec(16), &Device::Cpu, &mut rng).unwrap();
        let sizes: Vec<usize> = net.named_params().iter().map(|(_, v)| v.elem_count()).collect();
        let mut opt = Adam::new(&sizes, 1e-3, 1e-5);
        opt.t = 3;
        opt.m[0][0] = 0.25;
        save(&path, &net, Some(&opt), &meta(16)).unwrap();
        let ck = load(&path).unwrap();
        assert_eq!(ck.meta, meta(16));
        let net2 = ck.build_policy(&Device::Cpu).unwrap();
        for ((_, a), (_, b)) in net.named_params().iter().zip(net2.named_params()) {
            assert_eq!(
                a.as_tensor().flatten_all().unwrap().to_vec1::<f32>().unwrap(),
                b.as_tensor().flatten_all().unwrap().to_vec1::<f32>().unwrap()
            );
        }
        let mut opt2 = Adam::new(&sizes, 1e-3, 1e-5);
        ck.restore_optimizer(&net2, &mut opt2).unwrap();
        assert_eq!((opt2.t, opt2.m[0][0]), (3, 0.25));

        // A network of another width is refused, by name and shape.
        let other = ActorCritic::new(spec(32), &Device::Cpu, &mut rng).unwrap();
        let e = ck.load_into(&other).unwrap_err().to_string();
        assert!(e.contains("actor.0.weight") && e.contains("shape"), "{e}");

        // Garbage and truncated files are errors, not panics.
        std::fs::write(dir.join("junk"), b"hello world, not safetensors").unwrap();
        assert!(load(&dir.join("junk")).unwrap_err().to_string().contains("safetensors"));
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(dir.join("trunc"), &bytes[..bytes.len() / 2]).unwrap();
        assert!(load(&dir.join("trunc")).is_err());
        assert!(!dir.read_dir().unwrap().any(|e| e.unwrap().file_name().to_string_lossy().contains(".tmp.")));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
