//! A2C, the synchronous advantage actor-critic (Mnih et al. 2016, "Asynchronous Methods for
//! Deep Reinforcement Learning", arXiv:1602.01783; synchronous as in openai/baselines and SB3).
//!
//! One gradient step per rollout on the whole N·T batch. The n-step returns bootstrapped from
//! V(s_T) are GAE with λ = 1 (SB3's default `gae_lambda = 1.0`), so the rollout buffer and GAE
//! are PPO's. The loss is SB3's: −mean(log π(a|s)·Â) + c₁·mean((V − R)²) − c₂·mean(H) — note
//! the value loss has no ½ factor here, unlike PPO's.

use crate::algo::update::{apply_host_gradients, AdvantageNorm, UpdateStats};
use crate::error::{ProximaError, Result};
use crate::optim::Optimizer;
use crate::policy::Policy;
use crate::rollout::{explained_variance, RolloutBuffer};

/// A2C's hyperparameters (SB3's names), projected from the run's config.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct A2cParams {
    /// c₁: value-loss coefficient (the value loss has no ½ here).
    pub vf_coef: f64,
    /// c₂: entropy bonus coefficient.
    pub ent_coef: f64,
    /// Global gradient-norm clip; `None` = none.
    pub max_grad_norm: Option<f64>,
    /// Â is normalised over the rollout unless `Off` (one batch: per-minibatch and per-batch
    /// normalisation coincide).
    pub normalize_advantage: AdvantageNorm,
}

/// The gradient of the A2C loss over the whole rollout in `buf` (advantages computed), with
/// the loss's parts: what an A2C update steps with, and what an A3C worker sends to the
/// global parameters.
///
/// # Errors
/// `NonFinite` when the loss is not finite; the policy's errors.
pub fn gradients(
    policy: &mut dyn Policy,
    buf: &RolloutBuffer,
    p: &A2cParams,
) -> Result<(Vec<Option<Vec<f32>>>, [f64; 3])> {
    // One batch: minibatch and batch normalisation of Â coincide.
    let batch = buf.as_minibatch(p.normalize_advantage != AdvantageNorm::Off, policy.reads_byte_pixels());
    let [loss, policy_loss, value_loss, entropy] = policy.a2c_loss(&batch, p.vf_coef, p.ent_coef)?.values;
    if !loss.is_finite() {
        return Err(ProximaError::NonFinite(format!(
            "A2C loss is {loss} (policy_loss {policy_loss}, value_loss {value_loss}, entropy {entropy})"
        )));
    }
    Ok((policy.backward()?, [policy_loss as f64, value_loss as f64, entropy as f64]))
}

/// One A2C update: one optimiser step (RMSprop by default) on the whole rollout, gradients
/// clipped to `max_grad_norm` globally.
///
/// # Errors
/// `NonFinite` when the loss, a gradient or a new parameter is not finite (parameters are
/// then left unchanged).
pub fn update(
    policy: &mut dyn Policy,
    opt: &mut Optimizer,
    buf: &RolloutBuffer,
    p: &A2cParams,
    lr: f64,
) -> Result<UpdateStats> {
    let (grads, [policy_loss, value_loss, entropy]) = gradients(policy, buf, p)?;
    opt.lr = lr;
    let info = apply_host_gradients(policy, opt, &grads, p.max_grad_norm)?;
    Ok(UpdateStats {
        policy_loss,
        value_loss,
        entropy,
        explained_variance: explained_variance(&buf.values, &buf.returns),
        learning_rate: lr,
        grad_norm: info.grad_norm,
        epochs: 1,
        minibatches: 1,
        ..Default::default()
    })
}
