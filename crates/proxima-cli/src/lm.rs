//! `proxima lm sft|rm|grpo|ppo|eval`: PPO for language models on the addition task (issue 6).
//! Every flag of a training command is a field of its settings struct in `proxima_lm::args`
//! (`#[command(flatten)]`), so the two cannot drift apart.

use anyhow::Result;
use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use proxima_lm::run::{self, GrpoArgs, PpoArgs, Progress, RmArgs, SftArgs, Summary, Weights};
use std::path::PathBuf;

/// Options every training subcommand shares besides its settings.
#[derive(Args)]
pub struct Common {
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
        #[command(flatten)]
        args: SftArgs,
        #[command(flatten)]
        common: Common,
    },
    /// A Bradley–Terry reward model on scripted preference pairs (correct beats incorrect; then
    /// more digits right in place), initialised from the SFT policy.
    Rm {
        #[command(flatten)]
        args: RmArgs,
        #[command(flatten)]
        common: Common,
    },
    /// GRPO with the verifiable reward (exact match), from the SFT policy, KL (k3) to it.
    Grpo {
        #[command(flatten)]
        args: GrpoArgs,
        #[command(flatten)]
        common: Common,
    },
    /// RLHF-PPO: per-token critic, GAE over tokens, the reward model's score on the last token,
    /// a per-token KL penalty (k1) to π_ref.
    Ppo {
        #[command(flatten)]
        args: PpoArgs,
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

/// A training command: refuses a non-empty `--run-dir` and bad settings (`validate`, which
/// reads the weights files) before claiming the run directory, then runs `f` with a progress bar.
fn run_command(
    name: &str,
    seed: u64,
    steps: usize,
    common: &Common,
    claim: &dyn Fn(Option<PathBuf>, &str) -> Result<PathBuf>,
    f: &mut dyn FnMut(&std::path::Path, &mut dyn FnMut(&Progress)) -> proxima::Result<Summary>,
) -> Result<()> {
    if let Some(d) = &common.run_dir {
        if d.is_dir() && std::fs::read_dir(d).map(|mut e| e.next().is_some()).unwrap_or(false) {
            anyhow::bail!("--run-dir {} already holds files; choose an empty or new directory", d.display());
        }
    }
    let dir = claim(common.run_dir.clone(), &format!("lm-addition__{name}__{seed}"))?;
    let b = bar(steps, common.quiet);
    let s = f(&dir, &mut |p: &Progress| {
        b.set_position(p.step as u64);
        b.set_message(p.message.clone());
    });
    b.finish_and_clear();
    let s = s?;
    report(name, &dir, &s);
    Ok(())
}

pub fn dispatch(cmd: LmCommand, claim: impl Fn(Option<PathBuf>, &str) -> Result<PathBuf>) -> Result<()> {
    crate::set_threads(1);
    let mut weights = Weights::default();
    match cmd {
        LmCommand::Sft { args, common } => {
            args.validate()?;
            run_command("sft", args.seed, args.steps, &common, &claim, &mut |dir, p| run::run_sft(&args, dir, p))
        }
        LmCommand::Rm { args, common } => {
            args.validate(&mut weights)?; // fail before creating a run directory
            run_command("rm", args.seed, args.steps, &common, &claim, &mut |dir, p| {
                run::run_rm(&args, &mut weights, dir, p)
            })
        }
        LmCommand::Grpo { args, common } => {
            args.validate(&mut weights)?;
            let name = if args.shuffle_rewards { "grpo-shuffled" } else { "grpo" };
            run_command(name, args.seed, args.steps, &common, &claim, &mut |dir, p| {
                run::run_grpo(&args, &mut weights, dir, p)
            })
        }
        LmCommand::Ppo { args, common } => {
            let args = args.with_cli_flags()?;
            args.validate(&mut weights)?;
            let name = if args.rm.is_some() { "ppo" } else { "ppo-verifiable" };
            run_command(name, args.seed, args.steps, &common, &claim, &mut |dir, p| {
                run::run_ppo(&args, &mut weights, dir, p)
            })
        }
        LmCommand::Eval { path, prompt, json } => eval(&path, &prompt, json),
    }
}

/// `proxima lm eval`: held-out accuracy and the answers to `prompts`.
fn eval(path: &std::path::Path, prompts: &[String], json: bool) -> Result<()> {
    let (acc, answers) = run::eval(path, prompts)?;
    if json {
        println!("{}", serde_json::json!({"held_out_accuracy": acc, "held_out_prompts": 1000, "answers": answers}));
    } else {
        println!("held-out greedy exact-match accuracy: {acc:.3} (1000 prompts)");
        for a in answers {
            let verdict = if a.correct { "correct" } else { "wrong" };
            println!("{} {} ({verdict}; generated {}, digits reversed, $ = end)", a.prompt, a.answer, a.raw);
        }
    }
    Ok(())
}
