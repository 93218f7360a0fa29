//! A3C, asynchronous advantage actor-critic (Mnih et al. 2016, arXiv:1602.01783, Algorithm S3).
//!
//! `n_workers` threads, each a [`Worker`]: its own [`Collector`] (its own `n_envs`
//! environments and normalisation statistics), RNG and **local copy** of the network. A worker
//! repeatedly
//!
//! 1. copies the global parameters θ into its local θ' (under the lock);
//! 2. collects `n_steps` steps with θ' and computes n-step returns bootstrapped from V(s_T)
//!    (GAE with `gae_lambda`, 1 by default) — the same collector, rollout buffer and GAE as PPO;
//! 3. computes the A2C loss's gradient w.r.t. θ' ([`crate::algo::a2c::gradients`]);
//! 4. applies that gradient to the global θ with the **shared** optimiser (RMSprop statistics
//!    shared by all workers, as the paper's "shared RMSProp"), under the lock.
//!
//! **Locked, not lock-free.** The original is Hogwild!-style (lock-free); here one mutex
//! guards the global parameters, the shared optimiser state and the update counter, and is
//! held only for the copy in step 1 and the optimiser step in 4 — never while collecting or
//! back-propagating — so workers still run asynchronously against parameters other workers
//! moved in between (stale gradients, as in A3C), no update is lost, and nothing can deadlock:
//! the lock is the only one and is never held across another acquisition.
//!
//! The training loop stays the trainer's: one *iteration* lets every worker run
//! [`UPDATES_PER_ITERATION`] updates asynchronously, then joins them to log and checkpoint.

use crate::algo::a2c::{self, A2cParams};
use crate::algo::update::{apply_host_gradients, UpdateStats};
use crate::collect::Collector;
use crate::env::vec_env::EpisodeRecord;
use crate::error::{ProximaError, Result};
use crate::optim::Optimizer;
use crate::policy::Policy;
use crate::rollout::RolloutBuffer;
use rand_chacha::ChaCha8Rng;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// Local updates each worker runs per iteration (between joins).
pub const UPDATES_PER_ITERATION: u64 = 16;

/// One asynchronous worker: its envs, its local network θ', its rollout buffer and RNG.
pub struct Worker {
    /// The worker's envs, normaliser and episode statistics.
    pub collector: Collector,
    /// θ', the local copy of the network (overwritten from θ before every rollout).
    pub policy: Box<dyn Policy>,
    /// The worker's rollout.
    pub buf: RolloutBuffer,
    /// Action sampling.
    pub rng: ChaCha8Rng,
    /// Env steps this worker has taken.
    pub steps: u64,
    /// Updates this worker has applied to the global parameters.
    pub updates: u64,
}

/// What one iteration of all workers did.
#[derive(Clone, Debug)]
pub struct Iteration {
    /// Updates applied to the global parameters (all workers).
    pub updates: u64,
    /// Env steps taken (all workers).
    pub steps: u64,
    /// Episodes the workers finished, with the worker's own step count at their end, in that order.
    pub finished: Vec<(u64, EpisodeRecord)>,
    /// The workers' mean loss parts and gradient norm.
    pub stats: UpdateStats,
}

/// The global state the lock guards: θ, the shared optimiser and the update count.
struct Global<'a> {
    policy: &'a mut dyn Policy,
    opt: &'a mut Optimizer,
    updates: u64,
}

fn poisoned<T>(_: T) -> ProximaError {
    ProximaError::InvalidArgument("A3C lock poisoned".into())
}

impl Worker {
    /// Steps 1–4 of the module doc once: returns the loss parts and the gradient norm, and
    /// appends the episodes the rollout finished to `finished`.
    fn update(
        &mut self,
        lock: &Mutex<Global<'_>>,
        p: &A2cParams,
        gamma: f64,
        gae_lambda: f64,
        finished: &mut Vec<(u64, EpisodeRecord)>,
    ) -> Result<[f64; 4]> {
        let theta = lock.lock().map_err(poisoned)?.policy.params()?;
        self.policy.set_params(&theta)?; // θ' ← θ
        let policy = self.policy.as_mut();
        finished.extend(self.collector.collect(policy, &mut self.buf, &mut self.rng, self.steps)?);
        self.steps += self.buf.len() as u64;
        let last_values = self.collector.last_values(policy)?;
        self.buf.compute_advantages(&last_values, gamma, gae_lambda)?;
        let (grads, [pl, vl, ent]) = a2c::gradients(policy, &self.buf, p)?;
        let info = {
            let mut g = lock.lock().map_err(poisoned)?;
            let g = &mut *g;
            let info = apply_host_gradients(g.policy, g.opt, &grads, p.max_grad_norm)?;
            g.updates += 1;
            info
        };
        self.updates += 1;
        Ok([pl, vl, ent, info.grad_norm])
    }
}

/// Runs every worker for `updates_each` asynchronous updates against `global` (θ) and `opt`
/// (the shared optimiser, whose `lr` is set to `lr`).
///
/// # Errors
/// The first worker error (env errors, `NonFinite`); other workers stop at their next update.
pub fn run_iteration(
    global: &mut dyn Policy,
    opt: &mut Optimizer,
    workers: &mut [Worker],
    p: &A2cParams,
    (gamma, gae_lambda): (f64, f64),
    lr: f64,
    updates_each: u64,
) -> Result<Iteration> {
    opt.lr = lr;
    let steps_before: u64 = workers.iter().map(|w| w.steps).sum();
    let lock = Mutex::new(Global { policy: global, opt, updates: 0 });
    let failed = AtomicBool::new(false);
    type Outcome = (Result<[f64; 4]>, Vec<(u64, EpisodeRecord)>);
    let results: Vec<Outcome> = std::thread::scope(|scope| {
        let handles: Vec<_> = workers
            .iter_mut()
            .map(|w| {
                let (lock, failed) = (&lock, &failed);
                scope.spawn(move || -> Outcome {
                    let (mut sums, mut finished) = ([0f64; 4], Vec::new());
                    for _ in 0..updates_each {
                        if failed.load(Ordering::Relaxed) {
                            break;
                        }
                        match w.update(lock, p, gamma, gae_lambda, &mut finished) {
                            Ok(parts) => sums.iter_mut().zip(parts).for_each(|(s, x)| *s += x),
                            Err(e) => {
                                failed.store(true, Ordering::Relaxed);
                                return (Err(e), finished);
                            }
                        }
                    }
                    (Ok(sums), finished)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    (Err(ProximaError::InvalidArgument("an A3C worker panicked".into())), Vec::new())
                })
            })
            .collect()
    });
    let updates = lock.into_inner().map_err(poisoned)?.updates;
    let (mut sums, mut finished) = ([0f64; 4], Vec::new());
    for (r, f) in results {
        finished.extend(f);
        sums.iter_mut().zip(r?).for_each(|(s, x)| *s += x);
    }
    finished.sort_by_key(|(step, _)| *step);
    let m = updates.max(1) as f64;
    let stats = UpdateStats {
        policy_loss: sums[0] / m,
        value_loss: sums[1] / m,
        entropy: sums[2] / m,
        grad_norm: sums[3] / m,
        learning_rate: lr,
        epochs: 1,
        minibatches: updates as usize,
        ..Default::default()
    };
    let steps = workers.iter().map(|w| w.steps).sum::<u64>() - steps_before;
    Ok(Iteration { updates, steps, finished, stats })
}
