//! RLHF-PPO (Ouyang et al. 2022; Schulman et al. 2017) on a Hugging Face [`CausalLm`](super::CausalLm) with TRL's
//! `PPOConfig` names and defaults and the token-level formulation of TRL's `PPOTrainer`: each
//! completion token is an action, the per-token reward is −`kl_coef`·KL_t to the frozen initial
//! model (k1 = log π_θold − log π_ref, or k3) with the sequence's score added at its last token,
//! advantages by GAE (γ, λ) over the completion on a value head V(s_t) = w·h_t + b read from the
//! policy's last hidden state (the shared trunk of `AutoModelForCausalLMWithValueHead`), whitened
//! over the batch's tokens; the loss per micro-batch
//!
//!   L = mean_t max(−Â_t·r_t, −Â_t·clip(r_t, 1 − ε, 1 + ε)) + c₁·½·mean_t max((V − R)², (V_clip − R)²)
//!
//! with r_t(θ) = π_θ/π_θold, V_clip = V_old + clip(V − V_old, ±`cliprange_value`), R = Â + V_old
//! (before whitening), c₁ = `vf_coef`, means over the micro-batch's completion tokens.
//!
//! One difference from TRL: the score is added at the completion's last token (its EOS when it
//! has one), where TRL adds it one position after it.

use crate::grpo::token_log_probs;
use candle_core::{Device, Tensor, Var, D};
use proxima::{ProximaError, Result};

/// How the per-token KL to the reference is estimated (TRL's `kl_estimator`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KlEstimator {
    /// log π_θold − log π_ref (unbiased).
    K1,
    /// (π_ref/π_θold − 1) − log(π_ref/π_θold) (unbiased, lower variance).
    K3,
}

/// TRL's `PPOConfig` (with `OnPolicyConfig`'s fields), the ones Proxima reads, with TRL's defaults.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PpoArgs {
    /// Adam's step size (3e-6), decayed linearly to 0 over the `max_steps` updates.
    pub learning_rate: f64,
    /// PPO updates (batches of prompts) to take.
    pub max_steps: u64,
    /// Completions per micro-batch.
    pub per_device_train_batch_size: usize,
    /// Micro-batches per mini-batch (one optimiser step).
    pub gradient_accumulation_steps: usize,
    /// Mini-batches per batch: a batch is `per_device_train_batch_size` ×
    /// `gradient_accumulation_steps` × `num_mini_batches` prompts, one completion each.
    pub num_mini_batches: usize,
    /// Passes over each batch (4).
    pub num_ppo_epochs: usize,
    /// Whiten the per-token rewards before GAE.
    pub whiten_rewards: bool,
    /// The KL penalty's coefficient β (0.05).
    pub kl_coef: f64,
    /// The KL estimator.
    pub kl_estimator: KlEstimator,
    /// ε of the ratio clip (0.2).
    pub cliprange: f64,
    /// c₁, the value loss's weight (0.1).
    pub vf_coef: f64,
    /// The value clip (0.2).
    pub cliprange_value: f64,
    /// γ (1.0).
    pub gamma: f64,
    /// GAE's λ (0.95).
    pub lam: f64,
    /// New tokens per completion at most (53).
    pub response_length: usize,
    /// Sampling temperature (0.7); the log-probabilities divide the logits by it too.
    pub temperature: f64,
    /// Subtracted from the score of a completion without an end-of-sequence token (`None`: nothing).
    pub missing_eos_penalty: Option<f64>,
    /// The global gradient-norm clip (1.0).
    pub max_grad_norm: f64,
    /// Adam's ε (1e-8).
    pub adam_epsilon: f64,
    /// Seeds the prompt order, the sampling, the mini-batch shuffles and the adapters (42).
    pub seed: u64,
    /// Shuffle the prompts each epoch.
    pub shuffle_dataset: bool,
    /// LoRA adapters to train instead of the whole model (the value head trains too).
    pub peft_config: Option<crate::hf::lora::LoraConfig>,
}

impl Default for PpoArgs {
    fn default() -> Self {
        PpoArgs {
            learning_rate: 3e-6,
            max_steps: 100,
            per_device_train_batch_size: 8,
            gradient_accumulation_steps: 1,
            num_mini_batches: 1,
            num_ppo_epochs: 4,
            whiten_rewards: false,
            kl_coef: 0.05,
            kl_estimator: KlEstimator::K1,
            cliprange: 0.2,
            vf_coef: 0.1,
            cliprange_value: 0.2,
            gamma: 1.0,
            lam: 0.95,
            response_length: 53,
            temperature: 0.7,
            missing_eos_penalty: None,
            max_grad_norm: 1.0,
            adam_epsilon: 1e-8,
            seed: 42,
            shuffle_dataset: true,
            peft_config: None,
        }
    }
}

impl PpoArgs {
    /// Prompts per batch.
    pub fn batch_size(&self) -> usize {
        self.per_device_train_batch_size * self.gradient_accumulation_steps * self.num_mini_batches
    }

    /// # Errors
    /// `Config` for zero sizes, a temperature ≤ 0, clips or coefficients out of range.
    pub fn check(&self) -> Result<()> {
        let bad = |m: String| Err(ProximaError::Config(m));
        if self.batch_size() == 0 || self.num_ppo_epochs == 0 || self.response_length == 0 {
            return bad("per_device_train_batch_size, gradient_accumulation_steps, num_mini_batches, num_ppo_epochs and response_length must be positive".into());
        }
        if !(self.temperature > 0.0 && self.temperature.is_finite()) {
            return bad(format!("temperature must be positive, got {}", self.temperature));
        }
        for (name, v) in [("cliprange", self.cliprange), ("cliprange_value", self.cliprange_value)] {
            if !(v > 0.0 && v.is_finite()) {
                return bad(format!("{name} must be positive, got {v}"));
            }
        }
        for (name, v) in [("kl_coef", self.kl_coef), ("vf_coef", self.vf_coef)] {
            if !(v >= 0.0 && v.is_finite()) {
                return bad(format!("{name} must be ≥ 0, got {v}"));
            }
        }
        if !(0.0..=1.0).contains(&self.gamma) || !(0.0..=1.0).contains(&self.lam) {
            return bad(format!("gamma and lam must be in [0, 1], got {} and {}", self.gamma, self.lam));
        }
        Ok(())
    }
}

/// The per-token rewards of each completion (one vector per row, its tokens only):
/// −`kl_coef`·KL_t, plus `score` at the last token; and each row's Σ_t KL_t.
pub fn token_rewards(
    old_logp: &[Vec<f64>],
    ref_logp: &[Vec<f64>],
    scores: &[f64],
    kl_coef: f64,
    estimator: KlEstimator,
) -> (Vec<Vec<f64>>, Vec<f64>) {
    let mut kls = Vec::with_capacity(old_logp.len());
    let rewards = old_logp
        .iter()
        .zip(ref_logp)
        .zip(scores)
        .map(|((lp, rp), &s)| {
            let kl: Vec<f64> = lp
                .iter()
                .zip(rp)
                .map(|(&l, &r)| match estimator {
                    KlEstimator::K1 => l - r,
                    KlEstimator::K3 => (r - l).exp() - 1.0 - (r - l),
                })
                .collect();
            kls.push(kl.iter().sum());
            let mut r: Vec<f64> = kl.iter().map(|k| -kl_coef * k).collect();
            if let Some(last) = r.last_mut() {
                *last += s;
            }
            r
        })
        .collect();
    (rewards, kls)
}

/// Whitens the values of all rows together (TRL's `masked_whiten`): (x − mean)/√(var + 1e-8) with
/// the unbiased variance, the mean added back unless `shift_mean`.
pub fn whiten(rows: &mut [Vec<f64>], shift_mean: bool) {
    let n = rows.iter().map(Vec::len).sum::<usize>() as f64;
    if n < 2.0 {
        return;
    }
    let mean = rows.iter().flatten().sum::<f64>() / n;
    let var = rows.iter().flatten().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    let scale = 1.0 / (var + 1e-8).sqrt();
    for x in rows.iter_mut().flatten() {
        *x = (*x - mean) * scale + if shift_mean { 0.0 } else { mean };
    }
}

/// GAE over each row's tokens (V after the last token 0): Â_t = Σ_k (γλ)^k δ_{t+k},
/// δ_t = r_t + γ·V_{t+1} − V_t; returns (Â, R = Â + V).
pub fn gae(rewards: &[Vec<f64>], values: &[Vec<f64>], gamma: f64, lam: f64) -> (Vec<Vec<f64>>, Vec<Vec<f64>>) {
    let mut adv = Vec::with_capacity(rewards.len());
    let mut ret = Vec::with_capacity(rewards.len());
    for (r, v) in rewards.iter().zip(values) {
        let mut a = vec![0.0; r.len()];
        let mut last = 0.0;
        for t in (0..r.len()).rev() {
            let next = if t + 1 < r.len() { v[t + 1] } else { 0.0 };
            last = r[t] + gamma * next - v[t] + gamma * lam * last;
            a[t] = last;
        }
        ret.push(a.iter().zip(v).map(|(a, v)| a + v).collect());
        adv.push(a);
    }
    (adv, ret)
}

/// The value head: V = h·wᵀ + b over hidden states `[B, C, d]` → `[B, C]`.
pub struct ValueHead {
    /// w `[1, d]`.
    pub weight: Var,
    /// b `[1]`.
    pub bias: Var,
}

impl ValueHead {
    /// A head of zeros (V = 0 at the start) for hidden size `d`.
    ///
    /// # Errors
    /// Tensor errors.
    pub fn zeros(d: usize) -> Result<ValueHead> {
        Ok(ValueHead {
            weight: Var::zeros((1, d), candle_core::DType::F32, &Device::Cpu)?,
            bias: Var::zeros(1, candle_core::DType::F32, &Device::Cpu)?,
        })
    }

    /// V `[B, C]` of hidden states `[B, C, d]`.
    ///
    /// # Errors
    /// Tensor errors.
    pub fn forward(&self, hidden: &Tensor) -> Result<Tensor> {
        Ok(super::layers::linear(hidden, self.weight.as_tensor(), Some(self.bias.as_tensor()))?.squeeze(D::Minus1)?)
    }

    /// Its parameters, as `v_head.weight` and `v_head.bias`.
    pub fn named_params(&self) -> Vec<(String, Var)> {
        vec![("v_head.weight".into(), self.weight.clone()), ("v_head.bias".into(), self.bias.clone())]
    }
}

/// One micro-batch's tensors `[B, C]` (padding masked out by `mask`).
pub struct MicroBatch<'a> {
    /// log π_θ of each completion token (differentiable), logits ÷ temperature.
    pub logp: &'a Tensor,
    /// V_θ (differentiable).
    pub values: &'a Tensor,
    /// log π_θold (constant).
    pub old_logp: &'a Tensor,
    /// V_old (constant).
    pub old_values: &'a Tensor,
    /// Â, whitened (constant).
    pub advantages: &'a Tensor,
    /// R (constant).
    pub returns: &'a Tensor,
    /// 1 for a completion token, 0 for padding.
    pub mask: &'a Tensor,
}

/// What a micro-batch's loss measured.
#[derive(Clone, Copy, Debug, Default)]
pub struct LossStats {
    /// The clipped surrogate's loss.
    pub policy_loss: f64,
    /// ½·mean max((V − R)², (V_clip − R)²).
    pub value_loss: f64,
    /// Fraction of tokens whose ratio was clipped.
    pub clipfrac: f64,
    /// Fraction of tokens whose value was clipped.
    pub vf_clipfrac: f64,
    /// ½·mean (log r)².
    pub approxkl: f64,
    /// Mean ratio.
    pub ratio: f64,
}

/// The PPO loss of one micro-batch (policy + `vf_coef`·value; means over its completion tokens).
///
/// # Errors
/// Tensor errors.
pub fn micro_batch_loss(m: &MicroBatch<'_>, args: &PpoArgs) -> Result<(Tensor, LossStats)> {
    let n = m.mask.sum_all()?.to_scalar::<f32>()?.max(1.0) as f64;
    let mean = |x: &Tensor| -> Result<Tensor> { Ok(((x * m.mask)?.sum_all()? / n)?) };
    let diff = (m.logp - m.old_logp)?;
    let ratio = diff.exp()?;
    let pg1 = (m.advantages.neg()? * &ratio)?;
    let pg2 = (m.advantages.neg()? * ratio.clamp(1.0 - args.cliprange, 1.0 + args.cliprange)?)?;
    let policy = mean(&pg1.maximum(&pg2)?)?;
    let clipped = (m.old_values + (m.values - m.old_values)?.clamp(-args.cliprange_value, args.cliprange_value)?)?;
    let vf1 = (m.values - m.returns)?.sqr()?;
    let vf2 = (clipped - m.returns)?.sqr()?;
    let value = (mean(&vf1.maximum(&vf2)?)? * 0.5)?;
    let loss = (&policy + (&value * args.vf_coef)?)?;
    let scalar = |t: &Tensor| -> Result<f64> { Ok(f64::from(t.to_scalar::<f32>()?)) };
    let frac = |a: &Tensor, b: &Tensor| -> Result<f64> { scalar(&mean(&a.gt(b)?.to_dtype(candle_core::DType::F32)?)?) };
    let stats = LossStats {
        policy_loss: scalar(&policy)?,
        value_loss: scalar(&value)?,
        clipfrac: frac(&pg2, &pg1)?,
        vf_clipfrac: frac(&vf2, &vf1)?,
        approxkl: scalar(&(mean(&diff.sqr()?)? * 0.5)?)?,
        ratio: scalar(&mean(&ratio)?)?,
    };
    Ok((loss, stats))
}

/// log π `[B, C]` of `comp` `[B, C]` under the logits of hidden states `[B, C, d]` ÷ `temperature`.
///
/// # Errors
/// Tensor errors.
pub fn log_probs(model: &super::model::CausalLm, hidden: &Tensor, comp: &Tensor, temperature: f64) -> Result<Tensor> {
    token_log_probs(&(model.logits(hidden)? / temperature)?, comp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rewards_gae_and_whitening_as_written() {
        let (r, kl) = token_rewards(
            &[vec![-1.0, -2.0], vec![-0.5]],
            &[vec![-1.5, -1.0], vec![-0.5]],
            &[3.0, -1.0],
            0.1,
            KlEstimator::K1,
        );
        assert!((r[0][0] - -0.05).abs() < 1e-12 && (r[0][1] - (0.1 + 3.0)).abs() < 1e-12, "{r:?}");
        assert_eq!(r[1], vec![-1.0]);
        assert!((kl[0] - -0.5).abs() < 1e-12);
        let (_, k3) = token_rewards(&[vec![-1.0]], &[vec![-1.5]], &[0.0], 1.0, KlEstimator::K3);
        assert!((k3[0] - ((-0.5f64).exp() - 1.0 + 0.5)).abs() < 1e-12);
        // GAE by hand, γ 0.9, λ 0.5: δ₁ = 2 − 1 = 1, δ₀ = 1 + 0.9·1 − 0.5 = 1.4; Â₀ = 1.4 + 0.45·1.
        let (a, ret) = gae(&[vec![1.0, 2.0]], &[vec![0.5, 1.0]], 0.9, 0.5);
        assert!((a[0][1] - 1.0).abs() < 1e-12 && (a[0][0] - 1.85).abs() < 1e-12, "{a:?}");
        assert!((ret[0][0] - 2.35).abs() < 1e-12 && (ret[0][1] - 2.0).abs() < 1e-12);
        let mut w = vec![vec![1.0, 2.0], vec![3.0]];
        whiten(&mut w, true);
        assert!((w[0][0] + 1.0).abs() < 1e-6 && w[0][1].abs() < 1e-9 && (w[1][0] - 1.0).abs() < 1e-6, "{w:?}");
        let mut m = vec![vec![1.0, 2.0], vec![3.0]];
        whiten(&mut m, false);
        assert!((m[0][1] - 2.0).abs() < 1e-9, "the mean kept: {m:?}");
    }
}
