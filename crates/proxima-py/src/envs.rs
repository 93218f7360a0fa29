//! Where a model's envs come from, as the Python layer hands them over: a registered id
//! (native, stepped in Rust; or `gym:ID`), Gymnasium env objects, env factories, or one vector
//! env object with same-step autoreset (a Gymnasium vector env, or an SB3 `VecEnv` behind the
//! Python layer's adapter).

use crate::errors::IntoPy;
use proxima::config::ValidConfig;
use proxima::env::{Env, EnvError};
use proxima::train::Trainer;
use proxima_gym::{GymEnv, GymVectorEnv};
use pyo3::prelude::*;

/// The envs of a run (see the module docs).
#[derive(FromPyObject)]
pub enum EnvSource {
    /// `("id", "CartPole-v1")`.
    Id((String, String)),
    /// `("objects" | "factories" | "vector", name, [objects])`.
    Objects((String, String, Vec<Py<PyAny>>)),
}

impl EnvSource {
    /// How many envs it gives (`None`: as many as the config asks for).
    pub fn n_envs(&self, py: Python<'_>) -> PyResult<Option<usize>> {
        Ok(match self {
            EnvSource::Id(_) => None,
            EnvSource::Objects((kind, _, objs)) if kind == "vector" => match objs.first() {
                Some(v) => Some(v.bind(py).getattr("num_envs")?.extract()?),
                None => None,
            },
            EnvSource::Objects((_, _, objs)) => Some(objs.len()),
        })
    }

    /// Whether it is an `atari:` id (the games the CLI may step in its worker processes).
    pub fn is_atari_id(&self) -> bool {
        matches!(self, EnvSource::Id((_, id)) if id.starts_with(proxima::env::atari::ATARI_PREFIX))
    }

    /// A fresh trainer on these envs.
    pub fn trainer(&self, py: Python<'_>, cfg: ValidConfig) -> PyResult<Trainer> {
        if let EnvSource::Objects((kind, _, objs)) = self {
            if !["objects", "factories", "vector"].contains(&kind.as_str()) || objs.is_empty() {
                return Err(pyo3::exceptions::PyValueError::new_err(format!(
                    "an env source of kind {kind:?} with {} objects (kinds: objects, factories, vector)",
                    objs.len()
                )));
            }
        }
        match self {
            EnvSource::Id((_, id)) => {
                let id = id.clone();
                py.detach(move || Trainer::new(&id, cfg)).py()
            }
            EnvSource::Objects((kind, name, objs)) if kind == "vector" => {
                let obj = &objs[0];
                let venv = GymVectorEnv::from_object(py, obj.bind(py).clone(), name)
                    .map_err(|e| crate::errors::to_py(e.into()))?;
                Trainer::with_batch_env(name, cfg, Box::new(venv)).py()
            }
            EnvSource::Objects((kind, name, objs)) => {
                let factories = kind == "factories";
                let mut next = 0usize;
                let mut made: Vec<Py<PyAny>> = Vec::new();
                let objs: Vec<Py<PyAny>> = objs.iter().map(|o| o.clone_ref(py)).collect();
                let make = move || -> proxima::env::Result<Box<dyn Env>> {
                    let i = next;
                    next += 1;
                    Python::attach(|py| {
                        let obj = if factories {
                            let f = objs[i % objs.len()].bind(py);
                            f.call0().map_err(|e| EnvError::Env(format!("env factory {i} raised: {e}")))?
                        } else {
                            objs.get(i).map(|o| o.bind(py).clone()).ok_or_else(|| {
                                EnvError::Unsupported(
                                    "this algorithm needs more envs than were given (A3C's workers make their own: pass env factories)".into(),
                                )
                            })?
                        };
                        if made.iter().any(|m| m.as_ptr() == obj.as_ptr()) {
                            return Err(EnvError::InvalidArgument(format!(
                                "env factory {} returned an env object it returned before: each env must be its own instance (as SB3's DummyVecEnv requires)",
                                i % objs.len()
                            )));
                        }
                        made.push(obj.clone().unbind());
                        let name = env_name(&obj);
                        Ok(Box::new(GymEnv::from_object(py, obj, &name)?) as Box<dyn Env>)
                    })
                };
                Trainer::with_env_fn(name, cfg, make).py()
            }
        }
    }
}

/// The name an env object goes by in errors: its `spec.id` when it has one, else its own class
/// below Gymnasium's wrappers (the user's, not the channel-first view Proxima puts over an image).
fn env_name(o: &Bound<'_, PyAny>) -> String {
    let base = o.getattr("unwrapped").unwrap_or_else(|_| o.clone());
    o.getattr("spec")
        .and_then(|s| s.getattr("id"))
        .and_then(|id| id.extract::<String>())
        .or_else(|_| base.get_type().name().map(|n| n.to_string()))
        .unwrap_or_else(|_| "env".into())
}
