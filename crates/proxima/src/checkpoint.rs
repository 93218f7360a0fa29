//! Checkpoints: safetensors files holding the network's parameters (by name), the named
//! optimiser states (`<optimizer>.<buffer>.<parameter>` tensors, e.g. `optim.m.actor.0.weight`,
//! and `<optimizer>.t` in the metadata), and metadata (format, env id, network spec, resolved
//! config, counters) in the safetensors header. The file format knows no optimiser type: an
//! optimiser is a step count and named per-parameter buffers ([`OptimizerState`]).
//!
//! Writes are atomic and reads validated ([`crate::io`]); loading checks every tensor's name,
//! dtype and shape against the network before touching it.

use crate::error::{ProximaError, Result};
use crate::io::{read_f32_safetensors, write_f32_safetensors, F32Tensors, NamedTensor};
use crate::policy::{ActorCritic, Backend, Network, Policy, PolicySpec};
use candle_core::Device;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

/// The `format` metadata value of files this version writes.
pub const FORMAT: &str = "proxima-checkpoint/1";

/// The name of the trainer's one optimiser in checkpoints (its tensors are `optim.m.*`,
/// `optim.v.*`, its step count `optim.t`).
pub const OPTIMIZER: &str = "optim";

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

/// One optimiser's state as a checkpoint stores it: its step count and named buffers (Adam's
/// `m` and `v`), each one array per network parameter, in the network's parameter order.
#[derive(Clone, Debug, PartialEq)]
pub struct OptimizerState {
    /// Steps taken (t).
    pub t: u64,
    /// `(buffer name, one array per parameter)`.
    pub buffers: Vec<(String, Vec<Vec<f32>>)>,
}

/// Saves `policy` (and the named optimiser states) with `meta` to `path`, atomically.
///
/// # Errors
/// `Io`; `Checkpoint` if serialisation fails or an optimiser's buffers do not fit the network.
pub fn save(
    path: &Path,
    policy: &dyn Policy,
    optimizers: &[(&str, &OptimizerState)],
    meta: &CheckpointMeta,
) -> Result<()> {
    save_with_data(path, policy, optimizers, meta, &[])
}

/// The metadata entry (`"true"`) of a checkpoint whose policy trained under its envs' action masks
/// (sb3-contrib's `MaskablePPO`); absent otherwise, and in checkpoints written before it existed.
pub const TRAINED_MASKED: &str = "trained_masked";

/// Names of the tensors of an algorithm's own state in a checkpoint start with this (PPG's
/// auxiliary buffer: `data.ppg.observations`, …); they are neither parameters nor optimiser
/// moments.
pub const DATA_PREFIX: &str = "data.";

/// [`save`], with `data` — an algorithm's state that is not per parameter, `(name, shape,
/// values)`, each name without [`DATA_PREFIX`], which is added — in the same file.
///
/// # Errors
/// As [`save`].
pub fn save_with_data(
    path: &Path,
    policy: &dyn Policy,
    optimizers: &[(&str, &OptimizerState)],
    meta: &CheckpointMeta,
    state: &[NamedTensor<'_>],
) -> Result<()> {
    let shapes = policy.param_shapes();
    let values = policy.params()?;
    let mut data: Vec<NamedTensor<'_>> = Vec::new();
    for (i, ((name, shape), v)) in shapes.iter().zip(&values).enumerate() {
        data.push((name.clone(), shape.clone(), v));
        for (opt, state) in optimizers {
            for (buffer, arrays) in &state.buffers {
                let a = arrays.get(i).ok_or_else(|| {
                    ProximaError::Checkpoint(format!("optimiser `{opt}` has no `{buffer}` for parameter `{name}`"))
                })?;
                data.push((format!("{opt}.{buffer}.{name}"), shape.clone(), a));
            }
        }
    }
    for (name, shape, v) in state {
        data.push((format!("{DATA_PREFIX}{name}"), shape.clone(), v));
    }
    let mut md: HashMap<String, String> = meta.extra.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    md.insert("format".into(), FORMAT.into());
    md.insert("env_id".into(), meta.env_id.clone());
    md.insert("policy_spec".into(), serde_json::to_string(&meta.policy).expect("spec serialises"));
    md.insert("config".into(), meta.config_toml.clone());
    md.insert("global_step".into(), meta.global_step.to_string());
    md.insert("update".into(), meta.update.to_string());
    for (opt, state) in optimizers {
        md.insert(format!("{opt}.t"), state.t.to_string());
    }
    write_f32_safetensors(path, &data, md)
}

/// A loaded checkpoint: metadata and f32 tensors by name.
#[derive(Clone, Debug)]
pub struct Checkpoint {
    /// Parsed metadata.
    pub meta: CheckpointMeta,
    /// The step count of the trainer's optimiser ([`OPTIMIZER`]), if its state was saved.
    pub optim_t: Option<u64>,
    file: F32Tensors,
}

/// Metadata keys that are not `extra`.
const META_KEYS: [&str; 6] = ["format", "env_id", "policy_spec", "config", "global_step", "update"];

/// Loads and validates a checkpoint file.
///
/// # Errors
/// `Io` if unreadable; `Checkpoint` if it is not a safetensors file, not a Proxima checkpoint,
/// has malformed metadata, or holds a tensor that is not f32.
pub fn load(path: &Path) -> Result<Checkpoint> {
    let ((meta, optim_t), file) = read_f32_safetensors(path, parse_meta)?;
    Ok(Checkpoint { meta, optim_t, file })
}

/// [`load`] of a checkpoint file's bytes, read elsewhere (`shown`: its name in errors): a
/// distributed run's ranks resume from the bytes rank 0 read and sent them.
///
/// # Errors
/// As [`load`], but no `Io`.
pub fn load_bytes(bytes: &[u8], shown: &str) -> Result<Checkpoint> {
    let ((meta, optim_t), file) = crate::io::read_f32_safetensors_bytes(bytes, shown, parse_meta)?;
    Ok(Checkpoint { meta, optim_t, file })
}

/// A checkpoint's metadata, and the step count of its trainer's optimiser.
fn parse_meta(
    md: &HashMap<String, String>,
    bad: &dyn Fn(String) -> ProximaError,
) -> Result<(CheckpointMeta, Option<u64>)> {
    if md.contains_key("replay_buffer") {
        return Err(bad("an off-policy run's replay buffer, not a model checkpoint: give the checkpoint beside it \
             (`update_<n>.safetensors`), the run directory or its `model.safetensors`"
            .into()));
    }
    let get =
        |k: &str| md.get(k).cloned().ok_or_else(|| bad(format!("metadata lacks `{k}` (not a Proxima checkpoint?)")));
    let format = get("format")?;
    if format.starts_with("proxima-lm") {
        return Err(bad(format!(
            "a language-model file (format `{format}`), not a reinforcement-learning checkpoint: `proxima lm eval` reads it"
        )));
    }
    if format != FORMAT {
        return Err(bad(format!("format `{format}` is not `{FORMAT}`")));
    }
    let policy: PolicySpec =
        serde_json::from_str(&get("policy_spec")?).map_err(|e| bad(format!("malformed policy_spec ({e})")))?;
    let num = |k: &str| -> Result<u64> { get(k)?.parse().map_err(|_| bad(format!("`{k}` is not a number"))) };
    let is_optimizer_key = |k: &str| k.strip_suffix(".t").is_some_and(|o| !o.contains('.'));
    let meta = CheckpointMeta {
        env_id: get("env_id")?,
        policy,
        config_toml: get("config")?,
        global_step: num("global_step")?,
        update: num("update")?,
        extra: md
            .iter()
            .filter(|(k, _)| !META_KEYS.contains(&k.as_str()) && !is_optimizer_key(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    };
    let t_key = format!("{OPTIMIZER}.t");
    let optim_t = if md.contains_key(&t_key) { Some(num(&t_key)?) } else { None };
    Ok((meta, optim_t))
}

impl Checkpoint {
    /// The file's path, as errors show it.
    pub fn path(&self) -> &str {
        &self.file.path
    }

    /// An algorithm's state tensor saved with [`save_with_data`] under `name` (without
    /// [`DATA_PREFIX`]): its shape and values.
    pub fn data(&self, name: &str) -> Option<(&[usize], &[f32])> {
        self.file.get(&format!("{DATA_PREFIX}{name}"))
    }

    /// Whether tensor `name` belongs to a saved optimiser state: the trainer's (`optim.…`), or
    /// another optimiser's (`<optimizer>.…` with `<optimizer>.t` in the metadata).
    fn is_optimizer_tensor(&self, name: &str) -> bool {
        name.starts_with(&format!("{OPTIMIZER}."))
            || name.split_once('.').is_some_and(|(opt, _)| self.file.metadata.contains_key(&format!("{opt}.t")))
    }

    /// The off-policy networks the checkpoint holds (from its config's `algo` and `n_critics`):
    /// `(kind, n_critics)`, or `None` for an actor-critic.
    pub fn off_policy_nets(&self) -> Option<crate::policy::OffPolicyShape> {
        let t = self.meta.config_toml.parse::<toml::Table>().ok()?;
        let int = |k: &str, or: usize| t.get(k).and_then(|v| v.as_integer()).map_or(or, |n| n.max(0) as usize);
        crate::policy::offpolicy::nets_of_algo(t.get("algo")?.as_str()?, int("n_critics", 2), int("n_quantiles", 25))
    }

    /// Builds the network the checkpoint describes and loads its parameters.
    ///
    /// # Errors
    /// `Checkpoint` when the tensors do not match the spec in the metadata.
    pub fn build_policy(&self, device: &Device) -> Result<ActorCritic> {
        self.check_spec_shapes()?;
        let mut rng = <rand_chacha::ChaCha8Rng as rand::SeedableRng>::seed_from_u64(0); // overwritten by the file
        let mut policy =
            ActorCritic::new(self.meta.policy.clone(), device, &mut rng).map_err(|e| self.file.error(e))?;
        self.load_into(&mut policy)?;
        Ok(policy)
    }

    /// [`Checkpoint::build_policy`] on either backend (`Auto` means fused): a checkpoint written
    /// by one backend loads into the other, since both keep the spec's names, shapes and layout.
    ///
    /// # Errors
    /// As [`Checkpoint::build_policy`].
    pub fn build_network(&self, backend: Backend) -> Result<Network> {
        self.check_spec_shapes()?;
        let mut rng = <rand_chacha::ChaCha8Rng as rand::SeedableRng>::seed_from_u64(0); // overwritten by the file
        let spec = self.meta.policy.clone();
        let net = match self.off_policy_nets() {
            Some(shape) => Network::off_policy(spec, shape, backend, &mut rng),
            None => Network::new(spec, backend, &mut rng),
        };
        let mut net = net.map_err(|e| self.file.error(e))?;
        self.load_into(&mut net)?;
        Ok(net)
    }

    /// Checks the claimed architecture against the tensors actually in the file, before any
    /// network is built, so a corrupt or hostile spec cannot make us allocate a network larger
    /// than the file.
    fn check_spec_shapes(&self) -> Result<()> {
        let shapes = match self.off_policy_nets() {
            Some(shape) => crate::policy::offpolicy::param_shapes_for(&self.meta.policy, shape),
            None => self.meta.policy.param_shapes(),
        };
        for (name, shape) in shapes {
            match self.file.get(&name) {
                Some((s, _)) if *s == shape[..] => {}
                Some((s, _)) => {
                    return Err(self.file.error(format!("`{name}` has shape {s:?}, its policy_spec says {shape:?}")))
                }
                None => return Err(self.file.error(format!("policy_spec needs `{name}`, which the file lacks"))),
            }
        }
        Ok(())
    }

    /// Copies the parameters into an existing network, after checking that every parameter is
    /// present with the right shape and that the checkpoint holds no parameter the network lacks.
    ///
    /// # Errors
    /// `Checkpoint` naming the first missing, extra or mis-shaped tensor; nothing is changed then.
    pub fn load_into(&self, policy: &mut dyn Policy) -> Result<()> {
        let bad = |m: String| Err(self.file.error(format!("does not match the network: {m}")));
        let shapes = policy.param_shapes();
        for (name, shape) in &shapes {
            match self.file.get(name) {
                None => return bad(format!("parameter `{name}` is missing")),
                Some((s, _)) if s != shape.as_slice() => {
                    return bad(format!("`{name}` has shape {s:?} in the file, {shape:?} in the network"))
                }
                _ => {}
            }
        }
        let is_param = |k: &str| shapes.iter().any(|(n, _)| n == k);
        let mut names: Vec<&str> = self.file.names().collect();
        names.sort_unstable(); // name the same tensor every time
        let is_data = |k: &str| k.starts_with(DATA_PREFIX);
        if let Some(extra) = names.into_iter().find(|k| !self.is_optimizer_tensor(k) && !is_param(k) && !is_data(k)) {
            return bad(format!("the file holds `{extra}`, which the network lacks"));
        }
        let mut values = Vec::with_capacity(shapes.len());
        for (name, _) in &shapes {
            let (_, v) = self.file.get(name).expect("checked above");
            if v.iter().any(|x| !x.is_finite()) {
                return Err(self.file.error(format!("parameter `{name}` holds non-finite values")));
            }
            values.push(v.to_vec());
        }
        policy.set_params(&values)
    }

    /// The state of optimiser `name` with `buffers` (e.g. Adam's `["m", "v"]`) for the
    /// parameters of `spec` (exact resume).
    ///
    /// # Errors
    /// `Checkpoint` when the file holds no such optimiser state or a buffer is missing,
    /// mis-sized or holds a non-finite value (a damaged file).
    pub fn optimizer_state(&self, name: &str, buffers: &[&str], spec: &PolicySpec) -> Result<OptimizerState> {
        self.optimizer_state_for(name, buffers, &spec.param_shapes())
    }

    /// [`Checkpoint::optimizer_state`] for the parameters `shapes` (a network's own,
    /// [`Policy::param_shapes`]).
    ///
    /// # Errors
    /// As [`Checkpoint::optimizer_state`].
    pub fn optimizer_state_for(
        &self,
        name: &str,
        buffers: &[&str],
        shapes: &[(String, Vec<usize>)],
    ) -> Result<OptimizerState> {
        let t = match self.file.metadata.get(&format!("{name}.t")) {
            Some(t) => t.parse().map_err(|_| self.file.error(format!("`{name}.t` is not a number")))?,
            None => return Err(self.file.error("holds no optimiser state")),
        };
        let mut out = Vec::new();
        for b in buffers {
            let mut arrays = Vec::with_capacity(shapes.len());
            for (param, shape) in shapes {
                let key = format!("{name}.{b}.{param}");
                match self.file.get(&key) {
                    // Training never saves one (a step that would makes the run stop first).
                    Some((_, data)) if data.iter().any(|x| !x.is_finite()) => {
                        return Err(self.file.error(format!("optimiser state `{key}` holds non-finite values")))
                    }
                    Some((_, data)) if data.len() == shape.iter().product::<usize>() => arrays.push(data.to_vec()),
                    _ => return Err(self.file.error(format!("optimiser state `{key}` missing or mis-sized"))),
                }
            }
            out.push((b.to_string(), arrays));
        }
        Ok(OptimizerState { t, buffers: out })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{ActionKind, Activation};
    use rand::SeedableRng;

    fn spec(width: usize) -> PolicySpec {
        PolicySpec {
            cnn: None,
            obs_dim: 4,
            action: ActionKind::Discrete { n: 2 },
            net_arch: vec![width, width],
            activation: Activation::Tanh,
            shared_trunk: false,
            log_std_init: 0.0,
            ortho_init: true,
            aux_value_head: false,
            recurrent: None,
            inputs: Vec::new(),
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

    fn adam_state(net: &ActorCritic) -> OptimizerState {
        let zeros: Vec<Vec<f32>> = net.named_params().iter().map(|(_, v)| vec![0.0; v.elem_count()]).collect();
        let mut m = zeros.clone();
        m[0][0] = 0.25;
        OptimizerState { t: 3, buffers: vec![("m".into(), m), ("v".into(), zeros)] }
    }

    #[test]
    fn round_trip_and_mismatch_errors() {
        let dir = std::env::temp_dir().join(format!("proxima-ckpt-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("a.safetensors");
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
        let net = ActorCritic::new(spec(16), &Device::Cpu, &mut rng).unwrap();
        let opt = adam_state(&net);
        save(&path, &net, &[(OPTIMIZER, &opt)], &meta(16)).unwrap();
        let ck = load(&path).unwrap();
        assert_eq!(ck.meta, meta(16));
        let net2 = ck.build_policy(&Device::Cpu).unwrap();
        for ((_, a), (_, b)) in net.named_params().iter().zip(net2.named_params()) {
            assert_eq!(
                a.as_tensor().flatten_all().unwrap().to_vec1::<f32>().unwrap(),
                b.as_tensor().flatten_all().unwrap().to_vec1::<f32>().unwrap()
            );
        }
        let opt2 = ck.optimizer_state(OPTIMIZER, &["m", "v"], net2.spec()).unwrap();
        assert_eq!(opt2, opt);
        assert_eq!(ck.optim_t, Some(3));
        assert!(ck
            .optimizer_state("critic_optim", &["m"], net2.spec())
            .unwrap_err()
            .to_string()
            .contains("no optimiser"));
        // A damaged moment (NaN) is the file's fault, said at load, not a divergence at the next step.
        let mut damaged = adam_state(&net);
        damaged.buffers[1].1[1][2] = f32::NAN;
        let damaged_path = dir.join("damaged.safetensors");
        save(&damaged_path, &net, &[(OPTIMIZER, &damaged)], &meta(16)).unwrap();
        let e = load(&damaged_path).unwrap().optimizer_state(OPTIMIZER, &["m", "v"], net2.spec()).unwrap_err();
        assert!(e.to_string().contains("optimiser state `optim.v.") && e.to_string().contains("non-finite"), "{e}");

        // A network of another width is refused, by name and shape.
        let mut other = ActorCritic::new(spec(32), &Device::Cpu, &mut rng).unwrap();
        let e = ck.load_into(&mut other).unwrap_err().to_string();
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

    #[test]
    fn an_sb3_zip_and_a_replay_buffer_are_named_for_what_they_are() {
        let e = load_bytes(b"PK\x03\x04\x14\x00rest of an SB3 model.zip", "sac.zip").unwrap_err().to_string();
        assert!(e.contains("sac.zip: a zip archive (a Stable-Baselines3 `.zip`?)"), "{e}");
        assert!(e.contains("set_parameters(sb3_model.policy.state_dict())"), "{e}");
        let dir = std::env::temp_dir().join(format!("proxima-ck-replay-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("update_000003.replay.safetensors");
        let md = [("replay_buffer".to_string(), "{}".to_string())].into_iter().collect();
        crate::io::write_f32_safetensors(&path, &[("rewards".into(), vec![2], &[1.0, 2.0])], md).unwrap();
        let e = load(&path).unwrap_err().to_string();
        assert!(e.contains("an off-policy run's replay buffer, not a model checkpoint"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
