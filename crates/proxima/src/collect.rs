//! The collector: N environments, the normalisation statistics, the current observations and
//! the episode statistics — everything between the envs and an algorithm. It runs π_θold for T
//! steps into a [`RolloutBuffer`]; it knows nothing of losses or optimisers, so every
//! algorithm (and every A3C worker) collects through it.

use crate::distributed::{Collective, EnvSplit};
use crate::env::vec_env::{EpisodeRecord, SyncVectorEnv};
use crate::env::Env;
use crate::error::{ProximaError, Result};
use crate::normalize::Normalizer;
use crate::policy::distributions::mask_logits_in_place;
use crate::policy::{ActOutput, Policy};
use crate::rollout::RolloutBuffer;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::VecDeque;
use std::sync::Arc;

/// How many finished episodes the running means cover (SB3's `ep_info_buffer`, CleanRL's logs).
pub const EPISODE_WINDOW: usize = 100;

/// The last [`EPISODE_WINDOW`] finished episodes, for `ep_return_mean` / `ep_len_mean`.
#[derive(Clone, Debug, Default)]
pub struct EpisodeStats {
    recent: VecDeque<EpisodeRecord>,
}

impl EpisodeStats {
    /// Statistics that start from `records` (the oldest first; a resumed run's).
    pub fn from_records(records: impl IntoIterator<Item = EpisodeRecord>) -> Self {
        let mut s = EpisodeStats::default();
        records.into_iter().for_each(|r| s.push(r));
        s
    }

    /// Adds a finished episode, dropping the oldest beyond the window.
    pub fn push(&mut self, ep: EpisodeRecord) {
        if self.recent.len() == EPISODE_WINDOW {
            self.recent.pop_front();
        }
        self.recent.push_back(ep);
    }

    /// The episodes in the window, oldest first.
    pub fn records(&self) -> impl Iterator<Item = &EpisodeRecord> {
        self.recent.iter()
    }

    /// Mean undiscounted return over the window (None before the first episode).
    pub fn return_mean(&self) -> Option<f64> {
        self.mean(|e| e.episode_return)
    }

    /// Mean length over the window (None before the first episode).
    pub fn len_mean(&self) -> Option<f64> {
        self.mean(|e| e.length as f64)
    }

    fn mean(&self, f: impl Fn(&EpisodeRecord) -> f64) -> Option<f64> {
        (!self.recent.is_empty()).then(|| self.recent.iter().map(f).sum::<f64>() / self.recent.len() as f64)
    }
}

/// Stores π_θold's distribution parameters for every transition of `buf` (when it keeps
/// them: `head_dim > 0`) as one batched forward pass at θ_old over the rollout gives them:
/// `heads_kept` says the rollout's own per-step passes already wrote them (a policy whose rows do
/// not depend on their batch, [`ActOutput::head`]: the same bits), and only log σ is read;
/// otherwise that pass is made now. The candle network's matrix products round a row
/// differently in a batch of N rows than in one of N·T (measured: 74% of CartPole's logits
/// differ in their last bits), and the update has always measured the KL against the latter.
fn store_old_dist(policy: &dyn Policy, buf: &mut RolloutBuffer, heads_kept: bool) -> Result<()> {
    if buf.head_dim == 0 {
        return Ok(());
    }
    if heads_kept {
        buf.old_log_std = policy.dist_params_host(&[])?.1;
    } else {
        (buf.old_head, buf.old_log_std) = policy.dist_params_host(&buf.observations.to_f32())?;
    }
    // π_θold is the masked distribution (a no-op on heads the rollout kept: already masked).
    mask_logits_in_place(&mut buf.old_head, &buf.action_masks);
    Ok(())
}

/// One step of the N envs as an observer sees it (Stable-Baselines3's `new_obs`, `rewards`,
/// `dones`, `infos` of `callback.on_step`): raw observations and rewards, before normalisation;
/// and the policy collecting them with its normaliser (unchanged until the rollout's update),
/// for an observer that wants to act with it.
#[derive(Clone, Copy)]
pub struct StepView<'a> {
    /// π_θ and V_θ as they collect this rollout.
    pub policy: &'a dyn Policy,
    /// The observation normalisation the policy sees through.
    pub norm: &'a Normalizer,
    /// Env steps after this one, over all envs.
    pub global_step: u64,
    /// The observations the envs returned, `[N, obs_dim]` (a new episode's first where one
    /// ended; its last is in `final_obs`).
    pub new_obs: &'a [f32],
    /// The ended episodes' last observations, per env (`None` where none ended).
    pub final_obs: &'a [Option<Vec<f32>>],
    /// r_t per env, unscaled, `[N]`.
    pub rewards: &'a [f32],
    /// Per env, `[N]`.
    pub terminated: &'a [bool],
    /// Per env, `[N]`.
    pub truncated: &'a [bool],
    /// Episodes that ended at this step.
    pub finished: &'a [EpisodeRecord],
}

/// Watches a rollout step by step (the Python package's SB3 callbacks): `on_step` after every
/// step of the N envs — `Ok(false)` stops the rollout there, and the iteration ends without an
/// update, as SB3's `collect_rollouts` returning `False` — and `on_rollout_end` between the
/// rollout and its update.
pub trait StepObserver {
    /// After each step.
    ///
    /// # Errors
    /// The observer's own (they stop training).
    fn on_step(&mut self, step: &StepView<'_>) -> Result<bool>;

    /// After the rollout's last step, before GAE and the update, with the policy that collected
    /// it and its normaliser.
    ///
    /// # Errors
    /// The observer's own.
    fn on_rollout_end(&mut self, _policy: &dyn Policy, _norm: &Normalizer) -> Result<()> {
        Ok(())
    }
}

/// N envs in lockstep with the run's normalisation and episode statistics.
pub struct Collector {
    /// The N envs.
    pub venv: SyncVectorEnv,
    /// Observation/reward normalisation statistics (inactive unless configured).
    pub norm: Normalizer,
    /// The current observations as the policy sees them (normalised when configured), `[N, obs_dim]`.
    pub obs: Vec<f32>,
    /// The last finished episodes.
    pub stats: EpisodeStats,
    /// Clipped actions sent to the envs, `[N, act_dim]` (reused each step).
    env_actions: Vec<f32>,
    /// The policy's output of the current step (reused each step).
    act: ActOutput,
    /// One sampling stream per env (a distributed run, [`Collector::sample_per_env`]); empty:
    /// every env's actions come from the caller's one stream.
    env_rngs: Vec<ChaCha8Rng>,
    /// One env's output, when each env samples from its own stream.
    one: ActOutput,
    /// The envs' action masks for the current observations, `[N, mask_dim]` (a masked
    /// rollout's, refreshed before each step).
    masks: Vec<u8>,
    /// A masked rollout's masks are all valid instead of the envs' (sb3-contrib's
    /// `learn(use_masking=False)`: its buffer's masks stay ones).
    pub ignore_masks: bool,
    /// A recurrent policy's hidden state per env, `[N, state_dim]` (empty for a feed-forward
    /// policy), and whether each env's current observation starts an episode (its state is
    /// zeroed before the policy reads it).
    pub rnn_state: Vec<f32>,
    /// `[N]`, see `rnn_state`.
    pub episode_starts: Vec<bool>,
    /// A distributed run's engine and split: the normaliser's statistics take in every rank's
    /// rows.
    across: Option<(Arc<dyn Collective>, EnvSplit)>,
}

impl Collector {
    /// `n_envs` envs built by `make_env` and reset with seeds `seed..seed+N`, seen through
    /// `norm` (whose observation statistics take in the first observations).
    ///
    /// # Errors
    /// `n_envs` = 0, envs whose spaces differ, and the envs' own errors; `norm`'s.
    pub fn new(
        n_envs: usize,
        seed: u64,
        make_env: &mut dyn FnMut() -> crate::env::Result<Box<dyn Env>>,
        norm: impl FnOnce(&SyncVectorEnv) -> Result<Normalizer>,
    ) -> Result<Self> {
        Self::from_venv(SyncVectorEnv::new(n_envs, &mut *make_env)?, seed, norm)
    }

    /// [`Collector::new`] on a vector env already built (a Gymnasium vector env behind the
    /// bridge: [`SyncVectorEnv::from_batch`]).
    ///
    /// # Errors
    /// The envs' own errors; `norm`'s.
    pub fn from_venv(
        mut venv: SyncVectorEnv,
        seed: u64,
        norm: impl FnOnce(&SyncVectorEnv) -> Result<Normalizer>,
    ) -> Result<Self> {
        let n_envs = venv.num_envs();
        venv.reset(seed)?;
        let mut norm = norm(&venv)?;
        let obs = norm.update_and_normalize(venv.obs());
        let act_dim = venv.action_space().flat_dim();
        Ok(Collector {
            venv,
            norm,
            obs,
            stats: EpisodeStats::default(),
            env_actions: vec![0f32; n_envs * act_dim],
            act: ActOutput::default(),
            env_rngs: Vec::new(),
            one: ActOutput::default(),
            masks: Vec::new(),
            ignore_masks: false,
            rnn_state: Vec::new(),
            episode_starts: Vec::new(),
            across: None,
        })
    }

    /// From now on the normaliser's statistics take in every rank's observations and returns
    /// ([`crate::distributed`]); `norm` replaces the current normaliser and takes in the first
    /// observations of every rank, as one process stepping all the envs would have.
    ///
    /// # Errors
    /// The engine's.
    pub fn normalize_across(&mut self, norm: Normalizer, comm: Arc<dyn Collective>, split: EnvSplit) -> Result<()> {
        self.norm = norm;
        self.norm.update_and_normalize_across(self.venv.obs(), &mut self.obs, Some((&*comm, split)))?;
        self.across = Some((comm, split));
        Ok(())
    }

    /// From now on env `i` samples its actions from a stream of its own: ChaCha8 keyed by
    /// `seed`, stream `first_env + i + 1` (its global index in a distributed run, [`crate::distributed`]),
    /// so that no env's draws depend on how many envs share a process.
    pub fn sample_per_env(&mut self, seed: u64, first_env: usize) {
        self.env_rngs = (0..self.venv.num_envs())
            .map(|i| {
                let mut r = ChaCha8Rng::seed_from_u64(seed);
                r.set_stream((first_env + i + 1) as u64);
                r
            })
            .collect();
    }

    /// The per-env sampling streams ([`Collector::sample_per_env`]); empty when every env samples
    /// from the caller's stream.
    pub fn env_streams(&self) -> &[ChaCha8Rng] {
        &self.env_rngs
    }

    /// Puts saved per-env sampling streams back (an exact resume).
    ///
    /// # Errors
    /// `Checkpoint` when their number is not this collector's.
    pub fn set_env_streams(&mut self, streams: Vec<ChaCha8Rng>) -> Result<()> {
        if streams.len() != self.env_rngs.len() {
            return Err(ProximaError::Checkpoint(format!(
                "cannot resume: {} sampling streams for {} per-env streams",
                streams.len(),
                self.env_rngs.len()
            )));
        }
        self.env_rngs = streams;
        Ok(())
    }

    /// From now on the policy collecting is recurrent with `state_dim` values of hidden state per
    /// env: every env starts from a zero state at an episode's start.
    pub fn hold_hidden_state(&mut self, state_dim: usize) {
        self.rnn_state = vec![0.0; self.venv.num_envs() * state_dim];
        self.episode_starts = vec![true; self.venv.num_envs()];
    }

    /// Whether the envs have action masks (sb3-contrib's `is_masking_supported`): asks them for
    /// their current ones, which a masked rollout then starts from.
    ///
    /// # Errors
    /// The envs' (a mask without a valid action among them).
    pub fn has_action_masks(&mut self) -> Result<bool> {
        self.masks.resize(self.venv.num_envs() * self.venv.action_space().mask_dim(), 1);
        Ok(self.venv.action_masks(&mut self.masks)?)
    }

    /// The envs' current action masks into `self.masks` (a masked rollout: `mask_dim` > 0).
    fn refresh_masks(&mut self, mask_dim: usize) -> Result<()> {
        self.masks.resize(self.venv.num_envs() * mask_dim, 1);
        if !self.venv.action_masks(&mut self.masks)? {
            return Err(ProximaError::InvalidArgument(format!(
                "{}: the envs' action_masks() went away during a masked rollout",
                self.venv.env_id()
            )));
        }
        Ok(())
    }

    /// π's actions for the current observations into `self.act`: one pass sampling from `rng`,
    /// or with per-env streams one pass per env; masked by `self.masks` when `masked`.
    fn act_all<R: Rng>(&mut self, policy: &dyn Policy, rng: &mut R, masked: bool) -> Result<()> {
        let masks = masked.then_some(&self.masks[..]);
        if !self.rnn_state.is_empty() {
            let (starts, state) = (&self.episode_starts, &mut self.rnn_state);
            return policy.act_recurrent(&self.obs, masks, (starts, state), false, rng, &mut self.act);
        }
        if self.env_rngs.is_empty() {
            return policy.act_into(&self.obs, masks, false, rng, &mut self.act);
        }
        let (od, n) = (self.obs.len() / self.env_rngs.len(), self.env_rngs.len());
        let md = if masked { self.masks.len() / n } else { 0 };
        let a = &mut self.act;
        a.actions.clear();
        a.log_probs.clear();
        a.values.clear();
        a.head.clear();
        for (e, (obs, env_rng)) in self.obs.chunks(od).zip(&mut self.env_rngs).enumerate() {
            let row_masks = masks.map(|m| &m[e * md..(e + 1) * md]);
            policy.act_into(obs, row_masks, false, env_rng, &mut self.one)?;
            a.actions.extend_from_slice(&self.one.actions);
            a.log_probs.extend_from_slice(&self.one.log_probs);
            a.values.extend_from_slice(&self.one.values);
            a.head.extend_from_slice(&self.one.head);
        }
        Ok(())
    }

    /// Runs π in the N envs for the buffer's T steps, filling `buf` (observations, actions,
    /// log-probs, values, rewards — scaled when configured —, terminated, truncated and
    /// V(final observation) of truncated steps), with actions sampled from `rng`. `step0` is the
    /// global step before the rollout; each finished episode is returned with the global step
    /// it ended at, and added to [`Collector::stats`].
    ///
    /// # Errors
    /// The envs' errors (non-finite observations or rewards, …) and the policy's.
    pub fn collect<R: Rng>(
        &mut self,
        policy: &dyn Policy,
        buf: &mut RolloutBuffer,
        rng: &mut R,
        step0: u64,
    ) -> Result<Vec<(u64, EpisodeRecord)>> {
        Ok(self.collect_observed(policy, buf, rng, step0, None)?.0)
    }

    /// [`Collector::collect`] with `observer` told of every step; returns the finished episodes
    /// and, when the observer stopped the rollout, the number of steps taken per env (the
    /// buffer then holds a partial rollout, not to be trained on — even when the stop came at
    /// the last step).
    ///
    /// # Errors
    /// As [`Collector::collect`], and the observer's.
    pub fn collect_observed<'o, R: Rng>(
        &mut self,
        policy: &dyn Policy,
        buf: &mut RolloutBuffer,
        rng: &mut R,
        step0: u64,
        mut observer: Option<&mut (dyn StepObserver + 'o)>,
    ) -> Result<(Vec<(u64, EpisodeRecord)>, Option<usize>)> {
        let (n, od, ad, hd, md) = (buf.n_envs, buf.obs_dim, buf.act_dim, buf.head_dim, buf.mask_dim);
        let mut finished = Vec::new();
        let mut heads_kept = hd > 0 && buf.old_head.len() == buf.n_steps * n * hd;
        if buf.state_dim > 0 {
            buf.rnn_state0.copy_from_slice(&self.rnn_state);
        }
        for t in 0..buf.n_steps {
            let row = t * n..(t + 1) * n;
            buf.observations.write(t * n * od, &self.obs)?;
            if buf.state_dim > 0 {
                buf.episode_starts[row.clone()].copy_from_slice(&self.episode_starts);
            }
            if md > 0 {
                if self.ignore_masks {
                    self.masks.clear();
                    self.masks.resize(n * md, 1);
                } else {
                    self.refresh_masks(md)?;
                }
                buf.action_masks[t * n * md..(t + 1) * n * md].copy_from_slice(&self.masks);
            }
            self.act_all(policy, rng, md > 0)?;
            let out = &self.act;
            buf.actions[t * n * ad..(t + 1) * n * ad].copy_from_slice(&out.actions);
            buf.log_probs[row.clone()].copy_from_slice(&out.log_probs);
            buf.values[row.clone()].copy_from_slice(&out.values);
            heads_kept &= out.head.len() == n * hd;
            if heads_kept {
                buf.old_head[t * n * hd..(t + 1) * n * hd].copy_from_slice(&out.head);
            }
            self.env_actions.copy_from_slice(&out.actions);
            for a in self.env_actions.chunks_mut(ad) {
                policy.env_action(a); // clip to the Box; the unclipped sample stays stored
            }
            self.venv.step(&self.env_actions)?;
            buf.rewards[row.clone()].copy_from_slice(&self.venv.rewards);
            let (term, trunc) = (&self.venv.terminated, &self.venv.truncated);
            let across = self.across.as_ref().map(|(c, split)| (&**c, *split));
            self.norm.scale_rewards_across(&mut buf.rewards[row.clone()], |e| term[e] || trunc[e], across)?;
            self.norm.update_and_normalize_across(self.venv.obs(), &mut self.obs, across)?;
            buf.terminated[row.clone()].copy_from_slice(&self.venv.terminated);
            buf.truncated[row.clone()].copy_from_slice(&self.venv.truncated);
            for (e, start) in self.episode_starts.iter_mut().enumerate() {
                *start = term[e] || trunc[e];
            }
            self.bootstrap_truncated(policy, &mut buf.final_obs_values[row])?;
            let step = step0 + ((t + 1) * n) as u64;
            if let Some(o) = observer.as_deref_mut() {
                if !o.on_step(&self.view(step, policy))? {
                    self.record_finished(step, &mut finished);
                    return Ok((finished, Some(t + 1)));
                }
            }
            self.record_finished(step, &mut finished);
        }
        store_old_dist(policy, buf, heads_kept)?;
        Ok((finished, None))
    }

    /// One step of the N envs with `env_actions` `[N, act_dim]` (already in the env's own
    /// range) chosen by the caller — an off-policy algorithm's loop: the current observations
    /// move on (normalised when configured), `observer` (with the policy acting) is told of the
    /// step, the episodes that ended at global step `step` go into the statistics and
    /// `finished`; the step's rewards, flags and final observations stay in
    /// [`Collector::venv`] until the next step. Returns the observer's answer (`true` without
    /// one): `false` asks the caller to stop.
    ///
    /// # Errors
    /// The envs' errors; the observer's.
    pub fn step_with<'o>(
        &mut self,
        env_actions: &[f32],
        step: u64,
        finished: &mut Vec<(u64, EpisodeRecord)>,
        observer: Option<(&dyn Policy, &mut (dyn StepObserver + 'o))>,
    ) -> Result<bool> {
        self.venv.step(env_actions)?;
        self.norm.update_and_normalize_into(self.venv.obs(), &mut self.obs);
        let keep = match observer {
            Some((policy, o)) => o.on_step(&self.view(step, policy))?,
            None => true,
        };
        self.record_finished(step, finished);
        Ok(keep)
    }

    /// This step as an observer sees it.
    fn view<'a>(&'a self, global_step: u64, policy: &'a dyn Policy) -> StepView<'a> {
        let v = &self.venv;
        StepView {
            policy,
            norm: &self.norm,
            global_step,
            new_obs: v.obs(),
            final_obs: &v.final_obs,
            rewards: &v.rewards,
            terminated: &v.terminated,
            truncated: &v.truncated,
            finished: &v.finished,
        }
    }

    /// Moves the episodes that ended at `step` into the statistics and `finished`.
    fn record_finished(&mut self, step: u64, finished: &mut Vec<(u64, EpisodeRecord)>) {
        for ep in self.venv.finished.drain(..) {
            self.stats.push(ep);
            finished.push((step, ep));
        }
    }

    /// V(final observation) of the envs whose episode was truncated (not terminated) at the
    /// last step, into `out` `[N]` (0 elsewhere), with one batched forward pass.
    fn bootstrap_truncated(&self, policy: &dyn Policy, out: &mut [f32]) -> Result<()> {
        out.fill(0.0);
        let v = &self.venv;
        let cut: Vec<usize> = (0..out.len()).filter(|&e| v.truncated[e] && !v.terminated[e]).collect();
        if cut.is_empty() {
            return Ok(());
        }
        let mut fo: Vec<f32> =
            cut.iter().flat_map(|&e| v.final_obs[e].clone().expect("final obs of an ended episode")).collect();
        self.norm.normalize_obs(&mut fo);
        let values = if self.rnn_state.is_empty() {
            policy.predict_values(&fo)?
        } else {
            // V(final observation) read with the hidden state the episode's last step left.
            let sd = self.rnn_state.len() / out.len();
            let states: Vec<f32> = cut.iter().flat_map(|&e| &self.rnn_state[e * sd..(e + 1) * sd]).copied().collect();
            policy.predict_values_recurrent(&fo, &vec![false; cut.len()], &states)?
        };
        for (k, &e) in cut.iter().enumerate() {
            out[e] = values[k];
        }
        Ok(())
    }

    /// V(s_T) of the current observations `[N]`: GAE's bootstrap after the last step.
    ///
    /// # Errors
    /// The policy's.
    pub fn last_values(&self, policy: &dyn Policy) -> Result<Vec<f32>> {
        if self.rnn_state.is_empty() {
            return policy.predict_values(&self.obs);
        }
        policy.predict_values_recurrent(&self.obs, &self.episode_starts, &self.rnn_state)
    }
}
