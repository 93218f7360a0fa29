//! The explicit state of a training run and its one loop, [`Trainer::step`]:
//! collect → GAE → the algorithm's update.

use super::algorithm::{backend_for, off_policy_parts, ppo_params, steps_per_iteration, Algo, OnPolicy, UpdateInputs};
use crate::algo::a3c::{self, Worker};
use crate::algo::update::Replicas;
use crate::algo::UpdateStats;
use crate::collect::{Collector, StepObserver};
use crate::config::{AdvantageNorm, AlgoName, Config, IntoValidConfig, OptimizerName, ValidConfig, VectorEnv};
use crate::distributed::{Collective, EnvSplit, Ranks};
use crate::env::vec_env::{EpisodeRecord, SyncVectorEnv, VectorMode};
use crate::env::{make, Env, ObsKey, Space};
use crate::error::{ProximaError, Result};
use crate::normalize::Normalizer;
use crate::optim::{LrSchedule, Optimizer};
use crate::policy::recurrent::RecurrentSpec;
use crate::policy::{ActionKind, ImageShape, Network, Policy, PolicyKind, PolicySpec};
use crate::replay::ReplayBuffer;
use crate::rollout::RolloutBuffer;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::time::Instant;

/// What one iteration (rollout + update) reports.
#[derive(Clone, Debug)]
pub struct UpdateReport {
    /// Iterations completed (1-based).
    pub update: u64,
    /// Iterations the run will take.
    pub num_updates: u64,
    /// Environment steps so far, over all envs.
    pub global_step: u64,
    /// Seconds since the trainer started.
    pub time_elapsed: f64,
    /// Environment steps per second since the start.
    pub sps: f64,
    /// The update's diagnostics.
    pub stats: UpdateStats,
    /// Mean return of the last 100 finished episodes (None before the first one).
    pub ep_return_mean: Option<f64>,
    /// Mean length of the last 100 finished episodes.
    pub ep_len_mean: Option<f64>,
    /// Episodes finished during this iteration's rollout, with the global step they ended at.
    pub finished: Vec<(u64, EpisodeRecord)>,
    /// Seconds spent collecting rollouts (env steps + policy inference) since the start.
    pub collect_seconds: f64,
    /// Seconds spent in GAE and the K-epoch update since the start.
    pub update_seconds: f64,
}

/// An observer of training ([`Trainer::learn`]), as Stable-Baselines3's `BaseCallback`:
/// [`Callback::on_update`] runs after every iteration (rollout + update) — SB3's
/// `_on_rollout_end`/`_on_step` rolled into one, since Proxima's unit of progress is the
/// iteration — and returning `false` stops training. The run directory ([`super::RunDir`]),
/// the CLI's progress bar and the Python package's callbacks are observers.
pub trait Callback {
    /// Called once before the first iteration of [`Trainer::learn`].
    ///
    /// # Errors
    /// The observer's own (they stop training).
    fn on_training_start(&mut self, _trainer: &Trainer) -> Result<()> {
        Ok(())
    }

    /// Called after every iteration with its report; `Ok(false)` stops training after it.
    ///
    /// # Errors
    /// The observer's own (they stop training).
    fn on_update(&mut self, trainer: &Trainer, report: &UpdateReport) -> Result<bool>;
}

/// A closure is a callback: `|trainer, report| Ok(true)`.
impl<F: FnMut(&Trainer, &UpdateReport) -> Result<bool>> Callback for F {
    fn on_update(&mut self, trainer: &Trainer, report: &UpdateReport) -> Result<bool> {
        self(trainer, report)
    }
}

/// No observer.
pub struct NoCallback;

impl Callback for NoCallback {
    fn on_update(&mut self, _trainer: &Trainer, _report: &UpdateReport) -> Result<bool> {
        Ok(true)
    }
}

/// What one iteration of any family hands back: the episodes that ended in it, when its update
/// began (the rest of the iteration's time counts as update time), and the update's outcome
/// (its errors are named after the iteration, [`Trainer::name_the_update`]).
struct Iteration {
    finished: Vec<(u64, EpisodeRecord)>,
    update_start: Instant,
    stats: Result<UpdateStats>,
}

/// Takes up to `steps` gradient steps at learning rate `lr`, asking `stop` before each but the
/// first: the steps left when it said yes (0 when all were taken).
fn gradient_burst(
    learner: &mut crate::algo::learner::Learner,
    nets: &mut Network,
    (steps, lr): (usize, f64),
    rng: &mut ChaCha8Rng,
    sums: &mut Sums,
    stop: &dyn Fn() -> bool,
) -> Result<usize> {
    for done in 0..steps {
        if done > 0 && stop() {
            return Ok(steps - done);
        }
        sums.add(learner.gradient_step(nets, lr, rng)?);
    }
    Ok(0)
}

/// The sums of an off-policy iteration's gradient steps' losses.
#[derive(Default)]
struct Sums {
    actor: (f64, usize),
    critic: (f64, usize),
    entropy: (f64, usize),
}

impl Sums {
    fn add(&mut self, l: crate::algo::offpolicy::Losses) {
        let add = |s: &mut (f64, usize), v: Option<f64>| {
            if let Some(v) = v {
                *s = (s.0 + v, s.1 + 1);
            }
        };
        add(&mut self.actor, l.actor_loss);
        add(&mut self.critic, Some(l.critic_loss));
        add(&mut self.entropy, l.entropy);
    }

    /// The means as the iteration's diagnostics (NaN where nothing was measured).
    fn stats(&self, lr: f64, ent_coef: Option<f64>) -> UpdateStats {
        let mean = |(s, n): (f64, usize)| if n > 0 { s / n as f64 } else { f64::NAN };
        UpdateStats {
            policy_loss: mean(self.actor),
            value_loss: mean(self.critic),
            entropy: mean(self.entropy),
            explained_variance: f64::NAN,
            grad_norm: f64::NAN,
            learning_rate: lr,
            minibatches: self.critic.1,
            epochs: usize::from(self.critic.1 > 0),
            ent_coef,
            ..Default::default()
        }
    }
}

/// Wall-clock bookkeeping of a trainer (not part of any result).
#[derive(Clone, Debug)]
pub(crate) struct Clock {
    pub start: Instant,
    /// `global_step` when this process started (0, or the resumed checkpoint's step): SPS
    /// counts only the steps this process took.
    pub start_step: u64,
    /// Training time before this process (from the resumed checkpoint), seconds.
    pub elapsed_offset: f64,
    pub collect_seconds: f64,
    pub update_seconds: f64,
}

/// The explicit state of a run: the envs (through the [`Collector`]), π_θ and V_θ, the
/// optimiser, the algorithm's state, the sampling RNG and the counters.
pub struct Trainer {
    /// The resolved config.
    pub cfg: Config,
    /// The environment id.
    pub env_id: String,
    /// The N training envs, their normalisation statistics, current observations and episode
    /// statistics.
    pub collector: Collector,
    /// π_θ and V_θ, on the config's backend ([`Config::resolved_backend`]).
    pub policy: Network,
    /// The optimiser's state.
    pub opt: Optimizer,
    pub(crate) algo: Algo,
    pub(crate) rng: ChaCha8Rng,
    buf: RolloutBuffer,
    /// Environment steps so far.
    pub global_step: u64,
    /// Iterations completed.
    pub update: u64,
    /// Iterations in the run: ⌈total_timesteps / steps per iteration⌉.
    pub num_updates: u64,
    pub(crate) clock: Clock,
    last_stats: Option<UpdateStats>,
    /// A learning rate set from outside for the next iterations (a schedule, such as
    /// Stable-Baselines3's callable `learning_rate`); the config keeps its own.
    lr_override: Option<f64>,
    /// A distributed run's engine and this rank's place ([`Trainer::distributed`]).
    ranks: Option<Ranks>,
    /// Rank 0 of a distributed run: the other ranks' resumable states (JSON, ranks 1, 2, …) as
    /// of update `.0`, gathered after every update so that any checkpoint holds them
    /// (`snapshot.rs`).
    pub(crate) rank_states: Option<(u64, Vec<String>)>,
    /// Asked between an off-policy run's gradient steps ([`Trainer::set_interrupt`]).
    interrupt: Option<Interrupt>,
    /// What a caller records in every checkpoint's metadata beside the trainer's own entries,
    /// by key (each starting with [`NOTE_PREFIX`]; the Python package's Gymnasium observation
    /// space); a resumed run keeps them.
    pub notes: std::collections::BTreeMap<String, String>,
}

/// The prefix of a caller's checkpoint notes ([`Trainer::notes`]), so they never collide with
/// the trainer's own metadata keys.
pub const NOTE_PREFIX: &str = "note.";

/// A question a long burst of gradient steps asks between two of them: "stop now?".
#[derive(Clone)]
struct Interrupt(std::sync::Arc<dyn Fn() -> bool + Send + Sync>);

impl std::fmt::Debug for Interrupt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Interrupt")
    }
}

/// The width of a rollout's action masks: [`crate::env::Space::mask_dim`] when the envs have
/// `action_masks()`, `use_masking` is on and the algorithm is PPO (sb3-contrib's `MaskablePPO`);
/// 0 otherwise (another algorithm warns that it ignores the masks, as SB3's would).
///
/// # Errors
/// The envs' (a mask without a valid action).
fn action_mask_dim(cfg: &ValidConfig, collector: &mut Collector) -> Result<usize> {
    if !cfg.use_masking || !collector.has_action_masks()? {
        return Ok(0);
    }
    if cfg.algo != AlgoName::Ppo {
        tracing::warn!(
            "the envs have action_masks(), which {} ignores: only PPO trains masked (sb3-contrib's MaskablePPO)",
            cfg.algo
        );
        return Ok(0);
    }
    Ok(collector.venv.action_space().mask_dim())
}

/// Builds the network spec for an env's spaces from the config.
///
/// # Errors
/// `Unsupported` for action spaces without a distribution; `Config` for `CnnPolicy` on
/// observations that are not images.
pub fn policy_spec(cfg: &Config, venv: &SyncVectorEnv) -> Result<PolicySpec> {
    let cnn = if cfg.policy.is_cnn() { Some(image_shape(cfg.policy, venv)?) } else { None };
    let recurrent = cfg.policy.is_recurrent().then_some(RecurrentSpec {
        cell: cfg.recurrent_cell,
        hidden_size: cfg.lstm_hidden_size,
        n_layers: cfg.n_lstm_layers,
        shared_lstm: cfg.shared_lstm,
        enable_critic_lstm: cfg.enable_critic_lstm,
    });
    Ok(PolicySpec {
        inputs: multi_inputs(cfg, venv)?,
        cnn,
        obs_dim: venv.observation_space().flat_dim(),
        action: ActionKind::from_space(venv.action_space())?,
        net_arch: cfg.net_arch.clone(),
        activation: cfg.activation,
        shared_trunk: cfg.shared_trunk,
        log_std_init: cfg.log_std_init,
        ortho_init: cfg.ortho_init,
        aux_value_head: cfg.algo == AlgoName::Ppg,
        recurrent,
    })
}

/// The keys of a `Dict` observation with image keys, which the policy reads through a CNN per
/// image (SB3's `MultiInputPolicy`; [`crate::policy::inputs`]); none for other observations.
///
/// # Errors
/// `Config` for image keys with TRPO, PPG or a CNN policy.
fn multi_inputs(cfg: &Config, venv: &SyncVectorEnv) -> Result<Vec<crate::policy::inputs::InputKey>> {
    let inputs = crate::policy::inputs::inputs_of(&venv.observation_keys());
    let images: Vec<&str> = inputs.iter().filter(|k| k.image.is_some()).map(|k| k.name.as_str()).collect();
    let refused = matches!(cfg.algo, AlgoName::Trpo | AlgoName::Ppg);
    if !images.is_empty() && (refused || cfg.policy.is_cnn()) {
        let what =
            if cfg.policy.is_cnn() { format!("policy = `{:?}`", cfg.policy) } else { format!("algo = `{}`", cfg.algo) };
        return Err(ProximaError::Config(format!(
            "{}'s observation has image keys ({}), which a CNN per key reads with policy = `MlpPolicy` or `MlpLstmPolicy` (SB3's MultiInputPolicy) for every algorithm but TRPO and PPG; {what} does not take them yet",
            venv.env_id(),
            images.join(", ")
        )));
    }
    for key in inputs.iter().filter(|k| k.image.is_some()) {
        let [channels, height, width] = key.image.map(|i| i.chw).unwrap_or_default();
        ImageShape { channels, height, width }.nature_outputs().map_err(|e| {
            let why = match e {
                ProximaError::InvalidArgument(m) => m,
                other => other.to_string(),
            };
            ProximaError::Config(format!("{}: the observation key `{}` is an image: {why}", venv.env_id(), key.name))
        })?;
    }
    Ok(inputs)
}

/// The image a `CnnPolicy` (or `CnnLstmPolicy`) reads, as SB3's `is_image_space` decides it: a uint8 `Box` of shape
/// `[channels, height, width]` (channel-first, as Proxima's Atari envs stack frames), at least
/// 36 × 36 for the Nature CNN's convolutions.
///
/// # Errors
/// `Config` naming the env's observation space otherwise.
fn image_shape(policy: PolicyKind, venv: &SyncVectorEnv) -> Result<ImageShape> {
    let space = venv.observation_space();
    let image = match space {
        Space::Box { shape, .. } if space.is_uint8() && shape.len() == 3 => {
            ImageShape { channels: shape[0], height: shape[1], width: shape[2] }
        }
        _ => {
            let dtype = match space {
                Space::Box { .. } if !space.is_uint8() => " (its values not uint8)",
                _ => "",
            };
            return Err(ProximaError::Config(format!(
                "policy = `{policy:?}` needs image observations, a uint8 Box of shape [channels, height, width] (e.g. `atari:Breakout`); {} observes {}{dtype}: use policy = `{}`",
                venv.env_id(),
                space.describe(),
                if policy.is_recurrent() { "MlpLstmPolicy" } else { "MlpPolicy" }
            )));
        }
    };
    if image.channels > image.width && image.width <= 4 {
        let id = venv.env_id();
        if let Some(game) = id.strip_prefix("gym:").filter(|g| crate::env::atari::is_ale_game_id(g)) {
            return Err(ProximaError::Config(format!(
                "policy = `{policy:?}` on {id}: its raw {} frames are not what the CNN reads; for an Atari game use `atari:{game}` (SB3's AtariWrapper and a stack of 4 frames, channel-first)",
                space.describe()
            )));
        }
        return Err(ProximaError::Config(format!(
            "policy = `{policy:?}` reads channel-first images [channels, height, width]; {} observes {}, which looks channel-last [height, width, channels]: transpose it (a Gymnasium TransformObservation wrapper, as SB3's VecTransposeImage does) or train from the Python package, which transposes channel-last images",
            venv.env_id(),
            space.describe()
        )));
    }
    image.nature_outputs().map_err(|e| {
        let why = match e {
            ProximaError::InvalidArgument(m) => m,
            other => other.to_string(),
        };
        ProximaError::Config(format!("policy = `{policy:?}` on {}: {why}", venv.env_id()))
    })?;
    Ok(image)
}

/// The config's normalisation settings for the envs of `venv`.
///
/// # Errors
/// `Config` for `norm_obs_keys` on envs without a `Dict`/`Tuple` observation, or naming a key
/// the observation does not have, or an image key (image keys are never normalised: their CNN
/// scales the pixels).
fn normalizer(cfg: &Config, venv: &SyncVectorEnv) -> Result<Normalizer> {
    let mut norm = Normalizer::new(
        cfg.normalize_observation,
        cfg.normalize_reward,
        venv.observation_space().flat_dim(),
        cfg.n_envs,
        cfg.gamma,
        cfg.clip_obs,
        cfg.clip_reward,
    );
    if !cfg.normalize_observation {
        return Ok(norm);
    }
    let keys = venv.observation_keys();
    if !cfg.norm_obs_keys.is_empty() {
        norm.obs_raw = raw_columns(&cfg.norm_obs_keys, &keys, venv)?;
    }
    // Image keys stay pixels: their CNN scales them by 1/255 (as SB3's preprocessing does).
    if let Some(image) = keys.iter().find(|k| k.image.is_some() && cfg.norm_obs_keys.contains(&k.name)) {
        return Err(ProximaError::Config(format!(
            "norm_obs_keys: `{}` of {} is an image key, which its CNN reads as pixels (scaled by 1/255); name only its other keys",
            image.name,
            venv.env_id()
        )));
    }
    if keys.iter().any(|k| k.image.is_some()) {
        norm.obs_raw.resize(venv.observation_space().flat_dim(), false);
        let mut at = 0;
        for k in &keys {
            if k.image.is_some() {
                norm.obs_raw[at..at + k.len].fill(true);
            }
            at += k.len;
        }
    }
    Ok(norm)
}

/// The flat observation's values outside the keys `norm_obs_keys` names (`[obs_dim]`, true =
/// left as they are), from the env's top-level `keys` (name, flat length).
///
/// # Errors
/// `Config` when the env has no keys (a flat observation) or lacks one of `wanted`.
fn raw_columns(wanted: &[String], keys: &[ObsKey], venv: &SyncVectorEnv) -> Result<Vec<bool>> {
    if keys.is_empty() {
        return Err(ProximaError::Config(format!(
            "norm_obs_keys selects keys of a Dict or Tuple observation; {} observes {}: leave norm_obs_keys out",
            venv.env_id(),
            venv.observation_space().describe()
        )));
    }
    let names: Vec<&str> = keys.iter().map(|k| k.name.as_str()).collect();
    if let Some(bad) = wanted.iter().find(|w| !names.contains(&w.as_str())) {
        let hint =
            crate::did_you_mean::closest(bad, &names).map(|s| format!(" (did you mean `{s}`?)")).unwrap_or_default();
        return Err(ProximaError::Config(format!(
            "norm_obs_keys: {} has no observation key `{bad}`{hint}; its keys: {}",
            venv.env_id(),
            names.join(", ")
        )));
    }
    Ok(keys.iter().flat_map(|k| std::iter::repeat_n(!wanted.contains(&k.name), k.len)).collect())
}

/// The sampling and shuffling stream of a run seeded with `seed`: separate from the
/// initialisation's, so changing the init scheme does not change which actions are sampled.
fn sampling_rng(seed: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(sampling_seed(seed))
}

/// The key of the run's sampling streams (the trainer's one, or a distributed run's per-env
/// ones).
fn sampling_seed(seed: u64) -> u64 {
    seed ^ 0x5eed_0f_ac7_10u64
}

type MakeEnv<'a> = &'a mut dyn FnMut() -> crate::env::Result<Box<dyn Env>>;

/// Memory one `atari:` game takes: ale-py's emulator and Gymnasium's env (1.14 MB each, measured
/// over 100 games of ALE/Breakout-v5 with ale-py 0.12.1) and Proxima's wrappers' frames beside it.
const ATARI_GAME_BYTES: u64 = 3 << 19;

/// Refuses more `atari:` games than the machine can hold, before any is made: each takes about
/// a third of a second to make, so 65536 of them would fill the memory over hours in silence.
///
/// # Errors
/// `Config`, naming `n_envs`.
fn check_games_memory(env_id: &str, cfg: &Config) -> Result<()> {
    if !env_id.starts_with(crate::env::atari::ATARI_PREFIX) {
        return Ok(());
    }
    // A3C's workers each make their own, beside the trainer's.
    let games = cfg.n_envs as u64 * if cfg.algo == AlgoName::A3c { 1 + cfg.n_workers as u64 } else { 1 };
    let (need, limit) = (games.saturating_mul(ATARI_GAME_BYTES), crate::replay::memory_limit());
    if need > limit {
        return Err(ProximaError::Config(format!(
            "n_envs = {}: {games} Atari games need ≈ {} (≈ {} each), more than the {} this machine can give them; lower n_envs",
            cfg.n_envs,
            crate::replay::human_bytes(need),
            crate::replay::human_bytes(ATARI_GAME_BYTES),
            crate::replay::human_bytes(limit)
        )));
    }
    Ok(())
}

/// Whether the rollout stores the observations as bytes: frames (a uint8 space) unless
/// normalised into floats.
fn stores_bytes(cfg: &Config, collector: &Collector) -> bool {
    collector.venv.observation_space().is_uint8() && !cfg.normalize_observation
}

/// Refuses a rollout of `n_steps × n_envs` transitions the machine cannot hold (an image's
/// transitions are large: the transition count's own bound lets 442 GB of Atari frames through),
/// as `buffer_size` is refused: the message says how much it needs. Checked before any is
/// allocated.
///
/// # Errors
/// `Config`, naming `n_steps` and `n_envs`.
fn check_rollout_memory(cfg: &Config, spec: &PolicySpec, uint8: bool) -> Result<()> {
    let (obs_dim, act_dim) = (spec.obs_dim, spec.action.act_dim());
    // π_θold's parameters at most (a Gaussian's means and log-stds); A3C's workers hold one each.
    let head_dim = 2 * spec.action.head_dim();
    let rollouts = if cfg.algo == AlgoName::A3c { 1 + cfg.n_workers as u128 } else { 1 };
    let transitions = rollouts * cfg.n_steps as u128 * cfg.n_envs as u128;
    let need = transitions * RolloutBuffer::bytes_per_transition(obs_dim, act_dim, head_dim, uint8);
    let limit = crate::replay::memory_limit();
    if need > limit as u128 {
        return Err(ProximaError::Config(format!(
            "n_steps × n_envs = {} × {}: a rollout of {} transitions of {obs_dim} observation values each needs {}, more than the {} this machine can give it; lower n_steps or n_envs",
            cfg.n_steps,
            cfg.n_envs,
            cfg.n_steps * cfg.n_envs,
            crate::replay::human_bytes(need.min(u64::MAX as u128) as u64),
            crate::replay::human_bytes(limit)
        )));
    }
    Ok(())
}

/// A3C's workers: each with its own envs (seeded apart), rollout, sampling stream and local
/// network (whose initial values are overwritten from the global network before first use).
fn a3c_workers(cfg: &Config, spec: &PolicySpec, make_env: MakeEnv<'_>) -> Result<Vec<Worker>> {
    (0..cfg.n_workers)
        .map(|w| {
            let seed = cfg.seed.wrapping_add(1 + w as u64 * 1_000_003) % (1 << 62);
            let collector = Collector::new(cfg.n_envs, seed, make_env, |v| normalizer(cfg, v))?;
            let policy = Network::new(spec.clone(), backend_for(cfg, spec), &mut ChaCha8Rng::seed_from_u64(seed))?;
            let buf = RolloutBuffer::new(cfg.n_steps, cfg.n_envs, spec.obs_dim, spec.action.act_dim(), 0);
            Ok(Worker { collector, policy: Box::new(policy), buf, rng: sampling_rng(seed), steps: 0, updates: 0 })
        })
        .collect()
}

impl Trainer {
    /// A fresh run: N envs reset with seeds `seed..seed+N`, the network initialised from `seed`.
    /// With `vector_env = "sync" | "async" | "subproc"` the N envs of an id with a registered vector factory
    /// (the bridge's `gym:`) are one [`crate::env::vec_env::BatchEnv`] (A3C refuses them: its
    /// workers make their own envs).
    ///
    /// # Errors
    /// An invalid config, an unknown env id, an unsupported action space; `vector_env = "sync"`
    /// `"async"` or `"subproc"` for an env without a vector factory (native envs).
    pub fn new(env_id: &str, cfg: impl IntoValidConfig) -> Result<Self> {
        let cfg = cfg.into_valid_config(1)?;
        let mode = match cfg.vector_env {
            VectorEnv::Off => None,
            VectorEnv::Sync => Some(VectorMode::Sync),
            VectorEnv::Async => Some(VectorMode::Async),
            VectorEnv::Subproc => Some(VectorMode::Subproc),
        };
        check_games_memory(env_id, &cfg)?;
        let batch = mode.and_then(|m| crate::env::make_vector(env_id, cfg.n_envs, m));
        match batch {
            Some(batch) => Self::with_batch_env(env_id, cfg, batch?),
            None if cfg.vector_env != VectorEnv::Off => Err(ProximaError::Config(format!(
                "vector_env = `{}` steps bridged `gym:` envs together (sync/async: as one Gymnasium vector env; subproc: in worker processes); `{env_id}` is not a `gym:` id (native envs step in-process: use vector_env = `off`)",
                cfg.vector_env.as_str()
            ))),
            None => Self::with_env_fn(env_id, cfg, || make(env_id)),
        }
    }

    /// One rank of a distributed run ([`crate::distributed`]; `mpirun -np N proxima train …`): this
    /// rank's `n_envs` envs are global envs `rank·n_envs ..`, seeded `seed + rank·n_envs + i`,
    /// each sampling from its own stream; the network starts from `seed` on every rank, and
    /// every update sums the gradient across ranks, so all ranks keep the same parameters; the
    /// observation/return statistics take in every rank's rows. Only PPO, with Â normalised per
    /// minibatch or not at all, for now.
    ///
    /// # Errors
    /// As [`Trainer::new`]; `Config` for what a distributed run does not cover (named).
    pub fn distributed(env_id: &str, cfg: impl IntoValidConfig, comm: std::sync::Arc<dyn Collective>) -> Result<Self> {
        let cfg = cfg.into_valid_config(comm.size())?;
        let refuse =
            |what: &str| Err(ProximaError::Config(format!("{what} is not supported in a distributed (MPI) run yet")));
        if cfg.algo != AlgoName::Ppo {
            return refuse(&format!("algo = `{}` (only ppo)", cfg.algo));
        }
        if ppo_params(&cfg).normalize_advantage == AdvantageNorm::Batch {
            return refuse("normalize_advantage = `batch`");
        }
        let split = EnvSplit { rank: comm.rank(), size: comm.size(), n_envs: cfg.n_envs };
        let first = split.global_env(0);
        if cfg.vector_env != VectorEnv::Off {
            return refuse("vector_env other than `off`");
        }
        let mut make_env = || make(env_id);
        let seed = cfg.seed.wrapping_add(first as u64);
        let collector = Collector::new(cfg.n_envs, seed, &mut make_env, |v| normalizer(&cfg, v))?;
        let mut trainer = Self::with_collector(env_id, cfg.clone(), collector, &mut make_env)?;
        trainer.collector.sample_per_env(sampling_seed(cfg.seed), first);
        let norm = normalizer(&trainer.cfg, &trainer.collector.venv)?;
        trainer.collector.normalize_across(norm, comm.clone(), split)?;
        trainer.ranks = Some(Ranks { comm, split });
        // Steps count every rank's: the run's total is the global one.
        trainer.num_updates = trainer.cfg.total_timesteps.div_ceil(trainer.steps_per_iteration());
        Ok(trainer)
    }

    /// The distributed run this trainer is a rank of, if any.
    pub fn ranks(&self) -> Option<&Ranks> {
        self.ranks.as_ref()
    }

    /// A fresh run on envs built by `make_env` (called `n_envs` times, and `n_envs` more for
    /// each A3C worker): the way to train on an environment of your own that implements
    /// [`crate::env::Env`]. `env_id` names it in logs, errors and checkpoints. (Evaluation and
    /// resume through the CLI need a registered id.)
    ///
    /// # Errors
    /// As [`Trainer::new`], plus whatever `make_env` returns.
    pub fn with_env_fn(
        env_id: &str,
        cfg: impl IntoValidConfig,
        mut make_env: impl FnMut() -> crate::env::Result<Box<dyn Env>>,
    ) -> Result<Self> {
        let cfg = cfg.into_valid_config(1)?;
        let collector = Collector::new(cfg.n_envs, cfg.seed, &mut make_env, |v| normalizer(&cfg, v))?;
        Self::with_collector(env_id, cfg, collector, &mut make_env)
    }

    /// A fresh run on one batch env of `cfg.n_envs` envs (e.g. a Gymnasium vector env object).
    ///
    /// # Errors
    /// As [`Trainer::new`]; `Config` when the batch has another number of envs than the config,
    /// or for A3C (its workers make their own envs).
    pub fn with_batch_env(
        env_id: &str,
        cfg: impl IntoValidConfig,
        batch: Box<dyn crate::env::vec_env::BatchEnv>,
    ) -> Result<Self> {
        let cfg = cfg.into_valid_config(1)?;
        if batch.num_envs() != cfg.n_envs || cfg.algo == AlgoName::A3c {
            return Err(ProximaError::Config(format!(
                "a vector env of {} envs for a {} run of n_envs = {} (A3C takes single envs)",
                batch.num_envs(),
                cfg.algo,
                cfg.n_envs
            )));
        }
        let collector = Collector::from_venv(SyncVectorEnv::from_batch(batch)?, cfg.seed, |v| normalizer(&cfg, v))?;
        Self::with_collector(env_id, cfg, collector, &mut || make(env_id))
    }

    /// A fresh run on `collector`'s envs (the config validated); `make_env` builds A3C's
    /// workers' envs.
    fn with_collector(env_id: &str, cfg: ValidConfig, mut collector: Collector, make_env: MakeEnv<'_>) -> Result<Self> {
        let mask_dim = action_mask_dim(&cfg, &mut collector)?;
        let spec = policy_spec(&cfg, &collector.venv)?;
        if let Some((mut policy, algo)) = off_policy_parts(&cfg, &spec)? {
            policy.set_threads(cfg.num_threads);
            return Ok(Self::assemble(env_id, cfg, collector, policy, Optimizer::adam(&[], 0.0, 1e-8), algo, 0));
        }
        let backend = backend_for(&cfg, &spec);
        let mut policy = Network::new(spec.clone(), backend, &mut ChaCha8Rng::seed_from_u64(cfg.seed))?;
        policy.set_threads(cfg.num_threads);
        tracing::info!("policy backend: {} (backend = {:?})", backend.as_str(), cfg.backend.as_str());
        let sizes: Vec<usize> = spec.param_shapes().iter().map(|(_, s)| s.iter().product()).collect();
        let opt = match cfg.optimizer {
            OptimizerName::Adam => Optimizer::adam(&sizes, cfg.learning_rate, cfg.adam_eps),
            OptimizerName::Rmsprop => {
                Optimizer::rmsprop(&sizes, cfg.learning_rate, cfg.rms_prop_alpha, cfg.rms_prop_eps)
            }
        };
        check_rollout_memory(&cfg, &spec, stores_bytes(&cfg, &collector))?;
        let algo = Algo::new(&cfg, &spec, &sizes, || a3c_workers(&cfg, &spec, make_env))?;
        let head_dim = algo.old_head_dim(&spec);
        let mut trainer = Self::assemble(env_id, cfg, collector, policy, opt, algo, head_dim);
        trainer.buf.mask_actions(mask_dim);
        let state_dim = trainer.policy.recurrent_state_dim();
        if state_dim > 0 {
            trainer.collector.hold_hidden_state(state_dim);
            trainer.buf.hold_sequences(state_dim);
        }
        Ok(trainer)
    }

    /// The trainer of a fresh run from its parts.
    fn assemble(
        env_id: &str,
        cfg: ValidConfig,
        collector: Collector,
        policy: Network,
        opt: Optimizer,
        algo: Algo,
        head_dim: usize,
    ) -> Self {
        let (obs_dim, act_dim) = (policy.spec().obs_dim, policy.spec().action.act_dim());
        // Off-policy runs step their envs themselves: their rollout buffer stays empty.
        let n_steps = if matches!(algo, Algo::OffPolicy(_)) { 0 } else { cfg.n_steps };
        let buf = match stores_bytes(&cfg, &collector) {
            true => RolloutBuffer::new_uint8(n_steps, cfg.n_envs, obs_dim, act_dim, head_dim),
            false => RolloutBuffer::new(n_steps, cfg.n_envs, obs_dim, act_dim, head_dim),
        };
        Trainer {
            num_updates: cfg.total_timesteps.div_ceil(steps_per_iteration(&cfg, &algo)),
            rng: sampling_rng(cfg.seed),
            buf,
            env_id: env_id.to_string(),
            cfg: cfg.into_config(),
            collector,
            policy,
            opt,
            algo,
            global_step: 0,
            update: 0,
            clock: Clock {
                start: Instant::now(),
                start_step: 0,
                elapsed_offset: 0.0,
                collect_seconds: 0.0,
                update_seconds: 0.0,
            },
            last_stats: None,
            lr_override: None,
            ranks: None,
            rank_states: None,
            interrupt: None,
            notes: Default::default(),
        }
    }

    /// Trains until the run has taken `total_timesteps` env steps (the run's total, as
    /// `--total-timesteps`: it replaces the config's, and the annealed learning rate follows
    /// it), calling `callback` after every iteration; stops early when the callback returns
    /// `false`. Writes no file (attach [`super::RunDir`] for a run directory).
    ///
    /// # Errors
    /// An invalid `total_timesteps` (`Config`); everything [`Trainer::step`] and the callback
    /// return.
    pub fn learn(&mut self, total_timesteps: u64, callback: &mut dyn Callback) -> Result<()> {
        self.set_total_timesteps(total_timesteps)?;
        callback.on_training_start(self)?;
        while !self.is_done() {
            let report = self.step()?;
            if !callback.on_update(self, &report)? {
                break;
            }
        }
        Ok(())
    }

    /// Makes the run `total_timesteps` env steps long (the annealed learning rate follows it).
    ///
    /// # Errors
    /// `Config` for 0.
    pub fn set_total_timesteps(&mut self, total_timesteps: u64) -> Result<()> {
        if total_timesteps != self.cfg.total_timesteps {
            let mut cfg = self.cfg.clone();
            cfg.total_timesteps = total_timesteps;
            let cfg = cfg.validate_over(self.rank_count())?.into_config();
            self.num_updates = total_timesteps.div_ceil(steps_per_iteration(&cfg, &self.algo));
            self.cfg = cfg;
            self.recount_updates();
        }
        Ok(())
    }

    /// An off-policy run's iterations: those done and those its remaining steps need (its last
    /// iteration may be shorter, [`Trainer::off_policy_iteration`], so a run resumed from one
    /// does not fall on the multiples of `n_steps`). Nothing for the on-policy runs, whose
    /// iterations are all whole.
    pub(crate) fn recount_updates(&mut self) {
        if let Algo::OffPolicy(l) = &self.algo {
            let left = self.cfg.total_timesteps.saturating_sub(self.global_step);
            // Gradient steps a stop cut from the last burst of the last env steps: one more
            // iteration takes them.
            let owed = u64::from(left == 0 && l.state().pending_gradient_steps > 0);
            self.num_updates = self.update + left.div_ceil(self.steps_per_iteration()) + owed;
        }
    }

    /// Env steps of one iteration (N·T; A3C: all its workers' rollouts; a distributed run:
    /// every rank's).
    pub fn steps_per_iteration(&self) -> u64 {
        steps_per_iteration(&self.cfg, &self.algo) * self.rank_count() as u64
    }

    /// The processes of this run (1 unless distributed).
    fn rank_count(&self) -> usize {
        self.ranks.as_ref().map_or(1, |d| d.split.size)
    }

    /// Sets the learning rate of the next iterations, in place of the config's (and its
    /// annealing): a schedule such as Stable-Baselines3's callable `learning_rate`. The config,
    /// and so a saved checkpoint, keeps its own value.
    ///
    /// # Errors
    /// `Config` for a rate that is negative or not finite (0 is allowed: a linear schedule ends
    /// there, as in SB3).
    pub fn set_learning_rate(&mut self, learning_rate: f64) -> Result<()> {
        if !(learning_rate.is_finite() && learning_rate >= 0.0) {
            return Err(ProximaError::Config(format!("learning_rate must be ≥ 0 and finite, got {learning_rate}")));
        }
        self.lr_override = Some(learning_rate);
        Ok(())
    }

    /// Sets PPO's ε (`clip_range`) for the next iterations: a schedule such as
    /// Stable-Baselines3's callable `clip_range`. The config keeps its own value.
    ///
    /// # Errors
    /// `Config` for an ε that is negative or not finite (0 is allowed: a linear schedule ends
    /// there, as in SB3), or an algorithm other than PPO.
    pub fn set_clip_range(&mut self, clip_range: f64) -> Result<()> {
        if !(clip_range.is_finite() && clip_range >= 0.0) {
            return Err(ProximaError::Config(format!("clip_range must be ≥ 0 and finite, got {clip_range}")));
        }
        match &mut self.algo {
            Algo::OnPolicy(OnPolicy::Ppo { params, .. }) => {
                params.clip_range = clip_range;
                Ok(())
            }
            Algo::OnPolicy(OnPolicy::Ppg(ppg)) => {
                ppg.params.ppo.clip_range = clip_range;
                Ok(())
            }
            _ => Err(ProximaError::Config(format!("clip_range is PPO's; this run is {}", self.cfg.algo))),
        }
    }

    /// Whether all iterations are done.
    pub fn is_done(&self) -> bool {
        self.update >= self.num_updates
    }

    /// The learning rate for the next iteration: linearly annealed from `learning_rate` to 0
    /// over the run when `anneal_lr` (CleanRL: frac = 1 − (iteration − 1)/num_iterations).
    pub fn current_learning_rate(&self) -> f64 {
        if let Some(lr) = self.lr_override {
            return lr;
        }
        let lr = self.cfg.learning_rate;
        let schedule = if self.cfg.anneal_lr {
            LrSchedule::Linear { initial: lr, total: self.num_updates }
        } else {
            LrSchedule::Constant(lr)
        };
        schedule.at(self.update)
    }

    /// α of the paper's ε·α for the next iteration: 1 − (iteration − 1)/num_iterations with
    /// `anneal_clip_range`, else 1.
    fn clip_range_factor(&self) -> f64 {
        match self.cfg.anneal_clip_range {
            true => LrSchedule::Linear { initial: 1.0, total: self.num_updates }.at(self.update),
            false => 1.0,
        }
    }

    /// β of the KL-penalty objectives (PPO's state: adapted after each update for
    /// `adaptive_kl`); the config's `kl_coef` for the other algorithms.
    pub fn kl_coef(&self) -> f64 {
        match &self.algo {
            Algo::OnPolicy(OnPolicy::Ppo { kl_coef, .. }) => *kl_coef,
            _ => self.cfg.kl_coef,
        }
    }

    /// `stop` is asked between an off-policy run's gradient steps (a Ctrl-C lands there, not
    /// after a burst of `gradient_steps` that may be long): when it says yes, the iteration ends
    /// at once, the steps its burst still owed are kept in the trainer's state and taken first
    /// when the run goes on (from a checkpoint too), so the run trains as the uninterrupted one
    /// (at a constant learning rate, SAC's, TD3's and DDPG's default; progress.csv then has one
    /// row more). The on-policy algorithms never ask it.
    pub fn set_interrupt(&mut self, stop: impl Fn() -> bool + Send + Sync + 'static) {
        self.interrupt = Some(Interrupt(std::sync::Arc::new(stop)));
    }

    /// One iteration: collect → GAE → the algorithm's update (for PPO, K epochs of minibatch
    /// updates). A3C's workers do all three themselves, asynchronously.
    ///
    /// # Errors
    /// Env errors (NaN observations, …) and `NonFinite` from the update, both naming the
    /// iteration; the parameters keep their last good values.
    pub fn step(&mut self) -> Result<UpdateReport> {
        Ok(self.step_observed(None)?.expect("without an observer every rollout is complete"))
    }

    /// [`Trainer::step`] with `observer` told of every env step and of the rollout's end
    /// ([`StepObserver`]); `Ok(None)` when it stopped the rollout (the steps taken count, no
    /// update is made). For SAC, TD3 and DDPG the "rollout" is the iteration's `n_steps` env
    /// steps, between which they train: a stop leaves that step's transition out of the replay
    /// buffer and takes no more gradient steps (as SB3's `collect_rollouts` returning early).
    ///
    /// # Errors
    /// As [`Trainer::step`], the observer's, and `Unsupported` for an observer on A3C (its
    /// workers collect on their own threads).
    pub fn step_observed<'o>(
        &mut self,
        observer: Option<&mut (dyn StepObserver + 'o)>,
    ) -> Result<Option<UpdateReport>> {
        let lr = self.current_learning_rate();
        let iteration = match self.algo {
            Algo::OnPolicy(_) => self.on_policy_iteration(lr, observer)?,
            Algo::OffPolicy(_) => self.off_policy_iteration(lr, observer)?,
            Algo::A3c { .. } => self.a3c_iteration(lr, observer)?,
        };
        let Some(Iteration { finished, update_start, stats }) = iteration else { return Ok(None) };
        let stats = stats.map_err(|e| self.name_the_update(e))?;
        self.last_stats = Some(stats);
        self.update += 1;
        // (An off-policy iteration cut short by a stop request leaves steps to a further one.)
        self.recount_updates();
        if self.ranks.is_some() {
            self.gather_rank_states()?;
        }
        self.clock.update_seconds += update_start.elapsed().as_secs_f64();
        Ok(Some(self.report(stats, finished)))
    }

    /// PPO, A2C, TRPO, REINFORCE, PPG: collect → GAE → the algorithm's update.
    fn on_policy_iteration<'o>(
        &mut self,
        lr: f64,
        mut observer: Option<&mut (dyn StepObserver + 'o)>,
    ) -> Result<Option<Iteration>> {
        let t0 = Instant::now();
        // collect: run π_θold in the N envs for T steps.
        let finished = self.collect_rollout(observer.as_deref_mut())?;
        let update_start = Instant::now();
        self.clock.collect_seconds += (update_start - t0).as_secs_f64();
        let Some(finished) = finished else { return Ok(None) };
        if let Some(o) = observer {
            o.on_rollout_end(&self.policy, &self.collector.norm)?;
        }
        let (last, clip_range_factor) = (self.update + 1 >= self.num_updates, self.clip_range_factor());
        let Trainer { algo: Algo::OnPolicy(algo), policy, opt, buf, rng, ranks, collector, cfg, .. } = self else {
            return Err(ProximaError::InvalidArgument("not an on-policy run".into()));
        };
        // Â_1 … Â_T by GAE(γ, λ).
        if algo.needs_gae() {
            let last_values = collector.last_values(policy)?;
            buf.compute_advantages(&last_values, cfg.gamma, cfg.gae_lambda)?;
        }
        let replicas = Replicas::of(ranks.as_ref());
        let inputs = UpdateInputs { policy, opt, buf, rng, lr, last, clip_range_factor, replicas };
        Ok(Some(Iteration { finished, update_start, stats: algo.update(inputs) }))
    }

    /// One rollout of T steps in the N envs into the buffer, with the episodes that ended (in a
    /// distributed run every rank's, in the order one process would have seen them); `None`
    /// when the observer stopped it (the steps taken count).
    fn collect_rollout<'o>(
        &mut self,
        observer: Option<&mut (dyn StepObserver + 'o)>,
    ) -> Result<Option<Vec<(u64, EpisodeRecord)>>> {
        let (policy, buf, rng) = (&self.policy, &mut self.buf, &mut self.rng);
        let before = self.ranks.as_ref().map(|_| self.collector.stats.clone());
        let (mut finished, stopped_at) =
            self.collector.collect_observed(policy, buf, rng, self.global_step, observer)?;
        if let (Some(r), Some(before)) = (&self.ranks, before) {
            finished = crate::distributed::gather_episodes(r, &finished, self.global_step)?;
            self.collector.stats = before;
            finished.iter().for_each(|&(_, ep)| self.collector.stats.push(ep));
        }
        self.global_step += (stopped_at.unwrap_or(self.buf.n_steps) * self.buf.n_envs * self.rank_count()) as u64;
        Ok(stopped_at.is_none().then_some(finished))
    }

    /// A3C's iteration: every worker collects and updates the global network
    /// [`a3c::UPDATES_PER_ITERATION`] times; their episodes join the run's statistics.
    fn a3c_iteration<'o>(
        &mut self,
        lr: f64,
        observer: Option<&mut (dyn StepObserver + 'o)>,
    ) -> Result<Option<Iteration>> {
        if observer.is_some() {
            return Err(ProximaError::Unsupported(
                "a step observer on A3C (its workers step their envs on their own threads)".into(),
            ));
        }
        let update_start = Instant::now();
        let Algo::A3c { params, workers, global_updates } = &mut self.algo else {
            return Err(ProximaError::InvalidArgument("not an A3C run".into()));
        };
        let gae = (self.cfg.gamma, self.cfg.gae_lambda);
        let out =
            a3c::run_iteration(&mut self.policy, &mut self.opt, workers, params, gae, lr, a3c::UPDATES_PER_ITERATION);
        let (finished, stats) = match out {
            Ok(it) => {
                *global_updates += it.updates;
                self.global_step += it.steps;
                it.finished.iter().for_each(|&(_, ep)| self.collector.stats.push(ep));
                (it.finished, Ok(it.stats))
            }
            Err(e) => (Vec::new(), Err(e)),
        };
        Ok(Some(Iteration { finished, update_start, stats }))
    }

    /// The off-policy iteration (SB3's `collect_rollouts` + `train`, `n_steps` times): each env
    /// step acts (uniformly at random in the Box before `learning_starts` steps, then as the
    /// algorithm explores: SAC samples π, TD3 adds Gaussian noise to μ), stores (s, a, r, s',
    /// terminated, truncated) with s' the episode's real last observation where it ended, and
    /// every `train_freq` steps, once more than `learning_starts` steps are taken, takes
    /// `gradient_steps` gradient steps. The losses reported are their means; it times its env
    /// steps and gradient steps itself. `observer` is told of every env step (`Ok(None)`: it
    /// stopped the iteration) and, when the iteration succeeded, of its end.
    fn off_policy_iteration<'o>(
        &mut self,
        lr: f64,
        mut observer: Option<&mut (dyn StepObserver + 'o)>,
    ) -> Result<Option<Iteration>> {
        let mut finished = Vec::new();
        let Some(stats) = self.off_policy_steps(lr, &mut finished, observer.as_deref_mut()).transpose() else {
            return Ok(None);
        };
        if let (Some(o), true) = (observer, stats.is_ok() && self.policy.is_off_policy()) {
            o.on_rollout_end(&self.policy, &self.collector.norm)?;
        }
        Ok(Some(Iteration { finished, update_start: Instant::now(), stats }))
    }

    fn off_policy_steps<'o>(
        &mut self,
        lr: f64,
        finished: &mut Vec<(u64, EpisodeRecord)>,
        mut observer: Option<&mut (dyn StepObserver + 'o)>,
    ) -> Result<Option<UpdateStats>> {
        let interrupt = self.interrupt.clone();
        let stop = || interrupt.as_ref().is_some_and(|i| (i.0)());
        let (Algo::OffPolicy(learner), nets) = (&mut self.algo, &mut self.policy) else {
            return Err(ProximaError::InvalidArgument("not an off-policy run".into()));
        };
        if !nets.is_off_policy() {
            return Err(ProximaError::InvalidArgument("not an off-policy run".into()));
        }
        let (n, ad) = (self.cfg.n_envs, nets.spec().action.act_dim());
        let p = learner.loop_params();
        let mut sums = Sums::default();
        let (t0, mut gradient_seconds) = (Instant::now(), 0.0);
        // The steps a stop request cut from the last burst come first.
        let owed = learner.state().pending_gradient_steps;
        if owed > 0 {
            let tg = Instant::now();
            let left = gradient_burst(learner, nets, (owed, lr), &mut self.rng, &mut sums, &stop)?;
            learner.state_mut().pending_gradient_steps = left;
            gradient_seconds += tg.elapsed().as_secs_f64();
            if left > 0 || self.global_step >= self.cfg.total_timesteps {
                // Stopped again, or the owed steps were the run's last work.
                self.clock.collect_seconds += t0.elapsed().as_secs_f64() - gradient_seconds;
                self.clock.update_seconds += gradient_seconds;
                return Ok(Some(sums.stats(lr, learner.ent_coef())));
            }
        }
        // The last iteration takes only the steps left to `total_timesteps` (rounded up to whole
        // steps of the N envs), so a run takes the budget asked for, as SB3's.
        let left = self.cfg.total_timesteps.saturating_sub(self.global_step).div_ceil(n as u64).max(1);
        for _ in 0..(self.cfg.n_steps as u64).min(left) {
            let obs = self.collector.obs.clone();
            let actions: Vec<f32> = if self.global_step < p.learning_starts {
                (0..n * ad).map(|_| rand::Rng::random_range(&mut self.rng, -1.0f32..1.0)).collect()
            } else {
                learner.explore(&*nets, &obs, &mut self.rng)?
            };
            let mut env_actions = actions.clone();
            env_actions.chunks_mut(ad).for_each(|a| nets.env_action(a));
            let watch = observer.as_deref_mut().map(|o| (&*nets as &dyn Policy, o));
            let keep = self.collector.step_with(&env_actions, self.global_step + n as u64, finished, watch)?;
            if !keep {
                self.global_step += n as u64; // taken, as SB3 counts it, but neither stored nor trained on
                self.clock.collect_seconds += t0.elapsed().as_secs_f64() - gradient_seconds;
                self.clock.update_seconds += gradient_seconds;
                return Ok(None);
            }
            let v = &self.collector.venv;
            let next_obs = transition_ends(v, &self.collector.obs);
            let st = learner.state_mut();
            st.replay.add(&obs, &next_obs, &actions, &v.rewards, &v.terminated, &v.truncated)?;
            self.global_step += n as u64;
            st.steps_since_train += 1;
            if st.steps_since_train < p.train_freq {
                continue;
            }
            st.steps_since_train = 0;
            if self.global_step > p.learning_starts {
                let tg = Instant::now();
                let left = gradient_burst(learner, nets, (p.gradient_steps, lr), &mut self.rng, &mut sums, &stop)?;
                gradient_seconds += tg.elapsed().as_secs_f64();
                if left > 0 {
                    // Asked to stop: this iteration ends here, the rest of the burst is owed.
                    learner.state_mut().pending_gradient_steps = left;
                    break;
                }
            }
        }
        self.clock.collect_seconds += t0.elapsed().as_secs_f64() - gradient_seconds;
        self.clock.update_seconds += gradient_seconds;
        Ok(Some(sums.stats(lr, learner.ent_coef())))
    }

    /// The off-policy algorithm's replay buffer (`None` for the on-policy ones).
    pub fn replay_buffer(&self) -> Option<&ReplayBuffer> {
        match &self.algo {
            Algo::OffPolicy(l) => Some(&l.state().replay),
            _ => None,
        }
    }

    /// Sets the step and iteration counters to 0 (SB3's `reset_num_timesteps=True`): the
    /// schedules start again, and SPS and the training time count from here. Parameters,
    /// optimiser state and the envs' running episodes stay.
    pub fn reset_num_timesteps(&mut self) {
        self.global_step = 0;
        self.update = 0;
        self.clock.start_step = 0;
        self.clock.elapsed_offset = 0.0;
        self.clock.start = Instant::now();
    }

    /// The off-policy algorithm's gradient steps so far (SB3's `n_updates`; `None` for the
    /// on-policy ones).
    pub fn gradient_steps_done(&self) -> Option<u64> {
        match &self.algo {
            Algo::OffPolicy(l) => Some(l.state().n_updates),
            _ => None,
        }
    }

    /// A `NonFinite` error of the update, with the iteration, the step and the last good
    /// update's diagnostics.
    fn name_the_update(&self, e: ProximaError) -> ProximaError {
        let ProximaError::NonFinite(m) = e else { return e };
        let last = match &self.last_stats {
            Some(s) => format!(
                "last good update: policy_loss {:.4}, value_loss {:.4}, entropy {:.4}, approx_kl {:.5}, clip_fraction {:.3}, grad_norm {:.3}",
                s.policy_loss, s.value_loss, s.entropy, s.approx_kl, s.clip_fraction, s.grad_norm
            ),
            None => "no update had completed".to_string(),
        };
        ProximaError::NonFinite(format!("update {} (global step {}): {m}; {last}", self.update + 1, self.global_step))
    }

    fn report(&self, stats: UpdateStats, finished: Vec<(u64, EpisodeRecord)>) -> UpdateReport {
        let elapsed = self.clock.start.elapsed().as_secs_f64();
        UpdateReport {
            update: self.update,
            num_updates: self.num_updates,
            global_step: self.global_step,
            time_elapsed: self.clock.elapsed_offset + elapsed,
            sps: self.global_step.saturating_sub(self.clock.start_step) as f64 / elapsed.max(1e-9),
            stats,
            ep_return_mean: self.collector.stats.return_mean(),
            ep_len_mean: self.collector.stats.len_mean(),
            finished,
            collect_seconds: self.clock.collect_seconds,
            update_seconds: self.clock.update_seconds,
        }
    }

    /// The rollout buffer of the last collection.
    pub fn buffer(&self) -> &RolloutBuffer {
        &self.buf
    }

    /// A3C: the number of updates each worker has applied to the global parameters (empty for
    /// the other algorithms). Their sum equals the global update count ([`Trainer::a3c_global_updates`]).
    pub fn worker_updates(&self) -> Vec<u64> {
        match &self.algo {
            Algo::A3c { workers, .. } => workers.iter().map(|w| w.updates).collect(),
            _ => Vec::new(),
        }
    }

    /// A3C: updates applied to the global parameters so far (counted under the lock).
    pub fn a3c_global_updates(&self) -> u64 {
        match &self.algo {
            Algo::A3c { global_updates, .. } => *global_updates,
            _ => 0,
        }
    }
}

/// The observation each env's transition ends in: the env's current one (`obs`, `[N, obs_dim]`),
/// or, where an episode just ended, its last one (`obs` then holds the reset's), as SB3 stores it.
fn transition_ends(venv: &SyncVectorEnv, obs: &[f32]) -> Vec<f32> {
    let n = venv.terminated.len();
    let od = obs.len() / n.max(1);
    let mut next_obs = obs.to_vec();
    for e in 0..n {
        if let (true, Some(last)) = (venv.terminated[e] || venv.truncated[e], &venv.final_obs[e]) {
            next_obs[e * od..(e + 1) * od].copy_from_slice(last);
        }
    }
    next_obs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn more_atari_games_than_memory_holds_are_refused_before_any_is_made() {
        let mut cfg = Config::preset("a3c").unwrap();
        (cfg.n_envs, cfg.n_workers) = (65_536, 1024); // ≈ 98 TB of games: more than any machine
        let e = check_games_memory("atari:Breakout", &cfg).unwrap_err().to_string();
        assert!(e.contains("n_envs = 65536: 67174400 Atari games need") && e.contains("lower n_envs"), "{e}");
        check_games_memory("CartPole-v1", &cfg).unwrap(); // native envs are small
        (cfg.n_envs, cfg.n_workers) = (8, 1);
        check_games_memory("atari:Breakout", &cfg).unwrap();
    }
}
