//! The GRPO trainer on a Hugging Face model ([`GrpoTrainer`], TRL's `GRPOTrainer`): prompts from
//! a dataset (a `prompt` column of text, the other columns passed to the reward functions),
//! generation batches sampled with the model's own weights (no separate generator to keep in
//! sync), the loss of [`super::grpo`], Adam with TRL's linear decay, and the logs TRL writes.

use super::data::EpochSampler;
use super::generate::{generate, SamplingConfig};
use super::grpo::{advantages, micro_batch_loss, GrpoArgs, GrpoMetrics, RewardFunction};
use super::model::CausalLm;
use super::optimize::TrainerOptim;
use super::resume::TrainerProgress;
use super::rollout::{check_prompts, encode_prompt, score};
use super::tokenizer::HfTokenizer;
use crate::grpo::token_log_probs;
use crate::grpo_step::add_grads;
use candle_core::{Device, Tensor};
use proxima::policy::candle::host_gradients;
use proxima::Result;
use serde_json::{Map, Value};

/// One sampled, scored generation batch (rows prompt-major: row i belongs to prompt i / G).
struct GenerationBatch {
    prompt_ids: Vec<Vec<u32>>,
    completion_ids: Vec<Vec<u32>>,
    /// Per row, whether its tokens count in the loss (false: a truncated completion under
    /// `mask_truncated_completions`).
    counted: Vec<bool>,
    advantages: Vec<f64>,
    /// log π_θold of each completion token, when the batch is used more than once.
    old_logp: Option<Vec<Tensor>>,
    /// log π_ref of each completion token, when β > 0.
    ref_logp: Option<Vec<Tensor>>,
    /// Completion tokens in the loss over the whole batch (DAPO's normaliser).
    tokens: f64,
}

/// TRL's `GRPOTrainer` on a [`CausalLm`].
pub struct GrpoTrainer {
    /// π_θ, trained in place.
    pub model: CausalLm,
    reference: Option<CausalLm>,
    tokenizer: HfTokenizer,
    reward_funcs: Vec<Box<dyn RewardFunction>>,
    /// The settings.
    pub args: GrpoArgs,
    dataset: Vec<Map<String, Value>>,
    opt: TrainerOptim,
    sampler: EpochSampler,
    /// Optimiser steps taken.
    pub global_step: u64,
    /// One row per generation batch, TRL's keys ([`GrpoMetrics::to_json`]).
    pub log_history: Vec<Value>,
}

impl GrpoTrainer {
    /// A trainer of `model` on `dataset` (rows with a `prompt` string) with `reward_funcs`.
    ///
    /// # Errors
    /// `Config` for bad `args` ([`GrpoArgs::check`]), no reward function, an empty dataset or a
    /// row without a text `prompt`.
    pub fn new(
        model: CausalLm,
        tokenizer: HfTokenizer,
        reward_funcs: Vec<Box<dyn RewardFunction>>,
        args: GrpoArgs,
        dataset: Vec<Map<String, Value>>,
    ) -> Result<GrpoTrainer> {
        tokenizer.check_fits(model.config())?;
        args.check(reward_funcs.len())?;
        let lengths = (args.max_prompt_length, args.max_completion_length, model.config().max_positions);
        check_prompts("GRPO", reward_funcs.len(), &dataset, &tokenizer, lengths)?;
        let reference = if args.beta > 0.0 { Some(model.frozen_copy()?) } else { None };
        let mut model = model;
        let hyper = (args.learning_rate, args.adam_epsilon, args.max_grad_norm);
        let opt = TrainerOptim::new(&mut model, args.peft_config.as_ref(), hyper, args.max_steps, args.seed)?;
        Ok(GrpoTrainer {
            model,
            reference,
            tokenizer,
            reward_funcs,
            args,
            dataset,
            opt,
            sampler: EpochSampler::default(),
            global_step: 0,
            log_history: Vec::new(),
        })
    }

    /// Trains until `max_steps` optimiser steps.
    ///
    /// # Errors
    /// As [`GrpoTrainer::step`].
    pub fn train(&mut self) -> Result<()> {
        while self.global_step < self.args.max_steps {
            self.step()?;
        }
        Ok(())
    }

    /// One generation batch: sample, score, and `num_iterations` passes over it.
    ///
    /// # Errors
    /// A reward function's error; `InvalidArgument` for a prompt too long for the model; `NonFinite`
    /// from the optimiser.
    pub fn step(&mut self) -> Result<GrpoMetrics> {
        let (batch, mut metrics) = self.generation_batch()?;
        let (mut acc, mut micro) = (Vec::new(), 0usize);
        let params = self.model.trainable_params();
        let rows = batch.prompt_ids.len();
        for _ in 0..self.args.num_iterations {
            metrics.loss = 0.0;
            for start in (0..rows).step_by(self.args.per_device_train_batch_size) {
                let r = start..(start + self.args.per_device_train_batch_size).min(rows);
                let (loss, kl) = self.micro_batch(&batch, r)?;
                metrics.loss += f64::from(loss.to_scalar::<f32>()?);
                metrics.kl = kl;
                add_grads(&mut acc, host_gradients(&params, &loss.backward()?)?);
                micro += 1;
                if micro % self.args.gradient_accumulation_steps == 0 && self.global_step < self.args.max_steps {
                    let (info, lr) = self.opt.step(&self.model, &acc, self.global_step)?;
                    (metrics.grad_norm, metrics.learning_rate) = (info.grad_norm, lr);
                    self.global_step += 1;
                    acc.clear();
                }
            }
        }
        metrics.global_step = self.global_step;
        self.log_history.push(metrics.to_json());
        Ok(metrics)
    }

    /// Samples G completions for each of the generation batch's prompts and scores them.
    fn generation_batch(&mut self) -> Result<(GenerationBatch, GrpoMetrics)> {
        let g = self.args.num_generations;
        let picks = self.sampler.next(
            self.args.generation_batch_size() / g,
            self.dataset.len(),
            self.args.shuffle_dataset,
            &mut self.opt.rng,
        );
        let rows: Vec<usize> = picks.iter().flat_map(|&i| std::iter::repeat_n(i, g)).collect();
        let (mut texts, mut prompt_ids) = (Vec::with_capacity(rows.len()), Vec::with_capacity(rows.len()));
        for &i in &rows {
            let (t, ids) = encode_prompt(&self.tokenizer, &self.dataset[i], self.args.max_prompt_length)?;
            texts.push(t);
            prompt_ids.push(ids);
        }
        let sampling = SamplingConfig {
            max_new_tokens: self.args.max_completion_length,
            do_sample: true,
            temperature: self.args.temperature,
            top_k: self.args.top_k,
            top_p: self.args.top_p,
            stop_token_ids: self.tokenizer.eos_token_ids.clone(),
            pad_token_id: self.tokenizer.pad_token_id,
        };
        let out = generate(&self.model, &prompt_ids, &sampling, &mut self.opt.rng)?;
        let completions = out.tokens.iter().map(|c| self.tokenizer.decode(c, true)).collect::<Result<Vec<_>>>()?;
        let columns: Vec<Map<String, Value>> = rows.iter().map(|&i| self.dataset[i].clone()).collect();
        let per_func = score(&mut self.reward_funcs, &texts, &completions, &out.tokens, &columns)?;
        let weights = self.args.reward_weights.clone().unwrap_or_else(|| vec![1.0; per_func.len()]);
        let (rewards, adv) = advantages(&per_func, &weights, g, self.args.scale_rewards);
        let counted: Vec<bool> = out.truncated.iter().map(|&t| !(t && self.args.mask_truncated_completions)).collect();
        let tokens = out.tokens.iter().zip(&counted).filter(|(_, &c)| c).map(|(t, _)| t.len() as f64).sum();
        let mut batch = GenerationBatch {
            prompt_ids,
            completion_ids: out.tokens,
            counted,
            advantages: adv,
            old_logp: None,
            ref_logp: None,
            tokens,
        };
        let reused =
            self.args.num_iterations > 1 || self.args.steps_per_generation() > self.args.gradient_accumulation_steps;
        if reused {
            batch.old_logp = Some(self.all_log_probs(&self.model, &batch)?);
        }
        if let Some(reference) = &self.reference {
            batch.ref_logp = Some(self.all_log_probs(reference, &batch)?);
        }
        let metrics = self.batch_metrics(&per_func, &rewards, &batch, &out.truncated);
        Ok((batch, metrics))
    }

    fn batch_metrics(
        &self,
        per_func: &[Vec<Option<f64>>],
        rewards: &[f64],
        batch: &GenerationBatch,
        truncated: &[bool],
    ) -> GrpoMetrics {
        let g = self.args.num_generations;
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
        // As TRL's `nanstd`: the Bessel std of the scored rewards (unscored ones are NaN).
        let nanstd = |v: &[f64]| {
            let x: Vec<f64> = v.iter().copied().filter(|r| !r.is_nan()).collect();
            let m = mean(&x);
            if x.len() < 2 {
                0.0
            } else {
                (x.iter().map(|r| (r - m).powi(2)).sum::<f64>() / (x.len() as f64 - 1.0)).sqrt()
            }
        };
        let scored: Vec<f64> = rewards.iter().copied().filter(|r| !r.is_nan()).collect();
        let stds: Vec<f64> = rewards.chunks(g).map(nanstd).collect();
        GrpoMetrics {
            reward: mean(&scored),
            // TRL logs the std over the whole generation batch.
            reward_std: nanstd(rewards),
            rewards: self
                .reward_funcs
                .iter()
                .zip(per_func)
                .map(|(f, r)| (f.name(), mean(&r.iter().flatten().copied().collect::<Vec<_>>())))
                .collect(),
            mean_length: mean(&batch.completion_ids.iter().map(|c| c.len() as f64).collect::<Vec<_>>()),
            clipped_ratio: mean(&truncated.iter().map(|&t| f64::from(u8::from(t))).collect::<Vec<_>>()),
            frac_reward_zero_std: mean(&stds.iter().map(|&s| f64::from(u8::from(s.abs() < 1e-8))).collect::<Vec<_>>()),
            ..GrpoMetrics::default()
        }
    }

    /// log π of every completion token of the batch under `model`, per micro-batch (no gradient).
    fn all_log_probs(&self, model: &CausalLm, batch: &GenerationBatch) -> Result<Vec<Tensor>> {
        let rows = batch.prompt_ids.len();
        (0..rows)
            .step_by(self.args.per_device_train_batch_size)
            .map(|s| {
                let r = s..(s + self.args.per_device_train_batch_size).min(rows);
                Ok(completion_log_probs(
                    model,
                    &batch.prompt_ids[r.clone()],
                    &batch.completion_ids[r],
                    self.tokenizer.pad_token_id,
                    self.args.temperature,
                )?
                .0
                .detach())
            })
            .collect()
    }

    /// The loss of rows `r` of the batch (one micro-batch).
    fn micro_batch(&self, batch: &GenerationBatch, r: std::ops::Range<usize>) -> Result<(Tensor, f64)> {
        let k = r.start / self.args.per_device_train_batch_size;
        let (logp, mask) = completion_log_probs(
            &self.model,
            &batch.prompt_ids[r.clone()],
            &batch.completion_ids[r.clone()],
            self.tokenizer.pad_token_id,
            self.args.temperature,
        )?;
        let counted: Vec<f32> = batch.counted[r.clone()].iter().map(|&c| f32::from(u8::from(c))).collect();
        let mask = mask.broadcast_mul(&Tensor::from_vec(counted, (r.len(), 1), &Device::Cpu)?)?;
        let adv: Vec<f32> = batch.advantages[r.clone()].iter().map(|&a| a as f32).collect();
        let adv = Tensor::from_vec(adv, r.len(), &Device::Cpu)?;
        micro_batch_loss(
            &logp,
            batch.old_logp.as_ref().map(|v| &v[k]),
            batch.ref_logp.as_ref().map(|v| &v[k]),
            &mask,
            &adv,
            &self.args,
            batch.tokens,
        )
    }

    /// Writes a checkpoint of the run so far into `dir/checkpoints/` ([`super::resume`]);
    /// `inputs` fingerprints what it started from ([`super::resume::run_fingerprint`]: model,
    /// dataset, settings; or just the model's [`super::resume::initial_fingerprint`]).
    ///
    /// # Errors
    /// `Io`; tensor errors.
    pub fn save_checkpoint(&self, dir: &std::path::Path, inputs: &str) -> Result<()> {
        let p = TrainerProgress {
            model: &self.model,
            global_step: self.global_step,
            sampler: &self.sampler,
            log_history: &self.log_history,
            inputs,
        };
        super::resume::save(dir, &p, &self.opt)
    }

    /// Continues the run of checkpoint `ck` (this trainer built as that run's was, on the model it
    /// started from): parameters, Adam, RNG, row order, steps and logs as they were then.
    ///
    /// # Errors
    /// [`super::resume::restore`]'s.
    pub fn restore_checkpoint(&mut self, ck: &crate::resume::LmCheckpoint, inputs: &str) -> Result<()> {
        (self.sampler, self.global_step, self.log_history) =
            super::resume::restore(ck, &self.model, &mut self.opt, inputs)?;
        Ok(())
    }

    /// Writes the model as a Hugging Face directory (TRL's `save_model`).
    ///
    /// # Errors
    /// [`CausalLm::save`]'s.
    pub fn save_model(&self, dir: &std::path::Path) -> Result<()> {
        self.model.save(dir)
    }
}

/// log π(completion token | prefix) `[B, C]` (differentiable) and the completion mask `[B, C]` for
/// prompts (left-padded) followed by completions (right-padded) in one forward pass, the logits
/// divided by `temperature` (as TRL computes them).
///
/// # Errors
/// [`CausalLm::forward`]'s.
pub fn completion_log_probs(
    model: &CausalLm,
    prompts: &[Vec<u32>],
    completions: &[Vec<u32>],
    pad: u32,
    temperature: f64,
) -> Result<(Tensor, Tensor)> {
    let (hidden, comp, mask) = completion_hidden(model, prompts, completions, pad)?;
    let logits = (model.logits(&hidden)? / temperature)?;
    Ok((token_log_probs(&logits, &comp)?, mask))
}

/// The last hidden states `[B, C, d]` at the positions that predict each completion token (the
/// token before it), the completion ids `[B, C]` (right-padded with `pad`) and their mask `[B, C]`,
/// for prompts (left-padded) followed by completions in one forward pass.
///
/// # Errors
/// [`CausalLm::hidden_states`]'s.
pub fn completion_hidden(
    model: &CausalLm,
    prompts: &[Vec<u32>],
    completions: &[Vec<u32>],
    pad: u32,
) -> Result<(Tensor, Tensor, Tensor)> {
    let p = prompts.iter().map(Vec::len).max().unwrap_or(0);
    let c = completions.iter().map(Vec::len).max().unwrap_or(0).max(1);
    let (mut ids, mut key_mask, mut comp, mut mask) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (pr, co) in prompts.iter().zip(completions) {
        let (lp, rc) = (p - pr.len(), c - co.len());
        ids.push([vec![pad; lp], pr.clone(), co.clone(), vec![pad; rc]].concat());
        key_mask.push([vec![0u8; lp], vec![1u8; pr.len() + co.len()], vec![0u8; rc]].concat());
        comp.extend(co.iter().copied().chain(std::iter::repeat_n(pad, rc)));
        mask.extend(std::iter::repeat_n(1f32, co.len()).chain(std::iter::repeat_n(0f32, rc)));
    }
    let pos: Vec<Vec<u32>> = key_mask
        .iter()
        .map(|m| {
            m.iter()
                .scan(0u32, |n, &k| {
                    *n += u32::from(k);
                    Some(n.saturating_sub(1))
                })
                .collect()
        })
        .collect();
    let hidden = model.hidden_states(&ids, &pos, &key_mask, None)?.narrow(1, p - 1, c)?;
    let b = prompts.len();
    let comp = Tensor::from_vec(comp, (b, c), &Device::Cpu)?;
    Ok((hidden, comp, Tensor::from_vec(mask, (b, c), &Device::Cpu)?))
}
