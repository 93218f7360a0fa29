//! Direct Preference Optimization (Rafailov et al. 2023, arXiv:2305.18290, Eq. 7) of a Hugging
//! Face [`CausalLm`] with TRL's `DPOTrainer` semantics: rows of `prompt`, `chosen` and `rejected`
//! (text, the end-of-sequence token appended to both answers; or conversations through the chat
//! template), the answers' tokens found where prompt + answer and prompt alone diverge,
//! log π(y|x) = Σ_t log π(y_t | x, y_<t) over the answer's tokens, and with
//! Δ = (log π_θ(y_w|x) − log π_ref(y_w|x)) − (log π_θ(y_l|x) − log π_ref(y_l|x)) the loss types
//!
//! - `sigmoid` (DPO): −log σ(β·Δ)
//! - `hinge` (SLiC, Zhao et al. 2023): max(0, 1 − β·Δ)
//! - `ipo` (Azar et al. 2023, Eq. 17): (Δ̄ − 1/(2β))², Δ̄ with each log-ratio divided by the
//!   answer's token count (TRL's normalisation)
//!
//! averaged over the pairs of one optimiser step. π_ref is the model as it was given (a frozen
//! copy; with LoRA, the model without its adapters).

use super::data::EpochSampler;
use super::grpo_trainer::completion_log_probs;
use super::model::CausalLm;
use super::optimize::TrainerOptim;
use super::tokenizer::HfTokenizer;
use crate::grpo_step::add_grads;
use candle_core::{DType, Tensor, D};
use proxima::policy::candle::host_gradients;
use proxima::{ProximaError, Result};
use serde_json::{Map, Value};

/// TRL's `loss_type` for DPO (the pairwise ones on Δ Proxima implements).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DpoLossType {
    /// −log σ(β·Δ), the DPO loss.
    Sigmoid,
    /// max(0, 1 − β·Δ).
    Hinge,
    /// (Δ̄ − 1/(2β))² on per-token log-ratios.
    Ipo,
}

/// TRL's `DPOConfig`, the fields Proxima reads, with TRL's defaults.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DpoArgs {
    /// Adam's step size (1e-6), decayed linearly to 0 over `max_steps`.
    pub learning_rate: f64,
    /// β: how far π_θ may move from π_ref (0.1; IPO's τ).
    pub beta: f64,
    /// The loss on Δ.
    pub loss_type: DpoLossType,
    /// Optimiser steps to take.
    pub max_steps: u64,
    /// Pairs per micro-batch.
    pub per_device_train_batch_size: usize,
    /// Micro-batches per optimiser step.
    pub gradient_accumulation_steps: usize,
    /// Prompt + answer longer than this (in tokens) is cut at the end (TRL's `keep_start`; 1024).
    pub max_length: Option<usize>,
    /// The global gradient-norm clip (1.0).
    pub max_grad_norm: f64,
    /// Adam's ε (1e-8).
    pub adam_epsilon: f64,
    /// Seeds the row order and the adapters (42).
    pub seed: u64,
    /// Shuffle the rows each epoch.
    pub shuffle_dataset: bool,
    /// LoRA adapters to train instead of the whole model (`None`: full).
    pub peft_config: Option<crate::hf::lora::LoraConfig>,
}

impl Default for DpoArgs {
    fn default() -> Self {
        DpoArgs {
            learning_rate: 1e-6,
            beta: 0.1,
            loss_type: DpoLossType::Sigmoid,
            max_steps: 500,
            per_device_train_batch_size: 8,
            gradient_accumulation_steps: 1,
            max_length: Some(1024),
            max_grad_norm: 1.0,
            adam_epsilon: 1e-8,
            seed: 42,
            shuffle_dataset: true,
            peft_config: None,
        }
    }
}

/// One tokenised preference pair.
#[derive(Clone, Debug, PartialEq)]
pub struct PairIds {
    /// The prompt's tokens.
    pub prompt: Vec<u32>,
    /// The preferred answer's tokens y_w.
    pub chosen: Vec<u32>,
    /// The other answer's tokens y_l.
    pub rejected: Vec<u32>,
}

/// What one optimiser step measured, TRL's keys ([`DpoMetrics::to_json`]).
#[derive(Clone, Debug, Default)]
pub struct DpoMetrics {
    /// Optimiser steps taken so far.
    pub global_step: u64,
    /// The step's loss (mean over its pairs).
    pub loss: f64,
    /// Mean β·log π_θ/π_ref of the chosen answers.
    pub rewards_chosen: f64,
    /// Mean β·log π_θ/π_ref of the rejected answers.
    pub rewards_rejected: f64,
    /// Fraction of pairs whose chosen answer has the larger implicit reward.
    pub rewards_accuracies: f64,
    /// Mean implicit-reward margin.
    pub rewards_margins: f64,
    /// Mean log π_θ(y_w|x).
    pub logps_chosen: f64,
    /// Mean log π_θ(y_l|x).
    pub logps_rejected: f64,
    /// ‖g‖ before clipping.
    pub grad_norm: f64,
    /// The step's learning rate.
    pub learning_rate: f64,
}

impl DpoMetrics {
    /// One log row with TRL's keys.
    pub fn to_json(&self) -> Value {
        serde_json::json!({
            "step": self.global_step, "loss": self.loss,
            "rewards/chosen": self.rewards_chosen, "rewards/rejected": self.rewards_rejected,
            "rewards/accuracies": self.rewards_accuracies, "rewards/margins": self.rewards_margins,
            "logps/chosen": self.logps_chosen, "logps/rejected": self.logps_rejected,
            "grad_norm": self.grad_norm, "learning_rate": self.learning_rate,
        })
    }
}

/// log π(y|x) `[2n]` of n pairs (the n chosen answers, then the n rejected; differentiable) and
/// the answers' token counts `[2n]`, in one forward pass.
///
/// # Errors
/// [`CausalLm::forward`]'s.
pub fn pair_log_probs(model: &CausalLm, pairs: &[&PairIds], pad: u32) -> Result<(Tensor, Vec<f64>)> {
    let prompts: Vec<Vec<u32>> = pairs.iter().chain(pairs).map(|p| p.prompt.clone()).collect();
    let answers: Vec<Vec<u32>> =
        pairs.iter().map(|p| p.chosen.clone()).chain(pairs.iter().map(|p| p.rejected.clone())).collect();
    let (logp, mask) = completion_log_probs(model, &prompts, &answers, pad, 1.0)?;
    let counts = answers.iter().map(|a| a.len() as f64).collect();
    Ok(((logp * mask)?.sum(D::Minus1)?, counts))
}

/// The loss of n pairs, summed over them (divide by the step's pair count for TRL's mean), from
/// the policy's log-probabilities `[2n]` (chosen first; differentiable), π_ref's (constants) and
/// the answers' token counts (IPO's normaliser).
///
/// # Errors
/// `InvalidArgument` for mismatched or odd lengths; tensor errors.
pub fn dpo_loss(policy: &Tensor, reference: &Tensor, counts: &[f64], args: &DpoArgs) -> Result<Tensor> {
    let (m, r) = (policy.dims1()?, reference.dims1()?);
    if m != r || m != counts.len() || m % 2 != 0 || m == 0 {
        return Err(ProximaError::InvalidArgument(format!(
            "DPO needs 2n log-probabilities of both models and 2n counts, got {m}, {r} and {}",
            counts.len()
        )));
    }
    let n = m / 2;
    let mut ratio = (policy - reference)?; // log π_θ/π_ref per answer
    if args.loss_type == DpoLossType::Ipo {
        let per_token: Vec<f32> = counts.iter().map(|&c| (1.0 / c.max(1.0)) as f32).collect();
        ratio = (ratio * Tensor::from_vec(per_token, m, policy.device())?)?;
    }
    let delta = (ratio.narrow(0, 0, n)? - ratio.narrow(0, n, n)?)?; // Δ
    let per_pair = match args.loss_type {
        // −log σ(x) = softplus(−x) = max(−x, 0) + log(1 + e^{−|x|}), stable for any x.
        DpoLossType::Sigmoid => {
            let x = (&delta * args.beta)?;
            (x.neg()?.relu()? + (x.abs()?.neg()?.exp()? + 1.0)?.log()?)?
        }
        DpoLossType::Hinge => ((&delta * -args.beta)? + 1.0)?.relu()?,
        DpoLossType::Ipo => (&delta - 1.0 / (2.0 * args.beta))?.sqr()?,
    };
    Ok(per_pair.sum_all()?)
}

/// TRL's `DPOTrainer` on a [`CausalLm`].
pub struct DpoTrainer {
    /// π_θ, trained in place.
    pub model: CausalLm,
    reference: CausalLm,
    pad: u32,
    /// The settings.
    pub args: DpoArgs,
    pairs: Vec<PairIds>,
    opt: TrainerOptim,
    sampler: EpochSampler,
    /// Optimiser steps taken.
    pub global_step: u64,
    /// One row per optimiser step ([`DpoMetrics::to_json`]).
    pub log_history: Vec<Value>,
}

impl DpoTrainer {
    /// A trainer on `dataset`: every row `prompt`, `chosen` and `rejected`, all text or all
    /// conversations (lists of `{"role", "content"}` messages).
    ///
    /// # Errors
    /// `Config` for an empty dataset, rows of neither form, zero batch sizes, β ≤ 0; the
    /// tokenizer's and chat template's errors; `InvalidArgument` for a prompt that leaves no
    /// answer token within `max_length`, or a pair longer than the model's positions.
    pub fn new(
        model: CausalLm,
        tokenizer: &HfTokenizer,
        args: DpoArgs,
        dataset: &[Map<String, Value>],
    ) -> Result<Self> {
        tokenizer.check_fits(model.config())?;
        if dataset.is_empty() {
            return Err(ProximaError::Config("the training dataset is empty".into()));
        }
        if args.per_device_train_batch_size == 0 || args.gradient_accumulation_steps == 0 {
            return Err(ProximaError::Config(
                "per_device_train_batch_size and gradient_accumulation_steps must be positive".into(),
            ));
        }
        if !(args.beta > 0.0 && args.beta.is_finite()) {
            return Err(ProximaError::Config(format!("beta must be positive and finite, got {}", args.beta)));
        }
        let pairs = dataset
            .iter()
            .enumerate()
            .map(|(i, row)| tokenize_pair(tokenizer, row, args.max_length).map_err(|e| at_row(i, e)))
            .collect::<Result<Vec<_>>>()?;
        let longest = pairs.iter().map(|p| p.prompt.len() + p.chosen.len().max(p.rejected.len())).max().unwrap_or(0);
        if longest > model.config().max_positions {
            return Err(ProximaError::InvalidArgument(format!(
                "a pair of {longest} tokens is longer than the model's {} positions (set max_length)",
                model.config().max_positions
            )));
        }
        let reference = model.frozen_copy()?;
        let mut model = model;
        let hyper = (args.learning_rate, args.adam_epsilon, args.max_grad_norm);
        let opt = TrainerOptim::new(&mut model, args.peft_config.as_ref(), hyper, args.max_steps, args.seed)?;
        let pad = tokenizer.pad_token_id;
        let (sampler, log_history) = (EpochSampler::default(), Vec::new());
        Ok(DpoTrainer { model, reference, pad, args, pairs, opt, sampler, global_step: 0, log_history })
    }

    /// Trains until `max_steps` optimiser steps.
    ///
    /// # Errors
    /// As [`DpoTrainer::step`].
    pub fn train(&mut self) -> Result<()> {
        while self.global_step < self.args.max_steps {
            self.step()?;
        }
        Ok(())
    }

    /// One optimiser step over `gradient_accumulation_steps` micro-batches of pairs.
    ///
    /// # Errors
    /// Tensor errors; `NonFinite` from the optimiser.
    pub fn step(&mut self) -> Result<DpoMetrics> {
        let (bs, accum) = (self.args.per_device_train_batch_size, self.args.gradient_accumulation_steps);
        let picks = self.sampler.next(bs * accum, self.pairs.len(), self.args.shuffle_dataset, &mut self.opt.rng);
        let params = self.model.trainable_params();
        let (mut acc, mut m) = (Vec::new(), DpoMetrics::default());
        let total = picks.len() as f64;
        for chunk in picks.chunks(bs) {
            let pairs: Vec<&PairIds> = chunk.iter().map(|&i| &self.pairs[i]).collect();
            let (logp, counts) = pair_log_probs(&self.model, &pairs, self.pad)?;
            let ref_logp = pair_log_probs(&self.reference, &pairs, self.pad)?.0.detach();
            let loss = (dpo_loss(&logp, &ref_logp, &counts, &self.args)? / total)?;
            m.loss += f64::from(loss.to_scalar::<f32>()?);
            add_logged(&mut m, &logp.detach(), &ref_logp, self.args.beta, total)?;
            add_grads(&mut acc, host_gradients(&params, &loss.backward()?)?);
        }
        let (info, lr) = self.opt.step(&self.model, &acc, self.global_step)?;
        self.global_step += 1;
        (m.global_step, m.grad_norm, m.learning_rate) = (self.global_step, info.grad_norm, lr);
        self.log_history.push(m.to_json());
        Ok(m)
    }

    /// Writes the model (and the tokenizer's files) as a Hugging Face directory.
    ///
    /// # Errors
    /// [`CausalLm::save`]'s.
    pub fn save_model(&self, dir: &std::path::Path) -> Result<()> {
        self.model.save(dir)
    }
}

/// Adds one micro-batch's share of TRL's logged means (each divided by the step's pair count).
fn add_logged(m: &mut DpoMetrics, logp: &Tensor, ref_logp: &Tensor, beta: f64, total: f64) -> Result<()> {
    let lp = logp.to_dtype(DType::F64)?.to_vec1::<f64>()?;
    let rp = ref_logp.to_dtype(DType::F64)?.to_vec1::<f64>()?;
    let n = lp.len() / 2;
    for i in 0..n {
        let (rw, rl) = (beta * (lp[i] - rp[i]), beta * (lp[n + i] - rp[n + i]));
        m.rewards_chosen += rw / total;
        m.rewards_rejected += rl / total;
        m.rewards_accuracies += f64::from(u8::from(rw > rl)) / total;
        m.rewards_margins += (rw - rl) / total;
        m.logps_chosen += lp[i] / total;
        m.logps_rejected += lp[n + i] / total;
    }
    Ok(())
}

fn at_row(i: usize, e: ProximaError) -> ProximaError {
    match e {
        ProximaError::Config(s) => ProximaError::Config(format!("dataset row {i}: {s}")),
        ProximaError::InvalidArgument(s) => ProximaError::InvalidArgument(format!("dataset row {i}: {s}")),
        e => e,
    }
}

/// A row's tokens as TRL makes them: prompt and prompt + answer tokenised whole (text: the
/// tokenizer's special tokens added and the EOS text appended to the answer; conversations: the
/// chat template, the prompt with its generation prompt), the answer starting where the two part;
/// prompt + answer cut at `max_length`.
///
/// # Errors
/// `Config` for a row without the three columns of one form; the tokenizer's and chat
/// template's errors; `InvalidArgument` when no answer token is left.
pub fn tokenize_pair(tok: &HfTokenizer, row: &Map<String, Value>, max_length: Option<usize>) -> Result<PairIds> {
    let (prompt, chosen, rejected) = (&row.get("prompt"), &row.get("chosen"), &row.get("rejected"));
    let (p, w, l) = match (prompt, chosen, rejected) {
        (Some(Value::String(p)), Some(Value::String(w)), Some(Value::String(l))) => {
            let eos = match tok.eos_token_ids.first() {
                Some(&id) => tok.decode(&[id], false)?,
                None => String::new(),
            };
            let with_eos = |a: &str| if a.ends_with(&eos) { a.to_string() } else { format!("{a}{eos}") };
            let full = |a: &str| tok.encode(&format!("{p}{}", with_eos(a)), true);
            (tok.encode(p, true)?, full(w)?, full(l)?)
        }
        (Some(p @ Value::Array(_)), Some(Value::Array(w)), Some(Value::Array(l))) => {
            let text = |m: &Value, gen| -> Result<Vec<u32>> { tok.encode(&tok.apply_chat_template(m, gen)?, false) };
            let joined = |a: &Vec<Value>| Value::Array([p.as_array().cloned().unwrap_or_default(), a.clone()].concat());
            (text(p, true)?, text(&joined(w), false)?, text(&joined(l), false)?)
        }
        _ => {
            return Err(ProximaError::Config(
                "DPO needs `prompt`, `chosen` and `rejected` columns, all text or all lists of messages".into(),
            ))
        }
    };
    let common = |a: &[u32]| p.iter().zip(a).take_while(|(x, y)| x == y).count();
    let start = common(&w).min(common(&l));
    let keep = max_length.unwrap_or(usize::MAX);
    if start >= keep {
        return Err(ProximaError::InvalidArgument(format!(
            "the prompt's {start} tokens leave no answer token within max_length {keep}"
        )));
    }
    let answer = |a: &[u32]| a[start..a.len().min(keep)].to_vec();
    let (chosen, rejected) = (answer(&w), answer(&l));
    if chosen.is_empty() || rejected.is_empty() {
        return Err(ProximaError::InvalidArgument("an answer has no token of its own".into()));
    }
    Ok(PairIds { prompt: p[..start].to_vec(), chosen, rejected })
}
