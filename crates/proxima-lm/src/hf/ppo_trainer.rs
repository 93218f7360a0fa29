//! The RLHF-PPO trainer on a Hugging Face model ([`PpoTrainer`], TRL's `PPOTrainer` with reward
//! functions in place of a reward model): per update, one completion for each of a batch of
//! prompts sampled with the policy's own weights, scored, turned into per-token rewards and GAE
//! advantages ([`super::ppo`]), then `num_ppo_epochs` passes over shuffled mini-batches.

use super::data::EpochSampler;
use super::generate::{generate, SamplingConfig};
use super::grpo::RewardFunction;
use super::grpo_trainer::completion_hidden;
use super::model::CausalLm;
use super::optimize::TrainerOptim;
use super::ppo::{gae, log_probs, micro_batch_loss, token_rewards, whiten, LossStats, MicroBatch, PpoArgs, ValueHead};
use super::rollout::{check_prompts, encode_prompt, score};
use super::tokenizer::HfTokenizer;
use crate::grpo_step::add_grads;
use candle_core::{DType, Device, Tensor};
use proxima::policy::candle::host_gradients;
use proxima::{ProximaError, Result};
use rand::seq::SliceRandom;
use serde_json::{Map, Value};

/// One batch's rollout, per row (its completion's tokens only).
struct Rollout {
    prompts: Vec<Vec<u32>>,
    completions: Vec<Vec<u32>>,
    old_logp: Vec<Vec<f64>>,
    old_values: Vec<Vec<f64>>,
    advantages: Vec<Vec<f64>>,
    returns: Vec<Vec<f64>>,
}

/// TRL's `PPOTrainer` on a [`CausalLm`] with a value head.
pub struct PpoTrainer {
    /// π_θ, trained in place.
    pub model: CausalLm,
    /// V_θ on the policy's last hidden state.
    pub value_head: ValueHead,
    reference: CausalLm,
    tokenizer: HfTokenizer,
    reward_funcs: Vec<Box<dyn RewardFunction>>,
    /// The settings.
    pub args: PpoArgs,
    dataset: Vec<Map<String, Value>>,
    opt: TrainerOptim,
    sampler: EpochSampler,
    /// PPO updates done (TRL's `global_step`).
    pub global_step: u64,
    /// One row per update, TRL's keys.
    pub log_history: Vec<Value>,
}

impl PpoTrainer {
    /// A trainer of `model` (and a new value head of zeros) on `dataset` (rows with a `prompt`)
    /// rewarded by the sum of `reward_funcs`; the reference is the model as given.
    ///
    /// # Errors
    /// `Config` for bad `args`, no reward function, an empty dataset or a row without a prompt.
    pub fn new(
        model: CausalLm,
        tokenizer: HfTokenizer,
        reward_funcs: Vec<Box<dyn RewardFunction>>,
        args: PpoArgs,
        dataset: Vec<Map<String, Value>>,
    ) -> Result<PpoTrainer> {
        tokenizer.check_fits(model.config())?;
        args.check()?;
        let lengths = (None, args.response_length, model.config().max_positions);
        check_prompts("PPO", reward_funcs.len(), &dataset, &tokenizer, lengths)?;
        let reference = model.frozen_copy()?;
        let mut model = model;
        let hyper = (args.learning_rate, args.adam_epsilon, args.max_grad_norm);
        let mut opt = TrainerOptim::new(&mut model, args.peft_config.as_ref(), hyper, args.max_steps, args.seed)?;
        let value_head = ValueHead::zeros(model.config().hidden_size)?;
        opt.add_params(&model, value_head.named_params());
        let (sampler, log_history) = (EpochSampler::default(), Vec::new());
        Ok(PpoTrainer {
            model,
            value_head,
            reference,
            tokenizer,
            reward_funcs,
            args,
            dataset,
            opt,
            sampler,
            global_step: 0,
            log_history,
        })
    }

    /// Trains until `max_steps` updates.
    ///
    /// # Errors
    /// As [`PpoTrainer::step`].
    pub fn train(&mut self) -> Result<()> {
        while self.global_step < self.args.max_steps {
            self.step()?;
        }
        Ok(())
    }

    /// One PPO update: a rollout, then `num_ppo_epochs` passes of mini-batch steps. Returns its
    /// log row (TRL's keys: `objective/scores`, `objective/kl`, `objective/rlhf_reward`,
    /// `loss/policy_avg`, `loss/value_avg`, `policy/approxkl_avg`, `policy/clipfrac_avg`, ...).
    ///
    /// # Errors
    /// A reward function's error; `InvalidArgument` for a completion no function scored or a
    /// prompt too long for the model; `NonFinite` from the optimiser.
    pub fn step(&mut self) -> Result<Value> {
        let (rollout, mut row) = self.rollout()?;
        let a = &self.args;
        let (micro, mini) =
            (a.per_device_train_batch_size, a.per_device_train_batch_size * a.gradient_accumulation_steps);
        let mut stats = Vec::new();
        let mut lr = 0.0;
        for _ in 0..a.num_ppo_epochs {
            let mut order: Vec<usize> = (0..rollout.prompts.len()).collect();
            order.shuffle(&mut self.opt.rng);
            for mb in order.chunks(mini) {
                let mut acc = Vec::new();
                for rows in mb.chunks(micro) {
                    let (loss, s) = self.micro_batch(&rollout, rows)?;
                    let loss = (loss / self.args.gradient_accumulation_steps as f64)?;
                    let params = self.opt.params(&self.model);
                    add_grads(&mut acc, host_gradients(&params, &loss.backward()?)?);
                    stats.push(s);
                }
                lr = self.opt.step(&self.model, &acc, self.global_step)?.1;
            }
        }
        self.global_step += 1;
        let avg = |f: fn(&LossStats) -> f64| stats.iter().map(f).sum::<f64>() / stats.len().max(1) as f64;
        row["step"] = self.global_step.into();
        row["lr"] = lr.into();
        row["loss/policy_avg"] = avg(|s| s.policy_loss).into();
        row["loss/value_avg"] = avg(|s| s.value_loss).into();
        row["policy/approxkl_avg"] = avg(|s| s.approxkl).into();
        row["policy/clipfrac_avg"] = avg(|s| s.clipfrac).into();
        row["val/clipfrac_avg"] = avg(|s| s.vf_clipfrac).into();
        row["val/ratio"] = avg(|s| s.ratio).into();
        self.log_history.push(row.clone());
        Ok(row)
    }

    /// The loss of `rows` of the rollout.
    fn micro_batch(&self, r: &Rollout, rows: &[usize]) -> Result<(Tensor, LossStats)> {
        let pick = |v: &[Vec<u32>]| rows.iter().map(|&i| v[i].clone()).collect::<Vec<_>>();
        let (prompts, completions) = (pick(&r.prompts), pick(&r.completions));
        let (hidden, comp, mask) = completion_hidden(&self.model, &prompts, &completions, self.tokenizer.pad_token_id)?;
        let logp = log_probs(&self.model, &hidden, &comp, self.args.temperature)?;
        let values = self.value_head.forward(&hidden)?;
        let c = comp.dim(1)?;
        let padded = |v: &[Vec<f64>]| padded(rows.iter().map(|&i| &v[i]), c);
        let (old_logp, old_values) = (padded(&r.old_logp)?, padded(&r.old_values)?);
        let (advantages, returns) = (padded(&r.advantages)?, padded(&r.returns)?);
        let m = MicroBatch {
            logp: &logp,
            values: &values,
            old_logp: &old_logp,
            old_values: &old_values,
            advantages: &advantages,
            returns: &returns,
            mask: &mask,
        };
        micro_batch_loss(&m, &self.args)
    }

    /// Samples and scores one completion per prompt of the next batch, and computes what the
    /// updates need; also the rollout's log entries.
    fn rollout(&mut self) -> Result<(Rollout, Value)> {
        let n = self.args.batch_size();
        let picks = self.sampler.next(n, self.dataset.len(), self.args.shuffle_dataset, &mut self.opt.rng);
        let (mut texts, mut prompts) = (Vec::with_capacity(n), Vec::with_capacity(n));
        for &i in &picks {
            let (t, ids) = encode_prompt(&self.tokenizer, &self.dataset[i], None)?;
            texts.push(t);
            prompts.push(ids);
        }
        let sampling = SamplingConfig {
            max_new_tokens: self.args.response_length,
            do_sample: true,
            temperature: self.args.temperature,
            top_k: 0,
            top_p: 1.0,
            stop_token_ids: self.tokenizer.eos_token_ids.clone(),
            pad_token_id: self.tokenizer.pad_token_id,
        };
        let out = generate(&self.model, &prompts, &sampling, &mut self.opt.rng)?;
        let completions = out.tokens.iter().map(|c| self.tokenizer.decode(c, true)).collect::<Result<Vec<_>>>()?;
        let columns: Vec<Map<String, Value>> = picks.iter().map(|&i| self.dataset[i].clone()).collect();
        let per_func = score(&mut self.reward_funcs, &texts, &completions, &out.tokens, &columns)?;
        let mut scores = vec![0.0; n];
        for (k, s) in scores.iter_mut().enumerate() {
            for (f, r) in per_func.iter().enumerate() {
                *s += r[k].ok_or_else(|| {
                    ProximaError::InvalidArgument(format!(
                        "reward function `{}` gave no reward for completion {k}: PPO needs a score for every completion",
                        self.reward_funcs[f].name()
                    ))
                })?;
            }
            if out.truncated[k] {
                *s -= self.args.missing_eos_penalty.unwrap_or(0.0);
            }
        }
        let (old_logp, old_values, ref_logp) = self.rollout_forward(&prompts, &out.tokens)?;
        let (mut rewards, kl) = token_rewards(&old_logp, &ref_logp, &scores, self.args.kl_coef, self.args.kl_estimator);
        if self.args.whiten_rewards {
            whiten(&mut rewards, false);
        }
        let (mut advantages, returns) = gae(&rewards, &old_values, self.args.gamma, self.args.lam);
        whiten(&mut advantages, true);
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
        let non_score = mean(&kl) * -self.args.kl_coef;
        let entropy = mean(&old_logp.iter().map(|r| -r.iter().sum::<f64>()).collect::<Vec<_>>());
        let row = serde_json::json!({
            "objective/scores": mean(&scores), "objective/kl": mean(&kl), "objective/entropy": entropy,
            "objective/non_score_reward": non_score, "objective/rlhf_reward": non_score + mean(&scores),
            "completions/mean_length": mean(&out.tokens.iter().map(|t| t.len() as f64).collect::<Vec<_>>()),
            "val/num_eos_tokens": out.truncated.iter().filter(|&&t| !t).count(),
            "episode": (self.global_step + 1) * n as u64,
        });
        let rollout = Rollout { prompts, completions: out.tokens, old_logp, old_values, advantages, returns };
        Ok((rollout, row))
    }

    /// log π_θold, V_old and log π_ref of every completion token, per row, in micro-batches.
    #[allow(clippy::type_complexity)]
    fn rollout_forward(
        &self,
        prompts: &[Vec<u32>],
        completions: &[Vec<u32>],
    ) -> Result<(Vec<Vec<f64>>, Vec<Vec<f64>>, Vec<Vec<f64>>)> {
        let (mut lp, mut v, mut rp) = (Vec::new(), Vec::new(), Vec::new());
        let (pad, t) = (self.tokenizer.pad_token_id, self.args.temperature);
        let step = self.args.per_device_train_batch_size;
        for start in (0..prompts.len()).step_by(step) {
            let r = start..(start + step).min(prompts.len());
            let (p, c) = (&prompts[r.clone()], &completions[r]);
            let (hidden, comp, _) = completion_hidden(&self.model, p, c, pad)?;
            let rows = |x: Tensor| -> Result<Vec<Vec<f64>>> {
                let all = x.detach().to_dtype(DType::F64)?.to_vec2::<f64>()?;
                Ok(all.into_iter().zip(c).map(|(row, ci)| row[..ci.len()].to_vec()).collect())
            };
            lp.extend(rows(log_probs(&self.model, &hidden, &comp, t)?)?);
            v.extend(rows(self.value_head.forward(&hidden)?)?);
            let (ref_hidden, ..) = completion_hidden(&self.reference, p, c, pad)?;
            rp.extend(rows(log_probs(&self.reference, &ref_hidden, &comp, t)?)?);
        }
        Ok((lp, v, rp))
    }

    /// Writes the policy (not the value head) as a Hugging Face directory.
    ///
    /// # Errors
    /// [`CausalLm::save`]'s.
    pub fn save_model(&self, dir: &std::path::Path) -> Result<()> {
        self.model.save(dir)
    }
}

/// Rows of host values right-padded with 0 to `c` columns, as an f32 tensor `[B, c]`.
fn padded<'a>(rows: impl Iterator<Item = &'a Vec<f64>>, c: usize) -> Result<Tensor> {
    let mut flat = Vec::new();
    let mut b = 0;
    for r in rows {
        flat.extend(r.iter().map(|&x| x as f32).chain(std::iter::repeat_n(0.0, c - r.len())));
        b += 1;
    }
    Ok(Tensor::from_vec(flat, (b, c), &Device::Cpu)?)
}
