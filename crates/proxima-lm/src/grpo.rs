//! GRPO's numerics (Shao et al. 2024, "DeepSeekMath", arXiv:2402.03300, Sec. 4.1), as pure
//! functions over a batch of sampled sequences — the building blocks of the language-model
//! trainers (issue 6). Rows are ordered prompt-major: sample b belongs to group b / G.
//!
//! * Group-relative advantages Â_i = (r_i − mean(r)) / (std(r) + ε) with the **Bessel-corrected**
//!   std (n − 1, PyTorch's `std` default, as TRL computes it) and ε = 1e-4; or mean-centring
//!   only (Dr. GRPO, Liu et al. 2025). Groups whose rewards are all equal get Â = 0: they carry
//!   no signal and are counted.
//! * Per token t of sequence i: ℓ = −min(r·Â_i, clip(r, 1 − ε_low, 1 + ε_high)·Â_i) + β·k3, with
//!   r = exp(log π − log π_old) and the k3 estimator of KL[π ‖ π_ref]:
//!   k3 = π_ref/π − log(π_ref/π) − 1 (≥ 0, = 0 when π = π_ref; Schulman 2020, "Approximating KL
//!   divergence"). Separate ε_low / ε_high give DAPO's clip-higher.
//! * Aggregation over the real tokens (mask = 1), see [`Aggregation`].

use candle_core::{Tensor, D};
use proxima::{ProximaError, Result};

/// ε added to the group std.
pub const ADV_EPS: f64 = 1e-4;

/// How per-token losses become one scalar.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Aggregation {
    /// Mean over each sequence's real tokens, then mean over sequences (original GRPO).
    SeqMeanTokenMean,
    /// Mean over all real tokens of the batch (DAPO's token-level loss).
    TokenMean,
    /// Sum over real tokens divided by (sequences × a constant length), Dr. GRPO.
    ConstantLength(usize),
}

/// Group-relative advantages for `rewards` in groups of `group_size` (prompt-major). With
/// `scale`, (r − mean)/(std + [`ADV_EPS`]) (Bessel std); without, r − mean (Dr. GRPO). Returns
/// the advantages and the number of groups whose rewards are all equal (zero advantage, no
/// learning signal).
///
/// # Errors
/// `InvalidArgument` when `group_size` < 2 or does not divide the number of rewards.
pub fn group_advantages(rewards: &[f64], group_size: usize, scale: bool) -> Result<(Vec<f64>, usize)> {
    if group_size < 2 || rewards.len() % group_size != 0 {
        return Err(ProximaError::InvalidArgument(format!(
            "{} rewards cannot be split into groups of {group_size} (need a group size ≥ 2 that divides them)",
            rewards.len()
        )));
    }
    let mut out = Vec::with_capacity(rewards.len());
    let mut degenerate = 0;
    for g in rewards.chunks(group_size) {
        let n = g.len() as f64;
        let mean = g.iter().sum::<f64>() / n;
        let std = (g.iter().map(|r| (r - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
        if g.iter().all(|&r| r == g[0]) {
            degenerate += 1;
        }
        out.extend(g.iter().map(|r| if scale { (r - mean) / (std + ADV_EPS) } else { r - mean }));
    }
    Ok((out, degenerate))
}

/// log π(token) for every position: `logits` `[B, T, V]`, `tokens` `[B, T]` (u32) → `[B, T]`,
/// differentiable in `logits`.
///
/// # Errors
/// Tensor errors on shape mismatches.
pub fn token_log_probs(logits: &Tensor, tokens: &Tensor) -> Result<Tensor> {
    let lp = candle_nn::ops::log_softmax(logits, D::Minus1)?;
    Ok(lp.gather(&tokens.unsqueeze(D::Minus1)?, D::Minus1)?.squeeze(D::Minus1)?)
}

/// k3 = exp(ref − logp) − (ref − logp) − 1, elementwise (an unbiased, non-negative estimator of
/// KL[π ‖ π_ref] from samples of π).
///
/// # Errors
/// Tensor errors on shape mismatches.
pub fn k3(logp: &Tensor, ref_logp: &Tensor) -> Result<Tensor> {
    let d = (ref_logp - logp)?;
    Ok(((d.exp()? - &d)? - 1.0)?)
}

/// The inputs of [`grpo_loss`]; every `[B, T]` tensor is aligned with `tokens`.
#[derive(Clone, Copy, Debug)]
pub struct GrpoBatch<'a> {
    /// log π_θ(token), `[B, T]`, differentiable.
    pub logp: &'a Tensor,
    /// log π_θold(token), computed once at sampling time, `[B, T]`.
    pub old_logp: &'a Tensor,
    /// log π_ref(token), `[B, T]`.
    pub ref_logp: &'a Tensor,
    /// 1 for real response tokens, 0 for padding, `[B, T]` (built from positions, not token ids).
    pub mask: &'a Tensor,
    /// Â per sequence, `[B]`.
    pub advantages: &'a Tensor,
}

/// The GRPO loss and the masked mean of k3 (the KL to π_ref to report).
///
/// # Errors
/// Tensor errors on shape mismatches.
pub fn grpo_loss(
    b: &GrpoBatch<'_>,
    eps_low: f64,
    eps_high: f64,
    beta: f64,
    agg: Aggregation,
) -> Result<(Tensor, Tensor)> {
    let ratio = (b.logp - b.old_logp)?.exp()?;
    let adv = b.advantages.unsqueeze(1)?.broadcast_as(ratio.shape())?;
    let surr1 = (&ratio * &adv)?;
    let surr2 = (ratio.clamp(1.0 - eps_low, 1.0 + eps_high)? * &adv)?;
    let kl = k3(b.logp, b.ref_logp)?;
    let per_token = ((surr1.minimum(&surr2)?.neg()? + (&kl * beta)?)? * b.mask)?;
    let n_tokens = b.mask.sum_all()?.maximum(1.0)?;
    let kl_mean = (&kl * b.mask)?.sum_all()?.broadcast_div(&n_tokens)?;
    let loss = match agg {
        Aggregation::TokenMean => per_token.sum_all()?.broadcast_div(&n_tokens)?,
        Aggregation::SeqMeanTokenMean => {
            let per_seq = per_token.sum(1)?.div(&b.mask.sum(1)?.maximum(1.0)?)?;
            per_seq.mean_all()?
        }
        Aggregation::ConstantLength(len) => {
            let n = b.mask.dim(0)? as f64 * len as f64;
            (per_token.sum_all()? / n)?
        }
    };
    Ok((loss, kl_mean))
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, Var};

    #[test]
    fn group_advantages_for_one_winner_and_a_flat_group() {
        // [1, 0, 0, 0]: mean 0.25, Bessel std 0.5 → (0.75/0.5001, −0.25/0.5001 ×3).
        let (a, flat) = group_advantages(&[1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0], 4, true).unwrap();
        let s = 0.5 + ADV_EPS;
        for (x, want) in a.iter().zip([0.75 / s, -0.25 / s, -0.25 / s, -0.25 / s, 0.0, 0.0, 0.0, 0.0]) {
            assert!((x - want).abs() < 1e-12, "{a:?}");
        }
        assert_eq!(flat, 1);
        assert_eq!(group_advantages(&[1.0, 0.0, 0.0, 0.0], 4, false).unwrap().0, vec![0.75, -0.25, -0.25, -0.25]);
        assert!(group_advantages(&[1.0, 0.0, 0.0], 2, true).is_err());
        assert!(group_advantages(&[1.0], 1, true).is_err());
    }

    #[test]
    fn k3_is_nonnegative_and_zero_at_the_reference() {
        let dev = Device::Cpu;
        let lp = Tensor::new(&[-0.5f64, -2.0, -0.1, -3.0], &dev).unwrap();
        let refp = Tensor::new(&[-0.5f64, -1.0, -2.0, -0.2], &dev).unwrap();
        let k = k3(&lp, &refp).unwrap().to_vec1::<f64>().unwrap();
        assert_eq!(k[0], 0.0);
        assert!(k.iter().all(|&x| x >= 0.0), "{k:?}");
    }

    #[test]
    fn at_ratio_one_without_kl_the_loss_is_minus_the_mean_advantage() {
        let dev = Device::Cpu;
        let logp = Var::new(&[[-1.0f64, -2.0], [-0.5, -0.7]], &dev).unwrap();
        let old = logp.as_tensor().detach();
        let mask = Tensor::new(&[[1.0f64, 1.0], [1.0, 0.0]], &dev).unwrap();
        let adv = Tensor::new(&[0.6f64, -1.2], &dev).unwrap();
        let b = GrpoBatch { logp: logp.as_tensor(), old_logp: &old, ref_logp: &old, mask: &mask, advantages: &adv };
        // Sequence-mean then batch-mean: −(0.6 + (−1.2))/2 = 0.3; token mean: −(0.6·2 − 1.2)/3 = 0.
        let (l, kl) = grpo_loss(&b, 0.2, 0.28, 0.0, Aggregation::SeqMeanTokenMean).unwrap();
        assert!((l.to_scalar::<f64>().unwrap() - 0.3).abs() < 1e-12);
        assert_eq!(kl.to_scalar::<f64>().unwrap(), 0.0);
        let (l, _) = grpo_loss(&b, 0.2, 0.28, 0.0, Aggregation::TokenMean).unwrap();
        assert!(l.to_scalar::<f64>().unwrap().abs() < 1e-12);
    }
}
