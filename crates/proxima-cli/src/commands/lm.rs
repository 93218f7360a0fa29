//! `proxima lm sft|rm|grpo|ppo|dpo|resume|eval`: PPO, GRPO and DPO for language models on the
//! addition task; `lm grpo --model DIR` is GRPO on a Hugging Face model ([`super::lm_hf`]).
//! Every flag of a training command is a field of its settings struct in `proxima_lm::args`
//! (`#[command(flatten)]`), so the two cannot drift apart.

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use proxima_lm::resume::{latest_checkpoint, LmCheckpoint};
use proxima_lm::run::{self, DpoArgs, GrpoArgs, PpoArgs, Progress, RmArgs, SftArgs, Summary, Weights};
use std::path::{Path, PathBuf};

/// A training command's body: it runs into a directory, calling its progress hook after every
/// step (`false` from the hook: save and stop).
type CommandFn<'a> = dyn FnMut(&Path, &mut dyn FnMut(&Progress) -> bool) -> proxima::Result<Summary> + 'a;

/// Options every training subcommand shares besides its settings.
#[derive(Args)]
pub struct Common {
    /// Run directory (default: a new one under runs/, named after the command, seed and time).
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
    /// GRPO with the verifiable reward (exact match), from the SFT policy, KL (k3) to it. With
    /// --model DIR instead: GRPO on a Hugging Face model (`proxima lm grpo --model DIR --help`).
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
    /// DPO (Rafailov et al. 2023): the policy trained directly on the reward model's preference
    /// pairs (--pairs RM_RUN), no reward model or RL step; π_ref = the SFT policy.
    Dpo {
        #[command(flatten)]
        args: DpoArgs,
        #[command(flatten)]
        common: Common,
    },
    /// GRPO on a Hugging Face model with reward functions written in Python (`lm grpo --model`
    /// is routed here), resumable with `proxima lm resume RUN_DIR`.
    #[command(
        name = "grpo-hf",
        hide = true,
        override_usage = "proxima lm grpo --model DIR --dataset FILE.jsonl --reward MODULE:FUNCTION [OPTIONS]"
    )]
    GrpoHf {
        #[command(flatten)]
        flags: super::lm_hf::HfGrpoFlags,
        #[command(flatten)]
        common: Common,
    },
    /// Continue an interrupted sft, rm, grpo, ppo or dpo run from its latest checkpoint (written
    /// with every evaluation row): the command and its settings are its config.json's, and the
    /// run ends as the uninterrupted one would.
    Resume {
        /// The run directory.
        run_dir: PathBuf,
        /// No progress bar.
        #[arg(long, short)]
        quiet: bool,
    },
    /// Greedy exact-match accuracy on the 1000 held-out prompts; answers to --prompt.
    Eval {
        /// A run directory (its model.safetensors; an unfinished run's latest checkpoint), a
        /// weights file or a checkpoint file (checkpoints/step_N.safetensors).
        path: PathBuf,
        /// A prompt to answer, like 47+85= (repeatable).
        #[arg(long)]
        prompt: Vec<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// Also measure, on one sampled response per held-out prompt, the sampled accuracy and
        /// KL(π ‖ π_ref) per response against this reference policy (an SFT run).
        #[arg(long, value_name = "SFT_RUN")]
        reference: Option<PathBuf>,
        /// Seed of those samples.
        #[arg(long, default_value_t = 0, requires = "reference")]
        seed: u64,
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
    f: &mut CommandFn<'_>,
) -> Result<()> {
    check_run_dir(common)?;
    let dir = claim(common.run_dir.clone(), &format!("lm-addition__{name}__{seed}"))?;
    with_bar(name, &dir, steps, common.quiet, f)
}

/// Refuses a `--run-dir` that holds a reinforcement-learning run or any files.
fn check_run_dir(common: &Common) -> Result<()> {
    if let Some(d) = &common.run_dir {
        if d.is_dir() && crate::rundirs::is_rl_run(d) {
            anyhow::bail!(
                "--run-dir {} holds a reinforcement-learning run (`proxima train`), not a language-model one; choose an empty or new directory",
                d.display()
            );
        }
        if d.is_dir() && std::fs::read_dir(d).map(|mut e| e.next().is_some()).unwrap_or(false) {
            anyhow::bail!(
                "--run-dir {} already holds files; continue that run with `proxima lm resume {}`, or choose an empty or new directory",
                d.display(),
                d.display()
            );
        }
    }
    Ok(())
}

/// Runs `f` into `dir` with a progress bar, then reports. A first SIGINT/SIGTERM stops the run
/// at the next evaluation row, whose checkpoint it has just written.
fn with_bar(name: &str, dir: &Path, steps: usize, quiet: bool, f: &mut CommandFn<'_>) -> Result<()> {
    crate::signals::training_started();
    let b = bar(steps, quiet);
    let s = f(dir, &mut |p: &Progress| {
        b.set_position(p.step as u64);
        b.set_message(p.message.clone());
        !crate::signals::stop_requested()
    });
    b.finish_and_clear();
    match s {
        Err(e @ proxima::ProximaError::Stopped(_)) => {
            let signal = crate::signals::received().unwrap_or(signal_hook::consts::SIGINT);
            eprintln!("{}: {e}\ncontinue with: proxima lm resume {}", crate::signals::name(signal), dir.display());
            Err(crate::signals::Interrupted { signal }.into())
        }
        s => {
            report(name, dir, &s?);
            Ok(())
        }
    }
}

pub fn dispatch(cmd: LmCommand, claim: impl Fn(Option<PathBuf>, &str) -> Result<PathBuf>) -> Result<()> {
    crate::experiments::pool::set_threads(1);
    let mut weights = Weights::default();
    match cmd {
        LmCommand::Sft { args, common } => {
            args.validate()?;
            run_command("sft", args.seed, args.steps, &common, &claim, &mut |dir, p| run::run_sft(&args, dir, None, p))
        }
        LmCommand::Rm { mut args, common } => {
            absolute(&mut args.sft);
            args.init.iter_mut().for_each(absolute);
            args.validate(&mut weights)?; // fail before creating a run directory
            run_command("rm", args.seed, args.steps, &common, &claim, &mut |dir, p| {
                run::run_rm(&args, &mut weights, dir, None, p)
            })
        }
        LmCommand::Grpo { mut args, common } => {
            absolute(&mut args.sft);
            args.validate(&mut weights)?;
            let name = if args.shuffle_rewards { "grpo-shuffled" } else { "grpo" };
            run_command(name, args.seed, args.steps, &common, &claim, &mut |dir, p| {
                run::run_grpo(&args, &mut weights, dir, None, p)
            })
        }
        LmCommand::Ppo { args, common } => {
            let mut args = args.with_cli_flags()?;
            absolute(&mut args.sft);
            args.rm.iter_mut().for_each(absolute);
            args.validate(&mut weights)?;
            let name = if args.rm.is_some() { "ppo" } else { "ppo-verifiable" };
            run_command(name, args.seed, args.steps, &common, &claim, &mut |dir, p| {
                run::run_ppo(&args, &mut weights, dir, None, p)
            })
        }
        LmCommand::Dpo { mut args, common } => {
            absolute(&mut args.sft);
            args.pairs.iter_mut().for_each(absolute);
            let args = args.with_pairs_run()?;
            args.validate(&mut weights)?;
            run_command("dpo", args.seed, args.steps, &common, &claim, &mut |dir, p| {
                run::run_dpo(&args, &mut weights, dir, None, p)
            })
        }
        LmCommand::GrpoHf { flags, common } => {
            check_run_dir(&common)?;
            super::lm_hf::exec(flags, common.run_dir, common.quiet, &claim)
        }
        LmCommand::Resume { run_dir, quiet } => resume(&run_dir, quiet, &mut weights),
        LmCommand::Eval { path, prompt, json, reference, seed } => {
            eval(&path, &prompt, json, reference.as_deref(), seed)
        }
    }
}

/// The absolute form of an input run's path, so that the run's `config.json` names it from
/// anywhere (`lm resume` from another directory); a path that does not exist is left as given
/// (its command then reports it).
fn absolute(path: &mut PathBuf) {
    if let Ok(p) = path.canonicalize() {
        *path = p;
    }
}

/// `proxima lm resume RUN_DIR`: the command of the run's config.json, from its latest checkpoint.
fn resume(dir: &Path, quiet: bool, weights: &mut Weights) -> Result<()> {
    if crate::rundirs::is_rl_run(dir) {
        anyhow::bail!(
            "{}: a reinforcement-learning run directory (`proxima train`), not a language-model one; continue it with `proxima train --resume {}`",
            dir.display(),
            dir.display()
        );
    }
    let path = dir.join("config.json");
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("{}: not an lm run directory", path.display()))?;
    let cfg: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("{}: malformed", path.display()))?;
    let command = cfg["command"].as_str().unwrap_or_default().to_string();
    if command == super::lm_hf::COMMAND {
        return super::lm_hf::resume(dir, cfg, quiet);
    }
    let args = cfg["args"].clone();
    let parse = |what: &str| anyhow::anyhow!("{}: malformed `args` of lm {what}", path.display());
    if !["sft", "rm", "grpo", "ppo", "dpo"].contains(&command.as_str()) {
        anyhow::bail!("{}: `command` is `{command}`; only sft, rm, grpo, ppo and dpo runs resume", path.display());
    }
    if model_is_written(dir, &command) {
        anyhow::bail!("{} is complete (its model.safetensors is written)", dir.display());
    }
    let ck = latest_checkpoint(dir)?;
    match &ck {
        Some(c) => eprintln!("resuming lm {command} in {} from step {}", dir.display(), c.step),
        None => eprintln!("{} holds no checkpoint yet: restarting lm {command} from its config.json", dir.display()),
    }
    let ck: Option<&LmCheckpoint> = ck.as_ref();
    match command.as_str() {
        "sft" => {
            let a: SftArgs = serde_json::from_value(args).map_err(|_| parse("sft"))?;
            a.validate()?;
            with_bar("sft", dir, a.steps, quiet, &mut |d, p| run::run_sft(&a, d, ck, p))
        }
        "rm" => {
            let a: RmArgs = serde_json::from_value(args).map_err(|_| parse("rm"))?;
            a.validate(weights)?;
            with_bar("rm", dir, a.steps, quiet, &mut |d, p| run::run_rm(&a, weights, d, ck, p))
        }
        "grpo" => {
            let a: GrpoArgs = serde_json::from_value(args).map_err(|_| parse("grpo"))?;
            a.validate(weights)?;
            with_bar("grpo", dir, a.steps, quiet, &mut |d, p| run::run_grpo(&a, weights, d, ck, p))
        }
        "ppo" => {
            let a: PpoArgs = serde_json::from_value(args).map_err(|_| parse("ppo"))?;
            a.validate(weights)?;
            with_bar("ppo", dir, a.steps, quiet, &mut |d, p| run::run_ppo(&a, weights, d, ck, p))
        }
        "dpo" => {
            let a: DpoArgs = serde_json::from_value(args).map_err(|_| parse("dpo"))?;
            a.validate(weights)?;
            with_bar("dpo", dir, a.steps, quiet, &mut |d, p| run::run_dpo(&a, weights, d, ck, p))
        }
        other => {
            anyhow::bail!("{}: `command` is `{other}`; only sft, rm, grpo, ppo and dpo runs resume", path.display())
        }
    }
}

/// Whether a run's final weights are written (a finished run: nothing to resume).
fn model_is_written(dir: &Path, command: &str) -> bool {
    let last = if command == "ppo" { "critic.safetensors" } else { "model.safetensors" };
    dir.join(last).is_file()
}

/// `proxima lm eval`: held-out accuracy and the answers to `prompts`; with `reference`, also the
/// sampled accuracy and the KL to it.
fn eval(path: &Path, prompts: &[String], json: bool, reference: Option<&Path>, seed: u64) -> Result<()> {
    let path = &eval_target(path)?;
    let (acc, answers) = run::eval(path, prompts)?;
    let against = reference.map(|r| run::eval_against_reference(path, r, seed)).transpose()?;
    if json {
        let mut v = serde_json::json!({"held_out_accuracy": acc, "held_out_prompts": 1000, "answers": answers});
        if let Some((kl, sampled)) = against {
            v["held_out_sampled_accuracy"] = sampled.into();
            v["kl_to_reference"] = kl.into();
        }
        println!("{v}");
    } else {
        println!("held-out greedy exact-match accuracy: {acc:.3} (1000 prompts)");
        if let Some((kl, sampled)) = against {
            println!("held-out sampled accuracy: {sampled:.3}; KL to the reference: {kl:.4} nats per response");
        }
        for a in answers {
            let verdict = if a.correct { "correct" } else { "wrong" };
            println!("{} {} ({verdict}; generated {}, digits reversed, $ = end)", a.prompt, a.answer, a.raw);
        }
    }
    Ok(())
}

/// What `lm eval PATH` reads: PATH itself (a weights or checkpoint file, or a run directory with
/// its model.safetensors), or the latest checkpoint of an unfinished run (with a note). A
/// reinforcement-learning run directory is refused, naming `proxima eval`.
fn eval_target(path: &Path) -> Result<PathBuf> {
    let shown = path.display();
    if path.is_dir() && crate::rundirs::is_rl_run(path) {
        anyhow::bail!(
            "{shown}: a reinforcement-learning run directory (`proxima train`), not a language-model one; evaluate it with `proxima eval {shown}`"
        );
    }
    // The run directory itself, or one of its checkpoint files.
    let run = if path.is_dir() { Some(path) } else { path.parent().and_then(Path::parent) };
    if let Some(run) = run.filter(|r| crate::rundirs::is_hf_lm_run(r)) {
        anyhow::bail!("{}; `proxima lm eval` scores the addition task's models", crate::rundirs::hf_run_note(run));
    }
    if !path.is_dir() || path.join("model.safetensors").is_file() {
        return Ok(path.to_path_buf());
    }
    if !crate::rundirs::is_lm_run(path) {
        anyhow::bail!("{shown}: holds no model.safetensors, and no config.json of a `proxima lm` run");
    }
    match proxima_lm::resume::latest_checkpoint_file(path) {
        Some(file) => {
            eprintln!(
                "note: {shown} has no model.safetensors yet (an unfinished run; `proxima lm resume {shown}` finishes it): evaluating its latest checkpoint, {}",
                file.display()
            );
            Ok(file)
        }
        None => anyhow::bail!(
            "{shown}: holds no model yet (the run stopped before its first checkpoint); continue it with `proxima lm resume {shown}`"
        ),
    }
}

/// The command line with `lm grpo … --model …` routed to the Hugging Face trainer's (hidden)
/// `lm grpo-hf` subcommand: `proxima lm grpo --model DIR --dataset F --reward M:F` is GRPO on
/// that model, `proxima lm grpo --sft RUN` the addition task's.
pub fn route(args: Vec<std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    let is = |i: usize, s: &str| args.get(i).is_some_and(|a| a == s);
    let has_model = args.iter().any(|a| a == "--model" || a.to_string_lossy().starts_with("--model="));
    if is(1, "lm") && is(2, "grpo") && has_model {
        let mut routed = args.clone();
        routed[2] = "grpo-hf".into();
        return routed;
    }
    args
}
