//! What every algorithm's update shares: where advantages are normalised, the diagnostics an
//! update reports, applying a gradient to the policy with the optimiser, and [`Replicas`]: what
//! differs when the update runs on several processes.

use crate::distributed::{normalize_advantages_across, Collective, Ranks};
use crate::error::Result;
use crate::optim::{Optimizer, Params, StepInfo};
use crate::policy::Policy;
use crate::rollout::{normalize_advantages, Minibatches, RolloutBuffer};
use serde::{Deserialize, Serialize};

/// Where advantages are normalised.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AdvantageNorm {
    /// Per minibatch (SB3, CleanRL, openai/baselines): the default.
    Minibatch,
    /// Once over the whole rollout batch.
    Batch,
    /// Not at all.
    Off,
}

/// Diagnostics of one update (one rollout), averaged over its minibatches.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct UpdateStats {
    /// Mean L^CLIP (negated surrogate).
    pub policy_loss: f64,
    /// Mean value loss.
    pub value_loss: f64,
    /// Mean policy entropy.
    pub entropy: f64,
    /// approx KL of the last epoch's minibatches (CleanRL reports the last minibatch's).
    pub approx_kl: f64,
    /// Mean clip fraction over all minibatches.
    pub clip_fraction: f64,
    /// 1 − Var(R − V_old)/Var(R) over the rollout.
    pub explained_variance: f64,
    /// Learning rate used in this update.
    pub learning_rate: f64,
    /// Mean global gradient norm before clipping.
    pub grad_norm: f64,
    /// Epochs run (< n_epochs when target_kl stopped early).
    pub epochs: usize,
    /// Optimiser steps taken.
    pub minibatches: usize,
    /// d = mean KL[π_θold(·|s), π_θ(·|s)] over the whole rollout after the update (analytic).
    pub kl_divergence: f64,
    /// β used in this update (KL objectives; 0 otherwise).
    pub kl_coef: f64,
    /// TRPO: the fraction of the natural-gradient step the line search accepted (0 = rejected).
    pub step_fraction: f64,
    /// SAC: the temperature α after the iteration (`None` for the other algorithms).
    pub ent_coef: Option<f64>,
    /// PPG: the auxiliary phase that followed this iteration's policy phase, if one did.
    pub aux: Option<AuxStats>,
}

/// What PPG's auxiliary phase reports ([`crate::algo::ppg::auxiliary_phase`]): means over its
/// minibatches.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct AuxStats {
    /// KL[π_old ‖ π_θ], the behavioural-cloning term before β_clone.
    pub kl: f64,
    /// ½·(V_aux − V̂_targ)².
    pub aux_value_loss: f64,
    /// ½·(V − V̂_targ)², the value network's distillation.
    pub value_loss: f64,
    /// Optimiser steps taken.
    pub minibatches: usize,
}

/// One optimiser step on `policy`'s parameters with the gradient of the loss it evaluated last
/// ([`Policy::backward`]), clipped to `max_grad_norm` globally: in place on the policy's flat
/// vectors where it keeps them ([`Policy::backward_flat`]), else through host copies.
///
/// # Errors
/// `NonFinite` for a non-finite gradient or new parameter (nothing is changed then); the
/// policy's own errors.
pub fn apply_gradients(policy: &mut dyn Policy, opt: &mut Optimizer, max_grad_norm: Option<f64>) -> Result<StepInfo> {
    if let Some(flat) = policy.backward_flat()? {
        return opt.step(Params::Flat(flat), max_grad_norm);
    }
    let grads = policy.backward()?;
    apply_host_gradients(policy, opt, &grads, max_grad_norm)
}

/// [`apply_gradients`] with gradients already on the host (one entry per parameter, as
/// [`Policy::backward`] returns them; `None` = gradient 0): how an A3C worker's gradient reaches
/// the global network.
///
/// # Errors
/// As [`apply_gradients`].
pub fn apply_host_gradients(
    policy: &mut dyn Policy,
    opt: &mut Optimizer,
    grads: &[Option<Vec<f32>>],
    max_grad_norm: Option<f64>,
) -> Result<StepInfo> {
    let names = policy.param_names();
    let mut values = policy.params()?;
    let info = opt.step(Params::Host { names: &names, values: &mut values, grads }, max_grad_norm)?;
    policy.set_params(&values)?;
    Ok(info)
}

/// The processes one update runs on: this one alone, or every rank of a data-parallel run
/// ([`crate::distributed`]). Alone, each method is the single-process code, bit for bit; across
/// ranks each takes in every rank's part of the global minibatch (a rank's `share`: its rows ÷
/// the global minibatch's, 0 for a placeholder), so every rank takes the same steps.
#[derive(Clone, Copy)]
pub struct Replicas<'a>(Option<&'a Ranks>);

impl<'a> Replicas<'a> {
    /// This process alone.
    pub fn alone() -> Self {
        Replicas(None)
    }

    /// Alone (`None`), or the ranks of a data-parallel run.
    pub fn of(ranks: Option<&'a Ranks>) -> Self {
        Replicas(ranks)
    }

    /// The update's minibatches of `size` (advantages normalised over the whole batch first if
    /// `normalize_over_batch`; π_θold's head with them if `with_old_head`): this process's
    /// ([`Minibatches::new`]), or this rank's part of the global ones ([`Minibatches::split`],
    /// which normalises per minibatch only).
    pub fn minibatches<'b>(
        self,
        buf: &'b RolloutBuffer,
        size: usize,
        normalize_over_batch: bool,
        with_old_head: bool,
    ) -> Minibatches<'b> {
        match self.0 {
            None => Minibatches::new(buf, size, normalize_over_batch, with_old_head),
            Some(r) => Minibatches::split(buf, size, with_old_head, r.split),
        }
    }

    /// Â ← (Â − mean)/(std + 1e-8) over the (global) minibatch.
    ///
    /// # Errors
    /// The engine's.
    pub fn normalize_advantages(self, adv: &mut [f32], share: f32) -> Result<()> {
        match self.0 {
            None => {
                normalize_advantages(adv);
                Ok(())
            }
            Some(r) => normalize_advantages_across(adv, share > 0.0, r),
        }
    }

    /// Per-minibatch means (losses, KL, clip fraction): this process's own, or the global
    /// minibatch's (each rank's times its `share`, summed; a NaN anywhere reaches every rank,
    /// so all stop together).
    ///
    /// # Errors
    /// The engine's.
    pub fn minibatch_means<const N: usize>(self, local: [f64; N], share: f32) -> Result<[f64; N]> {
        match self.0 {
            None => Ok(local),
            Some(r) => r.sum(local.map(|x| x * share as f64)),
        }
    }

    /// The mean over ranks of per-rank values (the values themselves alone).
    ///
    /// # Errors
    /// The engine's.
    pub fn mean_over_ranks<const N: usize>(self, values: [f64; N]) -> Result<[f64; N]> {
        match self.0 {
            None => Ok(values),
            Some(r) => Ok(r.sum(values)?.map(|x| x / r.split.size as f64)),
        }
    }

    /// [`apply_gradients`]; across ranks, the step's gradient is each rank's times its `share`,
    /// summed over ranks — the global minibatch's mean-loss gradient, the same on every rank, so
    /// the parameters stay the same everywhere. Clipping and the NaN guard see the summed
    /// gradient.
    ///
    /// # Errors
    /// As [`apply_gradients`]; the engine's.
    pub fn apply_gradients(
        self,
        policy: &mut dyn Policy,
        opt: &mut Optimizer,
        max_grad_norm: Option<f64>,
        share: f32,
    ) -> Result<StepInfo> {
        let Some(ranks) = self.0 else { return apply_gradients(policy, opt, max_grad_norm) };
        if let Some(flat) = policy.backward_flat()? {
            flat.grads.iter_mut().for_each(|g| *g *= share);
            ranks.comm.all_reduce_sum_f32(flat.grads)?;
            return opt.step(Params::Flat(flat), max_grad_norm);
        }
        let grads = policy.backward()?;
        let summed = sum_host_gradients(&grads, &opt.m, share, &*ranks.comm)?;
        apply_host_gradients(policy, opt, &summed, max_grad_norm)
    }
}

/// Σ over ranks of `share` × this rank's host gradients (`None` = 0), sized as the moments `m`:
/// one all-reduce of their concatenation.
fn sum_host_gradients(
    grads: &[Option<Vec<f32>>],
    m: &[Vec<f32>],
    share: f32,
    comm: &dyn Collective,
) -> Result<Vec<Option<Vec<f32>>>> {
    let mut flat: Vec<f32> = Vec::with_capacity(m.iter().map(Vec::len).sum());
    for (g, m) in grads.iter().zip(m) {
        match g {
            Some(g) => flat.extend(g.iter().map(|x| x * share)),
            None => flat.extend(std::iter::repeat_n(0.0, m.len())),
        }
    }
    comm.all_reduce_sum_f32(&mut flat)?;
    let mut rest = &flat[..];
    Ok(m.iter()
        .map(|m| {
            let (g, r) = rest.split_at(m.len());
            rest = r;
            Some(g.to_vec())
        })
        .collect())
}
