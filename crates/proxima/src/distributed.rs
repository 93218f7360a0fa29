//! Data-parallel training across processes: the collective operations a distributed
//! PPO update needs, behind one trait, and where this process sits among the others.
//!
//! The engine is MPI (the CLI's `mpi` feature implements [`Collective`] on rsmpi over the
//! system's OpenMPI); the library only sees the trait, so it needs no MPI to build. A run of
//! `size` processes ("ranks") × `n_envs` envs each is one run of `size · n_envs` envs:
//! rank r steps global envs `r·n_envs .. (r+1)·n_envs` (seeded `seed + r·n_envs + i`), each env
//! samples its actions from a stream of its own (seeded from the seed and its global index, so
//! that no draw depends on how envs are split across ranks), GAE is computed locally, and every
//! minibatch is the global one — the same permutation of all `T · size · n_envs` transitions on
//! every rank, each rank taking the part it holds — with the gradient summed across ranks
//! (each rank's mean-loss gradient weighted by its share of the minibatch) before every optimiser
//! step; the observation/return statistics take in every rank's rows. So 2 ranks × 2 envs train as
//! 1 rank × 4 envs: the same samples in the same minibatches (the sums in another order: equal up
//! to rounding, which many optimiser steps amplify).

use crate::env::vec_env::EpisodeRecord;
use crate::error::Result;
use std::sync::Arc;

/// Sums across every rank, in place; every rank gets the same result. Implementations must be
/// callable from the training thread only (MPI's default threading level).
pub trait Collective: Send + Sync {
    /// This process's index, `0..size`.
    fn rank(&self) -> usize;
    /// The number of processes.
    fn size(&self) -> usize;
    /// `v ← Σ_ranks v`, element by element (every rank passes the same length).
    ///
    /// # Errors
    /// The engine's failure (named); a length mismatch is the caller's bug.
    fn all_reduce_sum_f32(&self, v: &mut [f32]) -> Result<()>;
    /// `v ← Σ_ranks v` in f64 (statistics: advantage sums, losses, counts).
    ///
    /// # Errors
    /// As [`Collective::all_reduce_sum_f32`].
    fn all_reduce_sum_f64(&self, v: &mut [f64]) -> Result<()>;
    /// Every rank's `bytes` to rank 0, in rank order (rank 0's own first); the other ranks get
    /// an empty list. For what only rank 0 writes: every rank's resumable state in a checkpoint.
    ///
    /// # Errors
    /// As [`Collective::all_reduce_sum_f32`]; `InvalidArgument` for more bytes than the engine
    /// can count.
    fn gather_bytes(&self, bytes: &[u8]) -> Result<Vec<Vec<u8>>>;
    /// Rank 0's `bytes` to every rank: the other ranks' `bytes` are replaced (a resumed run's
    /// checkpoint, read by rank 0 alone, so the ranks need no shared file system).
    ///
    /// # Errors
    /// As [`Collective::gather_bytes`].
    fn broadcast_bytes(&self, bytes: &mut Vec<u8>) -> Result<()>;
}

/// Where this rank's envs sit among all of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EnvSplit {
    /// This rank.
    pub rank: usize,
    /// Ranks in all.
    pub size: usize,
    /// Envs per rank (the config's `n_envs`).
    pub n_envs: usize,
}

impl EnvSplit {
    /// The global index of local env `i`.
    pub fn global_env(&self, i: usize) -> usize {
        self.rank * self.n_envs + i
    }
    /// Envs across all ranks.
    pub fn total_envs(&self) -> usize {
        self.size * self.n_envs
    }
    /// The local buffer row (`t·n_envs + i`) of global transition `t·total_envs + e`, when env
    /// `e` is this rank's.
    pub fn local_row(&self, global: usize) -> Option<usize> {
        let (t, e) = (global / self.total_envs(), global % self.total_envs());
        let first = self.rank * self.n_envs;
        (first..first + self.n_envs).contains(&e).then(|| t * self.n_envs + e - first)
    }
}

/// A data-parallel run's engine and this rank's place in it.
#[derive(Clone)]
pub struct Ranks {
    /// The engine.
    pub comm: Arc<dyn Collective>,
    /// Where this rank's envs sit.
    pub split: EnvSplit,
}

impl Ranks {
    /// `v ← Σ_ranks v` in f64, as a new array (small statistics).
    ///
    /// # Errors
    /// The engine's.
    pub fn sum<const N: usize>(&self, mut v: [f64; N]) -> Result<[f64; N]> {
        self.comm.all_reduce_sum_f64(&mut v)?;
        Ok(v)
    }
}

/// Every rank's episodes that ended during one rollout, on every rank, in the order one
/// process stepping all the envs would have recorded them: by step, then by global env index.
/// `local` holds this rank's, with the step the collector gave each (`step0 + (t+1)·n_envs`,
/// counting this rank's envs only); the result carries global env indices and global steps
/// (`step0 + (t+1)·total_envs`). Two all-reduces: the counts, then the episodes (each rank's at
/// its own offset, zeros elsewhere; sums of one value and zeros are exact).
///
/// # Errors
/// The engine's.
pub fn gather_episodes(ranks: &Ranks, local: &[(u64, EpisodeRecord)], step0: u64) -> Result<Vec<(u64, EpisodeRecord)>> {
    let (split, size) = (ranks.split, ranks.split.size);
    let mut counts = vec![0f64; size];
    counts[split.rank] = local.len() as f64;
    ranks.comm.all_reduce_sum_f64(&mut counts)?;
    let counts: Vec<usize> = counts.iter().map(|&c| c as usize).collect();
    let offset: usize = counts[..split.rank].iter().sum();
    let mut all = vec![0f64; 4 * counts.iter().sum::<usize>()];
    for (k, (step, ep)) in local.iter().enumerate() {
        let t = (step - step0) / split.n_envs as u64 - 1;
        let row = [t as f64, split.global_env(ep.env_index) as f64, ep.episode_return, ep.length as f64];
        all[4 * (offset + k)..4 * (offset + k + 1)].copy_from_slice(&row);
    }
    ranks.comm.all_reduce_sum_f64(&mut all)?;
    let mut eps: Vec<(u64, usize, EpisodeRecord)> = all
        .chunks_exact(4)
        .map(|r| {
            let record = EpisodeRecord { env_index: r[1] as usize, episode_return: r[2], length: r[3] as usize };
            (r[0] as u64, r[1] as usize, record)
        })
        .collect();
    eps.sort_by_key(|&(t, e, _)| (t, e));
    let total = split.total_envs() as u64;
    Ok(eps.into_iter().map(|(t, _, ep)| (step0 + (t + 1) * total, ep)).collect())
}

/// Normalises advantages with the mean and standard deviation of a minibatch spread over ranks:
/// (Â − mean)/(std + 1e-8), std with Bessel's correction as [`crate::rollout::normalize_advantages`]
/// (which it equals up to rounding: the statistics come from all-reduced sums, Σ Â and Σ Â²). A
/// rank whose share is a placeholder (`counted = false`) adds nothing to the sums; fewer than 2
/// values in all: unchanged.
///
/// # Errors
/// The engine's.
pub fn normalize_advantages_across(adv: &mut [f32], counted: bool, ranks: &Ranks) -> Result<()> {
    let (s, q) = adv.iter().fold((0f64, 0f64), |(s, q), &a| (s + a as f64, q + (a as f64) * (a as f64)));
    let local = if counted { [s, q, adv.len() as f64] } else { [0.0; 3] };
    let [s, q, n] = ranks.sum(local)?;
    if n < 2.0 {
        return Ok(());
    }
    let mean = s / n;
    let var = ((q - n * mean * mean) / (n - 1.0)).max(0.0);
    let denom = var.sqrt() + 1e-8;
    for a in adv.iter_mut() {
        *a = ((*a as f64 - mean) / denom) as f32;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_global_transition_has_exactly_one_home() {
        let (t_len, size, n_envs) = (5, 3, 2);
        let mut seen = vec![0; t_len * n_envs * size];
        for rank in 0..size {
            let split = EnvSplit { rank, size, n_envs };
            for g in 0..t_len * split.total_envs() {
                if let Some(row) = split.local_row(g) {
                    let (t, i) = (row / n_envs, row % n_envs);
                    assert_eq!(g, t * split.total_envs() + split.global_env(i), "rank {rank}, transition {g}");
                    seen[g] += 1;
                }
            }
        }
        assert!(seen.iter().all(|&c| c == 1), "{seen:?}");
    }
}
