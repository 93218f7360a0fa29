//! `proxima lm sft|rm|grpo|ppo|eval`: PPO for language models on the addition task (issue 6).

use anyhow::Result;
use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use proxima_lm::ppo::PpoLmConfig;
use proxima_lm::run::{self, GrpoArgs, PpoArgs, Progress, RmArgs, SftArgs, Summary};
use std::path::PathBuf;

/// Options every training subcommand shares.
#[derive(Args)]
pub struct Common {
    /// Random seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Evaluate on the held-out set (and log a row) every this many steps [default: 10; rm: 100].
    #[arg(long)]
    eval_every: Option<usize>,
    /// Run directory (default: runs/lm-addition__<command>__<seed>__<unix time>).
    #[arg(long)]
    run_dir: Option<PathBuf>,
    /// No progress bar.
    #[arg(long, short)]
    quiet: bool,
}

#[derive(Subcommand)]
pub enum LmCommand {
    /// Supervised pre-training on the addition task, stopped early: the starting policy and π_ref.
    Sft {
        /// Optimiser steps.
        #[arg(long, default_value_t = SftArgs::default().steps)]
        steps: usize,
        /// Problems per step.
        #[arg(long, default_value_t = SftArgs::default().batch_size)]
        batch_size: usize,
        /// Adam step size.
        #[arg(long, allow_negative_numbers = true, default_value_t = SftArgs::default().learning_rate)]
        learning_rate: f64,
        /// Probability that a training answer is replaced by a wrong one.
        #[arg(long, allow_negative_numbers = true, default_value_t = 0.0)]
        label_noise: f64,
        #[command(flatten)]
        common: Common,
    },
    /// A Bradley–Terry reward model on scripted preference pairs (correct beats incorrect; then
    /// more digits right in place), initialised from the SFT policy.
    Rm {
        /// The SFT run directory (or its model.safetensors) whose samples are compared.
        #[arg(long)]
        sft: PathBuf,
        /// The SFT run whose weights initialise the reward model (default: --sft's).
        #[arg(long)]
        init: Option<PathBuf>,
        /// The scripted labeller: binary (correct beats incorrect) or graded (also: more digits
        /// right in place beats fewer).
        #[arg(long, default_value = "graded", value_parser = ["binary", "graded"])]
        labeller: String,
        /// Optimiser steps.
        #[arg(long, default_value_t = RmArgs::default().steps)]
        steps: usize,
        /// Pairs per step.
        #[arg(long, default_value_t = RmArgs::default().batch_size)]
        batch_size: usize,
        /// Adam step size at the start (decayed linearly to 0 over the run).
        #[arg(long, allow_negative_numbers = true, default_value_t = RmArgs::default().learning_rate)]
        learning_rate: f64,
        #[command(flatten)]
        common: Common,
    },
    /// GRPO with the verifiable reward (exact match), from the SFT policy, KL (k3) to it.
    Grpo {
        /// The SFT run directory (or its model.safetensors).
        #[arg(long)]
        sft: PathBuf,
        /// GRPO steps.
        #[arg(long, default_value_t = GrpoArgs::default().steps)]
        steps: usize,
        /// Adam step size.
        #[arg(long, allow_negative_numbers = true, default_value_t = GrpoArgs::default().learning_rate)]
        learning_rate: f64,
        /// Prompts per step.
        #[arg(long, default_value_t = GrpoArgs::default().prompts)]
        prompts: usize,
        /// G: samples per prompt.
        #[arg(long, default_value_t = GrpoArgs::default().group_size)]
        group_size: usize,
        /// β of the k3 KL penalty to π_ref.
        #[arg(long, allow_negative_numbers = true, default_value_t = GrpoArgs::default().beta)]
        beta: f64,
        /// ε_low of the ratio clip.
        #[arg(long, allow_negative_numbers = true, default_value_t = GrpoArgs::default().eps_low)]
        eps_low: f64,
        /// ε_high of the ratio clip (set it above --eps-low for DAPO's clip-higher, e.g. 0.28).
        #[arg(long, allow_negative_numbers = true, default_value_t = GrpoArgs::default().eps_high)]
        eps_high: f64,
        /// μ: optimiser passes per sampled batch.
        #[arg(long, default_value_t = GrpoArgs::default().inner_iters)]
        inner_iters: usize,
        /// Dr. GRPO: advantages are r − mean, not divided by the group std.
        #[arg(long)]
        no_scale_advantages: bool,
        /// seq-mean-token-mean (GRPO), token-mean (DAPO) or constant-length (Dr. GRPO).
        #[arg(long, default_value = "seq-mean-token-mean")]
        aggregation: String,
        /// Skip groups whose rewards are all equal.
        #[arg(long)]
        drop_flat_groups: bool,
        /// Control: shuffle the rewards across samples (GRPO should then not improve).
        #[arg(long)]
        shuffle_rewards: bool,
        /// Sequences per forward/backward pass (gradient accumulation).
        #[arg(long)]
        micro_batch: Option<usize>,
        #[command(flatten)]
        common: Common,
    },
    /// RLHF-PPO: per-token critic, GAE over tokens, the reward model's score on the last token,
    /// a per-token KL penalty (k1) to π_ref.
    Ppo {
        /// The SFT run directory: the starting policy and π_ref.
        #[arg(long)]
        sft: PathBuf,
        /// The reward-model run directory: the reward and the critic's initialisation.
        #[arg(long, required_unless_present = "verifiable_reward")]
        rm: Option<PathBuf>,
        /// Control: optimise the task's exact-match reward instead of a reward model (the
        /// critic then starts from the SFT weights).
        #[arg(long, conflicts_with = "rm")]
        verifiable_reward: bool,
        /// PPO steps.
        #[arg(long, default_value_t = PpoArgs::default().steps)]
        steps: usize,
        /// Adam step size of the policy.
        #[arg(long, allow_negative_numbers = true, default_value_t = PpoArgs::default().learning_rate)]
        learning_rate: f64,
        /// Adam step size of the critic.
        #[arg(long, allow_negative_numbers = true, default_value_t = PpoArgs::default().critic_learning_rate)]
        critic_learning_rate: f64,
        /// Responses sampled per step.
        #[arg(long, default_value_t = PpoLmConfig::default().prompts)]
        prompts: usize,
        /// K epochs per step.
        #[arg(long, default_value_t = PpoLmConfig::default().n_epochs)]
        n_epochs: usize,
        /// Sequences per minibatch.
        #[arg(long, default_value_t = PpoLmConfig::default().batch_size)]
        batch_size: usize,
        /// Sequences per forward/backward pass (gradient accumulation).
        #[arg(long)]
        micro_batch: Option<usize>,
        /// ε of the ratio clip.
        #[arg(long, allow_negative_numbers = true, default_value_t = PpoLmConfig::default().clip_range)]
        clip_range: f64,
        /// Clip of the value change (`none` = unclipped).
        #[arg(long, default_value = "0.2")]
        clip_range_vf: String,
        /// γ over tokens.
        #[arg(long, allow_negative_numbers = true, default_value_t = PpoLmConfig::default().gamma)]
        gamma: f64,
        /// λ of GAE over tokens.
        #[arg(long, allow_negative_numbers = true, default_value_t = PpoLmConfig::default().gae_lambda)]
        gae_lambda: f64,
        /// β of the per-token KL penalty (initial value with --kl-target).
        #[arg(long, allow_negative_numbers = true, default_value_t = PpoArgs::default().kl_coef)]
        kl_coef: f64,
        /// Target KL per response: adapt β with Ziegler et al.'s controller.
        #[arg(long, allow_negative_numbers = true)]
        kl_target: Option<f64>,
        /// Critic warm-up: steps at the start that update only the critic.
        #[arg(long, default_value_t = PpoArgs::default().freezing_actor_steps)]
        freezing_actor_steps: usize,
        #[command(flatten)]
        common: Common,
    },
    /// Greedy exact-match accuracy on the 1000 held-out prompts; answers to --prompt.
    Eval {
        /// A run directory (its model.safetensors) or a weights file.
        path: PathBuf,
        /// A prompt to answer, like 47+85= (repeatable).
        #[arg(long)]
        prompt: Vec<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

fn bar(total: usize, quiet: bool) -> ProgressBar {
    let b = if quiet {
        ProgressBar::hidden()
    } else {
        ProgressBar::with_draw_target(Some(total as u64), ProgressDrawTarget::stderr())
    };
    b.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {wide_bar} {pos}/{len} steps | {msg}")
            .expect("valid template"),
    );
    b
}

fn report(cmd: &str, dir: &std::path::Path, s: &Summary) {
    if cmd != "rm" {
        println!(
            "lm {cmd}: held-out greedy accuracy {:.3} -> {:.3} in {:.1} s",
            s.held_out_accuracy_start, s.held_out_accuracy_end, s.seconds
        );
    } else {
        println!("lm rm: trained in {:.1} s", s.seconds);
    }
    for (k, v) in &s.extra {
        println!("  {k}: {v:.4}");
    }
    println!("run directory: {}", dir.display());
}

pub fn dispatch(cmd: LmCommand, claim: impl Fn(Option<PathBuf>, &str) -> Result<PathBuf>) -> Result<()> {
    crate::set_threads(1);
    let run_it = |name: &str,
                  common: &Common,
                  steps: usize,
                  f: &dyn Fn(&std::path::Path, &mut dyn FnMut(&Progress)) -> proxima::Result<Summary>|
     -> Result<()> {
        if let Some(d) = &common.run_dir {
            if d.is_dir() && std::fs::read_dir(d).map(|mut e| e.next().is_some()).unwrap_or(false) {
                anyhow::bail!("--run-dir {} already holds files; choose an empty or new directory", d.display());
            }
        }
        let dir = claim(common.run_dir.clone(), &format!("lm-addition__{name}__{}", common.seed))?;
        let b = bar(steps, common.quiet);
        let s = f(&dir, &mut |p: &Progress| {
            b.set_position(p.step as u64);
            b.set_message(p.message.clone());
        });
        b.finish_and_clear();
        let s = s?;
        report(name, &dir, &s);
        Ok(())
    };
    match cmd {
        LmCommand::Sft { steps, batch_size, learning_rate, label_noise, common } => {
            let d = SftArgs::default();
            let a = SftArgs {
                steps,
                batch_size,
                learning_rate,
                label_noise,
                seed: common.seed,
                eval_every: common.eval_every.unwrap_or(d.eval_every),
            };
            a.validate()?;
            run_it("sft", &common, steps, &|dir, p| run::run_sft(&a, dir, p))
        }
        LmCommand::Rm { sft, init, labeller, steps, batch_size, learning_rate, common } => {
            let d = RmArgs::default();
            let a = RmArgs {
                sft,
                init,
                labeller: if labeller == "graded" {
                    proxima_lm::reward::Labeller::Graded
                } else {
                    proxima_lm::reward::Labeller::Binary
                },
                steps,
                batch_size,
                learning_rate,
                seed: common.seed,
                eval_every: common.eval_every.unwrap_or(d.eval_every),
                ..d
            };
            a.validate()?; // fail before creating a run directory
            run_it("rm", &common, steps, &|dir, p| run::run_rm(&a, dir, p))
        }
        LmCommand::Grpo {
            sft,
            steps,
            learning_rate,
            prompts,
            group_size,
            beta,
            eps_low,
            eps_high,
            inner_iters,
            no_scale_advantages,
            aggregation,
            drop_flat_groups,
            shuffle_rewards,
            micro_batch,
            common,
        } => {
            let d = GrpoArgs::default();
            let a = GrpoArgs {
                sft,
                steps,
                learning_rate,
                prompts,
                group_size,
                beta,
                eps_low,
                eps_high,
                inner_iters,
                scale_advantages: !no_scale_advantages,
                aggregation,
                drop_flat_groups,
                shuffle_rewards,
                micro_batch,
                seed: common.seed,
                eval_every: common.eval_every.unwrap_or(d.eval_every),
            };
            a.validate()?;
            let name = if shuffle_rewards { "grpo-shuffled" } else { "grpo" };
            run_it(name, &common, steps, &|dir, p| run::run_grpo(&a, dir, p))
        }
        LmCommand::Ppo {
            sft,
            rm,
            steps,
            learning_rate,
            critic_learning_rate,
            prompts,
            n_epochs,
            batch_size,
            micro_batch,
            clip_range,
            clip_range_vf,
            gamma,
            gae_lambda,
            kl_coef,
            kl_target,
            freezing_actor_steps,
            verifiable_reward: _,
            common,
        } => {
            let d = PpoArgs::default();
            let clip_range_vf = match clip_range_vf.as_str() {
                "none" => None,
                s => Some(
                    s.parse::<f64>().map_err(|_| anyhow::anyhow!("--clip-range-vf `{s}` is not a number or `none`"))?,
                ),
            };
            let a = PpoArgs {
                sft,
                rm,
                steps,
                learning_rate,
                critic_learning_rate,
                ppo: PpoLmConfig {
                    prompts,
                    n_epochs,
                    batch_size,
                    micro_batch,
                    clip_range,
                    clip_range_vf,
                    gamma,
                    gae_lambda,
                    ..PpoLmConfig::default()
                },
                kl_coef,
                kl_target,
                freezing_actor_steps,
                seed: common.seed,
                eval_every: common.eval_every.unwrap_or(d.eval_every),
                ..d
            };
            a.validate()?;
            let name = if a.rm.is_some() { "ppo" } else { "ppo-verifiable" };
            run_it(name, &common, steps, &|dir, p| run::run_ppo(&a, dir, p))
        }
        LmCommand::Eval { path, prompt, json } => {
            let (acc, answers) = run::eval(&path, &prompt)?;
            if json {
                println!(
                    "{}",
                    serde_json::json!({"held_out_accuracy": acc, "held_out_prompts": 1000, "answers": answers})
                );
            } else {
                println!("held-out greedy exact-match accuracy: {acc:.3} (1000 prompts)");
                for a in answers {
                    let verdict = if a.correct { "correct" } else { "wrong" };
                    println!("{} {} ({verdict}; generated {}, digits reversed, $ = end)", a.prompt, a.answer, a.raw);
                }
            }
            Ok(())
        }
    }
}
