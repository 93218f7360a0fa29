//! Exact resume: what a checkpoint holds beyond weights and optimiser moments (the RNG stream,
//! every env's state, the current observations, the running episode statistics, the
//! normalisation statistics, PPO's β), and rebuilding a [`Trainer`] from it.

use super::algorithm::{Algo, OnPolicy};
use super::trainer::Trainer;
use crate::algo::learner::Learner;
use crate::algo::offpolicy::OffPolicySnapshot;
use crate::checkpoint::{self, CheckpointMeta, OptimizerState, OPTIMIZER};
use crate::collect::EpisodeStats;
use crate::config::{AlgoName, Backend, Config, ValidConfig, VectorEnv};
use crate::env::vec_env::EpisodeRecord;
use crate::env::EnvRng;
use crate::error::{ProximaError, Result};
use crate::normalize::Normalizer;
use crate::optim::Optimizer;
use crate::policy::Policy;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// What a resumed run may change ([`Trainer::resume_with`]); `None` keeps the checkpoint's value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResumeOptions {
    /// Extends (or shortens) the run to this many env steps; the annealed learning rate then
    /// follows the new length, so the result is no longer identical to any single run.
    pub total_timesteps: Option<u64>,
    /// Moves the run to this backend (the run then continues with its arithmetic: the result
    /// matches neither uninterrupted run bit for bit).
    pub backend: Option<Backend>,
    /// Steps the bridged envs this way from now on (the config's `vector_env`): the results are
    /// the same in every mode, only the speed differs.
    pub vector_env: Option<VectorEnv>,
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
    /// The envs' raw current observations.
    obs: Vec<f32>,
    ep_return: Vec<f64>,
    ep_len: Vec<usize>,
    recent: Vec<EpisodeRecord>,
    /// The current observations as the policy sees them.
    policy_obs: Vec<f32>,
    norm: Normalizer,
    /// Seconds of training up to this checkpoint: read from files of earlier versions, no
    /// longer written (a wall time would make two identical runs' checkpoints differ; a run
    /// directory takes it from `progress.csv` on resume).
    #[serde(default, skip_serializing)]
    time_elapsed: f64,
    /// β of the adaptive-KL objective at this checkpoint.
    #[serde(default)]
    kl_coef: Option<f64>,
    /// A distributed run's per-env sampling streams (`Collector::sample_per_env`); absent when
    /// every env samples from `rng`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    env_streams: Option<Vec<ChaCha8Rng>>,
    /// A recurrent policy's hidden state per env `[N, state_dim]` and whether each env's
    /// current observation starts an episode (absent for a feed-forward policy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    hidden: Option<(Vec<f32>, Vec<bool>)>,
}

/// A `trainer_state` (JSON) of checkpoint `ck`.
fn parse_snapshot(ck: &checkpoint::Checkpoint, json: Option<&str>) -> Result<TrainerSnapshot> {
    let bad = |m: &str| ProximaError::Checkpoint(format!("cannot resume {}: {m}", ck.path()));
    serde_json::from_str(json.ok_or_else(|| bad("no trainer_state in the checkpoint"))?)
        .map_err(|e| bad(&format!("malformed trainer_state ({e})")))
}

impl Trainer {
    /// This trainer's resumable state beyond weights and optimiser moments.
    fn snapshot(&self) -> TrainerSnapshot {
        let c = &self.collector;
        let (ep_return, ep_len) = c.venv.running_episodes();
        TrainerSnapshot {
            rng: self.rng.clone(),
            envs: if c.venv.envs().is_empty() {
                // A Gymnasium vector env: its envs' state lives in Python (they restart on resume).
                vec![EnvSnapshot { state: None, elapsed: None, rng: None }; c.venv.num_envs()]
            } else {
                c.venv
                    .envs()
                    .iter()
                    .map(|e| EnvSnapshot { state: e.state(), elapsed: e.elapsed_steps(), rng: e.rng().cloned() })
                    .collect()
            },
            obs: c.venv.obs().to_vec(),
            ep_return: ep_return.to_vec(),
            ep_len: ep_len.to_vec(),
            recent: c.stats.records().copied().collect(),
            policy_obs: c.obs.clone(),
            norm: c.norm.clone(),
            time_elapsed: 0.0,
            kl_coef: Some(self.kl_coef()),
            env_streams: (!c.env_streams().is_empty()).then(|| c.env_streams().to_vec()),
            hidden: (!c.rnn_state.is_empty()).then(|| (c.rnn_state.clone(), c.episode_starts.clone())),
        }
    }

    /// The metadata a checkpoint of the current state carries, including the trainer state
    /// (RNG streams, env states, running episodes) under `trainer_state`; for rank 0 of a
    /// distributed run also the number of ranks (`mpi_ranks`) and the other ranks' states
    /// (`mpi_rank_states`, a JSON list of their `trainer_state`s, ranks 1, 2, …).
    pub fn checkpoint_meta(&self) -> CheckpointMeta {
        let c = &self.collector;
        let mut extra = BTreeMap::new();
        let snap = serde_json::to_string(&self.snapshot()).expect("snapshot serialises");
        extra.insert("trainer_state".to_string(), snap);
        if c.norm.is_active() {
            extra.insert("normalization".to_string(), serde_json::to_string(&c.norm).expect("normaliser serialises"));
        }
        if let Some(d) = self.ranks() {
            extra.insert("mpi_ranks".to_string(), d.split.size.to_string());
            // Gathered after every update; absent (so the checkpoint is not resumable) only
            // before the first one.
            if let Some((_, states)) = self.rank_states.as_ref().filter(|(u, _)| *u == self.update) {
                extra.insert("mpi_rank_states".to_string(), serde_json::to_string(states).expect("strings serialise"));
            }
        }
        if let Algo::OffPolicy(l) = &self.algo {
            extra.insert(
                "off_policy_state".to_string(),
                serde_json::to_string(&l.snapshot()).expect("state serialises"),
            );
        }
        // The backend `auto` resolved to, for a resume after `auto` changes its choice.
        extra.insert("backend".to_string(), self.policy.backend().as_str().to_string());
        if self.buffer().mask_dim > 0 {
            // The policy acts under its envs' masks (`proxima export` gives its graph the masks input).
            extra.insert(crate::checkpoint::TRAINED_MASKED.to_string(), "true".to_string());
        }
        let notes = self.notes.iter().filter(|(k, _)| k.starts_with(super::trainer::NOTE_PREFIX));
        extra.extend(notes.map(|(k, v)| (k.clone(), v.clone())));
        CheckpointMeta {
            env_id: self.env_id.clone(),
            policy: self.policy.spec().clone(),
            config_toml: self.cfg.to_toml(),
            global_step: self.global_step,
            update: self.update,
            extra,
        }
    }

    /// A distributed run, after every update (every rank calls it): the other ranks' resumable
    /// states to rank 0, for whatever checkpoint it writes next. Their episode statistics are
    /// left out: every rank holds the same ones (gathered), and rank 0 saves its own.
    ///
    /// # Errors
    /// The engine's.
    pub(super) fn gather_rank_states(&mut self) -> Result<()> {
        let Some(d) = self.ranks().cloned() else { return Ok(()) };
        let mine = if d.split.rank == 0 {
            Vec::new()
        } else {
            let mut snap = self.snapshot();
            snap.recent.clear();
            serde_json::to_vec(&snap).expect("snapshot serialises")
        };
        let all = d.comm.gather_bytes(&mine)?;
        if d.split.rank == 0 {
            let others = all.iter().skip(1).map(|b: &Vec<u8>| String::from_utf8_lossy(b).into_owned()).collect();
            self.rank_states = Some((self.update, others));
        }
        Ok(())
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
    /// `Checkpoint` when the file lacks trainer state or optimiser moments, or does not match;
    /// a distributed run's checkpoint ([`Trainer::resume_distributed`] resumes it).
    pub fn resume(ck: &checkpoint::Checkpoint, total_timesteps: Option<u64>) -> Result<Self> {
        Self::resume_on(ck, total_timesteps, None)
    }

    /// [`Trainer::resume`], moving the run to `backend` when given (a checkpoint holds the
    /// parameters in the layout both backends share; the run then continues with that backend's
    /// arithmetic, so it matches neither uninterrupted run bit for bit).
    ///
    /// # Errors
    /// As [`Trainer::resume`]; `Config` for a backend that does not cover the run's algorithm.
    pub fn resume_on(
        ck: &checkpoint::Checkpoint,
        total_timesteps: Option<u64>,
        backend: Option<Backend>,
    ) -> Result<Self> {
        Self::resume_with(ck, ResumeOptions { total_timesteps, backend, vector_env: None })
    }

    /// [`Trainer::resume`] with everything a resumed run may change ([`ResumeOptions`]).
    ///
    /// # Errors
    /// As [`Trainer::resume_on`]; `Config` or `Unsupported` for a `vector_env` the env does not
    /// take (e.g. `sync` for an `atari:` env).
    pub fn resume_with(ck: &checkpoint::Checkpoint, opts: ResumeOptions) -> Result<Self> {
        if let Some(ranks) = ck.meta.extra.get("mpi_ranks") {
            // The run directory: the checkpoint's folder, or the one above `checkpoints/`.
            let file = std::path::Path::new(ck.path());
            let folder = file.parent().unwrap_or(file);
            let dir = match folder.file_name() {
                Some(name) if name == "checkpoints" => folder.parent().unwrap_or(folder),
                _ => folder,
            };
            return Err(ProximaError::Checkpoint(format!(
                "cannot resume {} in one process: it is a checkpoint of a distributed run of {ranks} MPI ranks; resume it with `mpirun -np {ranks} proxima train --resume {}` (a build with the `mpi` feature), or evaluate it with proxima eval",
                ck.path(),
                dir.display()
            )));
        }
        let cfg = resumed_config(ck, opts, 1)?;
        let tr = Trainer::new(&ck.meta.env_id, cfg)?;
        let snap = parse_snapshot(ck, ck.meta.extra.get("trainer_state").map(String::as_str))?;
        tr.restore(ck, snap)
    }

    /// [`Trainer::resume_with`] for one rank of a distributed run ([`Trainer::distributed`]), from
    /// a checkpoint rank 0 wrote: every rank takes its own envs, sampling streams, running
    /// episodes and normaliser state from it, so the run continues exactly as the uninterrupted
    /// one (native envs; bridged envs start new episodes). Every rank calls it with the same
    /// checkpoint.
    ///
    /// # Errors
    /// As [`Trainer::resume_on`]; `Checkpoint` for a checkpoint of one process, of another
    /// number of ranks (named: an exact resume needs the same split), or without the other
    /// ranks' states.
    pub fn resume_distributed(
        ck: &checkpoint::Checkpoint,
        opts: ResumeOptions,
        comm: std::sync::Arc<dyn crate::distributed::Collective>,
    ) -> Result<Self> {
        let bad = |m: String| ProximaError::Checkpoint(format!("cannot resume {}: {m}", ck.path()));
        let (rank, size) = (comm.rank(), comm.size());
        let Some(ranks) = ck.meta.extra.get("mpi_ranks") else {
            return Err(bad("it is a checkpoint of a run in one process, not of a distributed run: resume it without mpirun (one process's envs and sampling streams are not a split over ranks)".into()));
        };
        let ranks: usize = ranks
            .parse()
            .ok()
            .filter(|&r| r >= 1)
            .ok_or_else(|| bad(format!("mpi_ranks `{ranks}` is not a number of ranks")))?;
        if ranks != size {
            return Err(bad(format!(
                "it is a checkpoint of {ranks} MPI ranks and this job has {size}: resume it with `mpirun -np {ranks}` (each rank's envs and sampling streams are in it; another split would be another run)"
            )));
        }
        let others: Vec<String> = match ck.meta.extra.get("mpi_rank_states") {
            Some(j) => serde_json::from_str(j).map_err(|e| bad(format!("malformed mpi_rank_states ({e})")))?,
            None => return Err(bad("it holds rank 0's envs and sampling streams only (written before the first update, or by an earlier version)".into())),
        };
        if others.len() + 1 != ranks {
            return Err(bad(format!("mpi_rank_states holds {} ranks' states, not {}", others.len(), ranks - 1)));
        }
        let cfg = resumed_config(ck, opts, size)?;
        let tr = Trainer::distributed(&ck.meta.env_id, cfg, comm)?;
        let first = parse_snapshot(ck, ck.meta.extra.get("trainer_state").map(String::as_str))?;
        let snap = match rank {
            0 => first,
            r => TrainerSnapshot { recent: first.recent, ..parse_snapshot(ck, Some(&others[r - 1]))? },
        };
        let mut tr = tr.restore(ck, snap)?;
        if rank == 0 {
            tr.rank_states = Some((ck.meta.update, others));
        }
        Ok(tr)
    }

    /// A new trainer of the checkpoint's run put in its saved state: weights, optimiser,
    /// envs, streams, counters.
    fn restore(mut self, ck: &checkpoint::Checkpoint, snap: TrainerSnapshot) -> Result<Self> {
        let bad = |m: &str| ProximaError::Checkpoint(format!("cannot resume: {m}"));
        if snap.envs.len() != self.cfg.n_envs {
            return Err(bad(&format!("the checkpoint holds {} envs, the config {}", snap.envs.len(), self.cfg.n_envs)));
        }
        self.load_weights(ck)?;
        if snap.policy_obs.len() != self.collector.obs.len() {
            return Err(bad("observations of the wrong size in trainer_state"));
        }
        self.rng = snap.rng.clone();
        restore_collector(&mut self, snap)?;
        let notes = ck.meta.extra.iter().filter(|(k, _)| k.starts_with(super::trainer::NOTE_PREFIX));
        self.notes.extend(notes.map(|(k, v)| (k.clone(), v.clone())));
        if let Algo::OnPolicy(OnPolicy::Ppg(ppg)) = &mut self.algo {
            restore_aux_buffer(ppg, ck)?;
        }
        self.global_step = ck.meta.global_step;
        self.update = ck.meta.update;
        self.recount_updates();
        self.clock.start_step = self.global_step;
        Ok(self)
    }

    /// The checkpoint's parameters and optimiser state into this trainer's (for SAC also its
    /// counters, log α and, where it was saved, the replay buffer).
    fn load_weights(&mut self, ck: &checkpoint::Checkpoint) -> Result<()> {
        ck.load_into(&mut self.policy)?;
        let state = ck.optimizer_state_for(OPTIMIZER, &ADAM_BUFFERS, &self.policy.param_shapes())?;
        match (&mut self.algo, &self.policy) {
            (Algo::OffPolicy(l), net) if net.is_off_policy() => {
                let (actor, critics) = net.off_policy_sizes().expect("off-policy networks");
                restore_off_policy(l, (actor.len(), critics.len()), state, ck)
            }
            (Algo::OnPolicy(OnPolicy::Ppg(ppg)), _) => {
                restore_adam(&mut self.opt, state);
                restore_adam(
                    &mut ppg.aux_opt,
                    ck.optimizer_state_for(AUX_OPTIMIZER, &ADAM_BUFFERS, &self.policy.param_shapes())?,
                );
                Ok(())
            }
            _ => {
                restore_adam(&mut self.opt, state);
                Ok(())
            }
        }
    }

    /// [`Trainer::save`], plus an off-policy run's replay buffer beside it (`<name>.replay.safetensors`, with
    /// `save_replay_buffer`; the earlier checkpoints' buffer files in the same folder are removed,
    /// so that one buffer, the latest, is kept): what a run directory's checkpoints are.
    ///
    /// # Errors
    /// `Io`.
    pub fn save_checkpoint(&self, path: &Path) -> Result<()> {
        self.save(path)?;
        if !matches!(self.algo, Algo::OffPolicy(_)) || !self.cfg.save_replay_buffer {
            return Ok(());
        }
        let replay = replay_path(path);
        self.save_replay_buffer(&replay)?;
        if let Some(dir) = path.parent() {
            for old in std::fs::read_dir(dir).into_iter().flatten().filter_map(|e| e.ok().map(|e| e.path())) {
                if old != replay && old.to_string_lossy().ends_with(REPLAY_SUFFIX) {
                    let _ = std::fs::remove_file(old); // an older buffer: the newest one is written
                }
            }
        }
        Ok(())
    }

    /// Writes an off-policy run's replay buffer to `path` (atomically; safetensors: the stored
    /// transitions, `observations`, `next_observations`, `actions`, `rewards`, `terminated`,
    /// `truncated`, flat f32, and the buffer's shape in the `replay_buffer` metadata): SB3's
    /// `save_replay_buffer`, the file checkpoints write beside them.
    ///
    /// # Errors
    /// `InvalidArgument` for an on-policy run (it has no replay buffer); `Io`.
    pub fn save_replay_buffer(&self, path: &Path) -> Result<()> {
        let Algo::OffPolicy(learner) = &self.algo else {
            return Err(no_replay_buffer(path));
        };
        let (arrays, meta) = learner.state().replay.to_parts();
        let shaped: Vec<crate::io::NamedTensor<'_>> =
            arrays.iter().map(|(n, v)| (n.to_string(), vec![v.len()], v.as_slice())).collect();
        let md = [("replay_buffer".to_string(), meta)].into_iter().collect();
        crate::io::write_f32_safetensors(path, &shaped, md)
    }

    /// Replaces an off-policy run's replay buffer with the one [`Trainer::save_replay_buffer`]
    /// wrote to `path` (SB3's `load_replay_buffer`): its transitions and where the next one goes.
    ///
    /// # Errors
    /// `InvalidArgument` for an on-policy run; `Io` for an unreadable file; `Checkpoint` for a
    /// file that is not a replay buffer or one of another shape (capacity, envs, observation or
    /// action size).
    pub fn load_replay_buffer(&mut self, path: &Path) -> Result<()> {
        let Algo::OffPolicy(learner) = &mut self.algo else {
            return Err(no_replay_buffer(path));
        };
        read_replay(learner, path)
    }

    /// Takes a checkpoint's parameters, optimiser state, counters (so the learning-rate
    /// schedule continues), normalisation statistics and β into this trainer, whose envs stay
    /// its own: their running episodes and the sampling RNG are not restored (Stable-Baselines3's
    /// `load(path, env=...)`; for the exact resume use [`Trainer::resume`]).
    ///
    /// # Errors
    /// `Checkpoint` when the network, the optimiser state or the normalisation statistics do not
    /// fit this trainer's.
    pub fn load_state_from(&mut self, ck: &checkpoint::Checkpoint) -> Result<()> {
        self.load_weights(ck)?;
        if let Some(mut norm) = super::eval::saved_normalizer(ck)? {
            let obs_dim = self.policy.spec().obs_dim;
            if let Some(n) = norm.obs_rms.as_ref().map(|r| r.mean.len()).filter(|&n| n != obs_dim) {
                return Err(ProximaError::Checkpoint(format!(
                    "{}: normalisation statistics of {n} observation values for envs of {obs_dim}",
                    ck.path()
                )));
            }
            norm.returns = vec![0.0; self.cfg.n_envs]; // these envs start new episodes
            self.collector.norm = norm;
            self.collector.obs = self.collector.venv.obs().to_vec();
            self.collector.norm.normalize_obs(&mut self.collector.obs);
        }
        let snap: Option<TrainerSnapshot> =
            ck.meta.extra.get("trainer_state").and_then(|j| serde_json::from_str(j).ok());
        if let (Some(b), Algo::OnPolicy(OnPolicy::Ppo { kl_coef, .. })) = (snap.and_then(|s| s.kl_coef), &mut self.algo)
        {
            *kl_coef = b;
        }
        self.global_step = ck.meta.global_step;
        // Iterations of this run's size (these envs may be more or fewer than the file's):
        // the checkpoint's own count when the size is the same.
        self.update = self.global_step / self.steps_per_iteration();
        self.recount_updates();
        self.clock.start_step = self.global_step;
        Ok(())
    }

    /// Saves the network and optimiser state to `path` (atomically); for PPG also its auxiliary
    /// phase's Adam (under [`AUX_OPTIMIZER`]) and auxiliary buffer (`data.ppg.observations`,
    /// `data.ppg.returns`).
    pub fn save(&self, path: &Path) -> Result<()> {
        let main = self.optimizer_state();
        let Algo::OnPolicy(OnPolicy::Ppg(ppg)) = &self.algo else {
            return checkpoint::save(path, &self.policy, &[(OPTIMIZER, &main)], &self.checkpoint_meta());
        };
        let o = &ppg.aux_opt;
        let aux = OptimizerState { t: o.t, buffers: vec![("m".into(), o.m.clone()), ("v".into(), o.v.clone())] };
        let b = &ppg.aux;
        let rows = b.returns.len();
        let data = [
            ("ppg.observations".to_string(), vec![rows, b.obs_dim], b.observations.as_slice()),
            ("ppg.returns".to_string(), vec![rows], b.returns.as_slice()),
        ];
        let opts = [(OPTIMIZER, &main), (AUX_OPTIMIZER, &aux)];
        checkpoint::save_with_data(path, &self.policy, &opts, &self.checkpoint_meta(), &data)
    }

    /// The optimiser's state as a checkpoint stores it (under [`OPTIMIZER`]): for the off-policy
    /// algorithms one array per parameter of their networks, the actor's moments from the
    /// actor's Adam, the critics' from the critics' Adam, zeros for the targets (their step
    /// counts are in the trainer state).
    pub fn optimizer_state(&self) -> OptimizerState {
        if let (Algo::OffPolicy(l), Some((actor, critics))) = (&self.algo, self.policy.off_policy_sizes()) {
            let shapes = self.policy.param_shapes();
            let targets = &shapes[actor.len() + critics.len()..];
            let zeros: Vec<Vec<f32>> = targets.iter().map(|(_, s)| vec![0.0; s.iter().product()]).collect();
            let join = |a: &[Vec<f32>], b: &[Vec<f32>]| [a, b, &zeros].concat();
            let st = l.state();
            return OptimizerState {
                t: st.critic_opt.t,
                buffers: vec![
                    ("m".into(), join(&st.actor_opt.m, &st.critic_opt.m)),
                    ("v".into(), join(&st.actor_opt.v, &st.critic_opt.v)),
                ],
            };
        }
        OptimizerState {
            t: self.opt.t,
            buffers: vec![("m".into(), self.opt.m.clone()), ("v".into(), self.opt.v.clone())],
        }
    }
}

/// The name PPG's auxiliary-phase Adam is saved under in a checkpoint.
pub const AUX_OPTIMIZER: &str = "aux_optim";

/// PPG's auxiliary buffer from a checkpoint (exact resume).
fn restore_aux_buffer(ppg: &mut crate::algo::ppg::Ppg, ck: &checkpoint::Checkpoint) -> Result<()> {
    let bad = |m: String| ProximaError::Checkpoint(format!("{}: {m}", ck.path()));
    let (Some((_, obs)), Some((_, returns))) = (ck.data("ppg.observations"), ck.data("ppg.returns")) else {
        return Err(bad(
            "a PPG checkpoint without its auxiliary buffer (data.ppg.observations, data.ppg.returns)".into()
        ));
    };
    ppg.aux.load(obs, returns, ppg.params.n_iteration).map_err(|e| match e {
        ProximaError::Checkpoint(m) => bad(m),
        other => other,
    })
}

/// The buffers of [`Optimizer`]'s state in a checkpoint: its first and second moments (RMSprop uses
/// `v` only; `m` stays 0).
const ADAM_BUFFERS: [&str; 2] = ["m", "v"];

/// Where a checkpoint's SAC replay buffer is written: `update_000010.safetensors` →
/// `update_000010.replay.safetensors`.
pub fn replay_path(checkpoint: &Path) -> std::path::PathBuf {
    checkpoint.with_extension(REPLAY_SUFFIX.trim_start_matches('.'))
}

/// The ending of a replay-buffer file's name.
pub const REPLAY_SUFFIX: &str = ".replay.safetensors";

/// An off-policy run's optimisers (for `na` actor and `nc` critic parameters), counters (SAC:
/// log α) and, where saved, replay buffer from a checkpoint.
fn restore_off_policy(
    learner: &mut Learner,
    (na, nc): (usize, usize),
    state: OptimizerState,
    ck: &checkpoint::Checkpoint,
) -> Result<()> {
    let bad = |m: &str| ProximaError::Checkpoint(format!("{}: {m}", ck.path()));
    let mut bufs = state.buffers.into_iter().map(|(_, b)| b);
    let (m, v) = (bufs.next().unwrap_or_default(), bufs.next().unwrap_or_default());
    if m.len() < na + nc || v.len() < na + nc {
        return Err(bad("the optimiser state does not cover the networks"));
    }
    let st = learner.state_mut();
    (st.actor_opt.m, st.actor_opt.v) = (m[..na].to_vec(), v[..na].to_vec());
    (st.critic_opt.m, st.critic_opt.v) = (m[na..na + nc].to_vec(), v[na..na + nc].to_vec());
    let text = ck.meta.extra.get("off_policy_state").ok_or_else(|| bad("no off_policy_state"))?;
    let snap: OffPolicySnapshot =
        serde_json::from_str(text).map_err(|e| bad(&format!("malformed off_policy_state ({e})")))?;
    learner.restore(&snap);
    let replay = replay_path(Path::new(ck.path()));
    if !replay.is_file() {
        tracing::warn!(
            "{}: no replay buffer beside this checkpoint ({} is written beside checkpoints/update_<n>.safetensors when save_replay_buffer = true): training continues from an empty buffer, so the run is not the uninterrupted one",
            ck.path(),
            replay.display()
        );
        return Ok(());
    }
    let hint = |e: ProximaError| {
        let why = match e {
            ProximaError::Checkpoint(m) => m, // already says it is a checkpoint error
            other => other.to_string(),
        };
        ProximaError::Checkpoint(format!(
            "{why} (the replay buffer {} cannot be used: remove it to resume from an empty buffer, not exactly)",
            replay.display()
        ))
    };
    read_replay(learner, &replay).map_err(hint)
}

/// Reads the replay buffer at `path` into `learner`'s ([`Trainer::load_replay_buffer`]).
fn read_replay(learner: &mut Learner, path: &Path) -> Result<()> {
    let (meta, file) = crate::io::read_f32_safetensors(path, |md, err| {
        md.get("replay_buffer").cloned().ok_or_else(|| err("not a replay buffer (no `replay_buffer` metadata)".into()))
    })?;
    learner.state_mut().replay.load_parts(&meta, &|name| file.get(name).map(|(_, v)| v.to_vec()))
}

/// Puts a checkpoint's optimiser state (read with [`ADAM_BUFFERS`]) back into `opt`.
fn restore_adam(opt: &mut Optimizer, state: OptimizerState) {
    let mut buffers = state.buffers.into_iter().map(|(_, b)| b);
    opt.m = buffers.next().unwrap_or_default();
    opt.v = buffers.next().unwrap_or_default();
    opt.t = state.t;
}

/// The error for a replay-buffer file asked of an on-policy run, naming `path`.
fn no_replay_buffer(path: &Path) -> ProximaError {
    ProximaError::InvalidArgument(format!("{}: an on-policy run has no replay buffer", path.display()))
}

/// The config a checkpoint's run continues with. It starts from the preset the run itself
/// started from: checkpoints written before optional keys were recorded as "none" leave them
/// out, and they must not fall back to another preset's values. `opts` are then set over it.
fn resumed_config(ck: &checkpoint::Checkpoint, opts: ResumeOptions, ranks: usize) -> Result<ValidConfig> {
    let saved = ck.meta.config_toml.parse::<toml::Table>().ok();
    let preset = Config::saved_preset(&ck.meta.config_toml);
    let mut cfg = Config::layered(&preset, Some(&ck.meta.config_toml), &[])?;
    if saved.is_some_and(|t| !t.contains_key("backend")) {
        cfg.backend = Backend::Candle; // saved before the key existed: trained on candle
    }
    match ck.meta.extra.get("backend").map(|b| b.parse::<Backend>()) {
        // What `auto` meant then, where it now means another backend.
        Some(Ok(b)) if cfg.backend == Backend::Auto && b != cfg.resolved_backend() => cfg.backend = b,
        // Saved before the record, when `auto` put the off-policy networks on candle.
        None if cfg.backend == Backend::Auto && cfg.is_off_policy() => cfg.backend = Backend::Candle,
        _ => {}
    }
    if let Some(t) = opts.total_timesteps {
        cfg.total_timesteps = t;
    }
    if let Some(b) = opts.backend {
        cfg.backend = b;
    }
    if let Some(v) = opts.vector_env {
        cfg.vector_env = v;
    }
    let cfg = cfg.validate_over(ranks)?;
    if cfg.algo == AlgoName::A3c {
        return Err(ProximaError::Unsupported(
            "A3C runs cannot be resumed: the asynchronous workers' interleaving is not reproducible, so an exact resume is impossible; start a new run (its model.safetensors can still be evaluated)".into(),
        ));
    }
    Ok(cfg)
}

/// A recurrent policy's hidden states back into the collector: the saved ones when the envs
/// continue their episodes (`continued`), else zero states at new episodes' starts.
///
/// # Errors
/// `Checkpoint` when the checkpoint's hidden states are not this policy's.
fn restore_hidden_state(
    c: &mut crate::collect::Collector,
    hidden: Option<(Vec<f32>, Vec<bool>)>,
    continued: bool,
) -> Result<()> {
    match hidden {
        Some((state, starts)) if state.len() == c.rnn_state.len() && starts.len() == c.episode_starts.len() => {
            if continued {
                (c.rnn_state, c.episode_starts) = (state, starts);
            }
            Ok(())
        }
        None if c.rnn_state.is_empty() => Ok(()),
        _ => Err(ProximaError::Checkpoint(
            "cannot resume: the checkpoint's hidden states (a recurrent policy's) are not this run's".into(),
        )),
    }
}

/// Puts the envs, observations, statistics and β of `snap` back into `tr`.
fn restore_collector(tr: &mut Trainer, snap: TrainerSnapshot) -> Result<()> {
    let c = &mut tr.collector;
    for (env, s) in c.venv.envs_mut().iter_mut().zip(&snap.envs) {
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
    match (snap.env_streams, c.env_streams().is_empty()) {
        (Some(streams), false) => c.set_env_streams(streams)?,
        (None, true) => {}
        _ => {
            return Err(ProximaError::Checkpoint(
                "cannot resume: the checkpoint's sampling streams (one per env, or one for all) are not this run's"
                    .into(),
            ))
        }
    }
    c.norm = snap.norm;
    if snap.envs.iter().all(|e| e.state.is_some()) {
        // Native envs: continue the very episodes that were running.
        c.venv.restore(snap.obs, snap.ep_return, snap.ep_len)?;
        c.obs = snap.policy_obs;
    } else {
        // Envs whose state lives elsewhere (the Python bridge): they start new episodes
        // (reset with the run's seeds), seen through the restored normalisation statistics.
        c.obs = c.venv.obs().to_vec();
        c.norm.normalize_obs(&mut c.obs);
    }
    c.stats = EpisodeStats::from_records(snap.recent);
    restore_hidden_state(c, snap.hidden, snap.envs.iter().all(|e| e.state.is_some()))?;
    tr.clock.elapsed_offset = snap.time_elapsed;
    if let (Some(b), Algo::OnPolicy(OnPolicy::Ppo { kl_coef, .. })) = (snap.kl_coef, &mut tr.algo) {
        *kl_coef = b;
    }
    Ok(())
}
