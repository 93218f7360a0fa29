//! Direct Preference Optimization (Rafailov et al. 2023, arXiv:2305.18290, Eq. 7): the policy
//! is trained on preference pairs directly, without a reward model or RL, by the loss
//!
//!   L_DPO = −E log σ(β·[(log π_θ(y_w|x) − log π_ref(y_w|x)) − (log π_θ(y_l|x) − log π_ref(y_l|x))])
//!
//! over the response tokens (log π(y|x) = Σ_t log π(y_t | x, y_<t)), π_ref = the SFT policy.
//! β·log π_θ/π_ref is the policy's implicit reward r̂; the loss is the Bradley–Terry loss of the
//! reward model ([`bradley_terry_loss`]) on r̂, which is how it is computed here.

use crate::model::TinyLm;
use crate::reward::{pair_sequences, sample_pairs, PreferencePair};
use crate::rlhf::bradley_terry_loss;
use crate::sampling::{generate, response_log_probs};
use crate::task::{Problem, MAX_ANSWER_LEN};
use crate::MAX_GRAD_NORM;
use candle_core::{Device, Tensor, D};
use proxima::optim::{Gradients, Optimizer, Params};
use proxima::{ProximaError, Result};
use rand::Rng;

/// Sequences of a batch of pairs: tokens `[2n, SEQ_LEN]` (the n chosen responses, then the n
/// rejected ones) and the response mask `[2n, MAX_ANSWER_LEN]` in `dtype`.
///
/// # Errors
/// `InvalidArgument` for an empty or too long response; tensor errors.
pub fn pair_tokens_and_mask(pairs: &[PreferencePair], dtype: candle_core::DType) -> Result<(Tensor, Tensor)> {
    let (tokens, lengths) = pair_sequences(pairs)?;
    let mask: Vec<f32> =
        lengths.iter().flat_map(|&l| (0..MAX_ANSWER_LEN).map(move |k| if k < l { 1.0 } else { 0.0 })).collect();
    let mask = Tensor::from_vec(mask, (lengths.len(), MAX_ANSWER_LEN), &Device::Cpu)?.to_dtype(dtype)?;
    Ok((tokens, mask))
}

/// log π(y|x) `[B]`: the summed log-probabilities of the response tokens of `tokens`
/// `[B, SEQ_LEN]` under `model`, `mask` `[B, MAX_ANSWER_LEN]` selecting them.
///
/// # Errors
/// Tensor errors.
pub fn sequence_log_probs(model: &TinyLm, tokens: &Tensor, mask: &Tensor) -> Result<Tensor> {
    Ok((response_log_probs(model, tokens)? * mask)?.sum(D::Minus1)?)
}

/// The DPO loss of n pairs from the log-probabilities `[2n]` (chosen first, then rejected) of
/// the policy (differentiable) and of π_ref (constants), with β = `beta`: the mean of
/// −log σ(β·[(log π_w − log π_ref,w) − (log π_l − log π_ref,l)]).
///
/// # Errors
/// `InvalidArgument` for an odd or mismatched length; tensor errors.
pub fn dpo_loss(policy: &Tensor, reference: &Tensor, beta: f64) -> Result<Tensor> {
    let (m, r) = (policy.dims1()?, reference.dims1()?);
    if m != r || m % 2 != 0 || m == 0 {
        return Err(ProximaError::InvalidArgument(format!(
            "DPO needs 2n log-probabilities of both models, got {m} and {r}"
        )));
    }
    let implicit = ((policy - reference)? * beta)?; // r̂ = β·log π/π_ref
    let n = m / 2;
    bradley_terry_loss(&implicit.narrow(0, 0, n)?, &implicit.narrow(0, n, n)?)
}

/// What one DPO step measured.
#[derive(Clone, Copy, Debug)]
pub struct DpoStats {
    /// The loss of the batch.
    pub loss: f64,
    /// Fraction of the batch's pairs whose chosen response has the larger implicit reward.
    pub reward_accuracy: f64,
    /// Mean implicit-reward margin r̂_w − r̂_l of the batch.
    pub margin: f64,
}

/// The implicit rewards r̂ = β·log π_θ/π_ref `[2n]` of pairs (chosen first; constants) and the
/// DPO loss of the pairs (differentiable in the policy).
fn implicit_rewards(
    policy: &TinyLm,
    reference: &TinyLm,
    pairs: &[PreferencePair],
    beta: f64,
) -> Result<(Tensor, Tensor)> {
    let (tokens, mask) = pair_tokens_and_mask(pairs, policy.dtype())?;
    let lp = sequence_log_probs(policy, &tokens, &mask)?;
    let lp_ref = sequence_log_probs(reference, &tokens, &mask)?.detach();
    let rewards = ((&lp - &lp_ref)? * beta)?.detach();
    Ok((rewards, dpo_loss(&lp, &lp_ref, beta)?))
}

fn accuracy_and_margin(r: &[f32]) -> (f64, f64) {
    let n = r.len() / 2;
    let right = (0..n).filter(|&i| r[i] > r[n + i]).count();
    let margin = (0..n).map(|i| (r[i] - r[n + i]) as f64).sum::<f64>();
    (right as f64 / n.max(1) as f64, margin / n.max(1) as f64)
}

/// One DPO step on a random batch of `batch` pairs.
///
/// # Errors
/// `InvalidArgument` for no pairs; tensor errors; `NonFinite` from the optimiser.
pub fn dpo_step<R: Rng + ?Sized>(
    policy: &TinyLm,
    reference: &TinyLm,
    opt: &mut Optimizer,
    pairs: &[PreferencePair],
    batch: usize,
    beta: f64,
    rng: &mut R,
) -> Result<DpoStats> {
    let picked = sample_pairs(pairs, batch, rng)?;
    let (r, loss) = implicit_rewards(policy, reference, &picked, beta)?;
    let (reward_accuracy, margin) = accuracy_and_margin(&r.to_dtype(candle_core::DType::F32)?.to_vec1::<f32>()?);
    let l = loss.to_dtype(candle_core::DType::F64)?.to_scalar::<f64>()?;
    let params = policy.named_params();
    opt.step(Params::Vars { vars: &params, grads: Gradients::Store(&loss.backward()?) }, Some(MAX_GRAD_NORM))?;
    Ok(DpoStats { loss: l, reward_accuracy, margin })
}

/// The implicit-reward accuracy of `pairs`: the fraction whose chosen response has the larger
/// β·log π_θ/π_ref (a tie counts as wrong; at π_θ = π_ref every pair ties).
///
/// # Errors
/// Tensor errors.
pub fn reward_accuracy(policy: &TinyLm, reference: &TinyLm, pairs: &[PreferencePair], beta: f64) -> Result<f64> {
    let mut right = 0.0;
    for chunk in pairs.chunks(512) {
        let (r, _) = implicit_rewards(policy, reference, chunk, beta)?;
        right += accuracy_and_margin(&r.to_dtype(candle_core::DType::F32)?.to_vec1::<f32>()?).0 * chunk.len() as f64;
    }
    Ok(right / pairs.len().max(1) as f64)
}

/// KL(π_θ ‖ π_ref) per response, estimated on one sampled (temperature 1) response per prompt:
/// the mean of Σ_t log π_θ(y_t) − log π_ref(y_t) (the k1 estimator, unbiased) and the fraction of
/// those responses that are correct.
///
/// # Errors
/// Tensor errors.
pub fn kl_to_reference<R: Rng + ?Sized>(
    policy: &TinyLm,
    reference: &TinyLm,
    problems: &[Problem],
    rng: &mut R,
) -> Result<(f64, f64)> {
    let (mut kl, mut correct) = (0.0, 0.0);
    for chunk in problems.chunks(500) {
        let s = generate(policy, chunk, false, rng)?;
        let tokens = Tensor::from_vec(s.tokens.clone(), (chunk.len(), crate::sampling::SEQ_LEN), &Device::Cpu)?;
        let mask =
            Tensor::from_vec(s.mask.clone(), (chunk.len(), MAX_ANSWER_LEN), &Device::Cpu)?.to_dtype(policy.dtype())?;
        let d = (sequence_log_probs(policy, &tokens, &mask)? - sequence_log_probs(reference, &tokens, &mask)?)?;
        kl += d.to_dtype(candle_core::DType::F64)?.sum_all()?.to_scalar::<f64>()?;
        correct += chunk.iter().enumerate().map(|(i, p)| p.reward(&s.response(i))).sum::<f64>();
    }
    let n = problems.len().max(1) as f64;
    Ok((kl / n, correct / n))
}
