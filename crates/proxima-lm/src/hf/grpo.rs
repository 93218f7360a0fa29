//! GRPO (Shao et al. 2024, arXiv:2402.03300) on a Hugging Face [`CausalLm`](super::CausalLm), with TRL's
//! `GRPOConfig` names, defaults and loss semantics (`trl/trainer/grpo_trainer.py`,
//! `_compute_loss`): for each prompt `num_generations` completions are sampled, scored by the
//! reward functions (their weighted sum), turned into group-relative advantages, and the clipped
//! surrogate (plus β·k3 to a frozen reference when β > 0) is minimised over `num_iterations`
//! passes in micro-batches of `per_device_train_batch_size` completions, one optimiser step every
//! `gradient_accumulation_steps` micro-batches.
//!
//! Per completion token: ℓ = −min(r·Â, clip(r, 1 − ε, 1 + ε_high)·Â) + β·k3, r = π_θ/π_θold
//! (1 with its gradient when the batch is used once), log-probabilities of the logits divided by
//! the sampling temperature as TRL computes them. A micro-batch's loss by `loss_type`:
//! `grpo`: mean over sequences of each one's token mean, ÷ accumulation steps; `bnpo`: the
//! micro-batch's token mean ÷ accumulation steps; `dr_grpo`: Σℓ / (rows · max_completion_length)
//! ÷ accumulation steps; `dapo` (the default): Σℓ / the generation batch's completion tokens.

use super::generate::SamplingConfig;
use crate::grpo::{k3, ADV_EPS};
use candle_core::Tensor;
use proxima::{ProximaError, Result};
use serde_json::{Map, Value};

/// How a micro-batch's per-token losses become its loss (TRL's `loss_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LossType {
    /// Each sequence's token mean, averaged over sequences (the original GRPO).
    Grpo,
    /// The token mean over the micro-batch.
    Bnpo,
    /// Σℓ over (rows × `max_completion_length`): Dr. GRPO (Liu et al. 2025).
    DrGrpo,
    /// Σℓ over the generation batch's completion tokens: DAPO (Yu et al. 2025), TRL's default.
    Dapo,
}

/// How rewards are scaled into advantages (TRL's `scale_rewards`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScaleRewards {
    /// ÷ (the group's std + 1e-4).
    Group,
    /// ÷ (the generation batch's std + 1e-4).
    Batch,
    /// Not scaled (Dr. GRPO).
    None,
}

/// TRL's `GRPOConfig`, the fields Proxima reads, with TRL's defaults.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GrpoArgs {
    /// Adam's step size (1e-6), decayed linearly to 0 over `max_steps` (`lr_scheduler_type` "linear").
    pub learning_rate: f64,
    /// Optimiser steps to take.
    pub max_steps: u64,
    /// Completions per micro-batch.
    pub per_device_train_batch_size: usize,
    /// Micro-batches per optimiser step.
    pub gradient_accumulation_steps: usize,
    /// Micro-batches per generation batch (`None`: `gradient_accumulation_steps`).
    pub steps_per_generation: Option<usize>,
    /// G, completions per prompt (8).
    pub num_generations: usize,
    /// μ, passes over each generation batch (1).
    pub num_iterations: usize,
    /// β of the k3 penalty to the reference model (0: no reference is loaded).
    pub beta: f64,
    /// ε, the lower clip (0.2).
    pub epsilon: f64,
    /// The upper clip (`None`: `epsilon`; DAPO's clip-higher uses 0.28).
    pub epsilon_high: Option<f64>,
    /// See [`LossType`] (`dapo`).
    pub loss_type: LossType,
    /// See [`ScaleRewards`] (`group`).
    pub scale_rewards: ScaleRewards,
    /// Prompts longer than this keep their last tokens (`None`: whole).
    pub max_prompt_length: Option<usize>,
    /// New tokens per completion at most (512).
    pub max_completion_length: usize,
    /// Sampling temperature (1.0); the log-probabilities divide the logits by it too.
    pub temperature: f64,
    /// Nucleus sampling (1.0: off).
    pub top_p: f64,
    /// Top-k sampling (0: off).
    pub top_k: usize,
    /// Completions cut at `max_completion_length` count in no loss.
    pub mask_truncated_completions: bool,
    /// One weight per reward function (`None`: all 1).
    pub reward_weights: Option<Vec<f64>>,
    /// The global gradient-norm clip (1.0).
    pub max_grad_norm: f64,
    /// Adam's ε (1e-8).
    pub adam_epsilon: f64,
    /// Seeds the prompt order and the sampling (42).
    pub seed: u64,
    /// Shuffle the prompts each epoch (true).
    pub shuffle_dataset: bool,
    /// LoRA adapters to train instead of the whole model (TRL's `peft_config`; `None`: full).
    pub peft_config: Option<crate::hf::lora::LoraConfig>,
}

impl Default for GrpoArgs {
    fn default() -> Self {
        GrpoArgs {
            learning_rate: 1e-6,
            max_steps: 500,
            per_device_train_batch_size: 8,
            gradient_accumulation_steps: 1,
            steps_per_generation: None,
            num_generations: 8,
            num_iterations: 1,
            beta: 0.0,
            epsilon: 0.2,
            epsilon_high: None,
            loss_type: LossType::Dapo,
            scale_rewards: ScaleRewards::Group,
            max_prompt_length: Some(512),
            max_completion_length: 512,
            temperature: 1.0,
            top_p: 1.0,
            top_k: 0,
            mask_truncated_completions: false,
            reward_weights: None,
            max_grad_norm: 1.0,
            adam_epsilon: 1e-8,
            seed: 42,
            shuffle_dataset: true,
            peft_config: None,
        }
    }
}

impl GrpoArgs {
    /// Micro-batches per generation batch.
    pub fn steps_per_generation(&self) -> usize {
        self.steps_per_generation.unwrap_or(self.gradient_accumulation_steps)
    }

    /// Completions per generation batch.
    pub fn generation_batch_size(&self) -> usize {
        self.per_device_train_batch_size * self.steps_per_generation()
    }

    /// TRL's checks, as errors.
    ///
    /// # Errors
    /// `Config` naming the setting.
    pub fn check(&self, n_reward_funcs: usize) -> Result<()> {
        let bad = |m: String| Err(ProximaError::Config(m));
        if self.num_generations < 2 {
            return bad(format!(
                "num_generations must be at least 2 (a group needs a baseline), got {}",
                self.num_generations
            ));
        }
        if self.per_device_train_batch_size == 0
            || self.gradient_accumulation_steps == 0
            || self.steps_per_generation() == 0
            || self.num_iterations == 0
        {
            return bad("per_device_train_batch_size, gradient_accumulation_steps, steps_per_generation and num_iterations must be positive".into());
        }
        if self.generation_batch_size() % self.num_generations != 0 {
            return bad(format!(
                "the generation batch ({} = per_device_train_batch_size {} × steps_per_generation {}) must be a multiple of num_generations ({})",
                self.generation_batch_size(),
                self.per_device_train_batch_size,
                self.steps_per_generation(),
                self.num_generations
            ));
        }
        if (self.steps_per_generation() * self.num_iterations) % self.gradient_accumulation_steps != 0 {
            return bad(
                "steps_per_generation × num_iterations must be a multiple of gradient_accumulation_steps".into()
            );
        }
        if self.max_completion_length == 0 || self.max_steps == 0 {
            return bad(format!(
                "max_completion_length and max_steps must be positive, got {} and {}",
                self.max_completion_length, self.max_steps
            ));
        }
        for (name, v) in [("epsilon", self.epsilon), ("beta", self.beta), ("temperature", self.temperature)] {
            if !(v >= 0.0 && v.is_finite()) {
                return bad(format!("{name} must be a finite number ≥ 0, got {v}"));
            }
        }
        if let Some(w) = &self.reward_weights {
            if w.len() != n_reward_funcs {
                return bad(format!("{} reward_weights for {n_reward_funcs} reward functions", w.len()));
            }
        }
        SamplingConfig { temperature: self.temperature, top_p: self.top_p, ..SamplingConfig::default() }.check()
    }
}

/// A reward function, as TRL calls one: the prompts, the completions (text and token ids), and the
/// dataset's other columns for each completion; one reward per completion, `None` where it does
/// not apply. `Send`: the trainer runs on whichever thread trains.
pub trait RewardFunction: Send {
    /// The name the logs use (`rewards/{name}/mean`).
    fn name(&self) -> String;

    /// Rewards for a batch of completions.
    ///
    /// # Errors
    /// Whatever the function raises; the trainer stops with it.
    fn call(
        &mut self,
        prompts: &[String],
        completions: &[String],
        completion_ids: &[Vec<u32>],
        columns: &[Map<String, Value>],
    ) -> Result<Vec<Option<f64>>>;
}

/// Group-relative advantages as TRL computes them: the weighted sum of the rewards (`None`s left
/// out of the sum; a completion no function scores is left out of its group's baseline and gets
/// Â = 0), minus the group's mean, divided by the group's or the batch's Bessel std + 1e-4 unless
/// `scale` is `None`. Returns (rewards, advantages).
pub fn advantages(
    per_func: &[Vec<Option<f64>>],
    weights: &[f64],
    group: usize,
    scale: ScaleRewards,
) -> (Vec<f64>, Vec<f64>) {
    let n = per_func.first().map_or(0, Vec::len);
    let rewards: Vec<f64> = (0..n)
        .map(|i| {
            let vals: Vec<f64> = per_func.iter().zip(weights).filter_map(|(f, w)| f[i].map(|r| r * w)).collect();
            if vals.is_empty() {
                f64::NAN
            } else {
                vals.iter().sum()
            }
        })
        .collect();
    let nan_std = |v: &[f64]| -> (f64, f64) {
        let ok: Vec<f64> = v.iter().copied().filter(|x| !x.is_nan()).collect();
        let mean = ok.iter().sum::<f64>() / ok.len().max(1) as f64;
        let var = ok.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (ok.len() as f64 - 1.0);
        (mean, if ok.len() > 1 { var.sqrt() } else { f64::NAN })
    };
    let batch_std = nan_std(&rewards).1;
    let mut adv = Vec::with_capacity(n);
    for g in rewards.chunks(group) {
        let (mean, std) = nan_std(g);
        let std = if scale == ScaleRewards::Batch { batch_std } else { std };
        for &r in g {
            let a = r - mean;
            let a = if scale == ScaleRewards::None { a } else { a / (std + ADV_EPS) };
            adv.push(if a.is_nan() { 0.0 } else { a });
        }
    }
    (rewards, adv)
}

/// The per-micro-batch loss of `loss_type` (module docs) from per-token log-probabilities `[B, C]`
/// (differentiable), π_θold's and π_ref's (`None`: the current ones without gradient, i.e. r = 1;
/// no KL term), the completion mask `[B, C]` and Â `[B]`. Returns the loss and the masked mean k3.
///
/// # Errors
/// Tensor errors.
#[allow(clippy::too_many_arguments)]
pub fn micro_batch_loss(
    logp: &Tensor,
    old_logp: Option<&Tensor>,
    ref_logp: Option<&Tensor>,
    mask: &Tensor,
    adv: &Tensor,
    args: &GrpoArgs,
    generation_tokens: f64,
) -> Result<(Tensor, f64)> {
    let old = match old_logp {
        Some(o) => o.clone(),
        None => logp.detach(),
    };
    let ratio = (logp - &old)?.exp()?;
    let adv = adv.unsqueeze(1)?.broadcast_as(ratio.shape())?;
    let eps_high = args.epsilon_high.unwrap_or(args.epsilon);
    let clipped = (ratio.clamp(1.0 - args.epsilon, 1.0 + eps_high)? * &adv)?;
    let mut per_token = (&ratio * &adv)?.minimum(&clipped)?.neg()?;
    let mut kl_mean = 0.0;
    if let (Some(r), true) = (ref_logp, args.beta > 0.0) {
        let kl = k3(logp, r)?;
        let tokens = mask.sum_all()?.to_scalar::<f32>()?.max(1.0);
        kl_mean = f64::from((&kl * mask)?.sum_all()?.to_scalar::<f32>()? / tokens);
        per_token = (per_token + (kl * args.beta)?)?;
    }
    let masked = (per_token * mask)?;
    let accum = args.gradient_accumulation_steps as f64;
    let loss = match args.loss_type {
        LossType::Grpo => ((masked.sum(1)? / mask.sum(1)?.maximum(1.0)?)?.mean_all()? / accum)?,
        LossType::Bnpo => (masked.sum_all()?.broadcast_div(&mask.sum_all()?.maximum(1.0)?)? / accum)?,
        LossType::DrGrpo => (masked.sum_all()? / (mask.dim(0)? as f64 * args.max_completion_length as f64 * accum))?,
        LossType::Dapo => (masked.sum_all()? / generation_tokens.max(1.0))?,
    };
    Ok((loss, kl_mean))
}

/// What one generation batch measured (TRL's log names in [`GrpoMetrics::to_json`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GrpoMetrics {
    /// Optimiser steps taken so far.
    pub global_step: u64,
    /// Mean reward (weighted sum) over the generation batch.
    pub reward: f64,
    /// The std of the generation batch's (scored) rewards, as TRL logs it.
    pub reward_std: f64,
    /// Per reward function: its mean over the completions it scored.
    pub rewards: Vec<(String, f64)>,
    /// Mean completion length (tokens).
    pub mean_length: f64,
    /// Fraction of completions cut at `max_completion_length`.
    pub clipped_ratio: f64,
    /// Fraction of groups whose rewards are all equal.
    pub frac_reward_zero_std: f64,
    /// The loss of the last micro-batch pass, summed over its micro-batches.
    pub loss: f64,
    /// Mean k3 to the reference (β > 0).
    pub kl: f64,
    /// ‖g‖ before clipping at the last optimiser step.
    pub grad_norm: f64,
    /// The learning rate of the last optimiser step.
    pub learning_rate: f64,
}

impl GrpoMetrics {
    /// One log row with TRL's keys.
    pub fn to_json(&self) -> Value {
        let mut m = serde_json::json!({
            "step": self.global_step, "reward": self.reward, "reward_std": self.reward_std,
            "completions/mean_length": self.mean_length, "completions/clipped_ratio": self.clipped_ratio,
            "frac_reward_zero_std": self.frac_reward_zero_std, "loss": self.loss, "kl": self.kl,
            "grad_norm": self.grad_norm, "learning_rate": self.learning_rate,
        });
        for (name, v) in &self.rewards {
            m[format!("rewards/{name}/mean")] = serde_json::json!(v);
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, Var};

    #[test]
    fn advantages_as_trl_computes_them() {
        // Two functions, weights 1 and 0.5; the second does not score row 1; row 3 unscored by both.
        let f1 = vec![Some(1.0), Some(0.0), Some(0.0), None, Some(2.0), Some(2.0), Some(2.0), Some(2.0)];
        let f2 = vec![Some(2.0), None, Some(0.0), None, Some(0.0), Some(0.0), Some(0.0), Some(0.0)];
        let (r, a) = advantages(&[f1, f2], &[1.0, 0.5], 4, ScaleRewards::Group);
        assert_eq!(&r[..3], &[2.0, 0.0, 0.0]);
        assert!(r[3].is_nan());
        // Group 0 without row 3: mean 2/3, Bessel std √(4/3).
        let (m, s) = (2.0 / 3.0, (4.0f64 / 3.0).sqrt() + ADV_EPS);
        for (x, want) in a[..4].iter().zip([(2.0 - m) / s, -m / s, -m / s, 0.0]) {
            assert!((x - want).abs() < 1e-12, "{a:?}");
        }
        assert_eq!(&a[4..], &[0.0; 4], "a flat group has no signal");
        let (_, none) = advantages(&[vec![Some(1.0), Some(3.0)]], &[1.0], 2, ScaleRewards::None);
        assert_eq!(none, vec![-1.0, 1.0]);
        // Batch scaling: the std of all four rewards.
        let (_, b) = advantages(&[vec![Some(0.0), Some(1.0), Some(2.0), Some(4.0)]], &[1.0], 2, ScaleRewards::Batch);
        let std = (((0.0f64 - 1.75).powi(2) + 0.75f64.powi(2) + 0.25f64.powi(2) + 2.25f64.powi(2)) / 3.0).sqrt();
        assert!((b[0] + 0.5 / (std + ADV_EPS)).abs() < 1e-12 && (b[3] - 1.0 / (std + ADV_EPS)).abs() < 1e-12, "{b:?}");
    }

    /// Each loss type against its formula, computed here in f64 on a hand-made batch: two rows of
    /// three tokens (the second with one padding token), ratios inside and outside the clip, a
    /// reference for the k3 term.
    #[test]
    fn each_loss_type_is_trls_formula() {
        let dev = Device::Cpu;
        let logp = [[-1.0f32, -0.5, -2.0], [-0.3, -1.2, -0.9]];
        let old = [[-1.1f32, -0.9, -1.6], [-0.3, -1.0, -0.2]];
        let refp = [[-1.3f32, -0.4, -2.2], [-0.5, -1.1, -0.7]];
        let mask = [[1f32, 1.0, 1.0], [1.0, 1.0, 0.0]];
        let adv = [0.7f32, -1.3];
        let t = |v: &[[f32; 3]; 2]| Tensor::from_vec(v.concat(), (2, 3), &dev).unwrap();
        for loss_type in [LossType::Grpo, LossType::Bnpo, LossType::DrGrpo, LossType::Dapo] {
            let args = GrpoArgs {
                loss_type,
                beta: 0.04,
                epsilon: 0.2,
                epsilon_high: Some(0.28),
                max_completion_length: 4,
                gradient_accumulation_steps: 2,
                ..GrpoArgs::default()
            };
            let lp = Var::from_tensor(&t(&logp)).unwrap();
            let (loss, _) = micro_batch_loss(
                lp.as_tensor(),
                Some(&t(&old)),
                Some(&t(&refp)),
                &t(&mask),
                &Tensor::new(&adv, &dev).unwrap(),
                &args,
                11.0,
            )
            .unwrap();
            let mut per = [[0f64; 3]; 2];
            for i in 0..2 {
                for j in 0..3 {
                    let r = (f64::from(logp[i][j]) - f64::from(old[i][j])).exp();
                    let a = f64::from(adv[i]);
                    let d = f64::from(refp[i][j]) - f64::from(logp[i][j]);
                    per[i][j] =
                        (-(r * a).min(r.clamp(0.8, 1.28) * a) + 0.04 * (d.exp() - d - 1.0)) * f64::from(mask[i][j]);
                }
            }
            let sum: f64 = per.iter().flatten().sum();
            let want = match loss_type {
                LossType::Grpo => (per[0].iter().sum::<f64>() / 3.0 + per[1].iter().sum::<f64>() / 2.0) / 2.0 / 2.0,
                LossType::Bnpo => sum / 5.0 / 2.0,
                LossType::DrGrpo => sum / (2.0 * 4.0) / 2.0,
                LossType::Dapo => sum / 11.0,
            };
            let got = f64::from(loss.to_scalar::<f32>().unwrap());
            assert!((got - want).abs() < 1e-6, "{loss_type:?}: {got} vs {want}");
        }
    }

    #[test]
    fn bad_settings_name_themselves() {
        let err = |a: GrpoArgs| a.check(1).unwrap_err().to_string();
        assert!(
            err(GrpoArgs { num_generations: 1, ..GrpoArgs::default() }).contains("num_generations must be at least 2")
        );
        assert!(err(GrpoArgs { per_device_train_batch_size: 6, num_generations: 4, ..GrpoArgs::default() })
            .contains("multiple of num_generations"));
        assert!(err(GrpoArgs { reward_weights: Some(vec![1.0, 2.0]), ..GrpoArgs::default() })
            .contains("2 reward_weights for 1 reward functions"));
        assert!(err(GrpoArgs { temperature: 0.0, ..GrpoArgs::default() }).contains("temperature"));
    }
}
