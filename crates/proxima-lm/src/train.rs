//! Supervised pre-training, sampling, evaluation and the GRPO step for the addition task.
//!
//! Sequence layout: `[prompt (6 tokens) | response (≤ 4 tokens)]`, right-padded with [`PAD`] to
//! 10. Which positions count is decided from positions and lengths only (never from token ids).

use crate::grpo::{group_advantages, grpo_loss, token_log_probs, Aggregation, GrpoBatch};
use crate::model::TinyLm;
use crate::rlhf::micro_batch_weight;
use crate::task::{Problem, EOS, MAX_ANSWER_LEN, PAD, PROMPT_LEN};
use candle_core::{Device, Tensor, D};
use proxima::algo::optim::Optimizer;
use proxima::policy::candle::host_gradients;
use proxima::{ProximaError, Result};
use rand::seq::IndexedRandom;
use rand::Rng;

/// The global gradient-norm clip of every language-model update (SFT, reward model, GRPO,
/// RLHF-PPO's policy and critic): TRL's and OpenRLHF's default `max_grad_norm = 1.0`.
pub const MAX_GRAD_NORM: f64 = 1.0;

/// Full sequence length: prompt + the longest response.
pub const SEQ_LEN: usize = PROMPT_LEN + MAX_ANSWER_LEN;

/// Sampled responses for a batch of prompts.
#[derive(Clone, Debug)]
pub struct Samples {
    /// `[B, SEQ_LEN]` prompt + response tokens (after the first EOS: padding).
    pub tokens: Vec<u32>,
    /// `[B, MAX_ANSWER_LEN]` 1 for response positions up to and including the first EOS.
    pub mask: Vec<f32>,
    /// `[B, MAX_ANSWER_LEN]` log π_old of each sampled token (0 where masked out).
    pub log_probs: Vec<f32>,
}

impl Samples {
    /// The response of row `i` (up to and including the first EOS).
    pub fn response(&self, i: usize) -> Vec<u32> {
        let r = &self.tokens[i * SEQ_LEN + PROMPT_LEN..(i + 1) * SEQ_LEN];
        let n = self.mask[i * MAX_ANSWER_LEN..(i + 1) * MAX_ANSWER_LEN].iter().filter(|&&m| m > 0.0).count();
        r[..n].to_vec()
    }
}

/// Samples (temperature 1) or greedily decodes a response for each prompt: up to
/// [`MAX_ANSWER_LEN`] tokens, stopping a row at its first EOS.
///
/// # Errors
/// Tensor errors.
pub fn generate<R: Rng + ?Sized>(model: &TinyLm, prompts: &[Problem], greedy: bool, rng: &mut R) -> Result<Samples> {
    let b = prompts.len();
    let dev = Device::Cpu;
    let mut tokens = vec![PAD; b * SEQ_LEN];
    for (i, p) in prompts.iter().enumerate() {
        tokens[i * SEQ_LEN..i * SEQ_LEN + PROMPT_LEN].copy_from_slice(&p.prompt());
    }
    let mut mask = vec![0f32; b * MAX_ANSWER_LEN];
    let mut log_probs = vec![0f32; b * MAX_ANSWER_LEN];
    let mut done = vec![false; b];
    for step in 0..MAX_ANSWER_LEN {
        let t = PROMPT_LEN + step;
        let input: Vec<u32> = (0..b).flat_map(|i| tokens[i * SEQ_LEN..i * SEQ_LEN + t].to_vec()).collect();
        let (logits, _) = model.forward(&Tensor::from_vec(input, (b, t), &dev)?)?;
        let last =
            candle_nn::ops::log_softmax(&logits.narrow(1, t - 1, 1)?.squeeze(1)?, D::Minus1)?.to_vec2::<f32>()?;
        for i in 0..b {
            if done[i] {
                continue;
            }
            let lp = &last[i];
            let tok = if greedy {
                (0..lp.len()).max_by(|&x, &y| lp[x].total_cmp(&lp[y])).expect("non-empty vocabulary")
            } else {
                let u: f32 = rng.random();
                let mut acc = 0f32;
                let mut pick = lp.len() - 1;
                for (k, l) in lp.iter().enumerate() {
                    acc += l.exp();
                    if u < acc {
                        pick = k;
                        break;
                    }
                }
                pick
            };
            tokens[i * SEQ_LEN + t] = tok as u32;
            mask[i * MAX_ANSWER_LEN + step] = 1.0;
            log_probs[i * MAX_ANSWER_LEN + step] = lp[tok];
            if tok as u32 == EOS {
                done[i] = true;
            }
        }
        if done.iter().all(|&d| d) {
            break;
        }
    }
    Ok(Samples { tokens, mask, log_probs })
}

/// Greedy exact-match accuracy over `problems` (batched).
///
/// # Errors
/// Tensor errors.
pub fn accuracy(model: &TinyLm, problems: &[Problem]) -> Result<f64> {
    let mut correct = 0.0;
    let mut rng = rand::rng();
    for chunk in problems.chunks(500) {
        let s = generate(model, chunk, true, &mut rng)?;
        correct += chunk.iter().enumerate().map(|(i, p)| p.reward(&s.response(i))).sum::<f64>();
    }
    Ok(correct / problems.len().max(1) as f64)
}

/// log π(response token) at every response position `[B, MAX_ANSWER_LEN]` for full sequences
/// `tokens` `[B, SEQ_LEN]`: position PROMPT_LEN − 1 + k predicts response token k.
///
/// # Errors
/// Tensor errors.
pub fn response_log_probs(model: &TinyLm, tokens: &Tensor) -> Result<Tensor> {
    let input = tokens.narrow(1, 0, SEQ_LEN - 1)?;
    let (logits, _) = model.forward(&input)?;
    let resp_logits = logits.narrow(1, PROMPT_LEN - 1, MAX_ANSWER_LEN)?;
    let targets = tokens.narrow(1, PROMPT_LEN, MAX_ANSWER_LEN)?.contiguous()?;
    token_log_probs(&resp_logits.contiguous()?, &targets)
}

/// The supervised loss: masked mean cross-entropy −Σ mask·log π(y_t | prefix) / Σ mask of the
/// response tokens of `tokens` `[B, SEQ_LEN]`, `mask` `[B, MAX_ANSWER_LEN]` (the model's dtype).
///
/// # Errors
/// Tensor errors.
pub fn sft_loss(model: &TinyLm, tokens: &Tensor, mask: &Tensor) -> Result<Tensor> {
    let lp = response_log_probs(model, tokens)?;
    Ok((lp * mask)?.sum_all()?.neg()?.broadcast_div(&mask.sum_all()?.maximum(1.0)?)?)
}

/// One supervised step on `batch` problems: masked cross-entropy of the answer tokens given
/// the prompt. With probability `label_noise` a problem's answer is replaced by a wrong one
/// (a random other sum), to stop pre-training at a partly-correct policy. Returns the loss.
///
/// # Errors
/// Tensor errors; `NonFinite` from the optimiser.
pub fn sft_step<R: Rng + ?Sized>(
    model: &TinyLm,
    opt: &mut Optimizer,
    problems: &[Problem],
    batch: usize,
    label_noise: f64,
    rng: &mut R,
) -> Result<f64> {
    let picked: Vec<Problem> = (0..batch).map(|_| *problems.choose(rng).expect("non-empty training set")).collect();
    let mut tokens = vec![PAD; batch * SEQ_LEN];
    let mut mask = vec![0f32; batch * MAX_ANSWER_LEN];
    for (i, p) in picked.iter().enumerate() {
        let answer = if rng.random::<f64>() < label_noise {
            Problem { a: rng.random_range(0..100), b: rng.random_range(0..100) }.answer()
        } else {
            p.answer()
        };
        tokens[i * SEQ_LEN..i * SEQ_LEN + PROMPT_LEN].copy_from_slice(&p.prompt());
        tokens[i * SEQ_LEN + PROMPT_LEN..i * SEQ_LEN + PROMPT_LEN + answer.len()].copy_from_slice(&answer);
        mask[i * MAX_ANSWER_LEN..i * MAX_ANSWER_LEN + answer.len()].fill(1.0);
    }
    let dev = Device::Cpu;
    let t = Tensor::from_vec(tokens, (batch, SEQ_LEN), &dev)?;
    let m = Tensor::from_vec(mask, (batch, MAX_ANSWER_LEN), &dev)?;
    let loss = sft_loss(model, &t, &m)?;
    let l = loss.to_scalar::<f32>()? as f64;
    opt.step(&model.named_params(), &loss.backward()?, Some(MAX_GRAD_NORM))?;
    Ok(l)
}

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
        opt.step_host(&params, &grads, Some(cfg.max_grad_norm))?;
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
    use crate::model::LmSpec;
    use crate::task::{split, VOCAB};
    use rand::SeedableRng;

    fn tiny() -> TinyLm {
        TinyLm::new(LmSpec { vocab: VOCAB, context: 16, d_model: 16, n_heads: 2, n_layers: 1 }, 3, &Device::Cpu)
            .unwrap()
    }

    /// Response masks come from positions: 1 up to and including the first EOS, 0 after, and
    /// the stored log-probs are those of the sampled tokens under the model.
    #[test]
    fn sampled_responses_masks_and_log_probs_agree() {
        let m = tiny();
        let (train, _) = split();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0);
        let s = generate(&m, &train[..16], false, &mut rng).unwrap();
        let tokens = Tensor::from_vec(s.tokens.clone(), (16, SEQ_LEN), &Device::Cpu).unwrap();
        let lp = response_log_probs(&m, &tokens).unwrap().to_vec2::<f32>().unwrap();
        for i in 0..16 {
            let mask = &s.mask[i * MAX_ANSWER_LEN..(i + 1) * MAX_ANSWER_LEN];
            let n = s.response(i).len();
            assert!(mask[..n].iter().all(|&x| x == 1.0) && mask[n..].iter().all(|&x| x == 0.0));
            let resp = s.response(i);
            assert!(resp[..n.saturating_sub(1)].iter().all(|&t| t != EOS), "EOS only at the end");
            assert!(n == MAX_ANSWER_LEN || resp.last() == Some(&EOS));
            for k in 0..n {
                assert!((lp[i][k] - s.log_probs[i * MAX_ANSWER_LEN + k]).abs() < 1e-4, "row {i} pos {k}");
            }
        }
    }

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
