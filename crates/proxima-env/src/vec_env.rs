//! N environments stepped in lockstep, with autoreset.
//!
//! **Autoreset convention: same-step** (Gymnasium's `AutoresetMode.SAME_STEP`, SB3's `VecEnv`).
//! When env `i` ends an episode at a step (terminated or truncated), it is reset within that
//! same `step` call: the observation returned for `i` is the *first observation of the next
//! episode*, and the last observation of the finished episode is kept in
//! [`SyncVectorEnv::final_obs`]`[i]`, so a truncated episode's value V(final observation) can be
//! bootstrapped. Every row of a rollout is therefore a real transition (no dummy "reset" step as
//! in Gymnasium's default next-step mode).

use crate::atari::GameEpisode;
use crate::error::{EnvError, Result};
use crate::{Action, Env, Space};

/// How a vector env of bridged (Python) envs steps them (the config's `vector_env`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VectorMode {
    /// `gymnasium.vector.SyncVectorEnv`: the N envs in one Python call per step, in turn.
    Sync,
    /// `gymnasium.vector.AsyncVectorEnv`: one subprocess per env, stepped in parallel.
    Async,
    /// Proxima's own worker processes (one group of envs per core, one group stepped by the
    /// caller), raw bytes over spinning pipes.
    Subproc,
}

/// N environments stepped together by one object (a Gymnasium vector env behind the bridge),
/// with the same-step autoreset convention of this module.
pub trait BatchEnv: Send {
    /// The envs' id.
    fn id(&self) -> &str;
    /// N.
    fn num_envs(&self) -> usize;
    /// One env's observation space.
    fn observation_space(&self) -> Space;
    /// One env's action space.
    fn action_space(&self) -> Space;
    /// Resets every env, env `i` with seed `seed + i`, its observation into row `i` of `obs`
    /// (`[N, obs_dim]`).
    ///
    /// # Errors
    /// The envs' own errors.
    fn reset(&mut self, seed: u64, obs: &mut [f32]) -> Result<()>;
    /// Steps every env with its row of `actions` (`[N, act_dim]`, stored as f32), autoresetting
    /// those whose episode ended (same step), and fills `out`.
    ///
    /// # Errors
    /// The envs' own errors.
    fn step(&mut self, actions: &[f32], out: &mut BatchStep) -> Result<()>;
    /// Every env's [`Env::action_masks`] into `out` (`[N, mask_dim]`); `Ok(false)`, with `out`
    /// untouched, when the envs have no masks (the default).
    ///
    /// # Errors
    /// The envs' own.
    fn action_masks(&mut self, _out: &mut [bool]) -> Result<bool> {
        Ok(false)
    }
    /// One env's [`Env::observation_keys`] (empty for flat observations, the default).
    fn observation_keys(&self) -> Vec<crate::ObsKey> {
        Vec::new()
    }
}

/// What one [`BatchEnv::step`] returns, per env (each `[N]`, observations `[N, obs_dim]`).
#[derive(Clone, Debug, Default)]
pub struct BatchStep {
    /// The next observations: the first of a new episode where one ended.
    pub obs: Vec<f32>,
    /// r_t.
    pub rewards: Vec<f64>,
    /// Episode ended in a terminal state.
    pub terminated: Vec<bool>,
    /// Episode cut (time limit).
    pub truncated: Vec<bool>,
    /// The last observation of each episode that ended at this step.
    pub final_obs: Vec<Option<Vec<f32>>>,
    /// How each ended episode of an Atari env ended ([`GameEpisode::of`] of its step's info):
    /// a lost life or the game's end with its score; empty, or `None`, for other envs.
    pub games: Vec<Option<GameEpisode>>,
}

/// A finished episode: which env, its undiscounted return and its length in steps.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct EpisodeRecord {
    /// Index of the env in the vector.
    pub env_index: usize,
    /// Sum of rewards (an Atari env's: the game's unclipped score over all its lives).
    pub episode_return: f64,
    /// Steps (an Atari env's: the game's raw frames, no-ops and skipped frames included).
    pub length: usize,
}

/// N copies of an environment, stepped sequentially on the calling thread.
///
/// At these environment sizes (microseconds per step) threads cost more than they save; the
/// rollout is bound by the policy's forward pass, which is batched over all N envs.
pub struct SyncVectorEnv {
    envs: Vec<Box<dyn Env>>,
    /// The envs as one [`BatchEnv`] (then `envs` is empty), with its step's buffers.
    batch: Option<(Box<dyn BatchEnv>, BatchStep)>,
    /// The envs' id (kept here: a step's errors name it while the batch env is lent out).
    id: String,
    n: usize,
    obs_dim: usize,
    act_dim: usize,
    action_space: Space,
    observation_space: Space,
    obs: Vec<f32>,
    /// r_t of the last step, `[N]`.
    pub rewards: Vec<f32>,
    /// `terminated` of the last step, `[N]`.
    pub terminated: Vec<bool>,
    /// `truncated` of the last step, `[N]`.
    pub truncated: Vec<bool>,
    /// For envs whose episode ended at the last step, its final observation (before the reset).
    pub final_obs: Vec<Option<Vec<f32>>>,
    /// Episodes finished since the caller last drained this.
    pub finished: Vec<EpisodeRecord>,
    ep_return: Vec<f64>,
    ep_len: Vec<usize>,
    steps: u64,
}

impl SyncVectorEnv {
    /// Builds N envs with `make` (called N times).
    ///
    /// # Errors
    /// `InvalidArgument` for N = 0 or envs whose spaces differ; whatever `make` returns.
    pub fn new(n: usize, mut make: impl FnMut() -> Result<Box<dyn Env>>) -> Result<Self> {
        if n == 0 {
            return Err(EnvError::InvalidArgument("a vector env needs n_envs ≥ 1".into()));
        }
        let envs = (0..n).map(|_| make()).collect::<Result<Vec<_>>>()?;
        let (observation_space, action_space) = (envs[0].observation_space(), envs[0].action_space());
        if envs.iter().any(|e| e.observation_space() != observation_space || e.action_space() != action_space) {
            return Err(EnvError::InvalidArgument("all envs of a vector env must share their spaces".into()));
        }
        Ok(Self::with_spaces(envs, None, n, observation_space, action_space))
    }

    /// The N envs of one [`BatchEnv`] (a Gymnasium vector env): stepped with one call per step,
    /// seen exactly as [`SyncVectorEnv::new`]'s (same autoreset, final observations, episode
    /// records, NaN checks).
    ///
    /// # Errors
    /// `InvalidArgument` for N = 0.
    pub fn from_batch(batch: Box<dyn BatchEnv>) -> Result<Self> {
        let n = batch.num_envs();
        if n == 0 {
            return Err(EnvError::InvalidArgument("a vector env needs n_envs ≥ 1".into()));
        }
        let (observation_space, action_space) = (batch.observation_space(), batch.action_space());
        Ok(Self::with_spaces(Vec::new(), Some((batch, BatchStep::default())), n, observation_space, action_space))
    }

    fn with_spaces(
        envs: Vec<Box<dyn Env>>,
        batch: Option<(Box<dyn BatchEnv>, BatchStep)>,
        n: usize,
        observation_space: Space,
        action_space: Space,
    ) -> Self {
        let obs_dim = observation_space.flat_dim();
        let act_dim = action_space.flat_dim();
        let id = match &batch {
            Some((b, _)) => b.id().to_string(),
            None => envs[0].id().to_string(),
        };
        SyncVectorEnv {
            envs,
            batch,
            id,
            n,
            obs_dim,
            act_dim,
            action_space,
            observation_space,
            obs: vec![0.0; n * obs_dim],
            rewards: vec![0.0; n],
            terminated: vec![false; n],
            truncated: vec![false; n],
            final_obs: vec![None; n],
            finished: Vec::new(),
            ep_return: vec![0.0; n],
            ep_len: vec![0; n],
            steps: 0,
        }
    }

    /// The envs' id.
    pub fn env_id(&self) -> &str {
        &self.id
    }

    /// N.
    pub fn num_envs(&self) -> usize {
        self.n
    }
    /// The single env's observation space.
    pub fn observation_space(&self) -> &Space {
        &self.observation_space
    }
    /// The single env's action space.
    pub fn action_space(&self) -> &Space {
        &self.action_space
    }
    /// Current observations, `[N, obs_dim]`.
    pub fn obs(&self) -> &[f32] {
        &self.obs
    }
    /// The envs themselves (for saving their state); empty for a [`BatchEnv`], whose envs'
    /// state lives elsewhere.
    pub fn envs(&self) -> &[Box<dyn Env>] {
        &self.envs
    }
    /// Mutable access to the envs (for restoring their state).
    pub fn envs_mut(&mut self) -> &mut [Box<dyn Env>] {
        &mut self.envs
    }
    /// Running (unfinished) episode returns and lengths, `[N]` each.
    pub fn running_episodes(&self) -> (&[f64], &[usize]) {
        (&self.ep_return, &self.ep_len)
    }
    /// Restores running episode returns and lengths and the current observations (exact resume).
    pub fn restore(&mut self, obs: Vec<f32>, ep_return: Vec<f64>, ep_len: Vec<usize>) -> Result<()> {
        if obs.len() != self.obs.len() || ep_return.len() != self.n || ep_len.len() != self.n {
            return Err(EnvError::InvalidArgument("vector-env state of the wrong size".into()));
        }
        self.obs = obs;
        self.ep_return = ep_return;
        self.ep_len = ep_len;
        Ok(())
    }

    /// Resets every env; env `i` is seeded with `seed + i` (Gymnasium's vector-env convention).
    /// Returns the observations `[N, obs_dim]`.
    pub fn reset(&mut self, seed: u64) -> Result<&[f32]> {
        if let Some((b, _)) = &mut self.batch {
            b.reset(seed, &mut self.obs)?;
        }
        for i in 0..self.n {
            if self.batch.is_none() {
                let (o, _) = self.envs[i].reset(Some(seed.wrapping_add(i as u64)))?;
                self.obs[i * self.obs_dim..(i + 1) * self.obs_dim].copy_from_slice(&o);
            }
            self.check_obs(i, &self.obs[i * self.obs_dim..(i + 1) * self.obs_dim])?;
            self.ep_return[i] = 0.0;
            self.ep_len[i] = 0;
        }
        Ok(&self.obs)
    }

    /// Steps every env with its slice of `actions` (`[N, act_dim]`, already clipped to the
    /// action space), autoresetting finished episodes (same-step convention, see the module doc).
    ///
    /// # Errors
    /// `InvalidArgument` for a wrong-length action array; `NonFinite` naming env id, env index
    /// and step for a NaN/inf observation or reward; the env's own errors.
    pub fn step(&mut self, actions: &[f32]) -> Result<()> {
        let n = self.n;
        if actions.len() != n * self.act_dim {
            return Err(EnvError::InvalidArgument(format!(
                "vector env expected {} action values ({n} envs × {}), got {}",
                n * self.act_dim,
                self.act_dim,
                actions.len()
            )));
        }
        self.steps += 1;
        let discrete = matches!(self.action_space, Space::Discrete { .. });
        if discrete {
            if let Some(a) = actions.iter().find(|a| !(**a >= 0.0 && a.fract() == 0.0)) {
                return Err(EnvError::InvalidAction(format!(
                    "{}: discrete action {a} is not a non-negative integer",
                    self.env_id()
                )));
            }
        }
        if let Some((mut b, mut out)) = self.batch.take() {
            let r = b.step(actions, &mut out).and_then(|()| self.take_batch_step(&mut out));
            self.batch = Some((b, out));
            return r;
        }
        for i in 0..n {
            let a = &actions[i * self.act_dim..(i + 1) * self.act_dim];
            let action = if discrete { Action::Discrete(a[0] as usize) } else { Action::Continuous(a) };
            let r = self.envs[i].step(action)?;
            let next = if r.terminated || r.truncated {
                let (o, _) = self.envs[i].reset(None)?;
                self.check_obs(i, &o)?;
                Some(o)
            } else {
                None
            };
            let game = GameEpisode::of(&r.info);
            self.record(i, (r.reward, r.terminated, r.truncated), r.observation, next, game)?;
        }
        Ok(())
    }

    /// Takes one [`BatchEnv::step`]'s results as [`SyncVectorEnv::step`] takes each env's.
    fn take_batch_step(&mut self, out: &mut BatchStep) -> Result<()> {
        let (n, od) = (self.n, self.obs_dim);
        if out.obs.len() != n * od || out.rewards.len() != n || out.terminated.len() != n || out.truncated.len() != n {
            return Err(EnvError::Env(format!(
                "{}: the vector env's step returned arrays of the wrong size",
                self.env_id()
            )));
        }
        out.final_obs.resize(n, None);
        for i in 0..n {
            let row = out.obs[i * od..(i + 1) * od].to_vec();
            let (term, trunc) = (out.terminated[i], out.truncated[i]);
            let (last, next) = if term || trunc {
                let last = out.final_obs[i].take().ok_or_else(|| {
                    EnvError::Env(format!(
                        "{} (env index {i}) ended an episode without a final observation",
                        self.env_id()
                    ))
                })?;
                self.check_obs(i, &row)?;
                (last, Some(row))
            } else {
                (row, None)
            };
            let game = out.games.get(i).copied().flatten();
            self.record(i, (out.rewards[i], term, trunc), last, next, game)?;
        }
        Ok(())
    }

    /// Env `i`'s step: `last` its observation after the action (the final one when the episode
    /// ended, with `next` the new episode's first), checked and stored with the episode
    /// bookkeeping. `game` (an Atari env's, see [`GameEpisode::of`]) replaces the episode's record.
    fn record(
        &mut self,
        i: usize,
        (reward, terminated, truncated): (f64, bool, bool),
        last: Vec<f32>,
        next: Option<Vec<f32>>,
        game: Option<GameEpisode>,
    ) -> Result<()> {
        if !reward.is_finite() {
            return Err(EnvError::NonFinite(format!(
                "{} (env index {i}) returned reward {reward} at vector step {}",
                self.env_id(),
                self.steps
            )));
        }
        self.check_obs(i, &last)?;
        self.rewards[i] = reward as f32;
        self.terminated[i] = terminated;
        self.truncated[i] = truncated;
        self.ep_return[i] += reward;
        self.ep_len[i] += 1;
        let od = self.obs_dim;
        match next {
            Some(o) => {
                let record = match game {
                    None => Some((self.ep_return[i], self.ep_len[i])),
                    Some(GameEpisode::LifeLost) => None,
                    Some(GameEpisode::Over { score, frames }) => Some((score, frames)),
                };
                if let Some((episode_return, length)) = record {
                    self.finished.push(EpisodeRecord { env_index: i, episode_return, length });
                }
                self.ep_return[i] = 0.0;
                self.ep_len[i] = 0;
                self.final_obs[i] = Some(last);
                self.obs[i * od..(i + 1) * od].copy_from_slice(&o);
            }
            None => {
                self.final_obs[i] = None;
                self.obs[i * od..(i + 1) * od].copy_from_slice(&last);
            }
        }
        Ok(())
    }

    /// The envs' structured observation keys ([`Env::observation_keys`]; empty for flat ones).
    pub fn observation_keys(&self) -> Vec<crate::ObsKey> {
        match &self.batch {
            Some((b, _)) => b.observation_keys(),
            None => self.envs.first().map(|e| e.observation_keys()).unwrap_or_default(),
        }
    }

    /// The envs' action masks for the current observations (sb3-contrib's `get_action_masks`)
    /// into `out` (`[N, mask_dim]`, 1 = valid, [`Space::mask_dim`] per env); `Ok(false)`, with
    /// `out` untouched, when the envs have none.
    ///
    /// # Errors
    /// `InvalidArgument` for an `out` of the wrong length, and for a mask that leaves no valid
    /// action (in some component of a `MultiDiscrete` space), naming the env; the envs' own.
    pub fn action_masks(&mut self, out: &mut [u8]) -> Result<bool> {
        let md = self.action_space.mask_dim();
        if out.len() != self.n * md {
            return Err(EnvError::InvalidArgument(format!(
                "action masks of {} values for {} envs of {} ({md} each)",
                out.len(),
                self.n,
                self.action_space.describe()
            )));
        }
        let mut masks = vec![false; out.len()];
        let has = match &mut self.batch {
            Some((b, _)) => b.action_masks(&mut masks)?,
            None => {
                let mut with = Vec::with_capacity(self.n);
                for (env, m) in self.envs.iter_mut().zip(masks.chunks_mut(md.max(1))) {
                    with.push(env.action_masks(m)?);
                }
                if with.iter().any(|&w| w != with[0]) {
                    return Err(EnvError::InvalidArgument(format!(
                        "{}: some envs of the vector env have action_masks() and some do not",
                        self.env_id()
                    )));
                }
                with.first() == Some(&true)
            }
        };
        if !has {
            return Ok(false);
        }
        for (i, m) in masks.chunks(md).enumerate() {
            self.check_mask(i, m)?;
        }
        for (o, &m) in out.iter_mut().zip(&masks) {
            *o = m as u8;
        }
        Ok(true)
    }

    /// A mask of env `i` that leaves at least one valid action (in every component).
    fn check_mask(&self, i: usize, mask: &[bool]) -> Result<()> {
        let sizes = match &self.action_space {
            Space::MultiDiscrete { nvec } => nvec.clone(),
            space => vec![space.mask_dim()],
        };
        let mut at = 0;
        for (c, n) in sizes.into_iter().enumerate() {
            if !mask[at..at + n].iter().any(|&v| v) {
                let part = if matches!(self.action_space, Space::MultiDiscrete { .. }) {
                    format!(" in component {c}")
                } else {
                    String::new()
                };
                return Err(EnvError::InvalidArgument(format!(
                    "{} (env index {i}): action_masks() allows no action{part} at vector step {}: \
                     every row of a mask needs at least one valid action",
                    self.env_id(),
                    self.steps
                )));
            }
            at += n;
        }
        Ok(())
    }

    fn check_obs(&self, i: usize, o: &[f32]) -> Result<()> {
        if o.len() != self.obs_dim {
            return Err(EnvError::InvalidArgument(format!(
                "{} (env index {i}) returned an observation of {} values; its observation_space {} has {}",
                self.env_id(),
                o.len(),
                self.observation_space.describe(),
                self.obs_dim
            )));
        }
        if let Some(j) = (!all_finite(o)).then(|| o.iter().position(|x| !x.is_finite())).flatten() {
            return Err(EnvError::NonFinite(format!(
                "{} (env index {i}) returned a non-finite observation (component {j} = {}) at vector step {}",
                self.env_id(),
                o[j],
                self.steps
            )));
        }
        Ok(())
    }
}

/// Whether every value is finite, in one pass that vectorises (an early-exit search does not;
/// an Atari step checks 225,792 values): x − x is 0 for a finite x and NaN for ±∞ or NaN, and
/// NaN stays NaN through the sums.
#[allow(clippy::eq_op)] // x − x is the point: 0 for finite x, NaN otherwise
fn all_finite(o: &[f32]) -> bool {
    let mut acc = [0.0f32; 16];
    let mut chunks = o.chunks_exact(16);
    for c in &mut chunks {
        for (a, &x) in acc.iter_mut().zip(c) {
            *a += x - x;
        }
    }
    acc.iter().all(|&a| a == 0.0) && chunks.remainder().iter().all(|x| x.is_finite())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::make;

    #[test]
    fn all_finite_finds_any_infinity_or_nan_anywhere() {
        let mut o = vec![1.5f32; 37];
        assert!(all_finite(&o) && all_finite(&[]));
        for bad in [f32::INFINITY, f32::NEG_INFINITY, f32::NAN] {
            for at in [0, 15, 16, 31, 32, 36] {
                o[at] = bad;
                assert!(!all_finite(&o), "{bad} at {at}");
                o[at] = -f32::MAX;
            }
        }
    }

    #[test]
    fn autoreset_keeps_final_obs_and_records_episodes() {
        let mut v = SyncVectorEnv::new(2, || make("CartPole-v1")).unwrap();
        v.reset(7).unwrap();
        // Always push right: CartPole falls within a few dozen steps.
        let mut ended = 0;
        for _ in 0..200 {
            v.step(&[1.0, 1.0]).unwrap();
            for i in 0..2 {
                if v.terminated[i] || v.truncated[i] {
                    ended += 1;
                    let fo = v.final_obs[i].as_ref().expect("final obs kept");
                    // The final obs is out of bounds (terminated), the new obs is a fresh reset.
                    assert!(fo[0].abs() > 2.4 || fo[2].abs() > 0.2094);
                    assert!(v.obs()[i * 4..i * 4 + 4].iter().all(|x| x.abs() <= 0.05));
                } else {
                    assert!(v.final_obs[i].is_none());
                }
            }
        }
        assert_eq!(v.finished.len(), ended);
        assert!(ended >= 4);
        assert!(v.finished.iter().all(|e| e.episode_return == e.length as f64));
    }

    /// N native envs behind the [`BatchEnv`] seam, as a Gymnasium vector env in same-step mode.
    struct Batched(Vec<Box<dyn Env>>);

    impl BatchEnv for Batched {
        fn id(&self) -> &str {
            self.0[0].id()
        }
        fn num_envs(&self) -> usize {
            self.0.len()
        }
        fn observation_space(&self) -> Space {
            self.0[0].observation_space()
        }
        fn action_space(&self) -> Space {
            self.0[0].action_space()
        }
        fn reset(&mut self, seed: u64, obs: &mut [f32]) -> Result<()> {
            for (i, e) in self.0.iter_mut().enumerate() {
                obs[i * 4..(i + 1) * 4].copy_from_slice(&e.reset(Some(seed + i as u64))?.0);
            }
            Ok(())
        }
        fn step(&mut self, actions: &[f32], out: &mut BatchStep) -> Result<()> {
            *out = BatchStep::default();
            for (e, &a) in self.0.iter_mut().zip(actions) {
                let r = e.step(Action::Discrete(a as usize))?;
                out.rewards.push(r.reward);
                out.terminated.push(r.terminated);
                out.truncated.push(r.truncated);
                if r.terminated || r.truncated {
                    out.final_obs.push(Some(r.observation));
                    out.obs.extend(e.reset(None)?.0);
                } else {
                    out.final_obs.push(None);
                    out.obs.extend(r.observation);
                }
            }
            Ok(())
        }
    }

    #[test]
    fn a_batch_env_is_seen_exactly_as_its_envs_one_by_one() {
        let mut one = SyncVectorEnv::new(3, || make("CartPole-v1")).unwrap();
        let envs = (0..3).map(|_| make("CartPole-v1").unwrap()).collect();
        let mut batch = SyncVectorEnv::from_batch(Box::new(Batched(envs))).unwrap();
        assert_eq!((batch.num_envs(), batch.env_id()), (3, "CartPole-v1"));
        assert_eq!(one.reset(5).unwrap(), batch.reset(5).unwrap());
        for t in 0..300 {
            let actions: Vec<f32> = (0..3).map(|i| ((t * 7 + i * 3) % 5 % 2) as f32).collect();
            one.step(&actions).unwrap();
            batch.step(&actions).unwrap();
            assert_eq!(one.obs(), batch.obs(), "step {t}");
            assert_eq!(
                (&one.rewards, &one.terminated, &one.truncated),
                (&batch.rewards, &batch.terminated, &batch.truncated)
            );
            assert_eq!(one.final_obs, batch.final_obs);
        }
        assert!(one.finished.len() > 5);
        assert_eq!(one.finished, batch.finished);
        assert!(batch.step(&[1.0, 2.5, 0.0]).is_err(), "actions are checked before the batch steps");
    }

    /// A batch env whose env 1 returns a NaN reward, then a NaN observation: errors naming the
    /// env (its step's errors once panicked: the id was read from the batch env lent out).
    struct NanBatch(Batched, bool);

    impl BatchEnv for NanBatch {
        fn id(&self) -> &str {
            "NanBatch-v0"
        }
        fn num_envs(&self) -> usize {
            self.0.num_envs()
        }
        fn observation_space(&self) -> Space {
            self.0.observation_space()
        }
        fn action_space(&self) -> Space {
            self.0.action_space()
        }
        fn reset(&mut self, seed: u64, obs: &mut [f32]) -> Result<()> {
            self.0.reset(seed, obs)
        }
        fn step(&mut self, actions: &[f32], out: &mut BatchStep) -> Result<()> {
            self.0.step(actions, out)?;
            match self.1 {
                true => out.rewards[1] = f64::NAN,
                false => out.obs[5] = f32::INFINITY,
            }
            Ok(())
        }
    }

    #[test]
    fn a_batch_envs_non_finite_values_are_errors_not_panics() {
        for nan_reward in [true, false] {
            let envs = (0..2).map(|_| make("CartPole-v1").unwrap()).collect();
            let mut v = SyncVectorEnv::from_batch(Box::new(NanBatch(Batched(envs), nan_reward))).unwrap();
            v.reset(0).unwrap();
            let e = v.step(&[0.0, 1.0]).unwrap_err().to_string();
            assert!(e.contains("NanBatch-v0 (env index 1)"), "{e}");
        }
    }

    #[test]
    fn wrong_action_length_is_an_error() {
        let mut v = SyncVectorEnv::new(2, || make("CartPole-v1")).unwrap();
        v.reset(0).unwrap();
        assert!(v.step(&[1.0]).is_err());
        assert!(v.step(&[1.0, 5.0]).is_err());
        assert!(v.step(&[1.0, 0.5]).is_err());
    }
}
