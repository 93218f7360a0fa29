//! ALE games from Python (`ale-py`, which ships the ROMs) as an [`AtariGame`]: raw RGB frames
//! one frame at a time, for Proxima's Atari wrappers (`proxima_env::atari`).
//!
//! [`AleGame::make`] calls `gymnasium.make(id, frameskip=1, repeat_action_probability=p,
//! full_action_space=False)`: frame skipping and max-pooling are the wrappers' job, and the
//! sticky-action probability is the protocol's choice (0 in SB3's and CleanRL's `NoFrameskip-v4`
//! setting, 0.25 in Machado et al.'s v5 default). Frames cross as one `bytes` object per step.
//! Where `gymnasium.make` added only its checking wrappers, a frame is stepped by calling the
//! ALE interface as `AtariEnv.step` does ([`Direct`]), the frames MaxAndSkip drops are not read
//! out, and the ones it reads are read as palette indices and coloured here ([`Palette`]): the
//! same frames, rewards and flags, about a quarter less time per agent step.

use crate::palette::Palette;
use crate::{call_reset, init, make_error, py_err, python_executable, PREFIX};
use proxima_env::atari::{parse_atari_spec, AtariEnv, AtariGame, GameStep, ATARI_PREFIX};
use proxima_env::{Env, EnvError, Result};
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyByteArrayMethods, PyBytes, PyDict, PyTuple};

/// The env an `atari:SPEC` id names (`proxima_env::atari::env`): SPEC parsed (bad options are
/// refused before Python starts), the game made by [`AleGame::make`], the wrappers around it.
///
/// # Errors
/// As [`proxima_env::atari::parse_atari_spec`], [`AleGame::make`] and `AtariWrapper::new`.
pub fn make_atari_env(spec: &str) -> Result<Box<dyn Env>> {
    let s = parse_atari_spec(spec)?;
    let game = AleGame::make(&s.game_id, s.options.repeat_action_probability)?;
    Ok(Box::new(AtariEnv::new(&format!("{ATARI_PREFIX}{spec}"), game, s.options)?))
}

/// An ALE game made through Gymnasium, stepped one raw frame at a time.
pub struct AleGame {
    id: String,
    env: Py<PyAny>,
    np: Py<PyModule>,
    shape: (usize, usize),
    meanings: Vec<String>,
    /// The ALE interface's calls, where they can stand in for `env.step` (else `None`).
    direct: Option<Direct>,
}

/// The ALE interface's own calls, made directly where `gymnasium.make` wrapped the `AtariEnv`
/// (`frameskip=1`, RGB observations, no continuous actions, no sound, no time limit) in its
/// checking wrappers only (`OrderEnforcing`, `PassiveEnvChecker`), which change nothing
/// after the first reset. One raw frame is then what `AtariEnv.step` computes:
/// `ale.act(action_set[a], 1.0)` (the reward, an integer, as a float), `game_over(False)`,
/// `game_truncated()`; its frame is `getScreenRGB`, read only when someone looks at it — as
/// palette indices (`getScreen`) turned into RGB by the game's [`Palette`] where it knows every
/// colour of the frame, else through `getScreenRGB`, whose colours the palette then learns.
struct Direct {
    act: Py<PyAny>,
    game_over: Py<PyAny>,
    game_truncated: Py<PyAny>,
    lives: Py<PyAny>,
    screen_rgb: Py<PyAny>,
    /// `getScreen`: the frame as palette indices, one byte a pixel.
    screen_indices: Py<PyAny>,
    /// The minimal action set's `ale_py.Action`s, by action index.
    actions: Vec<Py<PyAny>>,
    /// The `[height, width, 3]` uint8 array `getScreenRGB` writes into: a NumPy view of the
    /// `bytearray` beside it, whose bytes Rust reads (the buffer protocol is not in the limited
    /// C API the Python package is built for).
    frame: (Py<PyAny>, Py<PyByteArray>),
    /// The `[height, width]` uint8 array `getScreen` writes into, and its `bytearray`.
    indices: (Py<PyAny>, Py<PyByteArray>),
    /// The last frame's palette indices, `[height, width]`.
    index_frame: Vec<u8>,
    /// The game's colours; `None` with colour averaging, as a precaution (ALE maps the blended
    /// colours back to palette indices, but a frame whose indices are all known is not checked).
    palette: Option<Palette>,
}

impl Direct {
    /// The direct calls for `env` (made by [`AleGame::make`]), or `None` where its wrappers or
    /// settings are not the ones [`Direct`] stands in for — any wrapper, attribute or value not
    /// as expected keeps the game on `env.step`.
    fn of(env: &Bound<'_, PyAny>, np: &Bound<'_, PyModule>, shape: (usize, usize), n_actions: usize) -> Option<Direct> {
        let limit = env.getattr("spec").ok()?;
        if !limit.is_none() && !limit.getattr("max_episode_steps").ok()?.is_none() {
            return None;
        }
        let mut e = env.clone();
        loop {
            match e.get_type().name().ok()?.to_string().as_str() {
                "AtariEnv" => break,
                "OrderEnforcing" | "PassiveEnvChecker" => e = e.getattr("env").ok()?,
                _ => return None,
            }
        }
        let flag = |name: &str| e.getattr(name).ok().map(|v| v.is_truthy().unwrap_or(true)).unwrap_or(false);
        let frameskip: i64 = e.getattr("_frameskip").ok()?.extract().ok()?;
        let obs_type: String = e.getattr("_obs_type").ok()?.extract().ok()?;
        if frameskip != 1 || obs_type != "rgb" || flag("continuous") || flag("sound_obs") {
            return None;
        }
        let ale = e.getattr("ale").ok()?;
        let method = |name: &str| ale.getattr(name).ok().map(Bound::unbind);
        let actions: Vec<Py<PyAny>> = e
            .getattr("_action_set")
            .ok()?
            .try_iter()
            .ok()?
            .map(|a| a.map(Bound::unbind))
            .collect::<PyResult<_>>()
            .ok()?;
        if actions.len() != n_actions {
            return None;
        }
        let array = |dims: &[usize]| {
            let bytes = PyByteArray::new(np.py(), &vec![0u8; dims.iter().product()]);
            let flat = np.call_method1("frombuffer", (&bytes, "uint8")).ok()?;
            let a = flat.call_method1("reshape", (PyTuple::new(np.py(), dims).ok()?,)).ok()?;
            Some((a.unbind(), bytes.unbind()))
        };
        let averaging = ale.call_method1("getBool", ("color_averaging",)).and_then(|v| v.is_truthy());
        let (frame, indices) = (array(&[shape.0, shape.1, 3])?, array(&[shape.0, shape.1])?);
        let in_place = |name: &str, (view, bytes): &(Py<PyAny>, Py<PyByteArray>)| {
            writes_in_place(&ale, name, view.bind(ale.py()), bytes.bind(ale.py())).unwrap_or(false)
        };
        if !in_place("getScreenRGB", &frame) {
            return None;
        }
        let palette = matches!(averaging, Ok(false)) && in_place("getScreen", &indices);
        Some(Direct {
            act: method("act")?,
            game_over: method("game_over")?,
            game_truncated: method("game_truncated")?,
            lives: method("lives")?,
            screen_rgb: method("getScreenRGB")?,
            screen_indices: method("getScreen")?,
            actions,
            frame,
            indices,
            index_frame: vec![0; shape.0 * shape.1],
            palette: palette.then(Palette::new),
        })
    }

    /// One raw frame with action index `a` (in range), its frame not read.
    fn step(&self, py: Python<'_>, a: usize) -> PyResult<GameStep> {
        let reward: f64 = self.act.bind(py).call1((self.actions[a].bind(py), 1.0f64))?.extract()?;
        let terminated = self.game_over.bind(py).call1((false,))?.is_truthy()?;
        let truncated = self.game_truncated.bind(py).call0()?.is_truthy()?;
        Ok(GameStep { reward, terminated, truncated })
    }

    /// The current frame, as `getScreenRGB` gives it, into `rgb` (`[height, width, 3]`):
    /// through the palette where it knows the frame's colours, else ALE's own conversion.
    fn screen(&mut self, py: Python<'_>, rgb: &mut [u8]) -> PyResult<()> {
        let Some(palette) = self.palette.as_mut().filter(|p| p.in_use()) else {
            return self.screen_rgb(py, rgb);
        };
        self.screen_indices.bind(py).call1((self.indices.0.bind(py),))?;
        read_frame(self.indices.1.bind(py), &mut self.index_frame)?;
        if palette.expand(&self.index_frame, rgb) {
            return Ok(());
        }
        let (frame, bytes) = &self.frame;
        self.screen_rgb.bind(py).call1((frame.bind(py),))?;
        read_frame(bytes.bind(py), rgb)?;
        palette.learn(&self.index_frame, rgb);
        Ok(())
    }

    /// The current frame through ALE's own conversion (`getScreenRGB`) into `rgb`.
    fn screen_rgb(&self, py: Python<'_>, rgb: &mut [u8]) -> PyResult<()> {
        let (frame, bytes) = &self.frame;
        self.screen_rgb.bind(py).call1((frame.bind(py),))?;
        read_frame(bytes.bind(py), rgb)
    }
}

/// Whether `ale.<name>(view)` writes the current frame into `view`'s `bytearray` itself, not into
/// a copy: with the bytes first all 0 and then all 255 (no frame equals both), each time they
/// must equal the frame `ale.<name>()` returns as a new array.
fn writes_in_place(
    ale: &Bound<'_, PyAny>,
    name: &str,
    view: &Bound<'_, PyAny>,
    bytes: &Bound<'_, PyByteArray>,
) -> PyResult<bool> {
    let fresh = fresh_frame(ale, name)?;
    for fill in [0u8, 255] {
        // SAFETY: Python is attached and runs no code while the slice is written.
        unsafe { bytes.as_bytes_mut() }.fill(fill);
        ale.call_method1(name, (view,))?;
        let mut ours = vec![0u8; fresh.len()];
        read_frame(bytes, &mut ours)?;
        if ours != fresh {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The frame `ale.<name>()` (`getScreen`, `getScreenRGB`) returns as a new array, its bytes.
fn fresh_frame(ale: &Bound<'_, PyAny>, name: &str) -> PyResult<Vec<u8>> {
    let frame = ale.call_method0(name)?.call_method0("tobytes")?;
    Ok(frame.cast::<PyBytes>()?.as_bytes().to_vec())
}

/// `id`'s `what` raised `e` (its traceback).
fn raised(id: &str, py: Python<'_>, what: &str, e: PyErr) -> EnvError {
    EnvError::Env(format!("{id}.{what} raised:\n{}", py_err(py, e)))
}

/// The bytes ALE wrote into a frame's `bytearray` (through its NumPy view) into `dst`, which
/// must be as long.
fn read_frame(bytes: &Bound<'_, PyByteArray>, dst: &mut [u8]) -> PyResult<()> {
    // SAFETY: Python is attached and nothing runs Python code while the slice is read; the
    // bytearray cannot be resized (its NumPy view holds its buffer).
    let src = unsafe { bytes.as_bytes() };
    if src.len() != dst.len() {
        return Err(pyo3::exceptions::PyValueError::new_err(format!(
            "a frame of {} bytes, not {}",
            src.len(),
            dst.len()
        )));
    }
    dst.copy_from_slice(src);
    Ok(())
}

impl AleGame {
    /// `gymnasium.make(spec, frameskip=1, repeat_action_probability=…, full_action_space=False)`
    /// after `import ale_py` (which registers the `ALE/…` ids).
    ///
    /// # Errors
    /// `Env` when Python, gymnasium or ale-py is missing (with the `pip install` to run);
    /// `UnknownEnv` for an id Gymnasium does not know; `Unsupported` when the game's
    /// observations are not `(height, width, 3)` uint8 RGB frames (`obs_type="rgb"`).
    pub fn make(spec: &str, repeat_action_probability: f64) -> Result<AleGame> {
        init()?;
        if !(0.0..=1.0).contains(&repeat_action_probability) {
            return Err(EnvError::InvalidArgument(format!(
                "repeat_action_probability = {repeat_action_probability}: must be between 0 and 1"
            )));
        }
        Python::attach(|py| {
            let gym = py.import("gymnasium").map_err(|e| EnvError::Env(py_err(py, e)))?;
            let ale = py.import("ale_py").map_err(|e| {
                let exe = python_executable();
                EnvError::Env(format!(
                    "{spec} is an Atari game and needs ale-py (it ships the ROMs): run `{exe} -m pip install ale-py`\n{}",
                    py_err(py, e)
                ))
            })?;
            // Gymnasium ≥ 1.0 registers the ALE ids only when asked; older versions on import.
            if gym.hasattr("register_envs").unwrap_or(false) {
                gym.call_method1("register_envs", (ale,)).map_err(|e| EnvError::Env(py_err(py, e)))?;
            }
            if let Some(entry) = non_ale_entry_point(&gym, spec) {
                return Err(EnvError::UnknownEnv(format!(
                    "{spec} is not an Atari game (Gymnasium makes it with {entry}): `atari:` takes ALE's games, e.g. atari:Breakout; give it as gym:{spec}"
                )));
            }
            let kwargs = PyDict::new(py);
            let set = |k: &str, v: Bound<'_, PyAny>| kwargs.set_item(k, v).map_err(|e| EnvError::Env(py_err(py, e)));
            set("frameskip", 1i64.into_pyobject(py).map_err(|e| EnvError::Env(e.to_string()))?.into_any())?;
            set(
                "repeat_action_probability",
                repeat_action_probability.into_pyobject(py).map_err(|e| EnvError::Env(e.to_string()))?.into_any(),
            )?;
            set("full_action_space", pyo3::types::PyBool::new(py, false).to_owned().into_any())?;
            let env = gym.call_method("make", (spec,), Some(&kwargs)).map_err(|e| {
                EnvError::UnknownEnv(format!(
                    "gymnasium.make({spec:?}, frameskip=1, repeat_action_probability={repeat_action_probability}, full_action_space=False) failed:\n{}",
                    make_error(py, &gym, e)
                ))
            })?;
            AleGame::wrap(py, env, spec)
        })
    }

    /// Silences ALE's own log below errors in this process (`ALEInterface.setLoggerMode(
    /// LoggerMode.Error)`): a worker process's games then do not print ALE's banner a second
    /// time. Without ale-py it does nothing ([`AleGame::make`] says what is missing).
    pub fn quiet_ale_log() {
        if init().is_err() {
            return;
        }
        Python::attach(|py| {
            if let Ok(ale) = py.import("ale_py") {
                let error = ale.getattr("LoggerMode").and_then(|m| m.getattr("Error"));
                if let (Ok(interface), Ok(error)) = (ale.getattr("ALEInterface"), error) {
                    let _ = interface.call_method1("setLoggerMode", (error,));
                }
            }
        });
    }

    fn wrap(py: Python<'_>, env: Bound<'_, PyAny>, spec: &str) -> Result<AleGame> {
        let id = format!("{PREFIX}{spec}");
        let np = py.import("numpy").map_err(|e| EnvError::Env(py_err(py, e)))?;
        let space = env.getattr("observation_space").map_err(|e| EnvError::Env(py_err(py, e)))?;
        let shape: Vec<usize> = space.getattr("shape").and_then(|s| s.extract()).unwrap_or_default();
        let dtype = space.getattr("dtype").and_then(|d| d.str()).map(|s| s.to_string()).unwrap_or_default();
        if shape.len() != 3 || shape[2] != 3 || dtype != "uint8" {
            return Err(EnvError::Unsupported(format!(
                "{id}: observations of shape {shape:?} and dtype {dtype}; the Atari wrappers need (height, width, 3) uint8 RGB frames (obs_type=\"rgb\")"
            )));
        }
        let meanings: Vec<String> = env
            .getattr("unwrapped")
            .and_then(|u| u.call_method0("get_action_meanings"))
            .and_then(|m| m.extract())
            .map_err(|e| EnvError::Env(format!("{id}: no get_action_meanings(): {}", py_err(py, e))))?;
        let shape = (shape[0], shape[1]);
        let direct = Direct::of(&env, &np, shape, meanings.len());
        Ok(AleGame { id, env: env.unbind(), np: np.unbind(), shape, meanings, direct })
    }

    /// Copies a frame into `rgb` after checking its shape and dtype.
    fn frame(&self, py: Python<'_>, obs: &Bound<'_, PyAny>, rgb: &mut [u8]) -> Result<()> {
        let arr =
            self.np.bind(py).call_method1("ascontiguousarray", (obs,)).map_err(|e| EnvError::Env(py_err(py, e)))?;
        let shape: Vec<usize> = arr.getattr("shape").and_then(|s| s.extract()).unwrap_or_default();
        let dtype = arr.getattr("dtype").and_then(|d| d.str()).map(|s| s.to_string()).unwrap_or_default();
        let (h, w) = self.shape;
        if shape != [h, w, 3] || dtype != "uint8" || rgb.len() != h * w * 3 {
            return Err(EnvError::Env(format!(
                "{} returned a frame of shape {shape:?} and dtype {dtype}; expected [{h}, {w}, 3] uint8",
                self.id
            )));
        }
        let bytes = arr.call_method0("tobytes").map_err(|e| EnvError::Env(py_err(py, e)))?;
        let bytes = bytes.cast::<PyBytes>().map_err(|e| EnvError::Env(e.to_string()))?;
        rgb.copy_from_slice(bytes.as_bytes());
        Ok(())
    }

    /// Whether a raw frame is stepped through the ALE interface's calls directly ([`Direct`]:
    /// `gymnasium.make` added only its checking wrappers) rather than through `env.step`.
    pub fn steps_ale_directly(&self) -> bool {
        self.direct.is_some()
    }

    /// An action index outside the game's actions is an `InvalidAction` error.
    fn check_action(&self, action: usize) -> Result<()> {
        if action >= self.meanings.len() {
            return Err(EnvError::InvalidAction(format!(
                "{}: action {action} is not in Discrete({}) ({:?})",
                self.id,
                self.meanings.len(),
                self.meanings
            )));
        }
        Ok(())
    }

    /// A Python exception from the game's `what` call, as an env error.
    fn raised(&self, py: Python<'_>, what: &str, e: PyErr) -> EnvError {
        raised(&self.id, py, what, e)
    }

    fn unwrapped<'py>(&self, py: Python<'py>) -> Result<Bound<'py, PyAny>> {
        self.env.bind(py).getattr("unwrapped").map_err(|e| EnvError::Env(py_err(py, e)))
    }
}

impl AtariGame for AleGame {
    fn id(&self) -> &str {
        &self.id
    }
    fn frame_shape(&self) -> (usize, usize) {
        self.shape
    }
    fn action_meanings(&self) -> Vec<String> {
        self.meanings.clone()
    }
    fn reset(&mut self, seed: Option<u64>, rgb: &mut [u8]) -> Result<()> {
        Python::attach(|py| {
            let out = call_reset(py, self.env.bind(py), seed, &self.id)?;
            let obs = out.get_item(0).map_err(|e| EnvError::Env(format!("{}.reset: {}", self.id, py_err(py, e))))?;
            self.frame(py, &obs, rgb)
        })
    }
    fn step(&mut self, action: usize, rgb: &mut [u8]) -> Result<GameStep> {
        self.check_action(action)?;
        Python::attach(|py| {
            if let Some(d) = &mut self.direct {
                let s = d.step(py, action).map_err(|e| raised(&self.id, py, "step", e))?;
                d.screen(py, rgb).map_err(|e| raised(&self.id, py, "getScreen/getScreenRGB", e))?;
                return Ok(s);
            }
            let out = self
                .env
                .bind(py)
                .call_method1("step", (action,))
                .map_err(|e| EnvError::Env(format!("{}.step raised:\n{}", self.id, py_err(py, e))))?;
            let out = out.cast::<PyTuple>().map_err(|e| EnvError::Env(format!("{}.step: {e}", self.id)))?;
            let item = |i: usize| out.get_item(i).map_err(|e| EnvError::Env(py_err(py, e)));
            self.frame(py, &item(0)?, rgb)?;
            let reward: f64 = item(1)?.extract().map_err(|e| EnvError::Env(py_err(py, e)))?;
            let terminated = item(2)?.is_truthy().map_err(|e| EnvError::Env(py_err(py, e)))?;
            let truncated = item(3)?.is_truthy().map_err(|e| EnvError::Env(py_err(py, e)))?;
            Ok(GameStep { reward, terminated, truncated })
        })
    }
    fn step_unseen(&mut self, action: usize) -> Result<GameStep> {
        self.check_action(action)?;
        match &self.direct {
            Some(d) => Python::attach(|py| d.step(py, action).map_err(|e| self.raised(py, "step", e))),
            None => self.step(action, &mut vec![0; self.shape.0 * self.shape.1 * 3]),
        }
    }
    fn screen(&mut self, rgb: &mut [u8]) -> Result<()> {
        Python::attach(|py| match &mut self.direct {
            Some(d) => d.screen(py, rgb).map_err(|e| raised(&self.id, py, "getScreen/getScreenRGB", e)),
            None => {
                let frame = self.unwrapped(py)?.getattr("ale").and_then(|a| a.call_method0("getScreenRGB"));
                self.frame(py, &frame.map_err(|e| self.raised(py, "getScreenRGB", e))?, rgb)
            }
        })
    }
    fn lives(&self) -> Result<u32> {
        Python::attach(|py| {
            if let Some(d) = &self.direct {
                return d.lives.bind(py).call0().and_then(|l| l.extract()).map_err(|e| self.raised(py, "ale.lives", e));
            }
            self.unwrapped(py)?
                .getattr("ale")
                .and_then(|a| a.call_method0("lives"))
                .and_then(|l| l.extract())
                .map_err(|e| EnvError::Env(format!("{}: ale.lives(): {}", self.id, py_err(py, e))))
        })
    }
    fn noop_count(&mut self, noop_max: usize) -> Result<usize> {
        Python::attach(|py| {
            self.unwrapped(py)?
                .getattr("np_random")
                .and_then(|r| r.call_method1("integers", (1usize, noop_max + 1)))
                .and_then(|n| n.extract())
                .map_err(|e| EnvError::Env(format!("{}: np_random.integers: {}", self.id, py_err(py, e))))
        })
    }
}

/// The entry point of `spec` in Gymnasium's registry when it is registered and not ale-py's
/// (`CartPole-v1`'s `gymnasium.envs.classic_control.cartpole:CartPoleEnv`); `None` otherwise.
fn non_ale_entry_point(gym: &Bound<'_, PyAny>, spec: &str) -> Option<String> {
    let env_spec = gym.getattr("envs").ok()?.getattr("registry").ok()?.call_method1("get", (spec,)).ok()?;
    if env_spec.is_none() {
        return None;
    }
    let entry = env_spec.getattr("entry_point").ok()?;
    let entry = entry.extract::<String>().unwrap_or_else(|_| entry.to_string());
    (!entry.starts_with("ale_py")).then_some(entry)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every frame read through the palette equals ALE's own RGB conversion of it, in games of
    /// many colours, across game overs (each compared with `getScreenRGB()` and `getScreen()` as
    /// new arrays); and the palette serves at least 90 % of them (Qbert shows new colours level
    /// after level).
    #[test]
    #[ignore = "needs a Python with gymnasium and ale-py (PROXIMA_PYTHON; .ci/run installs them)"]
    fn frames_read_through_the_palette_equal_ales_rgb_frames() {
        for game in ["ALE/Breakout-v5", "ALE/SpaceInvaders-v5", "ALE/BeamRider-v5", "ALE/Qbert-v5"] {
            let mut g = AleGame::make(game, 0.0).unwrap();
            let (h, w) = g.frame_shape();
            let (mut ours, mut ales) = (vec![0u8; h * w * 3], vec![0u8; h * w * 3]);
            g.reset(Some(3), &mut ours).unwrap();
            let (n, mut lcg, mut served) = (g.action_meanings().len() as u64, 12345u64, 0);
            for t in 0..3000 {
                lcg = lcg.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let known = g.direct.as_ref().unwrap().palette.clone().unwrap();
                let s = g.step(((lcg >> 33) % n) as usize, &mut ours).unwrap();
                let d = g.direct.as_ref().unwrap();
                // ALE's own frames, as new arrays (not through our bytearrays).
                let (rgb, indices) = Python::attach(|py| {
                    let ale = g.unwrapped(py).unwrap().getattr("ale").unwrap();
                    (fresh_frame(&ale, "getScreenRGB").unwrap(), fresh_frame(&ale, "getScreen").unwrap())
                });
                assert!(ours == rgb, "{game}, frame {t}: the palette's RGB differs from getScreenRGB()");
                assert!(d.index_frame == indices, "{game}, frame {t}: the indices differ from getScreen()");
                let palette = d.palette.as_ref().unwrap();
                assert!(palette.in_use(), "{game}, frame {t}: an index showed two colours");
                // Served by the palette: every index of the frame was known before it.
                served += usize::from(known.expand(&d.index_frame, &mut ales));
                if s.terminated || s.truncated {
                    g.reset(None, &mut ours).unwrap();
                }
            }
            eprintln!("{game}: the palette served {served} of 3,000 frames");
            assert!(served > 2700, "{game}: the palette served {served} of 3,000 frames");
        }
    }
}
