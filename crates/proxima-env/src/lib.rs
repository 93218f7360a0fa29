//! # proxima-env
//!
//! Environments with Gymnasium's semantics, and nothing else: this crate depends on no tensor
//! library, so an environment (or the Python bridge, `proxima-gym`) builds without one. The RL
//! library re-exports it as `proxima::env`.
//!
//! * [`Env`]: `reset(seed) -> (observation, info)` and
//!   `step(action) -> StepResult { observation, reward, terminated, truncated, info }`,
//!   exactly Gymnasium's API and names.
//! * [`Space`]: `Discrete`, `Box` and `MultiDiscrete`, as in `gymnasium.spaces`.
//! * [`TimeLimit`]: sets `truncated` after `max_episode_steps`, as `gymnasium.wrappers.TimeLimit`.
//! * [`make`]: the registry (`make("CartPole-v1")`), with the time limits Gymnasium registers.
//! * [`vec_env::SyncVectorEnv`]: N copies in lockstep with same-step autoreset.
//!
//! Native ports of Gymnasium 1.4's classic-control suite live in [`classic`]; the Atari
//! preprocessing's pixel operations (exact to OpenCV) in [`atari`].

pub mod atari;
pub mod classic;
pub mod did_you_mean;
pub mod error;
pub mod render;
pub mod vec_env;

pub use error::{EnvError, Result};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// The random-number generator every native environment owns (Gymnasium's `np_random`).
///
/// ChaCha8 is portable and reproducible across platforms; it does *not* reproduce NumPy's
/// PCG64 stream, so a native env seeded with `s` starts from a different (equally distributed)
/// state than Gymnasium's env seeded with `s`.
pub type EnvRng = ChaCha8Rng;

/// Builds an [`EnvRng`] from a seed (Gymnasium's `seeding.np_random(seed)`).
pub fn env_rng(seed: u64) -> EnvRng {
    ChaCha8Rng::seed_from_u64(seed)
}

/// The type of a `Box` space's elements (Gymnasium's `Box.dtype`). Values cross the [`Env`]
/// API as f32 either way (every u8 is exact in f32); a `Uint8` observation space tells the
/// rollout buffer to store observations as bytes (4× less memory: Atari frames) and marks an
/// image for `CnnPolicy`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Dtype {
    /// `np.float32`.
    #[default]
    Float32,
    /// `np.uint8`: integers 0..=255.
    Uint8,
}

/// An observation or action space, mirroring `gymnasium.spaces`.
#[derive(Clone, Debug, PartialEq)]
pub enum Space {
    /// `Discrete(n)`: integers `0..n`.
    Discrete { n: usize },
    /// `Box(low, high, shape, dtype)`; `low`/`high` have `shape.iter().product()` entries
    /// (row-major) and may hold `±inf`.
    Box { low: Vec<f32>, high: Vec<f32>, shape: Vec<usize>, dtype: Dtype },
    /// `MultiDiscrete(nvec)`: one integer in `0..nvec[i]` per component.
    MultiDiscrete { nvec: Vec<usize> },
}

impl Space {
    /// A `Box` with the same bounds on every one of `shape.product()` entries.
    pub fn uniform_box(low: f32, high: f32, shape: &[usize]) -> Space {
        let n = shape.iter().product();
        Space::Box { low: vec![low; n], high: vec![high; n], shape: shape.to_vec(), dtype: Dtype::Float32 }
    }

    /// An image space as Gymnasium's Atari wrappers declare it: `Box(0, 255, shape, uint8)`.
    pub fn image(shape: &[usize]) -> Space {
        let n = shape.iter().product();
        Space::Box { low: vec![0.0; n], high: vec![255.0; n], shape: shape.to_vec(), dtype: Dtype::Uint8 }
    }

    /// Whether this is a `Box` of `uint8` values.
    pub fn is_uint8(&self) -> bool {
        matches!(self, Space::Box { dtype: Dtype::Uint8, .. })
    }

    /// Number of f32 values an element of this space flattens to
    /// (1 for `Discrete`, `prod(shape)` for `Box`, `len(nvec)` for `MultiDiscrete`).
    pub fn flat_dim(&self) -> usize {
        match self {
            Space::Discrete { .. } => 1,
            Space::Box { shape, .. } => shape.iter().product(),
            Space::MultiDiscrete { nvec } => nvec.len(),
        }
    }

    /// Length of an action mask over this space (sb3-contrib's layout): `n` for `Discrete(n)`,
    /// Σ `nvec` for `MultiDiscrete` (component after component); 0 for `Box`, which has none.
    pub fn mask_dim(&self) -> usize {
        match self {
            Space::Discrete { n } => *n,
            Space::Box { .. } => 0,
            Space::MultiDiscrete { nvec } => nvec.iter().sum(),
        }
    }

    /// Whether `x` (flattened) lies in the space.
    pub fn contains(&self, x: &[f32]) -> bool {
        match self {
            Space::Discrete { n } => x.len() == 1 && x[0] >= 0.0 && (x[0] as usize) < *n && x[0].fract() == 0.0,
            Space::Box { low, high, .. } => {
                x.len() == low.len() && x.iter().zip(low.iter().zip(high)).all(|(v, (l, h))| *v >= *l && *v <= *h)
            }
            Space::MultiDiscrete { nvec } => {
                x.len() == nvec.len()
                    && x.iter().zip(nvec).all(|(v, n)| *v >= 0.0 && (*v as usize) < *n && v.fract() == 0.0)
            }
        }
    }

    /// A uniformly random element, as `space.sample()` in Gymnasium: `Discrete` → an index,
    /// `Box` → each entry uniform in its bounds (infinite bounds cut to ±1000),
    /// `MultiDiscrete` → each component uniform. `buf` (`flat_dim()` long) holds the values of
    /// the non-discrete cases.
    pub fn sample<'a, R: rand::Rng + ?Sized>(&self, rng: &mut R, buf: &'a mut [f32]) -> Action<'a> {
        match self {
            Space::Discrete { n } => Action::Discrete(rng.random_range(0..*n)),
            Space::Box { low, high, .. } => {
                for ((x, l), h) in buf.iter_mut().zip(low).zip(high) {
                    *x = rng.random_range(l.max(-1e3)..=h.min(1e3));
                }
                Action::Continuous(buf)
            }
            Space::MultiDiscrete { nvec } => {
                for (x, n) in buf.iter_mut().zip(nvec) {
                    *x = rng.random_range(0..*n) as f32;
                }
                Action::Continuous(buf)
            }
        }
    }

    /// A short human description, Gymnasium style: `Discrete(2)`, `Box(-2, 2, [1])`.
    pub fn describe(&self) -> String {
        match self {
            Space::Discrete { n } => format!("Discrete({n})"),
            Space::Box { low, high, shape, dtype } => {
                let lo = low.iter().cloned().fold(f32::INFINITY, f32::min);
                let hi = high.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
                let ty = if *dtype == Dtype::Uint8 { ", uint8" } else { "" };
                // float32's ±3.4e38 (Gymnasium's "unbounded") in exponent form, not 39 digits.
                let num = |v: f32| if v.is_finite() && v.abs() >= 1e6 { format!("{v:e}") } else { format!("{v}") };
                format!("Box({}, {}, {shape:?}{ty})", num(lo), num(hi))
            }
            Space::MultiDiscrete { nvec } => format!("MultiDiscrete({nvec:?})"),
        }
    }
}

/// An action handed to [`Env::step`], borrowed so that stepping allocates nothing.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Action<'a> {
    /// An element of a `Discrete` space.
    Discrete(usize),
    /// An element of a `Box` space (flattened, f32) or a `MultiDiscrete` one (integers as f32).
    Continuous(&'a [f32]),
}

/// Gymnasium's `info` dict, reduced to what native envs report: named f64 values.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Info {
    /// `(key, value)` pairs.
    pub values: Vec<(&'static str, f64)>,
}

/// What [`Env::step`] returns: Gymnasium's `(observation, reward, terminated, truncated, info)`.
#[derive(Clone, Debug, PartialEq)]
pub struct StepResult {
    /// The next observation, flattened f32 (`observation_space().flat_dim()` values).
    pub observation: Vec<f32>,
    /// The reward for this transition.
    pub reward: f64,
    /// A terminal state of the MDP was reached: its value is 0, do not bootstrap.
    pub terminated: bool,
    /// The episode was cut short (time limit): bootstrap from V(observation).
    pub truncated: bool,
    /// Extra diagnostics.
    pub info: Info,
}

/// A single environment with Gymnasium's API.
///
/// Implementations are `Send` so vector envs may step them on worker threads.
pub trait Env: Send {
    /// The registered id, e.g. `"CartPole-v1"` (used in error messages).
    fn id(&self) -> &str;
    /// The space of observations.
    fn observation_space(&self) -> Space;
    /// The space of actions.
    fn action_space(&self) -> Space;
    /// Starts a new episode. `Some(seed)` reseeds the env's RNG first (Gymnasium's
    /// `reset(seed=...)`); `None` continues the current RNG stream.
    fn reset(&mut self, seed: Option<u64>) -> Result<(Vec<f32>, Info)>;
    /// Advances one step.
    ///
    /// # Errors
    /// [`EnvError::InvalidAction`] when `action` is not in `action_space()`.
    fn step(&mut self, action: Action<'_>) -> Result<StepResult>;
    /// The internal physical state (f64, Gymnasium's `env.unwrapped.state`), if the env exposes it.
    fn state(&self) -> Option<Vec<f64>> {
        None
    }
    /// The env's RNG (Gymnasium's `np_random`), if it owns one: saved for an exact resume.
    fn rng(&self) -> Option<&EnvRng> {
        None
    }
    /// Mutable access to the env's RNG (restoring it on resume).
    fn rng_mut(&mut self) -> Option<&mut EnvRng> {
        None
    }
    /// Overwrites the internal physical state (for conformance tests and exact resume).
    ///
    /// # Errors
    /// [`EnvError::Unsupported`] for envs without a settable state; `InvalidArgument` for a
    /// state of the wrong length.
    fn set_state(&mut self, _state: &[f64]) -> Result<()> {
        Err(EnvError::Unsupported(format!("{} has no settable state", self.id())))
    }
    /// Steps taken in the current episode, where the env counts them (the [`TimeLimit`] does).
    fn elapsed_steps(&self) -> Option<usize> {
        None
    }
    /// Sets the step counter (exact resume); ignored where not counted.
    fn set_elapsed_steps(&mut self, _n: usize) {}
    /// Gymnasium's `render()` with `render_mode="rgb_array"`: the current scene as an RGB frame.
    ///
    /// # Errors
    /// `Unsupported` for envs that cannot draw themselves (the default).
    fn render(&mut self) -> Result<render::Frame> {
        Err(EnvError::Unsupported(format!("{} cannot render frames", self.id())))
    }
    /// Frames per second a recording should play at (Gymnasium's `metadata["render_fps"]`).
    fn render_fps(&self) -> u32 {
        30
    }
    /// sb3-contrib's `action_masks()`: which actions are valid in the current state, written
    /// into `out` (`action_space().mask_dim()` entries, `true` = valid; for `MultiDiscrete` the
    /// components' masks side by side). `Ok(false)`, with `out` untouched, for an env without
    /// masks (the default): every action is then valid.
    ///
    /// # Errors
    /// The env's own.
    fn action_masks(&mut self, _out: &mut [bool]) -> Result<bool> {
        Ok(false)
    }
    /// A structured (`Dict`/`Tuple`) observation's top-level keys as the flat observation holds
    /// them, in order (their lengths add up to the observation space's flat length). Empty for
    /// a flat observation (the default). What `norm_obs_keys` (SB3's `VecNormalize`) selects by
    /// name, and where `MultiInputPolicy`'s CNN finds its images.
    fn observation_keys(&self) -> Vec<ObsKey> {
        Vec::new()
    }
}

/// Validates that a discrete action lies in `0..n`, with an error naming the env.
pub(crate) fn expect_discrete(env_id: &str, action: Action<'_>, n: usize) -> Result<usize> {
    match action {
        Action::Discrete(a) if a < n => Ok(a),
        other => Err(EnvError::InvalidAction(format!("{env_id}: expected an action in Discrete({n}), got {other:?}"))),
    }
}

/// Validates that a continuous action has `dim` finite entries.
pub(crate) fn expect_box<'a>(env_id: &str, action: Action<'a>, dim: usize) -> Result<&'a [f32]> {
    match action {
        Action::Continuous(a) if a.len() == dim && a.iter().all(|x| x.is_finite()) => Ok(a),
        other => Err(EnvError::InvalidAction(format!(
            "{env_id}: expected an action of {dim} finite f32 value(s) (Box), got {other:?}"
        ))),
    }
}

/// `gymnasium.wrappers.TimeLimit`: sets `truncated = true` on the `max_episode_steps`-th step.
pub struct TimeLimit<E: Env> {
    /// The wrapped env.
    pub env: E,
    max_episode_steps: usize,
    elapsed: usize,
}

impl<E: Env> TimeLimit<E> {
    /// Wraps `env` with a limit of `max_episode_steps` steps per episode.
    pub fn new(env: E, max_episode_steps: usize) -> Self {
        TimeLimit { env, max_episode_steps, elapsed: 0 }
    }
}

impl<E: Env> Env for TimeLimit<E> {
    fn id(&self) -> &str {
        self.env.id()
    }
    fn observation_space(&self) -> Space {
        self.env.observation_space()
    }
    fn action_space(&self) -> Space {
        self.env.action_space()
    }
    fn reset(&mut self, seed: Option<u64>) -> Result<(Vec<f32>, Info)> {
        self.elapsed = 0;
        self.env.reset(seed)
    }
    fn step(&mut self, action: Action<'_>) -> Result<StepResult> {
        let mut r = self.env.step(action)?;
        self.elapsed += 1;
        if self.elapsed >= self.max_episode_steps {
            r.truncated = true;
        }
        Ok(r)
    }
    fn state(&self) -> Option<Vec<f64>> {
        self.env.state()
    }
    fn rng(&self) -> Option<&EnvRng> {
        self.env.rng()
    }
    fn rng_mut(&mut self) -> Option<&mut EnvRng> {
        self.env.rng_mut()
    }
    fn set_state(&mut self, state: &[f64]) -> Result<()> {
        self.env.set_state(state)
    }
    fn elapsed_steps(&self) -> Option<usize> {
        Some(self.elapsed)
    }
    fn render(&mut self) -> Result<render::Frame> {
        self.env.render()
    }
    fn render_fps(&self) -> u32 {
        self.env.render_fps()
    }
    fn set_elapsed_steps(&mut self, n: usize) {
        self.elapsed = n;
    }
    fn action_masks(&mut self, out: &mut [bool]) -> Result<bool> {
        self.env.action_masks(out)
    }
    fn observation_keys(&self) -> Vec<ObsKey> {
        self.env.observation_keys()
    }
}

/// One top-level key of a structured observation ([`Env::observation_keys`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObsKey {
    /// The key (a `Tuple`'s index, as text).
    pub name: String,
    /// Its number of flat values.
    pub len: usize,
    /// An image key (SB3's `is_image_space`: a `uint8` `Box` of 3 dimensions with bounds 0 and
    /// 255), whose `len` values are its pixels in the env's own layout.
    pub image: Option<KeyImage>,
}

/// The layout of an image key's pixels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyImage {
    /// Channels, height, width.
    pub chw: [usize; 3],
    /// The pixels are `[H, W, C]` (else `[C, H, W]`), as SB3's `is_image_space_channels_first`
    /// decides: channel-first when the first dimension is the smallest.
    pub channels_last: bool,
}

/// Builds an env from the text after a registered prefix (see [`register_prefix`]); the flag
/// asks for an env that can [`Env::render`] (Gymnasium's `render_mode="rgb_array"`).
pub type EnvFactory = fn(&str, bool) -> Result<Box<dyn Env>>;

static EXTERNAL: std::sync::RwLock<Vec<(&'static str, EnvFactory)>> = std::sync::RwLock::new(Vec::new());

/// Routes every id starting with `prefix` (e.g. `"gym:"`) to `factory`, which receives the
/// rest of the id. This is how the Python Gymnasium bridge (`proxima-gym`) plugs into [`make`],
/// so training, evaluation and resume all accept its ids.
pub fn register_prefix(prefix: &'static str, factory: EnvFactory) {
    let mut ext = EXTERNAL.write().unwrap_or_else(|e| e.into_inner());
    ext.retain(|(p, _)| *p != prefix);
    ext.push((prefix, factory));
}

/// Builds a [`vec_env::BatchEnv`] of N envs from the text after a registered prefix (see
/// [`register_vector_prefix`]).
pub type VectorFactory = fn(&str, usize, vec_env::VectorMode) -> Result<Box<dyn vec_env::BatchEnv>>;

static EXTERNAL_VECTOR: std::sync::RwLock<Vec<(&'static str, VectorFactory)>> = std::sync::RwLock::new(Vec::new());

/// Routes every id starting with `prefix` to `factory` when N envs of it are wanted at once
/// ([`make_vector`]): how the bridge steps N Python envs as one Gymnasium vector env.
pub fn register_vector_prefix(prefix: &'static str, factory: VectorFactory) {
    let mut ext = EXTERNAL_VECTOR.write().unwrap_or_else(|e| e.into_inner());
    ext.retain(|(p, _)| *p != prefix);
    ext.push((prefix, factory));
}

/// N envs of `env_id` as one [`vec_env::BatchEnv`] stepped in `mode`, when a vector factory is
/// registered for its prefix; `None` otherwise (native envs: build them one by one with
/// [`make`]).
pub fn make_vector(env_id: &str, n: usize, mode: vec_env::VectorMode) -> Option<Result<Box<dyn vec_env::BatchEnv>>> {
    let ext =
        EXTERNAL_VECTOR.read().unwrap_or_else(|e| e.into_inner()).iter().find(|(p, _)| env_id.starts_with(p)).copied();
    ext.map(|(prefix, factory)| factory(&env_id[prefix.len()..], n, mode))
}

/// Ids of the native environments, in registry order.
pub const NATIVE_ENV_IDS: [&str; 5] =
    ["CartPole-v1", "Acrobot-v1", "MountainCar-v0", "MountainCarContinuous-v0", "Pendulum-v1"];

/// The registry: builds a native env by id, wrapped in the [`TimeLimit`] Gymnasium registers
/// (CartPole-v1 500, Acrobot-v1 500, MountainCar-v0 200, MountainCarContinuous-v0 999,
/// Pendulum-v1 200).
///
/// # Errors
/// [`EnvError::UnknownEnv`] naming the id and listing the known ones (with the closest
/// match suggested).
pub fn make(env_id: &str) -> Result<Box<dyn Env>> {
    make_with(env_id, false)
}

/// Whether `env_id` is stepped through the Python Gymnasium bridge (`gym:…`, `atari:…`) rather
/// than natively: such envs need a build with the bridge, and share one embedded Python.
pub fn needs_bridge(env_id: &str) -> bool {
    env_id.starts_with("gym:") || env_id.starts_with(atari::ATARI_PREFIX)
}

/// [`make`], asking for an env that can [`Env::render`] frames when `render` is true
/// (`gymnasium.make(id, render_mode="rgb_array")` for bridged envs; native envs always can).
///
/// # Errors
/// As [`make`].
pub fn make_with(env_id: &str, render: bool) -> Result<Box<dyn Env>> {
    use classic::*;
    let external =
        EXTERNAL.read().unwrap_or_else(|e| e.into_inner()).iter().find(|(p, _)| env_id.starts_with(p)).copied();
    if let Some((prefix, factory)) = external {
        return factory(&env_id[prefix.len()..], render);
    }
    if needs_bridge(env_id) {
        return Err(EnvError::UnknownEnv(format!(
            "`{env_id}` needs the Python Gymnasium bridge, which this build lacks: build the CLI with `--features gym`"
        )));
    }
    Ok(match env_id {
        "CartPole-v1" => Box::new(TimeLimit::new(CartPole::new(), 500)),
        "Acrobot-v1" => Box::new(TimeLimit::new(Acrobot::new(), 500)),
        "MountainCar-v0" => Box::new(TimeLimit::new(MountainCar::new(), 200)),
        "MountainCarContinuous-v0" => Box::new(TimeLimit::new(MountainCarContinuous::new(), 999)),
        "Pendulum-v1" => Box::new(TimeLimit::new(Pendulum::new(), 200)),
        _ => {
            let hint = crate::did_you_mean::closest(env_id, &NATIVE_ENV_IDS)
                .map(|s| format!(" (did you mean `{s}`?)"))
                .unwrap_or_default();
            return Err(EnvError::UnknownEnv(format!(
                "unknown environment id `{env_id}`{hint}; native environments: {}",
                NATIVE_ENV_IDS.join(", ")
            )));
        }
    })
}
