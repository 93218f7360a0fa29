//! The drivers of `proxima lm sft|rm|grpo|ppo|dpo|eval`: each runs a command into its run
//! directory, like the rest of Proxima: `config.json` (every setting), `progress.csv`, a
//! TensorBoard event file and safetensors weights (`model.safetensors`; RLHF-PPO also
//! `critic.safetensors`), written atomically. The settings are in [`crate::args`], the weights
//! format in [`crate::weights`], the logs in [`crate::logs`].

pub use crate::args::{parse_aggregation, DpoArgs, GrpoArgs, PpoArgs, RmArgs, SftArgs, MAX_BATCH};
pub use crate::logs::{Progress, Summary};
pub use crate::weights::Weights;

use crate::dpo::{dpo_step, kl_to_reference, reward_accuracy};
use crate::grpo_step::{grpo_step, GrpoConfig};
use crate::logs::{write_config, Logs};
use crate::model::TinyLm;
use crate::ppo::{ppo_lm_step, PpoLmConfig, PpoLmStats, PpoModels};
use crate::resume::{fingerprint, save_checkpoint, LmCheckpoint};
use crate::reward::{pairwise_accuracy, pairwise_accuracy_by_kind, preference_data, rm_step};
use crate::rlhf::KlController;
use crate::sampling::accuracy;
use crate::sft::sft_step;
use crate::task::{split, Problem};
use crate::weights::{default_spec, load_model, save_model};
use candle_core::Device;
use proxima::optim::{LrSchedule, Optimizer};
use proxima::{ProximaError, Result};
use rand::SeedableRng;
use std::path::Path;

fn adam_for(model: &TinyLm, lr: f64) -> Optimizer {
    let sizes: Vec<usize> = model.named_params().iter().map(|(_, v)| v.elem_count()).collect();
    Optimizer::adam(&sizes, lr, 1e-8)
}

/// Mean greedy exact-match accuracy under temperature-1 sampling (one sample per prompt).
fn sampled_accuracy<R: rand::Rng + ?Sized>(model: &TinyLm, problems: &[Problem], rng: &mut R) -> Result<f64> {
    let s = crate::sampling::generate(model, problems, false, rng)?;
    Ok(problems.iter().enumerate().map(|(i, p)| p.reward(&s.response(i))).sum::<f64>() / problems.len().max(1) as f64)
}

/// Where and how often a driver checkpoints: with every evaluation row (every `eval_every`
/// steps and the last), and before stopping when its `progress` hook said not to go on.
struct Checkpoints<'a> {
    dir: &'a Path,
    eval_every: usize,
    steps: usize,
    /// The fingerprint of the frozen models the run reads (π_ref, the reward model): a resume
    /// from other weights would not continue the same run.
    inputs: String,
}

impl Checkpoints<'_> {
    /// Refuses to resume from `ck` when the frozen models have changed since it was written.
    fn check_resume(&self, ck: &LmCheckpoint) -> Result<()> {
        match ck.get::<String>("inputs") {
            Ok(saved) if saved == self.inputs => Ok(()),
            _ => Err(ProximaError::Checkpoint(format!(
                "{}: the SFT / reward-model runs this run started from hold other weights now; resuming would not continue the same run",
                self.dir.display()
            ))),
        }
    }

    /// After step `step`: the checkpoint if one is due, then [`ProximaError::Stopped`] unless
    /// `go_on`.
    fn after_step(
        &self,
        step: usize,
        go_on: bool,
        models: &[(&str, &TinyLm)],
        optimizers: &[(&str, &Optimizer)],
        state: impl Fn() -> serde_json::Value,
    ) -> Result<()> {
        if step.is_multiple_of(self.eval_every) || step == self.steps || !go_on {
            let mut state = state();
            state["inputs"] = self.inputs.clone().into();
            save_checkpoint(self.dir, step, models, optimizers, &state)?;
        }
        if go_on {
            return Ok(());
        }
        Err(ProximaError::Stopped(format!("stopped after step {step} of {}; its checkpoint is saved", self.steps)))
    }
}

/// Runs SFT into `dir` (which must exist), calling `progress` after every step (`false` stops
/// the run: a checkpoint, then [`ProximaError::Stopped`]); `resume` continues the run from its
/// checkpoint ([`crate::resume`]).
///
/// # Errors
/// `Config` for a bad setting; I/O and tensor errors; `Checkpoint` for a damaged checkpoint.
pub fn run_sft(
    args: &SftArgs,
    dir: &Path,
    resume: Option<&LmCheckpoint>,
    mut progress: impl FnMut(&Progress) -> bool,
) -> Result<Summary> {
    args.validate()?;
    write_config(dir, &serde_json::json!({"command": "sft", "args": args, "spec": default_spec()}))?;
    let t0 = std::time::Instant::now();
    let model = TinyLm::new(default_spec(), args.seed, &Device::Cpu)?;
    let (train, held) = split();
    let mut opt = adam_for(&model, args.learning_rate);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(args.seed);
    let columns = ["step", "loss", "held_out_accuracy", "sampled_accuracy", "seconds"];
    let (mut logs, before) = Logs::open(dir, &columns, resume.map(|c| c.step))?;
    let seconds = || before + t0.elapsed().as_secs_f64();
    let ckpt = Checkpoints { dir, eval_every: args.eval_every, steps: args.steps, inputs: String::new() };
    let start = accuracy(&model, &held)?;
    let mut acc = start;
    if let Some(ck) = resume {
        ckpt.check_resume(ck)?;
        ck.restore_model("policy", &model)?;
        ck.restore_optimizer("opt", &mut opt)?;
        (rng, acc) = (ck.get("rng")?, ck.get("acc")?);
    }
    for step in resume.map_or(1, |c| c.step + 1)..=args.steps {
        let loss = sft_step(&model, &mut opt, &train, args.batch_size, args.label_noise, &mut rng)?;
        if step % args.eval_every == 0 || step == args.steps {
            acc = accuracy(&model, &held)?;
            let sampled = sampled_accuracy(&model, &held, &mut rng)?;
            logs.write(&[step as f64, loss, acc, sampled, seconds()])?;
        }
        let go_on = progress(&Progress { step, message: format!("loss {loss:.3} | held-out acc {acc:.3}") });
        let state = || serde_json::json!({"rng": rng, "acc": acc});
        ckpt.after_step(step, go_on, &[("policy", &model)], &[("opt", &opt)], state)?;
    }
    save_model(&dir.join("model.safetensors"), &model, "sft")?;
    let mut eval_rng = rand_chacha::ChaCha8Rng::seed_from_u64(args.seed ^ 0x5eed);
    let sampled = sampled_accuracy(&model, &held, &mut eval_rng)?;
    Ok(Summary {
        held_out_accuracy_start: start,
        held_out_accuracy_end: acc,
        seconds: seconds(),
        extra: vec![("held_out_sampled_accuracy".into(), sampled)],
    })
}

/// Trains a reward model into `dir`; its held-out pairwise accuracy is in the summary
/// (`held_out_pairwise_accuracy`) and progress.csv. `resume` continues from a checkpoint (the
/// preference pairs are drawn again from the same seed, so they are the same).
///
/// # Errors
/// `Config` for a bad setting; `Checkpoint` when `sft` is not an SFT policy or for a damaged
/// checkpoint; I/O, tensor errors.
pub fn run_rm(
    args: &RmArgs,
    weights: &mut Weights,
    dir: &Path,
    resume: Option<&LmCheckpoint>,
    mut progress: impl FnMut(&Progress) -> bool,
) -> Result<Summary> {
    args.validate(weights)?;
    let sft = weights.model(&args.sft, &["sft"])?;
    write_config(dir, &serde_json::json!({"command": "rm", "args": args, "spec": sft.spec()}))?;
    let t0 = std::time::Instant::now();
    let (train_pairs, held_pairs, mut rng) =
        preference_data(args.labeller, &sft, args.samples_per_prompt, args.pairs_per_prompt, args.seed)?;
    let rm = match &args.init {
        Some(init) => weights.model(init, &["sft"])?,
        None => weights.model(&args.sft, &["sft"])?,
    };
    let mut opt = adam_for(&rm, args.learning_rate);
    let columns = [
        "step",
        "loss",
        "train_pairwise_accuracy",
        "held_out_pairwise_accuracy",
        "held_out_correct_vs_incorrect",
        "held_out_incorrect_vs_incorrect",
        "seconds",
    ];
    let (mut logs, before) = Logs::open(dir, &columns, resume.map(|c| c.step))?;
    let seconds = || before + t0.elapsed().as_secs_f64();
    let ckpt = Checkpoints { dir, eval_every: args.eval_every, steps: args.steps, inputs: fingerprint(&[&sft])? };
    let probe: Vec<_> = train_pairs.iter().take(held_pairs.len()).cloned().collect();
    let mut held_acc = pairwise_accuracy(&rm, &held_pairs)?;
    let start = held_acc;
    let mut split_acc = [f64::NAN; 2];
    if let Some(ck) = resume {
        ckpt.check_resume(ck)?;
        ck.restore_model("rm", &rm)?;
        ck.restore_optimizer("opt", &mut opt)?;
        (rng, held_acc, split_acc) = (ck.get("rng")?, ck.get("held_acc")?, ck.get("split_acc")?);
    }
    for step in resume.map_or(1, |c| c.step + 1)..=args.steps {
        // Linear decay of the step size to 0 over the run (the noisy end of a constant rate
        // moved the held-out pairwise accuracy by ±3 points between evaluations).
        opt.lr = LrSchedule::Linear { initial: args.learning_rate, total: args.steps as u64 }.at(step as u64 - 1);
        let loss = rm_step(&rm, &mut opt, &train_pairs, args.batch_size, &mut rng)?;
        if step % args.eval_every == 0 || step == args.steps {
            let by_kind = pairwise_accuracy_by_kind(&rm, &held_pairs)?;
            held_acc = by_kind[0];
            let train_acc = pairwise_accuracy(&rm, &probe)?;
            logs.write(&[step as f64, loss, train_acc, held_acc, by_kind[1], by_kind[2], seconds()])?;
            split_acc = [by_kind[1], by_kind[2]];
        }
        let go_on = progress(&Progress { step, message: format!("loss {loss:.3} | held-out pair acc {held_acc:.3}") });
        let state = || serde_json::json!({"rng": rng, "held_acc": held_acc, "split_acc": split_acc});
        ckpt.after_step(step, go_on, &[("rm", &rm)], &[("opt", &opt)], state)?;
    }
    save_model(&dir.join("model.safetensors"), &rm, "rm")?;
    Ok(Summary {
        seconds: seconds(),
        extra: vec![
            ("train_pairs".into(), train_pairs.len() as f64),
            ("held_out_pairs".into(), held_pairs.len() as f64),
            ("held_out_pairwise_accuracy_start".into(), start),
            ("held_out_pairwise_accuracy".into(), held_acc),
            ("held_out_correct_vs_incorrect".into(), split_acc[0]),
            ("held_out_incorrect_vs_incorrect".into(), split_acc[1]),
        ],
        ..Default::default()
    })
}

/// Runs GRPO into `dir`; `resume` continues from a checkpoint.
///
/// # Errors
/// `Config` for a bad setting; `Checkpoint` when `sft` is not an SFT policy or for a damaged
/// checkpoint; I/O, tensor errors.
pub fn run_grpo(
    args: &GrpoArgs,
    weights: &mut Weights,
    dir: &Path,
    resume: Option<&LmCheckpoint>,
    mut progress: impl FnMut(&Progress) -> bool,
) -> Result<Summary> {
    args.validate(weights)?;
    let cfg = GrpoConfig {
        prompts: args.prompts,
        group_size: args.group_size,
        eps_low: args.eps_low,
        eps_high: args.eps_high,
        beta: args.beta,
        inner_iters: args.inner_iters,
        scale_advantages: args.scale_advantages,
        aggregation: parse_aggregation(&args.aggregation)?,
        drop_flat_groups: args.drop_flat_groups,
        shuffle_rewards: args.shuffle_rewards,
        micro_batch: args.micro_batch,
        max_grad_norm: crate::MAX_GRAD_NORM,
    };
    let policy = weights.model(&args.sft, &["sft"])?;
    let reference = weights.model(&args.sft, &["sft"])?;
    write_config(dir, &serde_json::json!({"command": "grpo", "args": args, "spec": policy.spec()}))?;
    let t0 = std::time::Instant::now();
    let (train, held) = split();
    let mut opt = adam_for(&policy, args.learning_rate);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(args.seed);
    let columns = ["step", "reward_mean", "flat_group_fraction", "kl_k3", "loss", "held_out_accuracy", "seconds"];
    let (mut logs, before) = Logs::open(dir, &columns, resume.map(|c| c.step))?;
    let seconds = || before + t0.elapsed().as_secs_f64();
    let ckpt = Checkpoints { dir, eval_every: args.eval_every, steps: args.steps, inputs: fingerprint(&[&reference])? };
    let start = accuracy(&policy, &held)?;
    let mut acc = start;
    match resume {
        Some(ck) => {
            ckpt.check_resume(ck)?;
            ck.restore_model("policy", &policy)?;
            ck.restore_optimizer("opt", &mut opt)?;
            (rng, acc) = (ck.get("rng")?, ck.get("acc")?);
        }
        None => logs.write(&[0.0, f64::NAN, f64::NAN, 0.0, f64::NAN, start, 0.0])?,
    }
    for step in resume.map_or(1, |c| c.step + 1)..=args.steps {
        let s = grpo_step(&policy, &reference, &mut opt, &train, &cfg, &mut rng)?;
        if step % args.eval_every == 0 || step == args.steps {
            acc = accuracy(&policy, &held)?;
            logs.write(&[step as f64, s.reward_mean, s.flat_fraction, s.kl, s.loss, acc, seconds()])?;
        }
        let go_on = progress(&Progress {
            step,
            message: format!("reward {:.3} | kl {:.4} | held-out acc {acc:.3}", s.reward_mean, s.kl),
        });
        let state = || serde_json::json!({"rng": rng, "acc": acc});
        ckpt.after_step(step, go_on, &[("policy", &policy)], &[("opt", &opt)], state)?;
    }
    save_model(&dir.join("model.safetensors"), &policy, "grpo")?;
    Ok(Summary { held_out_accuracy_start: start, held_out_accuracy_end: acc, seconds: seconds(), extra: vec![] })
}

/// The columns of RLHF-PPO's `progress.csv`, one row per evaluation (row 0: before training).
const PPO_COLUMNS: [&str; 14] = [
    "step",
    "score_mean",
    "sampled_accuracy",
    "kl_per_token",
    "kl_per_response",
    "kl_coef",
    "policy_loss",
    "value_loss",
    "clip_fraction",
    "approx_kl",
    "held_out_accuracy",
    "held_out_score",
    "held_out_sampled_accuracy",
    "seconds",
];

/// A row of [`PPO_COLUMNS`] after step `step` with stats `s`, the held-out `[greedy accuracy,
/// score, sampled accuracy]` and the seconds since the start.
fn ppo_row(step: usize, s: &PpoLmStats, held_out: [f64; 3], seconds: f64) -> [f64; 14] {
    let [acc, score, sampled] = held_out;
    [
        step as f64,
        s.score_mean,
        s.accuracy,
        s.kl_per_token,
        s.kl_per_response,
        s.kl_coef,
        s.policy_loss,
        s.value_loss,
        s.clip_fraction,
        s.approx_kl,
        acc,
        score,
        sampled,
        seconds,
    ]
}

/// RLHF-PPO's models, as read from the weights files: the policy and the frozen reference
/// (both from the SFT model), the critic (from the reward model when there is one, else from the
/// SFT model), and the frozen reward model (`None`: the task's own reward).
///
/// # Errors
/// The weights' (a missing or mismatched file).
fn ppo_models(args: &PpoArgs, weights: &mut Weights) -> Result<(TinyLm, TinyLm, TinyLm, Option<TinyLm>)> {
    let policy = weights.model(&args.sft, &["sft"])?;
    let reference = weights.model(&args.sft, &["sft"])?;
    let reward_model = match &args.rm {
        Some(rm) => Some(weights.model(rm, &["rm"])?),
        None => None,
    };
    let critic = match &args.rm {
        Some(rm) => weights.model(rm, &["rm"])?,
        None => weights.model(&args.sft, &["sft"])?,
    };
    Ok((policy, reference, critic, reward_model))
}

/// Runs RLHF-PPO into `dir` (`model.safetensors` = policy, `critic.safetensors`); `resume`
/// continues from a checkpoint (policy, critic, both optimisers, both RNGs, β).
///
/// # Errors
/// `Config` for a bad setting; `Checkpoint` for wrong model kinds or a damaged checkpoint; I/O,
/// tensor errors.
pub fn run_ppo(
    args: &PpoArgs,
    weights: &mut Weights,
    dir: &Path,
    resume: Option<&LmCheckpoint>,
    mut progress: impl FnMut(&Progress) -> bool,
) -> Result<Summary> {
    args.validate(weights)?;
    let p = &args.ppo;
    let (policy, reference, critic, reward_model) = ppo_models(args, weights)?;
    write_config(dir, &serde_json::json!({"command": "ppo", "args": args, "spec": policy.spec()}))?;
    let t0 = std::time::Instant::now();
    let (train, held) = split();
    let mut opt_pi = adam_for(&policy, args.learning_rate);
    let mut opt_v = adam_for(&critic, args.critic_learning_rate);
    let mut kl = KlController { coef: args.kl_coef, target: args.kl_target, horizon: args.kl_horizon };
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(args.seed);
    let (mut logs, before) = Logs::open(dir, &PPO_COLUMNS, resume.map(|c| c.step))?;
    let seconds = || before + t0.elapsed().as_secs_f64();
    let ckpt = Checkpoints {
        dir,
        eval_every: args.eval_every,
        steps: args.steps,
        inputs: fingerprint(&[Some(&reference), reward_model.as_ref()].into_iter().flatten().collect::<Vec<_>>())?,
    };
    let models =
        PpoModels { policy: &policy, critic: &critic, reference: &reference, reward_model: reward_model.as_ref() };
    let fixed = kl; // the held-out scores are measured with the KL controller as it starts
    let held_score = |rng: &mut rand_chacha::ChaCha8Rng| held_out_score(&models, &held, p, &fixed, rng);
    let start = accuracy(&policy, &held)?;
    let mut eval_rng = rand_chacha::ChaCha8Rng::seed_from_u64(args.seed ^ 0x5eed);
    let (start_score, start_sampled) = held_score(&mut eval_rng)?;
    let (mut acc, mut score, mut sampled) = (start, start_score, start_sampled);
    match resume {
        Some(ck) => {
            ckpt.check_resume(ck)?;
            restore_ppo_models(ck, [&policy, &critic], [&mut opt_pi, &mut opt_v])?;
            (rng, eval_rng, kl) = (ck.get("rng")?, ck.get("eval_rng")?, ck.get("kl")?);
            [acc, score, sampled] = ck.get("held_out")?;
        }
        None => {
            let nan = f64::NAN;
            let (losses, held_out) = ([nan; 4], [start, start_score, start_sampled]);
            logs.write(&[&[0.0, nan, nan, 0.0, 0.0, kl.coef][..], &losses, &held_out, &[0.0]].concat())?;
        }
    }
    for step in resume.map_or(1, |c| c.step + 1)..=args.steps {
        let s = ppo_lm_step(
            &models,
            &mut opt_pi,
            &mut opt_v,
            &train,
            p,
            &mut kl,
            step > args.freezing_actor_steps,
            &mut rng,
        )?;
        if step % args.eval_every == 0 || step == args.steps {
            acc = accuracy(&policy, &held)?;
            (score, sampled) = held_score(&mut eval_rng)?;
            logs.write(&ppo_row(step, &s, [acc, score, sampled], seconds()))?;
        }
        let go_on = progress(&Progress {
            step,
            message: format!("score {:.3} | kl/token {:.4} | held-out acc {acc:.3}", s.score_mean, s.kl_per_token),
        });
        let state =
            || serde_json::json!({"rng": rng, "eval_rng": eval_rng, "kl": kl, "held_out": [acc, score, sampled]});
        let (models, opts) = ([("policy", &policy), ("critic", &critic)], [("opt_pi", &opt_pi), ("opt_v", &opt_v)]);
        ckpt.after_step(step, go_on, &models, &opts, state)?;
    }
    save_model(&dir.join("model.safetensors"), &policy, "ppo")?;
    save_model(&dir.join("critic.safetensors"), &critic, "critic")?;
    Ok(ppo_summary([start, start_score, start_sampled], [acc, score, sampled], seconds()))
}

/// The reward model's mean score, and the fraction correct, of one sampled (temperature 1)
/// response per held-out prompt.
///
/// # Errors
/// Tensor errors.
fn held_out_score(
    models: &PpoModels<'_>,
    held: &[Problem],
    p: &PpoLmConfig,
    kl: &KlController,
    rng: &mut rand_chacha::ChaCha8Rng,
) -> Result<(f64, f64)> {
    let cfg = PpoLmConfig { prompts: held.len(), ..p.clone() };
    let (_, s) = crate::ppo::collect_on(models, held, &cfg, kl, rng)?;
    Ok((s.score_mean, s.accuracy))
}

/// RLHF-PPO's policy and critic, and their optimisers, as a checkpoint saved them.
///
/// # Errors
/// The checkpoint's (a missing or mis-shaped tensor).
fn restore_ppo_models(
    ck: &LmCheckpoint,
    [policy, critic]: [&TinyLm; 2],
    [opt_pi, opt_v]: [&mut Optimizer; 2],
) -> Result<()> {
    ck.restore_model("policy", policy)?;
    ck.restore_model("critic", critic)?;
    ck.restore_optimizer("opt_pi", opt_pi)?;
    ck.restore_optimizer("opt_v", opt_v)
}

/// RLHF-PPO's summary from the held-out (greedy accuracy, reward-model score, sampled accuracy)
/// before and after training.
fn ppo_summary(
    [start, start_score, start_sampled]: [f64; 3],
    [acc, score, sampled]: [f64; 3],
    seconds: f64,
) -> Summary {
    Summary {
        held_out_accuracy_start: start,
        held_out_accuracy_end: acc,
        seconds,
        extra: vec![
            ("held_out_score_start".into(), start_score),
            ("held_out_score_end".into(), score),
            ("held_out_sampled_accuracy_start".into(), start_sampled),
            ("held_out_sampled_accuracy_end".into(), sampled),
        ],
    }
}

/// The columns of DPO's `progress.csv`, one row per evaluation (row 0: before training).
const DPO_COLUMNS: [&str; 9] = [
    "step",
    "loss",
    "batch_reward_accuracy",
    "batch_margin",
    "held_out_accuracy",
    "held_out_sampled_accuracy",
    "held_out_reward_accuracy",
    "kl_to_reference",
    "seconds",
];

/// Runs DPO into `dir` from the SFT policy (also π_ref) on the preference pairs of `lm rm`
/// (`--pairs RM_RUN`: that run's very pairs); `resume` continues from a checkpoint. Each
/// evaluation row has the held-out greedy and sampled accuracy, the implicit-reward accuracy on
/// the held-out pairs and KL(π_θ ‖ π_ref) per response on one sampled response per held-out
/// prompt.
///
/// # Errors
/// `Config` for a bad setting; `Checkpoint` when `sft` is not an SFT policy or for a damaged
/// checkpoint; I/O, tensor errors.
pub fn run_dpo(
    args: &DpoArgs,
    weights: &mut Weights,
    dir: &Path,
    resume: Option<&LmCheckpoint>,
    mut progress: impl FnMut(&Progress) -> bool,
) -> Result<Summary> {
    args.validate(weights)?;
    let policy = weights.model(&args.sft, &["sft"])?;
    let reference = weights.model(&args.sft, &["sft"])?;
    write_config(dir, &serde_json::json!({"command": "dpo", "args": args, "spec": policy.spec()}))?;
    let t0 = std::time::Instant::now();
    let (_, held) = split();
    let (train_pairs, held_pairs, _) =
        preference_data(args.labeller, &reference, args.samples_per_prompt, args.pairs_per_prompt, args.pair_seed)?;
    let mut opt = adam_for(&policy, args.learning_rate);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(args.seed);
    let mut eval_rng = rand_chacha::ChaCha8Rng::seed_from_u64(args.seed ^ 0x5eed);
    let (mut logs, before) = Logs::open(dir, &DPO_COLUMNS, resume.map(|c| c.step))?;
    let seconds = || before + t0.elapsed().as_secs_f64();
    let ckpt = Checkpoints { dir, eval_every: args.eval_every, steps: args.steps, inputs: fingerprint(&[&reference])? };
    let start = accuracy(&policy, &held)?;
    // [greedy accuracy, sampled accuracy, reward accuracy, KL], as of the last evaluation.
    let mut held_out: [f64; 4];
    let evaluate = |rng: &mut rand_chacha::ChaCha8Rng| -> Result<[f64; 4]> {
        let (kl, sampled) = kl_to_reference(&policy, &reference, &held, rng)?;
        Ok([accuracy(&policy, &held)?, sampled, reward_accuracy(&policy, &reference, &held_pairs, args.beta)?, kl])
    };
    let start_sampled: f64;
    match resume {
        Some(ck) => {
            ckpt.check_resume(ck)?;
            ck.restore_model("policy", &policy)?;
            ck.restore_optimizer("opt", &mut opt)?;
            (rng, eval_rng, held_out) = (ck.get("rng")?, ck.get("eval_rng")?, ck.get("held_out")?);
            start_sampled = ck.get("start_sampled")?;
        }
        None => {
            held_out = evaluate(&mut eval_rng)?;
            start_sampled = held_out[1];
            let nan = f64::NAN;
            logs.write(&[0.0, nan, nan, nan, held_out[0], held_out[1], held_out[2], held_out[3], 0.0])?;
        }
    }
    for step in resume.map_or(1, |c| c.step + 1)..=args.steps {
        let s = dpo_step(&policy, &reference, &mut opt, &train_pairs, args.batch_size, args.beta, &mut rng)?;
        if step % args.eval_every == 0 || step == args.steps {
            held_out = evaluate(&mut eval_rng)?;
            let [acc, sampled, rew, kl] = held_out;
            logs.write(&[step as f64, s.loss, s.reward_accuracy, s.margin, acc, sampled, rew, kl, seconds()])?;
        }
        let message = format!("loss {:.3} | held-out acc {:.3} | kl {:.3}", s.loss, held_out[0], held_out[3]);
        let go_on = progress(&Progress { step, message });
        let state = || serde_json::json!({"rng": rng, "eval_rng": eval_rng, "held_out": held_out, "start_sampled": start_sampled});
        ckpt.after_step(step, go_on, &[("policy", &policy)], &[("opt", &opt)], state)?;
    }
    save_model(&dir.join("model.safetensors"), &policy, "dpo")?;
    let [acc, sampled, rew, kl] = held_out;
    Ok(Summary {
        held_out_accuracy_start: start,
        held_out_accuracy_end: acc,
        seconds: seconds(),
        extra: vec![
            ("train_pairs".into(), train_pairs.len() as f64),
            ("held_out_sampled_accuracy_start".into(), start_sampled),
            ("held_out_sampled_accuracy_end".into(), sampled),
            ("held_out_reward_accuracy".into(), rew),
            ("kl_to_reference".into(), kl),
        ],
    })
}

/// A greedy answer to one prompt.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Answer {
    /// The prompt, e.g. `47+85=`.
    pub prompt: String,
    /// The answer read the usual way (most significant digit first), e.g. `132`.
    pub answer: String,
    /// The generated tokens as the model writes them (reversed digits, `$` = EOS), e.g. `231$`.
    pub raw: String,
    /// Exact match.
    pub correct: bool,
}

/// KL(π ‖ π_ref) per response and the sampled accuracy of the policy in `path` against the SFT
/// policy in `reference`, on one sampled response per held-out prompt (seed `seed`): the one
/// measure of every method's distance from its start ([`kl_to_reference`]).
///
/// # Errors
/// `Checkpoint` for a file that is not a policy or a reference that is not an SFT policy.
pub fn eval_against_reference(path: &Path, reference: &Path, seed: u64) -> Result<(f64, f64)> {
    let model = load_policy(path)?;
    let (reference, _) = load_model(reference, &["sft"])?;
    let (_, held) = split();
    kl_to_reference(&model, &reference, &held, &mut rand_chacha::ChaCha8Rng::seed_from_u64(seed))
}

/// The policy `lm eval` reads at `path`: a weights file or a run directory's `model.safetensors`
/// (of an sft, grpo, ppo or dpo run), or the policy in a checkpoint file of such a run
/// (`checkpoints/step_<n>.safetensors`).
///
/// # Errors
/// As [`load_model`]; `Checkpoint` for a checkpoint that holds no policy (a reward model's).
pub fn load_policy(path: &Path) -> Result<TinyLm> {
    let file = crate::weights::model_file(path);
    if !(file.is_file() && crate::resume::is_checkpoint_file(&file)) {
        return Ok(load_model(path, &["sft", "grpo", "ppo", "dpo"])?.0);
    }
    let ck = crate::resume::read_checkpoint(&file)?;
    if !ck.holds("policy") {
        return Err(ProximaError::Checkpoint(format!(
            "{}: a checkpoint without a policy (a reward model's, of `lm rm`?); `lm eval` evaluates the policies of sft, grpo, ppo and dpo runs",
            file.display()
        )));
    }
    let model = TinyLm::new(default_spec(), 0, &Device::Cpu)?;
    ck.restore_model("policy", &model)?;
    Ok(model)
}

/// `proxima lm eval`: greedy exact-match accuracy on the held-out prompts, and greedy answers
/// to `prompts` (text like `12+34=`).
///
/// # Errors
/// `Checkpoint` for a file that is not a policy; `InvalidArgument` for a malformed prompt.
pub fn eval(path: &Path, prompts: &[String]) -> Result<(f64, Vec<Answer>)> {
    use crate::task::{detokenize, parse_prompt};
    let problems = prompts.iter().map(|p| parse_prompt(p)).collect::<Result<Vec<_>>>()?;
    let model = load_policy(path)?;
    let (_, held) = split();
    let acc = accuracy(&model, &held)?;
    let mut answers = Vec::new();
    if !problems.is_empty() {
        let s = crate::sampling::generate(&model, &problems, true, &mut rand::rng())?;
        for (i, p) in problems.iter().enumerate() {
            let r = s.response(i);
            // The answer is written least-significant digit first; show it the usual way too.
            let digits: String = detokenize(&r).trim_end_matches('$').chars().rev().collect();
            answers.push(Answer {
                prompt: detokenize(&p.prompt()),
                answer: digits,
                raw: detokenize(&r),
                correct: p.reward(&r) > 0.0,
            });
        }
    }
    Ok((acc, answers))
}
