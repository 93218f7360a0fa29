//! RLHF-PPO on the addition task: the policy π_θ (a [`TinyLm`] initialised from SFT), a separate
//! per-token critic V_φ (a [`TinyLm`]'s value head, initialised from the reward model as TRL
//! does), the frozen reference π_ref (the SFT policy) and the frozen reward model. One step:
//!
//! 1. sample one response per prompt from π_θ (temperature 1), keeping log π_θold and V_φold;
//! 2. score it with the reward model; rewards per token = −β·k1 + score on the last real token
//!    ([`kl_penalized_rewards`]);
//! 3. GAE over tokens (γ, λ) → Â_t, R_t; Â whitened over the real tokens;
//! 4. K epochs (`n_epochs`) of minibatch updates (`batch_size` sequences) of L^CLIP and the
//!    clipped value loss (token-level masked means), each minibatch optionally split into
//!    micro-batches whose gradients are accumulated;
//! 5. β adapted towards `kl_target` when one is set.

use crate::grpo_step::{add_grads, micro_batches};
use crate::model::TinyLm;
use crate::reward::scores;
use crate::rlhf::{
    kl_penalized_rewards, masked_whiten, micro_batch_weight, ppo_token_losses, token_gae, KlController, PpoTokenBatch,
};
use crate::sampling::{generate, response_log_probs, SEQ_LEN};
use crate::task::{Problem, MAX_ANSWER_LEN, PROMPT_LEN};
use candle_core::{Device, Tensor};
use proxima::optim::{Gradients, Optimizer, Params};
use proxima::policy::candle::host_gradients;
use proxima::{ProximaError, Result};
use rand::seq::{IndexedRandom, SliceRandom};
use rand::Rng;

/// RLHF-PPO settings (SB3 / TRL names).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize, clap::Args)]
pub struct PpoLmConfig {
    /// Prompts (= responses) sampled per step.
    #[arg(long, default_value_t = PpoLmConfig::default().prompts)]
    pub prompts: usize,
    /// K: passes over the sampled responses.
    #[arg(long, default_value_t = PpoLmConfig::default().n_epochs)]
    pub n_epochs: usize,
    /// Sequences per minibatch.
    #[arg(long, default_value_t = PpoLmConfig::default().batch_size)]
    pub batch_size: usize,
    /// Sequences per forward/backward pass (gradient accumulation; default: the whole minibatch).
    #[arg(long)]
    pub micro_batch: Option<usize>,
    /// ε of the ratio clip.
    #[arg(long, allow_negative_numbers = true, default_value_t = PpoLmConfig::default().clip_range)]
    pub clip_range: f64,
    /// Clip of the value change; `None` = unclipped value loss (on the command line:
    /// `--clip-range-vf`, a number or `none`, default 0.2).
    #[arg(skip = PpoLmConfig::default().clip_range_vf)]
    pub clip_range_vf: Option<f64>,
    /// γ over tokens.
    #[arg(long, allow_negative_numbers = true, default_value_t = PpoLmConfig::default().gamma)]
    pub gamma: f64,
    /// λ of GAE over tokens.
    #[arg(long, allow_negative_numbers = true, default_value_t = PpoLmConfig::default().gae_lambda)]
    pub gae_lambda: f64,
    /// Global gradient-norm clip (policy and critic separately).
    #[arg(skip = crate::MAX_GRAD_NORM)]
    pub max_grad_norm: f64,
}

impl Default for PpoLmConfig {
    fn default() -> Self {
        PpoLmConfig {
            prompts: 256,
            n_epochs: 4,
            batch_size: 64,
            micro_batch: None,
            clip_range: 0.2,
            clip_range_vf: Some(0.2),
            gamma: 1.0,
            gae_lambda: 0.95,
            max_grad_norm: crate::MAX_GRAD_NORM,
        }
    }
}

/// What one RLHF-PPO step measured.
#[derive(Clone, Copy, Debug, Default)]
pub struct PpoLmStats {
    /// Mean reward-model score of the sampled responses.
    pub score_mean: f64,
    /// Fraction of sampled responses that are correct (the true reward, not optimised).
    pub accuracy: f64,
    /// Mean per-token k1 KL log π_θold − log π_ref over real tokens.
    pub kl_per_token: f64,
    /// Mean per-response KL (k1 summed over its tokens).
    pub kl_per_response: f64,
    /// β used for this step's rewards.
    pub kl_coef: f64,
    /// Last minibatch's −L^CLIP.
    pub policy_loss: f64,
    /// Last minibatch's value loss.
    pub value_loss: f64,
    /// Mean clip fraction over the minibatches.
    pub clip_fraction: f64,
    /// Mean approx KL[π_old ‖ π] over the minibatches.
    pub approx_kl: f64,
}

/// The models RLHF-PPO touches.
pub struct PpoModels<'a> {
    /// π_θ, trained.
    pub policy: &'a TinyLm,
    /// V_φ, trained.
    pub critic: &'a TinyLm,
    /// π_ref, frozen.
    pub reference: &'a TinyLm,
    /// The reward model, frozen; `None` = the task's verifiable exact-match reward (a control
    /// that separates PPO's behaviour from the reward model's errors).
    pub reward_model: Option<&'a TinyLm>,
}

/// Values V_φ(s_t) `[B, MAX_ANSWER_LEN]` before each response token of `tokens` `[B, SEQ_LEN]`
/// (position PROMPT_LEN − 1 + t), differentiable.
///
/// # Errors
/// Tensor errors.
pub fn response_values(critic: &TinyLm, tokens: &Tensor) -> Result<Tensor> {
    let (_, v) = critic.forward(&tokens.narrow(1, 0, SEQ_LEN - 1)?)?;
    Ok(v.narrow(1, PROMPT_LEN - 1, MAX_ANSWER_LEN)?)
}

/// A sampled and scored RLHF batch, ready for the K epochs.
#[derive(Clone, Debug)]
pub struct PpoLmBatch {
    /// `[B, SEQ_LEN]` u32.
    pub tokens: Tensor,
    /// `[B, MAX_ANSWER_LEN]` f32 each:
    pub old_logp: Tensor,
    /// V_φold.
    pub old_values: Tensor,
    /// Whitened Â.
    pub advantages: Tensor,
    /// R = Â + V_old.
    pub returns: Tensor,
    /// 1 = real token.
    pub mask: Tensor,
}

fn scalar(t: &Tensor) -> Result<f64> {
    Ok(t.to_dtype(candle_core::DType::F64)?.to_scalar::<f64>()?)
}

/// Gradients (policy, critic) of L^CLIP + value loss on the rows `rows` of `b`, accumulated
/// over micro-batches of `micro` sequences weighted by their share of real tokens (so the sum
/// equals the whole minibatch's gradient). Returns the gradients and (policy loss, value loss,
/// clip fraction, approx KL).
///
/// # Errors
/// Tensor errors.
#[allow(clippy::type_complexity)]
pub fn ppo_lm_gradients(
    m: &PpoModels<'_>,
    b: &PpoLmBatch,
    rows: &[u32],
    cfg: &PpoLmConfig,
) -> Result<(Vec<Option<Vec<f32>>>, Vec<Option<Vec<f32>>>, [f64; 4])> {
    let dev = Device::Cpu;
    let (pp, cp) = (m.policy.named_params(), m.critic.named_params());
    let all = Tensor::from_vec(rows.to_vec(), rows.len(), &dev)?;
    let total = scalar(&b.mask.index_select(&all, 0)?.sum_all()?)?;
    let (mut gp, mut gc, mut out) = (Vec::new(), Vec::new(), [0.0; 4]);
    for r in micro_batches(rows.len(), cfg.micro_batch) {
        let part = &rows[r];
        let idx = Tensor::from_vec(part.to_vec(), part.len(), &dev)?;
        let pick = |t: &Tensor| t.index_select(&idx, 0);
        let (tokens, mask) = (pick(&b.tokens)?, pick(&b.mask)?);
        let here = scalar(&mask.sum_all()?)?;
        let w = micro_batch_weight(here, total);
        let logp = response_log_probs(m.policy, &tokens)?;
        let values = response_values(m.critic, &tokens)?;
        let l = ppo_token_losses(
            &PpoTokenBatch {
                logp: &logp,
                old_logp: &pick(&b.old_logp)?,
                values: &values,
                old_values: &pick(&b.old_values)?,
                advantages: &pick(&b.advantages)?,
                returns: &pick(&b.returns)?,
                mask: &mask,
            },
            cfg.clip_range,
            cfg.clip_range_vf,
        )?;
        let loss = ((&l.policy + &l.value)? * w)?;
        let g = loss.backward()?;
        add_grads(&mut gp, host_gradients(&pp, &g)?);
        add_grads(&mut gc, host_gradients(&cp, &g)?);
        for (o, t) in out.iter_mut().zip([&l.policy, &l.value, &l.clip_fraction, &l.approx_kl]) {
            *o += w * scalar(t)?;
        }
    }
    Ok((gp, gc, out))
}

/// Samples and scores one batch (steps 1–3 above). Returns the batch and its statistics (the
/// loss fields are left 0).
///
/// # Errors
/// Tensor errors.
pub fn collect<R: Rng + ?Sized>(
    m: &PpoModels<'_>,
    train: &[Problem],
    cfg: &PpoLmConfig,
    kl: &KlController,
    rng: &mut R,
) -> Result<(PpoLmBatch, PpoLmStats)> {
    let prompts: Vec<Problem> = (0..cfg.prompts).map(|_| *train.choose(rng).expect("non-empty training set")).collect();
    collect_on(m, &prompts, cfg, kl, rng)
}

/// [`collect`] on the given prompts (one response each), e.g. all held-out prompts to measure
/// the reward model's mean score.
///
/// # Errors
/// Tensor errors.
pub fn collect_on<R: Rng + ?Sized>(
    m: &PpoModels<'_>,
    prompts: &[Problem],
    cfg: &PpoLmConfig,
    kl: &KlController,
    rng: &mut R,
) -> Result<(PpoLmBatch, PpoLmStats)> {
    let dev = Device::Cpu;
    let n = prompts.len();
    let s = generate(m.policy, prompts, false, rng)?;
    let tokens = Tensor::from_vec(s.tokens.clone(), (n, SEQ_LEN), &dev)?;
    let lengths: Vec<usize> = (0..n).map(|i| s.response(i).len()).collect();
    let score: Vec<f64> = match m.reward_model {
        Some(rm) => scores(rm, &tokens, &lengths)?.to_vec1::<f32>()?.iter().map(|&x| f64::from(x)).collect(),
        None => prompts.iter().enumerate().map(|(i, p)| p.reward(&s.response(i))).collect(),
    };
    let ref_lp = response_log_probs(m.reference, &tokens)?.flatten_all()?.to_vec1::<f32>()?;
    let values = response_values(m.critic, &tokens)?.flatten_all()?.to_vec1::<f32>()?;
    let rewards = kl_penalized_rewards(&score, &s.log_probs, &ref_lp, &s.mask, MAX_ANSWER_LEN, kl.coef)?;
    let (adv, ret) = token_gae(&rewards, &values, &s.mask, MAX_ANSWER_LEN, cfg.gamma, cfg.gae_lambda)?;
    let adv = masked_whiten(&adv, &s.mask);
    let k1: Vec<f64> = s.log_probs.iter().zip(&ref_lp).zip(&s.mask).map(|((a, b), m)| f64::from(m * (a - b))).collect();
    let tokens_total: f64 = s.mask.iter().map(|&x| f64::from(x)).sum();
    let stats = PpoLmStats {
        score_mean: score.iter().sum::<f64>() / n as f64,
        accuracy: prompts.iter().enumerate().map(|(i, p)| p.reward(&s.response(i))).sum::<f64>() / n as f64,
        kl_per_token: k1.iter().sum::<f64>() / tokens_total.max(1.0),
        kl_per_response: k1.iter().sum::<f64>() / n as f64,
        kl_coef: kl.coef,
        ..Default::default()
    };
    let f = |v: Vec<f64>| Tensor::from_vec(v.iter().map(|&x| x as f32).collect::<Vec<_>>(), (n, MAX_ANSWER_LEN), &dev);
    let batch = PpoLmBatch {
        tokens,
        old_logp: Tensor::from_vec(s.log_probs, (n, MAX_ANSWER_LEN), &dev)?,
        old_values: Tensor::from_vec(values, (n, MAX_ANSWER_LEN), &dev)?,
        advantages: f(adv)?,
        returns: f(ret)?,
        mask: Tensor::from_vec(s.mask, (n, MAX_ANSWER_LEN), &dev)?,
    };
    Ok((batch, stats))
}

/// One RLHF-PPO step: [`collect`], then `n_epochs` × minibatches of Adam updates on the policy
/// (`opt_policy`; skipped when `update_policy` is false, OpenRLHF's `freezing_actor_steps`
/// critic warm-up) and the critic (`opt_critic`), then the KL controller update.
///
/// # Errors
/// `InvalidArgument` for zero prompts, epochs or batch size; tensor errors; `NonFinite` from
/// an optimiser.
pub fn ppo_lm_step<R: Rng + ?Sized>(
    m: &PpoModels<'_>,
    opt_policy: &mut Optimizer,
    opt_critic: &mut Optimizer,
    train: &[Problem],
    cfg: &PpoLmConfig,
    kl: &mut KlController,
    update_policy: bool,
    rng: &mut R,
) -> Result<PpoLmStats> {
    if cfg.prompts == 0 || cfg.n_epochs == 0 || cfg.batch_size == 0 {
        return Err(ProximaError::InvalidArgument("prompts, n_epochs and batch_size must be at least 1".into()));
    }
    let (batch, mut stats) = collect(m, train, cfg, kl, rng)?;
    let (pp, cp) = (m.policy.named_params(), m.critic.named_params());
    let mut order: Vec<u32> = (0..cfg.prompts as u32).collect();
    let mut count = 0.0;
    for _ in 0..cfg.n_epochs {
        order.shuffle(rng);
        for rows in order.chunks(cfg.batch_size) {
            let (gp, gc, [pl, vl, cf, ak]) = ppo_lm_gradients(m, &batch, rows, cfg)?;
            if update_policy {
                opt_policy.step(Params::Vars { vars: &pp, grads: Gradients::Host(&gp) }, Some(cfg.max_grad_norm))?;
            }
            opt_critic.step(Params::Vars { vars: &cp, grads: Gradients::Host(&gc) }, Some(cfg.max_grad_norm))?;
            stats.policy_loss = pl;
            stats.value_loss = vl;
            stats.clip_fraction += cf;
            stats.approx_kl += ak;
            count += 1.0;
        }
    }
    stats.clip_fraction /= count;
    stats.approx_kl /= count;
    kl.update(stats.kl_per_response, cfg.prompts);
    Ok(stats)
}
