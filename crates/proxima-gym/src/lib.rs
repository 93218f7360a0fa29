//! The bridge from Proxima to Python Gymnasium environments, through PyO3 (and to reward
//! functions written in Python, [`reward`]).
//!
//! `proxima train gym:ENV_ID` (CLI built with `--features gym`) trains on anything registered in
//! the user's Gymnasium: the text after `gym:` goes to `gymnasium.make` unchanged, so
//! Gymnasium's `module:EnvId` form (import `module`, which registers the env, then make it)
//! works too.
//!
//! **Which Python.** The interpreter is embedded (the libpython this crate was linked against),
//! but its `sys.path` is taken from the Python the user's shell points to: `$PROXIMA_PYTHON` if
//! set, else `python3` on `PATH` (so an activated virtualenv is used). Its major.minor version
//! must match the embedded one; a mismatch is a clear error, not a crash.
//!
//! **Data path.** Observations cross as one `bytes` object per step
//! (`np.asarray(obs).astype(float32).tobytes()`), never one Python call per element; actions
//! cross as one Python int (Discrete) or one NumPy array built from a byte buffer (Box,
//! MultiDiscrete).

use proxima_env::render::Frame;
use proxima_env::{Action, Env, EnvError, Info, Result, Space, StepResult};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyTuple};
use std::sync::OnceLock;

/// The prefix of bridged env ids.
pub const PREFIX: &str = "gym:";

mod atari;
pub mod atari_worker;
mod dict_obs;
mod masks;
mod palette;
pub mod reward;
mod subproc;
mod vector;
pub use atari::{make_atari_env, AleGame};
pub use subproc::SubprocVectorEnv;
pub use vector::GymVectorEnv;

/// Registers the bridge with [`proxima_env::make`] for ids starting with `gym:` and `atari:`
/// (an ALE game inside Proxima's Atari wrappers, [`make_atari_env`]), and with
/// [`proxima_env::make_vector`] (N `gym:` envs as one Gymnasium vector env).
pub fn register() {
    proxima_env::register_prefix(proxima_env::atari::ATARI_PREFIX, |spec, _render| make_atari_env(spec));
    proxima_env::register_prefix(PREFIX, |spec, render| Ok(Box::new(GymEnv::make_with(spec, render)?) as Box<dyn Env>));
    proxima_env::register_vector_prefix(PREFIX, |spec, n, mode| {
        Ok(match mode {
            proxima_env::vec_env::VectorMode::Subproc => Box::new(SubprocVectorEnv::make(spec, n, None)?),
            _ => Box::new(GymVectorEnv::make(spec, n, mode)?) as Box<dyn proxima_env::vec_env::BatchEnv>,
        })
    });
    proxima_env::register_vector_prefix(proxima_env::atari::ATARI_PREFIX, |spec, n, mode| {
        match mode {
        proxima_env::vec_env::VectorMode::Subproc => {
            Ok(Box::new(SubprocVectorEnv::make_atari(spec, n, None)?) as Box<dyn proxima_env::vec_env::BatchEnv>)
        }
        _ => Err(EnvError::Unsupported(format!(
            "vector_env = `sync` / `async` step a Gymnasium vector env; `{}{spec}` is an ALE game in Proxima's own wrappers: use vector_env = `subproc` (its games stepped in worker processes) or `off`",
            proxima_env::atari::ATARI_PREFIX
        ))),
    }
    });
}

/// The program that serves `atari:` workers for `vector_env = "subproc"` when run as `PROGRAM
/// __atari-worker CONFIG` ([`atari_worker::serve`]); the CLI registers itself.
static WORKER_PROGRAM: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();

/// Registers `program` as the one [`SubprocVectorEnv::make_atari`] starts as its workers (it must
/// call [`atari_worker::serve`] when its first argument is [`atari_worker::ARG`]).
pub fn set_worker_program(program: std::path::PathBuf) {
    let _ = WORKER_PROGRAM.set(program);
}

pub(crate) fn worker_program() -> Option<std::path::PathBuf> {
    WORKER_PROGRAM.get().cloned()
}

/// Facts about the user's Python, read by running it.
#[derive(Clone, Debug)]
pub struct PythonInfo {
    /// The executable that was run.
    pub executable: String,
    /// Its `sys.path`.
    pub path: Vec<String>,
    /// Its (major, minor) version.
    pub version: (u32, u32),
    /// Whether `import gymnasium` works there.
    pub has_gymnasium: bool,
    /// The traceback when gymnasium is installed but fails to import (None when it imports,
    /// or is simply not installed).
    pub import_error: Option<String>,
}

/// Runs `exe` to read its `sys.path`, version and whether gymnasium imports.
///
/// # Errors
/// `Env` when the executable cannot be run ("Python not found").
pub fn probe_python(exe: &str) -> Result<PythonInfo> {
    let code = "import sys, json, traceback\nerr = None\ntry:\n    import gymnasium; g = True\nexcept ModuleNotFoundError as e:\n    g = False\n    if e.name != 'gymnasium': err = traceback.format_exc()\nexcept Exception:\n    g = False; err = traceback.format_exc()\nprint(json.dumps({'path': sys.path, 'version': list(sys.version_info[:2]), 'exe': sys.executable, 'gym': g, 'err': err}))";
    let out = std::process::Command::new(exe).args(["-c", code]).output().map_err(|e| {
        EnvError::Env(format!(
            "Python not found: cannot run `{exe}` ({e}); install Python 3 or point PROXIMA_PYTHON at the interpreter of your virtualenv"
        ))
    })?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let said = match stderr.trim() {
            "" => "and printed nothing".to_string(),
            text => format!("and printed: {text}"),
        };
        return Err(EnvError::Env(format!(
            "`{exe}` failed as a Python interpreter ({}) {said}; point PROXIMA_PYTHON at a Python 3 with gymnasium",
            out.status
        )));
    }
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).map_err(|e| EnvError::Env(format!("`{exe}` printed no sys.path ({e})")))?;
    let ver = v["version"]
        .as_array()
        .map(|a| (a[0].as_u64().unwrap_or(0) as u32, a[1].as_u64().unwrap_or(0) as u32))
        .unwrap_or((0, 0));
    Ok(PythonInfo {
        executable: v["exe"].as_str().unwrap_or(exe).to_string(),
        path: v["path"]
            .as_array()
            .map(|a| a.iter().filter_map(|p| p.as_str().map(String::from)).collect())
            .unwrap_or_default(),
        version: ver,
        has_gymnasium: v["gym"].as_bool().unwrap_or(false),
        import_error: v["err"].as_str().map(String::from),
    })
}

/// The Python the bridge uses: `$PROXIMA_PYTHON`, else `python3`.
pub fn python_executable() -> String {
    std::env::var("PROXIMA_PYTHON").unwrap_or_else(|_| "python3".to_string())
}

/// The Python executable that `vector_env = "subproc"` workers run: the user's (the one whose
/// `sys.path` the embedded interpreter took), or, inside the user's interpreter (the Python
/// package), its `sys.executable`.
///
/// # Errors
/// As [`init`]; `Env` when the running interpreter does not know its executable.
pub(crate) fn python_for_workers() -> Result<String> {
    if let Some(exe) = init()? {
        return Ok(exe);
    }
    Python::attach(|py| {
        let exe: String = py
            .import("sys")
            .and_then(|s| s.getattr("executable"))
            .and_then(|e| e.extract())
            .map_err(|e| EnvError::Env(py_err(py, e)))?;
        if exe.is_empty() {
            return Err(EnvError::Env("sys.executable is empty: no Python to start subproc workers with".into()));
        }
        Ok(exe)
    })
}

/// Initialises the embedded interpreter once with the user's `sys.path`, checks that gymnasium
/// imports there, and returns the user's Python executable (without the `embed` feature the
/// bridge runs inside the user's interpreter: nothing to do, `None`).
pub(crate) fn init() -> Result<Option<String>> {
    let Some(info) = interpreter()? else { return Ok(None) };
    if let Some(tb) = &info.import_error {
        return Err(EnvError::Env(format!("`import gymnasium` fails in {}:\n{}", info.executable, tb.trim_end())));
    }
    if !info.has_gymnasium {
        return Err(EnvError::Env(format!(
            "the Python at {} has no `gymnasium` module: run `{} -m pip install gymnasium` (and e.g. `gymnasium[mujoco]` for MuJoCo, `ale-py` for `atari:` games), or point PROXIMA_PYTHON at a Python that has it",
            info.executable, info.executable
        )));
    }
    Ok(Some(info.executable))
}

/// Initialises the embedded interpreter once with the user's `sys.path` (gymnasium not needed);
/// nothing to do without the `embed` feature.
///
/// # Errors
/// `Env` when the user's Python cannot be run or is of another version than the embedded one.
pub fn init_interpreter() -> Result<()> {
    interpreter().map(|_| ())
}

/// The user's Python as probed, once, after setting the embedded interpreter's `sys.path` to its.
fn interpreter() -> Result<Option<PythonInfo>> {
    if !cfg!(feature = "embed") {
        return Ok(None);
    }
    static INIT: OnceLock<std::result::Result<PythonInfo, String>> = OnceLock::new();
    INIT.get_or_init(|| {
        let exe = python_executable();
        let info = probe_python(&exe).map_err(|e| match e {
            EnvError::Env(m) => m,
            other => other.to_string(),
        })?;
        Python::attach(|py| -> std::result::Result<(), String> {
            let sys = py.import("sys").map_err(|e| e.to_string())?;
            let vi = sys.getattr("version_info").map_err(|e| e.to_string())?;
            let (maj, min): (u32, u32) = (vi.getattr("major").and_then(|x| x.extract()).map_err(|e| e.to_string())?, vi.getattr("minor").and_then(|x| x.extract()).map_err(|e| e.to_string())?);
            if (maj, min) != info.version {
                return Err(format!(
                    "proxima embeds Python {maj}.{min}, but {} is Python {}.{}; use a {maj}.{min} virtualenv (PROXIMA_PYTHON) or rebuild proxima against that Python (PYO3_PYTHON)",
                    info.executable, info.version.0, info.version.1
                ));
            }
            sys.setattr("path", info.path.clone()).map_err(|e| e.to_string())?;
            Ok(())
        })?;
        Ok(info)
    })
    .clone()
    .map(Some)
    .map_err(EnvError::Env)
}

std::thread_local! {
    /// The last Python exception [`py_err`] turned into text on this thread.
    static LAST_ERROR: std::cell::RefCell<Option<PyErr>> = const { std::cell::RefCell::new(None) };
}

/// The last Python exception an env raised on this thread (taken: a second call gives `None`),
/// so that a caller in Python can re-raise the exception object itself, traceback and all,
/// where Proxima's error carries only its text.
pub fn take_python_error() -> Option<PyErr> {
    LAST_ERROR.with(|c| c.borrow_mut().take())
}

/// A Python exception as text: its traceback, formatted as Python prints it. The exception is
/// also kept for [`take_python_error`].
pub(crate) fn py_err(py: Python<'_>, e: PyErr) -> String {
    LAST_ERROR.with(|c| *c.borrow_mut() = Some(e.clone_ref(py)));
    let value = e.value(py);
    if let Some(tb) = e.traceback(py) {
        let _ = value.setattr("__traceback__", tb);
    }
    let formatted = py
        .import("traceback")
        .and_then(|tb| tb.call_method1("format_exception", (value,)))
        .and_then(|lines| lines.extract::<Vec<String>>());
    match formatted {
        Ok(lines) => lines.concat().trim_end().to_string(),
        Err(_) => e.to_string(),
    }
}

/// An exception of `gymnasium.make` as text: for an id Gymnasium does not know (its
/// `UnregisteredEnv` errors: no such namespace, name or version), only its one-line message, which
/// names the id and suggests near ones; any other exception with its traceback ([`py_err`]).
pub(crate) fn make_error(py: Python<'_>, gym: &Bound<'_, PyAny>, e: PyErr) -> String {
    let unregistered =
        gym.getattr("error").and_then(|m| m.getattr("UnregisteredEnv")).is_ok_and(|cls| e.is_instance(py, &cls));
    if !unregistered {
        return py_err(py, e);
    }
    let name = e.get_type(py).name().map(|n| n.to_string()).unwrap_or_else(|_| "UnregisteredEnv".into());
    let short = format!("{name}: {}", e.value(py));
    LAST_ERROR.with(|c| *c.borrow_mut() = Some(e));
    short
}

/// `env.reset(seed=seed)`, its exception as an `Env` error naming `id`.
pub(crate) fn call_reset<'py>(
    py: Python<'py>,
    env: &Bound<'py, PyAny>,
    seed: Option<u64>,
    id: &str,
) -> Result<Bound<'py, PyAny>> {
    let kwargs = PyDict::new(py);
    kwargs.set_item("seed", seed).map_err(|e| EnvError::Env(py_err(py, e)))?;
    env.call_method("reset", (), Some(&kwargs))
        .map_err(|e| EnvError::Env(format!("{id}.reset raised:\n{}", py_err(py, e))))
}

/// A Python Gymnasium environment behind Proxima's [`Env`] trait.
pub struct GymEnv {
    id: String,
    env: Py<PyAny>,
    np: Py<PyModule>,
    /// The single env's spaces, with the NumPy dtypes and shapes they declare.
    spaces: Spaces,
    /// `metadata["render_fps"]`, when the env declares it.
    render_fps: Option<u32>,
    /// The env's `action_masks` method (found through its wrappers), when it has one.
    action_masks: Option<Py<PyAny>>,
}

/// Maps a `gymnasium.spaces` object; returns the space and its NumPy dtype name.
fn map_space(
    space: &Bound<'_, PyAny>,
    what: &str,
    env_id: &str,
) -> std::result::Result<(Space, String, Vec<usize>), String> {
    let kind: String = space.get_type().name().map(|n| n.to_string()).map_err(|e| e.to_string())?;
    let dtype: String = space.getattr("dtype").and_then(|d| d.str()).map(|s| s.to_string()).unwrap_or_default();
    let shape: Vec<usize> = space.getattr("shape").and_then(|s| s.extract()).unwrap_or_default();
    let f32s = |attr: &str| -> std::result::Result<Vec<f32>, String> {
        space
            .getattr(attr)
            .and_then(|a| a.call_method0("flatten"))
            .and_then(|a| a.call_method1("astype", ("float32",)))
            .and_then(|a| a.call_method0("tolist"))
            .and_then(|a| a.extract())
            .map_err(|e| e.to_string())
    };
    let space = match kind.as_str() {
        "Discrete" => {
            let start: i64 = space.getattr("start").and_then(|s| s.extract()).unwrap_or(0);
            if start != 0 {
                return Err(format!(
                    "{env_id}: its {what} space is Discrete with start = {start}; only start = 0 is supported"
                ));
            }
            Space::Discrete { n: space.getattr("n").and_then(|n| n.extract()).map_err(|e| e.to_string())? }
        }
        "Box" => Space::Box {
            low: f32s("low")?,
            high: f32s("high")?,
            shape: shape.clone(),
            dtype: if dtype == "uint8" { proxima_env::Dtype::Uint8 } else { proxima_env::Dtype::Float32 },
        },
        "MultiDiscrete" => {
            let nvec: Vec<usize> = space
                .getattr("nvec")
                .and_then(|a| a.call_method0("flatten"))
                .and_then(|a| a.call_method0("tolist"))
                .and_then(|a| a.extract())
                .map_err(|e| e.to_string())?;
            Space::MultiDiscrete { nvec }
        }
        _ => {
            let repr = space.repr().map(|r| r.to_string()).unwrap_or(kind.clone());
            return Err(format!("{env_id}: its {what} space {repr} ({kind}) is not supported; supported: Discrete, Box, MultiDiscrete (flatten Dict/Tuple spaces with a Gymnasium wrapper)"));
        }
    };
    Ok((space, dtype, shape))
}

/// One env's spaces as Proxima sees them, with the NumPy dtypes and shapes they declare.
pub(crate) struct Spaces {
    pub observation_space: Space,
    pub obs_dtype: String,
    pub obs_shape: Vec<usize>,
    pub action_space: Space,
    pub act_dtype: String,
    pub act_shape: Vec<usize>,
    /// A `Dict`/`Tuple` observation space, whose observations are flattened (then
    /// `observation_space` is the flat `Box`; see [`dict_obs`]).
    pub structured: Option<dict_obs::StructuredObs>,
}

/// Maps an env's observation and action spaces (a discrete observation space is refused; a
/// `Dict` or `Tuple` one is flattened, [`dict_obs`]).
pub(crate) fn map_spaces(obs_space: &Bound<'_, PyAny>, act_space: &Bound<'_, PyAny>, id: &str) -> Result<Spaces> {
    let (structured, flat) = match dict_obs::is_structured(obs_space) {
        true => {
            let (s, flat) = dict_obs::StructuredObs::new(obs_space.py(), obs_space, id)?;
            (Some(s), Some(flat))
        }
        false => (None, None),
    };
    let (observation_space, obs_dtype, obs_shape) =
        map_space(flat.as_ref().unwrap_or(obs_space), "observation", id).map_err(EnvError::Unsupported)?;
    if matches!(observation_space, Space::Discrete { .. } | Space::MultiDiscrete { .. }) {
        return Err(EnvError::Unsupported(format!(
            "{id}: discrete observation spaces are not supported yet (wrap with a one-hot observation wrapper)"
        )));
    }
    let (action_space, act_dtype, act_shape) = map_space(act_space, "action", id).map_err(EnvError::Unsupported)?;
    Ok(Spaces { observation_space, obs_dtype, obs_shape, action_space, act_dtype, act_shape, structured })
}

impl GymEnv {
    /// Whether the env has an `action_masks()` method (found through its wrappers) and an
    /// action space with masks (`Discrete`, `MultiDiscrete`).
    pub(crate) fn has_action_masks(&self) -> bool {
        self.action_masks.is_some() && self.spaces.action_space.mask_dim() > 0
    }

    /// `gymnasium.make(spec)`, with its spaces mapped.
    ///
    /// # Errors
    /// `Env` for Python/gymnasium missing, an unknown id (Gymnasium's message and traceback),
    /// or an unsupported space (named).
    pub fn make(spec: &str) -> Result<GymEnv> {
        GymEnv::make_with(spec, false)
    }

    /// [`GymEnv::make`], with `render_mode="rgb_array"` when `render` is true, so that
    /// [`Env::render`] returns frames.
    ///
    /// # Errors
    /// As [`GymEnv::make`].
    pub fn make_with(spec: &str, render: bool) -> Result<GymEnv> {
        init()?;
        let id = format!("{PREFIX}{spec}");
        Python::attach(|py| {
            let gym = py.import("gymnasium").map_err(|e| EnvError::Env(py_err(py, e)))?;
            let np = py.import("numpy").map_err(|e| EnvError::Env(py_err(py, e)))?;
            let kwargs = PyDict::new(py);
            if render {
                kwargs.set_item("render_mode", "rgb_array").map_err(|e| EnvError::Env(py_err(py, e)))?;
            }
            // `ALE/…` ids: Gymnasium ≥ 1.0 knows them only after `gym.register_envs(ale_py)`
            // (a missing ale-py leaves Gymnasium's own "Namespace ALE not found" message below).
            if spec.starts_with("ALE/") && gym.hasattr("register_envs").unwrap_or(false) {
                if let Ok(ale) = py.import("ale_py") {
                    gym.call_method1("register_envs", (ale,)).map_err(|e| EnvError::Env(py_err(py, e)))?;
                }
            }
            let env = gym.call_method("make", (spec,), Some(&kwargs)).map_err(|e| {
                let call = if render {
                    format!("gymnasium.make({spec:?}, render_mode=\"rgb_array\")")
                } else {
                    format!("gymnasium.make({spec:?})")
                };
                let hint = if render { " (does the env support render_mode=\"rgb_array\"?)" } else { "" };
                EnvError::UnknownEnv(format!("{call} failed{hint}:\n{}", make_error(py, &gym, e)))
            })?;
            GymEnv::wrap(py, env, np, id)
        })
    }

    /// A Gymnasium env object the caller already has (the Python package's `PPO("MlpPolicy",
    /// env)`), named `id` in errors and checkpoints.
    ///
    /// # Errors
    /// `Env` when it has no observation/action space or numpy is missing; an unsupported space.
    pub fn from_object(py: Python<'_>, env: Bound<'_, PyAny>, id: &str) -> Result<GymEnv> {
        let np = py.import("numpy").map_err(|e| EnvError::Env(py_err(py, e)))?;
        GymEnv::wrap(py, env, np, id.to_string())
    }

    fn wrap(py: Python<'_>, env: Bound<'_, PyAny>, np: Bound<'_, PyModule>, id: String) -> Result<GymEnv> {
        let space = |attr: &str| {
            env.getattr(attr).map_err(|e| EnvError::Env(format!("{id} has no `{attr}`: {}", py_err(py, e))))
        };
        let spaces = map_spaces(&space("observation_space")?, &space("action_space")?, &id)?;
        let render_fps = env
            .getattr("metadata")
            .and_then(|m| m.call_method1("get", ("render_fps",)))
            .and_then(|f| f.extract::<f64>())
            .ok()
            .map(|f| f.round().clamp(1.0, 1000.0) as u32);
        let action_masks = masks::find_action_masks(&env);
        Ok(GymEnv { id, env: env.unbind(), np: np.unbind(), spaces, render_fps, action_masks })
    }

    /// Converts an observation to contiguous f32 after checking its shape (any numeric dtype is
    /// cast, as Stable-Baselines3 casts: a float64 array from a float32 Box is common and fine).
    fn observation(&self, py: Python<'_>, obs: &Bound<'_, PyAny>) -> Result<Vec<f32>> {
        let np = self.np.bind(py);
        let flat;
        let obs = match &self.spaces.structured {
            Some(s) => {
                flat = s.flatten(py, obs, &self.id)?;
                &flat
            }
            None => obs,
        };
        let arr = np.call_method1("asarray", (obs,)).map_err(|e| EnvError::Env(py_err(py, e)))?;
        let shape: Vec<usize> =
            arr.getattr("shape").and_then(|s| s.extract()).map_err(|e| EnvError::Env(py_err(py, e)))?;
        let dtype = arr.getattr("dtype").and_then(|d| d.str()).map(|s| s.to_string()).unwrap_or_default();
        let numeric = arr.getattr("dtype").and_then(|d| d.getattr("kind")).and_then(|k| k.extract::<String>());
        if shape != self.spaces.obs_shape || !matches!(numeric.as_deref(), Ok("f" | "i" | "u" | "b")) {
            return Err(EnvError::Env(format!(
                "{} returned an observation of shape {shape:?} and dtype {dtype}; its observation_space declares shape {:?} (dtype {})",
                self.id, self.spaces.obs_shape, self.spaces.obs_dtype
            )));
        }
        let bytes = arr
            .call_method1("astype", ("<f4",))
            .and_then(|a| a.call_method0("tobytes"))
            .map_err(|e| EnvError::Env(py_err(py, e)))?;
        let bytes = bytes.cast::<PyBytes>().map_err(|e| EnvError::Env(e.to_string()))?;
        Ok(bytes.as_bytes().chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
    }
}

/// What a Python value is, for an error message: its type, and its length when it has one.
fn describe(v: &Bound<'_, PyAny>) -> String {
    let ty = v.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "?".into());
    match v.len() {
        Ok(n) if v.is_instance_of::<PyTuple>() => format!("a tuple of {n} values"),
        Ok(n) => format!("a {ty} of length {n}"),
        Err(_) => format!("a {ty}"),
    }
}

impl GymEnv {
    /// A reward as f64: a number, or any array of one element (as Stable-Baselines3 takes it).
    fn reward(&self, py: Python<'_>, r: &Bound<'_, PyAny>) -> Result<f64> {
        if r.is_none() {
            return Err(EnvError::Env(format!("{}.step returned the reward None, which is not one number", self.id)));
        }
        let np = self.np.bind(py);
        np.call_method1("asarray", (r,))
            .and_then(|a| a.call_method1("astype", ("float64",)))
            .and_then(|a| {
                if a.getattr("size")?.extract::<usize>()? == 1 {
                    a.call_method0("item")?.extract::<f64>()
                } else {
                    Err(pyo3::exceptions::PyValueError::new_err(format!("{} values", a.getattr("size")?)))
                }
            })
            .map_err(|e| {
                let what = r.repr().map(|s| s.to_string()).unwrap_or_default();
                EnvError::Env(format!("{}.step returned the reward {what}, which is not one number ({e})", self.id))
            })
    }
}

impl Env for GymEnv {
    fn id(&self) -> &str {
        &self.id
    }
    fn observation_space(&self) -> Space {
        self.spaces.observation_space.clone()
    }
    fn action_space(&self) -> Space {
        self.spaces.action_space.clone()
    }
    fn reset(&mut self, seed: Option<u64>) -> Result<(Vec<f32>, Info)> {
        Python::attach(|py| {
            let out = call_reset(py, self.env.bind(py), seed, &self.id)?;
            if !out.is_instance_of::<PyTuple>() || out.len().ok() != Some(2) {
                return Err(EnvError::Env(format!(
                    "{}.reset returned {}; Gymnasium's reset returns (observation, info) (the old gym API returned the observation alone)",
                    self.id,
                    describe(&out)
                )));
            }
            let obs = out.get_item(0).map_err(|e| {
                EnvError::Env(format!("{}.reset did not return (obs, info): {}", self.id, py_err(py, e)))
            })?;
            Ok((self.observation(py, &obs)?, Info::default()))
        })
    }
    fn step(&mut self, action: Action<'_>) -> Result<StepResult> {
        Python::attach(|py| {
            let np = self.np.bind(py);
            let a: Bound<'_, PyAny> = match (&self.spaces.action_space, action) {
                (Space::Discrete { n }, Action::Discrete(a)) if a < *n => {
                    a.into_pyobject(py).map_err(|e| EnvError::Env(e.to_string()))?.into_any()
                }
                (Space::Box { .. } | Space::MultiDiscrete { .. }, Action::Continuous(v))
                    if v.len() == self.spaces.action_space.flat_dim() =>
                {
                    let buf = PyBytes::new(py, &v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>());
                    np.call_method1("frombuffer", (buf, "<f4"))
                        .and_then(|a| a.call_method1("astype", (self.spaces.act_dtype.as_str(),)))
                        .and_then(|a| a.call_method1("reshape", (PyTuple::new(py, &self.spaces.act_shape)?,)))
                        .map_err(|e| EnvError::Env(py_err(py, e)))?
                }
                (space, other) => {
                    return Err(EnvError::InvalidAction(format!(
                        "{}: {other:?} is not in {}",
                        self.id,
                        space.describe()
                    )));
                }
            };
            let out = self
                .env
                .bind(py)
                .call_method1("step", (a,))
                .map_err(|e| EnvError::Env(format!("{}.step raised:\n{}", self.id, py_err(py, e))))?;
            if !out.is_instance_of::<PyTuple>() || out.len().ok() != Some(5) {
                return Err(EnvError::Env(format!(
                    "{}.step returned {}; Gymnasium's step returns (observation, reward, terminated, truncated, info) (the old gym API returned 4 values with one `done`)",
                    self.id,
                    describe(&out)
                )));
            }
            let item = |i: usize| {
                out.get_item(i)
                    .map_err(|e| EnvError::Env(format!("{}.step did not return 5 values: {}", self.id, py_err(py, e))))
            };
            let observation = self.observation(py, &item(0)?)?;
            let reward = self.reward(py, &item(1)?)?;
            let terminated = item(2)?.is_truthy().map_err(|e| EnvError::Env(py_err(py, e)))?;
            let truncated = item(3)?.is_truthy().map_err(|e| EnvError::Env(py_err(py, e)))?;
            Ok(StepResult { observation, reward, terminated, truncated, info: Info::default() })
        })
    }
    fn render(&mut self) -> Result<Frame> {
        Python::attach(|py| {
            let np = self.np.bind(py);
            let out = self
                .env
                .bind(py)
                .call_method0("render")
                .map_err(|e| EnvError::Env(format!("{}.render raised:\n{}", self.id, py_err(py, e))))?;
            if out.is_none() {
                return Err(EnvError::Unsupported(format!(
                    "{}.render() returned None: the env does not support render_mode=\"rgb_array\" (or ignored it)",
                    self.id
                )));
            }
            let arr = np.call_method1("ascontiguousarray", (&out,)).map_err(|e| EnvError::Env(py_err(py, e)))?;
            let shape: Vec<usize> =
                arr.getattr("shape").and_then(|s| s.extract()).map_err(|e| EnvError::Env(py_err(py, e)))?;
            let dtype = arr.getattr("dtype").and_then(|d| d.str()).map(|s| s.to_string()).unwrap_or_default();
            if shape.len() != 3 || shape[2] != 3 || dtype != "uint8" || shape[0] == 0 || shape[1] == 0 {
                return Err(EnvError::Env(format!(
                    "{}.render() returned an array of shape {shape:?} and dtype {dtype}; expected (height, width, 3) uint8 RGB",
                    self.id
                )));
            }
            let bytes = arr.call_method0("tobytes").map_err(|e| EnvError::Env(py_err(py, e)))?;
            let bytes = bytes.cast::<PyBytes>().map_err(|e| EnvError::Env(e.to_string()))?;
            Ok(Frame { width: shape[1], height: shape[0], rgb: bytes.as_bytes().to_vec() })
        })
    }
    fn render_fps(&self) -> u32 {
        self.render_fps.unwrap_or(30)
    }
    fn observation_keys(&self) -> Vec<proxima_env::ObsKey> {
        self.spaces.structured.as_ref().map(|s| s.keys()).unwrap_or_default()
    }
    fn action_masks(&mut self, out: &mut [bool]) -> Result<bool> {
        let Some(method) = &self.action_masks else { return Ok(false) };
        if self.spaces.action_space.mask_dim() == 0 {
            return Ok(false); // a Box action space: nothing to mask
        }
        Python::attach(|py| {
            let masks = method
                .bind(py)
                .call0()
                .map_err(|e| EnvError::Env(format!("{}.action_masks() raised:\n{}", self.id, py_err(py, e))))?;
            masks::read_masks(py, self.np.bind(py), &masks, &self.id, out)?;
            Ok(true)
        })
    }
}
