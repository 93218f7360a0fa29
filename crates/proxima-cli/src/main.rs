//! `proxima`: train and evaluate agents from the command line.
//!
//! ```text
//! proxima train ENV_ID [--preset NAME] [--config FILE.toml] [--set key=value ...] [--algo A]
//!               [--seed N] [--total-timesteps N] [--run-dir DIR]     # or: train --resume RUN_DIR
//! proxima eval RUN_DIR_OR_CHECKPOINT [--episodes N] [--deterministic] [--json] [--render FILE]
//! proxima ablation [--envs …] [--variants …] [--seeds …] --out DIR   # the paper's comparison
//! proxima lm sft|rm|grpo|ppo|dpo|resume|eval …                       # language models (proxima-lm)
//! proxima lm grpo --model DIR --dataset F.jsonl --reward MOD:FUNC    # GRPO on a Hugging Face model
//! proxima envs                                                       # native envs and presets
//! proxima bench-env ENV_ID [--steps N]                               # an env's own steps/s
//! ```
//!
//! Every error prints one `error: …` line naming what is wrong and exits with status 1
//! (usage errors: status 2, from clap).

mod commands;
mod distributed;
mod experiments;
mod plot;
mod rundirs;
mod signals;

use anyhow::Result;
use clap::{Parser, Subcommand};
use commands::{
    ablation::AblationArgs, bench_env::BenchEnvArgs, eval::EvalArgs, export::ExportArgs, lm, train::TrainArgs,
};
use proxima::config::PRESETS;
use proxima::env::NATIVE_ENV_IDS;
use rundirs::claim_run_dir;
use std::process::ExitCode;

/// mimalloc instead of the system allocator: it keeps freed memory for reuse, where glibc's
/// returns every large block to the OS and takes page faults to get it back — a third of the
/// CNN's update time at Atari sizes (each minibatch allocates its im2col matrices anew).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(name = "proxima", version, about = "Proximal Policy Optimization, fast and trustworthy, in Rust")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Train an agent (PPO by default; A2C, A3C, TRPO, REINFORCE, PPG, SAC, TD3, DDPG, TQC with --algo) on an environment.
    Train(TrainArgs),
    /// Evaluate a trained policy: mean and std of the episodic return.
    Eval(EvalArgs),
    /// Write a trained policy as an ONNX model of predict(deterministic=True), normalisation included.
    Export(ExportArgs),
    /// The PPO paper's comparison of objectives (and baselines), reproduced: runs every
    /// variant × env × seed in parallel, then writes results.csv, results.md (normalised
    /// scores: random policy 0, best setting 1) and one learning-curve PNG per env.
    Ablation(AblationArgs),
    /// PPO for language models on two-digit addition: sft, rm (reward model), grpo, ppo
    /// (RLHF-PPO), dpo, resume (an interrupted run), eval; and `lm grpo --model DIR --dataset
    /// FILE.jsonl --reward MODULE:FUNCTION`, GRPO on a Hugging Face model.
    Lm {
        #[command(subcommand)]
        command: lm::LmCommand,
    },
    /// List the native environments and the presets.
    Envs,
    /// Step an environment with uniformly random actions and report steps per second (the env's
    /// own cost, no policy): for comparing native, bridged and plain-Python stepping.
    BenchEnv(BenchEnvArgs),
}

fn main() -> ExitCode {
    #[cfg(feature = "gym")]
    if let Some(code) = serve_as_atari_worker() {
        return code;
    }
    signals::install(); // before anything starts Python (see its doc)
    quiet_on_closed_stdout();
    #[cfg(feature = "gym")]
    {
        proxima_gym::register();
        // `vector_env = "subproc"` for `atari:` ids starts this program as its workers.
        if let Ok(me) = std::env::current_exe() {
            proxima_gym::set_worker_program(me);
        }
    }
    // The library's warnings (and, with RUST_LOG=info, its notes) on stderr.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        .with_target(false)
        .without_time()
        .init();
    let cli = Cli::parse_from(lm::route(std::env::args_os().collect()));
    match dispatch(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => match e.downcast_ref::<signals::Interrupted>() {
            // What was saved and how to continue has been printed already.
            Some(i) => ExitCode::from(i.status()),
            None => {
                eprintln!("error: {e:#}");
                ExitCode::FAILURE
            }
        },
    }
}

/// `proxima __atari-worker CONFIG` (not a command for users: how `vector_env = "subproc"` starts
/// the worker processes of `atari:` envs) serves as one ([`proxima_gym::atari_worker::serve`]);
/// `None` for every other command line.
#[cfg(feature = "gym")]
fn serve_as_atari_worker() -> Option<ExitCode> {
    let mut args = std::env::args();
    let (_, first, config) = (args.next(), args.next()?, args.next());
    if first != proxima_gym::atari_worker::ARG {
        return None;
    }
    proxima_gym::register();
    let code = proxima_gym::atari_worker::serve(&config.unwrap_or_default());
    Some(ExitCode::from(code as u8))
}

/// A closed stdout (`proxima eval DIR | head -1`) ends the process quietly with the shell's code
/// for SIGPIPE (141), as other command-line tools, instead of `println!`'s panic message.
fn quiet_on_closed_stdout() {
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let msg = payload.downcast_ref::<String>().map(String::as_str).or(payload.downcast_ref::<&str>().copied());
        if msg.is_some_and(|m| m.starts_with("failed printing to stdout")) {
            std::process::exit(141);
        }
        default_hook(info)
    }));
}

fn dispatch(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Train(a) => commands::train::exec(a),
        Command::Eval(a) => commands::eval::exec(a),
        Command::Export(a) => commands::export::exec(a),
        Command::Ablation(a) => commands::ablation::exec(a),
        Command::BenchEnv(a) => commands::bench_env::exec(a),
        Command::Lm { command } => lm::dispatch(command, claim_run_dir),
        Command::Envs => {
            println!("native environments: {}", NATIVE_ENV_IDS.join(", "));
            println!("presets: {}", PRESETS.join(", "));
            Ok(())
        }
    }
}
