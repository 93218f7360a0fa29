//! The losses of the policy-gradient family as pure functions of differentiable tensors (candle):
//! PPO's L^CLIP, L^KLPEN and plain surrogate with the (optionally clipped) value loss and the
//! entropy bonus, and A2C's loss. They hold no state and read no config; the candle network
//! back-propagates them, and the golden vectors (`shared/golden/ppo_loss.json`,
//! `gaussian.json`) check their values and gradients.

use crate::error::{ProximaError, Result};
use candle_core::Tensor;
use serde::{Deserialize, Serialize};

/// The PPO objective (Schulman et al. 2017, Sec. 3–4 and Table 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Objective {
    /// L^CLIP: min(r·Â, clip(r, 1−ε, 1+ε)·Â) (Eq. 7), the default.
    Clip,
    /// L^KLPEN with an adaptive β (Eq. 8): after each update, β ← 2β if d > 1.5·d_targ,
    /// β ← β/2 if d < d_targ/1.5.
    AdaptiveKl,
    /// L^KLPEN with a constant β.
    FixedKl,
    /// The plain surrogate r·Â (Eq. 6, "no clipping or penalty").
    None,
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

/// The loss's inputs for a minibatch of B samples. Every tensor is `[B]` (or, for tokens,
/// `[B, T]` with a `mask`), same dtype.
#[derive(Clone, Copy, Debug)]
pub struct PpoBatch<'a> {
    /// log π_θ(a_t|s_t) under the current parameters (differentiable).
    pub log_prob: &'a Tensor,
    /// Entropy of π_θ(·|s_t) (differentiable); `None` = no entropy bonus (S = 0).
    pub entropy: Option<&'a Tensor>,
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
    /// 1 where an entry is real, 0 where it is padding (a language model's response tokens):
    /// every mean is then the masked mean Σ x·mask / max(Σ mask, 1) over the real entries
    /// (token-level, as TRL and OpenRLHF); `None` = the plain mean over all entries.
    pub mask: Option<&'a Tensor>,
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
    /// mean entropy S (0 without an entropy input).
    pub entropy: Tensor,
    /// log r_t(θ) = log π_θ − log π_θold, `[B]`, detached (for the diagnostics).
    pub log_ratio: Tensor,
}

/// The mean of `x`'s entries, or its masked mean Σ x·mask / max(Σ mask, 1) (a scalar tensor).
fn mean(x: &Tensor, mask: Option<&Tensor>) -> Result<Tensor> {
    Ok(match mask {
        None => x.mean_all()?,
        Some(m) => (x * m)?.sum_all()?.broadcast_div(&m.sum_all()?.maximum(1.0)?)?,
    })
}

/// The PPO objective, Eq. 6–9 of Schulman et al. 2017, written as a loss to minimise exactly as
/// CleanRL's `ppo.py` does (value loss with the ½ factor and optional clipping as in
/// openai/baselines). `c.objective` picks the surrogate: L^CLIP (Eq. 7), L^KLPEN (Eq. 8, with
/// the analytic KL in `b.kl`) or the unclipped r·Â (Eq. 6). With `b.mask` every mean is over
/// the real entries only: the same loss over a language model's tokens (RLHF-PPO).
///
/// # Errors
/// Tensor errors on mismatched shapes or dtypes; `InvalidArgument` for a KL objective without
/// `b.kl`.
pub fn ppo_loss(b: &PpoBatch<'_>, c: &PpoCoefs) -> Result<PpoLoss> {
    let mean = |x: &Tensor| mean(x, b.mask);
    let log_ratio = (b.log_prob - b.old_log_prob)?;
    let ratio = log_ratio.exp()?; // r_t(θ)
    let surr1 = (b.advantages * &ratio)?; // r_t(θ)·Â_t
    let policy_loss = match c.objective {
        Objective::Clip => {
            let eps = c.clip_range;
            let surr2 = (b.advantages * ratio.clamp(1.0 - eps, 1.0 + eps)?)?;
            mean(&surr1.minimum(&surr2)?)?.neg()?
        }
        Objective::None => mean(&surr1)?.neg()?,
        Objective::AdaptiveKl | Objective::FixedKl => {
            let kl =
                b.kl.ok_or_else(|| ProximaError::InvalidArgument("the KL objectives need the per-sample KL".into()))?;
            ((mean(kl)? * c.kl_coef)? - mean(&surr1)?)?
        }
    };
    let v_err = (b.values - b.returns)?.sqr()?;
    let value_loss = match c.clip_range_vf {
        None => (mean(&v_err)? * 0.5)?,
        Some(eps_v) => {
            let v_clipped = (b.old_values + (b.values - b.old_values)?.clamp(-eps_v, eps_v)?)?;
            let v_err_clipped = (v_clipped - b.returns)?.sqr()?;
            (mean(&v_err.maximum(&v_err_clipped)?)? * 0.5)?
        }
    };
    let (loss, entropy) = match b.entropy {
        Some(e) => {
            let entropy = mean(e)?;
            (((&policy_loss + (&value_loss * c.vf_coef)?)? - (&entropy * c.ent_coef)?)?, entropy)
        }
        None => (
            (&policy_loss + (&value_loss * c.vf_coef)?)?,
            Tensor::zeros((), policy_loss.dtype(), policy_loss.device())?,
        ),
    };
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

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, Var};

    /// L^CLIP with ε = 0.2, c₁ = 0.5, no value clipping, no entropy bonus.
    const CLIP_02: PpoCoefs = PpoCoefs {
        clip_range: 0.2,
        clip_range_vf: None,
        vf_coef: 0.5,
        ent_coef: 0.0,
        objective: Objective::Clip,
        kl_coef: 1.0,
    };

    #[test]
    fn at_ratio_one_policy_loss_is_minus_mean_advantage() {
        let dev = Device::Cpu;
        let lp = Var::new(&[-0.5f64, -1.0, -2.0], &dev).unwrap();
        let adv = Tensor::new(&[1.0f64, -2.0, 4.0], &dev).unwrap();
        let z = Tensor::zeros(3, candle_core::DType::F64, &dev).unwrap();
        let out = ppo_loss(
            &PpoBatch {
                log_prob: lp.as_tensor(),
                entropy: Some(&z),
                values: &z,
                old_log_prob: &lp.as_tensor().detach(),
                advantages: &adv,
                old_values: &z,
                returns: &z,
                kl: None,
                mask: None,
            },
            &CLIP_02,
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
                entropy: Some(&zero),
                values: &zero,
                old_log_prob: &zero,
                advantages: &adv,
                old_values: &zero,
                returns: &zero,
                kl: None,
                mask: None,
            },
            &CLIP_02,
        )
        .unwrap();
        assert!((out.policy_loss.to_scalar::<f64>().unwrap() + 1.2).abs() < 1e-12);
        let g = out.loss.backward().unwrap();
        let gl = g.get(lp.as_tensor()).map(|t| t.to_vec1::<f64>().unwrap()[0]).unwrap_or(0.0);
        assert_eq!(gl, 0.0);
    }
}
