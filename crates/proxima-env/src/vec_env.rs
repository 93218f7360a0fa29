//! N environments stepped in lockstep, with autoreset.
//!
//! **Autoreset convention: same-step** (Gymnasium's `AutoresetMode.SAME_STEP`, SB3's `VecEnv`).
//! When env `i` ends an episode at a step (terminated or truncated), it is reset within that
//! same `step` call: the observation returned for `i` is the *first observation of the next
//! episode*, and the last observation of the finished episode is kept in
//! [`SyncVectorEnv::final_obs`]`[i]`, so a truncated episode's value V(final observation) can be
//! bootstrapped. Every row of a rollout is therefore a real transition (no dummy "reset" step as
//! in Gymnasium's default next-step mode).

use crate::error::{EnvError, Result};
use crate::{Action, Env, Space};

/// A finished episode: which env, its undiscounted return and its length in steps.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct EpisodeRecord {
    /// Index of the env in the vector.
    pub env_index: usize,
    /// Sum of rewards.
    pub episode_return: f64,
    /// Steps.
    pub length: usize,
}

/// N copies of an environment, stepped sequentially on the calling thread.
///
/// At these environment sizes (microseconds per step) threads cost more than they save; the
/// rollout is bound by the policy's forward pass, which is batched over all N envs.
pub struct SyncVectorEnv {
    envs: Vec<Box<dyn Env>>,
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
        let obs_dim = observation_space.flat_dim();
        let act_dim = action_space.flat_dim();
        Ok(SyncVectorEnv {
            envs,
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
        })
    }

    /// The envs' id.
    pub fn env_id(&self) -> &str {
        self.envs[0].id()
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
    /// The envs themselves (for saving their state).
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
        if obs.len() != self.obs.len() || ep_return.len() != self.envs.len() || ep_len.len() != self.envs.len() {
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
        for i in 0..self.envs.len() {
            let (o, _) = self.envs[i].reset(Some(seed.wrapping_add(i as u64)))?;
            self.check_obs(i, &o)?;
            self.obs[i * self.obs_dim..(i + 1) * self.obs_dim].copy_from_slice(&o);
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
        let n = self.envs.len();
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
        for i in 0..n {
            let a = &actions[i * self.act_dim..(i + 1) * self.act_dim];
            let action = if discrete {
                if !(a[0] >= 0.0 && a[0].fract() == 0.0) {
                    return Err(EnvError::InvalidAction(format!(
                        "{}: discrete action {} is not a non-negative integer",
                        self.env_id(),
                        a[0]
                    )));
                }
                Action::Discrete(a[0] as usize)
            } else {
                Action::Continuous(a)
            };
            let r = self.envs[i].step(action)?;
            if !r.reward.is_finite() {
                return Err(EnvError::NonFinite(format!(
                    "{} (env index {i}) returned reward {} at vector step {}",
                    self.env_id(),
                    r.reward,
                    self.steps
                )));
            }
            self.check_obs(i, &r.observation)?;
            self.rewards[i] = r.reward as f32;
            self.terminated[i] = r.terminated;
            self.truncated[i] = r.truncated;
            self.ep_return[i] += r.reward;
            self.ep_len[i] += 1;
            if r.terminated || r.truncated {
                self.finished.push(EpisodeRecord {
                    env_index: i,
                    episode_return: self.ep_return[i],
                    length: self.ep_len[i],
                });
                self.ep_return[i] = 0.0;
                self.ep_len[i] = 0;
                self.final_obs[i] = Some(r.observation);
                let (o, _) = self.envs[i].reset(None)?;
                self.check_obs(i, &o)?;
                self.obs[i * self.obs_dim..(i + 1) * self.obs_dim].copy_from_slice(&o);
            } else {
                self.final_obs[i] = None;
                self.obs[i * self.obs_dim..(i + 1) * self.obs_dim].copy_from_slice(&r.observation);
            }
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
        if let Some(j) = o.iter().position(|x| !x.is_finite()) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::make;

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

    #[test]
    fn wrong_action_length_is_an_error() {
        let mut v = SyncVectorEnv::new(2, || make("CartPole-v1")).unwrap();
        v.reset(0).unwrap();
        assert!(v.step(&[1.0]).is_err());
        assert!(v.step(&[1.0, 5.0]).is_err());
        assert!(v.step(&[1.0, 0.5]).is_err());
    }
}
