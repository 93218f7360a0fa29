//! The training run, readable top to bottom like the paper's Algorithm 1:
//!
//! ```text
//! for iteration = 1, 2, …:
//!     collect: run π_θold in N envs for T steps                  (Trainer::collect_rollout)
//!     compute Â_1 … Â_T with GAE(γ, λ)                           (RolloutBuffer::compute_advantages)
//!     optimise L^CLIP + c₁L^VF − c₂S for K epochs, minibatch M   (algo::ppo::update)
//!     θ_old ← θ
//! ```
//!
//! The other algorithms replace only the optimise line: `a2c` one gradient step
//! (`algo::a2c::update`), `trpo` the natural-gradient step with line search plus the critic's
//! epochs (`algo::trpo::update`), `a3c` asynchronous workers that each run this same
//! collect → returns → gradient cycle on their own envs (`algo::a3c::run_iteration`).
//!
//! [`Trainer`] holds the explicit training state; [`run`] adds the run directory (config,
//! CSV, TensorBoard, checkpoints, final model and evaluation).

use crate::algo::optim::Adam;
use crate::algo::ppo::{self, UpdateStats};
use crate::algo::{a2c, a3c, trpo};
use crate::checkpoint::{self, CheckpointMeta};
use crate::config::Config;
use crate::config::OptimizerName;
use crate::env::vec_env::{EpisodeRecord, SyncVectorEnv};
use crate::env::{make, Action, EnvRng};
use crate::error::{ProximaError, Result};
use crate::log::{CsvLogger, TensorBoardWriter};
use crate::normalize::Normalizer;
use crate::policy::{ActionKind, ActorCritic, PolicySpec};
use crate::rollout::RolloutBuffer;
use candle_core::Device;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
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

/// One env's resumable state.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct EnvSnapshot {
    state: Option<Vec<f64>>,
    elapsed: Option<usize>,
    rng: Option<EnvRng>,
}

/// Everything beyond weights and optimiser moments that an exact resume needs; stored as JSON
/// in the checkpoint metadata under `trainer_state`.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct TrainerSnapshot {
    rng: ChaCha8Rng,
    envs: Vec<EnvSnapshot>,
    obs: Vec<f32>,
    ep_return: Vec<f64>,
    ep_len: Vec<usize>,
    recent: Vec<EpisodeRecord>,
    policy_obs: Vec<f32>,
    norm: Normalizer,
    /// Seconds of training up to this checkpoint.
    #[serde(default)]
    time_elapsed: f64,
    /// β of the adaptive-KL objective at this checkpoint.
    #[serde(default)]
    kl_coef: Option<f64>,
}

/// The explicit state of a PPO run.
pub struct Trainer {
    /// The resolved config.
    pub cfg: Config,
    /// The environment id.
    pub env_id: String,
    /// The N training envs.
    pub venv: SyncVectorEnv,
    /// π_θ and V_θ.
    pub policy: ActorCritic,
    /// Adam state.
    pub opt: Adam,
    /// Observation/reward normalisation statistics (inactive unless configured).
    pub norm: Normalizer,
    /// The current observations as the policy sees them (normalised when configured), `[N, obs_dim]`.
    obs: Vec<f32>,
    rng: ChaCha8Rng,
    buf: RolloutBuffer,
    /// Environment steps so far.
    pub global_step: u64,
    /// Iterations completed.
    pub update: u64,
    /// Iterations in the run: ⌈total_timesteps / (N·T)⌉.
    pub num_updates: u64,
    recent: VecDeque<EpisodeRecord>,
    start: Instant,
    /// `global_step` when this process started (0, or the resumed checkpoint's step): SPS
    /// counts only the steps this process took.
    start_step: u64,
    /// Training time before this process (from the resumed checkpoint), seconds.
    elapsed_offset: f64,
    collect_seconds: f64,
    update_seconds: f64,
    last_stats: Option<UpdateStats>,
    /// β of the KL-penalty objectives (adapted after each update for `adaptive_kl`).
    pub kl_coef: f64,
    /// A3C's workers (empty for the other algorithms).
    workers: Vec<Trainer>,
    /// Episodes an A3C worker finished and the main trainer has not yet collected.
    pending: Vec<(u64, EpisodeRecord)>,
    /// A3C: updates applied to the global parameters.
    a3c_updates: u64,
}

/// Builds the network spec for an env's spaces from the config.
///
/// # Errors
/// `Unsupported` for action spaces without a distribution.
pub fn policy_spec(cfg: &Config, venv: &SyncVectorEnv) -> Result<PolicySpec> {
    Ok(PolicySpec {
        obs_dim: venv.observation_space().flat_dim(),
        action: ActionKind::from_space(venv.action_space())?,
        net_arch: cfg.net_arch.clone(),
        activation: cfg.activation,
        shared_trunk: cfg.shared_trunk,
        log_std_init: cfg.log_std_init,
        ortho_init: cfg.ortho_init,
    })
}

impl Trainer {
    /// A fresh run: N envs reset with seeds `seed..seed+N`, the network initialised from `seed`.
    ///
    /// # Errors
    /// An invalid config, an unknown env id, an unsupported action space.
    pub fn new(env_id: &str, cfg: Config) -> Result<Self> {
        Self::with_env_fn(env_id, cfg, || make(env_id))
    }

    /// A fresh run on envs built by `make_env` (called `n_envs` times): the way to train on an
    /// environment of your own that implements [`crate::env::Env`]. `env_id` names it in logs,
    /// errors and checkpoints. (Evaluation and resume through the CLI need a registered id.)
    ///
    /// # Errors
    /// As [`Trainer::new`], plus whatever `make_env` returns.
    pub fn with_env_fn(
        env_id: &str,
        cfg: Config,
        mut make_env: impl FnMut() -> crate::env::Result<Box<dyn crate::env::Env>>,
    ) -> Result<Self> {
        Self::build(env_id, cfg, &mut make_env)
    }

    fn build(
        env_id: &str,
        cfg: Config,
        make_env: &mut dyn FnMut() -> crate::env::Result<Box<dyn crate::env::Env>>,
    ) -> Result<Self> {
        cfg.validate()?;
        let mut venv = SyncVectorEnv::new(cfg.n_envs, &mut *make_env)?;
        venv.reset(cfg.seed)?;
        let spec = policy_spec(&cfg, &venv)?;
        let mut init_rng = ChaCha8Rng::seed_from_u64(cfg.seed);
        let policy = ActorCritic::new(spec, &Device::Cpu, &mut init_rng)?;
        let sizes: Vec<usize> = policy.named_params().iter().map(|(_, v)| v.elem_count()).collect();
        let opt = match cfg.optimizer {
            OptimizerName::Adam => Adam::new(&sizes, cfg.learning_rate, cfg.adam_eps),
            OptimizerName::Rmsprop => Adam::rmsprop(&sizes, cfg.learning_rate, cfg.rms_prop_alpha, cfg.rms_prop_eps),
        };
        // A3C: the workers, each with its own envs (seeded apart) and network copy.
        let mut workers = Vec::new();
        if cfg.algo == "a3c" {
            for w in 0..cfg.n_workers {
                let wcfg = Config {
                    algo: "a2c".into(),
                    seed: cfg.seed.wrapping_add(1 + w as u64 * 1_000_003) % (1 << 62),
                    ..cfg.clone()
                };
                workers.push(Self::build(env_id, wcfg, &mut *make_env)?);
            }
        }
        let buf = RolloutBuffer::new(cfg.n_steps, cfg.n_envs, policy.spec().obs_dim, policy.spec().action.act_dim());
        let mut norm = Normalizer::new(
            cfg.normalize_observation,
            cfg.normalize_reward,
            policy.spec().obs_dim,
            cfg.n_envs,
            cfg.gamma,
            cfg.clip_obs,
            cfg.clip_reward,
        );
        let obs = norm.observe(venv.obs());
        let batch = if cfg.algo == "a3c" {
            (cfg.n_steps * cfg.n_envs * cfg.n_workers) as u64 * a3c::UPDATES_PER_ITERATION
        } else {
            (cfg.n_steps * cfg.n_envs) as u64
        };
        Ok(Trainer {
            kl_coef: cfg.kl_coef,
            workers,
            pending: Vec::new(),
            a3c_updates: 0,
            num_updates: cfg.total_timesteps.div_ceil(batch),
            // A separate stream for sampling and shuffling, so changing the init scheme does not
            // change which actions are sampled.
            rng: ChaCha8Rng::seed_from_u64(cfg.seed ^ 0x5eed_0f_ac7_10u64),
            cfg,
            env_id: env_id.to_string(),
            venv,
            policy,
            opt,
            norm,
            obs,
            buf,
            global_step: 0,
            update: 0,
            recent: VecDeque::with_capacity(100),
            start: Instant::now(),
            start_step: 0,
            elapsed_offset: 0.0,
            collect_seconds: 0.0,
            update_seconds: 0.0,
            last_stats: None,
        })
    }

    /// Whether all iterations are done.
    pub fn is_done(&self) -> bool {
        self.update >= self.num_updates
    }

    /// The learning rate for the next iteration: linearly annealed from `learning_rate` to 0
    /// over the run when `anneal_lr` (CleanRL: frac = 1 − (iteration − 1)/num_iterations).
    pub fn current_learning_rate(&self) -> f64 {
        if self.cfg.anneal_lr {
            (1.0 - self.update as f64 / self.num_updates as f64) * self.cfg.learning_rate
        } else {
            self.cfg.learning_rate
        }
    }

    /// Runs π_θold in the N envs for T steps, filling the rollout buffer, and returns the
    /// episodes that finished (with the global step they ended at).
    fn collect_rollout(&mut self) -> Result<Vec<(u64, EpisodeRecord)>> {
        let (n, od, ad) = (self.cfg.n_envs, self.buf.obs_dim, self.buf.act_dim);
        let mut finished = Vec::new();
        let mut env_actions = vec![0f32; n * ad];
        for t in 0..self.cfg.n_steps {
            self.buf.observations[t * n * od..(t + 1) * n * od].copy_from_slice(&self.obs);
            let out = self.policy.act(&self.obs, false, &mut self.rng)?;
            self.buf.actions[t * n * ad..(t + 1) * n * ad].copy_from_slice(&out.actions);
            self.buf.log_probs[t * n..(t + 1) * n].copy_from_slice(&out.log_probs);
            self.buf.values[t * n..(t + 1) * n].copy_from_slice(&out.values);
            env_actions.copy_from_slice(&out.actions);
            for a in env_actions.chunks_mut(ad) {
                self.policy.env_action(a); // clip to the Box; the unclipped sample stays stored
            }
            self.venv.step(&env_actions)?;
            self.global_step += n as u64;
            let row = t * n..(t + 1) * n;
            self.buf.rewards[row.clone()].copy_from_slice(&self.venv.rewards);
            let (term, trunc) = (&self.venv.terminated, &self.venv.truncated);
            self.norm.scale_rewards(&mut self.buf.rewards[row.clone()], |e| term[e] || trunc[e]);
            self.obs = self.norm.observe(self.venv.obs());
            self.buf.terminated[row.clone()].copy_from_slice(&self.venv.terminated);
            self.buf.truncated[row.clone()].copy_from_slice(&self.venv.truncated);
            self.buf.final_obs_values[row].fill(0.0);
            // Bootstrap truncated episodes from V(final observation), one batched forward.
            let cut: Vec<usize> = (0..n).filter(|&e| self.venv.truncated[e] && !self.venv.terminated[e]).collect();
            if !cut.is_empty() {
                let mut fo: Vec<f32> = cut
                    .iter()
                    .flat_map(|&e| self.venv.final_obs[e].clone().expect("final obs of an ended episode"))
                    .collect();
                self.norm.normalize_obs(&mut fo);
                let v = self.policy.predict_values(&fo)?;
                for (k, &e) in cut.iter().enumerate() {
                    self.buf.final_obs_values[t * n + e] = v[k];
                }
            }
            for ep in self.venv.finished.drain(..) {
                if self.recent.len() == 100 {
                    self.recent.pop_front();
                }
                self.recent.push_back(ep);
                finished.push((self.global_step, ep));
            }
        }
        self.buf.pos = self.cfg.n_steps;
        Ok(finished)
    }

    /// One iteration: collect → GAE → K epochs of minibatch updates.
    ///
    /// # Errors
    /// Env errors (NaN observations, …) and `NonFinite` from the update, both naming the
    /// iteration; the parameters keep their last good values.
    pub fn step(&mut self) -> Result<UpdateReport> {
        let lr = self.current_learning_rate();
        let t0 = Instant::now();
        let (finished, t1, stats) = if self.cfg.algo == "a3c" {
            // Workers collect and update asynchronously; this thread only joins them.
            let before: u64 = self.workers.iter().map(|w| w.global_step).sum();
            let out =
                a3c::run_iteration(&self.policy, &mut self.opt, &mut self.workers, lr, a3c::UPDATES_PER_ITERATION);
            let after: u64 = self.workers.iter().map(|w| w.global_step).sum();
            self.global_step += after - before;
            let mut finished = Vec::new();
            for w in &mut self.workers {
                finished.append(&mut w.pending);
            }
            finished.sort_by_key(|(step, _)| *step);
            for &(_, ep) in &finished {
                if self.recent.len() == 100 {
                    self.recent.pop_front();
                }
                self.recent.push_back(ep);
            }
            if let Ok((n, _)) = &out {
                self.a3c_updates += n;
            }
            (finished, t0, out.map(|(_, s)| s))
        } else {
            let finished = self.collect_rollout()?;
            let t1 = Instant::now();
            self.collect_seconds += (t1 - t0).as_secs_f64();
            let last_values = self.policy.predict_values(&self.obs)?;
            self.buf.compute_advantages(&last_values, self.cfg.gamma, self.cfg.gae_lambda)?;
            let stats = match self.cfg.algo.as_str() {
                "a2c" => a2c::update(&self.policy, &mut self.opt, &self.buf, &self.cfg, lr),
                "trpo" => trpo::update(&self.policy, &mut self.opt, &self.buf, &self.cfg, lr, &mut self.rng),
                _ => {
                    ppo::update(&self.policy, &mut self.opt, &self.buf, &self.cfg, lr, &mut self.kl_coef, &mut self.rng)
                }
            };
            (finished, t1, stats)
        };
        let stats = stats.map_err(|e| match e {
            ProximaError::NonFinite(m) => {
                let last = match &self.last_stats {
                    Some(s) => format!(
                        "last good update: policy_loss {:.4}, value_loss {:.4}, entropy {:.4}, approx_kl {:.5}, clip_fraction {:.3}, grad_norm {:.3}",
                        s.policy_loss, s.value_loss, s.entropy, s.approx_kl, s.clip_fraction, s.grad_norm
                    ),
                    None => "no update had completed".to_string(),
                };
                ProximaError::NonFinite(format!("update {} (global step {}): {m}; {last}", self.update + 1, self.global_step))
            }
            other => other,
        })?;
        self.last_stats = Some(stats);
        self.update += 1;
        self.update_seconds += t1.elapsed().as_secs_f64();
        let elapsed = self.start.elapsed().as_secs_f64();
        let sps = (self.global_step - self.start_step) as f64 / elapsed.max(1e-9);
        let mean = |f: &dyn Fn(&EpisodeRecord) -> f64| {
            (!self.recent.is_empty()).then(|| self.recent.iter().map(f).sum::<f64>() / self.recent.len() as f64)
        };
        Ok(UpdateReport {
            update: self.update,
            num_updates: self.num_updates,
            global_step: self.global_step,
            time_elapsed: self.elapsed_offset + elapsed,
            sps,
            stats,
            ep_return_mean: mean(&|e| e.episode_return),
            ep_len_mean: mean(&|e| e.length as f64),
            finished,
            collect_seconds: self.collect_seconds,
            update_seconds: self.update_seconds,
        })
    }

    /// A3C worker step: collect a rollout with the local network, then compute its returns and
    /// advantages; the finished episodes wait in `pending` for the main trainer.
    pub(crate) fn collect_and_compute_advantages(&mut self) -> Result<()> {
        let finished = self.collect_rollout()?;
        self.pending.extend(finished);
        let last_values = self.policy.predict_values(&self.obs)?;
        self.buf.compute_advantages(&last_values, self.cfg.gamma, self.cfg.gae_lambda)
    }

    /// The rollout buffer of the last collection.
    pub fn buffer(&self) -> &RolloutBuffer {
        &self.buf
    }

    /// A3C: the number of updates each worker has applied to the global parameters (empty for
    /// the other algorithms). Their sum equals the global update count ([`Trainer::a3c_global_updates`]).
    pub fn worker_updates(&self) -> Vec<u64> {
        self.workers.iter().map(|w| w.update).collect()
    }

    /// A3C: updates applied to the global parameters so far (counted under the lock).
    pub fn a3c_global_updates(&self) -> u64 {
        self.a3c_updates
    }

    /// The metadata a checkpoint of the current state carries, including the trainer state
    /// (RNG streams, env states, running episodes) under `trainer_state`.
    pub fn checkpoint_meta(&self) -> CheckpointMeta {
        let (ep_return, ep_len) = self.venv.running_episodes();
        let snap = TrainerSnapshot {
            rng: self.rng.clone(),
            envs: self
                .venv
                .envs()
                .iter()
                .map(|e| EnvSnapshot { state: e.state(), elapsed: e.elapsed_steps(), rng: e.rng().cloned() })
                .collect(),
            obs: self.venv.obs().to_vec(),
            ep_return: ep_return.to_vec(),
            ep_len: ep_len.to_vec(),
            recent: self.recent.iter().copied().collect(),
            policy_obs: self.obs.clone(),
            norm: self.norm.clone(),
            time_elapsed: self.elapsed_offset + self.start.elapsed().as_secs_f64(),
            kl_coef: Some(self.kl_coef),
        };
        let mut extra = BTreeMap::new();
        extra.insert("trainer_state".to_string(), serde_json::to_string(&snap).expect("snapshot serialises"));
        if self.norm.is_active() {
            extra
                .insert("normalization".to_string(), serde_json::to_string(&self.norm).expect("normaliser serialises"));
        }
        CheckpointMeta {
            env_id: self.env_id.clone(),
            policy: self.policy.spec().clone(),
            config_toml: self.cfg.to_toml(),
            global_step: self.global_step,
            update: self.update,
            extra,
        }
    }

    /// Rebuilds a trainer from a checkpoint written by [`Trainer::save`]: weights, Adam moments
    /// and step, counters (so the learning-rate schedule continues where it was), the sampling
    /// RNG, every env's physical state, step counter and RNG, the current observations and the
    /// running episode statistics. Continuing from it gives the same weights, bit for bit, as
    /// the uninterrupted run (native envs, same thread count).
    ///
    /// `total_timesteps`: `Some(n)` extends (or shortens) the run; the annealed learning rate
    /// then follows the new length, so the result is no longer identical to any single run.
    ///
    /// # Errors
    /// `Checkpoint` when the file lacks trainer state or optimiser moments, or does not match.
    pub fn resume(ck: &checkpoint::Checkpoint, total_timesteps: Option<u64>) -> Result<Self> {
        // Start from the preset the run itself started from: checkpoints written before optional
        // keys were recorded as "none" leave them out, and they must not fall back to another
        // preset's values.
        let preset = ck
            .meta
            .config_toml
            .parse::<toml::Table>()
            .ok()
            .and_then(|t| t.get("preset").and_then(|p| p.as_str()).map(String::from))
            .filter(|p| crate::config::PRESETS.contains(&p.as_str()))
            .unwrap_or_else(|| "cleanrl".to_string());
        let mut cfg = Config::resolve(&preset, Some(&ck.meta.config_toml), &[])?;
        if let Some(t) = total_timesteps {
            cfg.total_timesteps = t;
            cfg.validate()?;
        }
        if cfg.algo == "a3c" {
            return Err(ProximaError::Unsupported(
                "A3C runs cannot be resumed: the asynchronous workers' interleaving is not reproducible, so an exact resume is impossible; start a new run (its model.safetensors can still be evaluated)".into(),
            ));
        }
        let mut tr = Trainer::new(&ck.meta.env_id, cfg)?;
        let bad = |m: &str| ProximaError::Checkpoint(format!("cannot resume: {m}"));
        let snap: TrainerSnapshot = serde_json::from_str(
            ck.meta.extra.get("trainer_state").ok_or_else(|| bad("no trainer_state in the checkpoint"))?,
        )
        .map_err(|e| bad(&format!("malformed trainer_state ({e})")))?;
        if snap.envs.len() != tr.cfg.n_envs {
            return Err(bad(&format!("the checkpoint holds {} envs, the config {}", snap.envs.len(), tr.cfg.n_envs)));
        }
        ck.load_into(&tr.policy)?;
        ck.restore_optimizer(&tr.policy, &mut tr.opt)?;
        for (env, s) in tr.venv.envs_mut().iter_mut().zip(&snap.envs) {
            if let Some(st) = &s.state {
                env.set_state(st)?;
            }
            if let Some(n) = s.elapsed {
                env.set_elapsed_steps(n);
            }
            if let (Some(r), Some(dst)) = (&s.rng, env.rng_mut()) {
                *dst = r.clone();
            }
        }
        tr.rng = snap.rng;
        if snap.policy_obs.len() != tr.obs.len() {
            return Err(bad("observations of the wrong size in trainer_state"));
        }
        tr.norm = snap.norm;
        if snap.envs.iter().all(|e| e.state.is_some()) {
            // Native envs: continue the very episodes that were running.
            tr.venv.restore(snap.obs, snap.ep_return, snap.ep_len)?;
            tr.obs = snap.policy_obs;
        } else {
            // Envs whose state lives elsewhere (the Python bridge): they start new episodes
            // (reset with the run's seeds), seen through the restored normalisation statistics.
            tr.obs = tr.venv.obs().to_vec();
            tr.norm.normalize_obs(&mut tr.obs);
        }
        tr.recent = snap.recent.into_iter().collect();
        tr.global_step = ck.meta.global_step;
        tr.update = ck.meta.update;
        tr.start_step = tr.global_step;
        tr.elapsed_offset = snap.time_elapsed;
        if let Some(b) = snap.kl_coef {
            tr.kl_coef = b;
        }
        Ok(tr)
    }

    /// Saves the network and optimiser state to `path` (atomically).
    pub fn save(&self, path: &Path) -> Result<()> {
        checkpoint::save(path, &self.policy, Some(&self.opt), &self.checkpoint_meta())
    }
}

/// Evaluates `policy` on `episodes` episodes of `env_id` (episode i reset with `seed + i`),
/// deterministic (mode) or sampled actions. Returns the undiscounted return of each episode.
///
/// # Errors
/// Unknown env; a policy whose input/output does not fit the env's spaces; env errors.
///
/// `norm`: the training run's normalisation statistics, applied frozen to observations
/// (rewards are reported unscaled).
pub fn evaluate(
    policy: &ActorCritic,
    env_id: &str,
    episodes: usize,
    deterministic: bool,
    seed: u64,
    norm: Option<&Normalizer>,
) -> Result<Vec<f64>> {
    evaluate_recorded(policy, env_id, episodes, deterministic, seed, norm, None)
}

/// What [`evaluate_recorded`] records: the first `episodes` episodes, one frame after each
/// reset and each step, to `path` (`.gif` or `.mp4`) at `fps` (default: the env's
/// `render_fps`).
#[derive(Clone, Debug)]
pub struct Recording {
    /// Output file; `.gif` or `.mp4`.
    pub path: std::path::PathBuf,
    /// Number of leading episodes recorded (at least 1).
    pub episodes: usize,
    /// Playback speed; `None` uses the env's `render_fps`.
    pub fps: Option<u32>,
}

/// [`evaluate`], optionally recording a rollout (Gymnasium's `render_mode="rgb_array"`: the env
/// is made with [`crate::env::make_with`] and `render()` is called after reset and every step).
/// The actions, and so the returns, are the same with and without recording.
///
/// # Errors
/// As [`evaluate`]; plus `Unsupported` when the env cannot render, and the video writer's
/// errors (see [`crate::env::render::VideoWriter`]).
pub fn evaluate_recorded(
    policy: &ActorCritic,
    env_id: &str,
    episodes: usize,
    deterministic: bool,
    seed: u64,
    norm: Option<&Normalizer>,
    record: Option<&Recording>,
) -> Result<Vec<f64>> {
    let mut env = crate::env::make_with(env_id, record.is_some())?;
    let mut video = match record {
        Some(r) => Some(crate::env::render::VideoWriter::new(&r.path, r.fps.unwrap_or_else(|| env.render_fps()))?),
        None => None,
    };
    let record_episodes = record.map_or(0, |r| r.episodes.max(1));
    let obs_dim = env.observation_space().flat_dim();
    let kind = ActionKind::from_space(&env.action_space())?;
    if obs_dim != policy.spec().obs_dim
        || kind.head_dim() != policy.spec().action.head_dim()
        || kind.act_dim() != policy.spec().action.act_dim()
    {
        return Err(ProximaError::Checkpoint(format!(
            "the policy (observations of {}, action {:?}) does not fit {env_id} (observations of {obs_dim}, action {:?})",
            policy.spec().obs_dim,
            policy.spec().action,
            kind
        )));
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut returns = Vec::with_capacity(episodes);
    for i in 0..episodes {
        let (mut obs, _) = env.reset(Some(seed.wrapping_add(i as u64)))?;
        let recording = i < record_episodes;
        if recording {
            video.as_mut().expect("writer exists when recording").push(&env.render()?)?;
        }
        let mut total = 0f64;
        loop {
            if let Some(n) = norm {
                n.normalize_obs(&mut obs);
            }
            let mut a = policy.act(&obs, deterministic, &mut rng)?.actions;
            policy.env_action(&mut a);
            let action = match kind {
                ActionKind::Discrete { .. } => Action::Discrete(a[0] as usize),
                ActionKind::MultiDiscrete { .. } | ActionKind::Continuous { .. } => Action::Continuous(&a),
            };
            let r = env.step(action)?;
            total += r.reward;
            if recording {
                video.as_mut().expect("writer exists when recording").push(&env.render()?)?;
            }
            if r.terminated || r.truncated {
                break;
            }
            obs = r.observation;
        }
        returns.push(total);
    }
    if let Some(v) = video {
        v.finish()?;
    }
    Ok(returns)
}

/// Mean and population std of a slice.
pub fn mean_std(x: &[f64]) -> (f64, f64) {
    let n = x.len().max(1) as f64;
    let m = x.iter().sum::<f64>() / n;
    (m, (x.iter().map(|v| (v - m).powi(2)).sum::<f64>() / n).sqrt())
}

/// Drops the rows of `progress.csv` written after `update` (a resumed run rewrites them).
fn keep_rows_up_to(path: &Path, update: u64) -> Result<()> {
    let Ok(text) = std::fs::read_to_string(path) else { return Ok(()) };
    let kept: Vec<&str> = text
        .lines()
        .enumerate()
        .filter(|(i, l)| {
            *i == 0 || l.split(',').nth(1).and_then(|u| u.parse::<u64>().ok()).is_some_and(|u| u <= update)
        })
        .map(|(_, l)| l)
        .collect();
    checkpoint::write_atomic(path, format!("{}\n", kept.join("\n")).as_bytes())
}

/// Columns of `progress.csv`, one row per iteration.
pub const CSV_COLUMNS: [&str; 19] = [
    "global_step",
    "update",
    "time_elapsed",
    "sps",
    "learning_rate",
    "policy_loss",
    "value_loss",
    "entropy",
    "approx_kl",
    "clip_fraction",
    "explained_variance",
    "grad_norm",
    "epochs",
    "ep_return_mean",
    "ep_len_mean",
    "episodes",
    "kl_divergence",
    "kl_coef",
    "step_fraction",
];

/// What a finished run leaves behind.
#[derive(Clone, Debug)]
pub struct RunSummary {
    /// The run directory.
    pub run_dir: PathBuf,
    /// Path of the final model.
    pub model: PathBuf,
    /// Environment steps taken.
    pub global_step: u64,
    /// Wall time of training in this process (seconds), start-up included.
    pub train_seconds: f64,
    /// Steps per second taken by this process.
    pub sps: f64,
    /// Final deterministic evaluation returns (`eval_episodes` of them).
    pub eval_returns: Vec<f64>,
    /// Seconds collecting rollouts / updating, of `train_seconds`.
    pub collect_seconds: f64,
    /// Seconds in GAE and updates.
    pub update_seconds: f64,
}

/// Trains into `run_dir`: writes `config.toml`, `progress.csv`, a TensorBoard event file,
/// `checkpoints/update_<n>.safetensors` every `checkpoint_freq` iterations, `model.safetensors`
/// at the end, and `eval.json` with a deterministic evaluation. `trainer` is fresh
/// ([`Trainer::new`]) or resumed ([`Trainer::resume`]); when resumed, `progress.csv` keeps the
/// rows up to the resumed update and continues after them. `on_update` sees every
/// iteration's report (the CLI draws its progress bar from it).
///
/// # Errors
/// A run directory that cannot be created or written (nothing half-written is left: every
/// model file is written atomically), plus everything [`Trainer::step`] can return.
pub fn run(mut trainer: Trainer, run_dir: &Path, mut on_update: impl FnMut(&UpdateReport)) -> Result<RunSummary> {
    let t0 = Instant::now();
    let env_id = trainer.env_id.clone();
    let env_id = env_id.as_str();
    let ckpt_dir = run_dir.join("checkpoints");
    std::fs::create_dir_all(&ckpt_dir).map_err(|e| ProximaError::io(&ckpt_dir, e))?;
    checkpoint::write_atomic(
        &run_dir.join("config.toml"),
        format!("env_id = {:?}\n{}", env_id, trainer.cfg.to_toml()).as_bytes(),
    )?;
    let csv_path = run_dir.join("progress.csv");
    if trainer.update > 0 {
        keep_rows_up_to(&csv_path, trainer.update)?;
    }
    let mut csv = CsvLogger::create(&csv_path, &CSV_COLUMNS, trainer.update > 0)?;
    let mut tb = TensorBoardWriter::create(run_dir)?;
    let (mut collect_seconds, mut update_seconds) = (0.0, 0.0);
    while !trainer.is_done() {
        let r = trainer.step()?;
        (collect_seconds, update_seconds) = (r.collect_seconds, r.update_seconds);
        let s = &r.stats;
        let nan = f64::NAN;
        csv.write(&[
            r.global_step as f64,
            r.update as f64,
            r.time_elapsed,
            r.sps,
            s.learning_rate,
            s.policy_loss,
            s.value_loss,
            s.entropy,
            s.approx_kl,
            s.clip_fraction,
            s.explained_variance,
            s.grad_norm,
            s.epochs as f64,
            r.ep_return_mean.unwrap_or(nan),
            r.ep_len_mean.unwrap_or(nan),
            r.finished.len() as f64,
            s.kl_divergence,
            s.kl_coef,
            s.step_fraction,
        ])?;
        for (step, ep) in &r.finished {
            tb.add_scalar("charts/episodic_return", ep.episode_return, *step)?;
            tb.add_scalar("charts/episodic_length", ep.length as f64, *step)?;
        }
        for (tag, v) in [
            ("charts/learning_rate", s.learning_rate),
            ("charts/SPS", r.sps),
            ("losses/policy_loss", s.policy_loss),
            ("losses/value_loss", s.value_loss),
            ("losses/entropy", s.entropy),
            ("losses/approx_kl", s.approx_kl),
            ("losses/clipfrac", s.clip_fraction),
            ("losses/explained_variance", s.explained_variance),
            ("losses/grad_norm", s.grad_norm),
            ("losses/kl_divergence", s.kl_divergence),
            ("charts/kl_coef", s.kl_coef),
            ("charts/step_fraction", s.step_fraction),
        ] {
            tb.add_scalar(tag, v, r.global_step)?;
        }
        tb.flush()?;
        if trainer.cfg.checkpoint_freq > 0 && r.update % trainer.cfg.checkpoint_freq as u64 == 0 {
            trainer.save(&ckpt_dir.join(format!("update_{:06}.safetensors", r.update)))?;
        }
        on_update(&r);
    }
    let train_seconds = t0.elapsed().as_secs_f64();
    let sps = (trainer.global_step - trainer.start_step) as f64 / train_seconds.max(1e-9);
    let model = run_dir.join("model.safetensors");
    trainer.save(&model)?;
    let eval_returns = if trainer.cfg.eval_episodes > 0 {
        evaluate(
            &trainer.policy,
            env_id,
            trainer.cfg.eval_episodes,
            true,
            trainer.cfg.seed.wrapping_add(10_000),
            Some(&trainer.norm),
        )?
    } else {
        Vec::new()
    };
    let (m, sd) = mean_std(&eval_returns);
    let (m, sd) = if eval_returns.is_empty() { (None, None) } else { (Some(m), Some(sd)) };
    let eval = serde_json::json!({
        "env_id": env_id, "seed": trainer.cfg.seed, "global_step": trainer.global_step, "train_seconds": train_seconds,
        "sps": sps, "collect_seconds": collect_seconds, "update_seconds": update_seconds, "episodes": eval_returns.len(), "deterministic": true,
        "mean_return": m, "std_return": sd, "returns": eval_returns,
    });
    checkpoint::write_atomic(&run_dir.join("eval.json"), format!("{eval}\n").as_bytes())?;
    Ok(RunSummary {
        run_dir: run_dir.to_path_buf(),
        model,
        global_step: trainer.global_step,
        train_seconds,
        sps,
        eval_returns,
        collect_seconds,
        update_seconds,
    })
}
