//! RLHF-PPO's numerics over tokens (Ziegler et al. 2019, "Fine-Tuning Language Models from
//! Human Preferences", arXiv:1909.08593; Ouyang et al. 2022, InstructGPT; the conventions of
//! TRL's `PPOTrainer` and OpenRLHF) and the reward model's Bradley–Terry loss, as pure
//! functions. Every `[B, T]` array is row-major over B responses × T response positions, with
//! a right-padded `mask` (1 = real token, built from lengths, never from token ids).
//!
//! Per step: rewards r_t = −β·(log π(y_t) − log π_ref(y_t)) (the k1 estimator of the per-token
//! KL, subtracted from the reward) plus the reward model's score on the **last real token**;
//! GAE(γ, λ) over the tokens (Schulman et al. 2016, Eq. 11–12; γ = 1, λ = 0.95 by default);
//! advantages whitened over the real tokens; then the clipped surrogate L^CLIP (Schulman et al.
//! 2017, Eq. 7) and the clipped value loss, as token-level masked means.

use candle_core::Tensor;
use proxima::loss::{ppo_loss, Objective, PpoBatch, PpoCoefs};
use proxima::rollout::gae_step;
use proxima::{ProximaError, Result};

fn check_rows(name: &str, len: usize, rows: usize, width: usize) -> Result<()> {
    if width == 0 || len != rows * width {
        return Err(ProximaError::InvalidArgument(format!("`{name}` has {len} values, expected {rows} × {width}")));
    }
    Ok(())
}

/// The index of the last real token of every row of `mask` (`[B, T]`, right-padded).
///
/// # Errors
/// `InvalidArgument` when a row has no real token or the mask is not right-padded (a 0 before
/// a 1), or `mask` is not a multiple of `width`.
pub fn last_real_token(mask: &[f32], width: usize) -> Result<Vec<usize>> {
    if width == 0 || mask.len() % width != 0 {
        return Err(ProximaError::InvalidArgument(format!("a mask of {} values is not rows of {width}", mask.len())));
    }
    mask.chunks(width)
        .enumerate()
        .map(|(i, row)| {
            let n = row.iter().take_while(|&&m| m > 0.0).count();
            if n == 0 || row[n..].iter().any(|&m| m > 0.0) {
                return Err(ProximaError::InvalidArgument(format!(
                    "response {i}: the mask {row:?} is empty or not right-padded"
                )));
            }
            Ok(n - 1)
        })
        .collect()
}

/// Per-token rewards `[B, T]`: r_t = −`kl_coef`·(`logp`_t − `ref_logp`_t) on real tokens (k1,
/// an unbiased estimate of KL[π ‖ π_ref] per sampled token), 0 on padding, and `scores[i]`
/// (the reward model's score of response i) added on its last real token.
///
/// # Errors
/// `InvalidArgument` on length mismatches or a bad mask (see [`last_real_token`]).
pub fn kl_penalized_rewards(
    scores: &[f64],
    logp: &[f32],
    ref_logp: &[f32],
    mask: &[f32],
    width: usize,
    kl_coef: f64,
) -> Result<Vec<f64>> {
    let rows = scores.len();
    check_rows("logp", logp.len(), rows, width)?;
    check_rows("ref_logp", ref_logp.len(), rows, width)?;
    check_rows("mask", mask.len(), rows, width)?;
    let last = last_real_token(mask, width)?;
    let mut r: Vec<f64> = (0..rows * width)
        .map(|j| if mask[j] > 0.0 { -kl_coef * (f64::from(logp[j]) - f64::from(ref_logp[j])) } else { 0.0 })
        .collect();
    for (i, &l) in last.iter().enumerate() {
        r[i * width + l] += scores[i];
    }
    Ok(r)
}

/// GAE over tokens (Schulman et al. 2016, Eq. 11–12, the recursion step being
/// [`proxima::rollout::gae_step`]): δ_t = r_t + γ·V_{t+1} − V_t with V_{t+1} = 0 after the last
/// real token (the response ended: terminal), Â_t = δ_t + γλ·Â_{t+1}. Returns
/// `(advantages, returns = Â + V)`, both `[B, T]`, 0 on padding.
///
/// # Errors
/// `InvalidArgument` on length mismatches.
pub fn token_gae(
    rewards: &[f64],
    values: &[f32],
    mask: &[f32],
    width: usize,
    gamma: f64,
    lambda: f64,
) -> Result<(Vec<f64>, Vec<f64>)> {
    let rows = rewards.len() / width.max(1);
    check_rows("rewards", rewards.len(), rows, width)?;
    check_rows("values", values.len(), rows, width)?;
    check_rows("mask", mask.len(), rows, width)?;
    let mut adv = vec![0.0; rewards.len()];
    for i in 0..rows {
        let mut next_adv = 0.0;
        let mut next_value = 0.0;
        for t in (0..width).rev() {
            let j = i * width + t;
            if mask[j] <= 0.0 {
                next_adv = 0.0;
                next_value = 0.0;
                continue;
            }
            next_adv = gae_step(rewards[j], f64::from(values[j]), next_value, next_adv, true, gamma, lambda);
            next_value = f64::from(values[j]);
            adv[j] = next_adv;
        }
    }
    let returns =
        adv.iter().zip(values).zip(mask).map(|((a, v), m)| if *m > 0.0 { a + f64::from(*v) } else { 0.0 }).collect();
    Ok((adv, returns))
}

/// Whitens `x` over the real tokens: (x − mean)/√(var + 1e-8) with the Bessel-corrected
/// variance (TRL's `masked_whiten`); padding stays 0.
pub fn masked_whiten(x: &[f64], mask: &[f32]) -> Vec<f64> {
    let n: f64 = mask.iter().map(|&m| f64::from(m)).sum();
    if n < 2.0 {
        return x.iter().zip(mask).map(|(_, _)| 0.0).collect();
    }
    let mean = x.iter().zip(mask).map(|(v, m)| v * f64::from(*m)).sum::<f64>() / n;
    let var = x.iter().zip(mask).map(|(v, m)| (v - mean).powi(2) * f64::from(*m)).sum::<f64>() / (n - 1.0);
    x.iter().zip(mask).map(|(v, m)| if *m > 0.0 { (v - mean) / (var + 1e-8).sqrt() } else { 0.0 }).collect()
}

/// The inputs of [`ppo_token_losses`]; all `[B, T]` tensors of the model's dtype.
#[derive(Clone, Copy, Debug)]
pub struct PpoTokenBatch<'a> {
    /// log π_θ(y_t), differentiable.
    pub logp: &'a Tensor,
    /// log π_θold(y_t) from sampling time.
    pub old_logp: &'a Tensor,
    /// V_φ(s_t), differentiable.
    pub values: &'a Tensor,
    /// V_φold(s_t) from sampling time.
    pub old_values: &'a Tensor,
    /// Â_t (whitened).
    pub advantages: &'a Tensor,
    /// Returns R_t = Â_t (unwhitened) + V_old(s_t): the value target.
    pub returns: &'a Tensor,
    /// 1 = real token.
    pub mask: &'a Tensor,
}

/// What [`ppo_token_losses`] returns: scalar tensors.
#[derive(Clone, Debug)]
pub struct PpoTokenLosses {
    /// −L^CLIP: masked mean of max(−Â·r_t(θ), −Â·clip(r_t(θ), 1 − ε, 1 + ε)).
    pub policy: Tensor,
    /// ½·masked mean of max((V − R)², (V_old + clip(V − V_old, ±ε_vf) − R)²) (or the plain
    /// squared error without `clip_range_vf`).
    pub value: Tensor,
    /// Fraction of real tokens whose ratio left [1 − ε, 1 + ε].
    pub clip_fraction: Tensor,
    /// Masked mean of (r − 1) − log r, the k3 estimate of KL[π_old ‖ π].
    pub approx_kl: Tensor,
}

/// The clipped policy and value losses of PPO over tokens, as token-level masked means (the
/// mean over every real token of the batch): the classic PPO loss ([`proxima::loss::ppo_loss`],
/// L^CLIP and the optionally clipped value loss) with the response mask, and no entropy bonus.
///
/// # Errors
/// Tensor errors on shape mismatches.
pub fn ppo_token_losses(b: &PpoTokenBatch<'_>, clip_range: f64, clip_range_vf: Option<f64>) -> Result<PpoTokenLosses> {
    let batch = PpoBatch {
        log_prob: b.logp,
        entropy: None,
        values: b.values,
        old_log_prob: b.old_logp,
        advantages: b.advantages,
        old_values: b.old_values,
        returns: b.returns,
        kl: None,
        mask: Some(b.mask),
    };
    let coefs =
        PpoCoefs { clip_range, clip_range_vf, vf_coef: 1.0, ent_coef: 0.0, objective: Objective::Clip, kl_coef: 0.0 };
    let out = ppo_loss(&batch, &coefs)?;
    let n = b.mask.sum_all()?.maximum(1.0)?;
    let mean = |x: &Tensor| -> Result<Tensor> { Ok((x * b.mask)?.sum_all()?.broadcast_div(&n)?) };
    let ratio = out.log_ratio.exp()?;
    let outside = (ratio.gt(1.0 + clip_range)?.to_dtype(b.mask.dtype())?
        + ratio.lt(1.0 - clip_range)?.to_dtype(b.mask.dtype())?)?;
    let clip_fraction = mean(&outside)?;
    let approx_kl = mean(&((&ratio - 1.0)? - &out.log_ratio)?)?;
    Ok(PpoTokenLosses { policy: out.policy_loss, value: out.value_loss, clip_fraction, approx_kl })
}

/// The KL coefficient β: fixed, or adapted towards a target KL with Ziegler et al.'s
/// proportional controller: e = clip(KL/target − 1, −0.2, 0.2), β ← β·(1 + e·n/horizon).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct KlController {
    /// Current β.
    pub coef: f64,
    /// Target KL per response (summed over tokens), nats; `None` = fixed β.
    pub target: Option<f64>,
    /// Horizon (responses) of the controller (10,000 in Ziegler et al.).
    pub horizon: f64,
}

impl KlController {
    /// Updates β from the `kl` measured (per response, summed over tokens) over `n` responses.
    pub fn update(&mut self, kl: f64, n: usize) {
        if let Some(target) = self.target {
            let e = (kl / target - 1.0).clamp(-0.2, 0.2);
            self.coef *= 1.0 + e * n as f64 / self.horizon;
        }
    }
}

/// The Bradley–Terry loss of a reward model: mean over pairs of −log σ(r_chosen − r_rejected),
/// computed stably as softplus(−(r_c − r_r)). `chosen`, `rejected`: `[P]` scores.
///
/// # Errors
/// Tensor errors on shape mismatches.
pub fn bradley_terry_loss(chosen: &Tensor, rejected: &Tensor) -> Result<Tensor> {
    let x = (rejected - chosen)?; // −(r_c − r_r)
    let softplus = (x.relu()? + (x.abs()?.neg()?.exp()? + 1.0)?.log()?)?;
    Ok(softplus.mean_all()?)
}

/// The weight of a micro-batch's loss in gradient accumulation so that the summed gradients
/// equal the whole batch's: a micro-batch loss normalised by its own count `part` (tokens for
/// a token-level mean, sequences for a sequence mean) contributes `part / whole`.
pub fn micro_batch_weight(part: f64, whole: f64) -> f64 {
    if whole > 0.0 {
        part / whole
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, Var};

    #[test]
    fn the_score_lands_on_the_last_real_token() {
        let mask = [1.0, 1.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0];
        let logp = [-0.5f32; 12];
        let refp = [-0.7f32; 12];
        let r = kl_penalized_rewards(&[2.0, -1.0, 0.5], &logp, &refp, &mask, 4, 0.1).unwrap();
        let kl = -0.1 * (f64::from(-0.5f32) - f64::from(-0.7f32)); // −β·(logp − ref) per real token
        let want = [kl, kl, kl + 2.0, 0.0, kl - 1.0, 0.0, 0.0, 0.0, kl, kl, kl, kl + 0.5];
        for (a, b) in r.iter().zip(want) {
            assert!((a - b).abs() < 1e-9, "{r:?}");
        }
        assert!(last_real_token(&[0.0, 0.0], 2).is_err(), "empty response");
        assert!(last_real_token(&[1.0, 0.0, 1.0], 3).is_err(), "not right-padded");
        assert!(kl_penalized_rewards(&[1.0], &logp, &refp, &mask, 4, 0.1).is_err());
    }

    /// γ = 1, λ = 1: Â_t = Σ_{k≥t} r_k − V_t (Monte-Carlo); λ = 0: one-step TD errors.
    #[test]
    fn token_gae_limits() {
        let mask = [1.0, 1.0, 1.0, 0.0];
        let r = [0.1, -0.2, 1.0, 0.0];
        let v = [0.3f32, 0.5, -0.4, 9.0];
        let (a, ret) = token_gae(&r, &v, &mask, 4, 1.0, 1.0).unwrap();
        let mc = [0.9 - 0.3, 0.8 - 0.5, 1.0 + 0.4];
        for t in 0..3 {
            assert!((a[t] - mc[t]).abs() < 1e-6, "{a:?}");
            assert!((ret[t] - (mc[t] + f64::from(v[t]))).abs() < 1e-6);
        }
        assert_eq!((a[3], ret[3]), (0.0, 0.0), "padding gets nothing (its value 9 is never used)");
        let (a0, _) = token_gae(&r, &v, &mask, 4, 1.0, 0.0).unwrap();
        let td = [0.1 + 0.5 - 0.3, -0.2 - 0.4 - 0.5, 1.0 + 0.4];
        for t in 0..3 {
            assert!((a0[t] - td[t]).abs() < 1e-6, "{a0:?}");
        }
    }

    #[test]
    fn whitening_uses_only_real_tokens() {
        let x = [1.0, 2.0, 3.0, 100.0];
        let w = masked_whiten(&x, &[1.0, 1.0, 1.0, 0.0]);
        assert!((w[0] + 1.0).abs() < 1e-6 && w[1].abs() < 1e-9 && (w[2] - 1.0).abs() < 1e-6 && w[3] == 0.0, "{w:?}");
    }

    #[test]
    fn at_ratio_one_the_policy_loss_is_minus_the_mean_advantage() {
        let dev = Device::Cpu;
        let lp = Var::new(&[[-1.0f64, -2.0], [-0.5, -0.3]], &dev).unwrap();
        let old = lp.as_tensor().detach();
        let adv = Tensor::new(&[[1.0f64, -0.5], [2.0, 7.0]], &dev).unwrap();
        let mask = Tensor::new(&[[1.0f64, 1.0], [1.0, 0.0]], &dev).unwrap();
        let v = Tensor::new(&[[0.0f64, 1.0], [2.0, 3.0]], &dev).unwrap();
        let ret = Tensor::new(&[[1.0f64, 1.0], [0.0, 0.0]], &dev).unwrap();
        let b = PpoTokenBatch {
            logp: lp.as_tensor(),
            old_logp: &old,
            values: &v,
            old_values: &v,
            advantages: &adv,
            returns: &ret,
            mask: &mask,
        };
        let l = ppo_token_losses(&b, 0.2, Some(0.2)).unwrap();
        assert!((l.policy.to_scalar::<f64>().unwrap() + 2.5 / 3.0).abs() < 1e-12);
        // ½·mean((0−1)², (1−1)², (2−0)²) over the 3 real tokens.
        assert!((l.value.to_scalar::<f64>().unwrap() - 0.5 * 5.0 / 3.0).abs() < 1e-12);
        assert_eq!(l.clip_fraction.to_scalar::<f64>().unwrap(), 0.0);
    }

    #[test]
    fn adaptive_kl_moves_towards_the_target() {
        let mut c = KlController { coef: 0.1, target: Some(1.0), horizon: 100.0 };
        c.update(5.0, 10);
        assert!((c.coef - 0.1 * 1.02).abs() < 1e-12, "error clipped to +0.2");
        c.update(0.5, 10);
        assert!(c.coef < 0.102);
        let mut f = KlController { target: None, ..c };
        f.update(100.0, 10);
        assert_eq!(f.coef, c.coef);
    }

    #[test]
    fn bradley_terry_matches_minus_log_sigmoid() {
        let dev = Device::Cpu;
        let c = Tensor::new(&[2.0f64, -1.0, 50.0], &dev).unwrap();
        let r = Tensor::new(&[1.0f64, 0.5, -50.0], &dev).unwrap();
        let l = bradley_terry_loss(&c, &r).unwrap().to_scalar::<f64>().unwrap();
        let sig = |x: f64| 1.0 / (1.0 + (-x).exp());
        let want = -(sig(1.0).ln() + sig(-1.5).ln() + sig(100.0).ln()) / 3.0;
        assert!((l - want).abs() < 1e-12, "{l} vs {want}");
    }
}
