//! N bridged envs as one Gymnasium vector env: `gymnasium.make_vec(id, num_envs=N,
//! vectorization_mode="sync" | "async")`, stepped with one Python call per step for all N
//! (`AsyncVectorEnv` steps them in subprocesses, in parallel).
//!
//! **Autoreset.** Gymnasium 1.x vector envs default to *next-step* autoreset (the step after an
//! episode ends returns the reset observation and a dummy transition). This bridge asks for
//! `autoreset_mode=AutoresetMode.SAME_STEP` instead — the convention of
//! [`proxima_env::vec_env`]: the ended episode's last observation comes back in
//! `info["final_obs"]` (masked by `info["_final_obs"]`) and the returned observation is already
//! the new episode's first — so every rollout row is a real transition and V(final observation)
//! bootstraps truncated episodes exactly as with envs bridged one by one. A Gymnasium without
//! `AutoresetMode` (before 1.1) is a clear error.

use crate::{init, map_spaces, py_err, Spaces, PREFIX};
use proxima_env::atari::GameEpisode;
use proxima_env::vec_env::{BatchEnv, BatchStep, VectorMode};
use proxima_env::{EnvError, Result, Space};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyTuple};

/// A Gymnasium vector env of N bridged envs, with same-step autoreset.
pub struct GymVectorEnv {
    id: String,
    n: usize,
    env: Py<PyAny>,
    np: Py<PyModule>,
    /// The single env's spaces, with the NumPy dtypes and shapes they declare.
    spaces: Spaces,
    /// Made here (closed on drop), not lent by the caller.
    owned: bool,
    /// Whether the envs have `action_masks()` (asked once, [`crate::masks::vector_env_has_action_masks`]).
    has_masks: bool,
}

fn env_err<'py>(py: Python<'py>, what: &str) -> impl Fn(PyErr) -> EnvError + 'py {
    let what = what.to_string();
    move |e| EnvError::Env(format!("{what}:\n{}", py_err(py, e)))
}

impl GymVectorEnv {
    /// `gymnasium.make_vec(spec, num_envs=n, vectorization_mode=…,
    /// vector_kwargs={"autoreset_mode": SAME_STEP})`, its single env's spaces mapped.
    ///
    /// # Errors
    /// As [`crate::GymEnv::make`]; a Gymnasium without same-step autoreset.
    pub fn make(spec: &str, n: usize, mode: VectorMode) -> Result<GymVectorEnv> {
        init()?;
        let id = format!("{PREFIX}{spec}");
        let mode_name = match mode {
            VectorMode::Sync => "sync",
            VectorMode::Async => "async",
            VectorMode::Subproc => {
                return Err(EnvError::InvalidArgument(
                    "GymVectorEnv is Gymnasium's sync/async vector env; subproc is SubprocVectorEnv".into(),
                ))
            }
        };
        Python::attach(|py| {
            let gym = py.import("gymnasium").map_err(env_err(py, "import gymnasium"))?;
            let np = py.import("numpy").map_err(env_err(py, "import numpy"))?;
            let same_step = py
                .import("gymnasium.vector")
                .and_then(|v| v.getattr("AutoresetMode"))
                .and_then(|m| m.getattr("SAME_STEP"))
                .map_err(|_| {
                    EnvError::Unsupported(format!(
                        "{id}: this Gymnasium has no gymnasium.vector.AutoresetMode.SAME_STEP (Gymnasium ≥ 1.1 has it); upgrade gymnasium"
                    ))
                })?;
            let vector_kwargs = PyDict::new(py);
            vector_kwargs.set_item("autoreset_mode", same_step).map_err(env_err(py, "vector_kwargs"))?;
            let kwargs = PyDict::new(py);
            kwargs.set_item("num_envs", n).map_err(env_err(py, "num_envs"))?;
            kwargs.set_item("vectorization_mode", mode_name).map_err(env_err(py, "vectorization_mode"))?;
            kwargs.set_item("vector_kwargs", vector_kwargs).map_err(env_err(py, "vector_kwargs"))?;
            let env = gym.call_method("make_vec", (spec,), Some(&kwargs)).map_err(|e| {
                EnvError::UnknownEnv(format!(
                    "gymnasium.make_vec({spec:?}, num_envs={n}, vectorization_mode={mode_name:?}) failed:\n{}",
                    py_err(py, e)
                ))
            })?;
            GymVectorEnv::wrap(py, env, np, id, n, true)
        })
    }

    /// A Gymnasium vector env object the caller already has, named `id` in errors and
    /// checkpoints. It must autoreset in the same step (`autoreset_mode=SAME_STEP`, or an object
    /// that behaves so and says so in `metadata["autoreset_mode"]`).
    ///
    /// # Errors
    /// `Unsupported` for another autoreset mode (named); `Env` when it lacks `num_envs` or its
    /// single spaces; an unsupported space.
    pub fn from_object(py: Python<'_>, env: Bound<'_, PyAny>, id: &str) -> Result<GymVectorEnv> {
        let np = py.import("numpy").map_err(env_err(py, "import numpy"))?;
        let mode = env
            .getattr("metadata")
            .and_then(|m| m.get_item("autoreset_mode"))
            .and_then(|m| m.getattr("name").or_else(|_| m.str().map(|s| s.into_any())))
            .and_then(|n| n.extract::<String>())
            .unwrap_or_else(|_| "NEXT_STEP".into());
        if !mode.ends_with("SAME_STEP") {
            return Err(EnvError::Unsupported(format!(
                "{id}: a vector env with autoreset_mode {mode}; make it with autoreset_mode=gymnasium.vector.AutoresetMode.SAME_STEP (e.g. gymnasium.make_vec(id, n, vector_kwargs={{\"autoreset_mode\": AutoresetMode.SAME_STEP}})) or pass the single envs"
            )));
        }
        let n: usize = env.getattr("num_envs").and_then(|n| n.extract()).map_err(env_err(py, "num_envs"))?;
        GymVectorEnv::wrap(py, env, np, id.to_string(), n, false)
    }

    fn wrap(
        py: Python<'_>,
        env: Bound<'_, PyAny>,
        np: Bound<'_, PyModule>,
        id: String,
        n: usize,
        owned: bool,
    ) -> Result<GymVectorEnv> {
        let space = |attr: &str| env.getattr(attr).map_err(env_err(py, attr));
        let spaces = map_spaces(&space("single_observation_space")?, &space("single_action_space")?, &id)?;
        let has_masks = spaces.action_space.mask_dim() > 0 && crate::masks::vector_env_has_action_masks(py, &env);
        Ok(GymVectorEnv { id, n, env: env.unbind(), np: np.unbind(), spaces, owned, has_masks })
    }

    /// A batch (or one) of observations as contiguous f32, after checking shape and dtype.
    fn observations(&self, py: Python<'_>, obs: &Bound<'_, PyAny>, batch: bool, out: &mut Vec<f32>) -> Result<()> {
        let np = self.np.bind(py);
        let flat;
        let obs = match &self.spaces.structured {
            Some(s) if batch => {
                let batched =
                    self.env.bind(py).getattr("observation_space").map_err(env_err(py, "observation_space"))?;
                flat = s.flatten_batch(py, &batched, obs, &self.id)?;
                &flat
            }
            Some(s) => {
                flat = s.flatten(py, obs, &self.id)?;
                &flat
            }
            None => obs,
        };
        let arr = np.call_method1("asarray", (obs,)).map_err(env_err(py, "np.asarray"))?;
        let shape: Vec<usize> = arr.getattr("shape").and_then(|s| s.extract()).map_err(env_err(py, "shape"))?;
        let dtype = arr.getattr("dtype").and_then(|d| d.str()).map(|s| s.to_string()).unwrap_or_default();
        let want: Vec<usize> =
            if batch { [&[self.n][..], &self.spaces.obs_shape].concat() } else { self.spaces.obs_shape.clone() };
        // The vector env casts the batch to the space's dtype itself; a final observation comes
        // raw from the env, so only its shape is checked (cast as the batch is).
        if shape != want || (batch && self.spaces.structured.is_none() && dtype != self.spaces.obs_dtype) {
            return Err(EnvError::Env(format!(
                "{} returned observations of shape {shape:?} and dtype {dtype}; expected shape {want:?} and dtype {}",
                self.id, self.spaces.obs_dtype
            )));
        }
        let bytes = arr
            .call_method1("astype", ("<f4",))
            .and_then(|a| a.call_method0("tobytes"))
            .map_err(env_err(py, "tobytes"))?;
        let bytes = bytes.cast::<PyBytes>().map_err(|e| EnvError::Env(e.to_string()))?;
        out.clear();
        out.extend(bytes.as_bytes().chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])));
        Ok(())
    }

    /// The N actions `[N, act_dim]` as the array the vector env takes.
    fn actions<'py>(&self, py: Python<'py>, actions: &[f32]) -> Result<Bound<'py, PyAny>> {
        let np = self.np.bind(py);
        let buf = PyBytes::new(py, &actions.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>());
        let shape: Vec<usize> = match self.spaces.action_space {
            Space::Discrete { .. } => vec![self.n],
            _ => [&[self.n][..], &self.spaces.act_shape].concat(),
        };
        let dtype = match self.spaces.action_space {
            Space::Discrete { .. } => "int64",
            _ => self.spaces.act_dtype.as_str(),
        };
        np.call_method1("frombuffer", (buf, "<f4"))
            .and_then(|a| a.call_method1("astype", (dtype,)))
            .and_then(|a| a.call_method1("reshape", (PyTuple::new(py, &shape)?,)))
            .map_err(env_err(py, "actions"))
    }
}

impl BatchEnv for GymVectorEnv {
    fn id(&self) -> &str {
        &self.id
    }
    fn num_envs(&self) -> usize {
        self.n
    }
    fn observation_space(&self) -> Space {
        self.spaces.observation_space.clone()
    }
    fn action_space(&self) -> Space {
        self.spaces.action_space.clone()
    }
    fn reset(&mut self, seed: u64, obs: &mut [f32]) -> Result<()> {
        Python::attach(|py| {
            let kwargs = PyDict::new(py);
            kwargs.set_item("seed", seed).map_err(env_err(py, "seed"))?;
            let what = format!("{}.reset raised", self.id);
            let out = self.env.bind(py).call_method("reset", (), Some(&kwargs)).map_err(env_err(py, &what))?;
            let mut v = Vec::new();
            self.observations(py, &out.get_item(0).map_err(env_err(py, "reset's observations"))?, true, &mut v)?;
            obs.copy_from_slice(&v);
            Ok(())
        })
    }
    fn step(&mut self, actions: &[f32], out: &mut BatchStep) -> Result<()> {
        Python::attach(|py| {
            let a = self.actions(py, actions)?;
            let what = format!("{}.step raised", self.id);
            let res = self.env.bind(py).call_method1("step", (a,)).map_err(env_err(py, &what))?;
            let item = |i: usize| res.get_item(i).map_err(env_err(py, "step's 5 values"));
            self.observations(py, &item(0)?, true, &mut out.obs)?;
            let tolist = |i: usize, what: &str| item(i)?.call_method0("tolist").map_err(env_err(py, what));
            out.rewards = tolist(1, "rewards")?.extract().map_err(env_err(py, "rewards"))?;
            out.terminated = tolist(2, "terminated")?.extract().map_err(env_err(py, "terminated"))?;
            out.truncated = tolist(3, "truncated")?.extract().map_err(env_err(py, "truncated"))?;
            out.final_obs.clear();
            out.final_obs.resize(self.n, None);
            out.games.clear();
            let info = item(4)?;
            let ended = (0..self.n).any(|i| {
                out.terminated.get(i).copied().unwrap_or(false) || out.truncated.get(i).copied().unwrap_or(false)
            });
            if ended {
                let final_obs =
                    info.get_item("final_obs").map_err(env_err(py, "info[\"final_obs\"] of an ended episode"))?;
                let mask: Vec<bool> = info
                    .get_item("_final_obs")
                    .and_then(|m| m.call_method0("tolist"))
                    .and_then(|m| m.extract())
                    .map_err(env_err(py, "info[\"_final_obs\"]"))?;
                for (i, &has) in mask.iter().enumerate().take(self.n) {
                    if has {
                        let mut v = Vec::new();
                        let o = final_obs.get_item(i).map_err(env_err(py, "a final observation"))?;
                        self.observations(py, &o, false, &mut v)?;
                        out.final_obs[i] = Some(v);
                    }
                }
                if let Ok(games) = info.get_item("games") {
                    read_games(&games, self.n, &mut out.games);
                }
            }
            Ok(())
        })
    }
    fn observation_keys(&self) -> Vec<proxima_env::ObsKey> {
        self.spaces.structured.as_ref().map(|s| s.keys()).unwrap_or_default()
    }
    /// `call("action_masks")`: each env's method, found through its wrappers (Gymnasium's vector
    /// envs look it up with `get_wrapper_attr`).
    fn action_masks(&mut self, out: &mut [bool]) -> Result<bool> {
        if !self.has_masks {
            return Ok(false);
        }
        Python::attach(|py| {
            let masks = self
                .env
                .bind(py)
                .call_method1("call", ("action_masks",))
                .map_err(|e| EnvError::Env(format!("{}.action_masks() raised:\n{}", self.id, py_err(py, e))))?;
            let stacked = self.np.bind(py).call_method1("stack", (&masks,)).unwrap_or(masks);
            crate::masks::read_masks(py, self.np.bind(py), &stacked, &self.id, out)?;
            Ok(true)
        })
    }
}

impl Drop for GymVectorEnv {
    /// Closes the vector env made here (an `AsyncVectorEnv` ends its subprocesses); one the
    /// caller lent stays open.
    fn drop(&mut self) {
        if !self.owned {
            return;
        }
        Python::attach(|py| {
            let _ = self.env.bind(py).call_method0("close");
        });
    }
}

/// `info["games"]` of an SB3 `VecEnv` with a `Monitor` under it (the Python package's adapter):
/// per env `(r, l)` where the Monitor recorded a whole episode, `False` where only the learner's
/// episode ended (a lost Atari life), `None` otherwise — as [`GameEpisode`]s, so that the logs
/// record the Monitor's episodes as SB3's do. Anything else reads as `None` (the ends counted).
fn read_games(games: &Bound<'_, PyAny>, n: usize, out: &mut Vec<Option<GameEpisode>>) {
    out.resize(n, None);
    for (i, slot) in out.iter_mut().enumerate() {
        let Ok(g) = games.get_item(i) else { continue };
        *slot = if let Ok((score, frames)) = g.extract::<(f64, usize)>() {
            Some(GameEpisode::Over { score, frames })
        } else if g.extract::<bool>().is_ok_and(|b| !b) {
            Some(GameEpisode::LifeLost)
        } else {
            None
        };
    }
}
