//! A3C, asynchronous advantage actor-critic (Mnih et al. 2016, arXiv:1602.01783, Algorithm S3).
//!
//! `n_workers` threads, each a [`Trainer`] of its own: its own `n_envs` environments, RNG
//! and **local copy** of the network. A worker repeatedly
//!
//! 1. copies the global parameters θ into its local θ' (under the lock);
//! 2. collects `n_steps` steps with θ' and computes n-step returns bootstrapped from V(s_T)
//!    (GAE with `gae_lambda`, 1 by default) — the same rollout buffer and GAE as PPO;
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
//! The training loop stays [`Trainer::step`]'s: one *iteration* lets every worker run
//! [`UPDATES_PER_ITERATION`] updates asynchronously, then joins them to log and checkpoint.

use crate::algo::a2c;
use crate::algo::optim::Adam;
use crate::algo::ppo::UpdateStats;
use crate::error::{ProximaError, Result};
use crate::policy::ActorCritic;
use crate::train::Trainer;
use std::sync::Mutex;

/// Local updates each worker runs per iteration of [`Trainer::step`] (between joins).
pub const UPDATES_PER_ITERATION: u64 = 16;

/// The global state the lock guards.
struct Global<'a> {
    opt: &'a mut Adam,
    updates: u64,
}

/// Copies every parameter of `from` into `to` (same spec).
fn copy_params(from: &ActorCritic, to: &ActorCritic) -> Result<()> {
    for ((_, src), (_, dst)) in from.named_params().iter().zip(to.named_params()) {
        dst.set(&src.as_tensor().copy()?)?;
    }
    Ok(())
}

/// Runs every worker for `updates_each` asynchronous updates against `global` (parameters) and
/// `opt` (the shared optimiser, whose `lr` is set to `lr`). Returns the number of global
/// updates applied and the workers' mean loss parts.
///
/// # Errors
/// The first worker error (env errors, `NonFinite`); other workers stop at their next update.
pub fn run_iteration(
    global: &ActorCritic,
    opt: &mut Adam,
    workers: &mut [Trainer],
    lr: f64,
    updates_each: u64,
) -> Result<(u64, UpdateStats)> {
    opt.lr = lr;
    let lock = Mutex::new(Global { opt, updates: 0 });
    let failed = std::sync::atomic::AtomicBool::new(false);
    let results: Vec<Result<[f64; 4]>> = std::thread::scope(|scope| {
        let handles: Vec<_> = workers
            .iter_mut()
            .map(|w| {
                let (lock, failed) = (&lock, &failed);
                scope.spawn(move || -> Result<[f64; 4]> {
                    let mut sums = [0f64; 4];
                    for _ in 0..updates_each {
                        if failed.load(std::sync::atomic::Ordering::Relaxed) {
                            break;
                        }
                        let r = (|| -> Result<()> {
                            {
                                let _g = lock
                                    .lock()
                                    .map_err(|_| ProximaError::InvalidArgument("A3C lock poisoned".into()))?;
                                copy_params(global, &w.policy)?; // θ' ← θ
                            }
                            w.collect_and_compute_advantages()?;
                            let (grads, [pl, vl, ent]) = a2c::gradients(&w.policy, w.buffer(), &w.cfg)?;
                            let host: Vec<Option<Vec<f32>>> = w
                                .policy
                                .named_params()
                                .iter()
                                .map(|(_, v)| {
                                    grads
                                        .get(v.as_tensor())
                                        .map(|g| g.flatten_all().and_then(|g| g.to_vec1::<f32>()))
                                        .transpose()
                                })
                                .collect::<candle_core::Result<_>>()?;
                            let info = {
                                let mut g = lock
                                    .lock()
                                    .map_err(|_| ProximaError::InvalidArgument("A3C lock poisoned".into()))?;
                                let info = g.opt.step_host(global.named_params(), &host, w.cfg.max_grad_norm)?;
                                g.updates += 1;
                                info
                            };
                            w.update += 1;
                            for (s, x) in sums.iter_mut().zip([pl, vl, ent, info.grad_norm]) {
                                *s += x;
                            }
                            Ok(())
                        })();
                        if let Err(e) = r {
                            failed.store(true, std::sync::atomic::Ordering::Relaxed);
                            return Err(e);
                        }
                    }
                    Ok(sums)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err(ProximaError::InvalidArgument("an A3C worker panicked".into()))))
            .collect()
    });
    let updates = lock.into_inner().map_err(|_| ProximaError::InvalidArgument("A3C lock poisoned".into()))?.updates;
    let mut sums = [0f64; 4];
    for r in results {
        for (s, x) in sums.iter_mut().zip(r?) {
            *s += x;
        }
    }
    let m = updates.max(1) as f64;
    Ok((
        updates,
        UpdateStats {
            policy_loss: sums[0] / m,
            value_loss: sums[1] / m,
            entropy: sums[2] / m,
            grad_norm: sums[3] / m,
            learning_rate: lr,
            epochs: 1,
            minibatches: updates as usize,
            ..Default::default()
        },
    ))
}
