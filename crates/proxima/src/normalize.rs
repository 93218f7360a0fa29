//! Observation normalisation and reward scaling, as SB3's `VecNormalize` and CleanRL's
//! `NormalizeObservation` / `NormalizeReward` wrappers do them (Huang et al. 2022, continuous-
//! action details 5–8):
//!
//! * observations: running mean/variance per component, ô = clip((o − μ)/√(σ² + 1e-8), ±clip_obs);
//! * rewards: divided by the running std of the *discounted return* R ← γR + r (reset at
//!   episode ends), r̂ = clip(r/√(σ_R² + 1e-8), ±clip_reward). The mean is not subtracted.
//!
//! The statistics are saved in every checkpoint and applied, frozen, at evaluation.

use crate::distributed::{Collective, EnvSplit};
use crate::error::Result;
use serde::{Deserialize, Serialize};

/// Running mean and variance over batches (Chan et al.'s parallel algorithm), f64, with the
/// `epsilon = 1e-4` initial count SB3 uses so the first update is well defined.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunningMeanStd {
    /// Per-component mean, `[dim]`.
    pub mean: Vec<f64>,
    /// Per-component (population) variance, `[dim]`.
    pub var: Vec<f64>,
    /// Number of samples seen (plus the initial epsilon).
    pub count: f64,
}

impl RunningMeanStd {
    /// Statistics for `dim` components: mean 0, variance 1, count 1e-4.
    pub fn new(dim: usize) -> Self {
        RunningMeanStd { mean: vec![0.0; dim], var: vec![1.0; dim], count: 1e-4 }
    }

    /// Folds in a batch of rows, `x` = `[n, dim]` row-major.
    pub fn update(&mut self, x: &[f32]) {
        let dim = self.mean.len();
        if dim == 0 || x.len() < dim {
            return;
        }
        let n = (x.len() / dim) as f64;
        for j in 0..dim {
            let col = x.chunks_exact(dim).map(|r| r[j] as f64);
            let bm = col.clone().sum::<f64>() / n;
            let bv = col.map(|v| (v - bm).powi(2)).sum::<f64>() / n;
            self.fold(j, bm, bv, n);
        }
        self.count += n;
    }

    /// [`RunningMeanStd::update`] with a batch spread over the ranks of a distributed run
    /// ([`crate::distributed`]): this rank's rows `x` (`[n_envs, dim]`, its envs') are placed among
    /// every rank's (one all-reduce of the zero-padded `[total_envs, dim]` batch: sums of one
    /// value and zeros are exact), and every rank folds in the whole batch with `update` — the
    /// very statistics one process stepping all the envs computes.
    ///
    /// # Errors
    /// The engine's.
    pub fn update_across(&mut self, x: &[f32], (comm, split): (&dyn Collective, EnvSplit)) -> Result<()> {
        let dim = self.mean.len();
        let mut all = vec![0f32; split.total_envs() * dim];
        let at = split.global_env(0) * dim;
        all[at..at + x.len()].copy_from_slice(x);
        comm.all_reduce_sum_f32(&mut all)?;
        self.update(&all);
        Ok(())
    }

    /// Chan et al.'s merge of a batch (mean `bm`, population variance `bv`, `n` rows) into
    /// component `j` (the count is advanced by the caller, once for all components).
    fn fold(&mut self, j: usize, bm: f64, bv: f64, n: f64) {
        let delta = bm - self.mean[j];
        let tot = self.count + n;
        self.mean[j] += delta * n / tot;
        let m2 = self.var[j] * self.count + bv * n + delta * delta * self.count * n / tot;
        self.var[j] = m2 / tot;
    }

    /// ô = clip((o − μ)/√(σ² + 1e-8), ±clip) for each row of `x` (`[n, dim]`), in place.
    pub fn normalize(&self, x: &mut [f32], clip: f64) {
        self.normalize_except(x, clip, &[]);
    }

    /// [`RunningMeanStd::normalize`], leaving component `j` as it is where `raw[j]` (an empty
    /// `raw`: every component normalised).
    pub fn normalize_except(&self, x: &mut [f32], clip: f64, raw: &[bool]) {
        proxima_kernels::normalize::normalize_except(x, (&self.mean, &self.var), clip, raw);
    }
}

/// The normalisation state of a run: optional observation statistics, optional return
/// statistics with the per-env discounted returns they are fed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Normalizer {
    /// Observation statistics (None = observations pass through).
    pub obs_rms: Option<RunningMeanStd>,
    /// Discounted-return statistics (None = rewards pass through).
    pub ret_rms: Option<RunningMeanStd>,
    /// Running discounted return per env, `[n_envs]`.
    pub returns: Vec<f64>,
    /// Clip of normalised observations.
    pub clip_obs: f64,
    /// Clip of scaled rewards.
    pub clip_reward: f64,
    /// γ of the discounted return.
    pub gamma: f64,
    /// Observation values left as they are, `[obs_dim]` (true: a `Dict` key outside
    /// `norm_obs_keys`, as SB3's `VecNormalize` leaves it); empty: every value normalised.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub obs_raw: Vec<bool>,
}

impl Normalizer {
    /// A fresh normaliser for `n_envs` envs with `obs_dim`-long observations.
    pub fn new(
        normalize_obs: bool,
        normalize_reward: bool,
        obs_dim: usize,
        n_envs: usize,
        gamma: f64,
        clip_obs: f64,
        clip_reward: f64,
    ) -> Self {
        Normalizer {
            obs_rms: normalize_obs.then(|| RunningMeanStd::new(obs_dim)),
            ret_rms: normalize_reward.then(|| RunningMeanStd::new(1)),
            returns: vec![0.0; n_envs],
            clip_obs,
            clip_reward,
            gamma,
            obs_raw: Vec::new(),
        }
    }

    /// Training: updates the observation statistics with `obs` (`[n, obs_dim]`, raw) and
    /// returns the normalised copy.
    pub fn update_and_normalize(&mut self, obs: &[f32]) -> Vec<f32> {
        let mut out = Vec::new();
        self.update_and_normalize_into(obs, &mut out);
        out
    }

    /// [`Normalizer::update_and_normalize`] into `out` (cleared first; no allocation once it
    /// has the capacity).
    pub fn update_and_normalize_into(&mut self, obs: &[f32], out: &mut Vec<f32>) {
        out.clear();
        out.extend_from_slice(obs);
        if let Some(rms) = &mut self.obs_rms {
            rms.update(obs);
            rms.normalize_except(out, self.clip_obs, &self.obs_raw);
        }
    }

    /// [`Normalizer::update_and_normalize_into`], the statistics updated with every rank's rows
    /// ([`RunningMeanStd::update_across`]) in a distributed run (`across`).
    ///
    /// # Errors
    /// The engine's.
    pub fn update_and_normalize_across(
        &mut self,
        obs: &[f32],
        out: &mut Vec<f32>,
        across: Option<(&dyn Collective, EnvSplit)>,
    ) -> Result<()> {
        let Some(across) = across else {
            self.update_and_normalize_into(obs, out);
            return Ok(());
        };
        out.clear();
        out.extend_from_slice(obs);
        if let Some(rms) = &mut self.obs_rms {
            rms.update_across(obs, across)?;
            rms.normalize_except(out, self.clip_obs, &self.obs_raw);
        }
        Ok(())
    }

    /// Normalises `obs` with the current statistics, without updating them (evaluation,
    /// final observations of truncated episodes).
    pub fn normalize_obs(&self, obs: &mut [f32]) {
        if let Some(rms) = &self.obs_rms {
            rms.normalize_except(obs, self.clip_obs, &self.obs_raw);
        }
    }

    /// Training: scales one step's rewards `[n_envs]` in place by the running std of the
    /// discounted return, then resets the return of envs whose episode ended.
    pub fn scale_rewards(&mut self, rewards: &mut [f32], dones: impl Fn(usize) -> bool) {
        // Without an engine nothing can fail.
        let _ = self.scale_rewards_across(rewards, dones, None);
    }

    /// [`Normalizer::scale_rewards`], the return statistics updated with every rank's returns
    /// in a distributed run (`across`).
    ///
    /// # Errors
    /// The engine's.
    pub fn scale_rewards_across(
        &mut self,
        rewards: &mut [f32],
        dones: impl Fn(usize) -> bool,
        across: Option<(&dyn Collective, EnvSplit)>,
    ) -> Result<()> {
        let Some(rms) = &mut self.ret_rms else { return Ok(()) };
        let r: Vec<f32> = rewards
            .iter()
            .zip(self.returns.iter_mut())
            .map(|(&r, g)| {
                *g = *g * self.gamma + r as f64;
                *g as f32
            })
            .collect();
        match across {
            Some(across) => rms.update_across(&r, across)?,
            None => rms.update(&r),
        }
        let std = (rms.var[0] + 1e-8).sqrt();
        for (i, r) in rewards.iter_mut().enumerate() {
            *r = (*r as f64 / std).clamp(-self.clip_reward, self.clip_reward) as f32;
            if dones(i) {
                self.returns[i] = 0.0;
            }
        }
        Ok(())
    }

    /// Whether anything is normalised.
    pub fn is_active(&self) -> bool {
        self.obs_rms.is_some() || self.ret_rms.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn running_stats_match_batch_stats() {
        let data: Vec<f32> = (0..300).map(|i| ((i * 7919) % 101) as f32 / 10.0 - 3.0).collect(); // [100, 3]
        let mut rms = RunningMeanStd::new(3);
        for chunk in data.chunks(3 * 7) {
            rms.update(chunk);
        }
        for j in 0..3 {
            let col: Vec<f64> = data.chunks(3).map(|r| r[j] as f64).collect();
            let m = col.iter().sum::<f64>() / 100.0;
            let v = col.iter().map(|x| (x - m).powi(2)).sum::<f64>() / 100.0;
            assert!((rms.mean[j] - m).abs() < 1e-5, "mean {j}");
            assert!((rms.var[j] - v).abs() < 1e-3 * v.max(1.0), "var {j}: {} vs {v}", rms.var[j]);
        }
        let mut x = vec![1e6f32, -1e6, 0.0];
        rms.normalize(&mut x, 10.0);
        assert_eq!((x[0], x[1]), (10.0, -10.0));
    }

    #[test]
    fn reward_scaling_divides_by_return_std_and_resets_on_done() {
        let mut n = Normalizer::new(false, true, 1, 2, 0.99, 10.0, 10.0);
        let mut r = [1.0f32, 2.0];
        n.scale_rewards(&mut r, |i| i == 1);
        assert_eq!(n.returns, vec![1.0, 0.0]);
        let std = (n.ret_rms.as_ref().unwrap().var[0] + 1e-8).sqrt();
        assert!((r[0] as f64 - 1.0 / std).abs() < 1e-5 && (r[1] as f64 - 2.0 / std).abs() < 1e-5);
        // Observations pass through when not normalised.
        assert_eq!(n.update_and_normalize(&[5.0]), vec![5.0]);
    }
}
