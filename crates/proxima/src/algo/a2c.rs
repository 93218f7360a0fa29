//! A2C, the synchronous advantage actor-critic (Mnih et al. 2016, "Asynchronous Methods for
//! Deep Reinforcement Learning", arXiv:1602.01783; synchronous as in openai/baselines and SB3).
//!
//! One gradient step per rollout on the whole N·T batch. The n-step returns bootstrapped from
//! V(s_T) are GAE with λ = 1 (SB3's default `gae_lambda = 1.0`), so the rollout buffer and GAE
//! are PPO's. The loss is SB3's: −mean(log π(a|s)·Â) + c₁·mean((V − R)²) − c₂·mean(H) — note
//! the value loss has no ½ factor here, unlike PPO's.

use crate::algo::optim::Adam;
use crate::algo::ppo::UpdateStats;
use crate::algo::AdvantageNorm;
use crate::error::{ProximaError, Result};
use crate::policy::ActorCritic;
use crate::rollout::{explained_variance, normalize_advantages, RolloutBuffer};
use candle_core::backprop::GradStore;
use candle_core::Tensor;

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

/// The A2C loss and its parts (scalars; `loss` is on the graph).
#[derive(Clone, Debug)]
pub struct A2cLoss {
    /// policy_loss + c₁·value_loss − c₂·entropy.
    pub loss: Tensor,
    /// −mean(log π(a|s)·Â).
    pub policy_loss: Tensor,
    /// mean((V(s) − R)²).
    pub value_loss: Tensor,
    /// mean entropy.
    pub entropy: Tensor,
}

/// The A2C loss (SB3's `A2C.train`). All inputs `[B]`; `log_prob`, `entropy`, `values`
/// differentiable, `advantages` and `returns` constant.
///
/// # Errors
/// Tensor errors on mismatched shapes or dtypes.
pub fn a2c_loss(
    log_prob: &Tensor,
    entropy: &Tensor,
    values: &Tensor,
    advantages: &Tensor,
    returns: &Tensor,
    vf_coef: f64,
    ent_coef: f64,
) -> Result<A2cLoss> {
    let policy_loss = (log_prob * advantages)?.mean_all()?.neg()?;
    let value_loss = (values - returns)?.sqr()?.mean_all()?;
    let entropy = entropy.mean_all()?;
    let loss = ((&policy_loss + (&value_loss * vf_coef)?)? - (&entropy * ent_coef)?)?;
    Ok(A2cLoss { loss, policy_loss, value_loss, entropy })
}

/// The gradient of the A2C loss over the whole rollout in `buf` (advantages computed), with
/// the loss's parts: what an A2C update steps with, and what an A3C worker sends to the
/// global parameters.
///
/// # Errors
/// `NonFinite` when the loss is not finite; tensor errors.
pub fn gradients(policy: &ActorCritic, buf: &RolloutBuffer, p: &A2cParams) -> Result<(GradStore, [f64; 3])> {
    let n = buf.len();
    let dev = policy.device();
    let mut adv = buf.advantages.clone();
    if p.normalize_advantage != AdvantageNorm::Off {
        normalize_advantages(&mut adv); // one batch: minibatch and batch normalisation coincide
    }
    let obs = Tensor::from_slice(&buf.observations, (n, buf.obs_dim), dev)?;
    let act = Tensor::from_slice(&buf.actions, (n, buf.act_dim), dev)?;
    let (log_prob, entropy, values) = policy.evaluate_actions(&obs, &act)?;
    let out = a2c_loss(
        &log_prob,
        &entropy,
        &values,
        &Tensor::from_slice(&adv, n, dev)?,
        &Tensor::from_slice(&buf.returns, n, dev)?,
        p.vf_coef,
        p.ent_coef,
    )?;
    let s = Tensor::stack(&[&out.loss, &out.policy_loss, &out.value_loss, &out.entropy], 0)?.to_vec1::<f32>()?;
    if !s[0].is_finite() {
        return Err(ProximaError::NonFinite(format!(
            "A2C loss is {} (policy_loss {}, value_loss {}, entropy {})",
            s[0], s[1], s[2], s[3]
        )));
    }
    Ok((out.loss.backward()?, [s[1] as f64, s[2] as f64, s[3] as f64]))
}

/// One A2C update: one optimiser step (RMSprop by default) on the whole rollout, gradients
/// clipped to `max_grad_norm` globally.
///
/// # Errors
/// `NonFinite` when the loss, a gradient or a new parameter is not finite (parameters are
/// then left unchanged).
pub fn update(
    policy: &ActorCritic,
    opt: &mut Adam,
    buf: &RolloutBuffer,
    p: &A2cParams,
    lr: f64,
) -> Result<UpdateStats> {
    let (grads, [policy_loss, value_loss, entropy]) = gradients(policy, buf, p)?;
    opt.lr = lr;
    let info = opt.step(policy.named_params(), &grads, p.max_grad_norm)?;
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
