//! Supervised fine-tuning (SFT) of a Hugging Face [`CausalLm`] with TRL's `SFTTrainer` semantics:
//! rows of `prompt` + `completion` (the loss on the completion's tokens only, TRL's
//! `completion_only_loss`, the end-of-sequence token appended to a text completion; conversational
//! prompts and completions through the chat template), of `messages` (a conversation through the
//! chat template) or of `text` (the loss on every token after the first); the cross-entropy averaged over the loss tokens of
//! all the micro-batches of one optimiser step (as `transformers`' `Trainer` normalises by
//! `num_items_in_batch`); Adam with linear decay and the gradient-norm clip.

use super::data::EpochSampler;
use super::model::CausalLm;
use super::optimize::TrainerOptim;
use super::tokenizer::HfTokenizer;
use crate::grpo::token_log_probs;
use crate::grpo_step::add_grads;
use candle_core::{Device, Tensor};
use proxima::policy::candle::host_gradients;
use proxima::{ProximaError, Result};
use serde_json::{Map, Value};

/// TRL's `SFTConfig`, the fields Proxima reads, with TRL's defaults.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SftArgs {
    /// Adam's step size (2e-5), decayed linearly to 0 over `max_steps`.
    pub learning_rate: f64,
    /// Optimiser steps to take.
    pub max_steps: u64,
    /// Rows per micro-batch.
    pub per_device_train_batch_size: usize,
    /// Micro-batches per optimiser step.
    pub gradient_accumulation_steps: usize,
    /// Sequences longer than this (in tokens) are cut at the end (1024).
    pub max_length: Option<usize>,
    /// The global gradient-norm clip (1.0).
    pub max_grad_norm: f64,
    /// Adam's ε (1e-8).
    pub adam_epsilon: f64,
    /// Seeds the row order (42).
    pub seed: u64,
    /// Shuffle the rows each epoch.
    pub shuffle_dataset: bool,
    /// LoRA adapters to train instead of the whole model (TRL's `peft_config`; `None`: full).
    pub peft_config: Option<crate::hf::lora::LoraConfig>,
}

impl Default for SftArgs {
    fn default() -> Self {
        SftArgs {
            learning_rate: 2e-5,
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

/// One tokenised row: its ids and, per id, whether the loss predicts it.
struct Example {
    ids: Vec<u32>,
    labels: Vec<bool>,
}

/// TRL's `SFTTrainer` on a [`CausalLm`].
pub struct SftTrainer {
    /// The model, trained in place.
    pub model: CausalLm,
    tokenizer: HfTokenizer,
    /// The settings.
    pub args: SftArgs,
    examples: Vec<Example>,
    opt: TrainerOptim,
    sampler: EpochSampler,
    /// Optimiser steps taken.
    pub global_step: u64,
    /// One row per optimiser step: `loss` (mean cross-entropy per loss token), `learning_rate`,
    /// `grad_norm`, `num_tokens`.
    pub log_history: Vec<Value>,
}

impl SftTrainer {
    /// A trainer on `dataset`: rows of `prompt` + `completion` (text or messages), `messages`, or
    /// `text` (as TRL's dataset types).
    ///
    /// # Errors
    /// `Config` for an empty dataset, rows of neither form, zero batch sizes; the tokenizer's
    /// errors; `InvalidArgument` for a row longer than the model's positions.
    pub fn new(
        model: CausalLm,
        tokenizer: HfTokenizer,
        args: SftArgs,
        dataset: &[Map<String, Value>],
    ) -> Result<SftTrainer> {
        tokenizer.check_fits(model.config())?;
        if dataset.is_empty() {
            return Err(ProximaError::Config("the training dataset is empty".into()));
        }
        if args.per_device_train_batch_size == 0 || args.gradient_accumulation_steps == 0 {
            return Err(ProximaError::Config(
                "per_device_train_batch_size and gradient_accumulation_steps must be positive".into(),
            ));
        }
        let examples = dataset
            .iter()
            .enumerate()
            .map(|(i, row)| {
                tokenize(&tokenizer, row, args.max_length).map_err(|e| match e {
                    ProximaError::Config(m) => ProximaError::Config(format!("dataset row {i}: {m}")),
                    e => e,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let longest = examples.iter().map(|e| e.ids.len()).max().unwrap_or(0);
        if longest > model.config().max_positions {
            return Err(ProximaError::InvalidArgument(format!(
                "a row of {longest} tokens is longer than the model's {} positions (set max_length)",
                model.config().max_positions
            )));
        }
        let mut model = model;
        let hyper = (args.learning_rate, args.adam_epsilon, args.max_grad_norm);
        let opt = TrainerOptim::new(&mut model, args.peft_config.as_ref(), hyper, args.max_steps, args.seed)?;
        Ok(SftTrainer {
            model,
            tokenizer,
            args,
            examples,
            opt,
            sampler: EpochSampler::default(),
            global_step: 0,
            log_history: Vec::new(),
        })
    }

    /// Trains until `max_steps` optimiser steps.
    ///
    /// # Errors
    /// As [`SftTrainer::step`].
    pub fn train(&mut self) -> Result<()> {
        while self.global_step < self.args.max_steps {
            self.step()?;
        }
        Ok(())
    }

    /// One optimiser step over `gradient_accumulation_steps` micro-batches; returns its mean loss.
    ///
    /// # Errors
    /// Tensor errors; `NonFinite` from the optimiser.
    pub fn step(&mut self) -> Result<f64> {
        let (bs, accum) = (self.args.per_device_train_batch_size, self.args.gradient_accumulation_steps);
        let picks = self.sampler.next(bs * accum, self.examples.len(), self.args.shuffle_dataset, &mut self.opt.rng);
        let total: usize = picks.iter().map(|&i| self.examples[i].labels.iter().filter(|&&l| l).count()).sum();
        let params = self.model.trainable_params();
        let (mut acc, mut loss_sum) = (Vec::new(), 0.0);
        for chunk in picks.chunks(bs) {
            let rows: Vec<&Example> = chunk.iter().map(|&i| &self.examples[i]).collect();
            let loss = (sequence_nll(&self.model, &rows, self.tokenizer.pad_token_id)? / total.max(1) as f64)?;
            loss_sum += f64::from(loss.to_scalar::<f32>()?);
            add_grads(&mut acc, host_gradients(&params, &loss.backward()?)?);
        }
        let (info, lr) = self.opt.step(&self.model, &acc, self.global_step)?;
        self.global_step += 1;
        self.log_history.push(serde_json::json!({"step": self.global_step, "loss": loss_sum, "learning_rate": lr, "grad_norm": info.grad_norm, "num_tokens": total}));
        Ok(loss_sum)
    }

    /// Writes the model (and the tokenizer's files) as a Hugging Face directory.
    ///
    /// # Errors
    /// [`CausalLm::save`]'s.
    pub fn save_model(&self, dir: &std::path::Path) -> Result<()> {
        self.model.save(dir)
    }
}

/// A row's ids and loss positions, by its form (TRL's dataset types):
/// - `prompt` + `completion` text: prompt (special tokens added) + completion + EOS, the loss on
///   the completion and EOS (`completion_only_loss`);
/// - `prompt` + `completion` messages: the chat template of the prompt (with the generation
///   prompt) and of prompt + completion, the loss on the tokens after their common prefix;
/// - `messages`: the chat template of the conversation, the loss on every token after the first;
/// - `text`: text (special tokens added) + EOS, the loss on every token after the first.
fn tokenize(tok: &HfTokenizer, row: &Map<String, Value>, max_length: Option<usize>) -> Result<Example> {
    let eos: Vec<u32> = tok.eos_token_ids.first().copied().into_iter().collect();
    let whole = |ids: Vec<u32>| {
        let n = ids.len();
        (ids, (0..n).map(|i| i > 0).collect::<Vec<bool>>())
    };
    let (mut ids, mut labels) = match (row.get("prompt"), row.get("completion"), row.get("messages"), row.get("text")) {
        (Some(Value::String(p)), Some(Value::String(c)), ..) => {
            let p = tok.encode(p, true)?;
            let c = [tok.encode(c, false)?, eos].concat();
            (p.iter().chain(&c).copied().collect::<Vec<u32>>(), [vec![false; p.len()], vec![true; c.len()]].concat())
        }
        (Some(p @ Value::Array(pm)), Some(Value::Array(cm)), ..) => {
            let prompt = tok.encode(&tok.apply_chat_template(p, true)?, false)?;
            let all = Value::Array([pm.clone(), cm.clone()].concat());
            let full = tok.encode(&tok.apply_chat_template(&all, false)?, false)?;
            let start = prompt.iter().zip(&full).take_while(|(a, b)| a == b).count();
            let n = full.len();
            (full, (0..n).map(|i| i >= start).collect())
        }
        (_, _, Some(m @ Value::Array(_)), _) => whole(tok.encode(&tok.apply_chat_template(m, false)?, false)?),
        (_, _, _, Some(Value::String(t))) => whole([tok.encode(t, true)?, eos].concat()),
        _ => {
            return Err(ProximaError::Config(
                "SFT needs `prompt` and `completion` columns (text, or lists of messages), a `messages` column (a list of {\"role\", \"content\"} messages) or a text `text` column".into(),
            ))
        }
    };
    if let Some(m) = max_length {
        ids.truncate(m);
        labels.truncate(m);
    }
    if ids.len() < 2 || !labels.iter().skip(1).any(|&l| l) {
        return Err(ProximaError::InvalidArgument(format!("a row of {} token(s) has nothing to predict", ids.len())));
    }
    Ok(Example { ids, labels })
}

/// Σ −log π(token | prefix) over the loss tokens of `rows` (right-padded, one forward pass).
fn sequence_nll(model: &CausalLm, rows: &[&Example], pad: u32) -> Result<Tensor> {
    let len = rows.iter().map(|e| e.ids.len()).max().unwrap_or(0);
    let (mut ids, mut key_mask, mut pos, mut target, mut weight) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for e in rows {
        let n = e.ids.len();
        ids.push([e.ids.clone(), vec![pad; len - n]].concat());
        key_mask.push([vec![1u8; n], vec![0u8; len - n]].concat());
        pos.push((0..len as u32).map(|p| p.min(n as u32 - 1)).collect());
        // Position t predicts token t + 1.
        target.extend(e.ids[1..].iter().copied().chain(std::iter::repeat_n(pad, len - n)));
        weight.extend(e.labels[1..].iter().map(|&l| f32::from(u8::from(l))).chain(std::iter::repeat_n(0.0, len - n)));
    }
    let logits = model.forward(&ids, &pos, &key_mask, None)?.narrow(1, 0, len - 1)?;
    let b = rows.len();
    let lp = token_log_probs(&logits, &Tensor::from_vec(target, (b, len - 1), &Device::Cpu)?)?;
    Ok((lp * Tensor::from_vec(weight, (b, len - 1), &Device::Cpu)?)?.sum_all()?.neg()?)
}
