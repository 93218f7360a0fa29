//! [`Model`]: a training run ([`Trainer`]) or a policy loaded for inference, as the Python layer
//! sees it. Shapes are checked here as well as in Python, so a call from anywhere gets a clear
//! `ValueError`, never a panic.

use crate::envs::EnvSource;
use crate::errors::{to_py, IntoPy};
use crate::settings;
use numpy::{PyArray1, PyArray2, PyArrayMethods, PyReadonlyArray1, PyReadonlyArray2, PyUntypedArrayMethods};
use proxima::checkpoint::{self, Checkpoint, CheckpointMeta, OptimizerState};
use proxima::collect::{StepObserver, StepView};
use proxima::config::Config;
use proxima::env::{Dtype, Space};
use proxima::log::TensorBoardWriter;
use proxima::normalize::Normalizer;
use proxima::policy::{ActionKind, Network, Policy, PolicySpec};
use proxima::train::{saved_normalizer, write_tensorboard, Trainer, UpdateReport};
use proxima::ProximaError;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One parameter as `get_parameters` hands it over: name, shape, flat values.
type NamedParam = (String, Vec<usize>, Vec<f32>);

/// A policy loaded without envs: enough to `predict` and `save`.
struct Loaded {
    policy: Network,
    norm: Option<Normalizer>,
    ck: Checkpoint,
}

enum State {
    Training(Box<Trainer>),
    Loaded(Box<Loaded>),
}

/// What a [`Model`] guards.
struct Inner {
    state: State,
    /// Actions sampled by `predict(deterministic=False)`.
    rng: ChaCha8Rng,
}

/// A run or a loaded policy (module docs). Python: `proxima._proxima.Model`. One call at a
/// time: a second thread calling in while `learn` runs gets a `RuntimeError`, not a wait (it
/// would hold the GIL that the running call's envs need).
#[pyclass(module = "proxima._proxima")]
pub struct Model {
    inner: Mutex<Inner>,
}

impl Model {
    /// One iteration with the schedule's `(learning_rate, clip_range)`; the report as a dict, or
    /// `None` when `on_step` stopped the rollout.
    fn iteration<'py>(
        &self,
        py: Python<'py>,
        (lr, clip): (Option<f64>, Option<f64>),
        (on_step, rollout_end): (Option<&Py<PyAny>>, Option<&Py<PyAny>>),
        tb: Option<&mut TensorBoardWriter>,
    ) -> PyResult<Option<Bound<'py, PyDict>>> {
        let mut guard = self.lock()?;
        let Inner { state, rng } = &mut *guard;
        let State::Training(tr) = state else { return Err(PyValueError::new_err("this model has no env")) };
        if let Some(lr) = lr {
            tr.set_learning_rate(lr).py()?;
        }
        if let Some(c) = clip {
            tr.set_clip_range(c).py()?;
        }
        let watched = on_step.is_some() || rollout_end.is_some();
        // A hook may predict or save: the weights and optimiser state stay as they are until the
        // update, so the state at the rollout's start is the state throughout it.
        let saved = watched.then(|| (tr.optimizer_state(), tr.checkpoint_meta()));
        let mut observer = PyObserver {
            on_step,
            rollout_end,
            obs_dim: tr.policy.spec().obs_dim,
            error: None,
            lend: (self as *const Model as usize, rng as *mut ChaCha8Rng, saved.as_ref()),
        };
        let raised = interrupt_on_python_signals(tr);
        let result = py.detach(|| tr.step_observed(if watched { Some(&mut observer) } else { None }));
        if let Some(e) = observer.error.take() {
            return Err(e); // the hook's own exception (KeyboardInterrupt, or the user's)
        }
        if let Some(e) = raised.lock().unwrap_or_else(|p| p.into_inner()).take() {
            return Err(e); // Ctrl-C inside a burst of gradient steps: the steps left are owed
        }
        match result.map_err(to_py)? {
            Some(report) => {
                if let Some(tb) = tb {
                    write_tensorboard(tb, tr.cfg.is_off_policy(), &report).py()?;
                }
                Ok(Some(report_dict(py, tr, &report)?))
            }
            None => Ok(None),
        }
    }

    fn new(state: State, rng: ChaCha8Rng) -> Model {
        Model { inner: Mutex::new(Inner { state, rng }) }
    }

    fn lock(&self) -> PyResult<std::sync::MutexGuard<'_, Inner>> {
        self.try_lock()?.ok_or_else(busy)
    }

    /// The guard, or `None` when this model's lock is held (by a running `learn`).
    fn try_lock(&self) -> PyResult<Option<std::sync::MutexGuard<'_, Inner>>> {
        match self.inner.try_lock() {
            Ok(g) => Ok(Some(g)),
            Err(std::sync::TryLockError::Poisoned(p)) => Ok(Some(p.into_inner())),
            Err(std::sync::TryLockError::WouldBlock) => Ok(None),
        }
    }

    /// `f` on what this model's running rollout lends its hooks ([`Lent`]), when this thread is
    /// inside one of them; else the busy error.
    fn with_lent<T>(&self, f: impl FnOnce(&dyn Policy, &Normalizer, &mut ChaCha8Rng, &SavedState) -> T) -> PyResult<T> {
        let me = self as *const Model as usize;
        let lent = LENT.with(|c| c.get()).filter(|l| l.model == me).ok_or_else(busy)?;
        // SAFETY: LENT holds these only while the hook call that lent them runs on this thread,
        // and the borrows they come from outlive it; nothing else uses them meanwhile (the
        // rollout is paused in the hook; the RNG and saved state are this iteration's own).
        unsafe { Ok(f(&*lent.policy, &*lent.norm, &mut *lent.rng, &*lent.saved)) }
    }
}

/// The optimiser state and metadata of a run as of its current rollout's start.
type SavedState = (OptimizerState, CheckpointMeta);

/// What `predict` and `save` of a model use when a rollout hook of that same model calls them on
/// this thread (its lock is then held by the running iteration): the policy collecting the
/// rollout and its normaliser, the model's prediction RNG, and the state at the rollout's start.
#[derive(Clone, Copy)]
struct Lent {
    model: usize,
    policy: *const (dyn Policy + 'static),
    norm: *const Normalizer,
    rng: *mut ChaCha8Rng,
    saved: *const SavedState,
}

std::thread_local! {
    /// Set only while a rollout hook's Python call runs ([`Lending`] clears it after).
    static LENT: std::cell::Cell<Option<Lent>> = const { std::cell::Cell::new(None) };
}

/// Lends the model's state to its hook for one Python call; restores what was lent before.
struct Lending(Option<Lent>);

impl Lending {
    fn new(lent: Lent) -> Lending {
        Lending(LENT.with(|c| c.replace(Some(lent))))
    }
}

impl Drop for Lending {
    fn drop(&mut self) {
        LENT.with(|c| c.set(self.0));
    }
}

/// The Python hooks a rollout calls (see `Model.learn`); a Python exception is kept to be
/// raised as itself.
struct PyObserver<'a> {
    on_step: Option<&'a Py<PyAny>>,
    rollout_end: Option<&'a Py<PyAny>>,
    obs_dim: usize,
    error: Option<PyErr>,
    /// The model's address, its prediction RNG, and the state at the rollout's start.
    lend: (usize, *mut ChaCha8Rng, Option<&'a SavedState>),
}

// SAFETY: the raw RNG pointer is the running iteration's own `&mut` (it goes to the thread
// that runs the rollout and comes back with it); everything else is `Send`.
unsafe impl Send for PyObserver<'_> {}

impl PyObserver<'_> {
    /// Lends `policy` and `norm` (alive for the whole hook call) with the model's RNG and saved
    /// state to its `predict` and `save` while the returned guard lives.
    fn lending(&self, policy: &dyn Policy, norm: &Normalizer) -> Option<Lending> {
        let (model, rng, saved) = self.lend;
        let saved = saved? as *const SavedState;
        // SAFETY: only the trait object's lifetime is erased; `Lending` takes the pointer out of
        // the thread-local before the borrow it came from ends.
        let policy = unsafe { std::mem::transmute::<*const dyn Policy, *const (dyn Policy + 'static)>(policy) };
        Some(Lending::new(Lent { model, policy, norm, rng, saved }))
    }

    fn keep(&mut self, e: PyErr) -> ProximaError {
        let msg = e.to_string();
        self.error = Some(e);
        ProximaError::Env(format!("a callback raised {msg}"))
    }

    /// SB3's `infos` of one step: `terminal_observation` and `TimeLimit.truncated` where an
    /// episode ended, `episode` (`r`, `l`) as its Monitor wrapper writes.
    fn infos<'py>(&self, py: Python<'py>, s: &StepView<'_>) -> PyResult<Bound<'py, PyList>> {
        let infos = PyList::empty(py);
        for e in 0..s.terminated.len() {
            let d = PyDict::new(py);
            if let Some(Some(fo)) = s.final_obs.get(e) {
                d.set_item("terminal_observation", PyArray1::from_slice(py, fo))?;
                d.set_item("TimeLimit.truncated", s.truncated[e] && !s.terminated[e])?;
            }
            if let Some(ep) = s.finished.iter().find(|ep| ep.env_index == e) {
                let epd = PyDict::new(py);
                epd.set_item("r", ep.episode_return)?;
                epd.set_item("l", ep.length)?;
                d.set_item("episode", epd)?;
            }
            infos.append(d)?;
        }
        Ok(infos)
    }
}

impl StepObserver for PyObserver<'_> {
    fn on_step(&mut self, s: &StepView<'_>) -> proxima::Result<bool> {
        let Some(f) = self.on_step else { return Ok(true) };
        let _lent = self.lending(s.policy, s.norm);
        let r = Python::attach(|py| -> PyResult<bool> {
            let n = s.terminated.len();
            let obs = PyArray1::from_slice(py, s.new_obs).reshape([n, self.obs_dim])?;
            let dones: Vec<bool> = s.terminated.iter().zip(s.truncated).map(|(a, b)| *a || *b).collect();
            let args = (s.global_step, obs, PyArray1::from_slice(py, s.rewards), PyArray1::from_vec(py, dones));
            let keep_going = f.bind(py).call1((args.0, args.1, args.2, args.3, self.infos(py, s)?))?;
            Ok(keep_going.is_none() || keep_going.is_truthy()?)
        });
        r.map_err(|e| self.keep(e))
    }

    fn on_rollout_end(&mut self, policy: &dyn Policy, norm: &Normalizer) -> proxima::Result<()> {
        let Some(f) = self.rollout_end else { return Ok(()) };
        let _lent = self.lending(policy, norm);
        Python::attach(|py| f.bind(py).call0().map(|_| ())).map_err(|e| self.keep(e))
    }
}

/// Ctrl-C inside a long burst of off-policy gradient steps, which run with the GIL released:
/// between two of them (at most every 50 ms) Python's signal handlers run (`PyErr_CheckSignals`,
/// which acts on the main thread only). The exception a handler raises (`KeyboardInterrupt`) is
/// kept in the returned slot and stops the burst; its remaining steps are owed to the next
/// iteration, as the CLI's Ctrl-C leaves them ([`Trainer::set_interrupt`]).
fn interrupt_on_python_signals(tr: &mut Trainer) -> Arc<Mutex<Option<PyErr>>> {
    let raised = Arc::new(Mutex::new(None));
    let slot = Arc::clone(&raised);
    let last = Mutex::new(Instant::now());
    tr.set_interrupt(move || {
        let mut last = last.lock().unwrap_or_else(|p| p.into_inner());
        if last.elapsed() < Duration::from_millis(50) {
            return false;
        }
        *last = Instant::now();
        match Python::attach(|py| py.check_signals()) {
            Ok(()) => false,
            Err(e) => {
                *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                true
            }
        }
    });
    raised
}

/// The error for a call while the model trains (from another thread, or a hook that cannot be
/// served from what the rollout lends).
fn busy() -> PyErr {
    PyRuntimeError::new_err(
        "the model is busy: it is training (learn) — from another thread, or in a call a callback cannot make",
    )
}

/// A `ValueError` for a path that names no file: empty, or (for `save`, which would write
/// there) an existing directory. `load` reads a CLI run directory's `model.safetensors`, which
/// the Python layer resolves; here a directory fails as the file read it is.
fn check_path(what: &str, path: &std::path::Path, writes: bool) -> PyResult<()> {
    if path.as_os_str().is_empty() {
        return Err(PyValueError::new_err(format!(
            "{what}: the path is empty; give a file name, such as \"ppo_cartpole\" (.safetensors is added)"
        )));
    }
    if writes && path.is_dir() {
        return Err(PyValueError::new_err(format!(
            "{what}: {} is a directory; give a file path, such as {}",
            path.display(),
            path.join("model.safetensors").display()
        )));
    }
    Ok(())
}

/// A recurrent policy's hidden state `[B, state_dim]` and episode starts `[B]` for `predict`.
type Hidden<'py> = (PyReadonlyArray2<'py, f32>, PyReadonlyArray1<'py, bool>);

/// Actions for `observations` `[B, obs_dim]` on `policy`, masked by `action_masks`
/// `[B, mask_dim]` when given, and a recurrent policy's next hidden state when `hidden` is
/// given (see `Model.predict`).
fn predict_rows<'py>(
    py: Python<'py>,
    (policy, norm, rng): (&dyn Policy, Option<&Normalizer>, &mut ChaCha8Rng),
    observations: &PyReadonlyArray2<'py, f32>,
    (action_masks, hidden): (Option<&PyReadonlyArray2<'py, u8>>, Option<&Hidden<'py>>),
    deterministic: bool,
) -> PyResult<(Bound<'py, PyArray2<f32>>, Option<Bound<'py, PyArray2<f32>>>)> {
    let (rows, cols) = (observations.shape()[0], observations.shape()[1]);
    let od = policy.spec().obs_dim;
    if cols != od {
        return Err(PyValueError::new_err(format!("observations of {cols} values per row; the policy takes {od}")));
    }
    let mut obs: Vec<f32> = observations.as_array().iter().copied().collect();
    if let Some(bad) = obs.iter().position(|x| !x.is_finite()) {
        return Err(PyValueError::new_err(format!(
            "non-finite observation value {} at row {}, column {}",
            obs[bad],
            bad / od.max(1),
            bad % od.max(1)
        )));
    }
    if let Some(n) = norm {
        n.normalize_obs(&mut obs);
    }
    let ad = policy.spec().action.act_dim();
    let masks: Option<Vec<u8>> = action_masks.map(|m| m.as_array().iter().copied().collect());
    if let Some(m) = &masks {
        policy.spec().action.check_masks(rows, m).py()?;
    }
    let md = masks.as_ref().map_or(0, |m| m.len() / rows.max(1));
    let (mut actions, mut out) = (Vec::with_capacity(rows * ad), proxima::policy::ActOutput::default());
    let mut next_state = None;
    if let Some((state, starts)) = hidden {
        let (mut state, starts) = (state.as_array().iter().copied().collect::<Vec<f32>>(), starts.as_slice()?);
        policy.act_recurrent(&obs, masks.as_deref(), (starts, &mut state), deterministic, rng, &mut out).py()?;
        actions = std::mem::take(&mut out.actions);
        let sd = state.len() / rows.max(1);
        next_state = Some(PyArray1::from_vec(py, state).reshape([rows, sd])?);
    } else {
        // A few thousand rows at a time: the networks' buffers follow the chunk, not the whole
        // array (the same actions: each row's sample is drawn in row order either way).
        for (i, chunk) in obs.chunks(PREDICT_CHUNK_ROWS * od.max(1)).enumerate() {
            let first = i * PREDICT_CHUNK_ROWS;
            let chunk_masks = masks.as_ref().map(|m| &m[first * md..(first + chunk.len() / od.max(1)) * md]);
            policy.act_into(chunk, chunk_masks, deterministic, rng, &mut out).py()?;
            actions.extend_from_slice(&out.actions);
        }
    }
    for a in actions.chunks_mut(ad) {
        policy.env_action(a);
    }
    Ok((PyArray1::from_vec(py, actions).reshape([rows, ad])?, next_state))
}

/// An exported model's inputs and outputs, `(name, "dtype [dims]")` each.
type ExportedIo = (Vec<(String, String)>, Vec<(String, String)>);

/// Rows `predict` passes to the policy at a time.
const PREDICT_CHUNK_ROWS: usize = 4096;

/// The per-iteration report as a dict of SB3's logger keys (`rollout/ep_rew_mean`, …).
fn report_dict<'py>(py: Python<'py>, tr: &Trainer, r: &UpdateReport) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let s = &r.stats;
    if let Some(m) = tr.collector.stats.return_mean() {
        d.set_item("rollout/ep_rew_mean", m)?;
    }
    if let Some(m) = tr.collector.stats.len_mean() {
        d.set_item("rollout/ep_len_mean", m)?;
    }
    d.set_item("time/iterations", r.update)?;
    d.set_item("time/total_timesteps", r.global_step)?;
    d.set_item("train/learning_rate", s.learning_rate)?;
    if let Some(n_updates) = tr.gradient_steps_done() {
        // SB3's off-policy keys: the iteration's mean losses, α, gradient steps so far.
        d.set_item("train/actor_loss", s.policy_loss)?;
        d.set_item("train/critic_loss", s.value_loss)?;
        if let Some(alpha) = s.ent_coef.filter(|_| tr.cfg.algo.has_temperature()) {
            d.set_item("train/ent_coef", alpha)?;
        }
        d.set_item("train/n_updates", n_updates)?;
    } else {
        on_policy_keys(&d, tr, r)?;
    }
    let episodes = PyList::empty(py);
    for (step, ep) in &r.finished {
        episodes.append((step, ep.episode_return, ep.length))?;
    }
    d.set_item("episodes", episodes)?;
    Ok(d)
}

/// PPO's and A2C's `train/…` keys, as SB3 logs them.
fn on_policy_keys(d: &Bound<'_, PyDict>, tr: &Trainer, r: &UpdateReport) -> PyResult<()> {
    let s = &r.stats;
    d.set_item("train/policy_gradient_loss", s.policy_loss)?;
    d.set_item("train/value_loss", s.value_loss)?;
    d.set_item("train/entropy_loss", -s.entropy)?;
    d.set_item("train/approx_kl", s.approx_kl)?;
    d.set_item("train/clip_fraction", s.clip_fraction)?;
    d.set_item("train/explained_variance", s.explained_variance)?;
    d.set_item("train/n_updates", r.update * tr.cfg.n_epochs as u64)
}

impl Inner {
    fn trainer(&mut self) -> PyResult<&mut Trainer> {
        match &mut self.state {
            State::Training(t) => Ok(t),
            State::Loaded(_) => {
                Err(PyValueError::new_err("this model was loaded without an env: pass env= to load() to train it"))
            }
        }
    }

    fn policy(&self) -> &Network {
        match &self.state {
            State::Training(t) => &t.policy,
            State::Loaded(l) => &l.policy,
        }
    }

    fn spec(&self) -> &PolicySpec {
        self.policy().spec()
    }
}

#[pymethods]
impl Model {
    /// A fresh run: `preset` (a CLI preset) with `settings` (the config's keys, in SB3's names,
    /// to typed values: see `crate::settings`) on `env` (see `EnvSource`). `chosen`: the keys the
    /// user passed beyond the class's own signature; one the resolved config would ignore
    /// (another algorithm's) is refused, as the CLI refuses it.
    #[staticmethod]
    #[pyo3(signature = (env, preset, settings, chosen=Vec::new()))]
    fn create(
        py: Python<'_>,
        env: EnvSource,
        preset: &str,
        settings: Option<Bound<'_, PyDict>>,
        chosen: Vec<String>,
    ) -> PyResult<Model> {
        let mut sets = settings::overrides(settings.as_ref())?;
        if let Some(n) = env.n_envs(py)? {
            sets.push(format!("n_envs={n}"));
        }
        let layered = Config::layered(preset, None, &sets).py()?;
        Config::check_preset_fits(preset, layered.algo).py()?;
        let cfg = layered.validate().py()?;
        cfg.check_keys_used(&chosen).py()?;
        let seed = cfg.seed;
        let trainer = env.trainer(py, cfg)?;
        Ok(Model::new(State::Training(Box::new(trainer)), ChaCha8Rng::seed_from_u64(seed ^ 0x9e37_79b9)))
    }

    /// A saved model: for inference only without `env`; with `env`, a run on it that continues
    /// from the file's parameters, optimiser state and counters (`settings`, as `create`'s,
    /// override the saved config, e.g. `n_envs`; one the saved algorithm would ignore is refused).
    #[staticmethod]
    #[pyo3(signature = (path, env=None, settings=None))]
    fn load(
        py: Python<'_>,
        path: PathBuf,
        env: Option<EnvSource>,
        settings: Option<Bound<'_, PyDict>>,
    ) -> PyResult<Model> {
        check_path("load", &path, false)?;
        let chosen = settings::keys(settings.as_ref())?;
        let mut sets = settings::overrides(settings.as_ref())?;
        let ck = py.detach(|| checkpoint::load(&path)).py()?;
        let cfg_toml = ck.meta.config_toml.clone();
        let preset = Config::saved_preset(&cfg_toml);
        let rng = ChaCha8Rng::seed_from_u64(0x9e37_79b9);
        let Some(env) = env else {
            // The backend the run trained on (its checkpoint records it), so a model acts with the
            // arithmetic it learned with; `auto` for a file saved before the record.
            let backend =
                ck.meta.extra.get("backend").and_then(|b| b.parse().ok()).unwrap_or(proxima::policy::Backend::Auto);
            let policy = ck.build_network(backend).py()?;
            let norm = saved_normalizer(&ck).py()?;
            return Ok(Model::new(State::Loaded(Box::new(Loaded { policy, norm, ck })), rng));
        };
        if let Some(n) = env.n_envs(py)? {
            sets.push(format!("n_envs={n}"));
        }
        // A CLI run of an `atari:` id steps half its games in worker processes of the CLI, which
        // this program lacks; stepping them all here gives the same results.
        let saved_subproc = cfg_toml.parse::<toml::Table>().is_ok_and(|t| {
            t.get("vector_env").and_then(|v| v.as_str()) == Some(proxima::config::VectorEnv::Subproc.as_str())
        });
        if saved_subproc && env.is_atari_id() && !chosen.iter().any(|k| k == "vector_env") {
            sets.push(format!("vector_env={}", proxima::config::VectorEnv::Off.as_str()));
        }
        let cfg = Config::resolve(&preset, Some(&cfg_toml), &sets).py()?;
        cfg.check_keys_used(&chosen).py()?;
        let mut trainer = env.trainer(py, cfg)?;
        if trainer.policy.spec() != &ck.meta.policy {
            return Err(PyValueError::new_err(format!(
                "{}: the saved policy (observations of {}, action {}) does not fit this env (observations of {}, action {})",
                path.display(),
                ck.meta.policy.obs_dim,
                ck.meta.policy.action.describe(),
                trainer.policy.spec().obs_dim,
                trainer.policy.spec().action.describe()
            )));
        }
        trainer.load_state_from(&ck).py()?;
        Ok(Model::new(State::Training(Box::new(trainer)), rng))
    }

    /// Trains until the run has taken `total_timesteps` env steps in all. Python hooks, each
    /// optional: `before(progress_remaining) -> (learning_rate, clip_range)` before each rollout
    /// (either `None`: keep the config's); `on_step(num_timesteps, new_obs, rewards, dones,
    /// infos) -> bool` after every step of the envs (`False` stops there, without an update);
    /// `rollout_end()` before each update; `after(report_dict) -> bool` after it (`False`
    /// stops). The GIL is released while Rust works; the model is free during `before` and
    /// `after` only (a callback there may `predict` or `save`). Ctrl-C raises
    /// `KeyboardInterrupt` within a step (with `on_step`), between two off-policy gradient steps
    /// or at the end of the iteration, the model intact. With `tensorboard_dir` (an existing
    /// directory) each iteration's scalars go to a new TensorBoard event file there, with the
    /// CLI's tags.
    #[pyo3(signature = (total_timesteps, before=None, on_step=None, rollout_end=None, after=None, tensorboard_dir=None))]
    #[allow(clippy::too_many_arguments)]
    fn learn(
        &self,
        py: Python<'_>,
        total_timesteps: u64,
        before: Option<Py<PyAny>>,
        on_step: Option<Py<PyAny>>,
        rollout_end: Option<Py<PyAny>>,
        after: Option<Py<PyAny>>,
        tensorboard_dir: Option<PathBuf>,
    ) -> PyResult<()> {
        self.lock()?.trainer()?.set_total_timesteps(total_timesteps).py()?;
        let mut tb = tensorboard_dir.map(|d| TensorBoardWriter::create(&d)).transpose().py()?;
        loop {
            let (done, next) = {
                let mut inner = self.lock()?;
                let tr = inner.trainer()?;
                (tr.is_done(), tr.global_step + tr.steps_per_iteration())
            };
            if done {
                return Ok(());
            }
            let values: (Option<f64>, Option<f64>) = match &before {
                Some(f) => f.bind(py).call1(((1.0 - next as f64 / total_timesteps as f64).max(0.0),))?.extract()?,
                None => (None, None),
            };
            let Some(report) = self.iteration(py, values, (on_step.as_ref(), rollout_end.as_ref()), tb.as_mut())?
            else {
                return Ok(()); // on_step said stop
            };
            py.check_signals()?;
            if let Some(f) = &after {
                let keep_going = f.bind(py).call1((report,))?;
                if !keep_going.is_none() && !keep_going.is_truthy()? {
                    return Ok(());
                }
            }
        }
    }

    /// Actions for `observations` `[B, obs_dim]` (float32): the mode when `deterministic`, else
    /// sampled; Box actions clipped to the space; observations normalised as in training;
    /// with `action_masks` (`[B, mask_dim]` uint8, 1 = valid: sb3-contrib's) the masked actions
    /// are never chosen; a recurrent policy's with `state` (`[B, recurrent_state_dim]` float32)
    /// and `episode_starts` (`[B]` bool: the state is zeroed first there), whose next state it
    /// returns. Returns `([B, act_dim] float32, next state or None)` (the Python layer casts
    /// discrete actions to int).
    #[pyo3(signature = (observations, deterministic, action_masks = None, state = None, episode_starts = None))]
    fn predict<'py>(
        &self,
        py: Python<'py>,
        observations: PyReadonlyArray2<'py, f32>,
        deterministic: bool,
        action_masks: Option<PyReadonlyArray2<'py, u8>>,
        state: Option<PyReadonlyArray2<'py, f32>>,
        episode_starts: Option<PyReadonlyArray1<'py, bool>>,
    ) -> PyResult<(Bound<'py, PyArray2<f32>>, Option<Bound<'py, PyArray2<f32>>>)> {
        let hidden = match (state, episode_starts) {
            (Some(s), Some(e)) => Some((s, e)),
            (None, None) => None,
            _ => return Err(PyValueError::new_err("state and episode_starts go together")),
        };
        let extra = (action_masks.as_ref(), hidden.as_ref());
        let Some(mut guard) = self.try_lock()? else {
            return self.with_lent(|policy, norm, rng, _| {
                let norm = Some(norm).filter(|n| n.is_active());
                predict_rows(py, (policy, norm, rng), &observations, extra, deterministic)
            })?;
        };
        let inner = &mut *guard;
        let (policy, norm): (&dyn Policy, Option<&Normalizer>) = match &inner.state {
            State::Training(t) => (&t.policy, Some(&t.collector.norm).filter(|n| n.is_active())),
            State::Loaded(l) => (&l.policy, l.norm.as_ref()),
        };
        predict_rows(py, (policy, norm, &mut inner.rng), &observations, extra, deterministic)
    }

    /// A recurrent policy's layers: `(cell, hidden_size, n_layers, state_dim)` (`state_dim`: the
    /// values of one env's whole hidden state, the actor's stack first), or None.
    #[getter]
    fn recurrent(&self) -> PyResult<Option<(String, usize, usize, usize)>> {
        let inner = self.lock()?;
        Ok(inner.spec().recurrent.map(|r| {
            let cell = serde_json::to_value(r.cell).ok().and_then(|v| v.as_str().map(str::to_string));
            (cell.unwrap_or_default(), r.hidden_size, r.n_layers, r.state_dim())
        }))
    }

    /// Writes the model to `path` (safetensors, atomically): parameters, optimiser state,
    /// config and counters; `proxima eval` reads it. An empty path or a directory is a
    /// `ValueError` (nothing is written).
    #[pyo3(signature = (path))]
    fn save(&self, path: PathBuf) -> PyResult<()> {
        check_path("save", &path, true)?;
        let Some(inner) = self.try_lock()? else {
            return self.with_lent(|policy, _, _, (opt, meta)| {
                checkpoint::save(&path, policy, &[(checkpoint::OPTIMIZER, opt)], meta).py()
            })?;
        };
        match &inner.state {
            State::Training(t) => t.save(&path).py(),
            State::Loaded(l) => {
                let spec = l.policy.spec();
                let opt = l.ck.optimizer_state(checkpoint::OPTIMIZER, &["m", "v"], spec).ok();
                let opts: Vec<(&str, &checkpoint::OptimizerState)> =
                    opt.iter().map(|o| (checkpoint::OPTIMIZER, o)).collect();
                checkpoint::save(&path, &l.policy, &opts, &l.ck.meta).py()
            }
        }
    }

    /// Writes an off-policy run's replay buffer to `path` (safetensors, atomically). A model
    /// loaded without env, or an on-policy one, is a `ValueError`.
    #[pyo3(signature = (path))]
    fn save_replay_buffer(&self, path: PathBuf) -> PyResult<()> {
        check_path("save_replay_buffer", &path, true)?;
        self.lock()?.trainer()?.save_replay_buffer(&path).py()
    }

    /// Replaces an off-policy run's replay buffer with the one at `path` (written by
    /// `save_replay_buffer` or beside a run's checkpoint); nothing changes when it does not fit
    /// (another `buffer_size`, number of envs, observation or action size).
    #[pyo3(signature = (path))]
    fn load_replay_buffer(&self, path: PathBuf) -> PyResult<()> {
        check_path("load_replay_buffer", &path, false)?;
        self.lock()?.trainer()?.load_replay_buffer(&path).py()
    }

    /// The parameters by name, each `(name, shape, flat float32 values)`.
    #[pyo3(signature = ())]
    fn get_parameters(&self) -> PyResult<Vec<NamedParam>> {
        let named = |p: &dyn Policy| -> PyResult<Vec<NamedParam>> {
            let values = p.params().py()?;
            // The policy's own names and shapes: SAC's and TD3's networks are not the spec's actor-critic.
            Ok(p.param_shapes().into_iter().zip(values).map(|((n, s), v)| (n, s, v)).collect())
        };
        match self.try_lock()? {
            Some(inner) => named(inner.policy()),
            None => self.with_lent(|policy, _, _, _| named(policy))?,
        }
    }

    /// Sets parameters by name (`exact_match`: every parameter, no others); nothing changes
    /// when one is wrong.
    #[pyo3(signature = (params, exact_match))]
    fn set_parameters(&self, params: Vec<(String, Vec<f32>)>, exact_match: bool) -> PyResult<()> {
        let mut inner = self.lock()?;
        let shapes = inner.policy().param_shapes();
        let mut values = inner.policy().params().py()?;
        let mut seen = vec![false; shapes.len()];
        for (name, v) in params {
            let Some(i) = shapes.iter().position(|(n, _)| *n == name) else {
                let names: Vec<&str> = shapes.iter().map(|(n, _)| n.as_str()).collect();
                return Err(PyValueError::new_err(format!(
                    "unknown parameter {name:?}; the policy has {}",
                    names.join(", ")
                )));
            };
            let want: usize = shapes[i].1.iter().product();
            if v.len() != want {
                return Err(PyValueError::new_err(format!("{name}: {} values for shape {:?}", v.len(), shapes[i].1)));
            }
            if let Some(bad) = v.iter().find(|x| !x.is_finite()) {
                return Err(PyValueError::new_err(format!("{name}: non-finite value {bad}")));
            }
            values[i] = v;
            seen[i] = true;
        }
        if let Some(i) = seen.iter().position(|s| !s).filter(|_| exact_match) {
            return Err(PyValueError::new_err(format!("parameter {:?} missing (exact_match=True)", shapes[i].0)));
        }
        match &mut inner.state {
            State::Training(t) => t.policy.set_params(&values).py(),
            State::Loaded(l) => l.policy.set_params(&values).py(),
        }
    }

    /// Env steps taken so far.
    #[getter]
    fn num_timesteps(&self) -> PyResult<u64> {
        Ok(match &self.lock()?.state {
            State::Training(t) => t.global_step,
            State::Loaded(l) => l.ck.meta.global_step,
        })
    }

    /// Sets the step and iteration counters to 0 (SB3's `reset_num_timesteps=True`: the
    /// schedules start again; parameters and optimiser state stay).
    #[pyo3(signature = ())]
    fn reset_num_timesteps(&self) -> PyResult<()> {
        let mut inner = self.lock()?;
        inner.trainer()?.reset_num_timesteps();
        Ok(())
    }

    /// The run's env id or name.
    #[getter]
    fn env_id(&self) -> PyResult<String> {
        Ok(match &self.lock()?.state {
            State::Training(t) => t.env_id.clone(),
            State::Loaded(l) => l.ck.meta.env_id.clone(),
        })
    }

    /// Number of envs stepped together (0 for a policy loaded without env).
    #[getter]
    fn n_envs(&self) -> PyResult<usize> {
        Ok(match &self.lock()?.state {
            State::Training(t) => t.cfg.n_envs,
            State::Loaded(_) => 0,
        })
    }

    /// Flat observation size.
    #[getter]
    fn obs_dim(&self) -> PyResult<usize> {
        Ok(self.lock()?.spec().obs_dim)
    }

    /// The observation space: `(shape, dtype)`, dtype `"uint8"` or `"float32"`: the training
    /// envs' own; for a loaded policy the image a `CnnPolicy` reads (`[C, H, W]` uint8), else
    /// `[obs_dim]` float32.
    #[getter]
    fn observation_space(&self) -> PyResult<(Vec<usize>, &'static str)> {
        let inner = self.lock()?;
        let dtype = |uint8: bool| if uint8 { "uint8" } else { "float32" };
        Ok(match &inner.state {
            State::Training(t) => match t.collector.venv.observation_space() {
                Space::Box { shape, dtype: d, .. } => (shape.clone(), dtype(*d == Dtype::Uint8)),
                other => (vec![other.flat_dim()], "float32"),
            },
            State::Loaded(_) => match inner.spec().cnn {
                Some(i) => (vec![i.channels, i.height, i.width], "uint8"),
                None => (vec![inner.spec().obs_dim], "float32"),
            },
        })
    }

    /// The action space: `("discrete", n)`, `("multidiscrete", nvec)` or `("box", low, high)`.
    #[getter]
    fn action_space<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let inner = self.lock()?;
        Ok(match &inner.spec().action {
            ActionKind::Discrete { n } => ("discrete", *n).into_pyobject(py)?.into_any(),
            ActionKind::MultiDiscrete { nvec } => ("multidiscrete", nvec.clone()).into_pyobject(py)?.into_any(),
            ActionKind::Continuous { low, high, .. } => {
                ("box", low.clone(), high.clone()).into_pyobject(py)?.into_any()
            }
        })
    }

    /// Records `value` under `key` in every checkpoint this model writes (a resumed training run
    /// and a loaded model keep it): the Python package keeps the Gymnasium observation space
    /// there. `key` is stored with the trainer's note prefix.
    fn set_note(&self, key: &str, value: String) -> PyResult<()> {
        let key = format!("{}{key}", proxima::train::NOTE_PREFIX);
        match &mut self.lock()?.state {
            State::Training(t) => t.notes.insert(key, value),
            State::Loaded(l) => l.ck.meta.extra.insert(key, value),
        };
        Ok(())
    }

    /// The note recorded under `key` ([`Model::set_note`]), if any.
    fn note(&self, key: &str) -> PyResult<Option<String>> {
        let key = format!("{}{key}", proxima::train::NOTE_PREFIX);
        Ok(match &self.lock()?.state {
            State::Training(t) => t.notes.get(&key).cloned(),
            State::Loaded(l) => l.ck.meta.extra.get(&key).cloned(),
        })
    }

    /// The resolved config as TOML (SB3's names).
    #[getter]
    fn config_toml(&self) -> PyResult<String> {
        Ok(match &self.lock()?.state {
            State::Training(t) => t.cfg.to_toml(),
            State::Loaded(l) => l.ck.meta.config_toml.clone(),
        })
    }

    /// Whether this model can train (it has envs).
    #[getter]
    fn has_env(&self) -> PyResult<bool> {
        Ok(matches!(self.lock()?.state, State::Training(_)))
    }

    /// Writes the policy to `path` as an ONNX model of `predict(deterministic=True)`: input
    /// `obs` (`float32 [batch, obs_dim]`, or a `CnnPolicy`'s `uint8 [batch, C, H, W]`) and, with
    /// `action_masks`, `action_masks` (`bool [batch, mask_dim]`); outputs `action`, the
    /// distribution's parameters (`logits` or `mean`) and (on-policy) `value`. The observation
    /// normalisation's frozen statistics are inside. Returns the inputs and outputs as
    /// `(name, "dtype [dims]")`; a recurrent policy's state goes in and out (`state_h`,
    /// `state_c`, `episode_start`; `next_state_h`, `next_state_c`). `ValueError` for a path
    /// whose folder does not exist, an empty one or a directory, and masks on a Box action
    /// space; nothing is written then.
    #[pyo3(signature = (path, action_masks = false))]
    fn export_onnx(&self, path: PathBuf, action_masks: bool) -> PyResult<ExportedIo> {
        check_path("export_onnx", &path, true)?;
        let options = proxima::export::OnnxOptions { action_masks };
        let export = |policy: &dyn Policy, norm: Option<&Normalizer>| {
            proxima::export::export_onnx(policy, norm, options, &path).py().map(|e| (e.inputs, e.outputs))
        };
        let Some(guard) = self.try_lock()? else {
            return self.with_lent(|policy, norm, _, _| export(policy, Some(norm).filter(|n| n.is_active())))?;
        };
        match &guard.state {
            State::Training(t) => export(&t.policy, Some(&t.collector.norm).filter(|n| n.is_active())),
            State::Loaded(l) => export(&l.policy, l.norm.as_ref()),
        }
    }

    /// Whether this model trains under its envs' action masks (PPO on envs with
    /// `action_masks()` and `use_masking`); false for a loaded policy.
    #[getter]
    fn trains_masked(&self) -> PyResult<bool> {
        Ok(matches!(&self.lock()?.state, State::Training(t) if t.buffer().mask_dim > 0))
    }

    /// Whether a masked model's rollouts read the envs' masks (`true`, the default) or take
    /// every action as valid (sb3-contrib's `learn(use_masking=False)`); nothing for a model
    /// that does not train masked.
    fn set_use_masking(&self, use_masking: bool) -> PyResult<()> {
        if let State::Training(t) = &mut self.lock()?.state {
            t.collector.ignore_masks = !use_masking;
        }
        Ok(())
    }

    /// `n_episodes` episodes of this policy on `env_id`, stepped in Rust (for the ids Python
    /// cannot step, `atari:…`): `(returns, lengths)`, episode i reset with `seed + i`, the run's
    /// observation normalisation applied frozen, under the env's action masks when `masked`. An
    /// Atari episode is a whole game: its score over every life and its raw frames (what SB3's
    /// `Monitor` under `AtariWrapper` records). Python's lock is held throughout.
    #[pyo3(signature = (env_id, n_episodes, deterministic, seed, masked = false))]
    fn evaluate(
        &self,
        env_id: &str,
        n_episodes: usize,
        deterministic: bool,
        seed: u64,
        masked: bool,
    ) -> PyResult<(Vec<f64>, Vec<usize>)> {
        let guard = self.lock()?;
        let (policy, norm): (&dyn Policy, Option<&Normalizer>) = match &guard.state {
            State::Training(t) => (&t.policy, Some(&t.collector.norm).filter(|n| n.is_active())),
            State::Loaded(l) => (&l.policy, l.norm.as_ref()),
        };
        proxima::train::evaluate_episodes(policy, env_id, (n_episodes, deterministic, seed), norm, masked).py()
    }

    /// Reseeds `predict`'s sampling.
    #[pyo3(signature = (seed))]
    fn seed_predict(&self, seed: u64) -> PyResult<()> {
        self.lock()?.rng = ChaCha8Rng::seed_from_u64(seed);
        Ok(())
    }
}
