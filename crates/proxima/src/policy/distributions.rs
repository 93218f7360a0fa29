//! Action distributions: Categorical (discrete), MultiCategorical (independent Categoricals, for
//! `MultiDiscrete`) and diagonal Gaussian with a state-independent log-std (continuous).
//!
//! [`ActionKind`] is the one distribution type: its methods ([`ActionKind::log_prob_entropy`],
//! [`ActionKind::kl`], [`ActionKind::fisher_product`], [`ActionKind::sample_row`]) are the
//! only places that tell the three apart. Below them, two halves of primitives, by where they
//! run:
//! * **on tensors, differentiable** (`*_log_prob_entropy`): used inside the loss, with autograd
//!   through candle;
//! * **on the host** (`sample`, `mode`, `log_prob` on f32 slices): used during the rollout, where
//!   the network output has already been copied to the host and no gradient is needed. Sampling
//!   on the host with the run's own RNG keeps runs reproducible bit for bit.

use super::spec::ActionKind;
use crate::error::{ProximaError, Result};
use candle_core::{DType, Tensor, D};
use rand::Rng;
use rand_distr::{Distribution, StandardNormal};

/// ½·log(2π).
pub const HALF_LOG_2PI: f64 = 0.918_938_533_204_672_7;

/// Categorical log-probabilities of `actions` and entropies, differentiable.
///
/// * `logits`: `[B, A]` unnormalised log-probabilities;
/// * `actions`: `[B]` u32 indices in `0..A`.
///
/// Returns `(log_prob [B], entropy [B])` with log π(a) = logits_a − logsumexp(logits) and
/// H = −Σ p·log p.
pub fn categorical_log_prob_entropy(logits: &Tensor, actions: &Tensor) -> candle_core::Result<(Tensor, Tensor)> {
    let log_p = candle_nn::ops::log_softmax(logits, D::Minus1)?;
    let log_prob = log_p.gather(&actions.unsqueeze(1)?, 1)?.squeeze(1)?;
    let entropy = (log_p.exp()? * &log_p)?.sum(D::Minus1)?.neg()?;
    Ok((log_prob, entropy))
}

/// Diagonal-Gaussian log-probabilities and entropies, summed over action dimensions, differentiable.
///
/// * `mean`: `[B, D]`; `log_std`: `[D]` (state-independent, broadcast over the batch);
/// * `actions`: `[B, D]` (the *unclipped* samples).
///
/// log π(a) = Σ_d [−(a−μ)²/(2σ²) − log σ − ½log 2π];  H = Σ_d [½ + ½log 2π + log σ], as `[B]`.
pub fn gaussian_log_prob_entropy(
    mean: &Tensor,
    log_std: &Tensor,
    actions: &Tensor,
) -> candle_core::Result<(Tensor, Tensor)> {
    let b = mean.dim(0)?;
    let inv_var = (log_std * -2.0)?.exp()?; // 1/σ²
    let sq = (actions - mean)?.sqr()?.broadcast_mul(&inv_var)?; // (a-μ)²/σ²
    let d = log_std.dim(0)? as f64;
    let log_std_sum = log_std.sum_all()?; // Σ log σ
    let log_prob = ((sq.sum(D::Minus1)? * -0.5)?.broadcast_sub(&log_std_sum)? - d * HALF_LOG_2PI)?;
    let entropy = ((log_std_sum + d * (0.5 + HALF_LOG_2PI))?).broadcast_as(b)?.contiguous()?;
    Ok((log_prob, entropy.to_dtype(mean.dtype())?))
}

/// The logit an invalid action gets, as sb3-contrib's `MaskableCategorical` gives it (its
/// `HUGE_NEG`): its probability is then 0 in f32 and f64, so its entropy term −p·log p and its
/// gradient are 0, while everything computed from the logits stays finite (Huang & Ontañón 2022,
/// "A Closer Look at Invalid Action Masking in Policy Gradient Algorithms").
pub const MASKED_LOGIT: f64 = -1e8;

/// Invalid-action masking of Categorical logits, differentiable: `head` `[B, head_dim]` with
/// every logit where `masks` (`[B, head_dim]`, u8, 1 = the action is valid) is 0 replaced by
/// [`MASKED_LOGIT`]. The gradient w.r.t. `head` is 0 at the masked logits. For `MultiDiscrete`
/// the masks lie side by side as the components' logits do (sb3-contrib's layout).
pub fn mask_logits(head: &Tensor, masks: &Tensor) -> candle_core::Result<Tensor> {
    let invalid = Tensor::full(MASKED_LOGIT, head.shape(), head.device())?.to_dtype(head.dtype())?;
    masks.where_cond(head, &invalid)
}

/// [`mask_logits`] on the host, in place: `head` and `masks` rows side by side, the same length.
pub fn mask_logits_in_place<T: num_traits::Float>(head: &mut [T], masks: &[u8]) {
    let invalid = T::from(MASKED_LOGIT).unwrap_or_else(T::min_value);
    for (h, _) in head.iter_mut().zip(masks).filter(|(_, &m)| m == 0) {
        *h = invalid;
    }
}

/// KL(p_old ‖ p_new) of Categoricals given by logits `[B, n]` → `[B]`:
/// Σ_a p_old(a)·(log p_old(a) − log p_new(a)). Differentiable in `new_logits`.
pub fn categorical_kl(old_logits: &Tensor, new_logits: &Tensor) -> candle_core::Result<Tensor> {
    let old_lp = candle_nn::ops::log_softmax(old_logits, D::Minus1)?;
    let new_lp = candle_nn::ops::log_softmax(new_logits, D::Minus1)?;
    (old_lp.exp()? * (&old_lp - new_lp)?)?.sum(D::Minus1)
}

/// KL(N(μ_old, σ_old²) ‖ N(μ_new, σ_new²)) of diagonal Gaussians, summed over dimensions:
/// means `[B, d]`, log-stds `[d]` → `[B]`:
/// Σ_d log σ_new − log σ_old + (σ_old² + (μ_old − μ_new)²)/(2σ_new²) − ½.
pub fn gaussian_kl(
    old_mean: &Tensor,
    old_log_std: &Tensor,
    new_mean: &Tensor,
    new_log_std: &Tensor,
) -> candle_core::Result<Tensor> {
    let inv_var_new = (new_log_std * -2.0)?.exp()?;
    let var_old = (old_log_std * 2.0)?.exp()?;
    let quad = (old_mean - new_mean)?.sqr()?.broadcast_add(&var_old)?.broadcast_mul(&inv_var_new)?; // [B, d]
    let per_dim = ((quad * 0.5)?.broadcast_add(&(new_log_std - old_log_std)?)? - 0.5)?;
    per_dim.sum(D::Minus1)
}

/// Host-side Categorical over one row of logits.
pub mod categorical {
    use super::*;

    /// log-softmax of `logits` into `out` (same length).
    pub fn log_softmax(logits: &[f32], out: &mut [f32]) {
        let m = logits.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
        let lse = m + logits.iter().map(|&l| (l - m).exp()).sum::<f32>().ln();
        for (o, &l) in out.iter_mut().zip(logits) {
            *o = l - lse;
        }
    }

    /// Samples an index with probability softmax(logits) by inverse CDF on one uniform draw.
    /// Returns `(action, log_prob)`.
    pub fn sample<R: Rng + ?Sized>(logits: &[f32], rng: &mut R) -> (usize, f32) {
        let mut lp = [0f32; 64];
        let mut heap;
        let lp: &mut [f32] = if logits.len() <= 64 {
            &mut lp[..logits.len()]
        } else {
            heap = vec![0f32; logits.len()];
            &mut heap
        };
        log_softmax(logits, lp);
        let u: f32 = rng.random();
        let mut acc = 0f32;
        for (i, &l) in lp.iter().enumerate() {
            acc += l.exp();
            if u < acc {
                return (i, l);
            }
        }
        // Rounding left u ≥ Σp: take the last action with non-zero probability (a masked one
        // has a finite log-probability whose exp is 0).
        let i = lp.iter().rposition(|l| l.exp() > 0.0).unwrap_or(0);
        (i, lp[i])
    }

    /// The deterministic action: argmax of the logits (first on ties).
    pub fn mode(logits: &[f32]) -> usize {
        let mut best = 0;
        for (i, &l) in logits.iter().enumerate() {
            if l > logits[best] {
                best = i;
            }
        }
        best
    }
}

/// Host-side diagonal Gaussian.
pub mod gaussian {
    use super::*;

    /// Samples a ~ N(mean, exp(log_std)²) into `out` and returns log π(a) (summed over dims).
    pub fn sample<R: Rng + ?Sized>(mean: &[f32], log_std: &[f32], rng: &mut R, out: &mut [f32]) -> f32 {
        let mut lp = 0f64;
        for ((o, &m), &ls) in out.iter_mut().zip(mean).zip(log_std) {
            let z: f64 = StandardNormal.sample(rng);
            *o = (m as f64 + z * (ls as f64).exp()) as f32;
            lp += -0.5 * z * z - ls as f64 - HALF_LOG_2PI;
        }
        lp as f32
    }

    /// log π(a), summed over dims.
    pub fn log_prob(mean: &[f32], log_std: &[f32], action: &[f32]) -> f32 {
        let mut lp = 0f64;
        for ((&a, &m), &ls) in action.iter().zip(mean).zip(log_std) {
            let z = (a as f64 - m as f64) / (ls as f64).exp();
            lp += -0.5 * z * z - ls as f64 - HALF_LOG_2PI;
        }
        lp as f32
    }
}

/// Converts a `[B]` f32 tensor of stored discrete actions to u32 indices.
pub fn actions_to_indices(actions: &Tensor) -> candle_core::Result<Tensor> {
    actions.to_dtype(DType::U32)
}

fn gaussian_log_std(log_std: Option<&Tensor>) -> Result<&Tensor> {
    log_std.ok_or_else(|| ProximaError::InvalidArgument("a Gaussian policy needs its log-std".into()))
}

/// Sums per-component tensors (`Σ_i x_i`, left to right).
fn sum_components(parts: impl IntoIterator<Item = Result<Tensor>>) -> Result<Tensor> {
    let mut total: Option<Tensor> = None;
    for p in parts {
        let p = p?;
        total = Some(match total {
            Some(t) => (t + p)?,
            None => p,
        });
    }
    total.ok_or_else(|| ProximaError::InvalidArgument("a distribution with no component".into()))
}

impl ActionKind {
    /// log π(a|s) and the entropy H(π(·|s)) per row, differentiable: `head` `[B, head_dim]`
    /// (logits side by side, or means), `log_std` `[dim]` (Gaussian only), `actions`
    /// `[B, act_dim]` as stored. Returns `(log_prob [B], entropy [B])`; independent components
    /// add their log-probabilities and entropies.
    ///
    /// # Errors
    /// A Gaussian without `log_std`; tensor errors on mismatched shapes.
    pub fn log_prob_entropy(
        &self,
        head: &Tensor,
        log_std: Option<&Tensor>,
        actions: &Tensor,
    ) -> Result<(Tensor, Tensor)> {
        match self.categorical_components() {
            Some(comps) if comps.len() == 1 => {
                let idx = actions_to_indices(&actions.flatten_all()?)?;
                Ok(categorical_log_prob_entropy(head, &idx)?)
            }
            Some(comps) => {
                let idx = actions_to_indices(actions)?;
                let mut off = 0;
                let mut parts = Vec::with_capacity(comps.len());
                for (i, &n) in comps.iter().enumerate() {
                    let logits = head.narrow(1, off, n)?.contiguous()?;
                    parts.push(categorical_log_prob_entropy(&logits, &idx.narrow(1, i, 1)?.squeeze(1)?.contiguous()?)?);
                    off += n;
                }
                let lp = sum_components(parts.iter().map(|(l, _)| Ok(l.clone())))?;
                let ent = sum_components(parts.into_iter().map(|(_, e)| Ok(e)))?;
                Ok((lp, ent))
            }
            None => Ok(gaussian_log_prob_entropy(head, gaussian_log_std(log_std)?, actions)?),
        }
    }

    /// KL(π_old(·|s) ‖ π(·|s)) per row, `[B]`, analytic and differentiable in the new
    /// parameters (`head`, `log_std`); categorical components are summed.
    ///
    /// # Errors
    /// A Gaussian without both log-stds; tensor errors on mismatched shapes.
    pub fn kl(
        &self,
        old_head: &Tensor,
        old_log_std: Option<&Tensor>,
        head: &Tensor,
        log_std: Option<&Tensor>,
    ) -> Result<Tensor> {
        match self.categorical_components() {
            Some(comps) => {
                let mut off = 0;
                sum_components(comps.iter().map(|&n| {
                    let kl = categorical_kl(&old_head.narrow(1, off, n)?, &head.narrow(1, off, n)?)?;
                    off += n;
                    Ok(kl)
                }))
            }
            None => {
                let old_ls = old_log_std
                    .ok_or_else(|| ProximaError::InvalidArgument("old Gaussian parameters lack a log-std".into()))?;
                Ok(gaussian_kl(old_head, old_ls, head, gaussian_log_std(log_std)?)?)
            }
        }
    }

    /// M·u, where M is the Fisher information of the distribution w.r.t. its head at `head`
    /// (`[B, head_dim]`; `log_std` for a Gaussian) and `u` is `[B, head_dim]`: per Categorical
    /// component (diag(p) − ppᵀ)·u, for Gaussian means u/σ². TRPO's Gauss–Newton
    /// Fisher-vector product is Jᵀ·M·(J·v).
    ///
    /// # Errors
    /// A Gaussian without `log_std`; tensor errors on mismatched shapes.
    pub fn fisher_product(&self, head: &Tensor, log_std: Option<&Tensor>, u: &Tensor) -> Result<Tensor> {
        match self.categorical_components() {
            None => Ok(u.broadcast_mul(&(gaussian_log_std(log_std)? * -2.0)?.exp()?)?),
            Some(comps) => {
                let mut parts = Vec::new();
                let mut o = 0;
                for n in comps {
                    let p = candle_nn::ops::softmax(&head.narrow(1, o, n)?, D::Minus1)?;
                    let pu = (&p * &u.narrow(1, o, n)?)?;
                    let s = pu.sum_keepdim(D::Minus1)?;
                    parts.push((pu - p.broadcast_mul(&s)?)?);
                    o += n;
                }
                Ok(Tensor::cat(&parts, 1)?)
            }
        }
    }

    /// Checks invalid-action masks for `rows` rows of this distribution: `masks`
    /// `[rows, head_dim]`, 1 = valid, 0 = masked (the components' masks side by side for
    /// `MultiDiscrete`), each row leaving at least one valid action in every component.
    ///
    /// # Errors
    /// `InvalidArgument` for masks on a continuous (Gaussian) action space, masks of the wrong
    /// length, and a row (component) without a valid action.
    pub fn check_masks(&self, rows: usize, masks: &[u8]) -> Result<()> {
        let Some(comps) = self.categorical_components() else {
            return Err(ProximaError::InvalidArgument(
                "action masks need a Discrete or MultiDiscrete action space; this policy's is a Box (continuous)"
                    .into(),
            ));
        };
        let hd = self.head_dim();
        if masks.len() != rows * hd {
            return Err(ProximaError::InvalidArgument(format!(
                "action masks of {} values for {rows} observation(s): expected {rows} × {hd} (one per action{})",
                masks.len(),
                if comps.len() > 1 { ", the components' masks side by side" } else { "" }
            )));
        }
        for (r, row) in masks.chunks(hd.max(1)).enumerate() {
            let mut off = 0;
            for (c, &n) in comps.iter().enumerate() {
                if row[off..off + n].iter().all(|&m| m == 0) {
                    let part = if comps.len() > 1 { format!(" in component {c}") } else { String::new() };
                    return Err(ProximaError::InvalidArgument(format!(
                        "the action mask of row {r} allows no action{part}: every row needs at least one valid action"
                    )));
                }
                off += n;
            }
        }
        Ok(())
    }

    /// Draws an action from one row of the head (`[head_dim]`; `log_std` `[dim]` for a
    /// Gaussian), or takes the mode when `deterministic`, appending it as stored (`act_dim`
    /// floats: indices, or the unclipped sample) to `out`. Returns its log-probability.
    /// `scratch` holds at least `head_dim` floats.
    pub fn sample_row<R: Rng + ?Sized>(
        &self,
        row: &[f32],
        log_std: &[f32],
        deterministic: bool,
        rng: &mut R,
        scratch: &mut [f32],
        out: &mut Vec<f32>,
    ) -> f32 {
        match self.categorical_components() {
            Some(comps) => {
                let (mut total, mut off) = (0f32, 0);
                for &c in &comps {
                    let logits = &row[off..off + c];
                    let (a, l) = if deterministic {
                        let a = categorical::mode(logits);
                        categorical::log_softmax(logits, &mut scratch[..c]);
                        (a, scratch[a])
                    } else {
                        categorical::sample(logits, rng)
                    };
                    out.push(a as f32);
                    total += l;
                    off += c;
                }
                total
            }
            None => {
                let a = &mut scratch[..row.len()];
                let l = if deterministic {
                    a.copy_from_slice(row);
                    gaussian::log_prob(row, log_std, a)
                } else {
                    gaussian::sample(row, log_std, rng, a)
                };
                out.extend_from_slice(a);
                l
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;
    use rand::SeedableRng;

    #[test]
    fn categorical_sampling_frequencies_match_softmax() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0);
        let logits = [0.0f32, 1.0, -1.0];
        let mut counts = [0usize; 3];
        for _ in 0..60_000 {
            counts[categorical::sample(&logits, &mut rng).0] += 1;
        }
        let z: f32 = logits.iter().map(|l| l.exp()).sum();
        for i in 0..3 {
            let p = logits[i].exp() / z;
            assert!((counts[i] as f32 / 60_000.0 - p).abs() < 0.01, "action {i}");
        }
        assert_eq!(categorical::mode(&logits), 1);
    }

    #[test]
    fn masked_actions_are_never_sampled_nor_the_mode() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0);
        // The most likely action and the last one are invalid.
        let mut logits = [0.0f32, 1.0, -1.0, 0.5];
        mask_logits_in_place(&mut logits, &[1, 0, 1, 0]);
        let mut counts = [0usize; 4];
        for _ in 0..60_000 {
            let (a, lp) = categorical::sample(&logits, &mut rng);
            assert!(lp.is_finite() && lp <= 0.0, "log π = {lp}");
            counts[a] += 1;
        }
        assert_eq!((counts[1], counts[3]), (0, 0), "a masked action was drawn: {counts:?}");
        let p0 = 1.0 / (1.0 + (-1.0f32).exp());
        assert!((counts[0] as f32 / 60_000.0 - p0).abs() < 0.01, "{counts:?}");
        assert_eq!(categorical::mode(&logits), 0);
        let mut out = [0f32; 4];
        categorical::log_softmax(&logits, &mut out);
        assert_eq!((out[1].exp(), out[3].exp()), (0.0, 0.0));
    }

    #[test]
    fn host_and_tensor_log_probs_agree() {
        let dev = Device::Cpu;
        let logits = Tensor::new(&[[0.3f32, -1.2, 2.0], [0.0, 0.0, 0.0]], &dev).unwrap();
        let acts = Tensor::new(&[2u32, 1], &dev).unwrap();
        let (lp, ent) = categorical_log_prob_entropy(&logits, &acts).unwrap();
        let lp = lp.to_vec1::<f32>().unwrap();
        let mut row = [0f32; 3];
        categorical::log_softmax(&[0.3, -1.2, 2.0], &mut row);
        assert!((lp[0] - row[2]).abs() < 1e-6);
        assert!((lp[1] + 3f32.ln()).abs() < 1e-6);
        assert!((ent.to_vec1::<f32>().unwrap()[1] - 3f32.ln()).abs() < 1e-6);

        let mean = Tensor::new(&[[0.5f32, -0.5]], &dev).unwrap();
        let log_std = Tensor::new(&[0.1f32, -0.3], &dev).unwrap();
        let a = Tensor::new(&[[1.0f32, 0.0]], &dev).unwrap();
        let (lp, ent) = gaussian_log_prob_entropy(&mean, &log_std, &a).unwrap();
        let host = gaussian::log_prob(&[0.5, -0.5], &[0.1, -0.3], &[1.0, 0.0]);
        assert!((lp.to_vec1::<f32>().unwrap()[0] - host).abs() < 1e-5);
        let want_ent = 2.0 * (0.5 + HALF_LOG_2PI) + 0.1 - 0.3;
        assert!((ent.to_vec1::<f32>().unwrap()[0] as f64 - want_ent).abs() < 1e-5);
    }

    #[test]
    fn gaussian_sample_log_prob_is_consistent() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        let (mean, log_std) = ([0.2f32, -1.0], [0.0f32, -0.5]);
        let mut a = [0f32; 2];
        let lp = gaussian::sample(&mean, &log_std, &mut rng, &mut a);
        assert!((lp - gaussian::log_prob(&mean, &log_std, &a)).abs() < 1e-5);
    }
}
