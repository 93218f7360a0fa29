//! PPO (Schulman et al. 2017, arXiv:1707.06347): the loss as a pure function — L^CLIP, the
//! KL-penalised L^KLPEN (fixed or adaptive β) or the plain surrogate — and the update (K epochs
//! of shuffled minibatches) over one rollout.

use crate::algo::optim::Adam;
use crate::algo::{AdvantageNorm, Objective};
use crate::error::{ProximaError, Result};
use crate::policy::ActorCritic;
use crate::rollout::{explained_variance, normalize_advantages, Minibatch, Minibatches, RolloutBuffer};
use candle_core::Tensor;
use rand::Rng;

/// PPO's hyperparameters (SB3's names), projected from the run's config.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PpoParams {
    /// K: epochs over each rollout.
    pub n_epochs: usize,
    /// Minibatch size M (divides N·T).
    pub batch_size: usize,
    /// ε: the clip range of r_t(θ).
    pub clip_range: f64,
    /// Clip range of V around V_old; `None` = unclipped value loss.
    pub clip_range_vf: Option<f64>,
    /// c₁.
    pub vf_coef: f64,
    /// c₂.
    pub ent_coef: f64,
    /// Global gradient-norm clip; `None` = none.
    pub max_grad_norm: Option<f64>,
    /// Stop the epochs before a step whose minibatch approx KL exceeds 1.5·target_kl (SB3's rule).
    pub target_kl: Option<f64>,
    /// Where Â is normalised.
    pub normalize_advantage: AdvantageNorm,
    /// The surrogate: clipped, KL-penalised (fixed or adaptive β) or plain.
    pub objective: Objective,
    /// d_targ of the adaptive β.
    pub kl_target: f64,
}

impl PpoParams {
    /// The loss's coefficients with the current β.
    pub fn coefs(&self, kl_coef: f64) -> PpoCoefs {
        PpoCoefs {
            clip_range: self.clip_range,
            clip_range_vf: self.clip_range_vf,
            vf_coef: self.vf_coef,
            ent_coef: self.ent_coef,
            objective: self.objective,
            kl_coef,
        }
    }
}

/// Coefficients of the PPO objective.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PpoCoefs {
    /// ε: the ratio r_t(θ) is clipped to [1−ε, 1+ε].
    pub clip_range: f64,
    /// Clip range of V around V_old; `None` = unclipped value loss.
    pub clip_range_vf: Option<f64>,
    /// c₁.
    pub vf_coef: f64,
    /// c₂.
    pub ent_coef: f64,
    /// Which surrogate: clipped, KL-penalised or plain.
    pub objective: Objective,
    /// β of L^KLPEN (ignored by `clip` and `none`).
    pub kl_coef: f64,
}

/// The loss's inputs for a minibatch of B samples. Every tensor is `[B]`, same dtype.
#[derive(Clone, Copy, Debug)]
pub struct PpoBatch<'a> {
    /// log π_θ(a_t|s_t) under the current parameters (differentiable).
    pub log_prob: &'a Tensor,
    /// Entropy of π_θ(·|s_t) (differentiable).
    pub entropy: &'a Tensor,
    /// V_θ(s_t) (differentiable).
    pub values: &'a Tensor,
    /// log π_θold(a_t|s_t), fixed at collection.
    pub old_log_prob: &'a Tensor,
    /// Â_t, already normalised if normalisation is on.
    pub advantages: &'a Tensor,
    /// V_θold(s_t), fixed at collection.
    pub old_values: &'a Tensor,
    /// The critic's targets R_t = Â_t + V_old(s_t) (unnormalised advantages).
    pub returns: &'a Tensor,
    /// KL[π_θold(·|s_t), π_θ(·|s_t)] per sample, analytic and differentiable; needed by the
    /// KL objectives, ignored by the others.
    pub kl: Option<&'a Tensor>,
}

/// The loss and its parts (scalars, still on the graph where differentiable).
#[derive(Clone, Debug)]
pub struct PpoLoss {
    /// L = L^π + c₁·L^VF − c₂·S (to *minimise*; L^π is the negated surrogate).
    pub loss: Tensor,
    /// L^π: −mean(min(r·Â, clip(r, 1−ε, 1+ε)·Â)) for `clip`; −mean(r·Â − β·KL) for the KL
    /// objectives; −mean(r·Â) for `none`.
    pub policy_loss: Tensor,
    /// ½·mean((V−R)²), or ½·mean(max((V−R)², (V_old + clip(V−V_old, ±ε_v) − R)²)) when clipped.
    pub value_loss: Tensor,
    /// mean entropy S.
    pub entropy: Tensor,
    /// log r_t(θ) = log π_θ − log π_θold, `[B]`, detached (for the diagnostics).
    pub log_ratio: Tensor,
}

/// The PPO objective, Eq. 6–9 of Schulman et al. 2017, written as a loss to minimise exactly as
/// CleanRL's `ppo.py` does (value loss with the ½ factor and optional clipping as in
/// openai/baselines). `c.objective` picks the surrogate: L^CLIP (Eq. 7), L^KLPEN (Eq. 8, with
/// the analytic KL in `b.kl`) or the unclipped r·Â (Eq. 6).
///
/// # Errors
/// Tensor errors on mismatched shapes or dtypes; `InvalidArgument` for a KL objective without
/// `b.kl`.
pub fn ppo_loss(b: &PpoBatch<'_>, c: &PpoCoefs) -> Result<PpoLoss> {
    let log_ratio = (b.log_prob - b.old_log_prob)?;
    let ratio = log_ratio.exp()?; // r_t(θ)
    let surr1 = (b.advantages * &ratio)?; // r_t(θ)·Â_t
    let policy_loss = match c.objective {
        Objective::Clip => {
            let eps = c.clip_range;
            let surr2 = (b.advantages * ratio.clamp(1.0 - eps, 1.0 + eps)?)?;
            surr1.minimum(&surr2)?.mean_all()?.neg()?
        }
        Objective::None => surr1.mean_all()?.neg()?,
        Objective::AdaptiveKl | Objective::FixedKl => {
            let kl =
                b.kl.ok_or_else(|| ProximaError::InvalidArgument("the KL objectives need the per-sample KL".into()))?;
            ((kl.mean_all()? * c.kl_coef)? - surr1.mean_all()?)?
        }
    };
    let v_err = (b.values - b.returns)?.sqr()?;
    let value_loss = match c.clip_range_vf {
        None => (v_err.mean_all()? * 0.5)?,
        Some(eps_v) => {
            let v_clipped = (b.old_values + (b.values - b.old_values)?.clamp(-eps_v, eps_v)?)?;
            let v_err_clipped = (v_clipped - b.returns)?.sqr()?;
            (v_err.maximum(&v_err_clipped)?.mean_all()? * 0.5)?
        }
    };
    let entropy = b.entropy.mean_all()?;
    let loss = ((&policy_loss + (&value_loss * c.vf_coef)?)? - (&entropy * c.ent_coef)?)?;
    Ok(PpoLoss { loss, policy_loss, value_loss, entropy, log_ratio: log_ratio.detach() })
}

/// approx KL = mean((r−1) − log r) (Schulman's "k3" estimator, as CleanRL and SB3 report it) and
/// clip fraction = mean(|r−1| > ε), from log r on the host.
pub fn kl_and_clip_fraction(log_ratio: &[f32], clip_range: f64) -> (f64, f64) {
    let n = log_ratio.len().max(1) as f64;
    let (mut kl, mut clipped) = (0f64, 0usize);
    for &lr in log_ratio {
        let lr = lr as f64;
        let r = lr.exp();
        kl += (r - 1.0) - lr;
        clipped += usize::from((r - 1.0).abs() > clip_range);
    }
    (kl / n, clipped as f64 / n)
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
}

/// Runs K epochs of minibatch updates on one full rollout (whose advantages are computed).
///
/// For each epoch the N·T indices are shuffled with `rng` and cut into minibatches of
/// `p.batch_size`; for each minibatch Â is normalised (per `p.normalize_advantage`), the
/// loss is back-propagated, gradients are clipped to `max_grad_norm` globally, and Adam steps
/// with `lr`. With `target_kl` set, the update stops before a step whose minibatch KL
/// exceeds 1.5·target_kl (SB3's rule). After the epochs, d = mean KL[π_θold, π_θ] over the
/// rollout is measured (π_θold as the buffer stored it); with `objective = adaptive_kl` β
/// (`kl_coef`) is then adapted as in the paper's Sec. 4: β ← 2β if d > 1.5·d_targ, β ← β/2
/// if d < d_targ/1.5.
///
/// # Errors
/// `NonFinite` naming the minibatch when the loss or a gradient is not finite (parameters are
/// left as they were before that step).
pub fn update<R: Rng + ?Sized>(
    policy: &ActorCritic,
    opt: &mut Adam,
    buf: &RolloutBuffer,
    p: &PpoParams,
    lr: f64,
    kl_coef: &mut f64,
    rng: &mut R,
) -> Result<UpdateStats> {
    let kl_objective = matches!(p.objective, Objective::AdaptiveKl | Objective::FixedKl);
    let coefs = p.coefs(*kl_coef);
    let mut batches = Minibatches::new(buf, p.batch_size, p.normalize_advantage == AdvantageNorm::Batch, kl_objective);
    opt.lr = lr;
    let mut s = UpdateStats {
        learning_rate: lr,
        explained_variance: explained_variance(&buf.values, &buf.returns),
        kl_coef: if kl_objective { *kl_coef } else { 0.0 },
        ..Default::default()
    };
    let mut clip_sum = 0f64;
    'epochs: for _epoch in 0..p.n_epochs {
        batches.shuffle(rng);
        while let Some(mb) = batches.next_batch() {
            if p.normalize_advantage == AdvantageNorm::Minibatch {
                normalize_advantages(&mut mb.advantages);
            }
            let out = minibatch_loss(policy, buf, mb, &coefs, s.minibatches)?;
            let (kl, cf) = kl_and_clip_fraction(&out.log_ratio.to_vec1::<f32>()?, p.clip_range);
            if p.target_kl.is_some_and(|tk| kl > 1.5 * tk) {
                s.approx_kl = kl;
                break 'epochs;
            }
            let info = opt.step(policy.named_params(), &out.loss.backward()?, p.max_grad_norm)?;
            s.policy_loss += out.parts[0];
            s.value_loss += out.parts[1];
            s.entropy += out.parts[2];
            s.grad_norm += info.grad_norm;
            clip_sum += cf;
            s.approx_kl = kl;
            s.minibatches += 1;
        }
        s.epochs += 1;
    }
    let m = s.minibatches.max(1) as f64;
    (s.policy_loss, s.value_loss, s.entropy, s.grad_norm) =
        (s.policy_loss / m, s.value_loss / m, s.entropy / m, s.grad_norm / m);
    s.clip_fraction = clip_sum / m;
    s.kl_divergence = rollout_kl(policy, buf)?;
    if p.objective == Objective::AdaptiveKl {
        *kl_coef = adapt_kl_coef(*kl_coef, s.kl_divergence, p.kl_target);
    }
    Ok(s)
}

/// A minibatch's loss, on the graph, with its policy, value and entropy parts on the host.
struct MinibatchLoss {
    loss: Tensor,
    parts: [f64; 3],
    log_ratio: Tensor,
}

/// The PPO loss of minibatch `mb` (number `index` of the update, for errors) at the current θ.
///
/// # Errors
/// `NonFinite` when the loss is not finite; tensor errors.
fn minibatch_loss(
    policy: &ActorCritic,
    buf: &RolloutBuffer,
    mb: &Minibatch,
    coefs: &PpoCoefs,
    index: usize,
) -> Result<MinibatchLoss> {
    let (dev, b) = (policy.device(), mb.len);
    let t = |v: &[f32]| Tensor::from_slice(v, v.len(), dev);
    let obs = Tensor::from_slice(&mb.observations, (b, buf.obs_dim), dev)?;
    let act = Tensor::from_slice(&mb.actions, (b, buf.act_dim), dev)?;
    let (log_prob, entropy, values, head) = policy.evaluate_actions_with_head(&obs, &act)?;
    let kl = if mb.old_head.is_empty() {
        None
    } else {
        Some(policy.kl_of_head(&policy.dist_params_from_host(&mb.old_head, &buf.old_log_std)?, &head)?)
    };
    let (old_log_prob, advantages) = (t(&mb.old_log_probs)?, t(&mb.advantages)?);
    let (old_values, returns) = (t(&mb.old_values)?, t(&mb.returns)?);
    let batch = PpoBatch {
        log_prob: &log_prob,
        entropy: &entropy,
        values: &values,
        old_log_prob: &old_log_prob,
        advantages: &advantages,
        old_values: &old_values,
        returns: &returns,
        kl: kl.as_ref(),
    };
    let out = ppo_loss(&batch, coefs)?;
    let v = Tensor::stack(&[&out.loss, &out.policy_loss, &out.value_loss, &out.entropy], 0)?.to_vec1::<f32>()?;
    if !v[0].is_finite() {
        return Err(ProximaError::NonFinite(format!(
            "loss is {} at minibatch {index} (policy_loss {}, value_loss {}, entropy {})",
            v[0], v[1], v[2], v[3]
        )));
    }
    Ok(MinibatchLoss { loss: out.loss, parts: [v[1] as f64, v[2] as f64, v[3] as f64], log_ratio: out.log_ratio })
}

/// d = mean over the rollout of KL[π_θold(·|s), π_θ(·|s)] at the current θ (π_θold as stored
/// in `buf`): one forward pass over the N·T observations.
///
/// # Errors
/// Tensor errors.
fn rollout_kl(policy: &ActorCritic, buf: &RolloutBuffer) -> Result<f64> {
    let all_obs = policy.obs_tensor(&buf.observations)?;
    let old = policy.dist_params_from_host(&buf.old_head, &buf.old_log_std)?;
    Ok(policy.kl_from(&all_obs, &old)?.mean_all()?.to_scalar::<f32>()? as f64)
}

/// The adaptive-KL rule of Schulman et al. 2017, Sec. 4 (constants 1.5 and 2 are the paper's):
/// the new β given the measured d and the target d_targ.
pub fn adapt_kl_coef(beta: f64, d: f64, d_targ: f64) -> f64 {
    if d > 1.5 * d_targ {
        beta * 2.0
    } else if d < d_targ / 1.5 {
        beta / 2.0
    } else {
        beta
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, Var};

    #[test]
    fn at_ratio_one_policy_loss_is_minus_mean_advantage() {
        let dev = Device::Cpu;
        let lp = Var::new(&[-0.5f64, -1.0, -2.0], &dev).unwrap();
        let adv = Tensor::new(&[1.0f64, -2.0, 4.0], &dev).unwrap();
        let z = Tensor::zeros(3, candle_core::DType::F64, &dev).unwrap();
        let out = ppo_loss(
            &PpoBatch {
                log_prob: lp.as_tensor(),
                entropy: &z,
                values: &z,
                old_log_prob: &lp.as_tensor().detach(),
                advantages: &adv,
                old_values: &z,
                returns: &z,
                kl: None,
            },
            &PpoCoefs {
                clip_range: 0.2,
                clip_range_vf: None,
                vf_coef: 0.5,
                ent_coef: 0.0,
                objective: Objective::Clip,
                kl_coef: 1.0,
            },
        )
        .unwrap();
        assert!((out.policy_loss.to_scalar::<f64>().unwrap() + 1.0).abs() < 1e-12);
        // d L / d log π = −Â/B at r = 1 (inside the clip range the gradient flows).
        let g = out.loss.backward().unwrap();
        let g = g.get(lp.as_tensor()).unwrap().to_vec1::<f64>().unwrap();
        assert!((g[0] + 1.0 / 3.0).abs() < 1e-12 && (g[1] - 2.0 / 3.0).abs() < 1e-12);
        let (kl, cf) = kl_and_clip_fraction(&[0.0, 0.0], 0.2);
        assert_eq!((kl, cf), (0.0, 0.0));
    }

    #[test]
    fn clipped_side_has_no_gradient() {
        // r = e^0.5 > 1.2 with Â > 0: the clipped term is smaller, so min picks it: no gradient.
        let dev = Device::Cpu;
        let lp = Var::new(&[0.5f64], &dev).unwrap();
        let zero = Tensor::zeros(1, candle_core::DType::F64, &dev).unwrap();
        let adv = Tensor::new(&[1.0f64], &dev).unwrap();
        let out = ppo_loss(
            &PpoBatch {
                log_prob: lp.as_tensor(),
                entropy: &zero,
                values: &zero,
                old_log_prob: &zero,
                advantages: &adv,
                old_values: &zero,
                returns: &zero,
                kl: None,
            },
            &PpoCoefs {
                clip_range: 0.2,
                clip_range_vf: None,
                vf_coef: 0.5,
                ent_coef: 0.0,
                objective: Objective::Clip,
                kl_coef: 1.0,
            },
        )
        .unwrap();
        assert!((out.policy_loss.to_scalar::<f64>().unwrap() + 1.2).abs() < 1e-12);
        let g = out.loss.backward().unwrap();
        let gl = g.get(lp.as_tensor()).map(|t| t.to_vec1::<f64>().unwrap()[0]).unwrap_or(0.0);
        assert_eq!(gl, 0.0);
    }
}
