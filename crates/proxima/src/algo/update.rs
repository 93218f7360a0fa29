//! What every algorithm's update shares: where advantages are normalised, the diagnostics an
//! update reports, and applying a gradient to the policy with the optimiser.

use super::optim::{Optimizer, StepInfo};
use crate::dist::Collective;
use crate::error::Result;
use crate::policy::Policy;
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
        return opt.step_flat(flat.names, flat.values, flat.grads, max_grad_norm, flat.halves);
    }
    let grads = policy.backward()?;
    apply_host_gradients(policy, opt, &grads, max_grad_norm)
}

/// [`apply_gradients`] in a distributed run ([`crate::dist`]): this rank's gradient times
/// `share` (its part of the global minibatch), summed over ranks, is the step's gradient — the
/// global minibatch's mean-loss gradient — on every rank alike, so the parameters stay the same
/// everywhere. Clipping and the NaN guard then see the summed gradient.
///
/// # Errors
/// As [`apply_gradients`]; the engine's.
pub fn apply_gradients_summed(
    policy: &mut dyn Policy,
    opt: &mut Optimizer,
    max_grad_norm: Option<f64>,
    comm: &dyn Collective,
    share: f32,
) -> Result<StepInfo> {
    if let Some(flat) = policy.backward_flat()? {
        flat.grads.iter_mut().for_each(|g| *g *= share);
        comm.all_reduce_sum_f32(flat.grads)?;
        return opt.step_flat(flat.names, flat.values, flat.grads, max_grad_norm, flat.halves);
    }
    let grads = policy.backward()?;
    let sizes: Vec<usize> = opt.m.iter().map(Vec::len).collect();
    let mut flat: Vec<f32> = Vec::with_capacity(sizes.iter().sum());
    for (g, &n) in grads.iter().zip(&sizes) {
        match g {
            Some(g) => flat.extend(g.iter().map(|x| x * share)),
            None => flat.extend(std::iter::repeat_n(0.0, n)),
        }
    }
    comm.all_reduce_sum_f32(&mut flat)?;
    let mut rest = &flat[..];
    let summed: Vec<Option<Vec<f32>>> = sizes
        .iter()
        .map(|&n| {
            let (g, r) = rest.split_at(n);
            rest = r;
            Some(g.to_vec())
        })
        .collect();
    apply_host_gradients(policy, opt, &summed, max_grad_norm)
}

/// [`apply_gradients`] with gradients already on the host (one entry per parameter, as
/// [`Policy::backward`] returns them): how an A3C worker's gradient reaches the global network.
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
    let info = opt.step_values(&names, &mut values, grads, max_grad_norm)?;
    policy.set_params(&values)?;
    Ok(info)
}
