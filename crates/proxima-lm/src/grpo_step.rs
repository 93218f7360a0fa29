//! The GRPO step on the tiny language model: sample a group of responses per prompt, score them,
//! and take one optimiser step on the GRPO loss ([`crate::grpo`]), over micro-batches whose
//! gradients add up to the whole batch's.

use crate::grpo::{group_advantages, grpo_loss, Aggregation, GrpoBatch};
use crate::model::TinyLm;
use crate::rlhf::micro_batch_weight;
use crate::sampling::{generate, response_log_probs, SEQ_LEN};
use crate::task::{Problem, MAX_ANSWER_LEN};
use crate::MAX_GRAD_NORM;
use candle_core::{Device, Tensor};
use proxima::optim::{Gradients, Optimizer, Params};
use proxima::policy::candle::host_gradients;
use proxima::{ProximaError, Result};
use rand::seq::IndexedRandom;
use rand::Rng;

/// GRPO settings.
#[derive(Clone, Debug)]
pub struct GrpoConfig {
    /// Prompts per step.
    pub prompts: usize,
    /// G: samples per prompt.
    pub group_size: usize,
    /// ε_low / ε_high of the ratio clip.
    pub eps_low: f64,
    /// Upper clip (DAPO's clip-higher when > eps_low).
    pub eps_high: f64,
    /// β of the k3 KL to π_ref.
    pub beta: f64,
    /// μ: optimisation passes per batch of samples (old log-probs computed once at sampling).
    pub inner_iters: usize,
    /// Scale advantages by the group std (false = Dr. GRPO mean-centring).
    pub scale_advantages: bool,
    /// Loss aggregation.
    pub aggregation: Aggregation,
    /// Drop groups whose rewards are all equal (they carry no signal).
    pub drop_flat_groups: bool,
    /// Control: shuffle rewards across samples before computing advantages.
    pub shuffle_rewards: bool,
    /// Sequences per forward/backward pass (gradient accumulation); `None` = the whole batch.
    pub micro_batch: Option<usize>,
    /// Global gradient-norm clip.
    pub max_grad_norm: f64,
}

impl Default for GrpoConfig {
    fn default() -> Self {
        GrpoConfig {
            prompts: 32,
            group_size: 8,
            eps_low: 0.2,
            eps_high: 0.2,
            beta: 0.04,
            inner_iters: 1,
            scale_advantages: true,
            aggregation: Aggregation::SeqMeanTokenMean,
            drop_flat_groups: false,
            shuffle_rewards: false,
            micro_batch: None,
            max_grad_norm: MAX_GRAD_NORM,
        }
    }
}

/// What one GRPO step measured.
#[derive(Clone, Copy, Debug, Default)]
pub struct GrpoStats {
    /// Mean reward of the samples (training accuracy with sampling).
    pub reward_mean: f64,
    /// Fraction of groups whose rewards were all equal.
    pub flat_fraction: f64,
    /// Masked mean of k3 = KL[π ‖ π_ref] per token (last inner iteration).
    pub kl: f64,
    /// The loss (last inner iteration).
    pub loss: f64,
}

/// One GRPO step: sample G responses for each of `cfg.prompts` training prompts, reward them,
/// compute group advantages, then μ optimiser steps on the clipped loss with the k3 penalty.
///
/// # Errors
/// Tensor errors; `NonFinite` from the optimiser.
pub fn grpo_step<R: Rng + ?Sized>(
    model: &TinyLm,
    reference: &TinyLm,
    opt: &mut Optimizer,
    train: &[Problem],
    cfg: &GrpoConfig,
    rng: &mut R,
) -> Result<GrpoStats> {
    if cfg.group_size < 2 || cfg.prompts == 0 {
        return Err(ProximaError::InvalidArgument("GRPO needs group_size ≥ 2 and at least one prompt".into()));
    }
    let prompts: Vec<Problem> = (0..cfg.prompts).map(|_| *train.choose(rng).expect("non-empty training set")).collect();
    let batch: Vec<Problem> = prompts.iter().flat_map(|p| std::iter::repeat_n(*p, cfg.group_size)).collect();
    let s = generate(model, &batch, false, rng)?;
    let mut rewards: Vec<f64> = batch.iter().enumerate().map(|(i, p)| p.reward(&s.response(i))).collect();
    let reward_mean = rewards.iter().sum::<f64>() / rewards.len() as f64;
    if cfg.shuffle_rewards {
        use rand::seq::SliceRandom;
        rewards.shuffle(rng);
    }
    let (adv, flat) = group_advantages(&rewards, cfg.group_size, cfg.scale_advantages)?;
    // Rows to train on (optionally without the flat groups).
    let keep: Vec<usize> = (0..batch.len())
        .filter(|&i| {
            !cfg.drop_flat_groups
                || rewards[i / cfg.group_size * cfg.group_size..(i / cfg.group_size + 1) * cfg.group_size]
                    .iter()
                    .any(|&r| r != rewards[i / cfg.group_size * cfg.group_size])
        })
        .collect();
    let mut stats = GrpoStats { reward_mean, flat_fraction: flat as f64 / cfg.prompts as f64, ..Default::default() };
    if keep.is_empty() {
        return Ok(stats);
    }
    let dev = Device::Cpu;
    let n = keep.len();
    let rows =
        |v: &[f32], w: usize| -> Vec<f32> { keep.iter().flat_map(|&i| v[i * w..(i + 1) * w].to_vec()).collect() };
    let tokens: Vec<u32> = keep.iter().flat_map(|&i| s.tokens[i * SEQ_LEN..(i + 1) * SEQ_LEN].to_vec()).collect();
    let tokens = Tensor::from_vec(tokens, (n, SEQ_LEN), &dev)?;
    let mask = Tensor::from_vec(rows(&s.mask, MAX_ANSWER_LEN), (n, MAX_ANSWER_LEN), &dev)?;
    let old = Tensor::from_vec(rows(&s.log_probs, MAX_ANSWER_LEN), (n, MAX_ANSWER_LEN), &dev)?;
    let adv_t = Tensor::from_vec(keep.iter().map(|&i| adv[i] as f32).collect::<Vec<_>>(), n, &dev)?;
    let ref_lp = response_log_probs(reference, &tokens)?.detach();
    let batch = GrpoTensors { tokens, old_logp: old, ref_logp: ref_lp, mask, advantages: adv_t };
    let params = model.named_params();
    for _ in 0..cfg.inner_iters.max(1) {
        let (grads, loss, kl) = grpo_gradients(model, &batch, cfg)?;
        stats.loss = loss;
        stats.kl = kl;
        opt.step(Params::Vars { vars: &params, grads: Gradients::Host(&grads) }, Some(cfg.max_grad_norm))?;
    }
    Ok(stats)
}

/// A sampled GRPO batch as tensors (rows = sequences).
#[derive(Clone, Debug)]
pub struct GrpoTensors {
    /// `[B, SEQ_LEN]` u32 prompt + response tokens.
    pub tokens: Tensor,
    /// `[B, MAX_ANSWER_LEN]` log π_old of the response tokens (from sampling time).
    pub old_logp: Tensor,
    /// `[B, MAX_ANSWER_LEN]` log π_ref of the response tokens.
    pub ref_logp: Tensor,
    /// `[B, MAX_ANSWER_LEN]` 1 = real response token.
    pub mask: Tensor,
    /// `[B]` Â per sequence.
    pub advantages: Tensor,
}

/// Row ranges of at most `micro` rows covering `0..n` (`None` = one range).
pub fn micro_batches(n: usize, micro: Option<usize>) -> Vec<std::ops::Range<usize>> {
    let m = micro.unwrap_or(n).clamp(1, n.max(1));
    (0..n).step_by(m).map(|s| s..(s + m).min(n)).collect()
}

/// `acc += g`, parameter by parameter.
pub fn add_grads(acc: &mut Vec<Option<Vec<f32>>>, g: Vec<Option<Vec<f32>>>) {
    if acc.is_empty() {
        *acc = g;
        return;
    }
    for (a, g) in acc.iter_mut().zip(g) {
        match (a.as_mut(), g) {
            (Some(a), Some(g)) => a.iter_mut().zip(g).for_each(|(x, y)| *x += y),
            (None, Some(g)) => *a = Some(g),
            _ => {}
        }
    }
}

/// The gradient of the GRPO loss on `batch` for `model`'s parameters (in
/// [`TinyLm::named_params`] order), computed over micro-batches of `cfg.micro_batch` sequences
/// whose losses are weighted (tokens for the token-level mean, sequences otherwise) so that the
/// accumulated gradient equals the whole batch's. Returns `(gradients, loss, mean k3 KL)`.
///
/// # Errors
/// Tensor errors.
pub fn grpo_gradients(
    model: &TinyLm,
    batch: &GrpoTensors,
    cfg: &GrpoConfig,
) -> Result<(Vec<Option<Vec<f32>>>, f64, f64)> {
    let params = model.named_params();
    let n = batch.tokens.dim(0)?;
    let total_tokens = batch.mask.to_dtype(candle_core::DType::F64)?.sum_all()?.to_scalar::<f64>()?;
    let (mut grads, mut loss, mut kl) = (Vec::new(), 0.0, 0.0);
    for r in micro_batches(n, cfg.micro_batch) {
        let len = r.len();
        let sub = |t: &Tensor| t.narrow(0, r.start, len);
        let mask = sub(&batch.mask)?;
        let tokens_here = mask.to_dtype(candle_core::DType::F64)?.sum_all()?.to_scalar::<f64>()?;
        let lp = response_log_probs(model, &sub(&batch.tokens)?)?;
        let (l, k) = grpo_loss(
            &GrpoBatch {
                logp: &lp,
                old_logp: &sub(&batch.old_logp)?,
                ref_logp: &sub(&batch.ref_logp)?,
                mask: &mask,
                advantages: &sub(&batch.advantages)?,
            },
            cfg.eps_low,
            cfg.eps_high,
            cfg.beta,
            cfg.aggregation,
        )?;
        let w = match cfg.aggregation {
            Aggregation::TokenMean => micro_batch_weight(tokens_here, total_tokens),
            _ => micro_batch_weight(len as f64, n as f64),
        };
        let l = (l * w)?;
        loss += l.to_dtype(candle_core::DType::F64)?.to_scalar::<f64>()?;
        kl += k.to_dtype(candle_core::DType::F64)?.to_scalar::<f64>()? * micro_batch_weight(tokens_here, total_tokens);
        add_grads(&mut grads, host_gradients(&params, &l.backward()?)?);
    }
    Ok((grads, loss, kl))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::tiny_for_tests as tiny;
    use crate::sft::sft_step;
    use crate::task::split;
    use rand::SeedableRng;

    #[test]
    fn grpo_and_sft_steps_run_and_report() {
        let m = tiny();
        let reference = tiny();
        reference.copy_from(&m).unwrap();
        let (train, _) = split();
        let sizes: Vec<usize> = m.named_params().iter().map(|(_, v)| v.elem_count()).collect();
        let mut opt = Optimizer::adam(&sizes, 1e-3, 1e-8);
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        let l = sft_step(&m, &mut opt, &train, 8, 0.0, &mut rng).unwrap();
        assert!(l.is_finite() && l > 0.0);
        let cfg = GrpoConfig { prompts: 4, group_size: 4, ..GrpoConfig::default() };
        let s = grpo_step(&m, &reference, &mut opt, &train, &cfg, &mut rng).unwrap();
        assert!((0.0..=1.0).contains(&s.reward_mean) && (0.0..=1.0).contains(&s.flat_fraction) && s.kl >= 0.0);
    }
}
